//! JIT frames from jitdump files (`jit-PID.dump`), which V8 (`--perf-prof`), CPython
//! 3.13 (`-X perf_jit`), the JVM's perf agents and others write beside or instead of a
//! perf map, and announce by mapping the file executable (a "marker" mmap, which
//! perf's records carry). Format: perf's `tools/perf/Documentation/jitdump-specification.txt`.
//!
//! Only what names code is read: `JIT_CODE_LOAD` (a function's address, size and name)
//! and `JIT_CODE_MOVE` (the same code at a new address). The header is checked (magic in
//! this machine's byte order, version 1, a size that fits); a record whose size runs past
//! the end (the runtime is still writing it) ends the read cleanly, and so does one
//! whose size is too small to be a record. The file is opened by the same rules as a
//! perf map ([`super::perf_map`]).

use std::collections::HashMap;
use std::path::PathBuf;

use super::perf_map::{PerfMap, Refused, Stamp, read_bytes};

/// Largest jitdump read (bytes): it holds the code too, so it is larger than a map.
pub(crate) const MAX_DUMP_BYTES: u64 = 256 << 20;

/// `JiTD`, as the runtime's machine writes it.
const MAGIC: u32 = 0x4A69_5444;
/// The same magic written by a machine of the other byte order.
const MAGIC_SWAPPED: u32 = 0x4454_694A;
const VERSION: u32 = 1;
/// Bytes of the file header this reader knows (the header says its own size).
const HEADER_BYTES: usize = 40;
/// Bytes of a record's prefix: id, total size, timestamp.
const RECORD_PREFIX: usize = 16;
const JIT_CODE_LOAD: u32 = 0;
const JIT_CODE_MOVE: u32 = 1;

/// Why a jitdump was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BadDump {
    /// Shorter than its header.
    Short(usize),
    /// Not a jitdump, or one of the other byte order.
    Magic(u32),
    /// A version this reader does not know.
    Version(u32),
    /// A header size smaller than the header or past the end.
    HeaderSize(u32),
}

impl std::fmt::Display for BadDump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadDump::Short(n) => write!(f, "{n} bytes, shorter than a jitdump header"),
            BadDump::Magic(MAGIC_SWAPPED) => {
                write!(f, "a jitdump of the other byte order, not read")
            }
            BadDump::Magic(m) => write!(f, "not a jitdump (magic {m:#010x})"),
            BadDump::Version(v) => write!(f, "jitdump version {v}, not {VERSION}"),
            BadDump::HeaderSize(s) => write!(f, "jitdump header of {s} bytes, not read"),
        }
    }
}

/// What a jitdump names: functions of generated code, the later record winning where
/// they overlap, and how the read ended.
#[cfg(test)]
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Dump {
    /// (start, size, name), in the order the code was loaded or moved.
    pub functions: Vec<(u64, u64, String)>,
    /// Records read.
    pub records: usize,
    /// Records that named nothing readable (a load without a name's end, a move of code
    /// never loaded).
    pub skipped: usize,
    /// The last record ran past the end of the file (being written), at this offset.
    pub truncated_at: Option<usize>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Reads a jitdump's functions from its bytes.
#[cfg(test)]
pub(crate) fn parse(bytes: &[u8]) -> Result<Dump, BadDump> {
    let mut reader = DumpReader::default();
    let truncated_at = reader.feed(bytes)?;
    Ok(Dump {
        functions: reader.functions,
        records: reader.records,
        skipped: reader.skipped,
        truncated_at,
    })
}

/// A jitdump read as it grows: the functions of its whole records so far.
#[derive(Debug, Default)]
pub(crate) struct DumpReader {
    /// Bytes of the file read: its header and whole records.
    offset: u64,
    /// (start, size, name), in the order the code was loaded or moved.
    functions: Vec<(u64, u64, String)>,
    /// Code index → its place in `functions`, for moves.
    by_index: HashMap<u64, usize>,
    records: usize,
    /// Records that named nothing readable (a load without a name's end, a move of code
    /// never loaded).
    pub skipped: usize,
}

impl DumpReader {
    /// Where the next read starts in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The functions read so far.
    pub fn functions(&self) -> impl Iterator<Item = (u64, u64, &str)> {
        self.functions.iter().map(|(a, s, n)| (*a, *s, n.as_str()))
    }

    /// Reads `bytes`, the file from [`DumpReader::offset`] on (its header first, when
    /// nothing was read yet). Returns where a record ran past the end (relative to
    /// `bytes`), if one did: the runtime is still writing it, and the next read starts
    /// there.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Option<usize>, BadDump> {
        let mut at = 0;
        if self.offset == 0 {
            at = header_len(bytes)?;
        }
        let truncated = loop {
            if at >= bytes.len() {
                break None;
            }
            let (Some(id), Some(size)) = (u32_at(bytes, at), u32_at(bytes, at + 4)) else {
                break Some(at);
            };
            let size = size as usize;
            let Some(record) = bytes.get(at..at.saturating_add(size)) else {
                break Some(at);
            };
            if size < RECORD_PREFIX {
                // Not a record: nothing after it can be found.
                break Some(at);
            }
            self.records += 1;
            let body = &record[RECORD_PREFIX..];
            let named = match id {
                JIT_CODE_LOAD => load(body, &mut self.functions, &mut self.by_index),
                JIT_CODE_MOVE => moved(body, &mut self.functions, &self.by_index),
                _ => true,
            };
            if !named {
                self.skipped += 1;
            }
            at += size;
        };
        self.offset += at as u64;
        Ok(truncated)
    }
}

