//! A live consumer's link to a recording: the typed events the recorder hands it as the
//! run goes on, and the flags that ask the run to stop or to save the stacks so far. The
//! TUI runs the recorder on a thread of its own and receives these events in its own event
//! channel (the link calls its sink, which wraps them once); the headless command's
//! progress line takes [`Detail::Progress`] only.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};

use benchtop_profilers::allocations::AllocTrees;
use benchtop_sessions::TimeseriesRow;
use benchtop_sessions::intervals::StacksChunk;
use hdrhistogram::Histogram;

use crate::notice::Notice;

/// What a recording tells a live consumer. Not `non_exhaustive`: a consumer handles
/// every event, and a new one is a change it has to see.
#[derive(Debug)]
pub enum LiveEvent {
    /// The session directory exists and the worker was started.
    Spawned {
        /// The session directory.
        dir: PathBuf,
        /// The worker's pid.
        pid: u32,
    },
    /// Measured work started: profilers are attached.
    Started {
        /// The counter whose rate is the throughput, when the workload named one.
        throughput: Option<String>,
        /// The histogram metric shown as latency, when the workload named one.
        latency: Option<String>,
        /// The perf event sampling runs on, with its frequency (`cpu-clock 999 Hz`), or why
        /// there is none.
        sampling: String,
    },
    /// One interval: the row written to timeseries.jsonl and the interval's histograms.
    Row {
        /// The row as written.
        row: Box<TimeseriesRow>,
        /// Each histogram metric of the interval, decoded.
        histograms: Vec<(String, Histogram<u64>)>,
    },
    /// Per-interval stacks, as just appended to stacks.jsonl: the frames and stacks not
    /// handed out before, then the weights of the intervals the sampler attributed since
    /// the last (about once an interval, and once more at the end of the run).
    IntervalStacks(Box<StacksChunk>),
    /// A built-in worker's sampled allocations so far: bytes allocated, live at the
    /// peak, live now (with every row, once the worker sent any).
    Allocations(Box<AllocTrees>),
    /// A status line: starting, stopping, a warning about a report line…
    Notice(Notice),
    /// The figures of the progress line, once an interval ([`Detail::Progress`] links
    /// only).
    Progress(ProgressFigures),
}

/// What the progress line shows, refreshed each interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgressFigures {
    /// Seconds since start.
    pub elapsed_s: f64,
    /// Name of the throughput counter and its rate per second.
    pub rate: Option<(String, f64)>,
    /// Name of the latency metric and its interval p50 and p99, ns.
    pub latency: Option<(String, u64, u64)>,
    /// Resident set size, bytes.
    pub rss_bytes: Option<u64>,
    /// Samples taken so far, and lost.
    pub samples: Option<(u64, u64)>,
}

/// How much a link is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Notices and progress figures: a progress line.
    Progress,
    /// Everything a live view draws: rows with their histograms, stacks, notices.
    Full,
}

/// Where a link's events go.
type Sink = Arc<dyn Fn(LiveEvent) + Send + Sync>;

/// The recorder's end of a live link.
#[derive(Clone)]
pub struct LiveLink {
    sink: Sink,
    detail: Detail,
    stop: Arc<AtomicBool>,
    save: Arc<AtomicBool>,
}

impl std::fmt::Debug for LiveLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveLink")
            .field("detail", &self.detail)
            .finish_non_exhaustive()
    }
}

impl LiveLink {
    /// A link that hands every event to `sink`, on the recorder's thread: a sink that
    /// sends into the consumer's own channel costs the recorder one send.
    pub fn new(detail: Detail, sink: impl Fn(LiveEvent) + Send + Sync + 'static) -> LiveLink {
        LiveLink {
            sink: Arc::new(sink),
            detail,
            stop: Arc::new(AtomicBool::new(false)),
            save: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A [`Detail::Full`] link and a channel receiving its events.
    pub fn channel() -> (LiveLink, Receiver<LiveEvent>) {
        let (tx, rx) = mpsc::channel();
        let link = LiveLink::new(Detail::Full, move |event| {
            // A view that has gone is not the recording's concern.
            let _ = tx.send(event);
        });
        (link, rx)
    }

    /// How much this link is told.
    pub fn detail(&self) -> Detail {
        self.detail
    }

    /// A handle that asks the recording to stop or to save what it has so far.
    pub fn control(&self) -> Control {
        Control {
            stop: self.stop.clone(),
            save: self.save.clone(),
        }
    }

    /// Hands an event to the consumer.
    pub(crate) fn send(&self, event: LiveEvent) {
        (self.sink)(event);
    }

    pub(crate) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Whether a save was asked for since the last call.
    pub(crate) fn take_save_request(&self) -> bool {
        self.save.swap(false, Ordering::SeqCst)
    }
}

/// Asks a recording to stop, or to save a snapshot now.
#[derive(Debug, Clone)]
pub struct Control {
    stop: Arc<AtomicBool>,
    save: Arc<AtomicBool>,
}

impl Control {
    /// Asks the recording to stop: the worker is told `stop`, and the session is finished
    /// as `stopped`. Asking again changes nothing.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Asks the recording to write the stacks so far (cpu.folded, offcpu.folded and their
    /// SVGs) and threads.csv into the session now, so that a run cut off later keeps them;
    /// the end of the run writes them again, whole.
    pub fn save(&self) {
        self.save.store(true, Ordering::SeqCst);
    }
}
