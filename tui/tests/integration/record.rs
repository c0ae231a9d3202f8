//! Recording sessions end to end: the real ring worker under the sampler, and scripted
//! workers that misbehave.

use benchtop_sessions::Kind;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use benchtop::cli::RecordArgs;
use benchtop::record::{RecordOptions, Target, options_from, record};
use benchtop_sessions::Status;
use benchtop_sessions::store::Session;
use benchtop_workloads::protocol::{encode_histogram, new_latency_histogram};
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

use crate::support::{
    benchtop, complete_lines, deny_perf_events, figure, record_run, run_command, succeeded,
    wait_until,
};

/// `benchtop run ring <args> --quiet --record <dir>`, ready to run.
fn ring_command(dir: &Path, args: &[&str]) -> std::process::Command {
    run_command(dir, &[&["ring"], args].concat())
}

/// Runs [`ring_command`], requires success, and loads the session.
fn record_ring(dir: &Path, args: &[&str]) -> (std::process::Output, Session) {
    record_run(dir, &[&["ring"], args].concat())
}

#[test]
fn a_recorded_ring_session_holds_symbolized_stacks_ticks_and_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ring");
    let frequency = 499u64;
    let hz = frequency.to_string();
    let (output, session) = record_ring(
        &dir,
        &[
            "--num-nodes",
            "500",
            "--num-rounds",
            "2000",
            "--interval",
            "200ms",
            "--frequency",
            &hz,
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("final_sum_after_ring_messaging: 1000000"),
        "{stdout}"
    );
    assert_eq!(session.meta.status, Status::Complete);
    assert_eq!(
        figure(&session, "final_sum_after_ring_messaging"),
        1_000_000.0
    );
    assert_eq!(figure(&session, "num_nodes"), 500.0);

    // Callchains and symbolization: the ring's own functions are in the profile.
    let folded = std::fs::read_to_string(dir.join("cpu.folded")).unwrap();
    assert!(
        folded.contains("benchtop_workloads::ring::"),
        "no ring frames in cpu.folded:\n{}",
        &folded[..folded.len().min(4000)]
    );
    assert!(
        folded.lines().all(|l| l.starts_with("bt-ring;")),
        "process name is the root frame"
    );
    // One naming rule: no frame of the workers' code or of tokio is a bare word.
    let frames: std::collections::BTreeSet<&str> = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .flat_map(|(stack, _)| stack.split(';'))
        .collect();
    for bare in [
        "lock",
        "unlock",
        "poll",
        "drop",
        "run",
        "get",
        "{closure#0}",
        "{{closure}}",
    ] {
        assert!(
            !frames.contains(bare),
            "a bare `{bare}` frame in {frames:?}"
        );
    }
    let svg = std::fs::read_to_string(dir.join("cpu.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("benchtop_workloads"));

    // The same stacks as a pprof profile, and the latency plot.
    let pprof =
        benchtop_sessions::pprof::decode(&std::fs::read(dir.join("profile.pb.gz")).unwrap())
            .unwrap();
    let pprof_samples: i64 = pprof.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(
        pprof_samples as u64,
        session.profile(Kind::Cpu).unwrap().total_weight()
    );
    assert!(
        pprof
            .sample
            .iter()
            .all(|s| pprof.label(s, "process") == Some("bt-ring"))
    );
    let plot = std::fs::read_to_string(dir.join("latency.svg")).unwrap();
    assert!(plot.contains("<polyline"), "{plot}");

    assert_eq!(session.meta.sampling.unwind, "frame-pointers");
    assert_eq!(session.meta.sampling.symbols, "inlined");

    // Samples fit the CPU time the worker used at the chosen frequency.
    let samples = session.meta.sampling.samples;
    let cpu_s = session.meta.worker.cpu_time_s.unwrap();
    let expected = cpu_s * frequency as f64;
    assert!(
        (samples as f64) > 0.5 * expected && (samples as f64) < 1.5 * expected + 10.0,
        "{samples} samples for {cpu_s:.2}s of CPU at {frequency} Hz"
    );
    let wall_s = session.rows.last().unwrap().t_s;
    let cores = session.meta.host.cores as f64;
    assert!((samples as f64) < (wall_s + 1.0) * frequency as f64 * cores);

    // session.json round-trips: what was loaded writes back to the same document.
    let text = std::fs::read_to_string(dir.join("session.json")).unwrap();
    let on_disk: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_value(&session.meta).unwrap(), on_disk);
    assert_eq!(on_disk["status"], "complete");
    assert_eq!(on_disk["workload"]["params"]["num-nodes"], 500);

    // latency.hlog reads back through the hdrhistogram interval-log reader to the same
    // total count as the ticks.
    let hlog = std::fs::read(dir.join("latency.hlog")).unwrap();
    let mut hlog_count = 0u64;
    let mut deserializer = hdrhistogram::serialization::Deserializer::new();
    for entry in IntervalLogIterator::new(&hlog) {
        if let LogEntry::Interval(interval) = entry.unwrap() {
            let bytes = base64_decode(interval.encoded_histogram());
            let h: hdrhistogram::Histogram<u64> =
                deserializer.deserialize(&mut &bytes[..]).unwrap();
            hlog_count += h.len();
        }
    }
    let tick_count: u64 = session
        .rows
        .iter()
        .filter_map(|r| r.latency.get("lap"))
        .map(|p| p.count)
        .sum();
    assert!(tick_count > 0);
    assert_eq!(hlog_count, tick_count);
    let per_row: Vec<(f64, u64)> = session
        .rows
        .iter()
        .map(|r| (r.t_s, r.latency.get("lap").map_or(0, |p| p.count)))
        .collect();
    assert_eq!(
        tick_count, 2000,
        "one lap per round; rows (t, laps): {per_row:?}; warnings: {:?}",
        session.meta.warnings
    );
    let lap = session.rows[0].latency["lap"];
    assert!(
        lap.p50 > 1_000,
        "a lap of 500 hops takes microseconds: {lap:?}"
    );

    // Monitors ran, and the worker's lifetime peak RSS came from wait4.
    let resources = session
        .rows
        .iter()
        .filter_map(|r| r.resources)
        .next_back()
        .unwrap();
    assert!(resources.rss_bytes > 0 && resources.threads >= 1);
    let peak = session.meta.worker.peak_rss_bytes.unwrap();
    assert!(peak > 1 << 20 && peak < 1 << 30, "{peak} bytes");

    // The worker's own lines are kept, and `show` prints the session.
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    assert!(log.contains("time_taken_for_ring_messaging"), "{log}");
    let show = benchtop().arg("show").arg(&dir).output().unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success());
    assert!(
        shown.contains("final_sum_after_ring_messaging") && shown.contains("complete"),
        "{shown}"
    );
    assert!(shown.contains("peak RSS"), "{shown}");
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("hlog payloads are base64")
}

