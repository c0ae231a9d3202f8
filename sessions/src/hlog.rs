//! latency.hlog: HdrHistogram interval logs, format version 1.3.
//!
//! The format of Java's `HistogramLogWriter`, read by HistogramLogAnalyzer,
//! `HistogramLogProcessor` and the hdrhistogram crates: a header of `#[…]` comments and a CSV
//! legend, then one line per interval and metric:
//!
//! ```text
//! Tag=<metric>,<start offset s>,<length s>,<max ms>,<base64 of a V2+deflate histogram>
//! ```
//!
//! [`HlogWriter`] appends one whole line per call, so a recorder killed at any moment leaves
//! at most a partial last line, which [`read_hlog`] drops with a warning. Values are
//! nanoseconds; the human-readable `Interval_Max` column is in milliseconds.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write as _};
use std::ops::ControlFlow;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};

use crate::SessionError;
use crate::dir::DirHandle;
use crate::histogram::HistogramDecoder;
use crate::sparse::SparseHistogram;

/// The log format version written in the header.
pub const HLOG_FORMAT_VERSION: &str = "1.3";

/// Recorded values (nanoseconds) are divided by this for the `Interval_Max` column
/// (milliseconds), as Java's `HistogramLogWriter` does with its `maxValueUnitRatio`.
pub const MAX_VALUE_DIVISOR: f64 = 1e6;

/// The CSV legend Java's `HistogramLogWriter` writes before the first interval.
const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";

/// Java's reader takes interval timestamps for offsets from StartTime when they are more than
/// a year smaller than it, and for absolute times otherwise.
const YEAR_S: f64 = 365.25 * 86_400.0;

/// Offsets and lengths beyond this (about 31 700 years) are clamped when written.
const MAX_SECONDS: f64 = 1e12;

/// Appends intervals to a latency.hlog file, one flushed line per call.
pub struct HlogWriter {
    path: PathBuf,
    file: File,
    serializer: V2DeflateSerializer,
    encoded: Vec<u8>,
    line: String,
}

impl HlogWriter {
    /// Creates `path`, which must not exist (a file or a symbolic link there is refused,
    /// never followed), and writes the header, with `start_time` as both StartTime and
    /// BaseTime: interval timestamps are offsets from it.
    pub fn create(path: &Path, start_time: SystemTime) -> Result<Self, SessionError> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)
            .map_err(|e| SessionError::io(path, e))?;
        Self::start(file, path.to_owned(), start_time)
    }

    /// Creates the log `name` in `dir`, relative to its descriptor and with `O_EXCL |
    /// O_NOFOLLOW` ([`DirHandle::create_file`]), and writes the header as
    /// [`HlogWriter::create`] does.
    pub fn create_in(
        dir: &DirHandle,
        name: &str,
        start_time: SystemTime,
    ) -> Result<Self, SessionError> {
        let file = dir.create_file(name, true)?;
        Self::start(file, dir.join(name), start_time)
    }

    fn start(file: File, path: PathBuf, start_time: SystemTime) -> Result<Self, SessionError> {
        let start_time = crate::store::clamp_time(start_time);
        let start = start_time
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let mut writer = HlogWriter {
            path,
            file,
            serializer: V2DeflateSerializer::new(),
            encoded: Vec::new(),
            line: String::new(),
        };
        let header = format!(
            "#[Logged with benchtop-sessions {version}]\n\
             #[Histogram log format version {HLOG_FORMAT_VERSION}]\n\
             #[StartTime: {start:.3} (seconds since epoch), {human}]\n\
             #[BaseTime: {start:.3} (seconds since epoch)]\n\
             #[MaxValueDivisor: {MAX_VALUE_DIVISOR:.3}]\n\
             {LEGEND}\n",
            version = env!("CARGO_PKG_VERSION"),
            human = humantime::format_rfc3339_millis(start_time),
        );
        write_line(&mut writer.file, &writer.path, header.as_bytes())?;
        Ok(writer)
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Syncs what was written to disk.
    pub fn sync(&self) -> Result<(), SessionError> {
        self.file
            .sync_all()
            .map_err(|e| SessionError::io(&self.path, e))
    }

    /// Appends one interval of `histogram` (nanoseconds) for the metric `tag`, starting
    /// `start_offset_s` after the start time and lasting `length_s`, and flushes it.
    ///
    /// Characters a tag cannot hold (`,`, space, line breaks) become `_`; an empty tag writes
    /// an untagged line. Negative or non-finite times are written as 0.
    pub fn append(
        &mut self,
        tag: &str,
        start_offset_s: f64,
        length_s: f64,
        histogram: &Histogram<u64>,
    ) -> Result<(), SessionError> {
        self.encoded.clear();
        self.serializer
            .serialize(histogram, &mut self.encoded)
            .map_err(|e| SessionError::io(&self.path, io::Error::other(e)))?;
        self.line.clear();
        if !tag.is_empty() {
            self.line.push_str("Tag=");
            self.line.extend(tag.chars().map(|c| match c {
                ',' | ' ' | '\r' | '\n' => '_',
                c => c,
            }));
            self.line.push(',');
        }
        // Writing into a String cannot fail.
        let _ = write!(
            self.line,
            "{:.3},{:.3},{:.3},",
            seconds(start_offset_s),
            seconds(length_s),
            histogram.max() as f64 / MAX_VALUE_DIVISOR
        );
        STANDARD.encode_string(&self.encoded, &mut self.line);
        self.line.push('\n');
        write_line(&mut self.file, &self.path, self.line.as_bytes())
    }
}

