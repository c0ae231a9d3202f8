//! Samples a command for its whole run and prints what the sampler measured: samples
//! per second, batch times, and how long `finish` took after the command exited.
//!
//! ```sh
//! cargo run --release -p benchtop-profilers --example record -- [--pages N] [--user-only] cpu.folded -- <command> [args]
//! ```
//!
//! The command is started through `sh`, held on a pipe until the events are open, then
//! exec'd: its threads and children are all sampled.

use std::io::Write;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use benchtop_profile::Kind;
use benchtop_profilers::{Sampler, SamplerOptions};

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = SamplerOptions::default();
    loop {
        match args.first().map(String::as_str) {
            Some("--pages") if args.len() > 1 => {
                opts.buffer_pages = args[1].parse().ok();
                args.drain(..2);
            }
            Some("--user-only") => {
                opts.kernel_frames = false;
                args.remove(0);
            }
            _ => break,
        }
    }
    let Some(split) = args.iter().position(|a| a == "--") else {
        eprintln!("usage: record [--pages N] [--user-only] <out.folded> -- <command> [args]");
        return ExitCode::from(2);
    };
    let (out, cmd) = (&args[..split], &args[split + 1..]);
    let (Some(out), false) = (out.first(), cmd.is_empty()) else {
        eprintln!("usage: record [--pages N] [--user-only] <out.folded> -- <command> [args]");
        return ExitCode::from(2);
    };
    let mut child = match Command::new("/bin/sh")
        .arg("-c")
        .arg("read _ && exec \"$0\" \"$@\"")
        .args(cmd)
        .stdin(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot start /bin/sh: {e}");
            return ExitCode::FAILURE;
        }
    };
    let t = Instant::now();
    let sampler = match Sampler::start(child.id(), &opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            let _ = child.kill();
            let _ = child.wait();
            return ExitCode::FAILURE;
        }
    };
    let start_time = t.elapsed();
    for w in sampler.warnings() {
        eprintln!("warning: {w}");
    }
    let started = Instant::now();
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(b"go\n");
    }
    let status = child.wait();
    let ran = started.elapsed();
    let live = sampler.stats();
    let t = Instant::now();
    let profile = match sampler.finish() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let finish = t.elapsed();
    let t = Instant::now();
    if let Err(e) = std::fs::write(out, profile.profiles[Kind::Cpu].to_folded()) {
        eprintln!("{out}: {e}");
        return ExitCode::FAILURE;
    }
    let write = t.elapsed();
    eprintln!("command: {status:?} after {ran:.3?}; Sampler::start took {start_time:.3?}");
    eprintln!(
        "samples: {} ({:.0}/s of wall time), lost {}, kernel frames {}, {} data pages x {} CPUs",
        profile.samples,
        profile.samples as f64 / ran.as_secs_f64(),
        profile.lost,
        profile.kernel_frames,
        profile.buffer_pages,
        profile.cpus
    );
    eprintln!(
        "batches while running: {} (max {:.3?}, total {:.3?})",
        live.batches, live.max_batch_time, live.symbolize_time
    );
    eprintln!(
        "finish: {finish:.3?} (final batch {:.3?}); folded write: {write:.3?}; {} stacks, {} frames, {} unresolved addresses",
        profile.final_batch_time,
        profile.profiles[Kind::Cpu].node_count(),
        profile.profiles[Kind::Cpu].frame_count(),
        profile.unresolved_addresses
    );
    // SAFETY: rusage is plain data that getrusage fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a live pointer to usage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let cpu = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let own = cpu(usage.ru_utime) + cpu(usage.ru_stime);
    eprintln!(
        "this process (mostly the sampler thread): {:.3} s CPU, {:.1} % of one core over the run",
        own,
        100.0 * own / ran.as_secs_f64()
    );
    // SAFETY: as above, for the reaped children (the command's whole tree).
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let children = cpu(usage.ru_utime) + cpu(usage.ru_stime);
    eprintln!(
        "the command's tree: {children:.3} s CPU; samples / (CPU time x frequency) = {:.2}",
        profile.samples as f64 / (children * profile.frequency_hz as f64)
    );
    for w in &profile.warnings {
        eprintln!("warning: {w}");
    }
    ExitCode::SUCCESS
}
