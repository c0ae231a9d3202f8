//! Per-interval stacks: each on-CPU sample and each off-CPU blocked interval attributed to
//! the report interval it fell in, and the stack table they use.
//!
//! One clock: the events are opened with `clockid(CLOCK_MONOTONIC)`, so a sample's time
//! and [`monotonic_ns`] read the same clock. The recorder says when the run started (the
//! monotonic time at which it sent `start`) and where each report interval ends: the
//! start plus the worker's `t_ns` of the tick that closed it (its own clock, counted from
//! the moment it read `start`, a fraction of a millisecond later). Interval *i* then
//! spans `[end(i-1), end(i))`, the first one from the start, and everything after the
//! last end known when recording stops is the last interval, up to the stop.
//!
//! A sample is attributed to the interval whose span holds its time; samples taken
//! before the start (between the sampler's start and the worker's) count in the first.
//! Samples and blocked intervals whose end is past the last known end wait until the
//! recorder tells the next one, so that a tick read a little late never moves a sample
//! into the wrong interval. A blocked interval that spans report intervals is split
//! between them in proportion to the time in each (weights in nanoseconds, times the
//! scale of sampled switches).
//!
//! With [`Timeline::keep_samples`] each on-CPU sample is also handed out on its own, with
//! its time, thread and stack, as it is attributed: the exports that place samples in
//! time (the Firefox Profiler) then use their real times instead of spreading an
//! interval's weights over it. At most [`MAX_KEPT_SAMPLES`] are kept a run.
//!
//! With waits, each blocked interval of at least [`LONG_WAIT_NS`] is also handed out on
//! its own ([`Timeline::long_wait`]), with its waits stack: the exports mark each long
//! wait with the thread that woke it. At most [`MAX_LONG_WAITS`] are kept a run.

use rustc_hash::FxHashMap;

use benchtop_profile::intervals::{
    IntervalWeights, KeptSample, LONG_WAIT_NS, LongWait, MAX_KEPT_SAMPLES, MAX_LONG_WAITS,
    StackEntry, StacksChunk, Weight,
};
use benchtop_profile::{ByKind, FrameId, Kind, StackTree};

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of the sampler's events.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a live timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// What the recorder tells the sampler's thread about the run's clock.
#[derive(Debug, Default)]
pub(crate) struct Feed {
    /// When the run started (`start` was sent), monotonic ns.
    pub start_ns: Option<u64>,
    /// Ends of report intervals not yet taken by the thread, monotonic ns.
    pub ends: Vec<u64>,
}

/// A blocked interval whose stack is in the stack table: an off-CPU stack, or a wait's
/// blocked stack with its waker's.
#[derive(Debug, Clone, Copy)]
pub(super) struct Block {
    pub kind: Kind,
    pub since: u64,
    pub end: u64,
    pub tid: u32,
    pub stack: u32,
    pub scale: u32,
}

/// The stack table handed out in chunks: stacks of interned frames, each one its parent
/// plus a frame.
#[derive(Debug, Default)]
pub(super) struct StackTable {
    ids: FxHashMap<(u32, u32), u32>,
    frame_sent: Vec<bool>,
    threads_sent: FxHashMap<u32, ()>,
}

impl StackTable {
    /// The id of the stack `frames` (root first, interned in `interner`), adding it and
    /// any frame not yet handed out to `chunk`. `None` for an empty stack.
    pub fn intern(
        &mut self,
        interner: &StackTree,
        frames: &[FrameId],
        chunk: &mut StacksChunk,
    ) -> Option<u32> {
        let mut parent = u32::MAX;
        for &f in frames {
            let i = f.0 as usize;
            if i >= self.frame_sent.len() {
                self.frame_sent.resize(i + 1, false);
            }
            if !self.frame_sent[i] {
                self.frame_sent[i] = true;
                chunk.frames.push((f.0, interner.name(f).to_owned()));
            }
            let next = self.ids.len() as u32;
            let id = *self.ids.entry((parent, f.0)).or_insert_with(|| {
                chunk.stacks.push(StackEntry {
                    id: next,
                    parent: (parent != u32::MAX).then_some(parent),
                    frame: f.0,
                });
                next
            });
            parent = id;
        }
        (parent != u32::MAX).then_some(parent)
    }

    /// Whether thread `tid`'s name still has to be handed out (and from now on, not).
    pub fn new_thread(&mut self, tid: u32) -> bool {
        self.threads_sent.insert(tid, ()).is_none()
    }
}

