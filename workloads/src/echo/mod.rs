//! `udp-echo`: the echo latency and throughput experiments of Demikernel (Catnip), on
//! kernel sockets.
//!
//! A server echoes what its clients send; each client checks every byte that comes back
//! and times each message's round trip. The experiments:
//!
//! - **closed-loop latency** (`--mode echo`, the default): each client keeps one message
//!   in flight — 64-byte messages and one client give the round-trip time (Table 2);
//! - **throughput** (`--mode throughput`): each client keeps `--window` messages in
//!   flight — by message size (`--sweep buffer-size=64,1024,…,262144`, Figure 4) and by
//!   client count (`--sweep num-clients=1,2,4,8,16`, Figure 5);
//! - **open loop** (`--rate R`): the clients send R messages/s between them, whatever comes
//!   back, and each round trip is timed from the message's *intended* send time, so a
//!   client that falls behind its schedule counts the delay (coordinated omission
//!   corrected).
//!
//! **Roles.** `--role both` (the default) runs the server as a process of its own (this
//! program, `worker udp-echo --role server`, started as the ipc workloads start their
//! nodes: marker environment, PDEATHSIG, ended with the run) and the clients in the
//! worker. `--role server --listen ADDR` and `--role client --connect ADDR` run one side
//! each, on two hosts.
//!
//! **Back ends** (`--backend`), the same on both sides:
//!
//! - `tokio`: async sockets on a current-thread runtime, a task per client or connection;
//! - `poll`: run-to-completion busy polling on non-blocking sockets, one thread pinned to
//!   a core (the server to the last allowed CPU, the clients to the first), never
//!   blocking: DPDK's poll-mode shape on a kernel socket;
//! - `mmsg`: batches — `recvmmsg`/`sendmmsg` up to 32 datagrams a call (UDP), whole
//!   buffers of frames a call (TCP) — after a `ppoll` wait.
//!
//! **Messages.** `--buffer-size` bytes of payload behind a 16-byte header (sequence
//! number, offset, length). Over UDP a message longer than 64,512 bytes goes as several
//! datagrams that the client reassembles; over TCP as one length-framed message. Every
//! byte is checked on return against the pattern it was sent with.
//!
//! Metrics: counters `messages` (messages back whole and exact; on a server, messages
//! echoed), `bytes` (their payload bytes), `timeouts` (messages not back within
//! `--timeout`: a lost datagram), `payload_errors` (messages back but not exact), and
//! histogram `rtt` (round-trip time). Every wait has a deadline: a lost datagram is a
//! timeout, and a peer that answers nothing for five timeouts in a row is an error.
//!
//! Measured (2-vCPU VM shared with other builds, load average 3 to 5; `benches/udp_echo.py
//! --rounds 5 --seconds 3`, medians of interleaved rounds): 64-byte UDP round trip on
//! loopback, p50 / p99 — tokio 17.9 / 60.6 µs, poll 6.8 / 12.4 µs, mmsg 14.2 / 29.3 µs,
//! against `sockperf ping-pong` 13.1 / 23.0 µs in the same rounds (poll 0.52× sockperf's
//! p50, mmsg 1.08×). 1 KiB throughput with 1, 4 and 16 clients, messages/s: tokio 81 k,
//! 75 k, 88 k; poll 31 k, 28 k, 39 k (two spinning sides pinned on two shared cores);
//! mmsg 107 k, 101 k, 105 k (up to 32 datagrams a `recvmmsg`/`sendmmsg` call).

mod client;
mod server;
mod sockets;
mod wire;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

pub use self::server::ServerTally;

use self::client::ClientSetup;
use self::server::Listener;
use self::wire::{FRAGMENT, Pacing, Tally};
use crate::WorkloadError;
use crate::ipc::Nodes;
use crate::protocol::{Better, Figure, Phase, Summary, WorkerMessage};
use crate::report::{Counter, IntervalHistogram, Metrics, Reporter, Start, StopSignal};

/// The workload's name on the command line and in `hello`.
pub const NAME: &str = "udp-echo";

/// The largest `--buffer-size`: 1 MiB (Demikernel's largest message is 256 KiB).
pub const MAX_BUFFER_SIZE: u64 = 1 << 20;

/// The most clients (`--num-clients`), each a socket of its own.
pub const MAX_CLIENTS: u32 = 256;

/// The most messages a client keeps in flight (`--window`).
pub const MAX_WINDOW: u32 = 4096;

/// Where the server listens when `--listen` is not given with `--role server`.
pub const DEFAULT_SERVER_PORT: u16 = 7777;

