//! The two sides' loops over a [`Port`], and the runs that start them: the server (its
//! own process), the clients (the worker) and `--role both` (both, the server as a
//! process of this program).

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::frame::{self, Endpoint, Fault, HEADERS};
use super::port::{self, BURST, EalSetup, Port};
use super::socket::{self, RunDir};
use super::{CLIENT_IP, CLIENT_PORT_BASE, MemifRole, SERVER_IP, SERVER_MAC};
use crate::WorkloadError;
use crate::echo::client::{ClientSetup, take};
use crate::echo::params::{DEFAULT_SERVER_PORT, EchoParams, Role, SILENT_TIMEOUTS};
use crate::echo::server::{ServerTally, count};
use crate::echo::sockets::{self, Core};
use crate::echo::wire::{Flight, HEADER, Tally, datagram};
use crate::echo::{EchoMetrics, NAME, Outcome, ServerProcess, run_points};
use crate::ipc::{Nodes, monotonic_ns};
use crate::report::{Reporter, Start, StopSignal};

/// The server's address on the link, as the clients' figures and messages name it.
pub(crate) const SERVER: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(SERVER_IP), DEFAULT_SERVER_PORT);

/// Empty receive bursts between two looks at the server's link.
const LINK_CHECK_POLLS: u32 = 4096;

/// The clients' port while their run lasts: the EAL is the process's, once.
static CLIENT_PORT: Mutex<Option<Arc<Port>>> = Mutex::new(None);

fn cpu(core: Core) -> usize {
    let cpus = sockets::allowed_cpus();
    match core {
        Core::First => cpus.first(),
        Core::Last => cpus.last(),
    }
    .copied()
    .unwrap_or(0)
}

/// How long a side waits for the other to appear: five timeouts, at least 10 s (an EAL
/// takes a while to start on a loaded machine).
fn patience(params: &EchoParams) -> Duration {
    (params.timeout * SILENT_TIMEOUTS).max(Duration::from_secs(10))
}

/// `--role server --backend dpdk`: serves at `--memif` until stopped, `--duration`, or the
/// clients' end of the link goes down (their process ended).
pub(crate) fn serve(
    params: &EchoParams,
    metrics: &EchoMetrics,
    stop: &StopSignal,
) -> Result<ServerTally, WorkloadError> {
    let socket_path = params.memif.as_deref().ok_or(WorkloadError::BadParam {
        name: "memif",
        value: "(none)".to_owned(),
        reason: "a DPDK server listens at a memif socket: --memif PATH",
    })?;
    socket::claim(socket_path)?;
    let port = Port::open(&EalSetup {
        role: MemifRole::Server,
        socket: socket_path,
        cpu: cpu(Core::Last),
        hugepages: params.hugepages,
    })?;
    let began = Instant::now();
    let before = (metrics.messages.get(), metrics.bytes.get());
    let end = params.duration.map(|d| began + d);
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("bt-echo-server".to_owned())
            .spawn_scoped(scope, || {
                sockets::pin(Core::Last);
                port.register_thread();
                echo(&port, metrics, || {
                    stop.is_set() || end.is_some_and(|end| Instant::now() >= end)
                });
            })
            .map_err(|source| WorkloadError::Thread {
                thread: "bt-echo-server",
                source,
            })?;
        thread.join().map_err(|payload| WorkloadError::Panicked {
            what: "the DPDK echo server".to_owned(),
            message: crate::error::panic_message(&*payload),
        })
    })?;
    drop(port);
    Ok(ServerTally {
        messages: metrics.messages.get() - before.0,
        bytes: metrics.bytes.get() - before.1,
        elapsed: began.elapsed(),
    })
}

