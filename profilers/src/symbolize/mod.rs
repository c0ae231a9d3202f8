//! Batched, cached symbolization of sampled addresses into interned frames.
//!
//! User addresses are normalized per process to (ELF file, file offset) with blazesym's
//! [`Normalizer`] while the process lives, then symbolized per file with
//! [`Source::Elf`] and [`Input::FileOffset`]. Our own copy of each process's executable
//! mappings (read from /proc once when the process is first seen, then kept current by
//! MMAP2 and FORK records) normalizes what is left after a process has exited, and
//! addresses of an image it replaced by exec: the files are still on disk, so an exited
//! worker still symbolizes.
//!
//! Records reach us per CPU, so a sample taken after an exec can be read before the
//! exec's own record. Nothing here depends on that order: an exec only drops the cached
//! frames of the process, the old image's mappings stay (a newer mapping replaces an
//! older one where they overlap, by record time), and a live process is normalized
//! against its current maps first.
//!
//! Names follow one rule ([`naming`]): the qualified, demangled path of every function,
//! the symbol table's name for the outermost function of an address, closures spelled
//! `{{closure}}`.
//! A file without a symbol table of its own is named from its separate debug file's,
//! found by build id or debug link in the debug directories ([`debug_files`]: the
//! default ones and `--debug-dir`'s), in either [`SymbolDetail`].
//! Code the symbol tables do not cover is named from the file ([`fallback`]: PLT stubs
//! `target@plt`, functions of stripped code `FILE+0xSTART`), and generated code in
//! anonymous memory from the process's perf map ([`perf_map`]) and jitdump
//! ([`jitdump`]).
//!
//! Every result is cached: (pid, address) → frames, (file, offset) → frames, kernel
//! address → frames. Frames are interned into the caller's [`StackTree`] once and held
//! as spans of a shared arena, root-most (outermost inline caller) first.
//!
//! With [`SymbolDetail::Inlined`] every frame also gets its source location (file and
//! line, from the DWARF line tables: the sampled instruction's line for the innermost
//! frame of an address, the inlined call's line for the frames around it), interned once
//! as a location id ([`Resolver::location`]) held beside the frame in the arena. Ids are
//! never reused, so a caller may keep them across batches; past [`MAX_LOCATIONS`] new
//! lines get none.
//!
//! Memory stays bounded over a long session: an address that resolves to no symbol and
//! no function of its file's unwind tables becomes the one frame of its file
//! (`[libfoo.so]`, or `[unknown]` outside any file), never a frame per address; and every
//! cache is emptied between batches once it grows
//! past its cap (see the `MAX_*` constants), the arena with them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

mod debug_files;
mod fallback;
mod files;
mod jitdump;
mod naming;
mod perf_map;
mod shared;

use benchtop_profile::{FrameId, StackTree};
use blazesym::normalize::{NormalizeOpts, Normalizer, Reason as NormReason, UserMeta};
use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Sym, Symbolized, Symbolizer};
use blazesym::{MaybeDefault, Pid};

use self::debug_files::DebugDirs;
use self::fallback::FallbackName;
use self::files::Files;
use self::naming::{TableSym, outer_name};
use self::perf_map::ProcessMap;
use self::shared::SharedSymbolizer;
use crate::ksyms::KernelTable;
use crate::procfs;
use crate::records::Mmap2;

/// How much a symbolizer looks up for each address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SymbolDetail {
    /// Function names from DWARF with inlined functions expanded into frames of their
    /// own (the default; memory-hungry on very large binaries).
    #[default]
    Inlined,
    /// Function names from the ELF symbol tables only: cheaper, no inlined frames.
    NamesOnly,
}

impl SymbolDetail {
    /// The name sessions record: `inlined` or `names`.
    pub fn name(self) -> &'static str {
        match self {
            SymbolDetail::Inlined => "inlined",
            SymbolDetail::NamesOnly => "names",
        }
    }
}

/// Cached (pid, address) results per process before the cache is emptied: 16 bytes
/// of key and span each, plus the table's overhead, so some 40 MB at most.
const MAX_CACHED_ADDRS_PER_PROCESS: usize = 1 << 20;
/// Cached (file, offset) results before every cache and the arena are emptied: 24 bytes
/// each plus overhead, some 50 MB at most. Real code offsets are far fewer; garbage
/// return addresses from frame-pointer walks through foreign code are what fill it.
const MAX_CACHED_OFFSETS: usize = 1 << 20;
/// Cached kernel addresses before every cache and the arena are emptied (as above).
const MAX_CACHED_KERNEL_ADDRS: usize = 1 << 20;
/// Frames held in the arena (4 bytes each, 16 MB) before every cache and the arena are
/// emptied: symbols with inlined frames take several.
const MAX_ARENA_FRAMES: usize = 1 << 22;

/// Distinct source locations (file, line) interned before new ones get none: some
/// 40 MB at most, far more lines than the code a profile touches.
pub(crate) const MAX_LOCATIONS: usize = 1 << 20;

/// The location id of a frame without a source location.
pub(crate) const NO_LOCATION: u32 = u32::MAX;

/// Source locations interned to ids: (file, line).
#[derive(Debug, Default)]
struct Locations {
    files: Vec<Box<str>>,
    file_index: HashMap<Box<str>, u32>,
    entries: Vec<(u32, u32)>,
    index: HashMap<(u32, u32), u32>,
}