/// Timeouts in a row without an answer after which the peer is declared silent.
const SILENT_TIMEOUTS: u32 = 5;

pub use crate::role::Role;

/// What the clients measure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Closed loop, one message in flight per client: round-trip latency.
    #[default]
    Echo,
    /// `--window` messages in flight per client: throughput.
    Throughput,
}

/// The transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Datagrams; messages above 64,512 bytes are fragmented and reassembled.
    #[default]
    Udp,
    /// One connection per client; length-framed messages.
    Tcp,
}

/// How the sockets are driven.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// Async sockets on a current-thread tokio runtime.
    #[default]
    Tokio,
    /// Busy polling on non-blocking sockets, pinned to a core (DPDK's poll-mode shape).
    Poll,
    /// Batched recvmmsg/sendmmsg after a ppoll wait.
    Mmsg,
}

/// The workload's own sweep option: its points run as phases of one run. The recorder's
/// `--sweep` (a series of runs, any parameter) turns a sweep of [`PHASE_PARAMS`] into it.
pub const PHASE_SWEEP: &str = "phase-sweep";
/// The parameters udp-echo sweeps in phases of one run.
pub const PHASE_PARAMS: [&str; 2] = ["buffer-size", "num-clients"];

/// The parameter a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepParam {
    /// `--buffer-size`.
    BufferSize,
    /// `--num-clients`.
    NumClients,
}

impl SweepParam {
    /// The parameter's command-line name.
    pub fn as_str(self) -> &'static str {
        match self {
            SweepParam::BufferSize => "buffer-size",
            SweepParam::NumClients => "num-clients",
        }
    }
}

/// `--sweep PARAM=V1,V2,…`: the points run one after another in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// What varies.
    pub param: SweepParam,
    /// Its values, in order.
    pub values: Vec<u64>,
}

/// As on the command line (`rate=1000,2000`).
impl serde::Serialize for Sweep {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::fmt::Display for Sweep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}=", self.param.as_str())?;
        for (i, v) in self.values.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{v}")?;
        }
        Ok(())
    }
}

fn parse_sweep(text: &str) -> Result<Sweep, String> {
    let (name, values) = text
        .split_once('=')
        .ok_or("expected PARAM=V1,V2,… (buffer-size=64,1024 or num-clients=1,2,4)")?;
    let param = match name.trim() {
        "buffer-size" => SweepParam::BufferSize,
        "num-clients" => SweepParam::NumClients,
        other => {
            return Err(format!(
                "{other:?} cannot be swept: buffer-size or num-clients"
            ));
        }
    };
    let values = values
        .split(',')
        .map(|v| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("{v:?} is not a whole number"))
        })
        .collect::<Result<Vec<u64>, String>>()?;
    if values.is_empty() || values.len() > 64 {
        return Err("a sweep has 1 to 64 points".to_owned());
    }
    Ok(Sweep { param, values })
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("{e} (try 10s, 500ms, 2m)"))?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(d)
}