/// The server's loop: receive a burst, check each frame, turn the good ones around in
/// place and send them back; frames that are not UDP/IPv4 to the server with valid
/// checksums are dropped, as a stack would. Ends when `over`, or when a link that was up
/// goes down.
fn echo(port: &Port, metrics: &EchoMetrics, over: impl Fn() -> bool) {
    let mut rx = [std::ptr::null_mut(); BURST];
    let mut out = Vec::with_capacity(BURST);
    let mut was_up = false;
    let mut idle = 0u32;
    while !over() {
        let n = port.rx(&mut rx);
        for &m in &rx[..n] {
            let (bytes, whole) = port::data(m);
            let ours = whole
                && match frame::parse(bytes) {
                    Ok(d) if d.dst.ip == SERVER_IP && d.dst.port == DEFAULT_SERVER_PORT => {
                        count(d.payload, metrics);
                        true
                    }
                    _ => false,
                };
            if ours {
                frame::turn_around(bytes);
                out.push(m);
            } else {
                port::free(m);
            }
        }
        if !out.is_empty() {
            port.tx_all(&mut out, Instant::now() + Duration::from_millis(100));
            out.clear();
        }
        if n == 0 {
            idle += 1;
            if idle.is_multiple_of(LINK_CHECK_POLLS) {
                let up = port.link_up();
                if was_up && !up {
                    return;
                }
                was_up |= up;
            }
        }
    }
}

/// Starts the clients' EAL and port once the server at `socket_path` listens, and waits
/// for the link; `nodes` (the server process of `--role both`) is watched meanwhile.
fn open_client(
    params: &EchoParams,
    socket_path: &Path,
    mut nodes: Option<&mut Nodes>,
    stop: &StopSignal,
) -> Result<(), WorkloadError> {
    let patience = patience(params);
    let mut watch = || -> Result<bool, WorkloadError> {
        if let Some(nodes) = nodes.as_deref_mut() {
            nodes.check()?;
        }
        Ok(stop.is_set())
    };
    if !socket::await_server(socket_path, patience, &mut watch)? {
        return Ok(());
    }
    let port = Port::open(&EalSetup {
        role: MemifRole::Client,
        socket: socket_path,
        cpu: cpu(Core::First),
        hugepages: params.hugepages,
    })?;
    if !port.wait_link(patience, &mut watch)? && !stop.is_set() {
        return Err(WorkloadError::Dpdk {
            step: "connecting to the memif server",
            reason: format!(
                "the link to {socket_path:?} did not come up within {patience:?} (is the \
                 server at that socket a {NAME} server with --backend dpdk?)"
            ),
        });
    }
    *CLIENT_PORT.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(port));
    Ok(())
}

/// Stops the clients' port and releases the EAL.
fn close_client() {
    let port = CLIENT_PORT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    drop(port);
}

/// `--role client --backend dpdk`: the clients against the server at `--memif`.
pub(crate) fn run_client(
    params: &EchoParams,
    metrics: &EchoMetrics,
    stop: &StopSignal,
    reporter: &Reporter,
    start: Start,
) -> Result<Outcome, WorkloadError> {
    let socket_path = params.memif.as_deref().ok_or(WorkloadError::BadParam {
        name: "memif",
        value: "(none)".to_owned(),
        reason: "DPDK clients connect to a memif socket: --memif PATH",
    })?;
    let outcome = open_client(params, socket_path, None, stop)
        .and_then(|()| run_points(params, SERVER, None, metrics, stop, reporter, start));
    close_client();
    outcome
}

/// `--role both --backend dpdk`: a run directory with the memif socket, the server as a
/// process of this program listening there, and the clients here.
pub(crate) fn run_both(
    params: &EchoParams,
    metrics: &EchoMetrics,
    stop: &StopSignal,
    reporter: &Reporter,
    start: Start,
) -> Result<Outcome, WorkloadError> {
    let dir = RunDir::create()?;
    let socket_path = params
        .memif
        .clone()
        .unwrap_or_else(|| dir.path().join("memif.sock"));
    let server = EchoParams {
        role: Role::Server,
        memif: Some(socket_path.clone()),
        num_iters: None,
        duration: None,
        rate: None,
        window: None,
        sweep: None,
        ..params.clone()
    };
    let mut child = ServerProcess::spawn(&server, -1)?;
    let outcome = open_client(params, &socket_path, Some(&mut child.nodes), stop).and_then(|()| {
        run_points(
            params,
            SERVER,
            Some(&mut child.nodes),
            metrics,
            stop,
            reporter,
            start,
        )
    });
    let finished = child.finish();
    close_client();
    drop(dir);
    let outcome = outcome?;
    finished?;
    Ok(outcome)
}

