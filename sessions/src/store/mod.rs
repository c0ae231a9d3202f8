//! The session directory: written incrementally while a run goes on, loaded and checked
//! afterwards. docs/session-format.md is the specification.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;

use crate::dir::DirHandle;
use crate::hlog::{self, HlogInterval, HlogWriter};
use crate::intervals::{STACKS_FILE, StacksChunk};
use crate::limits::{FileKind, LoadOptions, read_bounded};
use crate::meta::Failure;
pub use crate::rows::{AllocTotals, RowSummary};
use crate::rows::{parse_rows, rows_held_bytes};
use crate::sparse::SparseHistogram;
use crate::threads_csv::{parse_threads_csv, threads_to_csv};
use crate::{
    ByKind, Kind, SCHEMA_VERSION, SessionError, SessionMeta, StackTree, Status, ThreadSummary,
    TimeseriesRow, flame,
};

/// The session metadata file.
pub const SESSION_FILE: &str = "session.json";
/// Disk held while a session is recorded, for its last session.json
/// ([`SessionWriter::fail`]); removed when the recording ends.
pub const RESERVE_FILE: &str = "session.json.reserve";
/// The size of [`RESERVE_FILE`]: many times a session.json.
pub const RESERVE_BYTES: usize = 256 << 10;
/// One JSON row per interval.
pub const TIMESERIES_FILE: &str = "timeseries.jsonl";
/// HdrHistogram interval log of the latencies.
pub const LATENCY_FILE: &str = "latency.hlog";
/// What the workload printed.
pub const WORKER_LOG_FILE: &str = "worker.log";
/// Every thread the monitors saw, one CSV line each.
pub const THREADS_FILE: &str = "threads.csv";
/// The latency percentile plot ([`crate::plot`]).
pub const LATENCY_PLOT_FILE: &str = "latency.svg";
/// The phases' figures, one chart each ([`crate::plot::phases_svg`]).
pub const PHASE_PLOT_FILE: &str = "phases.svg";
/// The stacks as a pprof profile ([`crate::pprof`]).
pub const PPROF_FILE: &str = "profile.pb.gz";

/// How many names [`SessionWriter::create_unique`] tries: `id`, then `id-2` to `id-100`.
pub const MAX_UNIQUE_ATTEMPTS: u32 = 100;

mod reserve;
mod writer;

pub use reserve::remove_left_behind;
pub use writer::SessionWriter;

/// Replaces `path` with `bytes` atomically, through its directory's descriptor
/// ([`DirHandle::write_atomically`]): the directory must be ours and not a link, and the
/// temporary file is created with `O_EXCL | O_NOFOLLOW`, so nothing is written through a
/// link planted beside `path`.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
    else {
        return Err(SessionError::io(path, io::ErrorKind::InvalidInput.into()));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    DirHandle::create_or_open(parent)?.write_atomically(name, bytes)
}

/// The content of a small file that may be absent, read as session files are
/// ([`read_bounded`]: no link, FIFO or device, at most the session.json limit).
pub(crate) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, SessionError> {
    let opts = LoadOptions::from_env()?;
    Ok(read_bounded(
        path,
        FileKind::SessionJson,
        opts.file_limit(FileKind::SessionJson),
    )?)
}

/// The bytes of the files a session is loaded from; `None` for an optional file that is
/// absent.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SessionFiles {
    /// session.json.
    pub session_json: Vec<u8>,
    /// timeseries.jsonl.
    pub timeseries: Option<Vec<u8>>,
    /// latency.hlog.
    pub latency: Option<Vec<u8>>,
    /// Each kind's folded file (`cpu.folded`, `offcpu.folded`, …, as the kind table
    /// names them); `None` where the session has none.
    pub folded: ByKind<Option<Vec<u8>>>,
    /// threads.csv.
    pub threads: Option<Vec<u8>>,
}

