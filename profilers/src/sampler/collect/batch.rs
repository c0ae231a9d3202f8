//! A batch of the collector: symbolizes what the pending stacks need, folds them into
//! each kind's tree, and hands out the per-interval stacks.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::super::frames::{Fold, known_frames, resolved_frames, tally_lines};
use super::super::shared::Snapshot;
use super::super::timeline::{Block, monotonic_ns};
use super::super::waits::Names;
use super::{Collector, MAX_OFF_STACKS};
use benchtop_profile::Kind;

impl Collector {
    /// Attributes what the batch folded to report intervals and publishes the chunk of
    /// stacks and weights for [`crate::Sampler::take_stacks`]. After the events stopped,
    /// everything is attributed, the last interval ending at the stop.
    fn hand_out_intervals(&mut self) {
        self.timeline.fold_samples(&self.slot_stacks);
        self.timeline.fold_mem_samples(&self.mem_slot_stacks);
        for c in self.closed.drain(..) {
            if let Some(stack) = self.waits.as_ref().and_then(|w| w.pair_id(&c)) {
                // Every sampled wait, whether or not its waker's stack was taken, is
                // marked on its own when long.
                self.timeline.long_wait(c.since, c.end, c.tid, stack);
                if c.wake_scale > 0 {
                    self.timeline.block(Block {
                        kind: Kind::Waits,
                        since: c.since,
                        end: c.end,
                        tid: c.tid,
                        stack,
                        scale: c.scale.saturating_mul(c.wake_scale),
                    });
                }
            }
            if let Some(&stack) = self.off_stack_ids.get(&c.stack) {
                self.timeline.block(Block {
                    kind: Kind::OffCpu,
                    since: c.since,
                    end: c.end,
                    tid: c.tid,
                    stack,
                    scale: c.scale,
                });
            }
        }
        {
            let mut feed = self
                .shared
                .feed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            self.timeline.take_feed(&mut feed);
        }
        let stop = self.stopped_ns;
        self.timeline.attribute(stop.is_some());
        self.timeline
            .take_intervals(stop.unwrap_or_else(monotonic_ns), &mut self.chunk.intervals);
        self.timeline.take_samples(&mut self.chunk.samples);
        self.timeline
            .take_long_waits(stop.is_some(), &mut self.chunk.long_waits);
        if self.chunk.is_empty() {
            return;
        }
        let mut out = self
            .shared
            .stacks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let chunk = std::mem::take(&mut self.chunk);
        if out.is_empty() {
            *out = chunk;
        } else {
            out.extend(chunk);
        }
    }

