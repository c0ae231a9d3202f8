//! `kvstore`: the gRPC key-value benchmark with simulated work, after the kvstore example
//! of gRPC's "Optimizing gRPC" posts.
//!
//! A key-value service answers Create, Retrieve, Update and Delete on byte keys and
//! values ([`proto`], compiled from proto/kvstore.proto at build time with a vendored
//! protoc). Writes simulate 50 ms of work and reads 10 ms, as a blocking sleep on the
//! server's blocking pool: the thread yields its CPU, so the work shows in off-CPU
//! profiles (under `simulate_work`), not on-CPU ones. Clients pick operations as the
//! original did — a quarter reads, the rest creates, updates and deletes of random keys,
//! "already exists" and "not found" answers counted as such rather than as failures — so
//! one sequential client reaches at most 25 RPC/s (0.75 × 50 ms + 0.25 × 10 ms = 40 ms per
//! RPC). The clients have the server take each RPC's own cost out of its work ([`schedule`]),
//! so that a sequential client keeps that schedule. With `--disable-work-simulation` the
//! benchmark measures RPC overhead.
//!
//! `--role both` (the default) runs the server and the clients in this process, each on
//! threads of their own (`kv-server…`: one multi-threaded runtime; `kv-client`: a
//! current-thread runtime each, shard per thread); `--role server` and
//! `--role client` with `--listen` and `--connect` put them on two hosts. Every RPC has a
//! deadline (`--rpc-timeout`); every connection attempt too.

mod client;
mod codec;
mod operation;
mod picks;
pub mod schedule;
mod server;

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::WorkloadError;
use crate::protocol::{Better, Figure, Summary};
use crate::report::{Counter, IntervalHistogram, Metrics, StopSignal};

pub use client::ClientOutcome;
pub use client::connect;
pub use operation::Operation;
pub use server::{KvServer, KvService, Served, serve};

/// The service's messages and its client and server, generated from proto/kvstore.proto.
#[allow(missing_docs, clippy::all, clippy::pedantic, clippy::unwrap_used)]
pub mod proto {
    tonic::include_proto!("benchtop.kvstore");
}

/// The workload's name on the command line and in `hello`.
pub const NAME: &str = "kvstore";

/// The original's port.
pub const DEFAULT_PORT: u16 = 50051;

pub use crate::role::Role;

/// A fraction between 0 and 1, e.g. `0.25`; compared by value, so parameters stay `Eq`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, serde::Serialize)]
pub struct Fraction(pub f64);

impl Eq for Fraction {}

impl FromStr for Fraction {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a number between 0 and 1"))?;
        if !(0.0..=1.0).contains(&v) {
            return Err(format!("{v} is not between 0 and 1"));
        }
        Ok(Fraction(v))
    }
}

impl fmt::Display for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// `50ms`, `1.5s`, `2m` (humantime's syntax).
fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| format!("{s:?}: {e} (try 50ms or 10s)"))
}

/// A positive rate, RPC per second.
fn parse_rate(s: &str) -> Result<Rate, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a rate (RPC per second, e.g. 200)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{v} is not a positive rate"));
    }
    Ok(Rate(v))
}

/// RPC per second, positive; compared by value.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, serde::Serialize)]
pub struct Rate(pub f64);

