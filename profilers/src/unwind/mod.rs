//! User-space stack unwinding from a sample's registers and stack copy
//! (`PERF_SAMPLE_REGS_USER` and `PERF_SAMPLE_STACK_USER`), with framehop, for code
//! built without frame pointers.
//!
//! Each sampled process has a framehop unwinder holding its executable mappings
//! (modules): from `/proc/<pid>/maps` when first seen, then from `PERF_RECORD_MMAP2`
//! records (libraries loaded later, a child's exec), copied at fork. A module's unwind
//! tables are read once per file (keyed by device and inode) and shared by every
//! process that maps it. With [`UnwindMode::Auto`] a module that keeps frame pointers
//! (every function sets one up) is given to framehop without tables, so it is walked by
//! frame pointer; the others by their CFI. Generated code in anonymous memory (JIT
//! functions, interpreter trampolines) is walked by the shape its runtime gives it
//! (the `jit` module).
//!
//! A stack that does not reach its root ends in a `[truncated: …]` frame saying why,
//! counted in [`UnwindCounts`]: never a silently shortened stack.
//! Unwinding runs on the collector's thread as records are read, beside the batched
//! symbolization, and allocates nothing per sample.

mod jit;
pub(crate) mod tables;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{FrameAddress, Module, ModuleSectionInfo, Unwinder as _};

pub use tables::ModuleUnwind;
use tables::{FileKey, FileTables, TableCache};

use crate::procfs;
use crate::records::UserStack;

/// Deepest user stack unwound (frames); a deeper one ends in [`Ending::TooDeep`].
const MAX_FRAMES: usize = 512;
/// Distinct files named in [`UnwindCounts::modules`]; past it they are not listed.
const MAX_LISTED_MODULES: usize = 256;

/// How user stacks are walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UnwindMode {
    /// Per module: frame pointers where the module keeps them, its DWARF CFI where it
    /// does not. Asks the kernel for registers and a stack copy with every sample.
    #[default]
    Auto,
    /// The kernel's frame-pointer callchain only: the cheapest recording, and stacks
    /// cut short in code built without frame pointers.
    FramePointers,
    /// DWARF CFI (`.eh_frame`, `.debug_frame`) in every module that has it, frame
    /// pointers where no unwind info covers an address.
    Dwarf,
}

impl UnwindMode {
    /// The word the command line and session.json use.
    pub fn name(self) -> &'static str {
        match self {
            UnwindMode::Auto => "auto",
            UnwindMode::FramePointers => "fp",
            UnwindMode::Dwarf => "dwarf",
        }
    }

    /// Samples carry registers and a stack copy.
    pub fn copies_stacks(self) -> bool {
        self != UnwindMode::FramePointers
    }
}

/// perf's default user stack copy (bytes), which `--stack-size` defaults to.
pub const DEFAULT_STACK_SIZE: u32 = 8192;
/// The largest copy the kernel takes: a sample record's size is a u16, and the copy
/// must be a multiple of 8.
pub const MAX_STACK_SIZE: u32 = 65528;

/// Why a user stack ends before its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Ending {
    /// It reached the entry point (or a thread's start routine).
    Complete,
    /// The walk left a module without unwind info (by its id in [`Unwinder`]), or code
    /// in no file at all (`None`: a JIT region, an anonymous mapping).
    NoUnwindInfo(Option<u32>),
    /// The next frame lies beyond the stack copy.
    StackCopyTooSmall,
    /// The unwind info of a module (by id) led nowhere valid.
    Failed(u32),
    /// More than [`MAX_FRAMES`] frames.
    TooDeep,
    /// The sample came without registers or stack (a kernel thread, or a user context
    /// the kernel could not copy).
    NoStack,
}

/// What unwinding did, for session.json.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct UnwindCounts {
    /// Samples whose user stack was unwound from a stack copy.
    pub unwound: u64,
    /// Of those, stacks that ended in `[truncated: no unwind info for …]`.
    pub truncated_no_unwind_info: u64,
    /// Stacks that ended in `[truncated: stack copy too small]`.
    pub truncated_stack_copy: u64,
    /// Stacks that ended in `[truncated: unwinding failed in …]` or were deeper than
    /// the unwinder walks.
    pub truncated_other: u64,
    /// Samples that came without registers or a stack copy.
    pub no_stack: u64,
    /// Each module (file name) that unwinding went through, and how its addresses were
    /// unwound.
    pub modules: BTreeMap<String, ModuleUnwind>,
}

