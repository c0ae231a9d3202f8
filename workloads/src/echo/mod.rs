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
//!   buffers of frames a call (TCP) — after a `ppoll` wait;
//! - `dpdk`: no sockets — DPDK's poll-mode drivers, the two sides separate processes with
//!   an EAL each, joined by a `net_memif` link, Ethernet/IPv4/UDP frames in rx/tx bursts
//!   (the `dpdk` module; the `dpdk` cargo feature).
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
mod dpdk;
mod outcome;
mod params;
mod server;
mod sockets;
mod wire;

use std::ffi::OsString;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use self::client::ClientSetup;
pub use self::outcome::{Outcome, Point, summary, summary_lines};
pub use self::params::{
    Backend, DEFAULT_SERVER_PORT, EchoParams, MAX_BUFFER_SIZE, MAX_CLIENTS, MAX_WINDOW, Mode, NAME,
    PHASE_PARAMS, PHASE_SWEEP, Protocol, Role, Sweep, SweepParam,
};
use self::params::{SILENT_TIMEOUTS, value_name};
use self::server::Listener;
pub use self::server::ServerTally;
use self::wire::{FRAGMENT, Tally};
use crate::WorkloadError;
use crate::ipc::Nodes;
use crate::protocol::{Phase, WorkerMessage};
use crate::report::{Counter, IntervalHistogram, Metrics, Reporter, Start, StopSignal};

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
    #[cfg(feature = "dpdk")]
    if params.backend == Backend::Dpdk {
        return match params.role {
            Role::Server => Ok(Outcome {
                params: params.clone(),
                points: Vec::new(),
                server: Some(dpdk::serve(params, metrics, stop)?),
                stopped: false,
            }),
            Role::Client => dpdk::run_client(params, metrics, stop, reporter, start),
            Role::Both => dpdk::run_both(params, metrics, stop, reporter, start),
        };
    }
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
        ServerProcess::spawn(&server, fd)
    }

    /// Starts `worker udp-echo` with the `server` parameters, inheriting `fd` (-1: none),
    /// and tells it to start.
    fn spawn(server: &EchoParams, fd: i32) -> Result<ServerProcess, WorkloadError> {
        let mut nodes = Nodes::new(NAME, false)?;
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
/// address; a server process that ends meanwhile is named instead. A run stopped before
/// (while its server or its DPDK port was still starting) has nothing to probe.
fn wait_for_server(
    params: &EchoParams,
    server: SocketAddr,
    mut nodes: Option<&mut Nodes>,
    stop: &StopSignal,
) -> Result<(), WorkloadError> {
    if stop.is_set() {
        return Ok(());
    }
    let patience = (params.timeout * SILENT_TIMEOUTS).max(Duration::from_secs(2));
    let probe = EchoParams {
        // The probe goes the way the messages will: over DPDK, through the port.
        backend: if params.backend == Backend::Dpdk {
            Backend::Dpdk
        } else {
            Backend::Mmsg
        },
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
