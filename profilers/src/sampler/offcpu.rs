//! Off-CPU time: switch-out and switch-in records of each thread paired into blocked
//! intervals, each weighted by its length and attributed to the stack captured when the
//! thread was switched out.
//!
//! What the kernel gives us, per switch of a sampled thread on a CPU, in that CPU's ring
//! buffer and in this order:
//!
//! 1. with kernel sampling permitted, a sample of the software `context-switches` event
//!    (period 1) taken in the context of the thread going out: its tid, TIME and
//!    callchain (kernel frames from `schedule` down to the syscall, then user frames);
//! 2. a `PERF_RECORD_SWITCH` switch-out record of that thread, with
//!    `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT` when it was still runnable (preempted).
//!
//! The thread's next switch-in record, on whichever CPU it wakes, closes the interval.
//! The sample and its switch-out record are consecutive in one buffer, so the sample is
//! held per CPU until the record comes ([`OffCpu::take_stash`]). Switch-in records come
//! from other CPUs' buffers, read in any order, so switch events are queued and applied
//! in time order once every buffer has been read past them: after each round that reads
//! every buffer, events up to the largest time seen in the *previous* round are safe
//! (a record of that time was already written then, so everything before it was too).
//! This is `perf`'s own ordering rule (its FINISHED_ROUND).
//!
//! Preempted switch-outs are runnable time, not blocked time: like `perf sched` and
//! `offcputime` with a blocked-state filter, they are left out of the off-CPU profile
//! and only counted ([`OffCpu::preempted_ns`]). Intervals still open when recording
//! stops (a thread blocked at the end) are not counted: their length is unknown.
//! A lost record may have been a switch-in: open intervals are dropped at a loss
//! rather than stretched over on-CPU time.
//!
//! Waits: with the `sched:sched_waking` tracepoint, each wake-up a followed thread
//! performs is queued with the others ([`OffCpu::on_wake`]), its waker's stack interned
//! like a blocked stack. A blocked interval takes the last wake-up of its thread between
//! its switch-out and its switch-in; without one it closes with [`NO_WAKER`]. Each
//! closed interval then also weighs on its (blocked stack, waker stack) pair.

use std::collections::HashMap;

/// The stack of a preempted switch-out: none is kept.
pub(crate) const NO_STACK: u32 = u32::MAX;
/// The waker of a blocked interval whose wake-up was not seen.
pub(crate) const NO_WAKER: u32 = u32::MAX;
/// A switch-out's samples older than this are not its stack (its own sample was lost):
/// the sample and the record are written back to back with interrupts off.
const MAX_STASH_AGE_NS: u64 = 1_000_000;
/// A record of a wake-up of a thread this close to another is the same wake-up seen by
/// two events (each stamps its own time).
const SAME_WAKE_NS: u64 = 100_000;
/// A wake-up of a thread not blocked yet, this little before its switch-out, ended that
/// blocked interval: the waker's CPU traces the wake-up while the sleeper's CPU is still
/// switching it out, and the switch record is stamped after.
const EARLY_WAKE_NS: u64 = 1_000_000;
/// Threads with a wake-up held for their next switch-out; past it they are forgotten
/// (bounded memory whatever the wake-up rate).
const MAX_EARLY_WAKES: usize = 1 << 16;
/// CPUs with a stash slot; samples on higher-numbered CPUs (none on real machines) go
/// without a stack rather than grow the table.
const MAX_CPUS: usize = 1 << 14;

/// Which event saw a wake-up. One wake-up can be seen by several (they stamp their own
/// times, microseconds apart): the one that says more is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum WakeSource {
    /// A CPU-wide event: any process, no stack; the interval weighs its own length.
    Wide,
    /// A followed thread's event that records every wake-up without a stack, beside one
    /// that takes a stack at one in N: the interval is left out of the waits (the
    /// stacked ones stand for it).
    Every,
    /// A followed thread's event with the waker's stack, at one wake-up in N: the
    /// interval weighs N times its length.
    Stack,
}

/// What happened to a thread, queued until it can be applied in time order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Switched out; `stack` indexes the interned keys; the interval stands for
    /// `scale` switches (its sample's period: one in every `scale` switches is sampled).
    Out {
        stack: u32,
        preempt: bool,
        scale: u32,
    },
    /// Switched in.
    In,
    /// Woken by the thread (or interrupt) whose stack `waker` indexes, as `source` saw it.
    Wake { waker: u32, source: WakeSource },
    /// Records were lost: an interval open now may have lost its end.
    Lost,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    time: u64,
    tid: u32,
    kind: Kind,
}

