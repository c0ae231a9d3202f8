//! The kernel's symbol table for kernel frames, kept off a recording's start and end.
//!
//! Reading `/proc/kallsyms` costs 40–90 ms of kernel time here (the kernel expands every
//! compressed name as the file is read), more than the rest of a recording's start and end
//! together. So:
//!
//! - the table is prepared on a thread of its own, started with the sampler, and the
//!   symbolizer waits for it only when a kernel address first needs a name (in a batch
//!   during the run, for any run longer than a batch);
//! - a copy is kept per boot in the user's cache directory (`$XDG_CACHE_HOME/benchtop`, or
//!   `~/.cache/benchtop`), named by the boot id (`/proc/sys/kernel/random/boot_id`) and a
//!   digest of the loaded modules (`/proc/modules`): a later recording reads the copy, a
//!   plain file, instead of making the kernel expand the table again.
//!
//! The copy is read as hostile input: opened without following links, used only when it
//! is a regular file of this user that no one else may write, under the size cap, whose
//! first line is the live table's first line (which the kernel produces without expanding
//! the rest) and which ends with a complete line. Anything else is replaced by a fresh
//! copy; when no copy can be written, `/proc/kallsyms` itself is read, as before. The
//! symbolizer is handed the validated descriptor (`/proc/self/fd/N`), never the path.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// The live table.
const KALLSYMS: &str = "/proc/kallsyms";
/// Largest table copied or trusted (a kernel with every module loaded lists some 10 MB).
const MAX_TABLE_BYTES: u64 = 64 << 20;
/// Bytes of the live table read to compare its first line.
const HEAD_BYTES: usize = 4096;
/// Copies of other boots (or module sets) left in the cache directory: the newest few.
const KEPT_COPIES: usize = 2;

/// Where kernel symbols come from.
#[derive(Debug)]
pub(crate) enum KernelTable {
    /// A validated copy, held open: its `/proc/self/fd/N` path is given to the symbolizer.
    Copy(File),
    /// `/proc/kallsyms` itself.
    Live,
}

impl KernelTable {
    /// The path the symbolizer reads.
    pub fn path(&self) -> PathBuf {
        match self {
            KernelTable::Copy(f) => PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())),
            KernelTable::Live => PathBuf::from(KALLSYMS),
        }
    }
}

/// Starts preparing the table on a thread of its own; `None` when no thread can be
/// started (the table is then prepared when first needed).
pub(crate) fn spawn() -> Option<JoinHandle<KernelTable>> {
    std::thread::Builder::new()
        .name("kallsyms".into())
        .spawn(|| prepare(cache_dir().as_deref()))
        .ok()
}

/// The table to use: a valid copy in `dir`, else a fresh copy written there, else the
/// live table.
pub(crate) fn prepare(dir: Option<&Path>) -> KernelTable {
    let Some(dir) = dir else {
        return KernelTable::Live;
    };
    let Some(name) = copy_name() else {
        return KernelTable::Live;
    };
    let Ok(head) = live_head() else {
        return KernelTable::Live;
    };
    let path = dir.join(&name);
    if let Some(f) = open_valid(&path, &head) {
        return KernelTable::Copy(f);
    }
    match write_copy(dir, &name) {
        Some(()) => open_valid(&path, &head).map_or(KernelTable::Live, KernelTable::Copy),
        None => KernelTable::Live,
    }
}

/// `$XDG_CACHE_HOME/benchtop`, else `$HOME/.cache/benchtop` (absolute paths only).
fn cache_dir() -> Option<PathBuf> {
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    std::env::var_os("XDG_CACHE_HOME")
        .and_then(abs)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(abs)
                .map(|h| h.join(".cache"))
        })
        .map(|c| c.join("benchtop"))
}

/// `kallsyms-<boot id>-<digest of the modules>`: a new boot or another set of modules
/// (each one's name, size and address) names another copy.
fn copy_name() -> Option<String> {
    let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let boot = boot.trim();
    if boot.is_empty()
        || boot.len() > 64
        || !boot.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
    {
        return None;
    }
    let modules = fs::read_to_string("/proc/modules").unwrap_or_default();
    Some(format!("kallsyms-{boot}-{:016x}", modules_digest(&modules)))
}

