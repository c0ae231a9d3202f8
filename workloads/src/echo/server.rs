//! The echo server: sends back every datagram, and every complete TCP frame, as it came.
//!
//! One thread serves every client — Demikernel's single-core server. A datagram goes back
//! to its sender at once (a fragmented message needs no reassembly on the way back: each
//! fragment carries its offset); a TCP frame goes back once it is whole. The server never
//! blocks on a slow client: a datagram it cannot send within [`SEND_GIVE_UP`] is dropped
//! (the client counts a timeout), and a connection whose client does not read stops being
//! read until it does.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::sockets::{self, BATCH, Core, Mmsg, grow_buffers, net_error, ppoll};
use super::wire::{HEADER, Header, MAX_DATAGRAM, PROBE_SEQ, StreamBuf};
use super::{Backend, EchoMetrics, NAME, Protocol};
use crate::WorkloadError;
use crate::report::StopSignal;

/// How long the server retries a datagram the kernel will not take before dropping it.
const SEND_GIVE_UP: Duration = Duration::from_millis(100);
/// How long a blocking back end waits before it looks at the stop signal again.
const WAIT_SLICE: Duration = Duration::from_millis(10);
/// Bytes waiting to go back to one TCP client beyond which the server stops reading it.
const MAX_PENDING_OUT: usize = 16 << 20;

/// The server's socket: bound here, or inherited from the process that started it.
#[derive(Debug)]
pub(crate) enum Listener {
    Udp(UdpSocket),
    Tcp(TcpListener),
}

impl Listener {
    /// Binds `addr` (and listens, for TCP).
    pub(crate) fn bind(addr: SocketAddr, protocol: Protocol) -> Result<Listener, WorkloadError> {
        let context = || format!("listening on {addr} ({protocol:?})");
        Ok(match protocol {
            Protocol::Udp => {
                let s = UdpSocket::bind(addr).map_err(|e| net_error(context(), e))?;
                grow_buffers(s.as_raw_fd());
                Listener::Udp(s)
            }
            Protocol::Tcp => {
                let l = TcpListener::bind(addr).map_err(|e| net_error(context(), e))?;
                Listener::Tcp(l)
            }
        })
    }

    /// The socket inherited as descriptor `fd` (`--listen-fd`), checked to be a socket of
    /// `protocol`'s type.
    pub(crate) fn inherit(fd: RawFd, protocol: Protocol) -> Result<Listener, WorkloadError> {
        let mut kind: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes one c_int into `kind` and its length into `len`.
        let ok = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TYPE,
                (&mut kind as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        let want = match protocol {
            Protocol::Udp => libc::SOCK_DGRAM,
            Protocol::Tcp => libc::SOCK_STREAM,
        };
        if ok != 0 || kind != want {
            return Err(net_error(
                format!("--listen-fd {fd}: not an inherited {protocol:?} socket"),
                if ok != 0 {
                    io::Error::last_os_error()
                } else {
                    io::Error::from(io::ErrorKind::InvalidInput)
                },
            ));
        }
        // SAFETY: the descriptor was handed to this process (by number, by the process
        // that started it) for its own use, and nothing else here owns it.
        Ok(unsafe {
            match protocol {
                Protocol::Udp => Listener::Udp(UdpSocket::from_raw_fd(fd)),
                Protocol::Tcp => Listener::Tcp(TcpListener::from_raw_fd(fd)),
            }
        })
    }

    pub(crate) fn local_addr(&self) -> Result<SocketAddr, WorkloadError> {
        match self {
            Listener::Udp(s) => s.local_addr(),
            Listener::Tcp(l) => l.local_addr(),
        }
        .map_err(|e| net_error("reading the server's address", e))
    }
}

impl AsRawFd for Listener {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Listener::Udp(s) => s.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
        }
    }
}

/// What a server echoed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerTally {
    /// Messages echoed (the last datagram of a message, or a whole TCP frame).
    pub messages: u64,
    /// Payload bytes echoed.
    pub bytes: u64,
    /// How long it served.
    pub elapsed: Duration,
}

