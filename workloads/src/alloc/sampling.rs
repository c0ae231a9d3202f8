//! Allocation stacks sampled the way jemalloc and tcmalloc sample them, each sample kept
//! until its block is freed (docs/protocol.md, "Allocation samples").
//!
//! **What is sampled.** Each thread counts down the bytes it allocates; when the count
//! crosses zero the allocation that crossed it is sampled and a new count is drawn from an
//! exponential distribution of mean [`rate`] (512 KiB by default, [`SAMPLE_ENV`] or
//! [`set_rate`] changes it). The points where samples fall then form a Poisson process
//! over the bytes allocated, so an allocation of `size` bytes is sampled with probability
//! `1 - exp(-size / rate)` whatever came before it, and a sample stands for
//! `size / (1 - exp(-size / rate))` bytes ([`represented_bytes`]): summed over the samples
//! of a stack, an unbiased estimate of the bytes that stack allocated. Small allocations
//! are sampled rarely and each stands for about `rate` bytes; an allocation larger than
//! `rate` is nearly always sampled and stands for about its size. A stack that allocated
//! `B` bytes in many allocations is estimated with a relative standard error of about
//! `sqrt(rate / B)`: 1 % for 5 GiB at the default rate, 10 % for 50 MiB.
//!
//! **Cost.** Off the sampling path an allocation costs one thread-local subtraction and a
//! branch; a free costs one relaxed load while no sample is live, and then one byte of a
//! 32 KiB filter. A sample walks the frame pointers of the allocating thread (no
//! allocation, no unwinder, no lock but this module's own) and takes this module's spin
//! lock to record it; at the default rate that is once per 512 KiB allocated.
//!
//! **Bounds.** At most [`MAX_LIVE`] samples are live at once and [`MAX_PENDING`] wait for
//! the ticker; a sample that finds either table full is not taken and counts as
//! `dropped`. Everything lives in statics sized here (about 5 MiB of address space,
//! resident only as it is used): the sampling path never allocates.
//!
//! **Re-entrancy.** A thread that is already sampling (or that the ticker marks with
//! [`Unsampled`] while it drains) is not sampled again; nothing called while the lock is
//! held allocates or frees, so the lock cannot be taken twice by one thread.
//!
//! The ticker calls [`drain`] before each tick and sends what it returns as an
//! `alloc_samples` message ([`crate::report`]).

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};

/// Mean bytes allocated between two samples unless [`SAMPLE_ENV`] says otherwise: 512 KiB,
/// jemalloc's `lg_prof_sample` default (2^19) and tcmalloc's sampling interval.
pub const DEFAULT_RATE: u64 = 512 * 1024;

/// Environment variable setting a worker's sampling rate: the mean bytes between two
/// samples, `0` to sample no stacks (the counters still count). Unset: [`DEFAULT_RATE`].
pub const SAMPLE_ENV: &str = benchtop_protocol::ALLOC_SAMPLE_ENV;

/// Frames kept of a sampled stack, innermost first (deeper stacks lose their outermost
/// frames).
pub const MAX_FRAMES: usize = 64;

/// Samples live at once (not yet freed) that are tracked; more are dropped. At the
/// default rate that is 32 GiB of live memory.
pub const MAX_LIVE: usize = 1 << 16;

/// Samples taken and not yet handed to the ticker; more are dropped. At the default rate
/// a worker allocating 2 GiB/s takes 4 096 samples a second.
pub const MAX_PENDING: usize = 4096;

/// Slots of the pointer index: twice [`MAX_LIVE`], so probes stay short.
const INDEX_SLOTS: usize = MAX_LIVE * 2;

/// Bytes of the free filter: one counter per hash bucket of sampled pointers.
const FILTER_SLOTS: usize = 1 << 15;

/// Mean bytes between samples; 0 when stacks are not sampled.
static RATE: AtomicU64 = AtomicU64::new(0);

/// Samples live now (in the index): frees look at nothing more while it is 0.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Per bucket of pointer hashes, how many live samples fall in it (saturating: a bucket
/// that reached 255 stays "maybe" for good).
static FILTER: [AtomicU8; FILTER_SLOTS] = [const { AtomicU8::new(0) }; FILTER_SLOTS];