impl UnwindCounts {
    /// Stacks that ended before their root, for any reason.
    pub fn truncated(&self) -> u64 {
        self.truncated_no_unwind_info + self.truncated_stack_copy + self.truncated_other
    }
}

/// A file that some process maps executable.
#[derive(Debug)]
struct FileEntry {
    path: PathBuf,
    /// The file name, for frames and session.json.
    short: String,
    /// Its tables, once read; `Err` when it could not be (deleted, not ELF).
    tables: Option<Option<Arc<FileTables>>>,
    /// The (dev, inode) of the file at `path` when its tables were read.
    key: Option<FileKey>,
    /// Why the file at `path` could not be read, when it could not.
    error: Option<String>,
    /// A mapping of it found no tables, and a warning said so.
    warned: bool,
    /// How its addresses are unwound (as last mapped).
    how: ModuleUnwind,
    /// Some stack went through it.
    used: bool,
}

/// An executable mapping of a process.
#[derive(Debug, Clone, Copy)]
struct Mapping {
    start: u64,
    end: u64,
    file: u32,
    how: ModuleUnwind,
}

/// The unwinding state of one process.
#[derive(Default)]
struct Proc {
    unwinder: UnwinderX86_64<Arc<[u8]>>,
    /// Sorted by start, non-overlapping.
    maps: Vec<Mapping>,
    maps_known: bool,
    exited_at: Option<u64>,
    /// Where its paths are read from here ([`procfs::mount_root`]), once looked up.
    root: Option<Option<std::path::PathBuf>>,
}

impl std::fmt::Debug for Proc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proc")
            .field("maps", &self.maps)
            .field("maps_known", &self.maps_known)
            .finish_non_exhaustive()
    }
}

impl Proc {
    fn lookup(&self, addr: u64) -> Option<&Mapping> {
        let i = self.maps.partition_point(|m| m.start <= addr);
        let m = self.maps.get(i.checked_sub(1)?)?;
        (addr < m.end).then_some(m)
    }
}

/// The unwinder of one sampler: every sampled process's modules, the shared tables
/// and framehop's rule cache. The sampler drives it from its records;
/// [`Unwinder::unwind_copy`] unwinds one stack copy directly (the throughput bench).
///
/// Speed, measured by `cargo bench -p benchtop-profilers --bench unwind` on this 2-CPU
/// VM: see docs/user-guide.md ("Unwinding"); it allocates nothing per stack.
pub struct Unwinder {
    mode: UnwindMode,
    procs: HashMap<u32, Proc>,
    files: Vec<FileEntry>,
    file_ids: HashMap<PathBuf, u32>,
    tables: TableCache,
    cache: CacheX86_64,
    jit: jit::JitCode,
    pub(crate) counts: UnwindCounts,
    /// Files whose tables could not be read, with why (reported once each).
    pub(crate) warnings: Vec<String>,
    line: String,
}

impl std::fmt::Debug for Unwinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unwinder")
            .field("mode", &self.mode)
            .field("procs", &self.procs.len())
            .field("files", &self.files.len())
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

/// A module's sections for framehop: shared bytes, cloned per process.
struct Sections<'a>(&'a FileTables);

impl ModuleSectionInfo<Arc<[u8]>> for Sections<'_> {
    fn base_svma(&self) -> u64 {
        0
    }

    fn section_svma_range(&mut self, name: &[u8]) -> Option<std::ops::Range<u64>> {
        let t = self.0;
        match name {
            b".eh_frame" => t.eh_frame.as_ref().map(|s| s.svma.clone()),
            b".eh_frame_hdr" => t.eh_frame_hdr.as_ref().map(|s| s.svma.clone()),
            b".debug_frame" => t.debug_frame.as_ref().map(|s| s.svma.clone()),
            b".text" => t.text.clone(),
            b".got" => t.got.clone(),
            _ => None,
        }
    }

    fn section_data(&mut self, name: &[u8]) -> Option<Arc<[u8]>> {
        let t = self.0;
        let s = match name {
            b".eh_frame" => t.eh_frame.as_ref(),
            b".eh_frame_hdr" => t.eh_frame_hdr.as_ref(),
            b".debug_frame" => t.debug_frame.as_ref(),
            _ => None,
        };
        s.map(|s| Arc::clone(&s.data))
    }
}

/// No sections: framehop walks the module by frame pointer.
struct NoSections;

impl ModuleSectionInfo<Arc<[u8]>> for NoSections {
    fn base_svma(&self) -> u64 {
        0
    }
    fn section_svma_range(&mut self, _: &[u8]) -> Option<std::ops::Range<u64>> {
        None
    }
    fn section_data(&mut self, _: &[u8]) -> Option<Arc<[u8]>> {
        None
    }
}

