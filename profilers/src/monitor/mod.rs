//! Resource monitors read from /proc: memory, threads, CPU, context switches and I/O of
//! the worker's whole process tree, and the utilisation of every CPU of the machine.
//!
//! A [`TreeMonitor`] follows a root process and every descendant, which come and go during
//! a run (an ipc ring's main node spawns its nodes). Each [`TreeMonitor::sample`] finds the
//! tree again and reads, per thread, its `stat` (CPU time, name) and `status` (context
//! switches; for the main thread also memory and the thread count), per process its `io`,
//! and once /proc/stat for the per-core figures. Files are held open from sample to sample
//! (one `pread` each, within a budget of descriptors), buffers are reused and names are
//! interned: `benches/tree_monitor.rs` measures the cost on a 100-process tree.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::fs::File;
use std::sync::Arc;
use std::time::Instant;

use benchtop_profile::{
    ContextSwitches, IoCounters, Resources, ThreadCpu, ThreadSummary, TimeseriesRow,
};

use crate::ProfilerError;
use crate::lifetimes::{LifeTable, Lifetimes, sort_busiest_first};
use crate::procfs::{self, CpuTicks, ProcBuf};
use crate::sampler::monotonic_ns;

mod read;
mod state;

use read::default_max_open_files;
use state::{
    ExitedThread, OwnedStat, ProcState, ThreadRead, ThreadReading, ThreadState, Visit, add_ctx,
    add_io, aggregate, max_io, percent, sub_io,
};

/// How many of the busiest threads [`TreeSample::fill_row`] callers usually put in a row.
pub const DEFAULT_TOP_THREADS: usize = 5;

/// How a [`TreeMonitor`] finds the descendants of its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Discovery {
    /// `ChildrenFiles` when the kernel has them (CONFIG_PROC_CHILDREN), else `ProcScan`.
    #[default]
    Auto,
    /// Read `/proc/<pid>/task/<tid>/children` of every thread of the tree: cost grows with
    /// the tree only.
    ChildrenFiles,
    /// Read the parent of every process of the machine from /proc/*/stat: cost grows with
    /// every process on the machine.
    ProcScan,
}

/// Options of a [`TreeMonitor`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TreeMonitorOptions {
    /// How descendants are found.
    pub discovery: Discovery,
    /// Threads that have exited kept for [`TreeMonitor::threads_summary`]; later ones are
    /// only counted ([`TreeMonitor::threads_dropped`]). Live threads are always tracked.
    /// Bounds the memory of a long run that keeps starting threads (about 100 bytes each).
    pub max_exited_threads: usize,
    /// /proc files held open between samples; `None` picks a quarter of the soft limit on
    /// open files, at most 1024. Files beyond it are opened and closed at every read.
    pub max_open_files: Option<usize>,
}

impl Default for TreeMonitorOptions {
    fn default() -> Self {
        TreeMonitorOptions {
            discovery: Discovery::Auto,
            max_exited_threads: 65_536,
            max_open_files: None,
        }
    }
}

/// One sample of a process tree: what [`TreeMonitor::sample`] returns.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct TreeSample {
    /// Totals of the tree, for [`TimeseriesRow::resources`].
    pub resources: Resources,
    /// Utilisation of each online CPU of the machine over the interval, percent (0–100),
    /// in CPU number order; empty when /proc/stat could not be read.
    pub cpu_percent_per_core: Vec<f64>,
    /// Every live thread of the tree, busiest over the interval first.
    pub threads: Vec<ThreadSample>,
    /// Every live process of the tree, root first, then in the order they were found
    /// (parents before their children).
    pub processes: Vec<ProcessSample>,
    /// Seconds since the previous sample (or since the monitor was created).
    pub interval_s: f64,
}

impl TreeSample {
    /// The `n` busiest threads of the interval, as a row's top list.
    pub fn top_threads(&self, n: usize) -> Vec<ThreadCpu> {
        self.threads
            .iter()
            .take(n)
            .map(|t| ThreadCpu::new(t.pid, t.tid, &*t.process, &*t.thread, t.cpu_percent))
            .collect()
    }

    /// Puts the sample into `row`: its resources, the per-core utilisation and the
    /// `top_threads` busiest threads.
    pub fn fill_row(&self, row: &mut TimeseriesRow, top_threads: usize) {
        row.resources = Some(self.resources);
        row.cpu_percent_per_core
            .clone_from(&self.cpu_percent_per_core);
        row.top_threads = self.top_threads(top_threads);
    }
}

