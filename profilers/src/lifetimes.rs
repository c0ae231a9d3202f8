//! Every thread and process of a tree, however short it lived: its name, pid, parent,
//! start, end and CPU time, from the kernel's records rather than from polls.
//!
//! [`Lifetimes`] opens a `task-clock` counting event per CPU with `inherit` and
//! `inherit_stat` on every thread of a tree, each CPU's events writing into one ring
//! buffer of their own (no samples: only side-band records). Every thread created from
//! then on gets copies of the events, and the kernel writes, into those buffers:
//!
//! - `PERF_RECORD_FORK` as a thread or process is created (its pid, its creator, the
//!   time);
//! - `PERF_RECORD_COMM` as it is named (exec, `prctl(PR_SET_NAME)`);
//! - `PERF_RECORD_EXIT` as it exits;
//! - `PERF_RECORD_READ` for each of its copies as it exits (`inherit_stat`): its own
//!   `task-clock` on that CPU, so the copies add up to its whole CPU time.
//!
//! Buffers of their own, not the sampler's: these records are few (about 150 bytes a
//! thread and CPU) and are not lost with samples under load; what the kernel still drops
//! (a buffer full between two drains) is counted ([`LifeTable::lost`]). Threads that
//! existed when the events were opened have no fork or read record: the polls of
//! [`crate::TreeMonitor`] give theirs, and [`LifeTable::merge`] puts both together.
//!
//! ```no_run
//! use benchtop_profilers::lifetimes::Lifetimes;
//!
//! # fn main() -> Result<(), benchtop_profilers::ProfilerError> {
//! let mut lifetimes = Lifetimes::open(&[4242], false, 65_536)?;
//! // … every interval, and once more after the tree has exited:
//! lifetimes.drain();
//! println!("{} threads ended", lifetimes.table().exited().len());
//! # Ok(())
//! # }
//! ```

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use benchtop_profile::{Aggregated, ThreadSummary};
use perf_event::events::Software;
use perf_event::{Builder, Clock, Counter, ReadFormat, SampleFlag};

use crate::ProfilerError;
use crate::procfs;
use crate::records::{self, Comm, RECORD_COMM, RECORD_EXIT, RECORD_FORK, RECORD_LOST, Task};

/// `PERF_RECORD_READ`.
const RECORD_READ: u32 = 8;
/// `PERF_EVENT_IOC_SET_OUTPUT`: `_IO('$', 5)`.
const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
/// Data pages of each CPU's buffer, halved while the kernel refuses the mapping
/// (locked-memory limits): 512 KiB hold the records of about 3,000 threads that start
/// and end between two drains.
const RING_PAGES: usize = 128;
/// Groups of aggregated threads (by process and thread name) kept apart; the threads of
/// any further name go into one group without names.
const MAX_GROUPS: usize = 4096;
/// How many of the latest retired threads a late read record is looked for in.
const RETIRED_SEARCH: usize = 1024;
/// How far (seconds) a poll's sightings of a thread may fall outside the kernel's start
/// and end of it and still be the same thread: a poll's time is read once, before it
/// walks the tree (which takes milliseconds, more on a loaded machine), and the pid and
/// tid of a thread come back only after the kernel has handed out every other pid
/// (`pid_max`, 32,768 at least), so a generous margin joins no two threads.
const SIGHTING_SLACK_S: f64 = 0.5;
/// How long (ns) before its fork a thread's exit may be stamped and the fork still be
/// that thread's, read late (see [`LifeTable::apply`]): CPUs' clocks agree to within
/// microseconds, and a tid comes back only after the kernel has handed out every other
/// pid, which takes far longer.
const LATE_FORK_NS: u64 = 10_000_000;

/// The kernel's records of a tree's threads; see the [module](self).
pub struct Lifetimes {
    rings: Vec<perf_event::Sampler>,
    /// Events of the other threads, writing into the rings.
    redirected: Vec<Counter>,
    /// A `dummy` event on each thread the events were opened on, not inherited: see
    /// [`anchor`].
    anchors: Vec<Counter>,
    table: LifeTable,
    batch: Vec<(u64, Change)>,
}

