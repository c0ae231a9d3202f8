//! The report protocol as a worker speaks it: everything of [`benchtop_protocol`] (the
//! messages, the reader and writer, the constants, and the encoding of the latency
//! histograms a worker sends in each [`Tick`]), re-exported so that workloads and their
//! tests name one module, and the latency histogram every workload records.
//!
//! docs/protocol.md is the specification.
//!
//! ```
//! use benchtop_workloads::protocol::{Tick, encode_histogram, new_latency_histogram};
//!
//! let mut latency = new_latency_histogram();
//! latency.record(1_500)?;
//! let mut tick = Tick { t_ns: 1_000_000_000, counters: Default::default(), histograms: Default::default() };
//! tick.histograms.insert("lap".into(), encode_histogram(&latency));
//! assert!(tick.histograms["lap"].starts_with("HIST"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use hdrhistogram::Histogram;
#[cfg(test)]
use {base64::Engine as _, base64::engine::general_purpose::STANDARD as BASE64};

pub use benchtop_protocol::*;

/// Decodes a histogram this crate encoded, for its own tests. It trusts the sizes in the
/// payload: a conductor decoding what a worker sent uses
/// [`benchtop_protocol::HistogramDecoder`], which bounds every size.
#[cfg(test)]
pub(crate) fn decode_trusted(encoded: &str) -> Histogram<u64> {
    let bytes = BASE64.decode(encoded.trim()).expect("base64");
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut &bytes[..])
        .expect("a V2 payload")
}

/// A new latency histogram as every workload records them: nanoseconds, auto-resizing,
/// [`HISTOGRAM_SIGFIG`] significant digits.
pub fn new_latency_histogram() -> Histogram<u64> {
    let mut histogram =
        Histogram::new(HISTOGRAM_SIGFIG).expect("HISTOGRAM_SIGFIG is within HdrHistogram's 0..=5");
    histogram.auto(true);
    histogram
}
