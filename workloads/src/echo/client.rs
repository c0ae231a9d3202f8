//! The echo clients: each a socket (a connection over TCP) of its own and a [`Flight`] of
//! messages, driven by the chosen back end.
//!
//! `poll` and `mmsg` run every client in one loop on one thread (pinned to the first
//! allowed CPU with `poll`): send what is due, count what timed out, take what came back —
//! busy polling with `poll`, after a `ppoll` wait until the next deadline with `mmsg`.
//! `tokio` runs a task per client on a current-thread runtime.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::sockets::{self, BATCH, Core, Mmsg, grow_buffers, net_error, ppoll};
use super::wire::{
    Arrival, FRAGMENT, Flight, HEADER, Header, Pacing, StreamBuf, Tally, datagram, fragments, frame,
};
use super::{Backend, EchoMetrics, NAME, Protocol};
use crate::WorkloadError;
use crate::ipc::monotonic_ns;
use crate::report::StopSignal;

/// Longest a blocking wait lasts before the loop looks at the stop signal again.
const WAIT_SLICE: Duration = Duration::from_millis(10);

/// What one point's clients do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientSetup {
    pub(crate) protocol: Protocol,
    pub(crate) backend: Backend,
    pub(crate) server: SocketAddr,
    pub(crate) size: usize,
    pub(crate) pacing: Pacing,
    pub(crate) timeout: Duration,
    /// Nothing back for this long with messages in flight: the server is not answering.
    pub(crate) silence: Duration,
    /// Messages per client, or none to run for `duration`.
    pub(crate) limit: Option<u64>,
    pub(crate) duration: Option<Duration>,
    pub(crate) num_clients: u32,
    pub(crate) first_seq: u64,
}

impl ClientSetup {
    pub(crate) fn flight(&self, client: u32, now_ns: u64) -> Flight {
        Flight::new(
            self.size,
            self.pacing,
            u64::try_from(self.timeout.as_nanos()).unwrap_or(u64::MAX),
            self.limit,
            // Each client's numbers apart from the others' (one server socket sees all).
            self.first_seq + (u64::from(client) << 32),
            now_ns,
        )
    }

