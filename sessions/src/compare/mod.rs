//! Comparing two sessions, or two series of runs: every comparable figure with a verdict,
//! differential stacks, and the functions that moved most.
//!
//! Runs are the unit of evidence: each figure — the rate of every counter, RSS, threads,
//! CPU, context switches, the latency percentiles, the workload's own summary figures — is
//! judged across runs, on the log of the ratio B / A (a session is one run; a series or a
//! side of `ab` is many). Each judged figure gets one of three words:
//!
//! - *regressed* / *improved* (*changed* for a figure with no better direction): the
//!   interval excludes no change and the change is at least the threshold;
//! - *same*: the interval lies inside ± the threshold;
//! - *undecided*: neither, with the runs a side it would take.
//!
//! With one run a side nothing tells the noise between runs, so no figure gets a verdict:
//! each shows its change and the runs a side a verdict would take, from the noise within
//! the run as a floor ([`Needs`]). Parts of one run (time ranges, slow intervals;
//! [`CompareOptions::parts`]) are judged from their intervals, resampled in blocks. A
//! figure that is zero in more than half of a side's intervals or runs is *too sparse to
//! judge*; a summary figure that only restates `--duration` is *not judged*.
//!
//! # How sure a change is
//!
//! The verdicts of one comparison are controlled together: the chance that it calls any
//! figure changed when nothing changed is at most [`CompareOptions::alpha`] (1 %). Each
//! figure's interval is a Student *t* interval on the difference of the sides' mean log
//! values at 1 − α/(2*k*) for the *k* figures judged (Bonferroni), with the spread between
//! runs pooled over both sides; a run over 2.5 times or under 1/2.5 of its side's median
//! is set aside and named, so that one descheduled run cannot flip a verdict.
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

pub(crate) mod judge;
pub(crate) mod samples;
pub(crate) mod table;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use hdrhistogram::Histogram;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

pub use self::judge::{
    FAR_RATIO, MAX_BLOCKS, MOST_RUNS_NEEDED, Needs, PERCENTILE_RESAMPLES, RUNS_TO_RECORD,
};
use self::judge::{Run, Side, Units};
use self::samples::Samples;
pub use self::table::TABLE_HEAD;
use crate::meta::Better;
use crate::{Session, SessionError, StackTree};

/// How to compare.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CompareOptions {
    /// A change smaller than this fraction is never called regressed or improved, and an
    /// interval inside ± it is *same* (default 0.02, criterion's noise threshold).
    pub threshold: f64,
    /// Bootstrap resamples for parts of one run (default 10 000, as criterion).
    pub resamples: usize,
    /// Seed of the resampling, so a comparison prints the same every time.
    pub seed: u64,
    /// The family-wise error rate: the chance that a comparison calls any figure changed
    /// when nothing changed (default 0.01).
    pub alpha: f64,
    /// The sides are parts of one run (`--range-a`/`--range-b`, `--slow`): the intervals
    /// stand in for runs.
    pub parts: bool,
    /// Judge only these figures (the others are shown, not judged); `None`: all.
    pub figures: Option<Vec<String>>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            threshold: 0.02,
            resamples: 10_000,
            seed: 0x5eed_b0a7_5eed_b0a7,
            alpha: 0.01,
            parts: false,
            figures: None,
        }
    }
}

/// What a change means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Changed beyond the threshold, in the better direction.
    Improved,
    /// Changed beyond the threshold, in the worse direction.
    Regressed,
    /// Changed beyond the threshold, for a figure with no better direction.
    Changed,
    /// The interval lies inside ± the threshold.
    Same,
    /// Neither yet (see [`Change::needs`]).
    Undecided,
    /// Zero in more than half of a side's intervals or runs.
    TooSparse,
    /// Shown, not judged (see [`Change::reason`]).
    Unjudged,
}

impl Verdict {
    /// Whether the verdict says the figure changed.
    pub fn is_change(self) -> bool {
        matches!(
            self,
            Verdict::Improved | Verdict::Regressed | Verdict::Changed
        )
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::Changed => "changed",
            Verdict::Same => "same",
            Verdict::Undecided => "undecided",
            Verdict::TooSparse => "too sparse to judge",
            Verdict::Unjudged => "not judged",
        })
    }
}