/// Parameters of the echo experiments, with Demikernel's names where it has them.
/// Its serde form is the `hello` parameters sessions record ([`crate::builtin::json_of`]);
/// the conductor's listening socket (`--listen-fd`) is passed on the command line only.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct EchoParams {
    /// Which side(s) to run: both = a server process and the clients on this host
    #[arg(long, value_enum, default_value_t = Role::Both)]
    pub role: Role,
    /// Address the server listens on [default: 0.0.0.0:7777 with --role server,
    /// 127.0.0.1 on any free port with --role both]
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// The server's address (--role client)
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect: Option<SocketAddr>,
    /// Bytes of payload per message (fragmented into datagrams above 64,512 over UDP)
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub buffer_size: u64,
    /// Messages each client sends [default: 100000, or as many as fit in --duration]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_iters: Option<u64>,
    /// Clients, each with a socket (a connection over TCP) of its own
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub num_clients: u32,
    /// echo: one message in flight per client (latency); throughput: --window of them
    #[arg(long, value_enum, default_value_t = Mode::Echo)]
    pub mode: Mode,
    /// Run the clients this long instead of --num-iters messages (a sweep shares it
    /// evenly among its points); a server serves this long [default: until stopped]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    #[serde(
        serialize_with = "crate::builtin::as_humantime_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration: Option<Duration>,
    /// Open loop: messages per second from all clients together, sent on schedule
    /// whatever comes back; latency counts from the intended send time
    #[arg(long, value_name = "MSGS_PER_S", value_parser = clap::value_parser!(u64).range(1..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<u64>,
    /// The transport
    #[arg(long, value_enum, default_value_t = Protocol::Udp)]
    pub protocol: Protocol,
    /// How sockets are driven: tokio (async), poll (busy polling, pinned), mmsg (batched
    /// recvmmsg/sendmmsg)
    #[arg(long, value_enum, default_value_t = Backend::Tokio)]
    pub backend: Backend,
    /// How long a message may take to come back before it counts as a timeout; a peer
    /// silent for five timeouts in a row is an error
    #[arg(long, value_name = "D", default_value = "1s", value_parser = parse_duration)]
    #[serde(serialize_with = "crate::builtin::as_humantime")]
    pub timeout: Duration,
    /// Messages in flight per client in throughput mode (and the cap with --rate)
    /// [default: 1 MiB / --buffer-size, between 1 and 32; 1024 with --rate]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_WINDOW)))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    /// Run several points in one run, as phases that keep the server and sockets between
    /// points: buffer-size=64,1024,… or num-clients=1,2,4,…. `benchtop run udp-echo
    /// --sweep` (the recorder's option) becomes this for one sweep of these parameters.
    #[arg(long = PHASE_SWEEP, hide = true, value_name = "PARAM=V1,V2,…", value_parser = parse_sweep)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Sweep>,
    /// The server's socket, inherited by number (set by --role both for its server)
    #[arg(long, hide = true, value_name = "FD")]
    #[serde(skip)]
    pub listen_fd: Option<i32>,
}

impl Default for EchoParams {
    fn default() -> Self {
        EchoParams {
            role: Role::Both,
            listen: None,
            connect: None,
            buffer_size: 64,
            num_iters: None,
            num_clients: 1,
            mode: Mode::Echo,
            duration: None,
            rate: None,
            protocol: Protocol::Udp,
            backend: Backend::Tokio,
            timeout: Duration::from_secs(1),
            window: None,
            sweep: None,
            listen_fd: None,
        }
    }
}

fn value_name<T: clap::ValueEnum>(value: T) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

impl EchoParams {
    /// Messages per client when neither `--num-iters` nor `--duration` is given.
    pub const DEFAULT_NUM_ITERS: u64 = 100_000;

