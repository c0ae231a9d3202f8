//! JIT frames from perf maps: `/tmp/perf-PID.map`, which V8 (`--perf-basic-prof`),
//! CPython (`-X perf`), the JVM (with a perf-map agent or `-XX:+DumpPerfMapAtExit`) and
//! others write, one line per function of generated code: `START SIZE NAME`, hex numbers.
//!
//! A map is read through `/proc/PID/root/tmp/perf-NSPID.map` (so a process in a
//! container is read in its own /tmp, under its own pid there) as every file benchtop
//! reads: opened without following a symbolic link and without blocking (a FIFO is
//! refused, not waited on), only when it is a regular file owned by the process's user,
//! and at most [`MAX_MAP_BYTES`]. Lines that do not parse are skipped and counted; where
//! entries overlap, the later line wins (code was moved or compiled again there). A
//! map that grows is read again when its size or time changed.
//!
//! A process gone before its generated code was first named (a short run, or a machine
//! so loaded that its samples are read after it ended) has no `/proc/PID` left: its map
//! is then read where perf reads every map, after the run — this namespace's
//! `/tmp/perf-PID.map` — when it is owned by the user recording and was written since
//! the recording began (an older file is another process's that had the pid before).

use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use super::jitdump::DumpFile;

/// Largest map read (bytes): a long node run writes some tens of MB.
pub(crate) const MAX_MAP_BYTES: u64 = 64 << 20;

/// One process's perf map: code ranges sorted by start, not overlapping.
#[derive(Debug, Default)]
pub(crate) struct PerfMap {
    /// (start, end, index into `names`).
    entries: Vec<(u64, u64, u32)>,
    names: Vec<Box<str>>,
    /// Lines that did not parse.
    pub skipped: usize,
}

/// Why a map was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not there (the runtime writes none, or the process is gone): nothing to say.
    Missing,
    /// There, but not read: the message says why.
    Unsafe(String),
}

impl PerfMap {
    /// Parses a map's text. Entries of zero size and lines that do not parse are
    /// skipped; where entries overlap, the later line's replaces the earlier ones.
    pub fn parse(text: &str) -> PerfMap {
        let mut map = PerfMap::default();
        // (start, end, line order, name) of every entry, then resolved by order.
        let mut raw: Vec<(u64, u64, u32)> = Vec::new();
        for line in text.lines() {
            let mut parts = line.splitn(3, ' ');
            let parsed = (|| {
                let start = parse_hex(parts.next()?)?;
                let size = parse_hex(parts.next()?)?;
                let name = parts.next()?.trim();
                let end = start.checked_add(size)?;
                (size > 0 && !name.is_empty()).then_some((start, end, name))
            })();
            let Some((start, end, name)) = parsed else {
                if !line.trim().is_empty() {
                    map.skipped += 1;
                }
                continue;
            };
            let id = map.names.len() as u32;
            map.names.push(name.into());
            raw.push((start, end, id));
        }
        map.resolve(&raw);
        map
    }

    /// A map of `functions` ((start, size, name), later ones winning where they
    /// overlap), as a jitdump gives them.
    pub fn from_functions<'a>(functions: impl IntoIterator<Item = (u64, u64, &'a str)>) -> PerfMap {
        let mut map = PerfMap::default();
        let mut raw: Vec<(u64, u64, u32)> = Vec::new();
        for (start, size, name) in functions {
            let Some(end) = start.checked_add(size).filter(|_| size > 0) else {
                continue;
            };
            let id = map.names.len() as u32;
            map.names.push(name.into());
            raw.push((start, end, id));
        }
        map.resolve(&raw);
        map
    }

    /// Keeps of `raw` ((start, end, name id), in order) what no later entry covers.
    fn resolve(&mut self, raw: &[(u64, u64, u32)]) {
        // Later lines win: insert in reverse order, keeping only what no later entry
        // already covers.
        let mut kept: std::collections::BTreeMap<u64, (u64, u32)> = Default::default();
        for &(start, end, id) in raw.iter().rev() {
            let mut pieces = vec![(start, end)];
            let overlapping: Vec<(u64, u64)> = kept
                .range(..end)
                .rev()
                .take_while(|(_, (e, _))| *e > start)
                .map(|(&s, &(e, _))| (s, e))
                .collect();
            // Also an entry that starts before `start` and reaches into it.
            for (s, e) in overlapping {
                pieces = pieces
                    .into_iter()
                    .flat_map(|(a, b)| {
                        let mut out = Vec::new();
                        if a < s.min(b) {
                            out.push((a, s.min(b)));
                        }
                        if e.max(a) < b {
                            out.push((e.max(a), b));
                        }
                        out
                    })
                    .collect();
            }
            for (a, b) in pieces {
                kept.insert(a, (b, id));
            }
        }
        self.entries = kept.into_iter().map(|(s, (e, id))| (s, e, id)).collect();
    }

    /// The name of the function of generated code at `addr`.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.entries.partition_point(|&(s, _, _)| s <= addr);
        let &(_, end, id) = self.entries.get(i.checked_sub(1)?)?;
        (addr < end).then(|| &*self.names[id as usize])
    }

    /// Entries it holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

