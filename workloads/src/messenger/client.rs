//! The clients, shard per core as the originals' crimson client: client `i` is a thread
//! pinned to CPU `i mod n` of the client set, with a current-thread runtime and
//! `--conns-per-client` connections. Each connection keeps `--depth` messages
//! outstanding: a sender writes batches of frames whenever answers free room, a receiver
//! reads the answers and checks each is the next message sent (sequence number, size,
//! checksum). At the end the sender half-closes; the receiver reads every answer left and
//! then the server's close, so a message lost or duplicated is an error, never a silence.
//!
//! Counts and latencies are kept per connection and added to the shared metrics every
//! [`FLUSH_EVERY`], off the per-message path.
//!
//! In poll mode (`--poll-mode`, as perf-crimson-msgr's clients under seastar's
//! `--poll-mode`) each client thread's runtime is driven by [`reactor::polling`]: it
//! busy-polls its connections instead of sleeping in `epoll_wait`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::Semaphore;

use super::NAME;
use super::cpuset::{CpuSet, affinity, current_tid, last_cpu, pin_current_thread};
use super::frame::{self, HEADER_LEN, Header, Messages};
use super::reactor::{self, ReactorClock, ReactorTimes};
use super::tally::Tally;
use crate::WorkloadError;
use crate::protocol::new_latency_histogram;
use crate::report::StopSignal;

/// How often a connection adds its counts and latencies to the shared metrics.
pub const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// Frames a sender writes at most in one write.
const MAX_BATCH: usize = 64;
/// Bytes a sender writes at most in one write (large messages: fewer frames a batch, at
/// least one).
const MAX_BATCH_BYTES: usize = 1 << 20;
/// Bytes a receiver reads at once.
const READ_BUF: usize = 256 << 10;

/// The memory one connection's client side holds for messages of `frame_len` bytes with
/// `depth` outstanding: the send batch, the receive buffer and frame, and the queue of
/// messages in flight (a header and a send time each).
pub(super) fn connection_bytes(frame_len: u64, depth: u64) -> u64 {
    let max_batch = (MAX_BATCH_BYTES as u64 / frame_len.max(1)).clamp(1, MAX_BATCH as u64);
    let in_flight = depth.saturating_mul(std::mem::size_of::<(Header, Instant)>() as u64);
    max_batch
        .saturating_mul(frame_len)
        .saturating_add(READ_BUF as u64)
        .saturating_add(frame_len)
        .saturating_add(in_flight)
}
/// How long a client tries to connect before the run fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the answers still outstanding at the end may take.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What the clients of one instance are to do.
#[derive(Debug, Clone)]
pub struct ClientPlan {
    /// Client threads.
    pub clients: u32,
    /// Connections per client.
    pub conns_per_client: u32,
    /// Outstanding messages per connection.
    pub depth: u32,
    /// Payload bytes per message.
    pub msg_size: usize,
    /// How long they send.
    pub msgtime: Duration,
    /// The CPUs they are pinned to, one each, round robin.
    pub cpus: CpuSet,
    /// The server.
    pub target: SocketAddr,
    /// Busy-poll the connections instead of sleeping in `epoll_wait` (`--poll-mode`).
    pub poll_mode: bool,
}

/// What the clients of one instance did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientOutcome {
    /// From the clients' start to every connection open.
    pub connect_time: Duration,
    /// From every connection open to the last answer.
    pub messaging_time: Duration,
    /// Messages sent.
    pub sent: u64,
    /// Answers received (each checked: the run fails on one lost, duplicated, reordered
    /// or damaged).
    pub received: u64,
    /// Bytes sent, headers included.
    pub bytes_out: u64,
    /// Latency of every message.
    pub latency: Histogram<u64>,
    /// Sum of the latencies, for the mean.
    pub latency_sum_ns: u128,
    /// Ended by a stop before the message time.
    pub stopped: bool,
    /// Each client thread: where it was pinned and where it last ran.
    pub threads: Vec<ClientThread>,
}

/// A client thread, read back at its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientThread {
    /// Its thread id.
    pub tid: i32,
    /// The CPU it was pinned to.
    pub cpu: usize,
    /// The CPUs it was allowed on at its end (sched_getaffinity).
    pub allowed: Option<CpuSet>,
    /// The CPU it last ran on (field 39 of its /proc stat).
    pub last_cpu: Option<usize>,
    /// Its reactor's busy and idle-polling time over the messaging (poll mode).
    pub reactor: Option<ReactorTimes>,
}

