//! The statistics of a comparison: how sure a change is.
//!
//! **Runs are the unit of evidence.** Each side of a figure is a list of runs, each with
//! its whole-run value (the weighted mean of its intervals, a latency percentile of its
//! intervals merged, or a single value such as a summary figure). A figure is judged on
//! the log of the ratio B / A: each side's value is the geometric mean of its runs, and the
//! interval is a Student *t* interval on the difference of the sides' mean logs, with the
//! spread between runs pooled over both sides. Reported as percentages, an interval on the
//! log ratio can never pass −100 %.
//!
//! **One descheduled run cannot flip a verdict.** With three runs or more on a side, a run
//! more than 2.5 times or less than 1/2.5 of the median of its side's other runs (and far
//! outside their own spread) is set aside — at most a minority of the side — and the
//! comparison names it: on a loaded machine such a run measured the machine, not the code.
//!
//! **One run a side** cannot show the noise between runs, so no figure gets a verdict:
//! each shows its change and the runs a side a verdict would take ([`Needs`]), from the
//! noise within the run (block means of its intervals) — a floor, since runs also differ
//! from each other.
//!
//! **Parts of one run** (time ranges, slow intervals) have no runs to draw: there the
//! intervals stand in for runs, resampled in blocks of consecutive intervals (a block
//! bootstrap, blocks of about the cube root of the intervals, at most [`MAX_BLOCKS`]
//! blocks), since neighbouring intervals move together.
//!
//! The critical value is Student's *t* at 1 − α/(2*k*) for the *k* figures judged together
//! (Bonferroni): the chance that a comparison calls any figure changed when nothing changed
//! is at most α, 1 % by default.

use std::ops::Range;

use hdrhistogram::Histogram;
use serde::{Serialize, Serializer};
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::{Change, CompareOptions, Verdict};
use crate::meta::Better;

/// One run of a figure: `(value, weight)` per interval.
pub(crate) type Run = Vec<(f64, f64)>;

/// Resamples of whole-run percentiles in parts of one run: each merges every interval
/// drawn, so fewer than for means suffice for a standard error.
pub const PERCENTILE_RESAMPLES: usize = 500;
/// Width of the bins the resampled histograms are merged in: 0.5 %, well inside the
/// threshold.
const PERCENTILE_BIN_RATIO: f64 = 1.005;

/// The most blocks a run's intervals are drawn in (an hour at 100 ms is 36,000 intervals:
/// blocks of 36).
pub const MAX_BLOCKS: usize = 1_000;

/// The most runs a side that [`Needs`] counts up to.
pub const MOST_RUNS_NEEDED: u32 = 100;

/// The runs a side that one-value figures ask for when recorded once a side.
pub const RUNS_TO_RECORD: u32 = 5;

/// How many runs a side a figure would take to be judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// At least this many runs a side (the noise within a run as a floor).
    Runs(u32),
    /// More than [`MOST_RUNS_NEEDED`].
    MoreThanMost,
    /// A figure with one value per run: nothing tells its noise; record a series.
    Record,
}

impl std::fmt::Display for Needs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Needs::Runs(n) => write!(f, "needs ≥ {n} runs a side"),
            Needs::MoreThanMost => write!(f, "needs > {MOST_RUNS_NEEDED} runs a side"),
            Needs::Record => write!(f, "record with `--runs {RUNS_TO_RECORD}`"),
        }
    }
}

impl Serialize for Needs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Needs::Runs(n) => s.serialize_u32(*n),
            Needs::MoreThanMost => s.serialize_str(&format!("> {MOST_RUNS_NEEDED}")),
            Needs::Record => s.serialize_str(&format!("--runs {RUNS_TO_RECORD}")),
        }
    }
}

/// The blocks `m` intervals are drawn in: runs of consecutive intervals of about the cube
/// root of `m` (one interval each up to 3), at most [`MAX_BLOCKS`] of them, their lengths
/// at most one apart.
pub(crate) fn blocks(m: usize) -> impl Iterator<Item = Range<usize>> {
    let length = ((m as f64).cbrt().round() as usize)
        .max(m.div_ceil(MAX_BLOCKS))
        .max(1);
    let n = (m / length).max(usize::from(m > 0));
    (0..n).map(move |b| b * m / n..(b + 1) * m / n)
}

