//! Histograms decoded from untrusted text: latency.hlog lines and worker reports.
//!
//! Both carry an HdrHistogram in the V2 encoding, compressed with zlib ("V2+deflate", the
//! `HISTF…` strings of interval logs) or plain, in standard base64. hdrhistogram's own
//! `Deserializer` believes the sizes it reads: the payload length inside the compressed
//! data sizes a buffer (up to 4 GiB from a 40-byte input) and the header's range sizes the
//! counts array (about 50 MB for 5 significant digits up to `u64::MAX`). [`decode_histogram`]
//! checks every size first and hands hdrhistogram only input that stays within the limits
//! below, so a hostile histogram costs at most about [`MAX_ENCODED_BYTES`] of buffers and a
//! [`MAX_COUNTS_LEN`]-entry counts array.
//!
//! ```
//! use base64::Engine as _;
//! use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
//!
//! let mut h = hdrhistogram::Histogram::<u64>::new(3)?;
//! h.record(1_500)?;
//! let mut bytes = Vec::new();
//! V2DeflateSerializer::new().serialize(&h, &mut bytes)?;
//! let text = base64::engine::general_purpose::STANDARD.encode(&bytes);
//!
//! let back = benchtop_profile::histogram::decode_histogram(&text)?;
//! assert_eq!(back, h);
//! assert!(benchtop_profile::histogram::decode_histogram("HISTFAAAAA==").is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use flate2::{Decompress, FlushDecompress, Status};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;

use crate::ProfileError;
use crate::sparse::SparseHistogram;

/// The most significant value digits a decoded histogram may have. benchtop records with 3,
/// as do jHiccup and most HdrHistogram users; each digit more multiplies the counts array by
/// about ten.
pub const MAX_SIGNIFICANT_DIGITS: u8 = 3;

/// The most counters a decoded histogram's header may ask for: 512 KiB of `u64` counts.
///
/// With at most [`MAX_SIGNIFICANT_DIGITS`] digits every valid header fits (the widest,
/// 3 digits from 1 to `u64::MAX`, needs 56 320), so the cap only bites if the digit limit
/// is raised; it keeps the counts array bounded whatever the other checks allow.
pub const MAX_COUNTS_LEN: usize = 1 << 16;

/// The most bytes a histogram's V2 encoding may take, after base64 and after inflating.
/// Inflating stops as soon as the output passes it, so a deflate bomb costs at most this.
///
/// It is above the largest encoding a histogram within [`MAX_COUNTS_LEN`] can have: a
/// 40-byte header and at most 9 bytes per counter.
pub const MAX_ENCODED_BYTES: usize = 1 << 20;

const _: () = assert!(MAX_ENCODED_BYTES >= V2_HEADER_LEN + 9 * MAX_COUNTS_LEN);

/// The largest total count (the sum of all counters) a decoded histogram may have: 2⁴⁸,
/// about 2.8 × 10¹⁴ samples.
///
/// hdrhistogram sums counts with plain `u64` arithmetic (`value_at_quantile`, for one), which
/// panics in debug builds and wraps in release once the sum passes `u64::MAX`. Under this cap
/// one histogram's counts cannot come near that, and up to 65 535 histograms at the cap can
/// be merged before their sum can.
pub const MAX_TOTAL_COUNT: u64 = 1 << 48;

/// Why an interval was left out of a [`Total`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TotalError {
    /// The total would pass [`MAX_TOTAL_COUNT`]; it takes no more intervals.
    Full,
    /// The interval does not fit the total (hdrhistogram's reason).
    Add(String),
}

impl std::fmt::Display for TotalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TotalError::Full => write!(f, "the total would pass {MAX_TOTAL_COUNT} values"),
            TotalError::Add(why) => f.write_str(why),
        }
    }
}

/// A running total of interval histograms of one metric: it grows to the range of later,
/// slower intervals (a decoded interval keeps only the range its own values need), and
/// stops short of [`MAX_TOTAL_COUNT`], past which percentiles would overflow.
#[derive(Debug, Clone, Default)]
pub struct Total {
    histogram: Option<Histogram<u64>>,
    full: bool,
}

impl Total {
    /// Adds `interval`; one that would pass the cap, or that does not fit, is left out.
    pub fn add(&mut self, interval: &Histogram<u64>) -> Result<(), TotalError> {
        if self.full {
            return Err(TotalError::Full);
        }
        match &mut self.histogram {
            Some(total) if total.len().saturating_add(interval.len()) > MAX_TOTAL_COUNT => {
                self.full = true;
                Err(TotalError::Full)
            }
            Some(total) => total
                .add(interval)
                .map_err(|e| TotalError::Add(e.to_string())),
            None => {
                let mut total = interval.clone();
                total.auto(true);
                self.histogram = Some(total);
                Ok(())
            }
        }
    }

    /// Adds `interval` as [`Total::add`] adds its dense histogram: the same counts in the
    /// same buckets, without building the dense histogram when its buckets are the total's.
    pub fn add_sparse(&mut self, interval: &SparseHistogram) -> Result<(), TotalError> {
        if self.full {
            return Err(TotalError::Full);
        }
        match &mut self.histogram {
            Some(total) if total.len().saturating_add(interval.len()) > MAX_TOTAL_COUNT => {
                self.full = true;
                Err(TotalError::Full)
            }
            // The total grows on its own (`auto`) to the interval's range.
            Some(total) if interval.same_buckets_as(total) => {
                if interval.add_to(total) {
                    Ok(())
                } else {
                    Err(TotalError::Add("a bucket does not fit the total".into()))
                }
            }
            Some(total) => total
                .add(interval.to_histogram())
                .map_err(|e| TotalError::Add(e.to_string())),
            None => {
                let mut total = interval.to_histogram();
                total.auto(true);
                self.histogram = Some(total);
                Ok(())
            }
        }
    }

