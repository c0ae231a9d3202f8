//! The live exporter: the recorder hands it each interval's stacks and figures (a copy
//! into a bounded queue, never a wait), and a thread of its own, `bt-otlp`, builds the
//! requests and sends them, retrying with backoff; a batch that still fails, or that
//! finds the queue full, is dropped and counted. A collector that comes back gets the
//! batches from then on.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchtop_sessions::TimeseriesRow;
use benchtop_sessions::intervals::StacksChunk;
use hdrhistogram::Histogram;
use opentelemetry_proto::tonic::resource::v1::Resource;

use crate::metrics::{RowTimes, metrics_request};
use crate::options::OtlpOptions;
use crate::profiles::{BatchInterval, Sampling, StackTable, profiles_request};
use crate::transport::{Payload, Transport, backoff};
use crate::{OtlpError, Report};

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

enum Job {
    Begin(Box<RunContext>),
    Stacks(Vec<BatchInterval>),
    Row(Box<TimeseriesRow>, Vec<(String, Histogram<u64>)>),
}

/// Counts shared by the recorder's side and the sending thread.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) requests: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) profile_requests: AtomicU64,
    pub(crate) metric_requests: AtomicU64,
    pub(crate) queue_full: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) at_end: AtomicU64,
    pub(crate) rejected: AtomicU64,
    pub(crate) last_error: Mutex<Option<String>>,
    pub(crate) last_rejection: Mutex<Option<String>>,
    /// The last batch failed every attempt: the next gets one attempt, not the retries,
    /// so a collector that is away costs one refused connection per batch.
    pub(crate) down: AtomicBool,
}

impl Counts {
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
            dropped_failed: get(&self.failed),
            dropped_at_end: get(&self.at_end),
            rejected: get(&self.rejected),
            last_error: text(&self.last_error),
            last_rejection: text(&self.last_rejection),
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
    tx: Option<SyncSender<Job>>,
    table: Arc<Mutex<StackTable>>,
    counts: Arc<Counts>,
    hurry: Arc<AtomicBool>,
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
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
        let (tx, rx) = mpsc::sync_channel::<Job>(opts.queue.max(1));
        let (done_tx, done) = mpsc::channel();
        let table = Arc::new(Mutex::new(StackTable::default()));
        let counts = Arc::new(Counts::default());
        let hurry = Arc::new(AtomicBool::new(false));
        let thread = {
            let (opts, table, counts, hurry) =
                (opts.clone(), table.clone(), counts.clone(), hurry.clone());
            std::thread::Builder::new()
                .name("bt-otlp".into())
                .spawn(move || {
                    let mut context: Option<RunContext> = None;
                    for job in rx {
                        if hurry.load(Ordering::SeqCst) {
                            if !matches!(job, Job::Begin(_)) {
                                counts.at_end.fetch_add(1, Ordering::Relaxed);
                            }
                            continue;
                        }
                        let payload = match (job, &context) {
                            (Job::Begin(c), _) => {
                                context = Some(*c);
                                None
                            }
                            (Job::Stacks(intervals), Some(c)) => {
                                let table = table.lock().unwrap_or_else(PoisonError::into_inner);
                                profiles_request(
                                    &c.resource,
                                    &*table,
                                    &intervals,
                                    c.start_unix_ns,
                                    c.sampling,
                                )
                                .map(Payload::Profiles)
                            }
                            (Job::Row(row, histograms), Some(c)) => {
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
                    }
                    let _ = done_tx.send(());
                })
                .map_err(|e| OtlpError::Options(format!("cannot start the OTLP thread: {e}")))?
        };
        Ok(Exporter {
            opts,
            tx: Some(tx),
            table,
            counts,
            hurry,
            done,
            thread: Some(thread),
        })
    }

    /// The options it sends with.
    pub fn options(&self) -> &OtlpOptions {
        &self.opts
    }

    fn enqueue(&self, job: Job) {
        let Some(tx) = &self.tx else { return };
        match tx.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.counts.queue_full.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The run began: what every later request carries. Waits for room in the queue
    /// (it is the first job, so there is room).
    pub fn begin(&self, context: RunContext) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Job::Begin(Box::new(context)));
        }
    }

    /// New stacks and interval weights from the sampler: the definitions join the table
    /// (never dropped, so every later request resolves), the weights are queued.
    pub fn stacks(&self, chunk: &StacksChunk) {
        if !(chunk.frames.is_empty() && chunk.stacks.is_empty() && chunk.threads.is_empty()) {
            self.table
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .add(chunk);
        }
        let intervals: Vec<BatchInterval> = chunk
            .intervals
            .iter()
            .filter(|i| !(i.cpu.is_empty() && i.offcpu.is_empty()))
            .map(|i| BatchInterval {
                t0_ns: i.t0_ns,
                t1_ns: i.t1_ns,
                cpu: i.cpu.iter().map(|w| (w.tid, w.stack, w.weight)).collect(),
                offcpu: i
                    .offcpu
                    .iter()
                    .map(|w| (w.tid, w.stack, w.weight))
                    .collect(),
            })
            .collect();
        if !intervals.is_empty() {
            self.enqueue(Job::Stacks(intervals));
        }
    }

    /// A row and its interval's histograms.
    pub fn row(&self, row: &TimeseriesRow, histograms: &[(String, Histogram<u64>)]) {
        self.enqueue(Job::Row(Box::new(row.clone()), histograms.to_vec()));
    }

    /// What has been sent and dropped so far.
    pub fn report(&self) -> Report {
        self.counts.report(&self.opts)
    }

    /// Sends what is queued, waiting at most `wait`; what is still queued then is dropped
    /// and counted. The report says what was sent and dropped.
    pub fn finish(mut self, wait: Duration) -> Report {
        self.tx = None;
        let deadline = Instant::now() + wait;
        if self.done.recv_timeout(wait).is_err() {
            self.hurry.store(true, Ordering::SeqCst);
            // A request in flight ends within its own timeout.
            let rest = deadline
                .saturating_duration_since(Instant::now())
                .max(self.opts.timeout + Duration::from_secs(1));
            let _ = self.done.recv_timeout(rest);
        }
        if let Some(thread) = self.thread.take()
            && thread.is_finished()
        {
            let _ = thread.join();
        }
        self.counts.report(&self.opts)
    }
}
