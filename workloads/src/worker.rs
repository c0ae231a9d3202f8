//! The whole worker side in one call: `benchtop worker <workload> …` is
//! [`run_worker`] with standard input and standard error.
//!
//! The same entry point runs the node processes of the workloads that span processes
//! (`worker ipc-node …`, a hidden [`Workload`]): a node says no `hello` and writes no
//! report; it only serves its main node.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use crate::WorkloadError;
pub use crate::builtin::BuiltIn;
use crate::defs::DefsParams;
use crate::echo::EchoParams;
pub use crate::ipc::set_process_name;
use crate::ipc::{self, NodeParams};
#[cfg(feature = "kvstore")]
use crate::kvstore::KvParams;
use crate::messenger::MsgrParams;
use crate::protocol::{Hello, PROTOCOL_VERSION, WorkerMessage};
use crate::report::{
    Metrics, Reporter, StopSignal, Ticker, interval_from_env, listen_for_stop, wait_for_start,
};
use crate::ring::RingParams;
use crate::storm::StormParams;

/// A built-in workload with its parameters; a clap subcommand, so the binary embeds it
/// as `benchtop worker <workload> [params]`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Subcommand)]
pub enum Workload {
    /// Actor ring: actors pass one message round a ring, by tell or by ask, in one
    /// process or (--transport ipc) across processes.
    Ring(RingParams),
    /// Node processes storm the main node with messages, which it sums.
    Storm(StormParams),
    /// gRPC key-value service with simulated work (writes 50 ms, reads 10 ms) and its
    /// clients.
    #[cfg(feature = "kvstore")]
    Kvstore(KvParams),
    /// An ecFlow definition parsed, checkpointed and reloaded; --server-sim: checkpoints
    /// under request load.
    Defs(DefsParams),
    /// Echo round trips and throughput over UDP or TCP, after Demikernel's experiments.
    #[command(name = "udp-echo")]
    UdpEcho(EchoParams),
    /// Echo messenger: a shard-per-core (crimson) or shared-pool (async) server and
    /// clients at queue depth, with per-second IOPS, latency and server CPU%.
    Messenger(MsgrParams),
    /// A node process of `ring --transport ipc` or `storm`, started by its main node.
    #[command(hide = true, name = "ipc-node")]
    IpcNode(NodeParams),
}

/// The default workload: the actor ring with its default parameters.
impl Default for Workload {
    fn default() -> Self {
        Workload::Ring(RingParams::default())
    }
}

impl Workload {
    /// The workload's description: its parameters, which say everything else.
    pub fn builtin(&self) -> &dyn BuiltIn {
        match self {
            Workload::Ring(params) => params,
            Workload::Storm(params) => params,
            #[cfg(feature = "kvstore")]
            Workload::Kvstore(params) => params,
            Workload::Defs(params) => params,
            Workload::UdpEcho(params) => params,
            Workload::Messenger(params) => params,
            Workload::IpcNode(params) => params,
        }
    }

    /// The workload's name, as a subcommand and in `hello`.
    pub fn name(&self) -> &'static str {
        self.builtin().name()
    }

    /// Whether this is a node process rather than a measured workload (it reports
    /// nothing; a conductor should not start it).
    pub fn is_node(&self) -> bool {
        matches!(self, Workload::IpcNode(_))
    }

    /// Whether every frame of this workload keeps frame pointers, so that the kernel's
    /// frame-pointer callchain walks its stacks whole. benchtop's own code does (the
    /// workspace builds with them); udp-echo over DPDK does not: its poll-mode drivers and
    /// libraries are the system's DPDK (Debian's is built without them).
    pub fn keeps_frame_pointers(&self) -> bool {
        match self {
            Workload::UdpEcho(params) => params.backend != crate::echo::Backend::Dpdk,
            _ => true,
        }
    }

    /// Checks what clap cannot: combinations of parameters (e.g. `--crash-after` without
    /// `--transport ipc`). [`run_worker`] checks too, before `hello`; a conductor can
    /// call this first to refuse a bad command line at once.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        self.builtin().validate()
    }

    /// The subcommand and arguments that parse back into this workload:
    /// `["ring", "--num-nodes", "5000", …]`.
    pub fn to_args(&self) -> Vec<String> {
        let builtin = self.builtin();
        std::iter::once(builtin.name().to_owned())
            .chain(builtin.to_args())
            .collect()
    }

    /// The parameters for `hello`, keyed by their command-line names.
    pub fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        self.builtin().params_json()
    }
}

/// Runs `workload` as a worker: reports go to the descriptor in
/// [`crate::protocol::REPORT_FD_ENV`] (standard output when unset), every
/// [`crate::protocol::INTERVAL_MS_ENV`] milliseconds; conductor messages come from
/// `input`; the summary lines go to `log`.
///
/// See [`run_worker_with`] for the sequence. A node process ([`Workload::IpcNode`]) only
/// runs its node: no reporter, no `hello`.
pub fn run_worker(
    workload: &Workload,
    input: impl BufRead + Send + 'static,
    log: &mut dyn Write,
) -> Result<(), WorkloadError> {
    if let Workload::IpcNode(params) = workload {
        return ipc::run_node(params);
    }
    let reporter = Arc::new(Reporter::from_env()?);
    let interval = match interval_from_env() {
        Ok(interval) => interval,
        Err(e) => return Err(report_error(&reporter, e)),
    };
    run_worker_with(workload, reporter, interval, input, log)
}

