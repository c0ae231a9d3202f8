//! The tree monitor against real process trees: a `tree-fixture` with named threads,
//! resident memory and children on demand, checked against /proc read here independently.

// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests only covers
// the test functions themselves.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use benchtop_profile::TimeseriesRow;
use benchtop_profilers::monitor::{Discovery, TreeMonitorOptions};
use benchtop_profilers::{ProfilerError, TreeMonitor, TreeSample};

const NOBODY: libc::uid_t = 65534;

/// A running `tree-fixture hold`; killed and reaped (with its children) on drop.
struct Tree {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Tree {
    fn hold(threads: usize, mib: usize) -> Tree {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tree-fixture"))
            .args(["hold", &threads.to_string(), &mib.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn tree-fixture");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut tree = Tree {
            child,
            stdin,
            stdout,
        };
        assert_eq!(tree.line(), "ready");
        tree
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the fixture");
        line.trim_end().to_owned()
    }

    /// Sends a command and returns the fixture's answer.
    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").expect("write to the fixture");
        self.stdin.flush().unwrap();
        let answer = self.line();
        assert!(!answer.starts_with("error"), "{command}: {answer}");
        answer
    }

    /// Starts `k` children and returns their pids.
    fn spawn(&mut self, k: usize, nobody: bool) -> Vec<u32> {
        let answer = self.ask(&format!("spawn {k}{}", if nobody { " nobody" } else { "" }));
        let pids: Vec<u32> = answer
            .strip_prefix("spawned")
            .unwrap()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(pids.len(), k, "{answer}");
        // A child is in the tree once it has exec'd and named itself.
        for &pid in &pids {
            wait_for(|| comm(pid).as_deref() == Some("tree-child"));
        }
        pids
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for(mut ok: impl FnMut() -> bool) {
    for _ in 0..200 {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out waiting for the fixture");
}

fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim_end().to_owned())
}

/// A field of /proc/<pid>/status, as a number.
fn status_field(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The live descendants of `root` and `root` itself, found by scanning the parent of every
/// process in /proc (not the children files the monitor uses).
fn tree_pids(root: u32) -> BTreeSet<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let mut fields = after.split(' ');
        let state = fields.next().unwrap();
        let ppid: u32 = fields.next().unwrap().parse().unwrap();
        if state != "Z" {
            parent_of.push((pid, ppid));
        }
    }
    let mut tree = BTreeSet::from([root]);
    loop {
        let before = tree.len();
        for &(pid, ppid) in &parent_of {
            if tree.contains(&ppid) {
                tree.insert(pid);
            }
        }
        if tree.len() == before {
            return tree;
        }
    }
}

fn sample_pids(s: &TreeSample) -> BTreeSet<u32> {
    s.processes.iter().map(|p| p.pid).collect()
}

#[test]
fn thread_counts_and_rss_match_proc_read_independently() {
    let mut tree = Tree::hold(4, 48);
    tree.spawn(2, false);
    let mut m = TreeMonitor::new(tree.pid());
    let s = m.sample().unwrap();

    let pids = tree_pids(tree.pid());
    assert_eq!(pids.len(), 3, "{pids:?}");
    assert_eq!(sample_pids(&s), pids);
    let threads: u64 = pids
        .iter()
        .map(|&p| status_field(p, "Threads").unwrap())
        .sum();
    let rss_kb: u64 = pids
        .iter()
        .map(|&p| status_field(p, "VmRSS").unwrap())
        .sum();
    let r = &s.resources;
    assert_eq!(r.processes, 3, "{r:?}");
    // Main thread + 4 workers, and one thread in each child.
    assert_eq!(threads, 7);
    assert_eq!(u64::from(r.threads), threads, "{r:?}");
    assert_eq!(s.threads.len(), 7, "{:?}", s.threads);
    let rss = r.rss_bytes as f64;
    let expected = (rss_kb * 1024) as f64;
    assert!(
        (rss - expected).abs() <= expected * 0.05,
        "monitor {rss} bytes, /proc {expected}"
    );
    assert!(r.rss_bytes >= 48 << 20, "{r:?}");
    // Two peaks: the tree's sum at its largest, and the largest one process reached
    // (the fixture's own, as `time -v` would say), which the sum of three exceeds.
    assert!(r.tree_peak_rss_bytes >= Some(r.rss_bytes), "{r:?}");
    let hwm = status_field(tree.pid(), "VmHWM").unwrap() * 1024;
    let largest = pids
        .iter()
        .map(|&p| status_field(p, "VmHWM").unwrap() * 1024)
        .max()
        .unwrap();
    assert_eq!(largest, hwm);
    assert!(
        r.peak_rss_bytes >= hwm && r.peak_rss_bytes < r.rss_bytes,
        "peak {} against VmHWM {hwm} and the sum {}",
        r.peak_rss_bytes,
        r.rss_bytes
    );
    let fixture = s.processes.iter().find(|p| p.pid == tree.pid()).unwrap();
    assert_eq!((&*fixture.name, fixture.threads), ("tree-fixture", 5));
    assert!(fixture.peak_rss_bytes >= 48 << 20, "{fixture:?}");
}

#[test]
fn descendants_that_start_later_are_picked_up_and_those_that_exit_are_dropped() {
    let mut tree = Tree::hold(1, 0);
    let mut m = TreeMonitor::new(tree.pid());
    assert_eq!(m.sample().unwrap().resources.processes, 1);

    let children = tree.spawn(3, false);
    let s = m.sample().unwrap();
    assert_eq!(s.resources.processes, 4, "{:?}", s.processes);
    assert_eq!(s.resources.threads, 2 + 3);
    for pid in &children {
        assert!(sample_pids(&s).contains(pid), "child {pid} missing");
        let p = s.processes.iter().find(|p| p.pid == *pid).unwrap();
        assert_eq!((&*p.name, p.ppid), ("tree-child", tree.pid()));
    }

    tree.ask("reap");
    let s = m.sample().unwrap();
    assert_eq!(sample_pids(&s), BTreeSet::from([tree.pid()]));
    assert_eq!(s.resources.threads, 2);
    // The children's threads are gone from the sample but stay in the summary.
    assert!(s.threads.iter().all(|t| &*t.thread != "tree-child"));
    let summary = m.threads_summary();
    for pid in &children {
        let t = summary.iter().find(|t| t.tid == *pid).unwrap();
        assert_eq!((t.pid, t.thread.as_str()), (*pid, "tree-child"));
        assert!(
            t.last_seen_s >= t.first_seen_s && t.last_seen_s > 0.0,
            "{t:?}"
        );
    }
}

#[test]
fn the_per_core_vector_has_one_entry_per_online_cpu() {
    let mut tree = Tree::hold(0, 0);
    let mut m = TreeMonitor::new(tree.pid());
    tree.ask("burn 300");
    let s = m.sample().unwrap();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let count: usize = online
        .trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum();
    assert_eq!(s.cpu_percent_per_core.len(), count, "{online}");
    assert!(
        s.cpu_percent_per_core
            .iter()
            .all(|p| (0.0..=100.0).contains(p)),
        "{:?}",
        s.cpu_percent_per_core
    );
    // One thread burned for most of the interval: some core was busy.
    let busiest = s.cpu_percent_per_core.iter().copied().fold(0.0, f64::max);
    assert!(busiest > 30.0, "{:?}", s.cpu_percent_per_core);
}

#[test]
fn thread_names_appear_in_the_summary_and_the_busiest_in_the_row() {
    let mut tree = Tree::hold(3, 0);
    let mut m = TreeMonitor::new(tree.pid());
    // The burner exits before the sample: its time is kept when it is seen once.
    let burner = std::thread::scope(|s| {
        let burn = s.spawn(|| tree.ask("burn 600"));
        std::thread::sleep(Duration::from_millis(300));
        let sample = m.sample().unwrap();
        burn.join().unwrap();
        sample
    });
    let top = burner.threads.first().unwrap();
    assert_eq!(
        (&*top.thread, &*top.process),
        ("tree-burner", "tree-fixture")
    );
    // Busiest by any amount: a loaded machine gives the burner what it gives.
    assert!(top.cpu_percent > 0.0, "{top:?}");

    let summary = m.threads_summary();
    let names: BTreeSet<&str> = summary.iter().map(|t| t.thread.as_str()).collect();
    for name in [
        "tree-fixture",
        "tree-worker-0",
        "tree-worker-1",
        "tree-worker-2",
        "tree-burner",
    ] {
        assert!(names.contains(name), "{name} missing from {names:?}");
    }
    assert!(
        summary
            .iter()
            .all(|t| t.process == "tree-fixture" && t.pid == tree.pid())
    );
    // Busiest first.
    assert_eq!(summary[0].thread, "tree-burner");
    assert!(
        summary[0].cpu_s() > 0.0 && summary[0].cpu_s() >= summary[1].cpu_s(),
        "{:?}",
        summary
    );

    let mut row = TimeseriesRow::default();
    burner.fill_row(&mut row, 2);
    assert_eq!(row.top_threads.len(), 2);
    assert_eq!(row.top_threads[0].thread, "tree-burner");
    assert_eq!(row.resources, Some(burner.resources));
    assert_eq!(row.cpu_percent_per_core, burner.cpu_percent_per_core);
}

#[test]
fn io_counters_grow_when_the_fixture_writes_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.bin");
    let mut tree = Tree::hold(0, 0);
    let mut m = TreeMonitor::new(tree.pid());
    let before = m.sample().unwrap().resources.io_total.unwrap();
    tree.ask(&format!("write {} 4", path.display()));
    let r = m.sample().unwrap().resources;
    let after = r.io_total.unwrap();
    let interval = r.io_interval.unwrap();
    assert!(
        after.wchar >= before.wchar + (4 << 20),
        "{before:?} -> {after:?}"
    );
    assert!(after.syscw >= before.syscw + 4, "{before:?} -> {after:?}");
    assert_eq!(interval.wchar, after.wchar - before.wchar);
    assert_eq!(r.io_unreadable_processes, 0);
}

