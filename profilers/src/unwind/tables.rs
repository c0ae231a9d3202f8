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
use object::{Object as _, ObjectSection as _, ObjectSegment as _, ReadRef as _};

use crate::ProfilerError;

/// Largest unwind section read (bytes): far above any real one (the C library's
/// `.eh_frame` is ~200 KiB here, a large Rust binary's a few MiB), it bounds what a
/// corrupt or hostile file can make the sampler hold.
const MAX_SECTION_BYTES: u64 = 64 << 20;
/// Functions whose first instructions the frame-pointer check reads.
const FP_PROBES: usize = 64;
/// Share of probed functions that must set up `rbp` as a frame pointer for a module to
/// count as keeping frame pointers. A build with frame pointers sets them up in every
/// function (gcc `-fno-omit-frame-pointer`, rustc `force-frame-pointers`); a build
/// without them in a few (functions with variable-sized frames): measured here, the
/// C library 4 %, the fixtures built with `-fomit-frame-pointer` 0 %, with frame
/// pointers 100 %.
const FP_SHARE: f64 = 0.5;
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
    /// Loadable segments: (file offset range, vaddr), to place a mapping.
    pub segments: Vec<(Range<u64>, u64)>,
    /// Most functions set up a frame pointer (see [`FP_SHARE`]).
    pub keeps_frame_pointers: bool,
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

    /// The file's address (SVMA) of the byte at file offset `pgoff`, through the
    /// segment that holds it.
    pub fn svma_of_offset(&self, pgoff: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(range, _)| range.contains(&pgoff))
            .map(|(range, vaddr)| vaddr + (pgoff - range.start))
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
            if size > 0 {
                t.segments
                    .push((offset..offset.saturating_add(size), seg.address()));
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
        t.keeps_frame_pointers = t
            .eh_frame_hdr
            .as_ref()
            .and_then(|hdr| frame_pointer_share(hdr, &t.segments, &cache))
            .is_some_and(|share| share >= FP_SHARE);
        Ok(t)
    }
}

/// The share of functions (a sample of up to [`FP_PROBES`] from the `.eh_frame_hdr`
/// search table) that begin by setting up a frame pointer: `push %rbp; mov %rsp,%rbp`,
/// after an optional `endbr64`. `None` when the table is in an encoding other than the
/// one every linker here writes (sdata4 relative to the header) or is empty.
fn frame_pointer_share(
    hdr: &Section,
    segments: &[(Range<u64>, u64)],
    file: &ReadCache<File>,
) -> Option<f64> {
    const DW_EH_PE_UDATA4: u8 = 0x03;
    const DW_EH_PE_DATAREL_SDATA4: u8 = 0x3b;
    let d = &hdr.data[..];
    let (&version, rest) = d.split_first()?;
    let [_ptr_enc, count_enc, table_enc] = *rest.first_chunk::<3>()?;
    if version != 1 || count_enc != DW_EH_PE_UDATA4 || table_enc != DW_EH_PE_DATAREL_SDATA4 {
        return None;
    }
    let word = |at: usize| -> Option<u32> {
        d.get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    };
    // version and encodings (4 bytes), eh_frame_ptr (4), fde_count (4), then pairs.
    let count = usize::try_from(word(8)?).ok()?;
    if count == 0 {
        return None;
    }
    let probes = count.min(FP_PROBES);
    let mut framed = 0usize;
    let mut read = 0usize;
    for i in 0..probes {
        let entry = 12 + (i * count / probes) * 8;
        let rel = word(entry)? as i32;
        let svma = hdr.svma.start.checked_add_signed(i64::from(rel))?;
        let Some((range, vaddr)) = segments
            .iter()
            .find(|(r, v)| svma >= *v && svma - v < r.end - r.start)
        else {
            continue;
        };
        let offset = range.start + (svma - vaddr);
        let Ok(code) = file.read_bytes_at(offset, 8) else {
            continue;
        };
        read += 1;
        if sets_up_frame_pointer(code) {
            framed += 1;
        }
    }
    (read > 0).then(|| framed as f64 / read as f64)
}

/// `code` begins with `[endbr64] push %rbp; mov %rsp,%rbp`.
fn sets_up_frame_pointer(code: &[u8]) -> bool {
    const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
    let code = code.strip_prefix(&ENDBR64[..]).unwrap_or(code);
    code.starts_with(&[0x55, 0x48, 0x89, 0xe5])
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
    fn a_frame_pointer_prologue_is_recognized_with_or_without_endbr64() {
        assert!(sets_up_frame_pointer(&[0x55, 0x48, 0x89, 0xe5, 0x90]));
        assert!(sets_up_frame_pointer(&[
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5
        ]));
        // `push %rbx; sub $8,%rsp`: a function without a frame pointer.
        assert!(!sets_up_frame_pointer(&[0x53, 0x48, 0x83, 0xec, 0x08]));
        assert!(!sets_up_frame_pointer(&[0x55]));
    }

    #[test]
    fn this_test_binary_has_unwind_tables_and_keeps_frame_pointers() {
        // The workspace builds with force-frame-pointers (.cargo/config.toml).
        let exe = std::env::current_exe().unwrap();
        let t = FileTables::read(&exe).unwrap();
        assert!(t.has_cfi());
        let hdr = t.eh_frame_hdr.as_ref().unwrap();
        assert!(hdr.data.len() > 12 && !t.segments.is_empty());
        assert!(t.keeps_frame_pointers);
        let text = t.text.clone().unwrap();
        assert!(t.segments.iter().any(|(_, v)| *v <= text.start));
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
