//! Histories: the sessions and series recorded over time (one a commit, say), each figure
//! as a series of points, and the change points in it.
//!
//! [`load`] walks directories for sessions and series ([`MAX_DIRS`], [`MAX_RECORDED`],
//! [`MAX_DEPTH`]; no symbolic link is followed) and reads each session's session.json
//! and digest.json ([`crate::digest`]: its figures' run values and within-run spreads,
//! written by the recorder when the run ended); a session without a whole digest (one
//! recorded before digests, or a digest.json that is damaged, planted or stale) is read
//! and digested in memory, and dropped. Profiles are read only for what moved at a
//! change point. A recording that fails to load, or did not end complete, is named in
//! [`Histories::warnings`] and left out; the rest are judged.
//!
//! **What a history follows**: one workload with its parameters (a command by its command
//! line), on one host, sampled the same way ([`HistoryKey`]); a different binary
//! behind the same command line is exactly what a history follows.
//!
//! **Points**: a session is a point; a series is one point, its measured runs giving the
//! spread (a sweep one point in each of its points' histories); recordings with the same
//! order value pool into one point. **Order**: the label named by
//! [`HistoryOptions::order_by`] (numbers in numeric order when every value is one; a
//! recording without the label is left out, saying so), else the git committer date
//! picked up at record time, else `started_at`.
//!
//! **Change points** ([`changes`]): E-divisive means on the logs of the points' values
//! with a permutation test, α = 1 %; each change point comes with its size and an
//! interval on the log of the ratio of the segments after and before it, judged as
//! `compare` judges runs (the points as runs), the last point before and the first after.
//! The newest point cannot be a change point: it is judged against the segment since the
//! last change point, its runs against that segment's points ([`FigureHistory::newest`]).
//!
//! **What moved** ([`History::moved`], [`Moved`]): at each change point, every figure
//! between the segments before and after it, and, from the profiles of the
//! [`MOVED_POINTS`] points nearest each side (read only then, with
//! [`HistoryOptions::profiles`]), the functions whose share moved most and the
//! differential stacks of after against before, as `compare` makes them.
//!
//! ```
//! use benchtop_sessions::history::{self, HistoryOptions};
//! use benchtop_sessions::synthetic::SyntheticHistory;
//!
//! let root = tempfile::tempdir()?;
//! let mut spec = SyntheticHistory::new(30, 0.01, 1);
//! spec.steps = vec![(15, 0.2)];
//! spec.write(root.path())?;
//! let found = history::load(&[root.path().to_path_buf()], &HistoryOptions::default())?;
//! let laps = found.histories[0].figure("laps/s").expect("laps/s");
//! assert_eq!(laps.points.len(), 30);
//! assert_eq!(laps.changes.len(), 1);
//! assert_eq!(laps.changes[0].after, "point 15 (c015)");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod changes;
mod digest;
mod moved;
mod render;
mod walk;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

pub use self::changes::{
    ALPHA, ChangeOptions, MIN_SEGMENT, PERMUTATIONS, SHORT_PERMUTATIONS, SHORT_SEGMENT,
};
use self::digest::Digest;
pub use self::moved::{FigureMove, MOVED_POINTS, MOVERS, Moved, ProfileMove};
pub use self::walk::{MAX_DEPTH, MAX_DIRS, MAX_RECORDED};
use crate::SessionError;
use crate::compare::{Change, CompareOptions, judge_runs};
use crate::meta::Better;

/// How histories are read and judged.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HistoryOptions {
    /// Order the points by this label (`--order-by`); `None`: the git committer date,
    /// else the start time.
    pub order_by: Option<String>,
    /// Only these figures; `None`: all.
    pub figures: Option<Vec<String>>,
    /// How change points are looked for.
    pub changes: ChangeOptions,
    /// How a change point's segments, and the newest point, are judged (threshold, α).
    pub compare: CompareOptions,
    /// Read the profiles of the points around each change point for [`Moved`] (true by
    /// default); without, what moved holds the figures only.
    pub profiles: bool,
}

impl Default for HistoryOptions {
    fn default() -> Self {
        HistoryOptions {
            order_by: None,
            figures: None,
            changes: ChangeOptions::default(),
            compare: CompareOptions::default(),
            profiles: true,
        }
    }
}

