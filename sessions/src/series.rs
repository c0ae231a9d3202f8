//! A series: one directory of sessions recorded as one experiment — repeated runs of the
//! same thing, warm-up runs kept but marked, the points of a sweep — and `series.json`
//! naming them in the order they ran. docs/session-format.md specifies it.
//!
//! Loading a series loads every session it names; a run that is missing, unreadable or
//! did not end well is said in [`Series::warnings`] and left out of [`Series::measured`],
//! so an experiment with one bad run is still judged from the rest.
//!
//! ```
//! use std::collections::BTreeMap;
//!
//! use benchtop_sessions::series::{RunRole, Series, SeriesMeta, SeriesWriter};
//!
//! let root = tempfile::tempdir()?;
//! let meta = SeriesMeta::new("ring", "2026-11-24T12:00:00Z");
//! let mut series = SeriesWriter::create(&root.path().join("ab"), meta)?;
//! let dir = series.next_run_dir(RunRole::Warmup, BTreeMap::new())?;
//! assert!(dir.ends_with("warmup-1"));
//! // … record a session into `dir`, then:
//! let loaded = Series::load(series.dir())?;
//! assert_eq!(loaded.meta.runs.len(), 1);
//! assert!(loaded.measured().is_empty(), "a warm-up, and not recorded: {:?}", loaded.warnings);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::escape::escaped;
use crate::store::{SESSION_FILE, read_optional, write_atomically};
use crate::{Session, SessionError, Status};

/// The file that makes a directory a series.
pub const SERIES_FILE: &str = "series.json";
/// Version of series.json this build writes and the newest it reads.
pub const SERIES_VERSION: u32 = 1;
/// Runs a series may name; more is refused as corrupt (a series.json is small).
pub const MAX_RUNS: usize = 100_000;
/// Swept parameters a series may name.
pub const MAX_SWEPT: usize = 64;

/// What a run of a series is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunRole {
    /// Recorded to warm the machine up; kept, never judged.
    Warmup,
    /// A measured run.
    Run,
}

/// One run of a series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SeriesRun {
    /// Its session directory, one plain name inside the series directory.
    pub dir: String,
    /// Warm-up or measured.
    pub role: RunRole,
    /// The parameters that make its point of a sweep (empty outside sweeps).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub point: BTreeMap<String, serde_json::Value>,
}

/// series.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SeriesMeta {
    /// [`SERIES_VERSION`].
    pub series_version: u32,
    /// What the runs ran (a workload's name, or the command).
    pub workload: String,
    /// When the series began (RFC 3339).
    pub started_at: String,
    /// The swept parameters in the order they were given (the first varies slowest):
    /// curves.svg draws the first along its x axis and a line per value of the others.
    /// Empty outside sweeps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<String>,
    /// Its runs, in the order they ran.
    pub runs: Vec<SeriesRun>,
    /// The user's labels (`--label key=value`), by key; empty when none were given.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The git commit checked out where the series was started; absent outside a
    /// checkout, without git, and in series recorded before it was picked up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<crate::meta::GitInfo>,
}

impl SeriesMeta {
    /// A series of `workload` begun at `started_at`, with no runs yet.
    pub fn new(workload: impl Into<String>, started_at: impl Into<String>) -> Self {
        SeriesMeta {
            series_version: SERIES_VERSION,
            workload: workload.into(),
            started_at: started_at.into(),
            sweep: Vec::new(),
            runs: Vec::new(),
            labels: BTreeMap::new(),
            git: None,
        }
    }

    /// The same, sweeping `params` in this order.
    pub fn with_sweep(mut self, params: Vec<String>) -> Self {
        self.sweep = params;
        self
    }

    /// The series.json of the series in `dir`, checked as [`Series::load`] checks it,
    /// without loading its runs.
    pub fn load(dir: &Path) -> Result<SeriesMeta, SessionError> {
        let path = dir.join(SERIES_FILE);
        let Some(bytes) = read_optional(&path)? else {
            return Err(SessionError::NotASession { path: dir.into() });
        };
        parse_series(&bytes, &path)
    }
}

/// Records a series directory: names each run's session directory before it is recorded,
/// and keeps series.json current (replaced atomically), so a series cut off at any moment
/// names every run that began.
#[derive(Debug)]
pub struct SeriesWriter {
    dir: PathBuf,
    meta: SeriesMeta,
}

