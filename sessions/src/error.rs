//! The one error type of this crate.

use std::path::PathBuf;

/// What can go wrong reading or writing a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file exists but its content is not what the format says.
    #[error("{path}: corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong, with a line number where there is one.
        reason: String,
    },
    /// The directory is not a benchtop session.
    #[error("{path}: not a benchtop session (no session.json)")]
    NotASession {
        /// The directory.
        path: PathBuf,
    },
    /// The session was written by a newer schema than this build reads.
    #[error(
        "{path}: session schema version {found}; this benchtop reads up to version {supported}"
    )]
    UnsupportedSchema {
        /// session.json.
        path: PathBuf,
        /// Version in the file.
        found: u32,
        /// [`crate::SCHEMA_VERSION`].
        supported: u32,
    },
    /// A session already exists where a new one was to be created.
    #[error("{path}: a session is already recorded there; choose another directory")]
    AlreadyExists {
        /// The directory.
        path: PathBuf,
    },
    /// The metadata handed to a [`crate::SessionWriter`] cannot be recorded.
    #[error("{path}: invalid session metadata: {reason}")]
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
    #[error("{source}; the folded stacks were written to {folded}")]
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
}

impl SessionError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SessionError::Io {
            path: path.into(),
            source,
        }
    }

    /// A corrupt file, with the line number in the reason.
    pub(crate) fn corrupt_line(
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
