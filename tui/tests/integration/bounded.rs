//! Loads that stay bounded in the memory parsing makes, not only in the bytes read: small
//! hostile files that parse into gigabytes (full-range latency histograms, rows of
//! millions of values, folded files of millions of distinct frames) cut at their budget
//! with a warning, through the binary under an RLIMIT_AS, each within a 256 MiB peak RSS
//! and keeping everything else the session recorded. And a recording streamed with
//! `--otlp` to a collector that is away or never answers, within a band of the same run
//! without it.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use benchtop_sessions::Kind;
use hdrhistogram::Histogram;

use crate::compare::session;
use crate::hostile_sessions::{Run, assert_bounded, compare, export, run, show};
use crate::support::benchtop;

/// The address space benchtop runs in: today's gigabyte failures stop there instead of
/// pressing on the machine, while a bounded load fits with room.
const ADDRESS_SPACE: u64 = 1536 << 20;

/// How long a cut command may take, on a loaded machine and a debug build (what it kept,
/// compared, takes most of it).
const CUT_WITHIN: Duration = Duration::from_secs(400);

/// Runs `command` under [`ADDRESS_SPACE`], as [`run`] measures it.
fn limited(mut command: Command) -> Run {
    command.env("BENCHTOP_TEST_AS", ADDRESS_SPACE.to_string());
    run(command, CUT_WITHIN * 2)
}

fn open(dirs: &[&Path]) -> Command {
    let mut c = benchtop();
    c.arg("open").args(dirs);
    c
}

/// A latency.hlog of `intervals` one-second intervals, each histogram spanning 1 to 2⁶³
/// with every one of its buckets counted once: a line of a few hundred bytes that holds
/// 55,296 buckets.
fn full_range_hlog(path: &Path, intervals: usize) {
    let mut h = Histogram::<u64>::new_with_bounds(1, u64::MAX / 2, 3).unwrap();
    let values: Vec<u64> = h.iter_all().map(|v| v.value_iterated_to()).collect();
    for v in values {
        h.record(v.min(h.high())).unwrap();
    }
    let one = path.with_extension("one");
    let mut w = benchtop_sessions::HlogWriter::create(
        &one,
        std::time::UNIX_EPOCH + Duration::from_secs(1_795_000_000),
    )
    .unwrap();
    w.append("lap", 0.0, 1.0, &h).unwrap();
    drop(w);
    // The header as written, then the interval line again at each start.
    let text = fs::read_to_string(&one).unwrap();
    fs::remove_file(&one).unwrap();
    let (header, line): (Vec<&str>, Vec<&str>) = text
        .lines()
        .partition(|l| l.starts_with('#') || l.starts_with('"'));
    let line = line.first().expect("an interval line");
    let (tag, rest) = line.split_once(',').unwrap();
    let (_, rest) = rest.split_once(',').unwrap();
    let mut out = header.join("\n");
    out.push('\n');
    for i in 0..intervals {
        let _ = writeln!(out, "{tag},{i}.000,{rest}");
    }
    fs::write(path, out).unwrap();
}

/// Asserts the run was cut, not failed: it succeeded (or, for `open` without a terminal,
/// got as far as asking for one), and said what `file` lost.
fn assert_cut(what: &str, r: &Run, file: &str) {
    assert_bounded(what, r);
    assert!(r.took < CUT_WITHIN, "{what}: {:?}", r.took);
    if what.starts_with("open") {
        assert!(
            r.stderr.contains("the TUI needs a terminal"),
            "{what}: {}",
            r.stderr
        );
    } else {
        assert_eq!(r.code, Some(0), "{what}: {}{}", r.stdout, r.stderr);
        let told = format!("{}{}", r.stdout, r.stderr);
        assert!(
            told.contains(file) && told.contains("dropped"),
            "{what}: {told}"
        );
    }
}

