//! Directories written to as their descriptor, never by path.
//!
//! A session directory, or an export's output directory, may have been prepared by someone
//! else: a `latency.hlog` that is a symbolic link to a victim file, a planted
//! `session.json.tmp`. [`DirHandle`] holds the directory open and creates every file in it
//! with `O_CREAT | O_EXCL | O_NOFOLLOW` relative to that descriptor (`openat`), temporary
//! files included, and renames them into place with `renameat` under the same descriptor:
//! nothing is ever written through a path benchtop did not create, and a path swapped for a
//! link after the directory was opened changes nothing.
//!
//! ```
//! use benchtop_sessions::dir::DirHandle;
//!
//! let root = tempfile::tempdir()?;
//! let out = DirHandle::create_empty(&root.path().join("out"))?;
//! out.write_atomically("summary.md", b"# ring\n")?;
//! assert_eq!(std::fs::read(root.path().join("out/summary.md"))?, b"# ring\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};

use crate::SessionError;

/// How many temporary names [`DirHandle::write_atomically`] tries for one file: `<name>.tmp`,
/// then `<name>.tmp.2` … when a file of that name is already there (never reused).
const TMP_ATTEMPTS: u32 = 100;

/// A directory held open by its descriptor; files are created relative to it.
#[derive(Debug)]
pub struct DirHandle {
    fd: OwnedFd,
    path: PathBuf,
}

impl DirHandle {
    /// A directory for a new session: `path` made with one `mkdir` (its parents are created
    /// when missing), or, when it exists already, an empty directory owned by the current
    /// user that is not a symbolic link. Anything else is refused: a directory holding an
    /// earlier session is [`SessionError::AlreadyExists`], any other non-empty one
    /// [`SessionError::NotEmpty`], a link, a file or another user's directory
    /// [`SessionError::UnsafeDirectory`].
    pub fn create_empty(path: &Path) -> Result<Self, SessionError> {
        create_parents(path)?;
        match rustix::fs::mkdir(path, Mode::from_raw_mode(0o755)) {
            Ok(()) => Self::open_ours(path),
            Err(e) if e == rustix::io::Errno::EXIST => {
                let dir = Self::open_ours(path)?;
                dir.check_empty()?;
                Ok(dir)
            }
            Err(e) => Err(SessionError::io(path, e.into())),
        }
    }

    /// A directory made with one `mkdir` of `path`, whose parent exists: a `path` that
    /// exists already, whatever it is, is [`SessionError::Io`] of kind
    /// [`io::ErrorKind::AlreadyExists`].
    pub fn create_new(path: &Path) -> Result<Self, SessionError> {
        rustix::fs::mkdir(path, Mode::from_raw_mode(0o755))
            .map_err(|e| SessionError::io(path, e.into()))?;
        Self::open_ours(path)
    }

    /// An output directory: `path` created with one `mkdir` when missing (parents too), else
    /// an existing directory owned by the current user that is not a symbolic link, whatever
    /// it holds. Files written into it with [`DirHandle::write_atomically`] replace files of
    /// the same name (a link is replaced, never followed).
    pub fn create_or_open(path: &Path) -> Result<Self, SessionError> {
        create_parents(path)?;
        match rustix::fs::mkdir(path, Mode::from_raw_mode(0o755)) {
            Ok(()) => Self::open_ours(path),
            Err(e) if e == rustix::io::Errno::EXIST => Self::open_ours(path),
            Err(e) => Err(SessionError::io(path, e.into())),
        }
    }