/// One point's clients over the process's port, on the calling thread (pinned to the
/// first allowed CPU): the socket back ends' flights, sent and received as frames.
pub(crate) fn run_clients(
    setup: &ClientSetup,
    metrics: &EchoMetrics,
    halt: &StopSignal,
) -> Result<(Tally, Duration), WorkloadError> {
    let port = CLIENT_PORT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .ok_or(WorkloadError::Broken {
            workload: NAME,
            reason: "the DPDK clients ran before their port was opened".to_owned(),
        })?;
    sockets::pin(Core::First);
    port.register_thread();
    let now = monotonic_ns();
    let mut flights: Vec<Flight> = (0..setup.num_clients)
        .map(|c| setup.flight(c, now))
        .collect();
    let server = Endpoint {
        mac: SERVER_MAC,
        ip: SERVER_IP,
        port: DEFAULT_SERVER_PORT,
    };
    let len = u16::try_from(HEADERS + HEADER + setup.size).map_err(|_| WorkloadError::Broken {
        workload: NAME,
        reason: format!("a {}-byte message does not fit a frame", setup.size),
    })?;
    let mut rx = [std::ptr::null_mut(); BURST];
    let mut out = Vec::with_capacity(BURST);
    let mut ip_id = 0u16;
    let began = Instant::now();
    let began_ns = monotonic_ns();
    for f in &mut flights {
        f.last_heard_ns = began_ns;
    }
    let end_ns = setup.end_ns(began_ns);
    let silence_ns = u64::try_from(setup.silence.as_nanos()).unwrap_or(u64::MAX);
    let give_up = || Instant::now() + setup.timeout;
    loop {
        let now = monotonic_ns();
        if halt.is_set() || end_ns.is_some_and(|end| now >= end) {
            flights.iter_mut().for_each(Flight::abandon);
            break;
        }
        let mut all_done = true;
        for (c, flight) in flights.iter_mut().enumerate() {
            let me = Endpoint {
                mac: port.mac,
                ip: CLIENT_IP,
                port: CLIENT_PORT_BASE + c as u16,
            };
            while let Some(seq) = flight.next_send(now) {
                // An empty pool: the message goes unsent and times out.
                if let Some(m) = port.alloc(len) {
                    let (buf, _) = port::data(m);
                    let payload = datagram(seq, setup.size, 0, &mut buf[HEADERS..]);
                    frame::write(buf, &me, &server, payload, ip_id);
                    ip_id = ip_id.wrapping_add(1);
                    out.push(m);
                }
                if out.len() == BURST {
                    port.tx_all(&mut out, give_up());
                    out.clear();
                }
            }
            metrics.timeouts.add(flight.expire(now));
            if flight.silent(now, silence_ns) {
                port.tx_all(&mut out, give_up());
                return Err(setup.silence_error(flight));
            }
            all_done &= flight.done();
        }
        if !out.is_empty() {
            port.tx_all(&mut out, give_up());
            out.clear();
        }
        if all_done {
            break;
        }
        let n = port.rx(&mut rx);
        let now = monotonic_ns();
        for &m in &rx[..n] {
            receive(m, &mut flights, metrics, now);
            port::free(m);
        }
    }
    let elapsed = began.elapsed();
    let mut tally = Tally::default();
    for f in &flights {
        tally.merge(&f.tally);
    }
    Ok((tally, elapsed))
}

/// Books a frame that came back: a UDP/IPv4 frame from the server with valid checksums to
/// one of the clients' ports goes to that client's flight; a damaged one is a payload
/// error; other traffic is ignored.
fn receive(m: *mut port::Mbuf, flights: &mut [Flight], metrics: &EchoMetrics, now: u64) {
    let (bytes, whole) = port::data(m);
    if !whole {
        metrics.payload_errors.increment();
        return;
    }
    match frame::parse(bytes) {
        Ok(d) if d.src.ip == SERVER_IP && d.dst.ip == CLIENT_IP => {
            let client = usize::from(d.dst.port.wrapping_sub(CLIENT_PORT_BASE));
            if let Some(flight) = flights.get_mut(client) {
                take(flight, d.payload, now, metrics);
            }
        }
        Ok(_) | Err(Fault::NotIpv4 | Fault::NotUdp) => {}
        Err(_) => metrics.payload_errors.increment(),
    }
}
