//! `udp-echo` recorded end to end: a sweep is one session with a line per point.

use benchtop_sessions::Status;

use crate::support::{figure, record_run};

#[test]
fn a_udp_echo_sweep_session_logs_one_phase_line_per_point_and_the_table() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sweep");
    let (output, session) = record_run(
        &dir,
        &[
            "udp-echo",
            "--sweep",
            "buffer-size=64,1024,9000",
            "--num-iters",
            "300",
            "--interval",
            "200ms",
        ],
    );
    assert_eq!(session.meta.status, Status::Complete);
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    let phases: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("phase "))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        phases,
        [
            "phase buffer-size=64",
            "phase buffer-size=1024",
            "phase buffer-size=9000"
        ],
        "{log}"
    );
    // The table at the end, a row per point, in the log and on standard output.
    let stdout = String::from_utf8_lossy(&output.stdout);
    for text in [&log[..], &stdout[..]] {
        let rows = text
            .lines()
            .filter(|l| l.starts_with("buffer-size="))
            .count();
        assert!(rows >= 3, "{text}");
    }
    assert_eq!(figure(&session, "buffer-size=9000:timeouts"), 0.0);
    assert!(figure(&session, "buffer-size=1024:messages_per_second") > 0.0);
    // The server ran as a process of its own and said what it echoed.
    assert!(log.contains("server_messages_echoed: 900"), "{log}");
    // One result per point in session.json, and the curves in phases.svg.
    let points: Vec<&str> = session
        .meta
        .phases
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        points,
        ["buffer-size=64", "buffer-size=1024", "buffer-size=9000"]
    );
    let plot = std::fs::read_to_string(dir.join("phases.svg")).unwrap();
    assert!(
        plot.contains("messages_per_second") && plot.matches("<circle").count() >= 3,
        "{plot}"
    );
}

#[test]
fn an_oversized_buffer_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let output = crate::support::run_command(
        &tmp.path().join("refused"),
        &["udp-echo", "--buffer-size", "2000000"],
    )
    .output()
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--buffer-size 2000000: larger than the 1 MiB"),
        "{stderr}"
    );
}

#[test]
fn a_timed_sweep_shares_the_recordings_duration_among_its_points() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("timed");
    let (_, session) = record_run(
        &dir,
        &[
            "udp-echo",
            "--sweep",
            "num-clients=1,2",
            "--duration",
            "1s",
            "--backend",
            "mmsg",
        ],
    );
    assert_eq!(session.meta.status, Status::Complete);
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    let phases = log.lines().filter(|l| l.starts_with("phase ")).count();
    assert_eq!(phases, 2, "{log}");
    assert!(!log.contains("stopped early"), "{log}");
    for point in ["num-clients=1", "num-clients=2"] {
        let took = figure(&session, &format!("{point}:messages_per_second"));
        assert!(took > 0.0, "{point}");
    }
}

#[test]
fn a_dpdk_echo_records_every_round_trip_between_two_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dpdk");
    let (_, session) = record_run(
        &dir,
        &[
            "udp-echo",
            "--backend",
            "dpdk",
            "--num-iters",
            "10000",
            "--interval",
            "200ms",
        ],
    );
    assert_eq!(session.meta.status, Status::Complete);
    assert_eq!(figure(&session, "messages"), 10_000.0);
    assert_eq!(figure(&session, "payload_errors"), 0.0);
    assert_eq!(figure(&session, "timeouts"), 0.0);
    // Every round trip is in the latency log, interval by interval.
    let timed: u64 = session
        .latency
        .iter()
        .filter(|i| i.tag == "rtt")
        .map(|i| i.histogram.len())
        .sum();
    assert_eq!(timed, 10_000);
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    assert!(log.contains("dpdk back end (memif, --no-huge)"), "{log}");
    assert!(log.contains("server_messages_echoed: 10000"), "{log}");
}