/// A recorded session, loaded and checked.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Session {
    /// The session directory.
    pub dir: PathBuf,
    /// session.json; a recording that never finished has status [`Status::Crashed`].
    pub meta: SessionMeta,
    /// timeseries.jsonl, in file order; empty when loaded with [`Session::load_summary`].
    pub rows: Vec<TimeseriesRow>,
    /// The peaks and last totals of timeseries.jsonl's rows, as `show` prints them; also
    /// when the rows themselves were not kept.
    pub row_summary: RowSummary,
    /// latency.hlog, in file order.
    ///
    /// Each interval's histogram is held sparse ([`crate::sparse::SparseHistogram`]): its
    /// non-empty buckets, a few bytes each, so an hour at `--interval 100ms` (36,000
    /// intervals) takes tens of MiB, not the 3 GiB its dense counts arrays would.
    pub latency: Vec<HlogInterval>,
    /// The whole-run stacks of each kind, from its folded file (`cpu.folded`,
    /// `offcpu.folded`, `mem.folded`, …); `None` where the session has none.
    pub profiles: ByKind<Option<StackTree>>,
    /// threads.csv, in file order; empty when the session has none.
    pub threads: Vec<ThreadSummary>,
    /// What loading found wrong but could read past: incomplete last lines, a recording cut
    /// off. The recorder's own warnings are in `meta.warnings`.
    pub warnings: Vec<String>,
}

impl Session {
    /// Loads and checks the session in `dir`.
    ///
    /// A directory without session.json is [`SessionError::NotASession`]; a newer schema is
    /// [`SessionError::UnsupportedSchema`]; any file that does not parse is
    /// [`SessionError::Corrupt`] naming it and the line. The incomplete last line a killed
    /// recorder leaves in timeseries.jsonl or latency.hlog is dropped with a warning.
    /// latency.hlog, timeseries.jsonl, the folded files and threads.csv are optional.
    ///
    /// Files are read within the limits of [`LoadOptions::from_env`]: see
    /// [`Session::load_with`].
    pub fn load(dir: &Path) -> Result<Session, SessionError> {
        Session::load_with(dir, &LoadOptions::from_env()?)
    }

    /// The whole-run stacks of `kind` (its folded file); `None` when the session has none.
    pub fn profile(&self, kind: Kind) -> Option<&StackTree> {
        self.profiles[kind].as_ref()
    }

    /// Loads and checks the session in `dir` as [`Session::load`] does, within the limits
    /// of `opts` ([`crate::limits`]): every file is opened without following a link or
    /// blocking, refused unless it is a regular file ([`SessionError::NotAFile`]) or when
    /// larger than its kind's limit ([`SessionError::TooLarge`]); intervals, stacks,
    /// parameters and tags past their limits are dropped with a warning.
    pub fn load_with(dir: &Path, opts: &LoadOptions) -> Result<Session, SessionError> {
        Session::load_files(dir, opts, true)
    }

    /// Loads and checks the session in `dir` as [`Session::load`] does, but keeps only
    /// what `show` needs, in memory that does not grow with the number of intervals:
    /// [`Session::row_summary`] of timeseries.jsonl, not its rows (each row is parsed,
    /// checked, folded into the summary and dropped), and latency.hlog as one interval per
    /// tag, the tag's total, merged as the log is read.
    pub fn load_summary(dir: &Path) -> Result<Session, SessionError> {
        Session::load_files(dir, &LoadOptions::from_env()?, false)
    }