/// `run` as its blocks: a block's value is its intervals' weighted mean and its weight
/// their summed weight, so the weighted mean of any draw of blocks is that of the
/// intervals they hold.
fn blocked(run: &Run) -> Run {
    blocks(run.len())
        .map(|range| {
            let (mut sum, mut weight) = (0.0, 0.0);
            for &(v, w) in &run[range] {
                sum += v * w;
                weight += w;
            }
            if weight > 0.0 {
                (sum / weight, weight)
            } else {
                (0.0, 0.0)
            }
        })
        .collect()
}

/// The latency figures of each metric: name suffix and quantile (1.0: the maximum).
pub(crate) const QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("max", 1.0),
];

/// What the units of a comparison are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Units {
    /// Parts of one run: its intervals, in blocks.
    Intervals,
    /// Runs.
    Runs,
    /// One run a side, not parts of one: nothing to judge the noise between runs by.
    OneRunEach,
}

impl Units {
    /// The units of a comparison of `na` and `nb` runs; `parts` when the sides are parts
    /// of one run.
    pub(crate) fn of(na: usize, nb: usize, parts: bool) -> Units {
        match (na <= 1 && nb <= 1, parts) {
            (true, true) => Units::Intervals,
            (true, false) => Units::OneRunEach,
            (false, _) => Units::Runs,
        }
    }

    /// The word of the comparison's `noise` field.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Units::Intervals => "intervals",
            Units::Runs => "runs",
            Units::OneRunEach => "none",
        }
    }
}

/// B / A − 1, and 0 when both are 0.
pub(crate) fn relative(a: f64, b: f64) -> f64 {
    if a == 0.0 {
        if b == 0.0 {
            0.0
        } else {
            f64::INFINITY.copysign(b)
        }
    } else {
        b / a - 1.0
    }
}

/// The weighted mean of `values`; NaN when there is no weight.
fn weighted_mean(values: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (mut sum, mut weight) = (0.0, 0.0);
    for (v, w) in values {
        sum += v * w;
        weight += w;
    }
    if weight > 0.0 { sum / weight } else { f64::NAN }
}

/// A run's value: the weighted mean of its intervals.
pub(crate) fn run_value(run: &Run) -> f64 {
    weighted_mean(run.iter().copied())
}

/// One side of a figure: each run's whole-run value, and each run's intervals (empty for
/// a figure with one value per run).
#[derive(Debug, Clone, Default)]
pub(crate) struct Side {
    pub(crate) values: Vec<f64>,
    pub(crate) intervals: Vec<Run>,
}

impl Side {
    /// Whether the figure is zero in more than half of the side's intervals (or of its runs,
    /// for a figure with one value per run): too sparse for a ratio to mean anything.
    pub(crate) fn sparse(&self) -> bool {
        let (zeros, all) = if self.intervals.iter().any(|r| !r.is_empty()) {
            let all = self.intervals.iter().map(Vec::len).sum::<usize>();
            let zeros = self
                .intervals
                .iter()
                .flatten()
                .filter(|(v, _)| *v == 0.0)
                .count();
            (zeros, all)
        } else {
            let zeros = self.values.iter().filter(|v| **v == 0.0).count();
            (zeros, self.values.len())
        };
        2 * zeros > all
    }

    /// The logs of the runs' values that can be judged (finite and positive).
    fn logs(&self) -> Vec<f64> {
        self.values
            .iter()
            .filter(|v| v.is_finite() && **v > 0.0)
            .map(|v| v.ln())
            .collect()
    }
}

/// The median of `v` (sorted in place); NaN when empty.
fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// How far from the median of its side's other runs a run must be to be set aside: more
/// than 2.5 times or less than 1/2.5 of it (and five of their spreads away).
pub const FAR_RATIO: f64 = 2.5;

/// How many of the other runs' spreads (1.4826 × their median absolute deviation of the
/// logs, a standard deviation for normal noise) a run set aside must be from their median:
/// a figure whose runs all scatter widely (a latency maximum on a loaded machine) keeps
/// them all.
const FAR_SPREADS: f64 = 5.0;

