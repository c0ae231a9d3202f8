//! The sampler's aggregation thread: it starts the [`Drainer`] (which polls the ring
//! buffers and copies records out as they come), then reads those records in
//! place, aggregates callchains into pending raw stacks (on-CPU and page faults) and
//! blocked intervals (off-CPU), and folds them into the stack trees in symbolized batches.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, SyncSender};
use std::time::{Duration, Instant};

use benchtop_profile::intervals::StacksChunk;
use benchtop_profile::{ByKind, FrameId, Kind, StackTree};
use perf_event::Counter;

use super::drain::{Drained, Drainer, Follow, RECORD_HEAD, drainer_thread_name};
use super::events::{EventIds, Ring, Role};
use super::frames::{
    FRAME_TAG, KEY_ARG, NO_ADDRESSES, NO_STACK_DENIED, NO_STACK_MISSING, NO_THREAD, ending_frame,
};
use super::lines::LineTally;
use super::offcpu::{Closed, NO_STACK, OffCpu, WakeSource};
use super::options::SamplerOptions;
use super::shared::Shared;
use super::timeline::{StackTable, Timeline, monotonic_ns};
use super::tracepoint::Waking;
use super::waits::Waits;
use crate::ProfilerError;
use crate::records::{self, Comm, Mmap2, Sample, SplitChain, Switch, Task};
use crate::symbolize::Resolver;
use crate::unwind::{Ending, UnwindCounts, UnwindMode, Unwinder};

mod batch;
mod names;

/// Distinct pending stacks (or unresolved addresses) that trigger a batch before its
/// time, bounding the memory held in raw form.
const MAX_PENDING: usize = 20_000;
/// Distinct off-CPU stacks kept between batches; past it, those no open interval
/// points to are dropped (they are already folded into the tree).
const MAX_OFF_STACKS: usize = 20_000;
/// A pending stack's slot and its count of samples.
type SlotCount = (u32, u64);

/// What the thread hands back to [`crate::Sampler::finish`].
#[derive(Debug)]
pub(crate) struct Collected {
    pub profiles: ByKind<StackTree>,
    pub blocked_ns: u64,
    pub preempted_ns: u64,
    pub warnings: Vec<String>,
    pub final_batch_time: Duration,
    pub stopped_at: Instant,
    pub unresolved: u64,
    pub unwinding: UnwindCounts,
}

/// How the events were opened, for the collector.
#[derive(Debug)]
pub(crate) struct Setup {
    /// Samples carry user registers and stack copies, unwound this way; `None` with
    /// frame pointers (the kernel's callchain).
    pub unwind: Option<UnwindMode>,
    /// Callchains include kernel frames.
    pub kernel_frames: bool,
    /// Switch records come (off-CPU time).
    pub off_cpu: bool,
    /// Off-CPU samples come (stacks).
    pub off_stacks: bool,
    /// Ids of the events whose samples are off-CPU or page-fault samples.
    pub ids: EventIds,
    /// Bytes one page-fault sample weighs (period × page size); 0 without them.
    pub mem_bytes: u64,
    /// Enable the events (they were opened disabled and are not enabled at exec).
    pub enable: bool,
    /// The events start at the target's exec: what it is now (name, mappings) does not
    /// matter.
    pub on_exec: bool,
    /// Attached to a running process: look for threads created while attaching.
    pub follow: Option<Follow>,
    /// Wake-ups are sampled (`sched:sched_waking`, its record laid out so).
    pub waking: Option<Waking>,
    /// The waker's stack is taken at one wake-up in this many.
    pub wake_every: u32,
}