    fn load_files(
        dir: &Path,
        opts: &LoadOptions,
        keep_rows: bool,
    ) -> Result<Session, SessionError> {
        let read =
            |name: &str, kind: FileKind| read_bounded(&dir.join(name), kind, opts.file_limit(kind));
        let Some(session_json) = read(SESSION_FILE, FileKind::SessionJson)? else {
            return Err(SessionError::NotASession { path: dir.into() });
        };
        let files = SessionFiles {
            session_json,
            timeseries: read(TIMESERIES_FILE, FileKind::Timeseries)?,
            latency: read(LATENCY_FILE, FileKind::Hlog)?,
            folded: {
                let mut folded = ByKind::default();
                for kind in Kind::ALL {
                    folded[kind] = read(kind.folded_file(), FileKind::Folded)?;
                }
                folded
            },
            threads: read(THREADS_FILE, FileKind::Threads)?,
        };
        let mut session = Session::parse_files(dir, files, opts, keep_rows)?;
        session.rebuild_from_intervals(opts);
        if dir.join(RESERVE_FILE).symlink_metadata().is_ok() {
            session.warnings.push(format!(
                "{RESERVE_FILE} was left behind: the recorder holds that much disk for its \
                 last write of {SESSION_FILE} and frees it at the end, and it was cut off \
                 first; it holds nothing of the run, and the next recording under the same \
                 directory or `benchtop reap` deletes it"
            ));
        }
        Ok(session)
    }

