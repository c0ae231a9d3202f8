//! The two servers. Crimson: one thread per CPU of the server's set, each pinned to its
//! CPU, each with its own current-thread runtime and its own listener on the shared port
//! (SO_REUSEPORT: the kernel spreads connections over them); a connection lives and dies
//! on the shard that accepted it, and shards share nothing while serving. Async: one
//! multi-threaded runtime, its workers allowed on the whole set, whose pool serves every
//! connection (tasks move between workers as the scheduler steals them).
//!
//! Both echo each complete frame unchanged once its checksum is checked, in batches:
//! read what the socket has, write back the whole frames in one write.
//!
//! Crimson in poll mode ([`Server::start_poll_mode`]): each shard's runtime is driven by
//! [`reactor::polling`], so the shard busy-polls its sockets on its CPU instead of
//! sleeping in `epoll_wait`, and counts its busy and idle-polling time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

use super::NAME;
use super::cpuset::{CpuSet, current_tid, pin_current_thread, thread_cpu_time, thread_switches};
use super::frame::{self, MAX_PAYLOAD};
use super::reactor::{self, ReactorClock, ReactorTimes};
use crate::WorkloadError;

/// How the server serves its connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerMode {
    /// Shard per core: a pinned thread, runtime and listener per CPU; nothing shared.
    #[default]
    Crimson,
    /// One multi-threaded runtime whose worker pool serves every connection.
    Async,
}

impl ServerMode {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerMode::Crimson => "crimson",
            ServerMode::Async => "async",
        }
    }
}

/// Bytes a connection reads at once (it grows for a frame larger than this).
const READ_BUF: usize = 256 << 10;

/// The memory one connection's server side holds for messages of `frame_len` bytes: its
/// receive buffer, which doubles until a whole frame fits (so up to twice a frame).
pub(super) fn connection_bytes(frame_len: u64) -> u64 {
    (READ_BUF as u64).max(frame_len.saturating_mul(2))
}
/// Pending connections a listener holds.
const BACKLOG: u32 = 1024;
/// Connection errors kept for the summary.
const MAX_ERRORS: usize = 16;

/// Frames and bytes one connection echoed, on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct ConnCount {
    frames: AtomicU64,
    bytes: AtomicU64,
}

/// What the server's connections share off the hot path: their counts (registered at
/// accept, read by the reporting thread) and their errors.
#[derive(Debug, Default)]
struct Book {
    counts: Mutex<Vec<Arc<ConnCount>>>,
    errors: Mutex<Vec<String>>,
}

impl Book {
    fn open(&self) -> Arc<ConnCount> {
        let count = Arc::new(ConnCount::default());
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(count.clone());
        count
    }

    fn error(&self, error: String) {
        let mut errors = self.errors.lock().unwrap_or_else(PoisonError::into_inner);
        if errors.len() < MAX_ERRORS {
            errors.push(error);
        }
    }
}

/// A server thread and where it may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerThread {
    /// Its thread id (a directory of /proc/self/task).
    pub tid: i32,
    /// The CPUs it is pinned to.
    pub cpus: CpuSet,
}

enum Kind {
    Crimson(Vec<JoinHandle<()>>),
    Async(tokio::runtime::Runtime),
}

/// A running echo server.
pub struct Server {
    mode: ServerMode,
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    kind: Kind,
    threads: Vec<ServerThread>,
    /// Each shard's reactor clock, beside `threads` (poll mode only).
    clocks: Vec<Arc<ReactorClock>>,
    book: Arc<Book>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("mode", &self.mode)
            .field("addr", &self.addr)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

fn ipc(context: String) -> impl FnOnce(std::io::Error) -> WorkloadError {
    move |source| WorkloadError::Ipc {
        workload: NAME,
        context,
        source,
    }
}

/// A listener on `addr` with SO_REUSEPORT, so that every shard can hold one on the port.
fn listen(addr: SocketAddr) -> Result<TcpListener, WorkloadError> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(ipc(format!("opening a socket for {addr}")))?;
    socket
        .set_reuseport(true)
        .map_err(ipc("setting SO_REUSEPORT".to_owned()))?;
    socket
        .set_reuseaddr(true)
        .map_err(ipc("setting SO_REUSEADDR".to_owned()))?;
    socket.bind(addr).map_err(|source| WorkloadError::Ipc {
        workload: NAME,
        context: format!(
            "listening on {addr}{}",
            if source.kind() == std::io::ErrorKind::AddrInUse {
                " (another server holds the port: --listen another, or port 0 for any)"
            } else {
                ""
            }
        ),
        source,
    })?;
    socket
        .listen(BACKLOG)
        .map_err(ipc(format!("listening on {addr}")))
}

impl Server {
    /// Starts a `mode` server on `cpus`, listening on `addr` (port 0 picks one).
    pub fn start(
        mode: ServerMode,
        addr: SocketAddr,
        cpus: &CpuSet,
    ) -> Result<Server, WorkloadError> {
        match mode {
            ServerMode::Crimson => Self::start_crimson(addr, cpus, false),
            ServerMode::Async => Self::start_async(addr, cpus),
        }
    }

