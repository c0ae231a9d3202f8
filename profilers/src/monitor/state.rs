//! The state a [`TreeMonitor`](super::TreeMonitor) keeps between samples (live threads
//! with their files held open, processes, exited threads), what reading a thread or a
//! process finds, and the sums of its figures.

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;

use benchtop_profile::{Aggregated, ContextSwitches, IoCounters, ThreadSummary};

use super::ProcessSample;

use crate::ProfilerError;
use crate::procfs;

/// A live thread, with its files held open.
#[derive(Debug)]
pub(super) struct ThreadState {
    pub(super) pid: u32,
    /// The parent of its process.
    pub(super) ppid: u32,
    pub(super) start_ticks: u64,
    pub(super) name: Arc<str>,
    pub(super) process: Arc<str>,
    pub(super) utime: u64,
    pub(super) stime: u64,
    pub(super) ctx: ContextSwitches,
    /// Nanoseconds on CPU from its schedstat, when the kernel keeps it: the interval's CPU
    /// share without the clock tick's 10 ms steps.
    pub(super) cpu_ns: Option<u64>,
    /// CPU ticks, nanoseconds and switches at the previous sample, for the interval
    /// figures.
    pub(super) prev_ticks: u64,
    pub(super) prev_cpu_ns: Option<u64>,
    pub(super) prev_ctx: ContextSwitches,
    pub(super) first_seen_s: f64,
    pub(super) last_seen_s: f64,
    /// The sample that last read it.
    pub(super) seen: u64,
    pub(super) stat: Option<File>,
    pub(super) status: Option<File>,
    pub(super) children: Option<File>,
    pub(super) schedstat: Option<File>,
}

impl ThreadState {
    pub(super) fn open_files(&self) -> usize {
        [&self.stat, &self.status, &self.children, &self.schedstat]
            .iter()
            .filter(|f| f.is_some())
            .count()
    }

    pub(super) fn summary(&self, tid: u32, hz: f64) -> ThreadSummary {
        let mut s = ThreadSummary::new(self.pid, tid, &*self.process, &*self.name);
        let (user, system) = (self.utime as f64 / hz, self.stime as f64 / hz);
        // The kernel's nanoseconds, split as its clock ticks split user from system time:
        // a thread of a short run shows the CPU it used, not 0.00 s.
        (s.user_s, s.system_s) = match self.cpu_ns {
            Some(ns) if user + system > 0.0 => {
                let total = ns as f64 / 1e9;
                let user_share = total * user / (user + system);
                (user_share, total - user_share)
            }
            Some(ns) => (ns as f64 / 1e9, 0.0),
            None => (user, system),
        };
        s.ctx_switches = self.ctx;
        s.first_seen_s = self.first_seen_s;
        s.last_seen_s = self.last_seen_s;
        s.ppid = Some(self.ppid);
        s
    }
}

/// A process of the tree.
#[derive(Debug, Default)]
pub(super) struct ProcState {
    pub(super) comm: Option<Arc<str>>,
    pub(super) io: Option<File>,
    pub(super) io_denied: bool,
    pub(super) seen: u64,
}

/// An exited thread kept for the summary.
#[derive(Debug)]
pub(super) struct ExitedThread {
    pub(super) summary: ThreadSummary,
}

/// What visiting a process found.
pub(super) enum Visit {
    Live(ProcessSample),
    /// Exited, not yet reaped: only its I/O counters.
    Zombie(Option<IoCounters>),
    /// Reached twice in one sample.
    Seen,
    Gone,
}

/// Why a thread could not be read.
pub(super) enum ThreadRead {
    Gone,
    Failed(ProfilerError),
}

impl ThreadRead {
    pub(super) fn from_io(path: &str, e: std::io::Error) -> Self {
        if procfs::is_gone(&e) {
            ThreadRead::Gone
        } else {
            ThreadRead::Failed(ProfilerError::io(path, e))
        }
    }
}

/// What the process needs from one of its threads' files.
pub(super) struct ThreadReading {
    /// An exited thread (state `Z` or `X`).
    pub(super) zombie: bool,
    pub(super) threads: u32,
    pub(super) rss_kb: u64,
    pub(super) hwm_kb: u64,
    pub(super) ppid: u32,
}