    /// A run that ended early (crashed, killed, stopped, failed) may have ended before it
    /// wrote its whole-run folded files: each kind with weights per interval that the
    /// session lacks a folded file of is rebuilt from stacks.jsonl, which was written as
    /// the run went, and a warning says so. A stacks.jsonl that cannot be read is said,
    /// not fatal: the rest of the session stands.
    fn rebuild_from_intervals(&mut self, opts: &LoadOptions) {
        let ended_early = matches!(
            self.meta.status,
            Status::Crashed | Status::Killed | Status::Stopped | Status::Failed
        );
        // The kinds the run took, when session.json says (a run cut off before its end
        // may not): a kind not asked for has no folded file to miss.
        let asked = self
            .meta
            .sampling
            .profile
            .parse::<crate::KindSet>()
            .ok()
            .filter(|set| !set.is_empty());
        let missing: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| k.spec().interval_field.is_some() && self.profiles[*k].is_none())
            .filter(|&k| asked.is_none_or(|set| set.contains(k)))
            .collect();
        if !ended_early || missing.is_empty() {
            return;
        }
        let stacks = match crate::intervals::IntervalStacks::load(&self.dir, opts) {
            Ok(Some(stacks)) => stacks,
            Ok(None) => return,
            Err(e) => {
                self.warnings.push(format!(
                    "the whole-run stacks could not be rebuilt from {STACKS_FILE}: {e}"
                ));
                return;
            }
        };
        let mut rebuilt = false;
        for kind in missing {
            let tree = stacks.tree_in(kind, 0, u64::MAX);
            if tree.total_weight() == 0 {
                continue;
            }
            rebuilt = true;
            self.warnings.push(format!(
                "{} was not written (the run ended {} before its end): its whole-run stacks \
                 are rebuilt from the {} intervals of {STACKS_FILE}",
                kind.folded_file(),
                self.meta.status,
                stacks.intervals.len()
            ));
            self.profiles[kind] = Some(tree);
        }
        if rebuilt {
            self.warnings.extend(stacks.warnings.iter().cloned());
        }
    }

    /// Checks and parses a session's files as [`Session::load`] does, from their bytes;
    /// `dir` names them in errors. Reads nothing from disk: the loader's whole parsing
    /// half, which the fuzz targets drive.
    pub fn from_files(dir: &Path, files: SessionFiles) -> Result<Session, SessionError> {
        Session::from_files_with(dir, files, &LoadOptions::default())
    }

    /// [`Session::from_files`] with the count limits of `opts` (sizes are the reader's
    /// business: see [`Session::load_with`]).
    pub fn from_files_with(
        dir: &Path,
        files: SessionFiles,
        opts: &LoadOptions,
    ) -> Result<Session, SessionError> {
        Session::parse_files(dir, files, opts, true)
    }

    fn parse_files(
        dir: &Path,
        files: SessionFiles,
        opts: &LoadOptions,
        keep_rows: bool,
    ) -> Result<Session, SessionError> {
        let mut warnings = Vec::new();
        let mut meta = checked_meta(&files.session_json, dir, opts, &mut warnings)?;
        let cut_off = meta.status == Status::Running;
        if cut_off {
            meta.status = Status::Crashed;
            warnings.push(
                "session.json still says \"running\": the recorder was cut off before it \
                 finished, so the session is reported as crashed"
                    .to_owned(),
            );
        }

        let (rows, row_summary) = match &files.timeseries {
            Some(bytes) => parse_rows(
                bytes,
                &dir.join(TIMESERIES_FILE),
                opts,
                keep_rows,
                &mut warnings,
            )?,
            None => (Vec::new(), RowSummary::default()),
        };
        let latency = match &files.latency {
            Some(bytes) if keep_rows => {
                // Held sparse, within a budget of bytes (a crafted interval's buckets can
                // be a thousand times its line): past it, the rest of the log is counted,
                // not decoded.
                let (mut intervals, mut held, mut dropped_from) = (Vec::new(), 0usize, None);
                let (log, not_decoded) = hlog::parse_hlog_until(
                    bytes,
                    &dir.join(LATENCY_FILE),
                    opts.max_intervals,
                    opts.max_tags,
                    |interval| {
                        let cost = interval.held_bytes();
                        if held.saturating_add(cost) > opts.max_interval_bytes {
                            dropped_from = Some(interval.start_offset_s);
                            return std::ops::ControlFlow::Break(());
                        }
                        held += cost;
                        intervals.push(interval);
                        std::ops::ControlFlow::Continue(())
                    },
                )?;
                warnings.extend(log.warnings);
                if let Some(from_s) = dropped_from {
                    let buckets: usize = intervals.iter().map(|i| i.histogram.iter().count()).sum();
                    warnings.push(format!(
                        "{LATENCY_FILE}: its intervals pass the latency budget of {} MiB \
                         (held: {} intervals, {buckets} buckets); {} intervals from {from_s:.3} \
                         s on were dropped",
                        opts.max_interval_bytes >> 20,
                        intervals.len(),
                        not_decoded + 1
                    ));
                }
                intervals
            }
            Some(bytes) => merge_hlog(bytes, &dir.join(LATENCY_FILE), opts, &mut warnings)?,
            None => Vec::new(),
        };
        let mut stacks = |kind: Kind, bytes: &Option<Vec<u8>>| {
            let path = dir.join(kind.folded_file());
            bytes
                .as_ref()
                .map(|bytes| {
                    StackTree::read_folded_within(
                        &bytes[..],
                        &path.display().to_string(),
                        opts.folded(),
                        &mut warnings,
                    )
                })
                .transpose()
        };
        let mut profiles: ByKind<Option<StackTree>> = ByKind::default();
        for (kind, bytes) in files.folded.iter() {
            profiles[kind] = stacks(kind, bytes)?;
        }
        // The recorder writes the folded files before the session.json that counts them: a
        // recorder cut off between the two leaves a session.json that counts none. The
        // stacks on disk are the truth then.
        if cut_off
            && meta.sampling.samples == 0
            && let Some(tree) = &profiles[Kind::Cpu]
            && tree.total_weight() > 0
        {
            warnings.push(format!(
                "{SESSION_FILE} counts {} samples but {} holds {}: the recorder was cut off \
                 after writing the stacks; the stacks' count is shown",
                meta.sampling.samples,
                Kind::Cpu.folded_file(),
                tree.total_weight()
            ));
            meta.sampling.samples = tree.total_weight();
        }
        let threads = match &files.threads {
            Some(bytes) => parse_threads_csv(bytes, &dir.join(THREADS_FILE))?,
            None => Vec::new(),
        };
        Ok(Session {
            dir: dir.into(),
            meta,
            rows,
            row_summary,
            latency,
            profiles,
            threads,
            warnings,
        })
    }

    /// The memory its latency intervals hold, bytes, as the latency budget counts it
    /// ([`crate::limits::MAX_INTERVAL_BYTES`]): what a second session loaded by the same
    /// command (`compare A B`, `open A B`) has left of the budget is the budget less this.
    pub fn latency_held_bytes(&self) -> usize {
        self.latency.iter().map(HlogInterval::held_bytes).sum()
    }

    /// The memory its rows hold, bytes, as the rows' budget counts it
    /// ([`crate::limits::MAX_ROW_BYTES`]).
    pub fn rows_held_bytes(&self) -> usize {
        rows_held_bytes(&self.rows, self.rows.capacity())
    }

    /// What it holds of the budgets a command's sessions share: a second session loaded
    /// by the same command is loaded with [`LoadOptions::after`] this.
    pub fn held(&self) -> crate::limits::Held {
        crate::limits::Held::new(self.latency_held_bytes(), self.rows_held_bytes())
    }

    /// From started_at to ended_at, or to the end of the last row when the run never ended.
    pub fn duration(&self) -> Option<Duration> {
        let start = humantime::parse_rfc3339_weak(&self.meta.started_at).ok();
        let end = self
            .meta
            .ended_at
            .as_deref()
            .and_then(|e| humantime::parse_rfc3339_weak(e).ok());
        match (start, end) {
            (Some(start), Some(end)) => end.duration_since(start).ok(),
            _ => self
                .row_summary
                .last_t_s
                .and_then(|t| Duration::try_from_secs_f64(t).ok()),
        }
    }

    /// The intervals of latency.hlog merged per metric (the key is the interval tag, empty
    /// for an untagged log); intervals that cannot be merged, or that would take a total past
    /// [`crate::histogram::MAX_TOTAL_COUNT`], are left out and said in `notes`.
    pub fn merged_latency(&self, notes: &mut Vec<String>) -> BTreeMap<&str, Histogram<u64>> {
        let mut merged = BTreeMap::new();
        self.for_each_merged_latency(notes, |tag, h| {
            merged.insert(tag, h);
        });
        merged
    }

    /// The tags of latency.hlog's intervals, in order, each once.
    pub fn latency_tags(&self) -> Vec<&str> {
        let tags: std::collections::BTreeSet<&str> =
            self.latency.iter().map(|i| i.tag.as_str()).collect();
        tags.into_iter().collect()
    }

    /// [`Session::merged_latency`] one metric at a time, in tag order, each total handed to
    /// `f` and dropped before the next is merged: memory holds one total, not one per tag.
    /// Totals without values are skipped.
    pub fn for_each_merged_latency<'a>(
        &'a self,
        notes: &mut Vec<String>,
        mut f: impl FnMut(&'a str, Histogram<u64>),
    ) {
        let mut by_tag: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, interval) in self.latency.iter().enumerate() {
            by_tag.entry(interval.tag.as_str()).or_default().push(i);
        }
        for (tag, intervals) in by_tag {
            if let Some(h) = self.merge_intervals(&intervals, notes) {
                f(tag, h);
            }
        }
    }

    /// The total of the intervals at `indices` (of one tag), or `None` when it holds no
    /// values.
    fn merge_intervals(
        &self,
        indices: &[usize],
        notes: &mut Vec<String>,
    ) -> Option<Histogram<u64>> {
        let mut total = crate::histogram::Total::default();
        for interval in indices.iter().filter_map(|&i| self.latency.get(i)) {
            let was_full = total.is_full();
            match total.add_sparse(&interval.histogram) {
                Ok(()) => {}
                // Said once, at the first interval left out.
                Err(crate::histogram::TotalError::Full) if was_full => {}
                Err(crate::histogram::TotalError::Full) => notes.push(format!(
                    "{LATENCY_FILE}: {:?} holds more than {} values; intervals from {:.3} s \
                     on are left out of the totals",
                    interval.tag,
                    crate::histogram::MAX_TOTAL_COUNT,
                    interval.start_offset_s
                )),
                Err(e) => notes.push(format!(
                    "{LATENCY_FILE}: an interval of {:?} at {:.3} s cannot be merged: {e}",
                    interval.tag, interval.start_offset_s
                )),
            }
        }
        total.into_histogram().filter(|h| !h.is_empty())
    }
}