    /// The command-line arguments that parse back into these parameters, derived from
    /// the clap definition and the serde form ([`crate::builtin::args_of`]), and the
    /// conductor's listening socket, which sessions do not record.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = crate::builtin::args_of(self);
        if let Some(fd) = self.listen_fd {
            args.extend(["--listen-fd".to_owned(), fd.to_string()]);
        }
        args
    }

    /// The parameters for `hello`, keyed by their command-line names (the phase sweep
    /// as `sweep`): the serde form.
    pub fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        crate::builtin::json_of(self)
    }

    /// Checks what clap cannot: sizes and counts against their limits, and which
    /// parameters go with which role.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |name: &'static str, value: String, reason: &'static str| {
            Err(WorkloadError::BadParam {
                name,
                value,
                reason,
            })
        };
        check_buffer_size(self.buffer_size)?;
        check_num_clients(u64::from(self.num_clients))?;
        if self.num_iters == Some(0) {
            return bad("num-iters", "0".to_owned(), "must be at least 1");
        }
        if self.rate == Some(0) {
            return bad("rate", "0".to_owned(), "must be at least 1 message/s");
        }
        if let Some(w) = self.window
            && !(1..=MAX_WINDOW).contains(&w)
        {
            return bad("window", w.to_string(), "must be 1 to 4096 messages");
        }
        if self.timeout.is_zero() || self.timeout > Duration::from_secs(3600) {
            return bad(
                "timeout",
                format!("{:?}", self.timeout),
                "must be longer than zero and at most an hour",
            );
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return bad("duration", "0s".to_owned(), "must be longer than zero");
        }
        match self.role {
            Role::Client if self.connect.is_none() => {
                return bad(
                    "connect",
                    "(none)".to_owned(),
                    "--role client needs the server's address: --connect ADDR",
                );
            }
            Role::Client if self.listen.is_some() || self.listen_fd.is_some() => {
                return bad(
                    "listen",
                    self.listen.map(|a| a.to_string()).unwrap_or_default(),
                    "a client does not listen: --listen goes with --role server or both",
                );
            }
            Role::Server | Role::Both if self.connect.is_some() => {
                return bad(
                    "connect",
                    self.connect.map(|a| a.to_string()).unwrap_or_default(),
                    "--connect goes with --role client (--role both starts its own server)",
                );
            }
            Role::Server if self.sweep.is_some() => {
                return bad(
                    "sweep",
                    self.sweep
                        .as_ref()
                        .map(Sweep::to_string)
                        .unwrap_or_default(),
                    "a sweep is run by the clients: --role client or both",
                );
            }
            Role::Both | Role::Client if self.listen_fd.is_some() => {
                return bad(
                    "listen-fd",
                    self.listen_fd.map(|f| f.to_string()).unwrap_or_default(),
                    "only a server inherits its socket",
                );
            }
            _ => {}
        }
        if let Some(sweep) = &self.sweep {
            for &v in &sweep.values {
                match sweep.param {
                    SweepParam::BufferSize => check_buffer_size(v)?,
                    SweepParam::NumClients => check_num_clients(v)?,
                }
            }
        }
        Ok(())
    }

    /// The sweep's points as parameters (one point, these parameters, without a sweep).
    fn points(&self) -> Vec<(Option<String>, EchoParams)> {
        let Some(sweep) = &self.sweep else {
            return vec![(None, self.clone())];
        };
        let share = self.duration.map(|d| d / sweep.values.len().max(1) as u32);
        sweep
            .values
            .iter()
            .map(|&v| {
                let mut p = self.clone();
                p.sweep = None;
                p.duration = share;
                match sweep.param {
                    SweepParam::BufferSize => p.buffer_size = v,
                    SweepParam::NumClients => p.num_clients = v as u32,
                }
                (Some(format!("{}={v}", sweep.param.as_str())), p)
            })
            .collect()
    }

    /// What the clients of one point (these parameters, no sweep) do.
    fn client_setup(&self, server: SocketAddr, first_seq: u64) -> ClientSetup {
        ClientSetup {
            protocol: self.protocol,
            backend: self.backend,
            server,
            size: self.buffer_size as usize,
            pacing: self.pacing(),
            timeout: self.timeout,
            silence: self.timeout * SILENT_TIMEOUTS,
            limit: match (self.num_iters, self.duration) {
                (Some(n), _) => Some(n),
                (None, Some(_)) => None,
                (None, None) => Some(EchoParams::DEFAULT_NUM_ITERS),
            },
            duration: self.duration,
            num_clients: self.num_clients,
            first_seq,
        }
    }

    fn pacing(&self) -> Pacing {
        let auto = ((1u64 << 20) / self.buffer_size.max(1)).clamp(1, 32) as usize;
        match (self.rate, self.mode) {
            (Some(rate), _) => Pacing {
                window: self.window.map_or(1024, |w| w as usize),
                interval_ns: Some(
                    (1_000_000_000u64 * u64::from(self.num_clients) / rate.max(1)).max(1),
                ),
            },
            (None, Mode::Echo) => Pacing {
                window: 1,
                interval_ns: None,
            },
            (None, Mode::Throughput) => Pacing {
                window: self.window.map_or(auto, |w| w as usize),
                interval_ns: None,
            },
        }
    }
}

fn check_buffer_size(v: u64) -> Result<(), WorkloadError> {
    if v == 0 {
        return Err(WorkloadError::BadParam {
            name: "buffer-size",
            value: "0".to_owned(),
            reason: "a message needs at least 1 byte",
        });
    }
    if v > MAX_BUFFER_SIZE {
        return Err(WorkloadError::BadParam {
            name: "buffer-size",
            value: v.to_string(),
            reason: "larger than the 1 MiB (1048576-byte) limit of a message",
        });
    }
    Ok(())
}

fn check_num_clients(v: u64) -> Result<(), WorkloadError> {
    if !(1..=u64::from(MAX_CLIENTS)).contains(&v) {
        return Err(WorkloadError::BadParam {
            name: "num-clients",
            value: v.to_string(),
            reason: "must be 1 to 256 clients",
        });
    }
    Ok(())
}

/// The echo workload's metrics, registered in a worker's [`Metrics`].
#[derive(Debug, Clone)]
pub struct EchoMetrics {
    /// `messages`: messages back whole and exact (a server: messages echoed).
    pub messages: Arc<Counter>,
    /// `bytes`: their payload bytes.
    pub bytes: Arc<Counter>,
    /// `timeouts`: messages not back within `--timeout`.
    pub timeouts: Arc<Counter>,
    /// `payload_errors`: messages back but not byte-exact.
    pub payload_errors: Arc<Counter>,
    /// `rtt`: round-trip time of each message, from its intended send time.
    pub rtt: Arc<IntervalHistogram>,
}

