//! A recording reduced to what a history reads: its key, its order values and each
//! figure's run values, from each session's digest ([`crate::digest`]; a session without
//! a whole one is digested in memory and dropped).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::HistoryKey;
use super::walk::Found;
use crate::digest::{Digested, RunDigest, Source};
use crate::escape::{EscapedPath, escaped};
use crate::meta::{Better, GitInfo};
use crate::series::{RunRole, SeriesMeta};
use crate::{SessionError, SessionMeta};

/// A figure's runs: their values and within-run spreads (where a run has one), its unit
/// and better direction.
#[derive(Debug, Clone, Default)]
pub(crate) struct Values {
    pub(crate) values: Vec<f64>,
    pub(crate) spreads: Vec<f64>,
    pub(crate) unit: String,
    pub(crate) better: Option<Better>,
}

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
pub(crate) fn key_of(m: &SessionMeta) -> HistoryKey {
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

/// Adds `runs` (the sessions of one recording) to `out`, one digest per key, with the
/// recording's `dir`, labels, commit and start.
fn push_runs<'a>(
    dir: &Path,
    runs: impl Iterator<Item = (&'a SessionMeta, &'a RunDigest)>,
    labels: &BTreeMap<String, String>,
    git: Option<&GitInfo>,
    started_at: &str,
    out: &mut Vec<Digest>,
) {
    let mut by_key: BTreeMap<HistoryKey, Digest> = BTreeMap::new();
    for (meta, run) in runs {
        let key = key_of(meta);
        let digest = by_key.entry(key.clone()).or_insert_with(|| Digest {
            dir: dir.to_path_buf(),
            key,
            labels: labels.clone(),
            git: git.cloned(),
            started_at: started_at.to_owned(),
            order: String::new(),
            figures: BTreeMap::new(),
        });
        for (name, f) in &run.figures {
            let values = digest
                .figures
                .entry(name.clone())
                .or_insert_with(|| Values {
                    unit: f.unit.clone(),
                    better: f.better,
                    ..Values::default()
                });
            values.values.push(f.value);
            values.spreads.extend(f.spread);
        }
    }
    out.extend(by_key.into_values());
}

/// Reads one session's digest; a digest.json that was there but could not be read goes
/// to `warnings`.
fn digested(dir: &Path, warnings: &mut Vec<String>) -> Result<Digested, SessionError> {
    let read = Digested::load(dir)?;
    if let Source::Session { why: Some(why) } = &read.source {
        warnings.push(format!("{why}; the session was read instead"));
    }
    Ok(read)
}

/// Reads `found` into `out`; what cannot be read, or did not end complete, goes to
/// `warnings`.
pub(crate) fn read(found: &Found, out: &mut Vec<Digest>, warnings: &mut Vec<String>) {
    match found {
        Found::Session(dir) => match digested(dir, warnings) {
            Ok(Digested {
                meta,
                digest: Some(digest),
                ..
            }) => push_runs(
                dir,
                std::iter::once((&meta, &digest)),
                &meta.labels,
                meta.git.as_ref(),
                &meta.started_at,
                out,
            ),
            Ok(d) => warnings.push(format!(
                "{}: ended {}; left out",
                EscapedPath(dir),
                d.meta.status
            )),
            Err(e) => warnings.push(format!("left out: {e}")),
        },
        Found::Series(dir) => match SeriesMeta::load(dir) {
            Ok(series) => read_series(dir, &series, out, warnings),
            Err(e) => warnings.push(format!("left out: {e}")),
        },
    }
}

/// Reads the measured runs of the series in `dir` (warm-ups are never read) into `out`
/// as one digest per key.
fn read_series(dir: &Path, series: &SeriesMeta, out: &mut Vec<Digest>, warnings: &mut Vec<String>) {
    let mut runs = Vec::new();
    for run in series.runs.iter().filter(|r| r.role == RunRole::Run) {
        let name = escaped(&run.dir);
        match digested(&dir.join(&run.dir), warnings) {
            Ok(Digested {
                meta,
                digest: Some(digest),
                ..
            }) => runs.push((meta, digest)),
            Ok(d) => warnings.push(format!(
                "{}: {name}: ended {}, left out of the judgement",
                EscapedPath(dir),
                d.meta.status
            )),
            Err(e) => warnings.push(format!("{}: {name}: left out: {e}", EscapedPath(dir))),
        }
    }
    if runs.is_empty() {
        warnings.push(format!("{}: no measured run; left out", EscapedPath(dir)));
    }
    push_runs(
        dir,
        runs.iter().map(|(m, d)| (m, d)),
        &series.labels,
        series.git.as_ref(),
        &series.started_at,
        out,
    );
}
