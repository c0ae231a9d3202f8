//! Interval histograms held compactly: only their non-empty buckets.
//!
//! An HdrHistogram's counts are a dense array of `u64`: with 3 significant digits about
//! 90 KiB for an interval whose largest value is 1 ms, whatever few values it holds. A
//! session of an hour at `--interval 100ms` has 36,000 intervals a metric, 3 GiB held
//! dense. [`SparseHistogram`] keeps an interval's non-empty buckets as varint pairs (the
//! step from the previous bucket's value, the count), a few bytes a bucket, with the
//! figures a reader asks of every interval (count, minimum, maximum) and what it takes to
//! rebuild the dense histogram exactly ([`SparseHistogram::to_histogram`]).
//!
//! Every figure it answers is the one the dense histogram answers: the same buckets in the
//! same order, [`SparseHistogram::value_at_quantile`] walking them as hdrhistogram does,
//! and [`crate::histogram::Total::add_sparse`] adding them into a total bucket for bucket.
//!
//! ```
//! use benchtop_profile::sparse::SparseHistogram;
//!
//! let mut h = hdrhistogram::Histogram::<u64>::new(3)?;
//! h.record_n(1_500, 3)?;
//! h.record(2_000_000)?;
//! let sparse = SparseHistogram::from(&h);
//! assert_eq!(sparse.len(), 4);
//! assert_eq!(sparse.value_at_quantile(0.5), h.value_at_quantile(0.5));
//! assert_eq!(sparse.to_histogram(), h);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use hdrhistogram::Histogram;

/// One interval's histogram, its non-empty buckets only (see the module's documentation).
#[derive(Clone, PartialEq, Eq)]
pub struct SparseHistogram {
    /// The dense histogram's lowest discernible value, highest trackable value and
    /// significant digits: what [`SparseHistogram::to_histogram`] rebuilds it with.
    low: u64,
    high: u64,
    sigfig: u8,
    /// Values counted.
    len: u64,
    /// hdrhistogram's `min()` and `max()` of the dense histogram.
    min: u64,
    max: u64,
    /// Per non-empty bucket, in value order: LEB128 of the step from the previous bucket's
    /// value (from 0 for the first), then LEB128 of its count. A bucket's value is the
    /// highest value equivalent to it, as hdrhistogram's `iter_recorded` gives it.
    buckets: Box<[u8]>,
}