fn parse_hex(s: &str) -> Option<u64> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// Where a process's perf map is, seen from here: its own /tmp, under the pid it has in
/// its own namespace (the last of `NSpid:`), and the uid that must own it (`Uid:`'s
/// real uid).
pub(crate) fn locate(pid: u32) -> Option<(PathBuf, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let (ns_pid, uid) = parse_status(&status)?;
    let path = PathBuf::from(format!(
        "/proc/{pid}/root/tmp/perf-{}.map",
        ns_pid.unwrap_or(pid)
    ));
    Some((path, uid))
}

/// The pid in the innermost namespace and the real uid, from `/proc/PID/status` text.
fn parse_status(text: &str) -> Option<(Option<u32>, u32)> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::split_whitespace)
    };
    let uid = field("Uid:")?.next()?.parse().ok()?;
    let ns_pid = field("NSpid:").and_then(|f| f.last()?.parse().ok());
    Some((ns_pid, uid))
}

/// The identity of a map's contents as last read: size and modification time.
pub(crate) type Stamp = (u64, i64, i64);

/// Reads the map at `path` if it is a regular file owned by `uid`, no larger than
/// `max` bytes, and changed since `seen` (its size and time): `Ok(None)` when unchanged.
pub(crate) fn read(
    path: &Path,
    uid: u32,
    max: u64,
    seen: Option<Stamp>,
) -> Result<Option<(PerfMap, Stamp)>, Refused> {
    let Some((bytes, stamp)) = read_bytes(path, uid, max, seen, 0)? else {
        return Ok(None);
    };
    Ok(Some((
        PerfMap::parse(&String::from_utf8_lossy(&bytes)),
        stamp,
    )))
}

/// The bytes from `offset` on of the file at `path`, by the rules of [`read`].
pub(crate) fn read_bytes(
    path: &Path,
    uid: u32,
    max: u64,
    seen: Option<Stamp>,
    offset: u64,
) -> Result<Option<(Vec<u8>, Stamp)>, Refused> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ESRCH) | Some(libc::ENOTDIR) => Refused::Missing,
            Some(libc::ELOOP) => {
                Refused::Unsafe(format!("{}: a symbolic link, not read", path.display()))
            }
            _ => Refused::Unsafe(format!("{}: {e}", path.display())),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| Refused::Unsafe(format!("{}: {e}", path.display())))?;
    if !meta.file_type().is_file() {
        return Err(Refused::Unsafe(format!(
            "{}: not a regular file, not read",
            path.display()
        )));
    }
    if meta.uid() != uid {
        return Err(Refused::Unsafe(format!(
            "{}: owned by uid {}, not by the process's uid {uid}, not read",
            path.display(),
            meta.uid()
        )));
    }
    if meta.len() > max {
        return Err(Refused::Unsafe(format!(
            "{}: {} bytes, more than the {max} read, not read",
            path.display(),
            meta.len()
        )));
    }
    let stamp = (meta.len(), meta.mtime(), meta.mtime_nsec());
    if seen == Some(stamp) {
        return Ok(None);
    }
    let mut file = file;
    if offset > 0 {
        use std::io::Seek as _;
        file.seek(std::io::SeekFrom::Start(offset))
            .map_err(|e| Refused::Unsafe(format!("{}: {e}", path.display())))?;
    }
    let want = max.saturating_sub(offset);
    let mut bytes = Vec::with_capacity(meta.len().saturating_sub(offset).min(want) as usize);
    // It may grow while read: never past the cap.
    file.take(want)
        .read_to_end(&mut bytes)
        .map_err(|e| Refused::Unsafe(format!("{}: {e}", path.display())))?;
    Ok(Some((bytes, stamp)))
}