/// FNV-1a over the name, size and load address of each module: not their use counts,
/// which change while the set of symbols does not.
fn modules_digest(modules: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for line in modules.lines() {
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        for f in [fields.first(), fields.get(1), fields.get(5)]
            .into_iter()
            .flatten()
        {
            for b in f.bytes().chain(std::iter::once(b' ')) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        h ^= u64::from(b'\n');
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The live table's first line (with its newline): the kernel produces it without
/// expanding the rest.
fn live_head() -> io::Result<Vec<u8>> {
    let mut f = File::open(KALLSYMS)?;
    let mut buf = vec![0u8; HEAD_BYTES];
    let mut len = 0;
    while len < buf.len() {
        let n = f.read(&mut buf[len..])?;
        if n == 0 {
            break;
        }
        len += n;
        if buf[..len].contains(&b'\n') {
            break;
        }
    }
    let end = buf[..len]
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no line in kallsyms"))?;
    buf.truncate(end + 1);
    Ok(buf)
}

/// The copy at `path`, when it is one we can trust (see the module docs).
fn open_valid(path: &Path, head: &[u8]) -> Option<File> {
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let trusted = meta.file_type().is_file()
        && meta.uid() == me
        && meta.mode() & 0o022 == 0
        && meta.len() > head.len() as u64
        && meta.len() <= MAX_TABLE_BYTES;
    if !trusted {
        return None;
    }
    let mut first = vec![0u8; head.len()];
    f.read_exact(&mut first).ok()?;
    if first != head {
        return None;
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::End(-1)).ok()?;
    f.read_exact(&mut last).ok()?;
    if last[0] != b'\n' {
        return None;
    }
    f.seek(SeekFrom::Start(0)).ok()?;
    Some(f)
}

/// Copies the live table into `dir/name` (through a temporary file created with
/// `O_EXCL`, synced, renamed), and removes all but the newest other copies. `None` when
/// the table is unreadable, too large, hides its addresses (`kptr_restrict`: a copy would
/// name nothing), or the copy cannot be written.
fn write_copy(dir: &Path, name: &str) -> Option<()> {
    let mut table = Vec::new();
    File::open(KALLSYMS)
        .ok()?
        .take(MAX_TABLE_BYTES + 1)
        .read_to_end(&mut table)
        .ok()?;
    if table.len() as u64 > MAX_TABLE_BYTES || table.last() != Some(&b'\n') {
        return None;
    }
    let hidden = table
        .split(|&b| b == b'\n')
        .take(16)
        .filter(|l| !l.is_empty())
        .all(|l| l.iter().take_while(|&&b| b != b' ').all(|&b| b == b'0'));
    if hidden {
        return None;
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .ok()?;
    let dir_meta = fs::symlink_metadata(dir).ok()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !dir_meta.is_dir() || dir_meta.uid() != me || dir_meta.mode() & 0o022 != 0 {
        return None;
    }
    let tmp = dir.join(format!("{name}.tmp.{}", std::process::id()));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(&table)?;
        f.sync_data()?;
        fs::rename(&tmp, dir.join(name))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
        return None;
    }
    remove_old_copies(dir, name);
    Some(())
}

/// Removes the copies of other boots and module sets but the newest [`KEPT_COPIES`].
fn remove_old_copies(dir: &Path, keep: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut old: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("kallsyms-") && n != keep && !n.contains(".tmp.")
        })
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            m.file_type()
                .is_file()
                .then(|| Some((m.modified().ok()?, e.path())))
                .flatten()
        })
        .collect();
    old.sort_by_key(|o| std::cmp::Reverse(o.0));
    for (_, path) in old.into_iter().skip(KEPT_COPIES) {
        let _ = fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_digest_ignores_use_counts_but_not_the_set_of_modules() {
        let a = "nf_nat 61440 2 xt_nat,xt_MASQUERADE, Live 0xffffffffc0a00000\n";
        let b = "nf_nat 61440 3 xt_nat,xt_MASQUERADE,nft, Live 0xffffffffc0a00000\n";
        let c = "nf_nat 61440 2 xt_nat,xt_MASQUERADE, Live 0xffffffffc0b00000\n";
        assert_eq!(modules_digest(a), modules_digest(b));
        assert_ne!(modules_digest(a), modules_digest(c));
        assert_ne!(modules_digest(a), modules_digest(""));
    }

    #[test]
    fn a_copy_that_is_a_link_foreign_truncated_or_of_another_table_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let head = b"ffffffff81000000 T _stext\n".to_vec();
        let good = dir.path().join("good");
        fs::write(&good, [&head[..], b"ffffffff81000010 T next\n"].concat()).unwrap();
        fs::set_permissions(&good, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        assert!(open_valid(&good, &head).is_some());
        // Another kernel's table (another first line).
        assert!(open_valid(&good, b"ffffffff82000000 T _stext\n").is_none());
        // A link to it is not followed.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert!(open_valid(&link, &head).is_none());
        // Cut off in the middle of a line.
        let cut = dir.path().join("cut");
        fs::write(&cut, [&head[..], b"ffffffff81000010 T ne"].concat()).unwrap();
        assert!(open_valid(&cut, &head).is_none());
        // Writable by others.
        let open = dir.path().join("open");
        fs::write(&open, [&head[..], b"x\n"].concat()).unwrap();
        fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
        assert!(open_valid(&open, &head).is_none());
        // Not a regular file; missing.
        assert!(open_valid(dir.path(), &head).is_none());
        assert!(open_valid(&dir.path().join("none"), &head).is_none());
    }

    #[test]
    fn the_table_is_copied_once_then_read_from_the_copy_and_names_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("benchtop");
        let first = prepare(Some(&cache));
        let restricted = live_head().map_or(true, |h| h.starts_with(b"0000000000000000"));
        if restricted {
            // Addresses hidden from this user: nothing worth copying.
            assert!(matches!(first, KernelTable::Live));
            return;
        }
        let KernelTable::Copy(mut f) = first else {
            panic!("no copy written under {}", cache.display());
        };
        let mut copied = String::new();
        f.read_to_string(&mut copied).unwrap();
        let live = fs::read_to_string(KALLSYMS).unwrap();
        // The live table may gain BPF programs between the two reads: compare the start.
        let lines = |s: &str| s.lines().take(1000).map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(lines(&copied), lines(&live));
        let mode = fs::metadata(&cache).unwrap().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        // The second time, the same file is used (no new temporary file, same inode).
        let ino = fs::metadata(cache.join(copy_name().unwrap()))
            .unwrap()
            .ino();
        let KernelTable::Copy(again) = prepare(Some(&cache)) else {
            panic!("the copy was not used");
        };
        assert_eq!(again.metadata().unwrap().ino(), ino);
        assert!(again.metadata().unwrap().len() > 0);
        let names: Vec<_> = fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // A corrupted copy is replaced.
        fs::write(cache.join(copy_name().unwrap()), b"garbage\n").unwrap();
        let KernelTable::Copy(mut fresh) = prepare(Some(&cache)) else {
            panic!("the corrupted copy was not replaced");
        };
        let mut text = String::new();
        fresh.read_to_string(&mut text).unwrap();
        assert_eq!(lines(&text), lines(&live));
    }
}
