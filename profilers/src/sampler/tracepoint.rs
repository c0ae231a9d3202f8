//! The `sched:sched_waking` tracepoint: its id and the layout of its raw record, read
//! from tracefs, and what a raw record says (who was woken, and whether an interrupt
//! rather than the running thread woke it).
//!
//! The id is read here rather than by perf-event2's `Tracepoint::with_name`, which looks
//! only under `/sys/kernel/debug/tracing`: tracefs is found in the mount table, at
//! `/sys/kernel/tracing` or under debugfs, and mounted at `/sys/kernel/tracing` when it
//! is not mounted anywhere and this process may (as perf does).

use std::path::{Path, PathBuf};

/// The event's directory under tracefs.
const WAKING_DIR: &str = "events/sched/sched_waking";
/// Where tracefs is mounted when it is mounted nowhere.
const TRACEFS_MOUNT: &str = "/sys/kernel/tracing";

/// `common_flags` bits (the kernel's `trace_flag_type`): the record was written in a
/// hard interrupt, a soft interrupt or an NMI.
const FLAG_HARDIRQ: u8 = 0x08;
const FLAG_SOFTIRQ: u8 = 0x10;
const FLAG_NMI: u8 = 0x40;

/// The tracepoint's id and where its raw record holds what the join needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Waking {
    /// The tracepoint's id (`attr.config`).
    pub id: u64,
    /// Offset of `common_flags` (one byte).
    flags: usize,
    /// Offset of `pid`, the woken thread (four bytes).
    pid: usize,
}

/// Who woke a thread, as its `sched_waking` record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waker {
    /// The thread that ran the wake-up (the sample's pid and tid).
    Thread,
    /// A hard interrupt (a timer expiring, a device) on the thread's CPU.
    HardIrq,
    /// A soft interrupt (network receive, RCU, timers' soft half).
    SoftIrq,
    /// A non-maskable interrupt.
    Nmi,
}

impl Waker {
    /// The frame that stands for a waker without a thread.
    pub fn frame(self) -> Option<&'static str> {
        match self {
            Waker::Thread => None,
            Waker::HardIrq => Some("[woken by: hard interrupt (timer or device)]"),
            Waker::SoftIrq => Some("[woken by: soft interrupt]"),
            Waker::Nmi => Some("[woken by: NMI]"),
        }
    }
}

impl Waking {
    /// The woken thread and who woke it, from a sample's raw record; `None` for a record
    /// too short for the layout.
    pub fn parse(&self, raw: &[u8]) -> Option<(u32, Waker)> {
        let flags = *raw.get(self.flags)?;
        let pid = raw.get(self.pid..self.pid + 4)?;
        let pid = u32::from_ne_bytes(pid.try_into().ok()?);
        let waker = if flags & FLAG_NMI != 0 {
            Waker::Nmi
        } else if flags & FLAG_HARDIRQ != 0 {
            Waker::HardIrq
        } else if flags & FLAG_SOFTIRQ != 0 {
            Waker::SoftIrq
        } else {
            Waker::Thread
        };
        Some((pid, waker))
    }
}

/// Finds `sched:sched_waking` in tracefs; the error is a sentence for the user.
pub(crate) fn waking() -> Result<Waking, String> {
    let dir = tracefs_dir()?;
    let event = dir.join(WAKING_DIR);
    let read = |name: &str| {
        std::fs::read_to_string(event.join(name)).map_err(|e| {
            format!(
                "cannot read {}: {e} (tracefs is readable by root only on most systems)",
                event.join(name).display()
            )
        })
    };
    let id = read("id")?
        .trim()
        .parse()
        .map_err(|_| format!("{} is not a number", event.join("id").display()))?;
    let (flags, pid) = parse_format(&read("format")?).ok_or_else(|| {
        format!(
            "{} lacks the common_flags or pid field",
            event.join("format").display()
        )
    })?;
    Ok(Waking { id, flags, pid })
}

/// The offsets of `common_flags` and `pid` in a tracepoint's `format` file.
fn parse_format(text: &str) -> Option<(usize, usize)> {
    let mut flags = None;
    let mut pid = None;
    for line in text.lines() {
        let mut name = None;
        let mut offset = None;
        let mut size = None;
        for part in line.trim().split(';') {
            let part = part.trim();
            if let Some(f) = part.strip_prefix("field:") {
                name = f.rsplit(' ').next();
            } else if let Some(o) = part.strip_prefix("offset:") {
                offset = o.parse::<usize>().ok();
            } else if let Some(s) = part.strip_prefix("size:") {
                size = s.parse::<usize>().ok();
            }
        }
        match (name, offset, size) {
            (Some("common_flags"), Some(o), Some(1)) => flags = Some(o),
            (Some("pid"), Some(o), Some(4)) => pid = Some(o),
            _ => {}
        }
    }
    Some((flags?, pid?))
}