#[test]
fn the_ask_ring_sums_correctly_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ask");
    let (_, session) = record_ring(
        &dir,
        &[
            "--mode",
            "ask",
            "--num-nodes",
            "200",
            "--num-rounds",
            "100",
            "--profile",
            "none",
        ],
    );
    assert_eq!(figure(&session, "final_sum_after_ring_messaging"), 20_000.0);
    assert!(!session.meta.sampling.enabled);
    assert!(!dir.join("cpu.folded").exists());
}

#[test]
fn without_perf_permission_the_run_goes_on_without_stacks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("denied");
    let mut command = ring_command(&dir, &["--num-nodes", "100", "--num-rounds", "100"]);
    deny_perf_events(&mut command);
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    assert!(!session.meta.sampling.enabled);
    let reason = session.meta.sampling.reason.clone().unwrap();
    assert!(reason.contains("perf_event_paranoid"), "{reason}");
    assert!(
        session
            .meta
            .warnings
            .iter()
            .any(|w| w.contains("no stack sampling")),
        "{:?}",
        session.meta.warnings
    );
    assert!(!dir.join("cpu.folded").exists());
    assert_eq!(figure(&session, "final_sum_after_ring_messaging"), 10_000.0);
}

/// Starts `benchtop run ring` that would run for hours, recording into `dir`, and waits
/// for `ticks` rows in its timeseries.
pub(crate) fn start_endless_ring(dir: &Path, ticks: usize) -> std::process::Child {
    start_endless_ring_with(dir, ticks, |_| {})
}

/// [`start_endless_ring`], with `adjust` applied to the command before it starts.
pub(crate) fn start_endless_ring_with(
    dir: &Path,
    ticks: usize,
    adjust: impl FnOnce(&mut std::process::Command),
) -> std::process::Child {
    let mut command = benchtop();
    command
        .args([
            "run",
            "ring",
            "--num-nodes",
            "1000",
            "--num-rounds",
            "100000000",
        ])
        .args([
            "--interval",
            "100ms",
            "--quiet",
            "--profile",
            "none",
            "--record",
        ])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    adjust(&mut command);
    let conductor = command.spawn().unwrap();
    let rows = dir.join("timeseries.jsonl");
    wait_until("ticks", Duration::from_secs(60), || {
        complete_lines(&rows) >= ticks
    });
    conductor
}

