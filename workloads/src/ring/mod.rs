//! `ring`: the actor ring benchmark of the `factor` actor framework
//! (`example_ring_tell`, `example_ring_ask`, and across processes
//! `example_ipc_remote_ring`).
//!
//! With `--transport ipc` the ring's members are processes instead of tasks: see
//! [`ipc`](self#across-processes---transport-ipc) below. What follows up to there is the
//! in-process ring, the default.
//!
//! `num_nodes` actors — each a tokio task with its own unbounded FIFO mailbox, which any
//! actor can send to — form a ring. One message starts at node 0 with the value 0 and is
//! passed on hop by hop, each hop adding one, until `num_nodes × num_rounds` hops have
//! passed; the final sum is then `num_nodes × num_rounds`.
//!
//! - **tell**: each actor sends the next one a message and forgets it.
//! - **ask**: each actor *asks* the next one and replies to its own asker only when the
//!   next one has replied, so asks pile up along the whole run: at the deepest point
//!   `num_nodes × num_rounds` are pending at once (the original's ~5 GB case at 10 M).
//!   An actor must not block its mailbox while it waits (the ring wraps round to it), so
//!   each pending ask is a continuation the actor keeps: 8 bytes in a per-actor slab
//!   (asker, asker's correlation id), found again by the correlation id the reply
//!   carries — not a spawned task and a oneshot channel per ask.
//!
//! Measured work — creating the actors and passing the message — starts after `start`,
//! and so do all the threads (the runtime's, the ticker's, the stdin reader's), since
//! perf's inherit follows only threads created after it attached.
//!
//! Memory per actor is what tell mode is made of: a tokio task whose future is the actor
//! itself (24 bytes, so tokio's task cell stays at its 128-byte minimum) and a mailbox of
//! 88 bytes (a mutex round the oldest message, an overflow queue that stays unallocated
//! while the ring passes one message, and the waiting actor's waker; see `mailbox`):
//! ~330 bytes an actor with the allocator's gaps, against ~1,440 with a tokio mpsc
//! channel per actor and a join set.
//!
//! Measured (2-vCPU Xeon VM, current-thread runtime, 5000 × 2000, medians of 7 runs
//! interleaved with the tokio-channel version's):
//! `cargo run --release -p benchtop-workloads --example ring [-- --mode ask]`: tell 1.17 s
//! (8.5 M messages/s) and 5.0 MiB peak RSS (the original: 9.1 s, 13 MB; tokio channels:
//! 1.59 s, 11.5 MiB); ask 3.4 s (5.8 M messages/s) and 84 MiB (the original: 19.1 s,
//! ~5 GB; tokio channels: 6.3 s, 96.6 MiB), i.e. 8.8 bytes of peak RSS per pending ask.
//! Through the worker (`benchtop run ring -q --record DIR`, then `benchtop show DIR`),
//! whose own floor is ~5 MiB: tell 7.0 MiB (was 13.2), ask 87 MiB (was 99.5). Per actor:
//! `--num-nodes 1000000 --num-rounds 1` prints `bytes_per_actor_above_baseline`. Two
//! runtime threads are slower for both modes (tell ~1.6 s, ask ~4.5 s): with one message
//! in flight they only add cross-thread wake-ups, hence the default of 1.
//!
//! Metrics: counter `messages` (hops so far: in ask mode asks and replies both hop) and
//! histogram `lap` (nanoseconds between two forward passes of the message at node 0, i.e.
//! per `num_nodes` hops: in ask mode the replies' passes as the chain unwinds are not
//! timed, [`LAP_VERSION`]). The stop signal is checked at node 0 on each pass.
//!
//! # Across processes (`--transport ipc`)
//!
//! The worker is the main node, member 0 of the ring, and starts members 1 …
//! `num_nodes − 1` as node processes joined by Unix stream sockets ([`crate::ipc`]), as
//! the original counted them: its `--num-nodes 5` is a ring of the main node and four
//! node processes. Every member adds one as it passes the message on, so a full run ends
//! with `num_nodes × num_rounds` here too, which the main node checks lap by lap.
//! `--mode ask` (or the original's `--send-ask 1`) keeps every ask pending until the whole
//! chain unwinds. The summary is the original's: `send_ask`, `num_ring_rounds`,
//! `num_nodes`, `time_taken_to_spawn_worker_nodes`, `ring_complete_final_sum`,
//! `time_taken_for_ring_messaging_to_complete`, then `messages_per_second`. The metrics
//! are the same as in-process, counted at the main node. `--crash-after N` makes the main
//! node panic after N messages and leave its node processes behind (the fault the
//! reaper is for). Defaults with ipc: 20 members, 1000 rounds (the original's runs).
//!
//! ```
//! use benchtop_workloads::report::{Metrics, StopSignal};
//! use benchtop_workloads::ring::{self, RingMetrics, RingMode, RingParams};
//!
//! let params = RingParams { num_nodes: 50, num_rounds: 20, mode: RingMode::Ask, ..RingParams::default() };
//! let metrics = RingMetrics::register(&mut Metrics::new())?;
//! let outcome = ring::run(&params, &metrics, &StopSignal::new())?;
//! assert_eq!(outcome.final_sum, 1000);
//! assert_eq!(ring::summary_lines(&outcome)[3], "final_sum_after_ring_messaging: 1000");
//! # Ok::<(), benchtop_workloads::WorkloadError>(())
//! ```

