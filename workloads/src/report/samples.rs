//! The ticker's side of allocation sampling: what the allocator sampled since the last
//! tick, as `alloc_samples` messages (protocol version 2), each stack's frames sent once.

use std::collections::HashMap;

use super::Reporter;
use crate::WorkloadError;
use crate::alloc::sampling::{self, Drained, Unsampled};
use crate::protocol::{AllocSample, AllocSamples, AllocStack, WorkerMessage};

/// Distinct stacks given ids; samples of further stacks are sent with the empty stack
/// (id 0), so the table (and the conductor's) stays bounded.
pub const MAX_STACKS: usize = 1 << 16;

/// Samples per message: some 100 KiB of JSON, far below the reader's line limit.
const SAMPLES_PER_MESSAGE: usize = 1024;
/// Freed ids per message: some 200 KiB.
const FREED_PER_MESSAGE: usize = 16 * 1024;

/// Drains the allocator's samples and sends them before each tick.
#[derive(Debug)]
pub(crate) struct SampleSender {
    drained: Drained,
    /// Frames (innermost first) → the stack's id; the empty stack is id 0.
    stacks: HashMap<Box<[u64]>, u32>,
    /// The `dropped` count last sent.
    dropped: u64,
    /// The empty stack (id 0) was sent.
    sent_empty: bool,
}

impl SampleSender {
    /// A sender when this worker samples allocation stacks (counting on, a rate set).
    pub(crate) fn new() -> Option<Self> {
        if !crate::alloc::is_enabled() || sampling::rate() == 0 {
            return None;
        }
        let mut stacks = HashMap::new();
        stacks.insert(Box::default(), 0);
        Some(SampleSender {
            drained: Drained::default(),
            stacks,
            dropped: 0,
            sent_empty: false,
        })
    }

    /// Sends what was sampled and freed since the last call, in as many messages as it
    /// takes (none when nothing happened).
    pub(crate) fn send(&mut self, reporter: &Reporter) -> Result<(), WorkloadError> {
        // What this builds is the profiler's own: counted, not sampled.
        let _unsampled = Unsampled::new();
        sampling::drain(&mut self.drained);
        let dropped = self.drained.dropped;
        if self.drained.samples.is_empty()
            && self.drained.freed.is_empty()
            && dropped == self.dropped
        {
            return Ok(());
        }
        self.dropped = dropped;
        let rate = sampling::rate().max(1);
        let samples = std::mem::take(&mut self.drained.samples);
        let freed = std::mem::take(&mut self.drained.freed);
        let mut sample_chunks = samples.chunks(SAMPLES_PER_MESSAGE);
        let mut freed_chunks = freed.chunks(FREED_PER_MESSAGE);
        loop {
            let (some, ids) = (sample_chunks.next(), freed_chunks.next());
            if some.is_none() && ids.is_none() {
                break;
            }
            let mut message = AllocSamples {
                rate,
                dropped,
                freed: ids.map(<[u64]>::to_vec).unwrap_or_default(),
                ..AllocSamples::default()
            };
            if !std::mem::replace(&mut self.sent_empty, true) {
                message.stacks.push(AllocStack {
                    id: 0,
                    frames: Vec::new(),
                });
            }
            for sample in some.unwrap_or_default() {
                let stack = self.stack_id(&sample.frames, &mut message.stacks);
                message.samples.push(AllocSample {
                    id: sample.id,
                    stack,
                    size: sample.size,
                    bytes: sample.bytes,
                    freed: sample.freed,
                });
            }
            reporter.send(&WorkerMessage::AllocSamples(message))?;
        }
        // The buffers go back for the next drain, emptied now: the samples' frames are
        // the profiler's memory, and the next tick's live bytes should not count them.
        self.drained.samples = samples;
        self.drained.samples.clear();
        self.drained.freed = freed;
        Ok(())
    }

    /// The id of `frames`, adding the stack to `new` when it is sent for the first time.
    fn stack_id(&mut self, frames: &[u64], new: &mut Vec<AllocStack>) -> u32 {
        if let Some(&id) = self.stacks.get(frames) {
            return id;
        }
        if self.stacks.len() >= MAX_STACKS {
            return 0;
        }
        let id = self.stacks.len() as u32;
        self.stacks.insert(frames.into(), id);
        new.push(AllocStack {
            id,
            frames: frames.to_vec(),
        });
        id
    }
}
