//! The source lines of on-CPU samples: per frame and location, the samples whose stack
//! had that frame at that line, each (frame, line) counted once per sample even when the
//! frame recurses. Kept for the whole run (for live snapshots) and handed out as what is
//! new since the last chunk (for stacks.jsonl's `files` and `lines`).

use std::collections::HashMap;

use benchtop_profile::intervals::{LineEntry, StacksChunk};
use benchtop_profile::lines::FrameLines;
use benchtop_profile::{FrameId, StackTree};

use crate::symbolize::{NO_LOCATION, Resolver};

/// Source-line weights of one sampler.
#[derive(Debug, Default)]
pub(super) struct LineTally {
    /// (frame, location) → samples since the last chunk.
    new: HashMap<(u32, u32), u64>,
    /// The whole run's, by frame name.
    pub all: FrameLines,
    /// File ids handed out to stacks.jsonl, by path.
    files: HashMap<Box<str>, u32>,
    /// Reused: the (frame, location) pairs of one stack.
    seen: Vec<(u32, u32)>,
}

impl LineTally {
    /// Adds `weight` to the lines of the frames of `user` addresses of `pid` (leaf first,
    /// as a callchain), where the resolver knows them.
    pub fn add_stack(&mut self, resolver: &Resolver, pid: u32, user: &[u64], weight: u64) {
        self.seen.clear();
        for &a in user {
            let (Some(frames), Some(locs)) =
                (resolver.user(pid, a), resolver.user_locations(pid, a))
            else {
                continue;
            };
            for (f, &loc) in frames.iter().zip(locs) {
                if loc != NO_LOCATION && !self.seen.contains(&(f.0, loc)) {
                    self.seen.push((f.0, loc));
                }
            }
        }
        for &pair in &self.seen {
            let w = self.new.entry(pair).or_insert(0);
            *w = w.saturating_add(weight);
        }
    }

    /// Moves what is new into `chunk` (frames are `interner`'s ids, which the chunk's
    /// stack table uses too) and into the whole run's lines.
    pub fn take_into(
        &mut self,
        resolver: &Resolver,
        interner: &StackTree,
        chunk: &mut StacksChunk,
    ) {
        let mut new: Vec<((u32, u32), u64)> = self.new.drain().collect();
        new.sort_unstable();
        for ((frame, loc), weight) in new {
            let Some((path, line)) = resolver.location(loc) else {
                continue;
            };
            if !self
                .all
                .add(interner.name(FrameId(frame)), path, line, weight)
            {
                continue;
            }
            let next = self.files.len() as u32;
            let file = match self.files.get(path) {
                Some(&id) => id,
                None => {
                    self.files.insert(path.into(), next);
                    chunk.files.push((next, path.to_owned()));
                    next
                }
            };
            chunk.lines.push(LineEntry {
                frame,
                file,
                line,
                weight,
            });
        }
    }
}