#[test]
fn full_range_latency_histograms_are_cut_at_a_budget_shared_by_both_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let (h1, h2) = (tmp.path().join("h3000"), tmp.path().join("h3000b"));
    for dir in [&h1, &h2] {
        session(dir, "tell", 1e6, "hot", 10);
        full_range_hlog(&dir.join("latency.hlog"), 3_000);
    }
    assert!(fs::metadata(h1.join("latency.hlog")).unwrap().len() < 4 << 20);
    let out = tmp.path().join("out");
    // The two sessions of one command share the budget: the worst cases.
    for (what, command) in [
        ("compare h3000 h3000b", compare(&h1, &h2, &out, &[])),
        ("open h3000 h3000b", open(&[&h1, &h2])),
    ] {
        let r = limited(command);
        assert_cut(what, &r, "latency.hlog");
        if what.starts_with("compare") {
            // What was recorded beside the latency is all there: the stacks' hot frame.
            let diff = fs::read_to_string(out.join("diff-cpu.folded")).unwrap();
            assert!(diff.contains("hot"), "{what}: {diff}");
            fs::remove_dir_all(&out).unwrap();
        }
    }
}

/// A cpu.folded of `stacks` lines of `depth` frames, each frame a name of its own: every
/// line adds `depth` nodes and `depth` names to the tree.
fn distinct_frames_folded(path: &Path, stacks: usize, depth: usize) {
    let mut text = String::with_capacity(stacks * depth * 8);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..stacks {
        for d in 0..depth {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let _ = write!(text, "{}f{:x}", if d > 0 { ";" } else { "" }, x >> 36);
        }
        text.push_str(" 1\n");
    }
    fs::write(path, text).unwrap();
}

#[test]
fn folded_files_of_millions_of_distinct_frames_are_cut_at_their_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    session(&base, "tell", 1e6, "hot", 10);
    let wide = tmp.path().join("wide");
    session(&wide, "tell", 1e6, "hot", 10);
    // 70,000 stacks of 40 random frames (2.8 million nodes and names), the recorded
    // stacks first: they are kept.
    let recorded = fs::read_to_string(wide.join("cpu.folded")).unwrap();
    distinct_frames_folded(&wide.join("cpu.folded"), 70_000, 40);
    let hostile = fs::read(wide.join("cpu.folded")).unwrap();
    let mut text = recorded.into_bytes();
    text.extend_from_slice(&hostile);
    fs::write(wide.join("cpu.folded"), text).unwrap();
    let out = tmp.path().join("out");
    for (what, command) in [
        ("show wide", show(&wide)),
        ("export wide", export(&wide, &out, "speedscope")),
        ("compare base wide", compare(&base, &wide, &out, &[])),
        ("open wide", open(&[&wide])),
    ] {
        let r = limited(command);
        assert_cut(what, &r, "cpu.folded");
        if what.starts_with("compare") {
            let diff = fs::read_to_string(out.join("diff-cpu.folded")).unwrap();
            assert!(diff.contains("hot"), "{what}: the recorded stacks are kept");
        }
    }
}

