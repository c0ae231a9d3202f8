//! What a loader reads from a session, at most: file sizes per kind of file, and counts of
//! intervals, stacks, parameters and histogram tags.
//!
//! A session directory may come from anywhere. Its files are opened without following a
//! symbolic link and without blocking (`O_NOFOLLOW | O_NONBLOCK`), refused unless they are
//! regular files (a FIFO, a device, a link to `/dev/zero`), refused when larger than the
//! limit of their kind, and read with that limit, so memory never exceeds it whatever the
//! file claims or grows to. Counts beyond their limit are dropped with a warning saying what
//! was dropped. docs/session-format.md lists the numbers.
//!
//! ```
//! use benchtop_profile::limits::{LoadOptions, MAX_PARAMS};
//!
//! let opts = LoadOptions::default();
//! assert_eq!(opts.max_params, MAX_PARAMS);
//! assert_eq!(opts.file_limit(benchtop_profile::limits::FileKind::SessionJson), 16 << 20);
//! ```

use std::fs::File;
use std::io::Read as _;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};

use crate::ProfileError;

/// Intervals read from timeseries.jsonl (rows) and from latency.hlog (interval lines), each:
/// ten times what one hour at `--interval 100ms` produces.
pub const MAX_INTERVALS: usize = 1_000_000;
/// Distinct stacks read from one folded file.
pub const MAX_STACKS: usize = 1_000_000;
/// Nodes (distinct call paths) of the tree read from one folded file: above the 1.1
/// million of a real profile of 100,000 distinct stacks (benches/data/manystacks.c). A
/// crafted file of 70,000 stacks of 40 random frames makes 2.8 million.
pub const MAX_STACK_NODES: usize = 1_500_000;
/// Distinct frame names read from one folded file: real profiles have thousands (each
/// function once, whatever the stacks it is in); the crafted file above has 2.8 million,
/// and each costs its name twice (the table and its index).
pub const MAX_FRAMES: usize = 200_000;
/// Workload parameters read from session.json.
pub const MAX_PARAMS: usize = 10_000;
/// Distinct histogram tags (metrics) read from latency.hlog.
pub const MAX_TAGS: usize = 1_000;
/// Bytes a command holds for latency.hlog's intervals (each held sparse, a few bytes a
/// non-empty bucket, with its tag and fixed fields), shared by the sessions it loads
/// (`compare A B`, `open A B`: the second gets what the first left): 160 MiB, three
/// hours at 100 ms intervals of 1,000 values each (the synthetic hour of
/// benches/session_load.py holds 52 MiB), so two such sessions fit side by side. An
/// interval of a crafted log can hold 55,296 buckets in a line of 152 bytes; past the
/// budget the rest of the log is counted, not decoded, and dropped with a warning.
pub const MAX_INTERVAL_BYTES: usize = 160 << 20;
/// Bytes a command holds for timeseries.jsonl's rows, counted value by value as they are
/// parsed (`timeseries::row_held_bytes`: a per-core figure 8 bytes, a counter, rate or
/// latency metric its entry and name, a top thread its names), shared as
/// [`MAX_INTERVAL_BYTES`] is: 96 MiB. The synthetic hour of benches/session_load.py
/// (36,000 rows of 100 ms) holds 36 MiB, so the two of `open A B` fit with a quarter to
/// spare; an hour at 100 ms on a 64-core machine (64 per-core figures, five top threads
/// a row) 72 MiB, and at the default 1 s
/// a tenth of it. A crafted row of 4 million per-core zeros holds 32 MB in a line of 8
/// MB. A row past what is left of the budget and the rows after it are counted, not
/// decoded, and dropped with a warning; the file's own bytes are read beside them.
pub const MAX_ROW_BYTES: usize = 96 << 20;

/// What a loaded session holds of the budgets a command's sessions share, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Held {
    /// latency.hlog's intervals ([`MAX_INTERVAL_BYTES`]).
    pub interval_bytes: usize,
    /// timeseries.jsonl's rows ([`MAX_ROW_BYTES`]).
    pub row_bytes: usize,
}

