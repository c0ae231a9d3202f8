//! The worker's counting allocator: bytes and calls allocated and freed, and the bytes
//! live, reported in every tick (`alloc_bytes`, `free_bytes`, `live_bytes`, `allocs`,
//! `frees`; docs/protocol.md, "Allocation counters").
//!
//! The worker is the `benchtop` binary itself, so the allocator is the binary's
//! `#[global_allocator]` in every mode, and switched on at run time in worker mode only
//! ([`enable`], called at the top of `main` when the command is `worker`, before
//! anything else allocates). Off, as in the TUI and the conductor, each call costs one
//! relaxed atomic load more than the system allocator.
//!
//! On, each call adds to the counters of its thread's shard: one of [`SHARDS`]
//! cache-line-sized slots, picked once per thread, so threads do not contend on one
//! cache line as they would on a single shared counter. The first `SHARDS - 1` threads
//! each own a shard outright and add with a plain load and store (no locked
//! read-modify-write: on the defs parse, which allocates millions of times, two locked
//! adds per call cost several per cent); the threads after them share the last shard and
//! add atomically. A thread's counts stay in its shard after it ends. [`snapshot`] sums
//! the shards.
//! `benches/alloc_overhead.py` measures the cost against the same worker with counting
//! off.
//!
//! `realloc` counts as freeing the old block and allocating the new one (as heaptrack
//! does): a growing `Vec` shows in `allocs` once per growth.
//!
//! Blocks allocated before [`enable`] and freed after it count as freed without having
//! counted as allocated; the binary enables counting before its first allocation of note,
//! so this is at most a few bytes of the runtime's start-up.
//!
//! With counting on, allocation stacks are also sampled ([`sampling`]: about one
//! allocation every 512 KiB allocated, each sample kept until its block is freed), unless
//! [`sampling::SAMPLE_ENV`] is `0`. The ticker sends them as `alloc_samples` messages.

pub mod sampling;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Counter names in ticks, as [`benchtop_protocol`] defines them.
pub use benchtop_protocol::{ALLOC_BYTES, ALLOCS, FREE_BYTES, FREES, LIVE_BYTES};

/// Shards of the counters: one owned by each of the process's first `SHARDS - 1`
/// threads, the last shared by every thread after them.
pub const SHARDS: usize = 256;

/// The shard shared by the threads that own none.
const SHARED: usize = SHARDS - 1;

/// Whether counting is on; read (relaxed) on every call.
static ON: AtomicBool = AtomicBool::new(false);

/// The counters of one shard, alone on its cache lines (128 bytes: adjacent-line
/// prefetching pairs lines).
#[repr(align(128))]
struct Shard {
    alloc_bytes: AtomicU64,
    free_bytes: AtomicU64,
    allocs: AtomicU64,
    frees: AtomicU64,
}

impl Shard {
    const fn new() -> Self {
        Shard {
            alloc_bytes: AtomicU64::new(0),
            free_bytes: AtomicU64::new(0),
            allocs: AtomicU64::new(0),
            frees: AtomicU64::new(0),
        }
    }

    #[inline]
    fn allocated(&self, bytes: usize, owned: bool) {
        add(&self.alloc_bytes, bytes as u64, owned);
        add(&self.allocs, 1, owned);
    }

    #[inline]
    fn freed(&self, bytes: usize, owned: bool) {
        add(&self.free_bytes, bytes as u64, owned);
        add(&self.frees, 1, owned);
    }
}