/// Writes whole lines in one call, so a kill leaves at most the last one partial.
fn write_line(file: &mut File, path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    file.write_all(bytes)
        .and_then(|()| file.flush())
        .map_err(|e| SessionError::io(path, e))
}

impl std::fmt::Debug for HlogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HlogWriter")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn seconds(s: f64) -> f64 {
    if s.is_finite() {
        s.clamp(0.0, MAX_SECONDS)
    } else {
        0.0
    }
}

/// One interval of one metric read from an interval log.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HlogInterval {
    /// The metric; empty for an untagged line.
    pub tag: String,
    /// Start of the interval, seconds after the log's StartTime.
    pub start_offset_s: f64,
    /// Length of the interval, seconds.
    pub length_s: f64,
    /// The values recorded in the interval, nanoseconds for latencies: its non-empty
    /// buckets only, a few bytes each (an interval log of an hour at 100 ms intervals
    /// holds 36,000 of them a metric; dense, each would take about 90 KiB).
    pub histogram: SparseHistogram,
}

impl HlogInterval {
    /// The memory this interval holds, bytes: its buckets, its tag and the fixed fields.
    /// What a load's latency budget ([`crate::limits::MAX_INTERVAL_BYTES`]) counts.
    pub fn held_bytes(&self) -> usize {
        std::mem::size_of::<HlogInterval>()
            .saturating_add(self.tag.capacity())
            .saturating_add(self.histogram.heap_bytes())
    }
}

/// The content of an interval log.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Hlog {
    /// The log's StartTime, when it has one.
    pub start_time: Option<SystemTime>,
    /// The intervals in file order.
    pub intervals: Vec<HlogInterval>,
    /// What was dropped: an incomplete last line left by a recorder that was cut off.
    pub warnings: Vec<String>,
}

/// Reads an interval log file (see [`parse_hlog`]).
///
/// The file is read as a session's is ([`crate::limits::read_bounded`]): a link, a FIFO or a
/// device is refused, and so is a file past the latency.hlog size limit.
pub fn read_hlog(path: &Path) -> Result<Hlog, SessionError> {
    let opts = crate::limits::LoadOptions::from_env()?;
    let kind = crate::limits::FileKind::Hlog;
    let bytes = crate::limits::read_bounded(path, kind, opts.file_limit(kind))?
        .ok_or_else(|| SessionError::io(path, io::ErrorKind::NotFound.into()))?;
    parse_hlog_limited(&bytes, path, opts.max_intervals, opts.max_tags)
}

/// Parses an interval log with hdrhistogram's `IntervalLogIterator`; `source` names it in
/// errors and warnings.
///
/// Interval timestamps become offsets from StartTime, following Java's `HistogramLogReader`
/// (BaseTime when present, else its one-year heuristic). A last line without its newline that
/// does not decode is dropped with a warning; any other line that does not parse or decode is
/// [`SessionError::Corrupt`] naming its line number. So is a StartTime after the end of the
/// year 9999.
///
/// Histograms go through [`HistogramDecoder`]: sizes are checked before anything is
/// allocated from them, and each histogram keeps only the value range its counts need,
/// whatever range its header claims.
pub fn parse_hlog(input: &[u8], source: &Path) -> Result<Hlog, SessionError> {
    parse_hlog_limited(
        input,
        source,
        crate::limits::MAX_INTERVALS,
        crate::limits::MAX_TAGS,
    )
}