    /// The total so far; `None` before the first interval.
    pub fn histogram(&self) -> Option<&Histogram<u64>> {
        self.histogram.as_ref()
    }

    /// The total took no more intervals at some point (see [`TotalError::Full`]).
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// The total, ending it.
    pub fn into_histogram(self) -> Option<Histogram<u64>> {
        self.histogram
    }
}

/// Cookie of the plain V2 encoding, as Java and hdrhistogram write it: the V2 cookie base
/// `0x1c849303` with the word-size bits `0x10`.
const V2_COOKIE: u32 = 0x1c84_9313;
/// Cookie of the zlib-compressed V2 encoding: base `0x1c849304` with `0x10`.
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;
/// cookie, payload length, normalizing offset, significant digits (4 bytes each), lowest,
/// highest (8 bytes each), integer-to-double ratio (an f64), all big-endian.
const V2_HEADER_LEN: usize = 40;
/// Cookie and compressed length before the zlib stream of the compressed encoding.
const DEFLATE_HEADER_LEN: usize = 8;
/// First step of the inflate buffer; it doubles from there up to the cap.
const INFLATE_CHUNK: usize = 4096;

/// Decodes base64 histograms, reusing its buffers and inflater from one call to the next.
///
/// [`decode_histogram`] is the same for a single histogram; a reader of many (an interval
/// log, a stream of worker reports) keeps one decoder.
pub struct HistogramDecoder {
    raw: Vec<u8>,
    inflated: Vec<u8>,
    inflater: Decompress,
    deserializer: Deserializer,
    /// The non-empty counters of the last histogram decoded sparse: (index, count).
    nonzero: Vec<(usize, u64)>,
    /// A small histogram of the last lowest value and digits decoded sparse: its buckets
    /// are those of every histogram of that lowest value and digits, whatever their range.
    ruler: Option<Histogram<u64>>,
}

impl Default for HistogramDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for HistogramDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistogramDecoder").finish_non_exhaustive()
    }
}

impl HistogramDecoder {
    /// A decoder with empty buffers.
    pub fn new() -> Self {
        HistogramDecoder {
            raw: Vec::new(),
            inflated: Vec::new(),
            inflater: Decompress::new(true),
            deserializer: Deserializer::new(),
            nonzero: Vec::new(),
            ruler: None,
        }
    }

    /// Decodes one histogram; see [`decode_histogram`].
    pub fn decode(&mut self, base64_text: &str) -> Result<Histogram<u64>, ProfileError> {
        let plain = plain_v2(
            &mut self.raw,
            &mut self.inflated,
            &mut self.inflater,
            base64_text,
        )?;
        check_v2(plain, |_, _| {})?;
        let histogram = self
            .deserializer
            .deserialize(&mut &plain[..])
            .map_err(|e| bad(format!("the counts do not decode: {e}")))?;
        Ok(compact(histogram))
    }

    /// Decodes one histogram straight into its non-empty buckets: the same
    /// [`SparseHistogram`] as `SparseHistogram::from(&decoder.decode(text)?)`, refused for
    /// the same reasons, without building the dense counts (a reader of an hour of
    /// intervals decodes 36,000 a metric).
    pub fn decode_sparse(&mut self, base64_text: &str) -> Result<SparseHistogram, ProfileError> {
        let plain = plain_v2(
            &mut self.raw,
            &mut self.inflated,
            &mut self.inflater,
            base64_text,
        )?;
        self.nonzero.clear();
        let nonzero = &mut self.nonzero;
        let header = check_v2(plain, |index, count| nonzero.push((index, count)))?;
        let ruler = match self.ruler.take() {
            Some(r) if r.low() == header.lowest && r.sigfig() == header.digits => r,
            _ => Histogram::new_with_bounds(header.lowest, header.lowest * 2, header.digits)
                .map_err(|e| bad(format!("the range cannot be tracked: {e}")))?,
        };
        let sparse = SparseHistogram::from_counters(&ruler, header.highest, &self.nonzero);
        self.ruler = Some(ruler);
        Ok(sparse)
    }
}

