//! The memif socket, before either side's EAL starts: a clear error for a socket in use,
//! a directory without permission or a path too long, rather than a failed or hanging
//! EAL; and the run's directory that holds the socket under `--role both`.

use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::WorkloadError;

/// The longest path of a Unix socket.
pub(crate) const MAX_PATH: usize = 107;

/// What is at a socket's path.
#[derive(Debug)]
enum Found {
    Nothing,
    /// A server listens (memif's sockets are SOCK_SEQPACKET: a stream connect is refused
    /// with EPROTOTYPE by a live one).
    Listening,
    /// A socket no one listens on: left by a server that crashed.
    Stale,
    NotASocket,
    Denied(io::Error),
}

fn probe(path: &Path) -> Found {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Found::Nothing,
        Err(e) => return Found::Denied(e),
        Ok(meta) if !meta.file_type().is_socket() => return Found::NotASocket,
        Ok(_) => {}
    }
    match UnixStream::connect(path) {
        Ok(_) => Found::Listening,
        Err(e) => match e.raw_os_error() {
            Some(libc::EPROTOTYPE) => Found::Listening,
            Some(libc::ECONNREFUSED) => Found::Stale,
            Some(libc::ENOENT) => Found::Nothing,
            _ => Found::Denied(e),
        },
    }
}

fn failed(reason: String) -> WorkloadError {
    WorkloadError::Dpdk {
        step: "preparing the memif socket",
        reason,
    }
}

/// Whether this user may create the socket at `path`: its directory must be writable
/// and searchable (checked before the run starts, and again by [`claim`]).
pub(crate) fn may_create(path: &Path) -> Result<(), WorkloadError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let c_dir = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| failed(format!("a NUL byte in {dir:?}")))?;
    // SAFETY: a NUL-terminated path; access only reads it.
    if unsafe { libc::access(c_dir.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        let e = io::Error::last_os_error();
        return Err(failed(format!(
            "no permission to create the socket in {dir:?}: {e} (give --memif a path in a \
             directory this user may write)"
        )));
    }
    Ok(())
}

/// Whether a server may listen at `path`: refused when another server listens there,
/// when it is not a socket, or when its directory cannot be written (checked before the
/// run starts, and again by [`claim`]). A stale socket is no obstacle.
pub(crate) fn may_claim(path: &Path) -> Result<(), WorkloadError> {
    may_create(path)?;
    match probe(path) {
        Found::Nothing | Found::Stale => Ok(()),
        Found::Listening => Err(failed(format!(
            "{path:?} is in use: another memif server listens there (end it, or give \
             another --memif PATH)"
        ))),
        Found::NotASocket => Err(failed(format!(
            "{path:?} exists and is not a socket: give --memif a path that is free"
        ))),
        Found::Denied(e) => Err(failed(format!("{path:?}: {e}"))),
    }
}

/// Makes `path` the server's: refused as [`may_claim`] refuses; a stale socket left by a
/// crashed server is removed.
pub(crate) fn claim(path: &Path) -> Result<(), WorkloadError> {
    may_claim(path)?;
    if matches!(probe(path), Found::Stale) {
        std::fs::remove_file(path)
            .map_err(|e| failed(format!("removing the stale socket {path:?}: {e}")))?;
    }
    Ok(())
}