/// A process's perf map and where reading it stands.
#[derive(Debug)]
pub(crate) struct ProcessMap {
    path: PathBuf,
    uid: u32,
    stamp: Option<Stamp>,
    map: PerfMap,
    /// Read (or found unchanged) since the last batch ended.
    fresh: bool,
    /// Refused once: not tried again.
    refused: bool,
    /// Its jitdump, once the runtime announced one.
    dump: Option<DumpFile>,
    /// For the map of a process that is gone ([`ProcessMap::left_behind`]): the time
    /// before which a map was another process's.
    not_before: Option<std::time::SystemTime>,
}

impl ProcessMap {
    /// The map at `path`, owned by `uid`, not read yet.
    fn at(path: PathBuf, uid: u32, not_before: Option<std::time::SystemTime>) -> ProcessMap {
        ProcessMap {
            path,
            uid,
            stamp: None,
            map: PerfMap::default(),
            fresh: false,
            refused: false,
            dump: None,
            not_before,
        }
    }

    /// Where `pid`'s map is ([`locate`]); `None` when the process is gone.
    pub fn locate(pid: u32) -> Option<ProcessMap> {
        let (path, uid) = locate(pid)?;
        Some(ProcessMap::at(path, uid, None))
    }

    /// The map a process that is gone left in this namespace's /tmp (see the
    /// [module](self)): owned by this process's effective user, written at or after
    /// `since`.
    pub fn left_behind(pid: u32, since: std::time::SystemTime) -> ProcessMap {
        // SAFETY: geteuid(2) takes no arguments and cannot fail.
        let uid = unsafe { libc::geteuid() };
        ProcessMap::at(
            PathBuf::from(format!("/tmp/perf-{pid}.map")),
            uid,
            Some(since),
        )
    }

    /// The process mapped `file` (a path in its own mount namespace), a jitdump's
    /// marker: read it too, through the process's root. The first marker stays.
    pub fn see_dump(&mut self, pid: u32, file: &[u8]) {
        if self.dump.is_some() {
            return;
        }
        use std::os::unix::ffi::OsStrExt as _;
        let mut path = PathBuf::from(format!("/proc/{pid}/root"));
        path.push(
            Path::new(std::ffi::OsStr::from_bytes(file))
                .strip_prefix("/")
                .unwrap_or(Path::new("")),
        );
        self.dump = Some(DumpFile::new(path, self.uid));
    }

    /// Reads the map when it changed, at most once a batch; a refusal is said once, in
    /// `warnings`, and the map is not tried again.
    pub fn refresh(&mut self, pid: u32, warnings: &mut Vec<String>) {
        if self.fresh {
            return;
        }
        self.fresh = true;
        if let Some(dump) = &mut self.dump {
            dump.refresh(pid, warnings);
        }
        if self.refused {
            return;
        }
        match read(&self.path, self.uid, MAX_MAP_BYTES, self.stamp) {
            Ok(Some((_, stamp))) if self.older(stamp) => {
                // Not this process's: said nowhere, as a map never written.
                self.refused = true;
            }
            Ok(Some((map, stamp))) => {
                if map.skipped > 0 && self.stamp.is_none() {
                    warnings.push(format!(
                        "{}: {} lines that are not `START SIZE NAME` skipped",
                        self.path.display(),
                        map.skipped
                    ));
                }
                self.map = map;
                self.stamp = Some(stamp);
            }
            Ok(None) | Err(Refused::Missing) => {}
            Err(Refused::Unsafe(why)) => {
                self.refused = true;
                warnings.push(format!("perf map of process {pid}: {why}"));
            }
        }
    }

    /// Whether a map last changed at `stamp` predates what a gone process's map must be.
    fn older(&self, (_, secs, nanos): Stamp) -> bool {
        let Some(since) = self.not_before else {
            return false;
        };
        let at = u64::try_from(secs).ok().map(|s| {
            std::time::UNIX_EPOCH + std::time::Duration::new(s, u32::try_from(nanos).unwrap_or(0))
        });
        at.is_none_or(|at| at < since)
    }

    /// The name of the generated code at `addr`, from the perf map, else the jitdump;
    /// else whether one may name it later (`true`: a map that grows, or one not written
    /// yet, as a JVM's after `jcmd PID Compiler.perfmap`), or never will (`false`: both
    /// were refused, or the process is gone and its map is all it wrote).
    pub fn lookup(&self, addr: u64) -> Result<&str, bool> {
        let dump = self.dump.as_ref();
        // A gone process's map is all it will ever be.
        let may_grow = self.not_before.is_none();
        self.map
            .lookup(addr)
            .or_else(|| dump?.lookup(addr))
            .ok_or(may_grow && (!self.refused || dump.is_some_and(|d| !d.refused())))
    }

