//! Allocation profiles of a worker that samples its own allocations (report protocol
//! version 2, `alloc_samples`; docs/protocol.md): the bytes allocated per stack, the bytes
//! live per stack now, at the peak of live bytes and at the end.
//!
//! ```
//! use benchtop_profilers::allocations::AllocProfile;
//! use benchtop_profilers::SymbolDetail;
//!
//! let mut profile = AllocProfile::new(std::process::id(), SymbolDetail::NamesOnly);
//! // One message: its rate, its new stacks (return addresses, innermost first), its
//! // samples (id, stack, bytes represented, freed already) and the ids freed since.
//! profile.set_rate(524_288, 0);
//! profile.add_stacks([(1, &[][..])])?;
//! profile.sample(0, 1, 524_320, false);
//! profile.freed(99); // an id never seen: ignored
//! profile.on_tick(Some(600_000), 1_000_000_000);
//! let trees = profile.trees();
//! assert_eq!(trees.alloc.total_weight(), 524_320);
//! assert_eq!(trees.live.total_weight(), 524_320);
//! # Ok::<(), String>(())
//! ```
//!
//! The worker's mappings are read when the profile begins; its stacks are symbolized
//! when trees are asked for, or on the thread of a consumer that streams them
//! ([`AllocStacks`]), by one resolver that both share (its symbolizer is the sampler's
//! when they symbolize alike). The allocator's own frames (its sampling,
//! `__rust_alloc`, the global allocator's glue) are cut from the leaf end, so a stack
//! ends where the program asked for memory (`Vec` growth, `Box::new`…). Everything a worker sends is untrusted
//! and bounded: [`MAX_STACKS`] stacks, [`MAX_LIVE`] live samples, frames as the protocol
//! allows.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use benchtop_profile::sampling::AllocSamplingInfo;
use benchtop_profile::{FrameId, StackTree};

use crate::symbolize::{Resolver, SymbolDetail};

/// Stacks kept; samples of further stacks are counted in
/// [`AllocSamplingInfo::unattributed`].
pub const MAX_STACKS: usize = 1 << 16;

/// Live samples kept (the worker keeps 65 536 at most); further ones are counted as
/// allocated, never as live.
pub const MAX_LIVE: usize = 1 << 20;

/// The frame of a sample whose stack the worker could not walk (or sent no frames for).
pub const NO_STACK_FRAME: &str = "[no stack]";

/// The three allocation profiles of a session.
#[derive(Debug, Clone, Default)]
pub struct AllocTrees {
    /// Bytes allocated per stack over the run: alloc.folded.
    pub alloc: StackTree,
    /// Bytes live per stack at the run's peak of live bytes: live.folded.
    pub live: StackTree,
    /// Bytes live per stack now (at the end, once the run ended): live-end.folded.
    pub live_end: StackTree,
}

/// One stretch of the run (a report interval, or what came after the last one), by the
/// worker's stack ids: what was allocated in it, and what was live at its end.
#[derive(Debug, Clone)]
pub struct AllocInterval {
    /// Where it begins, ns from the run's start.
    pub t0_ns: u64,
    /// Where it ends, ns from the run's start.
    pub t1_ns: u64,
    /// The sampling's mean bytes between samples.
    pub rate: u64,
    /// Bytes allocated in it per stack (stack id, bytes), by stack id; added up over a
    /// run's intervals, alloc.folded.
    pub allocated: Vec<(u32, u64)>,
    /// Bytes live per stack at its end, by stack id: the last interval's is
    /// live-end.folded, the peak's live.folded.
    pub live: Vec<(u32, u64)>,
    /// Where the stack ids are named ([`AllocStacks::with_names`]).
    pub stacks: AllocStacks,
}

/// Stack ids' frames, symbolized in one process's address space.
#[derive(Debug)]
struct Symbols {
    pid: u32,
    resolver: Resolver,
    /// Frame names; the stacks of the trees handed out use these ids.
    names: StackTree,
    /// The root of every stack: the worker's name, read while it lives.
    process: FrameId,
    /// The worker's stack id → frames, root first (the process's name first).
    stacks: HashMap<u32, Box<[FrameId]>>,
    /// Scratch for symbolization.
    want: Vec<(u32, u64)>,
}

