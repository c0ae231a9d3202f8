//! The one error type of this crate.

use std::path::PathBuf;

use benchtop_profilers::ProfilerError;
use benchtop_sessions::SessionError;
use benchtop_sessions::escape::EscapedPath;

/// What can keep a recording from starting, or end it early. A run that started always
/// finishes its session: errors after that point become the session's warnings and a
/// [`crate::Ending`], and only the loop's own failures come back as this error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The sampler cannot sample as asked (an event the machine lacks, a bad frequency).
    #[error("cannot sample as asked")]
    Sampling(#[source] ProfilerError),
    /// The session directory cannot be created.
    #[error("cannot create the session in {}", EscapedPath(path))]
    CreateSession {
        /// The directory asked for.
        path: PathBuf,
        /// Why.
        #[source]
        source: SessionError,
    },
    /// No new session directory can be made under the default root.
    #[error("cannot create a session under ./{}", EscapedPath(root))]
    CreateSessionUnder {
        /// The root, relative to the working directory.
        root: PathBuf,
        /// Why.
        #[source]
        source: SessionError,
    },
    /// The worker cannot be started; the session was finished as crashed, saying why.
    #[error("cannot start the worker {}: {source}", EscapedPath(program))]
    Spawn {
        /// The program.
        program: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A thread of the recorder cannot be started.
    #[error("cannot start the thread {name}")]
    Thread {
        /// Its name.
        name: &'static str,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for the worker failed.
    #[error("cannot wait for the worker (pid {pid})")]
    Wait {
        /// Its pid.
        pid: u32,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// Writing the session failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The recorder's loop panicked; the session was finished as crashed.
    #[error("the recorder panicked: {0}")]
    Panicked(String),
}
