//! Workloads that span processes, recorded end to end: stacks, monitors and threads of
//! the whole tree, off-CPU profiles, and parameters refused before anything starts.

use benchtop_sessions::Status;
use std::collections::BTreeSet;

use crate::support::{benchtop, figure, record_run};

/// The total weight of folded lines whose stack starts with `prefix`.
fn weight_under(folded: &str, prefix: &str) -> u64 {
    folded
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}

#[test]
fn an_ipc_ring_session_shows_its_node_processes_in_stacks_monitors_and_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ipc");
    let (output, session) = record_run(
        &dir,
        &[
            "ring",
            "--transport",
            "ipc",
            "--num-nodes",
            "4",
            "--num-rounds",
            "20000",
            "--interval",
            "200ms",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("ring_complete_final_sum: 80000"),
        "{stdout}"
    );
    assert!(
        stdout.contains("time_taken_to_spawn_worker_nodes:"),
        "{stdout}"
    );
    assert_eq!(session.meta.status, Status::Complete);
    assert_eq!(figure(&session, "ring_complete_final_sum"), 80_000.0);

    // On-CPU: the main node and its node processes, each under its own name.
    let cpu = std::fs::read_to_string(dir.join("cpu.folded")).unwrap();
    assert!(weight_under(&cpu, "bt-ring;") > 0, "{cpu}");
    assert!(weight_under(&cpu, "bt-ring-node;") > 0, "{cpu}");

    // Off-CPU (the default profile is both): every hop is a blocking read, so the nodes
    // spend most of the run blocked, and the time has stacks (CI runs as root).
    assert_eq!(session.meta.sampling.profile, "both");
    assert!(session.meta.sampling.offcpu_stacks, "{:?}", session.meta);
    let off = std::fs::read_to_string(dir.join("offcpu.folded")).unwrap();
    let nodes_blocked_us = weight_under(&off, "bt-ring-node;");
    let run_s = figure(&session, "time_taken_for_ring_messaging_to_complete");
    // Three nodes, each blocked most of the run (at least a third of it, to leave room
    // for a slow machine): weights are microseconds.
    assert!(
        nodes_blocked_us as f64 > 3.0 * run_s * 1e6 / 3.0,
        "{nodes_blocked_us} µs blocked in nodes over a {run_s} s run"
    );
    assert!(
        off.lines()
            .any(|l| l.starts_with("bt-ring-node;") && l.contains("recv")),
        "the nodes block reading their socket:\n{off}"
    );
    let svg = std::fs::read_to_string(dir.join("offcpu.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("bt-ring-node"));
    let blocked_s = session.meta.sampling.blocked_s;
    assert!(
        blocked_s > 0.0 && session.meta.sampling.switches > 0,
        "{:?}",
        session.meta.sampling
    );

    // Monitors follow the whole tree: the main node and three node processes.
    let max_processes = session
        .rows
        .iter()
        .filter_map(|r| r.resources)
        .map(|r| r.processes)
        .max();
    assert_eq!(max_processes, Some(4));
    let row = session.rows.iter().find(|r| r.resources.is_some()).unwrap();
    assert_eq!(
        row.cpu_percent_per_core.len(),
        session.meta.host.cores as usize
    );
    assert!(!row.top_threads.is_empty());
    let threads = std::fs::read_to_string(dir.join("threads.csv")).unwrap();
    let node_pids: BTreeSet<&str> = threads
        .lines()
        .filter(|l| l.split(',').nth(2) == Some("bt-ring-node"))
        .filter_map(|l| l.split(',').next())
        .collect();
    assert_eq!(node_pids.len(), 3, "{threads}");

    let show = benchtop().arg("show").arg(&dir).output().unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.contains("off-CPU") && show.contains("where threads blocked"),
        "{show}"
    );
}

#[test]
fn a_storm_session_sums_every_nodes_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("storm");
    let (output, session) = record_run(
        &dir,
        &[
            "storm",
            "--num-nodes",
            "3",
            "--num-msgs",
            "20000",
            "--profile",
            "none",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("final_sum_from_all_nodes: 60000"),
        "{stdout}"
    );
    assert_eq!(session.meta.status, Status::Complete);
    assert_eq!(figure(&session, "final_sum_from_all_nodes"), 60_000.0);
    assert!(!dir.join("cpu.folded").exists() && !dir.join("offcpu.folded").exists());
}

#[test]
fn per_thread_puts_each_thread_under_its_process() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("per-thread");
    let (_, session) = record_run(
        &dir,
        &[
            "ring",
            "--num-nodes",
            "200",
            "--num-rounds",
            "100000000",
            "--duration",
            "1s",
            // Monitor samples often enough to see every thread of the run.
            "--interval",
            "100ms",
            "--profile",
            "cpu",
            "--per-thread",
        ],
    );
    assert_eq!(session.meta.sampling.profile, "cpu");
    assert!(!dir.join("offcpu.folded").exists());
    let threads = std::fs::read_to_string(dir.join("threads.csv")).unwrap();
    let names: BTreeSet<&str> = threads
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(3))
        .collect();
    let folded = std::fs::read_to_string(dir.join("cpu.folded")).unwrap();
    let mut worker_lines = 0;
    for line in folded.lines().filter(|l| l.starts_with("bt-ring;")) {
        let thread = line.split(';').nth(1).unwrap();
        assert!(
            names.contains(thread),
            "second frame {thread:?} is not a thread of threads.csv {names:?}"
        );
        worker_lines += 1;
    }
    assert!(worker_lines > 0, "{folded}");
}

#[test]
fn bad_workload_parameters_are_refused_before_a_session_exists() {
    let tmp = tempfile::tempdir().unwrap();
    for (args, says) in [
        (&["ring", "--crash-after", "5"][..], "--transport ipc"),
        (
            &["ipc-node", "--role", "ring", "--node-id", "1"][..],
            "node process",
        ),
        (
            &["ring", "--transport", "ipc", "--num-nodes", "1"][..],
            "at least 2",
        ),
        (&["ring", "--baseline", "/nonexistent"][..], "add --tui"),
        (
            &["ring", "--tui", "--baseline", "/nonexistent"][..],
            "cannot use /nonexistent as the baseline",
        ),
        (&["ring", "--tui"][..], "needs a terminal"),
    ] {
        let dir = tmp.path().join("refused");
        let output = benchtop()
            .arg("run")
            .args(args)
            .args(["--quiet", "--record"])
            .arg(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} ran: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!dir.exists(), "{args:?} created a session");
    }
}
