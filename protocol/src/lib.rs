//! The worker report protocol: typed, versioned, newline-delimited JSON.
//!
//! ```
//! use benchtop_protocol::{ReportReader, WorkerMessage};
//!
//! let transcript = br#"{"type":"hello","protocol":1,"workload":"demo","params":{},"metrics":[]}
//! {"type":"ready"}
//! "#;
//! let mut reader = ReportReader::new(&transcript[..]);
//! assert!(matches!(reader.next_message(), Some(Ok(WorkerMessage::Hello(_)))));
//! assert!(matches!(reader.next_message(), Some(Ok(WorkerMessage::Ready))));
//! assert!(reader.next_message().is_none());
//! ```
//!
//! A worker writes [`WorkerMessage`]s, one JSON object per line, to the file descriptor
//! named by [`REPORT_FD_ENV`] (standard output when unset) and reads
//! [`ConductorMessage`]s from its standard input. The sequence is:
//!
//! ```text
//! worker → hello (protocol version, workload, params, metrics)
//! worker → ready                     (set up; nothing measured yet)
//! conductor → start                  (profilers are attached)
//! worker → tick …                    (each interval: cumulative counters, interval histograms)
//! worker → phase …                   (workloads made of timed phases)
//! worker → alloc_samples …           (version 2: sampled allocation stacks, before ticks)
//! conductor → stop                   (optional: end early, still report a summary)
//! worker → summary                   (the benchmark's own result lines)
//! worker → error                     (on failure, before a non-zero exit)
//! ```
//!
//! docs/protocol.md is the specification; [`PROTOCOL_VERSION`] versions both. This crate
//! holds the messages, the bounded [`ReportReader`] a conductor reads untrusted report
//! lines with, and [`write_message`]; it depends on serde alone. The histograms inside a
//! [`Tick`] are opaque text here: workers encode them with
//! `benchtop_workloads::protocol::encode_histogram`, and a conductor decodes them with the
//! bounded `benchtop_sessions::histogram::HistogramDecoder` (the same decoder that loads
//! latency.hlog).
#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

/// The protocol version this build speaks, and that its workers announce. Version 2 adds
/// the `alloc_samples` message ([`AllocSamples`]); everything of version 1 is unchanged.
pub const PROTOCOL_VERSION: u32 = 2;

/// The versions a conductor of this build accepts in a `hello`: 1 (without allocation
/// samples) and 2. It refuses any other.
pub const SUPPORTED_VERSIONS: std::ops::RangeInclusive<u32> = 1..=PROTOCOL_VERSION;

/// Environment variable naming the file descriptor a worker writes reports to.
pub const REPORT_FD_ENV: &str = "BENCHTOP_REPORT_FD";

/// Environment variable carrying the tick interval in milliseconds (default 1000).
pub const INTERVAL_MS_ENV: &str = "BENCHTOP_INTERVAL_MS";

/// Environment variable asking a built-in worker's allocator for a sampling rate: the
/// mean bytes allocated between two sampled stacks, `0` for none (default 524288).
pub const ALLOC_SAMPLE_ENV: &str = "BENCHTOP_ALLOC_SAMPLE";

/// The longest report line accepted, newline excluded. Longer lines are skipped and
/// reported, never buffered whole.
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// Significant digits of every latency histogram on the wire.
pub const HISTOGRAM_SIGFIG: u8 = 3;

/// Tick counter: bytes the worker allocated since it began counting (a built-in worker
/// with its counting allocator on; docs/protocol.md, "Allocation counters").
pub const ALLOC_BYTES: &str = "alloc_bytes";
/// Tick counter: bytes the worker freed since it began counting.
pub const FREE_BYTES: &str = "free_bytes";
/// Tick counter: allocation calls since the worker began counting.
pub const ALLOCS: &str = "allocs";
/// Tick counter: free calls since the worker began counting.
pub const FREES: &str = "frees";
/// Tick counter, the one **level** among them: bytes allocated and not yet freed now,
/// `alloc_bytes - free_bytes` of the same tick. It falls as well as rises, so it has no
/// rate.
pub const LIVE_BYTES: &str = "live_bytes";

/// Whether the tick counter `name` is a level that may fall (only [`LIVE_BYTES`]) rather
/// than a cumulative count: a conductor computes no rate for it.
pub fn is_level_counter(name: &str) -> bool {
    name == LIVE_BYTES
}