impl Symbols {
    /// Symbols of `pid`, its stacks rooted at `process`, with debug files looked for in
    /// `debug_dirs` first.
    fn new(pid: u32, detail: SymbolDetail, debug_dirs: &[PathBuf], process: &str) -> Self {
        let mut resolver = Resolver::with_debug_dirs(detail, debug_dirs);
        // The worker's mappings, read while it lives: its stacks still symbolize after
        // it exits.
        resolver.see_process(pid);
        let mut names = StackTree::new();
        let process = names.intern(process);
        Symbols {
            pid,
            resolver,
            names,
            process,
            stacks: HashMap::new(),
            want: Vec::new(),
        }
    }

    /// Resolves `stacks` and keeps them (up to [`MAX_STACKS`]).
    fn symbolize(&mut self, stacks: &[(u32, &[u64])]) {
        let room = MAX_STACKS.saturating_sub(self.stacks.len());
        let stacks = &stacks[..stacks.len().min(room)];
        if stacks.is_empty() {
            return;
        }
        let pid = self.pid;
        self.want.clear();
        // Return addresses point after the call: moved back into it.
        self.want.extend(
            stacks
                .iter()
                .flat_map(|(_, frames)| frames.iter())
                .filter(|&&a| self.resolver.user(pid, a.saturating_sub(1)).is_none())
                .map(|&a| (pid, a.saturating_sub(1))),
        );
        if !self.want.is_empty() {
            let mut want = std::mem::take(&mut self.want);
            self.resolver
                .resolve(&mut self.names, &mut want, &mut Vec::new());
            self.want = want;
        }
        let process = self.process;
        let unknown = self.names.intern("[unknown]");
        let mut frames = Vec::new();
        for &(id, addresses) in stacks {
            frames.clear();
            for &addr in addresses.iter().rev() {
                match self.resolver.user(pid, addr.saturating_sub(1)) {
                    Some(f) => frames.extend_from_slice(f),
                    None => frames.push(unknown),
                }
            }
            let keep = program_frames(&frames, |f| self.names.name(f));
            let mut path = Vec::with_capacity(keep + 1);
            path.push(process);
            path.extend_from_slice(&frames[..keep]);
            if keep == 0 {
                path.push(self.names.intern(NO_STACK_FRAME));
            }
            self.stacks.insert(id, path.into());
        }
        // Spans handed out so far are copied: the caches may be trimmed now.
        self.resolver.end_batch(0);
        // The symbolizer is the sampler's while it runs: once the sampler is done, its
        // parsed files are not kept mapped for the few stacks that come after.
        self.resolver.let_go_of_symbolizer();
    }
}

/// An allocation profile's stacks and the one resolver that names them, shared by the
/// recorder's [`AllocProfile`] and a consumer on another thread (an OTLP exporter) that
/// names them there ([`AllocStacks::with_names`]), so the recorder's thread never waits
/// on debug information and the stacks are named once, not once per consumer. Cheap to
/// clone; it holds at most [`MAX_STACKS`] stacks of the protocol's frames.
#[derive(Clone)]
pub struct AllocStacks {
    shared: Arc<SharedStacks>,
}

struct SharedStacks {
    /// Stacks not symbolized yet (their return addresses, innermost first), in the
    /// order they came: the recorder's thread adds to it under a lock held for the push.
    pending: Mutex<Vec<(u32, Box<[u64]>)>>,
    /// The symbolizer and every name made so far; whoever names holds it.
    symbols: Mutex<Symbols>,
}

impl std::fmt::Debug for AllocStacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllocStacks").finish_non_exhaustive()
    }
}

impl AllocStacks {
    fn new(symbols: Symbols) -> Self {
        AllocStacks {
            shared: Arc::new(SharedStacks {
                pending: Mutex::new(Vec::new()),
                symbols: Mutex::new(symbols),
            }),
        }
    }