impl Unwinder {
    /// An unwinder that walks modules as `mode` says (`FramePointers` walks every
    /// module by frame pointer).
    pub fn new(mode: UnwindMode) -> Self {
        Unwinder {
            mode,
            procs: HashMap::new(),
            files: Vec::new(),
            file_ids: HashMap::new(),
            tables: TableCache::default(),
            cache: CacheX86_64::new(),
            jit: jit::JitCode::default(),
            counts: UnwindCounts::default(),
            warnings: Vec::new(),
            line: String::new(),
        }
    }

    /// The file name of module `file`.
    pub(crate) fn file_name(&self, file: u32) -> &str {
        self.files
            .get(file as usize)
            .map_or("?", |f| f.short.as_str())
    }

    fn file_id(&mut self, path: &Path) -> u32 {
        if let Some(&id) = self.file_ids.get(path) {
            return id;
        }
        let id = self.files.len() as u32;
        let short = path
            .file_name()
            .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy())
            .into_owned();
        self.files.push(FileEntry {
            path: path.to_owned(),
            short,
            tables: None,
            key: None,
            error: None,
            warned: false,
            how: ModuleUnwind::None,
            used: false,
        });
        self.file_ids.insert(path.to_owned(), id);
        id
    }

    /// The tables of `file` for a mapping `start..end` of `pid` made from inode `ino`
    /// (when known): the file at its path, read the first time. When that file is gone
    /// or another one (deleted, or replaced by a new build, before it was first read),
    /// the mapping's own file is read through `/proc/<pid>/map_files/<start>-<end>`,
    /// which names it whatever became of its path (this needs `CAP_SYS_ADMIN` or
    /// `CAP_CHECKPOINT_RESTORE`; without, such a module has no tables). `None` when
    /// neither can be read; each file's failure is reported once.
    fn file_tables(
        &mut self,
        file: u32,
        ino: Option<u64>,
        pid: u32,
        start: u64,
        end: u64,
    ) -> Option<Arc<FileTables>> {
        let entry = self.files.get_mut(file as usize)?;
        if entry.tables.is_none() {
            let loaded = FileKey::of(&entry.path)
                .map_err(|source| crate::ProfilerError::Io {
                    path: entry.path.clone(),
                    source,
                })
                .and_then(|key| {
                    entry.key = Some(key);
                    self.tables.get(key, &entry.path)
                });
            entry.tables = Some(match loaded {
                Ok(t) => Some(t),
                Err(e) => {
                    entry.error = Some(e.to_string());
                    None
                }
            });
        }
        let ino = ino.filter(|&i| i != 0);
        let same = match (ino, entry.key) {
            (Some(ino), Some(k)) => k.ino == ino,
            _ => entry.key.is_some(),
        };
        if same && let Some(t) = entry.tables.clone().flatten() {
            return Some(t);
        }
        let link = PathBuf::from(format!("/proc/{pid}/map_files/{start:x}-{end:x}"));
        let mapped = FileKey::of(&link)
            .ok()
            .filter(|k| ino.is_none_or(|ino| k.ino == ino))
            .and_then(|key| self.tables.get(key, &link).ok());
        let entry = self.files.get_mut(file as usize)?;
        if mapped.is_none() && !entry.warned {
            entry.warned = true;
            let why = entry
                .error
                .clone()
                .unwrap_or_else(|| "the file was replaced after it was mapped".into());
            self.warnings
                .push(format!("no unwind tables for {}: {why}", entry.short));
        }
        mapped
    }

    /// Makes sure `pid` has its modules: read from `/proc/<pid>/maps` when first seen.
    pub fn see_process(&mut self, pid: u32) {
        if self.procs.get(&pid).is_some_and(|p| p.maps_known) {
            return;
        }
        let mut line = std::mem::take(&mut self.line);
        let read = procfs::read_into(format!("/proc/{pid}/maps").as_ref(), &mut line).is_ok();
        self.procs.entry(pid).or_default().maps_known = true;
        if read {
            for l in line.lines() {
                if let Some(m) = procfs::parse_maps_line(l) {
                    let ino = l
                        .split_ascii_whitespace()
                        .nth(4)
                        .and_then(|i| i.parse().ok());
                    self.add_mapping(pid, m.start, m.end, m.offset, Path::new(m.path), ino);
                }
            }
        }
        self.line = line;
    }

    /// A new executable mapping of `pid` (from /proc or a `PERF_RECORD_MMAP2`).
    pub(crate) fn add_mapping(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        pgoff: u64,
        path: &Path,
        ino: Option<u64>,
    ) {
        if end <= start {
            return;
        }
        let proc = self.procs.entry(pid).or_default();
        let root = proc
            .root
            .get_or_insert_with(|| procfs::mount_root(pid))
            .clone();
        let file = self.file_id(&procfs::under_root(root.as_deref(), path));
        let tables = self.file_tables(file, ino, pid, start, end);
        let how = match &tables {
            Some(t) if self.mode == UnwindMode::Auto && t.keeps_frame_pointers => {
                ModuleUnwind::FramePointers
            }
            Some(t) if t.has_cfi() => ModuleUnwind::Dwarf,
            Some(t) if t.keeps_frame_pointers => ModuleUnwind::FramePointers,
            _ => ModuleUnwind::None,
        };
        if let Some(f) = self.files.get_mut(file as usize) {
            f.how = how;
        }
        let base_avma = tables
            .as_ref()
            .and_then(|t| t.svma_of_offset(pgoff))
            .map_or(start, |svma| start.wrapping_sub(svma));
        let name = self.file_name(file).to_owned();
        let module = match (&tables, how) {
            (Some(t), ModuleUnwind::Dwarf) => Module::new(name, start..end, base_avma, Sections(t)),
            _ => Module::new(name, start..end, base_avma, NoSections),
        };
        let proc = self.procs.entry(pid).or_default();
        // A new mapping replaces whatever it overlaps (an exec, a library reloaded).
        let mut i = 0;
        while i < proc.maps.len() {
            let o = proc.maps[i];
            if o.end > start && o.start < end {
                proc.unwinder.remove_module(o.start);
                proc.maps.remove(i);
            } else {
                i += 1;
            }
        }
        proc.unwinder.add_module(module);
        let at = proc.maps.partition_point(|m| m.start < start);
        proc.maps.insert(
            at,
            Mapping {
                start,
                end,
                file,
                how,
            },
        );
    }

    /// `child` was forked from `parent`: the same modules until it execs.
    pub(crate) fn on_fork(&mut self, parent: u32, child: u32) {
        self.see_process(parent);
        let Some(p) = self.procs.get(&parent) else {
            return;
        };
        let copy = Proc {
            unwinder: p.unwinder.clone(),
            maps: p.maps.clone(),
            maps_known: true,
            exited_at: None,
            root: p.root.clone(),
        };
        self.procs.entry(child).or_insert(copy);
    }

    /// `pid` exec'd: a new address space. Its maps are read again from /proc at its
    /// next sample (records of other CPUs' buffers, a library's MMAP2 among them, may
    /// have been read before this one), and the MMAP2 records that follow add to them.
    pub(crate) fn on_exec(&mut self, pid: u32) {
        self.procs.insert(pid, Proc::default());
        self.jit.forget(pid);
    }

    /// `pid` exited during batch `batch`.
    pub(crate) fn on_exit(&mut self, pid: u32, batch: u64) {
        if let Some(p) = self.procs.get_mut(&pid) {
            p.exited_at.get_or_insert(batch);
        }
    }

    /// Forgets processes that exited before batch `before`.
    pub(crate) fn end_batch(&mut self, before: u64) {
        let jit = &mut self.jit;
        self.procs.retain(|&pid, p| {
            let keep = p.exited_at.is_none_or(|at| at >= before);
            if !keep {
                jit.forget(pid);
            }
            keep
        });
    }

    /// Unwinds the user stack of a sample of `pid` into `out`, leaf first: the sampled
    /// instruction, then return addresses moved back by one (into the call, as the
    /// symbolizer wants them). Returns how the stack ends.
    pub(crate) fn unwind(
        &mut self,
        pid: u32,
        user: Option<&UserStack<'_>>,
        out: &mut Vec<u64>,
    ) -> Ending {
        out.clear();
        let Some(u) = user else {
            self.counts.no_stack += 1;
            return Ending::NoStack;
        };
        self.see_process(pid);
        self.counts.unwound += 1;
        let ending = match self.procs.get(&pid) {
            Some(proc) => {
                let (cache, files, jit) = (&mut self.cache, &mut self.files, &mut self.jit);
                walk((pid, proc), cache, files, jit, u, out)
            }
            None => Ending::NoUnwindInfo(None),
        };
        match ending {
            Ending::Complete | Ending::NoStack => {}
            Ending::NoUnwindInfo(_) => self.counts.truncated_no_unwind_info += 1,
            Ending::StackCopyTooSmall => self.counts.truncated_stack_copy += 1,
            Ending::Failed(_) | Ending::TooDeep => self.counts.truncated_other += 1,
        }
        ending
    }

    /// The counts so far, with the modules stacks went through (at most
    /// [`MAX_LISTED_MODULES`]).
    pub(crate) fn take_counts(&mut self) -> UnwindCounts {
        let mut counts = std::mem::take(&mut self.counts);
        for f in self.files.iter().filter(|f| f.used) {
            if counts.modules.len() == MAX_LISTED_MODULES {
                break;
            }
            counts.modules.insert(f.short.clone(), f.how);
        }
        counts
    }

    /// Unwinds a stack copy of a thread of `pid` (its modules read as
    /// [`Unwinder::see_process`] does): `ip`, `sp` and `bp` as the thread had them, `stack`
    /// the bytes from `sp` up, `full` when the copy may have cut the stack short. Fills
    /// `out` with the frames, leaf first (return addresses moved back into the call);
    /// returns whether the walk reached the root.
    #[allow(clippy::too_many_arguments)]
    pub fn unwind_copy(
        &mut self,
        pid: u32,
        ip: u64,
        sp: u64,
        bp: u64,
        stack: &[u8],
        full: bool,
        out: &mut Vec<u64>,
    ) -> bool {
        let user = UserStack {
            di: 0,
            ip,
            sp,
            bp,
            stack,
            full,
        };
        self.unwind(pid, Some(&user), out) == Ending::Complete
    }

    /// The frame that ends a truncated stack, in words.
    pub(crate) fn ending_frame(&self, ending: Ending) -> Option<String> {
        Some(match ending {
            Ending::Complete | Ending::NoStack => return None,
            Ending::NoUnwindInfo(Some(file)) => {
                format!("[truncated: no unwind info for {}]", self.file_name(file))
            }
            Ending::NoUnwindInfo(None) => {
                "[truncated: no unwind info for code outside any file]".to_owned()
            }
            Ending::StackCopyTooSmall => "[truncated: stack copy too small]".to_owned(),
            Ending::Failed(file) => {
                format!("[truncated: unwinding failed in {}]", self.file_name(file))
            }
            Ending::TooDeep => format!("[truncated: deeper than {MAX_FRAMES} frames]"),
        })
    }
}