/// A thread switched out and not yet back.
#[derive(Debug, Clone, Copy)]
struct Blocked {
    since: u64,
    stack: u32,
    preempt: bool,
    scale: u32,
    /// The last wake-up seen since the switch-out, when, and which event saw it.
    waker: u32,
    woken_at: u64,
    source: WakeSource,
}

/// The last off-CPU sample of a CPU, waiting for its switch-out record.
#[derive(Debug, Clone, Copy)]
struct Stash {
    tid: u32,
    time: u64,
    stack: u32,
    scale: u32,
}

/// Off-CPU state of one sampler; see the module docs.
///
/// Stacks are raw keys (the collector's layout: names, pid, kernel and user addresses)
/// interned to indices, so that a thread blocking a thousand times at the same place
/// costs one key. Weights are kept in nanoseconds and handed out in whole microseconds.
#[derive(Debug, Default)]
pub(crate) struct OffCpu {
    keys: Vec<Box<[u64]>>,
    index: HashMap<Box<[u64]>, u32>,
    /// Blocked nanoseconds per stack not handed out yet.
    weight_ns: Vec<u64>,
    /// Keys interned since the last [`OffCpu::take_weights`].
    new_keys: usize,
    stash: Vec<Option<Stash>>,
    queue: Vec<Event>,
    /// Events up to this time can be applied.
    watermark: u64,
    /// The largest time seen this round.
    round_max: u64,
    blocked: HashMap<u32, Blocked>,
    /// Blocked time paired so far (voluntary switch-outs), ns.
    pub blocked_ns: u64,
    /// Runnable time after preemption paired so far, ns (not in the profile).
    pub preempted_ns: u64,
    /// Closed blocked intervals.
    pub intervals: u64,
    /// Blocked intervals closed since the last [`OffCpu::take_closed`], for the
    /// per-interval stacks.
    closed: Vec<Closed>,
    /// Wake-ups are recorded: closed intervals also weigh on their waker pairs.
    waits: bool,
    /// The last wake-up of each thread that was not blocked when it came, until its next
    /// switch-out (or switch-in): (time, waker, source).
    early: HashMap<u32, (u64, u32, WakeSource)>,
    /// The waker's stack is taken at one wake-up in this many ([`WakeSource::Stack`]).
    wake_every: u32,
    /// Blocked nanoseconds per (blocked stack, waker stack or [`NO_WAKER`]) not handed
    /// out yet.
    wait_ns: HashMap<(u32, u32), u64>,
    /// Closed blocked intervals whose wake-up was not seen, and their blocked time (ns).
    pub wakers_not_seen: u64,
    pub not_seen_ns: u64,
}

/// A closed blocked interval: `[since, end)` of `tid`, on stack `stack` (an index from
/// [`OffCpu::intern`]), standing for `scale` switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closed {
    pub since: u64,
    pub end: u64,
    pub tid: u32,
    pub stack: u32,
    pub scale: u32,
    /// The waker's stack, [`NO_WAKER`] when not seen (or waits are not recorded).
    pub waker: u32,
    /// What the interval weighs in the waits, times its length: 0 when left out (a
    /// wake-up recorded without its stack while stacks are taken one in N).
    pub wake_scale: u32,
}

impl OffCpu {
    /// Off-CPU state that also joins blocked intervals to their wake-ups, whose waker
    /// stacks are taken at one wake-up in `wake_every`.
    pub fn with_waits(wake_every: u32) -> OffCpu {
        OffCpu {
            waits: true,
            wake_every: wake_every.max(1),
            ..OffCpu::default()
        }
    }

    /// The index of `key`, interning it (one allocation the first time only).
    pub fn intern(&mut self, key: &[u64]) -> u32 {
        if let Some(&i) = self.index.get(key) {
            return i;
        }
        let i = self.keys.len() as u32;
        let boxed: Box<[u64]> = key.into();
        self.keys.push(boxed.clone());
        self.index.insert(boxed, i);
        self.weight_ns.push(0);
        self.new_keys += 1;
        i
    }

    /// The key of an index handed out since the last compaction.
    pub fn key(&self, stack: u32) -> &[u64] {
        self.keys.get(stack as usize).map_or(&[], |k| k)
    }

    /// Distinct stacks held.
    #[cfg(test)]
    pub fn stacks(&self) -> usize {
        self.keys.len()
    }

    /// Stacks interned since the last [`OffCpu::take_weights`].
    pub fn new_stacks(&self) -> usize {
        self.new_keys
    }