/// The size of the header that starts `bytes`, once checked.
fn header_len(bytes: &[u8]) -> Result<usize, BadDump> {
    if bytes.len() < HEADER_BYTES {
        return Err(BadDump::Short(bytes.len()));
    }
    let magic = u32_at(bytes, 0).ok_or(BadDump::Short(bytes.len()))?;
    if magic != MAGIC {
        return Err(BadDump::Magic(magic));
    }
    let version = u32_at(bytes, 4).ok_or(BadDump::Short(bytes.len()))?;
    if version != VERSION {
        return Err(BadDump::Version(version));
    }
    let header = u32_at(bytes, 8).ok_or(BadDump::Short(bytes.len()))?;
    let len = usize::try_from(header).map_err(|_| BadDump::HeaderSize(header))?;
    if len < HEADER_BYTES || len > bytes.len() {
        return Err(BadDump::HeaderSize(header));
    }
    Ok(len)
}

/// A process's jitdump, read as it grows, and what it names.
#[derive(Debug)]
pub(crate) struct DumpFile {
    path: PathBuf,
    uid: u32,
    stamp: Option<Stamp>,
    reader: DumpReader,
    map: PerfMap,
    /// Refused once: not tried again.
    refused: bool,
}

impl DumpFile {
    /// The jitdump at `path` (seen from here), which `uid` must own.
    pub fn new(path: PathBuf, uid: u32) -> DumpFile {
        DumpFile {
            path,
            uid,
            stamp: None,
            reader: DumpReader::default(),
            map: PerfMap::default(),
            refused: false,
        }
    }

    /// Reads what was added since the last read, if the file changed; a refusal (by the
    /// rules every file benchtop reads follows, or a bad header) is said once, in
    /// `warnings`, and the file is not tried again.
    pub fn refresh(&mut self, pid: u32, warnings: &mut Vec<String>) {
        if self.refused {
            return;
        }
        let offset = self.reader.offset();
        let why = match read_bytes(&self.path, self.uid, MAX_DUMP_BYTES, self.stamp, offset) {
            Ok(Some((bytes, stamp))) => {
                let before = self.reader.functions.len();
                match self.reader.feed(&bytes) {
                    Ok(_) => {
                        self.stamp = Some(stamp);
                        if self.reader.functions.len() != before {
                            self.map = PerfMap::from_functions(self.reader.functions());
                        }
                        return;
                    }
                    Err(bad) => format!("{}: {bad}", self.path.display()),
                }
            }
            Ok(None) | Err(Refused::Missing) => return,
            Err(Refused::Unsafe(why)) => why,
        };
        self.refused = true;
        warnings.push(format!("jitdump of process {pid}: {why}"));
    }

    /// The name of the generated code at `addr`.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        self.map.lookup(addr)
    }

    /// Refused: it will name nothing.
    pub fn refused(&self) -> bool {
        self.refused
    }
}

/// `JIT_CODE_LOAD`: pid, tid, vma, code address, code size, code index, the name up to
/// its NUL, the code.
fn load(
    body: &[u8],
    functions: &mut Vec<(u64, u64, String)>,
    by_index: &mut HashMap<u64, usize>,
) -> bool {
    let (Some(addr), Some(size), Some(index)) =
        (u64_at(body, 16), u64_at(body, 24), u64_at(body, 32))
    else {
        return false;
    };
    let Some(rest) = body.get(40..) else {
        return false;
    };
    let Some(end) = rest.iter().position(|&b| b == 0) else {
        return false;
    };
    if size == 0 || addr.checked_add(size).is_none() {
        return false;
    }
    let name = String::from_utf8_lossy(&rest[..end]).into_owned();
    by_index.insert(index, functions.len());
    functions.push((addr, size, name));
    true
}

