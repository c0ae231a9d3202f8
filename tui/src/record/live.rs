//! A live view's link to a recording: what the recorder sends as the run goes on, and
//! the flag that asks it to stop. The TUI runs the recorder on a thread of its own and
//! reads these events; the headless recorder has no link.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};

use benchtop_profilers::Snapshot;
use benchtop_sessions::TimeseriesRow;
use hdrhistogram::Histogram;

/// What a recording tells a live view.
#[derive(Debug)]
#[non_exhaustive]
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
    /// The stacks folded so far (about once an interval).
    Stacks(Box<Snapshot>),
    /// A status line: starting, stopping, a warning about a report line…
    Status(String),
}

/// The recorder's end of a live link.
#[derive(Debug, Clone)]
pub struct LiveLink {
    events: Sender<LiveEvent>,
    stop: Arc<AtomicBool>,
}

impl LiveLink {
    /// A link and the receiving end of its events.
    pub fn new() -> (LiveLink, Receiver<LiveEvent>) {
        let (events, rx) = mpsc::channel();
        (
            LiveLink {
                events,
                stop: Arc::new(AtomicBool::new(false)),
            },
            rx,
        )
    }

    /// A handle that asks the recording to stop (as Ctrl-C does in a terminal).
    pub fn stopper(&self) -> Stopper {
        Stopper(self.stop.clone())
    }

    /// Sends an event; a view that has gone is not the recording's concern.
    pub(crate) fn send(&self, event: LiveEvent) {
        let _ = self.events.send(event);
    }

    pub(crate) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// Asks a recording to stop: the worker is told `stop`, and the session is finished as
/// `stopped`.
#[derive(Debug, Clone)]
pub struct Stopper(Arc<AtomicBool>);

impl Stopper {
    /// Asks once; asking again changes nothing.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
