//! The unwind tables of one ELF file: its `.eh_frame`, `.eh_frame_hdr` (or
//! `.debug_frame`) bytes and the addresses framehop needs, read once per file and shared
//! by every process that maps it ([`TableCache`], keyed by device and inode).
//!
//! Files are read through `object`'s [`ReadCache`]: only the headers, the unwind
//! sections and a few bytes of code are read, never the whole file (a large binary's
//! debug info stays on disk), and nothing is mapped, so a file truncated under us is a
//! read error, not a fault.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::sync::Arc;

use object::read::ReadCache;
use object::read::elf::ElfFile64;
use object::{Object as _, ObjectSection as _, ObjectSegment as _};

use crate::ProfilerError;

/// Largest unwind section read (bytes): far above any real one (the C library's
/// `.eh_frame` is ~200 KiB here, a large Rust binary's a few MiB), it bounds what a
/// corrupt or hostile file can make the sampler hold.
const MAX_SECTION_BYTES: u64 = 64 << 20;
/// Largest `.text` the frame-pointer check reads (bytes); a larger module is walked by
/// its CFI without being checked.
const MAX_CHECKED_TEXT: u64 = 64 << 20;
/// Functions that may begin without setting up a frame pointer in a module that still
/// counts as keeping them: the C runtime's start-up code linked into every program,
/// which is the root of the stack or never calls into the program's frames.
const FP_EXCEPTIONS: [&str; 5] = [
    "_start",
    "deregister_tm_clones",
    "register_tm_clones",
    "__do_global_dtors_aux",
    "frame_dummy",
];
/// Files whose tables the cache keeps; past it, tables no process uses any more are
/// dropped.
const MAX_CACHED_FILES: usize = 1024;

/// How the addresses of a module are unwound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ModuleUnwind {
    /// From its `.eh_frame` (or `.debug_frame`) CFI.
    Dwarf,
    /// By frame pointer: the module keeps them (`auto`), or has no unwind info.
    FramePointers,
    /// No unwind info and no frame pointers: stacks through it end truncated.
    None,
}

impl ModuleUnwind {
    /// The word session.json uses.
    pub fn name(self) -> &'static str {
        match self {
            ModuleUnwind::Dwarf => "dwarf",
            ModuleUnwind::FramePointers => "fp",
            ModuleUnwind::None => "none",
        }
    }
}

/// The unwind sections of one file, as framehop reads them (SVMAs: addresses as the
/// file states them).
#[derive(Debug, Default)]
pub(crate) struct FileTables {
    pub eh_frame: Option<Section>,
    pub eh_frame_hdr: Option<Section>,
    pub debug_frame: Option<Section>,
    pub text: Option<Range<u64>>,
    pub got: Option<Range<u64>>,
    /// Loadable segments, to place a mapping.
    pub segments: Vec<Segment>,
    /// Every function of `.text` sets up a frame pointer, but for the C runtime's
    /// start-up code (see [`FP_EXCEPTIONS`]). A single function without one (a leaf
    /// built with gcc's default `-momit-leaf-frame-pointer`) makes the module's
    /// frame-pointer stacks lose callers, so the module is walked by its CFI instead.
    pub keeps_frame_pointers: bool,
}

/// A loadable segment: its bytes in the file, its address, and whether it is code.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    pub offsets: Range<u64>,
    pub vaddr: u64,
    pub exec: bool,
}

/// One section's address range and bytes.
#[derive(Debug, Clone)]
pub(crate) struct Section {
    pub svma: Range<u64>,
    pub data: Arc<[u8]>,
}

impl FileTables {
    /// Any CFI at all.
    pub fn has_cfi(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }

    /// The file's address (SVMA) that an executable mapping from file offset `pgoff`
    /// starts at. The mapping starts on a page boundary, while a code segment may start
    /// anywhere in its first page (lld packs segments so): the segment is the code
    /// segment whose first page holds `pgoff`, and the address may lie a little below
    /// its own.
    pub fn svma_of_offset(&self, pgoff: u64) -> Option<u64> {
        const PAGE_MASK: u64 = !0xfff;
        let holds = |s: &&Segment| s.offsets.start & PAGE_MASK <= pgoff && pgoff < s.offsets.end;
        self.segments
            .iter()
            .filter(holds)
            .find(|s| s.exec)
            .or_else(|| self.segments.iter().find(holds))
            .map(|s| s.vaddr.wrapping_add(pgoff).wrapping_sub(s.offsets.start))
    }

