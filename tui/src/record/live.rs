//! A live view's link to a recording: what the recorder sends as the run goes on, and
//! the flags that ask it to stop or to save the stacks so far. The TUI runs the recorder on a thread of its own and
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
    save: Arc<AtomicBool>,
}

impl LiveLink {
    /// A link and the receiving end of its events.
    pub fn new() -> (LiveLink, Receiver<LiveEvent>) {
        let (events, rx) = mpsc::channel();
        (
            LiveLink {
                events,
                stop: Arc::new(AtomicBool::new(false)),
                save: Arc::new(AtomicBool::new(false)),
            },
            rx,
        )
    }

    /// A handle that asks the recording to stop or to save what it has so far.
    pub fn control(&self) -> Control {
        Control {
            stop: self.stop.clone(),
            save: self.save.clone(),
        }
    }

    /// Sends an event; a view that has gone is not the recording's concern.
    pub(crate) fn send(&self, event: LiveEvent) {
        let _ = self.events.send(event);
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
