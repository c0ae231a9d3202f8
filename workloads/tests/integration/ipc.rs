//! The workloads across processes — `ring --transport ipc` and `storm` — run as benchtop
//! runs them: a worker process (the fixture binary) that starts its node processes from
//! its own program. Their sums, their reports, their nodes' lifetimes, and the fault
//! `--crash-after` injects.

use std::time::Duration;

use benchtop_workloads::protocol::WorkerMessage;

use crate::fixture::{FixtureWorker, Reports, assert_all_gone, kill_all, marked};
use crate::support::{decode_trusted, figure};

/// Long enough for any of these runs on a loaded machine; only a hang reaches it.
const LIMIT: Duration = Duration::from_secs(120);

/// Checks the run went hello, ready, ticks, summary, and that no process outlived it.
fn assert_reported_whole(ended: &crate::fixture::Ended, session: &str) {
    ended.assert_success();
    let kinds: Vec<_> = ended.messages.iter().map(WorkerMessage::kind).collect();
    assert_eq!(kinds[..2], ["hello", "ready"], "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"summary"), "{kinds:?}");
    assert!(
        // A worker that samples its allocations sends them before its ticks.
        kinds[2..kinds.len() - 1]
            .iter()
            .all(|k| *k == "tick" || *k == "alloc_samples"),
        "{kinds:?}"
    );
    // The main node reaps its nodes before it exits.
    assert!(marked(session).is_empty(), "{:?}", marked(session));
}

fn histogram_count(ended: &crate::fixture::Ended, name: &str) -> u64 {
    ended
        .messages
        .iter()
        .filter_map(|m| match m {
            WorkerMessage::Tick(t) => Some(decode_trusted(&t.histograms[name]).len()),
            _ => None,
        })
        .sum()
}

#[test]
fn the_ipc_ring_ends_with_members_times_rounds_by_tell_and_by_ask() {
    for (send_ask, members, rounds) in [
        ("0", 2u32, 300u32),
        ("0", 5, 200),
        ("1", 2, 300),
        ("1", 5, 200),
    ] {
        let args = [
            "ring",
            "--transport",
            "ipc",
            "--send-ask",
            send_ask,
            "--num-nodes",
            &members.to_string(),
            "--num-rounds",
            &rounds.to_string(),
        ]
        .map(str::to_owned);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let worker = FixtureWorker::start(&args, Reports::Stdout);
        let session = worker.session.clone();
        let ended = worker.wait(LIMIT);
        assert_reported_whole(&ended, &session);

        let sum = u64::from(members) * u64::from(rounds);
        let summary = ended.summary();
        assert_eq!(figure(summary, "ring_complete_final_sum"), sum as f64);
        assert_eq!(figure(summary, "num_nodes"), f64::from(members));
        assert!(figure(summary, "time_taken_to_spawn_worker_nodes") > 0.0);
        assert!(figure(summary, "time_taken_for_ring_messaging_to_complete") > 0.0);
        let lines = ended.summary_lines();
        assert_eq!(lines[0], format!("send_ask: {send_ask}"));
        assert!(
            lines.contains(&format!("ring_complete_final_sum: {sum}")),
            "{lines:?}"
        );
        assert_eq!(lines.last().map(String::as_str), Some("transport: ipc"));
        assert!(
            ended
                .log
                .contains(&format!("ring_complete_final_sum: {sum}"))
        );

        let WorkerMessage::Hello(hello) = &ended.messages[0] else {
            unreachable!()
        };
        assert_eq!(hello.params["transport"], "ipc");
        assert_eq!(
            hello.params["mode"],
            if send_ask == "1" { "ask" } else { "tell" }
        );
        // Asks and replies both hop; a lap is one round forward in either mode (the
        // replies' passes as the chain unwinds are not timed), as in process.
        let (messages, laps) = if send_ask == "1" {
            assert_eq!(hello.params["lap-version"], 2);
            (2 * sum, u64::from(rounds))
        } else {
            (sum, u64::from(rounds))
        };
        assert_eq!(ended.last_tick().counters["messages"], messages);
        assert_eq!(histogram_count(&ended, "lap"), laps);
    }
}

#[test]
fn the_storm_sums_every_node_and_the_total_by_ask_and_by_tell() {
    for mode in ["ask", "tell"] {
        let worker = FixtureWorker::start(
            &[
                "storm",
                "--num-nodes",
                "3",
                "--num-msgs",
                "500",
                "--mode",
                mode,
            ],
            Reports::Stdout,
        );
        let session = worker.session.clone();
        let ended = worker.wait(LIMIT);
        assert_reported_whole(&ended, &session);

        let summary = ended.summary();
        assert_eq!(figure(summary, "final_sum_from_all_nodes"), 1500.0);
        assert!(figure(summary, "time_taken_to_storm_slowest_node") > 0.0);
        assert!(figure(summary, "messages_per_second") > 0.0);
        let lines = ended.summary_lines();
        for id in 1..=3 {
            assert!(
                lines.contains(&format!("final_sum_from_node_id_{id}_: 500")),
                "{lines:?}"
            );
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&format!("time_taken_to_storm_from_node_id_{id}_: "))),
                "{lines:?}"
            );
        }
        assert!(lines.contains(&"final_sum_from_all_nodes: 1500".to_owned()));
        assert_eq!(ended.last_tick().counters["messages"], 1500);
        assert_eq!(
            histogram_count(&ended, "arrival"),
            1500,
            "one latency a message"
        );
    }
}