#[test]
fn a_worker_killed_mid_run_leaves_a_crashed_session_with_its_ticks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("killed");
    let conductor = start_endless_ring(&dir, 2);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("session.json")).unwrap()).unwrap();
    let pid = meta["worker"]["pid"].as_i64().unwrap() as i32;
    // SAFETY: kill(2) on the worker this test started through benchtop.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let output = conductor.wait_with_output().unwrap();
    assert!(!output.status.success(), "a crashed run exits non-zero");
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Crashed);
    assert!(session.rows.len() >= 2);
    assert!(
        session.meta.warnings.iter().any(|w| w.contains("signal 9")),
        "{:?}",
        session.meta.warnings
    );
}

/// The on-CPU samples stacks.jsonl of `dir` holds, and its intervals that hold some.
fn interval_samples(dir: &Path) -> (u64, usize) {
    let opts = benchtop_profile::limits::LoadOptions::default();
    let Ok(Some(stacks)) = benchtop_profile::intervals::IntervalStacks::load(dir, &opts) else {
        return (0, 0);
    };
    let per_interval: Vec<u64> = stacks
        .intervals
        .values()
        .map(|i| i.weights[Kind::Cpu].iter().map(|&(_, _, w)| w).sum())
        .filter(|&w| w > 0)
        .collect();
    (per_interval.iter().sum(), per_interval.len())
}

#[test]
fn a_recorder_killed_mid_run_keeps_what_its_intervals_recorded_for_show_and_export() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cut");
    let mut conductor = benchtop()
        .args([
            "run",
            "ring",
            "--num-nodes",
            "1000",
            "--num-rounds",
            "100000000",
        ])
        .args([
            "--interval",
            "100ms",
            "--duration",
            "60s",
            "--quiet",
            "--record",
        ])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("three intervals of stacks", Duration::from_secs(60), || {
        interval_samples(&dir).1 >= 3
    });
    // SIGKILL: the recorder writes nothing more, its whole-run files included.
    conductor.kill().unwrap();
    conductor.wait().unwrap();
    let id = Session::load(&dir).unwrap().meta.id;
    // Its worker outlives it; end it by its session (nothing else is touched).
    succeeded(benchtop().current_dir(tmp.path()).args([
        "reap",
        "--signal",
        "kill",
        "--session",
        &id,
    ]));
    assert!(!dir.join("cpu.folded").exists());
    let (recorded, intervals) = interval_samples(&dir);
    assert!(intervals >= 3 && recorded > 0, "{recorded} in {intervals}");

    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Crashed);
    assert_eq!(
        session.profiles[Kind::Cpu]
            .as_ref()
            .map_or(0, |t| t.total_weight()),
        recorded,
        "{:?}",
        session.warnings
    );
    let show =
        String::from_utf8_lossy(&succeeded(benchtop().arg("show").arg(&dir)).stdout).into_owned();
    assert!(
        show.contains("rebuilt from the") && show.contains("status    crashed"),
        "{show}"
    );
    succeeded(
        benchtop()
            .arg("export")
            .arg(&dir)
            .args(["--format", "pprof"]),
    );
    let profile =
        benchtop_sessions::pprof::decode(&std::fs::read(dir.join("profile.pb.gz")).unwrap())
            .unwrap();
    let samples: i64 = profile.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(samples as u64, recorded);
}

#[test]
fn ctrl_c_stops_the_worker_and_keeps_a_stopped_session_with_its_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("interrupted");
    let conductor = start_endless_ring(&dir, 1);
    // SAFETY: SIGINT to the conductor this test started, as Ctrl-C in a terminal does.
    assert_eq!(
        unsafe { libc::kill(conductor.id() as i32, libc::SIGINT) },
        0
    );
    let output = conductor.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Stopped);
    assert!(figure(&session, "final_sum_after_ring_messaging") > 0.0);
}