/// Where tracefs is: from the mount table, else mounted at [`TRACEFS_MOUNT`].
fn tracefs_dir() -> Result<PathBuf, String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    if let Some(dir) = find_tracefs(&mounts) {
        return Ok(dir);
    }
    mount_tracefs()
}

/// The tracefs directory named by a mount table: a tracefs mount, else `tracing` under
/// a debugfs mount (which the kernel mounts tracefs on when it is looked at).
fn find_tracefs(mounts: &str) -> Option<PathBuf> {
    let entries = mounts.lines().filter_map(|l| {
        let mut f = l.split(' ');
        let (_, dir, fs) = (f.next()?, f.next()?, f.next()?);
        Some((unescape_mount(dir), fs))
    });
    let mut debugfs = None;
    for (dir, fs) in entries {
        match fs {
            "tracefs" => return Some(dir),
            "debugfs" if debugfs.is_none() => debugfs = Some(dir.join("tracing")),
            _ => {}
        }
    }
    debugfs.filter(|d| d.join(WAKING_DIR).exists())
}

/// A mount table's path, whose spaces, tabs and newlines are octal escapes.
fn unescape_mount(s: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt as _;
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match (b[i], octal) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Mounts tracefs at [`TRACEFS_MOUNT`], as perf does when it finds it nowhere.
fn mount_tracefs() -> Result<PathBuf, String> {
    let dir = Path::new(TRACEFS_MOUNT);
    let c = |s: &str| std::ffi::CString::new(s).map_err(|e| e.to_string());
    let (source, target, fs) = (c("nodev")?, c(TRACEFS_MOUNT)?, c("tracefs")?);
    // SAFETY: mount(2) reads three NUL-terminated strings that live across the call; the
    // data argument may be null.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fs.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "tracefs is not mounted and mounting it at {TRACEFS_MOUNT} failed: {e} \
             (as root: `mount -t tracefs nodev {TRACEFS_MOUNT}`)"
        ));
    }
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The format file of kernel 6.x.
    const FORMAT: &str = "name: sched_waking
ID: 375
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;

print fmt: \"comm=%s pid=%d prio=%d target_cpu=%03d\", REC->comm, REC->pid
";

    #[test]
    fn the_format_file_gives_the_offsets_of_the_flags_and_the_woken_pid() {
        assert_eq!(parse_format(FORMAT), Some((2, 24)));
        assert_eq!(
            parse_format("format:\n\tfield:pid_t pid;\toffset:24;\tsize:4;"),
            None
        );
        // A field of another size is not taken for it.
        let odd = FORMAT.replace("offset:24;\tsize:4", "offset:24;\tsize:8");
        assert_eq!(parse_format(&odd), None);
    }

    #[test]
    fn a_raw_record_names_the_woken_thread_and_an_interrupt_waker() {
        let w = Waking {
            id: 375,
            flags: 2,
            pid: 24,
        };
        let mut raw = vec![0u8; 36];
        raw[24..28].copy_from_slice(&4242u32.to_ne_bytes());
        assert_eq!(w.parse(&raw), Some((4242, Waker::Thread)));
        raw[2] = FLAG_HARDIRQ | 0x01;
        assert_eq!(w.parse(&raw), Some((4242, Waker::HardIrq)));
        raw[2] = FLAG_SOFTIRQ;
        assert_eq!(w.parse(&raw), Some((4242, Waker::SoftIrq)));
        raw[2] = FLAG_NMI | FLAG_HARDIRQ;
        assert_eq!(w.parse(&raw), Some((4242, Waker::Nmi)));
        assert_eq!(w.parse(&raw[..27]), None);
        assert_eq!(w.parse(&[]), None);
    }

    #[test]
    fn tracefs_is_found_in_the_mount_table_with_escaped_paths() {
        let table = "sysfs /sys sysfs rw 0 0\n\
                     tracefs /mnt/my\\040trace tracefs rw 0 0\n";
        assert_eq!(find_tracefs(table), Some(PathBuf::from("/mnt/my trace")));
        assert_eq!(find_tracefs("proc /proc proc rw 0 0\n"), None);
        assert_eq!(find_tracefs("garbage"), None);
    }
}