/// session.json of the session in `dir`, checked as [`Session::load`] checks it, without
/// reading the rest: for listings of many sessions. A recording cut off before it
/// finished (still `running`) reads as [`Status::Crashed`].
pub fn load_meta(dir: &Path) -> Result<SessionMeta, SessionError> {
    let mut meta = read_meta(dir)?;
    if meta.status == Status::Running {
        meta.status = Status::Crashed;
    }
    Ok(meta)
}

fn read_meta(dir: &Path) -> Result<SessionMeta, SessionError> {
    let meta_path = dir.join(SESSION_FILE);
    let opts = LoadOptions::from_env()?;
    let kind = FileKind::SessionJson;
    let Some(bytes) = read_bounded(&meta_path, kind, opts.file_limit(kind))? else {
        return Err(SessionError::NotASession { path: dir.into() });
    };
    parse_meta(&bytes, &meta_path)
}

/// session.json: checks the schema version before reading the fields, so a newer schema is
/// refused as such rather than as corrupt.
/// session.json of the session in `dir` from its bytes, as [`Session::load`] reads it:
/// parameters past `opts.max_params` dropped with a warning. A status still `running` is
/// left for the caller to judge.
pub(crate) fn checked_meta(
    bytes: &[u8],
    dir: &Path,
    opts: &LoadOptions,
    warnings: &mut Vec<String>,
) -> Result<SessionMeta, SessionError> {
    let mut meta = parse_meta(bytes, &dir.join(SESSION_FILE))?;
    let params = meta.workload.params.len();
    if params > opts.max_params {
        if let Some(first_dropped) = meta.workload.params.keys().nth(opts.max_params) {
            let first_dropped = first_dropped.clone();
            meta.workload.params.split_off(&first_dropped);
        }
        warnings.push(format!(
            "{SESSION_FILE}: {params} workload parameters; only the first {} (by name) \
             are kept, {} were dropped",
            opts.max_params,
            params - opts.max_params
        ));
    }
    Ok(meta)
}

