//! Each built-in workload described once, behind one trait: [`BuiltIn`] gives its name,
//! the checks clap cannot make, the arguments and the `hello` parameters of its values,
//! and how it runs once its metrics are registered, with the summary it ends on.
//!
//! The worker's entry points ([`crate::worker`]) and the [`Workload`](crate::worker::Workload)
//! enum go through it, so adding a workload is one parameters type (a clap `Args`), one
//! variant and one `impl BuiltIn` here; nothing else matches on the workloads.

use std::collections::BTreeMap;

use crate::WorkloadError;
use crate::defs::{self, DefsMetrics, DefsParams};
use crate::echo::{self, EchoMetrics, EchoParams};
use crate::ipc::NodeParams;
#[cfg(feature = "kvstore")]
use crate::kvstore::{self, KvMetrics, KvParams};
use crate::messenger::{self, MsgrMetrics, MsgrParams};
pub use crate::params::{args_of, as_humantime, as_humantime_opt, as_ms, as_s, json_of};
use crate::protocol::Summary;
use crate::report::{Metrics, Reporter, Start, StopSignal};
use crate::ring::{self, RingMetrics, RingParams};
use crate::storm::{self, StormMetrics, StormParams};

/// A built-in workload's parameters, and with them the workload.
pub trait BuiltIn: std::fmt::Debug + Sync {
    /// Its name: the subcommand, and the workload `hello` names.
    fn name(&self) -> &'static str;

    /// Checks what clap cannot: combinations of parameters, ranges of values built in
    /// code.
    fn validate(&self) -> Result<(), WorkloadError>;

    /// The arguments (after the subcommand) that parse back into these parameters.
    fn to_args(&self) -> Vec<String>;

    /// The parameters for `hello` (and session.json), keyed by their command-line names.
    fn params_json(&self) -> BTreeMap<String, serde_json::Value>;

    /// Registers its metrics (before `hello`) and returns the run to start once the
    /// conductor says `start`.
    fn prepare<'a>(&'a self, metrics: &mut Metrics) -> Result<Box<dyn Run + 'a>, WorkloadError>;
}

/// A workload ready to run: its metrics are registered.
pub trait Run {
    /// Runs it until it is done or `stop` is raised; `start` is when the conductor said
    /// `start`.
    fn run(
        &self,
        stop: &StopSignal,
        reporter: &Reporter,
        start: Start,
    ) -> Result<Finished, WorkloadError>;
}

/// What a finished run reports: its summary, and what the log says besides it.
#[derive(Debug)]
pub struct Finished {
    /// The summary for the conductor (and its lines for the log).
    pub summary: Summary,
    /// Why the run ended early, when it was stopped.
    pub stopped_note: Option<String>,
}

/// The run of `params` with its registered `metrics`, by `body`.
struct Prepared<'a, P, M> {
    params: &'a P,
    metrics: M,
    body: RunFn<P, M>,
}

type RunFn<P, M> = fn(&P, &M, &StopSignal, &Reporter, Start) -> Result<Finished, WorkloadError>;

impl<P, M> Run for Prepared<'_, P, M> {
    fn run(
        &self,
        stop: &StopSignal,
        reporter: &Reporter,
        start: Start,
    ) -> Result<Finished, WorkloadError> {
        (self.body)(self.params, &self.metrics, stop, reporter, start)
    }
}

fn prepared<'a, P: 'a, M: 'a>(params: &'a P, metrics: M, body: RunFn<P, M>) -> Box<dyn Run + 'a> {
    Box::new(Prepared {
        params,
        metrics,
        body,
    })
}

/// The parameters' own checks, arguments and JSON, which each type keeps beside its
/// definition.
macro_rules! described_by_params {
    ($name:expr) => {
        fn name(&self) -> &'static str {
            $name
        }
        fn validate(&self) -> Result<(), WorkloadError> {
            Self::validate(self)
        }
        fn to_args(&self) -> Vec<String> {
            Self::to_args(self)
        }
        fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
            Self::params_json(self)
        }
    };
}

impl BuiltIn for RingParams {
    described_by_params!(ring::NAME);

    fn prepare<'a>(&'a self, metrics: &mut Metrics) -> Result<Box<dyn Run + 'a>, WorkloadError> {
        let metrics = RingMetrics::register(metrics)?;
        Ok(prepared(self, metrics, |params, metrics, stop, _, _| {
            let outcome = ring::run(params, metrics, stop)?;
            Ok(Finished {
                summary: ring::summary(&outcome),
                stopped_note: outcome.stopped.then(|| {
                    format!(
                        "stopped early: {} of {} hops",
                        outcome.final_sum,
                        params.total_hops()
                    )
                }),
            })
        }))
    }
}

impl BuiltIn for StormParams {
    described_by_params!(storm::NAME);

