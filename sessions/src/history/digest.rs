//! A recording reduced to what a history reads: its key, its order values and each
//! figure's run values. The session is dropped as soon as it is digested.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::HistoryKey;
use super::walk::Found;
use crate::compare::judge::run_value;
use crate::compare::samples::Samples;
use crate::escape::EscapedPath;
use crate::meta::{Better, GitInfo};
use crate::series::Series;
use crate::{Session, Status};

/// A figure's run values, unit and better direction.
pub(crate) type Values = (Vec<f64>, String, Option<Better>);

/// One point's worth of a recording: a session, or a series' runs of one key.
#[derive(Debug, Clone)]
pub(crate) struct Digest {
    pub(crate) dir: PathBuf,
    pub(crate) key: HistoryKey,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) git: Option<GitInfo>,
    pub(crate) started_at: String,
    /// The value it is ordered by (set when the histories are built).
    pub(crate) order: String,
    pub(crate) figures: BTreeMap<String, Values>,
}

impl Digest {
    /// The order value without a label: the git committer date, else the start time.
    pub(crate) fn order_value(&self) -> String {
        match &self.git {
            Some(git) => format!("{} {}", git.committed_at, git.commit),
            None => self.started_at.clone(),
        }
    }
}

/// The key of a session.
pub(crate) fn key_of(s: &Session) -> HistoryKey {
    let m = &s.meta;
    let params: Vec<String> = m
        .workload
        .params
        .iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(text) => format!("{k}={text}"),
            other => format!("{k}={other}"),
        })
        .collect();
    let sampling = &m.sampling;
    let profile = if sampling.profile.is_empty() {
        "no stacks"
    } else {
        sampling.profile.as_str()
    };
    HistoryKey {
        workload: m.workload.name.clone(),
        params: params.join(" "),
        host: m.host.hostname.clone(),
        sampling: format!(
            "{} at {} Hz, {profile}",
            sampling.event, sampling.frequency_hz
        ),
    }
}

/// Each figure's value for one run: a per-interval figure's whole-run value, and the
/// figures with one value per run (a summary figure of the same name as a per-interval
/// one is left to it; a seconds figure that restates the run's `--duration` is left out).
fn figures_of(s: &Session) -> BTreeMap<String, (f64, String, Option<Better>)> {
    let samples = Samples::of(s);
    let mut out = BTreeMap::new();
    for (name, run) in &samples.series {
        let value = samples
            .whole
            .get(name)
            .copied()
            .unwrap_or_else(|| run_value(run));
        let (unit, better) = samples.kinds.get(name).cloned().unwrap_or_default();
        out.insert(name.clone(), (value, unit, better));
    }
    for (name, (value, unit, better)) in &samples.single {
        let bound = unit == "s" && samples.duration_s.is_some_and(|d| *value >= 0.95 * d);
        if !bound && !out.contains_key(name) {
            out.insert(name.clone(), (*value, unit.clone(), *better));
        }
    }
    out
}

/// Adds `runs` (the sessions of one recording) to `out`, one digest per key, with the
/// recording's `dir`, labels, commit and start.
fn push_runs<'a>(
    dir: &std::path::Path,
    runs: impl Iterator<Item = &'a Session>,
    labels: &BTreeMap<String, String>,
    git: Option<&GitInfo>,
    started_at: &str,
    out: &mut Vec<Digest>,
) {
    let mut by_key: BTreeMap<HistoryKey, Digest> = BTreeMap::new();
    for run in runs {
        let key = key_of(run);
        let digest = by_key.entry(key.clone()).or_insert_with(|| Digest {
            dir: dir.to_path_buf(),
            key,
            labels: labels.clone(),
            git: git.cloned(),
            started_at: started_at.to_owned(),
            order: String::new(),
            figures: BTreeMap::new(),
        });
        for (name, (value, unit, better)) in figures_of(run) {
            digest
                .figures
                .entry(name)
                .or_insert_with(|| (Vec::new(), unit, better))
                .0
                .push(value);
        }
    }
    out.extend(by_key.into_values());
}

/// Reads `found` into `out`; what cannot be read, or did not end complete, goes to
/// `warnings`.
pub(crate) fn read(found: &Found, out: &mut Vec<Digest>, warnings: &mut Vec<String>) {
    match found {
        Found::Session(dir) => match Session::load(dir) {
            Ok(s) if s.meta.status != Status::Complete => warnings.push(format!(
                "{}: ended {}; left out",
                EscapedPath(dir),
                s.meta.status
            )),
            Ok(s) => {
                let m = &s.meta;
                push_runs(
                    dir,
                    std::iter::once(&s),
                    &m.labels,
                    m.git.as_ref(),
                    &m.started_at,
                    out,
                );
            }
            Err(e) => warnings.push(format!("left out: {e}")),
        },
        Found::Series(dir) => match Series::load(dir) {
            Ok(series) => {
                warnings.extend(
                    series
                        .warnings
                        .iter()
                        .map(|w| format!("{}: {w}", EscapedPath(dir))),
                );
                let measured = series.measured();
                if measured.is_empty() {
                    warnings.push(format!("{}: no measured run; left out", EscapedPath(dir)));
                }
                let m = &series.meta;
                push_runs(
                    dir,
                    measured.into_iter(),
                    &m.labels,
                    m.git.as_ref(),
                    &m.started_at,
                    out,
                );
            }
            Err(e) => warnings.push(format!("left out: {e}")),
        },
    }
}
