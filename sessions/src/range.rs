//! Time ranges of a run (`--range`): `A..B` with durations from the run's start
//! (`10s..20s`, `..5s`, `30s..`), or `last:10s`; and what `benchtop show DIR --range`
//! prints of one: the range's figures and its top functions, self and total.
//!
//! ```
//! use benchtop_sessions::range::RangeSpec;
//!
//! let spec: RangeSpec = "10s..20s".parse()?;
//! assert_eq!(spec.resolve(40_000_000_000)?, (10_000_000_000, 20_000_000_000));
//! let last: RangeSpec = "last:10s".parse()?;
//! assert_eq!(last.resolve(40_000_000_000)?, (30_000_000_000, 40_000_000_000));
//! assert!("30s..50s".parse::<RangeSpec>()?.resolve(40_000_000_000).is_err());
//! # Ok::<(), benchtop_sessions::range::RangeError>(())
//! ```

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::str::FromStr;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::escape::Escaped;
use crate::intervals::IntervalStacks;
use crate::units::{human_count, human_ns};
use crate::{Kind, Session, StackTree};

/// A time range as written on the command line, before the run's length is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RangeSpec {
    /// `A..B`: from A (the start when absent) to B (the end when absent).
    Between {
        /// From this long after the run's start.
        from: Option<Duration>,
        /// To this long after the run's start.
        to: Option<Duration>,
    },
    /// `last:D`: the last D of the run.
    Last(Duration),
}

/// Why a range is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RangeError {
    /// Not `A..B` nor `last:D`.
    #[error(
        "{text:?} is not a range: write A..B with durations from the run's start \
         (10s..20s, ..5s, 30s..) or last:D (last:10s)"
    )]
    Syntax {
        /// What was given.
        text: String,
    },
    /// A bound that is not a duration.
    #[error("{text:?} in range {range:?} is not a duration (10s, 1m30s, 500ms): {reason}")]
    Duration {
        /// The range.
        range: String,
        /// The bound.
        text: String,
        /// What the duration parser said.
        reason: String,
    },
    /// Nothing between the bounds.
    #[error("range {range} is empty: it must end after it begins")]
    Empty {
        /// The range, as resolved.
        range: String,
    },
    /// A bound past the run's end.
    #[error(
        "range {range} is outside the run, which is {length} long: a range must lie within \
         0s..{length} (an open end, as in `10s..`, runs to the run's end)"
    )]
    Outside {
        /// The range, as resolved.
        range: String,
        /// The run's length.
        length: String,
    },
}

/// Seconds with up to three decimals, as ranges are written back.
fn secs(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    let text = format!("{s:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}s")
}

impl FromStr for RangeSpec {
    type Err = RangeError;

    fn from_str(text: &str) -> Result<Self, RangeError> {
        let duration = |bound: &str| -> Result<Option<Duration>, RangeError> {
            let bound = bound.trim();
            if bound.is_empty() {
                return Ok(None);
            }
            humantime::parse_duration(bound)
                .map(Some)
                .map_err(|e| RangeError::Duration {
                    range: text.to_owned(),
                    text: bound.to_owned(),
                    reason: e.to_string(),
                })
        };
        if let Some(last) = text.trim().strip_prefix("last:") {
            return match duration(last)? {
                Some(d) => Ok(RangeSpec::Last(d)),
                None => Err(RangeError::Syntax { text: text.into() }),
            };
        }
        let Some((from, to)) = text.split_once("..") else {
            return Err(RangeError::Syntax { text: text.into() });
        };
        Ok(RangeSpec::Between {
            from: duration(from)?,
            to: duration(to)?,
        })
    }
}

impl fmt::Display for RangeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = |d: &Duration| d.as_nanos().min(u128::from(u64::MAX)) as u64;
        match self {
            RangeSpec::Between { from, to } => {
                if let Some(from) = from {
                    f.write_str(&secs(ns(from)))?;
                }
                f.write_str("..")?;
                if let Some(to) = to {
                    f.write_str(&secs(ns(to)))?;
                }
                Ok(())
            }
            RangeSpec::Last(d) => write!(f, "last:{}", secs(ns(d))),
        }
    }
}