impl Locations {
    /// The id of `sym`'s or an inlined function's code location.
    fn id(&mut self, info: Option<&blazesym::symbolize::CodeInfo<'_>>) -> u32 {
        let Some((info, line)) = info.and_then(|i| Some((i, i.line?))) else {
            return NO_LOCATION;
        };
        let path = info.to_path();
        let path = path.to_string_lossy();
        let file = match self.file_index.get(&*path) {
            Some(&f) => f,
            None if self.entries.len() >= MAX_LOCATIONS => return NO_LOCATION,
            None => {
                let f = self.files.len() as u32;
                self.files.push(path.as_ref().into());
                self.file_index.insert(path.as_ref().into(), f);
                f
            }
        };
        if let Some(&id) = self.index.get(&(file, line)) {
            return id;
        }
        if self.entries.len() >= MAX_LOCATIONS {
            return NO_LOCATION;
        }
        let id = self.entries.len() as u32;
        self.entries.push((file, line));
        self.index.insert((file, line), id);
        id
    }
}

/// Files whose symbols [`Resolver::preload_mapped_files`] loads before sampling starts.
const MAX_PRELOADED_FILES: usize = 16;

/// The caps above, as values so that tests can lower them.
#[derive(Debug, Clone, Copy)]
struct Caps {
    addrs_per_process: usize,
    offsets: usize,
    kernel: usize,
    arena: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            addrs_per_process: MAX_CACHED_ADDRS_PER_PROCESS,
            offsets: MAX_CACHED_OFFSETS,
            kernel: MAX_CACHED_KERNEL_ADDRS,
            arena: MAX_ARENA_FRAMES,
        }
    }
}

/// A run of frames in [`Resolver`]'s arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

/// An executable mapping of a process, for normalizing after it exited.
#[derive(Debug, Clone, Copy)]
struct Mapping {
    start: u64,
    end: u64,
    pgoff: u64,
    file: u32,
    /// perf time of the MMAP2 record; 0 when read from /proc or inherited at fork.
    since: u64,
}

#[derive(Debug, Default)]
struct ProcSyms {
    /// Adjusted user address → frames.
    addrs: HashMap<u64, Span>,
    /// Executable mappings sorted by start, non-overlapping.
    maps: Vec<Mapping>,
    /// Maps were read from /proc or inherited from the parent at fork.
    maps_known: bool,
    /// Batch number at which the process exited.
    exited_at: Option<u64>,
    /// Its perf map, once generated code was sampled.
    perf_map: Option<ProcessMap>,
    /// Where its paths are read from here ([`procfs::mount_root`]), once looked up.
    root: Option<Option<PathBuf>>,
}

impl ProcSyms {
    /// Where `pid`'s absolute paths are read from here, looked up once.
    fn root(&mut self, pid: u32) -> Option<&Path> {
        self.root
            .get_or_insert_with(|| procfs::mount_root(pid))
            .as_deref()
    }
}

impl ProcSyms {
    /// Adds `m`, replacing the older mappings it overlaps. When a newer mapping already
    /// overlaps it (its record was read late, from another CPU's buffer), `m` is
    /// dropped.
    fn insert_mapping(&mut self, m: Mapping) {
        let overlaps = |o: &Mapping| o.end > m.start && o.start < m.end;
        if self.maps.iter().any(|o| overlaps(o) && o.since > m.since) {
            return;
        }
        self.maps.retain(|o| !overlaps(o));
        let at = self.maps.partition_point(|o| o.start < m.start);
        self.maps.insert(at, m);
    }

    fn lookup(&self, addr: u64) -> Option<(u32, u64)> {
        let i = self.maps.partition_point(|m| m.start <= addr);
        let m = self.maps.get(i.checked_sub(1)?)?;
        (addr < m.end).then(|| (m.file, addr - m.start + m.pgoff))
    }
}

/// Counters describing the resolver's work, for stats.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ResolverCounts {
    /// Addresses that resolved to no symbol.
    pub unresolved: u64,
}

/// The symbolization state of one sampler.
pub(crate) struct Resolver {
    normalizer: Normalizer,
    /// The process's symbolizer for this detail and these debug directories, shared
    /// with every other resolver that symbolizes alike ([`shared`]); taken when first
    /// needed, and let go by [`Resolver::let_go_of_symbolizer`].
    symbolizer: Option<std::sync::Arc<SharedSymbolizer>>,
    detail: SymbolDetail,
    /// Where separate debug files are looked for.
    debug_dirs: DebugDirs,
    kernel_source: Source<'static>,
    /// The kernel's symbol table being prepared ([`crate::ksyms`]), until first needed.
    kernel_table: Option<std::thread::JoinHandle<KernelTable>>,
    /// The table in use: a copy's descriptor stays open while the symbolizer reads it.
    _kernel_file: Option<KernelTable>,
    procs: HashMap<u32, ProcSyms>,
    files: Files,
    by_offset: HashMap<(u32, u64), Span>,
    kernel: HashMap<u64, Span>,
    arena: Vec<FrameId>,
    /// The location id of each frame of the arena.
    locs: Vec<u32>,
    locations: Locations,
    unknown: Option<Span>,
    unknown_kernel: Option<Span>,
    warned_files: Vec<u32>,
    caps: Caps,
    // Scratch reused across batches.
    to_symbolize: Vec<(u32, u64, u32, u64)>,
    offsets: Vec<u64>,
    /// The addresses of `offsets` in a file, for its debug file.
    addresses: Vec<u64>,
    line: String,
    /// Addresses of anonymous memory met in a batch, for the perf maps.
    jit: Vec<(u32, u64)>,
    /// When this resolver was made: a perf map older than it is no process's of its.
    began: std::time::SystemTime,
    pub warnings: Vec<String>,
    pub counts: ResolverCounts,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("procs", &self.procs.len())
            .field("files", &self.files.entries.len())
            .field("cached_offsets", &self.by_offset.len())
            .field("cached_kernel", &self.kernel.len())
            .finish_non_exhaustive()
    }
}

/// A blazesym symbolizer for `detail`, following debug links into `dirs`.
fn new_symbolizer(detail: SymbolDetail, dirs: &DebugDirs) -> Symbolizer {
    match detail {
        SymbolDetail::Inlined => Symbolizer::builder()
            .enable_code_info(true)
            .enable_inlined_fns(true)
            .enable_demangling(true),
        SymbolDetail::NamesOnly => Symbolizer::builder()
            .enable_code_info(false)
            .enable_inlined_fns(false)
            .enable_demangling(true),
    }
    .set_debug_dirs(Some(dirs.dirs()))
    .build()
}

