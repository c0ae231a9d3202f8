//! The ticker: a thread that reports the metrics every interval.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::metrics::AllocCounters;
use super::samples::SampleSender;
use super::{Counter, IntervalHistogram, Metrics, Reporter, Start, StopSignal};
use crate::WorkloadError;
use crate::error::panic_message;
use crate::protocol::{HistogramEncoder, new_latency_histogram};

/// Reports a [`Metrics`] registry every interval on a thread of its own
/// (`benchtop-ticker`), and once more when finished so nothing recorded is lost.
///
/// Each tick carries `t_ns` (nanoseconds since [`Start::at`], monotonic), every counter's
/// cumulative value, and every histogram's interval, swapped out and encoded with
/// [`crate::protocol::encode_histogram`]'s format. Ticks fall on `start + k × interval`;
/// a late tick does not shift the ones after it, and ticks missed entirely are skipped.
///
/// The tick path reuses its buffers (names, encodings, the spare histogram, the JSON
/// line), so a steady run allocates nothing per tick beyond what the deflate encoder needs.
///
/// When a tick cannot be written (the conductor is gone) the ticker sets the
/// [`StopSignal`] and ends; [`Ticker::finish`] returns the error.
#[derive(Debug)]
pub struct Ticker {
    wake: mpsc::Sender<()>,
    thread: JoinHandle<Result<(), WorkloadError>>,
}

impl Ticker {
    /// Starts ticking. Call after `start`: the thread is created here.
    pub fn start(
        reporter: Arc<Reporter>,
        metrics: &Metrics,
        interval: Duration,
        start: Start,
        stop: StopSignal,
    ) -> Result<Ticker, WorkloadError> {
        let mut state = TickState {
            reporter,
            origin: start.at,
            counters: metrics
                .counters()
                .map(|(name, c)| (name.to_owned(), c.clone(), 0))
                .collect(),
            histograms: metrics
                .histograms()
                .map(|(name, h)| (name.to_owned(), h.clone(), String::new()))
                .collect(),
            spare: new_latency_histogram(),
            encoder: HistogramEncoder::new(),
            alloc: metrics.alloc().cloned(),
            // With the allocator's counters only: a worker that counts its allocations.
            samples: metrics.alloc().and_then(|_| SampleSender::new()),
        };
        let interval = interval.max(Duration::from_millis(1));
        let (wake, finished) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("benchtop-ticker".to_owned())
            .spawn(move || {
                let result = state.run(interval, &finished);
                if result.is_err() {
                    stop.set();
                }
                result
            })
            .map_err(|source| WorkloadError::Thread {
                thread: "benchtop-ticker",
                source,
            })?;
        Ok(Ticker { wake, thread })
    }

    /// Sends the final tick and ends the thread. Returns the first error the ticker met.
    pub fn finish(self) -> Result<(), WorkloadError> {
        // An error means the thread already ended; join says why.
        let _ = self.wake.send(());
        match self.thread.join() {
            Ok(result) => result,
            Err(payload) => Err(WorkloadError::Panicked {
                what: "the benchtop-ticker thread".to_owned(),
                message: panic_message(&*payload),
            }),
        }
    }
}

struct TickState {
    reporter: Arc<Reporter>,
    origin: Instant,
    counters: Vec<(String, Arc<Counter>, u64)>,
    histograms: Vec<(String, Arc<IntervalHistogram>, String)>,
    spare: Histogram<u64>,
    encoder: HistogramEncoder,
    alloc: Option<AllocCounters>,
    /// Sends the allocator's sampled stacks before each tick, when it samples them.
    samples: Option<SampleSender>,
}

impl TickState {
    fn run(
        &mut self,
        interval: Duration,
        finished: &mpsc::Receiver<()>,
    ) -> Result<(), WorkloadError> {
        let mut next = self.origin + interval;
        loop {
            let now = Instant::now();
            match finished.recv_timeout(next.saturating_duration_since(now)) {
                Err(RecvTimeoutError::Timeout) => {
                    self.tick()?;
                    next += interval;
                    let now = Instant::now();
                    if next <= now {
                        // Missed whole intervals (a stalled machine): resume on the grid.
                        let behind = now.duration_since(self.origin).as_nanos();
                        let step = interval.as_nanos();
                        let k = u32::try_from(behind / step + 1).unwrap_or(u32::MAX);
                        next = self.origin + interval.saturating_mul(k);
                    }
                }
                Ok(()) | Err(RecvTimeoutError::Disconnected) => return self.tick(),
            }
        }
    }

    fn tick(&mut self) -> Result<(), WorkloadError> {
        let t_ns = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // The counters first, then the samples: every allocation the tick's live bytes
        // count has been sampled or passed over by the time the samples are drained, so
        // the live bytes per stack that arrive before the tick are never behind its
        // count. (The other way round, allocations made while a large batch of samples
        // was being sent were counted but not yet sent: the tick whose count was the
        // run's peak, which is where the recorder keeps live.folded, could lack them.)
        if let Some(alloc) = &self.alloc {
            alloc.refresh();
        }
        if let Some(samples) = &mut self.samples {
            samples.send(&self.reporter)?;
        }
        for (_, counter, value) in &mut self.counters {
            *value = counter.get();
        }
        for (_, histogram, encoded) in &mut self.histograms {
            self.spare.reset();
            histogram.swap(&mut self.spare);
            self.encoder.encode_into(&self.spare, encoded);
        }
        let tick = TickRef {
            kind: "tick",
            t_ns,
            counters: Entries(&self.counters),
            histograms: Entries(&self.histograms),
        };
        self.reporter.send_serialized("tick", &tick)
    }
}