/// Walks one stack (see [`Unwinder::unwind`]).
fn walk(
    (pid, proc): (u32, &Proc),
    cache: &mut CacheX86_64,
    files: &mut [FileEntry],
    jit: &mut jit::JitCode,
    u: &UserStack<'_>,
    out: &mut Vec<u64>,
) -> Ending {
    let stack = u.stack;
    let sp0 = u.sp;
    let end = sp0.saturating_add(stack.len() as u64);
    // Set when a read fell past the end of the copy (rather than below sp or into
    // nothing): the stack goes on beyond what was copied.
    let beyond = std::cell::Cell::new(false);
    let mut read = |addr: u64| -> Result<u64, ()> {
        let off = addr.checked_sub(sp0).ok_or(())?;
        let off = usize::try_from(off).map_err(|_| ())?;
        match stack.get(off..off.saturating_add(8)) {
            Some(b) => b.try_into().map(u64::from_ne_bytes).map_err(|_| ()),
            None => {
                beyond.set(addr >= end);
                Err(())
            }
        }
    };
    let mut regs = UnwindRegsX86_64::new(u.ip, u.sp, u.bp);
    let mut address = FrameAddress::from_instruction_pointer(u.ip);
    loop {
        if out.len() >= MAX_FRAMES {
            return Ending::TooDeep;
        }
        out.push(address.address_for_lookup());
        let here = proc.lookup(address.address_for_lookup());
        if let Some(f) = here.and_then(|m| files.get_mut(m.file as usize)) {
            f.used = true;
        }
        beyond.set(false);
        if here.is_none() {
            // Code in no file: generated code, walked by its shape, when there is code
            // there to read; else a return address that is not one.
            let Some(shape) = jit.shape(pid, address.address()) else {
                return Ending::NoUnwindInfo(None);
            };
            match jit::step(shape, &mut regs, &mut read).map(FrameAddress::from_return_address) {
                Some(Some(next)) => {
                    address = next;
                    continue;
                }
                _ if beyond.get() && u.full => return Ending::StackCopyTooSmall,
                _ => return Ending::NoUnwindInfo(None),
            }
        }
        let before = regs;
        let result = proc
            .unwinder
            .unwind_frame(address, &mut regs, cache, &mut read);
        match result {
            Ok(Some(ra)) if ra != 0 => {
                // A return address outside every module, reached from a module without
                // CFI, is a frame-pointer walk gone astray: stop there.
                let astray = proc.lookup(ra.saturating_sub(1)).is_none()
                    && here.is_none_or(|m| m.how != ModuleUnwind::Dwarf)
                    && jit.shape(pid, ra).is_none();
                if astray {
                    return Ending::NoUnwindInfo(here.map(|m| m.file));
                }
                match FrameAddress::from_return_address(ra) {
                    Some(next) => address = next,
                    None => return Ending::NoUnwindInfo(here.map(|m| m.file)),
                }
            }
            // framehop ends a walk (`Ok(None)`, or a return address of 0 from a rule it
            // could not cache) on the CFI's "no return address", on a null frame pointer
            // and on a null return address alike: only the first, or the null frame
            // pointer of a frame-pointer walk, is the outermost frame.
            Ok(_) => return end_of_walk(proc, cache, address, &before, here, true),
            Err(_) if beyond.get() && u.full => return Ending::StackCopyTooSmall,
            Err(_) => return end_of_walk(proc, cache, address, &before, here, false),
        }
    }
}

