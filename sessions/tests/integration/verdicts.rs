//! How far compare's verdicts can be trusted: false alarms on no change, across runs and
//! within one, and the changes it must see. Sessions are written with noise of known
//! shape — a level that moves from run to run, noise within a run, a short last interval —
//! and read back as recorded ones are.

use std::collections::BTreeMap;
use std::path::Path;

use benchtop_sessions::compare::{CompareOptions, Comparison, Verdict, compare, compare_runs};
use benchtop_sessions::meta::{HostInfo, WorkloadInfo};
use benchtop_sessions::{Session, SessionMeta, SessionWriter, Status, TimeseriesRow};
use hdrhistogram::Histogram;

/// A deterministic generator of uniform values in [-1, 1).
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 2_000_001) as f64 / 1_000_000.0 - 1.0
    }
}

/// How a simulated run behaves.
#[derive(Clone, Copy)]
struct Shape {
    /// Messages per second around which runs are centred.
    rate: f64,
    /// Latency (ns) around which a lap's body is centred; a tail at 10 × it.
    latency_ns: f64,
    /// Relative spread of a run's level around the centre (noise between runs).
    between: f64,
    /// Relative spread of an interval around its run's level.
    within: f64,
    /// Full intervals of 250 ms.
    intervals: usize,
    /// Then a 2 ms one, as a recording cut at its end leaves.
    short_tail: bool,
}

const SHAPE: Shape = Shape {
    rate: 12e6,
    latency_ns: 400_000.0,
    between: 0.01,
    within: 0.003,
    intervals: 8,
    short_tail: true,
};

fn write_run(dir: &Path, shape: Shape, noise: &mut Noise) -> Session {
    let meta = SessionMeta::new(
        "run",
        WorkloadInfo::new("ring", BTreeMap::new()),
        HostInfo::default(),
        "2026-11-24T12:00:00Z",
    );
    let mut w = SessionWriter::create(dir, meta).unwrap();
    let level = 1.0 + shape.between * noise.next();
    let mut t = 0.0;
    let tail = usize::from(shape.short_tail);
    for i in 0..shape.intervals + tail {
        let short = i == shape.intervals;
        let length = if short { 0.002 } else { 0.25 };
        // The short last interval is noisier, as a few messages in 2 ms are.
        let spread = if short { 0.4 } else { shape.within };
        let factor = level * (1.0 + spread * noise.next());
        t += length;
        let mut row = TimeseriesRow::default();
        row.t_s = t;
        row.interval_s = length;
        row.rates.insert("messages".into(), shape.rate * factor);
        w.append_row(&row).unwrap();
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        let laps = if short { 3 } else { 400 };
        for lap in 0..laps {
            let body = shape.latency_ns / factor * (1.0 + 0.05 * noise.next());
            let value = if lap % 100 == 99 { body * 10.0 } else { body };
            h.record(value as u64).unwrap();
        }
        w.append_latency("lap", t - length, length, &h).unwrap();
    }
    let dir = w
        .finish(Status::Complete, "2026-11-24T12:00:03Z".into())
        .unwrap();
    Session::load(&dir).unwrap()
}

fn series(root: &Path, name: &str, n: usize, shape: Shape, noise: &mut Noise) -> Vec<Session> {
    (0..n)
        .map(|i| write_run(&root.join(format!("{name}-{i}")), shape, noise))
        .collect()
}

fn flags(c: &Comparison) -> Vec<String> {
    for f in &c.figures {
        if let Some((lo, _)) = f.change.ci {
            assert!(lo > -1.0, "an interval below −100 %: {f:?}");
        }
    }
    c.figures
        .iter()
        .filter(|f| f.change.verdict.is_change())
        .map(|f| format!("{} {:+.1}%", f.name, f.change.change * 100.0))
        .collect()
}

fn refs(runs: &[Session]) -> Vec<&Session> {
    runs.iter().collect()
}

/// Asserts that at most `most` of twenty A/A comparisons call any figure changed (at most
/// one is P ≈ 0.98 at the family-wise 1 %), naming what the flagged ones flagged, and that
/// no interval goes below −100 %.
fn at_most_of_twenty_flag(most: usize, comparisons: impl Iterator<Item = Comparison>) {
    let flagged: Vec<Vec<String>> = comparisons
        .map(|c| flags(&c))
        .filter(|f| !f.is_empty())
        .collect();
    assert!(
        flagged.len() <= most,
        "{} of 20 A/A pairs flagged: {flagged:?}",
        flagged.len()
    );
}