/// The plain V2 encoding of `base64_text` (inflated into `inflated` when compressed).
fn plain_v2<'a>(
    raw: &'a mut Vec<u8>,
    inflated: &'a mut Vec<u8>,
    inflater: &mut Decompress,
    base64_text: &str,
) -> Result<&'a [u8], ProfileError> {
    let text = base64_text.trim_ascii();
    if base64::decoded_len_estimate(text.len()) > MAX_ENCODED_BYTES + INFLATE_CHUNK {
        return Err(bad(format!(
            "{} characters of base64, more than a histogram of at most {MAX_COUNTS_LEN} \
             counters can take",
            text.len()
        )));
    }
    raw.clear();
    STANDARD
        .decode_vec(text, raw)
        .map_err(|e| bad(format!("not base64: {e}")))?;
    let plain = match read_u32(raw, 0) {
        None => {
            return Err(bad(format!(
                "truncated: {} bytes, not even a cookie",
                raw.len()
            )));
        }
        Some(V2_COOKIE) => &raw[..],
        Some(V2_DEFLATE_COOKIE) => {
            let Some(compressed_len) = read_u32(raw, 4) else {
                return Err(bad(format!(
                    "truncated: {} bytes, the compressed header needs {DEFLATE_HEADER_LEN}",
                    raw.len()
                )));
            };
            let compressed = &raw[DEFLATE_HEADER_LEN..];
            if usize::try_from(compressed_len) != Ok(compressed.len()) {
                return Err(bad(format!(
                    "the header says {compressed_len} compressed bytes follow, but {} do",
                    compressed.len()
                )));
            }
            inflate(inflater, compressed, inflated)?;
            &inflated[..]
        }
        Some(cookie) => {
            return Err(bad(format!(
                "cookie {cookie:#010x} is not that of an HdrHistogram V2 encoding \
                 ({V2_DEFLATE_COOKIE:#010x} compressed, {V2_COOKIE:#010x} plain)"
            )));
        }
    };
    Ok(plain)
}

/// Decodes one histogram from base64 text (surrounding whitespace ignored): the V2
/// encoding, zlib-compressed (cookie `0x1c849314`, what benchtop, Java's
/// `HistogramLogWriter` and hdrhistogram's `V2DeflateSerializer` write) or plain
/// (`0x1c849313`).
///
/// Refused as [`ProfileError::BadHistogram`], with the reason, before anything is sized
/// from them: text that is not base64 or decodes to more than [`MAX_ENCODED_BYTES`]; an
/// unknown cookie; compressed data that is shorter or longer than its header says, does not
/// inflate, has bytes after the end of its zlib stream, or inflates to more than
/// [`MAX_ENCODED_BYTES`]; a V2 header shorter than 40 bytes or whose payload length is not
/// the number of bytes that follow; more than
/// [`MAX_SIGNIFICANT_DIGITS`] significant digits; a lowest discernible value below 1; a
/// highest trackable value below twice the lowest; a range needing more than
/// [`MAX_COUNTS_LEN`] counters; a normalizing offset or an integer-to-double ratio other
/// than 0 and 1 (hdrhistogram supports neither); counts that do not decode (a varint cut
/// short, or one decoding to `i64::MIN`), do not fit the range (a count or a run of zeros
/// past its counters), or add up to more than [`MAX_TOTAL_COUNT`].
///
/// The histogram returned keeps only the value range its counts need (lowest and digits as
/// encoded, highest just above its largest value), whatever range the header claimed.
pub fn decode_histogram(base64_text: &str) -> Result<Histogram<u64>, ProfileError> {
    HistogramDecoder::new().decode(base64_text)
}

fn bad(reason: String) -> ProfileError {
    ProfileError::BadHistogram { reason }
}

/// Inflates the zlib stream `input` into `out`, stopping with an error as soon as the
/// output would pass [`MAX_ENCODED_BYTES`]. `out`'s capacity never goes above one byte
/// more than the cap.
fn inflate(inflater: &mut Decompress, input: &[u8], out: &mut Vec<u8>) -> Result<(), ProfileError> {
    inflater.reset(true);
    out.clear();
    loop {
        if out.len() == out.capacity() {
            // Room for one byte beyond the cap, to tell "exactly the cap" from "more".
            let room = MAX_ENCODED_BYTES + 1 - out.len();
            out.reserve_exact(out.len().max(INFLATE_CHUNK).min(room));
        }
        let (in_before, out_before) = (inflater.total_in(), out.len());
        let consumed = usize::try_from(in_before).unwrap_or(usize::MAX);
        let status = inflater
            .decompress_vec(
                input.get(consumed..).unwrap_or_default(),
                out,
                // Not Finish: miniz_oxide takes that to mean the output buffer holds the
                // whole output, and loses the window when it has to grow.
                FlushDecompress::None,
            )
            .map_err(|e| bad(format!("the compressed data does not inflate: {e}")))?;
        if out.len() > MAX_ENCODED_BYTES {
            return Err(bad(format!(
                "the compressed data inflates to more than {MAX_ENCODED_BYTES} bytes"
            )));
        }
        match status {
            Status::StreamEnd => {
                let consumed = usize::try_from(inflater.total_in()).unwrap_or(usize::MAX);
                return match input.len().checked_sub(consumed) {
                    Some(0) => Ok(()),
                    Some(extra) => Err(bad(format!(
                        "{extra} bytes follow the end of the compressed data"
                    ))),
                    None => Err(bad(
                        "the inflater reports more input than it was given".into()
                    )),
                };
            }
            Status::Ok | Status::BufError
                if inflater.total_in() == in_before && out.len() == out_before =>
            {
                return Err(bad(format!(
                    "the compressed data ends early ({} bytes inflated)",
                    out.len()
                )));
            }
            Status::Ok | Status::BufError => {}
        }
    }
}

/// What a V2 header says of the histogram's range.
#[derive(Debug, Clone, Copy)]
struct V2Header {
    digits: u8,
    lowest: u64,
    highest: u64,
}

