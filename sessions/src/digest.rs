//! digest.json: a session reduced to what a history reads of it, each figure's run value
//! and the spread within the run, so that `history` over a thousand sessions reads a
//! small file from each rather than its rows and latency intervals.
//!
//! [`SessionWriter::finish`](crate::SessionWriter::finish) writes it beside session.json
//! when a run ends complete, from the files as they are on disk (atomically, through the
//! directory's descriptor, as every session file); [`Digested::load`] reads it back,
//! bounded as every session file is ([`FileKind::Digest`]: no link, FIFO or device, at
//! most 1 MiB). A digest is believed only when it was made from the files beside it: it
//! names session.json's CRC-32 and the sizes of timeseries.jsonl and latency.hlog. One
//! that is absent (a session recorded before digests, or cut off before its end), not a
//! regular file, too large, not JSON, of another version, or made from other files is
//! made again from the session's files, in memory: a reader never writes one.
//!
//! ```
//! use benchtop_sessions::digest::{DIGEST_FILE, Digested, Source};
//! use benchtop_sessions::synthetic::SyntheticSession;
//!
//! let root = tempfile::tempdir()?;
//! let mut session = SyntheticSession::default();
//! session.intervals = 5;
//! let dir = session.write(&root.path().join("s"))?;
//! let read = Digested::load(&dir)?;
//! assert_eq!(read.source, Source::File);
//! let laps = &read.digest.expect("complete").figures["laps/s"];
//! assert!((laps.value - 20_000.0).abs() < 200.0);
//!
//! std::fs::remove_file(dir.join(DIGEST_FILE))?;
//! let again = Digested::load(&dir)?;
//! assert_eq!(again.source, Source::Session { why: None });
//! assert_eq!(again.digest.expect("complete").figures["laps/s"].value, laps.value);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::compare::judge::{run_value, run_variance};
use crate::compare::samples::Samples;
use crate::limits::{FileKind, LoadOptions, read_bounded};
use crate::meta::Better;
use crate::store::{LATENCY_FILE, SESSION_FILE, TIMESERIES_FILE, checked_meta};
use crate::{Session, SessionError, SessionFiles, SessionMeta, Status};

/// The digest's file name, beside session.json.
pub const DIGEST_FILE: &str = "digest.json";
/// The version of digest.json this build writes and the only one it reads (another is
/// made again from the session).
pub const DIGEST_VERSION: u32 = 1;

/// One figure of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunFigure {
    /// The run's value: a per-interval figure's whole-run value (its intervals' weighted
    /// mean, a latency percentile of the whole run's histogram), else the figure's one
    /// value.
    pub value: f64,
    /// The spread within the run, on the log scale: the standard error of the run's
    /// value from its intervals' block means (as `compare` counts the noise within a
    /// run); `None` for a figure with one value per run, or fewer than two blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
    /// Its unit.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unit: String,
    /// Which direction is better, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub better: Option<Better>,
}

/// What a digest was made from: a digest is read only when these match the files beside
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Stamp {
    /// CRC-32 of session.json's bytes.
    pub session_json_crc32: u32,
    /// timeseries.jsonl's size, bytes; `None` without one.
    #[serde(default)]
    pub timeseries_bytes: Option<u64>,
    /// latency.hlog's size, bytes; `None` without one.
    #[serde(default)]
    pub latency_bytes: Option<u64>,
}

impl Stamp {
    /// The stamp of these files' bytes.
    fn of(session_json: &[u8], timeseries: Option<&[u8]>, latency: Option<&[u8]>) -> Stamp {
        let mut crc = flate2::Crc::new();
        crc.update(session_json);
        Stamp {
            session_json_crc32: crc.sum(),
            timeseries_bytes: timeseries.map(|b| b.len() as u64),
            latency_bytes: latency.map(|b| b.len() as u64),
        }
    }
}

/// digest.json: a run's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunDigest {
    /// [`DIGEST_VERSION`].
    pub digest_version: u32,
    /// The files it was made from.
    #[serde(flatten)]
    pub stamp: Stamp,
    /// Each figure with a finite value, by name.
    pub figures: BTreeMap<String, RunFigure>,
}