impl EchoMetrics {
    /// Registers `messages`, `bytes`, `timeouts`, `payload_errors` and `rtt`.
    pub fn register(metrics: &mut Metrics) -> Result<Self, WorkloadError> {
        Ok(EchoMetrics {
            messages: metrics.counter(
                "messages",
                "messages",
                "messages echoed back whole and byte-exact (a server: messages echoed)",
            )?,
            bytes: metrics.counter("bytes", "bytes", "payload bytes of those messages")?,
            timeouts: metrics.counter(
                "timeouts",
                "messages",
                "messages not back within --timeout (lost datagrams)",
            )?,
            payload_errors: metrics.counter(
                "payload_errors",
                "messages",
                "messages back whole but not byte-exact",
            )?,
            rtt: metrics.histogram(
                "rtt",
                "round-trip time of a message, from its intended send time",
            )?,
        })
    }
}

/// One point of a run (the run itself when there is no sweep).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Point {
    /// `buffer-size=1024`, or none for a run without a sweep.
    pub name: Option<String>,
    /// Payload bytes per message.
    pub buffer_size: u64,
    /// Clients.
    pub num_clients: u32,
    /// Messages back whole and exact.
    pub messages: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Messages not back in time.
    pub timeouts: u64,
    /// Messages back but not exact.
    pub payload_errors: u64,
    /// From the first send to the last answer (or the end of `--duration`).
    pub elapsed: Duration,
    /// Round-trip times.
    pub rtt: Histogram<u64>,
}

impl Point {
    /// Messages back per second.
    pub fn messages_per_second(&self) -> f64 {
        per_second(self.messages as f64, self.elapsed)
    }

    /// Payload megabytes (10⁶ bytes) back per second.
    pub fn mb_per_second(&self) -> f64 {
        per_second(self.bytes as f64 / 1e6, self.elapsed)
    }

    fn rtt_us(&self, quantile: f64) -> f64 {
        if self.rtt.is_empty() {
            0.0
        } else {
            self.rtt.value_at_quantile(quantile) as f64 / 1e3
        }
    }

    /// The point's figures (a phase's, and the summary's for a run without a sweep).
    pub fn figures(&self) -> Vec<Figure> {
        let max = if self.rtt.is_empty() {
            0.0
        } else {
            self.rtt.max() as f64 / 1e3
        };
        vec![
            Figure::new("buffer_size", self.buffer_size as f64, "bytes"),
            Figure::new("num_clients", f64::from(self.num_clients), ""),
            Figure::new("messages", self.messages as f64, "messages"),
            Figure::new("timeouts", self.timeouts as f64, "messages").better(Better::Lower),
            Figure::new("payload_errors", self.payload_errors as f64, "messages")
                .better(Better::Lower),
            Figure::new("time_taken", self.elapsed.as_secs_f64(), "s"),
            Figure::new(
                "messages_per_second",
                self.messages_per_second(),
                "messages/s",
            )
            .better(Better::Higher),
            Figure::new("mb_per_second", self.mb_per_second(), "MB/s").better(Better::Higher),
            Figure::new("rtt_mean_us", self.rtt.mean() / 1e3, "µs").better(Better::Lower),
            Figure::new("rtt_p50_us", self.rtt_us(0.5), "µs").better(Better::Lower),
            Figure::new("rtt_p99_us", self.rtt_us(0.99), "µs").better(Better::Lower),
            Figure::new("rtt_p99_9_us", self.rtt_us(0.999), "µs").better(Better::Lower),
            Figure::new("rtt_max_us", max, "µs").better(Better::Lower),
        ]
    }

    fn from_tally(name: Option<String>, p: &EchoParams, tally: Tally, elapsed: Duration) -> Point {
        Point {
            name,
            buffer_size: p.buffer_size,
            num_clients: p.num_clients,
            messages: tally.messages,
            bytes: tally.bytes,
            timeouts: tally.timeouts,
            payload_errors: tally.payload_errors,
            elapsed,
            rtt: tally.rtt,
        }
    }
}

fn per_second(amount: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { amount / secs } else { 0.0 }
}

/// What a run did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Outcome {
    /// The parameters run.
    pub params: EchoParams,
    /// The clients' points, in order (empty for `--role server`).
    pub points: Vec<Point>,
    /// What a server echoed (`--role server`).
    pub server: Option<ServerTally>,
    /// Whether the run was stopped before it completed.
    pub stopped: bool,
}

