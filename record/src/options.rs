//! What to record: a domain type the binary builds from its command line (or a runner
//! builds per point of a sweep), with the worker's argument vector and its parameters as
//! opaque data.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use benchtop_profilers::sampler::SamplerOptions;

use crate::live::LiveLink;

/// What the conductor records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A built-in workload's worker: hello, ready, `start`, ticks, summary.
    Worker,
    /// Any command, held at the exec gate (`program` is `benchtop exec-gate -- …`) until
    /// the sampler is attached. It may speak the report protocol; it need not.
    Command,
    /// A process that is already running: profiled and watched, never signalled.
    Attach {
        /// Its pid.
        pid: u32,
        /// Its start time (clock ticks after boot), to tell its exit from a reused pid.
        start_ticks: u64,
    },
}

/// Where sessions go when no directory is given, relative to the working directory.
pub const DEFAULT_SESSIONS_DIR: &str = "sessions";

/// What to record, and how.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// What kind of process is recorded.
    pub target: Target,
    /// Workload name for the session.
    pub workload: String,
    /// Workload parameters by their command-line names, as the session stores them.
    pub params: BTreeMap<String, serde_json::Value>,
    /// The worker command.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The conductor's command line, for the session.
    pub command_line: Vec<String>,
    /// The session directory to create; `None`: a new one under
    /// [`DEFAULT_SESSIONS_DIR`].
    pub dir: Option<PathBuf>,
    /// End measured work after this long; `None`: when the workload finishes.
    pub duration: Option<Duration>,
    /// Interval of the worker's reports and of the monitors.
    pub interval: Duration,
    /// Whether stacks are sampled at all (`--profile none` turns it off).
    pub sample_stacks: bool,
    /// How stacks are sampled (its event and frequency are recorded in the session even
    /// when sampling is off).
    pub sampler: SamplerOptions,
    /// A live consumer to tell as the run goes on (the TUI, a progress line).
    pub live: Option<LiveLink>,
    /// The interrupts to stop on (the binary's signal handler raises them): the first
    /// raised after the recording began stops the worker, the second kills it. `None`:
    /// the recording hears none (a live consumer may still stop it).
    pub interrupts: Option<crate::Interrupts>,
    /// Where the intervals also go as they are written (an OTLP exporter), off the
    /// recorder's thread.
    pub stream: Option<std::sync::Arc<dyn crate::IntervalStream>>,
    /// The mean bytes between two sampled allocation stacks that a built-in worker is
    /// asked for (`BENCHTOP_ALLOC_SAMPLE` in its environment; 0: no stacks); `None`
    /// leaves the worker's default (512 KiB).
    pub alloc_sample_bytes: Option<u64>,
    /// The user's labels (`--label key=value`), kept in session.json.
    pub labels: BTreeMap<String, String>,
    /// The git commit checked out where the run started ([`crate::git::checkout`]), kept
    /// in session.json; `None`: not in a checkout.
    pub git: Option<benchtop_sessions::meta::GitInfo>,
    /// What the caller found before the run that the session must say (a set-user-ID
    /// program that will record nothing): the session's first warnings.
    pub warnings: Vec<String>,
    /// Whether the tree's figures are counted by the kernel (perf counting events on
    /// the whole tree, every thread's life by its records) as well as polled: `false`
    /// leaves the polls alone, as before counting existed, so that a benchmark can
    /// measure what counting costs in one build (`run --polled-figures`, hidden).
    pub count_tree: bool,
}

impl Default for RecordOptions {
    /// The default workload's worker would still need `program` and `args`; every other
    /// field is the command line's default.
    fn default() -> Self {
        RecordOptions {
            target: Target::Worker,
            workload: String::new(),
            params: BTreeMap::new(),
            program: OsString::new(),
            args: Vec::new(),
            command_line: Vec::new(),
            dir: None,
            duration: None,
            interval: Duration::from_secs(1),
            sample_stacks: true,
            sampler: SamplerOptions::default(),
            live: None,
            interrupts: None,
            stream: None,
            alloc_sample_bytes: None,
            labels: BTreeMap::new(),
            git: None,
            warnings: Vec::new(),
            count_tree: true,
        }
    }
}
