//! `--hugepages N`: N more 2 MiB huge pages in the kernel's pool for this process's EAL,
//! given back when it is done. Only root may change the pool; without the option the EAL
//! runs with `--no-huge` and nothing here happens.
//!
//! A process killed before it gives its pages back cannot: each reservation is written
//! down in a ledger file of its own (`/var/run/dpdk/benchtop-hugepages-<pid>`, root's
//! directory) that its process holds locked, and the next DPDK echo process to start or
//! to end takes the pages of ledgers nobody holds out of the pool again
//! ([`give_back_left_behind`]). The other side of an echo whose client was killed does it
//! as it ends.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::WorkloadError;

/// The kernel's pool of default-size (2 MiB) huge pages.
const POOL: &str = "/proc/sys/vm/nr_hugepages";

fn read_pool() -> Result<u64, WorkloadError> {
    let text = std::fs::read_to_string(POOL).map_err(|e| WorkloadError::Dpdk {
        step: "reading the huge page pool",
        reason: format!("{POOL}: {e}"),
    })?;
    text.trim().parse().map_err(|_| WorkloadError::Dpdk {
        step: "reading the huge page pool",
        reason: format!("{POOL} holds {:?}, not a number", text.trim()),
    })
}

fn write_pool(pages: u64) -> Result<(), WorkloadError> {
    std::fs::write(Path::new(POOL), pages.to_string()).map_err(|e| WorkloadError::Dpdk {
        step: "reserving huge pages",
        reason: format!(
            "{POOL}: {e}{}",
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (reserving huge pages needs root; without --hugepages the echo runs with \
                 --no-huge)"
            } else {
                ""
            }
        ),
    })
}

/// Whether this process may add `pages` to the pool: only root may (the pool is a file
/// of root's, mode 0644), and a user without root is told so before anything starts.
pub(crate) fn permitted(pages: u32) -> Result<(), WorkloadError> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 {
        return Ok(());
    }
    Err(WorkloadError::Dpdk {
        step: "reserving huge pages",
        reason: format!(
            "--hugepages {pages} adds pages to the kernel's pool ({POOL}), which only root \
             may change, and this is uid {euid}: run as root, or without --hugepages (the \
             echo then runs with --no-huge, which needs no root)"
        ),
    })
}

/// Where ledgers are kept: the EAL's runtime base, root's.
const LEDGER_DIR: &str = "/var/run/dpdk";

/// The start of a ledger's name; the reserving process's pid follows.
const LEDGER_PREFIX: &str = "benchtop-hugepages-";

/// The ledger of process `pid`.
fn ledger_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{LEDGER_PREFIX}{pid}"))
}