impl Serialize for Verdict {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The change of one figure and its judgement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// B / A − 1 of the shown values.
    pub change: f64,
    /// The interval of the relative change, at the comparison's family-wise confidence
    /// (1 − [`CompareOptions::alpha`] for all its figures together), when judged.
    pub ci: Option<(f64, f64)>,
    /// The verdict.
    pub verdict: Verdict,
    /// For an undecided figure: the runs a side a verdict would take.
    pub needs: Option<Needs>,
    /// For a figure not judged: why.
    pub reason: Option<&'static str>,
}

impl Change {
    /// An undecided change without an interval.
    pub fn undecided(change: f64, needs: Needs) -> Change {
        Change {
            change,
            ci: None,
            verdict: Verdict::Undecided,
            needs: Some(needs),
            reason: None,
        }
    }

    /// A change with its interval and verdict.
    pub fn judged(change: f64, ci: Option<(f64, f64)>, verdict: Verdict) -> Change {
        Change {
            change,
            ci,
            verdict,
            needs: None,
            reason: None,
        }
    }

    /// The verdict as the table says it: `undecided — needs ≥ 4 runs a side`,
    /// `not judged: …`.
    pub fn verdict_text(&self) -> String {
        match (self.verdict, self.needs, self.reason) {
            (Verdict::Undecided, Some(needs), _) => format!("undecided — {needs}"),
            (Verdict::Unjudged, _, Some(reason)) => format!("not judged: {reason}"),
            (v, ..) => v.to_string(),
        }
    }

    /// The word the previous method would have used (`within noise` for same and
    /// undecided), kept in JSON as `verdict_v1` for one release.
    pub fn legacy_verdict(&self) -> &'static str {
        match self.verdict {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::Changed => "changed",
            Verdict::Same => "within noise",
            Verdict::Undecided if self.needs == Some(Needs::Record) => "one value each",
            Verdict::Undecided => "within noise",
            Verdict::TooSparse => "too few samples",
            Verdict::Unjudged => "one value each",
        }
    }
}

impl Serialize for Change {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("change", &self.change)?;
        map.serialize_entry("ci", &self.ci)?;
        map.serialize_entry("verdict", &self.verdict)?;
        if let Some(needs) = &self.needs {
            map.serialize_entry("runs_needed", needs)?;
        }
        if let Some(reason) = self.reason {
            map.serialize_entry("reason", reason)?;
        }
        map.serialize_entry("verdict_v1", self.legacy_verdict())?;
        map.end()
    }
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
    /// What the verdicts set aside or flagged: runs set aside as far from their side,
    /// disturbed runs, empty profiles.
    pub notes: Vec<String>,
    /// The threshold used.
    pub threshold: f64,
    /// How many runs A and B had (1 each for two sessions).
    pub runs: (usize, usize),
    /// The unit of evidence: `"runs"`, `"intervals"` (parts of one run, resampled in
    /// blocks) or `"none"` (one run a side: no verdicts).
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

/// Why a summary figure in seconds is not judged when it restates the run's `--duration`.
const DURATION_BOUND: &str = "duration-bound (equals --duration, not a figure of merit)";

/// Why a figure is left out by [`CompareOptions::figures`].
const NOT_NAMED: &str = "not among the --figure named";

/// Why a ring's lap percentiles are not judged between sessions that timed laps two ways.
const LAPS_TIMED_TWO_WAYS: &str = "laps timed two ways (ask-mode rings recorded before \
     lap-version 2 timed the replies' passes too)";

/// One figure's sides, before judging.
struct Input {
    name: String,
    unit: String,
    better: Option<Better>,
    a: Side,
    b: Side,
    /// A latency percentile: its metric and quantile index, judged within a run from the
    /// histograms.
    percentile: Option<(String, usize)>,
    /// Shown and not judged, and why.
    unjudged: Option<&'static str>,
}