impl Eq for Rate {}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Parameters of the kvstore benchmark, with the original's names where it has them.
/// Its serde form is the `hello` parameters sessions record: durations as numbers of
/// milliseconds (`write-delay-ms`) or seconds (`duration-s`), which
/// [`crate::params::args_of`] turns back into `--write-delay`, `--duration`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct KvParams {
    /// Answer at once instead of simulating work (measures RPC overhead)
    #[arg(long)]
    pub disable_work_simulation: bool,
    /// Simulated work of a create, update or delete
    #[arg(long, default_value = "50ms", value_parser = parse_duration, value_name = "DURATION")]
    #[serde(rename = "write-delay-ms", serialize_with = "crate::params::as_ms")]
    pub write_delay: Duration,
    /// Simulated work of a retrieve
    #[arg(long, default_value = "10ms", value_parser = parse_duration, value_name = "DURATION")]
    #[serde(rename = "read-delay-ms", serialize_with = "crate::params::as_ms")]
    pub read_delay: Duration,
    /// Share of operations that are retrieves; the rest are creates, updates and deletes
    #[arg(long, default_value = "0.25", value_name = "FRACTION")]
    pub read_fraction: Fraction,
    /// Clients, each with a connection of its own
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub clients: u32,
    /// Outstanding RPCs per client
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub concurrency: u32,
    /// How long the clients run [default: 10s; a server alone runs until stopped]
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(
        rename = "duration-s",
        serialize_with = "crate::params::as_s",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration: Option<Duration>,
    /// Open loop: start this many RPCs per second in all (latency counted from each RPC's
    /// intended start, coordinated omission corrected) instead of one after another
    #[arg(long, value_parser = parse_rate, value_name = "RPC/S")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// Run the server, the clients, or both in this process
    #[arg(long, value_enum, default_value_t = Role::Both)]
    pub role: Role,
    /// Where the server listens [default: 127.0.0.1:50051]
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// Where the clients connect [default: 127.0.0.1:50051; with --role both, the server
    /// of this process]
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect: Option<SocketAddr>,
    /// Mean key size in bytes (sizes are drawn from an exponential distribution, as the
    /// original's)
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub mean_key_size: u32,
    /// Mean value size in bytes
    #[arg(long, default_value_t = 65536,
          value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub mean_value_size: u32,
    /// Deadline of every RPC, kept by the client (no grpc-timeout header: the original
    /// sets none); one that passes it counts as a DEADLINE_EXCEEDED failure
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    #[serde(rename = "rpc-timeout-ms", serialize_with = "crate::params::as_ms")]
    pub rpc_timeout: Duration,
    /// Worker threads of the server's runtime [default: the machine's cores, at most 8,
    /// less the client threads with --role both; at least 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_threads: Option<u16>,
    /// Client threads, each with a runtime of its own running its share of the clients
    /// [default: the machine's cores, at most 8; never more than --clients]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_threads: Option<u16>,
}

impl Default for KvParams {
    fn default() -> Self {
        KvParams {
            disable_work_simulation: false,
            write_delay: Duration::from_millis(50),
            read_delay: Duration::from_millis(10),
            read_fraction: Fraction(0.25),
            clients: 1,
            concurrency: 1,
            duration: None,
            rate: None,
            role: Role::Both,
            listen: None,
            connect: None,
            mean_key_size: 64,
            mean_value_size: 65536,
            rpc_timeout: Duration::from_secs(5),
            server_threads: None,
            client_threads: None,
        }
    }
}

/// Runtime threads at most, unless asked for more.
const MAX_DEFAULT_THREADS: usize = 8;

/// `asked`, or the machine's cores (at most [`MAX_DEFAULT_THREADS`]).
fn runtime_threads(asked: Option<u16>) -> usize {
    asked.map_or_else(
        || {
            std::thread::available_parallelism()
                .map_or(2, usize::from)
                .min(MAX_DEFAULT_THREADS)
        },
        usize::from,
    )
}

/// The clients' threads: `--client-threads`, or the machine's cores (at most
/// [`MAX_DEFAULT_THREADS`]); never more than there are clients.
fn client_threads(params: &KvParams) -> usize {
    runtime_threads(params.client_threads)
        .min(params.clients as usize)
        .max(1)
}

/// The server's worker threads: `--server-threads`, or the machine's cores (at most
/// [`MAX_DEFAULT_THREADS`]) less the clients' threads when they run in this process
/// (`--role both`), at least one. With one client on two cores that is one each: chosen
/// with `benches/kvstore_rpc.py` (64-byte values, concurrency 64: the 1+1 row against
/// the default's, 58,028 against 31,905 RPC/s on a loaded 2-core machine), where a second
/// server worker only makes the two sides preempt each other.
fn server_threads(params: &KvParams) -> usize {
    match params.server_threads {
        Some(n) => usize::from(n),
        None if params.role == Role::Both => runtime_threads(None)
            .saturating_sub(client_threads(params))
            .max(1),
        None => runtime_threads(None),
    }
}

/// How long the clients run when `--duration` is not given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

impl KvParams {
    /// The arguments that parse back into these parameters, derived from the clap
    /// definition and the serde form ([`crate::params::args_of`]).
    pub fn to_args(&self) -> Vec<String> {
        crate::params::args_of(self)
    }