impl Held {
    /// `interval_bytes` of latency intervals and `row_bytes` of rows.
    pub fn new(interval_bytes: usize, row_bytes: usize) -> Self {
        Held {
            interval_bytes,
            row_bytes,
        }
    }
}

impl std::ops::Add for Held {
    type Output = Held;
    fn add(self, other: Held) -> Held {
        Held::new(
            self.interval_bytes.saturating_add(other.interval_bytes),
            self.row_bytes.saturating_add(other.row_bytes),
        )
    }
}

/// The environment variable that overrides the size limit of every file kind, in bytes.
pub const MAX_FILE_BYTES_ENV: &str = "BENCHTOP_MAX_FILE_BYTES";

const MIB: u64 = 1 << 20;

/// The files a loader reads, each with its own size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// session.json: 16 MiB.
    SessionJson,
    /// timeseries.jsonl: 256 MiB.
    Timeseries,
    /// latency.hlog: 256 MiB.
    Hlog,
    /// cpu.folded and offcpu.folded: 256 MiB each.
    Folded,
    /// threads.csv: 16 MiB (the 65 536 exited threads a recorder keeps, and the live ones,
    /// take about 6 MiB).
    Threads,
    /// stacks.jsonl (per-interval stacks): 512 MiB.
    IntervalStacks,
    /// A source file the source view shows (its path comes from a session): 8 MiB.
    SourceFile,
    /// digest.json (a session's figures, as histories read them): 1 MiB, some thousand
    /// times the digest of a run with a dozen figures.
    Digest,
}

impl FileKind {
    /// The default size limit, bytes.
    pub fn default_limit(self) -> u64 {
        match self {
            FileKind::SessionJson => 16 * MIB,
            FileKind::Timeseries | FileKind::Hlog | FileKind::Folded => 256 * MIB,
            FileKind::Threads => 16 * MIB,
            FileKind::IntervalStacks => 512 * MIB,
            FileKind::SourceFile => 8 * MIB,
            FileKind::Digest => MIB,
        }
    }

    /// How errors name the kind.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::SessionJson => "session.json",
            FileKind::Timeseries => "timeseries.jsonl",
            FileKind::Hlog => "latency.hlog",
            FileKind::Folded => "folded stacks",
            FileKind::Threads => "threads.csv",
            FileKind::IntervalStacks => "stacks.jsonl",
            FileKind::SourceFile => "source file",
            FileKind::Digest => "digest.json",
        }
    }
}

/// The limits a load applies. `Default` holds the documented numbers;
/// [`LoadOptions::from_env`] also reads [`MAX_FILE_BYTES_ENV`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadOptions {
    /// One size limit for every file kind, bytes, instead of each kind's default.
    pub max_file_bytes: Option<u64>,
    /// See [`MAX_INTERVALS`].
    pub max_intervals: usize,
    /// See [`MAX_STACKS`].
    pub max_stacks: usize,
    /// See [`MAX_STACK_NODES`].
    pub max_stack_nodes: usize,
    /// See [`MAX_FRAMES`].
    pub max_frames: usize,
    /// See [`MAX_PARAMS`].
    pub max_params: usize,
    /// See [`MAX_TAGS`].
    pub max_tags: usize,
    /// See [`MAX_INTERVAL_BYTES`].
    pub max_interval_bytes: usize,
    /// See [`MAX_ROW_BYTES`].
    pub max_row_bytes: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_file_bytes: None,
            max_intervals: MAX_INTERVALS,
            max_stacks: MAX_STACKS,
            max_stack_nodes: MAX_STACK_NODES,
            max_frames: MAX_FRAMES,
            max_params: MAX_PARAMS,
            max_tags: MAX_TAGS,
            max_interval_bytes: MAX_INTERVAL_BYTES,
            max_row_bytes: MAX_ROW_BYTES,
        }
    }
}