mod actors;
mod ipc;
mod mailbox;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::WorkloadError;
use crate::ipc::MAX_NODES;
use crate::protocol::{Better, Figure, Summary};
use crate::report::{Counter, IntervalHistogram, Metrics, StopSignal};

/// The workload's name on the command line and in `hello`.
pub const NAME: &str = "ring";

/// Parameters of the ring, with the original benchmark's names.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct RingParams {
    /// Members of the ring: actors, or with --transport ipc the main node and its
    /// node processes [ipc default: 20]
    #[arg(long, default_value_t = 5000,
          default_value_if("transport", "ipc", IPC_DEFAULT_NODES),
          value_parser = clap::value_parser!(u32).range(1..i64::from(u32::MAX)))]
    pub num_nodes: u32,
    /// Times the message goes round the ring [ipc default: 1000]
    #[arg(long, default_value_t = 2000,
          default_value_if("transport", "ipc", IPC_DEFAULT_ROUNDS),
          value_parser = clap::value_parser!(u32).range(1..))]
    pub num_rounds: u32,
    /// How each hop passes the message on; `--send-ask 0|1` is the same choice, as the
    /// ipc original spelled it
    #[arg(long, visible_alias = "send-ask", value_enum, default_value_t = RingMode::Tell)]
    pub mode: RingMode,
    /// Tokio worker threads (inproc); 1 runs a current-thread runtime, the fastest for a
    /// ring (one message in flight: more threads only add wake-ups)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub runtime_threads: u16,
    /// Where the members run: tasks of one runtime (inproc), or the main node and node
    /// processes joined by Unix sockets (ipc)
    #[arg(long, value_enum, default_value_t = Transport::Inproc)]
    #[serde(skip_serializing_if = "Transport::is_inproc")]
    pub transport: Transport,
    /// Fault injection (ipc): the main node panics after this many messages, leaving its
    /// node processes behind (for the reaper)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash_after: Option<u64>,
}

/// What the `lap` histogram times, as ask mode's `hello` says under `lap-version`: one
/// value per full round of the message forward at node 0, in every mode and transport.
/// Ask-mode sessions recorded before (no `lap-version`, version 1) timed the replies'
/// passes at node 0 as they unwound too, two values a round; tell mode's laps never
/// changed, so its parameters carry no version.
pub const LAP_VERSION: u32 = 2;

/// `--num-nodes` with `--transport ipc` when not given: the original's ipc runs.
const IPC_DEFAULT_NODES: &str = "20";
/// `--num-rounds` with `--transport ipc` when not given.
const IPC_DEFAULT_ROUNDS: &str = "1000";

/// Where the ring's members run.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Tokio tasks with mailboxes, in the worker.
    #[default]
    Inproc,
    /// The worker and node processes, joined by Unix stream sockets.
    Ipc,
}