/// A message from a worker to the conductor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum WorkerMessage {
    /// First message: who the worker is and what it will report.
    Hello(Hello),
    /// Set up and waiting for [`ConductorMessage::Start`].
    Ready,
    /// One interval of measurements.
    Tick(Tick),
    /// One timed phase finished (workloads made of phases).
    Phase(Phase),
    /// The workload's own results, once, at the end.
    Summary(Summary),
    /// Allocation stacks sampled since the previous message (version 2), sent before
    /// the tick they belong to.
    AllocSamples(AllocSamples),
    /// The workload failed; sent before a non-zero exit.
    Error {
        /// What went wrong, for a person.
        message: String,
    },
}

impl WorkerMessage {
    /// The message's `type` on the wire: `hello`, `ready`, `tick`, `phase`, `summary`,
    /// `alloc_samples`, `error`.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkerMessage::Hello(_) => "hello",
            WorkerMessage::Ready => "ready",
            WorkerMessage::Tick(_) => "tick",
            WorkerMessage::Phase(_) => "phase",
            WorkerMessage::Summary(_) => "summary",
            WorkerMessage::AllocSamples(_) => "alloc_samples",
            WorkerMessage::Error { .. } => "error",
        }
    }
}

/// A message from the conductor to a worker, on the worker's standard input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConductorMessage {
    /// Profilers are attached: begin measured work.
    Start,
    /// End early: stop measured work, report a summary and exit.
    Stop,
}

/// The first message of a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Protocol version spoken by the worker; must equal [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// Workload name, e.g. `ring`.
    pub workload: String,
    /// Parameters in effect, by their command-line names.
    #[serde(default)]
    pub params: BTreeMap<String, serde_json::Value>,
    /// Metrics the worker will report in ticks.
    #[serde(default)]
    pub metrics: Vec<Metric>,
}

/// A metric a worker reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metric {
    /// Name, the key in [`Tick::counters`] or [`Tick::histograms`].
    pub name: String,
    /// Counter or histogram.
    pub kind: MetricKind,
    /// Unit of one count (counters) or of recorded values (histograms), e.g. `messages`, `ns`.
    pub unit: String,
    /// One line on what is measured.
    #[serde(default)]
    pub description: String,
}

/// The kind of a [`Metric`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MetricKind {
    /// Cumulative count since start; throughput is its rate.
    Counter,
    /// Values recorded during the interval only.
    Histogram,
}

/// One interval of measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tick {
    /// Nanoseconds since `start`, on the worker's monotonic clock.
    pub t_ns: u64,
    /// Cumulative counters since `start`.
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
    /// Histograms of this interval only: HdrHistogram V2 with deflate, in standard base64
    /// (the payload format of HdrHistogram interval logs).
    #[serde(default)]
    pub histograms: BTreeMap<String, String>,
}

/// A timed phase, for workloads made of phases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// Phase name, e.g. `parse`.
    pub name: String,
    /// Start of the phase, nanoseconds since `start`.
    pub t_ns: u64,
    /// Length of the phase in nanoseconds.
    pub duration_ns: u64,
    /// Figures of the phase (bytes, MB/s, RSS…).
    #[serde(default)]
    pub figures: Vec<Figure>,
}

/// The workload's own results: the lines the original benchmark printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Result figures in the order the original printed them.
    pub figures: Vec<Figure>,
    /// The result lines exactly as the original benchmark printed them, for people (the
    /// conductor prints these; comparisons use `figures`). Optional.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<String>,
}

/// One named result figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// The original benchmark's name for it, e.g. `time_taken_for_ring_messaging`.
    pub name: String,
    /// The value, in `unit`.
    pub value: f64,
    /// Unit, e.g. `s`, `bytes`, `messages/s`; empty for plain numbers.
    #[serde(default)]
    pub unit: String,
    /// Which direction is better, when one is (used by comparisons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub better: Option<Better>,
}

/// Which direction of change is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Better {
    /// Higher is better (throughput).
    Higher,
    /// Lower is better (time, memory).
    Lower,
}

impl Figure {
    /// A figure with no preferred direction.
    pub fn new(name: impl Into<String>, value: f64, unit: impl Into<String>) -> Self {
        Figure {
            name: name.into(),
            value,
            unit: unit.into(),
            better: None,
        }
    }

    /// The same figure, saying which direction is better.
    #[must_use]
    pub fn better(mut self, better: Better) -> Self {
        self.better = Some(better);
        self
    }
}