    /// Reads the tables of the ELF file `path`.
    pub fn read(path: &Path) -> Result<FileTables, ProfilerError> {
        let io = |source| ProfilerError::Io {
            path: path.to_owned(),
            source,
        };
        let parse = |reason: String| ProfilerError::Parse {
            path: path.to_owned(),
            reason,
        };
        let file = File::open(path).map_err(io)?;
        let cache = ReadCache::new(file);
        let elf = ElfFile64::<object::Endianness, _>::parse(&cache)
            .map_err(|e| parse(format!("not a 64-bit ELF file: {e}")))?;
        let mut t = FileTables::default();
        for seg in elf.segments() {
            let (offset, size) = seg.file_range();
            let exec = match seg.flags() {
                object::SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
                _ => false,
            };
            if size > 0 {
                t.segments.push(Segment {
                    offsets: offset..offset.saturating_add(size),
                    vaddr: seg.address(),
                    exec,
                });
            }
        }
        let range = |name: &str| {
            elf.section_by_name(name)
                .map(|s| s.address()..s.address().saturating_add(s.size()))
        };
        t.text = range(".text");
        t.got = range(".got");
        let section = |name: &str| -> Result<Option<Section>, ProfilerError> {
            let Some(s) = elf.section_by_name(name) else {
                return Ok(None);
            };
            let compressed = s
                .compressed_file_range()
                .map_err(|e| parse(format!("{name}: {e}")))?;
            if compressed.format != object::CompressionFormat::None {
                // Only `.debug_frame` is ever compressed; without it the module falls
                // back to frame pointers.
                return Ok(None);
            }
            if s.size() == 0 || s.size() > MAX_SECTION_BYTES {
                return Ok(None);
            }
            let data = s.data().map_err(|e| parse(format!("{name}: {e}")))?;
            Ok(Some(Section {
                svma: s.address()..s.address().saturating_add(s.size()),
                data: Arc::from(data),
            }))
        };
        t.eh_frame = section(".eh_frame")?;
        t.eh_frame_hdr = section(".eh_frame_hdr")?;
        if t.eh_frame.is_none() {
            t.debug_frame = section(".debug_frame")?;
        }
        let text = elf
            .section_by_name(".text")
            .filter(|s| s.size() <= MAX_CHECKED_TEXT)
            .and_then(|s| Some((s.address(), s.data().ok()?)));
        t.keeps_frame_pointers = match (&t.eh_frame_hdr, text) {
            (Some(hdr), Some((address, code))) => {
                let mut without = Vec::new();
                functions_without_frame_pointer(hdr, address, code, &mut without).is_some()
                    && (without.is_empty() || only_start_up_code(&elf, &mut without))
            }
            _ => false,
        };
        Ok(t)
    }
}

/// The function starts (addresses) listed by an `.eh_frame_hdr` search table at
/// `svma`, in the encoding every linker here writes (sdata4 relative to the header);
/// `None` for another.
pub(crate) fn search_table_starts(svma: u64, d: &[u8]) -> Option<Vec<u64>> {
    const DW_EH_PE_UDATA4: u8 = 0x03;
    const DW_EH_PE_DATAREL_SDATA4: u8 = 0x3b;
    let (&version, rest) = d.split_first()?;
    let [_ptr_enc, count_enc, table_enc] = *rest.first_chunk::<3>()?;
    if version != 1 || count_enc != DW_EH_PE_UDATA4 || table_enc != DW_EH_PE_DATAREL_SDATA4 {
        return None;
    }
    let word = |at: usize| -> Option<u32> {
        d.get(at..at.checked_add(4)?)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    };
    // version and encodings (4 bytes), eh_frame_ptr (4), fde_count (4), then pairs. The
    // count is checked against the bytes there are, never trusted for an allocation.
    let count = usize::try_from(word(8)?).ok()?;
    let count = count.min(d.len().saturating_sub(12) / 8);
    let mut starts = Vec::with_capacity(count);
    for i in 0..count {
        let rel = word(12 + i * 8)? as i32;
        starts.push(svma.checked_add_signed(i64::from(rel))?);
    }
    Some(starts)
}

