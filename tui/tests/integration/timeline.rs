//! Stacks over time: `show --range` of a program that spends its first half in one
//! function and its second half in another, per-interval weights against the sampler's
//! own count, a recorder killed mid-run, and bad ranges.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use benchtop_sessions::intervals::IntervalStacks;
use benchtop_sessions::limits::LoadOptions;
use benchtop_sessions::store::Session;

use crate::support::{benchtop, succeeded, wait_until};

/// Builds tests/data/timeline/halves.c into `dir` with the system's C compiler.
fn build_halves(dir: &Path) -> PathBuf {
    build_fixture(dir, "halves")
}

/// Builds tests/data/timeline/NAME.c into `dir` with the system's C compiler.
fn build_fixture(dir: &Path, name: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/timeline")
        .join(format!("{name}.c"));
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&source)
        .output()
        .expect("cc (gcc) is needed: scripts/test installs it");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn record(dir: &Path, exe: &Path, ms: &str) -> Output {
    record_with(dir, exe, &[ms])
}

/// Records `exe ARGS…` at 200 ms intervals, on-CPU stacks only.
fn record_with(dir: &Path, exe: &Path, args: &[&str]) -> Output {
    succeeded(
        benchtop()
            .args([
                "run",
                "--quiet",
                "--profile",
                "cpu",
                "--interval",
                "200ms",
                "--record",
            ])
            .arg(dir)
            .arg("--")
            .arg(exe)
            .args(args),
    )
}

fn show(dir: &Path, range: &str) -> Output {
    benchtop()
        .arg("show")
        .arg(dir)
        .args(["--range", range, "--top", "5"])
        .output()
        .unwrap()
}

/// The names in the top-functions table of `show --range` output.
fn top_functions(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("top functions, on-CPU"))
        .skip(2)
        .take_while(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_owned))
        .collect()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn each_half_of_the_run_names_only_its_own_function() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_halves(tmp.path());
    let dir = tmp.path().join("session");
    record(&dir, &exe, "3000");

    let first = stdout(&show(&dir, "..1200ms"));
    let second = stdout(&show(&dir, "1800ms.."));
    let (top1, top2) = (top_functions(&first), top_functions(&second));
    assert!(top1.iter().any(|f| f == "first_half"), "{first}");
    assert!(!top1.iter().any(|f| f == "second_half"), "{first}");
    assert!(top2.iter().any(|f| f == "second_half"), "{second}");
    assert!(!top2.iter().any(|f| f == "first_half"), "{second}");
    // The first half's function leads it.
    assert_eq!(
        top1.first().map(String::as_str),
        Some("first_half"),
        "{first}"
    );
    assert_eq!(
        top2.first().map(String::as_str),
        Some("second_half"),
        "{second}"
    );

    // Every sample the sampler took is in some interval: the weights add up to the
    // sampler's own count (session.json), not to a file made from the same weights.
    let session = Session::load(&dir).unwrap();
    let stacks = IntervalStacks::load(&dir, &LoadOptions::default())
        .unwrap()
        .expect("stacks.jsonl");
    assert!(
        session.meta.sampling.samples > 200,
        "{:?}",
        session.meta.sampling
    );
    assert_eq!(stacks.cpu_samples(), session.meta.sampling.samples);
    assert!(
        stacks.intervals.len() >= 10,
        "3 s in 200 ms intervals: {} intervals",
        stacks.intervals.len()
    );
    assert!(stacks.warnings.is_empty(), "{:?}", stacks.warnings);

    // The two halves of one session compared like two sessions: second_half grew most,
    // first_half shrank most, with the differential flamegraphs written.
    let out_dir = tmp.path().join("halves-compared");
    let compared = benchtop()
        .arg("compare")
        .arg(&dir)
        .arg(&dir)
        .args(["--range-a", "..1200ms", "--range-b", "1800ms..", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let text = stdout(&compared);
    let movers: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("moved most (cpu"))
        .skip(2)
        .take(2)
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert_eq!(movers.len(), 2, "{text}");
    assert!(
        movers.contains(&"second_half") && movers.contains(&"first_half"),
        "{text}"
    );
    for file in ["diff-cpu.folded", "diff-cpu.svg", "diff-cpu-negated.svg"] {
        assert!(out_dir.join(file).is_file(), "{file}: {text}");
    }
    // Ranges of one session that overlap are refused; so is one session without two.
    for args in [
        &["--range-a", "..2s", "--range-b", "1s.."][..],
        &["--range-a", "..1s"][..],
    ] {
        let out = benchtop()
            .arg("compare")
            .arg(&dir)
            .arg(&dir)
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("overlap") || err.contains("two ranges"),
            "{err}"
        );
    }
    // The first half exported for other tools: only first_half in its stacks.
    let exported = tmp.path().join("exported");
    let out = benchtop()
        .arg("export")
        .arg(&dir)
        .args(["--range", "..1200ms", "--out"])
        .arg(&exported)
        .output()
        .unwrap();
    let listed = stdout(&out);
    let speedscope = exported.join("cpu.0s-1.2s.speedscope.json");
    let json = std::fs::read_to_string(&speedscope).unwrap_or_else(|e| panic!("{e}: {listed}"));
    assert!(json.contains("first_half") && !json.contains("second_half"));
    assert!(exported.join("profile.0s-1.2s.pb.gz").is_file(), "{listed}");
    // --slow needs a latency metric, which this program does not report.
    let out = benchtop()
        .arg("compare")
        .arg(&dir)
        .arg("--slow")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no latency metric"), "{err}");
}