/// Attribution of weights to report intervals; see the module docs.
#[derive(Debug, Default)]
pub(super) struct Timeline {
    start_ns: u64,
    /// Ends of the report intervals known so far, ascending.
    ends: Vec<u64>,
    /// On-CPU samples since the last batch: (time, tid, pending slot).
    raw: Vec<(u64, u32, u32)>,
    /// Samples with a stack id whose interval has not ended yet: (time, tid, stack).
    open_cpu: Vec<(u64, u32, u32)>,
    /// Blocked intervals whose last report interval has not ended yet.
    open_off: Vec<Block>,
    /// Page-fault samples since the last batch: (time, tid, pending slot).
    raw_mem: Vec<(u64, u32, u32)>,
    /// Page-fault samples with a stack id whose interval has not ended yet.
    open_mem: Vec<(u64, u32, u32)>,
    /// Bytes one page-fault sample weighs.
    mem_bytes: u64,
    /// Attributed weights of each kind per (interval, tid, stack), not handed out yet.
    weights: ByKind<FxHashMap<(u32, u32, u32), u64>>,
    /// Whether each sample is also kept on its own, and those not handed out yet.
    keep: bool,
    kept: Capped<KeptSample>,
    /// Long waits not handed out yet: (since, end, tid, waits stack), monotonic ns.
    long: Capped<(u64, u64, u32, u32)>,
}

/// Items kept on their own up to a limit a run: those not handed out yet, how many were
/// kept in all, and how many past the limit were not.
#[derive(Debug)]
struct Capped<T> {
    pending: Vec<T>,
    kept: u64,
    dropped: u64,
}

impl<T> Default for Capped<T> {
    fn default() -> Self {
        Capped {
            pending: Vec::new(),
            kept: 0,
            dropped: 0,
        }
    }
}

impl<T> Capped<T> {
    /// Keeps `item` unless `limit` items were kept this run (then counts it).
    fn push(&mut self, item: T, limit: u64) {
        if self.kept < limit {
            self.kept += 1;
            self.pending.push(item);
        } else {
            self.dropped += 1;
        }
    }
}

impl Timeline {
    pub fn new(start_ns: u64) -> Self {
        Timeline {
            start_ns,
            ..Timeline::default()
        }
    }

    /// Keeps each on-CPU sample on its own too (see the module docs).
    pub fn keep_samples(&mut self) {
        self.keep = true;
    }

    /// Samples that were not kept on their own because the run had kept
    /// [`MAX_KEPT_SAMPLES`].
    pub fn samples_not_kept(&self) -> u64 {
        self.kept.dropped
    }

    /// Takes what the recorder said since the last time.
    pub fn take_feed(&mut self, feed: &mut Feed) {
        if let Some(start) = feed.start_ns.take()
            && self.ends.is_empty()
        {
            self.start_ns = start;
        }
        for end in feed.ends.drain(..) {
            // Ends only move forward; one at or before the last is a repeat.
            if end > self.start_ns && self.ends.last().is_none_or(|&last| end > last) {
                self.ends.push(end);
            }
        }
    }

    /// An on-CPU sample of `tid` at `time`, whose stack is pending in `slot`.
    pub fn sample(&mut self, time: u64, tid: u32, slot: u32) {
        self.raw.push((time, tid, slot));
    }

    /// Each page-fault sample weighs this many bytes.
    pub fn set_mem_bytes(&mut self, bytes: u64) {
        self.mem_bytes = bytes;
    }

    /// A page-fault sample of `tid` at `time`, whose stack is pending in memory `slot`.
    pub fn mem_sample(&mut self, time: u64, tid: u32, slot: u32) {
        self.raw_mem.push((time, tid, slot));
    }

    /// The pending memory slots were folded: `stacks[slot]` is each one's stack id.
    pub fn fold_mem_samples(&mut self, stacks: &[u32]) {
        for (time, tid, slot) in self.raw_mem.drain(..) {
            if let Some(&stack) = stacks.get(slot as usize)
                && stack != u32::MAX
            {
                self.open_mem.push((time, tid, stack));
            }
        }
    }

    /// The pending slots were folded: `stacks[slot]` is each one's stack id (`u32::MAX`
    /// for none).
    pub fn fold_samples(&mut self, stacks: &[u32]) {
        for (time, tid, slot) in self.raw.drain(..) {
            if let Some(&stack) = stacks.get(slot as usize)
                && stack != u32::MAX
            {
                self.open_cpu.push((time, tid, stack));
            }
        }
    }

    /// A blocked interval with its stack id.
    pub fn block(&mut self, block: Block) {
        if block.end > block.since {
            self.open_off.push(block);
        }
    }

