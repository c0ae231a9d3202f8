//! Comparing two sessions, or two series of runs: every comparable figure with a verdict,
//! differential stacks, and the functions that moved most.
//!
//! Each figure measured every interval (throughput, latency percentiles, RSS, threads,
//! CPU, context switches) comes with the relative change of B against A and an interval
//! from a bootstrap: with one run a side it resamples the runs' intervals and sees the
//! noise within a run; with series (several runs a side) it resamples runs, and within
//! each its intervals, and sees the noise between runs. Figures with one value per run
//! (the workload's own summary figures, the peak RSS) are judged across runs, and shown
//! without a verdict for single sessions: two numbers alone cannot tell a change from
//! noise. A change is `improved` or `regressed` only when its interval excludes zero *and*
//! it is at least the threshold; otherwise it is `within noise`.
//!
//! # How sure a change is
//!
//! The verdicts of one comparison are controlled together: the chance that it flags any
//! figure when nothing changed is at most [`CompareOptions::alpha`] (1 %). Each figure's
//! interval is its change ± *c* bootstrap standard errors, *c* being Student's *t*
//! quantile at 1 − α/(2*k*) for the *k* figures judged (Bonferroni), with the degrees of
//! freedom of the units resampled (intervals or runs, less one a side): short runs and
//! few runs get wide intervals rather than confident verdicts. The standard error of a
//! side of *n* units is corrected by √(*n* / (*n* − 1)), the bootstrap's shortfall for
//! small samples; a side of one run judged against several borrows their spread between
//! runs. Interval values are weighted by the interval's length, so a short last interval
//! counts for what it is. Latency percentiles are each run's whole-run percentiles (its
//! intervals merged), resampled by merging resampled intervals again in 0.5 % bins.
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

mod judge;
mod samples;
mod table;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use hdrhistogram::Histogram;
use serde::Serialize;

pub use self::judge::{MAX_BLOCKS, PERCENTILE_RESAMPLES};
use self::judge::{QUANTILES, Run, Units, judge_percentile_runs, judge_runs, judgeable};
use self::samples::Samples;
pub use self::table::TABLE_HEAD;
use crate::meta::Better;
use crate::sparse::SparseHistogram;
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
    /// The family-wise error rate: the chance that a comparison flags any figure when
    /// nothing changed (default 0.01).
    pub alpha: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            threshold: 0.02,
            resamples: 10_000,
            seed: 0x5eed_b0a7_5eed_b0a7,
            alpha: 0.01,
        }
    }
}

/// What a change means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Verdict {
    /// Beyond noise, in the better direction.
    #[serde(rename = "improved")]
    Improved,
    /// Beyond noise, in the worse direction.
    #[serde(rename = "regressed")]
    Regressed,
    /// Beyond noise, for a figure with no better direction.
    #[serde(rename = "changed")]
    Changed,
    /// Not beyond noise (or below the threshold).
    #[serde(rename = "within noise")]
    WithinNoise,
    /// Too few intervals or runs (fewer than two on a side) to judge.
    #[serde(rename = "too few samples")]
    TooFewSamples,
    /// One value per session: no verdict.
    #[serde(rename = "one value each")]
    OneValue,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::Changed => "changed",
            Verdict::WithinNoise => "within noise",
            Verdict::TooFewSamples => "too few samples",
            Verdict::OneValue => "one value each",
        })
    }
}

/// The change of one figure and its judgement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    /// B / A − 1 of the shown values.
    pub change: f64,
    /// The interval of the relative change, at the comparison's family-wise confidence
    /// (1 − [`CompareOptions::alpha`] for all its figures together), when judged.
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
    /// How many runs A and B had (1 each for two sessions).
    pub runs: (usize, usize),
    /// What the bootstrap resampled: `"intervals"` (noise within a run) or `"runs"`
    /// (noise between runs).
    pub noise: &'static str,
    /// The family-wise error rate of the verdicts.
    pub alpha: f64,
    /// How many figures were judged together.
    pub judged: usize,
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
    compare_runs(&[a], &[b], opts)
}