    /// Opens `path` without following a final symbolic link and checks that it is a
    /// directory owned by the current user.
    fn open_ours(path: &Path) -> Result<Self, SessionError> {
        let unsafe_dir = |reason: &str| SessionError::UnsafeDirectory {
            path: path.into(),
            reason: reason.into(),
        };
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::LOOP => unsafe_dir("it is a symbolic link"),
            rustix::io::Errno::NOTDIR => match rustix::fs::lstat(path) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                    unsafe_dir("it is a symbolic link")
                }
                _ => unsafe_dir("it is not a directory"),
            },
            e => SessionError::io(path, e.into()),
        })?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| SessionError::io(path, e.into()))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
            return Err(unsafe_dir("it is not a directory"));
        }
        let me = rustix::process::geteuid().as_raw();
        if stat.st_uid != me {
            return Err(unsafe_dir(&format!(
                "it belongs to user {}, not to this user ({me})",
                stat.st_uid
            )));
        }
        Ok(DirHandle {
            fd,
            path: path.into(),
        })
    }

    /// Refuses a directory that holds anything.
    fn check_empty(&self) -> Result<(), SessionError> {
        let entries =
            rustix::fs::Dir::read_from(&self.fd).map_err(|e| self.io(Path::new("."), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| self.io(Path::new("."), e))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if name == crate::store::SESSION_FILE.as_bytes() {
                return Err(SessionError::AlreadyExists {
                    path: self.path.clone(),
                });
            }
            return Err(SessionError::NotEmpty {
                path: self.path.clone(),
                entry: String::from_utf8_lossy(name).into_owned(),
            });
        }
        Ok(())
    }

    /// The directory's path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in the directory, for messages.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    fn io(&self, name: &Path, e: rustix::io::Errno) -> SessionError {
        SessionError::io(self.path.join(name), e.into())
    }

    /// Creates `name`, which must not exist (`O_CREAT | O_EXCL | O_NOFOLLOW`), for writing,
    /// or for appending with `append`. A file or link already there is an error naming it.
    pub fn create_file(&self, name: &str, append: bool) -> Result<File, SessionError> {
        let mut flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if append {
            flags |= OFlags::APPEND;
        }
        rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(0o644))
            .map(File::from)
            .map_err(|e| self.io(Path::new(name), e))
    }

    /// Replaces `name` with `bytes` atomically (see [`DirHandle::write_atomically_with`]).
    pub fn write_atomically(&self, name: &str, bytes: &[u8]) -> Result<(), SessionError> {
        self.write_atomically_with(name, |w| w.write_all(bytes))
    }

    /// Replaces `name` with what `write` writes: into a temporary file created with
    /// `O_EXCL` beside it (`<name>.tmp`, or `<name>.tmp.2` … when that name is taken: a file
    /// found there is never opened), synced, renamed over `name` under the directory's
    /// descriptor, then the directory synced. A reader sees the old file or the new one.
    /// On any error the temporary file is removed, `name` is left as it was, and the error
    /// names the file that failed.
    pub fn write_atomically_with(
        &self,
        name: &str,
        write: impl FnOnce(&mut BufWriter<&File>) -> io::Result<()>,
    ) -> Result<(), SessionError> {
        self.write_via_tmp(name, false, true, write)
    }

    /// [`DirHandle::write_atomically_with`] without syncing the directory after the
    /// rename: for a file whose new name becomes durable with the next file written with
    /// a directory sync (a session.json that describes it). The file's data is synced
    /// before the rename as always, so a crash leaves the old file or the whole new one.
    pub fn write_atomically_then_with(
        &self,
        name: &str,
        write: impl FnOnce(&mut BufWriter<&File>) -> io::Result<()>,
    ) -> Result<(), SessionError> {
        self.write_via_tmp(name, false, false, write)
    }

    /// [`DirHandle::write_atomically`] for a file that must not exist yet: the rename
    /// refuses to replace one (`RENAME_NOREPLACE`), so of two writers racing to create
    /// `name` exactly one succeeds; the other gets [`SessionError::AlreadyExists`] naming
    /// the directory, and its temporary file is removed. On a file system without
    /// `RENAME_NOREPLACE` the rename replaces, as [`DirHandle::write_atomically`] does.
    pub fn write_new_atomically(&self, name: &str, bytes: &[u8]) -> Result<(), SessionError> {
        self.write_via_tmp(name, true, true, |w| w.write_all(bytes))
    }

    fn write_via_tmp(
        &self,
        name: &str,
        new: bool,
        sync_dir: bool,
        write: impl FnOnce(&mut BufWriter<&File>) -> io::Result<()>,
    ) -> Result<(), SessionError> {
        let (tmp, file) = self.create_tmp(name)?;
        let written = (|| {
            let mut w = BufWriter::with_capacity(64 * 1024, &file);
            write(&mut w)?;
            w.flush()?;
            drop(w);
            file.sync_all()
        })()
        // Named by the file promised: the temporary one is removed below.
        .map_err(|e| SessionError::io(self.join(name), e))
        .and_then(|()| {
            let renamed = if new {
                match rustix::fs::renameat_with(
                    &self.fd,
                    tmp.as_str(),
                    &self.fd,
                    name,
                    RenameFlags::NOREPLACE,
                ) {
                    Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                        rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name)
                    }
                    other => other,
                }
            } else {
                rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name)
            };
            renamed.map_err(|e| match e {
                rustix::io::Errno::EXIST if new => SessionError::AlreadyExists {
                    path: self.path.clone(),
                },
                e => self.io(Path::new(name), e),
            })
        });
        drop(file);
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
            return written;
        }
        // Best effort: some file systems refuse to sync a directory; the data is written.
        if sync_dir {
            let _ = rustix::fs::fsync(&self.fd);
        }
        Ok(())
    }

    /// A fresh temporary file for `name`, created with `O_EXCL`.
    fn create_tmp(&self, name: &str) -> Result<(String, File), SessionError> {
        let mut last = None;
        for attempt in 1..=TMP_ATTEMPTS {
            let tmp = match attempt {
                1 => format!("{name}.tmp"),
                n => format!("{name}.tmp.{n}"),
            };
            match self.create_file(&tmp, false) {
                Ok(file) => return Ok((tmp, file)),
                Err(SessionError::Io { source, path })
                    if source.kind() == io::ErrorKind::AlreadyExists =>
                {
                    last = Some(SessionError::Io { source, path });
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            SessionError::io(self.join(name), io::ErrorKind::AlreadyExists.into())
        }))
    }

    /// Removes `name` if it is there; errors are ignored (for clean-ups).
    pub fn remove_quietly(&self, name: &str) {
        let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::empty());
    }

    /// Syncs the directory itself (new names in it), best effort.
    pub fn sync(&self) {
        let _ = rustix::fs::fsync(self.fd.as_fd());
    }
}

