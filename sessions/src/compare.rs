//! Comparing two sessions: every comparable figure with a verdict judged from the
//! per-interval samples, differential stacks, and the functions that moved most.
//!
//! For each figure measured every interval (throughput, latency percentiles of each
//! latency.hlog interval, RSS, threads, CPU, context switches), the change of B against A
//! comes with a bootstrap confidence interval of the ratio of the interval means, as
//! criterion judges a change: intervals are resampled with replacement, the relative change
//! of the means recomputed, and the middle 95 % kept. A change is `improved` or `regressed`
//! only when the interval excludes zero *and* the change is at least the threshold;
//! otherwise it is `within noise`. Latency percentiles are the whole run's (every interval
//! merged), so their interval comes from resampling whole intervals and recomputing the
//! merged percentile ([`judge_percentiles`]), the same statistic as the change shown.
//! Figures with one value per session (the workload's own
//! summary figures, the peak RSS) are shown with their change and no verdict: two numbers
//! alone cannot tell a change from noise.
//!
//! ```
//! use benchtop_sessions::compare::{CompareOptions, Verdict, judge};
//! use benchtop_sessions::meta::Better;
//!
//! let a = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8];
//! let b: Vec<f64> = a.iter().map(|v| v * 0.9).collect();
//! let change = judge(&a, &b, Some(Better::Higher), &CompareOptions::default());
//! assert_eq!(change.verdict, Verdict::Regressed);
//! assert!((change.change + 0.10).abs() < 1e-9);
//! ```

use crate::escape::{Escaped, escaped, markdown_cell, markdown_code};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::{self, Write as _};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::meta::Better;
use crate::units::human_count;
use crate::{Session, SessionError, StackTree};

/// How to compare.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CompareOptions {
    /// Changes smaller than this fraction are within noise whatever the statistics say
    /// (default 0.02, criterion's noise threshold).
    pub threshold: f64,
    /// Bootstrap resamples (default 10 000, as criterion).
    pub resamples: usize,
    /// Seed of the resampling, so a comparison prints the same every time.
    pub seed: u64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            threshold: 0.02,
            resamples: 10_000,
            seed: 0x5eed_b0a7_5eed_b0a7,
        }
    }
}

/// What a change means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verdict {
    /// Beyond noise, in the better direction.
    Improved,
    /// Beyond noise, in the worse direction.
    Regressed,
    /// Beyond noise, for a figure with no better direction.
    Changed,
    /// Not beyond noise (or below the threshold).
    WithinNoise,
    /// Too few intervals (fewer than two on a side) to judge.
    TooFewSamples,
    /// One value per session: no verdict.
    OneValue,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::Changed => "changed",
            Verdict::WithinNoise => "within noise",
            Verdict::TooFewSamples => "too few intervals",
            Verdict::OneValue => "one value each",
        })
    }
}

/// The change of one figure and its judgement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    /// B / A − 1 of the shown values.
    pub change: f64,
    /// The 95 % interval of the relative change of the interval means, when judged.
    pub ci: Option<(f64, f64)>,
    /// The verdict.
    pub verdict: Verdict,
}

/// One row of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FigureComparison {
    /// The figure (`messages/s`, `lap p99`, `RSS`…).
    pub name: String,
    /// Its unit.
    pub unit: String,
    /// A's value.
    pub a: f64,
    /// B's value.
    pub b: f64,
    /// Which direction is better, when one is.
    pub better: Option<Better>,
    /// The change and its verdict.
    #[serde(flatten)]
    pub change: Change,
}

/// A function whose share of the profile moved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mover {
    /// The frame name.
    pub name: String,
    /// Share of A's weight in stacks ending in it.
    pub self_a: f64,
    /// The same in B.
    pub self_b: f64,
    /// Share of A's weight in stacks through it.
    pub total_a: f64,
    /// The same in B.
    pub total_b: f64,
}

impl Mover {
    /// The larger of the self and total moves, in share points.
    pub fn moved(&self) -> f64 {
        (self.self_b - self.self_a)
            .abs()
            .max((self.total_b - self.total_a).abs())
    }
}

/// Two sessions compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// A's directory.
    pub a: String,
    /// B's directory.
    pub b: String,
    /// Every comparable figure.
    pub figures: Vec<FigureComparison>,
    /// What differs between the two runs besides the results (workload, parameters).
    pub warnings: Vec<String>,
    /// The threshold used.
    pub threshold: f64,
}

impl Comparison {
    /// The figures that regressed beyond the threshold.
    pub fn regressions(&self) -> impl Iterator<Item = &FigureComparison> {
        self.figures
            .iter()
            .filter(|f| f.change.verdict == Verdict::Regressed)
    }
}