    fn prepare<'a>(&'a self, metrics: &mut Metrics) -> Result<Box<dyn Run + 'a>, WorkloadError> {
        let metrics = StormMetrics::register(metrics)?;
        Ok(prepared(self, metrics, |params, metrics, stop, _, _| {
            let outcome = storm::run(params, metrics, stop)?;
            Ok(Finished {
                summary: storm::summary(&outcome),
                stopped_note: outcome.stopped.then(|| {
                    format!(
                        "stopped early: {} of {} messages",
                        outcome.final_sum,
                        params.total_messages()
                    )
                }),
            })
        }))
    }
}

#[cfg(feature = "kvstore")]
impl BuiltIn for KvParams {
    described_by_params!(kvstore::NAME);

    fn prepare<'a>(&'a self, metrics: &mut Metrics) -> Result<Box<dyn Run + 'a>, WorkloadError> {
        let metrics = KvMetrics::register(metrics)?;
        Ok(prepared(self, metrics, |params, metrics, stop, _, _| {
            let outcome = kvstore::run(params, metrics, stop)?;
            Ok(Finished {
                summary: kvstore::summary(&outcome),
                stopped_note: outcome
                    .stopped
                    .then(|| "stopped before the duration".to_owned()),
            })
        }))
    }
}

impl BuiltIn for DefsParams {
    described_by_params!(defs::NAME);

    fn prepare<'a>(&'a self, metrics: &mut Metrics) -> Result<Box<dyn Run + 'a>, WorkloadError> {
        let metrics = DefsMetrics::register(metrics, self)?;
        Ok(prepared(
            self,
            metrics,
            |params, metrics, stop, reporter, start| {
                let outcome = defs::run(params, metrics, stop, reporter, start)?;
                Ok(Finished {
                    summary: defs::summary(&outcome),
                    stopped_note: outcome
                        .stopped
                        .then(|| format!("stopped early after {} phases", outcome.phases.len())),
                })
            },
        ))
    }
}

impl BuiltIn for EchoParams {
    described_by_params!(echo::NAME);

    fn prepare<'a>(&'a self, metrics: &mut Metrics) -> Result<Box<dyn Run + 'a>, WorkloadError> {
        let metrics = EchoMetrics::register(metrics)?;
        Ok(prepared(
            self,
            metrics,
            |params, metrics, stop, reporter, start| {
                let outcome = echo::run(params, metrics, stop, reporter, start)?;
                Ok(Finished {
                    summary: echo::summary(&outcome),
                    stopped_note: outcome.stopped.then(|| "stopped early".to_owned()),
                })
            },
        ))
    }
}

impl BuiltIn for MsgrParams {
    described_by_params!(messenger::NAME);

    fn prepare<'a>(&'a self, metrics: &mut Metrics) -> Result<Box<dyn Run + 'a>, WorkloadError> {
        let metrics = MsgrMetrics::register(metrics, self)?;
        Ok(prepared(self, metrics, |params, metrics, stop, _, _| {
            let outcome = messenger::run(params, metrics, stop)?;
            Ok(Finished {
                summary: messenger::summary(&outcome),
                stopped_note: outcome
                    .stopped
                    .then(|| "stopped before the message time".to_owned()),
            })
        }))
    }
}

/// A node process: started by its main node with these parameters, it is no workload of
/// its own and cannot be run as a worker.
impl BuiltIn for NodeParams {
    fn name(&self) -> &'static str {
        "ipc-node"
    }

    fn validate(&self) -> Result<(), WorkloadError> {
        Ok(())
    }

    fn to_args(&self) -> Vec<String> {
        NodeParams::to_args(self)
    }

    fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        NodeParams::params_json(self)
    }

    fn prepare<'a>(&'a self, _: &mut Metrics) -> Result<Box<dyn Run + 'a>, WorkloadError> {
        Err(WorkloadError::Broken {
            workload: "ipc-node",
            reason: "a node process is started by its main node, not run as a worker".to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use crate::worker::Workload;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        workload: Workload,
    }

    #[test]
    fn every_workload_is_named_as_its_subcommand_and_its_arguments_parse_back() {
        let cmd = Cli::command();
        let names: Vec<&str> = cmd
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name())
            .collect();
        assert!(names.len() >= 5 && names.contains(&"ring"), "{names:?}");
        for name in names {
            let workload = Cli::try_parse_from(["worker", name])
                .unwrap_or_else(|e| panic!("{name} with its defaults: {e}"))
                .workload;
            assert_eq!(workload.name(), name);
            assert!(workload.validate().is_ok(), "{name}: defaults are valid");
            let args = workload.to_args();
            assert_eq!(args[0], name);
            let back = Cli::try_parse_from(std::iter::once("worker".to_owned()).chain(args))
                .unwrap_or_else(|e| panic!("{name}: its arguments parse back: {e}"))
                .workload;
            assert_eq!(back, workload, "{name}");
            assert_eq!(back.params_json(), workload.params_json(), "{name}");
        }
    }
}
