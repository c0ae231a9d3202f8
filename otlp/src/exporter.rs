//! The live exporter: the recorder hands it each interval's stacks and figures (a copy
//! into a bounded queue, never a wait), and a thread of its own, `bt-otlp`, builds the
//! requests and sends them, retrying with backoff; a batch that still fails, or that
//! finds the queue full, is dropped and counted. A collector that comes back gets the
//! batches from then on.
//!
//! The recorder's side costs a copy and never waits on the sending thread: new stack
//! definitions go into a pending table under a lock held for the insert (the sending
//! thread takes the whole table out with one swap), and latency histograms are queued in
//! their sparse form (a few hundred bytes, not the dense counts), so a full queue holds
//! little. The sending thread runs at a lower priority than the workload's
//! ([`SENDER_NICE`]), and so does a second one, `bt-otlp-names`, that builds the requests
//! of a worker's allocations: naming their stacks the first time reads the program's
//! symbols (tens of milliseconds for a release build, seconds for a debug one at that
//! priority on a busy machine), which must hold up neither the recorder nor the sending of
//! the other batches.
//!
//! What the exporter holds is bounded in bytes, not only in batches: the batches
//! waiting in either queue, being named, built or sent take their bytes of
//! [`OtlpOptions::queue_bytes`] until they are done with (a batch that does not fit is
//! dropped and counted as finding the queue full), and the stack definitions learnt over
//! a run, kept so that every later request resolves, take theirs of
//! [`OtlpOptions::table_bytes`] (past it the run's stacks are no longer sent, counted and
//! said; rows and allocations go on). [`Report::queue_peak_bytes`] says how much the
//! queues held at most.
//!
//! At the end of a run ([`Exporter::finish`]) the workload is over: both threads are given
//! the finishing thread's priority back where the system allows it, the naming thread gets
//! up to [`NAMING_WAIT`] for the names it is still reading (local work, not the
//! collector's), then the queue gets the caller's wait. Every batch accepted into a queue
//! is accounted for in the report: sent, dropped, or still queued when the wait ran out.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchtop_sessions::TimeseriesRow;
use benchtop_sessions::intervals::StacksChunk;
use benchtop_sessions::sparse::SparseHistogram;
use hdrhistogram::Histogram;
use opentelemetry_proto::tonic::resource::v1::Resource;

use crate::kinds::{BatchInterval, Sampling};
use crate::metrics::{RowTimes, metrics_request};
use crate::options::OtlpOptions;
use crate::profiles::{StackSource, StackTable, profiles_request};
use crate::transport::{Payload, Transport, backoff};
use crate::{OtlpError, Report};

/// What a frame's or a thread's name costs in a definition table beside its own bytes:
/// its key, the `String` and the hash table's slot.
const NAME_ENTRY_BYTES: u64 = 48;

/// What a stack's definition (its parent and frame) costs in a definition table.
const STACK_ENTRY_BYTES: u64 = 24;

/// What every request of a run shares.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The resource (host, process, workload, session).
    pub resource: Resource,
    /// The run's start on the wall clock, ns since the epoch: interval and row times
    /// count from it.
    pub start_unix_ns: u64,
    /// How stacks were sampled.
    pub sampling: Sampling,
}

/// The sending thread's niceness: on a machine with few cores it yields to the workload
/// and the sampler (a batch takes milliseconds a second, far below its share even at
/// nice 10). Chosen by benches/otlp_overhead.py (ring throughput with and without
/// `--otlp`).
pub const SENDER_NICE: i32 = 10;

/// How long the end of a run waits at most for the naming thread to finish the
/// allocation batches it holds: reading a debug build's symbols at [`SENDER_NICE`] on a
/// busy machine can take tens of seconds; a batch still unnamed then is counted as
/// dropped at the end.
pub const NAMING_WAIT: Duration = Duration::from_secs(60);

/// Stacks whose names are made on the naming thread, not the recorder's: a worker's
/// allocation stacks, symbolized there so that the recorder never waits on debug
/// information. The names are the recorder's own (one symbolizer serves both), lent for
/// the time a request is built.
pub trait StackNamer: Send + Sync {
    /// Names the stacks that came since the last call, then hands `f` the names.
    fn with_names(&self, f: &mut dyn FnMut(&dyn StackSource));
}

enum Job {
    Begin(Box<RunContext>),
    Stacks(Vec<BatchInterval>),
    Row(Box<TimeseriesRow>, Vec<(String, SparseHistogram)>),
    /// A request built on the naming thread ([`AllocJob`]), to send in turn.
    Built(Payload),
}