/// [`procfs::TaskStat`] without the borrow of the read buffer; the comm is at most 15
/// bytes (64 leaves room for kernels that allow longer ones).
pub(super) struct OwnedStat {
    pub(super) comm: SmallComm,
    pub(super) ppid: u32,
    pub(super) utime: u64,
    pub(super) stime: u64,
    pub(super) start_ticks: u64,
}

impl From<&procfs::TaskStat<'_>> for OwnedStat {
    fn from(st: &procfs::TaskStat<'_>) -> Self {
        OwnedStat {
            comm: SmallComm::new(st.comm),
            ppid: st.ppid,
            utime: st.utime,
            stime: st.stime,
            start_ticks: st.start_ticks,
        }
    }
}

/// A thread name copied without allocating.
pub(super) struct SmallComm {
    bytes: [u8; 64],
    len: usize,
}

impl SmallComm {
    pub(super) fn new(comm: &[u8]) -> Self {
        let len = comm.len().min(64);
        let mut bytes = [0; 64];
        bytes[..len].copy_from_slice(&comm[..len]);
        SmallComm { bytes, len }
    }
}

impl AsRef<[u8]> for SmallComm {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

pub(super) fn percent(cpu_s: f64, wall_s: f64) -> f64 {
    if wall_s > 0.0 {
        100.0 * cpu_s / wall_s
    } else {
        0.0
    }
}

pub(super) fn add_ctx(sum: &mut ContextSwitches, c: &ContextSwitches) {
    sum.voluntary = sum.voluntary.saturating_add(c.voluntary);
    sum.involuntary = sum.involuntary.saturating_add(c.involuntary);
}

pub(super) fn add_io(sum: &mut IoCounters, c: &IoCounters) {
    *sum = io_with(sum, c, u64::saturating_add);
}

pub(super) fn max_io(a: &IoCounters, b: &IoCounters) -> IoCounters {
    io_with(a, b, std::cmp::max)
}

pub(super) fn sub_io(a: &IoCounters, b: &IoCounters) -> IoCounters {
    io_with(a, b, u64::saturating_sub)
}

/// Groups of exited threads past the table's limit.
const MAX_GROUPS: usize = 4096;

/// Adds an exited thread to the aggregated line of its process and thread name (or,
/// past [`MAX_GROUPS`] names, to one line without names).
pub(super) fn aggregate(
    groups: &mut HashMap<(Arc<str>, Arc<str>), ThreadSummary>,
    t: ThreadSummary,
) {
    let mut key: (Arc<str>, Arc<str>) =
        (Arc::from(t.process.as_str()), Arc::from(t.thread.as_str()));
    if !groups.contains_key(&key) && groups.len() >= MAX_GROUPS {
        key = (Arc::from(""), Arc::from(""));
    }
    let line = groups.entry(key).or_insert_with_key(|(process, thread)| {
        let mut line = ThreadSummary::new(0, 0, &**process, &**thread);
        line.first_seen_s = t.first_seen_s;
        line.aggregated = Some(Aggregated::default());
        line
    });
    line.user_s += t.user_s;
    line.system_s += t.system_s;
    add_ctx(&mut line.ctx_switches, &t.ctx_switches);
    line.first_seen_s = line.first_seen_s.min(t.first_seen_s);
    line.last_seen_s = line.last_seen_s.max(t.last_seen_s);
    if let Some(a) = &mut line.aggregated {
        a.threads += 1;
        a.processes += u64::from(t.tid == t.pid);
    }
}
/// Every counter of `a` and `b` combined by `f`, field by field.
fn io_with(a: &IoCounters, b: &IoCounters, f: fn(u64, u64) -> u64) -> IoCounters {
    let mut out = *a;
    out.syscr = f(a.syscr, b.syscr);
    out.syscw = f(a.syscw, b.syscw);
    out.rchar = f(a.rchar, b.rchar);
    out.wchar = f(a.wchar, b.wchar);
    out.read_bytes = f(a.read_bytes, b.read_bytes);
    out.write_bytes = f(a.write_bytes, b.write_bytes);
    out
}