/// The protocol summary of a run.
pub fn summary(outcome: &Outcome) -> Summary {
    Summary {
        figures: figures(outcome),
        lines: summary_lines(outcome),
    }
}

fn figures(outcome: &Outcome) -> Vec<Figure> {
    if let Some(server) = &outcome.server {
        return vec![
            Figure::new("server_messages_echoed", server.messages as f64, "messages"),
            Figure::new("server_bytes_echoed", server.bytes as f64, "bytes"),
            Figure::new("server_time", server.elapsed.as_secs_f64(), "s"),
        ];
    }
    match outcome.points.as_slice() {
        [only] if only.name.is_none() => only.figures(),
        points => points
            .iter()
            .flat_map(|p| {
                let name = p.name.clone().unwrap_or_default();
                p.figures()
                    .into_iter()
                    .filter(|f| {
                        matches!(
                            f.name.as_str(),
                            "messages_per_second"
                                | "mb_per_second"
                                | "rtt_p50_us"
                                | "rtt_p99_us"
                                | "timeouts"
                        )
                    })
                    .map(move |mut f| {
                        f.name = format!("{name}:{}", f.name);
                        f
                    })
            })
            .collect(),
    }
}

fn fmt_us(us: f64) -> String {
    format!("{:?}", Duration::from_nanos((us * 1e3).round() as u64))
}

/// The summary lines: what was run, then the counts, throughput and latency percentiles
/// (a sweep: one table row per point).
pub fn summary_lines(outcome: &Outcome) -> Vec<String> {
    let p = &outcome.params;
    let what = format!(
        "{}: {} over {}, {} back end",
        NAME,
        match p.role {
            Role::Server => "server",
            Role::Client => "clients",
            Role::Both => "server and clients",
        },
        value_name(p.protocol),
        value_name(p.backend)
    );
    if let Some(server) = &outcome.server {
        return vec![
            what,
            format!("server_messages_echoed: {}", server.messages),
            format!("server_bytes_echoed: {}", server.bytes),
            format!("server_time: {:?}", server.elapsed),
        ];
    }
    let mut lines = vec![what];
    match outcome.points.as_slice() {
        [only] if only.name.is_none() => {
            lines.extend([
                format!(
                    "mode: {}{}",
                    value_name(p.mode),
                    p.rate
                        .map(|r| format!(" (open loop, {r} messages/s)"))
                        .unwrap_or_default()
                ),
                format!("buffer_size: {}", only.buffer_size),
                format!("num_clients: {}", only.num_clients),
                format!("messages: {}", only.messages),
                format!("timeouts: {}", only.timeouts),
                format!("payload_errors: {}", only.payload_errors),
                format!("time_taken: {:?}", only.elapsed),
                format!("messages_per_second: {:.0}", only.messages_per_second()),
                format!("mb_per_second: {:.2}", only.mb_per_second()),
                format!("rtt_mean: {}", fmt_us(only.rtt.mean() / 1e3)),
                format!("rtt_p50: {}", fmt_us(only.rtt_us(0.5))),
                format!("rtt_p99: {}", fmt_us(only.rtt_us(0.99))),
                format!("rtt_p99_9: {}", fmt_us(only.rtt_us(0.999))),
                format!(
                    "rtt_max: {}",
                    fmt_us(if only.rtt.is_empty() {
                        0.0
                    } else {
                        only.rtt.max() as f64 / 1e3
                    })
                ),
            ]);
        }
        points => {
            lines.push(format!(
                "{:<20} {:>12} {:>10} {:>10} {:>10} {:>9}",
                "point", "messages/s", "MB/s", "rtt_p50", "rtt_p99", "timeouts"
            ));
            for point in points {
                lines.push(point_row(point));
            }
        }
    }
    lines
}

fn point_row(point: &Point) -> String {
    format!(
        "{:<20} {:>12.0} {:>10.2} {:>10} {:>10} {:>9}",
        point.name.as_deref().unwrap_or("run"),
        point.messages_per_second(),
        point.mb_per_second(),
        fmt_us(point.rtt_us(0.5)),
        fmt_us(point.rtt_us(0.99)),
        point.timeouts
    )
}