/// Every figure both sides have, in the table's order: the per-interval figures, then the
/// figures with one value per run.
fn inputs(sa: &[Samples], sb: &[Samples], opts: &CompareOptions) -> Vec<Input> {
    let both = || sa.iter().chain(sb);
    let series_side = |side: &[Samples], name: &str| -> Side {
        let mut out = Side::default();
        for s in side {
            if let Some(run) = s.series.get(name) {
                let value = s
                    .whole
                    .get(name)
                    .copied()
                    .unwrap_or_else(|| judge::run_value(run));
                out.values.push(value);
                out.intervals.push(run.clone());
            }
        }
        out
    };
    let single_side = |side: &[Samples], name: &str| -> (Side, bool) {
        let mut out = Side::default();
        let mut bound = true;
        for s in side {
            if let Some((v, unit, _)) = s.single.get(name) {
                out.values.push(*v);
                // A run stopped by its `--duration` ends a little after it: by as much
                // as the stop took to reach the worker, 8 % of 2 s on a loaded machine.
                bound &= unit == "s" && s.duration_s.is_some_and(|d| *v >= 0.95 * d);
            }
        }
        (out, bound)
    };
    let named = |name: &str| {
        opts.figures
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == name))
    };
    let lap_versions: std::collections::BTreeSet<u64> =
        both().filter_map(|s| s.lap_version).collect();
    let mut out = Vec::new();
    for name in keys(both().map(|s| &s.series)) {
        let (a, b) = (series_side(sa, name), series_side(sb, name));
        if a.values.is_empty() || b.values.is_empty() {
            continue;
        }
        let (unit, better) = both()
            .find_map(|s| s.kinds.get(name.as_str()).cloned())
            .unwrap_or_default();
        let percentile = both().find_map(|s| s.percentiles.get(name.as_str()).cloned());
        let lap = percentile.as_ref().is_some_and(|(tag, _)| tag == "lap");
        let unjudged = if lap && lap_versions.len() > 1 {
            Some(LAPS_TIMED_TWO_WAYS)
        } else {
            (!named(name)).then_some(NOT_NAMED)
        };
        out.push(Input {
            name: name.clone(),
            unit,
            better,
            a,
            b,
            percentile,
            unjudged,
        });
    }
    for name in keys(both().map(|s| &s.single)) {
        let ((a, bound_a), (b, bound_b)) = (single_side(sa, name), single_side(sb, name));
        if a.values.is_empty() || b.values.is_empty() {
            continue;
        }
        let (_, unit, better) = both()
            .find_map(|s| s.single.get(name.as_str()).cloned())
            .unwrap_or_default();
        let unjudged = if bound_a && bound_b {
            Some(DURATION_BOUND)
        } else {
            (!named(name)).then_some(NOT_NAMED)
        };
        out.push(Input {
            name: name.clone(),
            unit,
            better,
            a,
            b,
            percentile: None,
            unjudged,
        });
    }
    out
}