    fn push(&self, id: u32, frames: &[u64]) {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, frames.into()));
    }

    /// Symbolizes what is pending into `symbols` (held by the caller: the pending
    /// stacks are taken under it, so no one reads names while they are half made).
    fn resolve(&self, symbols: &mut Symbols) {
        let pending = std::mem::take(
            &mut *self
                .shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if pending.is_empty() {
            return;
        }
        let stacks: Vec<(u32, &[u64])> = pending.iter().map(|(id, f)| (*id, &f[..])).collect();
        symbols.symbolize(&stacks);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Symbols> {
        self.shared
            .symbols
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Symbolizes the stacks that came since the last naming (the first time, this reads
    /// the program's symbols: call it off the recorder's thread), then hands `f` their
    /// names. The names are the same the recorder's own profile gives, so a stack is the
    /// same folded line in alloc.folded and wherever these names go.
    pub fn with_names<T>(&self, f: impl FnOnce(&AllocNames<'_>) -> T) -> T {
        let mut symbols = self.lock();
        self.resolve(&mut symbols);
        f(&AllocNames(&symbols))
    }
}

/// Names of an [`AllocStacks`]'s stacks, as [`AllocStacks::with_names`] lends them.
#[derive(Debug)]
pub struct AllocNames<'a>(&'a Symbols);

impl AllocNames<'_> {
    /// Stack `id`'s frame names, root first (the worker's name first), once it has been
    /// named.
    pub fn frames(&self, id: u32) -> Option<impl DoubleEndedIterator<Item = &str>> {
        let path = self.0.stacks.get(&id)?;
        Some(path.iter().map(|&f| self.0.names.name(f)))
    }
}

/// Sampled allocations of one worker process, as they arrive.
#[derive(Debug)]
pub struct AllocProfile {
    /// The stacks and their symbolizer. Symbolizing waits until trees are asked for (or
    /// a consumer of [`AllocProfile::share_stacks`] names them on its own thread), so
    /// that a recorder whose run nobody watches does not stall its loop reading debug
    /// information mid-run.
    stacks: AllocStacks,
    /// Every stack id the worker sent and the profile keeps, symbolized or not.
    known: HashSet<u32>,
    /// Whether a consumer on another thread asked for the stacks.
    shared: bool,
    /// Sample id → (stack id, bytes it stands for), while its block is live.
    live: HashMap<u64, (u32, u64)>,
    allocated: HashMap<u32, u64>,
    /// Bytes allocated per stack since the last [`AllocProfile::take_interval`].
    since: HashMap<u32, u64>,
    live_by_stack: HashMap<u32, u64>,
    /// The peak of live bytes seen at a tick (the worker's counter, else the samples'
    /// estimate) and the live bytes per stack then.
    peak: Option<(u64, HashMap<u32, u64>)>,
    info: AllocSamplingInfo,
}

impl AllocProfile {
    /// A profile of the worker `pid`, naming frames as `detail` says.
    pub fn new(pid: u32, detail: SymbolDetail) -> Self {
        Self::with_debug_dirs(pid, detail, &[])
    }

    /// A profile of the worker `pid`, naming frames as `detail` says and looking for
    /// separate debug files in `debug_dirs` first, as the sampler does: a sampler of the
    /// same options running beside it shares its symbolizer (the program is read and
    /// mapped once).
    pub fn with_debug_dirs(pid: u32, detail: SymbolDetail, debug_dirs: &[PathBuf]) -> Self {
        AllocProfile {
            stacks: AllocStacks::new(Symbols::new(pid, detail, debug_dirs, &process_name(pid))),
            known: HashSet::new(),
            shared: false,
            live: HashMap::new(),
            allocated: HashMap::new(),
            since: HashMap::new(),
            live_by_stack: HashMap::new(),
            peak: None,
            info: AllocSamplingInfo::default(),
        }
    }

    /// The profile's stacks, for a consumer on another thread to name
    /// ([`AllocStacks::with_names`]) with the profile's own symbolizer; from the first
    /// call on, [`AllocProfile::take_interval`] hands out intervals.
    pub fn share_stacks(&mut self) -> AllocStacks {
        self.shared = true;
        self.stacks.clone()
    }

    /// The sampling's mean bytes between samples, and the samples the worker could not
    /// take, as its latest message says.
    pub fn set_rate(&mut self, rate: u64, dropped: u64) {
        self.info.rate = rate;
        self.info.dropped = dropped;
    }

    /// New stacks: each a worker's id and its return addresses, innermost first. They
    /// are symbolized when trees are asked for ([`AllocProfile::resolve`]) or named by
    /// a consumer of [`AllocProfile::share_stacks`]. A stack id already known is refused
    /// (the error names it; the other stacks are kept); past [`MAX_STACKS`] stacks are
    /// dropped, and their samples counted as unattributed.
    pub fn add_stacks<'a>(
        &mut self,
        stacks: impl IntoIterator<Item = (u32, &'a [u64])>,
    ) -> Result<(), String> {
        let mut refused = None;
        for (id, frames) in stacks {
            if self.known.contains(&id) {
                refused.get_or_insert_with(|| format!("stack {id} was sent twice"));
                continue;
            }
            if self.known.len() >= MAX_STACKS {
                continue;
            }
            self.known.insert(id);
            self.stacks.push(id, frames);
        }
        self.info.stacks = self.known.len() as u64;
        refused.map_or(Ok(()), Err)
    }

    /// Symbolizes the stacks that arrived since the last call (the worker's mappings
    /// were read when the profile began, so this works after it exited too).
    pub fn resolve(&mut self) {
        let mut symbols = self.stacks.lock();
        self.stacks.resolve(&mut symbols);
    }

    /// A sampled allocation: its id, its stack's id, the bytes it stands for, and whether
    /// its block was freed before the worker sent it (then it counts as allocated only).
    pub fn sample(&mut self, id: u64, stack: u32, bytes: u64, freed: bool) {
        self.info.samples += 1;
        if !self.known.contains(&stack) {
            self.info.unattributed += 1;
            return;
        }
        self.info.bytes = self.info.bytes.saturating_add(bytes);
        for total in [
            self.allocated.entry(stack).or_default(),
            self.since.entry(stack).or_default(),
        ] {
            *total = total.saturating_add(bytes);
        }
        if freed {
            return;
        }
        if self.live.len() >= MAX_LIVE && !self.live.contains_key(&id) {
            return;
        }
        if let Some(old) = self.live.insert(id, (stack, bytes)) {
            self.forget(old);
        }
        let live = self.live_by_stack.entry(stack).or_default();
        *live = live.saturating_add(bytes);
    }

    /// The block of sample `id` was freed (an id not live is ignored).
    pub fn freed(&mut self, id: u64) {
        if let Some(old) = self.live.remove(&id) {
            self.forget(old);
        }
    }

    /// A live sample's bytes leave its stack's live total.
    fn forget(&mut self, (stack, bytes): (u32, u64)) {
        if let Some(live) = self.live_by_stack.get_mut(&stack) {
            *live = live.saturating_sub(bytes);
            if *live == 0 {
                self.live_by_stack.remove(&stack);
            }
        }
    }

    /// A tick arrived `t_ns` after the run's start, carrying the worker's `live_bytes`
    /// counter when it has one: the live bytes per stack are kept when they are the most
    /// seen so far.
    pub fn on_tick(&mut self, live_bytes: Option<u64>, t_ns: u64) {
        let sampled: u64 = self
            .live_by_stack
            .values()
            .fold(0, |a, &b| a.saturating_add(b));
        let level = live_bytes.unwrap_or(sampled);
        if self.peak.as_ref().is_none_or(|(peak, _)| level >= *peak) {
            self.peak = Some((level, self.live_by_stack.clone()));
            self.info.peak_live_bytes = sampled;
            self.info.peak_t_ns = Some(t_ns);
        }
        self.info.end_live_bytes = sampled;
    }

    /// The interval from `t0_ns` to `t1_ns` ended: the bytes allocated per stack since
    /// the last call (they start again from zero) and the bytes live per stack now. Only
    /// once [`AllocProfile::share_stacks`] was called (its stacks name the ids); `None`
    /// before.
    pub fn take_interval(&mut self, t0_ns: u64, t1_ns: u64) -> Option<AllocInterval> {
        if !self.shared {
            return None;
        }
        let stacks = self.stacks.clone();
        let sorted = |map: &HashMap<u32, u64>| {
            let mut v: Vec<(u32, u64)> = map.iter().map(|(&s, &b)| (s, b)).collect();
            v.sort_unstable();
            v
        };
        let allocated = sorted(&self.since);
        self.since.clear();
        Some(AllocInterval {
            t0_ns,
            t1_ns,
            rate: self.info.rate,
            allocated,
            live: sorted(&self.live_by_stack),
            stacks,
        })
    }

    /// Whether any sample arrived.
    pub fn is_empty(&self) -> bool {
        self.info.samples == 0
    }

    /// What the sampling was and did, for session.json.
    pub fn info(&self) -> AllocSamplingInfo {
        let mut info = self.info.clone();
        info.live_samples = self.live.len() as u64;
        info
    }

    /// The profiles as they stand: allocated, live at the peak, live now. Waits for a
    /// consumer that is naming the stacks on another thread.
    pub fn trees(&mut self) -> AllocTrees {
        let mut symbols = self.stacks.lock();
        self.stacks.resolve(&mut symbols);
        self.trees_of(&symbols)
    }

    /// The profiles as they stand, unless a consumer on another thread is naming the
    /// stacks right now (reading the program's symbols can take seconds): then `None`,
    /// and the caller asks again later instead of waiting.
    pub fn trees_unless_busy(&mut self) -> Option<AllocTrees> {
        let mut symbols = match self.stacks.shared.symbols.try_lock() {
            Ok(symbols) => symbols,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        self.stacks.resolve(&mut symbols);
        Some(self.trees_of(&symbols))
    }

    fn trees_of(&self, symbols: &Symbols) -> AllocTrees {
        let tree = |weights: &HashMap<u32, u64>| {
            let mut tree = symbols.names.clone();
            let mut ids: Vec<_> = weights.iter().collect();
            // The same profile gives the same tree, whatever the map's order.
            ids.sort_unstable();
            for (id, &bytes) in ids {
                if let Some(frames) = symbols.stacks.get(id) {
                    tree.add(frames, bytes);
                }
            }
            tree
        };
        AllocTrees {
            alloc: tree(&self.allocated),
            live: self
                .peak
                .as_ref()
                .map_or_else(|| tree(&self.live_by_stack), |(_, by)| tree(by)),
            live_end: tree(&self.live_by_stack),
        }
    }
}

/// The process's name (its `comm`), as the sampler roots its stacks.
fn process_name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("[pid {pid}]"))
}

/// How many of `frames` (root first) are the program's: the allocator's frames at the
/// leaf end are cut. Everything leafward of the outermost entry into the global
/// allocator (`__rust_alloc`, `__rust_realloc`, `__rust_alloc_zeroed`, the allocator's
/// `GlobalAlloc` methods) goes, then the standard library's allocation glue
/// (`alloc::alloc::…`, `<alloc::alloc::Global as …>`) above it.
pub fn program_frames<'a>(frames: &[FrameId], name: impl Fn(FrameId) -> &'a str) -> usize {
    let entry = frames.iter().position(|&f| is_allocator_entry(name(f)));
    let mut keep = entry.unwrap_or_else(|| {
        // No entry found (symbols missing): cut what is plainly the allocator's.
        frames.len()
            - frames
                .iter()
                .rev()
                .take_while(|&&f| is_allocator_entry(name(f)) || is_allocation_glue(name(f)))
                .count()
    });
    while keep > 0 && is_allocation_glue(name(frames[keep - 1])) {
        keep -= 1;
    }
    keep
}