#[derive(Debug)]
pub(crate) struct Collector {
    shared: Arc<Shared>,
    per_thread: bool,
    kernel_frames: bool,
    off_cpu: bool,
    off_stacks: bool,
    enable: bool,
    on_exec: bool,
    batch_interval: Duration,
    /// Every frame name, interned once: the resolver's frames and the keys' names are
    /// ids of this tree, which holds no stacks.
    interner: StackTree,
    /// On-CPU stacks, and the interner's ids translated to its own.
    cpu: StackTree,
    cpu_ids: Vec<u32>,
    /// Off-CPU stacks (µs), likewise.
    off: StackTree,
    off_frame_ids: Vec<u32>,
    /// Page-fault stacks (bytes), likewise.
    mem: StackTree,
    mem_frame_ids: Vec<u32>,
    /// Bytes one page-fault sample weighs.
    mem_bytes: u64,
    /// Raw page-fault stacks not folded yet, as `pending`.
    mem_pending: HashMap<Box<[u64]>, (u32, u64)>,
    /// The stack-table id of each pending page-fault slot (reused).
    mem_slot_stacks: Vec<u32>,
    /// Thread id → interned name; the process name is the name of its main thread.
    names: names::NameHistory,
    /// Raw on-CPU stacks (see KEY_HEADER) not folded into the tree yet, with their slot
    /// (the order they came in since the last batch) and counts.
    pending: HashMap<Box<[u64]>, (u32, u64)>,
    /// Pending stacks of a batch with addresses to resolve first (reused).
    deferred: Vec<(Box<[u64]>, SlotCount)>,
    /// The stack-table id of each pending slot, made by a batch (reused).
    slot_stacks: Vec<u32>,
    /// Samples and blocked intervals attributed to report intervals.
    timeline: Timeline,
    /// The stacks of the per-interval weights, handed out in chunks.
    table: StackTable,
    /// Source lines of the on-CPU samples.
    lines: LineTally,
    /// What the next batch hands out: new frames, stacks, threads and weights.
    chunk: StacksChunk,
    /// Blocked intervals closed since the last batch (reused), and the stack-table id of
    /// each off-CPU stack they use.
    closed: Vec<Closed>,
    off_stack_ids: HashMap<u32, u32>,
    /// Recording stopped at this monotonic time: the last batch attributes everything.
    stopped_ns: Option<u64>,
    /// Off-CPU intervals and their raw stacks.
    offcpu: OffCpu,
    /// Ids of the events whose samples are off-CPU or page-fault samples, sorted.
    ids: EventIds,
    /// One switch in this many is sampled (with a stack).
    off_every: u32,
    /// Off-CPU (stack, µs) of a batch, and those with addresses to resolve (reused).
    off_batch: Vec<(u32, u64)>,
    off_deferred: Vec<(u32, u64)>,
    /// The process of the previous sample: the resolver has its mappings.
    last_pid: Option<u32>,
    /// The process the events were opened on.
    target: u32,
    resolver: Resolver,
    /// The user-stack unwinder, when samples carry stack copies.
    unwinder: Option<Unwinder>,
    /// The interned `[truncated: …]` frame of each way a stack ends.
    endings: HashMap<Ending, FrameId>,
    batches: u64,
    /// Threads and processes that exited, with the batch number when seen.
    exited_threads: Vec<(u32, u64)>,
    malformed: u64,
    /// Attach's second look, handed to the drainer.
    follow: Option<Follow>,
    /// Samples carry a raw part (a tracepoint is among the events).
    raw: bool,
    /// The waits profile, when wake-ups are sampled.
    waits: Option<Waits>,
    warnings: Vec<String>,
    // Counts of the current drain.
    n_cpu: u64,
    n_off: u64,
    n_switches: u64,
    n_mem: u64,
    // Buffers reused for every record.
    key: Vec<u64>,
    split: SplitChain,
    frames: Vec<FrameId>,
    translated: Vec<FrameId>,
    want_user: Vec<(u32, u64)>,
    want_kernel: Vec<u64>,
    name_buf: String,
}

impl Collector {
    /// The folded stacks of each kind this collector folds, made by `f` (a copy, or the
    /// trees taken).
    fn profiles(&mut self, mut f: impl FnMut(&mut StackTree) -> StackTree) -> ByKind<StackTree> {
        [
            (Kind::Cpu, f(&mut self.cpu)),
            (Kind::OffCpu, f(&mut self.off)),
            (Kind::Mem, f(&mut self.mem)),
            (
                Kind::Waits,
                self.waits
                    .as_mut()
                    .map_or_else(StackTree::new, |w| f(&mut w.tree)),
            ),
        ]
        .into_iter()
        .collect()
    }

    /// A collector for events on `pid`. Runs on the sampler thread before the events are
    /// enabled: it reads the target's name and mappings now, while it surely lives
    /// (unless the events start at its exec, which replaces both).
    pub fn new(shared: Arc<Shared>, pid: u32, opts: &SamplerOptions, setup: Setup) -> Self {
        let mut ids = setup.ids;
        ids.sort();
        let mut timeline = Timeline::new(monotonic_ns());
        timeline.set_mem_bytes(setup.mem_bytes);
        if opts.keep_samples {
            timeline.keep_samples();
        }
        let mut c = Collector {
            shared,
            per_thread: opts.per_thread,
            kernel_frames: setup.kernel_frames,
            off_cpu: setup.off_cpu,
            off_stacks: setup.off_stacks,
            enable: setup.enable,
            on_exec: setup.on_exec,
            batch_interval: opts.batch_interval.max(Duration::from_millis(1)),
            interner: StackTree::new(),
            cpu: StackTree::new(),
            cpu_ids: Vec::new(),
            off: StackTree::new(),
            off_frame_ids: Vec::new(),
            mem: StackTree::new(),
            mem_frame_ids: Vec::new(),
            mem_bytes: setup.mem_bytes,
            mem_pending: HashMap::new(),
            mem_slot_stacks: Vec::new(),
            names: names::NameHistory::default(),
            pending: HashMap::new(),
            deferred: Vec::new(),
            slot_stacks: Vec::new(),
            timeline,
            table: StackTable::default(),
            lines: LineTally::default(),
            chunk: StacksChunk::default(),
            closed: Vec::new(),
            off_stack_ids: HashMap::new(),
            stopped_ns: None,
            offcpu: if setup.waking.is_some() {
                OffCpu::with_waits(setup.wake_every)
            } else {
                OffCpu::default()
            },
            ids,
            off_every: opts.offcpu_stack_every.max(1),
            off_batch: Vec::new(),
            off_deferred: Vec::new(),
            last_pid: None,
            target: pid,
            resolver: Resolver::with_debug_dirs(opts.symbols, &opts.debug_dirs),
            unwinder: setup.unwind.map(Unwinder::new),
            endings: HashMap::new(),
            batches: 0,
            exited_threads: Vec::new(),
            malformed: 0,
            follow: setup.follow,
            raw: setup.waking.is_some(),
            waits: setup.waking.map(Waits::new),
            warnings: Vec::new(),
            n_cpu: 0,
            n_off: 0,
            n_switches: 0,
            n_mem: 0,
            key: Vec::with_capacity(256),
            split: SplitChain::default(),
            frames: Vec::with_capacity(256),
            translated: Vec::with_capacity(256),
            want_user: Vec::new(),
            want_kernel: Vec::new(),
            name_buf: String::new(),
        };
        if c.kernel_frames {
            c.resolver.prepare_kernel_symbols();
        }
        if !c.on_exec {
            c.name_of(pid, pid, 0);
            c.resolver.see_process(pid);
            c.last_pid = Some(pid);
        }
        c
    }

