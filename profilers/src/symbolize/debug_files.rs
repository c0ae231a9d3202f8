//! Separate debug files: where the names of a file without a symbol table of its own
//! are read.
//!
//! Distributions ship shared libraries and programs with `.dynsym` only (the exported
//! functions) and put the full symbol table and the DWARF in a separate debug file
//! (Debian's `-dbg` and `-dbgsym` packages, Fedora's `-debuginfo`). A file says which one
//! by its build id and its `.gnu_debuglink` (a file name and the CRC-32 of its contents);
//! the debug file is looked for as gdb and perf look for it, in order:
//!
//! 1. `DIR/.build-id/xx/yyyy….debug` for each debug directory `DIR` (the first byte of
//!    the build id, then the rest, in hex), with or without a debug link;
//! 2. by the debug link's name: beside the file, in `.debug/` beside it,
//!    `DIR/<the file's directory>/NAME` and `DIR/NAME`.
//!
//! The debug directories are `--debug-dir`'s (perf's `--symfs`, samply's
//! `--symbol-dir`) followed by `/usr/lib/debug` and `/lib/debug`. A candidate is taken
//! only when it is a regular file with a symbol table or debug info, and is the right
//! one: the same build id where both files have one, else the CRC-32 its debug link
//! gives. A file that has a symbol table of its own is not looked up here (blazesym
//! follows its debug link for DWARF in `--symbols inlined`); names of a file whose
//! debug file is nowhere come from its unwind tables ([`super::fallback`]), and where it
//! was looked for is said once, in a warning.

use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use benchtop_profile::escape::EscapedPath;
use object::Object as _;
use object::read::ReadCache;
use object::read::elf::ElfFile64;

/// The debug directories every lookup ends with, as gdb, perf and blazesym have them.
pub(crate) const DEFAULT_DEBUG_DIRS: [&str; 2] = ["/usr/lib/debug", "/lib/debug"];

/// Largest debug file whose CRC-32 is computed to check a debug link (only for files
/// without a build id): a debug file of a very large program is some GiB.
const MAX_CRC_BYTES: u64 = 8 << 30;

/// What a file says of its separate debug file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DebugLink {
    /// Its GNU build id (the `NT_GNU_BUILD_ID` note), when it has one.
    pub build_id: Option<Vec<u8>>,
    /// Its `.gnu_debuglink`: the debug file's name and the CRC-32 of its contents.
    pub link: Option<(String, u32)>,
}

/// The directories debug files are looked for in: the user's first, then
/// [`DEFAULT_DEBUG_DIRS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DebugDirs(Vec<PathBuf>);

impl Default for DebugDirs {
    fn default() -> Self {
        DebugDirs::new(&[])
    }
}

/// Where a file's names are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Home {
    /// The file itself: it has a symbol table of its own.
    Own,
    /// Its separate debug file.
    Debug(PathBuf),
    /// Neither: no symbol table, and no debug file at any of these places.
    Missing(Vec<PathBuf>),
}

impl DebugDirs {
    /// `extra` (in order), then the default directories, each once.
    pub fn new(extra: &[PathBuf]) -> Self {
        let mut dirs: Vec<PathBuf> = Vec::new();
        let defaults = DEFAULT_DEBUG_DIRS.iter().map(PathBuf::from);
        for d in extra.iter().cloned().chain(defaults) {
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        DebugDirs(dirs)
    }

    /// The directories, in the order they are searched.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.0
    }

    /// The places a debug file of `file` (with `link`) is looked for, in order.
    pub fn candidates(&self, file: &Path, link: &DebugLink) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some((first, rest)) = link.build_id.as_deref().and_then(<[u8]>::split_first) {
            // Shorter ids are not real build ids (blazesym skips them too).
            if rest.len() >= 7 {
                let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
                for dir in &self.0 {
                    out.push(
                        dir.join(".build-id")
                            .join(format!("{first:02x}"))
                            .join(format!("{rest}.debug")),
                    );
                }
            }
        }
        // A debug link names a file, never a path: one with a separator is ignored.
        if let Some((name, _)) = &link.link
            && !name.is_empty()
            && !name.contains('/')
            && name != "."
            && name != ".."
        {
            let beside = file.parent().unwrap_or(Path::new("/"));
            out.push(beside.join(name));
            out.push(beside.join(".debug").join(name));
            let relative = beside.strip_prefix("/").unwrap_or(beside);
            for dir in &self.0 {
                out.push(dir.join(relative).join(name));
            }
            for dir in &self.0 {
                out.push(dir.join(name));
            }
        }
        out.dedup();
        out
    }

    /// Where the names of `file` (which has no symbol table when `has_symtab` is false)
    /// are read.
    pub fn home(&self, file: &Path, has_symtab: bool, link: &DebugLink) -> Home {
        if has_symtab {
            return Home::Own;
        }
        let candidates = self.candidates(file, link);
        match candidates.iter().find(|c| is_debug_file_of(c, file, link)) {
            Some(found) => Home::Debug(found.clone()),
            None => Home::Missing(candidates),
        }
    }
}