    /// Starts a crimson server in poll mode on `cpus`, listening on `addr`: each shard
    /// busy-polls its sockets on its CPU and never sleeps waiting for them.
    pub fn start_poll_mode(addr: SocketAddr, cpus: &CpuSet) -> Result<Server, WorkloadError> {
        Self::start_crimson(addr, cpus, true)
    }

    fn start_crimson(addr: SocketAddr, cpus: &CpuSet, poll: bool) -> Result<Server, WorkloadError> {
        let (stop, stopped) = watch::channel(false);
        let book = Arc::new(Book::default());
        let clocks: Vec<Arc<ReactorClock>> = if poll {
            cpus.cpus().iter().map(|_| Arc::default()).collect()
        } else {
            Vec::new()
        };
        let mut handles = Vec::new();
        let mut threads = Vec::new();
        let mut bound = addr;
        let server = |handles: Vec<JoinHandle<()>>, threads, bound| Server {
            mode: ServerMode::Crimson,
            addr: bound,
            stop: stop.clone(),
            kind: Kind::Crimson(handles),
            threads,
            clocks: clocks.clone(),
            book: book.clone(),
        };
        for (shard, cpu) in cpus.cpus().into_iter().enumerate() {
            let (ready_tx, ready) = mpsc::channel();
            let stopped = stopped.clone();
            let book = book.clone();
            let clock = clocks.get(shard).cloned();
            // The first shard binds (port 0 picks a port); the others join its port.
            let at = bound;
            let handle = std::thread::Builder::new()
                .name(format!("msgr-shard-{shard}"))
                .spawn(move || shard_main(cpu, at, stopped, book, clock, ready_tx))
                .map_err(|source| WorkloadError::Thread {
                    thread: "msgr-shard",
                    source,
                });
            let handle = match handle {
                Ok(h) => h,
                Err(e) => {
                    server(handles, threads, bound).shutdown();
                    return Err(e);
                }
            };
            handles.push(handle);
            match ready.recv() {
                Ok(Ok((tid, local))) => {
                    bound = local;
                    threads.push(ServerThread {
                        tid,
                        cpus: CpuSet::of([cpu]),
                    });
                }
                Ok(Err(e)) => {
                    server(handles, threads, bound).shutdown();
                    return Err(e);
                }
                Err(_) => {
                    server(handles, threads, bound).shutdown();
                    return Err(WorkloadError::Broken {
                        workload: NAME,
                        reason: format!("server shard {shard} ended before it was ready"),
                    });
                }
            }
        }
        Ok(server(handles, threads, bound))
    }

