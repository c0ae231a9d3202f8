//! What a client picks: operations in the original's mix, keys it knows, and keys and
//! values cut from a pool of random bytes (a reference count each, no copy).

use std::collections::HashMap;

use prost::bytes::Bytes;

use super::KvParams;
use super::operation::Operation;

/// Sizes are capped at this multiple of their mean (the exponential tail is unbounded;
/// gRPC's messages are not).
const MAX_SIZE_OVER_MEAN: f64 = 16.0;
/// The pool keys and values are cut from is twice the longest of either, and at least
/// this, so that cuts at random offsets differ.
const MIN_POOL: usize = 64 << 10;

/// A small, fast generator for sizes, offsets and choices (not for anything secret).
#[derive(Debug)]
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn seeded(seed: u64) -> Rng {
        // SplitMix64 of the seed, so near seeds give unrelated streams.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// A size drawn from an exponential distribution of mean `mean` (as the original's
    /// sizes), at least 1 and at most [`MAX_SIZE_OVER_MEAN`] times the mean.
    pub(super) fn size(&mut self, mean: u32) -> usize {
        let mean = f64::from(mean);
        (-(1.0 - self.unit()).ln() * mean)
            .round()
            .clamp(1.0, mean * MAX_SIZE_OVER_MEAN) as usize
    }
}

/// The longest key or value `params` draws.
pub(super) fn longest(params: &KvParams) -> usize {
    let cap = |mean: u32| (f64::from(mean) * MAX_SIZE_OVER_MEAN) as usize;
    cap(params.mean_key_size).max(cap(params.mean_value_size))
}

/// Random bytes made once, shared by every client: a key or value is a slice of it at a
/// random offset (a reference count, no copy), so the RPC path neither allocates nor
/// fills them. Cuts at different offsets differ as random bytes do, so keys collide as
/// rarely as the original's random keys.
#[derive(Debug, Clone)]
pub(super) struct Pool(Bytes);

impl Pool {
    /// A pool of twice `longest` bytes (at least [`MIN_POOL`]) from `rng`.
    pub(super) fn new(longest: usize, rng: &mut Rng) -> Pool {
        let len = longest.saturating_mul(2).max(MIN_POOL);
        let mut bytes = Vec::with_capacity(len + 8);
        while bytes.len() < len {
            bytes.extend_from_slice(&rng.next().to_le_bytes());
        }
        bytes.truncate(len);
        Pool(Bytes::from(bytes))
    }

    /// `size` bytes (at most the pool's) from a random offset.
    pub(super) fn cut(&self, size: usize, rng: &mut Rng) -> Bytes {
        let size = size.min(self.0.len());
        let at = rng.below(self.0.len() - size + 1);
        self.0.slice(at..at + size)
    }
}

/// The keys a client knows to exist, with O(1) random pick and removal; the keys are the
/// pool's slices, so keeping one is a reference count.
#[derive(Debug, Default)]
pub(super) struct Keys {
    list: Vec<Bytes>,
    index: HashMap<Bytes, usize, rustc_hash::FxBuildHasher>,
}

impl Keys {
    pub(super) fn add(&mut self, key: Bytes) {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.index.entry(key) {
            let key = slot.key().clone();
            slot.insert(self.list.len());
            self.list.push(key);
        }
    }

    pub(super) fn remove(&mut self, key: &[u8]) {
        if let Some(i) = self.index.remove(key) {
            self.list.swap_remove(i);
            if let Some(moved) = self.list.get(i)
                && let Some(at) = self.index.get_mut(moved)
            {
                *at = i;
            }
        }
    }

    pub(super) fn pick(&self, rng: &mut Rng) -> Option<Bytes> {
        (!self.list.is_empty()).then(|| self.list[rng.below(self.list.len())].clone())
    }
}

/// The operation mix: reads are kept at exactly `read_fraction` of the operations (a
/// deficit counter, so a short run does not wander with the draw), the rest split evenly
/// and at random between create, update and delete, as the original's client picked them.
#[derive(Debug)]
pub(super) struct Mix {
    read_fraction: f64,
    reads_due: f64,
}