    /// The parameters for `hello`, keyed by their command-line names: the serde form.
    pub fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        crate::params::json_of(self)
    }

    /// Checks what clap cannot: combinations, and ranges for parameters built in code.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        if !(0.0..=1.0).contains(&self.read_fraction.0) {
            return Err(WorkloadError::BadParam {
                name: "read-fraction",
                value: self.read_fraction.to_string(),
                reason: "must be between 0 and 1",
            });
        }
        if self.clients == 0 || self.concurrency == 0 {
            return Err(WorkloadError::BadParam {
                name: if self.clients == 0 {
                    "clients"
                } else {
                    "concurrency"
                },
                value: "0".to_owned(),
                reason: "must be at least 1",
            });
        }
        if self.rpc_timeout.is_zero() {
            return Err(WorkloadError::BadParam {
                name: "rpc-timeout",
                value: "0s".to_owned(),
                reason: "every RPC needs a deadline above zero",
            });
        }
        if self.role == Role::Server && (self.connect.is_some() || self.rate.is_some()) {
            return Err(WorkloadError::BadParam {
                name: if self.connect.is_some() {
                    "connect"
                } else {
                    "rate"
                },
                value: "(given)".to_owned(),
                reason: "is for clients; --role server only listens",
            });
        }
        if self.role == Role::Client && self.listen.is_some() {
            return Err(WorkloadError::BadParam {
                name: "listen",
                value: "(given)".to_owned(),
                reason: "is for the server; --role client only connects (--connect)",
            });
        }
        if self.role == Role::Both && self.connect.is_some() {
            return Err(WorkloadError::BadParam {
                name: "connect",
                value: "(given)".to_owned(),
                reason: "with --role both the clients use this process's server; \
                         use --role client to reach another",
            });
        }
        if self.role.sends() {
            crate::footprint::check(
                &format!(
                    "{} client(s) of {} outstanding RPC(s) with {}-byte values",
                    self.clients, self.concurrency, self.mean_value_size
                ),
                self.estimated_bytes(),
            )?;
        }
        Ok(())
    }

    /// The memory the outstanding RPCs of every client hold (`clients × concurrency` of
    /// them), on the clients' side and, with `--role both`, the server's: 16 KiB an RPC
    /// (its task, its HTTP/2 stream, its request and answer) and 1.5 times the mean value
    /// (encoded, sent, received and stored copies). Measured with the recorder's peak RSS
    /// of 2-second runs of 8 clients at concurrency 128 and 512 (1,024 and 4,096 RPCs in
    /// flight): 11.6 KiB an RPC more with 64-byte values, 91 KiB with 64 KiB ones, rounded
    /// up. A server alone (`--role server`) does not know its clients: nothing to estimate.
    pub fn estimated_bytes(&self) -> u64 {
        const RPC_BYTES: u64 = 16 << 10;
        let outstanding = u64::from(self.clients).saturating_mul(u64::from(self.concurrency));
        let value = u64::from(self.mean_value_size).saturating_mul(3) / 2;
        let per_rpc = RPC_BYTES
            .saturating_add(value)
            .saturating_add(u64::from(self.mean_key_size).saturating_mul(2));
        if self.role.sends() {
            outstanding.saturating_mul(per_rpc)
        } else {
            0
        }
    }

    /// The simulated work of `op` (none with `--disable-work-simulation`).
    pub fn work(&self, op: Operation) -> Duration {
        match (self.disable_work_simulation, op) {
            (true, _) => Duration::ZERO,
            (false, Operation::Retrieve) => self.read_delay,
            (false, _) => self.write_delay,
        }
    }

    /// The most RPC/s the clients can complete against the simulated work, were RPCs
    /// free: each outstanding RPC takes the mean work of the operation mix. `None` without
    /// simulated work (the ceiling is then the machine's).
    pub fn theoretical_max(&self) -> Option<f64> {
        if self.disable_work_simulation {
            return None;
        }
        let rf = self.read_fraction.0;
        let mean = rf * self.read_delay.as_secs_f64() + (1.0 - rf) * self.write_delay.as_secs_f64();
        if mean <= 0.0 {
            return None;
        }
        let outstanding = f64::from(self.clients) * f64::from(self.concurrency);
        let closed = outstanding / mean;
        Some(match self.rate {
            Some(rate) => closed.min(rate.0),
            None => closed,
        })
    }

    /// Where the server listens.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)))
    }

    /// Where the clients connect (`--role client`).
    pub fn connect_addr(&self) -> SocketAddr {
        self.connect
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)))
    }
}