/// How many functions of `.text` (every one the `.eh_frame_hdr` search table lists)
/// do not begin by setting up a frame pointer: `push %rbp; mov %rsp,%rbp`, after an
/// optional `endbr64`. `None` when the table is in an encoding other than the one every
/// linker here writes (sdata4 relative to the header) or lists no function in `.text`.
/// A frame-pointer build sets one up in every function (gcc `-fno-omit-frame-pointer`,
/// rustc `force-frame-pointers`; gcc leaves leaf functions out unless also given
/// `-mno-omit-leaf-frame-pointer`), but for the C start-up code; the C library has
/// thousands without.
fn functions_without_frame_pointer(
    hdr: &Section,
    text_svma: u64,
    text: &[u8],
    without: &mut Vec<u64>,
) -> Option<()> {
    let mut checked = 0usize;
    for svma in search_table_starts(hdr.svma.start, &hdr.data[..])? {
        let Some(at) = svma
            .checked_sub(text_svma)
            .and_then(|off| usize::try_from(off).ok())
            .filter(|&off| off < text.len())
        else {
            continue;
        };
        checked += 1;
        if !sets_up_frame_pointer(&text[at..]) {
            without.push(svma);
        }
    }
    (checked > 0).then_some(())
}

/// Every address of `starts` is a function of [`FP_EXCEPTIONS`] by the symbol table
/// (a stripped file has none: then no exception is made).
fn only_start_up_code<'data, R: object::ReadRef<'data>>(
    elf: &ElfFile64<'data, object::Endianness, R>,
    starts: &mut [u64],
) -> bool {
    use object::ObjectSymbol as _;
    starts.sort_unstable();
    let mut excused = 0;
    for sym in elf.symbols() {
        let named = sym.name().is_ok_and(|n| FP_EXCEPTIONS.contains(&n));
        if named && starts.binary_search(&sym.address()).is_ok() {
            excused += 1;
        }
    }
    excused >= starts.len()
}

/// `code` begins with `[endbr64] push %rbp`, and `mov %rsp,%rbp` follows within a few
/// instructions (compilers schedule an instruction or two between them).
fn sets_up_frame_pointer(code: &[u8]) -> bool {
    const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
    const MOV_RSP_RBP: [u8; 3] = [0x48, 0x89, 0xe5];
    let code = code.strip_prefix(&ENDBR64[..]).unwrap_or(code);
    let Some(rest) = code.strip_prefix(&[0x55][..]) else {
        return false;
    };
    rest[..rest.len().min(16)]
        .windows(3)
        .any(|w| w == MOV_RSP_RBP)
}

/// What a file's tables are cached under: the same file, whatever path it was opened by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FileKey {
    pub dev: u64,
    pub ino: u64,
}

