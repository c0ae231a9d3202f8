//! What moved at a change point: every figure of the history between the segment before
//! the change point and the segment after it, the functions whose share of each profile
//! moved most between them ([`crate::compare::movers`], as `compare` lists them), and the
//! differential stacks of the segment after against the segment before
//! ([`crate::compare::diff_folded`], which [`crate::flame::write_differential_svg`]
//! draws).
//!
//! A change point's segments are its figure's: from the change point before it (or the
//! first point) to the one after it (or the last point). Figures whose change points fall
//! on the same point with the same segments share one [`Moved`]. The figures' values come
//! from the digests; the profiles are read only here, after the change points are found,
//! and only those of the [`MOVED_POINTS`] points nearest each side of the change point
//! (all of a shorter segment), each recording merged into its side's stacks and dropped.

use serde::Serialize;

use super::digest::key_of;
use super::{History, HistoryOptions};
use crate::compare::{self, Change, Mover, judge_runs};
use crate::escape::EscapedPath;
use crate::series::Recorded;
use crate::{Kind, StackTree};

/// The points a side of a change point whose profiles are read: enough for a profile that
/// stands for its segment, few enough that a long history reads tens of sessions a change
/// point, not all of them.
pub const MOVED_POINTS: usize = 20;
/// The functions listed a profile.
pub const MOVERS: usize = 10;

/// A figure across a change point's segments.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct FigureMove {
    /// The figure's name.
    pub name: String,
    /// Its unit.
    pub unit: String,
    /// The geometric mean of its points' values in the segment before.
    pub before: f64,
    /// The same in the segment after.
    pub after: f64,
    /// After against before, the points as runs (as the change point's own figure is
    /// judged).
    pub change: Change,
}

/// One profile across a change point's segments.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ProfileMove {
    /// The profile kind's name (`cpu`, `offcpu`, `mem` …).
    pub profile: &'static str,
    /// Its whole weight in the points read before and after (in the kind's folded unit).
    pub weight: (u64, u64),
    /// The functions whose share moved most, before → after.
    pub movers: Vec<Mover>,
    /// The differential folded text of after against before (`stack before after`, the
    /// before side scaled to the after side's total), for the flamegraph.
    #[serde(skip)]
    pub diff_folded: String,
    /// The files the differential stacks were written to, once the caller wrote them.
    pub files: Vec<String>,
}

/// What moved at one change point.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Moved {
    /// The first point after the change point (an index into [`History::points`]).
    pub at: usize,
    /// The figures whose change point it is.
    pub changes: Vec<String>,
    /// The points of the segment before (indices into [`History::points`]), oldest first.
    pub before: Vec<usize>,
    /// The points of the segment after.
    pub after: Vec<usize>,
    /// Every figure with values on both sides, after against before.
    pub figures: Vec<FigureMove>,
    /// The points whose profiles were read before and after (the nearest
    /// [`MOVED_POINTS`] of each segment); empty when profiles were not read.
    pub profiled: (Vec<usize>, Vec<usize>),
    /// Each profile that both sides have, in the order of [`Kind::ALL`].
    pub profiles: Vec<ProfileMove>,
}

impl Moved {
    /// The points whose profiles were read, in words: (`points 0–5`, `points 6–11`).
    pub fn profiled_spans(&self) -> (String, String) {
        (span(&self.profiled.0), span(&self.profiled.1))
    }

    /// The stem of the files of `profile`'s differential stacks:
    /// `p<first before>-p<at>-p<last after>-diff-<profile>`.
    pub fn diff_stem(&self, profile: &str) -> String {
        format!(
            "p{}-p{}-p{}-diff-{profile}",
            self.before.first().copied().unwrap_or(self.at),
            self.at,
            self.after.last().copied().unwrap_or(self.at)
        )
    }
}

/// The segments of every change point of `h`: (the points before, the points after) as
/// indices into [`History::points`], with the figures whose change point it is.
fn segments(h: &History) -> Vec<(Vec<usize>, Vec<usize>, Vec<String>)> {
    let mut out: Vec<(Vec<usize>, Vec<usize>, Vec<String>)> = Vec::new();
    for f in &h.figures {
        let mut bounds = vec![0];
        bounds.extend(f.changes.iter().map(|c| c.at));
        bounds.push(f.points.len());
        for k in 0..f.changes.len() {
            let (start, at, end) = (bounds[k], bounds[k + 1], bounds[k + 2]);
            let points = |range: std::ops::Range<usize>| -> Vec<usize> {
                f.points[range].iter().map(|p| p.point).collect()
            };
            let (before, after) = (points(start..at), points(at..end));
            match out.iter_mut().find(|(b, a, _)| *b == before && *a == after) {
                Some((_, _, names)) => names.push(f.name.clone()),
                None => out.push((before, after, vec![f.name.clone()])),
            }
        }
    }
    out.sort_by_key(|(_, after, _)| after.first().copied());
    out
}

/// The geometric mean of the positive, finite values of `v`; NaN when there are none.
fn geometric_mean(v: &[f64]) -> f64 {
    let logs: Vec<f64> = v
        .iter()
        .filter(|x| x.is_finite() && **x > 0.0)
        .map(|x| x.ln())
        .collect();
    if logs.is_empty() {
        return f64::NAN;
    }
    (logs.iter().sum::<f64>() / logs.len() as f64).exp()
}