fn parse_meta(bytes: &[u8], path: &Path) -> Result<SessionMeta, SessionError> {
    let corrupt = |reason: String| SessionError::Corrupt {
        path: path.into(),
        reason,
    };
    /// Only the version, every other field skipped without being kept.
    #[derive(serde::Deserialize)]
    struct Version {
        #[serde(default)]
        schema_version: Option<serde_json::Value>,
    }
    let value: Version =
        serde_json::from_slice(bytes).map_err(|e| corrupt(json_reason(&e, e.line())))?;
    match value
        .schema_version
        .as_ref()
        .and_then(serde_json::Value::as_u64)
    {
        None => Err(corrupt(
            "not a benchtop session.json: no numeric \"schema_version\"".into(),
        )),
        Some(0) => Err(corrupt("schema_version 0 does not exist".into())),
        Some(v) if v > u64::from(SCHEMA_VERSION) => Err(SessionError::UnsupportedSchema {
            path: path.into(),
            found: u32::try_from(v).unwrap_or(u32::MAX),
            supported: SCHEMA_VERSION,
        }),
        // Parse the bytes again rather than the Value, for line numbers in errors.
        Some(_) => serde_json::from_slice(bytes).map_err(|e| corrupt(json_reason(&e, e.line()))),
    }
}