impl Transport {
    /// The command-line name.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Inproc => "inproc",
            Transport::Ipc => "ipc",
        }
    }

    /// Whether this is the in-process default (left out of `hello`, as before there was
    /// a choice).
    pub fn is_inproc(&self) -> bool {
        *self == Transport::Inproc
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Default for RingParams {
    fn default() -> Self {
        RingParams {
            num_nodes: 5000,
            num_rounds: 2000,
            mode: RingMode::Tell,
            runtime_threads: 1,
            transport: Transport::Inproc,
            crash_after: None,
        }
    }
}

/// How each hop passes the message.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum RingMode {
    /// Fire and forget (`0` is the original's `--send-ask 0`).
    #[default]
    #[value(alias = "0")]
    Tell,
    /// Ask the next actor and await its reply before replying to one's own asker (`1`).
    #[value(alias = "1")]
    Ask,
}

impl RingMode {
    /// The command-line name.
    pub fn as_str(self) -> &'static str {
        match self {
            RingMode::Tell => "tell",
            RingMode::Ask => "ask",
        }
    }
}

impl std::fmt::Display for RingMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RingParams {
    /// The command-line arguments that parse back into these parameters, derived from
    /// the clap definition and the serde form ([`crate::params::args_of`]).
    pub fn to_args(&self) -> Vec<String> {
        crate::params::args_of(self)
    }

    /// The parameters for `hello`, keyed by their command-line names: the serde form. The in-process
    /// default leaves `transport` out (serde skips it), so its `hello` reads as it always
    /// has.
    ///
    /// Ask mode adds `lap-version` ([`LAP_VERSION`]): what its `lap` histogram times
    /// changed, and sessions recorded before have none.
    pub fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        let mut json = crate::params::json_of(self);
        if self.mode == RingMode::Ask {
            json.insert("lap-version".into(), LAP_VERSION.into());
        }
        json
    }

    /// Hops of a complete run: `num_nodes × num_rounds`, the expected final sum.
    pub fn total_hops(&self) -> u64 {
        u64::from(self.num_nodes) * u64::from(self.num_rounds)
    }

    /// The memory an in-process ring takes before its first hop: its actors, at the cost
    /// measured above rounded up (330 bytes an actor). Ask mode's pending asks come on top
    /// as the run goes (8.8 bytes each, `num_nodes × num_rounds` at the deepest point of a
    /// run to completion); a ring meant to be stopped early (`--duration`, Ctrl-C) may ask
    /// for more rounds than the machine could hold, so they are not refused.
    pub fn estimated_bytes(&self) -> u64 {
        const ACTOR_BYTES: u64 = 400;
        u64::from(self.num_nodes).saturating_mul(ACTOR_BYTES)
    }

    /// Checks what clap checks, for parameters built in code, and that the ring fits in
    /// the memory this machine has available ([`crate::footprint`]).
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |name, value: &dyn ToString, reason| WorkloadError::BadParam {
            name,
            value: value.to_string(),
            reason,
        };
        if self.num_nodes == 0 {
            return Err(bad(
                "num-nodes",
                &self.num_nodes,
                "a ring needs at least 1 node",
            ));
        }
        if self.num_nodes == u32::MAX {
            return Err(bad(
                "num-nodes",
                &self.num_nodes,
                "actor addresses are 32-bit: at most 4294967294 nodes",
            ));
        }
        if self.num_rounds == 0 {
            return Err(bad("num-rounds", &self.num_rounds, "must be at least 1"));
        }
        if self.runtime_threads == 0 {
            return Err(bad(
                "runtime-threads",
                &self.runtime_threads,
                "must be at least 1",
            ));
        }
        match self.transport {
            Transport::Inproc => {
                if let Some(n) = self.crash_after {
                    return Err(bad(
                        "crash-after",
                        &n,
                        "needs --transport ipc: only node processes can be left behind",
                    ));
                }
            }
            Transport::Ipc => {
                if self.num_nodes < 2 {
                    return Err(bad(
                        "num-nodes",
                        &self.num_nodes,
                        "with --transport ipc the ring needs at least 2 members: the main \
                         node and one node process",
                    ));
                }
                if self.num_nodes > MAX_NODES + 1 {
                    return Err(bad(
                        "num-nodes",
                        &self.num_nodes,
                        "with --transport ipc each member but the main node is a process: \
                         at most 1001 members",
                    ));
                }
                if self.runtime_threads != 1 {
                    return Err(bad(
                        "runtime-threads",
                        &self.runtime_threads,
                        "applies to --transport inproc only (ipc members are \
                         single-threaded processes)",
                    ));
                }
                if self.crash_after == Some(0) {
                    return Err(bad("crash-after", &0, "must be at least 1"));
                }
            }
        }
        if self.transport == Transport::Inproc {
            crate::footprint::check(
                &format!("a ring of {} actors", self.num_nodes),
                self.estimated_bytes(),
            )?;
        }
        Ok(())
    }
}