/// Replaces the rows of the session in `dir` by what it recorded followed by `rows`
/// rows, each a JSON object of `t_s`, `interval_s` and `field` set to `value(i)`.
fn hostile_rows(dir: &Path, rows: usize, field: &str, value: impl Fn(usize) -> String) {
    use std::io::Write as _;
    let path = dir.join("timeseries.jsonl");
    let recorded = fs::read(&path).unwrap();
    let mut out = std::io::BufWriter::new(fs::File::create(&path).unwrap());
    out.write_all(&recorded).unwrap();
    for i in 0..rows {
        let t = 10.0 + i as f64;
        write!(out, r#"{{"t_s":{t},"interval_s":1.0,"{field}":"#).unwrap();
        out.write_all(value(i).as_bytes()).unwrap();
        out.write_all(b"}\n").unwrap();
    }
    out.flush().unwrap();
}

/// A list of `n` zeros.
fn zeros(n: usize) -> String {
    let mut list = String::with_capacity(2 * n + 2);
    list.push('[');
    for i in 0..n {
        list.push_str(if i == 0 { "0" } else { ",0" });
    }
    list.push(']');
    list
}

/// A map of `n` counters, `counter_number_00000` on, each at `row`.
fn counters(n: usize, row: usize) -> String {
    let mut map = String::with_capacity(28 * n + 2);
    map.push('{');
    for i in 0..n {
        let _ = write!(
            map,
            "{}\"counter_number_{i:05}\":{row}",
            if i == 0 { "" } else { "," }
        );
    }
    map.push('}');
    map
}

/// Asserts what a cut `compare` kept of what the sessions recorded beside their rows:
/// the stacks' hot frame and the latency's metric.
fn assert_recorded_kept(what: &str, out: &Path, r: &Run) {
    let diff = fs::read_to_string(out.join("diff-cpu.folded")).unwrap();
    assert!(diff.contains("hot"), "{what}: {diff}");
    assert!(r.stdout.contains("lap"), "{what}: {}", r.stdout);
    fs::remove_dir_all(out).unwrap();
}

#[test]
fn rows_of_millions_of_values_are_cut_at_a_budget_shared_by_both_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    session(&base, "tell", 1e6, "hot", 10);
    // 12 rows of 4 million per-core zeros (96 MB), and 200 rows of 20,000 counters
    // (about 100 MB), after the rows each session recorded.
    let (cores, cores_b) = (tmp.path().join("tscores"), tmp.path().join("tscores-b"));
    for dir in [&cores, &cores_b] {
        session(dir, "tell", 1e6, "hot", 10);
        let row = zeros(4_000_000);
        hostile_rows(dir, 12, "cpu_percent_per_core", |_| row.clone());
    }
    let (wide, wide_b) = (
        tmp.path().join("tscounters"),
        tmp.path().join("tscounters-b"),
    );
    for dir in [&wide, &wide_b] {
        session(dir, "tell", 1e6, "hot", 10);
        hostile_rows(dir, 200, "counters", |i| counters(20_000, i));
    }
    assert!(fs::metadata(cores.join("timeseries.jsonl")).unwrap().len() > 90 << 20);
    assert!(fs::metadata(wide.join("timeseries.jsonl")).unwrap().len() > 90 << 20);
    let out = tmp.path().join("out");
    // `show` holds no row: each on its own is within the budget, nothing is cut.
    for dir in [&cores, &wide] {
        let r = limited(show(dir));
        assert_bounded("show", &r);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        assert!(r.stdout.contains("hot"), "{}", r.stdout);
    }
    for (what, command) in [
        ("compare base tscores", compare(&base, &cores, &out, &[])),
        (
            "compare tscores tscores-b",
            compare(&cores, &cores_b, &out, &[]),
        ),
        ("open tscores tscores-b", open(&[&cores, &cores_b])),
        ("compare base tscounters", compare(&base, &wide, &out, &[])),
        (
            "compare tscounters tscounters-b",
            compare(&wide, &wide_b, &out, &[]),
        ),
        ("open tscounters tscounters-b", open(&[&wide, &wide_b])),
    ] {
        let r = limited(command);
        assert_cut(what, &r, "timeseries.jsonl");
        if what.starts_with("compare") {
            // The rows past the budget are said: from which line, how many.
            assert!(
                r.stderr.contains("its rows pass the budget of ")
                    && r.stderr.contains("rows from line"),
                "{what}: {}",
                r.stderr
            );
            assert_recorded_kept(what, &out, &r);
        }
    }
}

/// A listener on loopback that takes every connection and never answers, while it lives.
struct Silent {
    port: u16,
    _held: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

fn silent() -> Silent {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = held.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            keep.lock().unwrap().push(stream);
        }
    });
    Silent { port, _held: held }
}