impl Home {
    /// The warning for a file whose code ran without names, `file` being its path.
    pub fn warning(&self, file: &Path) -> Option<String> {
        let Home::Missing(looked) = self else {
            return None;
        };
        let places = if looked.is_empty() {
            "it has neither a build id nor a debug link".to_owned()
        } else {
            let places: Vec<String> = looked.iter().map(|p| EscapedPath(p).to_string()).collect();
            format!("no debug file at {}", places.join(", "))
        };
        Some(format!(
            "{} has no symbol table and {places}: its functions are named FILE+0xSTART \
             (install its debug package, or give its debug files' directory with --debug-dir)",
            EscapedPath(file)
        ))
    }
}

/// Whether `candidate` is the debug file of `file`: a regular file (never a FIFO or a
/// device), not `file` itself, an ELF file with a symbol table or debug info, with
/// `file`'s build id where both have one, else the CRC-32 of `file`'s debug link.
fn is_debug_file_of(candidate: &Path, file: &Path, link: &DebugLink) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(meta) = std::fs::metadata(candidate) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    if let Ok(own) = std::fs::metadata(file)
        && own.dev() == meta.dev()
        && own.ino() == meta.ino()
    {
        return false;
    }
    let Ok(f) = File::open(candidate) else {
        return false;
    };
    let cache = ReadCache::new(f);
    let Ok(elf) = ElfFile64::<object::Endianness, _>::parse(&cache) else {
        return false;
    };
    if elf.symbol_table().is_none() && !elf.has_debug_symbols() {
        return false;
    }
    let theirs = elf.build_id().ok().flatten();
    match (link.build_id.as_deref(), theirs) {
        (Some(ours), Some(theirs)) => ours == theirs,
        _ => match &link.link {
            Some((_, crc)) => crc32_of(candidate, meta.len()) == Some(*crc),
            None => false,
        },
    }
}