/// How a walk that stopped at `address` (registers `regs` as the frame had them) ends:
/// [`Ending::Complete`] only when this is the outermost frame, which is when
///
/// - the module's CFI says the frame has no return address (`.cfi_undefined rip`, as
///   `_start` and `clone3` have), or
/// - the frame is walked by frame pointer (a module without CFI, an address no CFI
///   covers, or a CFI rule through rbp) and rbp is 0, the x86-64 ABI's mark of the
///   deepest frame; in a module walked by frame pointers, also a null return address
///   (`stopped`: framehop ended the walk rather than failed).
///
/// A null rbp or return address met through a CFI rule, or an address in no module, is a
/// walk gone wrong: the stack ends in a `[truncated: …]` frame.
fn end_of_walk(
    proc: &Proc,
    cache: &mut CacheX86_64,
    address: FrameAddress,
    regs: &UnwindRegsX86_64,
    here: Option<&Mapping>,
    stopped: bool,
) -> Ending {
    let Some(m) = here else {
        return Ending::NoUnwindInfo(None);
    };
    if m.how != ModuleUnwind::Dwarf {
        return if stopped || regs.bp() == 0 {
            Ending::Complete
        } else {
            Ending::NoUnwindInfo(Some(m.file))
        };
    }
    match probe_rule(proc, cache, address, regs) {
        Rule::EndOfStack => Ending::Complete,
        Rule::FramePointer if regs.bp() == 0 => Ending::Complete,
        Rule::FramePointer | Rule::Other => Ending::Failed(m.file),
    }
}