/// The logs of a side's runs with the runs set aside removed, and how many were: with
/// three runs or more, a run far from the median of the side's other runs ([`FAR_RATIO`]),
/// when such runs are a minority of the side.
pub(crate) fn kept_logs(logs: &[f64]) -> (Vec<f64>, usize) {
    if logs.len() < 3 {
        return (logs.to_vec(), 0);
    }
    let far: Vec<bool> = (0..logs.len())
        .map(|i| {
            let mut others: Vec<f64> = logs
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, x)| *x)
                .collect();
            let centre = median(&mut others);
            let mut deviations: Vec<f64> = others.iter().map(|x| (x - centre).abs()).collect();
            let spread = 1.4826 * median(&mut deviations);
            (logs[i] - centre).abs() > FAR_RATIO.ln().max(FAR_SPREADS * spread)
        })
        .collect();
    let aside = far.iter().filter(|f| **f).count();
    if aside == 0 || 2 * aside >= logs.len() {
        return (logs.to_vec(), 0);
    }
    let kept = logs
        .iter()
        .zip(&far)
        .filter(|(_, f)| !**f)
        .map(|(x, _)| *x)
        .collect();
    (kept, aside)
}

/// The mean of `v`; NaN when empty.
fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The sum of squared deviations from the mean.
fn squares(v: &[f64]) -> f64 {
    let m = mean(v);
    v.iter().map(|x| (x - m).powi(2)).sum()
}

/// The critical value for `judged` figures at family-wise `alpha` with `df` degrees of
/// freedom.
fn critical(alpha: f64, judged: usize, df: f64) -> f64 {
    let p = 1.0 - alpha / (2.0 * judged.max(1) as f64);
    match StudentsT::new(0.0, 1.0, df.max(1.0)) {
        Ok(t) => t.inverse_cdf(p),
        // Only for a degenerate df; the normal quantile is then the honest floor.
        Err(_) => 3.0,
    }
}

/// A judged figure: the change shown and its interval, both on the log of the ratio.
#[derive(Debug, Clone, Copy)]
struct LogInterval {
    /// ln(B / A).
    change: f64,
    /// Its interval, when there is one.
    ci: Option<(f64, f64)>,
    /// The spread of one run's log value, for the runs a side it would take.
    sigma: f64,
}

/// `verdict` from an interval on the log ratio, the threshold and the better direction.
fn verdict(change: f64, (lo, hi): (f64, f64), better: Option<Better>, threshold: f64) -> Verdict {
    let shown = change.exp_m1();
    let excludes = lo > 0.0 || hi < 0.0;
    if excludes && shown.abs() >= threshold {
        return match better {
            None => Verdict::Changed,
            Some(Better::Higher) if shown > 0.0 => Verdict::Improved,
            Some(Better::Lower) if shown < 0.0 => Verdict::Improved,
            Some(_) => Verdict::Regressed,
        };
    }
    if lo.exp_m1() > -threshold && hi.exp_m1() < threshold {
        Verdict::Same
    } else {
        Verdict::Undecided
    }
}

/// The runs a side a figure whose run-to-run spread (of the log) is `sigma` and whose
/// change is `change` (log) would take for a verdict: regressed or improved when the change
/// is at least the threshold, else same.
pub(crate) fn runs_needed(sigma: f64, change: f64, judged: usize, opts: &CompareOptions) -> Needs {
    if !sigma.is_finite() || !change.is_finite() {
        return Needs::Record;
    }
    let bound = (1.0 + opts.threshold).ln();
    let room = if change.exp_m1().abs() >= opts.threshold {
        change.abs()
    } else {
        bound - change.abs()
    };
    for n in 2..=MOST_RUNS_NEEDED {
        let se = sigma * (2.0 / f64::from(n)).sqrt();
        let c = critical(opts.alpha, judged, f64::from(2 * n - 2));
        if c * se < room {
            return Needs::Runs(n);
        }
    }
    Needs::MoreThanMost
}

/// The change of a log interval as the comparison shows it, with its verdict.
fn change_of(
    judged: LogInterval,
    better: Option<Better>,
    k: usize,
    opts: &CompareOptions,
) -> Change {
    let shown = judged.change.exp_m1();
    match judged.ci {
        Some((lo, hi)) if lo.is_finite() && hi.is_finite() => {
            let v = verdict(judged.change, (lo, hi), better, opts.threshold);
            Change {
                change: shown,
                ci: Some((lo.exp_m1(), hi.exp_m1())),
                verdict: v,
                needs: (v == Verdict::Undecided)
                    .then(|| runs_needed(judged.sigma, judged.change, k, opts)),
                reason: None,
            }
        }
        _ => Change::undecided(shown, runs_needed(judged.sigma, judged.change, k, opts)),
    }
}