/// When serving ends: the stop signal, or the end of `--duration`.
struct Until<'a> {
    stop: &'a StopSignal,
    end: Option<Instant>,
}

impl Until<'_> {
    fn over(&self) -> bool {
        self.stop.is_set() || self.end.is_some_and(|end| Instant::now() >= end)
    }
}

/// Counts one datagram or frame echoed (not the clients' start-up probes).
pub(crate) fn count(piece: &[u8], metrics: &EchoMetrics) {
    if let Some(h) = Header::decode(piece)
        && h.seq < PROBE_SEQ
    {
        let payload = (piece.len() - HEADER) as u64;
        metrics.bytes.add(payload);
        if u64::from(h.offset) + payload >= u64::from(h.total) {
            metrics.messages.increment();
        }
    }
}

/// Serves on `listener` until `stop` (or `duration` has passed), on a thread of its own
/// (`bt-echo-server`, pinned to the last allowed CPU with `--backend poll`).
pub(crate) fn serve(
    listener: Listener,
    backend: Backend,
    metrics: &EchoMetrics,
    stop: &StopSignal,
    duration: Option<Duration>,
) -> Result<ServerTally, WorkloadError> {
    let began = Instant::now();
    let before = (metrics.messages.get(), metrics.bytes.get());
    let until = Until {
        stop,
        end: duration.map(|d| began + d),
    };
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("bt-echo-server".to_owned())
            .spawn_scoped(scope, || {
                if backend == Backend::Poll {
                    sockets::pin(Core::Last);
                }
                match (listener, backend) {
                    (listener, Backend::Tokio) => serve_tokio(listener, metrics, &until),
                    (Listener::Udp(s), Backend::Poll) => udp_poll(&s, metrics, &until),
                    (Listener::Udp(s), Backend::Mmsg) => udp_mmsg(&s, metrics, &until),
                    (Listener::Tcp(l), backend) => tcp_sync(&l, backend, metrics, &until),
                    // The DPDK server serves no kernel socket (`dpdk::serve`).
                    (Listener::Udp(_), Backend::Dpdk) => Err(WorkloadError::Broken {
                        workload: NAME,
                        reason: "--backend dpdk serves a memif port, not a socket".to_owned(),
                    }),
                }
            })
            .map_err(|source| WorkloadError::Thread {
                thread: "bt-echo-server",
                source,
            })?;
        thread.join().map_err(|payload| WorkloadError::Panicked {
            what: "the echo server".to_owned(),
            message: crate::error::panic_message(&*payload),
        })?
    })?;
    Ok(ServerTally {
        messages: metrics.messages.get() - before.0,
        bytes: metrics.bytes.get() - before.1,
        elapsed: began.elapsed(),
    })
}

/// Errors a server shrugs off: a client that went away (ICMP port unreachable on a later
/// receive), a datagram too big for the route.
fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    ) || e.raw_os_error() == Some(libc::EMSGSIZE)
        || e.raw_os_error() == Some(libc::EHOSTUNREACH)
        || e.raw_os_error() == Some(libc::ENETUNREACH)
}

/// Busy polling: a non-blocking receive in a loop, each datagram sent back at once.
fn udp_poll(sock: &UdpSocket, metrics: &EchoMetrics, until: &Until) -> Result<(), WorkloadError> {
    sock.set_nonblocking(true)
        .map_err(|e| net_error("making the server socket non-blocking", e))?;
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut turns = 0u32;
    loop {
        turns = turns.wrapping_add(1);
        if turns.is_multiple_of(256) && until.over() {
            return Ok(());
        }
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                let piece = &buf[..n];
                let give_up = Instant::now() + SEND_GIVE_UP;
                loop {
                    match sock.send_to(piece, from) {
                        Ok(_) => break,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            if Instant::now() >= give_up {
                                break;
                            }
                            std::hint::spin_loop();
                        }
                        Err(e) if transient(&e) => break,
                        Err(e) => return Err(net_error(format!("echoing to {from}"), e)),
                    }
                }
                count(piece, metrics);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) if transient(&e) => {}
            Err(e) => return Err(net_error("receiving on the server socket", e)),
        }
    }
}