impl std::fmt::Debug for SparseHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseHistogram")
            .field("len", &self.len)
            .field("min", &self.min)
            .field("max", &self.max)
            .field("buckets", &self.iter().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl From<&Histogram<u64>> for SparseHistogram {
    fn from(h: &Histogram<u64>) -> Self {
        let mut buckets = Vec::new();
        let mut previous = 0u64;
        for v in h.iter_recorded() {
            let value = v.value_iterated_to();
            put_varint(&mut buckets, value - previous);
            put_varint(&mut buckets, v.count_at_value());
            previous = value;
        }
        SparseHistogram {
            low: h.low(),
            high: h.high(),
            sigfig: h.sigfig(),
            len: h.len(),
            min: h.min(),
            max: h.max(),
            buckets: buckets.into_boxed_slice(),
        }
    }
}

impl From<Histogram<u64>> for SparseHistogram {
    fn from(h: Histogram<u64>) -> Self {
        SparseHistogram::from(&h)
    }
}

impl PartialEq<Histogram<u64>> for SparseHistogram {
    fn eq(&self, other: &Histogram<u64>) -> bool {
        self.to_histogram() == *other
    }
}

impl SparseHistogram {
    /// The histogram of a V2 encoding's non-empty `counters` ((index, count), in index
    /// order) with `ruler`'s lowest value and digits and the highest trackable value
    /// `high`: what decoding it into a dense histogram, keeping only the range its values
    /// need (as the decoder does) and taking that sparse gives, bucket for bucket, without
    /// the dense counts. `counters` must lie in the range (the decoder checks them).
    pub(crate) fn from_counters(
        ruler: &Histogram<u64>,
        high: u64,
        counters: &[(usize, u64)],
    ) -> SparseHistogram {
        // hdrhistogram's layout: counters in buckets of `2 * half` sub-buckets, each bucket
        // twice as wide as the one before, the first counting from 0 in units of the
        // lowest value's power of two.
        let unit_magnitude = ruler.equivalent_range(0).trailing_zeros();
        let mask = (1u64 << unit_magnitude) - 1;
        let largest = 2 * 10u32.pow(u32::from(ruler.sigfig()));
        let half_magnitude = f64::from(largest).log2().ceil() as u32 - 1;
        let half = 1usize << half_magnitude;
        let value_for = |index: usize| -> u64 {
            let (bucket, sub) = match (index >> half_magnitude).checked_sub(1) {
                Some(bucket) => (bucket as u32, (index & (half - 1)) + half),
                None => (0, index & (half - 1)),
            };
            (sub as u64)
                .checked_shl(bucket + unit_magnitude)
                .unwrap_or(u64::MAX)
        };
        let mut buckets = Vec::with_capacity(counters.len() * 3);
        let (mut previous, mut len) = (0u64, 0u64);
        for &(index, count) in counters {
            let value = ruler.highest_equivalent(value_for(index));
            put_varint(&mut buckets, value - previous);
            put_varint(&mut buckets, count);
            previous = value;
            len = len.saturating_add(count);
        }
        // As hdrhistogram's deserializer reckons them: the maximum from the last counter,
        // the minimum from the first but that of 0.
        let top = counters.last().map(|&(index, _)| value_for(index));
        let internal = top.map_or(0, |v| ruler.highest_equivalent(v) | mask);
        let max = if internal == 0 {
            0
        } else {
            ruler.highest_equivalent(internal)
        };
        let min = match counters.first() {
            Some(&(index, _)) if index != 0 => ruler.lowest_equivalent(value_for(index) & !mask),
            _ => 0,
        };
        // The decoder's compaction keeps the range up to what the values need, recording
        // each counter again at its lowest value: the maximum is then that of the last
        // counter's lowest value (none for a 0).
        let needed = max.max(ruler.low().saturating_mul(2)).max(2);
        let (high, max) = if high <= needed.saturating_mul(2) {
            (high, max)
        } else {
            let max = match top {
                Some(v) if v > 0 => ruler.highest_equivalent(v | mask),
                _ => 0,
            };
            (needed, max)
        };
        SparseHistogram {
            low: ruler.low(),
            high,
            sigfig: ruler.sigfig(),
            len,
            min,
            max,
            buckets: buckets.into_boxed_slice(),
        }
    }

    /// Values counted.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// No value counted.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The lowest value counted, as hdrhistogram's `min` gives it (0 when empty).
    pub fn min(&self) -> u64 {
        self.min
    }

    /// The highest value counted, as hdrhistogram's `max` gives it (the highest value
    /// equivalent to it; 0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The dense histogram's lowest discernible value.
    pub fn low(&self) -> u64 {
        self.low
    }

    /// The dense histogram's significant digits.
    pub fn sigfig(&self) -> u8 {
        self.sigfig
    }

    /// Bytes held for the buckets (not counting the fixed fields).
    pub fn heap_bytes(&self) -> usize {
        self.buckets.len()
    }

    /// The non-empty buckets in value order: (the highest value equivalent to the bucket,
    /// its count), as hdrhistogram's `iter_recorded` gives `value_iterated_to` and
    /// `count_at_value`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut at = &self.buckets[..];
        let mut value = 0u64;
        std::iter::from_fn(move || {
            let step = take_varint(&mut at)?;
            let count = take_varint(&mut at)?;
            value = value.saturating_add(step);
            Some((value, count))
        })
    }

    /// The value at `quantile`, as hdrhistogram's `value_at_quantile` reads it from the
    /// dense histogram: the highest value equivalent to the first bucket at which the
    /// running count reaches `quantile` of the values (at least one), the lowest value
    /// counted for a quantile of 0, and 0 for an empty histogram.
    pub fn value_at_quantile(&self, quantile: f64) -> u64 {
        let quantile = if quantile > 1.0 { 1.0 } else { quantile };
        if quantile == 0.0 {
            // The lowest value equivalent to the first non-empty bucket: `min` (0 when the
            // zero bucket counts any).
            return if self.is_empty() { 0 } else { self.min };
        }
        let target = ((quantile * self.len as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (value, count) in self.iter() {
            seen = seen.saturating_add(count);
            if seen >= target {
                return value;
            }
        }
        0
    }

    /// The dense histogram this was made from, rebuilt: the same range, digits and counts.
    pub fn to_histogram(&self) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(self.low, self.high, self.sigfig)
            .or_else(|_| Histogram::new_with_bounds(1, self.high.max(2), self.sigfig))
            .or_else(|_| Histogram::new(3))
            .unwrap_or_else(|_| unreachable!("3 digits from 1 to 2^63 is a valid histogram"));
        h.auto(true);
        self.add_to(&mut h);
        h.auto(false);
        h
    }

    /// Adds the buckets into `total`, a histogram of the same lowest value and digits
    /// (each bucket's value lands in the same bucket of `total`); `total` must grow on its
    /// own (`auto`) to take values above its range. What does not fit is left out.
    pub(crate) fn add_to(&self, total: &mut Histogram<u64>) -> bool {
        // Each bucket is recorded at its highest equivalent value but two: the last at the
        // maximum (the same bucket; at the top of the range the highest equivalent value
        // saturates a step below it), and the bucket of 0 (the values below the lowest's
        // power of two) at 0, whose highest equivalent value would raise the maximum where
        // a 0 does not.
        let zero_bucket = (1u64 << (63 - self.low.max(1).leading_zeros())) - 1;
        let mut all = true;
        let mut buckets = self.iter().peekable();
        while let Some((value, count)) = buckets.next() {
            let value = match value {
                _ if buckets.peek().is_none() => self.max,
                v if v > zero_bucket => v,
                _ => 0,
            };
            all &= total.record_n(value, count).is_ok();
        }
        all
    }

    /// Whether each bucket of this lands in the bucket of the same value in `h`.
    pub(crate) fn same_buckets_as(&self, h: &Histogram<u64>) -> bool {
        self.low == h.low() && self.sigfig == h.sigfig()
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn take_varint(at: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = at.split_first()?;
        *at = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// Histograms of several shapes and ranges: empty, zeros, one value, wide spreads,
    /// values near `u64::MAX`, lowest values above 1, fewer digits.
    fn shapes() -> Vec<Histogram<u64>> {
        let mut out = Vec::new();
        let mut rng = Rng(7);
        out.push(Histogram::new(3).unwrap());
        for (low, high, digits) in [
            (1, 3_600_000_000_000, 3),
            (1, 2048, 3),
            (1000, 10_000_000_000, 2),
            (1, u64::MAX, 3),
            (7, 1 << 40, 1),
        ] {
            for n in [1usize, 3, 100, 5000] {
                let mut h = Histogram::<u64>::new_with_bounds(low, high, digits).unwrap();
                for i in 0..n {
                    let v = match i % 4 {
                        0 => 0,
                        1 => rng.below(1_000) as u64,
                        2 => rng.below(1_000_000) as u64 * 1000,
                        _ => high - rng.below(1000) as u64,
                    };
                    let v = v.min(high);
                    h.record_n(v, 1 + rng.below(10) as u64).unwrap();
                }
                out.push(crate::histogram::compact(h.clone()));
                out.push(h);
            }
        }
        out
    }

    fn brief(a: &Histogram<u64>, b: &Histogram<u64>) -> String {
        let f = |h: &Histogram<u64>| {
            format!(
                "low {} high {} digits {} len {} min {} min_nz {} max {} buckets {:?}",
                h.low(),
                h.high(),
                h.sigfig(),
                h.len(),
                h.min(),
                h.min_nz(),
                h.max(),
                h.iter_recorded()
                    .map(|v| (v.value_iterated_to(), v.count_at_value()))
                    .take(5)
                    .collect::<Vec<_>>()
            )
        };
        format!("\n{}\n{}", f(a), f(b))
    }

    #[test]
    fn a_sparse_histogram_answers_every_figure_as_the_dense_one() {
        for h in shapes() {
            let s = SparseHistogram::from(&h);
            assert_eq!((s.len(), s.min(), s.max()), (h.len(), h.min(), h.max()));
            assert_eq!(s.to_histogram().min_nz(), h.min_nz());
            assert_eq!(s.is_empty(), h.is_empty());
            let dense: Vec<(u64, u64)> = h
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect();
            assert_eq!(s.iter().collect::<Vec<_>>(), dense);
            for q in [
                0.0,
                1e-9,
                0.1,
                0.5,
                0.9,
                0.99,
                0.999,
                0.9999,
                1.0,
                1.5,
                -1.0,
                f64::NAN,
            ] {
                assert_eq!(s.value_at_quantile(q), h.value_at_quantile(q), "q {q}");
            }
            let back = s.to_histogram();
            assert!(back == h, "{}", brief(&back, &h));
            assert_eq!(
                (back.low(), back.high(), back.sigfig()),
                (h.low(), h.high(), h.sigfig())
            );
            assert_eq!(s, h);
        }
    }

    #[test]
    fn adding_sparse_buckets_gives_the_total_adding_dense_histograms_gives() {
        let shapes = shapes();
        for low_digits in [(1, 3), (1000, 2)] {
            let fits: Vec<&Histogram<u64>> = shapes
                .iter()
                .filter(|h| (h.low(), h.sigfig()) == low_digits)
                .collect();
            let mut dense =
                Histogram::<u64>::new_with_bounds(low_digits.0, low_digits.0 * 2, low_digits.1)
                    .unwrap();
            dense.auto(true);
            let mut sparse = dense.clone();
            for h in fits {
                dense.add(h).unwrap();
                let s = SparseHistogram::from(h);
                assert!(s.same_buckets_as(&sparse));
                assert!(s.add_to(&mut sparse));
            }
            assert!(sparse == dense, "{}", brief(&sparse, &dense));
            assert_eq!(sparse.max(), dense.max());
            assert_eq!(sparse.min(), dense.min());
        }
    }

    #[test]
    fn a_sparse_histogram_holds_a_few_bytes_a_bucket() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for i in 0..500u64 {
            h.record_n(50_000 + i * 997, 1 + i % 5).unwrap();
        }
        let s = SparseHistogram::from(&h);
        let buckets = s.iter().count();
        assert!(
            s.heap_bytes() <= 4 * buckets,
            "{} bytes, {buckets} buckets",
            s.heap_bytes()
        );
    }
}