impl Resolver {
    fn with(detail: SymbolDetail, debug_dirs: DebugDirs) -> Self {
        // kallsyms only: a vmlinux search (and its DWARF) costs far more than it adds.
        let kernel = Kernel {
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Kernel::default()
        };
        Resolver {
            // Build ids are not needed to symbolize on this machine; reading them costs
            // a file open per mapping per batch.
            normalizer: Normalizer::builder().enable_build_ids(false).build(),
            symbolizer: None,
            detail,
            debug_dirs,
            kernel_source: Source::Kernel(kernel),
            kernel_table: None,
            _kernel_file: None,
            procs: HashMap::new(),
            files: Files::default(),
            by_offset: HashMap::new(),
            kernel: HashMap::new(),
            arena: Vec::new(),
            locs: Vec::new(),
            locations: Locations::default(),
            unknown: None,
            unknown_kernel: None,
            warned_files: Vec::new(),
            caps: Caps::default(),
            to_symbolize: Vec::new(),
            offsets: Vec::new(),
            addresses: Vec::new(),
            line: String::new(),
            warnings: Vec::new(),
            jit: Vec::new(),
            began: std::time::SystemTime::now(),
            counts: ResolverCounts::default(),
        }
    }

    /// A resolver that looks for separate debug files in `dirs` first, then in the
    /// default directories (see [`debug_files`]).
    pub fn with_debug_dirs(detail: SymbolDetail, dirs: &[PathBuf]) -> Self {
        Self::with(detail, DebugDirs::new(dirs))
    }

    /// Frames (root first) of a user address of `pid`, when already resolved.
    pub fn user(&self, pid: u32, addr: u64) -> Option<&[FrameId]> {
        let span = *self.procs.get(&pid)?.addrs.get(&addr)?;
        Some(self.span(span))
    }

    /// Frames (root first) of a kernel address, when already resolved.
    pub fn kernel(&self, addr: u64) -> Option<&[FrameId]> {
        let span = *self.kernel.get(&addr)?;
        Some(self.span(span))
    }

    fn span(&self, s: Span) -> &[FrameId] {
        &self.arena[s.start as usize..(s.start + s.len) as usize]
    }

    /// Location ids ([`Resolver::location`]) of the frames of a user address of `pid`,
    /// as [`Resolver::user`] gives them.
    pub fn user_locations(&self, pid: u32, addr: u64) -> Option<&[u32]> {
        let s = *self.procs.get(&pid)?.addrs.get(&addr)?;
        self.locs.get(s.start as usize..(s.start + s.len) as usize)
    }

    /// The file and line of location `id`; `None` for [`NO_LOCATION`].
    pub fn location(&self, id: u32) -> Option<(&str, u32)> {
        let &(file, line) = self.locations.entries.get(id as usize)?;
        Some((self.locations.files.get(file as usize)?, line))
    }

    /// Makes sure `pid` has a mapping table: inherited at fork, else read from /proc
    /// now (once), while the process most likely still runs.
    pub fn see_process(&mut self, pid: u32) {
        let known = self.procs.get(&pid).is_some_and(|p| p.maps_known);
        if known {
            return;
        }
        let mut line = std::mem::take(&mut self.line);
        let path = PathBuf::from(format!("/proc/{pid}/maps"));
        if procfs::read_into(&path, &mut line).is_err() {
            line.clear();
        }
        self.see_maps(pid, &line);
        self.line = line;
    }

    /// Takes `text` (/proc/PID/maps as read earlier, by another resolver's owner) as
    /// `pid`'s mapping table, unless it has one already.
    pub fn see_maps(&mut self, pid: u32, text: &str) {
        if self.procs.get(&pid).is_some_and(|p| p.maps_known) {
            return;
        }
        let mut maps = Vec::new();
        let root = self
            .procs
            .entry(pid)
            .or_default()
            .root(pid)
            .map(Path::to_owned);
        for l in text.lines() {
            if let Some(m) = procfs::parse_maps_line(l) {
                let file = self
                    .files
                    .id(&procfs::under_root(root.as_deref(), Path::new(m.path)));
                maps.push(Mapping {
                    start: m.start,
                    end: m.end,
                    pgoff: m.offset,
                    file,
                    since: 0,
                });
            }
        }
        let proc = self.procs.entry(pid).or_default();
        proc.maps_known = true;
        for m in maps {
            proc.insert_mapping(m);
        }
    }

    /// A new executable mapping of `pid` (PERF_RECORD_MMAP2 at perf time `time`).
    pub fn on_mmap(&mut self, pid: u32, m: &Mmap2<'_>, time: u64) {
        if !m.is_file() {
            return;
        }
        // JIT frames: a runtime announces its jitdump by mapping it (see `jitdump`).
        if jitdump::is_marker(m.filename) {
            let proc = self.procs.entry(pid).or_default();
            if proc.perf_map.is_none() {
                proc.perf_map = ProcessMap::locate(pid);
            }
            if let Some(map) = &mut proc.perf_map {
                map.see_dump(pid, m.filename);
            }
            return;
        }
        use std::os::unix::ffi::OsStrExt as _;
        let raw = Path::new(std::ffi::OsStr::from_bytes(m.filename));
        let proc = self.procs.entry(pid).or_default();
        let file = self.files.id(&procfs::under_root(proc.root(pid), raw));
        proc.insert_mapping(Mapping {
            start: m.addr,
            end: m.addr.saturating_add(m.len),
            pgoff: m.pgoff,
            file,
            since: time,
        });
    }