/// One live thread in a [`TreeSample`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ThreadSample {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Name of the process (the comm of its main thread).
    pub process: Arc<str>,
    /// Name of the thread (its comm).
    pub thread: Arc<str>,
    /// CPU use over the interval, percent of one core.
    pub cpu_percent: f64,
    /// CPU time since the thread started, user + system, seconds.
    pub cpu_time_s: f64,
    /// Context switches over the interval.
    pub ctx_switches_interval: ContextSwitches,
}

/// One live process in a [`TreeSample`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProcessSample {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Name (the comm of its main thread).
    pub name: Arc<str>,
    /// Resident set size, bytes.
    pub rss_bytes: u64,
    /// The kernel's peak resident set size of this process (VmHWM), bytes.
    pub peak_rss_bytes: u64,
    /// Threads.
    pub threads: u32,
    /// Its I/O counters, when they could be read.
    pub io: Option<IoCounters>,
}

/// Samples the resources of a process and all its descendants.
///
/// ```no_run
/// use benchtop_profilers::monitor::{DEFAULT_TOP_THREADS, TreeMonitor};
/// use benchtop_profile::TimeseriesRow;
///
/// # fn main() -> Result<(), benchtop_profilers::ProfilerError> {
/// let mut monitor = TreeMonitor::new(4242);
/// // Every interval:
/// let sample = monitor.sample()?;
/// let mut row = TimeseriesRow::default();
/// sample.fill_row(&mut row, DEFAULT_TOP_THREADS);
/// // At the end, for threads.csv:
/// let threads = monitor.threads_summary();
/// # let _ = threads;
/// # Ok(())
/// # }
/// ```
///
/// What it cannot see: a thread or process that starts and ends between two samples, and
/// what one does between its last sample and its exit (its CPU time and context
/// switches up to its last sample are kept). I/O counters are those of the live
/// processes, each of which includes the threads it has lost and the children it has
/// reaped, so they carry on when a child is reaped by a process of the tree; the I/O of a
/// child left unreaped when its parent exits is lost (the totals never go down).
#[derive(Debug)]
pub struct TreeMonitor {
    root: u32,
    discovery: Discovery,
    max_exited_threads: usize,
    max_open_files: usize,
    open_files: usize,
    clock_ticks_per_s: f64,
    epoch: Instant,
    last_at: Instant,
    /// CLOCK_BOOTTIME of the previous sample, in clock ticks: threads that started later
    /// are new, all of their CPU time falls in the interval.
    last_boot_ticks: u64,
    generation: u64,
    procs: HashMap<u32, ProcState>,
    threads: HashMap<u32, ThreadState>,
    exited: Vec<ExitedThread>,
    exited_dropped: u64,
    /// Exited threads past `max_exited_threads`, by process and thread name.
    exited_groups: HashMap<(Arc<str>, Arc<str>), ThreadSummary>,
    /// The kernel's records of every thread's life, when they could be had.
    lifetimes: Option<Lifetimes>,
    /// CLOCK_MONOTONIC at `epoch`, nanoseconds: the kernel records' clock.
    epoch_ns: u64,
    /// CPU ticks and context switches of the threads that have exited, at their last
    /// sighting.
    exited_ticks: u64,
    exited_ctx: ContextSwitches,
    /// The largest I/O sums seen (they never go down).
    io_total: Option<IoCounters>,
    /// The largest tree sum of resident sizes seen since the peak (re)started.
    tree_peak_bytes: u64,
    /// The largest VmHWM of any one process seen since the peak (re)started.
    largest_peak_bytes: u64,
    names: HashSet<Arc<str>>,
    stat_file: Option<File>,
    cpu_prev: Vec<CpuTicks>,
    cpu_now: Vec<CpuTicks>,
    buf: ProcBuf,
    path: String,
    queue: Vec<u32>,
    tids: Vec<u32>,
    scan_children: HashMap<u32, Vec<u32>>,
}

impl TreeMonitor {
    /// A monitor of `root` and its descendants with default options. It takes a first
    /// reading now (if the process exists), so the first [`TreeMonitor::sample`] reports
    /// CPU use since this call.
    pub fn new(root: u32) -> Self {
        Self::with_options(root, &TreeMonitorOptions::default())
    }

