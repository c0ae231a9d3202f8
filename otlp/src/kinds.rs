//! The kinds of profiles a request carries ([`KINDS`]): what each one's samples count and
//! where a live run's and a saved session's intervals hold its weights, so that a new
//! kind of stacks over time is one more entry of the table and nothing else; and the
//! weights of one interval, per kind ([`BatchInterval`]).
//!
//! The sampler's kinds (on-CPU, off-CPU, resident growth) come from the per-interval
//! stacks; a built-in worker's allocation kinds (bytes allocated, bytes live) from its
//! allocation samples, whose stacks are the worker's own ids: they go in requests of
//! their own ([`BatchInterval::from_allocs`]), never mixed with the sampler's.

use benchtop_profile::kinds::{Kind, KindSpec};
use benchtop_sessions::intervals::{IntervalWeights, LoadedInterval};

/// One kind of profile sent: the profile model's entry for it ([`KindSpec`]: name, sample
/// and period types; a live run's [`IntervalWeights`] and a saved session's
/// [`LoadedInterval`] give its weights by kind), and what OTLP needs beyond it — its
/// period and how its samples are stamped. A new kind of stacks over time is one more
/// entry of the profile model's table and one more entry of [`KINDS`].
#[derive(Debug, Clone, Copy)]
pub struct OtlpKind {
    /// The kind, whose [`KindSpec`] names it (`cpu`: it makes the profile's id) and gives
    /// its sample and period types.
    pub kind: Kind,
    /// The period, from how the run sampled (0 when unknown).
    pub period: fn(&Sampling) -> i64,
    /// Whether samples are per thread (`thread.id`, `thread.name` attributes); a worker's
    /// allocation samples do not say which thread allocated.
    pub threads: bool,
    /// Whether a weight is a level at the interval's end (bytes live then), stamped with
    /// the interval's end, rather than an amount over the interval, stamped with its
    /// middle.
    pub snapshot: bool,
}

/// The kinds of profiles sent, in the order each request carries them.
pub const KINDS: [OtlpKind; 6] = [
    OtlpKind {
        kind: Kind::Cpu,
        period: |s| match s.frequency_hz {
            0 => 0,
            hz => i64::try_from(1_000_000_000 / hz).unwrap_or(0),
        },
        threads: true,
        snapshot: false,
    },
    OtlpKind {
        kind: Kind::OffCpu,
        period: |_| 1,
        threads: true,
        snapshot: false,
    },
    // Blocked time by what woke it: the blocked thread's stack, `— woken by —`, the
    // waker's stack; per blocked thread.
    OtlpKind {
        kind: Kind::Waits,
        period: |_| 1,
        threads: true,
        snapshot: false,
    },
    // Page faults sampled one in `mem_period`, each weighing `mem_period × page size`
    // bytes: mem.folded per interval.
    OtlpKind {
        kind: Kind::Mem,
        period: |s| i64::try_from(s.mem_period).unwrap_or(0),
        threads: true,
        snapshot: false,
    },
    // A built-in worker's sampled allocations (alloc.folded per interval), as pprof's
    // heap profiles name them; the period is the sampling's mean bytes between samples.
    OtlpKind {
        kind: Kind::Alloc,
        period: |s| i64::try_from(s.alloc_rate).unwrap_or(0),
        threads: false,
        snapshot: false,
    },
    // The bytes its sampled allocations still held at each interval's end: the last
    // interval's are live-end.folded, the peak's live.folded.
    OtlpKind {
        kind: Kind::Live,
        period: |s| i64::try_from(s.alloc_rate).unwrap_or(0),
        threads: false,
        snapshot: true,
    },
];

impl OtlpKind {
    /// The profile model's entry for the kind.
    pub fn spec(&self) -> &'static KindSpec {
        self.kind.spec()
    }
}

/// The index in [`KINDS`] of the kind named `name`.
pub fn kind_index(name: &str) -> Option<usize> {
    KINDS.iter().position(|k| k.spec().name == name)
}

/// Weights of one interval: (tid, stack, weight) per kind of [`KINDS`], times in ns from
/// the run's start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchInterval {
    /// Where it begins, ns from the run's start.
    pub t0_ns: u64,
    /// Where it ends, ns from the run's start.
    pub t1_ns: u64,
    /// (tid, stack, weight) per kind, in the order of [`KINDS`].
    pub weights: [Vec<(u32, u32, u64)>; KINDS.len()],
}

impl BatchInterval {
    /// A live interval's weights (a copy: the sampler's chunk goes on to stacks.jsonl).
    pub fn from_live(i: &IntervalWeights) -> BatchInterval {
        BatchInterval {
            t0_ns: i.t0_ns,
            t1_ns: i.t1_ns,
            weights: KINDS.map(|k| {
                i.weights[k.kind]
                    .iter()
                    .map(|w| (w.tid, w.stack, w.weight))
                    .collect()
            }),
        }
    }