    /// Starts preparing the kernel's symbol table on a thread of its own (a per-boot copy
    /// of kallsyms, see [`crate::ksyms`]): the first kernel address waits for it.
    pub fn prepare_kernel_symbols(&mut self) {
        if self.kernel_table.is_none() && self._kernel_file.is_none() {
            self.kernel_table = crate::ksyms::spawn();
        }
    }

    /// Points the kernel source at the prepared table, waiting for it if it is still
    /// being prepared.
    fn kernel_table_ready(&mut self) {
        let Some(handle) = self.kernel_table.take() else {
            return;
        };
        // A panicked preparation leaves the live table.
        let table = handle.join().unwrap_or(KernelTable::Live);
        if let Source::Kernel(k) = &mut self.kernel_source {
            k.kallsyms = MaybeDefault::Some(table.path());
        }
        self._kernel_file = Some(table);
    }

    /// The files `pid` has mapped executable, its executable first, at most
    /// [`MAX_PRELOADED_FILES`], each with one offset to warm it up with
    /// ([`Resolver::preload_file`]).
    pub fn files_to_preload(&self, pid: u32) -> Vec<(u32, u64)> {
        let Some(proc) = self.procs.get(&pid) else {
            return Vec::new();
        };
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .map(
                |exe| match exe.to_str().and_then(|e| e.strip_suffix(" (deleted)")) {
                    Some(stripped) => PathBuf::from(stripped),
                    None => exe,
                },
            );
        let exe = exe.and_then(|exe| self.files.index.get(&exe).copied());
        let mut files: Vec<(u32, u64)> = Vec::new();
        let exe_first = proc.maps.iter().filter(|m| Some(m.file) == exe);
        for m in exe_first.chain(proc.maps.iter().filter(|m| Some(m.file) != exe)) {
            if files.len() == MAX_PRELOADED_FILES {
                break;
            }
            if !files.iter().any(|&(f, _)| f == m.file) {
                files.push((m.file, m.pgoff));
            }
        }
        files
    }

    /// Loads the symbols (and, with [`SymbolDetail::Inlined`], the debug info) of one
    /// file by symbolizing one offset of it the way a batch would, so that batches do
    /// not pay for it: measured here, the C library's separate debug info was most of a
    /// first batch (30–65 ms), the test fixture's own DWARF a few ms. The result is
    /// dropped; a failure is met (and reported) again by the batches.
    pub fn preload_file(&mut self, file: u32, offset: u64) {
        let target = self.files.target(file, &self.debug_dirs);
        let fallback = self.files.fallback(file);
        let mut scratch = Vec::new();
        let input = target.input(&fallback, std::slice::from_ref(&offset), &mut scratch);
        let inlined = self.detail == SymbolDetail::Inlined;
        let shared = self.symbolizer();
        let symbolizer = shared.lock();
        let _ = symbolizer.symbolize(&target.source(inlined), input);
        if inlined {
            let _ = symbolizer.symbolize(&target.source(false), input);
        }
    }

    /// `child` was forked from `parent`: same address space until it execs.
    pub fn on_fork(&mut self, parent: u32, child: u32) {
        self.see_process(parent);
        let Some(maps) = self
            .procs
            .get(&parent)
            .filter(|p| p.maps_known)
            .map(|p| p.maps.clone())
        else {
            return;
        };
        let proc = self.procs.entry(child).or_default();
        if !proc.maps_known {
            proc.maps = maps;
            proc.maps_known = true;
        }
    }

    /// `pid` exec'd: addresses now mean something else. Its cached frames go; its old
    /// mappings stay for samples of the old image read late (see the module docs).
    pub fn on_exec(&mut self, pid: u32) {
        let proc = self.procs.entry(pid).or_default();
        proc.addrs.clear();
        proc.maps_known = true;
    }

    /// `pid` exited during batch `batch`.
    pub fn on_exit(&mut self, pid: u32, batch: u64) {
        if let Some(p) = self.procs.get_mut(&pid) {
            p.exited_at.get_or_insert(batch);
        }
    }

    /// Forgets processes that exited before batch `before` (by then every ring buffer
    /// has been read past their last sample), and empties caches grown past their cap:
    /// frame-pointer walks through code built without frame pointers yield endless
    /// garbage "addresses". A process's address cache alone is emptied first: real
    /// addresses come back cheaply from the (file, offset) cache. When that one, the
    /// kernel cache or the arena is full, everything is emptied together (spans point
    /// into the arena); the tree keeps its interned names, so frames stay the same.
    /// Only call this between batches: spans handed out before are invalid after.
    pub fn end_batch(&mut self, before: u64) {
        self.procs
            .retain(|_, p| p.exited_at.is_none_or(|at| at >= before));
        for m in self.procs.values_mut().filter_map(|p| p.perf_map.as_mut()) {
            m.end_batch();
        }
        let caps = self.caps;
        if self.by_offset.len() > caps.offsets
            || self.kernel.len() > caps.kernel
            || self.arena.len() > caps.arena
        {
            self.clear_caches();
            return;
        }
        for p in self.procs.values_mut() {
            if p.addrs.len() > caps.addrs_per_process {
                p.addrs = HashMap::new();
            }
        }
    }

    /// The shared symbolizer, taken now if it was not (the one in use for this detail and
    /// these directories, or a new one).
    fn symbolizer(&mut self) -> std::sync::Arc<SharedSymbolizer> {
        self.symbolizer
            .get_or_insert_with(|| shared::symbolizer(self.detail, &self.debug_dirs))
            .clone()
    }

    /// Lets go of the shared symbolizer until the next symbolization, which takes the one
    /// in use then: a resolver that symbolizes now and then (a worker's allocation
    /// stacks) does not keep the files another one parsed mapped once that one is done
    /// (the sampler's, at the end of a run). Resolved frames stay cached.
    pub fn let_go_of_symbolizer(&mut self) {
        self.symbolizer = None;
    }