#[test]
fn io_of_a_child_reaped_in_the_tree_is_not_lost_or_counted_twice() {
    let dir = tempfile::tempdir().unwrap();
    let mut tree = Tree::hold(0, 0);
    tree.spawn(1, false);
    let mut m = TreeMonitor::new(tree.pid());
    let before = m.sample().unwrap().resources.io_total.unwrap();
    tree.ask(&format!("write {} 2", dir.path().join("a").display()));
    tree.ask("reap");
    let after = m.sample().unwrap().resources.io_total.unwrap();
    let grew = after.wchar - before.wchar;
    // The parent wrote 2 MiB; the reaped child's bytes move into its parent's counters.
    assert!(
        (2 << 20..(2 << 20) + (64 << 10)).contains(&grew),
        "{grew} bytes: {before:?} -> {after:?}"
    );
}

#[test]
fn voluntary_context_switches_grow_when_a_thread_naps() {
    let mut tree = Tree::hold(0, 0);
    let mut m = TreeMonitor::new(tree.pid());
    let before = m.sample().unwrap().resources.ctx_switches_total.unwrap();
    tree.ask("nap 50");
    let r = m.sample().unwrap().resources;
    let after = r.ctx_switches_total.unwrap();
    let interval = r.ctx_switches_interval.unwrap();
    // The napper slept 50 times; it exited before the sample, so it was never seen:
    // only the main thread's wake-ups (reading stdin) count.
    assert!(
        after.voluntary >= before.voluntary,
        "{before:?} -> {after:?}"
    );
    assert_eq!(interval.voluntary, after.voluntary - before.voluntary);

    // Seen while napping: its 50 sleeps count.
    let napping = std::thread::scope(|s| {
        let nap = s.spawn(|| tree.ask("nap 400"));
        std::thread::sleep(Duration::from_millis(250));
        let r = m.sample().unwrap().resources;
        nap.join().unwrap();
        r
    });
    let interval = napping.ctx_switches_interval.unwrap();
    assert!(interval.voluntary >= 50, "{napping:?}");
}