/// What a history follows: one workload with its parameters, host and sampling settings.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[non_exhaustive]
pub struct HistoryKey {
    /// The workload's name (a command's program).
    pub workload: String,
    /// Its parameters (`name=value`, in name order; a command's is its command line).
    pub params: String,
    /// The host's name.
    pub host: String,
    /// The sampling settings: event, frequency and profiles.
    pub sampling: String,
}

impl HistoryKey {
    /// The history a session with `meta` belongs to.
    pub fn of(meta: &crate::SessionMeta) -> HistoryKey {
        digest::key_of(meta)
    }
}

impl std::fmt::Display for HistoryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::escape::Escaped;
        write!(f, "{}", Escaped(&self.workload))?;
        if !self.params.is_empty() {
            write!(f, " {}", Escaped(&self.params))?;
        }
        if !self.host.is_empty() {
            write!(f, " · on {}", Escaped(&self.host))?;
        }
        write!(f, " · {}", Escaped(&self.sampling))
    }
}

/// One point of a history: the recordings pooled at one order value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Point {
    /// The point's name: its number and its commit or label (`point 7 (abc123def456)`).
    pub name: String,
    /// The value it is ordered by.
    pub order: String,
    /// The git commit, when one was picked up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The recordings pooled in it.
    pub dirs: Vec<PathBuf>,
    /// The labels of its first recording.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// A figure at one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct FigurePoint {
    /// The point (an index into [`History::points`]).
    pub point: usize,
    /// The geometric mean of its runs' values.
    pub value: f64,
    /// The lowest and the highest run.
    pub low: f64,
    /// See `low`.
    pub high: f64,
    /// Its runs' values.
    pub runs: Vec<f64>,
    /// The noise within its runs, on the log scale: the root mean square of their
    /// within-run spreads ([`crate::digest::RunFigure::spread`]); `None` for a figure
    /// with one value per run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within: Option<f64>,
}

/// A change point of a figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ChangePoint {
    /// The first point after it, as an index into [`FigureHistory::points`].
    pub at: usize,
    /// The last point before it ([`Point::name`]).
    pub before: String,
    /// The first point after it.
    pub after: String,
    /// The segment after against the segment before (up to the neighbouring change
    /// points): its size, interval on the log ratio and verdict, the points as runs.
    pub change: Change,
    /// The permutation test's p-value.
    pub p_value: f64,
}

/// One figure across a history's points.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct FigureHistory {
    /// The figure's name (`laps/s`, `lap p99`, `cpu_time_s` …).
    pub name: String,
    /// Its unit.
    pub unit: String,
    /// Which direction is better, when one is.
    pub better: Option<Better>,
    /// Its value at each point that has it (positive values only), in order.
    pub points: Vec<FigurePoint>,
    /// Its change points, in order.
    pub changes: Vec<ChangePoint>,
    /// The points set aside as outliers by the change-point search (indices into
    /// `points`).
    pub outliers: Vec<usize>,
    /// The newest point against the segment since the last change point; `None` with
    /// fewer than two points before it in that segment.
    pub newest: Option<Change>,
}

/// A history: one [`HistoryKey`]'s points and figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct History {
    /// What it follows.
    pub key: HistoryKey,
    /// What its points are ordered by: the label's name, `git committer date` or
    /// `started_at`.
    pub ordered_by: String,
    /// Its points, oldest first.
    pub points: Vec<Point>,
    /// Its figures, by name.
    pub figures: Vec<FigureHistory>,
    /// What moved at each change point of its figures, oldest first ([`Moved`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub moved: Vec<Moved>,
}

impl History {
    /// The figure called `name`.
    pub fn figure(&self, name: &str) -> Option<&FigureHistory> {
        self.figures.iter().find(|f| f.name == name)
    }
}

/// Every history found under some directories, and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Histories {
    /// The histories, by key.
    pub histories: Vec<History>,
    /// Recordings left out and directories not read, and why.
    pub warnings: Vec<String>,
    /// The method: α, permutations, the fewest points a side, the threshold.
    pub method: String,
}