/// Samples not taken because a table was full, since the process started.
static DROPPED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's sampling state: a const-initialized block of `Cell`s without a
    /// destructor, so reading it never allocates nor registers anything.
    static STATE: ThreadState = const { ThreadState::new() };
}

struct ThreadState {
    /// Bytes still to allocate before the next sample.
    until: Cell<i64>,
    /// xorshift64* state; 0 until the thread's first sample draw.
    rng: Cell<u64>,
    /// Sampling (or draining) on this thread now: allocations made meanwhile are counted,
    /// not sampled.
    busy: Cell<bool>,
    /// The top (highest address) of this thread's stack; 0 until looked up.
    stack_top: Cell<usize>,
}

impl ThreadState {
    const fn new() -> Self {
        ThreadState {
            until: Cell::new(0),
            rng: Cell::new(0),
            busy: Cell::new(false),
            stack_top: Cell::new(0),
        }
    }
}

/// The mean bytes between two samples; 0 when stacks are not sampled.
pub fn rate() -> u64 {
    RATE.load(Ordering::Relaxed)
}

/// Sets the mean bytes between two samples (0: no stacks). Call before the threads that
/// should be sampled at this rate allocate: a thread keeps the gap it drew before.
pub fn set_rate(bytes: u64) {
    RATE.store(bytes.min(i64::MAX as u64), Ordering::Relaxed);
    // The calling thread draws afresh at its next allocation, as a new thread does.
    let _ = STATE.try_with(|s| {
        s.until.set(0);
        s.rng.set(0);
    });
}

/// The rate [`SAMPLE_ENV`] asks for: [`DEFAULT_RATE`] when unset, `None` when it is not a
/// whole number of bytes.
pub fn rate_from_env() -> Option<u64> {
    match std::env::var_os(SAMPLE_ENV) {
        None => Some(DEFAULT_RATE),
        Some(value) => value.to_str()?.trim().parse().ok(),
    }
}

/// The bytes a sample of an allocation of `size` bytes stands for at `rate`:
/// `size / (1 - exp(-size / rate))`, at least `size`.
pub fn represented_bytes(size: u64, rate: u64) -> u64 {
    if rate == 0 || size == 0 {
        return size;
    }
    let (s, r) = (size as f64, rate as f64);
    // -expm1(-x) = 1 - exp(-x), exact for small x.
    let p = -(-s / r).exp_m1();
    if p <= 0.0 {
        return rate;
    }
    (s / p).round().clamp(s, u64::MAX as f64) as u64
}

/// Called by the allocator for each allocation while counting is on: counts `size` down
/// and samples the allocation at `ptr` when the count crosses zero.
#[inline]
pub(super) fn on_alloc(ptr: *mut u8, size: usize) {
    let _ = STATE.try_with(|state| {
        let left = state.until.get().wrapping_sub(size as i64);
        if left > 0 {
            state.until.set(left);
        } else {
            sample(state, ptr, size);
        }
    });
}

/// Called by the allocator before a block is freed (or moved by `realloc`): forgets its
/// sample if it has one.
#[inline]
pub(super) fn on_free(ptr: *mut u8) {
    if LIVE.load(Ordering::Relaxed) == 0 {
        return;
    }
    if FILTER[filter_slot(ptr as usize)].load(Ordering::Relaxed) == 0 {
        return;
    }
    freed(ptr as usize);
}

/// The count crossed zero on this thread: draw the next gap and, unless the thread is
/// already sampling, take the sample.
#[cold]
#[inline(never)]
fn sample(state: &ThreadState, ptr: *mut u8, size: usize) {
    let rate = RATE.load(Ordering::Relaxed);
    if rate == 0 {
        // Not sampling: never come back here (until `set_rate` resets the count).
        state.until.set(i64::MAX);
        return;
    }
    let first = state.rng.get() == 0;
    let gap = draw(state, rate);
    if first {
        // A thread's first draw: this allocation counts against the fresh gap.
        let left = gap.saturating_sub(size as i64);
        if left > 0 {
            state.until.set(left);
            return;
        }
        state.until.set(draw(state, rate));
    } else {
        state.until.set(gap);
    }
    if state.busy.get() || ptr.is_null() {
        return;
    }
    state.busy.set(true);
    let mut frames = [0usize; MAX_FRAMES];
    let depth = capture(state, &mut frames);
    record(
        ptr as usize,
        size as u64,
        represented_bytes(size as u64, rate),
        &frames[..depth],
    );
    state.busy.set(false);
}

