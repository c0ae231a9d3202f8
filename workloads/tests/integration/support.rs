//! What the tests share: a report sink to read back, a conductor's end of stdin, and
//! running a worker on a thread.

use std::io::{BufReader, PipeWriter, Write};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use benchtop_workloads::WorkloadError;
use benchtop_workloads::protocol::{ReportReader, WorkerMessage};
use benchtop_workloads::report::Reporter;
use benchtop_workloads::worker::{Workload, run_worker_with};

/// A `Write` whose bytes the test reads while or after a worker writes them.
#[derive(Debug, Clone, Default)]
pub struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl SharedBuf {
    pub fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }

    /// Every message so far; panics on a line that does not parse.
    pub fn messages(&self) -> Vec<WorkerMessage> {
        let bytes = self.bytes();
        let mut reader = ReportReader::new(&bytes[..]);
        std::iter::from_fn(|| reader.next_message())
            .map(|m| m.expect("the worker wrote a valid message"))
            .collect()
    }
}

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A worker running on a thread of the test, and the conductor's ends of its channels.
pub struct RunningWorker {
    pub reports: SharedBuf,
    /// The worker's stdin; dropping it is end of input.
    pub conductor: Option<PipeWriter>,
    done: mpsc::Receiver<(Result<(), WorkloadError>, String)>,
    thread: Option<JoinHandle<()>>,
}

impl RunningWorker {
    /// Starts `workload` with `interval` between ticks; sends `start` at once.
    pub fn start(workload: Workload, interval: Duration) -> Self {
        let reports = SharedBuf::default();
        let reporter = Arc::new(Reporter::new(reports.clone()));
        let (stdin, mut conductor) = std::io::pipe().unwrap();
        conductor.write_all(b"{\"type\":\"start\"}\n").unwrap();
        let (tx, done) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut log = Vec::new();
            let result = run_worker_with(
                &workload,
                reporter,
                interval,
                BufReader::new(stdin),
                &mut log,
            );
            let _ = tx.send((result, String::from_utf8(log).unwrap()));
        });
        RunningWorker {
            reports,
            conductor: Some(conductor),
            done,
            thread: Some(thread),
        }
    }

    /// Sends a conductor message line.
    pub fn send(&mut self, line: &str) {
        let conductor = self.conductor.as_mut().expect("stdin still open");
        conductor.write_all(line.as_bytes()).unwrap();
        conductor.write_all(b"\n").unwrap();
    }

    /// Waits for the worker to end — a guard against hanging, not a timing assertion —
    /// and returns its result and log.
    pub fn wait(mut self, limit: Duration) -> (Result<(), WorkloadError>, String) {
        let ended = self
            .done
            .recv_timeout(limit)
            .unwrap_or_else(|_| panic!("the worker did not end within {limit:?}"));
        self.thread.take().unwrap().join().unwrap();
        ended
    }

    /// Waits until some tick reports `counter` above zero.
    pub fn wait_for_progress(&self, counter: &str, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let moving = self.reports.messages().iter().any(|m| {
                matches!(m, WorkerMessage::Tick(t) if t.counters.get(counter).copied().unwrap_or(0) > 0)
            });
            if moving {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no tick with {counter} > 0 within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A summary figure's value by name.
pub fn figure(message: &WorkerMessage, name: &str) -> f64 {
    let WorkerMessage::Summary(summary) = message else {
        panic!("not a summary: {message:?}");
    };
    summary
        .figures
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no figure {name}"))
        .value
}

/// A histogram from our own workers' ticks, decoded without size limits.
pub fn decode_trusted(encoded: &str) -> hdrhistogram::Histogram<u64> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut &bytes[..])
        .unwrap()
}