#[test]
fn a_duration_ends_the_run_as_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("timed");
    let (output, session) = record_ring(
        &dir,
        &[
            "--num-nodes",
            "1000",
            "--num-rounds",
            "100000000",
            "--duration",
            "1s",
            "--interval",
            "200ms",
            "--symbols",
            "names",
        ],
    );
    assert_eq!(session.meta.status, Status::Complete);
    // The run did not end by itself: it says what ended it.
    assert_eq!(
        session.meta.ended_by,
        Some(benchtop_sessions::EndedBy::Duration)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("(complete, duration reached)"), "{stdout}");
    assert!(
        session
            .summary_text()
            .contains("status    complete (duration reached; worker: exit code 0)"),
        "{}",
        session.summary_text()
    );
    assert!(session.rows.len() >= 3);
    assert_eq!(session.meta.sampling.symbols, "names");
    let folded = std::fs::read_to_string(dir.join("cpu.folded")).unwrap();
    assert!(
        folded.contains("benchtop_workloads::ring::"),
        "ELF symbol names suffice"
    );
}

fn script_options(dir: &Path, script: String) -> RecordOptions {
    RecordOptions {
        target: Target::Worker,
        workload: "script".into(),
        params: BTreeMap::new(),
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        command_line: vec!["test".into()],
        ..options_from(&RecordArgs {
            record: Some(dir.to_path_buf()),
            quiet: true,
            profile: benchtop_sessions::KindSet::NONE,
            ..RecordArgs::default()
        })
    }
}

const HELLO: &str = r#"{"type":"hello","protocol":1,"workload":"script","params":{"n":1},"metrics":[{"name":"ops","kind":"counter","unit":"ops"},{"name":"lat","kind":"histogram","unit":"ns"}]}"#;

#[test]
fn malformed_oversized_and_truncated_report_lines_are_reported_and_nothing_is_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bad-lines");
    let mut histogram = new_latency_histogram();
    for v in 1..=100u64 {
        histogram.record(v * 1000).unwrap();
    }
    let encoded = encode_histogram(&histogram);
    let script = format!(
        r#"echo '{HELLO}' >&3
echo '{{"type":"ready"}}' >&3
read start
echo '{{"type":"tick","t_ns":100000000,"counters":{{"ops":10}},"histograms":{{"lat":"{encoded}"}}}}' >&3
echo 'this is not json' >&3
head -c 5000000 /dev/zero | tr '\0' x >&3; echo >&3
echo '{{"type":"tick","t_ns":200000000,"counters":{{"ops":30}},"histograms":{{"lat":"!!"}}}}' >&3
echo '{{"type":"summary","figures":[{{"name":"ops","value":30,"unit":"ops"}}]}}' >&3
printf '{{"type":"tick","t_ns":3000' >&3
"#
    );
    let outcome = record(&script_options(&dir, script)).unwrap();
    assert_eq!(outcome.status, Status::Complete);
    let session = Session::load(&dir).unwrap();
    let warnings = session.meta.warnings.join("\n");
    assert!(
        warnings.contains("line 4: not a valid message"),
        "{warnings}"
    );
    assert!(warnings.contains("5000000 bytes"), "{warnings}");
    assert!(warnings.contains("histogram \"lat\""), "{warnings}");
    assert!(warnings.contains("truncated"), "{warnings}");
    assert_eq!(session.rows.len(), 2, "both good ticks are kept");
    assert_eq!(session.rows[1].counters["ops"], 30);
    assert_eq!(session.rows[1].rates["ops"], 200.0);
    assert_eq!(session.latency.len(), 1);
    assert_eq!(session.latency[0].histogram.len(), 100);
    assert_eq!(session.meta.summary[0].value, 30.0);
    assert_eq!(session.meta.workload.params["n"], 1);
}

#[test]
fn a_worker_of_another_protocol_version_is_refused_and_ended() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("version");
    let script = r#"echo '{"type":"hello","protocol":99,"workload":"future"}' >&3
echo '{"type":"ready"}' >&3
read start
sleep 60
"#
    .to_owned();
    let started = std::time::Instant::now();
    let outcome = record(&script_options(&dir, script)).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the worker was ended"
    );
    assert_eq!(outcome.status, Status::Crashed);
    let session = Session::load(&dir).unwrap();
    let warnings = session.meta.warnings.join("\n");
    assert!(
        warnings.contains("version 99") && warnings.contains("refused"),
        "{warnings}"
    );
}

#[test]
fn a_worker_that_fails_before_hello_leaves_a_crashed_session_with_its_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("early");
    let script = "echo 'cannot open the input' >&2; exit 3".to_owned();
    let outcome = record(&script_options(&dir, script)).unwrap();
    assert_eq!(outcome.status, Status::Crashed);
    let session = Session::load(&dir).unwrap();
    assert!(
        session
            .meta
            .warnings
            .iter()
            .any(|w| w.contains("exit code 3")),
        "{:?}",
        session.meta.warnings
    );
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    assert!(log.contains("cannot open the input"));
}

