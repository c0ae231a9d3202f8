//! The one error type of this crate.

use std::path::PathBuf;

use benchtop_profile::escape::EscapedPath;

/// What can go wrong sampling or monitoring a process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfilerError {
    /// perf events may not be opened by this user here. `reason` says why and how to
    /// allow it; the run can go on with monitors only.
    #[error("perf sampling is not permitted: {reason}")]
    PermissionDenied {
        /// The paranoid level, the missing privilege and the fix.
        reason: String,
    },
    /// The machine has no such event (hardware cycles without a PMU, as in most VMs).
    #[error("this machine has no `{event}` event ({source}); sample with cpu-clock instead")]
    EventUnavailable {
        /// The event asked for.
        event: &'static str,
        /// What perf_event_open said.
        #[source]
        source: std::io::Error,
    },
    /// No process has this id (or it exited before sampling started).
    #[error("no process with pid {pid}")]
    ProcessNotFound {
        /// The process id asked for.
        pid: u32,
    },
    /// The process being monitored has exited (or is a zombie waiting to be reaped).
    #[error("process {pid} has exited")]
    ProcessGone {
        /// The process id.
        pid: u32,
    },
    /// `perf_event_open` failed for a reason other than permissions or a missing process.
    #[error("perf_event_open for pid {pid} on cpu {cpu} failed: {source}")]
    PerfOpen {
        /// The sampled process.
        pid: u32,
        /// The CPU of the event.
        cpu: usize,
        /// The error; its `raw_os_error` is the errno.
        #[source]
        source: std::io::Error,
    },
    /// A counting event of [`crate::counting::TreeCounters`] could not be opened for a
    /// reason other than permissions or a thread that has exited.
    #[error("perf_event_open of a `{event}` counter on thread {tid} failed: {source}")]
    CountOpen {
        /// The thread.
        tid: u32,
        /// The event or events.
        event: &'static str,
        /// The error; its `raw_os_error` is the errno.
        #[source]
        source: std::io::Error,
    },
    /// [`crate::Sampler::check`]'s probe, a counting event on the calling thread, was
    /// refused for a reason other than permissions or a missing event.
    #[error("perf_event_open of a `{event}` counter on this thread failed: {source}")]
    PerfCheck {
        /// The event probed.
        event: &'static str,
        /// The error; its `raw_os_error` is the errno.
        #[source]
        source: std::io::Error,
    },
    /// The ring buffer of an event could not be mapped, even at its smallest size.
    #[error("mapping the {pages}-page perf ring buffer of cpu {cpu} failed: {source}")]
    RingBuffer {
        /// The CPU of the event.
        cpu: usize,
        /// Data pages asked for at the last attempt.
        pages: usize,
        /// The error; its `raw_os_error` is the errno.
        #[source]
        source: std::io::Error,
    },
    /// Enabling, disabling or polling the events failed.
    #[error("perf event {action} failed: {source}")]
    PerfControl {
        /// What was being done: `enable`, `disable`, `poll`.
        action: &'static str,
        /// The error; its `raw_os_error` is the errno.
        #[source]
        source: std::io::Error,
    },
    /// Reading a file (under /proc or /sys, usually) failed.
    #[error("{}: {source}", EscapedPath(.path))]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its content was not in the expected format.
    #[error("{}: unexpected content: {reason}", EscapedPath(.path))]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was missing or malformed.
        reason: String,
    },
    /// Options that cannot work together or at all.
    #[error("invalid sampler options: {reason}")]
    InvalidOptions {
        /// Which option and why.
        reason: String,
    },
    /// [`crate::Sampler::attach`] needs one perf event per thread per CPU (two with
    /// off-CPU stacks), each a file descriptor: more than the hard open-file limit allows.
    #[error(
        "attaching to pid {pid} needs {needed} perf events ({threads} threads × CPUs × events), \
         each an open file, above the limit of {limit}: raise it (`ulimit -n`, or the hard \
         limit) or take fewer profiles (on-CPU only needs half as many)"
    )]
    TooManyEvents {
        /// The process attached to.
        pid: u32,
        /// Its threads.
        threads: usize,
        /// Perf events (file descriptors) needed.
        needed: u64,
        /// The open-file limit in the way.
        limit: u64,
    },
    /// The sampler's background thread could not be started or died.
    #[error("sampler thread: {reason}")]
    Thread {
        /// What happened.
        reason: String,
    },
}

impl ProfilerError {
    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ProfilerError::Io {
            path: path.into(),
            source,
        }
    }
}