/// A tick serialized from the ticker's buffers, byte for byte what
/// [`crate::protocol::Tick`] would give.
#[derive(Serialize)]
struct TickRef<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    t_ns: u64,
    counters: Entries<'a, Arc<Counter>, u64>,
    histograms: Entries<'a, Arc<IntervalHistogram>, String>,
}

/// `(name, source, value)` rows serialized as a `{name: value}` map.
struct Entries<'a, S, V>(&'a [(String, S, V)]);

impl<S, V: Serialize> Serialize for Entries<'_, S, V> {
    fn serialize<Ser: serde::Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        serializer.collect_map(self.0.iter().map(|(name, _, value)| (name, value)))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::protocol::{ReportReader, WorkerMessage, decode_trusted};
    use crate::test_support::SharedBuf;

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn ticks(bytes: &[u8]) -> Vec<crate::protocol::Tick> {
        let mut reader = ReportReader::new(bytes);
        std::iter::from_fn(|| reader.next_message())
            .map(|m| match m.unwrap() {
                WorkerMessage::Tick(t) => t,
                other => panic!("not a tick: {other:?}"),
            })
            .collect()
    }

    /// A reporter into a buffer, and metrics with a counter `ops` and a histogram `latency`.
    fn ops_and_latency() -> (
        SharedBuf,
        Arc<Reporter>,
        Metrics,
        Arc<Counter>,
        Arc<IntervalHistogram>,
    ) {
        let out = SharedBuf::default();
        let reporter = Arc::new(Reporter::new(out.clone()));
        let mut metrics = Metrics::new();
        let ops = metrics.counter("ops", "operations", "").unwrap();
        let lat = metrics.histogram("latency", "").unwrap();
        (out, reporter, metrics, ops, lat)
    }

    #[test]
    fn the_final_tick_reports_what_was_recorded_since_the_last_one() {
        let (out, reporter, metrics, ops, lat) = ops_and_latency();
        let start = Start { at: Instant::now() };
        let ticker = Ticker::start(
            reporter,
            &metrics,
            Duration::from_secs(3600),
            start,
            StopSignal::new(),
        )
        .unwrap();
        ops.add(7);
        lat.record(1_500);
        lat.record(2_500);
        ticker.finish().unwrap();

        let ticks = ticks(&out.0.lock().unwrap());
        assert_eq!(ticks.len(), 1);
        assert_eq!(ticks[0].counters["ops"], 7);
        let h = decode_trusted(&ticks[0].histograms["latency"]);
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn ticks_come_each_interval_with_cumulative_counters_and_interval_histograms() {
        let (out, reporter, metrics, ops, lat) = ops_and_latency();
        let start = Start { at: Instant::now() };
        ops.add(1);
        lat.record(10);
        let ticker = Ticker::start(
            reporter,
            &metrics,
            Duration::from_millis(100),
            start,
            StopSignal::new(),
        )
        .unwrap();
        // Wait (without timing assertions) for the first periodic tick.
        while out.0.lock().unwrap().is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
        ops.add(1);
        ticker.finish().unwrap();

        let ticks = ticks(&out.0.lock().unwrap());
        assert!(ticks.len() >= 2, "{ticks:?}");
        assert!(ticks[0].t_ns >= 100_000_000);
        assert!(ticks.windows(2).all(|w| w[0].t_ns < w[1].t_ns));
        assert_eq!(ticks[0].counters["ops"], 1);
        assert_eq!(ticks.last().unwrap().counters["ops"], 2);
        let first = decode_trusted(&ticks[0].histograms["latency"]);
        let last = decode_trusted(&ticks.last().unwrap().histograms["latency"]);
        assert_eq!((first.len(), last.len()), (1, 0));
    }

    #[test]
    fn a_borrowed_tick_serializes_as_the_protocol_tick_does() {
        let counters = vec![("a".to_owned(), Arc::new(Counter::default()), 3u64)];
        let histograms = vec![(
            "h".to_owned(),
            Arc::new(IntervalHistogram::default()),
            "SGVsbG8=".to_owned(),
        )];
        let borrowed = serde_json::to_string(&TickRef {
            kind: "tick",
            t_ns: 5,
            counters: Entries(&counters),
            histograms: Entries(&histograms),
        })
        .unwrap();
        let owned = serde_json::to_string(&WorkerMessage::Tick(crate::protocol::Tick {
            t_ns: 5,
            counters: [("a".to_owned(), 3)].into(),
            histograms: [("h".to_owned(), "SGVsbG8=".to_owned())].into(),
        }))
        .unwrap();
        assert_eq!(borrowed, owned);
    }

    #[test]
    fn a_lost_report_channel_stops_the_run_and_is_returned() {
        let stop = StopSignal::new();
        let ticker = Ticker::start(
            Arc::new(Reporter::new(Broken)),
            &Metrics::new(),
            Duration::from_millis(100),
            Start { at: Instant::now() },
            stop.clone(),
        )
        .unwrap();
        while !stop.is_set() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let err = ticker.finish().unwrap_err().to_string();
        assert!(err.contains("tick") && err.contains("roken pipe"), "{err}");
    }
}
