//! The whole worker side in one call: `benchtop worker <workload> …` is
//! [`run_worker`] with standard input and standard error.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use crate::WorkloadError;
use crate::protocol::{Hello, PROTOCOL_VERSION, WorkerMessage};
use crate::report::{
    Metrics, Reporter, StopSignal, Ticker, interval_from_env, listen_for_stop, wait_for_start,
};
use crate::ring::{self, RingMetrics, RingParams};

/// A built-in workload with its parameters; a clap subcommand, so the binary embeds it
/// as `benchtop worker <workload> [params]`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Subcommand)]
pub enum Workload {
    /// Actor ring: actors pass one message round a ring, by tell or by ask.
    Ring(RingParams),
}

/// The default workload: the actor ring with its default parameters.
impl Default for Workload {
    fn default() -> Self {
        Workload::Ring(RingParams::default())
    }
}

impl Workload {
    /// The workload's name, as a subcommand and in `hello`.
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Ring(_) => ring::NAME,
        }
    }

    /// The subcommand and arguments that parse back into this workload:
    /// `["ring", "--num-nodes", "5000", …]`.
    pub fn to_args(&self) -> Vec<String> {
        let params = match self {
            Workload::Ring(params) => params.to_args(),
        };
        std::iter::once(self.name().to_owned())
            .chain(params)
            .collect()
    }

    /// The parameters for `hello`, keyed by their command-line names.
    pub fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        match self {
            Workload::Ring(params) => params.params_json(),
        }
    }
}

/// Runs `workload` as a worker: reports go to the descriptor in
/// [`crate::protocol::REPORT_FD_ENV`] (standard output when unset), every
/// [`crate::protocol::INTERVAL_MS_ENV`] milliseconds; conductor messages come from
/// `input`; the summary lines go to `log`.
///
/// See [`run_worker_with`] for the sequence.
pub fn run_worker(
    workload: &Workload,
    input: impl BufRead + Send + 'static,
    log: &mut dyn Write,
) -> Result<(), WorkloadError> {
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
/// `error` message is sent before the error is returned.
pub fn run_worker_with(
    workload: &Workload,
    reporter: Arc<Reporter>,
    interval: Duration,
    input: impl BufRead + Send + 'static,
    log: &mut dyn Write,
) -> Result<(), WorkloadError> {
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
    let mut metrics = Metrics::new();
    let registered = match workload {
        Workload::Ring(params) => (params, RingMetrics::register(&mut metrics)?),
    };
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
    let (params, ring_metrics) = registered;
    let outcome = ring::run(params, &ring_metrics, &stop);
    let ticked = ticker.finish();
    let outcome = outcome?;
    ticked?;

    reporter.send(&WorkerMessage::Summary(ring::summary(&outcome)))?;
    for line in ring::summary_lines(&outcome) {
        let _ = writeln!(log, "{line}");
    }
    if outcome.stopped {
        let _ = writeln!(
            log,
            "stopped early: {} of {} hops",
            outcome.final_sum,
            params.total_hops()
        );
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