impl SeriesWriter {
    /// Creates the series directory `dir` (a new one, or an empty one) and its series.json.
    pub fn create(dir: &Path, meta: SeriesMeta) -> Result<Self, SessionError> {
        match fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let empty = fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir())
                    && fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none());
                if !empty {
                    return Err(SessionError::AlreadyExists { path: dir.into() });
                }
            }
            Err(e) => return Err(SessionError::io(dir, e)),
        }
        let writer = SeriesWriter {
            dir: dir.into(),
            meta,
        };
        writer.write()?;
        Ok(writer)
    }

    /// The series directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// series.json as last written.
    pub fn meta(&self) -> &SeriesMeta {
        &self.meta
    }

    /// Names the next run (`run-1`, `run-2`, … or `warmup-1`, …) in series.json and
    /// returns the session directory to record it into (not created: the session's
    /// writer creates it).
    pub fn next_run_dir(
        &mut self,
        role: RunRole,
        point: BTreeMap<String, serde_json::Value>,
    ) -> Result<PathBuf, SessionError> {
        let prefix = match role {
            RunRole::Warmup => "warmup",
            RunRole::Run => "run",
        };
        let n = self.meta.runs.iter().filter(|r| r.role == role).count() + 1;
        let name = format!("{prefix}-{n}");
        self.meta.runs.push(SeriesRun {
            dir: name.clone(),
            role,
            point,
        });
        self.write()?;
        Ok(self.dir.join(name))
    }

    fn write(&self) -> Result<(), SessionError> {
        let path = self.dir.join(SERIES_FILE);
        let mut json =
            serde_json::to_vec_pretty(&self.meta).map_err(|e| SessionError::io(&path, e.into()))?;
        json.push(b'\n');
        write_atomically(&path, &json)
    }
}

/// A series, loaded: its runs' sessions and what was wrong with any of them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Series {
    /// The series directory.
    pub dir: PathBuf,
    /// series.json.
    pub meta: SeriesMeta,
    /// The sessions that loaded, with the run each belongs to (an index into
    /// `meta.runs`).
    pub sessions: Vec<(usize, Session)>,
    /// Runs left out, and why: missing, unreadable, crashed or stopped.
    pub warnings: Vec<String>,
}

impl Series {
    /// Loads the series in `dir` and every session it names.
    ///
    /// A directory without series.json is [`SessionError::NotASession`]; a series.json
    /// that does not parse, names a run outside the directory or too many runs is
    /// [`SessionError::Corrupt`]. A run that cannot be loaded is a warning, not an error.
    pub fn load(dir: &Path) -> Result<Series, SessionError> {
        let meta = SeriesMeta::load(dir)?;
        let mut sessions = Vec::new();
        let mut warnings = Vec::new();
        for (i, run) in meta.runs.iter().enumerate() {
            let run_dir = dir.join(&run.dir);
            match Session::load(&run_dir) {
                Ok(session) => {
                    if !matches!(session.meta.status, Status::Complete) {
                        warnings.push(format!(
                            "{}: ended {}, left out of the judgement",
                            escaped(&run.dir),
                            session.meta.status
                        ));
                    }
                    sessions.push((i, session));
                }
                Err(e) => warnings.push(format!("{}: left out: {e}", escaped(&run.dir))),
            }
        }
        Ok(Series {
            dir: dir.into(),
            meta,
            sessions,
            warnings,
        })
    }

    /// The measured runs that completed, in the order they ran: what a comparison judges.
    pub fn measured(&self) -> Vec<&Session> {
        self.sessions
            .iter()
            .filter(|(i, s)| {
                self.meta.runs[*i].role == RunRole::Run && s.meta.status == Status::Complete
            })
            .map(|(_, s)| s)
            .collect()
    }
}

/// A directory benchtop reads: one session, or a series of them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Recorded {
    /// A session directory.
    Session(Box<Session>),
    /// A series directory.
    Series(Box<Series>),
}

impl Recorded {
    /// Loads `dir` as a series when it holds series.json, else as a session.
    pub fn load(dir: &Path) -> Result<Recorded, SessionError> {
        Recorded::load_with(dir, &crate::limits::LoadOptions::from_env()?)
    }

    /// [`Recorded::load`], a session within the limits of `opts` (a series' runs each
    /// within the defaults).
    pub fn load_with(
        dir: &Path,
        opts: &crate::limits::LoadOptions,
    ) -> Result<Recorded, SessionError> {
        if read_optional(&dir.join(SERIES_FILE))?.is_some()
            && read_optional(&dir.join(SESSION_FILE))?.is_none()
        {
            return Series::load(dir).map(|s| Recorded::Series(Box::new(s)));
        }
        Session::load_with(dir, opts).map(|s| Recorded::Session(Box::new(s)))
    }