    /// A saved interval's weights.
    pub fn from_saved(i: &LoadedInterval) -> BatchInterval {
        BatchInterval {
            t0_ns: i.t0_ns,
            t1_ns: i.t1_ns,
            weights: KINDS.map(|k| i.weights[k.kind].clone()),
        }
    }

    /// A worker's allocations over one interval: the bytes allocated in it and live at
    /// its end, per stack (stack id, bytes), as the kinds `alloc` and `live` (without
    /// threads: weights of thread 0).
    pub fn from_allocs(
        t0_ns: u64,
        t1_ns: u64,
        allocated: &[(u32, u64)],
        live: &[(u32, u64)],
    ) -> BatchInterval {
        let mut batch = BatchInterval {
            t0_ns,
            t1_ns,
            ..BatchInterval::default()
        };
        for (kind, weights) in [("alloc", allocated), ("live", live)] {
            if let Some(k) = kind_index(kind) {
                batch.weights[k] = weights.iter().map(|&(s, w)| (0, s, w)).collect();
            }
        }
        batch
    }

    /// Whether it carries no weight of any kind.
    pub fn is_empty(&self) -> bool {
        self.weights.iter().all(Vec::is_empty)
    }
}

/// What a profile says of its sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sampling {
    /// On-CPU sampling frequency, Hz (the period is its inverse); 0 when unknown.
    pub frequency_hz: u64,
    /// One page fault in this many was sampled for the memory profile; 0 when unknown
    /// (a live run learns it only at its end).
    pub mem_period: u64,
    /// A worker's allocation sampling: mean bytes between samples; 0 when unknown.
    pub alloc_rate: u64,
}

impl Sampling {
    /// How the session `meta` describes sampled.
    pub fn of(meta: &benchtop_sessions::SessionMeta) -> Sampling {
        Sampling {
            frequency_hz: meta.sampling.frequency_hz,
            mem_period: meta.sampling.mem.as_ref().map_or(0, |m| m.period),
            alloc_rate: meta.sampling.alloc.as_ref().map_or(0, |a| a.rate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchtop_sessions::intervals::Weight;

    #[test]
    fn the_kinds_sent_are_those_the_profile_model_marks_for_otlp() {
        let sent: Vec<Kind> = KINDS.iter().map(|k| k.kind).collect();
        let marked: Vec<Kind> = benchtop_profile::kinds::KINDS
            .iter()
            .filter(|k| k.exports.otlp)
            .map(|k| k.kind)
            .collect();
        assert_eq!(sent, marked);
    }

    #[test]
    fn live_and_saved_intervals_carry_the_same_weights_per_kind() {
        let w = |tid, stack, weight| Weight { tid, stack, weight };
        let live = IntervalWeights {
            t0_ns: 5,
            t1_ns: 9,
            weights: [
                (Kind::Cpu, vec![w(1, 2, 3)]),
                (Kind::OffCpu, vec![w(1, 3, 40)]),
                (Kind::Mem, vec![w(2, 4, 4_096)]),
            ]
            .into_iter()
            .collect(),
            ..IntervalWeights::default()
        };
        let saved = LoadedInterval {
            t0_ns: 5,
            t1_ns: 9,
            weights: [
                (Kind::Cpu, vec![(1, 2, 3)]),
                (Kind::OffCpu, vec![(1, 3, 40)]),
                (Kind::Mem, vec![(2, 4, 4_096)]),
            ]
            .into_iter()
            .collect(),
        };
        let batch = BatchInterval::from_live(&live);
        assert_eq!(batch, BatchInterval::from_saved(&saved));
        assert_eq!(
            batch.weights[kind_index("mem").unwrap()],
            vec![(2, 4, 4_096)]
        );
        assert!(!batch.is_empty());
        assert!(BatchInterval::default().is_empty());
        // Neither carries allocations: those come from the worker's samples.
        assert!(batch.weights[kind_index("alloc").unwrap()].is_empty());
    }

    #[test]
    fn allocations_fill_the_allocation_kinds_only() {
        let batch = BatchInterval::from_allocs(1, 2, &[(3, 4_096)], &[(3, 1_024), (5, 8)]);
        let (alloc, live) = (kind_index("alloc").unwrap(), kind_index("live").unwrap());
        assert_eq!(batch.weights[alloc], [(0, 3, 4_096)]);
        assert_eq!(batch.weights[live], [(0, 3, 1_024), (0, 5, 8)]);
        for (k, w) in batch.weights.iter().enumerate() {
            assert_eq!(
                w.is_empty(),
                k != alloc && k != live,
                "{}",
                KINDS[k].spec().name
            );
        }
        assert!(KINDS[live].snapshot && !KINDS[alloc].snapshot);
        assert!(!KINDS[live].threads && KINDS[0].threads);
    }
}