/// Checks a plain V2 encoding's header against its length and the limits above, and its
/// counts ([`check_counts`], each non-empty counter handed to `each`).
fn check_v2(bytes: &[u8], each: impl FnMut(usize, u64)) -> Result<V2Header, ProfileError> {
    let header = bytes.get(..V2_HEADER_LEN).ok_or_else(|| {
        bad(format!(
            "truncated: {} bytes, the V2 header needs {V2_HEADER_LEN}",
            bytes.len()
        ))
    })?;
    let u32_at = |at| read_u32(header, at).unwrap_or_default();
    let u64_at = |at| read_u64(header, at).unwrap_or_default();
    let cookie = u32_at(0);
    if cookie != V2_COOKIE {
        return Err(bad(format!(
            "cookie {cookie:#010x} inside the compressed data is not the V2 cookie \
             {V2_COOKIE:#010x}"
        )));
    }
    let payload_len = u32_at(4);
    let payload = &bytes[V2_HEADER_LEN..];
    if usize::try_from(payload_len) != Ok(payload.len()) {
        return Err(bad(format!(
            "the header says {payload_len} bytes of counts follow, but {} do",
            payload.len()
        )));
    }
    let normalizing_offset = u32_at(8);
    if normalizing_offset != 0 {
        return Err(bad(format!(
            "normalizing index offset {normalizing_offset}; only 0 is supported"
        )));
    }
    let digits = u32_at(12);
    if digits > u32::from(MAX_SIGNIFICANT_DIGITS) {
        return Err(bad(format!(
            "{digits} significant digits; at most {MAX_SIGNIFICANT_DIGITS} are accepted"
        )));
    }
    let (lowest, highest) = (u64_at(16), u64_at(24));
    if lowest < 1 {
        return Err(bad(
            "lowest discernible value 0; it must be at least 1".into()
        ));
    }
    if lowest.checked_mul(2).is_none_or(|twice| highest < twice) {
        return Err(bad(format!(
            "highest trackable value {highest} is less than twice the lowest, {lowest}"
        )));
    }
    let ratio = f64::from_bits(u64_at(32));
    if ratio != 1.0 {
        return Err(bad(format!(
            "integer-to-double ratio {ratio}; only 1 (integer values) is supported"
        )));
    }
    // digits <= MAX_SIGNIFICANT_DIGITS, so it fits a u8.
    let header = V2Header {
        digits: digits as u8,
        lowest,
        highest,
    };
    match counts_len(lowest, highest, digits as u8) {
        Some(len) if len <= MAX_COUNTS_LEN => check_counts(payload, len, each).map(|()| header),
        Some(len) => Err(bad(format!(
            "the range {lowest}..={highest} at {digits} digits needs {len} counters; at most \
             {MAX_COUNTS_LEN} are accepted"
        ))),
        None => Err(bad(format!(
            "the range {lowest}..={highest} cannot be tracked at {digits} digits"
        ))),
    }
}

/// Walks the V2 payload the way hdrhistogram's `Deserializer` does (zig-zag LEB128 varints
/// of at most 9 bytes, the 9th contributing all 8 bits; a negative number is a run of that
/// many zero counters, any other a count for the next counter) and checks that it decodes
/// without overflow: no varint is cut short or decodes to `i64::MIN` (whose negation
/// overflows), every count and run of zeros stays within the `counters` of the range, and
/// the counts add up to at most [`MAX_TOTAL_COUNT`]. Each non-empty counter goes to `each`
/// (index, count), in order.
fn check_counts(
    payload: &[u8],
    counters: usize,
    mut each: impl FnMut(usize, u64),
) -> Result<(), ProfileError> {
    let counters = counters as u64;
    let (mut at, mut index, mut total) = (0usize, 0u64, 0u64);
    while at < payload.len() {
        let Some((encoded, len)) = read_varint(&payload[at..]) else {
            return Err(bad(format!(
                "the varint at byte {at} of the counts is cut short by their end"
            )));
        };
        let number = zig_zag_decode(encoded);
        if number == i64::MIN {
            return Err(bad(format!(
                "the varint at byte {at} of the counts decodes to i64::MIN, neither a count nor \
                 a run of zeros"
            )));
        }
        if number < 0 {
            let zeros = number.unsigned_abs();
            if index.checked_add(zeros).is_none_or(|end| end > counters) {
                return Err(bad(format!(
                    "a run of {zeros} zero counts from counter {index} goes past the {counters} \
                     counters of the range"
                )));
            }
            index += zeros;
        } else {
            if index >= counters {
                return Err(bad(format!(
                    "a count for counter {index} is past the {counters} counters of the range"
                )));
            }
            total = total
                .checked_add(number.unsigned_abs())
                .filter(|&t| t <= MAX_TOTAL_COUNT)
                .ok_or_else(|| {
                    bad(format!(
                        "the counts add up to more than {MAX_TOTAL_COUNT} (counter {index} holds \
                         {number})"
                    ))
                })?;
            if number > 0 {
                // index < counters <= MAX_COUNTS_LEN.
                each(index as usize, number.unsigned_abs());
            }
            index += 1;
        }
        at += len;
    }
    Ok(())
}

/// One LEB128 varint as hdrhistogram reads it, and its length in bytes; `None` when `bytes`
/// ends inside it.
fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().take(8).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    // Eight bytes with the high bit set: the ninth gives all its 8 bits.
    let last = *bytes.get(8)?;
    Some((value | u64::from(last) << 56, 9))
}

fn zig_zag_decode(encoded: u64) -> i64 {
    ((encoded >> 1) as i64) ^ -((encoded & 1) as i64)
}