/// An exponentially distributed gap of mean `rate` bytes, at least 1.
fn draw(state: &ThreadState, rate: u64) -> i64 {
    let mut x = state.rng.get();
    if x == 0 {
        // Seeded per thread from a global sequence and the thread's own address.
        static SEED: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
        let n = SEED.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        x = splitmix(n ^ (state as *const ThreadState as u64)) | 1;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    state.rng.set(x);
    let bits = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
    // Uniform in (0, 1]: never ln(0).
    let u = (bits + 1) as f64 / (1u64 << 53) as f64;
    let gap = -u.ln() * rate as f64;
    (gap as i64).max(1)
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The allocating thread's return addresses, innermost first, by its frame pointers;
/// the number written into `out`. The first frames are this module's and the
/// allocator's own: a reader skips them by name.
#[inline(never)]
fn capture(state: &ThreadState, out: &mut [usize; MAX_FRAMES]) -> usize {
    let top = stack_top(state);
    // A local of this function: every frame record the walk may read lies above it.
    let marker = 0u8;
    let here = std::hint::black_box(&raw const marker) as usize;
    let Some(mut fp) = frame_pointer() else {
        return 0;
    };
    let mut n = 0;
    while n < MAX_FRAMES {
        // A frame record is two words, [saved frame pointer, return address], between
        // this function's frame and the top of the thread's stack.
        if fp < here
            || !fp.is_multiple_of(std::mem::align_of::<usize>())
            || fp > top.saturating_sub(16)
        {
            break;
        }
        // SAFETY: `fp` and `fp + 8` lie between a local of this function and the top of
        // the thread's stack, all of it mapped; the words are read, never written.
        let (next, ret) = unsafe {
            let record = fp as *const usize;
            (record.read(), record.add(1).read())
        };
        if ret == 0 {
            break;
        }
        out[n] = ret;
        n += 1;
        // Frames go up the stack: a record below this one ends the walk.
        if next <= fp {
            break;
        }
        fp = next;
    }
    n
}

/// The current function's frame pointer, where the architecture keeps one.
#[inline(always)]
fn frame_pointer() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        let fp: usize;
        // SAFETY: reads a register; no memory, stack or flags are touched.
        unsafe {
            std::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags));
        }
        Some(fp)
    }
    #[cfg(target_arch = "aarch64")]
    {
        let fp: usize;
        // SAFETY: reads a register; no memory, stack or flags are touched.
        unsafe {
            std::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags));
        }
        Some(fp)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        None
    }
}

/// The highest address of the calling thread's stack, looked up once per thread.
/// glibc's `pthread_getattr_np` may allocate (with its own malloc, not through the
/// Rust allocator), which is why it runs on the sampling path with `busy` set.
fn stack_top(state: &ThreadState) -> usize {
    let known = state.stack_top.get();
    if known != 0 {
        return known;
    }
    let mut top = 0usize;
    // SAFETY: `attr` is initialized by pthread_getattr_np before it is read and destroyed
    // after; the out-pointers point at locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) == 0 {
            let mut addr: *mut libc::c_void = std::ptr::null_mut();
            let mut size: libc::size_t = 0;
            if libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0 {
                top = (addr as usize).saturating_add(size);
            }
            libc::pthread_attr_destroy(&mut attr);
        }
    }
    // Unknown: the walk stops at once (top 0 is below every frame).
    state.stack_top.set(top.max(1));
    top
}

/// The bucket of the free filter for `ptr`.
#[inline]
fn filter_slot(ptr: usize) -> usize {
    (((ptr >> 4) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - 15)) as usize
}

/// The slot where the index starts probing for `ptr`.
#[inline]
fn index_slot(ptr: usize) -> usize {
    (((ptr >> 4) as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) >> (64 - 17)) as usize
}