    /// A monitor of `root` and its descendants.
    pub fn with_options(root: u32, opts: &TreeMonitorOptions) -> Self {
        // SAFETY: sysconf has no memory arguments.
        let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let discovery = match opts.discovery {
            Discovery::Auto => {
                if std::path::Path::new("/proc/thread-self/children").exists() {
                    Discovery::ChildrenFiles
                } else {
                    Discovery::ProcScan
                }
            }
            d => d,
        };
        let now = Instant::now();
        let mut m = TreeMonitor {
            root,
            discovery,
            max_exited_threads: opts.max_exited_threads,
            max_open_files: opts.max_open_files.unwrap_or_else(default_max_open_files),
            open_files: 0,
            clock_ticks_per_s: if tck > 0 { tck as f64 } else { 100.0 },
            epoch: now,
            last_at: now,
            last_boot_ticks: 0,
            generation: 0,
            procs: HashMap::new(),
            threads: HashMap::new(),
            exited: Vec::new(),
            exited_dropped: 0,
            exited_groups: HashMap::new(),
            lifetimes: None,
            epoch_ns: 0,
            exited_ticks: 0,
            exited_ctx: ContextSwitches::default(),
            io_total: None,
            tree_peak_bytes: 0,
            largest_peak_bytes: 0,
            names: HashSet::new(),
            stat_file: None,
            cpu_prev: Vec::new(),
            cpu_now: Vec::new(),
            buf: ProcBuf::default(),
            path: String::with_capacity(64),
            queue: Vec::new(),
            tids: Vec::new(),
            scan_children: HashMap::new(),
        };
        let _ = m.sample();
        m.epoch = m.last_at;
        // The same moment on the kernel records' clock (Instant is CLOCK_MONOTONIC).
        m.epoch_ns = monotonic_ns()
            .saturating_sub(u64::try_from(m.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX));
        for t in m.threads.values_mut() {
            t.first_seen_s = 0.0;
            t.last_seen_s = 0.0;
        }
        m
    }

    /// The root process id.
    pub fn pid(&self) -> u32 {
        self.root
    }

    /// How descendants are found ([`Discovery::Auto`] resolved).
    pub fn discovery(&self) -> Discovery {
        self.discovery
    }