    /// A blocked interval `[since, end)` of `tid` whose waits stack is `stack`: kept on
    /// its own when it lasted at least [`LONG_WAIT_NS`] (up to [`MAX_LONG_WAITS`] a run).
    pub fn long_wait(&mut self, since: u64, end: u64, tid: u32, stack: u32) {
        if end.saturating_sub(since) < LONG_WAIT_NS {
            return;
        }
        self.long.push((since, end, tid, stack), MAX_LONG_WAITS);
    }

    /// Long waits that were not kept because the run had kept [`MAX_LONG_WAITS`].
    pub fn long_waits_not_kept(&self) -> u64 {
        self.long.dropped
    }

    /// Hands out the long waits kept since the last time, their times from the run's
    /// start; they wait for the start to be known (the first report interval's end)
    /// unless `all` (recording stopped).
    pub fn take_long_waits(&mut self, all: bool, out: &mut Vec<LongWait>) {
        if self.ends.is_empty() && !all {
            return;
        }
        let start = self.start_ns;
        out.extend(
            self.long
                .pending
                .drain(..)
                .map(|(since, end, tid, stack)| LongWait {
                    t0_ns: since.saturating_sub(start),
                    t1_ns: end.saturating_sub(start),
                    tid,
                    stack,
                }),
        );
    }

    /// The interval that holds `time`.
    fn index(&self, time: u64) -> u32 {
        self.ends.partition_point(|&end| end <= time) as u32
    }

    /// Moves samples and blocked intervals whose report intervals have all ended (all of
    /// them when `all`: recording stopped) into the attributed weights.
    pub fn attribute(&mut self, all: bool) {
        let last = if all {
            u64::MAX
        } else {
            match self.ends.last() {
                Some(&end) => end,
                None => return,
            }
        };
        let mut open = std::mem::take(&mut self.open_cpu);
        open.retain(|&(time, tid, stack)| {
            if time >= last {
                return true;
            }
            let key = (self.index(time), tid, stack);
            *self.weights[Kind::Cpu].entry(key).or_insert(0) += 1;
            if self.keep {
                let t_ns = time.saturating_sub(self.start_ns);
                let sample = KeptSample { t_ns, tid, stack };
                self.kept.push(sample, MAX_KEPT_SAMPLES);
            }
            false
        });
        self.open_cpu = open;
        let mut open = std::mem::take(&mut self.open_mem);
        open.retain(|&(time, tid, stack)| {
            if time >= last {
                return true;
            }
            let key = (self.index(time), tid, stack);
            let w = self.weights[Kind::Mem].entry(key).or_insert(0);
            *w = w.saturating_add(self.mem_bytes);
            false
        });
        self.open_mem = open;
        let mut open = std::mem::take(&mut self.open_off);
        open.retain(|b| {
            if b.end > last {
                return true;
            }
            self.split(b);
            false
        });
        self.open_off = open;
    }

    /// Splits a blocked interval between the report intervals it spans, in proportion
    /// to the time in each.
    fn split(&mut self, b: &Block) {
        let scale = u64::from(b.scale.max(1));
        let mut from = b.since;
        let mut i = self.index(b.since);
        loop {
            let upper = self.ends.get(i as usize).copied().unwrap_or(u64::MAX);
            let to = b.end.min(upper);
            let ns = to.saturating_sub(from).saturating_mul(scale);
            if ns > 0 {
                let w = self.weights[b.kind].entry((i, b.tid, b.stack)).or_insert(0);
                *w = w.saturating_add(ns);
            }
            if to >= b.end {
                break;
            }
            from = to;
            i += 1;
        }
    }

    /// The span of interval `i`, ns from the start; the last one ends at `stop_ns`.
    fn span(&self, i: u32, stop_ns: u64) -> (u64, u64) {
        let i = i as usize;
        let t0 = match i {
            0 => self.start_ns,
            _ => self.ends.get(i - 1).copied().unwrap_or(stop_ns),
        };
        let t1 = self.ends.get(i).copied().unwrap_or(stop_ns).max(t0);
        (
            t0.saturating_sub(self.start_ns),
            t1.saturating_sub(self.start_ns),
        )
    }

    /// Hands out the samples kept on their own since the last time, in time order.
    pub fn take_samples(&mut self, out: &mut Vec<KeptSample>) {
        self.kept.pending.sort_unstable_by_key(|s| (s.t_ns, s.tid));
        out.append(&mut self.kept.pending);
    }