    /// Reads the target's modules for the unwinder and loads the symbols and debug info
    /// of the files it has mapped (its executable, the C library…), one at a time: this
    /// runs while the workload starts, and the drainer thread keeps reading the ring
    /// buffers meanwhile, so start-up costs the recording nothing, no sample is lost to
    /// it, and the first batch does not pay for it (measured: 44–95 ms of a first batch
    /// before, 11–16 ms after). A target that has yet to exec has nothing worth loading.
    /// The kernel's symbols are prepared on a thread of their own from the start
    /// ([`Resolver::prepare_kernel_symbols`]): reading kallsyms takes 40–90 ms here, which
    /// a short run would otherwise wait for at its end.
    fn warm_up(&mut self, pid: u32) {
        // The target's modules and their unwind tables (read once per file): here rather
        // than before the events are enabled, as reading the tables of a large binary
        // takes tens of milliseconds.
        if !self.on_exec
            && let Some(u) = &mut self.unwinder
        {
            u.see_process(pid);
        }
        if self.on_exec {
            return;
        }
        for (file, offset) in self.resolver.files_to_preload(pid) {
            if self.shared.stop.load(Ordering::SeqCst) {
                return;
            }
            self.resolver.preload_file(file, offset);
        }
    }

    /// The thread body: starts the drainer thread, which enables the events (unless the
    /// kernel does, at exec, or they already are), looks for threads missed by an
    /// attach and tells [`crate::Sampler`] through `ready`; then warms the symbol caches
    /// and folds what the drainer reads until it stops ([`Shared::stop`]), then runs the
    /// last batch (unless abandoned). `counters` are the events that write into `rings`
    /// without owning one.
    ///
    /// The result goes to `done` before the collector's state is dropped: freeing the
    /// parsed symbols and debug info takes tens of milliseconds, which the end of a
    /// recording need not wait for ([`crate::Sampler::finish`] takes the result and
    /// leaves the thread to finish on its own).
    pub fn run(
        mut self,
        rings: Vec<Ring>,
        counters: Vec<Counter>,
        ready: SyncSender<Result<(), ProfilerError>>,
        done: SyncSender<Result<Collected, ProfilerError>>,
    ) {
        let result = self.collect(rings, counters, ready);
        let _ = done.send(result);
    }