    fn start_async(addr: SocketAddr, cpus: &CpuSet) -> Result<Server, WorkloadError> {
        let workers = cpus.len();
        let started: Arc<Mutex<Vec<Result<i32, String>>>> = Arc::default();
        let (on_start, set) = (started.clone(), cpus.clone());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("msgr-async")
            .on_thread_start(move || {
                let result = pin_current_thread(&set)
                    .map(|()| current_tid())
                    .map_err(|e| format!("pinning a server thread to CPUs {set}: {e}"));
                on_start
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(result);
            })
            .enable_io()
            .enable_time()
            .build()
            .map_err(|source| WorkloadError::Runtime {
                threads: u16::try_from(workers).unwrap_or(u16::MAX),
                source,
            })?;
        let (stop, stopped) = watch::channel(false);
        let book = Arc::new(Book::default());
        let listener = runtime.block_on(async { listen(addr) })?;
        let bound = listener
            .local_addr()
            .map_err(ipc(format!("reading the address bound for {addr}")))?;
        runtime.spawn(accept_loop(listener, stopped, book.clone()));
        // The workers are up once the pool has run a task on each; the pins are checked
        // here, not on the hot path.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut threads = Vec::new();
        loop {
            let done = started
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(Err(e)) = done.iter().find(|r| r.is_err()) {
                runtime.shutdown_timeout(Duration::from_secs(1));
                return Err(WorkloadError::Broken {
                    workload: NAME,
                    reason: e.clone(),
                });
            }
            if done.len() >= workers || std::time::Instant::now() >= deadline {
                threads.extend(done.into_iter().flatten().map(|tid| ServerThread {
                    tid,
                    cpus: cpus.clone(),
                }));
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(Server {
            mode: ServerMode::Async,
            addr: bound,
            stop,
            kind: Kind::Async(runtime),
            threads,
            clocks: Vec::new(),
            book,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its threads and their pins (async: the runtime's threads, each allowed on the
    /// whole set).
    pub fn threads(&self) -> &[ServerThread] {
        &self.threads
    }

    /// Frames and bytes echoed so far, all connections.
    pub fn served(&self) -> (u64, u64) {
        let counts = self
            .book
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        counts.iter().fold((0, 0), |(f, b), c| {
            (
                f + c.frames.load(Ordering::Relaxed),
                b + c.bytes.load(Ordering::Relaxed),
            )
        })
    }

    /// CPU time its threads have used so far (the async pool: the threads it started
    /// with).
    pub fn cpu_time(&self) -> Duration {
        self.threads
            .iter()
            .filter_map(|t| thread_cpu_time(t.tid))
            .sum()
    }

    /// Voluntary and involuntary context switches of its threads so far (the async pool:
    /// the threads it started with).
    pub fn switches(&self) -> (u64, u64) {
        self.threads
            .iter()
            .filter_map(|t| thread_switches(t.tid))
            .fold((0, 0), |(v, i), (dv, di)| (v + dv, i + di))
    }

    /// Whether its shards poll (crimson in poll mode).
    pub fn polls(&self) -> bool {
        !self.clocks.is_empty()
    }

    /// Each shard's CPU and reactor times so far (poll mode; empty otherwise).
    pub fn reactor_times(&self) -> Vec<(usize, ReactorTimes)> {
        self.threads
            .iter()
            .zip(&self.clocks)
            .map(|(t, c)| (t.cpus.cpus().first().copied().unwrap_or(0), c.read()))
            .collect()
    }

    /// Errors its connections ended with (the first few).
    pub fn errors(&self) -> Vec<String> {
        self.book
            .errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stops accepting, ends every connection and joins the threads.
    pub fn shutdown(self) {
        let _ = self.stop.send(true);
        match self.kind {
            Kind::Crimson(handles) => {
                for h in handles {
                    let _ = h.join();
                }
            }
            Kind::Async(runtime) => runtime.shutdown_timeout(Duration::from_secs(1)),
        }
    }
}

type Ready = mpsc::Sender<Result<(i32, SocketAddr), WorkloadError>>;

/// One crimson shard: pin, build its runtime, bind its listener, serve until stopped;
/// with a reactor clock, in poll mode.
fn shard_main(
    cpu: usize,
    addr: SocketAddr,
    mut stopped: watch::Receiver<bool>,
    book: Arc<Book>,
    clock: Option<Arc<ReactorClock>>,
    ready: Ready,
) {
    if let Err(source) = pin_current_thread(&CpuSet::of([cpu])) {
        let _ = ready.send(Err(WorkloadError::Ipc {
            workload: NAME,
            context: format!("pinning server shard to CPU {cpu}"),
            source,
        }));
        return;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(source) => {
            let _ = ready.send(Err(WorkloadError::Runtime { threads: 1, source }));
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match listen(addr).and_then(|l| {
            let local = l
                .local_addr()
                .map_err(ipc(format!("reading the address bound for {addr}")))?;
            Ok((l, local))
        }) {
            Ok((l, local)) => {
                let _ = ready.send(Ok((current_tid(), local)));
                l
            }
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        tokio::spawn(accept_loop(listener, stopped.clone(), book));
        match clock {
            Some(clock) => {
                // Polled every turn: a look at the flag, no waker needed.
                let until_stopped = std::future::poll_fn(|_| {
                    if *stopped.borrow() {
                        std::task::Poll::Ready(())
                    } else {
                        std::task::Poll::Pending
                    }
                });
                reactor::polling(until_stopped, &clock).await;
            }
            None => {
                let _ = stopped.wait_for(|s| *s).await;
            }
        }
    });
    // Dropping the runtime drops its connections.
}

async fn accept_loop(listener: TcpListener, mut stopped: watch::Receiver<bool>, book: Arc<Book>) {
    loop {
        if *stopped.borrow() {
            return;
        }
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stopped.changed() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                reactor::note_work();
                let _ = stream.set_nodelay(true);
                let count = book.open();
                let book = book.clone();
                tokio::spawn(async move {
                    if let Err(e) = echo(stream, &count).await {
                        book.error(format!("connection from {peer}: {e}"));
                    }
                });
            }
            Err(e) => {
                book.error(format!("accepting: {e}"));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Echoes whole, checked frames until the peer closes its side.
async fn echo(mut stream: TcpStream, count: &ConnCount) -> Result<(), String> {
    let mut buf = vec![0u8; READ_BUF];
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            let need = filled + frame::missing(&buf[..filled]);
            buf.resize(need.max(buf.len() * 2), 0);
        }
        let n = match stream.read(&mut buf[filled..]).await {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
            Err(e) => return Err(format!("reading: {e}")),
        };
        if n == 0 {
            return if filled == 0 {
                Ok(())
            } else {
                Err(format!("closed with {filled} bytes of a frame unread"))
            };
        }
        filled += n;
        reactor::note_work();
        let (whole, frames) =
            frame::scan(&buf[..filled], MAX_PAYLOAD).map_err(|e| e.to_string())?;
        if whole > 0 {
            // Counted before the answer leaves, so a client never sees more answers than
            // the server has counted.
            count.frames.fetch_add(frames, Ordering::Relaxed);
            count.bytes.fetch_add(whole as u64, Ordering::Relaxed);
            stream
                .write_all(&buf[..whole])
                .await
                .map_err(|e| format!("writing: {e}"))?;
            buf.copy_within(whole..filled, 0);
            filled -= whole;
        }
    }
}