impl RangeSpec {
    /// The range in nanoseconds from the run's start, `[from, to)`, for a run of
    /// `length_ns`: an empty range and a bound past the run's end are refused.
    pub fn resolve(&self, length_ns: u64) -> Result<(u64, u64), RangeError> {
        let ns = |d: Duration| d.as_nanos().min(u128::from(u64::MAX)) as u64;
        let (from, to) = match *self {
            RangeSpec::Between { from, to } => (from.map_or(0, ns), to.map_or(length_ns, ns)),
            RangeSpec::Last(d) => (length_ns.saturating_sub(ns(d)), length_ns),
        };
        let range = format!("{}..{}", secs(from), secs(to));
        if from >= length_ns || to > length_ns {
            return Err(RangeError::Outside {
                range,
                length: secs(length_ns),
            });
        }
        if to <= from {
            return Err(RangeError::Empty { range });
        }
        Ok((from, to))
    }
}

/// A frame's weight in a profile: where it is the leaf (self) and anywhere in the
/// stack (total, each stack counted once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionWeight {
    /// The frame's name.
    pub name: String,
    /// Weight of the stacks it ends.
    pub self_weight: u64,
    /// Weight of the stacks it is in.
    pub total_weight: u64,
}

/// The `n` functions with the largest self weight (then total, then name).
pub fn top_functions(tree: &StackTree, n: usize) -> Vec<FunctionWeight> {
    let mut by_name: HashMap<&str, (u64, u64)> = HashMap::new();
    let mut seen: Vec<&str> = Vec::new();
    tree.for_each_stack(|frames, weight| {
        seen.clear();
        for &f in frames {
            let name = tree.name(f);
            if !seen.contains(&name) {
                seen.push(name);
                by_name.entry(name).or_default().1 += weight;
            }
        }
        if let Some(&leaf) = frames.last() {
            by_name.entry(tree.name(leaf)).or_default().0 += weight;
        }
    });
    let mut out: Vec<FunctionWeight> = by_name
        .into_iter()
        .filter(|(_, (s, _))| *s > 0)
        .map(|(name, (self_weight, total_weight))| FunctionWeight {
            name: name.to_owned(),
            self_weight,
            total_weight,
        })
        .collect();
    out.sort_unstable_by(|a, b| {
        b.self_weight
            .cmp(&a.self_weight)
            .then(b.total_weight.cmp(&a.total_weight))
            .then(a.name.cmp(&b.name))
    });
    out.truncate(n);
    out
}

/// The run's length for ranges, ns: the end of its last row or of its last interval of
/// stacks, whichever is later.
pub fn run_length_ns(session: &Session, stacks: Option<&IntervalStacks>) -> u64 {
    let rows = session
        .row_summary
        .last_t_s
        .or_else(|| session.rows.last().map(|r| r.t_s))
        .map_or(0, |t| (t.max(0.0) * 1e9) as u64);
    let stacks = stacks.and_then(IntervalStacks::span_ns).map_or(0, |s| s.1);
    rows.max(stacks)
}

/// What `benchtop show DIR --range` prints: the range, the figures of the rows in it
/// (mean rates, latency percentiles of the merged intervals of latency.hlog), and the top
/// `top` functions on- and off-CPU, self and total. `stacks` is the session's
/// stacks.jsonl, `None` for a session recorded before schema 2 (which is said, and the
/// whole run's stacks shown instead). `session` must be loaded with its rows.
pub fn range_text(
    session: &Session,
    stacks: Option<&IntervalStacks>,
    spec: &RangeSpec,
    top: usize,
) -> Result<String, RangeError> {
    let length = run_length_ns(session, stacks);
    let (from, to) = spec.resolve(length)?;
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = write_range(&mut out, session, stacks, (from, to), length, top);
    Ok(out)
}