/// A frame of the global allocator itself or of benchtop's sampling in it. Newer
/// compilers name the allocator shims `__rustc::__rust_alloc` and so on.
fn is_allocator_entry(name: &str) -> bool {
    let name = name.strip_prefix("__rustc::").unwrap_or(name);
    name.starts_with("__rust_alloc")
        || name.starts_with("__rust_realloc")
        || name.starts_with("__rust_dealloc")
        || name.starts_with("__rdl_")
        || name.starts_with("__rg_")
        || name.contains("as core::alloc::global::GlobalAlloc>")
        || name.starts_with("benchtop_workloads::alloc::")
}

/// The standard library's path from a collection to the global allocator.
fn is_allocation_glue(name: &str) -> bool {
    name.starts_with("alloc::alloc::")
        || name.starts_with("<alloc::alloc::Global as ")
        || name.starts_with("std::alloc::")
        || name.starts_with("core::alloc::")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> (StackTree, Vec<FrameId>) {
        let mut tree = StackTree::new();
        let ids = list.iter().map(|n| tree.intern(n)).collect();
        (tree, ids)
    }

    #[test]
    fn the_allocator_s_frames_are_cut_from_the_leaf_end() {
        let (tree, ids) = names(&[
            "main",
            "ring::AskActor::handle",
            "ring::Continuations::insert",
            "alloc::vec::Vec<T,A>::push",
            "alloc::raw_vec::RawVec<T,A>::grow_one",
            "alloc::raw_vec::finish_grow",
            "<alloc::alloc::Global as core::alloc::Allocator>::grow",
            "alloc::alloc::realloc",
            "__rustc::__rust_realloc",
            "<benchtop_workloads::alloc::CountingAlloc as core::alloc::global::GlobalAlloc>::realloc",
            "benchtop_workloads::alloc::sampling::on_alloc",
            "std::thread::local::LocalKey<T>::try_with",
            "benchtop_workloads::alloc::sampling::sample",
        ]);
        let keep = program_frames(&ids, |f| tree.name(f));
        assert_eq!(tree.name(ids[keep - 1]), "alloc::raw_vec::finish_grow");
        // Without the entry's name (symbols missing in part), the plain glue still goes.
        let (tree, ids) = names(&["main", "make", "alloc::alloc::alloc", "__rust_alloc"]);
        assert_eq!(program_frames(&ids, |f| tree.name(f)), 2);
        let (tree, ids) = names(&["main", "[unknown]"]);
        assert_eq!(program_frames(&ids, |f| tree.name(f)), 2);
    }

    #[test]
    fn live_bytes_follow_frees_and_the_peak_is_kept() {
        let mut p = AllocProfile::new(std::process::id(), SymbolDetail::NamesOnly);
        p.set_rate(1000, 0);
        p.add_stacks([(1, &[][..]), (2, &[][..])]).unwrap();
        p.sample(10, 1, 1000, false);
        p.sample(11, 1, 1000, false);
        p.sample(12, 2, 3000, false);
        p.sample(13, 2, 500, true);
        p.on_tick(Some(5000), 1);
        // Stack 2's block is freed, a new sample of stack 1 comes, an unknown stack's
        // sample is counted apart, an unknown free ignored.
        p.sample(14, 1, 1000, false);
        p.sample(15, 9, 7000, false);
        p.freed(12);
        p.freed(99);
        p.on_tick(Some(3000), 2);
        let trees = p.trees();
        assert_eq!(trees.alloc.total_weight(), 6500);
        assert_eq!(trees.live.total_weight(), 5000, "the peak: before the free");
        assert_eq!(trees.live_end.total_weight(), 3000);
        let info = p.info();
        assert_eq!(
            (info.samples, info.unattributed, info.live_samples),
            (6, 1, 3)
        );
        assert_eq!(info.stacks, 2);
        // Every stack is rooted at the process and, without frames, says so.
        let folded = trees.alloc.to_folded();
        assert!(
            folded.lines().all(|l| l.contains(NO_STACK_FRAME)),
            "{folded}"
        );
    }

    #[test]
    fn intervals_add_up_to_the_allocated_profile_and_end_on_the_live_one() {
        let mut p = AllocProfile::new(std::process::id(), SymbolDetail::NamesOnly);
        assert!(p.take_interval(0, 1).is_none(), "nothing shared yet");
        let stacks = p.share_stacks();
        p.set_rate(1000, 0);
        let addr = alloc_profile_test_fn as *const () as usize as u64 + 2;
        p.add_stacks([(1, &[addr][..]), (2, &[][..])]).unwrap();
        p.sample(10, 1, 1000, false);
        p.sample(11, 2, 3000, false);
        p.on_tick(Some(4000), 100);
        let first = p.take_interval(0, 100).expect("shared");
        assert_eq!(first.allocated, [(1, 1000), (2, 3000)]);
        assert_eq!(first.live, [(1, 1000), (2, 3000)]);
        assert_eq!(first.rate, 1000);
        p.sample(12, 1, 500, true);
        p.freed(11);
        p.on_tick(Some(1000), 200);
        let second = p.take_interval(100, 200).expect("shared");
        assert_eq!(second.allocated, [(1, 500)], "since the last interval only");
        assert_eq!(second.live, [(1, 1000)]);
        let empty = p.take_interval(200, 300).expect("shared");
        assert!(empty.allocated.is_empty());
        assert_eq!(p.info().peak_t_ns, Some(100));
        // Named on another thread, the stacks are the trees' folded lines.
        let trees = p.trees();
        let named = std::thread::spawn(move || {
            stacks.with_names(|names| {
                let line = |id| names.frames(id).map(|f| f.collect::<Vec<_>>().join(";"));
                (line(1), line(2), line(3))
            })
        })
        .join()
        .unwrap();
        let folded = trees.alloc.to_folded();
        let one = named.0.expect("stack 1 named");
        assert!(one.contains("alloc_profile_test_fn"), "{one}");
        assert!(
            folded.contains(&format!("{one} 1500\n")),
            "{one} in {folded}"
        );
        assert!(named.1.is_some());
        assert_eq!(named.2, None, "a stack never sent");
    }

    #[test]
    fn while_a_consumer_names_the_stacks_the_recorder_does_not_wait_for_them() {
        let mut p = AllocProfile::new(std::process::id(), SymbolDetail::NamesOnly);
        let stacks = p.share_stacks();
        let addr = alloc_profile_test_fn as *const () as usize as u64 + 2;
        p.add_stacks([(1, &[addr][..])]).unwrap();
        p.sample(1, 1, 1000, false);
        let (naming, named) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let consumer = std::thread::spawn(move || {
            stacks.with_names(|names| {
                naming.0.send(()).unwrap();
                // Holds the names until the test has asked for trees.
                named.1.recv().unwrap();
                names.frames(1).map(|f| f.collect::<Vec<_>>().join(";"))
            })
        });
        naming.1.recv().unwrap();
        assert!(p.trees_unless_busy().is_none(), "the names are being made");
        named.0.send(()).unwrap();
        let line = consumer
            .join()
            .unwrap()
            .expect("named on the consumer's thread");
        // Named once, by the consumer, with the one symbolizer: the trees read the same.
        let folded = p.trees_unless_busy().expect("free again").alloc.to_folded();
        assert_eq!(folded, format!("{line} 1000\n"));
        assert!(line.contains("alloc_profile_test_fn"), "{line}");
    }

    #[test]
    fn a_stack_sent_twice_is_refused_and_the_others_kept() {
        let mut p = AllocProfile::new(std::process::id(), SymbolDetail::NamesOnly);
        p.add_stacks([(1, &[][..])]).unwrap();
        let err = p.add_stacks([(1, &[][..]), (2, &[][..])]).unwrap_err();
        assert!(err.contains("stack 1 was sent twice"), "{err}");
        p.sample(1, 2, 10, false);
        assert_eq!(p.info().unattributed, 0);
    }

    #[inline(never)]
    fn alloc_profile_test_fn() -> u64 {
        std::hint::black_box(42)
    }

    #[test]
    fn stacks_are_symbolized_in_the_worker_s_address_space() {
        let mut p = AllocProfile::new(std::process::id(), SymbolDetail::NamesOnly);
        // A return address inside the function (as a call within it would leave).
        let addr = alloc_profile_test_fn as *const () as usize as u64 + 2;
        p.add_stacks([(3, &[addr][..])]).unwrap();
        p.sample(1, 3, 1000, false);
        let folded = p.trees().alloc.to_folded();
        assert!(folded.contains("alloc_profile_test_fn"), "{folded}");
    }
}