    /// Loads `dir` as [`Recorded::load`] does, with what a first session, loaded before
    /// it by the same command (`compare A B`, `open A B`) and holding `held`
    /// ([`Recorded::held`]), left of the budgets a command's sessions share
    /// ([`crate::limits::MAX_INTERVAL_BYTES`], [`crate::limits::MAX_ROW_BYTES`]): the two
    /// hold at most each budget between them.
    pub fn load_after(dir: &Path, held: crate::limits::Held) -> Result<Recorded, SessionError> {
        let opts = crate::limits::LoadOptions::from_env()?.after(held);
        Recorded::load_with(dir, &opts)
    }

    /// What its sessions hold of the shared budgets ([`Session::held`]).
    pub fn held(&self) -> crate::limits::Held {
        self.runs()
            .iter()
            .map(|s| s.held())
            .fold(crate::limits::Held::default(), |a, b| a + b)
    }

    /// The sessions to judge: the session, or the series' measured runs.
    pub fn runs(&self) -> Vec<&Session> {
        match self {
            Recorded::Session(s) => vec![s],
            Recorded::Series(series) => series.measured(),
        }
    }

    /// What loading found wrong but could read past.
    pub fn warnings(&self) -> Vec<String> {
        match self {
            Recorded::Session(s) => s.warnings.clone(),
            Recorded::Series(series) => series.warnings.clone(),
        }
    }
}