    /// A batch ended: the next one reads the map again if it changed.
    pub fn end_batch(&mut self) {
        self.fresh = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_and_garbage_is_skipped() {
        let map = PerfMap::parse(
            "7f0000001000 40 LazyCompile:*f1 /tmp/a.js:1\n\
             0x7f0000002000 0x20 py::f2:/tmp/b.py\n\
             garbage\n\
             zz 10 bad start\n\
             7f0000003000 0 empty\n\
             7f0000004000 10\n\
             ffffffffffffffff 10 wraps\n\
             \n",
        );
        assert_eq!(
            map.lookup(0x7f00_0000_1000),
            Some("LazyCompile:*f1 /tmp/a.js:1")
        );
        assert_eq!(
            map.lookup(0x7f00_0000_103f),
            Some("LazyCompile:*f1 /tmp/a.js:1")
        );
        assert_eq!(map.lookup(0x7f00_0000_1040), None);
        assert_eq!(map.lookup(0x7f00_0000_2010), Some("py::f2:/tmp/b.py"));
        assert_eq!(map.lookup(0x7f00_0000_3000), None);
        assert_eq!(map.skipped, 5);
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn overlapping_entries_leave_the_later_line() {
        let map = PerfMap::parse(
            "1000 100 old\n\
             1080 100 new\n\
             1000 10 newest\n",
        );
        assert_eq!(map.lookup(0x1000), Some("newest"));
        assert_eq!(map.lookup(0x1010), Some("old"));
        assert_eq!(map.lookup(0x107f), Some("old"));
        assert_eq!(map.lookup(0x1080), Some("new"));
        assert_eq!(map.lookup(0x117f), Some("new"));
        assert_eq!(map.lookup(0x1180), None);
        // A later entry inside an earlier one splits it.
        let map = PerfMap::parse("1000 100 outer\n1040 10 inner\n");
        assert_eq!(map.lookup(0x1000), Some("outer"));
        assert_eq!(map.lookup(0x1045), Some("inner"));
        assert_eq!(map.lookup(0x1050), Some("outer"));
    }

    #[test]
    fn status_gives_the_namespace_pid_and_the_uid() {
        let text = "Name:\tnode\nUid:\t1000\t1000\t1000\t1000\nNSpid:\t4242\t7\n";
        assert_eq!(parse_status(text), Some((Some(7), 1000)));
        assert_eq!(parse_status("Uid:\t0\t0\t0\t0\n"), Some((None, 0)));
        assert_eq!(parse_status("Name:\tx\n"), None);
    }

    fn uid() -> u32 {
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }
    }

    #[test]
    fn hostile_maps_are_refused_with_a_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("perf-1.map");
        std::fs::write(&good, "1000 10 f\n").expect("write");
        let (map, stamp) = read(&good, uid(), MAX_MAP_BYTES, None).unwrap().unwrap();
        assert_eq!(map.lookup(0x1000), Some("f"));
        // Unchanged: not read again.
        assert!(
            read(&good, uid(), MAX_MAP_BYTES, Some(stamp))
                .unwrap()
                .is_none()
        );
        // Another user's.
        let err = read(&good, uid() + 1, MAX_MAP_BYTES, None).unwrap_err();
        assert!(
            matches!(&err, Refused::Unsafe(m) if m.contains("owned by uid")),
            "{err:?}"
        );
        // Too large (a small cap stands for 100 MB).
        let err = read(&good, uid(), 4, None).unwrap_err();
        assert!(
            matches!(&err, Refused::Unsafe(m) if m.contains("bytes")),
            "{err:?}"
        );
        // A symbolic link.
        let link = dir.path().join("perf-2.map");
        std::os::unix::fs::symlink(&good, &link).expect("symlink");
        let err = read(&link, uid(), MAX_MAP_BYTES, None).unwrap_err();
        assert!(
            matches!(&err, Refused::Unsafe(m) if m.contains("symbolic link")),
            "{err:?}"
        );
        // A FIFO nobody writes: refused at once, never waited on.
        let fifo = dir.path().join("perf-3.map");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read(&fifo, uid(), MAX_MAP_BYTES, None).unwrap_err();
        assert!(
            matches!(&err, Refused::Unsafe(m) if m.contains("not a regular file")),
            "{err:?}"
        );
        // A directory.
        let err = read(dir.path(), uid(), MAX_MAP_BYTES, None).unwrap_err();
        assert!(matches!(&err, Refused::Unsafe(_)), "{err:?}");
        // Missing.
        let err = read(&dir.path().join("none"), uid(), MAX_MAP_BYTES, None).unwrap_err();
        assert_eq!(err, Refused::Missing);
    }