impl Lifetimes {
    /// Events on each of `tids` (every live thread of the tree) and every thread they
    /// create from now on; with `on_exec` they start at each thread's exec (a child held
    /// at an exec gate). At most `max_exited` exited threads are kept one by one, the
    /// rest aggregated by name. A thread other than the first that has exited by the
    /// time its events open is passed over.
    ///
    /// [`ProfilerError::PermissionDenied`] when the kernel refuses the events,
    /// [`ProfilerError::RingBuffer`] when it refuses even a one-page buffer.
    pub fn open(tids: &[u32], on_exec: bool, max_exited: usize) -> Result<Self, ProfilerError> {
        let cpus = procfs::online_cpus()?;
        let page = page_size();
        let mut pages = RING_PAGES;
        let mut rings: Vec<Option<perf_event::Sampler>> = cpus.iter().map(|_| None).collect();
        let mut redirected = Vec::new();
        let mut anchors = Vec::with_capacity(tids.len());
        for (i, &tid) in tids.iter().enumerate() {
            let mut mine = Vec::with_capacity(cpus.len());
            let mut gone = false;
            for (slot, &cpu) in rings.iter_mut().zip(&cpus) {
                let counter = match builder(tid, cpu, on_exec).build() {
                    Ok(c) => c,
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) && i > 0 => {
                        gone = true;
                        break;
                    }
                    Err(e) => return Err(open_error(tid, cpu, e)),
                };
                match slot {
                    Some(ring) => {
                        set_output(counter.as_raw_fd(), ring.as_raw_fd()).map_err(|source| {
                            ProfilerError::PerfOpen {
                                pid: tid,
                                cpu,
                                source,
                            }
                        })?;
                        mine.push(counter);
                    }
                    None => *slot = Some(map_ring(tid, cpu, on_exec, counter, &mut pages, page)?),
                }
            }
            if gone {
                continue;
            }
            match anchor(tid) {
                Ok(a) => anchors.push(a),
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) && i > 0 => continue,
                Err(e) => return Err(open_error(tid, 0, e)),
            }
            redirected.append(&mut mine);
        }
        let rings = rings.into_iter().flatten().collect();
        Ok(Lifetimes {
            rings,
            redirected,
            anchors,
            table: LifeTable::new(max_exited),
            batch: Vec::new(),
        })
    }

    /// Reads every record written since the last drain into the table, in time order.
    pub fn drain(&mut self) {
        self.batch.clear();
        for ring in &mut self.rings {
            while let Some(record) = ring.next_record() {
                let ty = record.ty();
                let body = record.to_contiguous();
                if let Some(change) = Change::parse(ty, &body) {
                    self.batch.push(change);
                }
            }
        }
        // Each buffer is in time order, the buffers are not with each other.
        self.batch.sort_by_key(|&(time, _)| time);
        for (time, change) in self.batch.drain(..) {
            self.table.apply(time, change);
        }
        self.table.end_pass();
    }

    /// What has been drained so far.
    pub fn table(&self) -> &LifeTable {
        &self.table
    }

    /// Events held open (one ring buffer per CPU and one event per other thread and
    /// CPU).
    pub fn events(&self) -> usize {
        self.rings.len() + self.redirected.len() + self.anchors.len()
    }
}

/// A `dummy` event on `tid` that its children do not inherit. The kernel swaps the
/// event contexts of two tasks at a context switch when one is a copy of the other
/// (inherited, unchanged since) instead of scheduling their events out and in, and a
/// thread that exits holding the original events (the ones opened here) writes no
/// `PERF_RECORD_READ`: its CPU time would be lost. A context with an event its
/// children do not inherit is copied into none of theirs, so it is never swapped with
/// theirs (`perf_event_init_context`: a child's context is a clone only when every
/// event was inherited).
fn anchor(tid: u32) -> io::Result<Counter> {
    let pid = libc::pid_t::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    Builder::new(Software::DUMMY)
        .observe_pid(pid)
        .any_cpu()
        .inherit(false)
        .exclude_hv(true)
        .enabled(false)
        .build()
}

impl std::fmt::Debug for Lifetimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifetimes")
            .field("rings", &self.rings.len())
            .field("redirected", &self.redirected.len())
            .field("anchors", &self.anchors.len())
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// The events on `tid` and `cpu`: `task-clock`, counted, never sampled; its records
/// carry their thread and time (CLOCK_MONOTONIC).
fn builder(tid: u32, cpu: usize, on_exec: bool) -> Builder<'static> {
    let mut b = Builder::new(Software::TASK_CLOCK);
    b.observe_pid(tid as libc::pid_t)
        .one_cpu(cpu)
        .inherit(true)
        .inherit_stat(true)
        .task(true)
        .comm(true)
        .comm_exec(true)
        .read_format(ReadFormat::empty())
        .sample(SampleFlag::TID | SampleFlag::TIME)
        .sample_id_all(true)
        .clockid(Clock::MONOTONIC)
        .exclude_hv(true)
        .enable_on_exec(on_exec)
        .enabled(!on_exec);
    b
}