    /// Reads the tree now: its totals, the per-core utilisation and every live thread.
    /// [`ProfilerError::ProcessGone`] once the root has exited (a zombie counts as
    /// exited); descendants that come and go, and files that cannot be read, are never
    /// errors.
    pub fn sample(&mut self) -> Result<TreeSample, ProfilerError> {
        if let Some(lifetimes) = &mut self.lifetimes {
            lifetimes.drain();
        }
        let now = Instant::now();
        let boot_ticks = self.boot_ticks();
        let wall = now.saturating_duration_since(self.last_at).as_secs_f64();
        let at_s = now.saturating_duration_since(self.epoch).as_secs_f64();
        self.generation += 1;
        let generation = self.generation;

        let cpu_percent_per_core = self.read_cpus();

        if self.discovery == Discovery::ProcScan {
            self.scan_processes();
        }
        let mut res = Resources::default();
        let mut processes = Vec::new();
        let mut io_sum = IoCounters::default();
        let mut io_read = false;
        let mut max_hwm_bytes = 0u64;
        let mut root_error = None;
        self.queue.clear();
        self.queue.push(self.root);
        let mut next = 0;
        while let Some(&pid) = self.queue.get(next) {
            next += 1;
            match self.visit_process(pid, at_s) {
                Ok(Visit::Live(p)) => {
                    res.processes += 1;
                    res.threads = res.threads.saturating_add(p.threads);
                    res.rss_bytes = res.rss_bytes.saturating_add(p.rss_bytes);
                    max_hwm_bytes = max_hwm_bytes.max(p.peak_rss_bytes);
                    match p.io {
                        Some(io) => {
                            add_io(&mut io_sum, &io);
                            io_read = true;
                        }
                        None => res.io_unreadable_processes += 1,
                    }
                    processes.push(p);
                }
                Ok(Visit::Zombie(io)) => {
                    if let Some(io) = io {
                        add_io(&mut io_sum, &io);
                        io_read = true;
                    }
                }
                Ok(Visit::Seen) => {}
                Ok(Visit::Gone) => self.forget_process(pid),
                Err(e) => {
                    // Only the root's failures are errors (visit_process says so).
                    self.forget_process(pid);
                    root_error = Some(e);
                    break;
                }
            }
        }

        // Threads not seen in this sample have exited: keep their last figures.
        let mut threads = Vec::with_capacity(self.threads.len());
        let mut interval_cpu_s = 0.0f64;
        let mut interval_ctx = ContextSwitches::default();
        let mut live_ticks = 0u64;
        let mut live_ctx = ContextSwitches::default();
        let hz = self.clock_ticks_per_s;
        let mut gone = Vec::new();
        for (&tid, t) in &mut self.threads {
            if t.seen != generation {
                gone.push(tid);
                continue;
            }
            let ticks = t.utime.saturating_add(t.stime);
            let d_ticks = ticks.saturating_sub(t.prev_ticks);
            // The kernel's nanoseconds where it keeps them, else clock ticks; a thread is
            // on one CPU at a time, so never more than the interval.
            let d_cpu_s = match (t.cpu_ns, t.prev_cpu_ns) {
                (Some(now), Some(before)) => now.saturating_sub(before) as f64 / 1e9,
                _ => d_ticks as f64 / hz,
            }
            .min(wall);
            let d_ctx = ContextSwitches::new(
                t.ctx.voluntary.saturating_sub(t.prev_ctx.voluntary),
                t.ctx.involuntary.saturating_sub(t.prev_ctx.involuntary),
            );
            t.prev_ticks = ticks;
            t.prev_cpu_ns = t.cpu_ns;
            t.prev_ctx = t.ctx;
            interval_cpu_s += d_cpu_s;
            add_ctx(&mut interval_ctx, &d_ctx);
            live_ticks = live_ticks.saturating_add(ticks);
            add_ctx(&mut live_ctx, &t.ctx);
            threads.push(ThreadSample {
                pid: t.pid,
                tid,
                process: t.process.clone(),
                thread: t.name.clone(),
                cpu_percent: percent(d_cpu_s, wall),
                cpu_time_s: t.cpu_ns.map_or(ticks as f64 / hz, |ns| ns as f64 / 1e9),
                ctx_switches_interval: d_ctx,
            });
        }
        for tid in gone {
            self.retire_thread(tid);
        }
        let mut closed = 0;
        self.procs.retain(|_, p| {
            let keep = p.seen == generation;
            if !keep && p.io.is_some() {
                closed += 1;
            }
            keep
        });
        self.open_files -= closed;
        self.trim_names();

        self.last_at = now;
        self.last_boot_ticks = boot_ticks;
        if let Some(e) = root_error {
            return Err(e);
        }

        threads.sort_by(|a, b| {
            b.cpu_percent
                .total_cmp(&a.cpu_percent)
                .then(a.pid.cmp(&b.pid))
                .then(a.tid.cmp(&b.tid))
        });
        // Two figures: the largest one process reached (what `time -v` reports) and the
        // largest the tree's sum was at an interval.
        self.largest_peak_bytes = self.largest_peak_bytes.max(max_hwm_bytes);
        self.tree_peak_bytes = self.tree_peak_bytes.max(res.rss_bytes);
        res.peak_rss_bytes = self.largest_peak_bytes;
        res.tree_peak_rss_bytes = Some(self.tree_peak_bytes);
        // At most every live thread on a CPU of its own: never more than the machine has.
        let cores = if cpu_percent_per_core.is_empty() {
            std::thread::available_parallelism().map_or(1, usize::from)
        } else {
            cpu_percent_per_core.len()
        };
        let busiest = (threads.len().min(cores).max(1)) as f64;
        res.cpu_percent = percent(interval_cpu_s, wall).min(100.0 * busiest);
        res.cpu_time_s = self.exited_ticks.saturating_add(live_ticks) as f64 / hz;
        let mut total_ctx = self.exited_ctx;
        add_ctx(&mut total_ctx, &live_ctx);
        res.ctx_switches_total = Some(total_ctx);
        res.ctx_switches_interval = Some(interval_ctx);
        if io_read {
            let before = self.io_total;
            let total = match before {
                Some(b) => max_io(&b, &io_sum),
                None => io_sum,
            };
            self.io_total = Some(total);
            res.io_total = Some(total);
            res.io_interval = Some(match before {
                Some(b) => sub_io(&total, &b),
                // The first reading: nothing to take a difference from.
                None => IoCounters::default(),
            });
        }
        Ok(TreeSample {
            resources: res,
            cpu_percent_per_core,
            threads,
            processes,
            interval_s: wall,
        })
    }