/// What framehop's rule for a frame reads, found by running it again on registers and a
/// stack that hold no zero: a frame pointer far above the stack pointer, and a stack
/// whose every word is the complement of its address.
#[derive(Debug, PartialEq, Eq)]
enum Rule {
    /// The CFI says there is no return address.
    EndOfStack,
    /// The return address is read next to the saved frame pointer (`[rbp + 8]`).
    FramePointer,
    /// Anything else (relative to the stack pointer, or failing).
    Other,
}

/// Distance of the probe's frame pointer above the stack pointer: beyond any real frame.
const PROBE_BP_GAP: u64 = 1 << 40;

fn probe_rule(
    proc: &Proc,
    cache: &mut CacheX86_64,
    address: FrameAddress,
    regs: &UnwindRegsX86_64,
) -> Rule {
    let bp = regs.sp().wrapping_add(PROBE_BP_GAP);
    let mut probe = UnwindRegsX86_64::new(regs.ip(), regs.sp(), bp);
    let mut read = |addr: u64| -> Result<u64, ()> { Ok(!addr) };
    match proc
        .unwinder
        .unwind_frame(address, &mut probe, cache, &mut read)
    {
        Ok(None) => Rule::EndOfStack,
        Ok(Some(ra)) if !ra == bp.wrapping_add(8) => Rule::FramePointer,
        _ => Rule::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid no process has: its /proc files cannot be read.
    const NO_PID: u32 = u32::MAX - 7;

    fn words(w: &[u64]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    fn stack(ip: u64, sp: u64, bp: u64, bytes: &[u8], full: bool) -> UserStack<'_> {
        UserStack {
            di: 0,
            ip,
            sp,
            bp,
            stack: bytes,
            full,
        }
    }

    #[test]
    fn a_module_whose_file_is_gone_ends_its_stacks_in_a_named_truncated_frame() {
        let mut u = Unwinder::new(UnwindMode::Dwarf);
        u.add_mapping(
            NO_PID,
            0x10_0000,
            0x20_0000,
            0,
            Path::new("/gone/libgone.so"),
            None,
        );
        // Frame pointers lead from the module to an address in no module.
        let bytes = words(&[0x7000_0100, 0x5000, 0, 0]);
        let s = stack(0x10_0500, 0x7000_0000, 0x7000_0000, &bytes, false);
        let mut out = Vec::new();
        let ending = u.unwind(NO_PID, Some(&s), &mut out);
        assert_eq!(
            u.ending_frame(ending).as_deref(),
            Some("[truncated: no unwind info for libgone.so]")
        );
        assert_eq!(out.first(), Some(&0x10_0500));
        assert_eq!(u.counts.truncated_no_unwind_info, 1);
        assert!(
            u.warnings.iter().any(|w| w.contains("libgone.so")),
            "{:?}",
            u.warnings
        );
        let counts = u.take_counts();
        assert_eq!(counts.modules.get("libgone.so"), Some(&ModuleUnwind::None));
    }

    #[test]
    fn a_frame_beyond_a_full_stack_copy_is_a_copy_too_small() {
        let mut u = Unwinder::new(UnwindMode::Dwarf);
        u.add_mapping(
            NO_PID,
            0x10_0000,
            0x20_0000,
            0,
            Path::new("/gone/libgone.so"),
            None,
        );
        // The frame pointer points past the 16 bytes copied.
        let bytes = words(&[1, 2]);
        let s = stack(0x10_0500, 0x7000_0000, 0x7000_0100, &bytes, true);
        let mut out = Vec::new();
        let ending = u.unwind(NO_PID, Some(&s), &mut out);
        assert_eq!(ending, Ending::StackCopyTooSmall);
        assert_eq!(
            u.ending_frame(ending).as_deref(),
            Some("[truncated: stack copy too small]")
        );
    }

    #[test]
    fn code_in_no_file_and_garbage_registers_end_truncated_without_panicking() {
        let mut u = Unwinder::new(UnwindMode::Auto);
        let mut out = Vec::new();
        // A JIT region: no module at all.
        let bytes = words(&[0x7000_0100, 0x1234_5678, 0, 0]);
        let s = stack(0x5555_0000, 0x7000_0000, 0x7000_0000, &bytes, false);
        let ending = u.unwind(NO_PID, Some(&s), &mut out);
        assert_eq!(ending, Ending::NoUnwindInfo(None));
        assert_eq!(
            u.ending_frame(ending).as_deref(),
            Some("[truncated: no unwind info for code outside any file]")
        );
        // Empty copies, registers at the ends of the address space, no stack at all.
        for (ip, sp, bp) in [
            (0, 0, 0),
            (u64::MAX, u64::MAX, u64::MAX),
            (1, u64::MAX - 3, 8),
        ] {
            let _ = u.unwind(NO_PID, Some(&stack(ip, sp, bp, &[], true)), &mut out);
            let _ = u.unwind(NO_PID, Some(&stack(ip, sp, bp, &bytes, false)), &mut out);
            assert!(out.len() <= MAX_FRAMES);
        }
        assert_eq!(u.unwind(NO_PID, None, &mut out), Ending::NoStack);
        assert_eq!(u.counts.no_stack, 1);
        assert_eq!(u.ending_frame(Ending::Complete), None);
    }

    #[test]
    fn a_stack_that_loops_is_cut_at_the_depth_limit_or_refused() {
        let mut u = Unwinder::new(UnwindMode::Dwarf);
        u.add_mapping(
            NO_PID,
            0x10_0000,
            0x20_0000,
            0,
            Path::new("/gone/libloop.so"),
            None,
        );
        // A frame pointer chain that points back at itself, returning into the module.
        let bytes = words(&[0x7000_0000, 0x10_0600, 0, 0]);
        let s = stack(0x10_0500, 0x7000_0000, 0x7000_0000, &bytes, false);
        let mut out = Vec::new();
        let ending = u.unwind(NO_PID, Some(&s), &mut out);
        assert_ne!(ending, Ending::Complete);
        assert!(out.len() <= MAX_FRAMES);
    }

    #[test]
    fn this_process_unwinds_to_its_root_from_a_copy_of_its_own_stack() {
        let (ip, sp, bp, bytes, full) = own_stack();
        let pid = std::process::id();
        let mut u = Unwinder::new(UnwindMode::Dwarf);
        let mut out = Vec::new();
        let complete = u.unwind_copy(pid, ip, sp, bp, &bytes, full, &mut out);
        // A test thread: this function, the test harness's frames, the thread's start.
        assert!(out.len() >= 5, "{out:x?}");
        assert!(complete || full, "{out:x?} {:?}", u.counts);
        assert!(
            u.take_counts()
                .modules
                .values()
                .all(|m| *m == ModuleUnwind::Dwarf)
        );
    }

    /// This thread's registers and a copy of its stack (up to the end of its mapping, at
    /// most 64 KiB), and whether the copy was cut.
    #[inline(never)]
    fn own_stack() -> (u64, u64, u64, Vec<u8>, bool) {
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: reads three registers into outputs; no memory is touched.
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
                options(nomem, nostack, preserves_flags),
            );
        }
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let end = maps
            .lines()
            .filter_map(procfs_range)
            .find(|r| r.contains(&sp))
            .map(|r| r.end)
            .unwrap();
        let len = usize::try_from((end - sp).min(65528)).unwrap();
        let mut bytes = vec![0u8; len];
        // SAFETY: [sp, sp + len) is inside this thread's stack mapping (found above),
        // above this frame, and stays mapped while we copy it.
        unsafe { std::ptr::copy_nonoverlapping(sp as *const u8, bytes.as_mut_ptr(), len) };
        (ip, sp, bp, bytes, len == 65528)
    }

    #[test]
    fn a_null_or_stray_return_address_met_through_cfi_is_a_truncated_stack_not_a_root() {
        let (ip, sp, bp, mut bytes, full) = own_stack();
        let pid = std::process::id();
        let mut u = Unwinder::new(UnwindMode::Dwarf);
        let mut whole = Vec::new();
        let complete = u.unwind_copy(pid, ip, sp, bp, &bytes, full, &mut whole);
        assert!(complete || full, "{whole:x?}");
        assert!(whole.len() >= 4, "{whole:x?}");
        // The slot holding the return address into the third frame: the first copy of
        // that address in the stack whose change cuts the walk after two frames (an
        // older copy of it may lie lower).
        let ra = whole[2] + 1;
        let mut cut = None;
        for off in (0..bytes.len().saturating_sub(7)).step_by(8) {
            if bytes[off..off + 8] != ra.to_ne_bytes() {
                continue;
            }
            bytes[off..off + 8].copy_from_slice(&0u64.to_ne_bytes());
            let mut out = Vec::new();
            let _ = u.unwind_copy(pid, ip, sp, bp, &bytes, false, &mut out);
            if out.len() == 2 {
                cut = Some(off);
                break;
            }
            bytes[off..off + 8].copy_from_slice(&ra.to_ne_bytes());
        }
        let off = cut.expect("no stack slot holds the third frame's return address");
        let mut out = Vec::new();
        u.counts = UnwindCounts::default();
        // A null return address: framehop stops, but this is not the outermost frame.
        let s = stack(ip, sp, bp, &bytes, false);
        let ending = u.unwind(pid, Some(&s), &mut out);
        assert!(matches!(ending, Ending::Failed(_)), "{ending:?}");
        assert_eq!(u.counts.truncated_other, 1);
        assert!(
            u.ending_frame(ending)
                .unwrap()
                .starts_with("[truncated: unwinding failed in "),
            "{:?}",
            u.ending_frame(ending)
        );
        // A return address into no module at all: the walk stops there, whatever a
        // frame-pointer walk from it would find.
        bytes[off..off + 8].copy_from_slice(&0x1234u64.to_ne_bytes());
        let s = stack(ip, sp, bp, &bytes, false);
        let ending = u.unwind(pid, Some(&s), &mut out);
        assert_eq!(ending, Ending::NoUnwindInfo(None), "{out:x?}");
        assert_eq!(out[..2], whole[..2]);
        assert_eq!(out.len(), 3, "{out:x?}");
        assert_eq!(u.counts.truncated(), 2);
        // Put back, the stack reaches its root again.
        bytes[off..off + 8].copy_from_slice(&ra.to_ne_bytes());
        let s = stack(ip, sp, bp, &bytes, full);
        let ending = u.unwind(pid, Some(&s), &mut out);
        assert!(ending == Ending::Complete || full, "{ending:?}");
        assert_eq!(out, whole);
    }

    fn procfs_range(line: &str) -> Option<std::ops::Range<u64>> {
        let (a, b) = line.split(' ').next()?.split_once('-')?;
        Some(u64::from_str_radix(a, 16).ok()?..u64::from_str_radix(b, 16).ok()?)
    }
}