fn write_range(
    out: &mut String,
    session: &Session,
    stacks: Option<&IntervalStacks>,
    (from, to): (u64, u64),
    length: u64,
    top: usize,
) -> fmt::Result {
    writeln!(out, "id        {}", Escaped(&session.meta.id))?;
    writeln!(
        out,
        "range     {}..{} of a run of {}",
        secs(from),
        secs(to),
        secs(length)
    )?;
    let in_range = |t0: f64, t1: f64| {
        let mid = (t0 + t1) / 2.0 * 1e9;
        mid >= from as f64 && mid < to as f64
    };
    let rows: Vec<_> = session
        .rows
        .iter()
        .filter(|r| in_range(r.t_s - r.interval_s, r.t_s))
        .collect();
    writeln!(out, "rows      {} of {}", rows.len(), session.rows.len())?;
    let mut rates: std::collections::BTreeMap<&str, (f64, f64)> = Default::default();
    for r in &rows {
        for (name, rate) in &r.rates {
            let e = rates.entry(name).or_default();
            e.0 += rate * r.interval_s;
            e.1 += r.interval_s;
        }
    }
    for (name, (sum, secs)) in rates {
        if secs > 0.0 {
            writeln!(out, "  {:<24} {}/s", Escaped(name), human_count(sum / secs))?;
        }
    }
    // latency.hlog's offsets count from the session's start time; its first interval
    // begins where the run does.
    let base = session
        .latency
        .iter()
        .map(|i| i.start_offset_s)
        .fold(f64::INFINITY, f64::min);
    let mut merged: std::collections::BTreeMap<&str, Histogram<u64>> = Default::default();
    for i in &session.latency {
        let t0 = i.start_offset_s - base;
        if in_range(t0, t0 + i.length_s) {
            match merged.get_mut(i.tag.as_str()) {
                Some(h) => {
                    let _ = h.add(i.histogram.to_histogram());
                }
                None => {
                    merged.insert(&i.tag, i.histogram.to_histogram());
                }
            }
        }
    }
    for (tag, h) in &merged {
        let q = |p: f64| human_ns(h.value_at_quantile(p) as f64);
        writeln!(
            out,
            "  latency {:<16} p50 {}  p99 {}  p99.9 {}  max {}  ({} values)",
            Escaped(tag),
            q(0.5),
            q(0.99),
            q(0.999),
            human_ns(h.max() as f64),
            h.len()
        )?;
    }
    // The kinds weighed per interval that are not memory profiles: on- and off-CPU.
    let kinds: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| k.spec().interval_field.is_some() && !k.spec().memory)
        .collect();
    let trees: Vec<StackTree> = match stacks {
        Some(s) => {
            let n = s
                .intervals
                .values()
                .filter(|i| IntervalStacks::in_range(i, from, to))
                .count();
            writeln!(
                out,
                "stacks    {n} of {} intervals (stacks.jsonl)",
                s.intervals.len()
            )?;
            kinds.iter().map(|&k| s.tree_in(k, from, to)).collect()
        }
        None => {
            writeln!(
                out,
                "stacks    this session has no per-interval stacks (recorded before schema 2, \
                 or without sampling): the functions below are the whole run's"
            )?;
            kinds
                .iter()
                .map(|&k| session.profile(k).cloned().unwrap_or_default())
                .collect()
        }
    };
    for (kind, tree) in kinds.iter().zip(&trees) {
        let (title, unit) = (kind.title(), kind.spec().weight_label);
        let total = tree.total_weight();
        if total == 0 {
            continue;
        }
        writeln!(out, "\ntop functions, {title} ({total} {unit})")?;
        writeln!(out, "    self   total  function")?;
        for f in top_functions(tree, top) {
            let pct = |w: u64| 100.0 * w as f64 / total as f64;
            writeln!(
                out,
                "  {:>5.1}%  {:>5.1}%  {}",
                pct(f.self_weight),
                pct(f.total_weight),
                Escaped(&f.name)
            )?;
        }
    }
    for w in stacks.iter().flat_map(|s| &s.warnings) {
        writeln!(out, "warning   {}", Escaped(w))?;
    }
    Ok(())
}