#[test]
fn the_proc_scan_fallback_finds_the_same_tree() {
    let mut tree = Tree::hold(2, 0);
    tree.spawn(2, false);
    let mut opts = TreeMonitorOptions::default();
    opts.discovery = Discovery::ProcScan;
    let mut scan = TreeMonitor::with_options(tree.pid(), &opts);
    assert_eq!(scan.discovery(), Discovery::ProcScan);
    let mut children = TreeMonitor::new(tree.pid());
    assert_eq!(children.discovery(), Discovery::ChildrenFiles);
    let (a, b) = (scan.sample().unwrap(), children.sample().unwrap());
    assert_eq!(sample_pids(&a), sample_pids(&b));
    assert_eq!(sample_pids(&a), tree_pids(tree.pid()));
    assert_eq!(a.resources.threads, b.resources.threads);
}

#[test]
fn without_open_files_the_monitor_reads_the_same() {
    let mut tree = Tree::hold(2, 0);
    tree.spawn(1, false);
    let mut opts = TreeMonitorOptions::default();
    opts.max_open_files = Some(0);
    let mut closed = TreeMonitor::with_options(tree.pid(), &opts);
    let mut open = TreeMonitor::new(tree.pid());
    let (a, b) = (closed.sample().unwrap(), open.sample().unwrap());
    assert_eq!(closed.open_files(), 0);
    assert!(open.open_files() > 0);
    assert_eq!(sample_pids(&a), sample_pids(&b));
    assert_eq!(a.resources.threads, b.resources.threads);
    drop(tree);
    // Every file held open is closed once its process is gone.
    assert!(open.sample().is_err());
    assert_eq!(open.open_files(), 1, "only /proc/stat stays open");
}

#[test]
fn a_root_that_exits_is_gone_and_so_is_a_root_that_never_was() {
    let mut tree = Tree::hold(1, 0);
    let mut m = TreeMonitor::new(tree.pid());
    m.sample().unwrap();
    tree.ask("exit");
    tree.child.wait().unwrap();
    let err = m.sample().unwrap_err();
    assert!(
        matches!(err, ProfilerError::ProcessGone { pid } if pid == tree.pid()),
        "{err}"
    );
    // The threads seen stay in the summary.
    assert!(
        m.threads_summary()
            .iter()
            .any(|t| t.thread == "tree-worker-0")
    );

    let err = TreeMonitor::new(u32::MAX - 1).sample().unwrap_err();
    assert!(matches!(err, ProfilerError::ProcessGone { .. }), "{err}");
}