    /// Every thread seen so far, live or exited, busiest (most CPU time) first: the
    /// content of threads.csv. At most [`TreeMonitorOptions::max_exited_threads`] exited
    /// threads are lines of their own, the rest aggregated lines by process and thread
    /// name. With [`TreeMonitor::follow_lifetimes`], the kernel's records of the threads
    /// that lived between two samples are lines too, and those the samples saw get their
    /// parent, start, end and CPU time counted at exit ([`LifeTable::merge`]).
    pub fn threads_summary(&mut self) -> Vec<ThreadSummary> {
        let hz = self.clock_ticks_per_s;
        let mut all: Vec<ThreadSummary> = self
            .exited
            .iter()
            .map(|e| e.summary.clone())
            .chain(self.threads.iter().map(|(&tid, t)| t.summary(tid, hz)))
            .chain(self.exited_groups.values().cloned())
            .collect();
        if let Some(lifetimes) = &mut self.lifetimes {
            lifetimes.drain();
            let live = &self.threads;
            return lifetimes.table().merge(all, self.epoch_ns, |pid, tid| {
                live.get(&tid).is_some_and(|t| t.pid == pid)
            });
        }
        sort_busiest_first(&mut all);
        all
    }

    /// Follows the tree's threads by the kernel's records too (see
    /// [`crate::lifetimes`]): [`TreeMonitor::sample`] drains them, and
    /// [`TreeMonitor::threads_summary`] counts every thread, however short it lived.
    pub fn follow_lifetimes(&mut self, lifetimes: Lifetimes) {
        self.lifetimes = Some(lifetimes);
    }

    /// The kernel's records of the tree's threads, when followed.
    pub fn lifetimes(&self) -> Option<&LifeTable> {
        self.lifetimes.as_ref().map(Lifetimes::table)
    }

    /// CLOCK_MONOTONIC when the monitor's clock (`first_seen_s`, `last_seen_s`) started,
    /// nanoseconds.
    pub fn epoch_monotonic_ns(&self) -> u64 {
        self.epoch_ns
    }

    /// Forgets the peaks read so far: they count from the next sample on. For a command
    /// held at an exec gate, called once the gate has exec'd it, so that the gate (the
    /// samples before read its image) is not the program's peak; the samples after read
    /// the program's own VmHWM, which the kernel starts afresh at each exec.
    pub fn restart_peak(&mut self) {
        self.tree_peak_bytes = 0;
        self.largest_peak_bytes = 0;
    }

    /// The largest peak resident set size (VmHWM) of any one process of the tree seen
    /// by the samples, bytes: what `/usr/bin/time -v` calls the maximum resident set
    /// size, as far as polls see it (a process that lived between two samples, or a
    /// peak reached after the last one, is missed). 0 before the first sample.
    pub fn largest_peak_bytes(&self) -> u64 {
        self.largest_peak_bytes
    }

    /// The thread ids of the tree's live threads at the last sample, in no order.
    pub fn live_tids(&self) -> Vec<u32> {
        self.threads.keys().copied().collect()
    }

    /// Exited threads that are not lines of their own in
    /// [`TreeMonitor::threads_summary`] (the table was full) but in aggregated lines.
    pub fn threads_dropped(&self) -> u64 {
        self.exited_dropped
    }

    /// /proc files held open now.
    pub fn open_files(&self) -> usize {
        self.open_files
    }