/// Batches: up to [`BATCH`] datagrams in one `recvmmsg`, sent back in one `sendmmsg`. The
/// receive waits in the kernel (a blocking socket with a receive timeout of
/// [`WAIT_SLICE`], so the stop signal is seen), the send never does.
fn udp_mmsg(sock: &UdpSocket, metrics: &EchoMetrics, until: &Until) -> Result<(), WorkloadError> {
    sock.set_nonblocking(false)
        .and_then(|()| sock.set_read_timeout(Some(WAIT_SLICE)))
        .map_err(|e| net_error("setting the server socket's receive timeout", e))?;
    let fd = sock.as_raw_fd();
    let mut batch = Mmsg::new(MAX_DATAGRAM);
    let mut lens = [0usize; BATCH];
    let mut fds = [libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }];
    loop {
        if until.over() {
            return Ok(());
        }
        let n = match batch.recv(fd, true, true) {
            Ok(n) => n,
            Err(e) if transient(&e) => continue,
            Err(e) => return Err(net_error("receiving on the server socket", e)),
        };
        if n == 0 {
            continue;
        }
        for (i, len) in lens.iter_mut().enumerate().take(n) {
            let piece = batch.received(i);
            *len = piece.len();
            count(piece, metrics);
        }
        let give_up = Instant::now() + SEND_GIVE_UP;
        let mut sent = 0;
        while sent < n {
            match batch.send(fd, sent, n, &lens, true) {
                Ok(0) => {
                    if Instant::now() >= give_up {
                        break;
                    }
                    fds[0].events = libc::POLLOUT;
                    ppoll(&mut fds, Duration::from_millis(1))
                        .map_err(|e| net_error("waiting to send", e))?;
                }
                Ok(k) => sent += k,
                // The first datagram left could not go (its client went away): skip it.
                Err(e) if transient(&e) => sent += 1,
                Err(e) => return Err(net_error("echoing a batch", e)),
            }
        }
    }
}

/// One TCP client of a server that is not async: what came in, what goes back.
struct Conn {
    stream: TcpStream,
    input: StreamBuf,
    out: Vec<u8>,
    out_at: usize,
}