/// [`parse_hlog`], keeping at most `max_intervals` intervals and the intervals of at most
/// `max_tags` distinct tags; what is left out is said in a warning (how many lines, from
/// which line on).
pub fn parse_hlog_limited(
    input: &[u8],
    source: &Path,
    max_intervals: usize,
    max_tags: usize,
) -> Result<Hlog, SessionError> {
    let mut intervals = Vec::new();
    let mut log = parse_hlog_each(input, source, max_intervals, max_tags, |interval| {
        intervals.push(interval);
    })?;
    log.intervals = intervals;
    Ok(log)
}

/// [`parse_hlog_limited`], handing each interval kept to `sink` instead of keeping it: the
/// returned log has no intervals. For readers that fold intervals as they come (merged
/// totals), in memory that does not grow with the number of intervals.
pub fn parse_hlog_each(
    input: &[u8],
    source: &Path,
    max_intervals: usize,
    max_tags: usize,
    mut sink: impl FnMut(HlogInterval),
) -> Result<Hlog, SessionError> {
    let (log, _) = parse_hlog_until(input, source, max_intervals, max_tags, |interval| {
        sink(interval);
        ControlFlow::Continue(())
    })?;
    Ok(log)
}

/// [`parse_hlog_each`], until `sink` breaks: the interval lines after that are counted,
/// not decoded (a budget spent, the rest of a crafted log costs no time), and their
/// number is returned beside the log.
pub fn parse_hlog_until(
    input: &[u8],
    source: &Path,
    max_intervals: usize,
    max_tags: usize,
    mut sink: impl FnMut(HlogInterval) -> ControlFlow<()>,
) -> Result<(Hlog, u64), SessionError> {
    let mut stopped = false;
    let mut not_decoded = 0u64;
    let mut log = Hlog::default();
    let mut kept = 0usize;
    let mut tags: std::collections::HashSet<String> = std::collections::HashSet::new();
    let (mut past_intervals, mut first_past_intervals) = (0u64, 0usize);
    let (mut past_tags, mut first_past_tags) = (0u64, 0usize);
    let mut start = None;
    let mut base = None;
    let mut reader = LineReader::default();
    let mut rest = input;
    let mut last_line = Vec::new();
    let mut line_no = 0;
    while !rest.is_empty() {
        line_no += 1;
        let (line, complete) = match rest.iter().position(|&b| b == b'\n') {
            Some(end) => {
                let line = &rest[..=end];
                rest = &rest[end + 1..];
                (line, true)
            }
            None => {
                // The parser needs the newline; try the unterminated last line with one.
                last_line.extend_from_slice(rest);
                last_line.push(b'\n');
                rest = &[];
                (&last_line[..], false)
            }
        };
        if line.trim_ascii().is_empty() {
            continue;
        }
        if stopped {
            // Comments and the legend are not intervals.
            if !line.starts_with(b"#") && !line.starts_with(b"\"") {
                not_decoded += 1;
            }
            continue;
        }
        match reader.parse(line) {
            Ok(None) => {}
            Ok(Some(Entry::StartTime { time, secs })) => {
                start = Some(secs);
                log.start_time = Some(time);
            }
            Ok(Some(Entry::BaseTime(t))) => base = Some(t),
            Ok(Some(Entry::Interval(mut interval))) => {
                let ts = interval.start_offset_s;
                interval.start_offset_s = match (start, base) {
                    (Some(s), Some(b)) => ts + b - s,
                    (Some(s), None) if ts >= s - YEAR_S => ts - s,
                    _ => ts,
                };
                if kept >= max_intervals {
                    if past_intervals == 0 {
                        first_past_intervals = line_no;
                    }
                    past_intervals += 1;
                } else if !tags.contains(&interval.tag) && tags.len() >= max_tags {
                    if past_tags == 0 {
                        first_past_tags = line_no;
                    }
                    past_tags += 1;
                } else {
                    if !tags.contains(&interval.tag) {
                        tags.insert(interval.tag.clone());
                    }
                    kept += 1;
                    stopped = sink(interval).is_break();
                }
            }
            Err(reason) if !complete => log.warnings.push(format!(
                "{}: line {line_no} is incomplete ({reason}); the recorder was cut off \
                 while writing it, so it was dropped",
                source.display()
            )),
            Err(reason) => return Err(SessionError::corrupt_line(source, line_no, reason)),
        }
    }
    if past_intervals > 0 {
        log.warnings.push(format!(
            "{}: more than {max_intervals} intervals; {past_intervals} interval lines from \
             line {first_past_intervals} on were dropped",
            source.display()
        ));
    }
    if past_tags > 0 {
        log.warnings.push(format!(
            "{}: more than {max_tags} tags; {past_tags} interval lines of further tags, from \
             line {first_past_tags} on, were dropped",
            source.display()
        ));
    }
    Ok((log, not_decoded))
}

