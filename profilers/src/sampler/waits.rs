//! The waits profile: blocked time by what woke it. The off-CPU pairing
//! ([`super::offcpu`]) joins each blocked interval to the last wake-up of its thread;
//! this module folds the joined pairs into the waits tree, each stack the blocked
//! thread's (root first), then `— woken by —` ([`WOKEN_BY`]), then the waker's process, thread and stack
//! (root first too, so that the waker's own callers come first and the call that woke
//! ends the line), weighted by blocked time in microseconds.
//!
//! `offwaketime` (bcc) folds the waker's stack leaf first instead, so that the two calls
//! meet at its `--`; here each half reads as every other stack of benchtop does.
//!
//! A wait on a futex (a mutex, condition variable, `std::sync` or parking_lot lock, a
//! thread join) is labelled with the futex word's address after the blocked stack,
//! `[futex 0x…]`, so that waits on two locks at one place are told apart and the
//! waker's release stack reads as the holder's. A parking_lot lock parks on a futex of
//! the parked thread's own: its label names that thread's parking word, not the lock.

use std::collections::{HashMap, HashSet};

use benchtop_profile::intervals::StacksChunk;
use benchtop_profile::kinds::{Kind, KindSet};
use benchtop_profile::sampling::PerfAccess;
use benchtop_profile::waits::{NOT_SEEN, WOKEN_BY};
use benchtop_profile::{FrameId, StackTree};

use super::events::Reduction;
use super::frames::{Fold, KEY_ARG, known_frames, resolved_frames};
use super::offcpu::{Closed, NO_WAKER, OffCpu};
use super::timeline::StackTable;
use super::tracepoint::Waking;
use crate::symbolize::Resolver;

/// Futex words with a label frame of their own; waits on others share [`OTHER_FUTEX`]
/// (a program with a lock per object must not grow the frame table without bound).
const MAX_LABELS: usize = 4096;
/// The label of a futex word past [`MAX_LABELS`].
const OTHER_FUTEX: &str = "[futex: one of many]";

/// The waits profile being folded.
#[derive(Debug)]
pub(super) struct Waits {
    /// Where the tracepoint's raw record holds the woken thread and the flags.
    pub waking: Waking,
    /// Blocked time by (blocked stack, waker) in µs, and the interner's ids translated to
    /// its own.
    pub tree: StackTree,
    frame_ids: Vec<u32>,
    /// (blocked stack, waker stack, µs) of a batch (reused).
    batch: Vec<(u32, u32, u64)>,
    /// The stack-table id of each pair closed intervals use, made by a batch.
    pair_ids: HashMap<(u32, u32), u32>,
    /// A waker's frames (reused).
    waker_frames: Vec<FrameId>,
    /// The `[futex 0x…]` frame of each futex word seen.
    labels: HashMap<u64, FrameId>,
    /// Wake-up samples read.
    pub wakes: u64,
}

/// What a batch folds with: the collector's resolver, interner and frame buffers.
pub(super) struct Names<'a> {
    pub resolver: &'a Resolver,
    pub interner: &'a mut StackTree,
    pub frames: &'a mut Vec<FrameId>,
    pub translated: &'a mut Vec<FrameId>,
}

impl Waits {
    pub fn new(waking: Waking) -> Waits {
        Waits {
            waking,
            tree: StackTree::new(),
            frame_ids: Vec::new(),
            batch: Vec::new(),
            pair_ids: HashMap::new(),
            waker_frames: Vec::new(),
            labels: HashMap::new(),
            wakes: 0,
        }
    }

    /// Takes the batch's weights, adds the pairs of `closed` intervals, and queues the
    /// addresses their stacks miss in `want_user`/`want_kernel`, to be resolved before
    /// [`Waits::fold`].
    pub fn start_batch(
        &mut self,
        offcpu: &mut OffCpu,
        closed: &[Closed],
        names: Names<'_>,
        want_user: &mut Vec<(u32, u64)>,
        want_kernel: &mut Vec<u64>,
    ) {
        offcpu.take_wait_weights(&mut self.batch);
        let mut weighed: HashSet<(u32, u32)> = self.batch.iter().map(|&(s, w, _)| (s, w)).collect();
        for c in closed {
            if weighed.insert((c.stack, c.waker)) {
                self.batch.push((c.stack, c.waker, 0));
            }
        }
        for &(stack, waker, _) in &self.batch {
            for s in [stack, waker] {
                if s != NO_WAKER {
                    let key = offcpu.key(s);
                    known_frames(
                        names.resolver,
                        names.interner,
                        names.frames,
                        key,
                        want_user,
                        want_kernel,
                    );
                }
            }
        }
    }

