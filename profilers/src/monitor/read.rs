//! The /proc reading a [`TreeMonitor`](super::TreeMonitor) does beside its threads'
//! files: the threads of a process, every process's parent (for
//! [`Discovery::ProcScan`](super::Discovery::ProcScan)), the per-core utilisation, the
//! clock of threads' start times and the descriptor budget.

use std::collections::HashMap;
use std::fmt::Write as _;

use benchtop_profile::IoCounters;

use crate::procfs::{self, CpuTicks, ProcBuf};

/// The thread ids of `pid` into `tids`, sorted; `path` is a reused buffer.
pub(super) fn list_tasks(pid: u32, path: &mut String, tids: &mut Vec<u32>) {
    tids.clear();
    path.clear();
    let _ = write!(path, "/proc/{pid}/task");
    let Ok(dir) = std::fs::read_dir(&*path) else {
        return;
    };
    for entry in dir.flatten() {
        if let Some(tid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
            tids.push(tid);
        }
    }
    tids.sort_unstable();
}

/// The children of every process of the machine into `scan_children`, by parent.
pub(super) fn scan_processes(
    buf: &mut ProcBuf,
    path: &mut String,
    scan_children: &mut HashMap<u32, Vec<u32>>,
) {
    for children in scan_children.values_mut() {
        children.clear();
    }
    let Ok(pids) = procfs::pids() else {
        return;
    };
    for pid in pids {
        path.clear();
        let _ = write!(path, "/proc/{pid}/stat");
        let mut none = None;
        if buf.read_cached(&mut none, path, false).is_err() {
            continue;
        }
        if let Some(st) = procfs::parse_task_stat(buf.as_bytes()) {
            scan_children.entry(st.ppid).or_default().push(pid);
        }
    }
    scan_children.retain(|_, c| !c.is_empty());
}

/// Each CPU's utilisation between two readings of /proc/stat, percent, in the order of
/// `now`; 0 for a CPU that `before` does not have.
pub(super) fn cpu_percents(before: &[CpuTicks], now: &[CpuTicks]) -> Vec<f64> {
    now.iter()
        .map(|now| {
            let Some(before) = before.iter().find(|p| p.cpu == now.cpu) else {
                return 0.0;
            };
            let total = now.total.saturating_sub(before.total);
            let busy = now.busy.saturating_sub(before.busy).min(total);
            if total == 0 {
                0.0
            } else {
                100.0 * busy as f64 / total as f64
            }
        })
        .collect()
}

/// CLOCK_BOOTTIME in clock ticks of `hz`, the clock of a thread's start time.
pub(super) fn boot_ticks(hz: f64) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a live pointer to a timespec for the kernel (or vDSO) to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    if rc != 0 {
        return 0;
    }
    let secs = ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9;
    (secs * hz) as u64
}

/// `/proc/<pid>/io`'s counters as a row's.
pub(super) fn io_counters(io: &procfs::Io) -> IoCounters {
    let mut c = IoCounters::default();
    c.syscr = io.syscr;
    c.syscw = io.syscw;
    c.rchar = io.rchar;
    c.wchar = io.wchar;
    c.read_bytes = io.read_bytes;
    c.write_bytes = io.write_bytes;
    c
}

/// A quarter of the soft limit on open files, at most 1024.
pub(super) fn default_max_open_files() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a live pointer to an rlimit for the kernel to fill.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if rc != 0 {
        return 64;
    }
    usize::try_from(lim.rlim_cur / 4)
        .unwrap_or(usize::MAX)
        .min(1024)
}