#[test]
fn a_worker_that_ignores_stop_gets_sigterm_then_sigkill() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("stubborn");
    let script = format!(
        r#"echo '{HELLO}' >&3
echo '{{"type":"ready"}}' >&3
read start
trap '' TERM
echo '{{"type":"tick","t_ns":100000000,"counters":{{"ops":1}}}}' >&3
while :; do sleep 0.2; done
"#
    );
    let mut opts = script_options(&dir, script);
    opts.duration = Some(Duration::from_millis(500));
    let started = std::time::Instant::now();
    let outcome = record(&opts).unwrap();
    let took = started.elapsed();
    // stop, 5 s grace, SIGTERM (ignored), 2 s grace, SIGKILL.
    assert!(
        took >= Duration::from_secs(7) && took < Duration::from_secs(30),
        "{took:?}"
    );
    // It ignored the stop and had to be killed: `killed`, not `complete`, though the
    // duration was reached.
    assert_eq!(outcome.status, Status::Killed);
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Killed);
    assert_eq!(session.meta.status_words(), "killed");
    let warnings = session.meta.warnings.join("\n");
    assert!(
        warnings.contains("ignored stop") && warnings.contains("signal 9"),
        "{warnings}"
    );
    assert!(warnings.contains("no summary"), "{warnings}");
    assert_eq!(session.rows.len(), 1);
}

#[test]
fn cycles_are_sampled_where_the_machine_has_a_pmu_and_refused_up_front_elsewhere() {
    // The kernel lists a core PMU as event source `cpu` (x86) or `armv8_pmuv3*` (arm64).
    let has_pmu = std::fs::read_dir("/sys/bus/event_source/devices")
        .unwrap()
        .filter_map(Result::ok)
        .any(|d| {
            let name = d.file_name().to_string_lossy().into_owned();
            name == "cpu" || name == "cpu_core" || name.starts_with("armv8_pmu")
        });
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cycles");
    let output = ring_command(
        &dir,
        &[
            "--num-nodes",
            "10",
            "--num-rounds",
            "10",
            "--event",
            "cycles",
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if has_pmu {
        assert!(output.status.success(), "{stderr}");
        let session = Session::load(&dir).unwrap();
        assert_eq!(session.meta.sampling.event, "cycles");
    } else {
        assert!(!output.status.success());
        assert!(stderr.contains("no `cycles` event"), "{stderr}");
        assert!(
            !dir.exists(),
            "refused before a session or a worker was started"
        );
    }
}

#[test]
fn a_worker_that_lingers_after_its_summary_is_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lingering");
    let script = format!(
        r#"echo '{HELLO}' >&3
echo '{{"type":"ready"}}' >&3
read start
echo '{{"type":"summary","figures":[{{"name":"ops","value":1,"unit":"ops"}}]}}' >&3
sleep 60
"#
    );
    let started = std::time::Instant::now();
    let outcome = record(&script_options(&dir, script)).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(outcome.status, Status::Complete);
    let warnings = Session::load(&dir).unwrap().meta.warnings.join("\n");
    assert!(
        warnings.contains("did not exit after its summary"),
        "{warnings}"
    );
}

#[test]
fn a_worker_repeating_a_refused_hello_and_ignoring_sigterm_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repeating");
    let script = r#"trap '' TERM
while :; do echo '{"type":"hello","protocol":99,"workload":"x"}' >&3; sleep 0.1; done
"#
    .to_owned();
    let started = std::time::Instant::now();
    let outcome = record(&script_options(&dir, script)).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(outcome.status, Status::Crashed);
    let warnings = Session::load(&dir).unwrap().meta.warnings.join("\n");
    assert_eq!(warnings.matches("version 99").count(), 1, "{warnings}");
}

#[test]
fn a_worker_that_cannot_start_leaves_a_crashed_session_saying_why() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("no-such-worker");
    let mut opts = script_options(&dir, String::new());
    opts.program = "/nonexistent/benchtop-worker".into();
    let err = record(&opts).unwrap_err().to_string();
    assert!(
        err.contains("cannot start the worker /nonexistent/benchtop-worker"),
        "{err}"
    );
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Crashed);
    assert!(
        session.warnings.is_empty(),
        "finished, not cut off: {:?}",
        session.warnings
    );
    let warnings = session.meta.warnings.join("\n");
    assert!(warnings.contains("No such file"), "{warnings}");
}