#[test]
fn twenty_a_a_pairs_of_series_flag_at_most_one() {
    let tmp = tempfile::tempdir().unwrap();
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let opts = CompareOptions::default();
    at_most_of_twenty_flag(
        1,
        (0..20).map(|pair| {
            let a = series(tmp.path(), &format!("a{pair}"), 5, SHAPE, &mut noise);
            let b = series(tmp.path(), &format!("b{pair}"), 5, SHAPE, &mut noise);
            let c = compare_runs(&refs(&a), &refs(&b), &opts);
            assert_eq!(c.noise, "runs");
            assert_eq!(c.judged, 6, "{}", c.to_text());
            c
        }),
    );
}

#[test]
fn twenty_a_a_pairs_of_single_runs_get_no_verdict_though_their_levels_differ() {
    // The level moves 1 % from run to run while an interval moves 0.3 %: one run a side
    // cannot tell the two apart, so nothing is judged, and each figure says how many runs
    // a side it would take.
    let tmp = tempfile::tempdir().unwrap();
    let mut noise = Noise(0x2545_f491_4f6c_dd1d);
    let opts = CompareOptions::default();
    for pair in 0..20 {
        let a = write_run(&tmp.path().join(format!("a{pair}")), SHAPE, &mut noise);
        let b = write_run(&tmp.path().join(format!("b{pair}")), SHAPE, &mut noise);
        let c = compare(&a, &b, &opts);
        assert_eq!(c.noise, "none");
        no_verdict_but_the_runs_it_would_take(&c);
    }
}

/// Asserts that no figure of `c` has a verdict or an interval, and that every figure that
/// could be judged says the runs a side it would take.
fn no_verdict_but_the_runs_it_would_take(c: &Comparison) {
    assert_eq!(c.judged, 0, "{}", c.to_text());
    for f in &c.figures {
        assert!(f.change.ci.is_none(), "{f:?}");
        match f.change.verdict {
            Verdict::Undecided => assert!(f.change.needs.is_some(), "{f:?}"),
            Verdict::TooSparse | Verdict::Unjudged => {}
            other => panic!("{}: {other} from one run a side", f.name),
        }
    }
    let text = c.to_text();
    assert!(text.contains("undecided — needs"), "{text}");
    assert!(!text.contains("within noise"), "{text}");
}

#[test]
fn a_known_slowdown_between_series_is_a_regression_whose_interval_holds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut noise = Noise(7);
    let a = series(tmp.path(), "a", 5, SHAPE, &mut noise);
    let slower = Shape {
        rate: SHAPE.rate * 0.9,
        latency_ns: SHAPE.latency_ns / 0.9,
        ..SHAPE
    };
    let b = series(tmp.path(), "b", 5, slower, &mut noise);
    let c = compare_runs(&refs(&a), &refs(&b), &CompareOptions::default());
    let rate = c.figures.iter().find(|f| f.name == "messages/s").unwrap();
    assert_eq!(rate.change.verdict, Verdict::Regressed, "{}", c.to_text());
    let (lo, hi) = rate.change.ci.unwrap();
    assert!(lo < -0.1 && -0.1 < hi, "{lo} … {hi} must hold −10 %");
    let p50 = c.figures.iter().find(|f| f.name == "lap p50").unwrap();
    assert_eq!(p50.change.verdict, Verdict::Regressed, "{}", c.to_text());
    assert!(p50.change.change > 0.08, "{}", c.to_text());
    // And the other way round.
    let back = compare_runs(&refs(&b), &refs(&a), &CompareOptions::default());
    let rate = back
        .figures
        .iter()
        .find(|f| f.name == "messages/s")
        .unwrap();
    assert_eq!(rate.change.verdict, Verdict::Improved, "{}", back.to_text());
    assert!(
        back.to_text().contains("5 run(s) of A, 5 of B"),
        "{}",
        back.to_text()
    );
}

#[test]
fn series_of_one_interval_runs_get_verdicts_where_single_runs_get_none() {
    let tmp = tempfile::tempdir().unwrap();
    let mut noise = Noise(11);
    let short = Shape {
        intervals: 1,
        short_tail: false,
        ..SHAPE
    };
    let a = series(tmp.path(), "a", 5, short, &mut noise);
    let slower = Shape {
        rate: short.rate * 0.7,
        ..short
    };
    let b = series(tmp.path(), "b", 5, slower, &mut noise);
    let single = compare(&a[0], &b[0], &CompareOptions::default());
    let rate = single
        .figures
        .iter()
        .find(|f| f.name == "messages/s")
        .unwrap();
    assert_eq!(rate.change.verdict, Verdict::Undecided);
    assert!(rate.change.needs.is_some() && rate.change.ci.is_none());
    let c = compare_runs(&refs(&a), &refs(&b), &CompareOptions::default());
    let rate = c.figures.iter().find(|f| f.name == "messages/s").unwrap();
    assert_eq!(rate.change.verdict, Verdict::Regressed, "{}", c.to_text());
}