/// Runs the workload's role: a server until stopped (or `--duration`), or the clients'
/// points one after another — each reported as a `phase` on `reporter` when there is a
/// sweep — against the server on `--connect` or (`--role both`) one started here as a
/// process of this program. A stopped run returns its partial outcome.
pub fn run(
    params: &EchoParams,
    metrics: &EchoMetrics,
    stop: &StopSignal,
    reporter: &Reporter,
    start: Start,
) -> Result<Outcome, WorkloadError> {
    params.validate()?;
    match params.role {
        Role::Server => {
            let listener = match params.listen_fd {
                Some(fd) => Listener::inherit(fd, params.protocol)?,
                None => Listener::bind(
                    params.listen.unwrap_or(SocketAddr::new(
                        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                        DEFAULT_SERVER_PORT,
                    )),
                    params.protocol,
                )?,
            };
            let tally = server::serve(listener, params.backend, metrics, stop, params.duration)?;
            Ok(Outcome {
                params: params.clone(),
                points: Vec::new(),
                server: Some(tally),
                // A server serves until told to stop: that is how it ends.
                stopped: false,
            })
        }
        Role::Client => {
            let server = params.connect.ok_or(WorkloadError::BadParam {
                name: "connect",
                value: "(none)".to_owned(),
                reason: "--role client needs the server's address: --connect ADDR",
            })?;
            run_points(params, server, None, metrics, stop, reporter, start)
        }
        Role::Both => {
            let listen = params
                .listen
                .unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0));
            let listener = Listener::bind(listen, params.protocol)?;
            let mut server = listener.local_addr()?;
            if server.ip().is_unspecified() {
                server.set_ip(match server {
                    SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                    SocketAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
                });
            }
            let mut child = ServerProcess::start(params, &listener)?;
            drop(listener);
            let outcome = run_points(
                params,
                server,
                Some(&mut child.nodes),
                metrics,
                stop,
                reporter,
                start,
            );
            let finished = child.finish();
            let outcome = outcome?;
            finished?;
            Ok(outcome)
        }
    }
}

/// The server of `--role both`: this program as `worker udp-echo --role server`, given
/// the listening socket, conducted through its standard input (`start`, then `stop`).
struct ServerProcess {
    nodes: Nodes,
    stdin: Option<std::process::ChildStdin>,
}

impl ServerProcess {
    fn start(params: &EchoParams, listener: &Listener) -> Result<ServerProcess, WorkloadError> {
        let mut nodes = Nodes::new(NAME, false)?;
        let fd = listener.as_raw_fd();
        let server = EchoParams {
            role: Role::Server,
            listen: None,
            connect: None,
            num_iters: None,
            duration: None,
            rate: None,
            window: None,
            sweep: None,
            listen_fd: Some(fd),
            ..params.clone()
        };
        let mut args: Vec<OsString> = vec!["worker".into(), NAME.into()];
        args.extend(server.to_args().into_iter().map(OsString::from));
        let child = nodes.spawn_args(0, &args, [fd, -1], Stdio::piped())?;
        let mut stdin = child.stdin.take();
        if let Some(input) = stdin.as_mut() {
            input
                .write_all(b"{\"type\":\"start\"}\n")
                .map_err(|source| WorkloadError::Net {
                    workload: NAME,
                    context: "telling the server process to start".to_owned(),
                    source,
                })?;
        }
        Ok(ServerProcess { nodes, stdin })
    }

    /// Tells the server the run is over and waits for it to exit.
    fn finish(mut self) -> Result<(), WorkloadError> {
        if let Some(mut input) = self.stdin.take() {
            // A server that is gone already is named by `finish`.
            let _ = input.write_all(b"{\"type\":\"stop\"}\n");
        }
        self.nodes.finish(Duration::from_secs(5))
    }
}