/// `JIT_CODE_MOVE`: pid, tid, vma, old address, new address, code size, code index.
fn moved(
    body: &[u8],
    functions: &mut Vec<(u64, u64, String)>,
    by_index: &HashMap<u64, usize>,
) -> bool {
    let (Some(new), Some(size), Some(index)) =
        (u64_at(body, 24), u64_at(body, 32), u64_at(body, 40))
    else {
        return false;
    };
    let Some(name) = by_index.get(&index).map(|&i| functions[i].2.clone()) else {
        return false;
    };
    if size == 0 || new.checked_add(size).is_none() {
        return false;
    }
    functions.push((new, size, name));
    true
}

/// Whether `path` (a mapped file's name) is a jitdump's marker: `jit-PID.dump`.
pub(crate) fn is_marker(path: &[u8]) -> bool {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    name.strip_prefix(b"jit-")
        .and_then(|n| n.strip_suffix(b".dump"))
        .is_some_and(|pid| !pid.is_empty() && pid.iter().all(u8::is_ascii_digit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(magic: u32, version: u32, size: u32) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [magic, version, size, 62, 0, 4242] {
            b.extend(w.to_ne_bytes());
        }
        b.extend(0u64.to_ne_bytes()); // timestamp
        b.extend(0u64.to_ne_bytes()); // flags
        b
    }

    fn record(id: u32, body: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(id.to_ne_bytes());
        b.extend(((RECORD_PREFIX + body.len()) as u32).to_ne_bytes());
        b.extend(7u64.to_ne_bytes());
        b.extend(body);
        b
    }

    fn load_record(addr: u64, size: u64, index: u64, name: &str) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(1u32.to_ne_bytes());
        body.extend(1u32.to_ne_bytes());
        for w in [addr, addr, size, index] {
            body.extend(w.to_ne_bytes());
        }
        body.extend(name.as_bytes());
        body.push(0);
        body.extend(vec![0xcc; size as usize]);
        record(JIT_CODE_LOAD, &body)
    }

    fn move_record(old: u64, new: u64, size: u64, index: u64) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(1u32.to_ne_bytes());
        body.extend(1u32.to_ne_bytes());
        for w in [new, old, new, size, index] {
            body.extend(w.to_ne_bytes());
        }
        record(JIT_CODE_MOVE, &body)
    }

    fn good() -> Vec<u8> {
        let mut b = header(MAGIC, VERSION, HEADER_BYTES as u32);
        b.extend(load_record(0x1000, 0x20, 1, "JS:*f1 /srv/a.js:1"));
        b.extend(record(3, &[])); // JIT_CODE_CLOSE
        b.extend(load_record(0x2000, 0x10, 2, "py::f2:/srv/b.py"));
        b.extend(move_record(0x1000, 0x3000, 0x20, 1));
        b
    }

    #[test]
    fn loads_and_moves_name_code() {
        let dump = parse(&good()).expect("a good dump");
        assert_eq!(
            dump.functions,
            vec![
                (0x1000, 0x20, "JS:*f1 /srv/a.js:1".to_owned()),
                (0x2000, 0x10, "py::f2:/srv/b.py".to_owned()),
                (0x3000, 0x20, "JS:*f1 /srv/a.js:1".to_owned()),
            ]
        );
        assert_eq!(
            (dump.records, dump.skipped, dump.truncated_at),
            (4, 0, None)
        );
    }

    #[test]
    fn a_bad_header_is_refused_saying_why() {
        assert_eq!(parse(&[0; 12]), Err(BadDump::Short(12)));
        let mut b = good();
        b[..4].copy_from_slice(&MAGIC.swap_bytes().to_ne_bytes());
        let err = parse(&b).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a jitdump of the other byte order, not read"
        );
        b[..4].copy_from_slice(b"ELF\x7f");
        assert!(matches!(parse(&b), Err(BadDump::Magic(_))));
        let mut b = good();
        b[4..8].copy_from_slice(&2u32.to_ne_bytes());
        assert_eq!(parse(&b), Err(BadDump::Version(2)));
        for size in [0u32, 39, u32::MAX] {
            let mut b = good();
            b[8..12].copy_from_slice(&size.to_ne_bytes());
            assert_eq!(parse(&b), Err(BadDump::HeaderSize(size)));
        }
    }

    #[test]
    fn a_truncated_record_ends_the_read_with_what_came_before() {
        let full = good();
        let first_end = HEADER_BYTES + load_record(0x1000, 0x20, 1, "JS:*f1 /srv/a.js:1").len();
        // Cut anywhere inside the second part: the first function is kept.
        for cut in [first_end + 1, first_end + 10, full.len() - 1] {
            let dump = parse(&full[..cut]).expect("a dump being written");
            assert_eq!(dump.functions[0].0, 0x1000);
            assert!(dump.truncated_at.is_some(), "cut at {cut}: {dump:?}");
        }
        // A record claiming less than its own prefix, or far more than the file.
        for size in [0u32, 8, u32::MAX] {
            let mut b = full.clone();
            b[HEADER_BYTES + 4..HEADER_BYTES + 8].copy_from_slice(&size.to_ne_bytes());
            let dump = parse(&b).expect("read to the bad record");
            assert_eq!(dump.truncated_at, Some(HEADER_BYTES), "{size}: {dump:?}");
            assert!(dump.functions.is_empty());
        }
    }

    #[test]
    fn records_that_name_nothing_are_skipped_and_counted() {
        let mut b = header(MAGIC, VERSION, HEADER_BYTES as u32);
        // A name without its NUL (the record ends first).
        let mut body = vec![0u8; 8];
        for w in [0x1000u64, 0x1000, 0x10, 1] {
            body.extend(w.to_ne_bytes());
        }
        body.extend(b"no-end");
        b.extend(record(JIT_CODE_LOAD, &body));
        // A move of code never loaded, and a load of no size.
        b.extend(move_record(0x1000, 0x5000, 0x10, 99));
        b.extend(load_record(0x6000, 0, 3, "empty"));
        let dump = parse(&b).expect("a dump");
        assert!(dump.functions.is_empty(), "{dump:?}");
        assert_eq!((dump.records, dump.skipped), (3, 3));
    }

    #[test]
    fn a_dump_read_as_it_grows_gives_what_one_read_gives() {
        let full = good();
        let mut reader = DumpReader::default();
        // The header and part of the first record, then the rest in two pieces.
        for cut in [HEADER_BYTES + 30, full.len() - 5, full.len()] {
            let from = reader.offset() as usize;
            reader.feed(&full[from..cut]).expect("feed");
        }
        assert_eq!(reader.offset() as usize, full.len());
        let whole = parse(&full).expect("parse");
        assert_eq!(reader.functions, whole.functions);
        assert_eq!(reader.records, whole.records);
    }

    fn uid() -> u32 {
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }
    }

    #[test]
    fn a_dump_file_is_read_as_it_grows_and_a_bad_one_is_refused_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("jit-5.dump");
        let full = good();
        std::fs::write(&path, &full[..HEADER_BYTES + 30]).expect("write");
        let mut dump = DumpFile::new(path.clone(), uid());
        let mut warnings = Vec::new();
        dump.refresh(5, &mut warnings);
        assert_eq!(dump.lookup(0x1000), None);
        std::fs::write(&path, &full).expect("write");
        dump.refresh(5, &mut warnings);
        // Moved: named at its new address (the old one keeps the name too).
        assert_eq!(dump.lookup(0x3010), Some("JS:*f1 /srv/a.js:1"));
        assert_eq!(dump.lookup(0x2000), Some("py::f2:/srv/b.py"));
        assert!(warnings.is_empty(), "{warnings:?}");
        // A bad header: said once, not read again.
        let bad = dir.path().join("jit-6.dump");
        std::fs::write(&bad, [b'x'; 64]).expect("write");
        let mut dump = DumpFile::new(bad, uid());
        dump.refresh(6, &mut warnings);
        dump.refresh(6, &mut warnings);
        assert!(dump.refused());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("jitdump of process 6: ")
                && warnings[0].contains("not a jitdump"),
            "{warnings:?}"
        );
        // A symbolic link, another user's file: refused by the rules of every file read.
        let link = dir.path().join("jit-7.dump");
        std::os::unix::fs::symlink(&path, &link).expect("symlink");
        let mut dump = DumpFile::new(link, uid());
        dump.refresh(7, &mut warnings);
        let mut dump = DumpFile::new(path, uid() + 1);
        dump.refresh(8, &mut warnings);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[1].contains("symbolic link"), "{warnings:?}");
        assert!(warnings[2].contains("owned by uid"), "{warnings:?}");
    }

    #[test]
    fn markers_are_jit_pid_dump_files() {
        assert!(is_marker(b"/tmp/jit-4242.dump"));
        assert!(is_marker(b"jit-1.dump"));
        assert!(!is_marker(b"/tmp/jit-.dump"));
        assert!(!is_marker(b"/tmp/jit-42.dump.bak"));
        assert!(!is_marker(b"/tmp/perf-42.map"));
        assert!(!is_marker(b"/tmp/jit-4x2.dump"));
    }
}