/// The length of the counts array hdrhistogram allocates for these bounds (its
/// `new_with_bounds`), or `None` when it refuses them. `lowest >= 1`.
fn counts_len(lowest: u64, highest: u64, digits: u8) -> Option<usize> {
    let largest_single_unit = 2 * 10u64.checked_pow(u32::from(digits))?;
    let sub_bucket_count_magnitude = largest_single_unit.next_power_of_two().trailing_zeros();
    let unit_magnitude = lowest.checked_ilog2()?;
    if lowest > u64::MAX / 2 || unit_magnitude + sub_bucket_count_magnitude > 63 {
        return None;
    }
    let sub_bucket_half_count = 1usize << (sub_bucket_count_magnitude - 1);
    // hdrhistogram's buckets_to_cover.
    let mut smallest_untrackable = 1u64 << (sub_bucket_count_magnitude + unit_magnitude);
    let mut buckets = 1usize;
    while smallest_untrackable <= highest {
        if smallest_untrackable > u64::MAX / 2 {
            buckets += 1;
            break;
        }
        smallest_untrackable <<= 1;
        buckets += 1;
    }
    (buckets + 1).checked_mul(sub_bucket_half_count)
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    let mut a = [0; 8];
    a.copy_from_slice(b);
    Some(u64::from_be_bytes(a))
}