    /// An off-CPU sample of `tid` on `cpu` with its raw stack `key`, taken at one in
    /// every `scale` switches (the sample's period).
    pub fn on_sample(&mut self, cpu: u32, tid: u32, time: u64, key: &[u64], scale: u32) {
        let cpu = cpu as usize;
        if cpu >= MAX_CPUS {
            return;
        }
        let stack = self.intern(key);
        if self.stash.len() <= cpu {
            self.stash.resize(cpu + 1, None);
        }
        self.stash[cpu] = Some(Stash {
            tid,
            time,
            stack,
            scale: scale.max(1),
        });
    }

    /// The stack sampled for the switch-out of `tid` on `cpu` at `time` and its scale,
    /// if its sample was read (it comes just before the record). The slot is emptied
    /// either way.
    pub fn take_stash(&mut self, cpu: u32, tid: u32, time: u64) -> Option<(u32, u32)> {
        let s = self.stash.get_mut(cpu as usize)?.take()?;
        (s.tid == tid && s.time <= time && time - s.time <= MAX_STASH_AGE_NS)
            .then_some((s.stack, s.scale))
    }

    /// `tid` was switched out at `time`; `stack` is an index from [`OffCpu::intern`];
    /// the interval weighs `scale` times its length.
    pub fn on_switch_out(&mut self, tid: u32, time: u64, preempt: bool, stack: u32, scale: u32) {
        let scale = scale.max(1);
        self.push(
            time,
            tid,
            Kind::Out {
                stack,
                preempt,
                scale,
            },
        );
    }

    /// `tid` was switched in at `time`.
    pub fn on_switch_in(&mut self, tid: u32, time: u64) {
        self.push(time, tid, Kind::In);
    }

    /// The waker's stack is taken at one wake-up in this many.
    pub fn wake_every(&self) -> u32 {
        self.wake_every
    }

    /// `tid` was woken at `time` by the waker whose stack `waker` indexes, as `source`
    /// saw it.
    pub fn on_wake(&mut self, tid: u32, time: u64, waker: u32, source: WakeSource) {
        self.push(time, tid, Kind::Wake { waker, source });
    }

    /// Records were lost; the loss was reported at `time`.
    pub fn on_lost(&mut self, time: u64) {
        self.push(time, 0, Kind::Lost);
    }

    fn push(&mut self, time: u64, tid: u32, kind: Kind) {
        self.round_max = self.round_max.max(time);
        self.queue.push(Event { time, tid, kind });
    }

    /// Every buffer has been read once more: applies the events that are now in order.
    pub fn end_round(&mut self) {
        let watermark = self.watermark;
        self.apply_until(Some(watermark));
        self.watermark = self.round_max;
    }

    /// Recording stopped and every buffer was read to its end: applies everything.
    pub fn flush(&mut self) {
        self.apply_until(None);
    }

    fn apply_until(&mut self, watermark: Option<u64>) {
        if self.queue.is_empty() {
            return;
        }
        let mut queue = std::mem::take(&mut self.queue);
        // Stable: events of one buffer with equal times keep their order.
        queue.sort_by_key(|e| e.time);
        let cut = match watermark {
            Some(w) => queue.partition_point(|e| e.time <= w),
            None => queue.len(),
        };
        for e in queue.drain(..cut) {
            self.apply(e);
        }
        self.queue = queue;
    }