/// Maps `counter`'s ring buffer, halving `pages` while the kernel refuses (an event is
/// opened again for each attempt: a refused mapping consumes the counter).
fn map_ring(
    tid: u32,
    cpu: usize,
    on_exec: bool,
    counter: Counter,
    pages: &mut usize,
    page: usize,
) -> Result<perf_event::Sampler, ProfilerError> {
    let mut counter = counter;
    loop {
        match counter.sampled(*pages * page) {
            Ok(ring) => return Ok(ring),
            Err(e)
                if *pages > 1 && matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOMEM)) =>
            {
                *pages /= 2;
                counter = builder(tid, cpu, on_exec)
                    .build()
                    .map_err(|e| open_error(tid, cpu, e))?;
            }
            Err(source) => {
                return Err(ProfilerError::RingBuffer {
                    cpu,
                    pages: *pages,
                    source,
                });
            }
        }
    }
}

fn open_error(tid: u32, cpu: usize, e: io::Error) -> ProfilerError {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => ProfilerError::PermissionDenied {
            reason: format!(
                "perf_event_open of a `task-clock` event with task records on thread {tid} \
                 returned {e}"
            ),
        },
        Some(libc::ESRCH) => ProfilerError::ProcessNotFound { pid: tid },
        _ => ProfilerError::PerfOpen {
            pid: tid,
            cpu,
            source: e,
        },
    }
}

/// Redirects `event`'s records into `ring`'s buffer (same CPU).
fn set_output(event: RawFd, ring: RawFd) -> io::Result<()> {
    // SAFETY: an ioctl on two perf event descriptors we own; no memory is passed.
    let rc = unsafe { libc::ioctl(event, PERF_EVENT_IOC_SET_OUTPUT as _, ring) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory arguments.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as usize } else { 4096 }
}

/// One record of a thread's life, as the table applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// `tid` of process `pid` was created by thread `ptid` of process `ppid`.
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
    },
    /// `tid` was named `name`.
    Comm { pid: u32, tid: u32, name: Box<[u8]> },
    /// `tid` exited.
    Exit { pid: u32, tid: u32 },
    /// One of `tid`'s events counted `ns` of CPU time up to its exit.
    Read { pid: u32, tid: u32, ns: u64 },
    /// The kernel dropped this many records.
    Lost(u64),
}

impl Change {
    /// A record of type `ty` (its body after the header) with its time, the last eight
    /// bytes of the sample id that every record of these events ends with; `None` for a
    /// record of another type or too short.
    fn parse(ty: u32, body: &[u8]) -> Option<(u64, Change)> {
        let time = body
            .len()
            .checked_sub(8)
            .and_then(|at| body.get(at..))
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes)?;
        let change = match ty {
            RECORD_FORK | RECORD_EXIT => {
                let t = Task::parse(body)?;
                if ty == RECORD_FORK {
                    Change::Fork {
                        pid: t.pid,
                        ppid: t.ppid,
                        tid: t.tid,
                        ptid: t.ptid,
                    }
                } else {
                    Change::Exit {
                        pid: t.pid,
                        tid: t.tid,
                    }
                }
            }
            RECORD_COMM => {
                let c = Comm::parse(body)?;
                Change::Comm {
                    pid: c.pid,
                    tid: c.tid,
                    name: c.name.into(),
                }
            }
            RECORD_READ => {
                let pid = u32::from_ne_bytes(body.get(0..4)?.try_into().ok()?);
                let tid = u32::from_ne_bytes(body.get(4..8)?.try_into().ok()?);
                let ns = u64::from_ne_bytes(body.get(8..16)?.try_into().ok()?);
                Change::Read { pid, tid, ns }
            }
            RECORD_LOST => Change::Lost(records::parse_lost(body)?),
            _ => return None,
        };
        Some((time, change))
    }
}

/// A thread as the kernel's records tell it. Times are CLOCK_MONOTONIC nanoseconds.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Life {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The parent of its process, when its fork (or its process's) was seen.
    pub ppid: Option<u32>,
    /// Its name (empty when no record named it).
    pub name: Arc<str>,
    /// Its process's name (the main thread's), as last known.
    pub process: Arc<str>,
    /// When it was created; `None` for a thread that existed before the events.
    pub start_ns: Option<u64>,
    /// When it exited; `None` while it lives.
    pub end_ns: Option<u64>,
    /// Its CPU time counted up to its exit, when the kernel wrote it (threads created
    /// after the events were opened).
    pub cpu_ns: Option<u64>,
}

/// Exited threads of one name, past the table's limit.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Group {
    threads: u64,
    processes: u64,
    cpu_ns: u64,
    start_ns: Option<u64>,
    end_ns: Option<u64>,
}