    /// Empties every cache of resolved frames and the arena they point into.
    fn clear_caches(&mut self) {
        // blazesym keeps every parsed file (and kallsyms) mapped for the life of its
        // symbolizer: a new one lets them go too (once the other resolvers that shared
        // the old one let it go).
        self.symbolizer = Some(shared::fresh(self.detail, &self.debug_dirs));
        for p in self.procs.values_mut() {
            p.addrs = HashMap::new();
        }
        self.by_offset = HashMap::new();
        self.kernel = HashMap::new();
        self.arena = Vec::new();
        self.locs = Vec::new();
        self.unknown = None;
        self.unknown_kernel = None;
        for f in &mut self.files.entries {
            f.unknown = None;
        }
    }

    fn unknown_span(&mut self, tree: &mut StackTree) -> Span {
        if let Some(s) = self.unknown {
            return s;
        }
        let s = push_names(&mut self.arena, &mut self.locs, tree, ["[unknown]"]);
        self.unknown = Some(s);
        s
    }

    fn unknown_kernel_span(&mut self, tree: &mut StackTree) -> Span {
        if let Some(s) = self.unknown_kernel {
            return s;
        }
        let s = push_names(&mut self.arena, &mut self.locs, tree, ["[unknown]_[k]"]);
        self.unknown_kernel = Some(s);
        s
    }

    /// Resolves `user` ((pid, address) pairs) and `kernel` addresses that are not cached
    /// yet, interning names into `tree`. Both vectors are consumed (left empty).
    pub fn resolve(
        &mut self,
        tree: &mut StackTree,
        user: &mut Vec<(u32, u64)>,
        kernel: &mut Vec<u64>,
    ) {
        let unknown = self.unknown_span(tree);
        self.resolve_kernel(tree, kernel);

        user.sort_unstable();
        user.dedup();
        let mut to_symbolize = std::mem::take(&mut self.to_symbolize);
        to_symbolize.clear();
        let opts = NormalizeOpts {
            sorted_addrs: true,
            ..Default::default()
        };
        let mut addrs: Vec<u64> = Vec::new();
        let mut jit = std::mem::take(&mut self.jit);
        for group in user.chunk_by(|a, b| a.0 == b.0) {
            let pid = group[0].0;
            addrs.clear();
            addrs.extend(group.iter().map(|&(_, a)| a));
            // Pid 0 would mean "this process" to blazesym; it is never a sampled task.
            let normalized = if pid == 0 {
                None
            } else {
                self.normalizer
                    .normalize_user_addrs_opts(Pid::from(pid), &addrs, &opts)
                    .ok()
            };
            let proc = self.procs.entry(pid).or_default();
            // blazesym names files as the process sees them: read them through its root
            // when it lives in another mount namespace.
            let root = match &normalized {
                Some(_) => proc.root(pid).map(Path::to_owned),
                None => None,
            };
            match normalized {
                Some(out) => {
                    for (&addr, &(offset, meta)) in addrs.iter().zip(&out.outputs) {
                        match out.meta.get(meta) {
                            Some(UserMeta::Elf(elf)) => {
                                let path = procfs::under_root(root.as_deref(), &elf.path);
                                let file = self.files.id(&path);
                                to_symbolize.push((pid, addr, file, offset));
                            }
                            Some(UserMeta::Sym(sym)) => {
                                // The vDSO: blazesym symbolizes it directly.
                                let span = push_sym(
                                    &mut self.arena,
                                    &mut self.locs,
                                    &mut self.locations,
                                    tree,
                                    sym,
                                    &sym.name,
                                    "",
                                );
                                proc.addrs.insert(addr, span);
                            }
                            Some(UserMeta::Unknown(u)) if u.reason == NormReason::Unmapped => {
                                // Mapped after /proc was read, or the process is gone.
                                match proc.lookup(addr) {
                                    Some((file, off)) => to_symbolize.push((pid, addr, file, off)),
                                    None => jit.push((pid, addr)),
                                }
                            }
                            // Anonymous memory: generated code, named by a perf map.
                            _ => jit.push((pid, addr)),
                        }
                    }
                }
                None => {
                    // The process is gone: use the mappings we kept.
                    for &addr in &addrs {
                        match proc.lookup(addr) {
                            Some((file, off)) => to_symbolize.push((pid, addr, file, off)),
                            None => jit.push((pid, addr)),
                        }
                    }
                }
            }
        }
        user.clear();
        for (pid, addr) in jit.drain(..) {
            let span = match self.jit_span(tree, pid, addr) {
                Ok(span) => span,
                // Not cached: the map may name it once the runtime has written it.
                Err(true) => {
                    self.counts.unresolved += 1;
                    continue;
                }
                Err(false) => {
                    self.counts.unresolved += 1;
                    unknown
                }
            };
            self.procs.entry(pid).or_default().addrs.insert(addr, span);
        }
        self.jit = jit;

        // Symbolize the (file, offset) pairs not cached yet, one call per file.
        to_symbolize.sort_unstable_by_key(|&(_, _, file, off)| (file, off));
        let mut offsets = std::mem::take(&mut self.offsets);
        for group in to_symbolize.chunk_by(|a, b| a.2 == b.2) {
            let file = group[0].2;
            offsets.clear();
            offsets.extend(
                group
                    .iter()
                    .map(|e| e.3)
                    .filter(|off| !self.by_offset.contains_key(&(file, *off))),
            );
            offsets.dedup();
            if !offsets.is_empty() {
                self.symbolize_file(tree, file, &offsets);
            }
            for &(pid, addr, _, off) in group {
                let span = self.by_offset.get(&(file, off)).copied().unwrap_or(unknown);
                self.procs.entry(pid).or_default().addrs.insert(addr, span);
            }
        }
        self.offsets = offsets;
        to_symbolize.clear();
        self.to_symbolize = to_symbolize;
    }