impl LoadOptions {
    /// The defaults, with the size limit of [`MAX_FILE_BYTES_ENV`] when it is set: a whole
    /// number of bytes, else [`ProfileError::BadLimit`].
    pub fn from_env() -> Result<Self, ProfileError> {
        let mut opts = LoadOptions::default();
        if let Some(value) = std::env::var_os(MAX_FILE_BYTES_ENV) {
            let bytes = value
                .to_str()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| ProfileError::BadLimit {
                    name: MAX_FILE_BYTES_ENV,
                    value: value.to_string_lossy().into_owned(),
                })?;
            opts.max_file_bytes = Some(bytes);
        }
        Ok(opts)
    }

    /// What a folded file is read within.
    pub fn folded(&self) -> crate::stacks::FoldedLimits {
        crate::stacks::FoldedLimits {
            max_stacks: self.max_stacks,
            max_nodes: self.max_stack_nodes,
            max_frames: self.max_frames,
        }
    }

    /// These limits less what a session loaded before by the same command holds
    /// (`compare A B`, `open A B`): the budgets shared by a command's sessions
    /// ([`MAX_INTERVAL_BYTES`], [`MAX_ROW_BYTES`]) are what the first left.
    pub fn after(&self, held: Held) -> LoadOptions {
        LoadOptions {
            max_interval_bytes: self.max_interval_bytes.saturating_sub(held.interval_bytes),
            max_row_bytes: self.max_row_bytes.saturating_sub(held.row_bytes),
            ..self.clone()
        }
    }

    /// The size limit of `kind`, bytes.
    pub fn file_limit(&self, kind: FileKind) -> u64 {
        self.max_file_bytes.unwrap_or_else(|| kind.default_limit())
    }
}

/// What is at a path, for [`ProfileError::NotAFile`].
fn describe(file_type: FileType) -> &'static str {
    match file_type {
        FileType::Directory => "a directory",
        FileType::Fifo => "a FIFO",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Socket => "a socket",
        FileType::Symlink => "a symbolic link",
        _ => "not a regular file",
    }
}

/// The content of the file at `path`, at most `limit` bytes; `None` when there is no file.
///
/// Opened with `O_NOFOLLOW | O_NONBLOCK` (a link is refused, not followed; a FIFO does not
/// block the open) and checked with `fstat` to be a regular file, else
/// [`ProfileError::NotAFile`] naming it. A file larger than `limit` is
/// [`ProfileError::TooLarge`]: its size is checked before reading, and reading stops one byte
/// past the limit whatever the size said, so memory never exceeds it.
pub fn read_bounded(
    path: &Path,
    kind: FileKind,
    limit: u64,
) -> Result<Option<Vec<u8>>, ProfileError> {
    let fd = match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => return Ok(None),
        Err(rustix::io::Errno::LOOP) => {
            return Err(ProfileError::NotAFile {
                path: path.into(),
                what: "a symbolic link",
            });
        }
        Err(e) => return Err(ProfileError::io(path, e.into())),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| ProfileError::io(path, e.into()))?;
    let file_type = FileType::from_raw_mode(stat.st_mode);
    if file_type != FileType::RegularFile {
        return Err(ProfileError::NotAFile {
            path: path.into(),
            what: describe(file_type),
        });
    }
    let too_large = || ProfileError::TooLarge {
        path: path.into(),
        limit,
        kind: kind.name(),
    };
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    File::from(fd)
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| ProfileError::io(path, e))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_refused_and_a_missing_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("z")).unwrap();
        let err = read_bounded(&dir.path().join("z"), FileKind::Folded, 10).unwrap_err();
        assert!(
            matches!(
                err,
                ProfileError::NotAFile {
                    what: "a symbolic link",
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            read_bounded(&dir.path().join("none"), FileKind::Folded, 10)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_file_one_byte_past_the_limit_is_too_large() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(
            read_bounded(&path, FileKind::Folded, 10).unwrap().unwrap(),
            b"0123456789"
        );
        let err = read_bounded(&path, FileKind::Folded, 9).unwrap_err();
        assert!(
            matches!(err, ProfileError::TooLarge { limit: 9, .. }),
            "{err}"
        );
        assert!(err.to_string().contains(MAX_FILE_BYTES_ENV), "{err}");
    }

    #[test]
    fn a_character_device_is_refused_without_being_read() {
        let err = read_bounded(Path::new("/dev/zero"), FileKind::Folded, 10).unwrap_err();
        assert!(
            matches!(
                err,
                ProfileError::NotAFile {
                    what: "a character device",
                    ..
                }
            ),
            "{err}"
        );
    }
}