/// Every figure of `h` across the segments `before` and `after`.
fn figures(
    h: &History,
    before: &[usize],
    after: &[usize],
    opts: &HistoryOptions,
) -> Vec<FigureMove> {
    h.figures
        .iter()
        .filter_map(|f| {
            let values = |side: &[usize]| -> Vec<f64> {
                f.points
                    .iter()
                    .filter(|p| side.contains(&p.point))
                    .map(|p| p.value)
                    .collect()
            };
            let (b, a) = (values(before), values(after));
            if b.is_empty() || a.is_empty() {
                return None;
            }
            Some(FigureMove {
                name: f.name.clone(),
                unit: f.unit.clone(),
                before: geometric_mean(&b),
                after: geometric_mean(&a),
                change: judge_runs(&b, &a, f.better, &opts.compare),
            })
        })
        .collect()
}

/// The stacks of every kind in the recordings of `points` that belong to `h`, merged;
/// a recording that cannot be read is named in `warnings`.
fn stacks(h: &History, points: &[usize], warnings: &mut Vec<String>) -> Vec<Option<StackTree>> {
    let mut trees: Vec<Option<StackTree>> = vec![None; Kind::ALL.len()];
    for &i in points {
        for dir in &h.points[i].dirs {
            let recorded = match Recorded::load(dir) {
                Ok(r) => r,
                Err(e) => {
                    warnings.push(format!(
                        "{}: its profiles were not read: {e}",
                        EscapedPath(dir)
                    ));
                    continue;
                }
            };
            for run in recorded.runs() {
                // A series may hold runs of other histories (a sweep's other points).
                if key_of(&run.meta) != h.key {
                    continue;
                }
                for (slot, kind) in trees.iter_mut().zip(Kind::ALL) {
                    if let Some(tree) = run.profile(kind).filter(|t| !t.is_empty()) {
                        slot.get_or_insert_with(StackTree::new).merge(tree);
                    }
                }
            }
        }
    }
    trees
}

/// The profiles of `h` before and after a change point: those both sides have.
fn profiles(
    h: &History,
    before: &[usize],
    after: &[usize],
    warnings: &mut Vec<String>,
) -> Vec<ProfileMove> {
    let (tb, ta) = (stacks(h, before, warnings), stacks(h, after, warnings));
    let mut out = Vec::new();
    for ((kind, b), a) in Kind::ALL.into_iter().zip(&tb).zip(&ta) {
        let (Some(b), Some(a)) = (b, a) else {
            continue;
        };
        let diff_folded = match compare::diff_folded(b, a, true) {
            Ok(diff) => diff,
            Err(e) => {
                warnings.push(format!(
                    "the {} differential stacks were not made: {e}",
                    kind.name()
                ));
                String::new()
            }
        };
        out.push(ProfileMove {
            profile: kind.name(),
            weight: (b.total_weight(), a.total_weight()),
            movers: compare::movers(b, a, MOVERS),
            diff_folded,
            files: Vec::new(),
        });
    }
    out
}

/// What moved at each change point of `h`, oldest first; profiles are read when
/// [`HistoryOptions::profiles`] says so.
pub(crate) fn moved(h: &History, opts: &HistoryOptions, warnings: &mut Vec<String>) -> Vec<Moved> {
    segments(h)
        .into_iter()
        .map(|(before, after, changes)| {
            let at = after.first().copied().unwrap_or(0);
            let figures = figures(h, &before, &after, opts);
            let (profiled, profiles) = if opts.profiles {
                let near_before = before[before.len().saturating_sub(MOVED_POINTS)..].to_vec();
                let near_after = after[..after.len().min(MOVED_POINTS)].to_vec();
                let profiles = profiles(h, &near_before, &near_after, warnings);
                ((near_before, near_after), profiles)
            } else {
                ((Vec::new(), Vec::new()), Vec::new())
            };
            Moved {
                at,
                changes,
                before,
                after,
                figures,
                profiled,
                profiles,
            }
        })
        .collect()
}

/// The points of a segment in words: `points 0–5`, `point 3`.
pub(crate) fn span(points: &[usize]) -> String {
    match points {
        [] => "no points".to_owned(),
        [one] => format!("point {one}"),
        [first, .., last] => format!("points {first}–{last}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_names_its_first_and_last_point() {
        assert_eq!(span(&[]), "no points");
        assert_eq!(span(&[3]), "point 3");
        assert_eq!(span(&[0, 1, 2, 5]), "points 0–5");
    }

    #[test]
    fn the_geometric_mean_leaves_out_what_is_not_a_positive_number() {
        assert!((geometric_mean(&[1.0, 4.0, f64::NAN, -2.0]) - 2.0).abs() < 1e-12);
        assert!(geometric_mean(&[0.0]).is_nan());
    }

    #[test]
    fn a_diff_stem_names_the_segments_and_the_profile() {
        let m = Moved {
            at: 6,
            changes: vec!["laps/s".into()],
            before: vec![0, 1, 2, 3, 4, 5],
            after: vec![6, 7, 8, 9, 10, 11],
            figures: Vec::new(),
            profiled: (Vec::new(), Vec::new()),
            profiles: Vec::new(),
        };
        assert_eq!(m.diff_stem("cpu"), "p0-p6-p11-diff-cpu");
    }
}