impl ClientOutcome {
    /// Messages answered per second of messaging time.
    pub fn iops(&self) -> f64 {
        per_second(self.received as f64, self.messaging_time)
    }

    /// Mean latency in milliseconds.
    pub fn mean_latency_ms(&self) -> f64 {
        if self.received == 0 {
            0.0
        } else {
            self.latency_sum_ns as f64 / self.received as f64 / 1e6
        }
    }

    /// Bytes sent per second, in MB/s (10^6 bytes).
    pub fn out_mb_per_s(&self) -> f64 {
        per_second(self.bytes_out as f64, self.messaging_time) / 1e6
    }
}

fn per_second(n: f64, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 { n / s } else { 0.0 }
}

/// One connection's results.
#[derive(Debug)]
struct ConnResult {
    sent: u64,
    received: u64,
    bytes_out: u64,
    latency: Histogram<u64>,
    latency_sum_ns: u128,
    last_answer: Instant,
}

/// Runs the clients of one instance to the end; counts flow into `tally` as they go.
pub fn run(
    plan: &ClientPlan,
    tally: &Arc<Tally>,
    stop: &StopSignal,
) -> Result<ClientOutcome, WorkloadError> {
    let clients = plan.clients as usize;
    let cpus = plan.cpus.cpus();
    if cpus.is_empty() {
        return Err(WorkloadError::Broken {
            workload: NAME,
            reason: "no CPU for the clients".to_owned(),
        });
    }
    let barrier = Arc::new(Barrier::new(clients + 1));
    let failed = Arc::new(AtomicBool::new(false));
    let begun = Instant::now();
    let mut handles = Vec::with_capacity(clients);
    for i in 0..clients {
        let cpu = cpus[i % cpus.len()];
        let (plan, tally, stop) = (plan.clone(), tally.clone(), stop.clone());
        let (b, f) = (barrier.clone(), failed.clone());
        let handle = std::thread::Builder::new()
            .name(format!("msgr-client-{i}"))
            .spawn(move || client_main(i, cpu, &plan, &tally, &stop, &b, &f))
            .map_err(|source| WorkloadError::Thread {
                thread: "msgr-client",
                source,
            });
        match handle {
            Ok(h) => handles.push(h),
            Err(e) => {
                // The threads already started wait at the barrier: let them through to fail.
                failed.store(true, Ordering::SeqCst);
                for _ in handles.len()..clients {
                    let b = barrier.clone();
                    std::thread::spawn(move || b.wait());
                }
                barrier.wait();
                for h in handles {
                    let _ = h.join();
                }
                return Err(e);
            }
        }
    }
    barrier.wait();
    let connected = Instant::now();
    let mut results = Vec::new();
    let mut threads = Vec::new();
    let mut first_error = None;
    for (i, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok((r, thread))) => {
                results.extend(r);
                threads.extend(thread);
            }
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(payload) => {
                first_error.get_or_insert(WorkloadError::Panicked {
                    what: format!("messenger client {i}"),
                    message: crate::error::panic_message(&*payload),
                });
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let mut latency = new_latency_histogram();
    let mut out = ClientOutcome {
        connect_time: connected - begun,
        messaging_time: Duration::ZERO,
        sent: 0,
        received: 0,
        bytes_out: 0,
        latency: new_latency_histogram(),
        latency_sum_ns: 0,
        stopped: stop.is_set(),
        threads,
    };
    let mut last = connected;
    for r in results {
        out.sent += r.sent;
        out.received += r.received;
        out.bytes_out += r.bytes_out;
        out.latency_sum_ns += r.latency_sum_ns;
        let _ = latency.add(&r.latency);
        last = last.max(r.last_answer);
    }
    out.latency = latency;
    out.messaging_time = last - connected;
    Ok(out)
}

fn client_main(
    index: usize,
    cpu: usize,
    plan: &ClientPlan,
    tally: &Arc<Tally>,
    stop: &StopSignal,
    barrier: &Barrier,
    failed: &AtomicBool,
) -> Result<(Vec<ConnResult>, Option<ClientThread>), WorkloadError> {
    let prepared = (|| {
        pin_current_thread(&CpuSet::of([cpu])).map_err(|source| WorkloadError::Ipc {
            workload: NAME,
            context: format!("pinning client {index} to CPU {cpu}"),
            source,
        })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|source| WorkloadError::Runtime { threads: 1, source })?;
        let streams = runtime.block_on(async {
            let mut streams = Vec::new();
            for _ in 0..plan.conns_per_client {
                streams.push(connect(plan.target).await?);
            }
            Ok::<_, WorkloadError>(streams)
        })?;
        Ok::<_, WorkloadError>((runtime, streams))
    })();
    if prepared.is_err() {
        failed.store(true, Ordering::SeqCst);
    }
    // Every client waits for every other: messaging starts together.
    barrier.wait();
    let (runtime, streams) = prepared?;
    if failed.load(Ordering::SeqCst) {
        return Ok((Vec::new(), None));
    }
    let deadline = Instant::now() + plan.msgtime;
    let clock = plan.poll_mode.then(ReactorClock::default);
    let messaging = async {
        let mut tasks = tokio::task::JoinSet::new();
        for (c, stream) in streams.into_iter().enumerate() {
            let seed = ((index as u64) << 32) | c as u64;
            let messages = Messages::new(plan.msg_size, seed);
            tasks.spawn(connection(
                stream,
                messages,
                plan.depth as usize,
                deadline,
                tally.clone(),
                stop.clone(),
            ));
        }
        let mut results = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(r) => results.push(r.map_err(|reason| WorkloadError::Broken {
                    workload: NAME,
                    reason: format!("client {index}: {reason}"),
                })?),
                Err(e) => {
                    return Err(WorkloadError::Panicked {
                        what: format!("a connection of messenger client {index}"),
                        message: e.to_string(),
                    });
                }
            }
        }
        Ok(results)
    };
    let results = match &clock {
        Some(clock) => runtime.block_on(reactor::polling(messaging, clock)),
        None => runtime.block_on(messaging),
    }?;
    let tid = current_tid();
    let thread = ClientThread {
        tid,
        cpu,
        allowed: affinity(0).ok(),
        last_cpu: last_cpu(tid),
        reactor: clock.as_ref().map(ReactorClock::read),
    };
    Ok((results, Some(thread)))
}