#[test]
fn the_tree_monitors_resources_are_the_whole_trees() {
    let mut tree = Tree::hold(2, 8);
    tree.spawn(2, false);
    let mut m = TreeMonitor::new(tree.pid());
    let r = m.sample().unwrap().resources;
    assert_eq!((r.processes, r.threads), (3, 5), "{r:?}");
    assert!(
        r.rss_bytes >= 8 << 20 && r.ctx_switches_total.is_some(),
        "{r:?}"
    );
}

#[test]
fn io_of_processes_it_may_not_trace_is_unavailable_not_an_error() {
    // SAFETY: geteuid has no arguments and cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root to monitor, as the unprivileged user nobody (uid/gid 65534), \
         a tree of root's: run the tests as root (CI does)"
    );
    // A tree of root's with one child of nobody's.
    let mut tree = Tree::hold(1, 0);
    tree.spawn(1, true);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tree-fixture"));
    cmd.args(["monitor", &tree.pid().to_string()])
        .current_dir("/");
    // SAFETY: only async-signal-safe system calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(NOBODY) != 0
                || libc::setuid(NOBODY) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = cmd.output().expect("run tree-fixture monitor as nobody");
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}: {out}", output.status);
    let value = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('\t'))
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(value("processes"), "2", "{out}");
    assert_eq!(value("threads"), "3", "{out}");
    // Root's fixture is out of reach, nobody's child is not.
    assert_eq!(value("io_unreadable"), "1", "{out}");
    assert!(value("io").starts_with("rchar="), "{out}");
}

#[test]
fn cpu_over_a_millisecond_never_exceeds_a_cpu_per_busy_thread_or_the_machine() {
    // Clock ticks are 10 ms: over a 1 ms interval one tick reads as 1000 %. The kernel's
    // nanoseconds, bounded by the interval per thread and by the cores for the tree, do not.
    let mut tree = Tree::hold(2, 0);
    let mut m = TreeMonitor::new(tree.pid());
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    std::thread::scope(|s| {
        let burn = s.spawn(|| tree.ask("burn 400"));
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..100 {
            m.sample().unwrap();
            std::thread::sleep(Duration::from_micros(500));
            let short = m.sample().unwrap();
            let busiest = short.threads.len().min(cores) as f64;
            assert!(
                short.resources.cpu_percent <= 100.0 * busiest + 1e-9,
                "{:.1}% over {:.2} ms with {} threads on {cores} cores",
                short.resources.cpu_percent,
                short.interval_s * 1e3,
                short.threads.len()
            );
            for t in &short.threads {
                assert!(t.cpu_percent <= 100.0 + 1e-9, "{t:?}");
            }
        }
        burn.join().unwrap();
    });
}

/// Waits up to 20 s (a loaded machine) for `ok`.
fn wait_long_for(what: &str, mut ok: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn a_restarted_peak_counts_from_the_next_exec_only() {
    // A shell holds 32 MB in a variable (as an exec gate holds its own image), then on a
    // line of input execs `sleep`, whose image starts its VmHWM afresh.
    let mut child = Command::new("sh")
        .args([
            "-c",
            "x=$(head -c 32000000 /dev/zero | tr '\\0' a); read _; exec sleep 30",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    wait_long_for("the shell's 32 MB", || {
        status_field(pid, "VmHWM").is_some_and(|kb| kb >= 32_000)
    });
    let mut monitor = TreeMonitor::new(pid);
    let before = monitor.sample().unwrap();
    assert!(monitor.largest_peak_bytes() >= 32_000_000, "{before:?}");
    assert!(before.resources.peak_rss_bytes >= 32_000_000);

    writeln!(stdin, "go").unwrap();
    wait_long_for("the exec of sleep", || {
        comm(pid).as_deref() == Some("sleep")
    });
    // Without a restart the shell's peak stays the tree's.
    monitor.sample().unwrap();
    assert!(monitor.largest_peak_bytes() >= 32_000_000);

    monitor.restart_peak();
    // VmHWM only grows: read before the sample, it is at most what the sample reads.
    let sleep_hwm = status_field(pid, "VmHWM").unwrap() * 1024;
    let after = monitor.sample().unwrap();
    let peak = monitor.largest_peak_bytes();
    assert!(
        peak >= sleep_hwm && peak < 16 << 20,
        "sleep's peak {peak} bytes (its VmHWM {sleep_hwm})"
    );
    assert!(after.resources.peak_rss_bytes < 16 << 20, "{after:?}");
    let _ = child.kill();
    let _ = child.wait();
}
