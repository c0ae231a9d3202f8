//! State shared between a sampler and its background threads.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64};

use benchtop_profile::intervals::StacksChunk;
use benchtop_profile::{ByKind, StackTree};

use super::timeline::Feed;

/// State shared between a [`Sampler`] and its background thread.
#[derive(Debug)]
pub(crate) struct Shared {
    pub samples: AtomicU64,
    pub lost: AtomicU64,
    pub throttled: AtomicU64,
    pub offcpu_samples: AtomicU64,
    pub switches: AtomicU64,
    pub mem_samples: AtomicU64,
    pub blocked_ns: AtomicU64,
    /// Bytes of records copied out of the ring buffers and not yet folded.
    pub queued_bytes: AtomicU64,
    pub batches: AtomicU64,
    pub pending: AtomicU64,
    pub symbolize_ns: AtomicU64,
    pub last_batch_ns: AtomicU64,
    pub max_batch_ns: AtomicU64,
    /// Stop reading: [`Sampler::finish`] or drop.
    pub stop: AtomicBool,
    /// Skip the final batch: the sampler was dropped without finish.
    pub abandon: AtomicBool,
    /// An eventfd that wakes the thread's poll.
    pub wake: OwnedFd,
    /// A copy of the profile so far was asked for ([`Sampler::request_snapshot`]).
    pub snapshot_wanted: AtomicBool,
    /// The copy, published after the batch that followed the request.
    pub snapshot: Mutex<Option<Snapshot>>,
    /// The run's start and the ends of report intervals, from the recorder.
    pub feed: Mutex<Feed>,
    /// Per-interval stacks handed out by batches and not taken yet.
    pub stacks: Mutex<StacksChunk>,
}

/// The stacks a sampler has folded so far, for a live view: copies, taken after a batch.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Snapshot {
    /// The stacks of each kind so far, as in [`Profile::profiles`](super::Profile::profiles).
    pub profiles: ByKind<StackTree>,
    /// Source lines of the on-CPU stacks so far, per frame.
    pub lines: benchtop_profile::lines::FrameLines,
    /// Batches folded when the copy was taken.
    pub batches: u64,
}

impl Shared {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: eventfd has no memory arguments; the result is checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Shared {
            samples: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            offcpu_samples: AtomicU64::new(0),
            switches: AtomicU64::new(0),
            mem_samples: AtomicU64::new(0),
            blocked_ns: AtomicU64::new(0),
            queued_bytes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            symbolize_ns: AtomicU64::new(0),
            last_batch_ns: AtomicU64::new(0),
            max_batch_ns: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            abandon: AtomicBool::new(false),
            // SAFETY: fd is a fresh descriptor that nothing else owns.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
            snapshot_wanted: AtomicBool::new(false),
            snapshot: Mutex::new(None),
            feed: Mutex::new(Feed::default()),
            stacks: Mutex::new(StacksChunk::default()),
        })
    }

    pub(super) fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to an eventfd we own. A failure
        // (counter overflow) still leaves the eventfd readable, which is all we need.
        let _ = unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
}