/// Creates the parents of `path` when missing.
fn create_parents(path: &Path) -> Result<(), SessionError> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => {
            std::fs::create_dir_all(parent).map_err(|e| SessionError::io(parent, e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_planted_tmp_file_is_neither_followed_nor_reused() {
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let dir = DirHandle::create_empty(&root.path().join("d")).unwrap();
        symlink(&victim, root.path().join("d/a.txt.tmp")).unwrap();
        dir.write_atomically("a.txt", b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(root.path().join("d/a.txt")).unwrap(), b"new");
        // The planted link is still there, untouched; the temporary file used is gone.
        assert!(
            std::fs::symlink_metadata(root.path().join("d/a.txt.tmp"))
                .unwrap()
                .is_symlink()
        );
        assert!(!root.path().join("d/a.txt.tmp.2").exists());
    }

    #[test]
    fn a_link_in_place_of_the_file_is_replaced_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let dir = DirHandle::create_or_open(&root.path().join("d")).unwrap();
        symlink(&victim, root.path().join("d/a.txt")).unwrap();
        dir.write_atomically("a.txt", b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(
            !std::fs::symlink_metadata(root.path().join("d/a.txt"))
                .unwrap()
                .is_symlink()
        );
        let err = dir.create_file("b", false);
        assert!(err.is_ok());
        let err = dir.create_file("b", true).unwrap_err();
        assert!(err.to_string().contains("d/b"), "{err}");
    }

    #[test]
    fn links_files_and_full_directories_are_refused_as_session_directories() {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().join("real");
        std::fs::create_dir(&real).unwrap();
        symlink(&real, root.path().join("link")).unwrap();
        let err = DirHandle::create_empty(&root.path().join("link")).unwrap_err();
        assert!(
            matches!(&err, SessionError::UnsafeDirectory { reason, .. } if reason.contains("symbolic link")),
            "{err}"
        );
        std::fs::write(root.path().join("file"), b"").unwrap();
        let err = DirHandle::create_empty(&root.path().join("file")).unwrap_err();
        assert!(matches!(err, SessionError::UnsafeDirectory { .. }), "{err}");
        std::fs::write(real.join("timeseries.jsonl"), b"{}\n").unwrap();
        let err = DirHandle::create_empty(&real).unwrap_err();
        assert!(
            matches!(&err, SessionError::NotEmpty { entry, .. } if entry == "timeseries.jsonl"),
            "{err}"
        );
        assert!(err.to_string().contains("real"), "{err}");
        // An empty directory of ours is taken.
        let empty = root.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        DirHandle::create_empty(&empty).unwrap();
    }
}