/// A thread of the table; an exited one stays a drain longer, for its read records.
#[derive(Debug)]
struct Entry {
    life: Life,
    ended_pass: Option<u64>,
}

/// The threads the records told of: live ones, exited ones (up to a limit) and groups
/// of the exited ones beyond it.
#[derive(Debug)]
pub struct LifeTable {
    live: HashMap<u32, Entry>,
    exited: Vec<Life>,
    max_exited: usize,
    groups: HashMap<(Arc<str>, Arc<str>), Group>,
    names: HashSet<Arc<str>>,
    lost: u64,
    pass: u64,
}

impl LifeTable {
    fn new(max_exited: usize) -> Self {
        LifeTable {
            live: HashMap::new(),
            exited: Vec::new(),
            max_exited,
            groups: HashMap::new(),
            names: HashSet::new(),
            lost: 0,
            pass: 0,
        }
    }

    /// Records the kernel dropped (a buffer full between two drains): the threads they
    /// told of are missing or incomplete.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Exited threads kept one by one, in the order they exited.
    pub fn exited(&self) -> &[Life] {
        &self.exited
    }

    /// Exited threads beyond the limit, held in aggregated lines.
    pub fn aggregated(&self) -> u64 {
        self.groups.values().map(|g| g.threads).sum()
    }

    fn apply(&mut self, time: u64, change: Change) {
        match change {
            Change::Fork {
                pid,
                ppid,
                tid,
                ptid,
            } => {
                if let Some(e) = self.live.get_mut(&tid)
                    && e.life.start_ns.is_none()
                    && e.life.pid == pid
                    && e.life
                        .end_ns
                        .is_none_or(|end| end.saturating_add(LATE_FORK_NS) >= time)
                {
                    // Its fork came after its name or its exit: written on another CPU
                    // and read a drain later (the drain read that CPU's buffer before the
                    // fork was written), or stamped a little late by that CPU's clock.
                    // The same thread: it gets its start and parent.
                    self.late_fork(time, pid, ppid, tid, ptid);
                    return;
                }
                if let Some(old) = self.live.remove(&tid) {
                    // The tid was reused: the thread that had it is gone.
                    self.retire(old.life);
                }
                let empty = self.intern(b"");
                let name = self.live.get(&ptid).map_or(empty, |c| c.life.name.clone());
                let (ppid, process) = if pid == ppid {
                    // A thread of an existing process: its parent is the process's.
                    match self.live.get(&pid) {
                        Some(main) => (main.life.ppid, main.life.process.clone()),
                        None => (None, name.clone()),
                    }
                } else {
                    (Some(ppid), name.clone())
                };
                let life = Life {
                    pid,
                    tid,
                    ppid,
                    name,
                    process,
                    start_ns: Some(time),
                    end_ns: None,
                    cpu_ns: None,
                };
                self.live.insert(
                    tid,
                    Entry {
                        life,
                        ended_pass: None,
                    },
                );
            }
            Change::Comm { pid, tid, name } => {
                let name = self.intern(&name);
                let life = &mut self.entry(pid, tid).life;
                life.name = name.clone();
                if tid == pid {
                    life.process = name;
                }
            }
            Change::Exit { pid, tid } => {
                let pass = self.pass;
                let entry = self.entry(pid, tid);
                entry.life.end_ns = Some(time);
                entry.ended_pass = Some(pass);
            }
            Change::Read { pid, tid, ns } => {
                // Written at the thread's exit, one per CPU; one that comes after its
                // thread was retired (a drain that began between its exit record and
                // this) goes to its line. A read of a thread that the table never knew
                // (its other records lost) would be a line without a life: left out.
                let life = match self.live.get_mut(&tid) {
                    Some(e) if e.life.pid == pid => Some(&mut e.life),
                    Some(_) => None,
                    None => self
                        .exited
                        .iter_mut()
                        .rev()
                        .take(RETIRED_SEARCH)
                        .find(|l| l.tid == tid && l.pid == pid),
                };
                if let Some(life) = life {
                    life.cpu_ns = Some(life.cpu_ns.unwrap_or(0).saturating_add(ns));
                }
            }
            Change::Lost(n) => self.lost = self.lost.saturating_add(n),
        }
    }

