//! Names for code the symbol tables do not cover, read from the ELF file itself:
//!
//! - PLT stubs are named for the function they jump to, `memcpy@plt`, as perf names
//!   them: the stub's indirect jump reads a GOT slot, and the dynamic relocation of that
//!   slot names the symbol (`.rela.plt` for `.plt` and `.plt.sec`, `.rela.dyn`'s
//!   `GLOB_DAT` entries for `.plt.got`). A lazy-binding stub that only pushes its
//!   relocation's index is named by that index.
//! - Code without any symbol (a stripped library's internal functions) is one frame per
//!   function found from the unwind tables: the `.eh_frame_hdr` search table lists the
//!   start of every function with an FDE. The frame is `FILE+0xSTART` (the file's name
//!   and the function's address in it, as `liblzma.so.5.4.1+0x15ae0`), never one frame
//!   for the whole module.
//!
//! Files are read through `object`'s [`ReadCache`] (headers and a few sections, never the
//! whole file, nothing mapped); every section read is capped, so a corrupt or hostile
//! file costs at most that and yields fewer names, never a panic.

use super::debug_files::DebugLink;
use crate::unwind::tables::search_table_starts;
use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::Path;

use object::read::ReadCache;
use object::read::elf::{ElfFile64, SectionHeader as _};
use object::{Object as _, ObjectSection as _, ObjectSegment as _, ObjectSymbol as _};
use object::{ObjectSymbolTable as _, SymbolIndex};

/// Largest section read for names (bytes): PLT stubs, relocation tables and the unwind
/// search table. The C library's `.rela.dyn` is some 15 KiB, its `.eh_frame_hdr` 30 KiB;
/// a very large binary's search table a few MiB.
const MAX_SECTION_BYTES: u64 = 32 << 20;

/// `R_X86_64_GLOB_DAT` and `R_X86_64_JUMP_SLOT`: relocations of GOT slots that PLT stubs
/// jump through.
const GOT_RELOCATIONS: [u32; 2] = [
    object::elf::R_X86_64_GLOB_DAT,
    object::elf::R_X86_64_JUMP_SLOT,
];

/// A PLT section: its addresses, the size of its entries and its bytes.
#[derive(Debug)]
struct Plt {
    svma: Range<u64>,
    entry: u64,
    data: Vec<u8>,
}

/// What a file offers for naming code without symbols.
#[derive(Debug, Default)]
pub(crate) struct Fallback {
    /// Loadable segments: file offsets and the address they start at.
    segments: Vec<(Range<u64>, u64)>,
    plts: Vec<Plt>,
    /// GOT slot address → the symbol its relocation names.
    slots: HashMap<u64, String>,
    /// `.rela.plt`'s symbols in order, for lazy stubs that push an index.
    plt_relocs: Vec<Option<String>>,
    /// Function starts (addresses), sorted.
    starts: Vec<u64>,
    /// Whether it has a symbol table of its own (`.symtab`), and what it says of its
    /// separate debug file; `None` when it is not an ELF file that could be read.
    elf: Option<(bool, DebugLink)>,
}

/// The name [`Fallback::name`] gives an address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum FallbackName {
    /// A PLT stub jumping to the named function.
    Plt(String),
    /// The function starting at this address (found from the unwind tables).
    Function(u64),
}

impl Fallback {
    /// Reads what `path` offers; an unreadable or foreign file offers nothing.
    pub fn read(path: &Path) -> Fallback {
        Self::try_read(path).unwrap_or_default()
    }