/// Judges a figure across runs (see the module docs): `k` figures are judged together.
/// Returns the change, the sides' shown values and how many runs were set aside.
pub(crate) fn across_runs(
    a: &Side,
    b: &Side,
    better: Option<Better>,
    k: usize,
    opts: &CompareOptions,
) -> (Change, (f64, f64), usize) {
    let (ka, aside_a) = kept_logs(&a.logs());
    let (kb, aside_b) = kept_logs(&b.logs());
    let (ma, mb) = (mean(&ka), mean(&kb));
    let shown = (ma.exp(), mb.exp());
    let df = (ka.len() + kb.len()).saturating_sub(2);
    if ka.is_empty() || kb.is_empty() || df == 0 {
        let sigma = within_sigma(a, b);
        let needs = if sigma.is_finite() {
            runs_needed(sigma, mb - ma, k, opts)
        } else {
            Needs::Record
        };
        return (
            Change::undecided(relative(shown.0, shown.1), needs),
            shown,
            aside_a + aside_b,
        );
    }
    let sigma = ((squares(&ka) + squares(&kb)) / df as f64).sqrt();
    let se = sigma * (1.0 / ka.len() as f64 + 1.0 / kb.len() as f64).sqrt();
    let c = critical(opts.alpha, k, df as f64);
    let change = mb - ma;
    let judged = LogInterval {
        change,
        ci: Some((change - c * se, change + c * se)),
        sigma,
    };
    (change_of(judged, better, k, opts), shown, aside_a + aside_b)
}

/// The variance of one run's log value that the noise within it makes: the variance of
/// its block means (in logs) over the number of blocks; `None` without two blocks.
pub(crate) fn run_variance(run: &Run) -> Option<f64> {
    let logs: Vec<f64> = blocked(run)
        .iter()
        .filter(|(v, w)| *w > 0.0 && v.is_finite() && *v > 0.0)
        .map(|(v, _)| v.ln())
        .collect();
    (logs.len() >= 2).then(|| squares(&logs) / (logs.len() - 1) as f64 / logs.len() as f64)
}

/// The spread of one run's log value that the noise within the runs alone makes: the
/// spread of a run's block means (in logs) over the square root of its blocks, averaged
/// over both sides' runs; NaN without two blocks in some run.
pub(crate) fn within_sigma(a: &Side, b: &Side) -> f64 {
    let vars: Vec<f64> = a
        .intervals
        .iter()
        .chain(&b.intervals)
        .filter_map(run_variance)
        .collect();
    if vars.is_empty() {
        f64::NAN
    } else {
        mean(&vars).sqrt()
    }
}

/// One run a side (not parts of one run): the change, no interval, and the runs a side a
/// verdict would take from the noise within the runs.
pub(crate) fn one_run_each(a: &Side, b: &Side, k: usize, opts: &CompareOptions) -> Change {
    let (va, vb) = (
        a.values.first().copied().unwrap_or(f64::NAN),
        b.values.first().copied().unwrap_or(f64::NAN),
    );
    let change = relative(va, vb);
    let sigma = within_sigma(a, b);
    let needs = if sigma.is_finite() && change.is_finite() {
        runs_needed(sigma, (1.0 + change).ln(), k, opts)
    } else {
        Needs::Record
    };
    Change::undecided(change, needs)
}

/// Judges the change between two parts of one run from their intervals: a block
/// bootstrap of the log ratio of the weighted means; `k` figures are judged together.
pub(crate) fn within_run(
    a: &Run,
    b: &Run,
    better: Option<Better>,
    k: usize,
    opts: &CompareOptions,
) -> Change {
    let change = relative(run_value(a), run_value(b));
    let (ba, bb) = (blocked(a), blocked(b));
    if ba.len() < 2 || bb.len() < 2 || !change.is_finite() || change <= -1.0 {
        return Change::undecided(change, Needs::Record);
    }
    let mut rng = XorShift(opts.seed | 1);
    let mut logs = Vec::with_capacity(opts.resamples.max(100));
    for _ in 0..opts.resamples.max(100) {
        let x = resampled(&ba, &mut rng);
        let y = resampled(&bb, &mut rng);
        let l = (y / x).ln();
        if l.is_finite() {
            logs.push(l);
        }
    }
    let df = (ba.len() + bb.len() - 2) as f64;
    let n = ba.len().min(bb.len()) as f64;
    let se = (squares(&logs) / (logs.len().max(2) - 1) as f64 * n / (n - 1.0)).sqrt();
    let log_change = change.ln_1p();
    let c = critical(opts.alpha, k, df);
    let judged = LogInterval {
        change: log_change,
        ci: Some((log_change - c * se, log_change + c * se)),
        sigma: f64::NAN,
    };
    let mut out = change_of(judged, better, k, opts);
    out.needs = None;
    out
}