/// series.json, checked: its version, its runs' names (plain names inside the directory,
/// no two alike) and their number.
fn parse_series(bytes: &[u8], path: &Path) -> Result<SeriesMeta, SessionError> {
    let corrupt = |reason: String| SessionError::Corrupt {
        path: path.into(),
        reason,
    };
    let meta: SeriesMeta =
        serde_json::from_slice(bytes).map_err(|e| corrupt(format!("line {}: {e}", e.line())))?;
    if meta.series_version == 0 || meta.series_version > SERIES_VERSION {
        return Err(corrupt(format!(
            "series_version {}; this benchtop reads 1 to {SERIES_VERSION}",
            meta.series_version
        )));
    }
    if meta.runs.len() > MAX_RUNS {
        return Err(corrupt(format!(
            "{} runs; at most {MAX_RUNS} are read",
            meta.runs.len()
        )));
    }
    if meta.sweep.len() > MAX_SWEPT {
        return Err(corrupt(format!(
            "{} swept parameters; at most {MAX_SWEPT} are read",
            meta.sweep.len()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for run in &meta.runs {
        let plain = matches!(
            Path::new(&run.dir).components().collect::<Vec<_>>()[..],
            [std::path::Component::Normal(name)] if name == run.dir.as_str()
        );
        if !plain {
            return Err(corrupt(format!(
                "run {:?} is not a plain name inside the series directory",
                escaped(&run.dir)
            )));
        }
        if !seen.insert(&run.dir) {
            return Err(corrupt(format!(
                "run {:?} is named twice",
                escaped(&run.dir)
            )));
        }
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::{HostInfo, WorkloadInfo};
    use crate::{SessionMeta, SessionWriter};

    fn record(dir: &Path, status: Status) {
        let meta = SessionMeta::new(
            "run",
            WorkloadInfo::new("ring", BTreeMap::new()),
            HostInfo::default(),
            "2026-11-24T12:00:00Z",
        );
        let w = SessionWriter::create(dir, meta).unwrap();
        w.finish(status, "2026-11-24T12:00:01Z".into()).unwrap();
    }

    #[test]
    fn runs_and_warmups_are_named_in_order_and_only_complete_runs_are_measured() {
        let root = tempfile::tempdir().unwrap();
        let mut w =
            SeriesWriter::create(&root.path().join("s"), SeriesMeta::new("ring", "t")).unwrap();
        let warm = w.next_run_dir(RunRole::Warmup, BTreeMap::new()).unwrap();
        record(&warm, Status::Complete);
        for status in [Status::Complete, Status::Crashed, Status::Complete] {
            let dir = w.next_run_dir(RunRole::Run, BTreeMap::new()).unwrap();
            record(&dir, status);
        }
        // A fifth run named but never recorded (the series was cut off).
        w.next_run_dir(RunRole::Run, BTreeMap::new()).unwrap();
        let names: Vec<&str> = w.meta().runs.iter().map(|r| r.dir.as_str()).collect();
        assert_eq!(names, ["warmup-1", "run-1", "run-2", "run-3", "run-4"]);

        let series = Series::load(w.dir()).unwrap();
        assert_eq!(series.sessions.len(), 4);
        let measured: Vec<&Path> = series.measured().iter().map(|s| s.dir.as_path()).collect();
        assert_eq!(measured, [w.dir().join("run-1"), w.dir().join("run-3")]);
        assert_eq!(series.warnings.len(), 2, "{:?}", series.warnings);
        assert!(
            series.warnings[0].contains("run-2: ended crashed"),
            "{:?}",
            series.warnings
        );
        assert!(
            series.warnings[1].contains("run-4: left out"),
            "{:?}",
            series.warnings
        );

        match Recorded::load(w.dir()).unwrap() {
            Recorded::Series(s) => assert_eq!(s.measured().len(), 2),
            Recorded::Session(_) => panic!("a series loads as a series"),
        }
        match Recorded::load(&w.dir().join("run-1")).unwrap() {
            Recorded::Session(s) => assert_eq!(s.meta.status, Status::Complete),
            Recorded::Series(_) => panic!("a session loads as a session"),
        }
    }

    #[test]
    fn a_series_naming_a_run_outside_its_directory_is_corrupt() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("s");
        fs::create_dir(&dir).unwrap();
        for bad in ["../elsewhere", "/etc", "a/b", "."] {
            let json = format!(
                r#"{{"series_version":1,"workload":"ring","started_at":"t","runs":[{{"dir":"{bad}","role":"run"}}]}}"#
            );
            fs::write(dir.join(SERIES_FILE), json).unwrap();
            let err = Series::load(&dir).unwrap_err().to_string();
            assert!(err.contains("not a plain name"), "{bad}: {err}");
        }
        fs::write(
            dir.join(SERIES_FILE),
            r#"{"series_version":1,"workload":"ring","started_at":"t","runs":[{"dir":"r","role":"run"},{"dir":"r","role":"run"}]}"#,
        )
        .unwrap();
        assert!(
            Series::load(&dir)
                .unwrap_err()
                .to_string()
                .contains("named twice")
        );
        fs::write(
            dir.join(SERIES_FILE),
            r#"{"series_version":9,"workload":"x","started_at":"t","runs":[]}"#,
        )
        .unwrap();
        assert!(
            Series::load(&dir)
                .unwrap_err()
                .to_string()
                .contains("series_version 9")
        );
        fs::write(dir.join(SERIES_FILE), "{").unwrap();
        assert!(matches!(
            Series::load(&dir),
            Err(SessionError::Corrupt { .. })
        ));
    }

    #[test]
    fn the_sweeps_order_is_kept_and_too_many_swept_parameters_are_corrupt() {
        let root = tempfile::tempdir().unwrap();
        let meta = SeriesMeta::new("messenger", "t")
            .with_sweep(vec!["cpu-alloc".into(), "clients".into()]);
        let w = SeriesWriter::create(&root.path().join("s"), meta).unwrap();
        let series = Series::load(w.dir()).unwrap();
        assert_eq!(series.meta.sweep, ["cpu-alloc", "clients"]);
        // Written before the field existed: no sweep.
        let dir = root.path().join("old");
        fs::create_dir(&dir).unwrap();
        fs::write(
            dir.join(SERIES_FILE),
            r#"{"series_version":1,"workload":"ring","started_at":"t","runs":[]}"#,
        )
        .unwrap();
        assert!(Series::load(&dir).unwrap().meta.sweep.is_empty());
        let many: Vec<String> = (0..=MAX_SWEPT).map(|i| format!("\"p{i}\"")).collect();
        fs::write(
            dir.join(SERIES_FILE),
            format!(
                r#"{{"series_version":1,"workload":"ring","started_at":"t","sweep":[{}],"runs":[]}}"#,
                many.join(",")
            ),
        )
        .unwrap();
        let err = Series::load(&dir).unwrap_err().to_string();
        assert!(err.contains("swept parameters"), "{err}");
    }

    #[test]
    fn a_series_is_not_created_in_a_directory_that_holds_something() {
        let root = tempfile::tempdir().unwrap();
        fs::write(root.path().join("x"), "x").unwrap();
        let err = SeriesWriter::create(root.path(), SeriesMeta::new("ring", "t")).unwrap_err();
        assert!(matches!(err, SessionError::AlreadyExists { .. }), "{err}");
    }
}
