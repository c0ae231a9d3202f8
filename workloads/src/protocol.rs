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
use hdrhistogram::serialization::{Serializer, V2Serializer};

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

/// The cookie of a V2 payload compressed with deflate (HdrHistogram's
/// `V2_COMPRESSED_COOKIE`, which the crate keeps private).
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

/// Encodes histograms as [`encode_histogram`] does, reusing its buffers and its deflate
/// state from one call to the next (the worker's tick path). HdrHistogram's own
/// `V2DeflateSerializer` makes a new compressor per histogram, some 300 KB a time: a
/// worker with a few histograms allocated about 2 MiB a tick, which its own allocation
/// profile then showed as the ticker's.
pub struct HistogramEncoder {
    serializer: V2Serializer,
    deflate: flate2::Compress,
    plain: Vec<u8>,
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
            serializer: V2Serializer::new(),
            deflate: flate2::Compress::new(flate2::Compression::default(), true),
            plain: Vec::with_capacity(256),
            bytes: Vec::with_capacity(256),
        }
    }

    /// Replaces the contents of `out` with the encoding of `histogram`: HdrHistogram's
    /// compressed V2 (the cookie, the zlib stream's length, a zlib stream of the plain
    /// V2 payload), in base64.
    pub fn encode_into(&mut self, histogram: &Histogram<u64>, out: &mut String) {
        out.clear();
        self.bytes.clear();
        self.plain.clear();
        // Serializing into a Vec cannot fail on I/O; V2 only fails on I/O.
        if self
            .serializer
            .serialize(histogram, &mut self.plain)
            .is_ok()
        {
            self.bytes
                .extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
            self.bytes.extend_from_slice(&[0; 4]);
            self.deflate.reset();
            if !self.compress() {
                self.bytes.clear();
            }
        }
        if self.bytes.len() >= 8 {
            let length = u32::try_from(self.bytes.len() - 8).unwrap_or(u32::MAX);
            self.bytes[4..8].copy_from_slice(&length.to_be_bytes());
        }
        BASE64.encode_string(&self.bytes, out);
    }

    /// Deflates `plain` onto the end of `bytes`, to the stream's end; false when the
    /// stream did not end (the caller then sends an empty payload rather than a cut one).
    fn compress(&mut self) -> bool {
        let start = self.deflate.total_in();
        // Each turn leaves room for output, so each makes progress; the bound only guards
        // against a compressor that would not.
        for _ in 0..self.plain.len() + 64 {
            let read = usize::try_from(self.deflate.total_in() - start).unwrap_or(usize::MAX);
            let input = self.plain.get(read..).unwrap_or(&[]);
            // Room for what is left, and the stream's end.
            self.bytes.reserve(input.len() / 2 + 64);
            match self
                .deflate
                .compress_vec(input, &mut self.bytes, flate2::FlushCompress::Finish)
            {
                Ok(flate2::Status::StreamEnd) => return true,
                Ok(flate2::Status::Ok | flate2::Status::BufError) => {}
                Err(_) => return false,
            }
        }
        false
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

    #[test]
    fn one_encoder_gives_hdrhistogram_s_own_bytes_histogram_after_histogram() {
        use hdrhistogram::serialization::V2DeflateSerializer;
        let mut encoder = HistogramEncoder::new();
        let mut out = String::new();
        // Empty, small, wide, and small again: the reused state holds nothing over.
        let mut wide = new_latency_histogram();
        for i in 1..20_000u64 {
            wide.record(i * 997 % 3_000_000_000 + 1).unwrap();
        }
        let mut small = new_latency_histogram();
        small.record(42).unwrap();
        for h in [&new_latency_histogram(), &small, &wide, &small] {
            let mut reference = Vec::new();
            V2DeflateSerializer::new()
                .serialize(h, &mut reference)
                .unwrap();
            encoder.encode_into(h, &mut out);
            assert_eq!(BASE64.decode(&out).unwrap(), reference);
            let back = decode_trusted(&out);
            assert_eq!((back.len(), back.max()), (h.len(), h.max()));
        }
    }
}
