//! The worker side of the report protocol: writing reports, the start handshake, the
//! stop signal, metrics and the ticker that reports them.
//!
//! A worker builds a [`Reporter`], registers its [`Metrics`], says `hello` and `ready`,
//! waits in [`wait_for_start`], then starts [`listen_for_stop`] and a [`Ticker`] —
//! threads created only after `start`, because perf's inherit follows only threads
//! created after the sampler attached.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use benchtop_workloads::report::{wait_for_start, Metrics, Reporter, StopSignal, Ticker};
//! use benchtop_workloads::protocol::WorkerMessage;
//!
//! let reporter = Arc::new(Reporter::new(std::io::sink()));
//! let mut metrics = Metrics::new();
//! let ops = metrics.counter("ops", "operations", "operations done")?;
//! reporter.send(&WorkerMessage::Ready)?;
//!
//! let start = wait_for_start(&b"{\"type\":\"start\"}\n"[..])?;
//! let stop = StopSignal::new();
//! let ticker = Ticker::start(reporter.clone(), &metrics, Duration::from_millis(100), start, stop.clone())?;
//! ops.add(42);
//! ticker.finish()?; // one last tick: nothing recorded is lost
//! # Ok::<(), benchtop_workloads::WorkloadError>(())
//! ```

mod metrics;
mod samples;
mod ticker;

use std::io::{BufRead, Write};
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

pub use self::metrics::{Counter, IntervalHistogram, Metrics};
pub use self::ticker::Ticker;
use crate::WorkloadError;
use crate::protocol::{
    ConductorMessage, INTERVAL_MS_ENV, REPORT_FD_ENV, WorkerMessage, write_message,
};

/// Tick interval when [`INTERVAL_MS_ENV`] is unset.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(1000);

/// The shortest tick interval accepted.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Writes [`WorkerMessage`]s as JSON lines to the report channel.
///
/// Thread-safe: the workload, its ticker and the worker driver share one reporter
/// (behind an `Arc`); a mutex keeps lines whole and holds the line buffer, reused from
/// one message to the next. Each message is flushed as it is written.
pub struct Reporter {
    inner: Mutex<ReporterInner>,
}

struct ReporterInner {
    out: Box<dyn Write + Send>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporter").finish_non_exhaustive()
    }
}

impl Reporter {
    /// A reporter writing to `out`.
    pub fn new(out: impl Write + Send + 'static) -> Self {
        Reporter {
            inner: Mutex::new(ReporterInner {
                out: Box::new(out),
                buf: Vec::with_capacity(4096),
            }),
        }
    }

    /// A reporter on the descriptor named by [`REPORT_FD_ENV`], or on standard output
    /// when it is unset.
    ///
    /// The descriptor is duplicated (close-on-exec), so the one the conductor passed stays
    /// as it was. Descriptors 0 (conductor messages) and 2 (the worker's log) are refused;
    /// 1 is standard output.
    pub fn from_env() -> Result<Self, WorkloadError> {
        match std::env::var_os(REPORT_FD_ENV) {
            None => Ok(Self::new(std::io::stdout())),
            Some(value) => Self::from_fd_value(&value.to_string_lossy()),
        }
    }

    fn from_fd_value(value: &str) -> Result<Self, WorkloadError> {
        let bad = |reason: String| WorkloadError::BadReportFd {
            var: REPORT_FD_ENV,
            value: value.to_owned(),
            reason,
        };
        let fd: RawFd = value
            .trim()
            .parse()
            .map_err(|_| bad("not a file descriptor number".to_owned()))?;
        match fd {
            ..0 => Err(bad("not a file descriptor number".to_owned())),
            0 => Err(bad(
                "descriptor 0 is standard input, where conductor messages arrive".to_owned(),
            )),
            1 => Ok(Self::new(std::io::stdout())),
            2 => Err(bad(
                "descriptor 2 is standard error, the worker's log".to_owned()
            )),
            _ => {
                // SAFETY: the borrow lives only for the duplication below, during which
                // nothing in this process closes `fd`; a descriptor that is not open makes
                // the duplication fail with EBADF rather than touch anything.
                let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
                let owned = borrowed
                    .try_clone_to_owned()
                    .map_err(|e| bad(format!("cannot use it: {e}")))?;
                Ok(Self::new(std::fs::File::from(owned)))
            }
        }
    }