/// `run kvstore` for 10 s into `dir` (its allocations sampled, as by default), streamed
/// to `otlp` when given, measured as [`run`] does.
fn kvstore(dir: &Path, otlp: Option<&str>) -> Run {
    let mut c = benchtop();
    c.args(["run", "kvstore", "--duration", "10s", "--quiet", "--record"])
        .arg(dir);
    if let Some(endpoint) = otlp {
        c.args(["--otlp", endpoint, "--otlp-protocol", "http/protobuf"]);
    }
    run(c, Duration::from_secs(300))
}

/// The peak RSS a streamed run may reach beside the same run without `--otlp`: 10 % and
/// 32 MiB more. Measured on a debug build (`run kvstore --duration 10s`, load 3–6):
/// without `--otlp` 263–269 MiB. When the export named the worker's allocation stacks
/// with a symbolizer of its own, apart from the sampler's, the worker's binary was mapped
/// twice and a streamed run peaked at 442–457 MiB, to a refused port or to a listener
/// that never answers: the band (some 325 MiB) fails that by over 100 MiB. With one
/// symbolizer a streamed run peaks 1–3 MiB above one not streamed (load 8); the band
/// leaves room for the pages a loaded machine's timing adds or takes.
fn streamed_band(without: u64) -> u64 {
    without + without / 10 + (32 << 20)
}

#[test]
fn a_run_streamed_to_a_collector_away_or_silent_stays_within_a_band_of_one_not_streamed() {
    let tmp = tempfile::tempdir().unwrap();
    let base_dir = tmp.path().join("base");
    let base = kvstore(&base_dir, None);
    assert_eq!(base.code, Some(0), "{}", base.stderr);
    let base_session = benchtop_sessions::store::Session::load(&base_dir).unwrap();
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let collector = silent();
    for (what, port) in [("refused", refused), ("silent", collector.port)] {
        let dir = tmp.path().join(what);
        let endpoint = format!("http://127.0.0.1:{port}");
        let r = kvstore(&dir, Some(&endpoint));
        assert_eq!(r.code, Some(0), "{what}: {}", r.stderr);
        assert!(
            r.max_rss <= streamed_band(base.max_rss),
            "{what}: peak RSS {} MiB, without --otlp {} MiB",
            r.max_rss >> 20,
            base.max_rss >> 20
        );
        // The session records everything: its rows, its stacks, the worker's
        // allocations, as the run without --otlp did; the export's drops are counted and
        // said, and what it held stayed within its bound.
        let session = benchtop_sessions::store::Session::load(&dir).unwrap();
        assert_eq!(session.meta.status, benchtop_sessions::Status::Complete);
        assert!(
            session.rows.len() + 2 >= base_session.rows.len(),
            "{what}: {} rows, {} without --otlp",
            session.rows.len(),
            base_session.rows.len()
        );
        for kind in [Kind::Cpu, Kind::Alloc] {
            let weight = |s: &benchtop_sessions::store::Session| {
                s.profiles[kind].as_ref().map_or(0, |t| t.total_weight())
            };
            assert!(weight(&base_session) > 0, "{kind:?} without --otlp");
            assert!(weight(&session) > 0, "{what}: no {kind:?} profile");
        }
        let otlp = session.meta.otlp.as_ref().expect("the export is described");
        assert_eq!(otlp.requests, 0, "{what}: {otlp:?}");
        assert!(otlp.dropped > 0, "{what}: {otlp:?}");
        let (bound, peak) = (otlp.queue_bytes.unwrap(), otlp.queue_peak_bytes.unwrap());
        assert!(peak > 0 && peak <= bound, "{what}: {otlp:?}");
        assert!(
            session
                .meta
                .warnings
                .iter()
                .any(|w| w.starts_with(&format!("OTLP export to {endpoint}: "))
                    && w.contains("batches dropped")),
            "{what}: {:?}",
            session.meta.warnings
        );
    }
}