/// The ring's metrics, registered in a worker's [`Metrics`]. One set per run.
#[derive(Debug, Clone)]
pub struct RingMetrics {
    /// `messages`: hops so far (asks and replies both hop).
    pub messages: Arc<Counter>,
    /// `lap`: nanoseconds between two passes of the message at node 0.
    pub lap: Arc<IntervalHistogram>,
}

impl RingMetrics {
    /// Registers `messages` and `lap`.
    pub fn register(metrics: &mut Metrics) -> Result<Self, WorkloadError> {
        Ok(RingMetrics {
            messages: metrics.counter(
                "messages",
                "messages",
                "messages passed from actor to actor so far (ask: asks and replies)",
            )?,
            lap: metrics.histogram(
                "lap",
                "time for the message to go once round the ring (num-nodes hops), \
                 recorded at node 0 each time the message passes it",
            )?,
        })
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Outcome {
    /// The parameters run.
    pub params: RingParams,
    /// Creating the mailboxes and spawning the actors; with ipc, starting the node
    /// processes until a ping went round the ring.
    pub node_creation: Duration,
    /// From the first message to the end (or to the stop).
    pub ring_messaging: Duration,
    /// The value the message reached: `num_nodes × num_rounds` for a complete run.
    pub final_sum: u64,
    /// Messages passed from actor to actor (ask: asks and replies).
    pub messages: u64,
    /// Whether the run was stopped before it completed.
    pub stopped: bool,
    /// In-process ask mode with the counting allocator on (a worker), run to the end: the
    /// bytes live when every ask was pending (the last ask's arrival) less those live
    /// once the ring was built, divided by the asks then pending (`num_nodes ×
    /// num_rounds`). The continuation slabs' growth, which `live.folded` attributes.
    pub bytes_per_pending_ask: Option<f64>,
}

impl Outcome {
    /// Messages per second of ring messaging.
    pub fn messages_per_second(&self) -> f64 {
        let secs = self.ring_messaging.as_secs_f64();
        if secs > 0.0 {
            self.messages as f64 / secs
        } else {
            0.0
        }
    }

    /// The summary figures, in the order the original printed them, then
    /// `messages_per_second`. (The mode is a parameter, not a figure.)
    pub fn figures(&self) -> Vec<Figure> {
        let names = FigureNames::of(self.params.transport);
        vec![
            Figure::new("num_ring_rounds", f64::from(self.params.num_rounds), ""),
            Figure::new("num_nodes", f64::from(self.params.num_nodes), ""),
            Figure::new(names.creation, self.node_creation.as_secs_f64(), "s")
                .better(Better::Lower),
            Figure::new(names.final_sum, self.final_sum as f64, ""),
            Figure::new(names.messaging, self.ring_messaging.as_secs_f64(), "s")
                .better(Better::Lower),
            Figure::new(
                "messages_per_second",
                self.messages_per_second(),
                "messages/s",
            )
            .better(Better::Higher),
        ]
        .into_iter()
        .chain(
            self.bytes_per_pending_ask
                .map(|b| Figure::new("bytes_per_pending_ask", b, "bytes").better(Better::Lower)),
        )
        .collect()
    }
}

/// The names the original gave its figures: `example_ring_*` in-process,
/// `example_ipc_remote_ring` across processes.
struct FigureNames {
    creation: &'static str,
    final_sum: &'static str,
    messaging: &'static str,
}

impl FigureNames {
    fn of(transport: Transport) -> FigureNames {
        match transport {
            Transport::Inproc => FigureNames {
                creation: "time_taken_for_node_creation",
                final_sum: "final_sum_after_ring_messaging",
                messaging: "time_taken_for_ring_messaging",
            },
            Transport::Ipc => FigureNames {
                creation: "time_taken_to_spawn_worker_nodes",
                final_sum: "ring_complete_final_sum",
                messaging: "time_taken_for_ring_messaging_to_complete",
            },
        }
    }
}

/// The protocol summary of a run.
pub fn summary(outcome: &Outcome) -> Summary {
    Summary {
        figures: outcome.figures(),
        lines: summary_lines(outcome),
    }
}

/// The summary as the original printed it, one `name: value` line per figure; with ipc,
/// the original's `send_ask` line first and `transport: ipc` last.
pub fn summary_lines(outcome: &Outcome) -> Vec<String> {
    let params = &outcome.params;
    let names = FigureNames::of(params.transport);
    let mut lines = Vec::with_capacity(8);
    if params.transport == Transport::Ipc {
        lines.push(format!(
            "send_ask: {}",
            u8::from(params.mode == RingMode::Ask)
        ));
    }
    lines.extend([
        format!("num_ring_rounds: {}", params.num_rounds),
        format!("num_nodes: {}", params.num_nodes),
        format!("{}: {:?}", names.creation, outcome.node_creation),
        format!("{}: {}", names.final_sum, outcome.final_sum),
        format!("{}: {:?}", names.messaging, outcome.ring_messaging),
        format!("messages_per_second: {:.0}", outcome.messages_per_second()),
    ]);
    if let Some(bytes) = outcome.bytes_per_pending_ask {
        lines.push(format!("bytes_per_pending_ask: {bytes:.1}"));
    }
    lines.push(match params.transport {
        Transport::Inproc => format!("mode: {}", params.mode),
        Transport::Ipc => format!("transport: {}", params.transport),
    });
    lines
}

/// Runs the ring until it completes or `stop` is set; a stopped run returns its partial
/// outcome. In-process, on a runtime of its own (built here, after `start`); with ipc,
/// starting the node processes here.
///
/// The ipc nodes run this program (`current_exe`) as `worker ipc-node`: call it from a
/// program that dispatches `worker <workload>` to [`crate::worker::run_worker`], on a
/// thread that lives as long as the run (PR_SET_PDEATHSIG follows the thread that started
/// a node).
pub fn run(
    params: &RingParams,
    metrics: &RingMetrics,
    stop: &StopSignal,
) -> Result<Outcome, WorkloadError> {
    params.validate()?;
    match params.transport {
        Transport::Inproc => actors::run(params, metrics, stop),
        Transport::Ipc => ipc::run(params, metrics, stop),
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn parse(args: &[&str]) -> Result<RingParams, String> {
        crate::test_support::parse_params("ring", args)
    }

    #[test]
    fn billions_of_actors_are_refused_with_the_estimate() {
        let huge = parse(&["--num-nodes", "4000000000"]).unwrap();
        let err = huge.validate().unwrap_err().to_string();
        assert!(
            err.contains("a ring of 4000000000 actors would need about"),
            "{err}"
        );
        assert!(
            err.contains("TiB of memory") && err.contains("available"),
            "{err}"
        );
        // An endless ask ring, stopped by its conductor, is not refused for the asks it
        // would pile up if it ran to the end.
        let endless = parse(&[
            "--mode",
            "ask",
            "--num-nodes",
            "100",
            "--num-rounds",
            "4000000000",
        ])
        .unwrap();
        assert!(endless.validate().is_ok());
        assert!(RingParams::default().validate().is_ok());
    }

    #[test]
    fn defaults_are_the_originals_run() {
        let params = parse(&[]).unwrap();
        assert_eq!(params, RingParams::default());
        assert_eq!((params.num_nodes, params.num_rounds), (5000, 2000));
        assert_eq!(params.mode, RingMode::Tell);
    }

    #[test]
    fn to_args_parses_back_to_the_same_params() {
        for params in [
            RingParams::default(),
            RingParams {
                num_nodes: 1,
                num_rounds: 7,
                mode: RingMode::Ask,
                runtime_threads: 3,
                ..RingParams::default()
            },
            RingParams {
                num_nodes: 4,
                num_rounds: 9,
                mode: RingMode::Ask,
                transport: Transport::Ipc,
                crash_after: Some(12),
                ..RingParams::default()
            },
        ] {
            let args = params.to_args();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(parse(&args).unwrap(), params);
        }
    }

    #[test]
    fn params_json_uses_the_cli_names_and_matches_serde() {
        let params = RingParams {
            mode: RingMode::Ask,
            ..RingParams::default()
        };
        let json = params.params_json();
        assert_eq!(
            json.keys().collect::<Vec<_>>(),
            [
                "lap-version",
                "mode",
                "num-nodes",
                "num-rounds",
                "runtime-threads"
            ]
        );
        assert_eq!(json["mode"], "ask");
        assert_eq!(json["lap-version"], LAP_VERSION);
        let mut via_serde: BTreeMap<String, serde_json::Value> =
            serde_json::from_value(serde_json::to_value(&params).unwrap()).unwrap();
        via_serde.insert("lap-version".into(), LAP_VERSION.into());
        assert_eq!(json, via_serde);
        // Tell mode's laps never changed: no version.
        assert!(
            !RingParams::default()
                .params_json()
                .contains_key("lap-version")
        );
        let back: RingParams =
            serde_json::from_value(serde_json::to_value(&json).unwrap()).unwrap();
        assert_eq!(back, params);
    }

    #[test]
    fn zero_nodes_or_rounds_are_refused_clearly() {
        let err = parse(&["--num-nodes", "0"]).unwrap_err();
        assert!(
            err.contains("--num-nodes") && err.contains("0 is not in 1.."),
            "{err}"
        );
        let err = parse(&["--num-rounds", "0"]).unwrap_err();
        assert!(
            err.contains("--num-rounds") && err.contains("0 is not in 1.."),
            "{err}"
        );
        let err = parse(&["--mode", "shout"]).unwrap_err();
        assert!(err.contains("tell") && err.contains("ask"), "{err}");

        let err = RingParams {
            num_nodes: 0,
            ..RingParams::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert_eq!(err, "--num-nodes 0: a ring needs at least 1 node");
    }

    #[test]
    fn summary_lines_read_as_the_original_printed_them() {
        let outcome = Outcome {
            params: RingParams::default(),
            node_creation: Duration::from_micros(22_996),
            ring_messaging: Duration::from_millis(2_500),
            final_sum: 10_000_000,
            messages: 10_000_000,
            stopped: false,
            bytes_per_pending_ask: None,
        };
        assert_eq!(
            summary_lines(&outcome),
            [
                "num_ring_rounds: 2000",
                "num_nodes: 5000",
                "time_taken_for_node_creation: 22.996ms",
                "final_sum_after_ring_messaging: 10000000",
                "time_taken_for_ring_messaging: 2.5s",
                "messages_per_second: 4000000",
                "mode: tell",
            ]
        );
        let names: Vec<_> = outcome.figures().into_iter().map(|f| f.name).collect();
        let from_lines: Vec<_> = summary_lines(&outcome)
            .into_iter()
            .map(|l| l.split(':').next().unwrap().to_owned())
            .collect();
        // Every figure has its line; the mode is a parameter, printed but not a figure.
        assert_eq!(names, from_lines[..from_lines.len() - 1]);
    }

    #[test]
    fn ipc_summary_lines_read_as_the_ipc_original_printed_them() {
        let outcome = Outcome {
            params: RingParams {
                num_nodes: 20,
                num_rounds: 1000,
                mode: RingMode::Ask,
                transport: Transport::Ipc,
                ..RingParams::default()
            },
            node_creation: Duration::from_millis(12),
            ring_messaging: Duration::from_millis(500),
            final_sum: 20_000,
            messages: 20_000,
            stopped: false,
            bytes_per_pending_ask: None,
        };
        assert_eq!(
            summary_lines(&outcome),
            [
                "send_ask: 1",
                "num_ring_rounds: 1000",
                "num_nodes: 20",
                "time_taken_to_spawn_worker_nodes: 12ms",
                "ring_complete_final_sum: 20000",
                "time_taken_for_ring_messaging_to_complete: 500ms",
                "messages_per_second: 40000",
                "transport: ipc",
            ]
        );
        let names: Vec<_> = outcome.figures().into_iter().map(|f| f.name).collect();
        let from_lines: Vec<_> = summary_lines(&outcome)
            .into_iter()
            .map(|l| l.split(':').next().unwrap().to_owned())
            .collect();
        // send_ask and the transport are parameters: printed, not figures.
        assert_eq!(names, from_lines[1..from_lines.len() - 1]);
    }
}