/// The workload's metrics.
#[derive(Debug, Clone)]
pub struct KvMetrics {
    /// `rpcs`: RPCs completed by the clients (or served, for a server alone), whatever
    /// their answer.
    pub rpcs: Arc<Counter>,
    /// `failures`: RPCs that failed (deadline, unavailable, any status other than OK,
    /// ALREADY_EXISTS on create and NOT_FOUND on retrieve and update).
    pub failures: Arc<Counter>,
    /// `not_found`: retrieves and updates of keys that were not there.
    pub not_found: Arc<Counter>,
    /// `already_exists`: creates of keys that were there.
    pub already_exists: Arc<Counter>,
    /// `rpc`: latency of every RPC.
    pub rpc: Arc<IntervalHistogram>,
    /// Latency per operation: create, retrieve, update, delete.
    pub per_op: [Arc<IntervalHistogram>; 4],
}

impl KvMetrics {
    /// Registers the counters and histograms (`rpcs` first: the throughput; `rpc` first:
    /// the latency).
    pub fn register(metrics: &mut Metrics) -> Result<Self, WorkloadError> {
        let rpcs = metrics.counter("rpcs", "RPCs", "RPCs completed so far, any answer")?;
        let failures = metrics.counter(
            "failures",
            "RPCs",
            "RPCs that failed: deadline, connection, unexpected status",
        )?;
        let not_found = metrics.counter(
            "not_found",
            "RPCs",
            "retrieves and updates answered NOT_FOUND (expected, not failures)",
        )?;
        let already_exists = metrics.counter(
            "already_exists",
            "RPCs",
            "creates answered ALREADY_EXISTS (expected, not failures)",
        )?;
        let rpc = metrics.histogram("rpc", "latency of every RPC, any operation")?;
        let mut per_op = Vec::new();
        for op in Operation::ALL {
            per_op.push(metrics.histogram(op.name(), &format!("latency of {} RPCs", op.name()))?);
        }
        let per_op: [Arc<IntervalHistogram>; 4] =
            per_op.try_into().map_err(|_| WorkloadError::Broken {
                workload: NAME,
                reason: "four operations, four histograms".to_owned(),
            })?;
        Ok(KvMetrics {
            rpcs,
            failures,
            not_found,
            already_exists,
            rpc,
            per_op,
        })
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Outcome {
    /// The parameters.
    pub params: KvParams,
    /// The clients' results, when clients ran.
    pub client: Option<ClientOutcome>,
    /// RPCs the server answered, when it ran here as a server alone.
    pub served: Option<u64>,
    /// The time the server's simulated work slept, when the server ran here and
    /// simulated work.
    pub work_slept: Option<Duration>,
    /// The server's address, when it ran here.
    pub listened: Option<SocketAddr>,
    /// Ended by a stop before the duration.
    pub stopped: bool,
}

/// Runs the benchmark until its duration passes or `stop` is set.
pub fn run(
    params: &KvParams,
    metrics: &KvMetrics,
    stop: &StopSignal,
) -> Result<Outcome, WorkloadError> {
    params.validate()?;
    let server = match params.role {
        Role::Server | Role::Both => Some(KvServer::start(params, metrics.clone())?),
        Role::Client => None,
    };
    let listened = server.as_ref().map(KvServer::addr);
    let (client, stopped) = match params.role {
        Role::Server => {
            let until = params.duration.map(|d| std::time::Instant::now() + d);
            let mut stopped = false;
            loop {
                if stop.is_set() {
                    stopped = true;
                    break;
                }
                if until.is_some_and(|u| std::time::Instant::now() >= u) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            (None, stopped)
        }
        Role::Client | Role::Both => {
            let target = listened.unwrap_or_else(|| params.connect_addr());
            let outcome = client::run(params, target, metrics, stop)?;
            let stopped = outcome.stopped;
            (Some(outcome), stopped)
        }
    };
    let totals = match server {
        Some(server) => Some(server.shutdown()?),
        None => None,
    };
    let served = totals
        .map(|t| t.rpcs)
        .filter(|_| params.role == Role::Server);
    let work_slept = totals
        .map(|t| t.work_slept)
        .filter(|_| params.theoretical_max().is_some());
    Ok(Outcome {
        params: params.clone(),
        client,
        served,
        work_slept,
        listened,
        stopped,
    })
}

/// The summary: the original's figures (RPCs, RPC/s, per-operation counts), the
/// theoretical maximum for the parameters beside the measured RPC/s, and failures by
/// status code.
pub fn summary(outcome: &Outcome) -> Summary {
    let mut figures = Vec::new();
    let mut lines = Vec::new();
    if let Some(addr) = outcome.listened {
        lines.push(format!("server listening on {addr}"));
    }
    if let Some(served) = outcome.served {
        figures.push(Figure::new("rpcs_served", served as f64, "RPCs"));
        lines.push(format!("rpcs_served: {served}"));
    }
    if let Some(slept) = outcome.work_slept {
        let s = slept.as_secs_f64();
        figures.push(Figure::new("work_slept_s", s, "s"));
        lines.push(format!(
            "work_slept_s: {s:.3} (the server's threads asleep in the simulated work, \
             all of them together)"
        ));
    }
    if let Some(c) = &outcome.client {
        let rate = c.rpcs_per_second();
        figures.push(Figure::new("rpcs", c.rpcs as f64, "RPCs"));
        figures.push(Figure::new("rpcs_per_second", rate, "RPC/s").better(Better::Higher));
        lines.push(format!("Did {} RPCs/s", format_rate(rate)));
        lines.push(format!(
            "rpcs: {} in {:.3} s ({} create, {} retrieve, {} update, {} delete)",
            c.rpcs,
            c.elapsed.as_secs_f64(),
            c.per_op[0],
            c.per_op[1],
            c.per_op[2],
            c.per_op[3]
        ));
        match outcome.params.theoretical_max() {
            Some(max) => {
                figures.push(Figure::new("theoretical_max_rpcs_per_second", max, "RPC/s"));
                lines.push(format!(
                    "theoretical_max_rpcs_per_second: {} (measured {:.1}% of it)",
                    format_rate(max),
                    rate / max * 100.0
                ));
            }
            None => lines.push(
                "theoretical_max_rpcs_per_second: none (work simulation disabled)".to_owned(),
            ),
        }
        if let Some(cost) = c.rpc_cost {
            let ms = cost.as_secs_f64() * 1e3;
            figures.push(Figure::new("rpc_cost_ms", ms, "ms").better(Better::Lower));
            lines.push(format!(
                "rpc_cost_ms: {ms:.3} beyond the simulated work, an RPC (mean; each client's \
                 recent mean was taken out of its next requests' work)"
            ));
        }
        let payload = c.payload_bytes_per_second() / 1e6;
        figures.push(Figure::new("payload_mb_per_s", payload, "MB/s").better(Better::Higher));
        lines.push(format!(
            "payload: {:.1} MB/s of keys and values, requests and answers",
            payload
        ));
        figures.push(Figure::new("not_found", c.not_found as f64, "RPCs"));
        figures.push(Figure::new(
            "already_exists",
            c.already_exists as f64,
            "RPCs",
        ));
        figures.push(Figure::new("failures", c.failures() as f64, "RPCs").better(Better::Lower));
        lines.push(format!(
            "not_found: {}  already_exists: {}  failures: {}",
            c.not_found,
            c.already_exists,
            c.failures()
        ));
        for (code, n) in &c.failures_by_code {
            lines.push(format!("failed with {code}: {n}"));
        }
    }
    Summary { figures, lines }
}

fn format_rate(rate: f64) -> String {
    if rate >= 100.0 {
        format!("{rate:.0}")
    } else {
        format!("{rate:.2}")
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn parse(args: &[&str]) -> Result<KvParams, String> {
        crate::test_support::parse_params("kvstore", args)
    }

    #[test]
    fn defaults_are_the_originals() {
        let p = parse(&[]).unwrap();
        assert_eq!(p, KvParams::default());
        assert_eq!(p.listen_addr().port(), 50051);
        // One sequential client: 0.75 × 50 ms + 0.25 × 10 ms = 40 ms an RPC.
        assert!((p.theoretical_max().unwrap() - 25.0).abs() < 1e-9);
    }

    #[test]
    fn arguments_round_trip() {
        let p = parse(&[
            "--disable-work-simulation",
            "--read-fraction",
            "0.5",
            "--clients",
            "4",
            "--concurrency",
            "8",
            "--duration",
            "3s",
            "--rate",
            "150",
            "--role",
            "client",
            "--connect",
            "10.0.0.1:7000",
            "--rpc-timeout",
            "250ms",
            "--client-threads",
            "1",
        ])
        .unwrap();
        let args = p.to_args();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(parse(&refs).unwrap(), p);
        assert_eq!(p.theoretical_max(), None);
        // The shape sessions have always recorded: durations as numbers of milliseconds
        // or seconds, absent options left out.
        assert_eq!(
            serde_json::Value::from_iter(p.params_json()),
            serde_json::json!({
                "disable-work-simulation": true, "write-delay-ms": 50.0,
                "read-delay-ms": 10.0, "read-fraction": 0.5, "clients": 4, "concurrency": 8,
                "duration-s": 3.0, "rate": 150.0, "role": "client", "connect": "10.0.0.1:7000",
                "mean-key-size": 64, "mean-value-size": 65536, "rpc-timeout-ms": 250.0,
                "client-threads": 1,
            })
        );
        // A duration that is no whole number of milliseconds goes back exactly.
        let odd = parse(&["--write-delay", "1500us", "--duration", "2.5s"]).unwrap();
        let args = odd.to_args();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(parse(&refs).unwrap(), odd, "{args:?}");
    }

    #[test]
    fn the_server_leaves_the_client_threads_their_cores_when_both_run_here() {
        let cores = runtime_threads(None);
        let both = KvParams::default();
        assert_eq!(client_threads(&both), 1, "never more threads than clients");
        assert_eq!(server_threads(&both), cores.saturating_sub(1).max(1));
        let many = KvParams {
            clients: 64,
            ..KvParams::default()
        };
        assert_eq!(client_threads(&many), cores);
        assert_eq!(server_threads(&many), 1, "at least one");
        let alone = KvParams {
            role: Role::Server,
            ..many.clone()
        };
        assert_eq!(server_threads(&alone), cores);
        let asked = KvParams {
            server_threads: Some(3),
            client_threads: Some(2),
            ..many
        };
        assert_eq!((server_threads(&asked), client_threads(&asked)), (3, 2));
    }

    #[test]
    fn the_maximum_scales_with_outstanding_rpcs_and_stops_at_the_rate() {
        let mut p = KvParams {
            clients: 2,
            concurrency: 4,
            ..KvParams::default()
        };
        assert!((p.theoretical_max().unwrap() - 200.0).abs() < 1e-9);
        p.rate = Some(Rate(120.0));
        assert!((p.theoretical_max().unwrap() - 120.0).abs() < 1e-9);
    }

    #[test]
    fn bad_values_and_combinations_are_refused_with_their_names() {
        for (args, needle) in [
            (&["--read-fraction", "1.5"][..], "between 0 and 1"),
            (&["--clients", "0"], "clients"),
            (&["--write-delay", "soon"], "try 50ms"),
            (&["--rate=-3"], "positive"),
        ] {
            let err = parse(args).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
        for (params, needle) in [
            (
                KvParams {
                    role: Role::Server,
                    connect: Some("127.0.0.1:1".parse().unwrap()),
                    ..KvParams::default()
                },
                "--connect",
            ),
            (
                KvParams {
                    role: Role::Client,
                    listen: Some("127.0.0.1:1".parse().unwrap()),
                    ..KvParams::default()
                },
                "--listen",
            ),
            (
                KvParams {
                    rpc_timeout: Duration::ZERO,
                    ..KvParams::default()
                },
                "deadline",
            ),
        ] {
            let err = params.validate().unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn millions_of_outstanding_rpcs_are_refused_with_the_estimate() {
        let huge = KvParams {
            clients: 1024,
            concurrency: 4096,
            ..KvParams::default()
        };
        let err = huge.validate().unwrap_err().to_string();
        assert!(
            err.contains("1024 client(s) of 4096 outstanding RPC(s) with 65536-byte values")
                && err.contains("would need about")
                && err.contains("GiB of memory")
                && err.contains("available"),
            "{err}"
        );
        // Within reach of a small machine: 8 clients of 512 RPCs of 64 KiB, about 450 MiB.
        let measured = KvParams {
            clients: 8,
            concurrency: 512,
            ..KvParams::default()
        };
        assert!(measured.estimated_bytes() < 512 << 20);
        assert!(measured.estimated_bytes() > 400 << 20);
        assert!(crate::footprint::check_against("x", measured.estimated_bytes(), 1 << 30).is_ok());
        // A server alone cannot tell what its clients will send.
        let server = KvParams {
            clients: 1024,
            concurrency: 4096,
            role: Role::Server,
            ..KvParams::default()
        };
        assert_eq!(server.estimated_bytes(), 0);
    }
}