    fn apply(&mut self, e: Event) {
        match e.kind {
            Kind::Out {
                stack,
                preempt,
                scale,
            } => {
                let (woken_at, waker, source) = self
                    .early
                    .remove(&e.tid)
                    .filter(|&(t, ..)| e.time.saturating_sub(t) <= EARLY_WAKE_NS)
                    .unwrap_or((0, NO_WAKER, WakeSource::Wide));
                // An earlier switch-out without its switch-in (lost) is replaced.
                self.blocked.insert(
                    e.tid,
                    Blocked {
                        since: e.time,
                        stack,
                        preempt,
                        scale,
                        waker,
                        woken_at,
                        source,
                    },
                );
            }
            Kind::Wake { waker, source } => {
                let seen_twice = |w: u32, at: u64, by: WakeSource| {
                    w != NO_WAKER && e.time.saturating_sub(at) <= SAME_WAKE_NS && source < by
                };
                if let Some(b) = self.blocked.get_mut(&e.tid) {
                    if !seen_twice(b.waker, b.woken_at, b.source) {
                        (b.waker, b.woken_at, b.source) = (waker, e.time, source);
                    }
                } else if self.waits {
                    if self.early.len() >= MAX_EARLY_WAKES {
                        self.early.clear();
                    }
                    let held = self.early.entry(e.tid).or_insert((0, NO_WAKER, source));
                    if !seen_twice(held.1, held.0, held.2) {
                        *held = (e.time, waker, source);
                    }
                }
            }
            Kind::In => {
                self.early.remove(&e.tid);
                // No switch-out seen: blocked since before recording started.
                let Some(b) = self.blocked.remove(&e.tid) else {
                    return;
                };
                let ns = e
                    .time
                    .saturating_sub(b.since)
                    .saturating_mul(u64::from(b.scale));
                if b.preempt {
                    self.preempted_ns = self.preempted_ns.saturating_add(ns);
                } else if let Some(w) = self.weight_ns.get_mut(b.stack as usize) {
                    *w = w.saturating_add(ns);
                    self.blocked_ns = self.blocked_ns.saturating_add(ns);
                    self.intervals += 1;
                    let wake_scale = match (b.waker, b.source) {
                        (NO_WAKER, _) | (_, WakeSource::Wide) => 1,
                        (_, WakeSource::Every) => 0,
                        (_, WakeSource::Stack) => self.wake_every.max(1),
                    };
                    self.closed.push(Closed {
                        since: b.since,
                        end: e.time,
                        tid: e.tid,
                        stack: b.stack,
                        scale: b.scale,
                        waker: b.waker,
                        wake_scale,
                    });
                    if self.waits {
                        if b.waker == NO_WAKER {
                            self.wakers_not_seen += 1;
                            self.not_seen_ns = self.not_seen_ns.saturating_add(ns);
                        }
                        if wake_scale > 0 {
                            let w = self.wait_ns.entry((b.stack, b.waker)).or_insert(0);
                            *w = w.saturating_add(ns.saturating_mul(u64::from(wake_scale)));
                        }
                    }
                }
            }
            Kind::Lost => {
                self.blocked.clear();
                self.early.clear();
            }
        }
    }

    /// Threads that exited: their last switch-out has no switch-in.
    pub fn forget(&mut self, tid: u32) {
        self.blocked.remove(&tid);
        self.early.remove(&tid);
    }

    /// Moves the whole microseconds of every stack's weight into `out` as
    /// (stack, microseconds), keeping the remainders for later.
    pub fn take_weights(&mut self, out: &mut Vec<(u32, u64)>) {
        for (i, w) in self.weight_ns.iter_mut().enumerate() {
            let us = *w / 1000;
            if us > 0 {
                out.push((i as u32, us));
                *w -= us * 1000;
            }
        }
        self.new_keys = 0;
    }

    /// Moves the whole microseconds of every (blocked stack, waker stack) pair into `out`
    /// as (stack, waker, microseconds), keeping the remainders for later.
    pub fn take_wait_weights(&mut self, out: &mut Vec<(u32, u32, u64)>) {
        for (&(stack, waker), w) in &mut self.wait_ns {
            let us = *w / 1000;
            if us > 0 {
                out.push((stack, waker, us));
                *w -= us * 1000;
            }
        }
        self.wait_ns.retain(|_, w| *w > 0);
    }

    /// The blocked intervals closed since the last call; their stack indices hold until
    /// the next [`OffCpu::compact`].
    pub fn take_closed(&mut self, out: &mut Vec<Closed>) {
        out.append(&mut self.closed);
    }