/// One bootstrap draw of a run's blocks: the weighted mean of as many blocks drawn with
/// replacement.
fn resampled(blocks: &Run, rng: &mut XorShift) -> f64 {
    let m = blocks.len();
    weighted_mean((0..m).map(|_| blocks[rng.below(m)]))
}

/// A log change and its interval on the log ratio, when it has one.
pub(crate) type LogChange = (f64, Option<(f64, f64)>);

/// The whole-run latency percentiles of two parts of one run (p50, p90, p99, p99.9 and
/// the maximum, in that order), each given by its interval histograms: the change of the
/// merged percentiles, and an interval on the log ratio from drawing blocks of intervals
/// with replacement, merging them (in 0.5 % bins) and reading the percentiles again. The
/// verdicts wait for the figure's better direction (the comparison gives them); `k`
/// figures are judged together.
pub(crate) fn percentiles_within_run<H: Buckets>(
    a: &[&H],
    b: &[&H],
    k: usize,
    opts: &CompareOptions,
) -> Vec<LogChange> {
    let (ba, bb) = (Binned::of(a), Binned::of(b));
    let mut scratch = Vec::new();
    let whole = |run: &Binned, scratch: &mut Vec<u64>| {
        run.quantiles(&vec![1u32; run.intervals.len()], scratch)
    };
    let (wa, wb) = (whole(&ba, &mut scratch), whole(&bb, &mut scratch));
    let logs: Vec<f64> = wa.iter().zip(&wb).map(|(x, y)| (y / x).ln()).collect();
    let (ma, mb) = (ba.intervals.len(), bb.intervals.len());
    if ma < 2 || mb < 2 {
        return logs.iter().map(|l| (*l, None)).collect();
    }
    let mut rng = XorShift(opts.seed | 1);
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); QUANTILES.len()];
    let mut times = Vec::new();
    for _ in 0..opts.resamples.clamp(100, PERCENTILE_RESAMPLES) {
        let mut draw = |run: &Binned, scratch: &mut Vec<u64>| {
            let m = run.intervals.len();
            times.clear();
            times.resize(m, 0u32);
            for _ in 0..m {
                times[rng.below(m)] += 1;
            }
            run.quantiles(&times, scratch)
        };
        let qa = draw(&ba, &mut scratch);
        let qb = draw(&bb, &mut scratch);
        for ((x, y), out) in qa.iter().zip(&qb).zip(&mut samples) {
            let l = (y / x).ln();
            if l.is_finite() {
                out.push(l);
            }
        }
    }
    let n = ma.min(mb) as f64;
    let c = critical(opts.alpha, k, (ma + mb - 2) as f64);
    logs.iter()
        .zip(samples)
        .map(|(&l, s)| {
            if s.len() < 2 || !l.is_finite() {
                return (l, None);
            }
            let se = (squares(&s) / (s.len() - 1) as f64 * n / (n - 1.0)).sqrt();
            (l, Some((l - c * se, l + c * se)))
        })
        .collect()
}

/// The verdict of a percentile judged within a run, from its log change and interval.
pub(crate) fn percentile_change(
    log_change: f64,
    ci: Option<(f64, f64)>,
    better: Option<Better>,
    k: usize,
    opts: &CompareOptions,
) -> Change {
    let judged = LogInterval {
        change: log_change,
        ci,
        sigma: f64::NAN,
    };
    match ci {
        Some(_) => {
            let mut out = change_of(judged, better, k, opts);
            out.needs = None;
            out
        }
        None => Change::undecided(log_change.exp_m1(), Needs::Record),
    }
}

/// What binning asks of an interval histogram, dense or sparse: hdrhistogram's `min`,
/// `max` and `iter_recorded` (each non-empty bucket's highest equivalent value and count,
/// in value order).
pub(crate) trait Buckets {
    fn lowest(&self) -> u64;
    fn highest(&self) -> u64;
    fn each_bucket(&self, f: &mut dyn FnMut(u64, u64));
}

impl Buckets for Histogram<u64> {
    fn lowest(&self) -> u64 {
        self.min()
    }
    fn highest(&self) -> u64 {
        self.max()
    }
    fn each_bucket(&self, f: &mut dyn FnMut(u64, u64)) {
        for v in self.iter_recorded() {
            f(v.value_iterated_to(), v.count_at_value());
        }
    }
}