impl Job {
    /// The bytes it holds, as the queue's bound counts them.
    fn held_bytes(&self) -> u64 {
        let bytes = match self {
            Job::Begin(_) => 0,
            Job::Stacks(intervals) => intervals.iter().map(interval_bytes).sum(),
            Job::Row(row, sparse) => sparse.iter().fold(
                benchtop_profile::timeseries::row_held_bytes(row),
                |sum, (name, h)| {
                    sum.saturating_add(std::mem::size_of::<(String, SparseHistogram)>())
                        .saturating_add(name.capacity())
                        .saturating_add(h.heap_bytes())
                },
            ),
            Job::Built(payload) => payload.encoded_len(),
        };
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }
}

/// The bytes an interval's weights hold.
fn interval_bytes(i: &BatchInterval) -> usize {
    i.weights
        .iter()
        .fold(std::mem::size_of::<BatchInterval>(), |sum, w| {
            sum.saturating_add(w.capacity() * std::mem::size_of::<(u32, u32, u64)>())
        })
}

/// The bytes a chunk's new definitions take in a definition table.
fn definition_bytes(chunk: &StacksChunk) -> u64 {
    let names = chunk
        .frames
        .iter()
        .map(|(_, name)| name)
        .chain(chunk.threads.iter().map(|(_, name)| name))
        .fold(0u64, |sum, name| {
            sum.saturating_add(NAME_ENTRY_BYTES)
                .saturating_add(name.len() as u64)
        });
    names.saturating_add(STACK_ENTRY_BYTES.saturating_mul(chunk.stacks.len() as u64))
}

/// What the naming thread, `bt-otlp-names`, takes: a worker's allocations, whose
/// requests it builds there (naming their stacks the first time costs a read of the
/// program's symbols, which must not hold up the sampler's stacks and the rows).
enum AllocJob {
    Begin(Box<RunContext>),
    /// Their stacks' names, the interval, the sampling rate, and the bytes the interval
    /// holds of the queue's bound.
    Allocs(Arc<dyn StackNamer>, BatchInterval, u64, u64),
}

/// Counts shared by the recorder's side and the sending thread.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) requests: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) profile_requests: AtomicU64,
    pub(crate) metric_requests: AtomicU64,
    pub(crate) queue_full: AtomicU64,
    /// Stack batches not sent once the definitions passed their bound.
    pub(crate) table_full: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) at_end: AtomicU64,
    pub(crate) rejected: AtomicU64,
    /// Batches taken into a queue (a worker's allocations count once, though they pass
    /// through both threads).
    pub(crate) queued: AtomicU64,
    /// Of them, those that were sent, failed, or were dropped.
    pub(crate) settled: AtomicU64,
    /// Bytes the batches taken and not yet done with hold, and the most they held.
    pub(crate) held: AtomicU64,
    pub(crate) held_peak: AtomicU64,
    /// Bytes of the stack definitions learnt over the run.
    pub(crate) table: AtomicU64,
    /// The definitions passed their bound: stacks are no longer sent.
    pub(crate) table_over: AtomicBool,
    pub(crate) last_error: Mutex<Option<String>>,
    pub(crate) last_rejection: Mutex<Option<String>>,
    /// The last batch failed every attempt: the next gets one attempt, not the retries,
    /// so a collector that is away costs one refused connection per batch.
    pub(crate) down: AtomicBool,
}