async fn connect(target: SocketAddr) -> Result<TcpStream, WorkloadError> {
    let until = Instant::now() + CONNECT_TIMEOUT;
    loop {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(target)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(e))
                if e.kind() == std::io::ErrorKind::ConnectionRefused && Instant::now() < until =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Err(source)) => {
                return Err(WorkloadError::Ipc {
                    workload: NAME,
                    context: format!("connecting to {target}"),
                    source,
                });
            }
            Err(_) => {
                return Err(WorkloadError::Ipc {
                    workload: NAME,
                    context: format!("connecting to {target}"),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no answer within {CONNECT_TIMEOUT:?}"),
                    ),
                });
            }
        }
    }
}

/// One connection: a sender and a receiver over its halves, `depth` messages in flight.
async fn connection(
    stream: TcpStream,
    messages: Messages,
    depth: usize,
    deadline: Instant,
    tally: Arc<Tally>,
    stop: StopSignal,
) -> Result<ConnResult, String> {
    let (read, write) = stream.into_split();
    let room = Arc::new(Semaphore::new(depth));
    let in_flight: InFlight = Arc::new(Mutex::new(VecDeque::with_capacity(depth)));
    let frame_len = HEADER_LEN + messages.size();
    let sender = send(
        write,
        messages,
        frame_len,
        room.clone(),
        in_flight.clone(),
        deadline,
        stop,
    );
    let receiver = receive(read, frame_len, room, in_flight, tally);
    let receiver = async move {
        // The run ends with the drain: answers still outstanding have this long.
        tokio::time::timeout_at((deadline + DRAIN_TIMEOUT).into(), receiver)
            .await
            .unwrap_or_else(|_| Err("answers still outstanding after the drain timeout".to_owned()))
    };
    // The first failure on either side ends the connection.
    let ((sent, bytes_out), (received, latency, latency_sum_ns, last_answer)) =
        tokio::try_join!(sender, receiver)?;
    Ok(ConnResult {
        sent,
        received,
        bytes_out,
        latency,
        latency_sum_ns,
        last_answer,
    })
}

/// The messages sent and not yet answered, oldest first, with when each was sent.
type InFlight = Arc<Mutex<VecDeque<(Header, Instant)>>>;

