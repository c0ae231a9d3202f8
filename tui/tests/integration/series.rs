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

/// The `<g class="…">` groups of an SVG that benchtop drew, each up to its `</g>`.
fn svg_groups<'a>(svg: &'a str, class: &str) -> Vec<&'a str> {
    svg.split(&format!("<g class=\"{class}\">"))
        .skip(1)
        .map(|g| g.split("</g>").next().unwrap())
        .collect()
}

#[test]
fn the_messenger_study_s_sweep_writes_eight_points_and_both_figures_with_a_line_per_allocation_and_server()
 {
    // The study's command (docs/workloads.md, "response curves") at small, fast
    // parameters: clients × CPU allocation × server, seastar's poll mode throughout.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let out = benchtop()
        .args(["run", "messenger", "--msgtime", "1", "--depth", "16"])
        .args(["--listen", "127.0.0.1:0", "--profile", "none"])
        .args([
            "--sweep",
            "clients=1,2",
            "--sweep",
            "cpu-alloc=balanced,separated",
            "--sweep",
            "server=crimson,async",
            "--poll-mode",
        ])
        .args(["--quiet", "--record"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let series = Series::load(&dir).unwrap();
    assert_eq!(series.measured().len(), 8, "{:?}", series.warnings);
    assert_eq!(series.meta.sweep, ["clients", "cpu-alloc", "server"]);
    // Every point holds the figures the two figures draw, each run with its server, and
    // every run polled its clients (the async server's pool sleeps: the note says so).
    let points = benchtop_sessions::curves::series_points(&series);
    assert_eq!(points.len(), 8);
    for point in &points {
        let figure = |name: &str| {
            point
                .figures
                .iter()
                .find(|f| f.name == name)
                .map(|f| f.value)
        };
        assert_eq!(point.runs, 1, "{:?}", point.values);
        assert!(figure("iops").is_some_and(|v| v > 0.0), "{point:?}");
        assert!(figure("latency_ms").is_some_and(|v| v > 0.0), "{point:?}");
    }
    for (_, session) in &series.sessions {
        let params = &session.meta.workload.params;
        assert_eq!(params["poll-mode"], "all", "{params:?}");
        let polled = session
            .meta
            .summary
            .iter()
            .any(|f| f.name == "server_busy_percent");
        assert_eq!(polled, params["server"] == "crimson", "{params:?}");
    }
    assert!(stdout.contains("curves: "), "{stdout}");
    let svg = std::fs::read_to_string(dir.join("curves.svg")).unwrap();
    // Latency against IOPS, and IOPS against clients: a line per allocation and server,
    // a point per client count on each.
    let response = svg_groups(&svg, "response");
    assert_eq!(response.len(), 1, "{svg}");
    assert!(response[0].contains("against iops"), "{}", response[0]);
    let figures = svg_groups(&svg, "figure");
    let iops: Vec<&str> = figures
        .iter()
        .filter(|g| g.contains(">iops (IOPS)<"))
        .copied()
        .collect();
    assert_eq!(iops.len(), 1);
    assert!(iops[0].contains(">clients<"), "{}", iops[0]);
    for g in [response[0], iops[0]] {
        assert_eq!(g.matches("<polyline").count(), 4, "{g}");
        assert_eq!(g.matches("<circle").count(), 8, "{g}");
    }
    for line in [
        "cpu-alloc=balanced server=crimson",
        "cpu-alloc=balanced server=async",
        "cpu-alloc=separated server=crimson",
        "cpu-alloc=separated server=async",
    ] {
        assert!(svg.contains(&format!("<title>{line}</title>")), "{line}");
    }
}

#[test]
fn a_ring_sweep_of_three_sizes_draws_a_line_of_three_points_and_exports_per_point() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let out = run_series(&dir, &["--sweep", "num-nodes=100,1000,5000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let series = Series::load(&dir).unwrap();
    assert_eq!(series.measured().len(), 3, "{:?}", series.warnings);
    let svg = std::fs::read_to_string(dir.join("curves.svg")).unwrap();
    // Rate against lap p50 (the response curve), and a chart per result figure.
    let response = svg_groups(&svg, "response");
    assert_eq!(response.len(), 1, "{svg}");
    assert!(response[0].contains("lap p50 against messages_per_second"));
    let figures = svg_groups(&svg, "figure");
    assert!(
        figures
            .iter()
            .any(|g| g.contains(">messages_per_second (messages/s)<"))
    );
    for g in response.iter().chain(&figures) {
        assert_eq!(g.matches("<polyline").count(), 1, "{g}");
        assert_eq!(g.matches("<circle").count(), 3, "{g}");
    }
    for tick in [">100<", ">1000<", ">5000<", ">num-nodes<"] {
        assert!(figures[0].contains(tick), "{tick}");
    }

    // export redraws the same curves, and writes each point's files apart.
    let out_dir = tmp.path().join("out");
    let out = benchtop()
        .arg("export")
        .arg(&dir)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{listed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(out_dir.join("curves.svg")).unwrap(),
        svg
    );
    for n in 1..=3 {
        let hgrm = out_dir.join(format!("point-{n}/latency.hgrm"));
        assert!(listed.contains(&hgrm.display().to_string()), "{listed}");
        assert!(out_dir.join(format!("point-{n}/latency.svg")).exists());
    }
    let md = std::fs::read_to_string(out_dir.join("summary.md")).unwrap();
    assert!(md.contains("| num-nodes=5000 | 1/1 |"), "{md}");
    assert!(md.contains("- `point-3/`: num-nodes=5000"), "{md}");
    let csv = std::fs::read_to_string(out_dir.join("summary.csv")).unwrap();
    assert!(
        csv.starts_with("run,point,section,figure,value,unit\n"),
        "{csv}"
    );
    assert!(
        csv.lines()
            .any(|l| l.starts_with("run-3,num-nodes=5000,latency,lap p50,")),
        "{csv}"
    );
}

#[test]
fn a_series_of_repeated_runs_exports_their_latency_added_together() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let out = run_series(&dir, &["--runs", "2"]);
    assert!(out.status.success());
    let series = Series::load(&dir).unwrap();
    let total: u64 = series
        .measured()
        .iter()
        .map(|s| {
            let mut notes = Vec::new();
            s.merged_latency(&mut notes)["lap"].len()
        })
        .sum();
    let out = benchtop()
        .arg("export")
        .arg(&dir)
        .args(["--format", "hgrm,curves,summary-md"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // One point: the files are named as a session's, in the series directory.
    let hgrm = std::fs::read_to_string(dir.join("latency.hgrm")).unwrap();
    assert!(
        hgrm.contains(&format!("Total count    = {total:>12}]")),
        "{total}: {hgrm}"
    );
    assert!(!dir.join("point-1").exists());
    assert!(stderr.contains("no curves.svg written"), "{stderr}");
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("measured runs: 2 complete of 2"), "{md}");
}
