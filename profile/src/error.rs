//! The one error type of this crate.

use std::path::PathBuf;

use crate::escape::EscapedPath;

/// What can go wrong reading the profile model's files or decoding its histograms.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
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
    /// A file is not a regular file (a symbolic link, a FIFO, a device, a directory…): it
    /// is not read.
    #[error("{}: not a regular file ({what}); refused", EscapedPath(.path))]
    NotAFile {
        /// The file.
        path: PathBuf,
        /// What it is instead: `a symbolic link`, `a FIFO`, ….
        what: &'static str,
    },
    /// A file is larger than the loader reads for its kind.
    #[error(
        "{}: larger than {limit} bytes, the limit for {kind}; set BENCHTOP_MAX_FILE_BYTES to read larger files",
        EscapedPath(.path)
    )]
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
    /// A histogram (a latency.hlog interval, a worker report) does not decode, or its
    /// sizes are beyond what [`crate::histogram::decode_histogram`] accepts.
    #[error("histogram does not decode: {reason}")]
    BadHistogram {
        /// What is wrong with it.
        reason: String,
    },
}

impl ProfileError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ProfileError::Io {
            path: path.into(),
            source,
        }
    }

    /// A corrupt file, with the line number in the reason.
    pub fn corrupt_line(
        path: impl Into<PathBuf>,
        line: usize,
        reason: impl std::fmt::Display,
    ) -> Self {
        ProfileError::Corrupt {
            path: path.into(),
            reason: format!("line {line}: {reason}"),
        }
    }
}