/// A connection's sending half: batches of messages while `room` has permits (one per
/// message outstanding), until `deadline` or `stop`; then it half-closes. Its messages
/// sent and bytes out.
async fn send(
    mut write: OwnedWriteHalf,
    mut messages: Messages,
    frame_len: usize,
    room: Arc<Semaphore>,
    in_flight: InFlight,
    deadline: Instant,
    stop: StopSignal,
) -> Result<(u64, u64), String> {
    let max_batch = (MAX_BATCH_BYTES / frame_len).clamp(1, MAX_BATCH);
    let mut batch = Vec::with_capacity(max_batch * frame_len);
    let mut bytes_out = 0u64;
    let mut sent = 0u64;
    loop {
        if stop.is_set() || Instant::now() >= deadline {
            break;
        }
        let permit = tokio::time::timeout_at(deadline.into(), room.acquire()).await;
        let Ok(Ok(permit)) = permit else { break };
        permit.forget();
        let mut n = 1;
        while n < max_batch {
            match room.try_acquire() {
                Ok(p) => {
                    p.forget();
                    n += 1;
                }
                Err(_) => break,
            }
        }
        batch.clear();
        let now = Instant::now();
        {
            let mut q = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
            for _ in 0..n {
                q.push_back((messages.append_next(&mut batch), now));
            }
        }
        write
            .write_all(&batch)
            .await
            .map_err(|e| format!("sending: {e}"))?;
        reactor::note_work();
        bytes_out += batch.len() as u64;
        sent += n as u64;
    }
    // Half-close: the server answers what it has, then closes its side.
    write
        .shutdown()
        .await
        .map_err(|e| format!("closing the sending side: {e}"))?;
    Ok((sent, bytes_out))
}

/// A connection's receiving half: each answer checked against the oldest message
/// outstanding and timed, its permit given back, the tally fed every [`FLUSH_EVERY`];
/// until the server closes its side. Its answers, their latencies and sum, and when the
/// last one came.
async fn receive(
    read: OwnedReadHalf,
    frame_len: usize,
    room: Arc<Semaphore>,
    in_flight: InFlight,
    tally: Arc<Tally>,
) -> Result<(u64, Histogram<u64>, u128, Instant), String> {
    let mut reader = BufReader::with_capacity(READ_BUF, read);
    let mut frame = vec![0u8; frame_len];
    let mut latency = new_latency_histogram();
    let mut pending = new_latency_histogram();
    let (mut received, mut latency_sum_ns) = (0u64, 0u128);
    let (mut pending_n, mut pending_sum) = (0u64, 0u64);
    let mut last_flush = Instant::now();
    let mut last_answer = Instant::now();
    loop {
        match reader.read_exact(&mut frame[..HEADER_LEN]).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(format!("receiving: {e}")),
        }
        let len = Header::decode(&frame).map_or(0, |h| h.len as usize);
        if HEADER_LEN + len != frame.len() {
            let seq = Header::decode(&frame).map_or(0, |h| h.seq);
            return Err(frame::FrameError::WrongLength {
                seq,
                expected: frame.len() - HEADER_LEN,
                found: len as u32,
            }
            .to_string());
        }
        reader
            .read_exact(&mut frame[HEADER_LEN..])
            .await
            .map_err(|e| format!("receiving a payload: {e}"))?;
        let now = Instant::now();
        let sent = in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let Some((header, at)) = sent else {
            let seq = Header::decode(&frame).map_or(0, |h| h.seq);
            return Err(format!(
                "message {seq} came back but none is outstanding (duplicated)"
            ));
        };
        frame::check_answer(&frame, &header).map_err(|e| e.to_string())?;
        reactor::note_work();
        room.add_permits(1);
        let ns = u64::try_from((now - at).as_nanos()).unwrap_or(u64::MAX);
        if pending.record(ns).is_err() {
            pending.saturating_record(ns);
        }
        pending_n += 1;
        pending_sum += ns;
        last_answer = now;
        if now - last_flush >= FLUSH_EVERY {
            tally.add(
                pending_n,
                pending_n * frame.len() as u64,
                pending_sum,
                &pending,
            );
            received += pending_n;
            latency_sum_ns += u128::from(pending_sum);
            let _ = latency.add(&pending);
            pending.reset();
            (pending_n, pending_sum) = (0, 0);
            last_flush = now;
        }
    }
    tally.add(
        pending_n,
        pending_n * frame.len() as u64,
        pending_sum,
        &pending,
    );
    received += pending_n;
    latency_sum_ns += u128::from(pending_sum);
    let _ = latency.add(&pending);
    let left = in_flight
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .len();
    if left > 0 {
        return Err(format!(
            "the server closed the connection with {left} messages unanswered (lost)"
        ));
    }
    Ok((received, latency, latency_sum_ns, last_answer))
}