    fn collect(
        &mut self,
        rings: Vec<Ring>,
        counters: Vec<Counter>,
        ready: SyncSender<Result<(), ProfilerError>>,
    ) -> Result<Collected, ProfilerError> {
        let (tx, rx) = mpsc::channel();
        let (recycle_tx, recycle_rx) = mpsc::channel();
        let drainer = Drainer {
            shared: Arc::clone(&self.shared),
            rings,
            counters,
            enable: self.enable,
            follow: self.follow.take(),
            follow_counters: Vec::new(),
            forked: HashSet::new(),
            tracking_forks: false,
            tx,
            recycle: recycle_rx,
            dropped: false,
        };
        let drainer = std::thread::Builder::new()
            .name(drainer_thread_name(self.target))
            .spawn(move || drainer.run(ready))
            .map_err(|e| ProfilerError::Thread {
                reason: format!("cannot spawn the ring-buffer reader thread: {e}"),
            })?;
        self.warm_up(self.target);
        let mut stopped_at = None;
        let mut next_batch = Instant::now() + self.batch_interval;
        loop {
            let wait = next_batch.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Drained::Round(buf)) => {
                    self.process(&buf);
                    self.shared
                        .queued_bytes
                        .fetch_sub(buf.len() as u64, Ordering::Relaxed);
                    let _ = recycle_tx.send(buf);
                }
                Ok(Drained::Ids(ids)) => self.ids.extend(ids),
                Ok(Drained::Warning(w)) => self.warnings.push(w),
                Ok(Drained::Stopped(at)) => {
                    stopped_at = Some(at);
                    self.stopped_ns = Some(monotonic_ns());
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            let abandoned = self.shared.abandon.load(Ordering::Relaxed);
            if !abandoned
                && stopped_at.is_none()
                && (Instant::now() >= next_batch
                    || self.pending.len() >= MAX_PENDING
                    || self.mem_pending.len() >= MAX_PENDING
                    || self.offcpu.new_stacks() >= MAX_PENDING)
            {
                self.batch();
                next_batch = Instant::now() + self.batch_interval;
            }
        }
        match drainer.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(panic) => {
                return Err(ProfilerError::Thread {
                    reason: format!(
                        "the ring-buffer reader thread panicked: {}",
                        panic
                            .downcast_ref::<&str>()
                            .copied()
                            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                            .unwrap_or("(no message)")
                    ),
                });
            }
        }
        let stopped_at = stopped_at.unwrap_or_else(Instant::now);
        self.stopped_ns.get_or_insert_with(monotonic_ns);
        self.offcpu.flush();
        self.publish_offcpu();
        let mut final_batch_time = Duration::ZERO;
        if !self.shared.abandon.load(Ordering::SeqCst) {
            let t = Instant::now();
            self.batch();
            final_batch_time = t.elapsed();
        }
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.append(&mut self.resolver.warnings);
        let unwinding = match &mut self.unwinder {
            Some(u) => {
                warnings.append(&mut u.warnings);
                u.take_counts()
            }
            None => UnwindCounts::default(),
        };
        if self.malformed > 0 {
            warnings.push(format!(
                "{} perf records were malformed and skipped",
                self.malformed
            ));
        }
        if let Some(w) = &self.waits {
            warnings.extend(w.warnings(&self.offcpu));
        }
        if self.timeline.samples_not_kept() > 0 {
            warnings.push(format!(
                "{} samples past the first {} were not kept with their own times \
                 (--keep-samples); their intervals' weights count them",
                self.timeline.samples_not_kept(),
                benchtop_profile::intervals::MAX_KEPT_SAMPLES
            ));
        }
        if self.timeline.long_waits_not_kept() > 0 {
            warnings.push(format!(
                "waits: {} long waits past the first {} were not kept on their own (no \
                 marker in the Firefox export); their intervals' weights count them",
                self.timeline.long_waits_not_kept(),
                benchtop_profile::intervals::MAX_LONG_WAITS
            ));
        }
        Ok(Collected {
            profiles: self.profiles(std::mem::take),
            blocked_ns: self.offcpu.blocked_ns,
            preempted_ns: self.offcpu.preempted_ns,
            warnings,
            final_batch_time,
            stopped_at,
            unresolved: self.resolver.counts.unresolved,
            unwinding,
        })
    }

    /// Folds one round of records copied by the drainer (see [`Drainer::copy`]), then
    /// ends the round.
    fn process(&mut self, mut buf: &[u8]) {
        while let Some((head, rest)) = buf.split_first_chunk::<RECORD_HEAD>() {
            let ty = u32::from_ne_bytes([head[0], head[1], head[2], head[3]]);
            let misc = u16::from_ne_bytes([head[4], head[5]]);
            let len = u32::from_ne_bytes([head[8], head[9], head[10], head[11]]) as usize;
            let Some(body) = rest.get(..len) else {
                self.malformed += 1;
                break;
            };
            self.on_record(ty, misc, body);
            buf = &rest[len..];
        }
        let s = &self.shared;
        if self.n_cpu > 0 {
            s.samples.fetch_add(self.n_cpu, Ordering::Relaxed);
            s.pending
                .store(self.pending.len() as u64, Ordering::Relaxed);
        }
        if self.n_off > 0 {
            s.offcpu_samples.fetch_add(self.n_off, Ordering::Relaxed);
        }
        if self.n_switches > 0 {
            s.switches.fetch_add(self.n_switches, Ordering::Relaxed);
        }
        if self.n_mem > 0 {
            s.mem_samples.fetch_add(self.n_mem, Ordering::Relaxed);
        }
        (self.n_cpu, self.n_off, self.n_switches, self.n_mem) = (0, 0, 0, 0);
        self.end_round();
    }

    fn end_round(&mut self) {
        if self.off_cpu {
            self.offcpu.end_round();
            self.publish_offcpu();
        }
    }

    fn publish_offcpu(&self) {
        self.shared
            .blocked_ns
            .store(self.offcpu.blocked_ns, Ordering::Relaxed);
    }

    fn on_record(&mut self, ty: u32, misc: u16, body: &[u8]) {
        match ty {
            records::RECORD_SAMPLE => {
                match Sample::parse(body, self.unwinder.is_some(), self.raw) {
                    Some(s) => match self.ids.role(s.id) {
                        Role::Off => self.on_off_sample(misc, &s),
                        Role::Wake => self.on_wake_sample(misc, &s, WakeSource::Stack),
                        Role::WakeEvery => self.on_wake_sample(misc, &s, WakeSource::Every),
                        Role::WakeCpu => self.on_wake_sample(misc, &s, WakeSource::Wide),
                        Role::Mem => self.on_mem_sample(misc, &s),
                        Role::Cpu => self.on_sample(misc, &s),
                    },
                    None => self.malformed += 1,
                }
            }
            records::RECORD_SWITCH | records::RECORD_SWITCH_CPU_WIDE => {
                match Switch::parse(ty, misc, body) {
                    Some(sw) => self.on_switch(&sw),
                    None => self.malformed += 1,
                }
            }
            records::RECORD_COMM => match Comm::parse(body) {
                Some(c) => {
                    let time = records::sample_id_time(body).unwrap_or(0);
                    self.on_comm(misc, &c, time);
                }
                None => self.malformed += 1,
            },
            records::RECORD_MMAP2 => match Mmap2::parse(body) {
                Some(m) if m.prot & libc::PROT_EXEC as u32 != 0 => {
                    let time = records::sample_id_time(body).unwrap_or(0);
                    self.resolver.on_mmap(m.pid, &m, time);
                    if let Some(u) = &mut self.unwinder
                        && m.is_file()
                    {
                        use std::os::unix::ffi::OsStrExt as _;
                        let ino = (misc & records::MISC_MMAP_BUILD_ID == 0).then_some(m.ino);
                        u.add_mapping(
                            m.pid,
                            m.addr,
                            m.addr.saturating_add(m.len),
                            m.pgoff,
                            std::path::Path::new(std::ffi::OsStr::from_bytes(m.filename)),
                            ino,
                        );
                    }
                }
                Some(_) => {}
                None => self.malformed += 1,
            },
            records::RECORD_FORK => match Task::parse(body) {
                Some(t) => {
                    // The child has its creator's name until its exec; a tid handed out
                    // again takes it from its fork on.
                    let time = records::sample_id_time(body).unwrap_or(0);
                    if let Some(name) = self.names.at(t.ptid, time) {
                        self.names.set(t.tid, time, name);
                    }
                    if t.pid != t.ppid {
                        self.resolver.on_fork(t.ppid, t.pid);
                        if let Some(u) = &mut self.unwinder {
                            u.on_fork(t.ppid, t.pid);
                        }
                    }
                }
                None => self.malformed += 1,
            },
            records::RECORD_EXIT => match Task::parse(body) {
                Some(t) => {
                    self.exited_threads.push((t.tid, self.batches));
                    if t.pid == t.tid {
                        self.resolver.on_exit(t.pid, self.batches);
                        if let Some(u) = &mut self.unwinder {
                            u.on_exit(t.pid, self.batches);
                        }
                    }
                }
                None => self.malformed += 1,
            },
            records::RECORD_LOST => {
                let lost = records::parse_lost(body).unwrap_or(0);
                self.shared.lost.fetch_add(lost, Ordering::Relaxed);
                self.on_lost(body);
            }
            records::RECORD_LOST_SAMPLES => {
                let lost = records::parse_lost_samples(body).unwrap_or(0);
                self.shared.lost.fetch_add(lost, Ordering::Relaxed);
                self.on_lost(body);
            }
            records::RECORD_THROTTLE => {
                self.shared.throttled.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    fn on_lost(&mut self, body: &[u8]) {
        if self.off_cpu {
            self.offcpu
                .on_lost(records::sample_id_time(body).unwrap_or(0));
        }
    }

    /// Fills `self.key` with the raw stack of sample `s`, with its thread's name when
    /// `per_thread`.
    fn sample_key(&mut self, misc: u16, s: &Sample<'_>, per_thread: bool) {
        self.split.split(s.callchain(), s.ip, misc);
        if !self.kernel_frames {
            self.split.kernel.clear();
        }
        let process = self.name_of(s.pid, s.pid, s.time);
        let thread = if per_thread {
            u64::from(self.name_of(s.pid, s.tid, s.time).0)
        } else {
            NO_THREAD
        };
        // Samples come in runs of one process: only a change of process can mean one
        // not seen yet, whose mappings the resolver then reads (once).
        if self.last_pid != Some(s.pid) {
            self.resolver.see_process(s.pid);
            self.last_pid = Some(s.pid);
        }
        self.key.clear();
        self.key.extend([
            u64::from(process.0),
            thread,
            u64::from(s.pid),
            self.split.kernel.len() as u64,
            0,
        ]);
        self.key.extend_from_slice(&self.split.kernel);
        match &mut self.unwinder {
            Some(u) => {
                let ending = u.unwind(s.pid, s.user.as_ref(), &mut self.split.user);
                self.key.extend_from_slice(&self.split.user);
                if let Some(frame) = ending_frame(&mut self.endings, &mut self.interner, u, ending)
                {
                    self.key.push(FRAME_TAG | u64::from(frame.0));
                }
            }
            None => self.key.extend_from_slice(&self.split.user),
        }
    }

    fn on_sample(&mut self, misc: u16, s: &Sample<'_>) {
        self.n_cpu += 1;
        self.sample_key(misc, s, self.per_thread);
        let slot = match self.pending.get_mut(self.key.as_slice()) {
            Some((slot, count)) => {
                *count += 1;
                *slot
            }
            None => {
                let slot = self.pending.len() as u32;
                self.pending.insert(self.key.as_slice().into(), (slot, 1));
                slot
            }
        };
        self.timeline.sample(s.time, s.tid, slot);
        self.name_thread(s.pid, s.tid);
    }

    /// A `page-faults` sample: where resident memory grew by one period of pages.
    fn on_mem_sample(&mut self, misc: u16, s: &Sample<'_>) {
        self.n_mem += 1;
        self.sample_key(misc, s, self.per_thread);
        let slot = match self.mem_pending.get_mut(self.key.as_slice()) {
            Some((slot, count)) => {
                *count += 1;
                *slot
            }
            None => {
                let slot = self.mem_pending.len() as u32;
                self.mem_pending
                    .insert(self.key.as_slice().into(), (slot, 1));
                slot
            }
        };
        self.timeline.mem_sample(s.time, s.tid, slot);
        self.name_thread(s.pid, s.tid);
    }

    /// Hands out the name of thread `tid` with the next chunk, the first time it is seen.
    fn name_thread(&mut self, pid: u32, tid: u32) {
        if self.table.new_thread(tid) {
            let name = match self.names.latest(tid) {
                Some(name) => name,
                None => self.name_of(pid, tid, 0),
            };
            let name = self.interner.name(name).to_owned();
            self.chunk.threads.push((tid, name));
        }
    }

    /// A `context-switches` sample: the stack of the switch-out record that follows.
    fn on_off_sample(&mut self, misc: u16, s: &Sample<'_>) {
        self.n_off += 1;
        self.sample_key(misc, s, self.per_thread);
        // The system call's first argument labels a wait on a futex by its word.
        if self.waits.is_some()
            && let (Some(arg), Some(u)) = (self.key.get_mut(KEY_ARG), &s.user)
        {
            *arg = u.di;
        }
        // The event's fixed period: one switch in `off_every` is sampled.
        self.offcpu
            .on_sample(s.cpu, s.tid, s.time, &self.key, self.off_every);
    }

    /// A `sched_waking` sample: a wake-up performed by the sample's thread (its stack is
    /// the waker's, named with its thread), or by an interrupt that came while it ran.
    /// A CPU-wide event's sees every process: only wake-ups of threads this sampler knows
    /// (the followed tree's, named by their fork, exec or first sample) are kept. The
    /// wakers of records without stacks are named by process and thread.
    fn on_wake_sample(&mut self, misc: u16, s: &Sample<'_>, source: WakeSource) {
        let Some(waits) = &mut self.waits else {
            return;
        };
        let Some((woken, waker)) = waits.waking.parse(s.raw) else {
            self.malformed += 1;
            return;
        };
        if source == WakeSource::Wide && !self.names.contains(woken) {
            return;
        }
        waits.wakes += 1;
        match waker.frame() {
            None if source != WakeSource::Stack => {
                let process = self.name_of(s.pid, s.pid, s.time);
                let thread = self.name_of(s.pid, s.tid, s.time);
                self.key.clear();
                self.key.extend([
                    u64::from(process.0),
                    u64::from(thread.0),
                    u64::from(s.pid),
                    NO_ADDRESSES,
                    0,
                ]);
            }
            None => self.sample_key(misc, s, true),
            Some(frame) => {
                let frame = self.interner.intern(frame);
                self.key.clear();
                self.key
                    .extend([u64::from(frame.0), NO_THREAD, 0, NO_ADDRESSES, 0]);
            }
        }
        let waker = self.offcpu.intern(&self.key);
        self.offcpu.on_wake(woken, s.time, waker, source);
    }

    fn on_switch(&mut self, sw: &Switch) {
        if !self.off_cpu {
            return;
        }
        if !sw.out {
            self.offcpu.on_switch_in(sw.tid, sw.time);
            return;
        }
        self.n_switches += 1;
        if !sw.preempt {
            self.name_thread(sw.pid, sw.tid);
        }
        let sampled = self.offcpu.take_stash(sw.cpu, sw.tid, sw.time);
        let (stack, scale) = match sampled {
            Some((_, scale)) if sw.preempt => (NO_STACK, scale),
            Some(sampled) => sampled,
            // One switch in every `offcpu_stack_every` is sampled: the sampled ones
            // stand for the others (their weight is scaled by N).
            None if self.off_stacks && self.off_every > 1 => return,
            None if sw.preempt => (NO_STACK, 1),
            None => {
                let process = self.name_of(sw.pid, sw.pid, sw.time);
                let thread = self.name_of(sw.pid, sw.tid, sw.time);
                let why = if self.off_stacks {
                    NO_STACK_MISSING
                } else {
                    NO_STACK_DENIED
                };
                self.key.clear();
                self.key.extend([
                    u64::from(process.0),
                    u64::from(thread.0),
                    u64::from(sw.pid),
                    why,
                    0,
                ]);
                (self.offcpu.intern(&self.key), 1)
            }
        };
        self.offcpu
            .on_switch_out(sw.tid, sw.time, sw.preempt, stack, scale);
    }

    fn on_comm(&mut self, misc: u16, c: &Comm<'_>, time: u64) {
        if misc & records::MISC_COMM_EXEC != 0 && c.pid == c.tid {
            self.resolver.on_exec(c.pid);
            if let Some(u) = &mut self.unwinder {
                u.on_exec(c.pid);
            }
        }
        let name = String::from_utf8_lossy(c.name);
        let id = self.interner.intern(&name);
        self.names.set(c.tid, time, id);
    }

    /// The interned name thread `tid` of process `pid` had at `time`, read from /proc
    /// the first time it is seen without a COMM record.
    fn name_of(&mut self, pid: u32, tid: u32, time: u64) -> FrameId {
        if let Some(id) = self.names.at(tid, time) {
            return id;
        }
        let path = if pid == tid {
            format!("/proc/{pid}/comm")
        } else {
            format!("/proc/{pid}/task/{tid}/comm")
        };
        let read = crate::procfs::read_into(path.as_ref(), &mut self.name_buf).is_ok();
        let id = if read && !self.name_buf.trim_end().is_empty() {
            self.interner.intern(self.name_buf.trim_end())
        } else {
            self.interner.intern(&format!("[{tid}]"))
        };
        self.names.set(tid, 0, id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::frames::{DENIED_FRAME, MISSING_FRAME};

    #[inline(never)]
    fn collect_test_root_fn() -> usize {
        std::hint::black_box(collect_test_root_fn as *const () as usize)
    }

    #[inline(never)]
    fn collect_test_leaf_fn() -> usize {
        std::hint::black_box(collect_test_leaf_fn as *const () as usize)
    }

    /// The id of the on-CPU event in these tests.
    const CPU_ID: u64 = 10;
    /// The id of the off-CPU event in these tests.
    const OFF_ID: u64 = 11;
    /// The id of the page-fault event in these tests.
    const MEM_ID: u64 = 12;

    fn sample_record(pid: u32, chain: &[u64]) -> Vec<u8> {
        event_sample(CPU_ID, pid, 0, chain)
    }

    fn event_sample(id: u64, pid: u32, time: u64, chain: &[u64]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(id.to_ne_bytes());
        body.extend(chain.get(1).copied().unwrap_or(0).to_ne_bytes()); // ip
        body.extend(pid.to_ne_bytes());
        body.extend(pid.to_ne_bytes());
        body.extend(time.to_ne_bytes());
        body.extend(0u32.to_ne_bytes()); // cpu
        body.extend(0u32.to_ne_bytes());
        body.extend((chain.len() as u64).to_ne_bytes());
        for &a in chain {
            body.extend(a.to_ne_bytes());
        }
        body
    }

    /// A user-frames-only, names-only collector on this process, with the addresses of
    /// the two test functions.
    fn names_only_collector() -> (u32, Arc<Shared>, Collector, u64, u64) {
        collector_with(true)
    }

    /// As [`names_only_collector`], recording off-CPU time with stacks or without.
    fn collector_with(off_stacks: bool) -> (u32, Arc<Shared>, Collector, u64, u64) {
        let pid = std::process::id();
        let shared = Arc::new(Shared::new().unwrap());
        let opts = SamplerOptions {
            symbols: crate::SymbolDetail::NamesOnly,
            ..SamplerOptions::default()
        };
        let setup = Setup {
            unwind: None,
            kernel_frames: false,
            off_cpu: true,
            off_stacks,
            ids: EventIds {
                off: vec![OFF_ID],
                mem: vec![MEM_ID],
                wake: Vec::new(),
                wake_every: Vec::new(),
                wake_cpu: Vec::new(),
            },
            mem_bytes: 65_536,
            enable: true,
            on_exec: false,
            follow: None,
            waking: None,
            wake_every: 1,
        };
        let c = Collector::new(Arc::clone(&shared), pid, &opts, setup);
        let root = collect_test_root_fn() as u64;
        let leaf = collect_test_leaf_fn() as u64;
        (pid, shared, c, root, leaf)
    }

    #[test]
    fn leaf_first_callchains_become_root_first_stacks_under_the_process_name() {
        let (pid, shared, mut c, root, leaf) = names_only_collector();
        // Leaf first; the caller entry is a return address just past the call (+1 here,
        // moved back by one before lookup, so it stays inside the root function).
        let user = -512i64 as u64;
        let body = sample_record(pid, &[user, leaf + 4, root + 1]);
        for _ in 0..3 {
            c.on_record(records::RECORD_SAMPLE, 2, &body);
        }
        assert_eq!(c.pending.len(), 1);
        c.batch();
        assert!(c.pending.is_empty());
        let folded = c.cpu.to_folded();
        let line = folded.lines().next().unwrap();
        let (stack, weight) = line.rsplit_once(' ').unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert_eq!(weight, "3");
        assert_eq!(frames.len(), 3, "{line}");
        assert_eq!(frames[0], comm.trim_end());
        assert!(frames[1].ends_with("collect_test_root_fn"), "{line}");
        assert!(frames[2].ends_with("collect_test_leaf_fn"), "{line}");
        assert_eq!(shared.batches.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn page_fault_samples_fold_into_the_memory_tree_weighted_in_bytes() {
        let (pid, shared, mut c, root, leaf) = names_only_collector();
        let user = -512i64 as u64;
        let fault = event_sample(MEM_ID, pid, 0, &[user, leaf + 4, root + 1]);
        let on_cpu = sample_record(pid, &[user, root + 1]);
        for _ in 0..5 {
            c.on_record(records::RECORD_SAMPLE, 2, &fault);
        }
        c.on_record(records::RECORD_SAMPLE, 2, &on_cpu);
        c.process(&[]);
        c.batch();
        let folded = c.mem.to_folded();
        let lines: Vec<&str> = folded.lines().collect();
        assert_eq!(lines.len(), 1, "{folded}");
        assert!(
            lines[0].ends_with("collect_test_leaf_fn 327680"),
            "5 samples × 64 KiB: {folded}"
        );
        assert_eq!(c.cpu.total_weight(), 1, "the on-CPU sample stays on-CPU");
        assert_eq!(shared.mem_samples.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn stacks_with_cached_and_new_frames_fold_alike_across_batches() {
        let (pid, _shared, mut c, root, leaf) = names_only_collector();
        let user = -512i64 as u64;
        let known = sample_record(pid, &[user, leaf + 4, root + 1]);
        c.on_record(records::RECORD_SAMPLE, 2, &known);
        c.batch();
        // Second batch: the same stack, all cached, and one with a new leaf address.
        let new_leaf = sample_record(pid, &[user, leaf + 8, root + 1]);
        c.on_record(records::RECORD_SAMPLE, 2, &known);
        c.on_record(records::RECORD_SAMPLE, 2, &new_leaf);
        c.on_record(records::RECORD_SAMPLE, 2, &new_leaf);
        c.batch();
        assert!(c.pending.is_empty() && c.deferred.is_empty());
        let folded = c.cpu.to_folded();
        let lines: Vec<&str> = folded.lines().collect();
        assert_eq!(lines.len(), 1, "{folded}");
        assert!(lines[0].ends_with("collect_test_leaf_fn 4"), "{folded}");
    }

    /// A switch record's body: the sample_id of `pid` at `time` on `cpu`.
    fn switch_record(pid: u32, time: u64, cpu: u32) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(pid.to_ne_bytes());
        body.extend(pid.to_ne_bytes());
        body.extend(time.to_ne_bytes());
        body.extend(cpu.to_ne_bytes());
        body.extend(0u32.to_ne_bytes());
        body.extend(OFF_ID.to_ne_bytes());
        body
    }

    const OUT: u16 = records::MISC_SWITCH_OUT;

    #[test]
    fn blocked_time_weighs_the_stack_sampled_at_switch_out_in_microseconds() {
        let (pid, shared, mut c, root, leaf) = collector_with(true);
        let user = -512i64 as u64;
        let t = 1_000_000_000;
        // Two blocked intervals of 3 ms and 1.5 ms at the same place.
        for (out, back) in [(t, t + 3_000_000), (t + 5_000_000, t + 6_500_000)] {
            let sample = event_sample(OFF_ID, pid, out - 200, &[user, leaf + 4, root + 1]);
            c.on_record(records::RECORD_SAMPLE, 1, &sample);
            c.on_record(records::RECORD_SWITCH, OUT, &switch_record(pid, out, 0));
            c.on_record(records::RECORD_SWITCH, 0, &switch_record(pid, back, 1));
        }
        // A preempted switch-out: runnable time, not blocked.
        let pre = event_sample(OFF_ID, pid, t + 7_000_000, &[user, leaf + 4, root + 1]);
        c.on_record(records::RECORD_SAMPLE, 1, &pre);
        let preempted = switch_record(pid, t + 7_000_100, 0);
        c.on_record(
            records::RECORD_SWITCH,
            OUT | records::MISC_SWITCH_OUT_PREEMPT,
            &preempted,
        );
        c.on_record(
            records::RECORD_SWITCH,
            0,
            &switch_record(pid, t + 9_000_000, 0),
        );
        c.end_round();
        c.end_round();
        c.batch();
        // On-CPU samples are not off-CPU ones and vice versa.
        assert!(c.cpu.is_empty(), "{}", c.cpu.to_folded());
        let folded = c.off.to_folded();
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
        let lines: Vec<&str> = folded.lines().collect();
        assert_eq!(lines.len(), 1, "{folded}");
        let (stack, weight) = lines[0].rsplit_once(' ').unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        assert_eq!(weight, "4500", "{folded}");
        assert_eq!(frames[0], comm.trim_end(), "{folded}");
        assert!(frames[1].ends_with("collect_test_root_fn"), "{folded}");
        assert!(frames[2].ends_with("collect_test_leaf_fn"), "{folded}");
        assert_eq!(
            shared.offcpu_samples.load(Ordering::Relaxed),
            0,
            "counted per drain"
        );
        assert_eq!(c.n_off, 3);
        assert_eq!(c.n_switches, 3);
        assert_eq!(c.offcpu.preempted_ns, 1_999_900);
    }

    #[test]
    fn without_stacks_blocked_time_is_per_thread_and_says_why() {
        let (pid, _shared, mut c, _, _) = collector_with(false);
        let t = 1_000_000_000;
        c.on_record(records::RECORD_SWITCH, OUT, &switch_record(pid, t, 0));
        c.on_record(
            records::RECORD_SWITCH,
            0,
            &switch_record(pid, t + 2_000_000, 1),
        );
        c.end_round();
        c.end_round();
        c.batch();
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
        let comm = comm.trim_end();
        assert_eq!(
            c.off.to_folded().trim_end(),
            format!("{comm};{comm};{DENIED_FRAME} 2000")
        );
    }

    #[test]
    fn a_switch_out_whose_sample_is_missing_is_named_so() {
        let (pid, _shared, mut c, _, _) = collector_with(true);
        let t = 1_000_000_000;
        c.on_record(records::RECORD_SWITCH, OUT, &switch_record(pid, t, 0));
        c.on_record(
            records::RECORD_SWITCH,
            0,
            &switch_record(pid, t + 1_000_000, 0),
        );
        c.end_round();
        c.end_round();
        c.batch();
        assert!(
            c.off
                .to_folded()
                .trim_end()
                .ends_with(&format!("{MISSING_FRAME} 1000")),
            "{}",
            c.off.to_folded()
        );
    }
}