#[test]
fn a_recorder_killed_mid_run_leaves_stacks_that_show_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_halves(tmp.path());
    let dir = tmp.path().join("killed");
    let mut recorder = benchtop()
        .args([
            "run",
            "--quiet",
            "--profile",
            "cpu",
            "--interval",
            "200ms",
            "--record",
        ])
        .arg(&dir)
        .arg("--")
        .arg(&exe)
        .arg("6000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stacks = dir.join("stacks.jsonl");
    // Some intervals of the first half are on disk.
    wait_until("intervals in stacks.jsonl", Duration::from_secs(30), || {
        std::fs::read_to_string(&stacks)
            .map(|t| t.matches("\"interval\"").count() >= 5)
            .unwrap_or(false)
    });
    recorder.kill().unwrap();
    recorder.wait().unwrap();
    let text = stdout(&show(&dir, "..600ms"));
    assert!(
        top_functions(&text).first().map(String::as_str) == Some("first_half"),
        "{text}"
    );
    // The program outlives its recorder; it ends on its own within its 6 s.
}

#[test]
fn bad_ranges_are_refused_and_old_sessions_fall_back_to_the_whole_run() {
    let v1 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sessions/tests/data/v1-session");
    for (range, want) in [
        ("900s..", "outside the run"),
        ("1s..1s", "is empty"),
        ("2s..1s", "is empty"),
        ("ten..", "not a duration"),
        ("10s", "not a range"),
    ] {
        let out = show(&v1, range);
        assert!(!out.status.success(), "{range}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{range}: {err}");
    }
    let out = stdout(&show(&v1, "..1s"));
    assert!(out.contains("no per-interval stacks"), "{out}");
    // Exporting a range of it is refused rather than answered with the whole run.
    let tmp = tempfile::tempdir().unwrap();
    let out = benchtop()
        .arg("export")
        .arg(&v1)
        .args(["--range", "..1s", "--out"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no per-interval stacks"), "{err}");
}

/// The functions of `compare`'s movers table for `profile` (`cpu`, `offcpu`), in order.
fn movers(text: &str, profile: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with(&format!("moved most ({profile};")))
        .skip(2)
        .take_while(|l| l.contains('%'))
        .filter_map(|l| l.split_whitespace().last().map(str::to_owned))
        .collect()
}

#[test]
fn the_slow_intervals_against_the_rest_put_slow_path_at_the_top_of_the_movers() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_fixture(tmp.path(), "spiky");
    let dir = tmp.path().join("session");
    // Every fourth 200 ms interval of the program runs slow_path, and its latency spikes.
    record(&dir, &exe, "4000");
    slow_path_tops_the_movers(tmp.path(), &dir);
}