    pub(crate) fn end_ns(&self, began_ns: u64) -> Option<u64> {
        self.duration
            .map(|d| began_ns.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }

    /// The longest datagram of a message.
    fn datagram_len(&self) -> usize {
        HEADER + self.size.min(FRAGMENT)
    }

    pub(crate) fn silence_error(&self, flight: &Flight) -> WorkloadError {
        let reason = if flight.answered {
            format!(
                "the server at {} stopped answering: nothing back for {:?} ({} timeouts)",
                self.server, self.silence, flight.tally.timeouts
            )
        } else {
            format!(
                "no answer from {} within {:?} ({} timeouts of --timeout {:?}): is a {NAME} \
                 server with --protocol {} listening there, and reachable?",
                self.server,
                self.silence,
                flight.tally.timeouts,
                self.timeout,
                match self.protocol {
                    Protocol::Udp => "udp",
                    Protocol::Tcp => "tcp",
                }
            )
        };
        WorkloadError::Broken {
            workload: NAME,
            reason,
        }
    }

    fn io_error(&self, doing: &str, e: io::Error) -> WorkloadError {
        let hint = match e.kind() {
            io::ErrorKind::ConnectionRefused => " (nothing listens there)",
            io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof => {
                " (the server closed the connection)"
            }
            _ => "",
        };
        net_error(format!("{doing} {}{hint}", self.server), e)
    }
}

/// Runs one point's clients until each has had its messages back (or timed out), the
/// duration is over, or `halt`; returns their merged tally and the time taken.
pub(crate) fn run(
    setup: &ClientSetup,
    metrics: &EchoMetrics,
    halt: &StopSignal,
) -> Result<(Tally, Duration), WorkloadError> {
    match setup.backend {
        Backend::Tokio => run_tokio(setup, metrics, halt),
        Backend::Poll | Backend::Mmsg => run_sync(setup, metrics, halt),
        #[cfg(feature = "dpdk")]
        Backend::Dpdk => super::dpdk::run_clients(setup, metrics, halt),
        #[cfg(not(feature = "dpdk"))]
        Backend::Dpdk => Err(super::dpdk::refused()),
    }
}

fn unspecified(server: SocketAddr) -> SocketAddr {
    match server {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

fn connect_udp(setup: &ClientSetup) -> Result<UdpSocket, WorkloadError> {
    let sock = UdpSocket::bind(unspecified(setup.server))
        .map_err(|e| net_error("binding a client socket", e))?;
    sock.connect(setup.server)
        .map_err(|e| setup.io_error("connecting to", e))?;
    grow_buffers(sock.as_raw_fd());
    sock.set_nonblocking(true)
        .map_err(|e| net_error("making a client socket non-blocking", e))?;
    Ok(sock)
}

fn connect_tcp(setup: &ClientSetup) -> Result<TcpStream, WorkloadError> {
    let stream = TcpStream::connect_timeout(&setup.server, setup.timeout.max(WAIT_SLICE))
        .map_err(|e| setup.io_error("connecting to", e))?;
    let _ = stream.set_nodelay(true);
    grow_buffers(stream.as_raw_fd());
    stream
        .set_nonblocking(true)
        .map_err(|e| net_error("making a connection non-blocking", e))?;
    Ok(stream)
}

/// Books a piece that came back.
pub(crate) fn take(flight: &mut Flight, piece: &[u8], now_ns: u64, metrics: &EchoMetrics) {
    let Some(header) = Header::decode(piece) else {
        return;
    };
    match flight.arrive(header, &piece[HEADER..], now_ns) {
        Arrival::Complete(rtt) => {
            metrics.messages.increment();
            metrics.bytes.add(flight.size as u64);
            metrics.rtt.record(rtt);
        }
        Arrival::Corrupt => metrics.payload_errors.increment(),
        Arrival::Part | Arrival::Stray => {}
    }
}

enum SyncSock {
    Udp(UdpSocket),
    Tcp {
        stream: TcpStream,
        input: StreamBuf,
        out: Vec<u8>,
        out_at: usize,
    },
}

struct SyncClient {
    sock: SyncSock,
    flight: Flight,
}

impl SyncClient {
    fn fd(&self) -> i32 {
        match &self.sock {
            SyncSock::Udp(s) => s.as_raw_fd(),
            SyncSock::Tcp { stream, .. } => stream.as_raw_fd(),
        }
    }

    fn wants_out(&self) -> bool {
        matches!(&self.sock, SyncSock::Tcp { out, out_at, .. } if *out_at < out.len())
    }
}

/// Buffers of the sync loop, shared by its clients.
struct SyncBufs {
    datagram: Vec<u8>,
    batch: Option<Mmsg>,
    lens: [usize; BATCH],
}

fn send_due(
    c: &mut SyncClient,
    setup: &ClientSetup,
    bufs: &mut SyncBufs,
    now_ns: u64,
) -> Result<(), WorkloadError> {
    let frags = fragments(setup.size);
    match &mut c.sock {
        SyncSock::Udp(sock) => {
            let mut queued = 0;
            while let Some(seq) = c.flight.next_send(now_ns) {
                for index in 0..frags {
                    if let Some(batch) = bufs.batch.as_mut() {
                        if queued == BATCH {
                            flush_batch(sock, batch, &bufs.lens, queued, setup)?;
                            queued = 0;
                        }
                        bufs.lens[queued] = datagram(seq, setup.size, index, batch.slot(queued));
                        queued += 1;
                    } else {
                        let len = datagram(seq, setup.size, index, &mut bufs.datagram);
                        send_spinning(sock, &bufs.datagram[..len], setup)?;
                    }
                }
            }
            if let Some(batch) = bufs.batch.as_mut()
                && queued > 0
            {
                flush_batch(sock, batch, &bufs.lens, queued, setup)?;
            }
        }
        SyncSock::Tcp { out, .. } => {
            while let Some(seq) = c.flight.next_send(now_ns) {
                frame(seq, setup.size, out);
            }
        }
    }
    Ok(())
}

/// Sends one datagram, spinning while the send buffer is full, at most a timeout (then
/// the datagram is dropped and its message will time out).
fn send_spinning(sock: &UdpSocket, bytes: &[u8], setup: &ClientSetup) -> Result<(), WorkloadError> {
    let give_up = Instant::now() + setup.timeout;
    loop {
        match sock.send(bytes) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= give_up {
                    return Ok(());
                }
                std::hint::spin_loop();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(setup.io_error("sending to", e)),
        }
    }
}

fn flush_batch(
    sock: &UdpSocket,
    batch: &mut Mmsg,
    lens: &[usize],
    count: usize,
    setup: &ClientSetup,
) -> Result<(), WorkloadError> {
    let give_up = Instant::now() + setup.timeout;
    let mut sent = 0;
    let mut fds = [libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    }];
    while sent < count {
        match batch.send(sock.as_raw_fd(), sent, count, lens, false) {
            Ok(0) => {
                if Instant::now() >= give_up {
                    return Ok(());
                }
                ppoll(&mut fds, Duration::from_millis(1))
                    .map_err(|e| net_error("waiting to send", e))?;
            }
            Ok(k) => sent += k,
            Err(e) => return Err(setup.io_error("sending to", e)),
        }
    }
    Ok(())
}

/// Takes whatever has come back for this client: without waiting, or (`wait`, a lone
/// mmsg client on a blocking socket) waiting in `recvmmsg` for the first datagram.
fn receive(
    c: &mut SyncClient,
    setup: &ClientSetup,
    bufs: &mut SyncBufs,
    metrics: &EchoMetrics,
    mut wait: bool,
) -> Result<(), WorkloadError> {
    match &mut c.sock {
        SyncSock::Udp(sock) => {
            if let Some(batch) = bufs.batch.as_mut() {
                loop {
                    let n = batch
                        .recv(sock.as_raw_fd(), false, wait)
                        .map_err(|e| setup.io_error("receiving from", e))?;
                    wait = false;
                    if n == 0 {
                        return Ok(());
                    }
                    let now = monotonic_ns();
                    for i in 0..n {
                        take(&mut c.flight, batch.received(i), now, metrics);
                    }
                }
            }
            loop {
                match sock.recv(&mut bufs.datagram) {
                    Ok(n) => take(&mut c.flight, &bufs.datagram[..n], monotonic_ns(), metrics),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(setup.io_error("receiving from", e)),
                }
            }
        }
        SyncSock::Tcp {
            stream,
            input,
            out,
            out_at,
        } => {
            while *out_at < out.len() {
                match stream.write(&out[*out_at..]) {
                    Ok(n) => *out_at += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(setup.io_error("sending to", e)),
                }
            }
            if *out_at == out.len() {
                out.clear();
                *out_at = 0;
            }
            loop {
                match stream.read(input.spare()) {
                    Ok(0) => {
                        return Err(
                            setup.io_error("receiving from", io::ErrorKind::UnexpectedEof.into())
                        );
                    }
                    Ok(n) => {
                        input.filled(n);
                        let now = monotonic_ns();
                        while let Some(f) = input.next_frame() {
                            let f = f.map_err(|reason| WorkloadError::BadFrame {
                                workload: NAME,
                                context: format!("from {}", setup.server),
                                reason,
                            })?;
                            take(&mut c.flight, input.bytes(f), now, metrics);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(setup.io_error("receiving from", e)),
                }
            }
        }
    }
}

/// `poll` and `mmsg`: every client in one loop on this thread.
fn run_sync(
    setup: &ClientSetup,
    metrics: &EchoMetrics,
    halt: &StopSignal,
) -> Result<(Tally, Duration), WorkloadError> {
    let spin = setup.backend == Backend::Poll;
    if spin {
        sockets::pin(Core::First);
    }
    let mut clients = Vec::with_capacity(setup.num_clients as usize);
    let now = monotonic_ns();
    for client in 0..setup.num_clients {
        let sock = match setup.protocol {
            Protocol::Udp => SyncSock::Udp(connect_udp(setup)?),
            Protocol::Tcp => SyncSock::Tcp {
                stream: connect_tcp(setup)?,
                input: StreamBuf::new(),
                out: Vec::new(),
                out_at: 0,
            },
        };
        clients.push(SyncClient {
            sock,
            flight: setup.flight(client, now),
        });
    }
    let mut bufs = SyncBufs {
        datagram: vec![0; setup.datagram_len()],
        batch: (!spin && setup.protocol == Protocol::Udp).then(|| Mmsg::new(setup.datagram_len())),
        lens: [0; BATCH],
    };
    // A lone mmsg UDP client in closed loop waits in recvmmsg itself (its socket blocking,
    // with a receive timeout): one system call per answer, as the server. Its deadlines
    // are then looked at every WAIT_SLICE at worst. Several clients, or sends on a
    // schedule, wait in ppoll instead.
    let block = !spin
        && setup.protocol == Protocol::Udp
        && clients.len() == 1
        && setup.pacing.interval_ns.is_none();
    if block && let SyncSock::Udp(sock) = &clients[0].sock {
        sock.set_nonblocking(false)
            .and_then(|()| sock.set_read_timeout(Some(WAIT_SLICE)))
            .map_err(|e| net_error("setting a client socket's receive timeout", e))?;
    }
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(clients.len());
    let began = Instant::now();
    let began_ns = monotonic_ns();
    for c in &mut clients {
        c.flight.last_heard_ns = began_ns;
    }
    let end_ns = setup.end_ns(began_ns);
    let silence_ns = u64::try_from(setup.silence.as_nanos()).unwrap_or(u64::MAX);
    loop {
        let now = monotonic_ns();
        if halt.is_set() || end_ns.is_some_and(|end| now >= end) {
            clients.iter_mut().for_each(|c| c.flight.abandon());
            break;
        }
        let mut all_done = true;
        let mut wake = end_ns.unwrap_or(u64::MAX);
        for c in &mut clients {
            send_due(c, setup, &mut bufs, now)?;
            metrics.timeouts.add(c.flight.expire(now));
            if c.flight.silent(now, silence_ns) {
                return Err(setup.silence_error(&c.flight));
            }
            all_done &= c.flight.done();
            wake = wake.min(c.flight.next_wake());
        }
        if all_done {
            break;
        }
        if block {
            receive(&mut clients[0], setup, &mut bufs, metrics, true)?;
            continue;
        }
        if !spin {
            fds.clear();
            fds.extend(clients.iter().map(|c| libc::pollfd {
                fd: c.fd(),
                events: if c.wants_out() {
                    libc::POLLIN | libc::POLLOUT
                } else {
                    libc::POLLIN
                },
                revents: 0,
            }));
            let wait = Duration::from_nanos(wake.saturating_sub(now)).min(WAIT_SLICE);
            ppoll(&mut fds, wait).map_err(|e| net_error("waiting for answers", e))?;
        }
        for (i, c) in clients.iter_mut().enumerate() {
            if !spin && fds[i].revents == 0 {
                continue;
            }
            receive(c, setup, &mut bufs, metrics, false)?;
        }
    }
    let elapsed = began.elapsed();
    let mut tally = Tally::default();
    for c in &clients {
        tally.merge(&c.flight.tally);
    }
    Ok((tally, elapsed))
}

enum AsyncSock {
    Udp(tokio::net::UdpSocket),
    Tcp(tokio::net::TcpStream),
}

/// `tokio`: a task per client on a current-thread runtime.
fn run_tokio(
    setup: &ClientSetup,
    metrics: &EchoMetrics,
    halt: &StopSignal,
) -> Result<(Tally, Duration), WorkloadError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|source| WorkloadError::Runtime { threads: 1, source })?;
    let setup = *setup;
    runtime.block_on(async move {
        let mut socks = Vec::with_capacity(setup.num_clients as usize);
        for _ in 0..setup.num_clients {
            socks.push(match setup.protocol {
                Protocol::Udp => AsyncSock::Udp(
                    tokio::net::UdpSocket::from_std(connect_udp(&setup)?)
                        .map_err(|e| net_error("registering a client socket", e))?,
                ),
                Protocol::Tcp => AsyncSock::Tcp(
                    tokio::net::TcpStream::from_std(connect_tcp(&setup)?)
                        .map_err(|e| net_error("registering a connection", e))?,
                ),
            });
        }
        let began = Instant::now();
        let began_ns = monotonic_ns();
        let mut tasks = tokio::task::JoinSet::new();
        for (client, sock) in socks.into_iter().enumerate() {
            let flight = setup.flight(client as u32, began_ns);
            tasks.spawn(client_task(
                sock,
                flight,
                setup,
                metrics.clone(),
                halt.clone(),
                began_ns,
            ));
        }
        let mut tally = Tally::default();
        let mut failed = None;
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(Ok(t)) => tally.merge(&t),
                Ok(Err(e)) => {
                    // One client's failure ends the others too.
                    halt.set();
                    failed.get_or_insert(e);
                }
                Err(e) => {
                    halt.set();
                    failed.get_or_insert(WorkloadError::Panicked {
                        what: "an echo client task".to_owned(),
                        message: e.to_string(),
                    });
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok((tally, began.elapsed())),
        }
    })
}

async fn client_task(
    sock: AsyncSock,
    mut flight: Flight,
    setup: ClientSetup,
    metrics: EchoMetrics,
    halt: StopSignal,
    began_ns: u64,
) -> Result<Tally, WorkloadError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let frags = fragments(setup.size);
    let end_ns = setup.end_ns(began_ns);
    let silence_ns = u64::try_from(setup.silence.as_nanos()).unwrap_or(u64::MAX);
    let mut datagram_buf = vec![0u8; setup.datagram_len()];
    let mut input = StreamBuf::new();
    let mut out = Vec::new();
    let origin = Instant::now();
    let origin_ns = monotonic_ns();
    let mut sock = sock;
    loop {
        let now = monotonic_ns();
        if halt.is_set() || end_ns.is_some_and(|end| now >= end) {
            flight.abandon();
            break;
        }
        match &mut sock {
            AsyncSock::Udp(s) => {
                while let Some(seq) = flight.next_send(now) {
                    for index in 0..frags {
                        let len = datagram(seq, setup.size, index, &mut datagram_buf);
                        match tokio::time::timeout(setup.timeout, s.send(&datagram_buf[..len]))
                            .await
                        {
                            Ok(Ok(_)) | Err(_) => {}
                            Ok(Err(e)) => return Err(setup.io_error("sending to", e)),
                        }
                    }
                }
            }
            AsyncSock::Tcp(s) => {
                while let Some(seq) = flight.next_send(now) {
                    frame(seq, setup.size, &mut out);
                }
                if !out.is_empty() {
                    match tokio::time::timeout(setup.silence, s.write_all(&out)).await {
                        Ok(Ok(())) => out.clear(),
                        Ok(Err(e)) => return Err(setup.io_error("sending to", e)),
                        Err(_) => return Err(setup.silence_error(&flight)),
                    }
                }
            }
        }
        metrics.timeouts.add(flight.expire(now));
        if flight.silent(now, silence_ns) {
            return Err(setup.silence_error(&flight));
        }
        if flight.done() {
            break;
        }
        let wake_ns = flight
            .next_wake()
            .min(end_ns.unwrap_or(u64::MAX))
            .min(now + WAIT_SLICE.as_nanos() as u64);
        let wake = tokio::time::Instant::from_std(
            origin + Duration::from_nanos(wake_ns.saturating_sub(origin_ns)),
        );
        match &mut sock {
            AsyncSock::Udp(s) => {
                if let Ok(got) = tokio::time::timeout_at(wake, s.recv(&mut datagram_buf)).await {
                    let n = got.map_err(|e| setup.io_error("receiving from", e))?;
                    take(&mut flight, &datagram_buf[..n], monotonic_ns(), &metrics);
                    // Whatever else is there already, without another wait.
                    while let Ok(n) = s.try_recv(&mut datagram_buf) {
                        take(&mut flight, &datagram_buf[..n], monotonic_ns(), &metrics);
                    }
                }
            }
            AsyncSock::Tcp(s) => {
                if let Ok(got) = tokio::time::timeout_at(wake, s.read(input.spare())).await {
                    let n = got.map_err(|e| setup.io_error("receiving from", e))?;
                    if n == 0 {
                        return Err(
                            setup.io_error("receiving from", io::ErrorKind::UnexpectedEof.into())
                        );
                    }
                    input.filled(n);
                    let now = monotonic_ns();
                    while let Some(f) = input.next_frame() {
                        let f = f.map_err(|reason| WorkloadError::BadFrame {
                            workload: NAME,
                            context: format!("from {}", setup.server),
                            reason,
                        })?;
                        take(&mut flight, input.bytes(f), now, &metrics);
                    }
                }
            }
        }
    }
    Ok(flight.tally)
}
