//! Runs the ring in-process — no conductor, no ticker — and prints its summary lines and
//! peak RSS (`VmHWM` of /proc/self/status).
//!
//! ```sh
//! cargo run --release -p benchtop-workloads --example ring -- --mode tell
//! cargo run --release -p benchtop-workloads --example ring -- --mode ask
//! # memory per actor: many actors, one lap
//! cargo run --release -p benchtop-workloads --example ring -- --num-nodes 1000000 --num-rounds 1
//! ```

use clap::Parser;

use benchtop_workloads::report::{Metrics, StopSignal};
use benchtop_workloads::ring::{self, RingMetrics, RingMode, RingParams};

/// The ring benchmark, in-process.
#[derive(Parser, Debug)]
struct Args {
    #[command(flatten)]
    params: RingParams,
}

/// A `VmXxx:  1234 kB` field of /proc/self/status, in bytes.
fn status_bytes(field: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .ok_or_else(|| format!("no {field} in /proc/self/status"))?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse()?;
    Ok(kib * 1024)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let params = Args::parse().params;
    let metrics = RingMetrics::register(&mut Metrics::new())?;
    let before = status_bytes("VmRSS")?;
    let outcome = ring::run(&params, &metrics, &StopSignal::new())?;
    for line in ring::summary_lines(&outcome) {
        println!("{line}");
    }
    let peak = status_bytes("VmHWM")?;
    println!("runtime_threads: {}", params.runtime_threads);
    println!("rss_before_run: {:.1} MiB", before as f64 / 1048576.0);
    println!("peak_rss: {:.1} MiB", peak as f64 / 1048576.0);
    if params.mode == RingMode::Tell {
        // Each actor's task and mailbox (and the runtime's run queue); the one message is
        // negligible. Meaningful with many actors.
        println!(
            "bytes_per_actor_above_baseline: {:.1}",
            peak.saturating_sub(before) as f64 / f64::from(params.num_nodes)
        );
    }
    if params.mode == RingMode::Ask {
        // At the deepest point every hop's ask is pending at once.
        let pending = params.total_hops() as f64;
        println!("bytes_per_pending_ask: {:.1}", peak as f64 / pending);
        println!(
            "bytes_per_pending_ask_above_baseline: {:.1}",
            peak.saturating_sub(before) as f64 / pending
        );
    }
    Ok(())
}