/// Writes down that this process added `pages` to the pool: a new regular file (never
/// through a link or over another's), locked (`flock`) for as long as the returned file
/// stays open, which is this process's life at most.
fn write_ledger(dir: &Path, pages: u64) -> std::io::Result<(PathBuf, File)> {
    std::fs::create_dir_all(dir)?;
    let path = ledger_path(dir, std::process::id());
    // A ledger of an earlier process of this pid, ended without giving its pages back.
    give_back_one(&path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(&path)?;
    lock(&file);
    file.write_all(pages.to_string().as_bytes())?;
    Ok((path, file))
}

/// Takes the exclusive lock of `file` without waiting: false when another open file
/// holds it (a process alive, or still closing its files as it exits).
fn lock(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function borrows for the call.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// The pages a ledger says were added, when it is a small regular file of root's that
/// no living process holds the lock of.
fn read_unheld_ledger(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.uid() != 0 || meta.len() > 20 || !lock(&file) {
        return None;
    }
    // Another sweep that held the lock first may have given it back and removed it
    // already: a ledger no longer linked is not counted twice.
    if file.metadata().ok()?.nlink() == 0 {
        return None;
    }
    let mut text = String::new();
    (&file).take(20).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Takes the pages of the ledger at `path` out of the pool and removes it, when its
/// process is gone (nobody holds its lock): whether it did.
fn give_back_one(path: &Path) -> bool {
    let Some(pages) = read_unheld_ledger(path) else {
        return false;
    };
    if let Ok(now) = read_pool() {
        let _ = write_pool(now.saturating_sub(pages));
    }
    let _ = std::fs::remove_file(path);
    true
}

/// `PF_EXITING` in the flags of stat(5): the task is in exit(2)'s teardown.
const PF_EXITING: u64 = 0x4;

/// Whether process `pid` is ending: gone, a zombie, or inside its exit (the kernel
/// tearing down its memory and files, `PF_EXITING`).
fn ending(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    // After the command's closing parenthesis: the state (field 3), then ppid, pgrp,
    // session, tty_nr, tpgid and the flags (field 9).
    let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 2..)) else {
        return true;
    };
    let mut fields = rest.split_whitespace();
    let state = fields.next();
    let flags: u64 = fields.nth(5).and_then(|f| f.parse().ok()).unwrap_or(0);
    matches!(state, Some("Z" | "X" | "x")) || flags & PF_EXITING != 0
}

/// How long a sweep waits for an ending process to let go of its ledger.
const ENDING_WAIT: Duration = Duration::from_secs(2);

/// Gives back the pages that ended processes left in the pool: the ledgers whose lock
/// nobody holds. Root only (nobody else can have added any). A killed process lets go
/// of its ledger's lock only as the kernel closes its files, in descriptor order, and
/// may close its memif socket first: a server ending because its client was killed can
/// find the client's ledger still held by a process that is ending. Such a ledger is
/// tried again until its process has let go (at most [`ENDING_WAIT`]).
pub(crate) fn give_back_left_behind() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(LEDGER_DIR) else {
        return;
    };
    let mut held = Vec::new();
    for entry in entries.flatten().take(4096) {
        let pid = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(LEDGER_PREFIX))
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = pid
            && !give_back_one(&entry.path())
            && pid != std::process::id()
            && entry.path().exists()
        {
            held.push((pid, entry.path()));
        }
    }
    let deadline = Instant::now() + ENDING_WAIT;
    while !held.is_empty() {
        held.retain(|(pid, path)| ending(*pid) && !give_back_one(path) && path.exists());
        if held.is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Huge pages added to the pool: taken out again when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    pages: u64,
    /// Its ledger, locked while open, removed when the pages are given back.
    ledger: Option<(PathBuf, File)>,
}

impl Reservation {
    /// Adds `pages` to the pool, or says why not (not root; the kernel found fewer).
    pub(crate) fn take(pages: u32) -> Result<Reservation, WorkloadError> {
        permitted(pages)?;
        let pages = u64::from(pages);
        let before = read_pool()?;
        write_pool(before + pages)?;
        let got = read_pool()?.saturating_sub(before);
        // Written down first thing, so that a kill from here on leaves a ledger.
        let ledger = write_ledger(Path::new(LEDGER_DIR), got).ok();
        let taken = Reservation { pages: got, ledger };
        if got < pages {
            return Err(WorkloadError::Dpdk {
                step: "reserving huge pages",
                reason: format!(
                    "the kernel found {got} of the {pages} huge pages asked for (memory too \
                     fragmented, or too little of it)"
                ),
            });
        }
        Ok(taken)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // Relative to the pool as it is now: the other side of the echo may hold a
        // reservation of its own.
        if let Ok(now) = read_pool() {
            let _ = write_pool(now.saturating_sub(self.pages));
        }
        if let Some((ledger, _locked)) = &self.ledger {
            let _ = std::fs::remove_file(ledger);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledgers_are_read_only_as_small_files_and_name_their_pid() {
        let dir = tempfile::tempdir().unwrap();
        let path = ledger_path(dir.path(), 42);
        assert!(path.ends_with("benchtop-hugepages-42"));
        std::fs::write(&path, b"8").unwrap();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert_eq!(read_unheld_ledger(&path), root.then_some(8));
        // Held by a living process (another open file): not read.
        let held = File::open(&path).unwrap();
        assert!(lock(&held));
        assert_eq!(read_unheld_ledger(&path), None);
        drop(held);
        std::fs::write(&path, b"not a number").unwrap();
        assert_eq!(read_unheld_ledger(&path), None);
        std::fs::write(&path, vec![b'1'; 64]).unwrap();
        assert_eq!(
            read_unheld_ledger(&path),
            None,
            "a file too big to be a ledger"
        );
        let link = ledger_path(dir.path(), 43);
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(read_unheld_ledger(&link), None, "never through a link");
    }
}