    /// Reads one process of the tree and queues its children.
    fn visit_process(&mut self, pid: u32, at_s: f64) -> Result<Visit, ProfilerError> {
        let generation = self.generation;
        let proc = self.procs.entry(pid).or_default();
        if proc.seen == generation {
            return Ok(Visit::Seen);
        }
        proc.seen = generation;
        let root = pid == self.root;

        // The main thread's status: memory and the thread count of the process.
        let leader = match self.read_thread(pid, pid, at_s) {
            Ok(r) => r,
            Err(ThreadRead::Gone) if root => return Err(ProfilerError::ProcessGone { pid }),
            Err(ThreadRead::Failed(e)) if root => return Err(e),
            Err(_) => return Ok(Visit::Gone),
        };
        if leader.zombie && leader.threads <= 1 {
            // An exited process not yet reaped: its I/O still counts (until its parent
            // reaps it and takes it over), nothing else does.
            if root {
                return Err(ProfilerError::ProcessGone { pid });
            }
            return Ok(Visit::Zombie(self.read_io(pid)));
        }

        let mut rss_kb = leader.rss_kb;
        let mut hwm_kb = leader.hwm_kb;
        let mut threads = u32::from(!leader.zombie);
        if leader.threads > 1 || leader.zombie {
            self.list_tasks(pid);
            let tids = std::mem::take(&mut self.tids);
            for &tid in tids.iter().filter(|&&tid| tid != pid) {
                if let Ok(r) = self.read_thread(pid, tid, at_s)
                    && !r.zombie
                {
                    threads += 1;
                    rss_kb = rss_kb.max(r.rss_kb);
                    hwm_kb = hwm_kb.max(r.hwm_kb);
                }
            }
            self.tids = tids;
        }
        if threads == 0 {
            if root {
                return Err(ProfilerError::ProcessGone { pid });
            }
            return Ok(Visit::Gone);
        }
        if self.discovery == Discovery::ProcScan
            && let Some(children) = self.scan_children.get(&pid)
        {
            self.queue.extend_from_slice(children);
        }
        let io = self.read_io(pid);
        let name = self
            .procs
            .get(&pid)
            .and_then(|p| p.comm.clone())
            .unwrap_or_else(|| Arc::from(""));
        Ok(Visit::Live(ProcessSample {
            pid,
            ppid: leader.ppid,
            name,
            rss_bytes: rss_kb.saturating_mul(1024),
            peak_rss_bytes: hwm_kb.saturating_mul(1024),
            threads,
            io,
        }))
    }

    /// Reads thread `tid` of `pid`: its status, its stat and (with children files) its
    /// children, which are queued. A zombie (an exited main thread whose process lives on,
    /// or a process not yet reaped) is read but not kept: its state, if any, is retired at
    /// the end of the sample with its last figures.
    fn read_thread(&mut self, pid: u32, tid: u32, at_s: f64) -> Result<ThreadReading, ThreadRead> {
        let generation = self.generation;
        let mut state = self.threads.remove(&tid);
        if state.as_ref().is_some_and(|t| t.pid != pid) {
            // The tid now belongs to another process: the old thread has exited.
            if let Some(old) = state.take() {
                self.retire(tid, old);
            }
        }
        let mut files: [Option<File>; 4] = match &mut state {
            Some(t) => [
                t.status.take(),
                t.stat.take(),
                t.children.take(),
                t.schedstat.take(),
            ],
            None => [None, None, None, None],
        };
        let held = files.iter().filter(|f| f.is_some()).count();
        let keep = held > 0 || self.open_files + files.len() <= self.max_open_files;
        let result = self.read_thread_files(pid, tid, keep, &mut files);
        let now_held = files.iter().filter(|f| f.is_some()).count();
        self.open_files = self.open_files + now_held - held;
        // Exited, or exiting: a user thread whose memory is gone is on its way out, and
        // counting it would show a live process with no RSS.
        let zombie = matches!(&result, Ok((status, _, _))
            if matches!(status.state, b'Z' | b'X') || !status.has_memory);
        let (status, stat, cpu_ns) = match result {
            Ok(r) if !zombie => r,
            other => {
                for f in files.iter_mut() {
                    if f.take().is_some() {
                        self.open_files -= 1;
                    }
                }
                if let Some(t) = state {
                    // Left unseen: retired at the end of the sample.
                    self.threads.insert(tid, t);
                }
                return other.map(|(status, stat, _)| ThreadReading {
                    zombie: true,
                    threads: status.threads,
                    rss_kb: status.rss_kb,
                    hwm_kb: status.hwm_kb,
                    ppid: stat.ppid,
                });
            }
        };
        if let Some(old) = state.take_if(|t| t.start_ticks != stat.start_ticks) {
            // The same pid and tid, another thread: the first one has exited.
            self.retire(tid, old);
        }
        let name = self.intern_if_changed(state.as_ref().map(|t| &t.name), stat.comm.as_ref());
        let proc = self.procs.entry(pid).or_default();
        if tid == pid && proc.comm.as_ref() != Some(&name) {
            proc.comm = Some(name.clone());
        }
        let process = proc.comm.clone().unwrap_or_else(|| name.clone());
        let ctx = ContextSwitches::new(
            status.voluntary_ctxt_switches,
            status.nonvoluntary_ctxt_switches,
        );
        let mut t = match state {
            Some(mut t) => {
                t.name = name;
                t.process = process;
                t.ppid = stat.ppid;
                t.utime = stat.utime;
                t.stime = stat.stime;
                t.cpu_ns = cpu_ns;
                t.ctx = ctx;
                t
            }
            None => {
                // Started after the previous sample: all its CPU time and switches fall
                // in this interval. Else (the first sample, or a thread found late) only
                // what comes after this sample counts.
                let new = self.generation > 1 && stat.start_ticks >= self.last_boot_ticks;
                let ticks = stat.utime.saturating_add(stat.stime);
                ThreadState {
                    pid,
                    ppid: stat.ppid,
                    start_ticks: stat.start_ticks,
                    name,
                    process,
                    utime: stat.utime,
                    stime: stat.stime,
                    cpu_ns,
                    ctx,
                    prev_ticks: if new { 0 } else { ticks },
                    prev_cpu_ns: if new { cpu_ns.map(|_| 0) } else { cpu_ns },
                    prev_ctx: if new { ContextSwitches::default() } else { ctx },
                    first_seen_s: at_s,
                    last_seen_s: at_s,
                    seen: 0,
                    stat: None,
                    status: None,
                    children: None,
                    schedstat: None,
                }
            }
        };
        let [status_file, stat_file, children_file, schedstat_file] = files;
        t.last_seen_s = at_s;
        t.seen = generation;
        t.status = status_file;
        t.stat = stat_file;
        t.children = children_file;
        t.schedstat = schedstat_file;
        self.threads.insert(tid, t);
        Ok(ThreadReading {
            zombie: false,
            threads: status.threads,
            rss_kb: status.rss_kb,
            hwm_kb: status.hwm_kb,
            ppid: stat.ppid,
        })
    }