impl RunDigest {
    /// The digest of `session`, whose files have `stamp`: each figure `compare` judges
    /// across runs (a per-interval figure's whole-run value; a summary figure of the same
    /// name as a per-interval one is left to it; a seconds figure that restates the run's
    /// `--duration` is left out), with a finite value.
    pub fn of(session: &Session, stamp: Stamp) -> RunDigest {
        let samples = Samples::of(session);
        let mut figures = BTreeMap::new();
        for (name, run) in &samples.series {
            let value = samples
                .whole
                .get(name)
                .copied()
                .unwrap_or_else(|| run_value(run));
            let (unit, better) = samples.kinds.get(name).cloned().unwrap_or_default();
            let spread = run_variance(run).map(f64::sqrt).filter(|s| s.is_finite());
            figures.insert(
                name.clone(),
                RunFigure {
                    value,
                    spread,
                    unit,
                    better,
                },
            );
        }
        for (name, (value, unit, better)) in &samples.single {
            let bound = unit == "s" && samples.duration_s.is_some_and(|d| *value >= 0.95 * d);
            if !bound && !figures.contains_key(name) {
                figures.insert(
                    name.clone(),
                    RunFigure {
                        value: *value,
                        spread: None,
                        unit: unit.clone(),
                        better: *better,
                    },
                );
            }
        }
        figures.retain(|_, f| f.value.is_finite());
        RunDigest {
            digest_version: DIGEST_VERSION,
            stamp,
            figures,
        }
    }

    /// The digest as written: pretty JSON and a newline.
    pub fn to_json(&self) -> Vec<u8> {
        // A map of strings to numbers, strings and options: nothing that cannot be written.
        let mut json = serde_json::to_vec_pretty(self).unwrap_or_default();
        json.push(b'\n');
        json
    }

    /// The digest as it reads back from its file: numbers parsed from their JSON text
    /// may differ from the computed ones in the last bit, and a history must not depend
    /// on whether a session had its digest written.
    fn read_back(self) -> RunDigest {
        serde_json::from_slice(&self.to_json()).unwrap_or(self)
    }

    /// The digest in `bytes`, checked: this version, made from files of `stamp`, each
    /// spread finite and not negative. The error says what is wrong.
    fn parse(bytes: &[u8], stamp: Stamp) -> Result<RunDigest, String> {
        /// Only the version, every other field skipped.
        #[derive(Deserialize)]
        struct Version {
            #[serde(default)]
            digest_version: Option<serde_json::Value>,
        }
        let version: Version = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        match version.digest_version.as_ref().and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(DIGEST_VERSION) => {}
            Some(v) => return Err(format!("digest version {v}, not {DIGEST_VERSION}")),
            None => return Err("no numeric \"digest_version\"".into()),
        }
        let digest: RunDigest = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if digest.stamp != stamp {
            return Err(format!(
                "made from other files than those beside it ({SESSION_FILE}, \
                 {TIMESERIES_FILE} or {LATENCY_FILE} changed since)"
            ));
        }
        if let Some((name, _)) = digest
            .figures
            .iter()
            .find(|(_, f)| f.spread.is_some_and(|s| !(s.is_finite() && s >= 0.0)))
        {
            return Err(format!(
                "figure {}: a spread that is not a finite, non-negative number",
                crate::escape::Escaped(name)
            ));
        }
        Ok(digest)
    }
}

/// Where a [`Digested`]'s digest came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// digest.json.
    File,
    /// Made from the session's files, in memory; `why` says what was wrong with
    /// digest.json (`None`: there was none).
    Session {
        /// What was wrong with digest.json, with its path.
        why: Option<String>,
    },
}

/// A session as a history reads it: session.json and the run's digest.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Digested {
    /// session.json, checked as [`Session::load`] checks it (a status still `running`
    /// is [`Status::Crashed`]).
    pub meta: SessionMeta,
    /// The run's figures; `None` when it did not end complete (nothing of it is judged).
    pub digest: Option<RunDigest>,
    /// Where the digest came from.
    pub source: Source,
}