/// Compares session B against session A.
pub fn compare(a: &Session, b: &Session, opts: &CompareOptions) -> Comparison {
    let mut figures = Vec::new();
    let (sa, sb) = (Samples::of(a), Samples::of(b));
    let mut percentiles: HashMap<String, Change> = HashMap::new();
    for (tag, a_intervals) in &sa.intervals {
        if let Some(b_intervals) = sb.intervals.get(tag) {
            for ((q_name, _), change) in
                QUANTILES
                    .iter()
                    .zip(judge_percentiles(a_intervals, b_intervals, opts))
            {
                percentiles.insert(format!("{tag} {q_name}"), change);
            }
        }
    }
    for (name, a_vals) in &sa.series {
        let Some(b_vals) = sb.series.get(name) else {
            continue;
        };
        let (unit, better) = sa.kinds.get(name).cloned().unwrap_or_default();
        let (a_value, b_value) = match (sa.whole.get(name), sb.whole.get(name)) {
            (Some(&x), Some(&y)) => (x, y),
            _ => (mean(a_vals), mean(b_vals)),
        };
        let shown = relative(a_value, b_value);
        let mut change = match percentiles.get(name) {
            Some(&binned) => {
                // The interval was read in 0.5 % bins: move it by what the bins took
                // off the change, so that it is about the exact percentiles shown.
                let shift = if shown.is_finite() && binned.change.is_finite() {
                    shown - binned.change
                } else {
                    0.0
                };
                let ci = binned.ci.map(|(lo, hi)| (lo + shift, hi + shift));
                let exact = Change {
                    change: shown,
                    ci,
                    verdict: binned.verdict,
                };
                with_verdict(exact, better, opts)
            }
            None => judge(a_vals, b_vals, better, opts),
        };
        change.change = shown;
        // The shown change and the judged one must agree in direction to be a verdict.
        if let Some((lo, hi)) = change.ci
            && ((change.change > 0.0 && hi < 0.0) || (change.change < 0.0 && lo > 0.0))
        {
            change.verdict = Verdict::WithinNoise;
        }
        figures.push(FigureComparison {
            name: name.clone(),
            unit,
            a: a_value,
            b: b_value,
            better,
            change,
        });
    }
    for (name, (a_value, unit, better)) in &sa.single {
        let Some((b_value, _, _)) = sb.single.get(name) else {
            continue;
        };
        figures.push(FigureComparison {
            name: name.clone(),
            unit: unit.clone(),
            a: *a_value,
            b: *b_value,
            better: *better,
            change: Change {
                change: relative(*a_value, *b_value),
                ci: None,
                verdict: Verdict::OneValue,
            },
        });
    }
    Comparison {
        a: a.dir.display().to_string(),
        b: b.dir.display().to_string(),
        figures,
        warnings: differences(a, b),
        threshold: opts.threshold,
    }
}