const _: () = assert!(FILTER_SLOTS == 1 << 15 && INDEX_SLOTS == 1 << 17);

/// A sample taken and not yet handed to the ticker.
#[derive(Clone, Copy)]
struct Pending {
    size: u64,
    bytes: u64,
    freed: bool,
    depth: u8,
    frames: [usize; MAX_FRAMES],
}

impl Pending {
    const EMPTY: Pending = Pending {
        size: 0,
        bytes: 0,
        freed: false,
        depth: 0,
        frames: [0; MAX_FRAMES],
    };
}

/// The tables behind the lock.
struct Table {
    /// Open-addressed index of live sampled blocks: pointer (0: empty slot) → sample id.
    keys: [usize; INDEX_SLOTS],
    ids: [u64; INDEX_SLOTS],
    /// The next sample id.
    next_id: u64,
    /// Ids below this were handed to the ticker; `drained..next_id` are pending, at
    /// `id % MAX_PENDING`.
    drained: u64,
    pending: [Pending; MAX_PENDING],
    /// Ids handed to the ticker whose blocks were freed since (at most one per live
    /// sample, so never more than [`MAX_LIVE`]).
    freed: [u64; MAX_LIVE],
    freed_len: usize,
}

/// A spin lock: held for a few hundred nanoseconds at most, by code that neither
/// allocates nor blocks.
struct Locked {
    held: AtomicBool,
    table: UnsafeCell<Table>,
}

// SAFETY: the table is only reached through `with`, which holds `held` for the whole
// access, so no two threads touch it at once.
unsafe impl Sync for Locked {}

impl Locked {
    fn with<R>(&self, f: impl FnOnce(&mut Table) -> R) -> R {
        while self
            .held
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: `held` is ours until the release below: no other reference to the table
        // exists meanwhile, and `f` (this module's code) does not call `with` again.
        let result = f(unsafe { &mut *self.table.get() });
        self.held.store(false, Ordering::Release);
        result
    }
}

static TABLE: Locked = Locked {
    held: AtomicBool::new(false),
    table: UnsafeCell::new(Table {
        keys: [0; INDEX_SLOTS],
        ids: [0; INDEX_SLOTS],
        next_id: 0,
        drained: 0,
        pending: [Pending::EMPTY; MAX_PENDING],
        freed: [0; MAX_LIVE],
        freed_len: 0,
    }),
};

