//! The one error type of this crate.

use std::path::PathBuf;

use crate::escape::EscapedPath;
use crate::meta::{Failure, FailureKind};

/// What can go wrong reading or writing a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", EscapedPath(.path))]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file exists but its content is not what the format says.
    #[error("{}: corrupt: {reason}", EscapedPath(.path))]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong, with a line number where there is one.
        reason: String,
    },
    /// The directory is not a benchtop session.
    #[error("{}: not a benchtop session (no session.json)", EscapedPath(.path))]
    NotASession {
        /// The directory.
        path: PathBuf,
    },
    /// The session was written by a newer schema than this build reads.
    #[error(
        "{}: session schema version {found}; this benchtop reads up to version {supported}", EscapedPath(.path))]
    UnsupportedSchema {
        /// session.json.
        path: PathBuf,
        /// Version in the file.
        found: u32,
        /// [`crate::SCHEMA_VERSION`].
        supported: u32,
    },
    /// A session already exists where a new one was to be created.
    #[error("{}: a session is already recorded there; choose another directory", EscapedPath(.path))]
    AlreadyExists {
        /// The directory.
        path: PathBuf,
    },
    /// A directory a session or an export was to be written into holds files already.
    #[error(
        "{}: not empty (it holds {entry:?}); benchtop writes a new session only into a new or empty directory", EscapedPath(.path))]
    NotEmpty {
        /// The directory.
        path: PathBuf,
        /// One of the entries found in it.
        entry: String,
    },
    /// A directory benchtop was to write into is not safe to write into: a symbolic link,
    /// not a directory, or another user's.
    #[error("{}: refused as a directory to write into: {reason}", EscapedPath(.path))]
    UnsafeDirectory {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A directory to read recordings under (`history DIR`) is not a directory.
    #[error("{}: not a directory", EscapedPath(.path))]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A file of a session is not a regular file (a symbolic link, a FIFO, a device, a
    /// directory…): it is not read.
    #[error("{}: not a regular file ({what}); refused", EscapedPath(.path))]
    NotAFile {
        /// The file.
        path: PathBuf,
        /// What it is instead: `a symbolic link`, `a FIFO`, ….
        what: &'static str,
    },
    /// A file of a session is larger than the loader reads for its kind.
    #[error(
        "{}: larger than {limit} bytes, the limit for {kind}; set BENCHTOP_MAX_FILE_BYTES to read larger files", EscapedPath(.path))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit that applied, bytes.
        limit: u64,
        /// The file's kind, e.g. `session.json`.
        kind: &'static str,
    },
    /// A limit given in the environment is not a number.
    #[error("{name}={value:?}: not a whole number of bytes")]
    BadLimit {
        /// The environment variable.
        name: &'static str,
        /// Its value.
        value: String,
    },
    /// The metadata handed to a [`crate::SessionWriter`] cannot be recorded.
    #[error("{}: invalid session metadata: {reason}", EscapedPath(.path))]
    InvalidMeta {
        /// session.json of the session being written.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// inferno could not render a flamegraph.
    #[error("rendering the flamegraph failed: {source}")]
    Flamegraph {
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// [`crate::SessionWriter::write_stacks`] wrote the folded stacks, but their flamegraph
    /// SVG could not be rendered or written.
    #[error("{source}; the folded stacks were written to {}", EscapedPath(.folded))]
    FlamegraphNotWritten {
        /// The folded file, written and complete.
        folded: PathBuf,
        /// Why the SVG is missing: [`SessionError::Flamegraph`] or [`SessionError::Io`].
        #[source]
        source: Box<SessionError>,
    },
    /// A histogram (a latency.hlog interval, a worker report) does not decode, or its
    /// sizes are beyond what [`crate::histogram::decode_histogram`] accepts.
    #[error("histogram does not decode: {reason}")]
    BadHistogram {
        /// What is wrong with it.
        reason: String,
    },
    /// Any other error of the profile model.
    #[error(transparent)]
    Profile(benchtop_profile::ProfileError),
}

impl From<benchtop_profile::ProfileError> for SessionError {
    fn from(e: benchtop_profile::ProfileError) -> Self {
        use benchtop_profile::ProfileError as P;
        match e {
            P::Io { path, source } => SessionError::Io { path, source },
            P::Corrupt { path, reason } => SessionError::Corrupt { path, reason },
            P::NotAFile { path, what } => SessionError::NotAFile { path, what },
            P::TooLarge { path, limit, kind } => SessionError::TooLarge { path, limit, kind },
            P::BadLimit { name, value } => SessionError::BadLimit { name, value },
            P::BadHistogram { reason } => SessionError::BadHistogram { reason },
            // ProfileError is non-exhaustive: a variant added later keeps its words.
            other => SessionError::Profile(other),
        }
    }
}

impl SessionError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SessionError::Io {
            path: path.into(),
            source,
        }
    }

    /// The kind of the I/O error behind this one, when there is one (an [`SessionError::Io`],
    /// or the write error behind a [`SessionError::FlamegraphNotWritten`]).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            SessionError::Io { source, .. } | SessionError::Flamegraph { source } => {
                Some(source.kind())
            }
            SessionError::FlamegraphNotWritten { source, .. } => source.io_kind(),
            _ => None,
        }
    }

    /// The file or directory this error is about, when it names one.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            SessionError::Io { path, .. }
            | SessionError::Corrupt { path, .. }
            | SessionError::NotASession { path }
            | SessionError::UnsupportedSchema { path, .. }
            | SessionError::AlreadyExists { path }
            | SessionError::NotEmpty { path, .. }
            | SessionError::UnsafeDirectory { path, .. }
            | SessionError::NotAFile { path, .. }
            | SessionError::NotADirectory { path }
            | SessionError::TooLarge { path, .. }
            | SessionError::InvalidMeta { path, .. } => Some(path),
            SessionError::FlamegraphNotWritten { source, .. } => source.path(),
            SessionError::Flamegraph { .. }
            | SessionError::BadHistogram { .. }
            | SessionError::BadLimit { .. }
            | SessionError::Profile(_) => None,
        }
    }

    /// Whether the disk (or the user's quota) was full: `ENOSPC` or `EDQUOT`.
    pub fn is_no_space(&self) -> bool {
        matches!(
            self.io_kind(),
            Some(std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
        )
    }

    /// How a recording that stopped on this error ended, for session.json's `failure`
    /// ([`crate::SessionWriter::fail`]): [`FailureKind::NoSpace`] when the disk was full,
    /// [`FailureKind::WriteError`] for any other I/O error, [`FailureKind::Other`] else.
    pub fn failure(&self) -> Failure {
        let kind = if self.is_no_space() {
            FailureKind::NoSpace
        } else if self.io_kind().is_some() {
            FailureKind::WriteError
        } else {
            FailureKind::Other
        };
        Failure {
            kind,
            path: self.path().map(|p| p.display().to_string()),
            message: match self {
                // The path is said apart.
                SessionError::Io { source, .. } => source.to_string(),
                e => e.to_string(),
            },
        }
    }

    /// A corrupt file, with the line number in the reason.
    pub fn corrupt_line(
        path: impl Into<PathBuf>,
        line: usize,
        reason: impl std::fmt::Display,
    ) -> Self {
        SessionError::Corrupt {
            path: path.into(),
            reason: format!("line {line}: {reason}"),
        }
    }
}