#[test]
fn crash_after_leaves_exactly_the_node_processes_behind_and_nothing_of_the_report_channel() {
    for (args, nodes, comm) in [
        (
            &[
                "ring",
                "--transport",
                "ipc",
                "--num-nodes",
                "4",
                "--num-rounds",
                "100000",
                "--crash-after",
                "1000",
            ][..],
            3,
            "bt-ring-node",
        ),
        (
            &[
                "storm",
                "--num-nodes",
                "3",
                "--num-msgs",
                "100000",
                "--crash-after",
                "1000",
            ][..],
            3,
            "bt-storm-node",
        ),
    ] {
        let worker = FixtureWorker::start(args, Reports::Fd3);
        let session = worker.session.clone();
        let main_pid = worker.pid();
        let ended = worker.wait(LIMIT);
        let left = marked(&session);
        // Whatever happens below, nothing this test started is left running.
        let guard = KillOnDrop(left.clone());

        assert_eq!(
            ended.status.code(),
            Some(101),
            "a panic; log:\n{}",
            ended.log
        );
        assert!(ended.log.contains("--crash-after 1000"), "{}", ended.log);
        let kinds: Vec<_> = ended.messages.iter().map(WorkerMessage::kind).collect();
        assert!(
            !kinds.contains(&"summary") && !kinds.contains(&"error"),
            "{kinds:?}"
        );
        assert_eq!(
            kinds.iter().filter(|k| **k == "hello").count(),
            1,
            "only the main node says hello"
        );
        assert!(
            ended.stdout.is_empty(),
            "nothing on standard output but reports on fd 3"
        );

        assert_eq!(left.len(), nodes, "{left:?}");
        for node in &left {
            assert_eq!(node.comm, comm, "{node:?}");
            assert_ne!(node.ppid, main_pid, "orphaned: {node:?}");
            assert_eq!(node.sid, node.pid, "a session of its own: {node:?}");
            assert!(
                node.environ
                    .iter()
                    .any(|v| v.starts_with("BENCHTOP_OWNER=")),
                "{node:?}"
            );
            assert!(
                !node
                    .environ
                    .iter()
                    .any(|v| v.starts_with("BENCHTOP_REPORT_FD=")),
                "{node:?}"
            );
            // Not the report pipe on descriptor 3 (nor anywhere): only the main node
            // reports.
            let fds = std::fs::read_dir(format!("/proc/{}/fd", node.pid)).unwrap();
            for fd in fds.flatten() {
                let target = std::fs::read_link(fd.path()).unwrap_or_default();
                let target = target.to_string_lossy();
                assert!(!target.starts_with("pipe:"), "{node:?} holds {target}");
            }
        }
        // Alive and idle: asleep, not spinning, a while after the crash.
        std::thread::sleep(Duration::from_millis(300));
        let later = marked(&session);
        assert_eq!(later.len(), nodes, "{later:?}");
        for node in &later {
            assert!(matches!(node.state, 'S' | 'D'), "{node:?}");
        }
        drop(guard);
        assert_all_gone(&session, Duration::from_secs(10));
    }
}

/// Kills the processes when dropped, so a failing assertion leaks nothing.
struct KillOnDrop(Vec<crate::fixture::Marked>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        kill_all(&self.0);
    }
}

#[test]
fn nodes_die_with_their_main_node() {
    for args in [
        &[
            "ring",
            "--transport",
            "ipc",
            "--num-nodes",
            "4",
            "--num-rounds",
            "4000000000",
        ][..],
        &[
            "storm",
            "--num-nodes",
            "3",
            "--num-msgs",
            "4000000000",
            "--mode",
            "tell",
        ][..],
    ] {
        let worker = FixtureWorker::start(args, Reports::Stdout);
        let session = worker.session.clone();
        worker.wait_for_progress("messages", LIMIT);
        let nodes = marked(&session);
        assert_eq!(nodes.len(), 4, "the main node and its nodes: {nodes:?}");
        let main = nodes
            .iter()
            .find(|n| n.pid == worker.pid())
            .expect("the main node");
        for node in nodes.iter().filter(|n| n.pid != worker.pid()) {
            assert_eq!(node.ppid, main.pid, "{node:?}");
            assert_eq!(node.pgrp, main.pgrp, "in the main node's group: {node:?}");
        }
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(worker.pid() as libc::pid_t, libc::SIGKILL);
        }
        let ended = worker.wait(LIMIT);
        assert_eq!(ended.status.code(), None);
        // PR_SET_PDEATHSIG: the nodes go with it.
        assert_all_gone(&session, Duration::from_secs(10));
    }
}