/// B / A − 1, and 0 when both are 0.
fn relative(a: f64, b: f64) -> f64 {
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

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

/// Judges the change from per-interval samples `a` to `b`: the bootstrap 95 % interval of
/// the relative change of the means, and the verdict (see the module docs).
pub fn judge(a: &[f64], b: &[f64], better: Option<Better>, opts: &CompareOptions) -> Change {
    let a: Vec<f64> = a.iter().copied().filter(|v| v.is_finite()).collect();
    let b: Vec<f64> = b.iter().copied().filter(|v| v.is_finite()).collect();
    let change = relative(mean(&a), mean(&b));
    if a.len() < 2 || b.len() < 2 {
        return Change {
            change,
            ci: None,
            verdict: Verdict::TooFewSamples,
        };
    }
    let mut rng = XorShift(opts.seed | 1);
    let mut changes: Vec<f64> = (0..opts.resamples.max(100))
        .map(|_| relative(resampled_mean(&a, &mut rng), resampled_mean(&b, &mut rng)))
        .filter(|c| c.is_finite())
        .collect();
    if changes.is_empty() {
        return Change {
            change,
            ci: None,
            verdict: Verdict::TooFewSamples,
        };
    }
    with_verdict(
        Change {
            change,
            ci: Some(middle_95(&mut changes)),
            verdict: Verdict::WithinNoise,
        },
        better,
        opts,
    )
}

/// The 2.5 % and 97.5 % points of `changes` (not empty), sorting them.
fn middle_95(changes: &mut [f64]) -> (f64, f64) {
    changes.sort_unstable_by(f64::total_cmp);
    let at = |q: f64| changes[((changes.len() - 1) as f64 * q).round() as usize];
    (at(0.025), at(0.975))
}

/// `change` with its verdict from its interval, the threshold and the better direction
/// (no interval: too few samples).
fn with_verdict(mut change: Change, better: Option<Better>, opts: &CompareOptions) -> Change {
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

/// Resamples of whole-run percentiles: each merges as many intervals as the run has, so
/// fewer than for means suffice (criterion's default of 100 000 is for means of samples).
pub const PERCENTILE_RESAMPLES: usize = 2_000;
/// Width of the bins the resampled histograms are merged in: 0.5 %, well inside the
/// noise threshold.
const PERCENTILE_BIN_RATIO: f64 = 1.005;

/// The whole run's latency percentiles of A against B (p50, p90, p99, p99.9 and the
/// maximum, in that order), from their interval histograms: the change of
/// the merged percentiles, and a bootstrap 95 % interval from resampling whole intervals
/// with replacement and merging them again (in 0.5 % bins). Intervals are the unit of
/// resampling because values within one are not independent. The verdicts wait for the
/// figure's better direction ([`compare`] gives them); with fewer than two intervals a
/// side there is no interval.
pub fn judge_percentiles(
    a: &[&Histogram<u64>],
    b: &[&Histogram<u64>],
    opts: &CompareOptions,
) -> Vec<Change> {
    let (ba, bb) = (Binned::of(a), Binned::of(b));
    let whole = |h: &Binned| -> Vec<f64> {
        let all = vec![1u32; h.intervals.len()];
        h.quantiles(&all, &mut Vec::new())
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
    if a.len() < 2 || b.len() < 2 {
        return changes;
    }
    let mut rng = XorShift(opts.seed | 1);
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); QUANTILES.len()];
    let (mut ma, mut mb) = (vec![0u32; a.len()], vec![0u32; b.len()]);
    let mut scratch = Vec::new();
    for _ in 0..opts.resamples.clamp(100, PERCENTILE_RESAMPLES) {
        for m in [&mut ma, &mut mb] {
            m.fill(0);
            let n = m.len();
            for _ in 0..n {
                m[rng.below(n)] += 1;
            }
        }
        let qa = ba.quantiles(&ma, &mut scratch);
        let qb = bb.quantiles(&mb, &mut scratch);
        for ((x, y), out) in qa.iter().zip(&qb).zip(&mut samples) {
            let c = relative(*x, *y);
            if c.is_finite() {
                out.push(c);
            }
        }
    }
    for (change, mut resampled) in changes.iter_mut().zip(samples) {
        if !resampled.is_empty() {
            change.ci = Some(middle_95(&mut resampled));
        }
    }
    changes
}

/// Interval histograms reduced to 0.5 % bins, for merging many times over.
struct Binned {
    /// Each interval's non-empty bins (index from `lowest`) and counts, and its maximum.
    intervals: Vec<(Vec<(u32, u64)>, u64)>,
    /// Bin index of the lowest value of any interval.
    lowest: i64,
    /// Bins from the lowest to the highest.
    len: usize,
}

impl Binned {
    fn bin(v: u64) -> i64 {
        ((v.max(1) as f64).ln() / PERCENTILE_BIN_RATIO.ln()).floor() as i64
    }

    fn of(histograms: &[&Histogram<u64>]) -> Binned {
        let lowest = histograms
            .iter()
            .map(|h| Binned::bin(h.min()))
            .min()
            .unwrap_or(0);
        let highest = histograms
            .iter()
            .map(|h| Binned::bin(h.max()))
            .max()
            .unwrap_or(0);
        let intervals = histograms
            .iter()
            .map(|h| {
                let mut bins: Vec<(u32, u64)> = Vec::new();
                for v in h.iter_recorded() {
                    let i = (Binned::bin(v.value_iterated_to()) - lowest) as u32;
                    match bins.last_mut() {
                        Some((last, count)) if *last == i => *count += v.count_at_value(),
                        _ => bins.push((i, v.count_at_value())),
                    }
                }
                (bins, h.max())
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
            for &(i, count) in bins {
                let add = count.saturating_mul(u64::from(m));
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

fn resampled_mean(v: &[f64], rng: &mut XorShift) -> f64 {
    let n = v.len();
    (0..n).map(|_| v[rng.below(n)]).sum::<f64>() / n as f64
}

/// A small deterministic generator for the bootstrap (no statistical claims beyond
/// resampling indices uniformly).
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// The latency figures of each metric: name suffix and quantile (1.0: the maximum).
const QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("max", 1.0),
];

/// A session's samples: per-interval series, whole-run values, single values.
#[derive(Default)]
struct Samples<'a> {
    /// The non-empty latency intervals of each metric.
    intervals: BTreeMap<String, Vec<&'a Histogram<u64>>>,
    /// Per-interval samples by figure name, in a stable order.
    series: BTreeMap<String, Vec<f64>>,
    /// Unit and better direction by figure name.
    kinds: HashMap<String, (String, Option<Better>)>,
    /// The whole run's value, where it is not the mean of the intervals (percentiles).
    whole: HashMap<String, f64>,
    /// One value per session: name → (value, unit, better).
    single: BTreeMap<String, (f64, String, Option<Better>)>,
}

impl<'a> Samples<'a> {
    fn of(s: &'a Session) -> Samples<'a> {
        let mut out = Samples::default();
        let push = |out: &mut Samples, name: String, unit: &str, better, v: f64| {
            out.kinds
                .entry(name.clone())
                .or_insert_with(|| (unit.to_owned(), better));
            out.series.entry(name).or_default().push(v);
        };
        for row in &s.rows {
            for (counter, rate) in &row.rates {
                push(
                    &mut out,
                    format!("{counter}/s"),
                    "/s",
                    Some(Better::Higher),
                    *rate,
                );
            }
            if let Some(r) = &row.resources {
                push(
                    &mut out,
                    "RSS".into(),
                    "bytes",
                    Some(Better::Lower),
                    r.rss_bytes as f64,
                );
                push(&mut out, "threads".into(), "", None, f64::from(r.threads));
                push(
                    &mut out,
                    "CPU".into(),
                    "%",
                    Some(Better::Lower),
                    r.cpu_percent,
                );
                if let Some(ctx) = r.ctx_switches_interval
                    && row.interval_s > 0.0
                {
                    let per_s = (ctx.voluntary + ctx.involuntary) as f64 / row.interval_s;
                    push(
                        &mut out,
                        "context switches/s".into(),
                        "/s",
                        Some(Better::Lower),
                        per_s,
                    );
                }
            }
        }
        // Latency percentiles of each interval of latency.hlog; the whole run's from the
        // merged histogram.
        for interval in &s.latency {
            let h = &interval.histogram;
            if h.is_empty() {
                continue;
            }
            out.intervals
                .entry(tag_name(&interval.tag).to_owned())
                .or_default()
                .push(h);
            for (q_name, q) in QUANTILES {
                let name = format!("{} {q_name}", tag_name(&interval.tag));
                let v = if q >= 1.0 {
                    h.max()
                } else {
                    h.value_at_quantile(q)
                };
                push(&mut out, name, "ns", Some(Better::Lower), v as f64);
            }
        }
        let mut notes = Vec::new();
        for (tag, h) in s.merged_latency(&mut notes) {
            for (q_name, q) in QUANTILES {
                let v = if q >= 1.0 {
                    h.max()
                } else {
                    h.value_at_quantile(q)
                };
                out.whole
                    .insert(format!("{} {q_name}", tag_name(tag)), v as f64);
            }
        }
        if let Some(peak) = s
            .rows
            .iter()
            .filter_map(|r| r.resources.map(|r| r.peak_rss_bytes.max(r.rss_bytes)))
            .max()
        {
            out.single.insert(
                "peak RSS".into(),
                (peak as f64, "bytes".into(), Some(Better::Lower)),
            );
        }
        for f in &s.meta.summary {
            out.single
                .insert(f.name.clone(), (f.value, f.unit.clone(), f.better));
        }
        out
    }
}

fn tag_name(tag: &str) -> &str {
    if tag.is_empty() { "latency" } else { tag }
}

/// What differs between two sessions besides their results: workload, parameters,
/// sampling settings. Each difference is one line.
fn differences(a: &Session, b: &Session) -> Vec<String> {
    let mut out = Vec::new();
    let (wa, wb) = (&a.meta.workload, &b.meta.workload);
    if wa.name != wb.name {
        out.push(format!(
            "different workloads: A ran {}, B ran {}",
            wa.name, wb.name
        ));
    }
    let keys: std::collections::BTreeSet<&String> =
        wa.params.keys().chain(wb.params.keys()).collect();
    for key in keys {
        let (x, y) = (wa.params.get(key), wb.params.get(key));
        if x != y {
            let show =
                |v: Option<&serde_json::Value>| v.map_or("(unset)".to_owned(), ToString::to_string);
            out.push(format!("parameter {key}: A {} , B {}", show(x), show(y)).replace(" ,", ","));
        }
    }
    let (sa, sb) = (&a.meta.sampling, &b.meta.sampling);
    if sa.enabled && sb.enabled && (sa.event != sb.event || sa.frequency_hz != sb.frequency_hz) {
        out.push(format!(
            "sampled differently: A {} at {} Hz, B {} at {} Hz",
            sa.event, sa.frequency_hz, sb.event, sb.frequency_hz
        ));
    }
    if sa.symbols != sb.symbols || sa.unwind != sb.unwind {
        out.push(format!(
            "stacks named or unwound differently: A {}/{}, B {}/{}",
            sa.unwind, sa.symbols, sb.unwind, sb.symbols
        ));
    }
    out
}

/// The differential folded text of `b` against `a`: each stack with A's and B's weights
/// (`stack weight_a weight_b`), as difffolded.pl and `inferno-diff-folded` write it; with
/// `normalize`, A's weights are scaled to B's total first.
pub fn diff_folded(a: &StackTree, b: &StackTree, normalize: bool) -> Result<String, SessionError> {
    let opts = inferno::differential::Options {
        normalize,
        ..Default::default()
    };
    let mut out = Vec::new();
    inferno::differential::from_readers(
        opts,
        a.to_folded().as_bytes(),
        b.to_folded().as_bytes(),
        &mut out,
    )
    .map_err(|source| SessionError::Io {
        path: "diff.folded".into(),
        source,
    })?;
    String::from_utf8(out).map_err(|e| SessionError::Io {
        path: "diff.folded".into(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

/// The `n` functions whose share of the profile moved most from `a` to `b`, by the larger
/// of their self and total moves.
pub fn movers(a: &StackTree, b: &StackTree, n: usize) -> Vec<Mover> {
    let (sa, sb) = (shares(a), shares(b));
    let names: HashSet<&String> = sa.keys().chain(sb.keys()).collect();
    let mut movers: Vec<Mover> = names
        .into_iter()
        .map(|name| {
            let (self_a, total_a) = sa.get(name).copied().unwrap_or_default();
            let (self_b, total_b) = sb.get(name).copied().unwrap_or_default();
            Mover {
                name: name.clone(),
                self_a,
                self_b,
                total_a,
                total_b,
            }
        })
        .collect();
    movers.sort_by(|x, y| {
        y.moved()
            .total_cmp(&x.moved())
            .then_with(|| x.name.cmp(&y.name))
    });
    movers.truncate(n);
    movers
}

/// Self and total share of each frame name: total counts a stack once however many times
/// the name appears in it (recursion).
fn shares(tree: &StackTree) -> HashMap<String, (f64, f64)> {
    let total = tree.total_weight() as f64;
    let mut out: HashMap<String, (f64, f64)> = HashMap::new();
    if total == 0.0 {
        return out;
    }
    let mut seen = HashSet::new();
    tree.for_each_stack(|frames, weight| {
        let w = weight as f64 / total;
        seen.clear();
        for &f in frames {
            if seen.insert(f) {
                out.entry(tree.name(f).to_owned()).or_default().1 += w;
            }
        }
        if let Some(&leaf) = frames.last() {
            out.entry(tree.name(leaf).to_owned()).or_default().0 += w;
        }
    });
    out
}

/// A value in its unit, for the table: `1.23 ms`, `8.20 M/s`, `21.4 MiB`.
fn show(value: f64, unit: &str) -> String {
    if !value.is_finite() {
        return "-".into();
    }
    match unit {
        "ns" => crate::units::human_ns(value),
        "bytes" => crate::units::human_bytes(value.max(0.0) as u64),
        "/s" => format!("{}/s", human_count(value)),
        "%" => format!("{value:.1}%"),
        "s" => format!("{value:.3} s"),
        "" => human_count(value),
        unit => format!("{} {unit}", human_count(value)),
    }
}

fn percent(c: f64) -> String {
    if c.is_finite() {
        format!("{:+.1}%", c * 100.0)
    } else {
        "-".into()
    }
}

/// The columns of a comparison table, as [`FigureComparison::cells`] fills them.
pub const TABLE_HEAD: [&str; 6] = ["figure", "A", "B", "change", "95% interval", "verdict"];

impl FigureComparison {
    /// The row as the table shows it: figure, A, B, change, 95 % interval, verdict.
    pub fn cells(&self) -> [String; 6] {
        [
            escaped(&self.name).into_owned(),
            escaped(&show(self.a, &self.unit)).into_owned(),
            escaped(&show(self.b, &self.unit)).into_owned(),
            percent(self.change.change),
            self.change.ci.map_or(String::new(), |(lo, hi)| {
                format!("[{}, {}]", percent(lo), percent(hi))
            }),
            self.change.verdict.to_string(),
        ]
    }
}

impl Comparison {
    /// The table as text: figure, A, B, change, 95 % interval, verdict.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "A: {}\nB: {}\n", Escaped(&self.a), Escaped(&self.b));
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {}", Escaped(w));
        }
        if !self.warnings.is_empty() {
            out.push('\n');
        }
        let cells: Vec<[String; 6]> = self.figures.iter().map(FigureComparison::cells).collect();
        let head = TABLE_HEAD.map(String::from);
        let mut widths = head.clone().map(|h| h.chars().count());
        for row in &cells {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in std::iter::once(&head).chain(&cells) {
            let [name, a, b, change, ci, verdict] = row;
            let _ = writeln!(
                out,
                "{name:<w0$}  {a:>w1$}  {b:>w2$}  {change:>w3$}  {ci:>w4$}  {verdict}",
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3],
                w4 = widths[4],
            );
        }
        let _ = writeln!(
            out,
            "\nverdicts from per-interval samples (bootstrap, 95 %), changes under {:.1}% are \
             within noise",
            self.threshold * 100.0
        );
        out
    }

    /// The table as Markdown, for CI comments.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "**A** `{}` → **B** `{}`\n",
            markdown_code(&self.a),
            markdown_code(&self.b)
        );
        for w in &self.warnings {
            let _ = writeln!(out, "> ⚠ {}", escaped(w));
        }
        if !self.warnings.is_empty() {
            out.push('\n');
        }
        out.push_str(
            "| figure | A | B | change | 95% interval | verdict |\n|---|---:|---:|---:|---|---|\n",
        );
        for f in &self.figures {
            let ci = f.change.ci.map_or(String::new(), |(lo, hi)| {
                format!("{} … {}", percent(lo), percent(hi))
            });
            let verdict = match f.change.verdict {
                Verdict::Regressed => "**regressed**".to_owned(),
                v => v.to_string(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                markdown_cell(&f.name),
                markdown_cell(&show(f.a, &f.unit)),
                markdown_cell(&show(f.b, &f.unit)),
                percent(f.change.change),
                ci,
                verdict
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use hdrhistogram::Histogram;

    use super::*;

    fn noisy(base: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = XorShift(seed);
        (0..n)
            .map(|_| base * (1.0 + (rng.below(1000) as f64 / 1000.0 - 0.5) * 0.04))
            .collect()
    }

    /// `n` intervals of 1000 latencies each: a body around `body` ns and a tail of
    /// `tail_share` (per thousand) around `tail` ns, with some spread.
    fn intervals(
        body: u64,
        tail: u64,
        tail_share: u64,
        n: usize,
        seed: u64,
    ) -> Vec<Histogram<u64>> {
        let mut rng = XorShift(seed);
        (0..n)
            .map(|_| {
                let mut h = Histogram::<u64>::new(3).unwrap();
                for i in 0..1000u64 {
                    let base = if i < tail_share { tail } else { body };
                    let spread = rng.below(200) as u64;
                    h.record(base + base * spread / 1000).unwrap();
                }
                h
            })
            .collect()
    }

    fn percentiles(a: &[Histogram<u64>], b: &[Histogram<u64>]) -> Vec<Change> {
        let (a, b): (Vec<_>, Vec<_>) = (a.iter().collect(), b.iter().collect());
        judge_percentiles(&a, &b, &CompareOptions::default())
    }

    #[test]
    fn whole_run_percentiles_of_one_distribution_have_intervals_around_no_change() {
        let a = intervals(100_000, 1_000_000, 20, 20, 1);
        let b = intervals(100_000, 1_000_000, 20, 20, 2);
        for (change, (name, _)) in percentiles(&a, &b).iter().zip(QUANTILES) {
            let (lo, hi) = change.ci.unwrap();
            assert!(lo <= 0.0 && hi >= 0.0, "{name}: {lo} … {hi}");
            assert!(change.change.abs() < 0.05, "{name}: {}", change.change);
        }
    }

    #[test]
    fn a_doubled_tail_moves_p99_beyond_noise_and_leaves_p50() {
        let a = intervals(100_000, 1_000_000, 20, 20, 1);
        let b = intervals(100_000, 2_000_000, 20, 20, 2);
        let changes = percentiles(&a, &b);
        let (p50, p99) = (changes[0], changes[2]);
        let (lo, hi) = p99.ci.unwrap();
        assert!((p99.change - 1.0).abs() < 0.1, "{}", p99.change);
        assert!(lo > 0.5 && hi < 1.5, "{lo} … {hi}");
        let (lo, hi) = p50.ci.unwrap();
        assert!(lo <= 0.0 && hi >= 0.0, "{lo} … {hi}");
    }

    #[test]
    fn the_interval_of_a_whole_run_percentile_holds_its_change() {
        // Intervals that differ from one another: half the run fast, half slow, so no
        // interval's p90 is the run's. The interval judges the merged percentile, the
        // figure shown, so it must hold its change (give or take the 0.5 % bins).
        let mut a = intervals(100_000, 200_000, 50, 10, 1);
        a.extend(intervals(300_000, 900_000, 50, 10, 2));
        let mut b = intervals(110_000, 200_000, 50, 10, 3);
        b.extend(intervals(400_000, 900_000, 50, 10, 4));
        for (change, (name, _)) in percentiles(&a, &b).iter().zip(QUANTILES) {
            let (lo, hi) = change.ci.unwrap();
            assert!(
                lo - 0.01 <= change.change && change.change <= hi + 0.01,
                "{name}: {} not in {lo} … {hi}",
                change.change
            );
        }
    }

    #[test]
    fn one_interval_a_side_has_no_interval() {
        let a = intervals(100_000, 1_000_000, 20, 1, 1);
        let b = intervals(100_000, 1_000_000, 20, 3, 2);
        assert!(percentiles(&a, &b).iter().all(|c| c.ci.is_none()));
    }

    #[test]
    fn a_ten_percent_throughput_drop_is_a_regression() {
        let a = noisy(1e6, 30, 3);
        let b = noisy(0.9e6, 30, 5);
        let c = judge(&a, &b, Some(Better::Higher), &CompareOptions::default());
        assert_eq!(c.verdict, Verdict::Regressed, "{c:?}");
        assert!(c.change < -0.08 && c.change > -0.12, "{c:?}");
        let (lo, hi) = c.ci.unwrap();
        assert!(lo < c.change && c.change < hi && hi < 0.0, "{c:?}");
    }

    #[test]
    fn a_doubled_latency_is_a_regression_and_a_halved_one_an_improvement() {
        let a = noisy(1000.0, 20, 7);
        let b = noisy(2000.0, 20, 9);
        let opts = CompareOptions::default();
        assert_eq!(
            judge(&a, &b, Some(Better::Lower), &opts).verdict,
            Verdict::Regressed
        );
        assert_eq!(
            judge(&b, &a, Some(Better::Lower), &opts).verdict,
            Verdict::Improved
        );
        assert_eq!(judge(&a, &b, None, &opts).verdict, Verdict::Changed);
    }

    #[test]
    fn samples_from_one_distribution_are_within_noise() {
        let a = noisy(5e5, 30, 11);
        let b = noisy(5e5, 30, 13);
        let c = judge(&a, &b, Some(Better::Higher), &CompareOptions::default());
        assert_eq!(c.verdict, Verdict::WithinNoise, "{c:?}");
    }

    #[test]
    fn a_change_below_the_threshold_is_within_noise_even_when_certain() {
        let a = vec![100.0, 100.0, 100.0, 100.0];
        let b = vec![101.0, 101.0, 101.0, 101.0];
        let c = judge(&a, &b, Some(Better::Higher), &CompareOptions::default());
        assert_eq!(c.verdict, Verdict::WithinNoise);
        let strict = CompareOptions {
            threshold: 0.005,
            ..CompareOptions::default()
        };
        assert_eq!(
            judge(&a, &b, Some(Better::Higher), &strict).verdict,
            Verdict::Improved
        );
    }

    /// A session of 30 intervals: throughput around `rate`, latency intervals with their
    /// 99th percentile around `p99_ns`.
    fn session(dir: &str, rate: f64, p99_ns: u64, seed: u64) -> Session {
        let meta = crate::SessionMeta::new(
            dir,
            crate::meta::WorkloadInfo::new("ring", BTreeMap::new()),
            crate::meta::HostInfo::default(),
            "2026-11-23T12:00:00Z",
        );
        let mut rng = XorShift(seed);
        let mut rows = Vec::new();
        let mut latency = Vec::new();
        for i in 0..30 {
            let mut row = crate::TimeseriesRow {
                t_s: f64::from(i + 1),
                interval_s: 1.0,
                ..Default::default()
            };
            let noise = 1.0 + (rng.below(1000) as f64 / 1000.0 - 0.5) * 0.04;
            row.rates.insert("messages".into(), rate * noise);
            rows.push(row);
            let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
            h.record_n(p99_ns / 10, 980).unwrap();
            h.record_n((p99_ns as f64 * noise) as u64, 20).unwrap();
            latency.push(crate::HlogInterval {
                tag: "lap".into(),
                start_offset_s: f64::from(i),
                length_s: 1.0,
                histogram: h,
            });
        }
        Session {
            dir: dir.into(),
            meta,
            row_summary: crate::RowSummary::of(&rows),
            rows,
            latency,
            cpu: None,
            offcpu: None,
            threads: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn figure<'a>(c: &'a Comparison, name: &str) -> &'a FigureComparison {
        c.figures.iter().find(|f| f.name == name).unwrap()
    }

    #[test]
    fn sessions_with_a_throughput_drop_and_a_doubled_p99_are_flagged_with_the_right_sign() {
        let a = session("a", 1e6, 1_000_000, 1);
        let b = session("b", 0.9e6, 2_000_000, 2);
        let c = compare(&a, &b, &CompareOptions::default());
        let rate = figure(&c, "messages/s");
        assert_eq!(rate.change.verdict, Verdict::Regressed, "{rate:?}");
        assert!(rate.change.change < -0.08, "{rate:?}");
        let p99 = figure(&c, "lap p99");
        assert_eq!(p99.change.verdict, Verdict::Regressed, "{p99:?}");
        assert!((p99.change.change - 1.0).abs() < 0.1, "{p99:?}");
        // And the other way round, improvements.
        let back = compare(&b, &a, &CompareOptions::default());
        assert_eq!(
            figure(&back, "messages/s").change.verdict,
            Verdict::Improved
        );
        assert_eq!(figure(&back, "lap p99").change.verdict, Verdict::Improved);
    }

    #[test]
    fn sessions_from_one_distribution_compare_within_noise() {
        let a = session("a", 1e6, 1_000_000, 3);
        let b = session("b", 1e6, 1_000_000, 4);
        let c = compare(&a, &b, &CompareOptions::default());
        assert_eq!(c.regressions().count(), 0, "{}", c.to_text());
        assert_eq!(
            figure(&c, "messages/s").change.verdict,
            Verdict::WithinNoise
        );
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let text = c.to_text();
        assert!(
            text.contains("within noise") && text.contains("messages/s"),
            "{text}"
        );
        assert!(c.to_markdown().contains("| messages/s |"));
    }

    #[test]
    fn different_workloads_and_parameters_are_named_in_the_warnings() {
        let a = session("a", 1e6, 1_000_000, 3);
        let mut b = session("b", 1e6, 1_000_000, 4);
        b.meta.workload = crate::meta::WorkloadInfo::new(
            "storm",
            BTreeMap::from([("num-nodes".to_owned(), serde_json::Value::from(4))]),
        );
        let c = compare(&a, &b, &CompareOptions::default());
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("A ran ring, B ran storm")),
            "{:?}",
            c.warnings
        );
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("num-nodes") && w.contains("(unset)")),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn one_interval_is_too_few_to_judge() {
        let c = judge(&[1.0], &[2.0, 2.0], None, &CompareOptions::default());
        assert_eq!(c.verdict, Verdict::TooFewSamples);
    }

    fn tree(stacks: &[(&str, u64)]) -> StackTree {
        let mut t = StackTree::new();
        for (s, w) in stacks {
            t.add_names(s.split(';'), *w);
        }
        t
    }

    #[test]
    fn a_frame_that_went_from_ten_to_thirty_percent_tops_the_movers() {
        let a = tree(&[
            ("p;main;hot", 10),
            ("p;main;cold", 40),
            ("p;main;other", 50),
        ]);
        let b = tree(&[
            ("p;main;hot", 30),
            ("p;main;cold", 30),
            ("p;main;other", 40),
        ]);
        let m = movers(&a, &b, 3);
        assert_eq!(m[0].name, "hot", "{m:?}");
        assert!((m[0].self_a - 0.1).abs() < 1e-9 && (m[0].self_b - 0.3).abs() < 1e-9);
        assert!(
            m.iter().all(|x| x.name != "main" && x.name != "p"),
            "unmoved: {m:?}"
        );
    }

    #[test]
    fn recursion_counts_once_in_the_total_share() {
        let t = tree(&[("p;f;f;f", 1), ("p;g", 1)]);
        let s = shares(&t);
        assert!((s["f"].1 - 0.5).abs() < 1e-9, "{s:?}");
        assert!((s["f"].0 - 0.5).abs() < 1e-9);
    }

    #[test]
    fn the_differential_folded_text_holds_both_weights_normalized() {
        let a = tree(&[("p;x", 10), ("p;y", 10)]);
        let b = tree(&[("p;x", 30), ("p;z", 10)]);
        let raw = diff_folded(&a, &b, false).unwrap();
        assert!(
            raw.contains("p;x 10 30") && raw.contains("p;y 10 0") && raw.contains("p;z 0 10"),
            "{raw}"
        );
        let normalized = diff_folded(&a, &b, true).unwrap();
        // A's 20 scaled to B's 40: each of A's stacks weighs 20.
        assert!(normalized.contains("p;x 20 30"), "{normalized}");
    }
}