#[test]
fn one_session_against_a_series_borrows_its_spread_between_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut noise = Noise(13);
    let a = series(tmp.path(), "a", 6, SHAPE, &mut noise);
    let b = write_run(&tmp.path().join("b"), SHAPE, &mut noise);
    let c = compare_runs(&refs(&a), &[&b], &CompareOptions::default());
    assert_eq!(c.runs, (6, 1));
    let rate = c.figures.iter().find(|f| f.name == "messages/s").unwrap();
    let (lo, hi) = rate.change.ci.unwrap();
    // One run's level moves about 1 %: the interval is at least that wide each way.
    assert!(hi - lo > 0.02, "{lo} … {hi}");
    assert_ne!(rate.change.verdict, Verdict::Regressed);
    let far = Shape {
        rate: SHAPE.rate * 0.7,
        ..SHAPE
    };
    let slow = write_run(&tmp.path().join("slow"), far, &mut noise);
    let c = compare_runs(&refs(&a), &[&slow], &CompareOptions::default());
    let rate = c.figures.iter().find(|f| f.name == "messages/s").unwrap();
    assert_eq!(rate.change.verdict, Verdict::Regressed, "{}", c.to_text());
}

/// Twenty A/A pairs recorded on a shared 2-vCPU machine while other builds ran: the same
/// ring (`run ring --num-rounds 1000000 --duration 2s --interval 250ms`), forty times in a
/// row. Judged from the intervals of one run each, an earlier method flagged a change in
/// 7 of these 20 pairs (mostly lap p90 and p99, and the short last interval's rate), and
/// the next one in 10 of 20 such pairs recorded with `--profile none --num-nodes 1000`.
/// One run a side gets no verdict: each figure says the runs a side it would take, and the
/// ring's time_taken_for_ring_messaging, which equals `--duration`, is not judged. The
/// second set (tests/data/aa-none/README) is recorded that second way, beside five builds
/// and a test suite with a CPU hog.
#[test]
fn twenty_recorded_a_a_pairs_of_the_ring_get_no_verdict_from_one_run_a_side() {
    for set in ["aa", "aa-none"] {
        twenty_pairs_get_no_verdict(set);
    }
}

fn twenty_pairs_get_no_verdict(set: &str) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(set);
    let load = |i: usize| Session::load(&data.join(format!("ring-{i}"))).unwrap();
    let opts = CompareOptions::default();
    for pair in 0..20 {
        let (a, b) = (load(2 * pair + 1), load(2 * pair + 2));
        let c = compare(&a, &b, &opts);
        no_verdict_but_the_runs_it_would_take(&c);
        let time = c
            .figures
            .iter()
            .find(|f| f.name == "time_taken_for_ring_messaging")
            .unwrap();
        assert_eq!(time.change.verdict, Verdict::Unjudged, "{time:?}");
        assert!(time.change.reason.unwrap().contains("--duration"));
    }
}

/// Twenty A/A pairs of series recorded with a release build on a shared 2-vCPU machine:
/// forty series in a row of five runs each of the same short ring (`run ring --num-rounds
/// 1000000 --duration 500ms --interval 250ms --runs 5`), each pair two consecutive series,
/// so that whatever drifted between them counts against the method. Only session.json,
/// timeseries.jsonl and latency.hlog of each run are kept (tests/data/aa-series/README).
#[test]
fn twenty_recorded_a_a_pairs_of_ring_series_flag_at_most_one() {
    use benchtop_sessions::series::Series;
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/aa-series");
    let load = |i: usize| {
        let series = Series::load(&data.join(format!("series-{i}"))).unwrap();
        assert!(series.warnings.is_empty(), "{i}: {:?}", series.warnings);
        assert_eq!(series.measured().len(), 5, "series-{i}");
        series
    };
    let opts = CompareOptions::default();
    at_most_of_twenty_flag(
        1,
        (0..20).map(|pair| {
            let (a, b) = (load(2 * pair + 1), load(2 * pair + 2));
            let c = compare_runs(&a.measured(), &b.measured(), &opts);
            assert_eq!(c.noise, "runs");
            assert_eq!(c.runs, (5, 5));
            assert!(c.judged >= 8, "{}", c.to_text());
            let rate = c.figures.iter().find(|f| f.name == "messages/s").unwrap();
            assert!(rate.change.ci.is_some(), "{}", c.to_text());
            c
        }),
    );
}