    fn try_read(path: &Path) -> Option<Fallback> {
        let file = File::open(path).ok()?;
        let cache = ReadCache::new(file);
        let elf = ElfFile64::<object::Endianness, _>::parse(&cache).ok()?;
        let mut f = Fallback::default();
        let link =
            DebugLink {
                build_id: elf.build_id().ok().flatten().map(<[u8]>::to_vec),
                link: elf.gnu_debuglink().ok().flatten().and_then(|(name, crc)| {
                    Some((std::str::from_utf8(name).ok()?.to_owned(), crc))
                }),
            };
        f.elf = Some((elf.symbol_table().is_some(), link));
        for seg in elf.segments() {
            let (offset, size) = seg.file_range();
            if size > 0 {
                f.segments
                    .push((offset..offset.saturating_add(size), seg.address()));
            }
        }
        let data = |name: &str| -> Option<(u64, u64, Vec<u8>)> {
            let s = elf.section_by_name(name)?;
            if s.size() == 0 || s.size() > MAX_SECTION_BYTES {
                return None;
            }
            let entsize = s.elf_section_header().sh_entsize(elf.endian());
            Some((s.address(), entsize, s.data().ok()?.to_vec()))
        };
        for name in [".plt", ".plt.sec", ".plt.got"] {
            if let Some((svma, entsize, bytes)) = data(name) {
                let default = if name == ".plt.got" { 8 } else { 16 };
                let entry = if (8..=64).contains(&entsize) {
                    entsize
                } else {
                    default
                };
                f.plts.push(Plt {
                    svma: svma..svma.saturating_add(bytes.len() as u64),
                    entry,
                    data: bytes,
                });
            }
        }
        if !f.plts.is_empty() {
            let symbol = |index: u32| -> Option<String> {
                let table = elf.dynamic_symbol_table()?;
                let sym = table.symbol_by_index(SymbolIndex(index as usize)).ok()?;
                sym.name().ok().filter(|n| !n.is_empty()).map(str::to_owned)
            };
            for name in [".rela.dyn", ".rela.plt"] {
                let Some((_, _, bytes)) = data(name) else {
                    continue;
                };
                for r in bytes.chunks_exact(24) {
                    let word = |at: usize| {
                        r.get(at..at + 8)
                            .and_then(|b| b.try_into().ok())
                            .map_or(0, u64::from_le_bytes)
                    };
                    let (slot, info) = (word(0), word(8));
                    let (sym, kind) = ((info >> 32) as u32, info as u32);
                    let named = if GOT_RELOCATIONS.contains(&kind) && sym != 0 {
                        symbol(sym)
                    } else {
                        None
                    };
                    if name == ".rela.plt" {
                        f.plt_relocs.push(named.clone());
                    }
                    if let Some(n) = named {
                        f.slots.insert(slot, n);
                    }
                }
            }
        }
        if let Some((svma, _, hdr)) = data(".eh_frame_hdr") {
            f.starts = search_table_starts(svma, &hdr).unwrap_or_default();
            f.starts.sort_unstable();
            f.starts.dedup();
        }
        Some(f)
    }

    /// Whether the file has a symbol table of its own, and what it says of its debug
    /// file; `None` when it is not an ELF file that could be read.
    pub fn elf(&self) -> Option<(bool, &DebugLink)> {
        self.elf.as_ref().map(|(symtab, link)| (*symtab, link))
    }

    /// The address in the file of file offset `offset`, by its loadable segment.
    pub fn address(&self, offset: u64) -> Option<u64> {
        let (range, vaddr) = self.segments.iter().find(|(r, _)| r.contains(&offset))?;
        vaddr.checked_add(offset - range.start)
    }