fn run_points(
    params: &EchoParams,
    server: SocketAddr,
    mut nodes: Option<&mut Nodes>,
    metrics: &EchoMetrics,
    stop: &StopSignal,
    reporter: &Reporter,
    start: Start,
) -> Result<Outcome, WorkloadError> {
    wait_for_server(params, server, nodes.as_deref_mut(), stop)?;
    let mut points = Vec::new();
    let mut first_seq = 0u64;
    let mut stopped = false;
    let all = params.points();
    let count = all.len().max(1) as u32;
    for (index, (name, point)) in all.into_iter().enumerate() {
        if stop.is_set() {
            stopped = true;
            break;
        }
        let mut setup = point.client_setup(server, first_seq);
        // A timed run's points end on a schedule from `start` (point k of n at
        // start + k × duration / n), so the last ends with the run — and with the
        // recording's own --duration — whatever the set-up took.
        let planned = params.duration.map(|total| {
            let end = start.at + total / count * (index as u32 + 1);
            end.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        });
        if planned.is_some() {
            setup.duration = planned;
        }
        // Sequence numbers go on from one point to the next: a late answer from the
        // point before is a stray, never mistaken for a message of this one.
        first_seq += 1 << 40;
        let began = Instant::now();
        let began_ns = began.saturating_duration_since(start.at);
        let (tally, elapsed) = run_clients_watched(&setup, metrics, stop, nodes.as_deref_mut())?;
        // A point bounded by time that a stop ends within its last 5 % is complete: under
        // `benchtop run --duration` the recording's stop and the clients' end race.
        stopped = stop.is_set() && planned.is_none_or(|d| elapsed < d.mul_f64(0.95));
        let point = Point::from_tally(name, &point, tally, elapsed);
        if let Some(name) = &point.name {
            reporter.send(&WorkerMessage::Phase(Phase {
                name: name.clone(),
                t_ns: u64::try_from(began_ns.as_nanos()).unwrap_or(u64::MAX),
                duration_ns: u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX),
                figures: point.figures(),
            }))?;
        }
        points.push(point);
        if stopped {
            break;
        }
    }
    Ok(Outcome {
        params: params.clone(),
        points,
        server: None,
        stopped,
    })
}

/// Probes the server with single 64-byte messages until one comes back, so that no
/// measured round trip includes the server's start (`--role both` starts it as a process
/// just before). Gives up after five timeouts (at least 2 s) with an error naming the
/// address; a server process that ends meanwhile is named instead.
fn wait_for_server(
    params: &EchoParams,
    server: SocketAddr,
    mut nodes: Option<&mut Nodes>,
    stop: &StopSignal,
) -> Result<(), WorkloadError> {
    let patience = (params.timeout * SILENT_TIMEOUTS).max(Duration::from_secs(2));
    let probe = EchoParams {
        backend: Backend::Mmsg,
        buffer_size: 64,
        num_clients: 1,
        num_iters: Some(1),
        duration: None,
        rate: None,
        mode: Mode::Echo,
        timeout: params.timeout.min(Duration::from_millis(200)),
        sweep: None,
        ..params.clone()
    };
    // Numbers apart from every point's: a late answer to a probe is a stray.
    let mut setup = probe.client_setup(server, wire::PROBE_SEQ);
    setup.silence = patience;
    let throwaway = EchoMetrics::register(&mut Metrics::new())?;
    let until = Instant::now() + patience;
    loop {
        let (tally, _) = client::run(&setup, &throwaway, stop)?;
        if tally.messages > 0 || stop.is_set() {
            return Ok(());
        }
        if let Some(nodes) = nodes.as_deref_mut() {
            nodes.check()?;
        }
        if Instant::now() >= until {
            return Err(WorkloadError::Broken {
                workload: NAME,
                reason: format!(
                    "no answer from {server} within {patience:?}: is a {NAME} server with \
                     --protocol {} listening there, and reachable?",
                    value_name(params.protocol)
                ),
            });
        }
    }
}

/// Runs the clients on a thread of their own (pinned with `--backend poll`) while this one
/// watches the conductor's stop and the server process: a server that ends is an error at
/// once, not after the clients' deadlines.
fn run_clients_watched(
    setup: &ClientSetup,
    metrics: &EchoMetrics,
    stop: &StopSignal,
    mut nodes: Option<&mut Nodes>,
) -> Result<(Tally, Duration), WorkloadError> {
    let halt = StopSignal::new();
    let mut server_failed = None;
    let result = std::thread::scope(|scope| {
        let clients = std::thread::Builder::new()
            .name("bt-echo-client".to_owned())
            .spawn_scoped(scope, || client::run(setup, metrics, &halt))
            .map_err(|source| WorkloadError::Thread {
                thread: "bt-echo-client",
                source,
            })?;
        while !clients.is_finished() {
            if stop.is_set() {
                halt.set();
            }
            if server_failed.is_none()
                && let Some(nodes) = nodes.as_deref_mut()
                && let Err(e) = nodes.check()
            {
                server_failed = Some(e);
                halt.set();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        clients.join().map_err(|payload| WorkloadError::Panicked {
            what: "the echo clients".to_owned(),
            message: crate::error::panic_message(&*payload),
        })?
    });
    match server_failed {
        Some(e) => Err(e),
        None => result,
    }
}

/// Fragments of a message of `size` bytes over UDP.
pub fn datagrams_per_message(size: u64) -> u64 {
    (size as usize).div_ceil(FRAGMENT).max(1) as u64
}

#[cfg(test)]
mod tests;
