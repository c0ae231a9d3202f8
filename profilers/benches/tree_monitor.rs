//! The cost of one `TreeMonitor::sample`, the figure that says whether the monitors may run
//! every second beside a benchmark: at most 1 % of one core for a 100-process tree.
//!
//! `cargo bench -p benchtop-profilers --bench tree_monitor` builds trees of idle processes
//! and threads, samples each many times and prints, per configuration, the wall and CPU
//! time of a sample (mean, median, 99th percentile, largest) and the mean CPU time as a
//! share of one core at one sample per second. `BENCHTOP_BENCH_SAMPLES` sets the number of
//! samples (default 300). Samples are 5 ms apart, and one configuration is repeated 250 ms
//! apart (a tenth of the samples) to show the cost with caches as cold as a 1 s interval
//! leaves them.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use benchtop_profilers::monitor::{Discovery, TreeMonitor, TreeMonitorOptions};

/// Processes in the main tree: one shell, 9 shells under it, 10 `sleep`s under each.
const TREE_PROCESSES: u32 = 100;

/// Time between samples.
const GAP: Duration = Duration::from_millis(5);

fn main() {
    let samples: usize = std::env::var("BENCHTOP_BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    println!("tree_monitor: {samples} samples per configuration, 5 ms apart unless said");
    println!();
    println!(
        "{:<44} {:>5} {:>5} | {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} | {:>9}",
        "configuration",
        "procs",
        "thrds",
        "wall µs",
        "p50",
        "p99",
        "max",
        "CPU µs",
        "p50",
        "p99",
        "core @1s"
    );

    let mut tree = ProcessTree::spawn();
    let configs: [(&str, Discovery, Option<usize>); 3] = [
        (
            "100 processes, children files, files open",
            Discovery::ChildrenFiles,
            None,
        ),
        (
            "100 processes, children files, reopened",
            Discovery::ChildrenFiles,
            Some(0),
        ),
        (
            "100 processes, /proc scan, files open",
            Discovery::ProcScan,
            None,
        ),
    ];
    for (name, discovery, max_open_files) in configs {
        let mut opts = TreeMonitorOptions::default();
        opts.discovery = discovery;
        opts.max_open_files = max_open_files;
        let mut m = TreeMonitor::with_options(tree.root(), &opts);
        report(name, &mut m, samples, GAP);
    }
    let mut m = TreeMonitor::new(tree.root());
    report(
        "100 processes, children files, 250 ms apart",
        &mut m,
        (samples / 10).max(20),
        Duration::from_millis(250),
    );
    tree.end();

    let mut threads = ThreadTree::spawn(99);
    let mut m = TreeMonitor::new(threads.root());
    report("1 process of 100 threads, files open", &mut m, samples, GAP);
    threads.end();
}

/// Samples `m` `samples` times, `gap` apart, after a warm-up and prints one line of the
/// table.
fn report(name: &str, m: &mut TreeMonitor, samples: usize, gap: Duration) {
    let mut wall = Vec::with_capacity(samples);
    let mut cpu = Vec::with_capacity(samples);
    let mut shape = (0, 0);
    for i in 0..samples + 10 {
        std::thread::sleep(if i < 10 { GAP } else { gap });
        let (c0, w0) = (thread_cpu(), Instant::now());
        let s = match m.sample() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{name}: sample failed: {e}");
                std::process::exit(1);
            }
        };
        let (w1, c1) = (Instant::now(), thread_cpu());
        shape = (s.resources.processes, s.resources.threads);
        if i >= 10 {
            wall.push(w1.duration_since(w0).as_secs_f64() * 1e6);
            cpu.push((c1 - c0).as_secs_f64() * 1e6);
        }
    }
    let (w, c) = (Stats::of(&mut wall), Stats::of(&mut cpu));
    // Mean CPU per sample over one second, as a share of one core.
    let share = c.mean / 1e6 * 100.0;
    println!(
        "{:<44} {:>5} {:>5} | {:>8.1} {:>8.1} {:>8.1} {:>8.1} | {:>8.1} {:>8.1} {:>8.1} | {:>8.3}%",
        name, shape.0, shape.1, w.mean, w.p50, w.p99, w.max, c.mean, c.p50, c.p99, share
    );
}

struct Stats {
    mean: f64,
    p50: f64,
    p99: f64,
    max: f64,
}

impl Stats {
    fn of(v: &mut [f64]) -> Stats {
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        Stats {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: at(0.5),
            p99: at(0.99),
            max: at(1.0),
        }
    }
}

/// CPU time of the calling thread (user + system).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a live pointer to a timespec for the kernel (or vDSO) to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A tree of idle shells and sleeps in a process group of its own.
struct ProcessTree {
    root: Child,
}

impl ProcessTree {
    fn spawn() -> ProcessTree {
        let script = "for i in 1 2 3 4 5 6 7 8 9; do \
              sh -c 'for j in 1 2 3 4 5 6 7 8 9 10; do sleep 600 & done; wait' & \
            done; wait";
        let root = match Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("cannot run sh: {e}");
                std::process::exit(1);
            }
        };
        let tree = ProcessTree { root };
        // Wait until every process has started.
        let mut m = TreeMonitor::new(tree.root());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let n = m.sample().map_or(0, |s| s.resources.processes);
            if n == TREE_PROCESSES {
                break;
            }
            if Instant::now() > deadline {
                eprintln!("the tree has {n} processes, not {TREE_PROCESSES}");
                std::process::exit(1);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        tree
    }

    fn root(&self) -> u32 {
        self.root.id()
    }

    fn end(&mut self) {
        // SAFETY: kill has no memory arguments; the group is the tree's own.
        unsafe { libc::kill(-(self.root.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.root.wait();
    }
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        self.end();
    }
}

/// One `tree-fixture` process with many idle threads.
struct ThreadTree {
    child: Child,
}

impl ThreadTree {
    fn spawn(threads: usize) -> ThreadTree {
        let child = Command::new(env!("CARGO_BIN_EXE_tree-fixture"))
            .args(["hold", &threads.to_string(), "0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                eprintln!("cannot run tree-fixture: {e}");
                std::process::exit(1);
            }
        };
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line);
        }
        if line.trim() != "ready" {
            eprintln!("tree-fixture did not start: {line:?}");
            std::process::exit(1);
        }
        ThreadTree { child }
    }

    fn root(&self) -> u32 {
        self.child.id()
    }

    fn end(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