    /// Hands out the attributed weights, one [`IntervalWeights`] per interval, in order.
    /// `stop_ns` ends the last interval (the moment recording stopped, or now).
    pub fn take_intervals(&mut self, stop_ns: u64, out: &mut Vec<IntervalWeights>) {
        let mut by_interval: std::collections::BTreeMap<u32, IntervalWeights> =
            std::collections::BTreeMap::new();
        let slot = |i: u32, this: &Timeline| {
            let (t0_ns, t1_ns) = this.span(i, stop_ns);
            IntervalWeights {
                index: i,
                t0_ns,
                t1_ns,
                ..IntervalWeights::default()
            }
        };
        for kind in Kind::ALL {
            for ((i, tid, stack), weight) in self.weights.take(kind) {
                by_interval
                    .entry(i)
                    .or_insert_with(|| slot(i, self))
                    .weights[kind]
                    .push(Weight { tid, stack, weight });
            }
        }
        for (_, mut w) in by_interval {
            for (_, weights) in w.weights.iter_mut() {
                weights.sort_unstable_by_key(|w| (w.tid, w.stack));
            }
            out.push(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn feed(t: &mut Timeline, start: Option<u64>, ends: &[u64]) {
        let mut f = Feed {
            start_ns: start,
            ends: ends.to_vec(),
        };
        t.take_feed(&mut f);
    }

    #[test]
    fn samples_wait_for_the_end_of_their_interval_and_then_land_in_it() {
        let mut t = Timeline::new(0);
        feed(&mut t, Some(10 * S), &[]);
        t.sample(10 * S + 5, 1, 0);
        t.sample(11 * S + 5, 1, 0);
        t.fold_samples(&[7]);
        t.attribute(false);
        assert!(t.weights[Kind::Cpu].is_empty(), "no interval has ended");
        feed(&mut t, None, &[11 * S]);
        t.attribute(false);
        assert_eq!(t.weights[Kind::Cpu].get(&(0, 1, 7)), Some(&1));
        assert_eq!(t.open_cpu.len(), 1, "the second waits for its end");
        t.attribute(true);
        assert_eq!(t.weights[Kind::Cpu].get(&(1, 1, 7)), Some(&1));
        let mut out = Vec::new();
        t.take_intervals(12 * S, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].t0_ns, out[0].t1_ns), (0, S));
        assert_eq!((out[1].t0_ns, out[1].t1_ns), (S, 2 * S));
    }

    #[test]
    fn a_blocked_interval_is_split_in_proportion_to_the_time_in_each() {
        let mut t = Timeline::new(0);
        feed(&mut t, Some(0), &[S, 2 * S, 3 * S]);
        // From 0.5 s to 2.25 s: 0.5 s, 1 s, 0.25 s; sampled at one switch in two.
        t.block(Block {
            kind: Kind::OffCpu,
            since: S / 2,
            end: 2 * S + S / 4,
            tid: 3,
            stack: 9,
            scale: 2,
        });
        t.attribute(false);
        assert_eq!(t.weights[Kind::OffCpu].get(&(0, 3, 9)), Some(&S));
        assert_eq!(t.weights[Kind::OffCpu].get(&(1, 3, 9)), Some(&(2 * S)));
        assert_eq!(t.weights[Kind::OffCpu].get(&(2, 3, 9)), Some(&(S / 2)));
        let total: u64 = t.weights[Kind::OffCpu].values().sum();
        assert_eq!(total, 2 * (2 * S + S / 4 - S / 2));
    }

    #[test]
    fn page_fault_samples_land_in_their_interval_weighted_in_bytes() {
        let mut t = Timeline::new(0);
        t.set_mem_bytes(65_536);
        feed(&mut t, Some(0), &[S]);
        t.mem_sample(S / 2, 4, 0);
        t.mem_sample(S / 2 + 1, 4, 0);
        t.mem_sample(S + 1, 4, 1);
        t.fold_mem_samples(&[3, 5]);
        t.attribute(true);
        let mut out = Vec::new();
        t.take_intervals(2 * S, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[0].weights[Kind::Mem],
            [Weight {
                tid: 4,
                stack: 3,
                weight: 131_072
            }]
        );
        assert_eq!(
            out[1].weights[Kind::Mem],
            [Weight {
                tid: 4,
                stack: 5,
                weight: 65_536
            }]
        );
        assert!(out[0].weights[Kind::Cpu].is_empty() && out[0].weights[Kind::OffCpu].is_empty());
    }

    #[test]
    fn kept_samples_keep_their_times_from_the_start_and_add_up_to_the_weights() {
        let mut t = Timeline::new(0);
        t.keep_samples();
        feed(&mut t, Some(10 * S), &[11 * S, 12 * S]);
        for (time, tid) in [
            (10 * S + 7, 1),
            (11 * S + 9, 2),
            (10 * S + 3, 1),
            (12 * S + 1, 1),
        ] {
            t.sample(time, tid, 0);
        }
        t.fold_samples(&[4]);
        t.attribute(false);
        let mut kept = Vec::new();
        t.take_samples(&mut kept);
        let times: Vec<(u64, u32)> = kept.iter().map(|k| (k.t_ns, k.tid)).collect();
        assert_eq!(
            times,
            [(3, 1), (7, 1), (S + 9, 2)],
            "the last waits for its end"
        );
        assert!(kept.iter().all(|k| k.stack == 4));
        t.attribute(true);
        t.take_samples(&mut kept);
        assert_eq!(kept.len(), 4);
        assert_eq!(
            kept.len() as u64,
            t.weights[Kind::Cpu].values().sum::<u64>()
        );
    }

    #[test]
    fn long_waits_wait_for_the_start_and_keep_their_times_from_it() {
        let mut t = Timeline::new(0);
        feed(&mut t, Some(10 * S), &[]);
        t.long_wait(11 * S, 11 * S + LONG_WAIT_NS - 1, 7, 3);
        t.long_wait(11 * S, 12 * S, 7, 4);
        t.long_wait(9 * S, 10 * S + 5, 8, 5);
        let mut out = Vec::new();
        t.take_long_waits(false, &mut out);
        assert!(
            out.is_empty(),
            "no interval has ended: the start may still move"
        );
        feed(&mut t, None, &[13 * S]);
        t.take_long_waits(false, &mut out);
        let got: Vec<(u64, u64, u32, u32)> = out
            .iter()
            .map(|w| (w.t0_ns, w.t1_ns, w.tid, w.stack))
            .collect();
        // The one under a millisecond is not a long wait; one from before the start
        // begins at 0.
        assert_eq!(got, [(S, 2 * S, 7, 4), (0, 5, 8, 5)]);
        t.long.kept = MAX_LONG_WAITS;
        t.long_wait(14 * S, 15 * S, 7, 4);
        assert_eq!(t.long_waits_not_kept(), 1);
        t.take_long_waits(true, &mut out);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn kept_samples_stop_at_the_cap_and_count_the_rest() {
        let mut t = Timeline::new(0);
        t.keep_samples();
        t.kept.kept = MAX_KEPT_SAMPLES - 1;
        feed(&mut t, Some(0), &[S]);
        for i in 0..3 {
            t.sample(i, 1, 0);
        }
        t.fold_samples(&[0]);
        t.attribute(true);
        let mut kept = Vec::new();
        t.take_samples(&mut kept);
        assert_eq!(kept.len(), 1);
        assert_eq!(t.samples_not_kept(), 2);
        assert_eq!(
            t.weights[Kind::Cpu].get(&(0, 1, 0)),
            Some(&3),
            "the weights have them all"
        );
    }

    #[test]
    fn samples_are_not_kept_unless_asked() {
        let mut t = Timeline::new(0);
        feed(&mut t, Some(0), &[S]);
        t.sample(5, 1, 0);
        t.fold_samples(&[0]);
        t.attribute(true);
        let mut kept = Vec::new();
        t.take_samples(&mut kept);
        assert!(kept.is_empty());
    }

    #[test]
    fn samples_before_the_start_count_in_the_first_interval() {
        let mut t = Timeline::new(0);
        feed(&mut t, Some(5 * S), &[6 * S]);
        t.sample(4 * S, 2, 0);
        t.fold_samples(&[1]);
        t.attribute(false);
        assert_eq!(t.weights[Kind::Cpu].get(&(0, 2, 1)), Some(&1));
    }

    #[test]
    fn the_stack_table_hands_out_each_frame_and_prefix_once() {
        let mut interner = StackTree::new();
        let a = interner.intern("a");
        let b = interner.intern("b");
        let c = interner.intern("c");
        let mut table = StackTable::default();
        let mut chunk = StacksChunk::default();
        let ab = table.intern(&interner, &[a, b], &mut chunk).unwrap();
        let ac = table.intern(&interner, &[a, c], &mut chunk).unwrap();
        assert_eq!(table.intern(&interner, &[a, b], &mut chunk), Some(ab));
        assert_ne!(ab, ac);
        assert_eq!(chunk.frames.len(), 3);
        assert_eq!(chunk.stacks.len(), 3, "a, a;b, a;c");
        assert_eq!(table.intern(&interner, &[], &mut chunk), None);
    }
}