    /// The PLT stub at file offset `offset`, when there is one: the name of the
    /// function it jumps to.
    pub fn plt(&self, offset: u64) -> Option<String> {
        let addr = self.address(offset)?;
        let plt = self.plts.iter().find(|p| p.svma.contains(&addr))?;
        let index = (addr - plt.svma.start) / plt.entry;
        let at = index.checked_mul(plt.entry)?;
        let start = usize::try_from(at).ok()?;
        let end = start.saturating_add(plt.entry as usize).min(plt.data.len());
        let code = plt.data.get(start..end)?;
        let entry_svma = plt.svma.start + at;
        // `jmp *disp32(%rip)` (ff 25), possibly after endbr64 and a bnd prefix.
        if let Some(pos) = code.windows(2).position(|w| w == [0xff, 0x25]) {
            let disp = code.get(pos + 2..pos + 6)?;
            let disp = i32::from_le_bytes(disp.try_into().ok()?);
            let next = entry_svma.checked_add(pos as u64 + 6)?;
            let slot = next.checked_add_signed(i64::from(disp))?;
            if let Some(name) = self.slots.get(&slot) {
                return Some(name.clone());
            }
        }
        // A lazy stub of an IBT `.plt` (`endbr64; push imm32`) or of a plain one (`jmp
        // *slot; push imm32`): the index of its relocation. Only there: a `68` byte
        // elsewhere is part of another instruction (the first entry's displacements).
        let pos = if code.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
            4
        } else if code.starts_with(&[0xff, 0x25]) {
            6
        } else {
            return None;
        };
        if code.get(pos) != Some(&0x68) {
            return None;
        }
        let index = u32::from_le_bytes(code.get(pos + 1..pos + 5)?.try_into().ok()?);
        self.plt_relocs.get(index as usize)?.clone()
    }

    /// The name of code at file offset `offset` that the symbol tables do not cover:
    /// a PLT stub's target, else the function the unwind tables place it in.
    pub fn name(&self, offset: u64) -> Option<FallbackName> {
        if let Some(target) = self.plt(offset) {
            return Some(FallbackName::Plt(target));
        }
        let addr = self.address(offset)?;
        let i = self.starts.partition_point(|&s| s <= addr);
        let start = *self.starts.get(i.checked_sub(1)?)?;
        Some(FallbackName::Function(start))
    }
}