/// Adds `n` to `counter`: a plain load and store when the calling thread is the shard's
/// only writer (`owned`), readers still see whole values; a locked add otherwise.
#[inline]
fn add(counter: &AtomicU64, n: u64, owned: bool) {
    if owned {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    } else {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

static COUNTS: [Shard; SHARDS] = [const { Shard::new() }; SHARDS];

/// The next shard handed to a thread that has none yet.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard, `usize::MAX` until its first counted call. A const-initialized
    /// `Cell` without a destructor: reading it never allocates nor registers anything,
    /// so the allocator can use it.
    static MY_SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The calling thread's shard, and whether the thread owns it.
#[inline]
fn shard() -> (&'static Shard, bool) {
    let index = MY_SHARD
        .try_with(|mine| {
            let mut index = mine.get();
            if index == usize::MAX {
                index = NEXT_SHARD.fetch_add(1, Ordering::Relaxed).min(SHARED);
                mine.set(index);
            }
            index
        })
        // A thread being torn down (its thread-locals gone): the shared shard.
        .unwrap_or(SHARED)
        .min(SHARED);
    (&COUNTS[index], index < SHARED)
}

/// Environment variable that switches a worker's counting off: `BENCHTOP_ALLOC=off`
/// (for measuring the allocator's own cost; any other value, or none, leaves it on).
pub const ALLOC_ENV: &str = "BENCHTOP_ALLOC";

/// Whether this process should count: its command is `worker` (`benchtop worker …`, or
/// a stand-in binary's) and [`ALLOC_ENV`] is not `off`. What it reads is freed before it
/// returns, so calling it before [`enable`] leaves no uncounted block behind.
pub fn wanted() -> bool {
    let worker = std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == "worker");
    worker && std::env::var_os(ALLOC_ENV).is_none_or(|value| value != "off")
}

/// Switches counting on for the rest of the process, and stack sampling at the rate
/// [`sampling::SAMPLE_ENV`] asks for ([`sampling::DEFAULT_RATE`] when unset; a value
/// that is not a number of bytes leaves sampling off). Idempotent.
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
    sampling::set_rate(sampling::rate_from_env().unwrap_or(0));
}

/// Whether counting is on (only in a worker of the binary that installs
/// [`CountingAlloc`] and called [`enable`]).
pub fn is_enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The counters summed over the shards, at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocCounts {
    /// Bytes allocated since counting began (the size asked for, not the allocator's
    /// rounding).
    pub alloc_bytes: u64,
    /// Bytes freed since counting began.
    pub free_bytes: u64,
    /// Allocation calls (`alloc`, `alloc_zeroed`, and each `realloc`).
    pub allocs: u64,
    /// Free calls (`dealloc`, and each `realloc`).
    pub frees: u64,
}

impl AllocCounts {
    /// Bytes allocated and not yet freed: `alloc_bytes - free_bytes`.
    pub fn live_bytes(&self) -> u64 {
        self.alloc_bytes.saturating_sub(self.free_bytes)
    }
}

/// The counters now, or `None` when counting is off.
///
/// The frees are read before the allocations, so a block freed during the read is
/// counted as allocated too and live bytes never fall below the truth by a block
/// allocated and freed while summing.
pub fn snapshot() -> Option<AllocCounts> {
    if !is_enabled() {
        return None;
    }
    let mut counts = AllocCounts::default();
    for shard in &COUNTS {
        counts.free_bytes += shard.free_bytes.load(Ordering::Acquire);
        counts.frees += shard.frees.load(Ordering::Acquire);
    }
    for shard in &COUNTS {
        counts.alloc_bytes += shard.alloc_bytes.load(Ordering::Acquire);
        counts.allocs += shard.allocs.load(Ordering::Acquire);
    }
    // Guards the invariant alloc - free = live against a free of a block allocated
    // before counting began (std's start-up) outrunning the allocations.
    counts.free_bytes = counts.free_bytes.min(counts.alloc_bytes);
    Some(counts)
}

/// The system allocator with counting that [`enable`] switches on. Install it in a
/// binary that runs workers:
///
/// ```
/// #[global_allocator]
/// static ALLOC: benchtop_workloads::alloc::CountingAlloc = benchtop_workloads::alloc::CountingAlloc;
///
/// fn main() {
///     let v = vec![0u8; 64]; // counted only once `enable` switched counting on
///     drop(v);
/// }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