/// Frames a sampled allocation stack may carry on the wire; a stack with more is
/// refused by [`AllocSamples::check`].
pub const MAX_ALLOC_FRAMES: usize = 128;

/// Allocation stacks sampled by a worker's allocator (protocol version 2;
/// docs/protocol.md, "Allocation samples").
///
/// The allocator samples an allocation about every [`AllocSamples::rate`] bytes
/// allocated (at random, exponentially distributed gaps, as jemalloc and tcmalloc do) and
/// remembers each sample until its block is freed. A message carries the stacks not sent
/// before, the samples taken since the previous message, and the earlier samples freed
/// since. Ids are the worker's: a stack id names its frames for the rest of the run, a
/// sample id one sampled block.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AllocSamples {
    /// Mean bytes allocated between two samples.
    pub rate: u64,
    /// Stacks first used by this message's samples.
    #[serde(default)]
    pub stacks: Vec<AllocStack>,
    /// Allocations sampled since the previous message.
    #[serde(default)]
    pub samples: Vec<AllocSample>,
    /// Ids of samples sent in earlier messages whose blocks were freed since.
    #[serde(default)]
    pub freed: Vec<u64>,
    /// Samples not taken since the worker started because its tables were full
    /// (cumulative).
    #[serde(default)]
    pub dropped: u64,
}

/// One stack of sampled allocations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocStack {
    /// The worker's id for it.
    pub id: u32,
    /// Return addresses in the worker's address space, innermost first (the first is in
    /// the allocator's caller, or in the allocator itself); at most [`MAX_ALLOC_FRAMES`].
    pub frames: Vec<u64>,
}

/// One sampled allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocSample {
    /// The worker's id for it: [`AllocSamples::freed`] names it when its block is freed.
    pub id: u64,
    /// The id of its stack, in this message's or an earlier message's `stacks`.
    pub stack: u32,
    /// The size allocated, bytes.
    pub size: u64,
    /// The bytes the sample stands for: `size / (1 - exp(-size / rate))`, so that summed
    /// over samples they estimate the bytes allocated without bias.
    pub bytes: u64,
    /// Freed already, before this message was sent: it counts as allocated, not as live.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub freed: bool,
}

impl AllocSamples {
    /// Whether the message is empty: nothing sampled, nothing freed.
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty() && self.samples.is_empty() && self.freed.is_empty()
    }

    /// Checks what the types cannot: a rate of at least one byte and stacks of at most
    /// [`MAX_ALLOC_FRAMES`] frames. Returns what is wrong, for a person.
    pub fn check(&self) -> Result<(), String> {
        if self.rate == 0 {
            return Err("alloc_samples with a rate of 0 bytes".to_owned());
        }
        if let Some(stack) = self
            .stacks
            .iter()
            .find(|s| s.frames.len() > MAX_ALLOC_FRAMES)
        {
            return Err(format!(
                "alloc_samples: stack {} has {} frames, more than the {MAX_ALLOC_FRAMES} allowed",
                stack.id,
                stack.frames.len()
            ));
        }
        Ok(())
    }
}

/// What can go wrong speaking the protocol.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A line is not a valid message.
    #[error("report line {line}: not a valid message: {source}")]
    Malformed {
        /// 1-based line number on the report channel.
        line: u64,
        /// What the JSON decoder said.
        #[source]
        source: serde_json::Error,
    },
    /// A line is longer than [`MAX_LINE_BYTES`]; it was skipped.
    #[error("report line {line}: {len} bytes, longer than the {max}-byte limit; skipped")]
    LineTooLong {
        /// 1-based line number.
        line: u64,
        /// Bytes read before the newline.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The channel ended in the middle of a line.
    #[error("report line {line}: truncated ({len} bytes without a newline at end of stream)")]
    Truncated {
        /// 1-based line number.
        line: u64,
        /// Bytes of the partial line.
        len: usize,
    },
    /// A line is not UTF-8.
    #[error("report line {line}: not UTF-8")]
    NotUtf8 {
        /// 1-based line number.
        line: u64,
    },
    /// The worker speaks a protocol version this conductor does not.
    #[error(
        "worker speaks report protocol version {found}; this benchtop speaks versions 1 to {supported}"
    )]
    UnsupportedVersion {
        /// Version in the worker's hello.
        found: u32,
        /// [`PROTOCOL_VERSION`], the newest version spoken.
        supported: u32,
    },
    /// Reading or writing the channel failed.
    #[error("report channel: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads [`WorkerMessage`]s line by line, surviving anything a worker may write.