    /// The status, stat, children and schedstat files of a thread; children are queued.
    /// The schedstat's nanoseconds on CPU are `None` where the kernel keeps none.
    fn read_thread_files(
        &mut self,
        pid: u32,
        tid: u32,
        keep: bool,
        files: &mut [Option<File>; 4],
    ) -> Result<(procfs::Status, OwnedStat, Option<u64>), ThreadRead> {
        let [status_file, stat_file, children_file, schedstat_file] = files;
        let status = {
            self.task_path(pid, tid, "status");
            self.buf
                .read_cached(status_file, &self.path, keep)
                .map_err(|e| ThreadRead::from_io(&self.path, e))?;
            procfs::parse_status_bytes(self.buf.as_bytes())
        };
        if status.state == 0 {
            return Err(ThreadRead::Failed(ProfilerError::Parse {
                path: self.path.clone().into(),
                reason: "no State: line".into(),
            }));
        }
        let stat = {
            self.task_path(pid, tid, "stat");
            self.buf
                .read_cached(stat_file, &self.path, keep)
                .map_err(|e| ThreadRead::from_io(&self.path, e))?;
            let st = procfs::parse_task_stat(self.buf.as_bytes()).ok_or_else(|| {
                ThreadRead::Failed(ProfilerError::Parse {
                    path: self.path.clone().into(),
                    reason: "not a stat line".into(),
                })
            })?;
            OwnedStat::from(&st)
        };
        if self.discovery == Discovery::ChildrenFiles && !matches!(status.state, b'Z' | b'X') {
            self.task_path(pid, tid, "children");
            // A thread that exits now simply has no children to add.
            if self
                .buf
                .read_cached(children_file, &self.path, keep)
                .is_ok()
            {
                procfs::parse_children(self.buf.as_bytes(), &mut self.queue);
            }
        }
        self.task_path(pid, tid, "schedstat");
        let cpu_ns = self
            .buf
            .read_cached(schedstat_file, &self.path, keep)
            .ok()
            .and_then(|()| procfs::parse_schedstat_ns(self.buf.as_bytes()));
        Ok((status, stat, cpu_ns))
    }