// SAFETY: every call is forwarded unchanged to `System`, which upholds GlobalAlloc's
// contract; the counting beside it touches only atomics and const thread-locals, and the
// sampling only its own statics (never the heap), so neither can re-enter the allocator.
// An owned shard's plain load-and-store has one writer (its thread) and cannot lose an
// update. A block's sample is forgotten before the block is freed, so an address the
// system hands out again is never confused with the freed block's.
unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout is passed on as it came.
        let ptr = unsafe { System.alloc(layout) };
        if ON.load(Ordering::Relaxed) && !ptr.is_null() {
            let (shard, owned) = shard();
            shard.allocated(layout.size(), owned);
            sampling::on_alloc(ptr, layout.size());
        }
        ptr
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if ON.load(Ordering::Relaxed) && !ptr.is_null() {
            let (shard, owned) = shard();
            shard.allocated(layout.size(), owned);
            sampling::on_alloc(ptr, layout.size());
        }
        ptr
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let on = ON.load(Ordering::Relaxed);
        if on {
            sampling::on_free(ptr);
        }
        // SAFETY: `ptr` came from this allocator (that is, from `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        if on {
            let (shard, owned) = shard();
            shard.freed(layout.size(), owned);
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let on = ON.load(Ordering::Relaxed);
        if on {
            // A failed realloc leaves the block as it was, unsampled from here on.
            sampling::on_free(ptr);
        }
        // SAFETY: the caller's block, layout and size are passed on as they came.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if on && !new.is_null() {
            let (shard, owned) = shard();
            shard.freed(layout.size(), owned);
            shard.allocated(new_size, owned);
            sampling::on_alloc(new, new_size);
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests read the shared counters: one at a time.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// The allocator itself is not installed in the library's tests (the test harness
    /// has its own); its calls are made directly here.
    #[test]
    fn counts_what_it_forwards_and_live_is_the_difference() {
        let _serial = SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        enable();
        let before = snapshot().unwrap();
        let a = Layout::from_size_align(1000, 8).unwrap();
        let b = Layout::from_size_align(24, 8).unwrap();
        // SAFETY: layouts of non-zero size; each block is freed once with its own layout.
        unsafe {
            let p = CountingAlloc.alloc(a);
            let q = CountingAlloc.alloc_zeroed(b);
            assert!(!p.is_null() && !q.is_null());
            assert_eq!(*q, 0);
            let p = CountingAlloc.realloc(p, a, 4000);
            assert!(!p.is_null());
            CountingAlloc.dealloc(q, b);
            let after = snapshot().unwrap();
            // The harness allocates through `System`, not this allocator, so the
            // differences are exactly ours.
            assert_eq!(after.alloc_bytes - before.alloc_bytes, 1000 + 24 + 4000);
            assert_eq!(after.free_bytes - before.free_bytes, 1000 + 24);
            assert_eq!(after.allocs - before.allocs, 3);
            assert_eq!(after.frees - before.frees, 2);
            assert_eq!(after.live_bytes(), after.alloc_bytes - after.free_bytes);
            CountingAlloc.dealloc(p, Layout::from_size_align(4000, 8).unwrap());
        }
    }

    #[test]
    fn threads_that_own_shards_and_threads_that_share_one_all_count() {
        let _serial = SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        enable();
        let before = snapshot().unwrap();
        let layout = Layout::from_size_align(64, 8).unwrap();
        // More threads than shards: the later ones share the last shard, all at once.
        let threads = SHARDS + 44;
        let barrier = std::sync::Barrier::new(threads);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    barrier.wait();
                    for _ in 0..200 {
                        // SAFETY: a 64-byte block freed at once with its layout.
                        unsafe {
                            let p = CountingAlloc.alloc(layout);
                            assert!(!p.is_null());
                            CountingAlloc.dealloc(p, layout);
                        }
                    }
                });
            }
        });
        let after = snapshot().unwrap();
        let calls = threads as u64 * 200;
        assert_eq!(after.allocs - before.allocs, calls);
        assert_eq!(after.frees - before.frees, calls);
        assert_eq!(after.alloc_bytes - before.alloc_bytes, calls * 64);
        assert_eq!(after.free_bytes - before.free_bytes, calls * 64);
        assert!(NEXT_SHARD.load(Ordering::Relaxed) > SHARED);
    }

    /// `count` blocks of `size` bytes, kept.
    #[inline(never)]
    fn allocate_a(count: usize, size: usize) -> Vec<*mut u8> {
        let layout = Layout::from_size_align(size, 8).unwrap();
        // SAFETY: a layout of non-zero size; the caller frees each block with it.
        (0..count)
            .map(|_| unsafe { CountingAlloc.alloc(layout) })
            .collect()
    }

    /// The same from another function.
    #[inline(never)]
    fn allocate_b(count: usize, size: usize) -> Vec<*mut u8> {
        let layout = Layout::from_size_align(size, 8).unwrap();
        // SAFETY: as in `allocate_a`.
        let blocks = (0..count)
            .map(|_| unsafe { CountingAlloc.alloc(layout) })
            .collect();
        std::hint::black_box(blocks)
    }

    /// Whether a return address lies in the function starting at `f` rather than in
    /// `other` (the nearer start below it owns it; both are small).
    fn within(frames: &[u64], f: usize, other: usize) -> bool {
        let (f, other) = (f as u64, other as u64);
        frames
            .iter()
            .any(|&a| a > f && a - f < 4096 && (other > a || other < f))
    }

    #[test]
    fn sampled_stacks_split_the_bytes_as_allocated_and_frees_follow_them() {
        let _serial = SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        enable();
        let mut drained = sampling::Drained::default();
        let guard = sampling::Unsampled::new();
        sampling::drain(&mut drained);
        drop(guard);
        // 4 KiB between samples: 3 072 samples of a's 12 MiB, 1 024 of b's 4 MiB; each
        // table holds them all.
        sampling::set_rate(4096);
        let size = 1024;
        let a = allocate_a(12 * 1024, size);
        let b = allocate_b(4 * 1024, size);
        let layout = Layout::from_size_align(size, 8).unwrap();
        let guard = sampling::Unsampled::new();
        sampling::drain(&mut drained);
        drop(guard);
        sampling::set_rate(0);
        let (a_fn, b_fn) = (
            allocate_a as *const () as usize,
            allocate_b as *const () as usize,
        );
        let mut a_bytes = 0u64;
        let mut b_bytes = 0u64;
        let mut b_ids = Vec::new();
        for s in &drained.samples {
            assert_eq!(s.size, 1024);
            assert!(!s.freed);
            if within(&s.frames, a_fn, b_fn) {
                a_bytes += s.bytes;
            } else if within(&s.frames, b_fn, a_fn) {
                b_bytes += s.bytes;
                b_ids.push(s.id);
            }
        }
        let share = a_bytes as f64 / (a_bytes + b_bytes) as f64;
        let total = (a_bytes + b_bytes) as f64 / (16 << 20) as f64;
        let report = format!(
            "{} samples: a {a_bytes} bytes, b {b_bytes} bytes, a's share {share:.3}",
            drained.samples.len()
        );
        // Standard errors about 0.007 for the share and 1.6 % for the total.
        assert!((share - 0.75).abs() < 0.03, "{report}");
        assert!((total - 1.0).abs() < 0.07, "{report}");
        assert_eq!(sampling::live_samples(), drained.samples.len(), "{report}");

        // Freeing b's blocks names b's samples, and only those.
        for p in b {
            // SAFETY: allocated above with `layout`, freed once.
            unsafe { CountingAlloc.dealloc(p, layout) };
        }
        let guard = sampling::Unsampled::new();
        sampling::drain(&mut drained);
        drop(guard);
        assert!(drained.samples.is_empty());
        drained.freed.sort_unstable();
        b_ids.sort_unstable();
        assert_eq!(drained.freed, b_ids);
        for p in a {
            // SAFETY: as above.
            unsafe { CountingAlloc.dealloc(p, layout) };
        }
        assert_eq!(sampling::live_samples(), 0);
        let guard = sampling::Unsampled::new();
        sampling::drain(&mut drained);
        drop(guard);
    }
}