impl FileKey {
    /// The key of the file at `path` now.
    pub fn of(path: &Path) -> std::io::Result<FileKey> {
        let m = std::fs::metadata(path)?;
        Ok(FileKey {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// Parsed tables shared between processes, by file.
#[derive(Debug, Default)]
pub(crate) struct TableCache {
    tables: HashMap<FileKey, Arc<FileTables>>,
    /// Files read (cache misses), for the bench and tests.
    pub reads: u64,
}

impl TableCache {
    /// The tables of the file `key` at `path`, read the first time.
    pub fn get(&mut self, key: FileKey, path: &Path) -> Result<Arc<FileTables>, ProfilerError> {
        if let Some(t) = self.tables.get(&key) {
            return Ok(Arc::clone(t));
        }
        if self.tables.len() >= MAX_CACHED_FILES {
            self.tables.retain(|_, t| Arc::strong_count(t) > 1);
        }
        self.reads += 1;
        let t = Arc::new(FileTables::read(path)?);
        if self.tables.len() < MAX_CACHED_FILES {
            self.tables.insert(key, Arc::clone(&t));
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_is_placed_by_the_code_segment_whose_first_page_holds_it() {
        // lld's layout: read-only data from offset 0 at address 0, code from offset
        // 0x4d10 at 0x5d10 (the same page offset, one page on).
        let t = FileTables {
            segments: vec![
                Segment {
                    offsets: 0..0x4d10,
                    vaddr: 0,
                    exec: false,
                },
                Segment {
                    offsets: 0x4d10..0x9000,
                    vaddr: 0x5d10,
                    exec: true,
                },
            ],
            ..FileTables::default()
        };
        // The code mapping starts at offset 0x4000, which holds the end of the data
        // segment too: it is placed by the code segment, at 0x5000.
        assert_eq!(t.svma_of_offset(0x4000), Some(0x5000));
        assert_eq!(t.svma_of_offset(0x6000), Some(0x7000));
        assert_eq!(t.svma_of_offset(0x10000), None);
    }

    #[test]
    fn a_frame_pointer_prologue_is_recognized_with_or_without_endbr64() {
        assert!(sets_up_frame_pointer(&[0x55, 0x48, 0x89, 0xe5, 0x90]));
        assert!(sets_up_frame_pointer(&[
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5
        ]));
        // `push %rbp; mov %edi,%eax; mov %rsp,%rbp`, as gcc schedules it.
        assert!(sets_up_frame_pointer(&[0x55, 0x89, 0xf8, 0x48, 0x89, 0xe5]));
        // `push %rbx; sub $8,%rsp`: a function without a frame pointer.
        assert!(!sets_up_frame_pointer(&[0x53, 0x48, 0x83, 0xec, 0x08]));
        assert!(!sets_up_frame_pointer(&[0x55]));
    }

    #[test]
    fn this_test_binary_has_unwind_tables_placed_in_its_segments() {
        let exe = std::env::current_exe().unwrap();
        let t = FileTables::read(&exe).unwrap();
        assert!(t.has_cfi());
        let hdr = t.eh_frame_hdr.as_ref().unwrap();
        assert!(hdr.data.len() > 12 && !t.segments.is_empty());
        let text = t.text.clone().unwrap();
        assert!(t.segments.iter().any(|s| s.exec && s.vaddr <= text.start));
    }

    /// main → g → f, each a real call; f uses the stack (a stack-less leaf gets no frame
    /// pointer from gcc 12 whatever the flags).
    const CALLS: &str = "__attribute__((noinline)) int f(int x) { volatile int a[4]; \
        a[x & 3] = x; return a[x & 3] * 3 + 1; }\n\
        __attribute__((noinline)) int g(int x) { return f(x) + f(x + 1); }\n\
        int main(int argc, char **argv) { (void)argv; return g(argc) & 1; }\n";

    /// Builds C `source` with `flags` into `dir/name`.
    fn build(dir: &Path, name: &str, source: &str, flags: &[&str]) -> std::path::PathBuf {
        let src = dir.join(format!("{name}.c"));
        std::fs::write(&src, source).unwrap();
        let out = dir.join(name);
        let status = std::process::Command::new("cc")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .status()
            .expect("this test builds C programs with `cc`: install gcc");
        assert!(status.success());
        out
    }

    #[test]
    fn a_module_keeps_frame_pointers_only_when_all_its_functions_set_one_up() {
        let dir = tempfile::tempdir().unwrap();
        let fp = [
            "-O2",
            "-fno-omit-frame-pointer",
            "-mno-omit-leaf-frame-pointer",
        ];
        let fp = build(dir.path(), "fp", CALLS, &fp);
        assert!(FileTables::read(&fp).unwrap().keeps_frame_pointers);
        let no_fp = build(dir.path(), "no-fp", CALLS, &["-O2", "-fomit-frame-pointer"]);
        assert!(!FileTables::read(&no_fp).unwrap().keeps_frame_pointers);
        // gcc's -fno-omit-frame-pointer alone leaves leaf functions without one (and
        // gcc 12 still does for leaves that use no stack): a sample in such a leaf
        // walked by frame pointer would lose its caller.
        let leaf = CALLS.replace(
            "volatile int a[4]; a[x & 3] = x; return a[x & 3]",
            "return x",
        );
        assert!(!leaf.contains("volatile"));
        let leaves = build(
            dir.path(),
            "leaves",
            &leaf,
            &["-O2", "-fno-omit-frame-pointer"],
        );
        assert!(!FileTables::read(&leaves).unwrap().keeps_frame_pointers);
        // Debian's C library has no frame pointers.
        let libc = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
        ]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .expect("the C library");
        let t = FileTables::read(libc).unwrap();
        assert!(t.has_cfi() && !t.keeps_frame_pointers);
    }

    #[test]
    fn a_file_that_is_not_elf_is_an_error_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not-elf.so");
        std::fs::write(&path, b"#!/bin/sh\necho hello\n").unwrap();
        let err = FileTables::read(&path).unwrap_err();
        assert!(err.to_string().contains("not-elf.so"), "{err}");
        let gone = FileTables::read(&dir.path().join("missing.so")).unwrap_err();
        assert!(matches!(gone, ProfilerError::Io { .. }), "{gone}");
    }

    #[test]
    fn tables_are_read_once_per_file_whatever_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let link = dir.path().join("alias");
        std::os::unix::fs::symlink(&exe, &link).unwrap();
        let mut cache = TableCache::default();
        let a = cache.get(FileKey::of(&exe).unwrap(), &exe).unwrap();
        let b = cache.get(FileKey::of(&link).unwrap(), &link).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(cache.reads, 1);
    }
}