#[test]
fn a_live_link_sees_rows_histograms_and_stacks_and_can_stop_the_run() {
    use benchtop::record::live::{LiveEvent, LiveLink};
    use benchtop_record::Notice;

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live");
    let (link, events) = LiveLink::channel();
    let control = link.control();
    let opts = RecordOptions {
        target: Target::Worker,
        workload: "ring".into(),
        params: BTreeMap::new(),
        program: env!("CARGO_BIN_EXE_benchtop").into(),
        args: [
            "worker",
            "ring",
            "--num-nodes",
            "100",
            "--num-rounds",
            "4000000000",
        ]
        .map(Into::into)
        .to_vec(),
        command_line: vec!["test".into()],
        live: Some(link),
        ..options_from(&RecordArgs {
            record: Some(dir.clone()),
            quiet: true,
            interval: Duration::from_millis(200),
            ..RecordArgs::default()
        })
    };
    let recorder = std::thread::spawn(move || record(&opts));
    let (mut spawned, mut started, mut rows, mut frames) = (false, false, 0, Vec::new());
    let ring = |frames: &[String]| {
        frames
            .iter()
            .any(|f| f.contains("benchtop_workloads::ring"))
    };
    while rows < 4 || !ring(&frames) {
        match events
            .recv_timeout(Duration::from_secs(20))
            .expect("live events")
        {
            LiveEvent::Spawned { dir: d, pid } => {
                assert_eq!(d, dir);
                assert!(pid > 0);
                spawned = true;
            }
            LiveEvent::Started {
                throughput,
                latency,
                sampling,
            } => {
                assert_eq!(throughput.as_deref(), Some("messages"));
                assert_eq!(latency.as_deref(), Some("lap"));
                assert!(sampling.contains("Hz"), "{sampling}");
                started = true;
            }
            LiveEvent::Row { row, histograms } => {
                assert!(row.rates.contains_key("messages"), "{row:?}");
                let (name, lap) = &histograms[0];
                assert_eq!(name, "lap");
                assert_eq!(lap.len(), row.latency["lap"].count);
                rows += 1;
            }
            // The stacks come as each interval's chunk of stacks.jsonl.
            LiveEvent::IntervalStacks(chunk) => {
                assert!(!chunk.intervals.is_empty() || !chunk.frames.is_empty());
                frames.extend(chunk.frames.iter().map(|(_, name)| name.clone()));
            }
            _ => {}
        }
    }
    assert!(spawned && started);

    // A snapshot asked for during the run is written into the session at once.
    assert!(!dir.join("cpu.folded").exists());
    control.save();
    loop {
        if let LiveEvent::Notice(notice @ Notice::SnapshotSaved { .. }) = events
            .recv_timeout(Duration::from_secs(20))
            .expect("live events")
        {
            let text = notice.to_string();
            assert!(
                text.contains("cpu.folded") && text.contains("threads.csv"),
                "{text}"
            );
            break;
        }
    }
    let saved = std::fs::read_to_string(dir.join("cpu.folded")).unwrap();
    assert!(saved.contains("benchtop_workloads::ring"), "{saved}");
    assert!(dir.join("offcpu.folded").exists() && dir.join("threads.csv").exists());

    control.stop();
    let outcome = recorder.join().unwrap().unwrap();
    assert_eq!(outcome.status, Status::Stopped);
    assert!(outcome.summary.iter().any(|l| l.starts_with("final_sum")));
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Stopped);
}

#[test]
fn no_progress_line_follows_the_end_of_a_run_and_the_short_last_row_is_no_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    // Not --quiet: stderr is not a terminal, so the progress comes as one line per row.
    let out = benchtop()
        .args([
            "run",
            "ring",
            "--num-rounds",
            "100000000",
            "--duration",
            "1200ms",
            "--profile",
            "none",
            "--record",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (_, after) = stderr
        .split_once("writing the session")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        !after.contains("messages/s"),
        "a progress line after the run ended:\n{stderr}"
    );
    // The last tick, 0.2 s after the row before it, is the run's last row, not a merge.
    assert!(!stderr.contains("ticks came sooner"), "{stderr}");
    let session = Session::load(&dir).unwrap();
    assert!(
        session.rows.len() >= 2,
        "{} rows\n{stderr}",
        session.rows.len()
    );
}