/// latency.hlog as one interval per tag, each the total of the tag's intervals, merged as
/// they are read ([`Session::load_summary`]): memory holds one total per tag, however many
/// intervals the log has. What cannot be merged is said in `warnings`, as
/// [`Session::merged_latency`] says it.
fn merge_hlog(
    bytes: &[u8],
    path: &Path,
    opts: &LoadOptions,
    warnings: &mut Vec<String>,
) -> Result<Vec<HlogInterval>, SessionError> {
    struct Merged {
        total: crate::histogram::Total,
        start: f64,
        end: f64,
    }
    let mut by_tag: BTreeMap<String, Merged> = BTreeMap::new();
    let mut notes = Vec::new();
    let log = hlog::parse_hlog_each(bytes, path, opts.max_intervals, opts.max_tags, |i| {
        let merged = by_tag.entry(i.tag.clone()).or_insert_with(|| Merged {
            total: crate::histogram::Total::default(),
            start: i.start_offset_s,
            end: i.start_offset_s,
        });
        merged.start = merged.start.min(i.start_offset_s);
        merged.end = merged.end.max(i.start_offset_s + i.length_s);
        let was_full = merged.total.is_full();
        match merged.total.add_sparse(&i.histogram) {
            Ok(()) => {}
            Err(crate::histogram::TotalError::Full) if was_full => {}
            Err(crate::histogram::TotalError::Full) => notes.push(format!(
                "{LATENCY_FILE}: {:?} holds more than {} values; intervals from {:.3} s \
                 on are left out of the totals",
                i.tag,
                crate::histogram::MAX_TOTAL_COUNT,
                i.start_offset_s
            )),
            Err(e) => notes.push(format!(
                "{LATENCY_FILE}: an interval of {:?} at {:.3} s cannot be merged: {e}",
                i.tag, i.start_offset_s
            )),
        }
    })?;
    warnings.extend(log.warnings);
    warnings.extend(notes);
    Ok(by_tag
        .into_iter()
        .filter_map(|(tag, m)| {
            Some(HlogInterval {
                tag,
                start_offset_s: m.start,
                length_s: m.end - m.start,
                histogram: SparseHistogram::from(&m.total.into_histogram()?),
            })
        })
        .collect())
}

/// serde_json's message with the position as `line N, column C: …`, the line being `line`
/// (0 leaves it out).
pub(crate) fn json_reason(e: &serde_json::Error, line: usize) -> String {
    let text = e.to_string();
    let message = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(message, _)| message);
    match line {
        0 => format!("column {}: {message}", e.column()),
        line => format!("line {line}, column {}: {message}", e.column()),
    }
}

/// `YYYYmmdd-HHMMSS-<workload>` in UTC, the default directory name of a session. Characters
/// other than ASCII letters, digits, `.`, `_` and `-` in the workload become `-`.
pub fn new_session_id(workload: &str, now: SystemTime) -> String {
    let stamp = humantime::format_rfc3339_seconds(clamp_time(now)).to_string();
    let digits: String = stamp.chars().filter(char::is_ascii_digit).collect();
    let (date, time) = digits.split_at_checked(8).unwrap_or((&digits, ""));
    let workload: String = workload
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '-',
        })
        .collect();
    format!("{date}-{time}-{workload}")
}

/// `now` in RFC 3339 UTC with milliseconds, as session.json stores times.
pub fn rfc3339(now: SystemTime) -> String {
    humantime::format_rfc3339_millis(clamp_time(now)).to_string()
}

