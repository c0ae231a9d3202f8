//! The kernel's records of every thread's life, against a real tree of processes that
//! start and end between two polls.

use std::io::Write;
use std::process::{Child, Command, Stdio};

use benchtop_profilers::TreeMonitor;
use benchtop_profilers::lifetimes::Lifetimes;

/// A shell that waits for a line on its stdin, then starts `n` `/bin/true` processes at
/// once and waits for them.
fn gated_shell(n: u32) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "read go; i=0; while [ $i -lt {n} ]; do /bin/true & i=$((i+1)); done; wait"
        ))
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn sh")
}

fn open_gate_and_wait(child: &mut Child) {
    let mut stdin = child.stdin.take().expect("the shell's stdin");
    stdin.write_all(b"go\n").expect("write to the shell");
    drop(stdin);
    assert!(child.wait().expect("wait for the shell").success());
}

#[test]
fn processes_no_poll_saw_are_lines_with_parent_start_end_and_cpu_time() {
    let mut sh = gated_shell(30);
    let pid = sh.id();
    let mut monitor = TreeMonitor::new(pid);
    let lifetimes =
        Lifetimes::open(&[pid], false, 65_536).expect("perf_event_open of task-clock events");
    monitor.follow_lifetimes(lifetimes);
    open_gate_and_wait(&mut sh);

    let lines = monitor.threads_summary();
    let lost = monitor.lifetimes().map(|t| t.lost());
    let trues: Vec<_> = lines.iter().filter(|t| t.process == "true").collect();
    assert_eq!(trues.len(), 30, "records lost: {lost:?}; {lines:#?}");
    for t in &trues {
        assert_eq!(
            (t.tid, t.ppid, &*t.thread),
            (t.pid, Some(pid), "true"),
            "{t:?}"
        );
        let (Some(start), Some(end)) = (t.start_s, t.end_s) else {
            panic!("no start or end (records lost: {lost:?}): {t:?}\n{lines:#?}");
        };
        assert!(0.0 <= start && start <= end, "{t:?}");
        let cpu = t.counted_cpu_s.expect("CPU time counted at exit");
        assert!(cpu > 0.0 && cpu < 1.0, "{t:?}");
        assert_eq!(t.cpu_s(), cpu, "{t:?}");
    }
    // The shell existed before the events: the polls' line, with its end.
    let shell = lines
        .iter()
        .find(|t| t.tid == pid)
        .expect("the shell's line");
    assert!(
        shell.start_s.is_none() && shell.end_s.is_some(),
        "{shell:?}"
    );
    let table = monitor.lifetimes().unwrap();
    assert_eq!(table.lost(), 0);
    assert_eq!(table.aggregated(), 0);
    assert_eq!(
        lines.iter().map(|t| t.processes()).sum::<u64>(),
        31,
        "{lines:#?}"
    );
}

#[test]
fn past_the_limit_exited_processes_are_held_in_an_aggregated_line_that_counts_them() {
    let mut sh = gated_shell(25);
    let pid = sh.id();
    let mut monitor = TreeMonitor::new(pid);
    monitor.follow_lifetimes(Lifetimes::open(&[pid], false, 10).unwrap());
    open_gate_and_wait(&mut sh);
    // Exits are retired into the table a drain after they were read.
    let _ = monitor.sample();
    let lines = monitor.threads_summary();
    let table = monitor.lifetimes().unwrap();
    // The first 10 children to exit have lines of their own, and so has the shell,
    // which existed before the events (and which the polls saw).
    assert_eq!(table.exited().len(), 11, "{lines:#?}");
    assert_eq!(table.aggregated(), 15, "{lines:#?}");
    let processes: u64 = lines.iter().map(|t| t.processes()).sum();
    assert_eq!(processes, 26, "{lines:#?}");
    let agg: Vec<_> = lines.iter().filter(|t| t.aggregated.is_some()).collect();
    assert!(agg.iter().all(|t| t.pid == 0 && t.tid == 0), "{agg:#?}");
    assert!(
        agg.iter()
            .any(|t| t.process == "true" && t.counted_cpu_s.is_some_and(|s| s > 0.0)),
        "{agg:#?}"
    );
}