impl Buckets for crate::sparse::SparseHistogram {
    fn lowest(&self) -> u64 {
        self.min()
    }
    fn highest(&self) -> u64 {
        self.max()
    }
    fn each_bucket(&self, f: &mut dyn FnMut(u64, u64)) {
        for (value, count) in self.iter() {
            f(value, count);
        }
    }
}

/// One interval's non-empty bins: (index from the lowest, count).
type BinCounts = Box<[(u32, u32)]>;

/// Interval histograms reduced to 0.5 % bins, for merging many times over.
pub(crate) struct Binned {
    /// Each interval's (or block's, see [`blocks`]) non-empty bins (index from `lowest`)
    /// and counts, and its maximum.
    /// A count past `u32::MAX` takes several entries of one bin: 8 bytes a bin, for the
    /// tens of thousands of intervals of a long session.
    intervals: Vec<(BinCounts, u64)>,
    /// Bin index of the lowest value of any interval.
    lowest: i64,
    /// Bins from the lowest to the highest.
    len: usize,
}

impl Binned {
    fn bin(v: u64) -> i64 {
        ((v.max(1) as f64).ln() / PERCENTILE_BIN_RATIO.ln()).floor() as i64
    }

    pub(crate) fn of<H: Buckets>(histograms: &[&H]) -> Binned {
        let lowest = histograms
            .iter()
            .map(|h| Binned::bin(h.lowest()))
            .min()
            .unwrap_or(0);
        let highest = histograms
            .iter()
            .map(|h| Binned::bin(h.highest()))
            .max()
            .unwrap_or(0);
        let intervals = blocks(histograms.len())
            .map(|range| {
                let mut counts: Vec<(u32, u64)> = Vec::new();
                let mut max = 0;
                for h in &histograms[range.clone()] {
                    max = max.max(h.highest());
                    h.each_bucket(&mut |value, n| {
                        counts.push(((Binned::bin(value) - lowest) as u32, n));
                    });
                }
                if range.len() > 1 {
                    counts.sort_unstable_by_key(|&(i, _)| i);
                }
                let mut bins: Vec<(u32, u32)> = Vec::new();
                for (i, mut n) in counts {
                    while n > 0 {
                        match bins.last_mut() {
                            Some((last, count)) if *last == i && *count < u32::MAX => {
                                let add = n.min(u64::from(u32::MAX - *count));
                                *count += add as u32;
                                n -= add;
                            }
                            _ => {
                                let add = n.min(u64::from(u32::MAX));
                                bins.push((i, add as u32));
                                n -= add;
                            }
                        }
                    }
                }
                (bins.into_boxed_slice(), max)
            })
            .collect();
        Binned {
            intervals,
            lowest,
            len: (highest - lowest + 1).max(1) as usize,
        }
    }

    /// The percentiles of `QUANTILES` of the intervals merged `times[i]` times each
    /// (the value of a bin is its lower edge; the maximum is exact).
    fn quantiles(&self, times: &[u32], merged: &mut Vec<u64>) -> Vec<f64> {
        merged.clear();
        merged.resize(self.len, 0);
        let mut total = 0u64;
        let mut max = 0u64;
        for ((bins, interval_max), &m) in self.intervals.iter().zip(times) {
            if m == 0 {
                continue;
            }
            max = max.max(*interval_max);
            for &(i, count) in bins.iter() {
                let add = u64::from(count).saturating_mul(u64::from(m));
                merged[i as usize] = merged[i as usize].saturating_add(add);
                total = total.saturating_add(add);
            }
        }
        let mut out = Vec::with_capacity(QUANTILES.len());
        let (mut i, mut seen) = (0usize, 0u64);
        for &(_, q) in &QUANTILES {
            if q >= 1.0 {
                out.push(max as f64);
                continue;
            }
            // The value at which at least q of the values are counted, as HdrHistogram's
            // value_at_quantile reads it.
            let target = ((q * total as f64).ceil() as u64).max(1);
            while i < merged.len() && seen + merged[i] < target {
                seen += merged[i];
                i += 1;
            }
            let bin = self.lowest + i.min(merged.len() - 1) as i64;
            out.push(PERCENTILE_BIN_RATIO.powf(bin as f64));
        }
        out
    }
}

/// A small deterministic generator for the bootstrap (no statistical claims beyond
/// resampling indices uniformly).
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}