    fn symbolize_file(&mut self, tree: &mut StackTree, file: u32, offsets: &[u64]) {
        // The file's own symbols, or its separate debug file's (see `debug_files`).
        let target = self.files.target(file, &self.debug_dirs);
        let fallback = self.files.fallback(file);
        let mut addresses = std::mem::take(&mut self.addresses);
        let input = target.input(&fallback, offsets, &mut addresses);
        let inlined = self.detail == SymbolDetail::Inlined;
        // The symbol table's names for the outer frames (see `naming`): a second lookup
        // of the same file, whose parsed symbols blazesym shares with the first.
        let shared = self.symbolizer();
        let symbolizer = shared.lock();
        let table = match self.detail {
            SymbolDetail::Inlined => symbolizer.symbolize(&target.source(false), input).ok(),
            SymbolDetail::NamesOnly => None,
        };
        let results = symbolizer.symbolize(&target.source(inlined), input);
        self.addresses = addresses;
        if let Err(err) = &results
            && !self.warned_files.contains(&file)
        {
            self.warned_files.push(file);
            self.warnings.push(format!(
                "cannot symbolize {}: {err}",
                self.files.entries[file as usize].path.display()
            ));
        }
        for (i, &off) in offsets.iter().enumerate() {
            // PLT stubs first: the symbol tables give them the nearest symbol before
            // them (`_init`), or none.
            let plt = fallback.plt(off).map(FallbackName::Plt);
            let sym = match results.as_ref().map(|r| r.get(i)) {
                Ok(Some(Symbolized::Sym(sym))) if plt.is_none() => sym,
                _ => {
                    let named = plt.or_else(|| fallback.name(off));
                    if !matches!(named, Some(FallbackName::Plt(_))) {
                        self.counts.unresolved += 1;
                        let (files, dirs) = (&mut self.files, &self.debug_dirs);
                        files.warn_without_names(file, dirs, &mut self.warnings);
                    }
                    let span = match named {
                        Some(n) => {
                            let frame = n.frame(&self.files.entries[file as usize].short);
                            push_names(&mut self.arena, &mut self.locs, tree, [&*frame])
                        }
                        None => unknown_file_span(
                            &mut self.arena,
                            &mut self.locs,
                            &mut self.files,
                            tree,
                            file,
                        ),
                    };
                    self.by_offset.insert((file, off), span);
                    continue;
                }
            };
            let table = match table.as_ref().and_then(|t| t.get(i)) {
                Some(Symbolized::Sym(t)) => Some(TableSym {
                    name: &t.name,
                    addr: t.addr,
                }),
                _ => None,
            };
            let outer = outer_name(&sym.name, sym.addr, table);
            let span = push_sym(
                &mut self.arena,
                &mut self.locs,
                &mut self.locations,
                tree,
                sym,
                outer,
                "",
            );
            self.by_offset.insert((file, off), span);
        }
    }

    /// The frame of generated code at `addr` of `pid`, from the process's perf map,
    /// when it names it; else whether the process has a map that may name it later.
    fn jit_span(&mut self, tree: &mut StackTree, pid: u32, addr: u64) -> Result<Span, bool> {
        let proc = self.procs.entry(pid).or_default();
        if proc.perf_map.is_none() {
            let gone = (!matches!(proc.root, Some(Some(_))))
                .then(|| ProcessMap::left_behind(pid, self.began));
            proc.perf_map = Some(ProcessMap::locate(pid).or(gone).ok_or(false)?);
        }
        let m = proc.perf_map.as_mut().ok_or(false)?;
        m.refresh(pid, &mut self.warnings);
        let name = m.lookup(addr)?;
        Ok(push_names(&mut self.arena, &mut self.locs, tree, [name]))
    }

    fn resolve_kernel(&mut self, tree: &mut StackTree, kernel: &mut Vec<u64>) {
        kernel.sort_unstable();
        kernel.dedup();
        kernel.retain(|a| !self.kernel.contains_key(a));
        if kernel.is_empty() {
            return;
        }
        let unknown = self.unknown_kernel_span(tree);
        self.kernel_table_ready();
        let shared = self.symbolizer();
        let symbolizer = shared.lock();
        match symbolizer.symbolize(&self.kernel_source, Input::AbsAddr(kernel)) {
            Ok(results) => {
                for (&addr, result) in kernel.iter().zip(&results) {
                    let span = match result {
                        Symbolized::Sym(sym) => push_sym(
                            &mut self.arena,
                            &mut self.locs,
                            &mut self.locations,
                            tree,
                            sym,
                            &sym.name,
                            "_[k]",
                        ),
                        Symbolized::Unknown(_) => {
                            self.counts.unresolved += 1;
                            unknown
                        }
                    };
                    self.kernel.insert(addr, span);
                }
            }
            Err(err) => {
                if self
                    .warnings
                    .iter()
                    .all(|w| !w.starts_with("kernel symbols"))
                {
                    self.warnings
                        .push(format!("kernel symbols unavailable (kallsyms): {err}"));
                }
                for &addr in kernel.iter() {
                    self.counts.unresolved += 1;
                    self.kernel.insert(addr, unknown);
                }
            }
        }
        kernel.clear();
    }
}

/// The frame of addresses of `file` that resolve to no symbol: `[libfoo.so]`.
fn unknown_file_span(
    arena: &mut Vec<FrameId>,
    locs: &mut Vec<u32>,
    files: &mut Files,
    tree: &mut StackTree,
    file: u32,
) -> Span {
    let entry = &mut files.entries[file as usize];
    if let Some(s) = entry.unknown {
        return s;
    }
    let s = push_names(arena, locs, tree, [&*format!("[{}]", entry.short)]);
    entry.unknown = Some(s);
    s
}