    #[test]
    fn a_100_mb_map_is_refused_past_the_cap_without_being_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("perf-9.map");
        let file = std::fs::File::create(&path).expect("create");
        // Sparse: 100 MB of size, no disk.
        file.set_len(100 << 20).expect("set_len");
        let err = read(&path, uid(), MAX_MAP_BYTES, None).unwrap_err();
        assert!(
            matches!(&err, Refused::Unsafe(m) if m.contains("104857600 bytes, more than")),
            "{err:?}"
        );
        // Through a process's map: one warning, and the map is not tried again.
        let mut m = ProcessMap::at(path, uid(), None);
        let mut warnings = Vec::new();
        m.refresh(9, &mut warnings);
        m.end_batch();
        m.refresh(9, &mut warnings);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("perf map of process 9: "),
            "{warnings:?}"
        );
        assert_eq!(m.lookup(0x1000), Err(false));
    }

    #[test]
    fn a_gone_process_s_map_is_read_from_tmp_only_when_written_during_the_recording() {
        use std::time::{Duration, SystemTime};
        // No process has this pid (pid_max is at most 2^22): the map is as a process
        // that ended before its code was named left it.
        let pid = u32::MAX - 7;
        let path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
        std::fs::write(&path, "1000 10 py::spin_here:/tmp/loop.py\n").expect("write");
        let began = SystemTime::now() - Duration::from_secs(5);
        let mut warnings = Vec::new();
        let mut m = ProcessMap::left_behind(pid, began);
        m.refresh(pid, &mut warnings);
        let named = m.lookup(0x1004).map(str::to_owned);
        let outside = m.lookup(0x2000).map(str::to_owned);
        // Written before the recording began: another process's that had the pid.
        let mut stale = ProcessMap::left_behind(pid, SystemTime::now() + Duration::from_secs(60));
        stale.refresh(pid, &mut warnings);
        let refused = stale.lookup(0x1004).map(str::to_owned);
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(named.as_deref(), Ok("py::spin_here:/tmp/loop.py"));
        assert_eq!(outside, Err(false));
        assert_eq!(refused, Err(false));
        assert!(warnings.is_empty(), "{warnings:?}");
        // Not there at all, or not naming the address: a gone process writes no more.
        let mut none = ProcessMap::left_behind(pid - 1, began);
        none.refresh(pid - 1, &mut warnings);
        assert_eq!(none.lookup(0x1004), Err(false));
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn a_map_written_late_or_grown_names_code_from_the_next_batch_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("perf-11.map");
        let mut m = ProcessMap::at(path.clone(), uid(), None);
        let mut warnings = Vec::new();
        // Not written yet (a JVM before `jcmd PID Compiler.perfmap`): may come.
        m.refresh(11, &mut warnings);
        assert_eq!(m.lookup(0x1000), Err(true));
        std::fs::write(&path, "1000 10 first\n").expect("write");
        // Read at most once a batch.
        m.refresh(11, &mut warnings);
        assert_eq!(m.lookup(0x1000), Err(true));
        m.end_batch();
        m.refresh(11, &mut warnings);
        assert_eq!(m.lookup(0x1000), Ok("first"));
        assert_eq!(m.lookup(0x2000), Err(true));
        // It grows: read again.
        std::fs::write(&path, "1000 10 first\n2000 10 second\n").expect("write");
        m.end_batch();
        m.refresh(11, &mut warnings);
        assert_eq!(m.lookup(0x2000), Ok("second"));
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn a_large_map_of_garbage_costs_bounded_memory() {
        // 8 MiB of one long line and of short garbage lines: parsed without panic, to
        // no entry.
        let long = "x".repeat(8 << 20);
        assert_eq!(PerfMap::parse(&long).len(), 0);
        let lines = "1 2\n-1 -1 -1\n\u{feff}ff 1 z\n".repeat(100_000);
        let map = PerfMap::parse(&lines);
        assert_eq!(map.len(), 0);
        assert_eq!(map.skipped, 300_000);
    }
}