///
/// Each call yields the next message or the error for one bad line; reading goes on
/// after an error, so nothing that follows a bad line is lost.
#[derive(Debug)]
pub struct ReportReader<R> {
    inner: R,
    line: u64,
    buf: Vec<u8>,
    max: usize,
    done: bool,
}

impl<R: BufRead> ReportReader<R> {
    /// A reader with the [`MAX_LINE_BYTES`] limit.
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_LINE_BYTES)
    }

    /// A reader with another line-length limit.
    pub fn with_limit(inner: R, max: usize) -> Self {
        ReportReader {
            inner,
            line: 0,
            buf: Vec::with_capacity(4096),
            max,
            done: false,
        }
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.line
    }

    /// The next message, the error of the next bad line, or `None` at end of stream.
    pub fn next_message(&mut self) -> Option<Result<WorkerMessage, ProtocolError>> {
        loop {
            if self.done {
                return None;
            }
            self.buf.clear();
            let (len, newline) = match self.read_line_capped() {
                Ok(r) => r,
                Err(e) => {
                    self.done = true;
                    return Some(Err(ProtocolError::Io(e)));
                }
            };
            if len == 0 && !newline {
                self.done = true;
                return None;
            }
            self.line += 1;
            let line = self.line;
            if !newline {
                self.done = true;
            }
            if len > self.max {
                return Some(Err(ProtocolError::LineTooLong {
                    line,
                    len,
                    max: self.max,
                }));
            }
            if !newline {
                return Some(Err(ProtocolError::Truncated { line, len }));
            }
            let Ok(text) = std::str::from_utf8(&self.buf) else {
                return Some(Err(ProtocolError::NotUtf8 { line }));
            };
            if text.trim().is_empty() {
                continue;
            }
            return Some(decode_line(text, line));
        }
    }

    /// Reads one line into `buf`, keeping at most `max + 1` bytes of it.
    /// Returns the full length of the line and whether it ended with a newline.
    fn read_line_capped(&mut self) -> std::io::Result<(usize, bool)> {
        let mut len = 0usize;
        loop {
            let available = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok((len, false));
            }
            let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (&available[..i], true),
                None => (available, false),
            };
            let room = (self.max + 1).saturating_sub(self.buf.len());
            self.buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
            len += chunk.len();
            let consumed = chunk.len() + usize::from(found);
            self.inner.consume(consumed);
            if found {
                if self.buf.last() == Some(&b'\r') {
                    self.buf.pop();
                    len -= 1;
                }
                return Ok((len, true));
            }
        }
    }
}

/// Decodes one report line (without its newline) and checks the protocol version of a
/// `hello` (one of [`SUPPORTED_VERSIONS`]). `line` is its 1-based number, for error messages.
pub fn decode_line(text: &str, line: u64) -> Result<WorkerMessage, ProtocolError> {
    let message: WorkerMessage =
        serde_json::from_str(text).map_err(|source| ProtocolError::Malformed { line, source })?;
    if let WorkerMessage::Hello(hello) = &message
        && !SUPPORTED_VERSIONS.contains(&hello.protocol)
    {
        return Err(ProtocolError::UnsupportedVersion {
            found: hello.protocol,
            supported: PROTOCOL_VERSION,
        });
    }
    Ok(message)
}