/// Waits until a server listens at `path`, checking `abort` every few milliseconds (an
/// error from it ends the wait, `true` ends it quietly); gives up after `patience`.
pub(crate) fn await_server(
    path: &Path,
    patience: Duration,
    mut abort: impl FnMut() -> Result<bool, WorkloadError>,
) -> Result<bool, WorkloadError> {
    let until = Instant::now() + patience;
    loop {
        match probe(path) {
            Found::Listening => return Ok(true),
            Found::NotASocket => {
                return Err(failed(format!("{path:?} is not a socket")));
            }
            Found::Denied(e) => return Err(failed(format!("{path:?}: {e}"))),
            Found::Nothing | Found::Stale => {}
        }
        if abort()? {
            return Ok(false);
        }
        if Instant::now() >= until {
            return Err(failed(format!(
                "no memif server listens at {path:?} after {patience:?}: start one there \
                 (udp-echo --role server --backend dpdk --memif PATH)"
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A directory of the run's own under the temporary directory (mode 0700), removed with
/// what it holds when dropped.
#[derive(Debug)]
pub(crate) struct RunDir {
    path: PathBuf,
}

/// The start of a run directory's name; the creating process's pid and a stamp follow.
const RUN_DIR_PREFIX: &str = "benchtop-udp-echo-";

/// Removes the run directories under `base` that ended processes left behind (a worker
/// killed before its clean-up leaves one, with its memif socket): this user's own
/// `benchtop-udp-echo-<pid>-<stamp>` directories whose process is gone.
fn sweep_run_dirs(base: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let gone = name
            .to_str()
            .and_then(|n| n.strip_prefix(RUN_DIR_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
            .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
        // Not through a link, and only this user's.
        let ours = std::fs::symlink_metadata(entry.path())
            .is_ok_and(|meta| meta.is_dir() && meta.uid() == me);
        if gone && ours {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl RunDir {
    /// Creates the run's directory, after removing those ended runs left behind.
    pub(crate) fn create() -> Result<RunDir, WorkloadError> {
        let base = std::env::temp_dir();
        sweep_run_dirs(&base);
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = base.join(format!(
            "{RUN_DIR_PREFIX}{}-{stamp:08x}",
            std::process::id()
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| failed(format!("creating the run's directory {path:?}: {e}")))?;
        Ok(RunDir { path })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_seqpacket_listener_is_in_use_and_a_dead_one_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memif.sock");
        assert!(matches!(probe(&path), Found::Nothing));
        claim(&path).unwrap();
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY (test): a SOCK_SEQPACKET listener as memif makes, closed at the end.
        let fd = unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0);
            let mut addr: libc::sockaddr_un = std::mem::zeroed();
            addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (i, b) in c_path.as_bytes().iter().enumerate() {
                addr.sun_path[i] = *b as libc::c_char;
            }
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            assert_eq!(libc::bind(fd, (&raw const addr).cast(), len), 0);
            assert_eq!(libc::listen(fd, 1), 0);
            fd
        };
        let err = claim(&path).unwrap_err().to_string();
        assert!(err.contains("in use"), "{err}");
        assert!(await_server(&path, Duration::from_millis(10), || Ok(false)).unwrap());
        // SAFETY (test): our own descriptor.
        unsafe { libc::close(fd) };
        assert!(matches!(probe(&path), Found::Stale));
        claim(&path).unwrap();
        assert!(matches!(probe(&path), Found::Nothing));
        let err = await_server(&path, Duration::from_millis(10), || Ok(false)).unwrap_err();
        assert!(err.to_string().contains("no memif server"), "{err}");
    }

    #[test]
    fn run_directories_of_ended_processes_are_swept_and_others_kept() {
        let base = tempfile::tempdir().unwrap();
        // A pid that was a process and is one no more.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let ended = child.id();
        child.wait().unwrap();
        let dir = |name: String| {
            let path = base.path().join(name);
            std::fs::create_dir(&path).unwrap();
            std::fs::write(path.join("memif.sock"), b"").unwrap();
            path
        };
        let left = dir(format!("{RUN_DIR_PREFIX}{ended}-0000abcd"));
        let live = dir(format!("{RUN_DIR_PREFIX}{}-0000abcd", std::process::id()));
        let other = dir(format!("benchtop-other-{ended}-0000abcd"));
        let odd = dir(format!("{RUN_DIR_PREFIX}x-{ended}"));
        sweep_run_dirs(base.path());
        assert!(!left.exists());
        for kept in [live, other, odd] {
            assert!(kept.exists(), "{kept:?}");
        }
    }

    #[test]
    fn a_file_that_is_not_a_socket_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain");
        std::fs::write(&path, b"x").unwrap();
        let err = claim(&path).unwrap_err().to_string();
        assert!(err.contains("not a socket"), "{err}");
    }
}