    /// Writes one message as a JSON line and flushes it.
    pub fn send(&self, message: &WorkerMessage) -> Result<(), WorkloadError> {
        self.send_serialized(message.kind(), message)
    }

    /// Writes anything that serializes as one protocol message (the ticker's borrowed
    /// tick) and flushes it.
    pub(crate) fn send_serialized<M: Serialize>(
        &self,
        kind: &'static str,
        message: &M,
    ) -> Result<(), WorkloadError> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let ReporterInner { out, buf } = &mut *inner;
        write_message(out, buf, message).map_err(|source| WorkloadError::Report {
            message: kind,
            source,
        })
    }
}

/// The tick interval from [`INTERVAL_MS_ENV`]: [`DEFAULT_INTERVAL`] when unset, at least
/// [`MIN_INTERVAL`].
pub fn interval_from_env() -> Result<Duration, WorkloadError> {
    match std::env::var_os(INTERVAL_MS_ENV) {
        None => Ok(DEFAULT_INTERVAL),
        Some(value) => parse_interval(&value.to_string_lossy()),
    }
}

fn parse_interval(value: &str) -> Result<Duration, WorkloadError> {
    let bad = |reason: String| WorkloadError::BadInterval {
        var: INTERVAL_MS_ENV,
        value: value.to_owned(),
        reason,
    };
    let ms: u64 = value
        .trim()
        .parse()
        .map_err(|_| bad("not a whole number of milliseconds".to_owned()))?;
    let interval = Duration::from_millis(ms);
    if interval < MIN_INTERVAL {
        return Err(bad(format!(
            "shorter than the {} ms minimum",
            MIN_INTERVAL.as_millis()
        )));
    }
    Ok(interval)
}

/// The conductor said `start`: measured work begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Start {
    /// When `start` arrived, on the monotonic clock: time zero of every tick's `t_ns`.
    pub at: Instant,
}

impl Start {
    /// A start now, for programs that measure without a conductor's handshake.
    pub fn now() -> Self {
        Start { at: Instant::now() }
    }
}

/// Reads conductor messages from `stdin` until `start`.
///
/// Blank lines are skipped. End of input, a line that is not a conductor message, or a
/// `stop` (the conductor gave up before measured work began) are errors.
pub fn wait_for_start(mut stdin: impl BufRead) -> Result<Start, WorkloadError> {
    let mut line = String::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read = stdin.read_line(&mut line).map_err(WorkloadError::Stdin)?;
        if read == 0 {
            return Err(WorkloadError::NoStart);
        }
        number += 1;
        match parse_conductor_line(&line, number)? {
            None => continue,
            Some(ConductorMessage::Start) => return Ok(Start::now()),
            Some(_) => return Err(WorkloadError::StoppedBeforeStart),
        }
    }
}

/// Decodes one line of standard input; `None` for a blank line.
fn parse_conductor_line(
    line: &str,
    number: u64,
) -> Result<Option<ConductorMessage>, WorkloadError> {
    let text = line.trim();
    if text.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(text)
        .map(Some)
        .map_err(|source| WorkloadError::BadConductorMessage {
            line: number,
            text: text.chars().take(80).collect(),
            source,
        })
}

/// Set once, when the conductor says `stop`, standard input ends, or the report channel
/// is gone; workloads poll it on their own schedule.
///
/// Checking it is one relaxed atomic load.
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Arc<AtomicBool>);