/// Compares B's runs against A's: series of repeated runs, or one session a side as
/// [`compare`] does. A run without a figure is left out of that figure's judgement.
pub fn compare_runs(a: &[&Session], b: &[&Session], opts: &CompareOptions) -> Comparison {
    let sa: Vec<Samples> = a.iter().map(|s| Samples::of(s)).collect();
    let sb: Vec<Samples> = b.iter().map(|s| Samples::of(s)).collect();
    let units = Units::of(a.len(), b.len(), opts.parts);
    let inputs = inputs(&sa, &sb, opts);
    let judgeable = |i: &Input| i.unjudged.is_none() && !i.a.sparse() && !i.b.sparse();
    let k = inputs.iter().filter(|i| judgeable(i)).count();

    // Parts of one run: each metric's percentiles from its interval histograms.
    let mut within: HashMap<String, Vec<judge::LogChange>> = HashMap::new();
    if units == Units::Intervals
        && let (Some(x), Some(y)) = (sa.first(), sb.first())
    {
        for (tag, ha) in &x.intervals {
            if let Some(hb) = y.intervals.get(tag) {
                within.insert(tag.clone(), judge::percentiles_within_run(ha, hb, k, opts));
            }
        }
    }

    let mut figures = Vec::new();
    let mut aside = Vec::new();
    for input in inputs {
        let relative = |a: &Side, b: &Side| {
            let first = |s: &Side| s.values.first().copied().unwrap_or(f64::NAN);
            judge::relative(first(a), first(b))
        };
        let single_values = |s: &Side| s.values.first().copied().unwrap_or(f64::NAN);
        let mut shown = (single_values(&input.a), single_values(&input.b));
        let change = if let Some(reason) = input.unjudged {
            let mut c = Change::judged(relative(&input.a, &input.b), None, Verdict::Unjudged);
            c.reason = Some(reason);
            c
        } else if input.a.sparse() || input.b.sparse() {
            Change::judged(relative(&input.a, &input.b), None, Verdict::TooSparse)
        } else {
            match units {
                Units::Runs => {
                    let (c, values, set_aside) =
                        judge::across_runs(&input.a, &input.b, input.better, k, opts);
                    shown = values;
                    if set_aside > 0 {
                        aside.push(format!("{} {set_aside}", input.name));
                    }
                    c
                }
                Units::OneRunEach => judge::one_run_each(&input.a, &input.b, k, opts),
                Units::Intervals => match &input.percentile {
                    Some((tag, q)) => {
                        let judged = within.get(tag).and_then(|v| v.get(*q)).copied();
                        match judged {
                            Some((log, ci)) => {
                                // The interval was read in 0.5 % bins: move it by what
                                // the bins took off the change, so that it is about the
                                // exact percentiles shown.
                                let exact = relative(&input.a, &input.b).ln_1p();
                                let shift = if exact.is_finite() && log.is_finite() {
                                    exact - log
                                } else {
                                    0.0
                                };
                                let ci = ci.map(|(lo, hi)| (lo + shift, hi + shift));
                                judge::percentile_change(exact, ci, input.better, k, opts)
                            }
                            None => Change::undecided(relative(&input.a, &input.b), Needs::Record),
                        }
                    }
                    None => match (input.a.intervals.first(), input.b.intervals.first()) {
                        (Some(ra), Some(rb)) => judge::within_run(ra, rb, input.better, k, opts),
                        _ => Change::undecided(relative(&input.a, &input.b), Needs::Record),
                    },
                },
            }
        };
        figures.push(FigureComparison {
            name: input.name,
            unit: input.unit,
            a: shown.0,
            b: shown.1,
            better: input.better,
            change,
        });
    }
    let mut notes = Vec::new();
    if !aside.is_empty() {
        notes.push(format!(
            "runs set aside, each over 2.5 times or under 1/2.5 of its side's median: {}",
            aside.join(", ")
        ));
    }
    for (side, runs) in [("A", a), ("B", b)] {
        notes.extend(samples::disturbed(runs).into_iter().map(|(i, ratio)| {
            format!(
                "{side}: run {} looks disturbed: its wall time is {ratio:.1}× its CPU time, \
                 over twice its side's median (kept)",
                i + 1
            )
        }));
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
        notes,
        threshold: opts.threshold,
        runs: (a.len(), b.len()),
        noise: units.word(),
        alpha: opts.alpha,
        judged: if units == Units::OneRunEach { 0 } else { k },
    }
}

/// The error rate to spend at look `k` (from 1) of an experiment that judges again after
/// every new pair of runs and stops at the first decision: `alpha`·6/(π²`k`²). The looks
/// of any experiment, however many, spend at most `alpha` together (Σ 1/*k*² = π²/6), and
/// most of it goes to the first looks (61 % to the first), where a large change is
/// decided.
pub fn alpha_at_look(alpha: f64, k: usize) -> f64 {
    let k = k.max(1) as f64;
    alpha * 6.0 / (std::f64::consts::PI.powi(2) * k * k)
}

/// Judges a figure with one value per run (a command's `cpu_time_s`, a summary figure)
/// from A's runs to B's, alone (the family is this one figure), as [`compare_runs`] judges
/// it: on the log ratio of the runs' geometric means, a run far from its side's median set
/// aside.
pub fn judge_runs(a: &[f64], b: &[f64], better: Option<Better>, opts: &CompareOptions) -> Change {
    let side = |v: &[f64]| Side {
        values: v.to_vec(),
        intervals: Vec::new(),
    };
    let (a, b) = (side(a), side(b));
    if a.sparse() || b.sparse() {
        return Change::judged(f64::NAN, None, Verdict::TooSparse);
    }
    judge::across_runs(&a, &b, better, 1, opts).0
}

/// Judges the change from per-interval samples `a` to `b` of one run, as parts of that run:
/// a block bootstrap of the log ratio of the means at 1 − [`CompareOptions::alpha`], and the
/// verdict (see the module docs).
pub fn judge(a: &[f64], b: &[f64], better: Option<Better>, opts: &CompareOptions) -> Change {
    let run = |v: &[f64]| -> Run {
        v.iter()
            .filter(|x| x.is_finite())
            .map(|&x| (x, 1.0))
            .collect()
    };
    judge::within_run(&run(a), &run(b), better, 1, opts)
}