    /// Gives the live entry of `tid`, made from records after its fork, its fork: its
    /// start, its parent and, when no record has named it yet, its creator's names.
    fn late_fork(&mut self, time: u64, pid: u32, ppid: u32, tid: u32, ptid: u32) {
        let creator = self.live.get(&ptid).map(|c| c.life.name.clone());
        let main = (pid == ppid)
            .then(|| {
                self.live
                    .get(&pid)
                    .map(|m| (m.life.ppid, m.life.process.clone()))
            })
            .flatten();
        let Some(life) = self.live.get_mut(&tid).map(|e| &mut e.life) else {
            return;
        };
        life.start_ns = Some(time);
        if pid == ppid {
            if let Some((parent, process)) = main {
                life.ppid = parent;
                if tid != pid {
                    life.process = process;
                }
            }
        } else {
            life.ppid = Some(ppid);
        }
        if life.name.is_empty()
            && let Some(name) = creator
        {
            life.name = name.clone();
            if life.process.is_empty() {
                life.process = name;
            }
        }
    }

    /// The live entry of `tid`, made for a thread whose fork was not recorded.
    fn entry(&mut self, pid: u32, tid: u32) -> &mut Entry {
        let empty = self.intern(b"");
        self.live.entry(tid).or_insert_with(|| Entry {
            life: Life {
                pid,
                tid,
                ppid: None,
                name: empty.clone(),
                process: empty,
                start_ns: None,
                end_ns: None,
                cpu_ns: None,
            },
            ended_pass: None,
        })
    }

    /// Retires threads that exited before this drain (their read records, written at
    /// their exit into every CPU's buffer, are all in by now).
    fn end_pass(&mut self) {
        let pass = self.pass;
        let mut done: Vec<(u64, u32)> = self
            .live
            .iter()
            .filter(|(_, e)| e.ended_pass.is_some_and(|p| p < pass))
            .map(|(&tid, e)| (e.life.end_ns.unwrap_or(0), tid))
            .collect();
        // In the order they exited: the first to exit keep lines of their own.
        done.sort_unstable();
        for (_, tid) in done {
            if let Some(e) = self.live.remove(&tid) {
                self.retire(e.life);
            }
        }
        self.pass += 1;
        if self.names.len() > 4096 {
            self.names.retain(|n| Arc::strong_count(n) > 1);
        }
    }

    fn retire(&mut self, mut life: Life) {
        if life.tid != life.pid
            && let Some(main) = self.live.get(&life.pid)
        {
            life.process = main.life.process.clone();
        }
        // A thread that existed before the events (no fork record) keeps a line of its
        // own past the limit: they are as many as the tree had then, and the polls saw
        // them, so an aggregated one would be counted twice.
        if self.exited.len() < self.max_exited || life.start_ns.is_none() {
            self.exited.push(life);
            return;
        }
        let mut key = (life.process.clone(), life.name.clone());
        if !self.groups.contains_key(&key) && self.groups.len() >= MAX_GROUPS {
            let empty = self.intern(b"");
            key = (empty.clone(), empty);
        }
        let g = self.groups.entry(key).or_default();
        g.threads += 1;
        g.processes += u64::from(life.tid == life.pid);
        g.cpu_ns = g.cpu_ns.saturating_add(life.cpu_ns.unwrap_or(0));
        g.start_ns = min_some(g.start_ns, life.start_ns);
        g.end_ns = g.end_ns.max(life.end_ns);
    }

    fn intern(&mut self, name: &[u8]) -> Arc<str> {
        let name = String::from_utf8_lossy(name);
        if let Some(n) = self.names.get(&*name) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(&*name);
        self.names.insert(n.clone());
        n
    }