impl Counts {
    /// One queued batch is done with, whatever became of it.
    fn settle(&self) {
        self.settled.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes `bytes` of the queues' `bound` for a batch: false, taking nothing, when they
    /// do not fit.
    fn hold(&self, bytes: u64, bound: u64) -> bool {
        let taken = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes).filter(|&next| next <= bound)
            });
        match taken {
            Ok(before) => {
                self.held_peak.fetch_max(before + bytes, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        }
    }

    /// A batch holding `bytes` is done with.
    fn release(&self, bytes: u64) {
        let _ = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                Some(held.saturating_sub(bytes))
            });
    }

    /// Batches taken into a queue and not done with yet.
    fn unsettled(&self) -> u64 {
        let settled = self.settled.load(Ordering::Relaxed);
        self.queued.load(Ordering::Relaxed).saturating_sub(settled)
    }

    pub(crate) fn report(&self, opts: &OtlpOptions) -> Report {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let text =
            |m: &Mutex<Option<String>>| m.lock().unwrap_or_else(PoisonError::into_inner).clone();
        Report {
            endpoint: opts.endpoint.clone(),
            protocol: opts.protocol,
            requests: get(&self.requests),
            bytes: get(&self.bytes),
            profile_requests: get(&self.profile_requests),
            metric_requests: get(&self.metric_requests),
            dropped_queue_full: get(&self.queue_full),
            dropped_table_full: get(&self.table_full),
            dropped_failed: get(&self.failed),
            dropped_at_end: get(&self.at_end),
            rejected: get(&self.rejected),
            last_error: text(&self.last_error),
            last_rejection: text(&self.last_rejection),
            queue: opts.queue as u64,
            queue_bytes: opts.queue_bytes,
            queue_peak_bytes: get(&self.held_peak),
            table_bytes: opts.table_bytes,
        }
    }

    /// Sends `payload`, retrying as `opts` says unless `hurry` is raised; true when it
    /// arrived.
    pub(crate) fn send(
        &self,
        transport: &mut Transport,
        opts: &OtlpOptions,
        payload: &Payload,
        hurry: &AtomicBool,
    ) -> bool {
        let attempts = if self.down.load(Ordering::Relaxed) {
            1
        } else {
            opts.attempts.max(1)
        };
        for attempt in 0..attempts {
            if attempt > 0 {
                if hurry.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(backoff(opts.backoff, attempt));
            }
            match transport.send(payload) {
                Ok(accepted) => {
                    self.requests.fetch_add(1, Ordering::Relaxed);
                    self.bytes
                        .fetch_add(accepted.bytes as u64, Ordering::Relaxed);
                    match payload {
                        Payload::Profiles(_) => &self.profile_requests,
                        Payload::Metrics(_) => &self.metric_requests,
                    }
                    .fetch_add(1, Ordering::Relaxed);
                    if let Some((n, why)) = accepted.rejected {
                        self.rejected
                            .fetch_add(u64::try_from(n).unwrap_or(0), Ordering::Relaxed);
                        *self
                            .last_rejection
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner) = Some(why);
                    }
                    self.down.store(false, Ordering::Relaxed);
                    return true;
                }
                Err(e) => {
                    *self
                        .last_error
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(e);
                }
            }
        }
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.down.store(true, Ordering::Relaxed);
        false
    }
}

