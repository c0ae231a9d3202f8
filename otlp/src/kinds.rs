//! The kinds of profiles a request carries ([`KINDS`]): what each one's samples count and
//! where a live run's and a saved session's intervals hold its weights, so that a new
//! kind of stacks over time (allocated bytes, live bytes) is one more entry of the table
//! and nothing else; and the weights of one interval, per kind ([`BatchInterval`]).

use benchtop_sessions::intervals::{IntervalWeights, LoadedInterval, Weight};

/// One kind of profile sent: what its samples count, and where a live run's
/// [`IntervalWeights`] and a saved session's [`LoadedInterval`] hold its weights. A new
/// kind of stacks over time (allocated bytes, live bytes) is one more entry of [`KINDS`].
#[derive(Debug, Clone, Copy)]
pub struct ProfileKind {
    /// The kind's short name (`cpu`, `offcpu`, `mem`): it makes the profile's id.
    pub name: &'static str,
    /// The sample type, (type, unit) as pprof and OTLP spell them.
    pub sample_type: (&'static str, &'static str),
    /// The period type, (type, unit).
    pub period_type: (&'static str, &'static str),
    /// The period, from how the run sampled (0 when unknown).
    pub period: fn(&Sampling) -> i64,
    /// The weights of a live interval.
    pub live: fn(&IntervalWeights) -> &[Weight],
    /// The weights of a saved interval.
    pub saved: fn(&LoadedInterval) -> &[(u32, u32, u64)],
}

/// The kinds of profiles sent, in the order each request carries them.
pub const KINDS: [ProfileKind; 3] = [
    ProfileKind {
        name: "cpu",
        sample_type: ("samples", "count"),
        period_type: ("cpu", "nanoseconds"),
        period: |s| match s.frequency_hz {
            0 => 0,
            hz => i64::try_from(1_000_000_000 / hz).unwrap_or(0),
        },
        live: |i| &i.cpu,
        saved: |i| &i.cpu,
    },
    ProfileKind {
        name: "offcpu",
        sample_type: ("off_cpu", "nanoseconds"),
        period_type: ("off_cpu", "nanoseconds"),
        period: |_| 1,
        live: |i| &i.offcpu,
        saved: |i| &i.offcpu,
    },
    // Page faults sampled one in `mem_period`, each weighing `mem_period × page size`
    // bytes: mem.folded per interval.
    ProfileKind {
        name: "mem",
        sample_type: ("resident_growth", "bytes"),
        period_type: ("page_faults", "count"),
        period: |s| i64::try_from(s.mem_period).unwrap_or(0),
        live: |i| &i.mem,
        saved: |i| &i.mem,
    },
];

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
                (k.live)(i)
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
            weights: KINDS.map(|k| (k.saved)(i).to_vec()),
        }
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
}

impl Sampling {
    /// How the session `meta` describes sampled.
    pub fn of(meta: &benchtop_sessions::SessionMeta) -> Sampling {
        Sampling {
            frequency_hz: meta.sampling.frequency_hz,
            mem_period: meta.sampling.mem.as_ref().map_or(0, |m| m.period),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_and_saved_intervals_carry_the_same_weights_per_kind() {
        let w = |tid, stack, weight| Weight { tid, stack, weight };
        let live = IntervalWeights {
            t0_ns: 5,
            t1_ns: 9,
            cpu: vec![w(1, 2, 3)],
            offcpu: vec![w(1, 3, 40)],
            mem: vec![w(2, 4, 4_096)],
            ..IntervalWeights::default()
        };
        let saved = LoadedInterval {
            t0_ns: 5,
            t1_ns: 9,
            cpu: vec![(1, 2, 3)],
            offcpu: vec![(1, 3, 40)],
            mem: vec![(2, 4, 4_096)],
        };
        let batch = BatchInterval::from_live(&live);
        assert_eq!(batch, BatchInterval::from_saved(&saved));
        assert_eq!(batch.weights[2], vec![(2, 4, 4_096)]);
        assert!(!batch.is_empty());
        assert!(BatchInterval::default().is_empty());
    }
}