    /// `/proc/<pid>/io`: `None` when it cannot be read (gone, or no permission to trace the
    /// process, which is remembered).
    fn read_io(&mut self, pid: u32) -> Option<IoCounters> {
        let keep = self.open_files < self.max_open_files;
        let proc = self.procs.entry(pid).or_default();
        if proc.io_denied {
            return None;
        }
        self.path.clear();
        let _ = write!(self.path, "/proc/{pid}/io");
        let held = proc.io.is_some();
        let mut read = self.buf.read_cached(&mut proc.io, &self.path, keep || held);
        if held && read.as_ref().is_err_and(procfs::is_gone) {
            // The file held open was another process's of the same pid (it was reused).
            read = self.buf.read_cached(&mut proc.io, &self.path, true);
        }
        match (held, proc.io.is_some()) {
            (true, false) => self.open_files -= 1,
            (false, true) => self.open_files += 1,
            _ => {}
        }
        match read {
            Ok(()) => procfs::parse_io(self.buf.as_bytes()).map(|io| read::io_counters(&io)),
            Err(e) => {
                if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
                    proc.io_denied = true;
                }
                None
            }
        }
    }

    /// The thread ids of `pid` into `self.tids`.
    fn list_tasks(&mut self, pid: u32) {
        read::list_tasks(pid, &mut self.path, &mut self.tids);
    }

    /// With [`Discovery::ProcScan`]: the children of every process of the machine.
    fn scan_processes(&mut self) {
        read::scan_processes(&mut self.buf, &mut self.path, &mut self.scan_children);
    }

    /// Per-core utilisation since the previous reading of /proc/stat.
    fn read_cpus(&mut self) -> Vec<f64> {
        let held = self.stat_file.is_some();
        let keep = held || self.open_files < self.max_open_files;
        let read = self
            .buf
            .read_cached(&mut self.stat_file, "/proc/stat", keep);
        match (held, self.stat_file.is_some()) {
            (true, false) => self.open_files -= 1,
            (false, true) => self.open_files += 1,
            _ => {}
        }
        if read.is_err() {
            return Vec::new();
        }
        self.cpu_now.clear();
        procfs::parse_proc_stat_cpus(self.buf.as_bytes(), &mut self.cpu_now);
        let percents = read::cpu_percents(&self.cpu_prev, &self.cpu_now);
        std::mem::swap(&mut self.cpu_prev, &mut self.cpu_now);
        percents
    }

    /// Drops what is held for a process that has gone.
    fn forget_process(&mut self, pid: u32) {
        if self.procs.remove(&pid).is_some_and(|p| p.io.is_some()) {
            self.open_files -= 1;
        }
    }

    /// Moves a thread that has exited to the exited list, keeping its figures.
    fn retire_thread(&mut self, tid: u32) {
        if let Some(t) = self.threads.remove(&tid) {
            self.retire(tid, t);
        }
    }

    fn retire(&mut self, tid: u32, t: ThreadState) {
        self.open_files -= t.open_files();
        self.exited_ticks = self
            .exited_ticks
            .saturating_add(t.utime.saturating_add(t.stime));
        add_ctx(&mut self.exited_ctx, &t.ctx);
        let summary = t.summary(tid, self.clock_ticks_per_s);
        if self.exited.len() < self.max_exited_threads {
            self.exited.push(ExitedThread { summary });
        } else {
            self.exited_dropped += 1;
            aggregate(&mut self.exited_groups, summary);
        }
    }

    /// The interned name for `comm`, reusing `current` when it has not changed.
    fn intern_if_changed(&mut self, current: Option<&Arc<str>>, comm: &[u8]) -> Arc<str> {
        if let Some(c) = current
            && c.as_bytes() == comm
        {
            return c.clone();
        }
        let name = String::from_utf8_lossy(comm);
        if let Some(n) = self.names.get(&*name) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(&*name);
        self.names.insert(n.clone());
        n
    }

    /// Forgets interned names no thread uses any more, once there are many.
    fn trim_names(&mut self) {
        if self.names.len() > 4096 {
            self.names.retain(|n| Arc::strong_count(n) > 1);
        }
    }

    fn task_path(&mut self, pid: u32, tid: u32, file: &str) {
        self.path.clear();
        let _ = write!(self.path, "/proc/{pid}/task/{tid}/{file}");
    }

    /// CLOCK_BOOTTIME in clock ticks, the clock of a thread's start time.
    fn boot_ticks(&self) -> u64 {
        read::boot_ticks(self.clock_ticks_per_s)
    }
}
