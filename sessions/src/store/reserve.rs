//! The disk a recorder holds for its last write, and the copies crashed recorders left.
//!
//! A recorder keeps [`RESERVE_FILE`] in its session directory while it records and holds
//! an exclusive `flock` on it; the lock goes with the recorder's process, however that
//! ends. A reserve nobody holds, in a session directory, is therefore a crashed
//! recorder's: [`remove_left_behind`] (run by the next recorder under the same root, and
//! by `benchtop reap`) deletes those. Read-only commands (`show`, `open`, `export`,
//! `compare`) never delete anything: they name a leftover reserve in a warning.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};

use super::{RESERVE_BYTES, RESERVE_FILE, SESSION_FILE};

/// Entries of a root read at most: a root of more is swept in part (the first ones).
const MAX_ENTRIES: usize = 65_536;

/// A reserve younger than this is left alone even when unlocked: its recorder may be
/// between creating it and locking it.
const YOUNGEST: Duration = Duration::from_secs(10);

/// Takes the recorder's lock on its reserve, held until `file` is closed. Best effort:
/// without it the reserve is still freed by the recorder at the end, and only looks
/// left behind to a sweep while the run goes on, which [`YOUNGEST`] and the run's
/// writes then cannot tell apart; a file system without `flock` is rare.
pub(super) fn hold(file: &File) -> bool {
    rustix::fs::flock(file, FlockOperation::NonBlockingLockExclusive).is_ok()
}

/// Deletes the [`RESERVE_FILE`]s that recorders which ended without freeing them left in
/// the session directories directly under `root`: a regular file of at most twice
/// [`RESERVE_BYTES`], owned by this user, in a directory of this user that holds a
/// session.json, ten seconds old or more, that nobody holds the lock of. Returns the
/// paths removed, each with the bytes it held. Links, FIFOs, other users' files and
/// anything unreadable are passed over silently; nothing is followed or opened for
/// writing.
pub fn remove_left_behind(root: &Path) -> Vec<(PathBuf, u64)> {
    let Ok(root_fd) = open_dir(None, root.as_os_str()) else {
        return Vec::new();
    };
    let Ok(entries) = rustix::fs::Dir::read_from(&root_fd) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.take(MAX_ENTRIES).flatten() {
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name);
        if let Some(bytes) = remove_one(&root_fd, name) {
            removed.push((root.join(name).join(RESERVE_FILE), bytes));
        }
    }
    removed
}

/// The bytes the reserve of session directory `name` under `root` held, when it was left
/// behind and is now removed.
fn remove_one(root: &OwnedFd, name: &OsStr) -> Option<u64> {
    let dir = open_dir(Some(root), name).ok()?;
    let is_session = rustix::fs::statat(&dir, SESSION_FILE, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile);
    if !is_session {
        return None;
    }
    // Non-blocking: a FIFO planted under the name never stalls the sweep.
    let fd = rustix::fs::openat(
        &dir,
        RESERVE_FILE,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    let me = rustix::process::geteuid().as_raw();
    let old_enough = u64::try_from(st.st_mtime).is_ok_and(|secs| {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .is_ok_and(|now| now.saturating_sub(Duration::from_secs(secs)) >= YOUNGEST)
    });
    let plausible = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
        && st.st_uid == me
        && u64::try_from(st.st_size).is_ok_and(|n| n <= 2 * RESERVE_BYTES as u64)
        && old_enough;
    // Held: its recorder is alive.
    let file = File::from(fd);
    if !plausible || !hold(&file) {
        return None;
    }
    rustix::fs::unlinkat(&dir, RESERVE_FILE, AtFlags::empty()).ok()?;
    u64::try_from(st.st_blocks.saturating_mul(512)).ok()
}

/// Opens directory `name` (under `at`, or as a path) without following a link, when it
/// belongs to this user.
fn open_dir(at: Option<&OwnedFd>, name: &OsStr) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match at {
        Some(at) => rustix::fs::openat(at, name, flags, Mode::empty())?,
        None => rustix::fs::open(name, flags, Mode::empty())?,
    };
    let st = rustix::fs::fstat(&fd)?;
    if st.st_uid != rustix::process::geteuid().as_raw() {
        return Err(rustix::io::Errno::PERM);
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session directory under `root` with a session.json and a reserve made
    /// `age_s` seconds ago.
    fn session(root: &Path, name: &str, age_s: u64) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(SESSION_FILE), b"{}").unwrap();
        let reserve = dir.join(RESERVE_FILE);
        std::fs::write(&reserve, vec![0u8; 1024]).unwrap();
        let then = SystemTime::now() - Duration::from_secs(age_s);
        File::options()
            .write(true)
            .open(&reserve)
            .unwrap()
            .set_modified(then)
            .unwrap();
        reserve
    }

    #[test]
    fn only_reserves_nobody_holds_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let crashed = session(root.path(), "crashed", 60);
        let recording = session(root.path(), "recording", 60);
        let fresh = session(root.path(), "fresh", 0);
        // A recorder still running holds its reserve's lock (another open file
        // description, as another process would have).
        let held = File::open(&recording).unwrap();
        assert!(hold(&held));
        let removed: Vec<PathBuf> = remove_left_behind(root.path())
            .into_iter()
            .map(|(path, _)| path)
            .collect();
        assert_eq!(removed, std::slice::from_ref(&crashed));
        assert!(!crashed.exists());
        assert!(recording.exists() && fresh.exists());
        drop(held);
        let removed = remove_left_behind(root.path());
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].0, recording);
        // The disk it held, as allocated (a 1 KiB file takes a block at least).
        assert!(removed[0].1 >= 1024, "{removed:?}");
    }

    #[test]
    fn links_fifos_and_directories_without_a_session_are_left_alone() {
        let root = tempfile::tempdir().unwrap();
        // A reserve that is a link to a file elsewhere.
        let victim = root.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let linked = root.path().join("linked");
        std::fs::create_dir(&linked).unwrap();
        std::fs::write(linked.join(SESSION_FILE), b"{}").unwrap();
        std::os::unix::fs::symlink(&victim, linked.join(RESERVE_FILE)).unwrap();
        // A FIFO under the reserve's name: never blocks, never removed.
        let fifo = root.path().join("fifo");
        std::fs::create_dir(&fifo).unwrap();
        std::fs::write(fifo.join(SESSION_FILE), b"{}").unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            fifo.join(RESERVE_FILE),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        // A reserve in a directory that is not a session.
        let stray = session(root.path(), "stray", 60);
        std::fs::remove_file(root.path().join("stray").join(SESSION_FILE)).unwrap();
        // A directory link to a crashed session is not followed.
        std::fs::create_dir(root.path().join("elsewhere-parent")).unwrap();
        let crashed = session(&root.path().join("elsewhere-parent"), "x", 60);
        std::os::unix::fs::symlink(crashed.parent().unwrap(), root.path().join("via-link"))
            .unwrap();

        assert!(remove_left_behind(root.path()).is_empty());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(linked.join(RESERVE_FILE).symlink_metadata().is_ok());
        assert!(fifo.join(RESERVE_FILE).symlink_metadata().is_ok());
        assert!(stray.exists() && crashed.exists());
        // A root that is not there is nothing to sweep.
        assert!(remove_left_behind(&root.path().join("missing")).is_empty());
    }
}