/// The range RFC 3339 can write: from the epoch to the end of year 9999 (humantime panics
/// or fails outside it).
pub(crate) fn clamp_time(t: SystemTime) -> SystemTime {
    const LAST_SECOND: u64 = 253_402_300_799;
    t.clamp(UNIX_EPOCH, UNIX_EPOCH + Duration::from_secs(LAST_SECOND))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::{Figure, HostInfo, WorkloadInfo};

    fn meta() -> SessionMeta {
        SessionMeta::new(
            "20240501-120000-ring",
            WorkloadInfo::new("ring", BTreeMap::from([("workers".into(), 4.into())])),
            HostInfo::default(),
            "2024-05-01T12:00:00.000Z",
        )
    }

    #[test]
    fn session_ids_are_utc_stamps_and_a_clean_workload_name() {
        let t = UNIX_EPOCH + Duration::from_secs(1_714_564_805);
        assert_eq!(new_session_id("ring", t), "20240501-120005-ring");
        assert_eq!(new_session_id("run ./a/b", t), "20240501-120005-run-.-a-b");
        assert_eq!(rfc3339(t), "2024-05-01T12:00:05.000Z");
    }

    #[test]
    fn times_outside_what_rfc3339_can_write_are_clamped_not_a_panic() {
        let before = UNIX_EPOCH - Duration::from_secs(10);
        assert_eq!(new_session_id("x", before), "19700101-000000-x");
        let after = UNIX_EPOCH + Duration::from_secs(400_000_000_000);
        assert!(rfc3339(after).starts_with("9999-12-31T23:59:59"));
    }

    #[test]
    fn a_recorder_cut_off_after_its_stacks_shows_the_stacks_count_of_samples() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SessionWriter::create(&dir.path().join("s"), meta()).unwrap();
        let mut tree = StackTree::new();
        tree.add_names(["p", "main", "hot"], 7);
        w.write_stacks(Kind::Cpu, &tree, "t").unwrap();
        // Cut off here: session.json still counts no samples.
        let session = Session::load(w.dir()).unwrap();
        assert_eq!(session.meta.status, Status::Crashed);
        assert_eq!(session.meta.sampling.samples, 7);
        assert!(
            session
                .warnings
                .iter()
                .any(|w| w.contains("counts 0 samples but cpu.folded holds 7")),
            "{:?}",
            session.warnings
        );
    }

    #[test]
    fn load_meta_reads_a_cut_off_recording_as_crashed_and_refuses_what_is_no_session() {
        let dir = tempfile::tempdir().unwrap();
        let w = SessionWriter::create(&dir.path().join("s"), meta()).unwrap();
        // Still "running" on disk: the writer was never finished.
        let m = load_meta(w.dir()).unwrap();
        assert_eq!(
            (m.status, m.id.as_str()),
            (Status::Crashed, "20240501-120000-ring")
        );
        assert!(matches!(
            load_meta(dir.path()),
            Err(SessionError::NotASession { .. })
        ));
        fs::write(w.dir().join(SESSION_FILE), b"{ not json").unwrap();
        assert!(load_meta(w.dir()).is_err());
    }

    #[test]
    fn update_meta_rewrites_session_json_and_keeps_the_schema_version() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SessionWriter::create(&dir.path().join("s"), meta()).unwrap();
        w.update_meta(|m| {
            m.schema_version = 99;
            m.summary.push(Figure::new("msgs/s", 12.5, "msg/s"));
        })
        .unwrap();
        let text = fs::read_to_string(w.dir().join(SESSION_FILE)).unwrap();
        let back: SessionMeta = serde_json::from_str(&text).unwrap();
        assert_eq!(back.schema_version, SCHEMA_VERSION);
        assert_eq!(back.summary, w.meta().summary);
        assert!(!w.dir().join("session.json.tmp").exists());
    }

    #[test]
    fn a_started_at_that_is_not_rfc3339_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = meta();
        m.started_at = "yesterday".into();
        let err = SessionWriter::create(dir.path(), m).unwrap_err();
        assert!(matches!(err, SessionError::InvalidMeta { .. }), "{err}");
    }

    #[test]
    fn latency_totals_stop_short_of_overflowing_and_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SessionWriter::create(&dir.path().join("s"), meta()).unwrap();
        let mut h = Histogram::<u64>::new_with_bounds(1, 1_000_000, 3).unwrap();
        h.record_n(1_000, crate::histogram::MAX_TOTAL_COUNT / 2)
            .unwrap();
        for i in 0..3 {
            w.append_latency("lap", f64::from(i), 1.0, &h).unwrap();
        }
        let path = w
            .finish(Status::Complete, "2024-05-01T12:00:03.000Z".into())
            .unwrap();
        let text = Session::load(&path).unwrap().summary_text();
        assert!(text.contains("left out of the totals"), "{text}");
        assert!(text.contains("lap"), "{text}");
    }
}