impl FallbackName {
    /// The frame's name: `memcpy@plt`, or `FILE+0xSTART` with `file` the file's name.
    pub fn frame(&self, file: &str) -> String {
        match self {
            FallbackName::Plt(target) => format!("{target}@plt"),
            FallbackName::Function(start) => format!("{file}+{start:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_table_lists_its_functions_and_a_short_one_does_not_overrun() {
        // Version 1, sdata4 eh_frame_ptr, udata4 count, datarel sdata4 table; two pairs.
        let mut hdr = vec![1, 0x1b, 0x03, 0x3b];
        hdr.extend(0u32.to_le_bytes());
        hdr.extend(2u32.to_le_bytes());
        for (start, fde) in [(-0x100i32, 0x10i32), (-0x80, 0x20)] {
            hdr.extend(start.to_le_bytes());
            hdr.extend(fde.to_le_bytes());
        }
        assert_eq!(search_table_starts(0x1000, &hdr), Some(vec![0xf00, 0xf80]));
        // A count far past the bytes there are reads what is there.
        hdr[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(search_table_starts(0x1000, &hdr).map(|s| s.len()), Some(2));
        assert_eq!(search_table_starts(0x1000, &hdr[..5]), None);
        hdr[0] = 2;
        assert_eq!(search_table_starts(0x1000, &hdr), None);
    }

    #[test]
    fn a_file_that_is_not_elf_offers_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("garbage.so");
        std::fs::write(&path, b"\x7fELF not really").expect("write");
        let f = Fallback::read(&path);
        assert_eq!(f.name(0x1000), None);
        assert_eq!(Fallback::read(&dir.path().join("missing")).name(0), None);
    }

    #[test]
    fn stubs_of_this_test_binary_are_named_for_their_targets() {
        let exe = std::fs::read_link("/proc/self/exe").expect("/proc/self/exe");
        let f = Fallback::read(&exe);
        assert!(!f.plts.is_empty(), "no PLT in {}", exe.display());
        let mut named = Vec::new();
        for plt in &f.plts {
            let (seg, vaddr) = f
                .segments
                .iter()
                .find(|(r, v)| (*v..*v + (r.end - r.start)).contains(&plt.svma.start))
                .expect("the PLT is in a segment");
            let mut a = plt.svma.start;
            while a < plt.svma.end {
                if let Some(n) = f.plt(a - vaddr + seg.start) {
                    named.push(n);
                }
                a += plt.entry;
            }
        }
        assert!(
            named
                .iter()
                .any(|n| n.starts_with("pthread_") || n.starts_with("mem")),
            "{named:?}"
        );
    }

    /// Calls libc through the PLT, and takes `strlen`'s address through the GOT too,
    /// which makes the linker call it through `.plt.got`.
    const CALLS_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
size_t (*volatile taken)(const char *);
int main(int argc, char **argv) {
    char buf[64];
    taken = strlen;
    memcpy(buf, argv[0], 8);
    buf[8] = 0;
    printf("%zu %ld\n", strlen(buf) + taken(buf), labs(argc - 5));
    return 0;
}
"#;

    /// Each PLT stub objdump names `NAME@plt` in `path`, with the section it is in.
    fn objdump_stubs(path: &Path) -> Vec<(u64, String, String)> {
        let out = std::process::Command::new("objdump")
            .args(["-d", "--no-show-raw-insn"])
            .arg(path)
            .output()
            .unwrap_or_else(|e| panic!("this test reads stubs with objdump (binutils): {e}"));
        assert!(out.status.success(), "objdump -d {}", path.display());
        let text = String::from_utf8_lossy(&out.stdout);
        let mut section = String::new();
        let mut stubs = Vec::new();
        for line in text.lines() {
            if let Some(name) = line.strip_prefix("Disassembly of section ") {
                section = name.trim_end_matches(':').to_owned();
            } else if let Some((addr, rest)) = line.split_once(" <")
                && let Some(name) = rest.strip_suffix("@plt>:")
                && let Ok(addr) = u64::from_str_radix(addr, 16)
            {
                stubs.push((addr, name.to_owned(), section.clone()));
            }
        }
        stubs
    }

    #[test]
    fn every_stub_objdump_names_is_named_alike_in_every_plt_layout() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().join("calls.c");
        std::fs::write(&src, CALLS_C).expect("write calls.c");
        let layouts: [(&str, &[&str]); 5] = [
            ("lazy", &[]),
            ("now", &["-Wl,-z,now"]),
            ("ibt", &["-fcf-protection=full", "-Wl,-z,ibtplt"]),
            ("nopie", &["-fno-pie", "-no-pie"]),
            ("lib.so", &["-shared", "-fPIC"]),
        ];
        let mut sections = std::collections::BTreeSet::new();
        for (name, flags) in layouts {
            let out = dir.path().join(name);
            let status = std::process::Command::new("cc")
                .args(["-O1", "-fno-builtin"])
                .args(flags)
                .arg("-o")
                .arg(&out)
                .arg(&src)
                .status()
                .unwrap_or_else(|e| panic!("this test builds C with `cc`: {e}; install gcc"));
            assert!(status.success(), "cc {flags:?}");
            let f = Fallback::read(&out);
            let offset = |addr: u64| {
                let (range, vaddr) = f
                    .segments
                    .iter()
                    .find(|(r, v)| (*v..*v + (r.end - r.start)).contains(&addr))
                    .expect("a stub in a loadable segment");
                range.start + (addr - vaddr)
            };
            let stubs = objdump_stubs(&out);
            let names: Vec<&str> = stubs.iter().map(|(_, n, _)| n.as_str()).collect();
            for want in ["memcpy", "strlen", "printf", "labs"] {
                assert!(names.contains(&want), "{name}: no {want}@plt in {names:?}");
            }
            for (addr, stub, section) in &stubs {
                assert_eq!(
                    f.plt(offset(*addr)).as_deref(),
                    Some(stub.as_str()),
                    "{name}: the stub at {addr:#x} in {section}"
                );
                // Every byte of the stub, not only its first.
                assert_eq!(f.plt(offset(*addr) + 5).as_deref(), Some(stub.as_str()));
                sections.insert(section.clone());
            }
            // The first entry of a lazy `.plt` calls the dynamic linker: no function's.
            if let Some(plt) = f.plts.iter().find(|p| p.entry == 16) {
                let first = offset(plt.svma.start);
                if !stubs.iter().any(|(a, _, _)| *a == plt.svma.start) {
                    assert_eq!(f.plt(first), None, "{name}: the first .plt entry");
                }
            }
        }
        assert_eq!(
            sections.into_iter().collect::<Vec<_>>(),
            [".plt", ".plt.got", ".plt.sec"],
            "the layouts cover every kind of PLT section"
        );
    }
}