/// A decoded histogram is as large as the range its header claims. Keep only the range its
/// values need, so that a short hostile line cannot pin a large allocation for as long as
/// the histogram lives.
pub(crate) fn compact(h: Histogram<u64>) -> Histogram<u64> {
    let needed = h.max().max(h.low().saturating_mul(2)).max(2);
    if h.high() <= needed.saturating_mul(2) {
        return h;
    }
    match Histogram::new_with_bounds(h.low(), needed, h.sigfig()) {
        Ok(mut small) => match small.add(&h) {
            Ok(()) => small,
            Err(_) => h,
        },
        Err(_) => h,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::time::{Duration, Instant};

    use flate2::Compression;
    use flate2::write::ZlibEncoder;
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};

    use super::*;

    #[test]
    fn a_total_grows_to_later_slower_intervals_and_stops_at_the_cap() {
        let interval = |v: u64, n: u64| {
            let mut h = Histogram::<u64>::new_with_bounds(1, 2048, 3).unwrap();
            h.auto(true);
            h.record_n(v, n).unwrap();
            h
        };
        let mut total = Total::default();
        total.add(&interval(100, 1)).unwrap();
        // Beyond the first interval's range: kept, not dropped.
        total.add(&interval(5_000_000_000, 1)).unwrap();
        assert_eq!(total.histogram().map(Histogram::len), Some(2));
        assert!(total.histogram().unwrap().max() >= 4_990_000_000);
        assert_eq!(
            total.add(&interval(100, MAX_TOTAL_COUNT)),
            Err(TotalError::Full)
        );
        assert!(total.is_full());
        assert_eq!(
            total.add(&interval(100, 1)),
            Err(TotalError::Full),
            "no more once full"
        );
        assert_eq!(total.into_histogram().map(|h| h.len()), Some(2));
    }

    /// Decoding anything here must be quick; a big allocation or inflating gigabytes is not.
    const QUICK: Duration = Duration::from_secs(2);

    fn histogram(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new(3).unwrap();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    fn plain_v2(h: &Histogram<u64>) -> Vec<u8> {
        let mut out = Vec::new();
        V2Serializer::new().serialize(h, &mut out).unwrap();
        out
    }

    fn deflated(h: &Histogram<u64>) -> String {
        let mut out = Vec::new();
        V2DeflateSerializer::new().serialize(h, &mut out).unwrap();
        STANDARD.encode(out)
    }

    /// `plain` compressed as the V2+deflate encoding does, in base64.
    fn compress(plain: &[u8]) -> String {
        let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(plain).unwrap();
        let zlib = z.finish().unwrap();
        let mut out = V2_DEFLATE_COOKIE.to_be_bytes().to_vec();
        out.extend_from_slice(&(zlib.len() as u32).to_be_bytes());
        out.extend_from_slice(&zlib);
        STANDARD.encode(out)
    }

    /// A plain V2 header with the given fields and `counts` after it.
    fn header(payload_len: u32, digits: u32, lowest: u64, highest: u64, counts: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&V2_COOKIE.to_be_bytes());
        out.extend_from_slice(&payload_len.to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(&digits.to_be_bytes());
        out.extend_from_slice(&lowest.to_be_bytes());
        out.extend_from_slice(&highest.to_be_bytes());
        out.extend_from_slice(&1.0f64.to_be_bytes());
        out.extend_from_slice(counts);
        out
    }

    fn refused(text: &str) -> String {
        let started = Instant::now();
        let err = decode_histogram(text).unwrap_err();
        assert!(started.elapsed() < QUICK, "took {:?}", started.elapsed());
        match err {
            ProfileError::BadHistogram { reason } => reason,
            other => panic!("not BadHistogram: {other}"),
        }
    }

    #[test]
    fn a_histogram_round_trips_compressed_and_plain() {
        let h = histogram(&[1, 1_500, 1_500, 2_000_000, 45_000_000_000]);
        let back = decode_histogram(&deflated(&h)).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
        let plain = decode_histogram(&STANDARD.encode(plain_v2(&h))).unwrap();
        assert_eq!(plain, h);
        let empty = Histogram::new(3).unwrap();
        assert_eq!(decode_histogram(&deflated(&empty)).unwrap().len(), 0);
    }

    #[test]
    fn an_encoding_that_inflates_past_several_buffer_growths_round_trips() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in 1..=50_000 {
            h.record_n(v, v * 1_000).unwrap();
        }
        assert!(plain_v2(&h).len() > 4 * INFLATE_CHUNK);
        let mut decoder = HistogramDecoder::new();
        assert_eq!(decoder.decode(&deflated(&h)).unwrap(), h);
        assert_eq!(decoder.decode(&deflated(&h)).unwrap(), h);
    }

    #[test]
    fn a_reused_decoder_gives_the_same_histograms_as_fresh_ones() {
        let mut decoder = HistogramDecoder::new();
        for values in [&[5u64, 6][..], &[1_000_000_000], &[], &[77; 3]] {
            let text = deflated(&histogram(values));
            assert_eq!(
                decoder.decode(&text).unwrap(),
                decode_histogram(&text).unwrap()
            );
        }
        assert!(decoder.decode("@@@").is_err());
        assert_eq!(
            decoder.decode(&deflated(&histogram(&[9]))).unwrap().len(),
            1
        );
    }

    #[test]
    fn decoding_sparse_gives_the_sparse_histogram_of_the_dense_decoding() {
        let mut shapes: Vec<Histogram<u64>> = Vec::new();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for (low, high, digits) in [
            (1, 2, 0),
            (1, 1 << 20, 3),
            (1, u64::MAX, 2),
            (1_000, 1 << 40, 3),
            (1 << 20, 1 << 50, 1),
            (7, 10_000, 3),
        ] {
            for shape in 0..6 {
                let mut h = Histogram::<u64>::new_with_bounds(low, high, digits).unwrap();
                match shape {
                    0 => {}
                    1 => h.record(0).unwrap(),
                    2 => h.record(high).unwrap(),
                    3 => h.record_n(low, 5).unwrap(),
                    _ => {
                        for _ in 0..500 {
                            let v = next() % high.min(1 << 45);
                            h.record_n(v, 1 + next() % 3).unwrap();
                        }
                        if shape == 5 {
                            h.record(0).unwrap();
                        }
                    }
                }
                shapes.push(h);
            }
        }
        let mut decoder = HistogramDecoder::new();
        for h in &shapes {
            for text in [deflated(h), STANDARD.encode(plain_v2(h))] {
                let dense = decoder.decode(&text).unwrap();
                let sparse = decoder.decode_sparse(&text).unwrap();
                assert_eq!(
                    sparse,
                    SparseHistogram::from(&dense),
                    "low {} high {} digits {} len {}",
                    h.low(),
                    h.high(),
                    h.sigfig(),
                    h.len()
                );
                assert_eq!(sparse.to_histogram(), dense);
            }
        }
        // Refused as the dense decoding is.
        assert!(decoder.decode_sparse("@@@").is_err());
    }

    #[test]
    fn a_payload_length_beyond_the_bytes_that_follow_is_refused_before_any_buffer_is_sized() {
        // hdrhistogram alone would size a 4 GiB buffer from this 40-byte header.
        let reason = refused(&compress(&header(u32::MAX, 3, 1, 2_000, &[])));
        assert!(
            reason.contains("4294967295 bytes of counts follow, but 0 do"),
            "{reason}"
        );
        let reason = refused(&STANDARD.encode(header(10, 3, 1, 2_000, &[2, 2])));
        assert!(reason.contains("10 bytes of counts"), "{reason}");
    }

    #[test]
    fn five_digits_up_to_u64_max_is_refused_before_the_counts_array_is_allocated() {
        let reason = refused(&compress(&header(0, 5, 1, u64::MAX, &[])));
        assert!(
            reason.contains("5 significant digits; at most 3"),
            "{reason}"
        );
    }

    #[test]
    fn a_deflate_bomb_stops_inflating_at_the_cap() {
        // 100 MB of zeros compress to about 100 KB.
        let mut z = ZlibEncoder::new(Vec::new(), Compression::best());
        z.write_all(&header(100_000_000, 3, 1, 2_000, &[])).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..100 {
            z.write_all(&zeros).unwrap();
        }
        let zlib = z.finish().unwrap();
        assert!(zlib.len() < 200_000);
        let mut bytes = V2_DEFLATE_COOKIE.to_be_bytes().to_vec();
        bytes.extend_from_slice(&(zlib.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&zlib);
        let mut decoder = HistogramDecoder::new();
        let err = decoder.decode(&STANDARD.encode(bytes)).unwrap_err();
        assert!(err.to_string().contains("inflates to more than"), "{err}");
        assert!(decoder.inflated.capacity() <= MAX_ENCODED_BYTES + 1);
    }

    #[test]
    fn truncated_and_foreign_input_is_refused_with_what_is_wrong() {
        let full = STANDARD.decode(deflated(&histogram(&[1_500]))).unwrap();
        let reason = refused(&STANDARD.encode(&full[..full.len() - 5]));
        assert!(reason.contains("compressed bytes follow, but"), "{reason}");
        // A compressed length that is right for the cut stream: zlib runs out.
        let mut cut = full[..full.len() - 5].to_vec();
        let len = (cut.len() - 8) as u32;
        cut[4..8].copy_from_slice(&len.to_be_bytes());
        let reason = refused(&STANDARD.encode(&cut));
        assert!(
            reason.contains("ends early") || reason.contains("does not inflate"),
            "{reason}"
        );
        assert!(refused(&STANDARD.encode(&full[..6])).contains("truncated"));
        assert!(refused("").contains("truncated: 0 bytes"));
        assert!(
            refused(&STANDARD.encode(&header(0, 3, 1, 2_000, &[])[..39]))
                .contains("header needs 40")
        );
        assert!(refused("HIST!not base64").contains("not base64"));
        assert!(refused(&STANDARD.encode(b"PK\x03\x04 a zip file")).contains("cookie 0x504b0304"));
    }

    #[test]
    fn headers_outside_the_limits_are_refused() {
        let cases = [
            (header(0, 3, 0, 2_000, &[]), "lowest discernible value 0"),
            (
                header(0, 3, 1_000, 1_999, &[]),
                "less than twice the lowest",
            ),
            (header(0, 3, u64::MAX, u64::MAX, &[]), "less than twice"),
            (header(0, 3, 1 << 60, u64::MAX, &[]), "cannot be tracked"),
        ];
        for (bytes, expected) in cases {
            let reason = refused(&compress(&bytes));
            assert!(reason.contains(expected), "{reason}");
        }
        let mut ratio = header(0, 3, 1, 2_000, &[]);
        ratio[32..40].copy_from_slice(&0.5f64.to_be_bytes());
        assert!(refused(&compress(&ratio)).contains("ratio 0.5"));
        let mut offset = header(0, 3, 1, 2_000, &[]);
        offset[8..12].copy_from_slice(&7u32.to_be_bytes());
        assert!(refused(&compress(&offset)).contains("offset 7"));
        let mut inner = header(0, 3, 1, 2_000, &[]);
        inner[0..4].copy_from_slice(&V2_DEFLATE_COOKIE.to_be_bytes());
        assert!(refused(&compress(&inner)).contains("not the V2 cookie"));
    }

    /// `numbers` as a V2 payload: zig-zag, then LEB128 of at most 9 bytes, the 9th taking
    /// all 8 bits, as hdrhistogram writes them.
    fn varints(numbers: &[i64]) -> Vec<u8> {
        let mut out = Vec::new();
        for &n in numbers {
            let mut v = ((n << 1) ^ (n >> 63)) as u64;
            for _ in 0..8 {
                if v < 0x80 {
                    break;
                }
                out.push((v & 0x7f) as u8 | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        }
        out
    }

    /// A plain V2 encoding of 1..=2 000 at 3 digits (2 048 counters) with `payload` after
    /// the header, its payload length right.
    fn with_payload(payload: &[u8]) -> Vec<u8> {
        header(payload.len() as u32, 3, 1, 2_000, payload)
    }

    /// Refused both plain and compressed, with a reason containing `expected`.
    fn refused_both_ways(plain: &[u8], expected: &str) {
        for text in [STANDARD.encode(plain), compress(plain)] {
            let reason = refused(&text);
            assert!(reason.contains(expected), "{reason}");
        }
    }

    #[test]
    fn the_test_encoder_writes_what_hdrhistogram_does() {
        let h = histogram(&[3, 3, 900, 1_999]);
        // One step per counter, in index order.
        let counts: Vec<i64> = h
            .iter_all()
            .map(|v| v.count_since_last_iteration() as i64)
            .collect();
        assert_eq!(counts.len(), h.distinct_values());
        let last = counts.iter().rposition(|&c| c != 0).unwrap();
        let mut numbers = Vec::new();
        let mut zeros = 0;
        for &c in &counts[..=last] {
            if c == 0 {
                zeros += 1;
                continue;
            }
            if zeros > 0 {
                numbers.push(if zeros == 1 { 0 } else { -zeros });
                zeros = 0;
            }
            numbers.push(c);
        }
        let mut ours = header(0, 3, 1, h.high(), &varints(&numbers));
        let len = (ours.len() - V2_HEADER_LEN) as u32;
        ours[4..8].copy_from_slice(&len.to_be_bytes());
        assert_eq!(ours, plain_v2(&h));
        assert_eq!(varints(&[i64::MIN]), [0xff; 9]);
        assert_eq!(read_varint(&[0xff; 9]), Some((u64::MAX, 9)));
        assert_eq!(zig_zag_decode(u64::MAX), i64::MIN);
        for n in [0, 1, -1, 63, -64, 1 << 40, i64::MAX, i64::MIN + 1] {
            let bytes = varints(&[n]);
            let (encoded, len) = read_varint(&bytes).unwrap();
            assert_eq!((zig_zag_decode(encoded), len), (n, bytes.len()));
        }
    }

    #[test]
    fn a_varint_decoding_to_i64_min_is_refused() {
        // hdrhistogram negates it for the length of a zero run: overflow.
        refused_both_ways(&with_payload(&varints(&[i64::MIN])), "i64::MIN");
        refused_both_ways(&with_payload(&varints(&[5, i64::MIN, 1])), "at byte 1");
    }

    #[test]
    fn counts_adding_up_past_the_cap_are_refused() {
        let max = i64::MAX;
        refused_both_ways(
            &with_payload(&varints(&[max, max, max])),
            "add up to more than 281474976710656",
        );
        refused_both_ways(&with_payload(&varints(&[max])), "add up to more than");
        let cap = MAX_TOTAL_COUNT as i64;
        refused_both_ways(
            &with_payload(&varints(&[cap / 2, -3, cap / 2 + 1])),
            "counter 4 holds",
        );
        // Exactly the cap decodes, and its quantiles do not overflow.
        let h =
            decode_histogram(&compress(&with_payload(&varints(&[cap / 2, -3, cap / 2])))).unwrap();
        assert_eq!(h.len(), MAX_TOTAL_COUNT);
        assert_eq!(h.value_at_quantile(1.0), 4);
        assert_eq!(h.value_at_quantile(0.25), 0);
    }

    #[test]
    fn counts_that_do_not_fit_the_range_are_refused() {
        // One zero run of 10 000 and a count: past the 2 048 counters of 1..=2 000.
        refused_both_ways(
            &with_payload(&varints(&[-10_000, 2])),
            "a run of 10000 zero counts from counter 0 goes past the 2048 counters",
        );
        // A zero run past the end with no count after it; hdrhistogram alone takes it.
        refused_both_ways(
            &with_payload(&varints(&[1, -2_048])),
            "from counter 1 goes past",
        );
        refused_both_ways(&with_payload(&varints(&[-i64::MAX])), "goes past");
        // A count, or a zero count, just past the last counter.
        refused_both_ways(
            &with_payload(&varints(&[-2_048, 1])),
            "a count for counter 2048 is past the 2048 counters",
        );
        refused_both_ways(&with_payload(&varints(&[-2_048, 0])), "counter 2048");
        // Up to the last counter is fine.
        let h = decode_histogram(&compress(&with_payload(&varints(&[-2_047, 7])))).unwrap();
        assert_eq!(h.len(), 7);
        assert!(decode_histogram(&compress(&with_payload(&varints(&[1, -2_047])))).is_ok());
    }

    #[test]
    fn a_varint_cut_short_by_the_end_of_the_counts_is_refused() {
        for cut in [&[0x80][..], &[0x02, 0xff, 0xff], &[0xff; 8]] {
            refused_both_ways(&with_payload(cut), "cut short");
        }
        refused_both_ways(&with_payload(&[0x02, 0x80]), "varint at byte 1");
    }

    #[test]
    fn bytes_beyond_the_payload_or_the_compressed_stream_are_refused() {
        let h = histogram(&[1_500, 7]);
        // After the payload of a plain encoding, and after it inside the compressed data.
        let mut plain = plain_v2(&h);
        plain.push(0);
        refused_both_ways(&plain, "bytes of counts follow, but");
        // After the zlib stream, the compressed length counting them.
        let mut full = STANDARD.decode(deflated(&h)).unwrap();
        full.extend_from_slice(b"junk");
        let mut counted = full.clone();
        let len = (counted.len() - DEFLATE_HEADER_LEN) as u32;
        counted[4..8].copy_from_slice(&len.to_be_bytes());
        let reason = refused(&STANDARD.encode(&counted));
        assert!(
            reason.contains("4 bytes follow the end of the compressed data"),
            "{reason}"
        );
        // Beyond the compressed length the header states.
        let reason = refused(&STANDARD.encode(&full));
        assert!(
            reason.ends_with(&format!(
                "{} compressed bytes follow, but {} do",
                len - 4,
                len
            )),
            "{reason}"
        );
        // Two whole zlib streams back to back.
        let mut twice = STANDARD.decode(deflated(&h)).unwrap();
        let stream = twice[DEFLATE_HEADER_LEN..].to_vec();
        twice.extend_from_slice(&stream);
        let len = (twice.len() - DEFLATE_HEADER_LEN) as u32;
        twice[4..8].copy_from_slice(&len.to_be_bytes());
        assert!(refused(&STANDARD.encode(&twice)).contains("follow the end of the compressed"));
    }

    #[test]
    fn the_counts_length_matches_hdrhistogram_and_the_cap_admits_every_three_digit_range() {
        for (low, high, digits) in [
            (1, 2, 0),
            (1, 2_000, 3),
            (1, 3_600_000_000_000, 3),
            (1, u64::MAX, 3),
            (1_000, u64::MAX, 3),
            (7, 1 << 40, 2),
            (1, 1 << 30, 5),
        ] {
            let h = Histogram::<u64>::new_with_bounds(low, high, digits).unwrap();
            assert_eq!(
                counts_len(low, high, digits),
                Some(h.distinct_values()),
                "{low} {high} {digits}"
            );
        }
        assert_eq!(counts_len(1, u64::MAX, 3), Some(56_320));
        assert!(counts_len(1, u64::MAX, MAX_SIGNIFICANT_DIGITS).unwrap() <= MAX_COUNTS_LEN);
        assert!(counts_len(1, u64::MAX, 5).unwrap() > MAX_COUNTS_LEN);
    }

    #[test]
    fn base64_longer_than_any_histogram_is_refused_before_decoding() {
        let text = "A".repeat(2 * MAX_ENCODED_BYTES);
        assert!(refused(&text).contains("characters of base64"));
    }

    #[test]
    fn a_histogram_claiming_a_huge_range_is_kept_small() {
        let mut h = Histogram::<u64>::new_with_bounds(1, u64::MAX, 3).unwrap();
        h.record(100).unwrap();
        let decoded = decode_histogram(&deflated(&h)).unwrap();
        assert!(decoded.distinct_values() < h.distinct_values() / 10);
        assert_eq!(decoded.len(), 1);
        assert_eq!(decoded.max(), h.max());
    }
}
