//! latency.hlog as the hdrhistogram crate's own reader sees it.

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use benchtop_sessions::HlogWriter;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

use crate::histogram;

#[test]
fn the_latency_log_reads_back_through_hdrhistograms_own_iterator_with_the_same_counts() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("latency.hlog");
    let start = UNIX_EPOCH + Duration::from_secs(1_714_564_800);
    let mut w = HlogWriter::create(&path, start).unwrap();
    let mut appended = 0;
    for i in 0..5u64 {
        let h = histogram(&(1..=100 * (i + 1)).map(|v| v * 997).collect::<Vec<_>>());
        appended += h.len();
        w.append("rtt", i as f64 * 0.5, 0.5, &h).unwrap();
    }
    drop(w);

    let bytes = std::fs::read(&path).unwrap();
    let mut deserializer = Deserializer::new();
    let (mut total, mut intervals, mut start_time, mut base_time) = (0, 0, None, None);
    for entry in IntervalLogIterator::new(&bytes) {
        match entry.unwrap() {
            LogEntry::StartTime(t) => start_time = Some(t),
            LogEntry::BaseTime(t) => base_time = Some(t),
            LogEntry::Interval(i) => {
                assert_eq!(i.tag().unwrap().as_str(), "rtt");
                assert_eq!(i.start_timestamp(), Duration::from_millis(500 * intervals));
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(i.encoded_histogram())
                    .unwrap();
                let h: hdrhistogram::Histogram<u64> =
                    deserializer.deserialize(&mut &raw[..]).unwrap();
                // The max column is in milliseconds.
                assert!((i.max() - h.max() as f64 / 1e6).abs() < 1e-3);
                total += h.len();
                intervals += 1;
            }
        }
    }
    assert_eq!(intervals, 5);
    assert_eq!(total, appended);
    assert_eq!(start_time, Some(Duration::from_secs(1_714_564_800)));
    assert_eq!(base_time, start_time);
}
