//! The statistics of a comparison: how sure a change is.
//!
//! Each side of a figure is a list of *runs*, each run a list of per-interval values with
//! their weights (an interval's length; a figure with one value per run has one). The
//! figure's value on a side is the mean over its runs of each run's value (the weighted
//! mean of its intervals, or for a latency percentile the percentile of its intervals
//! merged). How far that can move by chance comes from a two-stage bootstrap: the runs are
//! resampled with replacement, and within each run drawn its intervals, and the relative
//! change of B against A is recomputed each time. With one run a side the intervals are
//! all the bootstrap sees, so the interval covers the noise within a run only; with runs
//! on both sides it covers the noise between runs, the larger one on shared machines. A
//! side of one run against several borrows the other side's spread between runs.
//!
//! The interval of a figure is the change ± *c* standard errors of the bootstrap, where
//! *c* is Student's *t* quantile at 1 − α/(2*k*) for the *k* figures judged together
//! (Bonferroni): the chance that a comparison flags any of its figures when nothing
//! changed is at most α, 1 % by default, however many figures it shows. Degrees of freedom
//! are those of the units resampled (intervals or runs, both sides, less two), so short
//! runs and few runs get wide intervals rather than confident verdicts. The standard
//! error of a side resampled from *n* units is corrected by √(*n* / (*n* − 1)), the
//! bootstrap's known shortfall for small samples.
//!
//! A run of more than [`MAX_BLOCKS`] intervals is resampled as that many blocks of
//! consecutive intervals (a block bootstrap): for independent intervals the standard error
//! is the same as drawing the intervals one by one, where neighbouring intervals move
//! together it is the truer one, and the cost of a comparison stops growing with the length
//! of the run (an hour at 100 ms is 36,000 intervals a side). The shown values are those of
//! every interval, never of the blocks.

use std::borrow::Cow;
use std::ops::Range;

use hdrhistogram::Histogram;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::{Change, CompareOptions, Verdict};
use crate::meta::Better;

/// One run of a figure: `(value, weight)` per interval.
pub(crate) type Run = Vec<(f64, f64)>;

/// Resamples of whole-run percentiles: each merges every interval of every run drawn, so
/// fewer than for means suffice for a standard error (`benches/compare.rs` measures the
/// cost of two series of 30 runs).
pub const PERCENTILE_RESAMPLES: usize = 500;
/// Width of the bins the resampled histograms are merged in: 0.5 %, well inside the
/// noise threshold.
const PERCENTILE_BIN_RATIO: f64 = 1.005;

/// The most units a run offers the bootstrap: a longer run's intervals are drawn in this
/// many blocks of consecutive intervals.
pub const MAX_BLOCKS: usize = 1_000;

/// The blocks `m` intervals are drawn in: each interval its own block up to
/// [`MAX_BLOCKS`], else that many runs of consecutive intervals, their lengths at most one
/// apart.
fn blocks(m: usize) -> impl Iterator<Item = Range<usize>> {
    let n = m.min(MAX_BLOCKS);
    (0..n).map(move |b| b * m / n..(b + 1) * m / n)
}

/// `runs` with each run of more than [`MAX_BLOCKS`] intervals as its blocks: a block's
/// value is its intervals' weighted mean and its weight their summed weight, so the
/// weighted mean of any draw of blocks is that of the intervals they hold.
fn blocked(runs: &[Run]) -> Cow<'_, [Run]> {
    if runs.iter().all(|r| r.len() <= MAX_BLOCKS) {
        return Cow::Borrowed(runs);
    }
    Cow::Owned(
        runs.iter()
            .map(|run| {
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
            })
            .collect(),
    )
}

/// The latency figures of each metric: name suffix and quantile (1.0: the maximum).
pub(crate) const QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("max", 1.0),
];

/// What the units of a judgement were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Units {
    /// One run a side: its intervals.
    Intervals,
    /// Runs.
    Runs,
}