/// [`run_worker`] with the reporter and interval given rather than taken from the
/// environment.
///
/// Sends `hello` and `ready`, waits for `start` on `input`, then starts the stop
/// listener (on the rest of `input`) and the ticker, runs the workload, sends the final
/// tick and the `summary`, and writes the summary lines to `log`. Threads are created
/// only after `start`. A `stop` ends the run early with a partial summary; a `stop`
/// before `start` ends the worker without one, successfully. On any other failure an
/// `error` message is sent before the error is returned. Parameters are validated before
/// `hello`.
///
/// `--crash-after` is the one deliberate panic: it unwinds out of this function (and,
/// from `main`, ends the process), leaving the workload's node processes behind.
pub fn run_worker_with(
    workload: &Workload,
    reporter: Arc<Reporter>,
    interval: Duration,
    input: impl BufRead + Send + 'static,
    log: &mut dyn Write,
) -> Result<(), WorkloadError> {
    if let Workload::IpcNode(params) = workload {
        return ipc::run_node(params);
    }
    match drive(workload, &reporter, interval, input, log) {
        Ok(()) => Ok(()),
        Err(WorkloadError::StoppedBeforeStart) => {
            // The log is for people; failing to write it is no reason to fail the run.
            let _ = writeln!(log, "{}: stopped before start", workload.name());
            Ok(())
        }
        Err(e) => Err(report_error(&reporter, e)),
    }
}

/// Sends an `error` message for `error` (best effort: the channel may be what failed).
fn report_error(reporter: &Reporter, error: WorkloadError) -> WorkloadError {
    let _ = reporter.send(&WorkerMessage::Error {
        message: error.to_string(),
    });
    error
}

fn drive(
    workload: &Workload,
    reporter: &Arc<Reporter>,
    interval: Duration,
    mut input: impl BufRead + Send + 'static,
    log: &mut dyn Write,
) -> Result<(), WorkloadError> {
    workload.validate()?;
    let mut metrics = Metrics::new();
    let prepared = workload.builtin().prepare(&mut metrics)?;
    if crate::alloc::is_enabled() {
        metrics.alloc_counters()?;
    }
    reporter.send(&WorkerMessage::Hello(Hello {
        protocol: PROTOCOL_VERSION,
        workload: workload.name().to_owned(),
        params: workload.params_json(),
        metrics: metrics.describe(),
    }))?;
    reporter.send(&WorkerMessage::Ready)?;

    let start = wait_for_start(&mut input)?;
    let stop = StopSignal::new();
    listen_for_stop(input, stop.clone())?;
    let ticker = Ticker::start(reporter.clone(), &metrics, interval, start, stop.clone())?;
    let finished = prepared.run(&stop, reporter, start);
    let ticked = ticker.finish();
    let finished = finished?;
    ticked?;

    let lines = finished.summary.lines.clone();
    reporter.send(&WorkerMessage::Summary(finished.summary))?;
    for line in lines {
        let _ = writeln!(log, "{line}");
    }
    if let Some(note) = finished.stopped_note {
        let _ = writeln!(log, "{note}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::test_support::SharedBuf;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        workload: Workload,
    }

    #[test]
    fn to_args_parses_back_to_the_same_workload() {
        let workload = Workload::Ring(RingParams {
            num_nodes: 3,
            ..RingParams::default()
        });
        let args = workload.to_args();
        assert_eq!(args[0], "ring");
        let cli = Cli::try_parse_from(std::iter::once("worker".to_owned()).chain(args)).unwrap();
        assert_eq!(cli.workload, workload);
        assert_eq!(workload.params_json()["num-nodes"], 3);
    }

    #[test]
    fn only_the_dpdk_echo_runs_code_without_frame_pointers() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("worker").chain(args.iter().copied()))
                .unwrap()
                .workload
        };
        assert!(!parse(&["udp-echo", "--backend", "dpdk"]).keeps_frame_pointers());
        for args in [
            &["udp-echo", "--backend", "poll"][..],
            &["udp-echo"],
            &["ring"],
        ] {
            assert!(parse(args).keeps_frame_pointers(), "{args:?}");
        }
    }

    #[test]
    fn stop_before_start_ends_quietly_without_a_summary() {
        let out = SharedBuf::default();
        let mut log = Vec::new();
        run_worker_with(
            &Workload::Ring(RingParams::default()),
            Arc::new(Reporter::new(out.clone())),
            Duration::from_secs(1),
            &b"{\"type\":\"stop\"}\n"[..],
            &mut log,
        )
        .unwrap();
        let out = out.text();
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(out.contains("hello") && out.contains("ready") && !out.contains("summary"));
        assert!(
            String::from_utf8(log)
                .unwrap()
                .contains("stopped before start")
        );
    }

    #[test]
    fn garbage_instead_of_start_is_reported_as_an_error_message() {
        let out = SharedBuf::default();
        let err = run_worker_with(
            &Workload::Ring(RingParams::default()),
            Arc::new(Reporter::new(out.clone())),
            Duration::from_secs(1),
            &b"begin\n"[..],
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(matches!(err, WorkloadError::BadConductorMessage { .. }));
        let out = out.text();
        let last = out.lines().last().unwrap();
        assert!(
            last.starts_with("{\"type\":\"error\"") && last.contains("line 1"),
            "{last}"
        );
    }
}