impl Mix {
    /// A mix with `read_fraction` of reads, none owed yet.
    pub(super) fn new(read_fraction: f64) -> Mix {
        Mix {
            read_fraction,
            reads_due: 0.0,
        }
    }

    /// Owes a read to a later operation (one that could not happen: no key to read).
    pub(super) fn owe_read(&mut self) {
        self.reads_due += 1.0;
    }

    pub(super) fn next(&mut self, rng: &mut Rng) -> Operation {
        self.reads_due += self.read_fraction;
        if self.reads_due >= 1.0 - 1e-9 {
            self.reads_due -= 1.0;
            return Operation::Retrieve;
        }
        match rng.below(3) {
            0 => Operation::Create,
            1 => Operation::Update,
            _ => Operation::Delete,
        }
    }
}

/// What a client picks from: its keys, mix and generator.
#[derive(Debug)]
pub(super) struct Picks {
    pub(super) keys: Keys,
    pub(super) mix: Mix,
    pub(super) rng: Rng,
}

impl Picks {
    /// No keys known yet.
    pub(super) fn new(mix: Mix, rng: Rng) -> Picks {
        Picks {
            keys: Keys::default(),
            mix,
            rng,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_keeps_reads_at_their_fraction_and_writes_split_three_ways() {
        let mut mix = Mix::new(0.25);
        let mut rng = Rng::seeded(7);
        let mut counts = HashMap::new();
        for _ in 0..4000 {
            *counts.entry(mix.next(&mut rng)).or_insert(0) += 1;
        }
        assert_eq!(counts[&Operation::Retrieve], 1000);
        for op in [Operation::Create, Operation::Update, Operation::Delete] {
            assert!(
                (900..1100).contains(&counts[&op]),
                "{op:?}: {}",
                counts[&op]
            );
        }
    }

    #[test]
    fn sizes_are_exponential_around_their_mean_and_capped() {
        let mut rng = Rng::seeded(3);
        let sizes: Vec<usize> = (0..20_000).map(|_| rng.size(64)).collect();
        let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
        assert!((58.0..70.0).contains(&mean), "{mean}");
        assert!(sizes.iter().all(|&s| (1..=64 * 16).contains(&s)));
    }

    #[test]
    fn cuts_of_the_pool_have_their_size_and_differ_from_each_other() {
        let mut rng = Rng::seeded(5);
        let pool = Pool::new(1024, &mut rng);
        assert_eq!(pool.0.len(), MIN_POOL);
        let cuts: Vec<Bytes> = (0..1000).map(|i| pool.cut(8 + i % 64, &mut rng)).collect();
        for (i, c) in cuts.iter().enumerate() {
            assert_eq!(c.len(), 8 + i % 64);
        }
        let distinct: std::collections::HashSet<&Bytes> = cuts.iter().collect();
        assert!(distinct.len() > 990, "{} distinct of 1000", distinct.len());
        // The longest cut is the whole pool, never more.
        assert_eq!(pool.cut(usize::MAX, &mut rng), pool.0);
        // A pool for values of up to 1 MiB holds two of them.
        assert_eq!(Pool::new(1 << 20, &mut rng).0.len(), 2 << 20);
    }

    #[test]
    fn known_keys_add_pick_and_remove_in_constant_time() {
        let mut keys = Keys::default();
        let mut rng = Rng::seeded(1);
        for k in [&b"a"[..], b"b", b"c"] {
            keys.add(Bytes::copy_from_slice(k));
        }
        keys.add(Bytes::from_static(b"b"));
        assert_eq!(keys.list.len(), 3);
        keys.remove(b"a");
        keys.remove(b"zz");
        assert_eq!(keys.list.len(), 2);
        // The key moved into the removed one's place is still found by its index.
        assert_eq!(keys.index[&Bytes::from_static(b"c")], 0);
        for _ in 0..10 {
            let k = keys.pick(&mut rng).unwrap();
            assert!(k == b"b"[..] || k == b"c"[..]);
        }
        keys.remove(b"c");
        keys.remove(b"b");
        assert!(keys.pick(&mut rng).is_none());
        assert!(keys.index.is_empty());
    }
}