    /// Symbolizes what the pending stacks need and folds them into the trees. Each
    /// address is looked up once: stacks whose frames are all cached are folded at
    /// once; the others wait until their missing addresses are resolved.
    pub(super) fn batch(&mut self) {
        let started = Instant::now();
        let Collector {
            pending,
            deferred,
            slot_stacks,
            table,
            chunk,
            closed,
            off_stack_ids,
            resolver,
            interner,
            cpu,
            cpu_ids,
            off,
            off_frame_ids,
            mem,
            mem_frame_ids,
            mem_pending,
            mem_slot_stacks,
            mem_bytes,
            offcpu,
            off_batch,
            off_deferred,
            frames,
            translated,
            want_user,
            want_kernel,
            lines,
            waits,
            ..
        } = self;
        let unknown = interner.intern("[unknown]");
        let mut cpu_out = Fold {
            tree: cpu,
            ids: cpu_ids,
        };
        slot_stacks.clear();
        slot_stacks.resize(pending.len(), u32::MAX);
        let mut set_slot = |slot: u32, id: Option<u32>| {
            if let (Some(s), Some(id)) = (slot_stacks.get_mut(slot as usize), id) {
                *s = id;
            }
        };
        for (key, (slot, count)) in pending.drain() {
            if known_frames(resolver, interner, frames, &key, want_user, want_kernel) {
                cpu_out.add(interner, frames, translated, count);
                tally_lines(lines, resolver, &key, count);
                set_slot(slot, table.intern(interner, frames, chunk));
            } else {
                deferred.push((key, (slot, count)));
            }
        }
        // Page-fault stacks: as on-CPU ones, each sample weighing `mem_bytes`.
        let mut mem_out = Fold {
            tree: mem,
            ids: mem_frame_ids,
        };
        mem_slot_stacks.clear();
        mem_slot_stacks.resize(mem_pending.len(), u32::MAX);
        let mut mem_deferred = Vec::new();
        for (key, (slot, count)) in mem_pending.drain() {
            if known_frames(resolver, interner, frames, &key, want_user, want_kernel) {
                mem_out.add(
                    interner,
                    frames,
                    translated,
                    count.saturating_mul(*mem_bytes),
                );
                if let (Some(s), Some(id)) = (
                    mem_slot_stacks.get_mut(slot as usize),
                    table.intern(interner, frames, chunk),
                ) {
                    *s = id;
                }
            } else {
                mem_deferred.push((key, (slot, count)));
            }
        }
        let mut off_out = Fold {
            tree: off,
            ids: off_frame_ids,
        };
        offcpu.take_weights(off_batch);
        // The stacks of blocked intervals closed since the last batch go into the stack
        // table, with or without whole microseconds for the tree.
        offcpu.take_closed(closed);
        off_stack_ids.clear();
        let mut weighed: HashSet<u32> = off_batch.iter().map(|&(stack, _)| stack).collect();
        for c in closed.iter() {
            if weighed.insert(c.stack) {
                off_batch.push((c.stack, 0));
            }
        }
        for (stack, us) in off_batch.drain(..) {
            let key = offcpu.key(stack);
            if known_frames(resolver, interner, frames, key, want_user, want_kernel) {
                if us > 0 {
                    off_out.add(interner, frames, translated, us);
                }
                if let Some(id) = table.intern(interner, frames, chunk) {
                    off_stack_ids.insert(stack, id);
                }
            } else {
                off_deferred.push((stack, us));
            }
        }
        if let Some(w) = waits.as_mut() {
            let names = Names {
                resolver,
                interner,
                frames,
                translated,
            };
            w.start_batch(offcpu, closed, names, want_user, want_kernel);
        }
        if !want_user.is_empty() || !want_kernel.is_empty() {
            resolver.resolve(interner, want_user, want_kernel);
        }
        for (key, (slot, count)) in deferred.drain(..) {
            resolved_frames(resolver, interner, frames, &key, unknown);
            cpu_out.add(interner, frames, translated, count);
            tally_lines(lines, resolver, &key, count);
            set_slot(slot, table.intern(interner, frames, chunk));
        }
        for (key, (slot, count)) in mem_deferred {
            resolved_frames(resolver, interner, frames, &key, unknown);
            mem_out.add(
                interner,
                frames,
                translated,
                count.saturating_mul(*mem_bytes),
            );
            if let (Some(s), Some(id)) = (
                mem_slot_stacks.get_mut(slot as usize),
                table.intern(interner, frames, chunk),
            ) {
                *s = id;
            }
        }
        for (stack, us) in off_deferred.drain(..) {
            resolved_frames(resolver, interner, frames, offcpu.key(stack), unknown);
            if us > 0 {
                off_out.add(interner, frames, translated, us);
            }
            if let Some(id) = table.intern(interner, frames, chunk) {
                off_stack_ids.insert(stack, id);
            }
        }
        if let Some(w) = waits.as_mut() {
            let names = Names {
                resolver,
                interner,
                frames,
                translated,
            };
            w.fold(offcpu, names, unknown, table, chunk);
        }
        self.lines
            .take_into(&self.resolver, &self.interner, &mut self.chunk);
        self.hand_out_intervals();
        self.offcpu.compact(MAX_OFF_STACKS);
        self.batches += 1;
        // Two batches after an exit every buffer has been read past its last sample.
        let before = self.batches.saturating_sub(1);
        self.resolver.end_batch(before);
        let names = &mut self.names;
        if let Some(u) = &mut self.unwinder {
            u.end_batch(before);
        }
        let offcpu = &mut self.offcpu;
        self.exited_threads.retain(|&(tid, at)| {
            let keep = at >= before;
            if !keep {
                names.remove(tid);
                offcpu.forget(tid);
            }
            keep
        });

        if self.shared.snapshot_wanted.swap(false, Ordering::Relaxed) {
            let snapshot = Snapshot {
                profiles: self.profiles(|t| t.clone()),
                lines: self.lines.all.clone(),
                batches: self.batches,
            };
            *self
                .shared
                .snapshot
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(snapshot);
        }
        let ns = started.elapsed().as_nanos() as u64;
        let s = &self.shared;
        s.batches.store(self.batches, Ordering::Relaxed);
        s.pending.store(0, Ordering::Relaxed);
        s.symbolize_ns.fetch_add(ns, Ordering::Relaxed);
        s.last_batch_ns.store(ns, Ordering::Relaxed);
        s.max_batch_ns.fetch_max(ns, Ordering::Relaxed);
    }
}