/// Writes one message as a JSON line into `out`, reusing `buf`.
pub fn write_message<W: Write, M: Serialize>(
    out: &mut W,
    buf: &mut Vec<u8>,
    message: &M,
) -> std::io::Result<()> {
    buf.clear();
    serde_json::to_writer(&mut *buf, message)?;
    buf.push(b'\n');
    out.write_all(buf)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(input: &[u8], max: usize) -> Vec<Result<WorkerMessage, String>> {
        let mut reader = ReportReader::with_limit(input, max);
        std::iter::from_fn(|| reader.next_message())
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
    }

    #[test]
    fn bad_lines_are_reported_and_reading_goes_on() {
        let input =
            b"{\"type\":\"ready\"}\nnot json\n{\"type\":\"warp\"}\n\n{\"type\":\"ready\"}\n";
        let got = read_all(input, 1024);
        assert_eq!(got.len(), 4);
        assert!(matches!(got[0], Ok(WorkerMessage::Ready)));
        assert!(got[1].as_ref().unwrap_err().contains("line 2"));
        assert!(got[2].as_ref().unwrap_err().contains("unknown variant"));
        assert!(matches!(got[3], Ok(WorkerMessage::Ready)));
    }

    #[test]
    fn an_oversized_line_is_skipped_without_losing_the_next() {
        let mut input = b"{\"type\":\"ready\"}\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 10_000));
        input.extend_from_slice(b"\n{\"type\":\"ready\"}\n");
        let got = read_all(&input, 100);
        assert_eq!(got.len(), 3);
        let err = got[1].as_ref().unwrap_err();
        assert!(
            err.contains("10000 bytes") && err.contains("100-byte"),
            "{err}"
        );
        assert!(matches!(got[2], Ok(WorkerMessage::Ready)));
    }

    #[test]
    fn a_line_cut_off_at_end_of_stream_is_truncated() {
        let got = read_all(b"{\"type\":\"ready\"}\n{\"type\":\"tick\",\"t_", 1024);
        assert_eq!(got.len(), 2);
        assert!(got[1].as_ref().unwrap_err().contains("truncated"));
    }

    #[test]
    fn a_hello_of_another_version_is_refused() {
        let got = read_all(
            b"{\"type\":\"hello\",\"protocol\":99,\"workload\":\"x\"}\n",
            1024,
        );
        let err = got[0].as_ref().unwrap_err();
        assert!(
            err.contains("version 99") && err.contains("versions 1 to 2"),
            "{err}"
        );
    }

    #[test]
    fn version_1_and_version_2_hellos_are_both_accepted() {
        for version in [1, 2] {
            let line =
                format!("{{\"type\":\"hello\",\"protocol\":{version},\"workload\":\"x\"}}\n");
            let got = read_all(line.as_bytes(), 1024);
            assert!(matches!(got[0], Ok(WorkerMessage::Hello(_))), "{got:?}");
        }
    }

    #[test]
    fn allocation_samples_round_trip_and_are_checked() {
        let message = WorkerMessage::AllocSamples(AllocSamples {
            rate: 524_288,
            stacks: vec![AllocStack {
                id: 0,
                frames: vec![0x5555_0000_1234, 0x5555_0000_5678],
            }],
            samples: vec![
                AllocSample {
                    id: 7,
                    stack: 0,
                    size: 4096,
                    bytes: 526_341,
                    freed: false,
                },
                AllocSample {
                    id: 8,
                    stack: 0,
                    size: 64,
                    bytes: 524_320,
                    freed: true,
                },
            ],
            freed: vec![3, 5],
            dropped: 0,
        });
        let mut out = Vec::new();
        write_message(&mut out, &mut Vec::new(), &message).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.starts_with("{\"type\":\"alloc_samples\""), "{text}");
        // `freed` is left out of a live sample's line.
        assert_eq!(text.matches("\"freed\":true").count(), 1, "{text}");
        let back = read_all(&out, 1024);
        assert_eq!(back[0].as_ref().unwrap(), &message);
        assert_eq!(message.kind(), "alloc_samples");

        let WorkerMessage::AllocSamples(mut samples) = message else {
            unreachable!()
        };
        assert!(samples.check().is_ok());
        samples.stacks[0].frames = vec![1; MAX_ALLOC_FRAMES + 1];
        assert!(samples.check().unwrap_err().contains("129 frames"));
        samples.stacks.clear();
        samples.rate = 0;
        assert!(samples.check().unwrap_err().contains("rate of 0"));
    }

    #[test]
    fn an_alloc_samples_line_past_the_limit_is_refused_unread() {
        let mut line = String::from("{\"type\":\"alloc_samples\",\"rate\":1,\"freed\":[");
        for i in 0..10_000 {
            line.push_str(&format!("{i},"));
        }
        line.push_str("0]}\n");
        let got = read_all(line.as_bytes(), 4096);
        assert_eq!(got.len(), 1);
        assert!(
            got[0].as_ref().unwrap_err().contains("4096-byte"),
            "{got:?}"
        );
    }

    #[test]
    fn messages_round_trip_as_json_lines() {
        let messages = vec![
            WorkerMessage::Ready,
            WorkerMessage::Summary(Summary {
                figures: vec![Figure::new("num_nodes", 5000.0, "").better(Better::Higher)],
                lines: vec!["num_nodes: 5000".into()],
            }),
            WorkerMessage::Error {
                message: "boom".into(),
            },
        ];
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for m in &messages {
            write_message(&mut out, &mut buf, m).unwrap();
        }
        let back: Vec<_> = read_all(&out, 1024)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(back, messages);
    }
}