/// Interns `names` (root first) and appends them to the arena.
fn push_names<'a>(
    arena: &mut Vec<FrameId>,
    locs: &mut Vec<u32>,
    tree: &mut StackTree,
    names: impl IntoIterator<Item = &'a str>,
) -> Span {
    let start = arena.len() as u32;
    arena.extend(names.into_iter().map(|n| tree.intern(n)));
    locs.resize(arena.len(), NO_LOCATION);
    Span {
        start,
        len: arena.len() as u32 - start,
    }
}

/// Interns a symbol (named `outer`, see [`naming::outer_name`]) and its inlined callees,
/// outermost first, each name spelled by [`naming::frame_name`] and followed by `suffix`,
/// with the source location of each (the outermost's is where it calls the first
/// inlined function, or the address's own line when none is inlined).
fn push_sym(
    arena: &mut Vec<FrameId>,
    locs: &mut Vec<u32>,
    locations: &mut Locations,
    tree: &mut StackTree,
    sym: &Sym<'_>,
    outer: &str,
    suffix: &str,
) -> Span {
    let start = arena.len() as u32;
    let mut name = String::new();
    locs.push(locations.id(sym.code_info.as_deref()));
    locs.extend(
        sym.inlined
            .iter()
            .map(|i| locations.id(i.code_info.as_ref())),
    );
    for n in std::iter::once(outer).chain(sym.inlined.iter().map(|i| &*i.name)) {
        let n = naming::frame_name(n);
        let id = if suffix.is_empty() {
            tree.intern(&n)
        } else {
            name.clear();
            name.push_str(&n);
            name.push_str(suffix);
            tree.intern(&name)
        };
        arena.push(id);
    }
    Span {
        start,
        len: arena.len() as u32 - start,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_mappings_normalize_addresses_to_file_offsets() {
        let mut p = ProcSyms::default();
        p.insert_mapping(Mapping {
            start: 0x1000,
            end: 0x3000,
            pgoff: 0x400,
            file: 1,
            since: 0,
        });
        p.insert_mapping(Mapping {
            start: 0x8000,
            end: 0x9000,
            pgoff: 0,
            file: 2,
            since: 0,
        });
        assert_eq!(p.lookup(0x1000), Some((1, 0x400)));
        assert_eq!(p.lookup(0x2fff), Some((1, 0x23ff)));
        assert_eq!(p.lookup(0x3000), None);
        assert_eq!(p.lookup(0x8010), Some((2, 0x10)));
        assert_eq!(p.lookup(0x500), None);
        // A new mapping over an old range replaces it.
        p.insert_mapping(Mapping {
            start: 0x2000,
            end: 0x4000,
            pgoff: 0,
            file: 3,
            since: 0,
        });
        assert_eq!(p.lookup(0x1500), None);
        assert_eq!(p.lookup(0x2100), Some((3, 0x100)));
    }

    #[test]
    fn mappings_follow_record_time_not_reading_order() {
        let mut r = Resolver::with_debug_dirs(SymbolDetail::NamesOnly, &[]);
        let mmap = |addr, name: &'static [u8]| Mmap2 {
            pid: 9,
            addr,
            len: 0x1000,
            pgoff: 0,
            ino: 0,
            prot: 5,
            filename: name,
        };
        r.on_mmap(9, &mmap(0x1000, b"/old/image"), 100);
        // The new image's mapping (time 300) is read before a late record of the old
        // image (time 150) at the same place: the newer one stays.
        r.on_mmap(9, &mmap(0x5000, b"/new/image"), 300);
        r.on_exec(9);
        r.on_mmap(9, &mmap(0x5000, b"/old/lib"), 150);
        let p = &r.procs[&9];
        let name = |addr| {
            let (file, _) = p.lookup(addr).unwrap();
            r.files.entries[file as usize].path.clone()
        };
        assert_eq!(name(0x5010), Path::new("/new/image"));
        // The old image stays for its samples read after the exec.
        assert_eq!(name(0x1010), Path::new("/old/image"));
        assert_eq!(p.lookup(0x5010).unwrap().1, 0x10);
    }

    /// A pid that no process has (pid_max is at most 2^22).
    const NO_SUCH_PID: u32 = 0x7fff_fff0;

    fn map_fake_file(r: &mut Resolver, path: &'static [u8]) {
        r.on_mmap(
            NO_SUCH_PID,
            &Mmap2 {
                pid: NO_SUCH_PID,
                addr: 0x10_0000,
                len: 0x10_0000,
                pgoff: 0,
                ino: 0,
                prot: 5,
                filename: path,
            },
            1,
        );
    }

    #[test]
    fn many_unresolvable_addresses_of_a_file_share_one_frame() {
        let mut tree = StackTree::new();
        let mut r = Resolver::with_debug_dirs(SymbolDetail::NamesOnly, &[]);
        map_fake_file(&mut r, b"/nonexistent/libgone.so");
        let addrs: Vec<u64> = (0..5000).map(|i| 0x10_0000 + 16 * i).collect();
        let mut user: Vec<(u32, u64)> = addrs.iter().map(|&a| (NO_SUCH_PID, a)).collect();
        // And some outside any mapping.
        user.extend((0..5000).map(|i| (NO_SUCH_PID, 0x9000_0000 + 8 * i)));
        r.resolve(&mut tree, &mut user, &mut Vec::new());
        let names: std::collections::BTreeSet<&str> = (0..5000)
            .flat_map(|i| [0x10_0000 + 16 * i, 0x9000_0000 + 8 * i])
            .flat_map(|a| r.user(NO_SUCH_PID, a).expect("cached"))
            .map(|&f| tree.name(f))
            .collect();
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["[libgone.so]", "[unknown]"]
        );
        assert_eq!(tree.frame_count(), 2);
        assert!(r.arena.len() <= 2, "{} frames in the arena", r.arena.len());
        assert_eq!(r.counts.unresolved, 10_000);
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    }

    #[test]
    fn offsets_of_a_real_file_without_symbols_share_its_frame() {
        // The ELF header and program headers at the start of our own executable are
        // mapped (read-only) but hold no function.
        let exe = std::fs::read_link("/proc/self/exe").expect("/proc/self/exe");
        let path: &'static [u8] = Vec::leak(exe.as_os_str().as_encoded_bytes().to_vec());
        let mut tree = StackTree::new();
        let mut r = Resolver::with_debug_dirs(SymbolDetail::NamesOnly, &[]);
        map_fake_file(&mut r, path);
        let mut user: Vec<(u32, u64)> = (0..64).map(|i| (NO_SUCH_PID, 0x10_0000 + i)).collect();
        r.resolve(&mut tree, &mut user, &mut Vec::new());
        let short = exe.file_name().expect("a file name").to_string_lossy();
        for i in 0..64 {
            let frames = r.user(NO_SUCH_PID, 0x10_0000 + i).expect("cached");
            let names: Vec<&str> = frames.iter().map(|&f| tree.name(f)).collect();
            assert_eq!(names, [format!("[{short}]")], "offset {i}");
        }
        // That frame and `[unknown]`, which every batch interns.
        assert_eq!(tree.frame_count(), 2);
    }

    #[test]
    fn caches_grown_past_their_caps_are_emptied_between_batches() {
        let mut tree = StackTree::new();
        let mut r = Resolver::with_debug_dirs(SymbolDetail::NamesOnly, &[]);
        r.caps = Caps {
            addrs_per_process: 100,
            offsets: 1000,
            kernel: 1000,
            arena: 1000,
        };
        map_fake_file(&mut r, b"/nonexistent/libgone.so");
        let mut batch = |r: &mut Resolver, from: u64, n: u64| {
            let mut user: Vec<(u32, u64)> = (from..from + n)
                .map(|i| (NO_SUCH_PID, 0x10_0000 + i))
                .collect();
            r.resolve(&mut tree, &mut user, &mut Vec::new());
            r.end_batch(0);
        };
        // Past the per-process cap only: that cache goes, the offsets stay.
        batch(&mut r, 0, 500);
        assert!(r.procs[&NO_SUCH_PID].addrs.is_empty());
        assert_eq!(r.by_offset.len(), 500);
        // Past the offsets cap: everything goes, the arena too.
        batch(&mut r, 500, 600);
        assert!(r.by_offset.is_empty() && r.arena.is_empty() && r.kernel.is_empty());
        assert!(r.procs[&NO_SUCH_PID].addrs.is_empty());
        // And resolving again gives the same frame as before.
        let mut user = vec![(NO_SUCH_PID, 0x10_0000)];
        r.resolve(&mut tree, &mut user, &mut Vec::new());
        let frames = r.user(NO_SUCH_PID, 0x10_0000).expect("cached");
        assert_eq!(frames.len(), 1);
        assert_eq!(tree.name(frames[0]), "[libgone.so]");
        assert_eq!(tree.frame_count(), 2, "[libgone.so] and [unknown]");
        // The mappings survive: they are not a cache.
        assert!(r.procs[&NO_SUCH_PID].lookup(0x10_0000).is_some());
    }

    #[inline(never)]
    fn symbolize_this_function_by_name() -> usize {
        symbolize_this_function_by_name as *const () as usize
    }

    #[test]
    fn a_live_address_of_this_process_resolves_to_its_function() {
        let addr = symbolize_this_function_by_name() as u64;
        let mut tree = StackTree::new();
        let mut r = Resolver::with_debug_dirs(SymbolDetail::NamesOnly, &[]);
        let pid = std::process::id();
        r.see_process(pid);
        r.resolve(&mut tree, &mut vec![(pid, addr)], &mut Vec::new());
        let names: Vec<&str> = r
            .user(pid, addr)
            .unwrap()
            .iter()
            .map(|&f| tree.name(f))
            .collect();
        assert!(
            names
                .last()
                .is_some_and(|n| n.ends_with("symbolize_this_function_by_name")),
            "{names:?}"
        );
        // The same address resolved through our own mappings (as after an exit) agrees.
        let mut r2 = Resolver::with_debug_dirs(SymbolDetail::NamesOnly, &[]);
        r2.see_process(pid);
        let (file, offset) = r2.procs[&pid].lookup(addr).unwrap();
        r2.symbolize_file(&mut tree, file, &[offset]);
        assert_eq!(
            r2.span(r2.by_offset[&(file, offset)]),
            r.user(pid, addr).unwrap()
        );
        // Names only: no source lines.
        assert!(
            r.user_locations(pid, addr)
                .unwrap()
                .iter()
                .all(|&l| l == NO_LOCATION)
        );
    }

    #[test]
    fn with_debug_info_each_frame_has_its_file_and_line() {
        // Tests build with line tables (debug info of the test profile).
        let addr = symbolize_this_function_by_name() as u64;
        let mut tree = StackTree::new();
        let mut r = Resolver::with_debug_dirs(SymbolDetail::Inlined, &[]);
        let pid = std::process::id();
        r.see_process(pid);
        r.resolve(&mut tree, &mut vec![(pid, addr)], &mut Vec::new());
        let frames = r.user(pid, addr).unwrap();
        let locs = r.user_locations(pid, addr).unwrap();
        assert_eq!(frames.len(), locs.len());
        let (file, line) = r
            .location(*locs.last().unwrap())
            .expect("a location for a function of this file");
        assert!(file.ends_with("symbolize/mod.rs"), "{file}");
        let source = include_str!("mod.rs");
        let defined = source
            .lines()
            .position(|l| l.contains("fn symbolize_this_function_by_name()"))
            .unwrap() as u32
            + 1;
        assert!(
            (defined..defined + 3).contains(&line),
            "line {line}, the function starts at {defined}"
        );
        assert_eq!(r.location(NO_LOCATION), None);
    }
}
