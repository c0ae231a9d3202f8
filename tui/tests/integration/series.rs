//! `benchtop run … --runs N --warmup K --sweep PARAM=…`: a series of sessions.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use benchtop_sessions::Status;
use benchtop_sessions::series::{RunRole, Series};

use crate::support::{benchtop, complete_lines, wait_until};

/// A short ring: a few hundred laps of a small ring, 100 ms intervals, no sampling.
const SHORT_RING: [&str; 8] = [
    "ring",
    "--num-nodes",
    "100",
    "--num-rounds",
    "300",
    "--interval",
    "100ms",
    "--profile=none",
];

fn run_series(dir: &Path, extra: &[&str]) -> std::process::Output {
    benchtop()
        .arg("run")
        .args(SHORT_RING)
        .args(extra)
        .args(["--quiet", "--record"])
        .arg(dir)
        .output()
        .unwrap()
}

#[test]
fn three_runs_and_a_warmup_make_a_series_that_loads_with_three_measured_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let out = run_series(&dir, &["--runs", "3", "--warmup", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // A line per run, before and after it.
    for n in ["1/4 warmup-1", "2/4 run-1", "4/4 run-3: complete"] {
        assert!(stderr.contains(n), "{n}: {stderr}");
    }
    let series = Series::load(&dir).unwrap();
    assert!(series.warnings.is_empty(), "{:?}", series.warnings);
    assert_eq!(series.meta.workload, "ring");
    let roles: Vec<RunRole> = series.meta.runs.iter().map(|r| r.role).collect();
    assert_eq!(
        roles,
        [RunRole::Warmup, RunRole::Run, RunRole::Run, RunRole::Run]
    );
    let measured = series.measured();
    assert_eq!(measured.len(), 3);
    assert!(
        measured.iter().all(
            |s| s.meta.status == Status::Complete && s.meta.workload.params["num-nodes"] == 100
        )
    );
    // The runs ran one after another, in the order series.json names them.
    let starts: Vec<&str> = series
        .sessions
        .iter()
        .map(|(_, s)| s.meta.started_at.as_str())
        .collect();
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("4 complete"), "{stdout}");
}

#[test]
fn a_sweep_of_a_parameter_the_workload_lacks_is_refused_before_any_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let out = run_series(&dir, &["--sweep", "num-nodez=100,1000"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no parameter `num-nodez`"), "{stderr}");
    assert!(!stderr.contains("starting"), "{stderr}");
    assert!(!dir.exists(), "nothing is written for a refused sweep");

    let out = run_series(&dir, &["--sweep", "num-nodes=100,zero"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("num-nodes=zero"), "{stderr}");
    assert!(!dir.exists());
}

#[test]
fn a_sweep_of_two_ring_sizes_writes_a_point_each_and_the_larger_ring_laps_slower() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let out = run_series(&dir, &["--sweep", "num-nodes=100,1000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let series = Series::load(&dir).unwrap();
    let points: Vec<&serde_json::Value> = series
        .meta
        .runs
        .iter()
        .map(|r| &r.point["num-nodes"])
        .collect();
    assert_eq!(points, [100, 1000]);
    let measured = series.measured();
    assert_eq!(measured.len(), 2);
    let nodes: Vec<&serde_json::Value> = measured
        .iter()
        .map(|s| &s.meta.workload.params["num-nodes"])
        .collect();
    assert_eq!(nodes, [100, 1000]);
    // A lap of ten times the nodes takes longer: the point reached the worker.
    let lap = |i: usize| crate::support::figure(measured[i], "time_taken_for_ring_messaging");
    assert!(lap(1) > lap(0), "{} vs {}", lap(0), lap(1));
}

#[test]
fn ctrl_c_stops_the_current_run_and_the_series_and_what_ran_still_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    // A ring that would take minutes, five times over.
    let conductor = benchtop()
        .args([
            "run",
            "ring",
            "--num-nodes",
            "1000",
            "--num-rounds",
            "100000000",
            "--interval",
            "100ms",
            "--profile=none",
            "--runs",
            "5",
            "--quiet",
            "--record",
        ])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rows = dir.join("run-1").join("timeseries.jsonl");
    wait_until("run-1's ticks", Duration::from_secs(60), || {
        complete_lines(&rows) >= 1
    });
    // SAFETY: SIGINT to the conductor this test started, as Ctrl-C in a terminal does.
    assert_eq!(
        unsafe { libc::kill(conductor.id() as i32, libc::SIGINT) },
        0
    );
    let output = conductor.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("1 of 5 runs") && stdout.contains("stopped"),
        "{stdout}"
    );
    let series = Series::load(&dir).unwrap();
    assert_eq!(series.meta.runs.len(), 1, "no run began after Ctrl-C");
    assert_eq!(series.sessions[0].1.meta.status, Status::Stopped);
    assert!(series.measured().is_empty());
    assert!(
        series
            .warnings
            .iter()
            .any(|w| w.contains("run-1: ended stopped")),
        "{:?}",
        series.warnings
    );
}
