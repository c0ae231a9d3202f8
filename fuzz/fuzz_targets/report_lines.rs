//! Worker report lines on arbitrary bytes, read as the conductor reads a worker's report
//! stream: every line becomes a message or an error naming it, never a panic, and the
//! histograms of every tick are decoded with the conductor's bounded decoder, and every
//! `alloc_samples` checked.
#![no_main]

use benchtop_sessions::histogram::HistogramDecoder;
use benchtop_protocol::{ReportReader, WorkerMessage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A small line limit, so long lines are exercised without long inputs.
    let mut reader = ReportReader::with_limit(data, 4096);
    let mut decoder = HistogramDecoder::new();
    while let Some(message) = reader.next_message() {
        match message {
            Ok(WorkerMessage::Tick(tick)) => {
                for encoded in tick.histograms.values() {
                    if let Ok(h) = decoder.decode(encoded) {
                        let _ = h.value_at_quantile(0.99);
                    }
                }
            }
            Ok(WorkerMessage::AllocSamples(samples)) => {
                let _ = samples.check();
            }
            _ => {}
        }
    }
});