/// Which intervals of a run a part of it holds: those whose span (ns from the run's
/// start) `keep` accepts.
pub trait Selection {
    /// Whether the interval `[t0_ns, t1_ns)` belongs.
    fn keep(&self, t0_ns: u64, t1_ns: u64) -> bool;
}

/// The intervals whose middle lies in `[from, to)`.
#[derive(Debug, Clone, Copy)]
pub struct Between(pub u64, pub u64);

impl Selection for Between {
    fn keep(&self, t0_ns: u64, t1_ns: u64) -> bool {
        let mid = t0_ns + t1_ns.saturating_sub(t0_ns) / 2;
        (self.0..self.1).contains(&mid)
    }
}

/// The rows of a run split by a latency metric's p99: the slow ones (p99 above the
/// threshold) or the others. An interval belongs to the side of the row whose span holds
/// its middle; one after the last row belongs to neither.
#[derive(Debug, Clone)]
pub struct SlowRows {
    /// Each row's span, ns from the start, and whether it is slow.
    rows: Vec<(u64, u64, bool)>,
    /// Select the slow rows (else the others).
    pub slow: bool,
}

/// Why `--slow` cannot split a session.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SlowError {
    /// No latency metric at all.
    #[error(
        "the session has no latency metric, so it has no slow intervals: --slow needs a workload that reports latency"
    )]
    NoLatency,
    /// The metric asked for is not in the session.
    #[error("the session has no latency metric {name:?}; it has: {have}")]
    NoSuchMetric {
        /// The metric asked for.
        name: String,
        /// The metrics it has.
        have: String,
    },
    /// Every interval is on one side.
    #[error(
        "{slow} of {rows} intervals have a {metric} p99 above {threshold}: nothing to compare them with"
    )]
    OneSided {
        /// The metric.
        metric: String,
        /// The threshold, in words.
        threshold: String,
        /// Slow intervals.
        slow: usize,
        /// All intervals.
        rows: usize,
    },
}

/// The threshold of `--slow`: above the whole run's p99, or above a value (ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SlowThreshold {
    /// The whole run's p99 of the metric.
    RunP99,
    /// A latency, ns.
    Above(u64),
}

impl SlowRows {
    /// Splits `session`'s rows by the p99 of `metric` (the first latency metric of its rows
    /// when `None`). Returns the split, the metric and the threshold in ns.
    pub fn split(
        session: &Session,
        metric: Option<&str>,
        threshold: SlowThreshold,
    ) -> Result<(SlowRows, String, u64), SlowError> {
        let mut names: Vec<&str> = session
            .rows
            .iter()
            .flat_map(|r| r.latency.keys().map(String::as_str))
            .collect();
        names.sort_unstable();
        names.dedup();
        let metric = match metric {
            Some(m) if names.contains(&m) => m.to_owned(),
            Some(m) => {
                return Err(if names.is_empty() {
                    SlowError::NoLatency
                } else {
                    SlowError::NoSuchMetric {
                        name: m.to_owned(),
                        have: names.join(", "),
                    }
                });
            }
            None => session
                .rows
                .iter()
                .find_map(|r| r.latency.keys().next().cloned())
                .ok_or(SlowError::NoLatency)?,
        };
        let limit = match threshold {
            SlowThreshold::Above(ns) => ns,
            SlowThreshold::RunP99 => {
                let mut notes = Vec::new();
                let merged = session.merged_latency(&mut notes);
                match merged.get(metric.as_str()) {
                    Some(h) => h.value_at_quantile(0.99),
                    // Without latency.hlog: the median of the rows' p99s.
                    None => {
                        let mut p99: Vec<u64> = session
                            .rows
                            .iter()
                            .filter_map(|r| r.latency.get(&metric).map(|p| p.p99))
                            .collect();
                        p99.sort_unstable();
                        p99.get(p99.len() / 2).copied().unwrap_or(0)
                    }
                }
            }
        };
        let rows: Vec<(u64, u64, bool)> = session
            .rows
            .iter()
            .map(|r| {
                let t1 = (r.t_s.max(0.0) * 1e9) as u64;
                let t0 = ((r.t_s - r.interval_s).max(0.0) * 1e9) as u64;
                let slow = r
                    .latency
                    .get(&metric)
                    .is_some_and(|p| p.count > 0 && p.p99 > limit);
                (t0, t1, slow)
            })
            .collect();
        let slow = rows.iter().filter(|r| r.2).count();
        if slow == 0 || slow == rows.len() {
            return Err(SlowError::OneSided {
                metric,
                threshold: human_ns(limit as f64),
                slow,
                rows: rows.len(),
            });
        }
        Ok((SlowRows { rows, slow: true }, metric, limit))
    }