    /// threads.csv's lines: the polls' `polled` lines (of [`crate::TreeMonitor`], whose
    /// clock started at CLOCK_MONOTONIC `epoch_ns`) joined with the kernel's records.
    /// A thread both saw is one line with the polls' user/system split and switches
    /// and the records' parent, start, end and counted CPU time; a thread only the
    /// records saw (it lived between two polls) is a line of its own; the polls'
    /// aggregated lines give way to the records' (which count every exited thread), and
    /// so do the lines of exited threads that only the polls kept once the records
    /// aggregate (those threads are in an aggregated line); `is_live(pid, tid)` says
    /// which polled threads were alive at the last poll. Busiest first.
    pub fn merge(
        &self,
        polled: Vec<ThreadSummary>,
        epoch_ns: u64,
        is_live: impl Fn(u32, u32) -> bool,
    ) -> Vec<ThreadSummary> {
        let secs = |ns: u64| ns.saturating_sub(epoch_ns) as f64 / 1e9;
        let mut polled: Vec<Option<ThreadSummary>> = polled
            .into_iter()
            .map(|t| t.aggregated.is_none().then_some(t))
            .collect();
        let mut by_tid: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, t) in polled.iter().enumerate() {
            if let Some(t) = t {
                by_tid.entry(t.tid).or_default().push(i);
            }
        }
        let lives = self
            .exited
            .iter()
            .chain(self.live.values().map(|e| &e.life));
        let mut out = Vec::with_capacity(polled.len() + self.exited.len() + self.live.len());
        for life in lives {
            let (start_s, end_s) = (life.start_ns.map(secs), life.end_ns.map(secs));
            let seen = by_tid.get(&life.tid).and_then(|candidates| {
                candidates.iter().copied().find(|&i| {
                    polled[i].as_ref().is_some_and(|t| {
                        t.pid == life.pid
                            && start_s.is_none_or(|s| t.last_seen_s >= s - SIGHTING_SLACK_S)
                            && end_s.is_none_or(|e| t.first_seen_s <= e + SIGHTING_SLACK_S)
                    })
                })
            });
            let mut line = match seen.and_then(|i| polled[i].take()) {
                Some(t) => t,
                None => {
                    let mut t = ThreadSummary::new(life.pid, life.tid, &*life.process, &*life.name);
                    t.first_seen_s = start_s.unwrap_or(0.0);
                    t.last_seen_s = end_s.unwrap_or(t.first_seen_s);
                    t
                }
            };
            // The records saw every rename, the polls only the names at their sightings
            // (a child polled before its exec has its parent's name).
            if !life.name.is_empty() {
                line.thread = life.name.to_string();
            }
            let process = match self.live.get(&life.pid) {
                Some(main) if life.tid != life.pid && !main.life.process.is_empty() => {
                    &main.life.process
                }
                _ => &life.process,
            };
            if !process.is_empty() {
                line.process = process.to_string();
            }
            line.ppid = life.ppid.or(line.ppid);
            line.start_s = start_s;
            line.end_s = end_s;
            if let Some(ns) = life.cpu_ns {
                let counted = ns as f64 / 1e9;
                // The polls' split of user and system time, applied to the whole.
                let polled_s = line.user_s + line.system_s;
                if polled_s > 0.0 {
                    line.user_s = counted * line.user_s / polled_s;
                    line.system_s = counted - line.user_s;
                }
                line.counted_cpu_s = Some(counted);
            }
            out.push(line);
        }
        let aggregating = !self.groups.is_empty();
        out.extend(
            polled
                .into_iter()
                .flatten()
                .filter(|t| !aggregating || is_live(t.pid, t.tid)),
        );
        for ((process, name), g) in &self.groups {
            let mut t = ThreadSummary::new(0, 0, &**process, &**name);
            t.counted_cpu_s = Some(g.cpu_ns as f64 / 1e9);
            t.start_s = g.start_ns.map(secs);
            t.end_s = g.end_ns.map(secs);
            t.first_seen_s = t.start_s.unwrap_or(0.0);
            t.last_seen_s = t.end_s.unwrap_or(t.first_seen_s);
            t.aggregated = Some(Aggregated::new(g.threads, g.processes));
            out.push(t);
        }
        sort_busiest_first(&mut out);
        out
    }
}

/// Busiest (most CPU time) first, then by pid, tid and first sighting.
pub(crate) fn sort_busiest_first(lines: &mut [ThreadSummary]) {
    lines.sort_by(|a, b| {
        b.cpu_s()
            .total_cmp(&a.cpu_s())
            .then(a.pid.cmp(&b.pid))
            .then(a.tid.cmp(&b.tid))
            .then(a.first_seen_s.total_cmp(&b.first_seen_s))
    });
}