impl Units {
    /// The units of a figure with `na` and `nb` runs.
    pub(crate) fn of(na: usize, nb: usize) -> Units {
        if na <= 1 && nb <= 1 {
            Units::Intervals
        } else {
            Units::Runs
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

/// A side's value: the mean of its runs' values.
pub(crate) fn side_value(runs: &[Run]) -> f64 {
    let values: Vec<f64> = runs
        .iter()
        .map(run_value)
        .filter(|v| v.is_finite())
        .collect();
    if values.is_empty() {
        return f64::NAN;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

/// The units a side offers to the bootstrap: its runs when it has several, else the
/// intervals of its one run.
fn units(runs: &[Run], units: Units) -> usize {
    match units {
        Units::Runs => runs.len(),
        Units::Intervals => runs.first().map_or(0, Vec::len),
    }
}

/// Whether a figure with these sides can be judged: two units a side (intervals or runs),
/// or one run against several.
pub(crate) fn judgeable(a: &[Run], b: &[Run]) -> bool {
    let kind = Units::of(a.len(), b.len());
    let (ua, ub) = (units(a, kind), units(b, kind));
    match kind {
        Units::Intervals => ua >= 2 && ub >= 2,
        Units::Runs => ua.max(ub) >= 2 && ua.min(ub) >= 1,
    }
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

/// The degrees of freedom of a judgement: units less one a side.
fn degrees(a: &[Run], b: &[Run], kind: Units) -> f64 {
    let (ua, ub) = (units(a, kind), units(b, kind));
    (ua.saturating_sub(1) + ub.saturating_sub(1)).max(1) as f64
}

/// Standard deviation of `v` (n − 1), 0 for fewer than two.
fn std_dev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// The relative spread of one run's value between the runs of `runs`, for a side of one
/// run judged against it.
fn run_spread(runs: &[Run]) -> f64 {
    let values: Vec<f64> = runs
        .iter()
        .map(run_value)
        .filter(|v| v.is_finite())
        .collect();
    let m = values.iter().sum::<f64>() / values.len().max(1) as f64;
    if m == 0.0 || !m.is_finite() {
        return 0.0;
    }
    std_dev(&values) / m.abs()
}

/// Judges the change of a figure from A's runs to B's: its shown change, the family-wise
/// interval and the verdict (see the module docs). `judged` is how many figures the
/// comparison judges together.
pub(crate) fn judge_runs(
    a: &[Run],
    b: &[Run],
    better: Option<Better>,
    judged: usize,
    opts: &CompareOptions,
) -> Change {
    let change = relative(side_value(a), side_value(b));
    let (a, b) = (&*blocked(a), &*blocked(b));
    if !judgeable(a, b) {
        return Change {
            change,
            ci: None,
            verdict: Verdict::TooFewSamples,
        };
    }
    let kind = Units::of(a.len(), b.len());
    let mut rng = XorShift(opts.seed | 1);
    let mut changes = Vec::with_capacity(opts.resamples);
    for _ in 0..opts.resamples.max(100) {
        let (x, y) = (resampled(a, &mut rng), resampled(b, &mut rng));
        let c = relative(x, y);
        if c.is_finite() {
            changes.push(c);
        }
    }
    let se = corrected_se(&changes, a, b, kind);
    interval(
        change,
        se,
        critical(opts.alpha, judged, degrees(a, b, kind)),
        better,
        opts,
    )
}

/// The bootstrap's standard error of the relative change, corrected for small samples,
/// with a lone run's borrowed spread added.
fn corrected_se(changes: &[f64], a: &[Run], b: &[Run], kind: Units) -> f64 {
    let (ua, ub) = (units(a, kind), units(b, kind));
    let n = ua.min(ub).max(2) as f64;
    let mut var = std_dev(changes).powi(2) * n / (n - 1.0);
    if kind == Units::Runs && a.len().min(b.len()) == 1 {
        let many = if a.len() > 1 { a } else { b };
        var += run_spread(many).powi(2);
    }
    var.sqrt()
}

/// `change` with the interval `change ± c·se` and its verdict.
fn interval(change: f64, se: f64, c: f64, better: Option<Better>, opts: &CompareOptions) -> Change {
    if !change.is_finite() || !se.is_finite() {
        return Change {
            change,
            ci: None,
            verdict: Verdict::TooFewSamples,
        };
    }
    let ci = (change - c * se, change + c * se);
    with_verdict(
        Change {
            change,
            ci: Some(ci),
            verdict: Verdict::WithinNoise,
        },
        better,
        opts,
    )
}

/// One bootstrap draw of a side: runs drawn with replacement, and within each its
/// intervals; the mean of the drawn runs' weighted means.
fn resampled(runs: &[Run], rng: &mut XorShift) -> f64 {
    let n = runs.len();
    let mut sum = 0.0;
    let mut counted = 0usize;
    for _ in 0..n {
        let run = &runs[if n == 1 { 0 } else { rng.below(n) }];
        let m = run.len();
        if m == 0 {
            continue;
        }
        let v = weighted_mean((0..m).map(|_| run[if m == 1 { 0 } else { rng.below(m) }]));
        if v.is_finite() {
            sum += v;
            counted += 1;
        }
    }
    if counted == 0 {
        f64::NAN
    } else {
        sum / counted as f64
    }
}

/// `change` with its verdict from its interval, the threshold and the better direction
/// (no interval: too few samples).
pub(crate) fn with_verdict(
    mut change: Change,
    better: Option<Better>,
    opts: &CompareOptions,
) -> Change {
    let Some(ci) = change.ci else {
        change.verdict = Verdict::TooFewSamples;
        return change;
    };
    let beyond_noise = (ci.0 > 0.0 || ci.1 < 0.0) && change.change.abs() >= opts.threshold;
    change.verdict = match (beyond_noise, better) {
        (false, _) => Verdict::WithinNoise,
        (true, None) => Verdict::Changed,
        (true, Some(Better::Higher)) if change.change > 0.0 => Verdict::Improved,
        (true, Some(Better::Lower)) if change.change < 0.0 => Verdict::Improved,
        (true, Some(_)) => Verdict::Regressed,
    };
    change
}

/// The latency percentiles of A's runs against B's (p50, p90, p99, p99.9 and the maximum,
/// in that order), each run given by its interval histograms: a side's value is the mean
/// of its runs' whole-run percentiles, and the bootstrap draws runs, then within each run
/// its intervals, merges them (in 0.5 % bins) and reads the percentiles again. Intervals
/// are the finest unit resampled because values within one are not independent. The
/// verdicts wait for the figure's better direction (the comparison gives them);
/// `judged` is how many figures the comparison judges together.
pub(crate) fn judge_percentile_runs<H: Buckets>(
    a: &[Vec<&H>],
    b: &[Vec<&H>],
    judged: usize,
    opts: &CompareOptions,
) -> Vec<Change> {
    let binned = |runs: &[Vec<&H>]| -> Vec<Binned> {
        runs.iter()
            .filter(|r| !r.is_empty())
            .map(|r| Binned::of(r))
            .collect()
    };
    let (ba, bb) = (binned(a), binned(b));
    let whole = |runs: &[Binned]| -> Vec<f64> {
        let mut sums = vec![0.0; QUANTILES.len()];
        let mut scratch = Vec::new();
        for run in runs {
            let all = vec![1u32; run.intervals.len()];
            for (s, q) in sums.iter_mut().zip(run.quantiles(&all, &mut scratch)) {
                *s += q;
            }
        }
        sums.iter().map(|s| s / runs.len().max(1) as f64).collect()
    };
    let (wa, wb) = (whole(&ba), whole(&bb));
    let mut changes: Vec<Change> = wa
        .iter()
        .zip(&wb)
        .map(|(&x, &y)| Change {
            change: relative(x, y),
            ci: None,
            verdict: Verdict::TooFewSamples,
        })
        .collect();
    // The units, as for means: one interval per unit of a lone run's histograms.
    let shape = |runs: &[Binned]| -> Vec<Run> {
        runs.iter()
            .map(|r| vec![(1.0, 1.0); r.intervals.len()])
            .collect()
    };
    let (sa, sb) = (shape(&ba), shape(&bb));
    if !judgeable(&sa, &sb) {
        return changes;
    }
    let kind = Units::of(sa.len(), sb.len());
    let mut rng = XorShift(opts.seed | 1);
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); QUANTILES.len()];
    let mut scratch = Vec::new();
    for _ in 0..opts.resamples.clamp(100, PERCENTILE_RESAMPLES) {
        let qa = resampled_quantiles(&ba, &mut rng, &mut scratch);
        let qb = resampled_quantiles(&bb, &mut rng, &mut scratch);
        for ((x, y), out) in qa.iter().zip(&qb).zip(&mut samples) {
            let c = relative(*x, *y);
            if c.is_finite() {
                out.push(c);
            }
        }
    }
    let c = critical(opts.alpha, judged, degrees(&sa, &sb, kind));
    for (i, (change, resampled)) in changes.iter_mut().zip(samples).enumerate() {
        if resampled.is_empty() {
            continue;
        }
        let mut se = corrected_se(&resampled, &sa, &sb, kind);
        if kind == Units::Runs && sa.len().min(sb.len()) == 1 {
            // The lone run borrows the other side's spread of this percentile.
            let many = if ba.len() > 1 { &ba } else { &bb };
            se = (se.powi(2) + percentile_spread(many, i).powi(2)).sqrt();
        }
        let judged_change = interval(change.change, se, c, None, opts);
        change.ci = judged_change.ci;
        change.verdict = judged_change.verdict;
    }
    changes
}

/// The relative spread between runs of quantile `i`'s whole-run value.
fn percentile_spread(runs: &[Binned], i: usize) -> f64 {
    let mut scratch = Vec::new();
    let values: Vec<f64> = runs
        .iter()
        .map(|r| r.quantiles(&vec![1u32; r.intervals.len()], &mut scratch)[i])
        .collect();
    let m = values.iter().sum::<f64>() / values.len().max(1) as f64;
    if m == 0.0 { 0.0 } else { std_dev(&values) / m }
}

/// One bootstrap draw of a side's percentiles: runs with replacement, each run's intervals
/// with replacement, the mean of the drawn runs' percentiles.
fn resampled_quantiles(runs: &[Binned], rng: &mut XorShift, scratch: &mut Vec<u64>) -> Vec<f64> {
    let n = runs.len();
    let mut sums = vec![0.0; QUANTILES.len()];
    let mut times = Vec::new();
    for _ in 0..n {
        let run = &runs[if n == 1 { 0 } else { rng.below(n) }];
        let m = run.intervals.len();
        times.clear();
        times.resize(m, 0u32);
        for _ in 0..m {
            times[rng.below(m)] += 1;
        }
        for (s, q) in sums.iter_mut().zip(run.quantiles(&times, scratch)) {
            *s += q;
        }
    }
    sums.iter().map(|s| s / n.max(1) as f64).collect()
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