/// Keeps a sample of the block at `ptr`.
fn record(ptr: usize, size: u64, bytes: u64, frames: &[usize]) {
    let taken = TABLE.with(|t| {
        if LIVE.load(Ordering::Relaxed) >= MAX_LIVE
            || (t.next_id - t.drained) as usize >= MAX_PENDING
        {
            return false;
        }
        let id = t.next_id;
        t.next_id += 1;
        let p = &mut t.pending[(id % MAX_PENDING as u64) as usize];
        p.size = size;
        p.bytes = bytes;
        p.freed = false;
        p.depth = frames.len() as u8;
        p.frames[..frames.len()].copy_from_slice(frames);
        index_insert(&mut t.keys, &mut t.ids, ptr, id);
        let f = &FILTER[filter_slot(ptr)];
        let count = f.load(Ordering::Relaxed);
        if count < u8::MAX {
            f.store(count + 1, Ordering::Relaxed);
        }
        LIVE.fetch_add(1, Ordering::Relaxed);
        true
    });
    if !taken {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// The block at `ptr` is being freed: if it was sampled, its sample is freed too.
#[cold]
fn freed(ptr: usize) {
    TABLE.with(|t| {
        let Some(slot) = index_find(&t.keys, ptr) else {
            return;
        };
        let id = t.ids[slot];
        index_remove(&mut t.keys, &mut t.ids, slot);
        let f = &FILTER[filter_slot(ptr)];
        let count = f.load(Ordering::Relaxed);
        if count < u8::MAX {
            f.store(count.saturating_sub(1), Ordering::Relaxed);
        }
        LIVE.fetch_sub(1, Ordering::Relaxed);
        if id >= t.drained {
            t.pending[(id % MAX_PENDING as u64) as usize].freed = true;
        } else if t.freed_len < MAX_LIVE {
            t.freed[t.freed_len] = id;
            t.freed_len += 1;
        }
    });
}

/// Puts `ptr → id` in the linear-probing index (which has room: at most [`MAX_LIVE`]
/// entries in twice as many slots).
fn index_insert(keys: &mut [usize], ids: &mut [u64], ptr: usize, id: u64) {
    let mut slot = index_slot(ptr);
    while keys[slot] != 0 {
        slot = (slot + 1) % keys.len();
    }
    keys[slot] = ptr;
    ids[slot] = id;
}

/// The slot of `ptr` in the index.
fn index_find(keys: &[usize], ptr: usize) -> Option<usize> {
    let mut slot = index_slot(ptr);
    loop {
        match keys[slot] {
            0 => return None,
            key if key == ptr => return Some(slot),
            _ => slot = (slot + 1) % keys.len(),
        }
    }
}

/// Empties `hole` of the index, moving later entries of its run back so that every
/// entry stays reachable from its home slot (no tombstones).
fn index_remove(keys: &mut [usize], ids: &mut [u64], mut hole: usize) {
    let n = keys.len();
    keys[hole] = 0;
    let mut next = (hole + 1) % n;
    while keys[next] != 0 {
        let home = index_slot(keys[next]);
        // The entry at `next` may fill the hole when its home is not in (hole, next].
        let between = if hole <= next {
            hole < home && home <= next
        } else {
            hole < home || home <= next
        };
        if !between {
            keys[hole] = keys[next];
            ids[hole] = ids[next];
            keys[next] = 0;
            hole = next;
        }
        next = (next + 1) % n;
    }
}

/// Marks the calling thread as not to be sampled while the guard lives (the ticker
/// building its `alloc_samples` message): its allocations are counted, not sampled, so
/// the profiler does not profile itself.
#[derive(Debug)]
pub struct Unsampled {
    was: bool,
}

impl Unsampled {
    /// Stops sampling the calling thread until the guard is dropped.
    pub fn new() -> Self {
        let was = STATE.try_with(|s| s.busy.replace(true)).unwrap_or(true);
        Unsampled { was }
    }
}

impl Default for Unsampled {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Unsampled {
    fn drop(&mut self) {
        let _ = STATE.try_with(|s| s.busy.set(self.was));
    }
}

/// One sample handed to the ticker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Its id, which [`Drained::freed`] names once its block is freed.
    pub id: u64,
    /// Bytes allocated.
    pub size: u64,
    /// Bytes it stands for ([`represented_bytes`]).
    pub bytes: u64,
    /// Freed before it was handed over.
    pub freed: bool,
    /// Return addresses, innermost first.
    pub frames: Vec<u64>,
}

/// What [`drain`] hands over: the samples taken and the earlier ones freed since the
/// last call.
#[derive(Debug, Default)]
pub struct Drained {
    /// Samples taken since the last drain.
    pub samples: Vec<Sample>,
    /// Ids of samples drained before and freed since.
    pub freed: Vec<u64>,
    /// Samples not taken (tables full) since the process started.
    pub dropped: u64,
}

/// Records copied out under the lock at a time: the lock is never held while allocating.
const CHUNK: usize = 16;

/// Takes the samples taken and freed since the last call into `out` (emptied first).
/// Call from one thread (the ticker), with an [`Unsampled`] guard alive so its own
/// allocations are not sampled.
pub fn drain(out: &mut Drained) {
    out.samples.clear();
    out.freed.clear();
    out.dropped = DROPPED.load(Ordering::Relaxed);
    let mut chunk = [Pending::EMPTY; CHUNK];
    let mut ids = [0u64; CHUNK];
    loop {
        let (n, first) = TABLE.with(|t| {
            let n = ((t.next_id - t.drained) as usize).min(CHUNK);
            let first = t.drained;
            for (i, slot) in chunk.iter_mut().enumerate().take(n) {
                *slot = t.pending[((first + i as u64) % MAX_PENDING as u64) as usize];
            }
            t.drained += n as u64;
            (n, first)
        });
        if n == 0 {
            break;
        }
        for (i, p) in chunk.iter().enumerate().take(n) {
            out.samples.push(Sample {
                id: first + i as u64,
                size: p.size,
                bytes: p.bytes,
                freed: p.freed,
                frames: p.frames[..usize::from(p.depth)]
                    .iter()
                    .map(|&a| a as u64)
                    .collect(),
            });
        }
    }
    loop {
        let n = TABLE.with(|t| {
            let n = t.freed_len.min(CHUNK);
            t.freed_len -= n;
            ids[..n].copy_from_slice(&t.freed[t.freed_len..t.freed_len + n]);
            n
        });
        if n == 0 {
            break;
        }
        out.freed.extend_from_slice(&ids[..n]);
    }
}

/// Samples live now (taken, not yet freed).
pub fn live_samples() -> usize {
    LIVE.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_stands_for_its_size_over_its_chance_of_being_taken() {
        let rate = 512 * 1024;
        // Tiny allocations: about the rate each.
        let small = represented_bytes(16, rate);
        assert!((small as i64 - rate as i64).abs() <= 16, "{small}");
        // Far larger than the rate: about their size.
        let big = represented_bytes(64 << 20, rate);
        assert_eq!(big, 64 << 20);
        // At the rate: size / (1 - 1/e).
        let at = represented_bytes(rate, rate) as f64;
        assert!((at / (rate as f64 / (1.0 - (-1.0f64).exp())) - 1.0).abs() < 1e-6);
        assert_eq!(represented_bytes(100, 0), 100);
    }

    #[test]
    fn gaps_are_exponential_with_the_mean_asked_for() {
        let state = ThreadState::new();
        let rate = 1 << 20;
        let n = 200_000;
        let gaps: Vec<f64> = (0..n).map(|_| draw(&state, rate) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / n as f64;
        assert!((mean / rate as f64 - 1.0).abs() < 0.01, "mean {mean}");
        // Exponential: the median is ln 2 times the mean.
        let mut sorted = gaps.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[n / 2] / rate as f64;
        assert!(
            (median - std::f64::consts::LN_2).abs() < 0.01,
            "median {median}"
        );
    }

    #[test]
    fn the_index_finds_every_key_after_removals_in_any_order() {
        // A private index: the statics belong to the allocator.
        let mut keys = vec![0usize; INDEX_SLOTS];
        let mut ids = vec![0u64; INDEX_SLOTS];
        // Pointers 48 bytes apart, as a small-object allocator hands them out: runs of
        // neighbours collide and wrap.
        let ptrs: Vec<usize> = (1..=MAX_LIVE).map(|i| i * 48).collect();
        for (i, &p) in ptrs.iter().enumerate() {
            index_insert(&mut keys, &mut ids, p, i as u64);
        }
        for &p in ptrs.iter().step_by(3) {
            let slot = index_find(&keys, p).unwrap();
            index_remove(&mut keys, &mut ids, slot);
        }
        for (i, &p) in ptrs.iter().enumerate() {
            let found = index_find(&keys, p).map(|slot| ids[slot]);
            assert_eq!(found, (i % 3 != 0).then_some(i as u64), "pointer {p}");
        }
    }

    #[inline(never)]
    fn walk_here() -> Vec<u64> {
        let state = ThreadState::new();
        let mut frames = [0usize; MAX_FRAMES];
        let n = capture(&state, &mut frames);
        frames[..n].iter().map(|&a| a as u64).collect()
    }

    #[inline(never)]
    fn walk_from_a_caller() -> Vec<u64> {
        let frames = walk_here();
        std::hint::black_box(frames)
    }

    #[test]
    fn the_frame_pointer_walk_returns_into_its_callers() {
        let frames = walk_from_a_caller();
        assert!(frames.len() >= 3, "{frames:x?}");
        // The first return address is in `walk_here` (after its call of `capture`), the
        // next in `walk_from_a_caller`: both within a few hundred bytes of their starts.
        let near = |addr: u64, f: usize| addr > f as u64 && addr < f as u64 + 4096;
        assert!(
            near(frames[0], walk_here as *const () as usize),
            "{frames:x?}"
        );
        assert!(
            near(frames[1], walk_from_a_caller as *const () as usize),
            "{frames:x?}"
        );
    }
}
