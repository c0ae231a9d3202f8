//! The one error type of this crate.

use std::io;

/// What can go wrong running a workload or speaking the worker side of the protocol.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// `BENCHTOP_REPORT_FD` does not name a usable file descriptor.
    #[error("{var}={value:?}: {reason}")]
    BadReportFd {
        /// The variable, [`crate::protocol::REPORT_FD_ENV`].
        var: &'static str,
        /// Its value as found.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// `BENCHTOP_INTERVAL_MS` is not a usable interval.
    #[error("{var}={value:?}: {reason}")]
    BadInterval {
        /// The variable, [`crate::protocol::INTERVAL_MS_ENV`].
        var: &'static str,
        /// Its value as found.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// Writing a message to the report channel failed.
    #[error("writing the {message} message to the report channel: {source}")]
    Report {
        /// Which message (`hello`, `tick`, …).
        message: &'static str,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Reading the conductor's messages on standard input failed.
    #[error("reading conductor messages on standard input: {0}")]
    Stdin(#[source] io::Error),
    /// Standard input ended before the conductor sent `start`.
    #[error("standard input ended before the conductor sent start")]
    NoStart,
    /// A line on standard input is not a conductor message.
    #[error("conductor message line {line}: not a valid message ({text:?}): {source}")]
    BadConductorMessage {
        /// 1-based line number on standard input.
        line: u64,
        /// The start of the line, for the reader.
        text: String,
        /// What the JSON decoder said.
        #[source]
        source: serde_json::Error,
    },
    /// The conductor sent `stop` before `start`: nothing was run.
    #[error("the conductor sent stop before start; nothing was run")]
    StoppedBeforeStart,
    /// A parameter is out of range (parameters built in code rather than parsed by clap).
    #[error("--{name} {value}: {reason}")]
    BadParam {
        /// The parameter's command-line name, e.g. `num-nodes`.
        name: &'static str,
        /// Its value.
        value: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The parameters need more memory than the machine has available (see
    /// [`crate::footprint`]).
    #[error(
        "{what} would need about {} of memory, and this machine has {} available: \
         lower the parameters",
        crate::footprint::human(*estimate_bytes),
        crate::footprint::human(*available_bytes)
    )]
    TooMuchMemory {
        /// What needs it, in the parameters' words (`--mode ask: 10000000000 pending asks`).
        what: String,
        /// The estimate, in bytes.
        estimate_bytes: u64,
        /// What the machine has available, in bytes.
        available_bytes: u64,
    },
    /// A CPU set names CPUs this machine does not have, or cannot be used as asked.
    #[error("--{param} {value}: {reason}")]
    CpuSet {
        /// The parameter, e.g. `server-cpuset`.
        param: &'static str,
        /// The set as given.
        value: String,
        /// What is wrong, naming the CPUs there are.
        reason: String,
    },
    /// Two metrics were registered under one name.
    #[error("metric {name:?} is registered twice")]
    DuplicateMetric {
        /// The name.
        name: String,
    },
    /// A thread could not be started.
    #[error("starting the {thread} thread: {source}")]
    Thread {
        /// The thread's name.
        thread: &'static str,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The tokio runtime could not be built.
    #[error("building a tokio runtime with {threads} thread(s): {source}")]
    Runtime {
        /// Worker threads asked for.
        threads: u16,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A workload task or thread panicked.
    #[error("{what} panicked: {message}")]
    Panicked {
        /// Which task or thread.
        what: String,
        /// The panic message, when it was a string.
        message: String,
    },
    /// A node process could not be started.
    #[error("{workload}: starting node process {node}: {source}")]
    NodeSpawn {
        /// Workload name.
        workload: &'static str,
        /// The node's id.
        node: u32,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A node process ended, or misbehaved, while the main node still needed it.
    #[error("{workload}: node {node} (pid {pid}) {reason}")]
    NodeFailed {
        /// Workload name.
        workload: &'static str,
        /// The node's id.
        node: u32,
        /// Its process id.
        pid: u32,
        /// What happened, e.g. `exited with exit status: 1 before the run was complete`.
        reason: String,
    },
    /// The main node waited longer than its deadline for its node processes.
    #[error("{workload}: no answer from the node processes within {after:?} while {waiting_for}")]
    NodeTimeout {
        /// Workload name.
        workload: &'static str,
        /// What the main node was waiting for.
        waiting_for: String,
        /// The deadline.
        after: std::time::Duration,
    },
    /// A socket between the main node and its node processes failed.
    #[error("{workload}: {context}: {source}")]
    Ipc {
        /// Workload name.
        workload: &'static str,
        /// What was being done, e.g. `writing to node 3`.
        context: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A message between nodes is not what the protocol between them allows.
    #[error("{workload}: {context}: {reason}")]
    BadFrame {
        /// Workload name.
        workload: &'static str,
        /// Where it came from, e.g. `from node 2`.
        context: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A definition does not parse; nothing was built from it.
    #[error("{origin}: {source}")]
    DefsParse {
        /// Where the text came from: a file's path, `generated` or a checkpoint.
        origin: String,
        /// Line, column and reason.
        #[source]
        source: crate::defs::ParseError,
    },
    /// Writing or reading a checkpoint or input file failed.
    #[error("{action} {}: {source}", path.display())]
    File {
        /// What was being done, e.g. `writing checkpoint`.
        action: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A checkpoint's content is not a definition in its format.
    #[error("{format} checkpoint {}: {reason}", path.display())]
    Checkpoint {
        /// `text`, `json` or `binary`.
        format: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// What the decoder said.
        reason: String,
    },
    /// A network socket of a client/server workload (`udp-echo`) failed.
    #[error("{workload}: {context}: {source}")]
    Net {
        /// Workload name.
        workload: &'static str,
        /// What was being done, e.g. `sending to 10.0.0.2:7777`.
        context: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// DPDK (udp-echo `--backend dpdk`) could not be set up or failed: the EAL, its
    /// memory, the memif port or its socket.
    #[error("udp-echo --backend dpdk: {step}: {reason}")]
    Dpdk {
        /// What was being done, e.g. `starting DPDK's EAL`.
        step: &'static str,
        /// What went wrong, and what to do about it where there is something.
        reason: String,
    },
    /// The workload ended in a way it should not have.
    #[error("{workload}: {reason}")]
    Broken {
        /// Workload name.
        workload: &'static str,
        /// What happened.
        reason: String,
    },
}

/// The message of a panic payload, when it is a string.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string payload".to_owned()
    }
}