#[test]
fn a_node_that_dies_ends_the_run_with_an_error_naming_it() {
    for args in [
        &[
            "ring",
            "--transport",
            "ipc",
            "--send-ask",
            "1",
            "--num-nodes",
            "3",
            "--num-rounds",
            "4000000000",
        ][..],
        &["storm", "--num-nodes", "3", "--num-msgs", "4000000000"][..],
    ] {
        let worker = FixtureWorker::start(args, Reports::Stdout);
        let session = worker.session.clone();
        worker.wait_for_progress("messages", LIMIT);
        let victim = marked(&session)
            .into_iter()
            .find(|p| p.pid != worker.pid())
            .expect("a node");
        kill_all(std::slice::from_ref(&victim));
        let ended = worker.wait(LIMIT);
        assert_eq!(ended.status.code(), Some(1), "log:\n{}", ended.log);
        let Some(WorkerMessage::Error { message }) = ended.messages.last() else {
            panic!("no error message: {:?}", ended.messages.last());
        };
        assert!(
            message.contains(&format!("(pid {})", victim.pid))
                || message.contains("closed its socket"),
            "{message}"
        );
        assert_all_gone(&session, Duration::from_secs(10));
    }
}

#[test]
fn a_stopped_run_reports_a_partial_summary_and_ends_its_nodes() {
    for args in [
        &[
            "ring",
            "--transport",
            "ipc",
            "--mode",
            "ask",
            "--num-nodes",
            "3",
            "--num-rounds",
            "4000000000",
        ][..],
        &[
            "storm",
            "--num-nodes",
            "2",
            "--num-msgs",
            "4000000000",
            "--send-ask",
            "0",
        ][..],
    ] {
        let mut worker = FixtureWorker::start(args, Reports::Stdout);
        let session = worker.session.clone();
        worker.wait_for_progress("messages", LIMIT);
        worker.send("{\"type\":\"stop\"}");
        let ended = worker.wait(LIMIT);
        assert_reported_whole(&ended, &session);
        assert!(ended.log.contains("stopped early"), "{}", ended.log);
        assert!(ended.last_tick().counters["messages"] > 0);
    }
}

#[test]
fn bad_parameters_are_refused_before_anything_starts() {
    for (args, expected) in [
        (&["ring", "--crash-after", "5"][..], "needs --transport ipc"),
        (
            &["ring", "--transport", "ipc", "--num-nodes", "1"][..],
            "at least 2 members",
        ),
        (
            &["ring", "--transport", "ipc", "--num-nodes", "5000"][..],
            "at most 1001",
        ),
        (
            &["ring", "--transport", "ipc", "--runtime-threads", "2"][..],
            "inproc only",
        ),
    ] {
        let worker = FixtureWorker::start(args, Reports::Stdout);
        let session = worker.session.clone();
        let ended = worker.wait(LIMIT);
        assert_eq!(ended.status.code(), Some(1), "{args:?}: {}", ended.log);
        let kinds: Vec<_> = ended.messages.iter().map(WorkerMessage::kind).collect();
        assert_eq!(kinds, ["error"], "{args:?}");
        let WorkerMessage::Error { message } = &ended.messages[0] else {
            unreachable!()
        };
        assert!(message.contains(expected), "{args:?}: {message}");
        assert!(marked(&session).is_empty());
    }
    for (args, expected) in [
        (&["storm", "--num-nodes", "0"][..], "--num-nodes"),
        (&["storm", "--num-nodes", "100000"][..], "1..=1000"),
        (&["storm", "--send-ask", "2"][..], "possible values"),
        (&["ring", "--transport", "tcp"][..], "--transport"),
    ] {
        let ended = FixtureWorker::start(args, Reports::Stdout).wait(LIMIT);
        assert_eq!(ended.status.code(), Some(2), "clap's usage error: {args:?}");
        assert!(ended.log.contains(expected), "{args:?}: {}", ended.log);
    }
}

#[test]
fn a_node_started_by_hand_says_who_starts_nodes() {
    let ended = FixtureWorker::start(
        &[
            "ipc-node",
            "--role",
            "storm",
            "--node-id",
            "1",
            "--main-fd",
            "200",
        ],
        Reports::Stdout,
    )
    .wait(LIMIT);
    assert_eq!(ended.status.code(), Some(1));
    assert!(ended.messages.is_empty(), "a node writes no report");
    assert!(ended.log.contains("--main-fd 200"), "{}", ended.log);
}