/// Reads the histories under `roots` (see the module docs).
pub fn load(roots: &[PathBuf], opts: &HistoryOptions) -> Result<Histories, SessionError> {
    let walked = walk::walk(roots)?;
    let mut warnings = walked.warnings;
    let mut digests = Vec::new();
    for found in &walked.found {
        digest::read(found, &mut digests, &mut warnings);
    }
    let mut histories = build(digests, warnings, opts);
    let Histories {
        histories: list,
        warnings,
        ..
    } = &mut histories;
    for h in list.iter_mut() {
        h.moved = moved::moved(h, opts, warnings);
    }
    Ok(histories)
}

/// The histories of `digests`.
fn build(digests: Vec<Digest>, mut warnings: Vec<String>, opts: &HistoryOptions) -> Histories {
    let mut by_key: BTreeMap<HistoryKey, Vec<Digest>> = BTreeMap::new();
    for d in digests {
        let order = match &opts.order_by {
            Some(label) => match d.labels.get(label) {
                Some(v) => Some(v.clone()),
                None => {
                    warnings.push(format!(
                        "{}: no label {}; left out",
                        crate::escape::EscapedPath(&d.dir),
                        crate::escape::Escaped(label)
                    ));
                    None
                }
            },
            None => Some(d.order_value()),
        };
        if let Some(order) = order {
            let mut d = d;
            d.order = order;
            by_key.entry(d.key.clone()).or_default().push(d);
        }
    }
    let ordered_by = |digests: &[Digest]| match &opts.order_by {
        Some(label) => label.clone(),
        None if digests.iter().all(|d| d.git.is_some()) => "git committer date".into(),
        None if digests.iter().any(|d| d.git.is_some()) => {
            "git committer date, else started_at".into()
        }
        None => "started_at".into(),
    };
    let histories = by_key
        .into_iter()
        .map(|(key, digests)| {
            let ordered_by = ordered_by(&digests);
            history(key, ordered_by, digests, opts)
        })
        .collect();
    Histories {
        histories,
        warnings,
        method: method(opts),
    }
}

/// The line that states how histories are judged.
fn method(opts: &HistoryOptions) -> String {
    format!(
        "change points: E-divisive means on the log of each point's value, each split kept \
         when at most α = {} of {} shuffles ({} in segments under {} points) split as well \
         (at least {} points a side), an outlier point (over {} spreads from its neighbours) \
         set aside; sizes and intervals on the log ratio of the segments, points as runs, at \
         {} % confidence, threshold {} %",
        opts.changes.alpha,
        opts.changes.permutations,
        opts.changes.short_permutations,
        changes::SHORT_SEGMENT,
        opts.changes.min_segment,
        changes::OUTLIER_SPREADS,
        100.0 * (1.0 - opts.compare.alpha),
        100.0 * opts.compare.threshold
    )
}

/// Sorts order values: as numbers when every one is a number, else as text.
fn sort_orders(values: &mut [String]) {
    let numbers: Option<Vec<f64>> = values.iter().map(|v| v.trim().parse().ok()).collect();
    if numbers.is_some() {
        values.sort_by(|a, b| {
            let (x, y): (f64, f64) = (
                a.trim().parse().unwrap_or(f64::NAN),
                b.trim().parse().unwrap_or(f64::NAN),
            );
            x.total_cmp(&y)
        });
    } else {
        values.sort();
    }
}

/// A figure's unit, better direction, and runs at each point (their values and
/// within-run spreads).
type FigureRuns = (String, Option<Better>, Vec<(Vec<f64>, Vec<f64>)>);

