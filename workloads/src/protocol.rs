//! The report protocol as a worker speaks it: everything of [`benchtop_protocol`] (the
//! messages, the reader and writer, the constants), re-exported so that workloads and
//! their tests name one module, and the encoding of the latency histograms a worker sends
//! in each [`Tick`].
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

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};

pub use benchtop_protocol::*;

/// Encodes an interval histogram for [`Tick::histograms`]: HdrHistogram V2 with deflate,
/// then standard base64 (the payload format of HdrHistogram interval logs).
///
/// Allocates its buffers on each call; a worker encoding every interval keeps a
/// [`HistogramEncoder`] instead.
pub fn encode_histogram(histogram: &Histogram<u64>) -> String {
    let mut out = String::new();
    HistogramEncoder::new().encode_into(histogram, &mut out);
    out
}

/// Encodes histograms as [`encode_histogram`] does, reusing its buffers from one call to
/// the next (the worker's tick path).
pub struct HistogramEncoder {
    serializer: V2DeflateSerializer,
    bytes: Vec<u8>,
}

impl std::fmt::Debug for HistogramEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistogramEncoder")
            .field("bytes_capacity", &self.bytes.capacity())
            .finish_non_exhaustive()
    }
}

impl Default for HistogramEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl HistogramEncoder {
    /// An encoder with empty buffers.
    pub fn new() -> Self {
        HistogramEncoder {
            serializer: V2DeflateSerializer::new(),
            bytes: Vec::with_capacity(256),
        }
    }

    /// Replaces the contents of `out` with the encoding of `histogram`.
    pub fn encode_into(&mut self, histogram: &Histogram<u64>, out: &mut String) {
        self.bytes.clear();
        out.clear();
        // Serializing into a Vec cannot fail on I/O; V2 deflate only fails on I/O.
        if self
            .serializer
            .serialize(histogram, &mut self.bytes)
            .is_err()
        {
            self.bytes.clear();
        }
        BASE64.encode_string(&self.bytes, out);
    }
}

/// Decodes a histogram this crate encoded, for its own tests. It trusts the sizes in the
/// payload: a conductor decoding what a worker sent uses
/// `benchtop_sessions::histogram::HistogramDecoder`, which bounds every size.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_round_trip_through_base64_v2_deflate() {
        let mut h = new_latency_histogram();
        for v in [1_000u64, 2_000, 3_000, 1_000_000, 5_000_000_000] {
            h.record(v).unwrap();
        }
        let encoded = encode_histogram(&h);
        let back = decode_trusted(&encoded);
        assert_eq!(back.len(), 5);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
    }
}