impl Digested {
    /// Reads the session in `dir`: its session.json and, when it ended complete, its
    /// digest.json, else (see the module docs) its timeseries.jsonl and latency.hlog,
    /// digested in memory. Every file is read within the limits of
    /// [`LoadOptions::from_env`]; the errors are [`Session::load`]'s.
    pub fn load(dir: &Path) -> Result<Digested, SessionError> {
        let opts = LoadOptions::from_env()?;
        let read =
            |name: &str, kind: FileKind| read_bounded(&dir.join(name), kind, opts.file_limit(kind));
        let Some(session_json) = read(SESSION_FILE, FileKind::SessionJson)? else {
            return Err(SessionError::NotASession { path: dir.into() });
        };
        let mut meta = checked_meta(&session_json, dir, &opts, &mut Vec::new())?;
        if meta.status == Status::Running {
            meta.status = Status::Crashed;
        }
        if meta.status != Status::Complete {
            return Ok(Digested {
                meta,
                digest: None,
                source: Source::Session { why: None },
            });
        }
        let why = match read(DIGEST_FILE, FileKind::Digest) {
            Ok(None) => None,
            Ok(Some(bytes)) => match RunDigest::parse(&bytes, stamp_beside(dir, &session_json)) {
                Ok(digest) => {
                    return Ok(Digested {
                        meta,
                        digest: Some(digest),
                        source: Source::File,
                    });
                }
                Err(why) => Some(format!(
                    "{}: {why}",
                    crate::escape::EscapedPath(&dir.join(DIGEST_FILE))
                )),
            },
            Err(e) => Some(e.to_string()),
        };
        let timeseries = read(TIMESERIES_FILE, FileKind::Timeseries)?;
        let latency = read(LATENCY_FILE, FileKind::Hlog)?;
        let stamp = Stamp::of(&session_json, timeseries.as_deref(), latency.as_deref());
        let files = SessionFiles {
            session_json,
            timeseries,
            latency,
            ..SessionFiles::default()
        };
        let session = Session::from_files_with(dir, files, &opts)?;
        Ok(Digested {
            meta,
            digest: Some(RunDigest::of(&session, stamp).read_back()),
            source: Source::Session { why },
        })
    }
}

/// The stamp of `dir`'s files as they are: session.json's bytes (read already) and the
/// sizes of the data files (a name that is not a regular file gets a size no digest
/// names, so the session is read, and refused, as [`Session::load`] refuses it).
fn stamp_beside(dir: &Path, session_json: &[u8]) -> Stamp {
    let size = |name: &str| match std::fs::symlink_metadata(dir.join(name)) {
        Ok(m) if m.file_type().is_file() => Some(m.len()),
        Ok(_) => Some(u64::MAX),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) => Some(u64::MAX),
    };
    let mut stamp = Stamp::of(session_json, None, None);
    stamp.timeseries_bytes = size(TIMESERIES_FILE);
    stamp.latency_bytes = size(LATENCY_FILE);
    stamp
}