    /// Past `max` stacks, keeps only those an open interval, a queued switch-out or a
    /// stash still points to (remainders under a microsecond of the others are
    /// dropped). Indices handed out before are invalid after.
    pub fn compact(&mut self, max: usize) {
        if self.keys.len() <= max {
            return;
        }
        let mut remap = vec![u32::MAX; self.keys.len()];
        let mut keys = Vec::new();
        let mut weight_ns = Vec::new();
        let old_keys = std::mem::take(&mut self.keys);
        let old_weights = std::mem::take(&mut self.weight_ns);
        let mut keep = |stack: &mut u32| {
            let Some(slot) = remap.get_mut(*stack as usize) else {
                return;
            };
            if *slot == u32::MAX {
                *slot = keys.len() as u32;
                keys.push(old_keys[*stack as usize].clone());
                weight_ns.push(old_weights[*stack as usize]);
            }
            *stack = *slot;
        };
        for b in self.blocked.values_mut() {
            keep(&mut b.stack);
            if b.waker != NO_WAKER {
                keep(&mut b.waker);
            }
        }
        for (_, waker, _) in self.early.values_mut() {
            if *waker != NO_WAKER {
                keep(waker);
            }
        }
        for e in &mut self.queue {
            match &mut e.kind {
                Kind::Out { stack, .. } => keep(stack),
                Kind::Wake { waker, .. } => keep(waker),
                Kind::In | Kind::Lost => {}
            }
        }
        for s in self.stash.iter_mut().flatten() {
            keep(&mut s.stack);
        }
        // Remainders under a microsecond whose stacks were dropped go with them.
        self.wait_ns = std::mem::take(&mut self.wait_ns)
            .into_iter()
            .filter_map(|((stack, waker), ns)| {
                let stack = *remap.get(stack as usize).filter(|&&s| s != u32::MAX)?;
                let waker = match waker {
                    NO_WAKER => NO_WAKER,
                    w => *remap.get(w as usize).filter(|&&s| s != u32::MAX)?,
                };
                Some(((stack, waker), ns))
            })
            .collect();
        self.index = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), i as u32))
            .collect();
        self.keys = keys;
        self.weight_ns = weight_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn weights(o: &mut OffCpu) -> Vec<(Vec<u64>, u64)> {
        let mut out = Vec::new();
        o.take_weights(&mut out);
        let mut named: Vec<(Vec<u64>, u64)> = out
            .into_iter()
            .map(|(i, us)| (o.key(i).to_vec(), us))
            .collect();
        named.sort();
        named
    }

    /// A switch-out of `tid` on `cpu` at `t` with its sample just before.
    fn block(o: &mut OffCpu, cpu: u32, tid: u32, t: u64, key: &[u64]) {
        o.on_sample(cpu, tid, t - 100, key, 1);
        let (stack, scale) = o.take_stash(cpu, tid, t).expect("the sample just read");
        o.on_switch_out(tid, t, false, stack, scale);
    }

    #[test]
    fn an_interval_sampled_at_one_in_n_switches_weighs_n_times_its_length() {
        let mut o = OffCpu::default();
        o.on_sample(0, 7, 10 * MS - 100, &[1, 2], 4);
        let (stack, scale) = o.take_stash(0, 7, 10 * MS).expect("sampled");
        assert_eq!(scale, 4);
        o.on_switch_out(7, 10 * MS, false, stack, scale);
        o.on_switch_in(7, 11 * MS);
        o.flush();
        assert_eq!(weights(&mut o), [(vec![1, 2], 4_000)]);
        assert_eq!(o.blocked_ns, 4 * MS);
    }

    #[test]
    fn a_blocked_interval_weighs_its_length_on_the_stack_sampled_at_switch_out() {
        let mut o = OffCpu::default();
        block(&mut o, 0, 7, 10 * MS, &[1, 2, 3]);
        o.on_switch_in(7, 13 * MS + 500);
        o.flush();
        assert_eq!(weights(&mut o), [(vec![1, 2, 3], 3_000)]);
        assert_eq!((o.blocked_ns, o.intervals), (3 * MS + 500, 1));
        // The remainder under a microsecond waits for the next interval.
        block(&mut o, 1, 7, 20 * MS, &[1, 2, 3]);
        o.on_switch_in(7, 20 * MS + 700);
        o.flush();
        assert_eq!(weights(&mut o), [(vec![1, 2, 3], 1)]);
    }

    #[test]
    fn switch_ins_read_before_their_switch_outs_pair_in_time_order() {
        // Thread 7 blocks on CPU 0 at 1 ms, wakes on CPU 1 at 2 ms, runs, blocks on CPU 1
        // at 3 ms and wakes on CPU 0 at 5 ms. CPU 0's buffer is read first: its switch-in
        // at 5 ms comes before CPU 1's records of 2 and 3 ms.
        let mut o = OffCpu::default();
        block(&mut o, 0, 7, MS, &[10]);
        o.on_switch_in(7, 5 * MS);
        o.on_switch_in(7, 2 * MS);
        block(&mut o, 1, 7, 3 * MS, &[11]);
        o.end_round();
        o.end_round();
        assert_eq!(weights(&mut o), [(vec![10], 1_000), (vec![11], 2_000)]);
        // Read out of order and paired naively, [10] would have weighed 4 ms.
        assert_eq!(o.blocked_ns, 3 * MS);
    }

    #[test]
    fn events_after_the_previous_rounds_latest_time_wait_for_the_next_round() {
        let mut o = OffCpu::default();
        block(&mut o, 0, 7, MS, &[10]);
        o.on_switch_in(7, 2 * MS);
        // First round: nothing is known to be complete yet.
        o.end_round();
        assert_eq!(o.intervals, 0);
        // Second round: everything up to 2 ms is.
        block(&mut o, 0, 7, 4 * MS, &[10]);
        o.end_round();
        assert_eq!(o.intervals, 1);
        // The switch-in of the second interval arrives; it is applied one round later.
        o.on_switch_in(7, 6 * MS);
        o.end_round();
        assert_eq!(o.intervals, 1);
        o.end_round();
        assert_eq!(o.intervals, 2);
        assert_eq!(weights(&mut o), [(vec![10], 3_000)]);
    }

    #[test]
    fn preempted_time_is_counted_apart_and_not_weighed() {
        let mut o = OffCpu::default();
        o.on_sample(0, 7, MS - 10, &[10], 1);
        let (stack, _) = o.take_stash(0, 7, MS).expect("sampled");
        o.on_switch_out(7, MS, true, stack, 1);
        o.on_switch_in(7, 3 * MS);
        o.flush();
        assert!(weights(&mut o).is_empty());
        assert_eq!((o.preempted_ns, o.blocked_ns, o.intervals), (2 * MS, 0, 0));
    }

    #[test]
    fn a_switch_in_without_a_switch_out_is_time_blocked_before_recording_and_ignored() {
        let mut o = OffCpu::default();
        o.on_switch_in(7, 5 * MS);
        o.flush();
        assert!(weights(&mut o).is_empty());
        assert_eq!(o.blocked_ns, 0);
    }

    #[test]
    fn a_loss_drops_open_intervals_instead_of_stretching_them() {
        let mut o = OffCpu::default();
        block(&mut o, 0, 7, MS, &[10]);
        // Its switch-in, a run and the next switch-out were lost.
        o.on_lost(4 * MS);
        o.on_switch_in(7, 9 * MS);
        block(&mut o, 0, 8, 2 * MS, &[20]);
        o.on_switch_in(8, 3 * MS);
        o.flush();
        assert_eq!(weights(&mut o), [(vec![20], 1_000)]);
    }

    #[test]
    fn a_stale_or_foreign_sample_is_not_taken_for_a_switch_outs_stack() {
        let mut o = OffCpu::default();
        o.on_sample(0, 7, MS, &[10], 1);
        // Another thread's switch-out on that CPU.
        assert_eq!(o.take_stash(0, 8, MS + 10), None);
        // The slot was emptied: a late record of thread 7 gets nothing either.
        assert_eq!(o.take_stash(0, 7, MS + 20), None);
        o.on_sample(0, 7, MS, &[10], 1);
        assert_eq!(o.take_stash(0, 7, MS + 2 * MAX_STASH_AGE_NS), None);
        o.on_sample(1, 7, MS, &[10], 1);
        assert_eq!(o.take_stash(0, 7, MS + 10), None, "other CPU");
        assert!(o.take_stash(1, 7, MS + 10).is_some());
        assert_eq!(o.take_stash(99_999, 7, MS), None);
    }

    fn wait_weights(o: &mut OffCpu) -> Vec<(Vec<u64>, Vec<u64>, u64)> {
        let mut out = Vec::new();
        o.take_wait_weights(&mut out);
        let mut named: Vec<_> = out
            .into_iter()
            .map(|(s, w, us)| (o.key(s).to_vec(), o.key(w).to_vec(), us))
            .collect();
        named.sort();
        named
    }

    #[test]
    fn a_blocked_interval_takes_the_last_wake_up_between_its_switch_out_and_in() {
        let mut o = OffCpu::with_waits(1);
        let (a, b, early) = (o.intern(&[100]), o.intern(&[200]), o.intern(&[300]));
        // A wake-up before the switch-out is of an earlier wait.
        o.on_wake(7, MS / 2, early, WakeSource::Stack);
        block(&mut o, 0, 7, MS, &[10]);
        o.on_wake(7, 2 * MS, a, WakeSource::Stack);
        // Woken again (a spurious wake-up, or a second waker) before it ran: the last one
        // let it go.
        o.on_wake(7, 3 * MS, b, WakeSource::Stack);
        o.on_switch_in(7, 4 * MS);
        // Thread 8's wake-up was not seen.
        block(&mut o, 1, 8, MS, &[20]);
        o.on_switch_in(8, 2 * MS);
        o.flush();
        let mut closed = Vec::new();
        o.take_closed(&mut closed);
        let wakers: Vec<_> = closed.iter().map(|c| (c.tid, c.waker)).collect();
        assert_eq!(wakers, [(8, NO_WAKER), (7, b)]);
        o.forget(8);
        let [ten, twenty] = [o.intern(&[10]), o.intern(&[20])];
        let mut out = Vec::new();
        o.take_wait_weights(&mut out);
        out.sort();
        assert_eq!(out, [(ten, b, 3_000), (twenty, NO_WAKER, 1_000)]);
        assert_eq!((o.wakers_not_seen, o.not_seen_ns), (1, MS));
        // The plain off-CPU weights are the same as without waits.
        assert_eq!(weights(&mut o), [(vec![10], 3_000), (vec![20], 1_000)]);
    }

    #[test]
    fn wake_ups_read_out_of_order_join_in_time_order_and_without_waits_weigh_nothing() {
        let mut o = OffCpu::with_waits(1);
        let w = o.intern(&[100]);
        // CPU 1's buffer, read first, has the switch-in; CPU 0's the wake-up before it.
        block(&mut o, 0, 7, MS, &[10]);
        o.on_switch_in(7, 3 * MS);
        o.on_wake(7, 2 * MS, w, WakeSource::Stack);
        o.flush();
        assert_eq!(wait_weights(&mut o), [(vec![10], vec![100], 2_000)]);
        let mut plain = OffCpu::default();
        let w = plain.intern(&[100]);
        block(&mut plain, 0, 7, MS, &[10]);
        plain.on_wake(7, 2 * MS, w, WakeSource::Stack);
        plain.on_switch_in(7, 3 * MS);
        plain.flush();
        assert!(wait_weights(&mut plain).is_empty());
        assert_eq!(plain.wakers_not_seen, 0);
    }

    #[test]
    fn a_cpu_wide_record_of_a_wake_up_already_seen_with_its_stack_does_not_replace_it() {
        let mut o = OffCpu::with_waits(1);
        let (stacked, wide, timer) = (o.intern(&[100]), o.intern(&[200]), o.intern(&[300]));
        block(&mut o, 0, 7, MS, &[10]);
        // The waker's own event, then the CPU-wide one 3 µs later: one wake-up.
        o.on_wake(7, 2 * MS, stacked, WakeSource::Stack);
        o.on_wake(7, 2 * MS + 3_000, wide, WakeSource::Wide);
        o.on_switch_in(7, 3 * MS);
        // A wake-up only a CPU-wide event saw (a timer while the CPU idled).
        block(&mut o, 0, 7, 4 * MS, &[10]);
        o.on_wake(7, 5 * MS, timer, WakeSource::Wide);
        o.on_switch_in(7, 6 * MS);
        // A later wake-up by another waker, seen CPU-wide: the last one counts.
        block(&mut o, 0, 7, 7 * MS, &[10]);
        o.on_wake(7, 8 * MS, stacked, WakeSource::Stack);
        o.on_wake(7, 8 * MS + 2 * SAME_WAKE_NS, wide, WakeSource::Wide);
        o.on_switch_in(7, 9 * MS);
        o.flush();
        let mut closed = Vec::new();
        o.take_closed(&mut closed);
        let wakers: Vec<u32> = closed.iter().map(|c| c.waker).collect();
        assert_eq!(wakers, [stacked, timer, wide]);
    }

    #[test]
    fn with_waker_stacks_one_in_n_the_stacked_intervals_stand_for_the_others() {
        let mut o = OffCpu::with_waits(4);
        let (stacked, bare, irq) = (o.intern(&[100]), o.intern(&[101]), o.intern(&[300]));
        // Four waits of 1 ms ended by a followed thread: all four recorded without a
        // stack, the first also with its stack (its record a few µs later).
        for i in 0..4u64 {
            let t = 10 * i * MS;
            block(&mut o, 0, 7, t + MS, &[10]);
            o.on_wake(7, t + 2 * MS, bare, WakeSource::Every);
            if i == 0 {
                o.on_wake(7, t + 2 * MS + 2_000, stacked, WakeSource::Stack);
            }
            o.on_switch_in(7, t + 2 * MS + 10_000);
        }
        // A stacked record first and the bare one after it: the stack is kept.
        block(&mut o, 0, 7, 50 * MS, &[10]);
        o.on_wake(7, 51 * MS, stacked, WakeSource::Stack);
        o.on_wake(7, 51 * MS + 1_000, bare, WakeSource::Every);
        o.on_switch_in(7, 51 * MS + 10_000);
        // An interrupt's wake-up, seen CPU-wide: its own length.
        block(&mut o, 0, 7, 60 * MS, &[10]);
        o.on_wake(7, 62 * MS, irq, WakeSource::Wide);
        o.on_switch_in(7, 62 * MS);
        o.flush();
        let mut closed = Vec::new();
        o.take_closed(&mut closed);
        let scales: Vec<(u32, u32)> = closed.iter().map(|c| (c.waker, c.wake_scale)).collect();
        assert_eq!(
            scales,
            [
                (stacked, 4),
                (bare, 0),
                (bare, 0),
                (bare, 0),
                (stacked, 4),
                (irq, 1)
            ]
        );
        // Waits: the two stacked intervals (1.01 ms each) ×4, the interrupt's 2 ms.
        assert_eq!(
            wait_weights(&mut o),
            [(vec![10], vec![100], 8_080), (vec![10], vec![300], 2_000)]
        );
        // Off-CPU keeps every interval at its own length.
        assert_eq!(weights(&mut o), [(vec![10], 5 * 1_010 + 2_000)]);
    }

    #[test]
    fn a_wake_up_stamped_just_before_the_switch_out_it_ends_is_that_intervals() {
        let mut o = OffCpu::with_waits(1);
        let (w, stale, old) = (o.intern(&[100]), o.intern(&[200]), o.intern(&[300]));
        // The waker's CPU traced the wake-up 5 µs before the sleeper's switch record.
        o.on_wake(7, 10 * MS - 5_000, w, WakeSource::Stack);
        block(&mut o, 0, 7, 10 * MS, &[10]);
        o.on_switch_in(7, 11 * MS);
        // A wake-up 2 ms before a switch-out is not its.
        o.on_wake(7, 18 * MS, old, WakeSource::Stack);
        block(&mut o, 0, 7, 20 * MS, &[10]);
        o.on_switch_in(7, 21 * MS);
        // Nor one that a switch-in came after (it ended an earlier wait).
        o.on_wake(8, 29 * MS, stale, WakeSource::Stack);
        o.on_switch_in(8, 29 * MS + 100);
        block(&mut o, 0, 8, 29 * MS + 500, &[20]);
        o.on_switch_in(8, 30 * MS);
        o.flush();
        let mut closed = Vec::new();
        o.take_closed(&mut closed);
        let wakers: Vec<(u32, u32)> = closed.iter().map(|c| (c.tid, c.waker)).collect();
        assert_eq!(wakers, [(7, w), (7, NO_WAKER), (8, NO_WAKER)]);
    }

    #[test]
    fn compaction_keeps_wakers_still_pointed_to_and_their_pairs() {
        let mut o = OffCpu::with_waits(1);
        for i in 0..50 {
            o.intern(&[1_000 + i]);
        }
        block(&mut o, 0, 7, MS, &[10]);
        let w = o.intern(&[100]);
        o.on_wake(7, 2 * MS, w, WakeSource::Stack);
        o.end_round();
        o.end_round();
        // A wake-up still queued, of another waker.
        let w2 = o.intern(&[200]);
        o.on_wake(7, 3 * MS, w2, WakeSource::Stack);
        o.compact(10);
        o.on_switch_in(7, 4 * MS + 500);
        o.flush();
        assert_eq!(wait_weights(&mut o), [(vec![10], vec![200], 3_000)]);
        // Remainders under a microsecond of pairs whose stacks go are dropped with them.
        block(&mut o, 0, 8, 10 * MS, &[30]);
        o.on_switch_in(8, 10 * MS + 400);
        o.flush();
        o.compact(0);
        assert!(wait_weights(&mut o).is_empty());
    }

    #[test]
    fn compaction_keeps_the_stacks_still_pointed_to() {
        let mut o = OffCpu::default();
        for i in 0..100 {
            block(&mut o, 0, 7, (i + 1) * 10 * MS, &[i]);
            o.on_switch_in(7, (i + 1) * 10 * MS + MS);
        }
        // Thread 8 blocked with a stack of its own, still open.
        block(&mut o, 1, 8, 2_000 * MS, &[500]);
        o.end_round();
        o.end_round();
        assert_eq!(weights(&mut o).len(), 100);
        // A switch-out still queued.
        block(&mut o, 1, 9, 2_001 * MS, &[600]);
        o.compact(10);
        assert!(o.stacks() <= 2, "{} stacks left", o.stacks());
        o.on_switch_in(8, 2_003 * MS);
        o.on_switch_in(9, 2_005 * MS);
        o.flush();
        assert_eq!(weights(&mut o), [(vec![500], 3_000), (vec![600], 4_000)]);
        // Interning again after compaction finds the kept keys.
        let kept = o.intern(&[500]);
        assert_eq!(o.key(kept), [500]);
    }
}