/// A command counts `t_ns` from when its own work began, not from its exec: here 600 ms
/// later (three intervals), as a program that sets up after `hello` does, or any
/// program whose exec and start-up a busy machine delays. Its per-interval stacks must
/// still be those of its rows, or the slow intervals hold other intervals' stacks
/// (seen beside a CPU hog: slow_path 12.6 % of the slow intervals' samples and 30.7 % of
/// the rest's, every slow interval's slow_path one interval late).
#[test]
fn a_command_whose_clock_starts_late_keeps_its_stacks_in_register_with_its_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_fixture(tmp.path(), "spiky");
    let dir = tmp.path().join("session");
    record_with(&dir, &exe, &["3200", "200", "600"]);
    slow_path_tops_the_movers(tmp.path(), &dir);
    // And the slow intervals hold (nearly) all of slow_path: a shift of even one
    // interval leaves them most of theirs in the rest.
    let out = benchtop()
        .arg("compare")
        .arg(&dir)
        .arg("--slow")
        .arg("--out")
        .arg(tmp.path().join("slow-again"))
        .output()
        .unwrap();
    let text = stdout(&out);
    let line = text
        .lines()
        .skip_while(|l| !l.starts_with("moved most (cpu;"))
        .find(|l| l.ends_with(" slow_path"))
        .unwrap_or_else(|| panic!("no slow_path row\n{text}"));
    let rest_total: f64 = line
        .split_whitespace()
        .nth(3)
        .and_then(|v| v.trim_end_matches('%').parse().ok())
        .unwrap_or_else(|| panic!("cannot read the rest's total share: {line}"));
    assert!(rest_total < 5.0, "{line}\n{text}");
}

/// `compare --slow` of `dir` (the spiky fixture), by the run's own p99 and by the same
/// threshold given explicitly: slow_path first among the movers.
fn slow_path_tops_the_movers(tmp: &Path, dir: &Path) {
    let session = Session::load(dir).unwrap();
    assert!(
        session.rows.iter().any(|r| r.latency.contains_key("op")),
        "the fixture's latency reached the session: {:?}",
        session.warnings
    );
    // The explicit threshold is the run's own p99 of `op`, as the default is: a fixed
    // one (12 ms) held only on a quiet machine. Beside a CPU hog the fixture gets a tenth
    // of a CPU, each wait for it delays a 40 µs operation by milliseconds, and most
    // intervals without slow_path had a p99 above 12 ms (measured: 7-11 ms over all of
    // them, slow intervals 28-32 ms): they were counted slow, and fast_path topped the
    // movers. Against the run's p99 the slow intervals stand out whatever the load.
    let mut notes = Vec::new();
    let run_p99 = session
        .merged_latency(&mut notes)
        .get("op")
        .map(|h| h.value_at_quantile(0.99))
        .expect("the run's op latency");
    let above = format!("{run_p99}ns");
    for extra in [&[][..], &["--metric", "op", "--above", above.as_str()][..]] {
        let out = benchtop()
            .arg("compare")
            .arg(dir)
            .arg("--slow")
            .args(extra)
            .arg("--out")
            .arg(tmp.join("slow"))
            .output()
            .unwrap();
        let text = stdout(&out);
        let top = movers(&text, "cpu");
        assert_eq!(
            top.first().map(String::as_str),
            Some("slow_path"),
            "{extra:?}\n{text}"
        );
        assert!(tmp.join("slow/diff-cpu.svg").is_file());
    }
}