/// The whole-run latency percentiles of two parts of one run (p50, p90, p99, p99.9 and the
/// maximum, in that order), from their interval histograms: the change of the merged
/// percentiles, and an interval on the log ratio from resampling blocks of intervals with
/// replacement and merging them again (in 0.5 % bins). The verdicts wait for the figure's
/// better direction ([`compare`] gives them): with fewer than two blocks a side there is no
/// interval.
pub fn judge_percentiles(
    a: &[&Histogram<u64>],
    b: &[&Histogram<u64>],
    opts: &CompareOptions,
) -> Vec<Change> {
    judge::percentiles_within_run(a, b, 1, opts)
        .into_iter()
        .map(|(log, ci)| match ci {
            Some((lo, hi)) => Change::judged(
                log.exp_m1(),
                Some((lo.exp_m1(), hi.exp_m1())),
                Verdict::Undecided,
            ),
            None => Change::undecided(log.exp_m1(), Needs::Record),
        })
        .collect()
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
        // Said below, by what it means: tell's laps carry no version and need none.
        if key == "lap-version" {
            continue;
        }
        if x != y {
            let show =
                |v: Option<&serde_json::Value>| v.map_or("(unset)".to_owned(), ToString::to_string);
            out.push(format!("parameter {key}: A {} , B {}", show(x), show(y)).replace(" ,", ","));
        }
    }
    if let (Some(la), Some(lb)) = (samples::lap_version(wa), samples::lap_version(wb))
        && la != lb
    {
        out.push(format!(
            "laps timed two ways: A lap-version {la}, B lap-version {lb} (before version 2, \
             ask mode timed the replies' passes too), so their lap percentiles are not judged"
        ));
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
            Verdict::Same,
            Verdict::Undecided,
            Verdict::TooSparse,
            Verdict::Unjudged,
        ] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.to_string(), "{v:?}");
        }
    }

    #[test]
    fn samples_from_one_distribution_are_the_same() {
        let a = noisy(5e5, 30, 11);
        let b = noisy(5e5, 30, 13);
        let c = judge(&a, &b, Some(Better::Higher), &CompareOptions::default());
        assert_eq!(c.verdict, Verdict::Same, "{c:?}");
    }

    #[test]
    fn a_certain_change_below_the_threshold_is_the_same() {
        let a = vec![100.0, 100.0, 100.0, 100.0];
        let b = vec![101.0, 101.0, 101.0, 101.0];
        let c = judge(&a, &b, Some(Better::Higher), &CompareOptions::default());
        assert_eq!(c.verdict, Verdict::Same);
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
            profiles: Default::default(),
            threads: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn figure<'a>(c: &'a Comparison, name: &str) -> &'a FigureComparison {
        c.figures.iter().find(|f| f.name == name).unwrap()
    }

    /// Three runs a side, made by `make` from their seeds, B judged against A.
    fn three_a_side(make: impl Fn(&str, u64) -> Session, a: u64, b: u64) -> Comparison {
        let runs = |side: &str, first: u64| -> Vec<Session> {
            (first..first + 3).map(|seed| make(side, seed)).collect()
        };
        let (ra, rb) = (runs("a", a), runs("b", b));
        let (ra, rb): (Vec<&Session>, Vec<&Session>) = (ra.iter().collect(), rb.iter().collect());
        compare_runs(&ra, &rb, &CompareOptions::default())
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
        let c = three_a_side(
            |dir, seed| with_rate(dir, if dir == "a" { 1e6 } else { 2e6 }, seed),
            1,
            11,
        );
        let alloc = figure(&c, "alloc_bytes/s");
        assert_eq!(alloc.change.verdict, Verdict::Regressed, "{alloc:?}");
        let free = figure(&c, "free_bytes/s");
        assert_eq!(free.change.verdict, Verdict::Changed, "{free:?}");
    }

    #[test]
    fn an_allocation_rate_zero_in_most_intervals_is_too_sparse_to_judge() {
        let quiet = |dir: &str, seed| {
            let mut s = session(dir, 1e6, 1_000_000, seed);
            for (i, row) in s.rows.iter_mut().enumerate() {
                let bytes = if i % 3 == 0 { 4096.0 } else { 0.0 };
                row.rates.insert("alloc_bytes".into(), bytes);
            }
            s
        };
        let c = three_a_side(quiet, 1, 11);
        let alloc = figure(&c, "alloc_bytes/s");
        assert_eq!(alloc.change.verdict, Verdict::TooSparse, "{alloc:?}");
        assert!(alloc.change.ci.is_none());
        assert!(
            c.to_text().contains("too sparse to judge"),
            "{}",
            c.to_text()
        );
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
        let c = three_a_side(
            |dir, seed| with_live(dir, if dir == "a" { 64e6 } else { 96e6 }, seed),
            1,
            11,
        );
        let live = figure(&c, "live bytes");
        assert_eq!(live.change.verdict, Verdict::Regressed, "{live:?}");
        let same = three_a_side(|dir, seed| with_live(dir, 64e6, seed), 21, 31);
        let live = figure(&same, "live bytes");
        assert_eq!(live.change.verdict, Verdict::Same, "{live:?}");
    }

    #[test]
    fn runs_with_a_throughput_drop_and_a_doubled_p99_are_flagged_with_the_right_sign() {
        let slow = |dir: &str, seed| match dir {
            "a" => session(dir, 1e6, 1_000_000, seed),
            _ => session(dir, 0.9e6, 2_000_000, seed),
        };
        let c = three_a_side(slow, 1, 11);
        assert_eq!(c.noise, "runs");
        let rate = figure(&c, "messages/s");
        assert_eq!(rate.change.verdict, Verdict::Regressed, "{rate:?}");
        assert!(rate.change.change < -0.08, "{rate:?}");
        let p99 = figure(&c, "lap p99");
        assert_eq!(p99.change.verdict, Verdict::Regressed, "{p99:?}");
        assert!((p99.change.change - 1.0).abs() < 0.1, "{p99:?}");
        // And the other way round, improvements.
        let fast = |dir: &str, seed| match dir {
            "a" => session(dir, 0.9e6, 2_000_000, seed),
            _ => session(dir, 1e6, 1_000_000, seed),
        };
        let back = three_a_side(fast, 1, 11);
        assert_eq!(
            figure(&back, "messages/s").change.verdict,
            Verdict::Improved
        );
        assert_eq!(figure(&back, "lap p99").change.verdict, Verdict::Improved);
    }

    #[test]
    fn runs_from_one_distribution_are_the_same() {
        let c = three_a_side(|dir, seed| session(dir, 1e6, 1_000_000, seed), 3, 13);
        assert_eq!(c.regressions().count(), 0, "{}", c.to_text());
        assert_eq!(figure(&c, "messages/s").change.verdict, Verdict::Same);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let text = c.to_text();
        assert!(
            text.contains("same") && text.contains("messages/s") && !text.contains("noise"),
            "{text}"
        );
        assert!(c.to_markdown().contains("| messages/s |"));
    }

    #[test]
    fn a_far_run_is_set_aside_and_a_descheduled_one_is_noted() {
        let runs: Vec<Session> = (0..4)
            .map(|i| {
                let mut s = session("a", if i == 2 { 3e6 } else { 1e6 }, 1_000_000, i + 1);
                // 30 s of wall time each; the last run got a sixth of the CPU time.
                s.meta.worker.cpu_time_s = Some(if i == 3 { 5.0 } else { 28.0 });
                s
            })
            .collect();
        let others: Vec<Session> = (0..4)
            .map(|i| session("b", 1e6, 1_000_000, i + 11))
            .collect();
        let (a, b): (Vec<&Session>, Vec<&Session>) =
            (runs.iter().collect(), others.iter().collect());
        let c = compare_runs(&a, &b, &CompareOptions::default());
        let text = c.to_text();
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains("runs set aside") && n.contains("messages/s 1")),
            "{text}"
        );
        assert!(
            c.notes
                .iter()
                .any(|n| n.starts_with("A: run 4 looks disturbed")),
            "{text}"
        );
        // Set aside, the run of three times the rate does not make messages/s a change.
        assert_eq!(
            figure(&c, "messages/s").change.verdict,
            Verdict::Same,
            "{text}"
        );
    }

    #[test]
    fn one_session_a_side_gets_no_verdict_but_the_runs_it_would_take() {
        let a = session("a", 1e6, 1_000_000, 3);
        let b = session("b", 0.9e6, 1_000_000, 4);
        let c = compare(&a, &b, &CompareOptions::default());
        assert_eq!(c.noise, "none");
        assert_eq!(c.judged, 0);
        for f in &c.figures {
            assert_eq!(f.change.verdict, Verdict::Undecided, "{f:?}");
            assert!(f.change.ci.is_none() && f.change.needs.is_some(), "{f:?}");
        }
        let rate = figure(&c, "messages/s");
        // A 10 % drop over a ±2 % noise within the run: a few runs a side would tell.
        assert!(
            matches!(rate.change.needs, Some(Needs::Runs(n)) if n <= 5),
            "{rate:?}"
        );
        let text = c.to_text();
        assert!(text.contains("undecided — needs ≥"), "{text}");
        let json = serde_json::to_value(&c).unwrap();
        assert!(json["figures"][0]["runs_needed"].is_u64(), "{json}");
        assert_eq!(json["figures"][0]["verdict_v1"], "within noise");
    }

    #[test]
    fn an_interval_on_the_log_ratio_never_passes_minus_a_hundred_percent() {
        // A run of near-zero values against a large one: a symmetric interval on the
        // ratio would reach far below −100 %.
        let a: Vec<f64> = (0..12)
            .map(|i| if i % 2 == 0 { 1e6 } else { 1.0 })
            .collect();
        let b: Vec<f64> = (0..12)
            .map(|i| if i % 3 == 0 { 1e6 } else { 2.0 })
            .collect();
        let c = judge(&a, &b, Some(Better::Higher), &CompareOptions::default());
        let (lo, hi) = c.ci.unwrap();
        assert!(lo > -1.0 && lo <= c.change && c.change <= hi, "{c:?}");
    }

    #[test]
    fn lap_percentiles_timed_two_ways_are_shown_unjudged_and_the_rest_judged() {
        let ring = |dir: &str, p99_ns: u64, seed: u64, params: &[(&str, serde_json::Value)]| {
            let mut s = session(dir, 1e6, p99_ns, seed);
            let params = params.iter().map(|(k, v)| ((*k).to_owned(), v.clone()));
            s.meta.workload = crate::meta::WorkloadInfo::new("ring", params.collect());
            s
        };
        let old_ask = [("mode", "ask".into())];
        let new_ask = [("mode", "ask".into()), ("lap-version", 2.into())];
        let tell = [("mode", "tell".into())];
        let opts = CompareOptions::default();

        let c = compare(
            &ring("a", 1_000_000, 3, &old_ask),
            &ring("b", 2_000_000, 4, &new_ask),
            &opts,
        );
        let lap = figure(&c, "lap p99");
        assert_eq!(lap.change.verdict, Verdict::Unjudged, "{lap:?}");
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("A lap-version 1, B lap-version 2")),
            "{:?}",
            c.warnings
        );
        assert_eq!(lap.change.reason, Some(LAPS_TIMED_TWO_WAYS));
        assert_ne!(figure(&c, "messages/s").change.verdict, Verdict::Unjudged);

        // One definition on both sides: not refused (one session a side is then judged
        // as undecided, needing runs), whatever the mode (tell's laps never
        // changed, so a tell session without a version times what today's ask does).
        for (a, b) in [(&old_ask[..], &old_ask[..]), (&new_ask[..], &new_ask[..])] {
            let c = compare(
                &ring("a", 1_000_000, 3, a),
                &ring("b", 2_000_000, 4, b),
                &opts,
            );
            assert_ne!(figure(&c, "lap p99").change.verdict, Verdict::Unjudged);
            assert!(
                !c.warnings.iter().any(|w| w.contains("lap")),
                "{:?}",
                c.warnings
            );
        }
        let c = compare(
            &ring("a", 1_000_000, 3, &tell),
            &ring("b", 2_000_000, 4, &new_ask),
            &opts,
        );
        assert_ne!(figure(&c, "lap p99").change.verdict, Verdict::Unjudged);
        assert!(
            !c.warnings.iter().any(|w| w.contains("lap")),
            "{:?}",
            c.warnings
        );
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
        assert_eq!(c.verdict, Verdict::Undecided);
        assert_eq!(c.needs, Some(Needs::Record));
        assert!(c.ci.is_none());
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