    /// The other side of the split.
    pub fn others(&self) -> SlowRows {
        SlowRows {
            rows: self.rows.clone(),
            slow: !self.slow,
        }
    }

    /// Rows on this side.
    pub fn count(&self) -> usize {
        self.rows.iter().filter(|r| r.2 == self.slow).count()
    }
}

impl Selection for SlowRows {
    fn keep(&self, t0_ns: u64, t1_ns: u64) -> bool {
        let mid = t0_ns + t1_ns.saturating_sub(t0_ns) / 2;
        let i = self.rows.partition_point(|r| r.1 <= mid);
        self.rows
            .get(i)
            .is_some_and(|&(t0, _, slow)| mid >= t0 && slow == self.slow)
    }
}

/// The part of `session` that `part` selects, as a session of its own for `compare`:
/// its rows, its latency intervals and, from `stacks`, its on- and off-CPU stacks. The
/// worker's whole-run summary figures and phases are left out (they are not the
/// part's); so are the stacks when there are no per-interval stacks (`None`), never
/// replaced by the whole run's. `label` is added to the id.
pub fn restrict(
    session: &Session,
    stacks: Option<&IntervalStacks>,
    part: &dyn Selection,
    label: &str,
) -> Session {
    // Only the part's rows and intervals are cloned: an hour's session split in two
    // holds each interval once more, not twice.
    let rows: Vec<_> = session
        .rows
        .iter()
        .filter(|r| {
            let t1 = (r.t_s.max(0.0) * 1e9) as u64;
            let t0 = ((r.t_s - r.interval_s).max(0.0) * 1e9) as u64;
            part.keep(t0, t1)
        })
        .cloned()
        .collect();
    // latency.hlog's offsets count from the session's start time; its first interval
    // begins where the run does.
    let base = session
        .latency
        .iter()
        .map(|i| i.start_offset_s)
        .fold(f64::INFINITY, f64::min);
    let latency = session
        .latency
        .iter()
        .filter(|i| {
            let t0 = ((i.start_offset_s - base).max(0.0) * 1e9) as u64;
            let t1 = t0 + (i.length_s.max(0.0) * 1e9) as u64;
            part.keep(t0, t1)
        })
        .cloned()
        .collect();
    let mut meta = session.meta.clone();
    meta.id = format!("{} [{label}]", session.meta.id);
    meta.summary.clear();
    meta.phases.clear();
    let mut out = Session {
        dir: session.dir.clone(),
        meta,
        row_summary: crate::RowSummary::of(&rows),
        rows,
        latency,
        profiles: crate::ByKind::default(),
        threads: session.threads.clone(),
        warnings: session.warnings.clone(),
    };
    match stacks {
        Some(s) => {
            let keep = |i: &crate::intervals::LoadedInterval| part.keep(i.t0_ns, i.t1_ns);
            // Kinds weighed per interval (on-, off-CPU, page faults) are split; the
            // allocation profiles, whole-run only, are not.
            for kind in Kind::ALL {
                if kind.spec().interval_field.is_some() && session.profile(kind).is_some() {
                    out.profiles[kind] = Some(s.tree(kind, keep));
                }
            }
        }
        None => {
            out.warnings.push(
                "no per-interval stacks (recorded before schema 2): the part is compared \
                 on its figures only, without stacks"
                    .into(),
            );
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::field_reassign_with_default)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn every_documented_form_parses_and_resolves() {
        let run = 40 * S;
        let cases = [
            ("10s..20s", (10 * S, 20 * S)),
            ("..5s", (0, 5 * S)),
            ("30s..", (30 * S, run)),
            ("last:10s", (30 * S, run)),
            ("1m..1m500ms", (run, run)),
        ];
        for (text, want) in &cases[..4] {
            let spec: RangeSpec = text.parse().unwrap();
            assert_eq!(spec.resolve(run).unwrap(), *want, "{text}");
        }
        // One minute is past a 40 s run.
        let e = cases[4].0.parse::<RangeSpec>().unwrap().resolve(run);
        assert!(matches!(e, Err(RangeError::Outside { .. })), "{e:?}");
    }

    #[test]
    fn bad_ranges_are_refused_naming_the_problem() {
        let run = 20 * S;
        let outside = "30s..40s".parse::<RangeSpec>().unwrap().resolve(run);
        let text = outside.unwrap_err().to_string();
        assert!(
            text.contains("outside the run") && text.contains("20s long"),
            "{text}"
        );
        let past_end = "10s..25s".parse::<RangeSpec>().unwrap().resolve(run);
        assert!(matches!(past_end, Err(RangeError::Outside { .. })));
        for empty in ["5s..5s", "6s..5s"] {
            let e = empty.parse::<RangeSpec>().unwrap().resolve(run);
            assert!(matches!(e, Err(RangeError::Empty { .. })), "{empty}: {e:?}");
        }
        for bad in ["10s", "last:", "ten..20s", "1s..2parsecs"] {
            assert!(bad.parse::<RangeSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn top_functions_count_self_at_the_leaf_and_total_once_per_stack() {
        let mut t = StackTree::new();
        t.add_names(["p", "main", "work", "work"], 3);
        t.add_names(["p", "main", "other"], 1);
        let top = top_functions(&t, 5);
        assert_eq!(top[0].name, "work");
        assert_eq!((top[0].self_weight, top[0].total_weight), (3, 3));
        assert_eq!(top[1].name, "other");
        assert_eq!(
            top.len(),
            2,
            "frames that end no stack are not listed: {top:?}"
        );
    }

    /// A 20-interval session whose latency spikes (p99 10 ms, else 1 ms) in every fifth
    /// interval, and whose stacks are in `slow_path` exactly then, `fast_path` otherwise.
    fn spiky() -> (Session, IntervalStacks) {
        let meta = crate::SessionMeta::new(
            "spiky",
            crate::meta::WorkloadInfo::new("fixture", Default::default()),
            crate::meta::HostInfo::default(),
            "2026-11-23T12:00:00Z",
        );
        let mut chunks = crate::synthetic::TreeChunks::default();
        let mut bytes = crate::intervals::StacksChunk::header();
        let (mut rows, mut latency) = (Vec::new(), Vec::new());
        for i in 0..20u32 {
            let slow = i % 5 == 4;
            let p99 = if slow { 10_000_000 } else { 1_000_000 };
            let mut row = crate::TimeseriesRow::default();
            row.t_s = f64::from(i + 1);
            row.interval_s = 1.0;
            let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
            h.record_n(100_000, 980).unwrap();
            h.record_n(p99, 20).unwrap();
            row.latency.insert("lap".into(), crate::Percentiles::of(&h));
            rows.push(row);
            latency.push(crate::HlogInterval {
                tag: "lap".into(),
                start_offset_s: 0.25 + f64::from(i),
                length_s: 1.0,
                histogram: h.into(),
            });
            // The rest of the work goes on in slow intervals too: slow_path is what moved.
            let rest = if slow { 40 } else { 50 };
            let mut cpu = crate::StackTree::new();
            cpu.add_names(["fixture", "fast_path"], rest);
            cpu.add_names(["fixture", "main_loop"], rest);
            if slow {
                cpu.add_names(["fixture", "slow_path"], 80);
            }
            chunks
                .chunk(
                    (u64::from(i) * S, u64::from(i + 1) * S),
                    &[(Kind::Cpu, &cpu)],
                )
                .write_jsonl(&mut bytes);
        }
        let stacks = IntervalStacks::parse(
            &bytes,
            std::path::Path::new("stacks.jsonl"),
            &crate::limits::LoadOptions::default(),
        )
        .unwrap();
        let session = Session {
            dir: "spiky".into(),
            meta,
            row_summary: crate::RowSummary::of(&rows),
            rows,
            latency,
            profiles: [(Kind::Cpu, Some(stacks.tree_in(Kind::Cpu, 0, u64::MAX)))]
                .into_iter()
                .collect(),
            threads: Vec::new(),
            warnings: Vec::new(),
        };
        (session, stacks)
    }

    #[test]
    fn the_slow_intervals_against_the_rest_put_slow_path_at_the_top_of_the_movers() {
        let (session, stacks) = spiky();
        let (slow, metric, limit) = SlowRows::split(&session, None, SlowThreshold::RunP99).unwrap();
        assert_eq!(metric, "lap");
        assert_eq!(slow.count(), 4, "threshold {limit}");
        assert_eq!(slow.others().count(), 16);
        let b = restrict(&session, Some(&stacks), &slow, "slow");
        let a = restrict(&session, Some(&stacks), &slow.others(), "rest");
        assert_eq!((a.rows.len(), b.rows.len()), (16, 4));
        assert_eq!((a.latency.len(), b.latency.len()), (16, 4));
        let (ta, tb) = (
            a.profiles[Kind::Cpu].clone().unwrap(),
            b.profiles[Kind::Cpu].clone().unwrap(),
        );
        assert_eq!(tb.total_weight(), 4 * 160);
        let movers = crate::compare::movers(&ta, &tb, 3);
        assert_eq!(movers[0].name, "slow_path", "{movers:?}");
        // An explicit threshold above every interval leaves nothing slow: refused.
        let none = SlowRows::split(&session, Some("lap"), SlowThreshold::Above(u64::MAX / 2));
        assert!(
            matches!(none, Err(SlowError::OneSided { slow: 0, .. })),
            "{none:?}"
        );
        let missing = SlowRows::split(&session, Some("rtt"), SlowThreshold::RunP99);
        assert!(matches!(missing, Err(SlowError::NoSuchMetric { .. })));
    }

    #[test]
    fn a_session_without_latency_is_refused_by_slow() {
        let (mut session, _) = spiky();
        for r in &mut session.rows {
            r.latency.clear();
        }
        let e = SlowRows::split(&session, None, SlowThreshold::RunP99).unwrap_err();
        assert_eq!(e, SlowError::NoLatency);
        assert!(e.to_string().contains("no latency metric"));
    }

    #[test]
    fn a_range_of_a_session_keeps_its_rows_latency_and_stacks_and_drops_whole_run_figures() {
        let (session, stacks) = spiky();
        let part = restrict(&session, Some(&stacks), &Between(0, 4 * S), "first 4 s");
        assert_eq!(part.rows.len(), 4);
        assert_eq!(part.latency.len(), 4);
        assert_eq!(
            part.profiles[Kind::Cpu].clone().unwrap().to_folded(),
            "fixture;fast_path 200\nfixture;main_loop 200\n"
        );
        assert!(part.meta.summary.is_empty());
        let without = restrict(&session, None, &Between(0, 4 * S), "old");
        assert!(
            without.profile(Kind::Cpu).is_none(),
            "never the whole run's stacks for a part"
        );
    }
}