/// The same twenty recorded pairs of series with B's rates scaled by 0.9. On that loaded
/// machine a 500 ms run's messages/s moves 21 % from run to run (median standard deviation
/// of the log over the forty series) and consecutive series drift apart by up to 70 %, so
/// five runs a side cannot show a 10 % drop at a 1 % family-wise error rate: no pair may
/// call it improved, and each pair that does not call it regressed must say it needs more
/// than five runs a side.
#[test]
fn recorded_series_with_b_ten_percent_slower_are_never_improved_and_say_what_they_need() {
    use benchtop_sessions::compare::Needs;
    use benchtop_sessions::series::Series;
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/aa-series");
    let load = |i: usize| -> Vec<Session> {
        let series = Series::load(&data.join(format!("series-{i}"))).unwrap();
        series.measured().into_iter().cloned().collect()
    };
    let opts = CompareOptions::default();
    for pair in 0..20 {
        let a = load(2 * pair + 1);
        let mut b = load(2 * pair + 2);
        for run in &mut b {
            for row in &mut run.rows {
                for rate in row.rates.values_mut() {
                    *rate *= 0.9;
                }
            }
        }
        let c = compare_runs(&refs(&a), &refs(&b), &opts);
        let rate = c.figures.iter().find(|f| f.name == "messages/s").unwrap();
        match (rate.change.verdict, rate.change.needs) {
            (Verdict::Regressed, _) => {}
            (Verdict::Undecided, Some(Needs::Runs(n))) => assert!(n > 5, "{rate:?}"),
            (Verdict::Undecided, Some(Needs::MoreThanMost)) => {}
            _ => panic!("pair {}: {rate:?}", pair + 1),
        }
    }
}

/// Twenty pairs of series of five runs whose level moves ±3 % from run to run, B's rate
/// 10 % lower: at least 18 of 20 must call messages/s regressed, and none improved.
#[test]
fn twenty_series_pairs_ten_percent_slower_are_regressed_in_eighteen() {
    let tmp = tempfile::tempdir().unwrap();
    let mut noise = Noise(0x51f1_5eed_0000_0003);
    let shaky = Shape {
        between: 0.03,
        ..SHAPE
    };
    let slower = Shape {
        rate: shaky.rate * 0.9,
        ..shaky
    };
    let opts = CompareOptions::default();
    let mut regressed = 0;
    for pair in 0..20 {
        let a = series(tmp.path(), &format!("a{pair}"), 5, shaky, &mut noise);
        let b = series(tmp.path(), &format!("b{pair}"), 5, slower, &mut noise);
        let c = compare_runs(&refs(&a), &refs(&b), &opts);
        let rate = c.figures.iter().find(|f| f.name == "messages/s").unwrap();
        assert_ne!(rate.change.verdict, Verdict::Improved, "{}", c.to_text());
        regressed += usize::from(rate.change.verdict == Verdict::Regressed);
    }
    assert!(regressed >= 18, "{regressed} of 20 regressed");
}

#[test]
fn a_run_that_ended_before_its_first_poll_has_no_peak_rss_to_judge() {
    let tmp = tempfile::tempdir().unwrap();
    let mut noise = Noise(11);
    // Runs whose only row with resources is the closing row of a gone tree, which reads
    // 0 for every resource, and whose session.json holds no peak: none was seen.
    let runs: Vec<Session> = (0..6)
        .map(|i| {
            let dir = tmp.path().join(format!("short-{i}"));
            let mut s = write_run(&dir, SHAPE, &mut noise);
            let mut closing = TimeseriesRow::default();
            closing.t_s = 2.1;
            closing.interval_s = 0.1;
            closing.resources = Some(benchtop_sessions::Resources::default());
            s.rows.push(closing);
            s
        })
        .collect();
    assert!(runs.iter().all(|s| s.peak_rss_bytes().is_none()));
    let c = compare_runs(
        &refs(&runs[..3]),
        &refs(&runs[3..]),
        &CompareOptions::default(),
    );
    let names: Vec<&str> = c.figures.iter().map(|f| f.name.as_str()).collect();
    assert!(!names.contains(&"peak RSS"), "{names:?}");
    // A run with a peak keeps it.
    let mut seen = runs[0].clone();
    if let Some(row) = seen.rows.last_mut() {
        row.resources.as_mut().unwrap().peak_rss_bytes = 3 << 20;
    }
    let c = compare(&seen, &seen, &CompareOptions::default());
    assert!(
        c.figures.iter().any(|f| f.name == "peak RSS"),
        "{:?}",
        c.figures
    );
}