impl Conn {
    /// Reads what is there, queues the complete frames back, writes what the socket takes.
    /// Whether anything moved; an error when the connection is over.
    fn pump(&mut self, metrics: &EchoMetrics) -> io::Result<bool> {
        let mut moved = false;
        if self.out.len() - self.out_at < MAX_PENDING_OUT {
            match self.stream.read(self.input.spare()) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    self.input.filled(n);
                    moved = true;
                    while let Some(frame) = self.input.next_frame() {
                        let frame = frame.map_err(io::Error::other)?;
                        let bytes = self.input.bytes(frame);
                        count(bytes, metrics);
                        self.out.extend_from_slice(bytes);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        while self.out_at < self.out.len() {
            match self.stream.write(&self.out[self.out_at..]) {
                Ok(n) => {
                    self.out_at += n;
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.out_at == self.out.len() {
            self.out.clear();
            self.out_at = 0;
        }
        Ok(moved)
    }
}

/// TCP without async: every connection non-blocking in one loop, busy polling (poll) or
/// waiting in `ppoll` when nothing moved (mmsg: each read and write takes whatever is
/// there, many frames at a time).
fn tcp_sync(
    listener: &TcpListener,
    backend: Backend,
    metrics: &EchoMetrics,
    until: &Until,
) -> Result<(), WorkloadError> {
    listener
        .set_nonblocking(true)
        .map_err(|e| net_error("making the listener non-blocking", e))?;
    let mut conns: Vec<Conn> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    let mut turns = 0u32;
    loop {
        turns = turns.wrapping_add(1);
        if turns.is_multiple_of(256) && until.over() {
            return Ok(());
        }
        let mut moved = false;
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    stream
                        .set_nonblocking(true)
                        .map_err(|e| net_error("making a connection non-blocking", e))?;
                    grow_buffers(stream.as_raw_fd());
                    conns.push(Conn {
                        stream,
                        input: StreamBuf::new(),
                        out: Vec::new(),
                        out_at: 0,
                    });
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // A connection that went before it was accepted.
                Err(_) => break,
            }
        }
        conns.retain_mut(|c| match c.pump(metrics) {
            Ok(m) => {
                moved |= m;
                true
            }
            Err(_) => false,
        });
        if moved {
            continue;
        }
        match backend {
            Backend::Poll => std::hint::spin_loop(),
            _ => {
                if until.over() {
                    return Ok(());
                }
                fds.clear();
                fds.push(libc::pollfd {
                    fd: listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
                fds.extend(conns.iter().map(|c| libc::pollfd {
                    fd: c.stream.as_raw_fd(),
                    events: if c.out_at < c.out.len() {
                        libc::POLLIN | libc::POLLOUT
                    } else {
                        libc::POLLIN
                    },
                    revents: 0,
                }));
                ppoll(&mut fds, WAIT_SLICE).map_err(|e| net_error("waiting on connections", e))?;
            }
        }
    }
}

/// Async sockets on a current-thread runtime: one task for the UDP socket, or one per TCP
/// connection.
fn serve_tokio(
    listener: Listener,
    metrics: &EchoMetrics,
    until: &Until,
) -> Result<(), WorkloadError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|source| WorkloadError::Runtime { threads: 1, source })?;
    let metrics = metrics.clone();
    runtime.block_on(async move {
        let task = match listener {
            Listener::Udp(s) => {
                s.set_nonblocking(true)
                    .map_err(|e| net_error("making the server socket non-blocking", e))?;
                let s = tokio::net::UdpSocket::from_std(s)
                    .map_err(|e| net_error("registering the server socket", e))?;
                tokio::spawn(udp_task(s, metrics))
            }
            Listener::Tcp(l) => {
                l.set_nonblocking(true)
                    .map_err(|e| net_error("making the listener non-blocking", e))?;
                let l = tokio::net::TcpListener::from_std(l)
                    .map_err(|e| net_error("registering the listener", e))?;
                tokio::spawn(accept_task(l, metrics))
            }
        };
        loop {
            if until.over() {
                task.abort();
                return Ok(());
            }
            if task.is_finished() {
                return match task.await {
                    Ok(result) => result,
                    Err(e) => Err(WorkloadError::Panicked {
                        what: "the echo server task".to_owned(),
                        message: e.to_string(),
                    }),
                };
            }
            tokio::time::sleep(WAIT_SLICE).await;
        }
    })
}

async fn udp_task(sock: tokio::net::UdpSocket, metrics: EchoMetrics) -> Result<(), WorkloadError> {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let (n, from) = match sock.recv_from(&mut buf).await {
            Ok(got) => got,
            Err(e) if transient(&e) => continue,
            Err(e) => return Err(net_error("receiving on the server socket", e)),
        };
        let piece = &buf[..n];
        match tokio::time::timeout(SEND_GIVE_UP, sock.send_to(piece, from)).await {
            Ok(Err(e)) if !transient(&e) => {
                return Err(net_error(format!("echoing to {from}"), e));
            }
            _ => {}
        }
        count(piece, &metrics);
    }
}

async fn accept_task(
    listener: tokio::net::TcpListener,
    metrics: EchoMetrics,
) -> Result<(), WorkloadError> {
    let metrics = Arc::new(metrics);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        grow_buffers(stream.as_raw_fd());
        let metrics = metrics.clone();
        tokio::spawn(async move {
            // A connection's end, clean or not, is its client's business.
            let _ = tcp_task(stream, &metrics).await;
        });
    }
}

async fn tcp_task(mut stream: tokio::net::TcpStream, metrics: &EchoMetrics) -> io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut input = StreamBuf::new();
    let mut out = Vec::new();
    loop {
        let n = stream.read(input.spare()).await?;
        if n == 0 {
            return Ok(());
        }
        input.filled(n);
        while let Some(frame) = input.next_frame() {
            let frame = frame.map_err(io::Error::other)?;
            let bytes = input.bytes(frame);
            count(bytes, metrics);
            out.extend_from_slice(bytes);
        }
        if !out.is_empty() {
            stream.write_all(&out).await?;
            out.clear();
        }
    }
}