/// Every key of `maps`, once each, sorted.
fn keys<'a, V: 'a>(maps: impl Iterator<Item = &'a BTreeMap<String, V>>) -> Vec<&'a String> {
    let mut out: Vec<&String> = maps.flat_map(BTreeMap::keys).collect();
    out.sort();
    out.dedup();
    out
}

/// The mean of the finite values, NaN when there are none.
fn mean_of(values: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for v in values.filter(|v| v.is_finite()) {
        sum += v;
        n += 1;
    }
    if n == 0 { f64::NAN } else { sum / n as f64 }
}

/// Compares B's runs against A's: series of repeated runs, or one session a side as
/// [`compare`] does. A run without a figure is left out of that figure's judgement.
pub fn compare_runs(a: &[&Session], b: &[&Session], opts: &CompareOptions) -> Comparison {
    let sa: Vec<Samples> = a.iter().map(|s| Samples::of(s)).collect();
    let sb: Vec<Samples> = b.iter().map(|s| Samples::of(s)).collect();
    let both = || sa.iter().chain(&sb);
    let units = Units::of(a.len(), b.len());
    let series_of = |side: &[Samples], name: &str| -> Vec<Run> {
        side.iter()
            .filter_map(|s| s.series.get(name).cloned())
            .collect()
    };
    let singles_of = |side: &[Samples], name: &str| -> Vec<Run> {
        side.iter()
            .filter_map(|s| s.single.get(name).map(|(v, _, _)| vec![(*v, 1.0)]))
            .collect()
    };
    fn histograms_of<'a>(side: &[Samples<'a>], tag: &str) -> Vec<Vec<&'a SparseHistogram>> {
        side.iter()
            .filter_map(|s| s.intervals.get(tag).cloned())
            .collect()
    }
    let names = keys(both().map(|s| &s.series));
    let singles = keys(both().map(|s| &s.single));
    let tags = keys(both().map(|s| &s.intervals));

    // The figures judged together, for the family-wise interval.
    let percentile_name = |tag: &str, q: &str| format!("{tag} {q}");
    let mut judged = 0;
    let mut percentiles: HashMap<String, Change> = HashMap::new();
    let mut percentile_sides = Vec::new();
    for tag in &tags {
        let (ha, hb) = (histograms_of(&sa, tag), histograms_of(&sb, tag));
        let shape = |runs: &[Vec<&SparseHistogram>]| -> Vec<Run> {
            runs.iter().map(|r| vec![(1.0, 1.0); r.len()]).collect()
        };
        if judgeable(&shape(&ha), &shape(&hb)) {
            judged += QUANTILES.len();
        }
        for (q, _) in QUANTILES {
            // Judged from the histograms below, not from the per-interval percentiles.
            percentiles.insert(
                percentile_name(samples::tag_name(tag), q),
                Change {
                    change: f64::NAN,
                    ci: None,
                    verdict: Verdict::TooFewSamples,
                },
            );
        }
        percentile_sides.push((tag, ha, hb));
    }
    for name in &names {
        if !percentiles.contains_key(name.as_str())
            && judgeable(&series_of(&sa, name), &series_of(&sb, name))
        {
            judged += 1;
        }
    }
    if units == Units::Runs {
        for name in &singles {
            if judgeable(&singles_of(&sa, name), &singles_of(&sb, name)) {
                judged += 1;
            }
        }
    }
    for (tag, ha, hb) in &percentile_sides {
        if ha.is_empty() || hb.is_empty() {
            continue;
        }
        for ((q, _), change) in QUANTILES
            .iter()
            .zip(judge_percentile_runs(ha, hb, judged, opts))
        {
            percentiles.insert(percentile_name(samples::tag_name(tag), q), change);
        }
    }

    let mut figures = Vec::new();
    for name in names {
        let (ra, rb) = (series_of(&sa, name), series_of(&sb, name));
        if ra.is_empty() || rb.is_empty() {
            continue;
        }
        let (unit, better) = both()
            .find_map(|s| s.kinds.get(name.as_str()).cloned())
            .unwrap_or_default();
        let whole = |side: &[Samples]| {
            let values: Vec<f64> = side
                .iter()
                .filter_map(|s| s.whole.get(name.as_str()).copied())
                .collect();
            (!values.is_empty()).then(|| mean_of(values.into_iter()))
        };
        let (a_value, b_value) = match (whole(&sa), whole(&sb)) {
            (Some(x), Some(y)) => (x, y),
            _ => (judge::side_value(&ra), judge::side_value(&rb)),
        };
        let shown = judge::relative(a_value, b_value);
        let mut change = match percentiles.get(name.as_str()) {
            Some(&binned) => {
                // The interval was read in 0.5 % bins: move it by what the bins took
                // off the change, so that it is about the exact percentiles shown.
                let shift = if shown.is_finite() && binned.change.is_finite() {
                    shown - binned.change
                } else {
                    0.0
                };
                let exact = Change {
                    change: shown,
                    ci: binned.ci.map(|(lo, hi)| (lo + shift, hi + shift)),
                    verdict: binned.verdict,
                };
                judge::with_verdict(exact, better, opts)
            }
            None => judge_runs(&ra, &rb, better, judged, opts),
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
    for name in singles {
        let (ra, rb) = (singles_of(&sa, name), singles_of(&sb, name));
        if ra.is_empty() || rb.is_empty() {
            continue;
        }
        let (_, unit, better) = both()
            .find_map(|s| s.single.get(name.as_str()).cloned())
            .unwrap_or_default();
        let (a_value, b_value) = (judge::side_value(&ra), judge::side_value(&rb));
        let change = match units {
            Units::Runs => judge_runs(&ra, &rb, better, judged, opts),
            Units::Intervals => Change {
                change: judge::relative(a_value, b_value),
                ci: None,
                verdict: Verdict::OneValue,
            },
        };
        figures.push(FigureComparison {
            name: name.clone(),
            unit,
            a: a_value,
            b: b_value,
            better,
            change,
        });
    }
    let mut warnings = Vec::new();
    if let (Some(first), Some(other)) = (a.first(), b.first()) {
        warnings = differences(first, other);
    }
    for (side, runs) in [("A", a), ("B", b)] {
        if let Some((first, rest)) = runs.split_first() {
            for run in rest {
                for w in differences(first, run) {
                    let w = format!("runs of {side} differ: {w}");
                    if !warnings.contains(&w) {
                        warnings.push(w);
                    }
                }
            }
        }
    }
    let name_of = |side: &[&Session]| match side {
        [one] => one.dir.display().to_string(),
        [first, ..] => format!("{} runs ({} …)", side.len(), first.dir.display()),
        [] => String::new(),
    };
    Comparison {
        a: name_of(a),
        b: name_of(b),
        figures,
        warnings,
        threshold: opts.threshold,
        runs: (a.len(), b.len()),
        noise: match units {
            Units::Intervals => "intervals",
            Units::Runs => "runs",
        },
        alpha: opts.alpha,
        judged,
    }
}

/// Judges the change from per-interval samples `a` to `b` of one run each: the bootstrap
/// interval of the relative change of the means at 1 − [`CompareOptions::alpha`], and the
/// verdict (see the module docs).
pub fn judge(a: &[f64], b: &[f64], better: Option<Better>, opts: &CompareOptions) -> Change {
    let run = |v: &[f64]| -> Vec<Run> {
        vec![
            v.iter()
                .filter(|x| x.is_finite())
                .map(|&x| (x, 1.0))
                .collect(),
        ]
    };
    judge_runs(&run(a), &run(b), better, 1, opts)
}

/// The whole run's latency percentiles of A against B (p50, p90, p99, p99.9 and the
/// maximum, in that order), from their interval histograms, one run each: the change of
/// the merged percentiles, and a bootstrap interval from resampling whole intervals with
/// replacement and merging them again (in 0.5 % bins). The verdicts wait for the figure's
/// better direction ([`compare`] gives them); with fewer than two intervals a side there
/// is no interval.
pub fn judge_percentiles(
    a: &[&Histogram<u64>],
    b: &[&Histogram<u64>],
    opts: &CompareOptions,
) -> Vec<Change> {
    judge_percentile_runs(&[a.to_vec()], &[b.to_vec()], 1, opts)
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
    if sa.symbols != sb.symbols {
        out.push(format!(
            "stacks named differently: A {}, B {}",
            sa.symbols, sb.symbols
        ));
    }
    if sa.enabled && sb.enabled && sa.unwind != sb.unwind {
        let name = |u: &str| if u.is_empty() { "not recorded" } else { u }.to_owned();
        out.push(format!(
            "stacks unwound differently: A {}, B {}; callers one finds and the other loses \
             (code without frame pointers) show as differences that are not the code's",
            name(&sa.unwind),
            name(&sb.unwind)
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

#[cfg(test)]
mod tests {
    use hdrhistogram::Histogram;

    use super::judge::{QUANTILES, XorShift};
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
    fn a_verdict_is_one_word_in_the_table_json_and_markdown() {
        for v in [
            Verdict::Improved,
            Verdict::Regressed,
            Verdict::Changed,
            Verdict::WithinNoise,
            Verdict::TooFewSamples,
            Verdict::OneValue,
        ] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.to_string(), "{v:?}");
        }
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
            let mut row = crate::TimeseriesRow::default();
            row.t_s = f64::from(i + 1);
            row.interval_s = 1.0;
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
                histogram: (&h).into(),
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
            memory: Default::default(),
            threads: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn figure<'a>(c: &'a Comparison, name: &str) -> &'a FigureComparison {
        c.figures.iter().find(|f| f.name == name).unwrap()
    }

    #[test]
    fn a_higher_allocation_rate_is_a_regression() {
        let with_rate = |dir: &str, bytes_per_s: f64, seed| {
            let mut s = session(dir, 1e6, 1_000_000, seed);
            for row in &mut s.rows {
                let noise = row.rates["messages"] / 1e6;
                row.rates.insert("alloc_bytes".into(), bytes_per_s * noise);
                row.rates.insert("free_bytes".into(), bytes_per_s * noise);
            }
            s
        };
        let c = compare(
            &with_rate("a", 1e6, 1),
            &with_rate("b", 2e6, 2),
            &CompareOptions::default(),
        );
        let alloc = figure(&c, "alloc_bytes/s");
        assert_eq!(alloc.change.verdict, Verdict::Regressed, "{alloc:?}");
        let free = figure(&c, "free_bytes/s");
        assert_eq!(free.change.verdict, Verdict::Changed, "{free:?}");
    }

    #[test]
    fn more_live_bytes_per_interval_is_a_regression_judged_like_rss() {
        let with_live = |dir: &str, live: f64, seed| {
            let mut s = session(dir, 1e6, 1_000_000, seed);
            for row in &mut s.rows {
                let noise = row.rates["messages"] / 1e6;
                row.counters
                    .insert("live_bytes".into(), (live * noise) as u64);
            }
            s
        };
        let c = compare(
            &with_live("a", 64e6, 1),
            &with_live("b", 96e6, 2),
            &CompareOptions::default(),
        );
        let live = figure(&c, "live bytes");
        assert_eq!(live.change.verdict, Verdict::Regressed, "{live:?}");
        let same = compare(
            &with_live("a", 64e6, 3),
            &with_live("b", 64e6, 4),
            &CompareOptions::default(),
        );
        let live = figure(&same, "live bytes");
        assert_eq!(live.change.verdict, Verdict::WithinNoise, "{live:?}");
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
    fn sessions_unwound_differently_are_warned_about() {
        let mut a = session("a", 1e6, 1_000_000, 3);
        let mut b = session("b", 1e6, 1_000_000, 3);
        for (s, unwind) in [(&mut a, "frame-pointers"), (&mut b, "dwarf")] {
            s.meta.sampling.enabled = true;
            s.meta.sampling.unwind = unwind.into();
        }
        let c = compare(&a, &b, &CompareOptions::default());
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("unwound differently")
                    && w.contains("A frame-pointers, B dwarf")),
            "{:?}",
            c.warnings
        );
        b.meta.sampling.unwind = "frame-pointers".into();
        let same = compare(&a, &b, &CompareOptions::default());
        assert!(
            !same.warnings.iter().any(|w| w.contains("unwound")),
            "{:?}",
            same.warnings
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