/// The CRC-32 (IEEE, as `.gnu_debuglink` has it) of the file at `path`, of `len` bytes;
/// `None` past [`MAX_CRC_BYTES`] or on a read error.
fn crc32_of(path: &Path, len: u64) -> Option<u32> {
    if len > MAX_CRC_BYTES {
        return None;
    }
    let mut f = File::open(path).ok()?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Some(hasher.finalize()),
            Ok(n) => hasher.update(buf.get(..n)?),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    const ID: [u8; 8] = [0xab, 0xcd, 1, 2, 3, 4, 5, 6];

    fn link(build_id: Option<&[u8]>, name: Option<&str>) -> DebugLink {
        DebugLink {
            build_id: build_id.map(<[u8]>::to_vec),
            link: name.map(|n| (n.to_owned(), 0)),
        }
    }

    #[test]
    fn debug_files_are_looked_for_by_build_id_then_by_link_in_gdbs_order() {
        let dirs = DebugDirs::new(&[PathBuf::from("/srv/dbg"), PathBuf::from("/usr/lib/debug")]);
        assert_eq!(
            dirs.dirs(),
            [
                Path::new("/srv/dbg"),
                Path::new("/usr/lib/debug"),
                Path::new("/lib/debug")
            ]
        );
        let places = dirs.candidates(
            Path::new("/usr/lib/libx.so.1"),
            &link(Some(&ID), Some("libx.so.1.debug")),
        );
        let places: Vec<&str> = places.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            places,
            [
                "/srv/dbg/.build-id/ab/cd010203040506.debug",
                "/usr/lib/debug/.build-id/ab/cd010203040506.debug",
                "/lib/debug/.build-id/ab/cd010203040506.debug",
                "/usr/lib/libx.so.1.debug",
                "/usr/lib/.debug/libx.so.1.debug",
                "/srv/dbg/usr/lib/libx.so.1.debug",
                "/usr/lib/debug/usr/lib/libx.so.1.debug",
                "/lib/debug/usr/lib/libx.so.1.debug",
                "/srv/dbg/libx.so.1.debug",
                "/usr/lib/debug/libx.so.1.debug",
                "/lib/debug/libx.so.1.debug",
            ]
        );
    }

    #[test]
    fn a_link_that_is_a_path_and_a_short_build_id_give_no_place() {
        let dirs = DebugDirs::default();
        let file = Path::new("/usr/lib/libx.so");
        for name in ["../../etc/shadow", "", ".", "..", "a/b"] {
            assert_eq!(
                dirs.candidates(file, &link(None, Some(name))),
                Vec::<PathBuf>::new()
            );
        }
        assert_eq!(
            dirs.candidates(file, &link(Some(&ID[..4]), None)),
            Vec::<PathBuf>::new()
        );
        let home = dirs.home(file, false, &DebugLink::default());
        assert_eq!(home, Home::Missing(Vec::new()));
        let warning = home.warning(file).expect("a warning");
        assert!(
            warning.contains("neither a build id nor a debug link"),
            "{warning}"
        );
        assert_eq!(dirs.home(file, true, &DebugLink::default()), Home::Own);
        assert_eq!(Home::Own.warning(file), None);
    }

    #[test]
    fn a_warning_names_every_place_looked_at_with_control_characters_escaped() {
        let home = Home::Missing(vec![PathBuf::from("/d/\x1b[2J.debug"), PathBuf::from("/e")]);
        let w = home.warning(Path::new("/lib/x\nso")).expect("a warning");
        assert!(!w.chars().any(char::is_control), "{w:?}");
        assert!(w.contains("/d/\\x1b[2J.debug, /e"), "{w}");
    }

    /// Builds a shared library `name` in `dir` from a C function returning `value`.
    fn build_lib(dir: &Path, name: &str, value: u32, flags: &[&str]) -> PathBuf {
        let src = dir.join(format!("{name}.c"));
        std::fs::write(&src, format!("int f(void) {{ return {value}; }}\n")).expect("write");
        let out = dir.join(name);
        let status = Command::new("cc")
            .args(["-g", "-shared", "-fPIC"])
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .status()
            .unwrap_or_else(|e| panic!("this test builds C with `cc`: {e}; install gcc"));
        assert!(status.success(), "cc {flags:?}");
        out
    }

    /// Runs `objcopy` (binutils) in `dir`.
    fn objcopy(dir: &Path, args: &[&str]) {
        let status = Command::new("objcopy")
            .current_dir(dir)
            .args(args)
            .status()
            .unwrap_or_else(|e| panic!("this test runs `objcopy`: {e}; install binutils"));
        assert!(status.success(), "objcopy {args:?}");
    }

    fn link_of(path: &Path) -> DebugLink {
        let f = super::super::fallback::Fallback::read(path);
        let (symtab, link) = f.elf().expect("an ELF file");
        assert!(!symtab, "{} kept its symbol table", path.display());
        link.clone()
    }

    #[test]
    fn a_debug_file_found_by_build_id_must_be_of_that_build() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        build_lib(dir, "liba.so", 1, &["-Wl,--build-id"]);
        build_lib(dir, "libb.so", 2, &["-Wl,--build-id"]);
        objcopy(dir, &["--only-keep-debug", "liba.so", "a.debug"]);
        objcopy(dir, &["--only-keep-debug", "libb.so", "b.debug"]);
        objcopy(dir, &["--strip-all", "liba.so"]);
        let lib = dir.join("liba.so");
        let link = link_of(&lib);
        let dirs = DebugDirs::new(&[dir.join("dbg")]);
        let at = dirs.candidates(&lib, &link)[0].clone();
        std::fs::create_dir_all(at.parent().unwrap()).expect("mkdir");
        // Nothing there yet; then a FIFO (never opened), another build's debug file,
        // and last the right one.
        assert!(matches!(dirs.home(&lib, false, &link), Home::Missing(p) if p[0] == at));
        let fifo = std::ffi::CString::new(at.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(matches!(dirs.home(&lib, false, &link), Home::Missing(_)));
        std::fs::remove_file(&at).expect("rm fifo");
        std::fs::copy(dir.join("b.debug"), &at).expect("cp");
        assert!(matches!(dirs.home(&lib, false, &link), Home::Missing(_)));
        std::fs::copy(dir.join("a.debug"), &at).expect("cp");
        assert_eq!(dirs.home(&lib, false, &link), Home::Debug(at));
    }

    #[test]
    fn a_debug_link_without_build_id_is_checked_by_its_crc() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        build_lib(dir, "libc1.so", 1, &["-Wl,--build-id=none"]);
        objcopy(dir, &["--only-keep-debug", "libc1.so", "libc1.so.debug"]);
        objcopy(
            dir,
            &[
                "--strip-all",
                "--add-gnu-debuglink=libc1.so.debug",
                "libc1.so",
            ],
        );
        let lib = dir.join("libc1.so");
        let link = link_of(&lib);
        assert_eq!(link.build_id, None);
        assert_eq!(
            link.link.as_ref().map(|l| l.0.as_str()),
            Some("libc1.so.debug")
        );
        let dirs = DebugDirs::default();
        let beside = dir.join("libc1.so.debug");
        assert_eq!(dirs.home(&lib, false, &link), Home::Debug(beside.clone()));
        // One byte more and it is not that file any more.
        let mut bytes = std::fs::read(&beside).expect("read");
        bytes.push(0);
        std::fs::write(&beside, bytes).expect("write");
        assert!(matches!(dirs.home(&lib, false, &link), Home::Missing(_)));
    }
}
