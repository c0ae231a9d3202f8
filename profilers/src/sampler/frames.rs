//! How a sampled stack becomes frames: the addresses of a stack key, the marker frames
//! for tagged and truncated stacks, the names of known and resolved frames, and the fold
//! of interned frames into a kind's tree.

use std::collections::HashMap;

use benchtop_profile::{FrameId, StackTree};

use super::lines::LineTally;
use crate::symbolize::Resolver;
use crate::unwind::{Ending, Unwinder};

/// No thread-name frame: the key slot holds this.
pub(super) const NO_THREAD: u64 = u64::MAX;
/// Key layout: [process name, thread name, pid, kernel frame count, argument, kernel..,
/// user..]. The argument is a blocked system call's first (the futex word a thread waits
/// on) in the off-CPU keys of a sampler that records waits, else 0.
pub(super) const KEY_HEADER: usize = 5;
/// The argument slot of a key.
pub(super) const KEY_ARG: usize = 4;
/// In the kernel-frame-count slot: an off-CPU stack of a thread whose switch-out came
/// without a sample because kernel sampling is not permitted.
pub(super) const NO_STACK_DENIED: u64 = u64::MAX;
/// In the kernel-frame-count slot: an off-CPU stack whose sample was lost or throttled.
pub(super) const NO_STACK_MISSING: u64 = u64::MAX - 1;
/// In the kernel-frame-count slot: a stack of its name frames only, no addresses (a
/// waker that is an interrupt: the process slot holds its frame).
pub(super) const NO_ADDRESSES: u64 = u64::MAX - 2;
/// The frame of [`NO_STACK_DENIED`] stacks.
pub(super) const DENIED_FRAME: &str = "[blocked: no stack — kernel sampling not permitted]";
/// The frame of [`NO_STACK_MISSING`] stacks.
pub(super) const MISSING_FRAME: &str = "[blocked: stack not sampled]";
/// A user "address" of a key that is an interned frame (a `[truncated: …]` frame),
/// in its low 32 bits: no user or kernel address has these top bits on x86_64.
pub(super) const FRAME_TAG: u64 = 0xfffe_0000_0000_0000;
const FRAME_TAG_MASK: u64 = 0xffff_0000_0000_0000;

/// A tree that stacks of interned frames are folded into, with the translation of the
/// interner's ids to its own.
pub(super) struct Fold<'a> {
    pub(super) tree: &'a mut StackTree,
    pub(super) ids: &'a mut Vec<u32>,
}

impl Fold<'_> {
    pub(super) fn add(
        &mut self,
        interner: &StackTree,
        frames: &[FrameId],
        translated: &mut Vec<FrameId>,
        weight: u64,
    ) {
        translated.clear();
        for &f in frames {
            let i = f.0 as usize;
            if i >= self.ids.len() {
                self.ids.resize(i + 1, u32::MAX);
            }
            if self.ids[i] == u32::MAX {
                self.ids[i] = self.tree.intern(interner.name(f)).0;
            }
            translated.push(FrameId(self.ids[i]));
        }
        self.tree.add(translated, weight);
    }
}

/// The kernel and user addresses of a key (both leaf first); `None` for a stack
/// without addresses (its marker frame stands for them).
pub(super) fn key_addresses(key: &[u64]) -> Option<(&[u64], &[u64])> {
    let nk = *key.get(3)?;
    if nk >= NO_ADDRESSES {
        return None;
    }
    key.get(KEY_HEADER..)?.split_at_checked(nk as usize)
}

/// The interned frame a user "address" of a key stands for, when it is one
/// ([`FRAME_TAG`]).
pub(super) fn tagged_frame(a: u64) -> Option<FrameId> {
    (a & FRAME_TAG_MASK == FRAME_TAG).then_some(FrameId(a as u32))
}

/// The `[truncated: …]` frame of a stack that ended this way, interned once.
pub(super) fn ending_frame(
    endings: &mut HashMap<Ending, FrameId>,
    interner: &mut StackTree,
    unwinder: &Unwinder,
    ending: Ending,
) -> Option<FrameId> {
    if let Some(&f) = endings.get(&ending) {
        return Some(f);
    }
    let name = unwinder.ending_frame(ending)?;
    let f = interner.intern(&name);
    endings.insert(ending, f);
    Some(f)
}

/// The frame that stands for the addresses of a stack without any.
pub(super) fn marker_frame(interner: &mut StackTree, key: &[u64]) -> Option<FrameId> {
    match key.get(3) {
        Some(&NO_STACK_DENIED) => Some(interner.intern(DENIED_FRAME)),
        Some(&NO_STACK_MISSING) => Some(interner.intern(MISSING_FRAME)),
        _ => None,
    }
}

/// Fills `frames` with the stack of `key`, root first, when every address is cached,
/// and returns true; else queues the missing addresses in `want_user`/`want_kernel`.
pub(super) fn known_frames(
    resolver: &Resolver,
    interner: &mut StackTree,
    frames: &mut Vec<FrameId>,
    key: &[u64],
    want_user: &mut Vec<(u32, u64)>,
    want_kernel: &mut Vec<u64>,
) -> bool {
    stack_names(frames, key);
    if let Some(marker) = marker_frame(interner, key) {
        frames.push(marker);
        return true;
    }
    let Some((kernel, user)) = key_addresses(key) else {
        return true;
    };
    let pid = key[2] as u32;
    let missing_before = want_user.len() + want_kernel.len();
    // Callchains are leaf first; the tree wants the root first.
    for &a in user.iter().rev() {
        if let Some(f) = tagged_frame(a) {
            frames.push(f);
            continue;
        }
        match resolver.user(pid, a) {
            Some(f) => frames.extend_from_slice(f),
            None => want_user.push((pid, a)),
        }
    }
    for &a in kernel.iter().rev() {
        match resolver.kernel(a) {
            Some(f) => frames.extend_from_slice(f),
            None => want_kernel.push(a),
        }
    }
    want_user.len() + want_kernel.len() == missing_before
}

/// Fills `frames` with the stack of `key`, root first, after its addresses were
/// resolved (`unknown` for any that were not).
pub(super) fn resolved_frames(
    resolver: &Resolver,
    interner: &mut StackTree,
    frames: &mut Vec<FrameId>,
    key: &[u64],
    unknown: FrameId,
) {
    stack_names(frames, key);
    if let Some(marker) = marker_frame(interner, key) {
        frames.push(marker);
        return;
    }
    let Some((kernel, user)) = key_addresses(key) else {
        return;
    };
    let pid = key[2] as u32;
    for &a in user.iter().rev() {
        match tagged_frame(a) {
            Some(f) => frames.push(f),
            None => frames.extend_from_slice(resolver.user(pid, a).unwrap_or(&[unknown])),
        }
    }
    for &a in kernel.iter().rev() {
        frames.extend_from_slice(resolver.kernel(a).unwrap_or(&[unknown]));
    }
}

/// Adds `weight` to the source lines of the user frames of `key`'s stack.
pub(super) fn tally_lines(lines: &mut LineTally, resolver: &Resolver, key: &[u64], weight: u64) {
    if let Some((_, user)) = key_addresses(key) {
        lines.add_stack(resolver, key[2] as u32, user, weight);
    }
}

/// Starts `frames` with the process and thread name frames of a pending stack's key.
pub(super) fn stack_names(frames: &mut Vec<FrameId>, key: &[u64]) {
    frames.clear();
    if let Some(&process) = key.first() {
        frames.push(FrameId(process as u32));
    }
    if let Some(&thread) = key.get(1)
        && thread != NO_THREAD
    {
        frames.push(FrameId(thread as u32));
    }
}