    /// Folds the batch's pairs into the tree (addresses resolved by now, `unknown` for
    /// those that were not) and gives each a stack-table id for the per-interval weights.
    pub fn fold(
        &mut self,
        offcpu: &OffCpu,
        names: Names<'_>,
        unknown: FrameId,
        table: &mut StackTable,
        chunk: &mut StacksChunk,
    ) {
        let Names {
            resolver,
            interner,
            frames,
            translated,
        } = names;
        let woken_by = interner.intern(WOKEN_BY);
        let not_seen = interner.intern(NOT_SEEN);
        let mut out = Fold {
            tree: &mut self.tree,
            ids: &mut self.frame_ids,
        };
        self.pair_ids.clear();
        for (stack, waker, us) in self.batch.drain(..) {
            let key = offcpu.key(stack);
            resolved_frames(resolver, interner, frames, key, unknown);
            if let Some(word) = futex_word(interner, frames, key) {
                let label = match self.labels.get(&word) {
                    Some(&label) => label,
                    None if self.labels.len() >= MAX_LABELS => interner.intern(OTHER_FUTEX),
                    None => {
                        let label = interner.intern(&format!("[futex {word:#x}]"));
                        self.labels.insert(word, label);
                        label
                    }
                };
                frames.push(label);
            }
            if waker == NO_WAKER {
                frames.push(not_seen);
            } else {
                frames.push(woken_by);
                let w = &mut self.waker_frames;
                resolved_frames(resolver, interner, w, offcpu.key(waker), unknown);
                frames.extend_from_slice(w);
            }
            if us > 0 {
                out.add(interner, frames, translated, us);
            }
            if let Some(id) = table.intern(interner, frames, chunk) {
                self.pair_ids.insert((stack, waker), id);
            }
        }
    }

    /// What the session says of the waits: at which rate waker stacks were taken, and
    /// how many waits had no wake-up seen and their share of the time blocked.
    pub fn warnings(&self, offcpu: &OffCpu) -> Vec<String> {
        let mut out = Vec::new();
        let every = offcpu.wake_every();
        if every > 1 {
            out.push(format!(
                "waits: the waker's stack was taken at one wake-up in {every}; each blocked \
                 interval whose waker's stack was taken stands for {every} (its time scaled \
                 so), and those ended by a followed thread without one are in offcpu.folded \
                 only"
            ));
        }
        out.extend(self.not_seen_warning(offcpu));
        out
    }

    fn not_seen_warning(&self, offcpu: &OffCpu) -> Option<String> {
        let n = offcpu.wakers_not_seen;
        if n == 0 {
            return None;
        }
        let share = offcpu.not_seen_ns as f64 * 100.0 / offcpu.blocked_ns.max(1) as f64;
        Some(format!(
            "waits: {n} of {} blocked intervals ({share:.1} % of the time blocked) ended with \
             no wake-up seen, under `{NOT_SEEN}` ({} wake-ups recorded): woken by a process \
             outside the recorded tree or an interrupt on an idle CPU, which only CPU-wide \
             events (root or CAP_PERFMON) see, or by a thread as it exited",
            offcpu.intervals, self.wakes
        ))
    }

    /// The stack-table id of a closed interval's pair, made by the last [`Waits::fold`].
    pub fn pair_id(&self, c: &Closed) -> Option<u32> {
        self.pair_ids.get(&(c.stack, c.waker)).copied()
    }
}

/// The futex word a blocked stack waits on: the system call's first argument, when the
/// stack's frames show a futex wait (a kernel `futex_wait…` frame, or glibc's
/// `futex_wait`/`__futex_abstimed_wait…` without kernel frames).
fn futex_word(interner: &StackTree, frames: &[FrameId], key: &[u64]) -> Option<u64> {
    let word = *key.get(KEY_ARG).filter(|&&w| w != 0)?;
    frames
        .iter()
        .rev()
        .any(|&f| {
            let name = interner.name(f);
            name.starts_with("futex_wait") || name.starts_with("__futex_abstimed_wait")
        })
        .then_some(word)
}

/// The kinds a sampler records for `asked`, and the wake-up tracepoint when waits are
/// among them: waits are blocked intervals joined to wake-ups, so they bring the off-CPU
/// pairing (and its profile) with them. When the tracepoint cannot be found, waits are
/// left out and `reductions` says why; the rest is recorded.
pub(super) fn plan_waits(
    asked: KindSet,
    reductions: &mut Vec<Reduction>,
) -> (KindSet, Option<Waking>) {
    if !asked.contains(Kind::Waits) {
        return (asked, None);
    }
    match super::tracepoint::waking() {
        Ok(w) => (asked.with(Kind::OffCpu), Some(w)),
        Err(reason) => {
            reductions.push(Reduction::WaitsUnavailable(format!(
                "waits not recorded: the sched:sched_waking tracepoint is needed, and {reason}"
            )));
            (asked.without(Kind::Waits), None)
        }
    }
}

/// Why waits were left out when the kernel refused the tracepoint's raw records.
pub(super) fn waits_denied_reason(access: &PerfAccess, errno: i32) -> String {
    let paranoid = match access.paranoid {
        Some(p) => format!("kernel.perf_event_paranoid is {p}"),
        None => "kernel.perf_event_paranoid is unreadable".into(),
    };
    format!(
        "waits not recorded: the sched:sched_waking tracepoint's raw records need root, \
         CAP_PERFMON or perf_event_paranoid -1, and perf_event_open returned errno {errno} \
         ({paranoid}); the other profiles are recorded. Fix: run as root, or \
         `sudo setcap cap_perfmon,cap_sys_ptrace=ep <path to benchtop>` (tracefs must also be \
         readable: it is mode 0700 on most systems)"
    )
}