/// Writes the digest of the session in `dir`, whose session.json is to be
/// `session_json`, from its data files as they are on disk, through `write` (the
/// writer's atomic write beside session.json).
pub(crate) fn write_for(
    dir: &Path,
    session_json: &[u8],
    write: impl FnOnce(&[u8]) -> Result<(), SessionError>,
) -> Result<(), SessionError> {
    let opts = LoadOptions::from_env()?;
    let read =
        |name: &str, kind: FileKind| read_bounded(&dir.join(name), kind, opts.file_limit(kind));
    let timeseries = read(TIMESERIES_FILE, FileKind::Timeseries)?;
    let latency = read(LATENCY_FILE, FileKind::Hlog)?;
    let stamp = Stamp::of(session_json, timeseries.as_deref(), latency.as_deref());
    let files = SessionFiles {
        session_json: session_json.to_vec(),
        timeseries,
        latency,
        ..SessionFiles::default()
    };
    let session = Session::from_files_with(dir, files, &opts)?;
    write(&RunDigest::of(&session, stamp).to_json())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::SyntheticSession;

    fn written() -> (tempfile::TempDir, std::path::PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let session = SyntheticSession {
            intervals: 12,
            values_per_interval: 100,
            ..SyntheticSession::default()
        };
        let dir = session.write(&root.path().join("s")).unwrap();
        (root, dir)
    }

    #[test]
    fn the_written_digest_holds_what_the_session_gives_with_spreads_per_interval_figures() {
        let (_root, dir) = written();
        let from_file = Digested::load(&dir).unwrap();
        assert_eq!(from_file.source, Source::File);
        let session = Session::load(&dir).unwrap();
        let files = std::fs::read(dir.join(SESSION_FILE)).unwrap();
        let stamp = stamp_beside(&dir, &files);
        let made = RunDigest::of(&session, stamp).read_back();
        assert_eq!(from_file.digest.as_ref(), Some(&made));
        let laps = &made.figures["laps/s"];
        let spread = laps.spread.unwrap();
        // The rates wobble by up to 1 % around the level: a small, positive spread.
        assert!(spread > 0.0 && spread < 0.01, "{spread}");
        assert_eq!(made.figures["peak RSS"].spread, None);
        assert!(made.figures.contains_key("lap p99"));
    }

    #[test]
    fn a_changed_session_json_or_data_file_makes_the_digest_unread() {
        let (_root, dir) = written();
        let path = dir.join(SESSION_FILE);
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        json["labels"] = serde_json::json!({"commit": "abc"});
        std::fs::write(&path, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
        let read = Digested::load(&dir).unwrap();
        let Source::Session { why: Some(why) } = &read.source else {
            panic!("{:?}", read.source);
        };
        assert!(why.contains("changed since"), "{why}");
        assert!(read.digest.unwrap().figures.contains_key("laps/s"));
        assert_eq!(read.meta.labels["commit"], "abc");
    }

    #[test]
    fn a_digest_of_another_version_or_a_bad_spread_is_refused_saying_why() {
        let stamp = Stamp::of(b"{}", None, None);
        let mut digest = RunDigest {
            digest_version: DIGEST_VERSION,
            stamp,
            figures: BTreeMap::new(),
        };
        assert!(RunDigest::parse(&digest.to_json(), stamp).is_ok());
        digest.digest_version = 9;
        let why = RunDigest::parse(&digest.to_json(), stamp).unwrap_err();
        assert!(why.contains("version 9"), "{why}");
        let bad = br#"{"digest_version":1,"session_json_crc32":0,"figures":{}}"#;
        let why = RunDigest::parse(bad, Stamp::of(b"x", None, None)).unwrap_err();
        assert!(why.contains("other files"), "{why}");
        let json = format!(
            r#"{{"digest_version":1,"session_json_crc32":{},"figures":{{"x":{{"value":1,"spread":-1}}}}}}"#,
            stamp.session_json_crc32
        );
        let why = RunDigest::parse(json.as_bytes(), stamp).unwrap_err();
        assert!(why.contains("spread"), "{why}");
        assert!(RunDigest::parse(b"[1,2", stamp).is_err());
    }

    #[test]
    fn an_unfinished_session_is_read_without_a_digest() {
        let root = tempfile::tempdir().unwrap();
        let meta = SessionMeta::new(
            "s",
            crate::meta::WorkloadInfo::new("ring", BTreeMap::new()),
            crate::meta::HostInfo::default(),
            "2026-11-24T12:00:00Z",
        );
        let writer = crate::SessionWriter::create(&root.path().join("s"), meta).unwrap();
        let read = Digested::load(writer.dir()).unwrap();
        assert_eq!(read.meta.status, Status::Crashed);
        assert!(read.digest.is_none());
        assert!(!writer.dir().join(DIGEST_FILE).exists());
    }
}