enum Entry {
    /// At most [`LAST_START_TIME`] after the epoch; `secs` is the same in seconds.
    StartTime {
        time: SystemTime,
        secs: f64,
    },
    BaseTime(f64),
    Interval(HlogInterval),
}

/// The last StartTime accepted, the end of the year 9999: later times overflow `SystemTime`
/// (StartTime can say up to 2⁶⁴ seconds) or RFC 3339.
const LAST_START_TIME: Duration = Duration::new(253_402_300_799, 999_999_999);

/// Decoding state reused across lines.
#[derive(Default)]
struct LineReader {
    decoder: HistogramDecoder,
}

impl LineReader {
    /// One newline-terminated line: `None` for comments and the legend.
    fn parse(&mut self, line: &[u8]) -> Result<Option<Entry>, String> {
        let entry = match IntervalLogIterator::new(line).next() {
            None => return Ok(None),
            Some(Err(_)) => return Err("not an interval log line".into()),
            Some(Ok(entry)) => entry,
        };
        Ok(Some(match entry {
            LogEntry::StartTime(t) => match UNIX_EPOCH.checked_add(t) {
                Some(time) if t <= LAST_START_TIME => Entry::StartTime {
                    time,
                    secs: t.as_secs_f64(),
                },
                _ => {
                    return Err(format!(
                        "StartTime {}.{:09} s is after the end of the year 9999",
                        t.as_secs(),
                        t.subsec_nanos()
                    ));
                }
            },
            LogEntry::BaseTime(t) => Entry::BaseTime(t.as_secs_f64()),
            LogEntry::Interval(interval) => {
                let histogram = self
                    .decoder
                    .decode_sparse(interval.encoded_histogram())
                    .map_err(|e| e.to_string())?;
                Entry::Interval(HlogInterval {
                    tag: interval.tag().map(|t| t.to_string()).unwrap_or_default(),
                    start_offset_s: interval.start_timestamp().as_secs_f64(),
                    length_s: interval.duration().as_secs_f64(),
                    histogram,
                })
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new(3).unwrap();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    fn write_log(values: &[&[u64]]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latency.hlog");
        let start = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        let mut w = HlogWriter::create(&path, start).unwrap();
        for (i, v) in values.iter().enumerate() {
            w.append("rtt", i as f64, 1.0, &histogram(v)).unwrap();
        }
        (dir, path)
    }

    #[test]
    fn the_header_and_lines_follow_the_java_format() {
        let (_dir, path) = write_log(&[&[1_500_000, 2_000_000]]);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "#[Histogram log format version 1.3]");
        assert_eq!(
            lines[2],
            "#[StartTime: 1700000000.250 (seconds since epoch), 2023-11-14T22:13:20.250Z]"
        );
        assert_eq!(
            lines[3],
            "#[BaseTime: 1700000000.250 (seconds since epoch)]"
        );
        assert_eq!(lines[5], LEGEND);
        assert!(
            lines[6].starts_with("Tag=rtt,0.000,1.000,2.001,HISTF"),
            "{}",
            lines[6]
        );
    }

    #[test]
    fn intervals_read_back_with_their_tags_offsets_and_counts() {
        let (_dir, path) = write_log(&[&[10, 20, 30], &[1_000_000]]);
        let log = read_hlog(&path).unwrap();
        assert_eq!(
            log.start_time,
            Some(UNIX_EPOCH + Duration::from_millis(1_700_000_000_250))
        );
        assert_eq!(log.intervals.len(), 2);
        assert_eq!(log.intervals[0].tag, "rtt");
        assert_eq!(log.intervals[0].histogram.len(), 3);
        assert_eq!(log.intervals[1].start_offset_s, 1.0);
        assert_eq!(log.intervals[1].histogram.max(), 1_000_447);
        assert!(log.warnings.is_empty());
    }

    #[test]
    fn tags_lose_the_characters_the_format_reserves() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.hlog");
        let mut w = HlogWriter::create(&path, SystemTime::now()).unwrap();
        w.append("get, put\n", -1.0, f64::NAN, &histogram(&[5]))
            .unwrap();
        let log = read_hlog(&path).unwrap();
        assert_eq!(log.intervals[0].tag, "get__put_");
        assert_eq!(log.intervals[0].start_offset_s, 0.0);
    }

    #[test]
    fn an_incomplete_last_line_is_dropped_with_a_warning() {
        let (_dir, path) = write_log(&[&[10], &[20]]);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(bytes.len() - 10);
        let log = parse_hlog(&bytes, &path).unwrap();
        assert_eq!(log.intervals.len(), 1);
        assert_eq!(log.warnings.len(), 1);
        assert!(log.warnings[0].contains("line 8"), "{}", log.warnings[0]);
    }

    #[test]
    fn a_complete_last_line_without_its_newline_is_kept() {
        let (_dir, path) = write_log(&[&[10], &[20]]);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.pop();
        let log = parse_hlog(&bytes, &path).unwrap();
        assert_eq!(log.intervals.len(), 2);
        assert!(log.warnings.is_empty());
    }

    #[test]
    fn a_corrupt_line_in_the_middle_is_an_error_naming_it() {
        let (_dir, path) = write_log(&[&[10], &[20]]);
        let text = std::fs::read_to_string(&path).unwrap();
        let broken = text.replacen("HISTF", "HIST!", 1);
        let err = parse_hlog(broken.as_bytes(), &path)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("latency.hlog") && err.contains("line 7"),
            "{err}"
        );
        let garbage = text.replacen("Tag=rtt,1.000", "Tag=rtt,x", 1);
        let err = parse_hlog(garbage.as_bytes(), &path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 8: not an interval log line"), "{err}");
    }

    #[test]
    fn absolute_timestamps_without_base_time_become_offsets() {
        let h = histogram(&[7]);
        let mut encoded = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&h, &mut encoded)
            .unwrap();
        let text = format!(
            "#[StartTime: 1500000000.000 (seconds since epoch), whenever]\n\
             1500000060.500,1.000,0.000,{}\n",
            STANDARD.encode(&encoded)
        );
        let log = parse_hlog(text.as_bytes(), Path::new("jhiccup.hlog")).unwrap();
        assert_eq!(log.intervals[0].start_offset_s, 60.5);
        assert_eq!(log.intervals[0].tag, "");
    }

    #[test]
    fn a_start_time_beyond_what_a_system_time_holds_is_corrupt_not_a_panic() {
        let (_dir, path) = write_log(&[&[10], &[20]]);
        let text = std::fs::read_to_string(&path).unwrap();
        for huge in ["18446744073709551615.0", "253402300800.000"] {
            let hostile = text.replacen(
                "#[StartTime: 1700000000.250",
                &format!("#[StartTime: {huge}"),
                1,
            );
            let err = parse_hlog(hostile.as_bytes(), &path).unwrap_err();
            assert!(matches!(err, SessionError::Corrupt { .. }), "{err}");
            let err = err.to_string();
            assert!(
                err.contains("latency.hlog") && err.contains("line 3: StartTime"),
                "{err}"
            );
        }
        let last = text.replacen(
            "#[StartTime: 1700000000.250",
            "#[StartTime: 253402300799.999",
            1,
        );
        let log = parse_hlog(last.as_bytes(), &path).unwrap();
        assert!(log.start_time.is_some());
    }

    #[test]
    fn a_hostile_histogram_is_corrupt_naming_its_line() {
        let (_dir, path) = write_log(&[&[10]]);
        let text = std::fs::read_to_string(&path).unwrap();
        // The compressed cookie and a compressed length of 2³² − 1, and nothing after them.
        let (head, _) = text.rsplit_once(',').unwrap();
        let hostile = format!("{head},HISTFP////8=\n");
        let err = parse_hlog(hostile.as_bytes(), &path)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "line 7: histogram does not decode: the header says 4294967295 compressed bytes"
            ),
            "{err}"
        );
    }
}