/// One history from its recordings' digests.
fn history(
    key: HistoryKey,
    ordered_by: String,
    digests: Vec<Digest>,
    opts: &HistoryOptions,
) -> History {
    let mut orders: Vec<String> = digests.iter().map(|d| d.order.clone()).collect();
    orders.dedup();
    sort_orders(&mut orders);
    orders.dedup();
    let index: BTreeMap<&str, usize> = orders
        .iter()
        .enumerate()
        .map(|(i, o)| (o.as_str(), i))
        .collect();
    let mut points: Vec<Point> = orders
        .iter()
        .map(|o| Point {
            name: String::new(),
            order: o.clone(),
            commit: None,
            dirs: Vec::new(),
            labels: BTreeMap::new(),
        })
        .collect();
    // Each figure's runs at each point, with its unit and better direction.
    let mut runs: BTreeMap<String, FigureRuns> = BTreeMap::new();
    for d in digests {
        let Some(&i) = index.get(d.order.as_str()) else {
            continue;
        };
        let point = &mut points[i];
        if point.dirs.is_empty() {
            point.commit = d.git.as_ref().map(|g| g.commit.clone());
            point.labels = d.labels.clone();
        }
        point.dirs.push(d.dir.clone());
        for (name, v) in d.figures {
            let named = opts
                .figures
                .as_ref()
                .is_none_or(|names| names.contains(&name));
            if !named {
                continue;
            }
            let entry = runs
                .entry(name)
                .or_insert_with(|| (v.unit, v.better, vec![Default::default(); orders.len()]));
            entry.2[i].0.extend(v.values);
            entry.2[i].1.extend(v.spreads);
        }
    }
    for (i, p) in points.iter_mut().enumerate() {
        let tag = match (&opts.order_by, &p.commit) {
            (Some(_), _) => Some(p.order.clone()),
            (None, Some(commit)) => Some(commit.chars().take(12).collect()),
            (None, None) => p.labels.get("commit").cloned(),
        };
        p.name = match tag {
            Some(tag) => format!("point {i} ({})", crate::escape::escaped(&tag)),
            None => format!("point {i}"),
        };
    }
    let figures = runs
        .into_iter()
        .map(|(name, (unit, better, runs))| figure(name, unit, better, &runs, &points, opts))
        .collect();
    History {
        key,
        ordered_by,
        points,
        figures,
        moved: Vec::new(),
    }
}

/// The geometric mean of the positive, finite values of `runs` and their range.
fn pooled(runs: &[f64]) -> Option<(f64, f64, f64)> {
    let logs: Vec<f64> = runs
        .iter()
        .filter(|v| v.is_finite() && **v > 0.0)
        .map(|v| v.ln())
        .collect();
    if logs.is_empty() {
        return None;
    }
    let mean = logs.iter().sum::<f64>() / logs.len() as f64;
    let low = logs.iter().copied().fold(f64::INFINITY, f64::min);
    let high = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((mean.exp(), low.exp(), high.exp()))
}

/// One figure's history: its points, change points and the newest point's judgement.
fn figure(
    name: String,
    unit: String,
    better: Option<Better>,
    runs: &[(Vec<f64>, Vec<f64>)],
    points: &[Point],
    opts: &HistoryOptions,
) -> FigureHistory {
    let fpoints: Vec<FigurePoint> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, (r, spreads))| {
            let (value, low, high) = pooled(r)?;
            let within = (!spreads.is_empty()).then(|| {
                (spreads.iter().map(|s| s * s).sum::<f64>() / spreads.len() as f64).sqrt()
            });
            Some(FigurePoint {
                point: i,
                value,
                low,
                high,
                runs: r.clone(),
                within,
            })
        })
        .collect();
    let logs: Vec<f64> = fpoints.iter().map(|p| p.value.ln()).collect();
    let found = changes::change_points(&logs, &opts.changes);
    let values: Vec<f64> = fpoints.iter().map(|p| p.value).collect();
    let mut bounds = vec![0];
    bounds.extend(&found.changes);
    bounds.push(fpoints.len());
    let changes = found
        .changes
        .iter()
        .zip(&found.p_values)
        .enumerate()
        .map(|(k, (&at, &p_value))| ChangePoint {
            at,
            before: points[fpoints[at - 1].point].name.clone(),
            after: points[fpoints[at].point].name.clone(),
            change: judge_runs(
                &values[bounds[k]..at],
                &values[at..bounds[k + 2]],
                better,
                &opts.compare,
            ),
            p_value,
        })
        .collect();
    let newest = fpoints.split_last().and_then(|(last, rest)| {
        let since = found.changes.last().copied().unwrap_or(0).min(rest.len());
        let segment = &values[since..rest.len()];
        (segment.len() >= 2).then(|| {
            let newest: Vec<f64> = last
                .runs
                .iter()
                .copied()
                .filter(|v| v.is_finite() && *v > 0.0)
                .collect();
            judge_runs(segment, &newest, better, &opts.compare)
        })
    });
    FigureHistory {
        name,
        unit,
        better,
        points: fpoints,
        changes,
        outliers: found.outliers,
        newest,
    }
}

#[cfg(test)]
mod tests;