impl StopSignal {
    /// A signal not yet set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the run should stop.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Asks the run to stop.
    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Starts the thread (`benchtop-stdin`) that reads the rest of standard input and sets
/// `stop` when `stop` arrives or the input ends (the conductor is gone).
///
/// Lines that are not conductor messages, and a repeated `start`, are ignored: once
/// measured work runs, only stopping matters. The thread is detached; it ends with the
/// input.
pub fn listen_for_stop(
    input: impl BufRead + Send + 'static,
    stop: StopSignal,
) -> Result<(), WorkloadError> {
    std::thread::Builder::new()
        .name("benchtop-stdin".to_owned())
        .spawn(move || read_until_stop(input, &stop))
        .map_err(|source| WorkloadError::Thread {
            thread: "benchtop-stdin",
            source,
        })?;
    Ok(())
}

fn read_until_stop(mut input: impl BufRead, stop: &StopSignal) {
    let mut line = String::new();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if let Ok(Some(ConductorMessage::Stop)) = parse_conductor_line(&line, 0) {
                    break;
                }
            }
        }
    }
    stop.set();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ReportReader;

    #[test]
    fn start_is_found_after_blank_lines() {
        assert!(wait_for_start(&b"\n  \n{\"type\":\"start\"}\n"[..]).is_ok());
    }

    #[test]
    fn end_of_input_before_start_is_an_error() {
        let err = wait_for_start(&b""[..]).unwrap_err();
        assert!(matches!(err, WorkloadError::NoStart), "{err}");
    }

    #[test]
    fn garbage_before_start_names_its_line() {
        let err = wait_for_start(&b"\ngo!\n"[..]).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("\"go!\""), "{err}");
    }

    #[test]
    fn stop_before_start_says_so() {
        let err = wait_for_start(&b"{\"type\":\"stop\"}\n"[..]).unwrap_err();
        assert!(matches!(err, WorkloadError::StoppedBeforeStart), "{err}");
    }

    #[test]
    fn the_rest_of_the_input_stays_for_the_stop_listener() {
        let mut input = &b"{\"type\":\"start\"}\n{\"type\":\"stop\"}\n"[..];
        wait_for_start(&mut input).unwrap();
        assert_eq!(input, b"{\"type\":\"stop\"}\n");
    }

    #[test]
    fn the_listener_sets_stop_on_stop_and_on_end_of_input() {
        let stop = StopSignal::new();
        read_until_stop(
            &b"junk\n{\"type\":\"start\"}\n{\"type\":\"stop\"}\n"[..],
            &stop,
        );
        assert!(stop.is_set());

        let stop = StopSignal::new();
        read_until_stop(&b""[..], &stop);
        assert!(stop.is_set());
    }

    #[test]
    fn bad_report_fds_are_refused_with_the_reason() {
        for (value, reason) in [
            ("three", "not a file descriptor number"),
            ("-1", "not a file descriptor number"),
            ("0", "standard input"),
            ("2", "standard error"),
            ("987654", "cannot use it"),
        ] {
            let err = Reporter::from_fd_value(value).unwrap_err().to_string();
            assert!(
                err.contains(REPORT_FD_ENV) && err.contains(value) && err.contains(reason),
                "{value}: {err}"
            );
        }
    }

    #[test]
    fn a_report_fd_is_duplicated_and_written() {
        use std::os::fd::AsRawFd;
        let file = tempfile::tempfile().unwrap();
        let reporter = Reporter::from_fd_value(&file.as_raw_fd().to_string()).unwrap();
        reporter.send(&WorkerMessage::Ready).unwrap();
        drop(reporter);
        let mut file = file;
        std::io::Seek::rewind(&mut file).unwrap();
        let mut reader = ReportReader::new(std::io::BufReader::new(file));
        assert!(matches!(
            reader.next_message(),
            Some(Ok(WorkerMessage::Ready))
        ));
    }

    #[test]
    fn intervals_default_parse_and_have_a_floor() {
        assert_eq!(parse_interval("250").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_interval("100").unwrap(), MIN_INTERVAL);
        let err = parse_interval("99").unwrap_err().to_string();
        assert!(err.contains("100 ms minimum"), "{err}");
        let err = parse_interval("1s").unwrap_err().to_string();
        assert!(
            err.contains(INTERVAL_MS_ENV) && err.contains("\"1s\""),
            "{err}"
        );
    }
}