fn min_some(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fork(pid: u32, ppid: u32, tid: u32, ptid: u32) -> Change {
        Change::Fork {
            pid,
            ppid,
            tid,
            ptid,
        }
    }

    fn comm(pid: u32, tid: u32, name: &str) -> Change {
        Change::Comm {
            pid,
            tid,
            name: name.as_bytes().into(),
        }
    }

    /// A shell (pid 10) that forks and execs `spin` (11), which starts a thread (12);
    /// both exit, and their reads come one per CPU.
    fn short_tree(table: &mut LifeTable) {
        table.apply(1_000, fork(11, 10, 11, 10));
        table.apply(1_100, comm(11, 11, "spin"));
        table.apply(1_200, fork(11, 11, 12, 11));
        table.apply(1_300, Change::Exit { pid: 11, tid: 12 });
        table.apply(
            1_300,
            Change::Read {
                pid: 11,
                tid: 12,
                ns: 2_000_000,
            },
        );
        table.apply(
            1_301,
            Change::Read {
                pid: 11,
                tid: 12,
                ns: 1_000_000,
            },
        );
        table.apply(1_400, Change::Exit { pid: 11, tid: 11 });
        table.apply(
            1_400,
            Change::Read {
                pid: 11,
                tid: 11,
                ns: 5_000_000,
            },
        );
        table.end_pass();
    }

    #[test]
    fn a_process_and_its_thread_that_no_poll_saw_are_lines_of_their_own() {
        let mut table = LifeTable::new(100);
        short_tree(&mut table);
        // A read of another CPU, drained a pass later, still finds its thread.
        table.apply(
            1_401,
            Change::Read {
                pid: 11,
                tid: 11,
                ns: 1_000_000,
            },
        );
        table.end_pass();
        table.end_pass();
        assert_eq!(table.exited().len(), 2);
        let lines = table.merge(Vec::new(), 0, |_, _| false);
        assert_eq!(lines.len(), 2, "{lines:?}");
        let main = &lines[0];
        assert_eq!((main.pid, main.tid, main.ppid), (11, 11, Some(10)));
        assert_eq!((&*main.process, &*main.thread), ("spin", "spin"));
        assert_eq!(main.counted_cpu_s, Some(0.006));
        assert_eq!(main.start_s, Some(1e-6));
        assert_eq!(main.end_s, Some(1.4e-6));
        let thread = &lines[1];
        assert_eq!((thread.pid, thread.tid, thread.ppid), (11, 12, Some(10)));
        assert_eq!((&*thread.process, &*thread.thread), ("spin", "spin"));
        assert_eq!(thread.counted_cpu_s, Some(0.003));
        assert_eq!(lines.iter().map(ThreadSummary::processes).sum::<u64>(), 1);
    }

    #[test]
    fn a_thread_the_polls_saw_keeps_their_split_and_gets_the_whole_count() {
        let mut table = LifeTable::new(100);
        short_tree(&mut table);
        let mut seen = ThreadSummary::new(11, 12, "spin", "spin");
        seen.user_s = 0.0015;
        seen.system_s = 0.0005;
        seen.first_seen_s = 1.25e-6;
        seen.last_seen_s = 1.25e-6;
        // The same tid in another process: another thread.
        let other = ThreadSummary::new(99, 12, "else", "else");
        let lines = table.merge(vec![seen, other], 0, |_, _| true);
        assert_eq!(lines.len(), 3, "{lines:?}");
        let t = lines.iter().find(|t| t.pid == 11 && t.tid == 12).unwrap();
        assert_eq!(t.counted_cpu_s, Some(0.003));
        assert!((t.user_s - 0.00225).abs() < 1e-12, "{t:?}");
        assert!((t.cpu_s() - 0.003).abs() < 1e-12, "{t:?}");
        assert!(
            lines
                .iter()
                .any(|t| t.pid == 99 && t.counted_cpu_s.is_none())
        );
    }

    #[test]
    fn a_read_drained_after_its_thread_retired_joins_its_line_and_a_stray_one_makes_none() {
        let mut table = LifeTable::new(100);
        short_tree(&mut table);
        table.end_pass();
        assert_eq!(table.exited().len(), 2);
        table.apply(
            1_402,
            Change::Read {
                pid: 11,
                tid: 11,
                ns: 4_000_000,
            },
        );
        // Of a thread whose other records were lost.
        table.apply(
            1_403,
            Change::Read {
                pid: 70,
                tid: 71,
                ns: 1,
            },
        );
        table.end_pass();
        let lines = table.merge(Vec::new(), 0, |_, _| false);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0].counted_cpu_s, Some(0.009), "{lines:?}");
    }

    #[test]
    fn past_the_limit_exited_threads_are_aggregated_by_name_and_counted() {
        let mut table = LifeTable::new(2);
        table.apply(1, comm(10, 10, "sh"));
        for i in 0..5u32 {
            let pid = 100 + i;
            table.apply(10, fork(pid, 10, pid, 10));
            table.apply(11, comm(pid, pid, "spin"));
            table.apply(12, Change::Exit { pid, tid: pid });
            table.apply(
                12,
                Change::Read {
                    pid,
                    tid: pid,
                    ns: 1_000_000_000,
                },
            );
        }
        table.end_pass();
        table.end_pass();
        assert_eq!(table.exited().len(), 2);
        assert_eq!(table.aggregated(), 3);
        let lines = table.merge(Vec::new(), 0, |_, _| false);
        let agg = lines.iter().find(|t| t.aggregated.is_some()).unwrap();
        assert_eq!(
            (agg.pid, agg.tid, &*agg.process, &*agg.thread),
            (0, 0, "spin", "spin")
        );
        assert_eq!(agg.aggregated, Some(Aggregated::new(3, 3)));
        assert_eq!(agg.counted_cpu_s, Some(3.0));
        // Every process is counted: 5 exited, the live shell.
        assert_eq!(lines.iter().map(ThreadSummary::processes).sum::<u64>(), 6);
    }

    #[test]
    fn a_reused_tid_retires_the_thread_that_had_it_and_losses_are_counted() {
        let mut table = LifeTable::new(100);
        table.apply(1, fork(20, 10, 20, 10));
        // Its exit record was lost; the tid comes back for a new process.
        table.apply(2, Change::Lost(3));
        table.apply(3, fork(20, 10, 20, 10));
        assert_eq!(table.exited().len(), 1);
        assert_eq!(table.lost(), 3);
        assert_eq!(table.merge(Vec::new(), 0, |_, _| false).len(), 2);
    }

    #[test]
    fn a_fork_read_after_its_childs_name_and_exit_is_that_childs_start() {
        let mut table = LifeTable::new(100);
        table.apply(900, fork(10, 1, 10, 1));
        table.apply(950, comm(10, 10, "sh"));
        // The child ran on the other CPU, whose buffer a drain read first: its name and
        // exit come in one drain, the shell's fork of it in the next.
        table.apply(1_100, comm(11, 11, "true"));
        table.apply(1_300, Change::Exit { pid: 11, tid: 11 });
        table.end_pass();
        table.apply(1_000, fork(11, 10, 11, 10));
        // A thread whose fork and exit came in order, whose exit's stamp is a little
        // ahead of its fork's (the CPUs' clocks), is one thread too.
        table.apply(2_000, fork(12, 10, 12, 10));
        table.apply(1_990, Change::Exit { pid: 12, tid: 12 });
        table.end_pass();
        table.end_pass();
        let lines = table.merge(Vec::new(), 0, |_, _| false);
        let child = |tid| lines.iter().filter(|t| t.tid == tid).collect::<Vec<_>>();
        let [t11] = child(11)[..] else {
            panic!("one line of 11: {lines:#?}")
        };
        assert_eq!(
            (&*t11.process, &*t11.thread, t11.ppid),
            ("true", "true", Some(10))
        );
        assert_eq!((t11.start_s, t11.end_s), (Some(1e-6), Some(1.3e-6)));
        let [t12] = child(12)[..] else {
            panic!("one line of 12: {lines:#?}")
        };
        assert_eq!(
            (&*t12.process, t12.ppid, t12.start_s),
            ("sh", Some(10), Some(2e-6))
        );
        assert_eq!(lines.len(), 3, "{lines:#?}");
    }

    #[test]
    fn a_tid_back_long_after_a_thread_from_before_the_events_ended_is_a_new_thread() {
        let mut table = LifeTable::new(100);
        // A thread that lived before the events (no fork) exits; its tid comes back.
        table.apply(1_000, Change::Exit { pid: 20, tid: 20 });
        table.apply(1_000 + 2 * LATE_FORK_NS, fork(20, 10, 20, 10));
        table.end_pass();
        let lines = table.merge(Vec::new(), 0, |_, _| false);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(
            lines
                .iter()
                .any(|t| t.start_s.is_none() && t.end_s.is_some())
        );
        assert!(
            lines
                .iter()
                .any(|t| t.start_s.is_some() && t.end_s.is_none())
        );
    }

    #[test]
    fn records_parse_with_their_time_and_short_ones_are_refused() {
        let mut fork_body = Vec::new();
        for v in [5u32, 4, 6, 4] {
            fork_body.extend_from_slice(&v.to_ne_bytes());
        }
        fork_body.extend_from_slice(&77u64.to_ne_bytes()); // the fork's own time
        fork_body.extend_from_slice(&6u32.to_ne_bytes()); // sample id: pid, tid, time
        fork_body.extend_from_slice(&6u32.to_ne_bytes());
        fork_body.extend_from_slice(&78u64.to_ne_bytes());
        assert_eq!(
            Change::parse(RECORD_FORK, &fork_body),
            Some((78, fork(5, 4, 6, 4)))
        );
        let mut read = Vec::new();
        read.extend_from_slice(&5u32.to_ne_bytes());
        read.extend_from_slice(&6u32.to_ne_bytes());
        read.extend_from_slice(&1234u64.to_ne_bytes());
        read.extend_from_slice(&[0; 8]);
        read.extend_from_slice(&99u64.to_ne_bytes());
        assert_eq!(
            Change::parse(RECORD_READ, &read),
            Some((
                99,
                Change::Read {
                    pid: 5,
                    tid: 6,
                    ns: 1234
                }
            ))
        );
        assert_eq!(Change::parse(RECORD_READ, &read[..12]), None);
        assert_eq!(Change::parse(RECORD_FORK, &[0; 4]), None);
        assert_eq!(Change::parse(9, &read), None);
    }
}