/// The exporter of one live run.
pub struct Exporter {
    opts: OtlpOptions,
    /// The sending thread's queue: each job with the bytes it holds of the bound.
    tx: Option<SyncSender<(Job, u64)>>,
    /// The naming thread's queue.
    alloc_tx: Option<SyncSender<AllocJob>>,
    /// Definitions the sending thread has not taken yet.
    pending: Arc<Mutex<StackTable>>,
    counts: Arc<Counts>,
    hurry: Arc<AtomicBool>,
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
    alloc_thread: Option<JoinHandle<()>>,
    /// The thread ids of the sending and the naming thread, once they have lowered their
    /// priority (0 before).
    tids: Arc<[AtomicI32; 2]>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Exporter {
    /// Starts the sending thread. Nothing is connected yet: a collector that is not there
    /// costs dropped batches, never the run.
    pub fn start(opts: OtlpOptions) -> Result<Exporter, OtlpError> {
        let mut transport = Transport::new(&opts)?;
        let (tx, rx) = mpsc::sync_channel::<(Job, u64)>(opts.queue.max(1));
        let (done_tx, done) = mpsc::channel();
        let pending = Arc::new(Mutex::new(StackTable::default()));
        let counts = Arc::new(Counts::default());
        let hurry = Arc::new(AtomicBool::new(false));
        let (alloc_tx, alloc_rx) = mpsc::sync_channel::<AllocJob>(opts.queue.max(1));
        let tids = Arc::new([AtomicI32::new(0), AtomicI32::new(0)]);
        let alloc_thread = spawn_namer(
            alloc_rx,
            tx.clone(),
            counts.clone(),
            hurry.clone(),
            tids.clone(),
            opts.queue_bytes,
        )?;
        let thread = {
            let (opts, pending, counts, hurry, tids) = (
                opts.clone(),
                pending.clone(),
                counts.clone(),
                hurry.clone(),
                tids.clone(),
            );
            std::thread::Builder::new()
                .name("bt-otlp".into())
                .spawn(move || {
                    tids[0].store(lower_priority(), Ordering::SeqCst);
                    let mut context: Option<RunContext> = None;
                    // Every definition learnt so far: never dropped, so every later
                    // request resolves.
                    let mut table = StackTable::default();
                    for (job, bytes) in rx {
                        if hurry.load(Ordering::SeqCst) {
                            if !matches!(job, Job::Begin(_)) {
                                counts.at_end.fetch_add(1, Ordering::Relaxed);
                                counts.release(bytes);
                                counts.settle();
                            }
                            continue;
                        }
                        let batch = !matches!(job, Job::Begin(_));
                        let payload = match (job, &context) {
                            (Job::Begin(c), _) => {
                                context = Some(*c);
                                None
                            }
                            (Job::Stacks(intervals), Some(c)) => {
                                let new = std::mem::take(
                                    &mut *pending.lock().unwrap_or_else(PoisonError::into_inner),
                                );
                                table.absorb(new);
                                profiles_request(
                                    &c.resource,
                                    &table,
                                    &intervals,
                                    c.start_unix_ns,
                                    c.sampling,
                                )
                                .map(Payload::Profiles)
                            }
                            (Job::Built(payload), Some(_)) => Some(payload),
                            (Job::Row(row, sparse), Some(c)) => {
                                let histograms: Vec<(String, Histogram<u64>)> = sparse
                                    .into_iter()
                                    .map(|(name, h)| (name, h.to_histogram()))
                                    .collect();
                                Some(Payload::Metrics(metrics_request(
                                    &c.resource,
                                    &row,
                                    &histograms,
                                    RowTimes::of(&row, c.start_unix_ns),
                                )))
                            }
                            // Data before the run began has no times: not sent.
                            (_, None) => None,
                        };
                        if let Some(payload) = payload {
                            counts.send(&mut transport, &opts, &payload, &hurry);
                        }
                        if batch {
                            counts.release(bytes);
                            counts.settle();
                        }
                    }
                    let _ = done_tx.send(());
                })
                .map_err(|e| OtlpError::Options(format!("cannot start the OTLP thread: {e}")))?
        };
        Ok(Exporter {
            opts,
            tx: Some(tx),
            alloc_tx: Some(alloc_tx),
            pending,
            counts,
            hurry,
            done,
            thread: Some(thread),
            alloc_thread: Some(alloc_thread),
            tids,
        })
    }

    /// The options it sends with.
    pub fn options(&self) -> &OtlpOptions {
        &self.opts
    }

    fn enqueue(&self, job: Job) {
        let Some(tx) = &self.tx else { return };
        let bytes = job.held_bytes();
        if !self.counts.hold(bytes, self.opts.queue_bytes) {
            self.counts.queue_full.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match tx.try_send((job, bytes)) {
            Ok(()) => {
                self.counts.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_)) => {
                self.counts.release(bytes);
                self.counts.queue_full.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {
                self.counts.release(bytes);
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The run began: what every later request carries. Waits for room in the queue
    /// (it is the first job, so there is room).
    pub fn begin(&self, context: RunContext) {
        if let Some(tx) = &self.alloc_tx {
            let _ = tx.send(AllocJob::Begin(Box::new(context.clone())));
        }
        if let Some(tx) = &self.tx {
            let _ = tx.send((Job::Begin(Box::new(context)), 0));
        }
    }

    /// New stacks and interval weights from the sampler: the definitions join the
    /// pending table (the sending thread takes them into its own, where they stay), the
    /// weights of every kind ([`crate::kinds::KINDS`]) are queued. Once the definitions
    /// would pass [`OtlpOptions::table_bytes`], stacks are no longer sent: each batch
    /// from then on is counted in [`Report::dropped_table_full`].
    pub fn stacks(&self, chunk: &StacksChunk) {
        let counts = &self.counts;
        let defines =
            !(chunk.frames.is_empty() && chunk.stacks.is_empty() && chunk.threads.is_empty());
        if defines && !counts.table_over.load(Ordering::Relaxed) {
            let bytes = definition_bytes(chunk);
            let table = counts.table.load(Ordering::Relaxed);
            if table.saturating_add(bytes) > self.opts.table_bytes {
                counts.table_over.store(true, Ordering::Relaxed);
            } else {
                counts.table.fetch_add(bytes, Ordering::Relaxed);
                self.pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .add(chunk);
            }
        }
        let intervals: Vec<BatchInterval> = chunk
            .intervals
            .iter()
            .map(BatchInterval::from_live)
            .filter(|i| !i.is_empty())
            .collect();
        if intervals.is_empty() {
            return;
        }
        if counts.table_over.load(Ordering::Relaxed) {
            counts.table_full.fetch_add(1, Ordering::Relaxed);
        } else {
            self.enqueue(Job::Stacks(intervals));
        }
    }

    /// A worker's allocations over an interval (bytes allocated in it, live at its end),
    /// their stacks named by `namer` on the sending thread; `rate` is the sampling's mean
    /// bytes between samples.
    pub fn allocs(&self, namer: &Arc<dyn StackNamer>, interval: BatchInterval, rate: u64) {
        let Some(tx) = &self.alloc_tx else { return };
        if interval.is_empty() {
            return;
        }
        let bytes = u64::try_from(interval_bytes(&interval)).unwrap_or(u64::MAX);
        if !self.counts.hold(bytes, self.opts.queue_bytes) {
            self.counts.queue_full.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match tx.try_send(AllocJob::Allocs(namer.clone(), interval, rate, bytes)) {
            Ok(()) => {
                self.counts.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_)) => {
                self.counts.release(bytes);
                self.counts.queue_full.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {
                self.counts.release(bytes);
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A row and its interval's histograms (queued sparse).
    pub fn row(&self, row: &TimeseriesRow, histograms: &[(String, Histogram<u64>)]) {
        let sparse = histograms
            .iter()
            .map(|(name, h)| (name.clone(), SparseHistogram::from(h)))
            .collect();
        self.enqueue(Job::Row(Box::new(row.clone()), sparse));
    }

    /// What has been sent and dropped so far.
    pub fn report(&self) -> Report {
        self.counts.report(&self.opts)
    }

    /// Sends what is queued, waiting at most `wait` (after up to the options'
    /// `naming_wait`, [`NAMING_WAIT`] by default, for allocation stacks still being named); what is still queued then is dropped and
    /// counted. The report says what was sent and dropped: every batch taken is in it.
    pub fn finish(mut self, wait: Duration) -> Report {
        // The naming thread hands what it has built to the sending thread and ends; the
        // sending thread ends once both are done.
        self.alloc_tx = None;
        self.tx = None;
        self.restore_priority();
        if let Some(namer) = &self.alloc_thread {
            let named_by = Instant::now() + self.opts.naming_wait;
            while !namer.is_finished() && Instant::now() < named_by {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let deadline = Instant::now() + wait;
        if self.done.recv_timeout(wait).is_err() {
            self.hurry.store(true, Ordering::SeqCst);
            // A request in flight ends within its own timeout.
            let rest = deadline
                .saturating_duration_since(Instant::now())
                .max(self.opts.timeout + Duration::from_secs(1));
            let _ = self.done.recv_timeout(rest);
        }
        for thread in [self.thread.take(), self.alloc_thread.take()]
            .into_iter()
            .flatten()
        {
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
        let mut report = self.counts.report(&self.opts);
        // Batches the threads still hold (a request outlasting its timeout, names still
        // being read) are dropped with the process.
        report.dropped_at_end += self.counts.unsettled();
        report
    }

    /// Gives the sending and the naming thread the calling thread's priority again: the
    /// run they yielded to is over (called by [`Exporter::finish`]; earlier when the
    /// caller is about to wait for names the naming thread is making). Where the system refuses (raising a priority needs
    /// CAP_SYS_NICE or an RLIMIT_NICE), they keep theirs.
    pub fn restore_priority(&self) {
        // SAFETY: getpriority(2) on the calling thread (who 0) reads its niceness; it
        // takes no pointer. errno is cleared first, as -1 is also a valid niceness.
        let nice = unsafe {
            *libc::__errno_location() = 0;
            libc::getpriority(libc::PRIO_PROCESS, 0)
        };
        // SAFETY: reads the calling thread's errno.
        if nice == -1 && unsafe { *libc::__errno_location() } != 0 {
            return;
        }
        for tid in self.tids.iter() {
            let Ok(tid) = libc::id_t::try_from(tid.load(Ordering::SeqCst)) else {
                continue;
            };
            if tid == 0 {
                continue;
            }
            // SAFETY: setpriority(2) on one of this exporter's own threads (a thread id
            // with PRIO_PROCESS applies to that thread only); a refusal changes nothing.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, tid, nice);
            }
        }
    }
}

/// Starts the naming thread: it builds the requests of a worker's allocations, naming
/// their stacks with names it makes and keeps for the run, and queues them for the
/// sending thread (waiting for room there: a full queue holds up this thread, not the
/// recorder, whose own handing over to it never waits).
fn spawn_namer(
    rx: Receiver<AllocJob>,
    sending: SyncSender<(Job, u64)>,
    counts: Arc<Counts>,
    hurry: Arc<AtomicBool>,
    tids: Arc<[AtomicI32; 2]>,
    queue_bytes: u64,
) -> Result<JoinHandle<()>, OtlpError> {
    std::thread::Builder::new()
        .name("bt-otlp-names".into())
        .spawn(move || {
            tids[1].store(lower_priority(), Ordering::SeqCst);
            let mut context: Option<RunContext> = None;
            for job in rx {
                let (namer, interval, rate, bytes) = match job {
                    AllocJob::Begin(c) => {
                        context = Some(*c);
                        continue;
                    }
                    AllocJob::Allocs(namer, interval, rate, bytes) => {
                        (namer, interval, rate, bytes)
                    }
                };
                counts.release(bytes);
                if hurry.load(Ordering::SeqCst) {
                    counts.at_end.fetch_add(1, Ordering::Relaxed);
                    counts.settle();
                    continue;
                }
                // Allocations before the run began have no times: not sent.
                let Some(c) = &context else {
                    counts.settle();
                    continue;
                };
                let sampling = Sampling {
                    alloc_rate: rate,
                    ..c.sampling
                };
                let mut request = None;
                namer.with_names(&mut |names| {
                    request = profiles_request(
                        &c.resource,
                        names,
                        std::slice::from_ref(&interval),
                        c.start_unix_ns,
                        sampling,
                    );
                });
                drop(interval);
                // A built request is settled by the sending thread.
                let Some(request) = request else {
                    counts.settle();
                    continue;
                };
                let built = Job::Built(Payload::Profiles(request));
                let bytes = built.held_bytes();
                if !counts.hold(bytes, queue_bytes) {
                    counts.queue_full.fetch_add(1, Ordering::Relaxed);
                    counts.settle();
                } else if sending.send((built, bytes)).is_err() {
                    counts.release(bytes);
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    counts.settle();
                }
            }
        })
        .map_err(|e| OtlpError::Options(format!("cannot start the OTLP naming thread: {e}")))
}

/// Lowers the calling thread's priority to [`SENDER_NICE`] (threads it starts inherit
/// it) and returns its thread id (0 when it could not be read). A refusal leaves the
/// priority as it was: sending still works.
fn lower_priority() -> i32 {
    // SAFETY: gettid(2) takes no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    let Ok(tid) = libc::id_t::try_from(tid) else {
        return 0;
    };
    // SAFETY: setpriority(2) on this thread's own id (Linux applies PRIO_PROCESS with a
    // thread id to that thread only); raising one's own niceness is always allowed, and
    // a failure only leaves the priority as it was.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, tid, SENDER_NICE);
    }
    i32::try_from(tid).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Protocol;

    #[test]
    fn the_sending_thread_yields_to_the_workload() {
        let opts = OtlpOptions::new("127.0.0.1:9", Protocol::HttpProtobuf).expect("valid");
        let exporter = Exporter::start(opts).expect("starts");
        // This exporter's own sending thread, by id: other tests' exporters run beside
        // it with threads of the same name, some of them already given their caller's
        // priority back. The id is set once the thread has lowered its priority.
        let deadline = Instant::now() + Duration::from_secs(10);
        let sending = loop {
            let tid = exporter.tids[0].load(Ordering::SeqCst);
            if tid != 0 {
                break tid;
            }
            assert!(
                Instant::now() < deadline,
                "the sending thread never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(niceness_of(sending), Some(i64::from(SENDER_NICE)));
        let report = exporter.finish(Duration::from_secs(1));
        assert_eq!(report.dropped(), 0);
    }

    /// Names that wait for the test's word before naming anything.
    struct SlowNamer(Mutex<Option<Receiver<()>>>);

    /// Every stack is `main`.
    struct Main;

    impl StackNamer for SlowNamer {
        fn with_names(&self, f: &mut dyn FnMut(&dyn StackSource)) {
            if let Some(go) = self.0.lock().expect("not poisoned").take() {
                let _ = go.recv_timeout(Duration::from_secs(30));
            }
            f(&Main);
        }
    }

    impl StackSource for Main {
        fn frames<'a>(&'a self, _id: u32, out: &mut Vec<&'a str>) {
            out.push("main");
        }

        fn thread(&self, _tid: u32) -> Option<&str> {
            None
        }
    }

    /// An exporter begun on a run, sending over HTTP to port 9 (discard) on loopback,
    /// where nobody listens: every batch is refused, after one attempt; `tune` changes
    /// the rest of its options.
    fn refused(tune: impl FnOnce(&mut OtlpOptions)) -> Exporter {
        let mut opts = OtlpOptions::new("127.0.0.1:9", Protocol::HttpProtobuf).expect("valid");
        opts.attempts = 1;
        tune(&mut opts);
        let exporter = Exporter::start(opts).expect("starts");
        exporter.begin(RunContext {
            resource: Resource::default(),
            start_unix_ns: 1,
            sampling: Sampling::default(),
        });
        exporter
    }

    #[test]
    fn naming_a_worker_s_allocation_stacks_holds_up_no_other_batch() {
        let exporter = refused(|_| {});
        let (go, wait) = mpsc::channel();
        let namer: Arc<dyn StackNamer> = Arc::new(SlowNamer(Mutex::new(Some(wait))));
        exporter.allocs(
            &namer,
            BatchInterval::from_allocs(0, 10, &[(1, 4_096)], &[]),
            4_096,
        );
        let mut row = TimeseriesRow::default();
        row.t_s = 1.0;
        row.interval_s = 1.0;
        for _ in 0..3 {
            exporter.row(&row, &[]);
        }
        // The rows are tried (and refused) while the allocations' names are still being
        // made.
        let deadline = Instant::now() + Duration::from_secs(20);
        while exporter.report().dropped_failed < 3 {
            assert!(Instant::now() < deadline, "{:?}", exporter.report());
            std::thread::sleep(Duration::from_millis(10));
        }
        go.send(()).expect("the naming thread waits");
        let report = exporter.finish(Duration::from_secs(10));
        // Then the allocations' request is tried too.
        assert_eq!(report.dropped_failed, 4, "{report:?}");
        assert_eq!(report.dropped(), 4, "{report:?}");
    }

    #[test]
    fn allocations_still_being_named_when_the_wait_runs_out_are_counted_dropped() {
        let exporter = refused(|opts| opts.naming_wait = Duration::from_millis(200));
        // The test never says go: the names are still being read at the end.
        let (_go, wait) = mpsc::channel::<()>();
        let namer: Arc<dyn StackNamer> = Arc::new(SlowNamer(Mutex::new(Some(wait))));
        for t in 0..3 {
            exporter.allocs(
                &namer,
                BatchInterval::from_allocs(t, t + 10, &[(1, 4_096)], &[]),
                4_096,
            );
        }
        let report = exporter.finish(Duration::from_millis(200));
        // None was sent; all three are in the report, none lost without a word.
        assert_eq!(report.requests, 0, "{report:?}");
        assert_eq!(report.dropped(), 3, "{report:?}");
        assert_eq!(report.dropped_at_end, 3, "{report:?}");
    }

    /// The niceness of this process's thread `tid`.
    fn niceness_of(tid: i32) -> Option<i64> {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 2..];
        rest.split_whitespace().nth(16)?.parse().ok()
    }

    #[test]
    fn the_end_of_a_run_gives_the_threads_the_caller_s_priority_back() {
        let exporter = refused(|_| {});
        // This exporter's own two threads, by id: other tests' exporters run beside it
        // with threads of the same names. An id is set once its thread has lowered its
        // priority.
        let tid = |i: usize| exporter.tids[i].load(Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(10);
        while tid(0) == 0 || tid(1) == 0 {
            assert!(Instant::now() < deadline, "the threads never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        let (sending, naming) = (tid(0), tid(1));
        assert_eq!(niceness_of(sending), Some(i64::from(SENDER_NICE)));
        assert_eq!(niceness_of(naming), Some(i64::from(SENDER_NICE)));
        exporter.restore_priority();
        // The caller's niceness (the test may run under `nice`); raising a priority
        // needs CAP_SYS_NICE (or an RLIMIT_NICE): without it the threads keep theirs.
        // SAFETY: getpriority(2) on the calling thread and geteuid(2) take no pointers;
        // the test's niceness is never -1, so -1 needs no errno check here.
        let (caller, root) = unsafe {
            (
                i64::from(libc::getpriority(libc::PRIO_PROCESS, 0)),
                libc::geteuid() == 0,
            )
        };
        let want = if root || caller >= i64::from(SENDER_NICE) {
            caller
        } else {
            i64::from(SENDER_NICE)
        };
        assert_eq!(niceness_of(sending), Some(want));
        assert_eq!(niceness_of(naming), Some(want));
        let _ = exporter.finish(Duration::from_secs(1));
    }

    /// A listener on loopback that takes connections and never answers, while it lives.
    struct Silent {
        port: u16,
        _held: Arc<Mutex<Vec<std::net::TcpStream>>>,
    }

    fn silent() -> Silent {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        let port = listener.local_addr().expect("bound").port();
        let held = Arc::new(Mutex::new(Vec::new()));
        let keep = held.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                keep.lock().expect("not poisoned").push(stream);
            }
        });
        Silent { port, _held: held }
    }

    #[test]
    fn the_queue_s_byte_bound_holds_and_what_it_drops_is_counted() {
        let collector = silent();
        let endpoint = format!("127.0.0.1:{}", collector.port);
        let mut opts = OtlpOptions::new(&endpoint, Protocol::HttpProtobuf).expect("valid");
        opts.attempts = 1;
        opts.timeout = Duration::from_secs(2);
        // Room for many more batches than the bytes allow.
        opts.queue = 10_000;
        opts.queue_bytes = 64 << 10;
        let exporter = Exporter::start(opts).expect("starts");
        exporter.begin(RunContext {
            resource: Resource::default(),
            start_unix_ns: 1,
            sampling: Sampling::default(),
        });
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds");
        for v in 1..2_000u64 {
            h.record(v * 997).expect("in range");
        }
        let mut row = TimeseriesRow::default();
        row.t_s = 1.0;
        row.interval_s = 1.0;
        let histograms = [("lap".to_owned(), h)];
        let one = Job::Row(
            Box::new(row.clone()),
            vec![("lap".into(), SparseHistogram::from(&histograms[0].1))],
        )
        .held_bytes();
        assert!(one > 1_000, "a row with its histogram: {one} bytes");
        // The collector holds the first request for its timeout: the rest wait, as many
        // as fit in the bound, and every other is dropped at once and counted.
        let rows = 400;
        for _ in 0..rows {
            exporter.row(&row, &histograms);
        }
        let fit = (64 << 10) / one;
        let report = exporter.report();
        assert!(
            report.queue_peak_bytes <= 64 << 10 && report.queue_peak_bytes + one > 64 << 10,
            "the queue filled up to its bound, not past it: {report:?}"
        );
        assert!(
            report.dropped_queue_full >= rows - fit && report.dropped_queue_full < rows,
            "{fit} fit: {report:?}"
        );
        let report = exporter.finish(Duration::from_millis(100));
        // None arrived; every one is in the report, the bound is said.
        assert_eq!(report.requests, 0, "{report:?}");
        assert_eq!(report.dropped(), rows, "{report:?}");
        let warnings = report.warnings().join("\n");
        assert!(
            warnings.contains("found the queue full (its bound: 10000 batches or 64 KiB)"),
            "{warnings}"
        );
    }

    /// A chunk defining `n` stacks of one frame each (names of 100 bytes) and weighing
    /// each in one interval.
    fn defining(from: u32, n: u32) -> StacksChunk {
        use benchtop_profile::Kind;
        use benchtop_sessions::intervals::{IntervalWeights, StackEntry, Weight};
        let mut chunk = StacksChunk::default();
        let ids = from..from + n;
        chunk.frames = ids.clone().map(|i| (i, format!("{i:0100}"))).collect();
        chunk.stacks = ids
            .clone()
            .map(|i| StackEntry {
                id: i,
                parent: None,
                frame: i,
            })
            .collect();
        let mut interval = IntervalWeights::default();
        interval.weights[Kind::Cpu] = ids
            .map(|stack| Weight {
                tid: 1,
                stack,
                weight: 1,
            })
            .collect();
        chunk.intervals = vec![interval];
        chunk
    }

    #[test]
    fn stack_definitions_past_their_bound_stop_the_stacks_and_are_counted() {
        let exporter = refused(|opts| opts.table_bytes = 16 << 10);
        // 100 stacks of one 100-byte frame: about 17 KiB of definitions with their
        // entries, 16 KiB allowed. The first chunk fits, the second passes the bound.
        exporter.stacks(&defining(0, 50));
        exporter.stacks(&defining(50, 50));
        // Stacks of the first chunk only, after the bound was passed: not sent either.
        let mut known = defining(0, 50);
        known.frames.clear();
        known.stacks.clear();
        exporter.stacks(&known);
        let mut row = TimeseriesRow::default();
        row.t_s = 1.0;
        row.interval_s = 1.0;
        exporter.row(&row, &[]);
        let table = exporter.counts.table.load(Ordering::Relaxed);
        assert!(table > 0 && table <= 16 << 10, "{table}");
        let report = exporter.finish(Duration::from_secs(10));
        // The first stacks and the row were tried (and refused); the other two counted.
        assert_eq!(report.dropped_table_full, 2, "{report:?}");
        assert_eq!(report.dropped_failed, 2, "{report:?}");
        assert_eq!(report.dropped(), 4, "{report:?}");
        let warnings = report.warnings().join("\n");
        assert!(
            warnings.contains(
                "2 batches of stacks were not sent once the run's stack definitions passed \
                 their bound of 16 KiB"
            ),
            "{warnings}"
        );
    }

    #[test]
    fn a_collector_that_refuses_costs_counted_batches_not_the_recorder() {
        let exporter = refused(|opts| opts.queue = 4);
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds");
        h.record(1_000).expect("in range");
        let mut row = TimeseriesRow::default();
        row.t_s = 1.0;
        row.interval_s = 1.0;
        for _ in 0..50 {
            exporter.row(&row, &[("lap".into(), h.clone())]);
        }
        let report = exporter.finish(Duration::from_secs(10));
        // Every row was tried and refused or found the queue full: none arrived, all are
        // counted, and the reason is named.
        assert_eq!(report.requests, 0);
        assert_eq!(report.dropped(), 50, "{report:?}");
        assert!(report.last_error.is_some(), "{report:?}");
        let warnings = report.warnings();
        assert!(warnings[0].contains("50 batches dropped"), "{warnings:?}");
    }
}
