//! Opening the perf events of a sampler: the plan, its builders, ring buffers sized to
//! the locked-memory budget, and the reasons given when the kernel refuses.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use benchtop_profile::sampling::PerfAccess;
use perf_event::events::{Hardware, Software, Tracepoint};
use perf_event::{Builder, Clock, Counter, SampleFlag};

use super::options::SampleEvent;
use crate::ProfilerError;
use crate::procfs;
use crate::unwind::MAX_STACK_SIZE;

/// The perf ring buffer of one event (perf-event2's sampler).
pub(super) type Ring = perf_event::Sampler;

/// `PERF_EVENT_IOC_SET_OUTPUT`: `_IO('$', 5)`.
const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = 0x2405;

/// Why opening the events failed.
#[derive(Debug)]
pub(super) enum OpenError {
    /// EACCES or EPERM from perf_event_open.
    Denied(i32),
    /// The process is gone.
    NoProcess,
    Open(usize, io::Error),
    Mmap(usize, usize, io::Error),
}

impl OpenError {
    pub(super) fn into_error(self, pid: u32, access: &PerfAccess) -> ProfilerError {
        match self {
            OpenError::Denied(errno) => ProfilerError::PermissionDenied {
                reason: permission_reason(access, errno),
            },
            OpenError::NoProcess => ProfilerError::ProcessNotFound { pid },
            OpenError::Open(cpu, source) => ProfilerError::PerfOpen { pid, cpu, source },
            OpenError::Mmap(cpu, pages, source) => ProfilerError::RingBuffer { cpu, pages, source },
        }
    }

    fn from_open(cpu: usize, e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(errno @ (libc::EACCES | libc::EPERM)) => OpenError::Denied(errno),
            Some(libc::ESRCH) => OpenError::NoProcess,
            _ => OpenError::Open(cpu, e),
        }
    }
}

/// perf_event_open's answers for an event this machine does not have. EINVAL is not
/// one of them: it means a bad attribute (a frequency too high, a flag the kernel does
/// not know) and stays a [`ProfilerError::PerfOpen`].
pub(super) fn is_missing_event(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENODEV | libc::EOPNOTSUPP)
    )
}

pub(super) fn event_builder(event: SampleEvent) -> Builder<'static> {
    match event {
        SampleEvent::Cycles => Builder::new(Hardware::CPU_CYCLES),
        SampleEvent::Auto | SampleEvent::CpuClock => Builder::new(Software::CPU_CLOCK),
    }
}

/// The events to open on each thread and CPU.
#[derive(Debug, Clone)]
pub(super) struct EventPlan {
    /// The on-CPU event; `None` for an off-CPU-only profile, where the
    /// `context-switches` event carries the side-band records instead.
    pub(super) on_cpu: Option<SampleEvent>,
    /// Switch records for off-CPU time.
    pub(super) off_cpu: bool,
    /// `context-switches` samples for off-CPU stacks (needs kernel sampling).
    pub(super) off_stacks: bool,
    pub(super) kernel_frames: bool,
    pub(super) frequency_hz: u64,
    pub(super) on_exec: bool,
    /// Opened enabled (attach); else enabled by the reader or at exec.
    pub(super) enabled: bool,
    /// Samples carry the user registers and a copy of this many bytes of user stack
    /// (see [`crate::records::UserStack`]); the user part of the kernel's callchain is
    /// then left out.
    pub(super) stack_size: Option<u32>,
    /// The `context-switches` event's sample period.
    pub(super) off_every: u32,
    /// The `page-faults` event's sample period, when memory is profiled.
    pub(super) mem_period: Option<u64>,
    /// The `sched:sched_waking` tracepoint's id, when waits are profiled: sampled at
    /// every wake-up a followed thread performs, with its raw record.
    pub(super) waking: Option<u64>,
    /// The waker's stack is taken at one wake-up in this many; with more than one, a
    /// second event records every wake-up without a stack.
    pub(super) wake_every: u32,
}

/// What an event's samples are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// On-CPU samples.
    Cpu,
    /// Off-CPU samples (`context-switches`).
    Off,
    /// Memory samples (`page-faults`).
    Mem,
    /// Wake-ups (`sched:sched_waking`), taken in the waker with its stack (one in
    /// [`EventPlan::wake_every`]).
    Wake,
    /// Every wake-up a followed thread performs, without a stack (beside [`Role::Wake`]
    /// when it takes one stack in more than one).
    WakeEvery,
    /// Wake-ups of any process on a CPU: a CPU-wide event, without stacks.
    WakeCpu,
}

impl EventPlan {
    /// Some event of the plan samples in kernel mode (needs permission).
    pub(super) fn kernel_sampled(&self) -> bool {
        self.off_stacks
            || self.waking.is_some()
            || ((self.on_cpu.is_some() || self.mem_period.is_some()) && self.kernel_frames)
    }

    /// The role of the event that owns each ring buffer and carries the side-band
    /// records: the on-CPU event when there is one, else the off-CPU one, else the
    /// page-fault one.
    pub(super) fn main_role(&self) -> Role {
        if self.on_cpu.is_some() {
            Role::Cpu
        } else if self.off_cpu || self.mem_period.is_none() {
            Role::Off
        } else {
            Role::Mem
        }
    }

    /// The events opened beside the main one, writing into its ring.
    fn extra_roles(&self) -> impl Iterator<Item = Role> + '_ {
        let main = self.main_role();
        [
            (self.off_stacks && main != Role::Off).then_some(Role::Off),
            (self.mem_period.is_some() && main != Role::Mem).then_some(Role::Mem),
            self.waking.is_some().then_some(Role::Wake),
            (self.waking.is_some() && self.wake_every > 1).then_some(Role::WakeEvery),
        ]
        .into_iter()
        .flatten()
    }
}

/// Ids of the events whose samples are not on-CPU samples.
#[derive(Debug, Clone, Default)]
pub(crate) struct EventIds {
    /// Off-CPU (`context-switches`) events.
    pub off: Vec<u64>,
    /// Memory (`page-faults`) events.
    pub mem: Vec<u64>,
    /// Wake-up (`sched:sched_waking`) events with stacks.
    pub wake: Vec<u64>,
    /// Wake-up events of followed threads without stacks.
    pub wake_every: Vec<u64>,
    /// CPU-wide wake-up events.
    pub wake_cpu: Vec<u64>,
}

impl EventIds {
    fn push(&mut self, role: Role, id: u64) {
        match role {
            Role::Cpu => {}
            Role::Off => self.off.push(id),
            Role::Mem => self.mem.push(id),
            Role::Wake => self.wake.push(id),
            Role::WakeEvery => self.wake_every.push(id),
            Role::WakeCpu => self.wake_cpu.push(id),
        }
    }

    /// Moves `other`'s ids here, unsorted: [`EventIds::sort`] before looking one up.
    fn append(&mut self, other: &mut EventIds) {
        let EventIds {
            off,
            mem,
            wake,
            wake_every,
            wake_cpu,
        } = other;
        self.off.append(off);
        self.mem.append(mem);
        self.wake.append(wake);
        self.wake_every.append(wake_every);
        self.wake_cpu.append(wake_cpu);
    }

    /// Adds `other`'s ids; both lists stay sorted, for binary search.
    pub(crate) fn extend(&mut self, other: EventIds) {
        self.off.extend(other.off);
        self.mem.extend(other.mem);
        self.wake.extend(other.wake);
        self.wake_every.extend(other.wake_every);
        self.wake_cpu.extend(other.wake_cpu);
        self.sort();
    }

    pub(crate) fn sort(&mut self) {
        for ids in [
            &mut self.off,
            &mut self.mem,
            &mut self.wake,
            &mut self.wake_every,
            &mut self.wake_cpu,
        ] {
            ids.sort_unstable();
            ids.dedup();
        }
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.off.is_empty()
            && self.mem.is_empty()
            && self.wake.is_empty()
            && self.wake_every.is_empty()
            && self.wake_cpu.is_empty()
    }

    /// The role of the event with this id.
    pub(crate) fn role(&self, id: u64) -> Role {
        if self.off.binary_search(&id).is_ok() {
            Role::Off
        } else if self.mem.binary_search(&id).is_ok() {
            Role::Mem
        } else if self.wake.binary_search(&id).is_ok() {
            Role::Wake
        } else if self.wake_every.binary_search(&id).is_ok() {
            Role::WakeEvery
        } else if self.wake_cpu.binary_search(&id).is_ok() {
            Role::WakeCpu
        } else {
            Role::Cpu
        }
    }
}

/// The sample layout every event of a sampler shares (see [`crate::records`]). Not
/// PERIOD: with it, the kernel samples a software event at every occurrence whatever
/// its period, which [`SamplerOptions::offcpu_stack_every`] needs. RAW with a wake-up
/// tracepoint: the other events then write an empty raw part (a size and four zeros).
fn sample_flags(plan: &EventPlan) -> SampleFlag {
    let mut flags = SampleFlag::IDENTIFIER
        | SampleFlag::IP
        | SampleFlag::TID
        | SampleFlag::TIME
        | SampleFlag::CPU
        | SampleFlag::CALLCHAIN;
    if plan.waking.is_some() {
        flags |= SampleFlag::RAW;
    }
    if plan.stack_size.is_some() {
        flags | SampleFlag::REGS_USER | SampleFlag::STACK_USER
    } else {
        flags
    }
}

/// The stack copy the kernel is asked for: `size` rounded down to a multiple of 8,
/// between 8 bytes and [`MAX_STACK_SIZE`].
pub(super) fn stack_copy_size(size: u32) -> u32 {
    (size.min(MAX_STACK_SIZE) & !7).max(8)
}

/// What every event of a sampler on thread `tid` and `cpu` has in common.
fn common(b: &mut Builder<'static>, tid: u32, cpu: usize, plan: &EventPlan, data_bytes: usize) {
    b.observe_pid(tid as libc::pid_t)
        .one_cpu(cpu)
        .inherit(true)
        .sample(sample_flags(plan))
        .sample_id_all(true)
        // Sample times on the recorder's clock (see the timeline module).
        .clockid(Clock::MONOTONIC)
        .exclude_hv(true)
        .exclude_callchain_kernel(!plan.kernel_frames)
        // Wake the poll when a quarter of the buffer is used; it times out anyway.
        .wakeup_watermark((data_bytes / 4).max(1))
        .enable_on_exec(plan.on_exec)
        .enabled(plan.enabled);
    if let Some(size) = plan.stack_size {
        b.sample_regs_user(crate::records::REGS_USER_MASK)
            .sample_stack_user(size)
            .exclude_callchain_user(true);
    }
}

/// The `context-switches` event, sampled at every switch (or every Nth: see
/// [`SamplerOptions::offcpu_stack_every`]).
fn switches_builder(plan: &EventPlan) -> Builder<'static> {
    let mut b = Builder::new(Software::CONTEXT_SWITCHES);
    b.sample_period(u64::from(plan.off_every.max(1)));
    b
}

/// The `page-faults` event, sampled at one fault in [`EventPlan::mem_period`].
fn faults_builder(plan: &EventPlan) -> Builder<'static> {
    let mut b = Builder::new(Software::PAGE_FAULTS);
    b.sample_period(plan.mem_period.unwrap_or(1).max(1));
    b
}

/// The event that owns the ring buffer and carries the side-band records (names,
/// mappings, forks and exits, switches): see [`EventPlan::main_role`].
fn main_builder(tid: u32, cpu: usize, plan: &EventPlan, data_bytes: usize) -> Builder<'static> {
    let (mut b, kernel) = match (plan.main_role(), plan.on_cpu) {
        (Role::Cpu, Some(event)) => {
            let mut b = event_builder(event);
            b.sample_frequency(plan.frequency_hz);
            (b, plan.kernel_frames)
        }
        (Role::Mem, _) => (faults_builder(plan), plan.kernel_frames),
        _ => (switches_builder(plan), plan.off_stacks),
    };
    common(&mut b, tid, cpu, plan, data_bytes);
    b.comm(true)
        .comm_exec(true)
        .task(true)
        .mmap(true)
        .mmap2(true)
        .context_switch(plan.off_cpu)
        .exclude_kernel(!kernel);
    b
}

/// An event beside the main one: off-CPU stacks next to an on-CPU event, or page
/// faults next to either.
fn extra_builder(
    role: Role,
    tid: u32,
    cpu: usize,
    plan: &EventPlan,
    data_bytes: usize,
) -> Builder<'static> {
    let mut b = match (role, plan.waking) {
        (Role::Mem, _) => faults_builder(plan),
        (Role::Wake | Role::WakeEvery, Some(id)) => {
            let mut b = Builder::new(Tracepoint::with_id(id));
            b.sample_period(match role {
                Role::Wake => u64::from(plan.wake_every.max(1)),
                _ => 1,
            });
            b
        }
        _ => switches_builder(plan),
    };
    common(&mut b, tid, cpu, plan, data_bytes);
    if role == Role::WakeEvery {
        bare_wakes(&mut b, plan);
    }
    // Off-CPU samples are taken in the scheduler and wake-ups in the kernel's wake-up
    // path, in kernel mode: excluding the kernel would drop every one of them. Faults of
    // user code are sampled in user mode (their registers are the faulting code's); those
    // taken inside system calls need kernel sampling.
    b.exclude_kernel(role == Role::Mem && !plan.kernel_frames);
    b
}

/// Opens a CPU-wide `sched:sched_waking` event on each CPU, writing into that CPU's ring:
/// it sees the wake-ups the followed threads' own events cannot, those by interrupts
/// while a CPU idles and by processes outside the tree. Their samples carry no stacks
/// (the sampler's layout, with an 8-byte stack copy and no callchain): the join needs the
/// woken thread and the waker's name. Needs root or CAP_PERFMON; refused, the note says
/// what is then missing and nothing else changes.
pub(super) fn open_cpu_wakes(
    cpus: &[usize],
    plan: &EventPlan,
    events: &mut Events,
) -> Option<String> {
    let id = plan.waking?;
    let mut counters = Vec::with_capacity(cpus.len());
    let mut ids = Vec::with_capacity(cpus.len());
    for (ring, &cpu) in events.rings.iter().zip(cpus) {
        let mut b = Builder::new(Tracepoint::with_id(id));
        b.any_pid()
            .one_cpu(cpu)
            .inherit(false)
            .sample_period(1)
            .sample(sample_flags(plan))
            .sample_id_all(true)
            .clockid(Clock::MONOTONIC)
            .exclude_hv(true)
            .exclude_kernel(false)
            .enabled(true);
        bare_wakes(&mut b, plan);
        let opened = b.build().and_then(|c| {
            set_output(c.as_raw_fd(), ring.as_raw_fd())?;
            Ok(c)
        });
        match opened {
            Ok(c) => {
                ids.push(c.id());
                counters.push(c);
            }
            Err(e) => {
                return Some(format!(
                    "waits: wake-ups by interrupts on idle CPUs and by processes outside the \
                     recorded tree are not seen (they end as `[woken: not seen]`): the CPU-wide \
                     sched:sched_waking event on CPU {cpu} was refused: {e} (it needs root or \
                     CAP_PERFMON)"
                ));
            }
        }
    }
    events.counters.append(&mut counters);
    events.ids.wake_cpu.append(&mut ids);
    events.ids.sort();
    None
}

/// A wake-up event of the sampler's layout that takes no stack: no callchain, an 8-byte
/// stack copy.
fn bare_wakes(b: &mut Builder<'static>, plan: &EventPlan) {
    b.exclude_callchain_kernel(true)
        .exclude_callchain_user(true);
    if plan.stack_size.is_some() {
        b.sample_regs_user(crate::records::REGS_USER_MASK)
            .sample_stack_user(8);
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

/// Events opened for a sampler.
pub(super) struct Events {
    /// One ring buffer per CPU, in the order of the CPUs.
    pub(super) rings: Vec<Ring>,
    /// Every other event, writing into the ring of its CPU.
    pub(super) counters: Vec<Counter>,
    /// Ids of the events whose samples are off-CPU or memory samples.
    pub(super) ids: EventIds,
    /// Threads with events of their own.
    pub(super) tids: Vec<u32>,
}

/// Opens the plan's events for every thread of `tids` on every CPU. The first thread
/// whose event opens on a CPU owns that CPU's ring buffer; the other events write into
/// it. `pages` is halved while the kernel refuses to map buffers that large
/// (locked-memory limits), and left at the size used. A thread other than the first
/// that is gone by the time its events open is skipped.
pub(super) fn open_events(
    tids: &[u32],
    cpus: &[usize],
    plan: &EventPlan,
    pages: &mut usize,
) -> Result<Events, OpenError> {
    let page_size = page_size();
    let mut rings: Vec<Option<Ring>> = cpus.iter().map(|_| None).collect();
    let mut events = Events {
        rings: Vec::with_capacity(cpus.len()),
        counters: Vec::new(),
        ids: EventIds::default(),
        tids: Vec::with_capacity(tids.len()),
    };
    'threads: for (i, &tid) in tids.iter().enumerate() {
        let mut counters = Vec::new();
        let mut ids = EventIds::default();
        for (slot, &cpu) in rings.iter_mut().zip(cpus) {
            let opened = open_on(tid, cpu, plan, pages, page_size, slot);
            match opened {
                Ok(opened) => {
                    for c in opened {
                        ids.push(c.role, c.counter.id());
                        counters.push(c.counter);
                    }
                }
                Err(OpenError::NoProcess) if i > 0 => continue 'threads,
                Err(e) => return Err(e),
            }
        }
        events.counters.append(&mut counters);
        events.ids.append(&mut ids);
        events.tids.push(tid);
    }
    for (ring, &cpu) in rings.into_iter().zip(cpus) {
        match ring {
            Some(r) => {
                events.ids.push(plan.main_role(), r.id());
                events.rings.push(r);
            }
            None => {
                return Err(OpenError::Open(
                    cpu,
                    io::Error::new(io::ErrorKind::NotFound, "no thread to open events on"),
                ));
            }
        }
    }
    events.ids.sort();
    Ok(events)
}

/// An opened event and what its samples are.
struct Opened {
    counter: Counter,
    role: Role,
}

/// Opens the events of `tid` on `cpu`. When `ring` is empty, the main event is mapped
/// and becomes it; else the main event writes into it and is returned. The other
/// events, when planned, always write into the ring.
fn open_on(
    tid: u32,
    cpu: usize,
    plan: &EventPlan,
    pages: &mut usize,
    page_size: usize,
    ring: &mut Option<Ring>,
) -> Result<Vec<Opened>, OpenError> {
    let mut opened = Vec::with_capacity(3);
    match ring {
        Some(r) => {
            let b = main_builder(tid, cpu, plan, *pages * page_size);
            let counter = b.build().map_err(|e| OpenError::from_open(cpu, e))?;
            set_output(counter.as_raw_fd(), r.as_raw_fd()).map_err(|e| OpenError::Open(cpu, e))?;
            opened.push(Opened {
                counter,
                role: plan.main_role(),
            });
        }
        None => loop {
            let b = main_builder(tid, cpu, plan, *pages * page_size);
            let counter = b.build().map_err(|e| OpenError::from_open(cpu, e))?;
            match counter.sampled(*pages * page_size) {
                Ok(r) => {
                    *ring = Some(r);
                    break;
                }
                Err(e)
                    if *pages > 1
                        && matches!(
                            e.raw_os_error(),
                            Some(libc::EPERM | libc::ENOMEM | libc::EAGAIN)
                        ) =>
                {
                    *pages /= 2;
                }
                Err(e) => return Err(OpenError::Mmap(cpu, *pages, e)),
            }
        },
    }
    for role in plan.extra_roles() {
        let Some(r) = ring.as_ref() else {
            return Err(OpenError::Open(
                cpu,
                io::Error::new(io::ErrorKind::NotFound, "no ring buffer"),
            ));
        };
        let b = extra_builder(role, tid, cpu, plan, *pages * page_size);
        let counter = b.build().map_err(|e| OpenError::from_open(cpu, e))?;
        set_output(counter.as_raw_fd(), r.as_raw_fd()).map_err(|e| OpenError::Open(cpu, e))?;
        opened.push(Opened { counter, role });
    }
    Ok(opened)
}

/// Opens the plan's events on thread `tid` (found after attaching), writing into the
/// existing `rings` (one per CPU of `cpus`), enabled. Returns the counters and the ids
/// of the off-CPU and memory ones.
pub(super) fn open_thread_events(
    tid: u32,
    cpus: &[usize],
    rings: &[Ring],
    plan: &EventPlan,
) -> io::Result<(Vec<Counter>, EventIds)> {
    let page_size = page_size();
    let mut counters = Vec::new();
    let mut ids = EventIds::default();
    for (ring, &cpu) in rings.iter().zip(cpus) {
        // The watermark only matters for the ring's own event.
        let data_bytes = page_size;
        let mut main = main_builder(tid, cpu, plan, data_bytes).build()?;
        set_output(main.as_raw_fd(), ring.as_raw_fd())?;
        main.enable()?;
        ids.push(plan.main_role(), main.id());
        counters.push(main);
        for role in plan.extra_roles() {
            let mut extra = extra_builder(role, tid, cpu, plan, data_bytes).build()?;
            set_output(extra.as_raw_fd(), ring.as_raw_fd())?;
            extra.enable()?;
            ids.push(role, extra.id());
            counters.push(extra);
        }
    }
    Ok((counters, ids))
}

/// The threads of `pid`, `pid` first.
pub(super) fn list_threads(pid: u32) -> Result<Vec<u32>, ProfilerError> {
    let dir = format!("/proc/{pid}/task");
    let entries = std::fs::read_dir(&dir).map_err(|_| ProfilerError::ProcessNotFound { pid })?;
    let mut tids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&t| t != pid)
        .collect();
    tids.sort_unstable();
    tids.insert(0, pid);
    Ok(tids)
}

/// Makes room for `threads` × `per_thread` more open files: raises the soft
/// RLIMIT_NOFILE towards the hard one when needed (and says so), or refuses.
pub(super) fn ensure_fd_limit(
    pid: u32,
    threads: usize,
    per_thread: u64,
) -> Result<Option<String>, ProfilerError> {
    let needed = threads as u64 * per_thread;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a live rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(None);
    }
    let open = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
    // Room for the ring buffers' own descriptors, the threads found later, and the
    // rest of the program.
    let want = open + needed + needed / 4 + 64;
    if want <= lim.rlim_cur {
        return Ok(None);
    }
    if want > lim.rlim_max {
        return Err(ProfilerError::TooManyEvents {
            pid,
            threads,
            needed,
            limit: lim.rlim_max,
        });
    }
    let before = lim.rlim_cur;
    lim.rlim_cur = want;
    // SAFETY: setrlimit reads a live rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(ProfilerError::TooManyEvents {
            pid,
            threads,
            needed,
            limit: before,
        });
    }
    Ok(Some(format!(
        "raised this process's open-file limit (RLIMIT_NOFILE) from {before} to {want}: \
         attaching to {threads} threads opens {needed} perf events ({per_thread} per thread)"
    )))
}

fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        _ => "an error",
    }
}

fn paranoid_text(access: &PerfAccess) -> String {
    match access.paranoid {
        Some(p) => format!("kernel.perf_event_paranoid is {p}"),
        None => "kernel.perf_event_paranoid is unreadable".into(),
    }
}

/// Why perf_event_open was refused altogether, and how to allow it.
pub(super) fn permission_reason(access: &PerfAccess, errno: i32) -> String {
    let who = if access.privileged {
        "this process is privileged, so the target may belong to another user or a security \
         module (SELinux, lockdown) forbids perf events"
            .to_owned()
    } else {
        "this process is not root and has no CAP_PERFMON".to_owned()
    };
    format!(
        "perf_event_open returned {}: {}, and {who}. To allow sampling: \
         `sudo sysctl kernel.perf_event_paranoid=1` (2 allows user-space stacks of your own \
         processes), or grant the binary the capability: \
         `sudo setcap cap_perfmon,cap_sys_ptrace=ep <path to benchtop>`",
        errno_name(errno),
        paranoid_text(access),
    )
}

/// Why kernel frames were left out.
pub(super) fn kernel_excluded_reason(access: &PerfAccess, errno: i32) -> String {
    format!(
        "kernel frames excluded: perf_event_open with kernel sampling returned {} \
         ({}; kernel sampling needs paranoid <= 1, root or CAP_PERFMON); stacks are user-space \
         only and time spent in the kernel is not sampled. Fix: \
         `sudo sysctl kernel.perf_event_paranoid=1` or `sudo setcap cap_perfmon=ep <path to benchtop>`",
        errno_name(errno),
        paranoid_text(access),
    )
}

/// Why off-CPU time has no stacks.
pub(super) fn offcpu_stacks_excluded_reason(access: &PerfAccess, errno: i32) -> String {
    format!(
        "off-CPU stacks unavailable: the context-switches event is sampled in the kernel's \
         scheduler, and perf_event_open with kernel sampling returned {} ({}; kernel sampling \
         needs paranoid <= 1, root or CAP_PERFMON); blocked time is recorded per thread from \
         switch records, without stacks (`[blocked: no stack — kernel sampling not \
         permitted]`). Fix: `sudo sysctl kernel.perf_event_paranoid=1` or \
         `sudo setcap cap_perfmon=ep <path to benchtop>`",
        errno_name(errno),
        paranoid_text(access),
    )
}

/// Why faults inside system calls are missing from the memory profile.
pub(super) fn kernel_faults_excluded_reason(access: &PerfAccess, errno: i32) -> String {
    format!(
        "page faults inside system calls not sampled: perf_event_open with kernel sampling \
         returned {} ({}; kernel sampling needs paranoid <= 1, root or CAP_PERFMON); the \
         memory profile holds the faults of user code only (a buffer first touched by \
         `read` is missed). Fix: `sudo sysctl kernel.perf_event_paranoid=1` or \
         `sudo setcap cap_perfmon=ep <path to benchtop>`",
        errno_name(errno),
        paranoid_text(access),
    )
}

pub(super) fn page_size() -> usize {
    // SAFETY: sysconf has no memory arguments.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as usize } else { 4096 }
}

pub(super) fn floor_pow2(n: usize) -> usize {
    if n == 0 {
        1
    } else {
        1 << (usize::BITS - 1 - n.leading_zeros())
    }
}

/// The locked-memory allowance, in pages, of one unprivileged user's perf ring buffers
/// *together*: perf_event_mlock_kb per online CPU (the kernel's perf_mmap:
/// `user_lock_limit *= num_online_cpus()`). Past it the kernel charges RLIMIT_MEMLOCK,
/// which may refuse the mapping (EPERM): [`Sampler::start`] then halves the buffers.
pub(super) fn user_budget_pages(mlock_kb: u64, online_cpus: usize, page_size: usize) -> u64 {
    let per_cpu = mlock_kb.saturating_mul(1024) / page_size.max(1) as u64;
    per_cpu.saturating_mul(online_cpus as u64)
}

/// Data pages per buffer (a power of two, at most `requested`) such that `buffers`
/// buffers, each one metadata page plus its data pages, fit `budget_pages` together. At
/// least one page: the kernel then decides.
pub(super) fn fit_buffer_pages(
    requested: usize,
    buffers: usize,
    budget_pages: Option<u64>,
) -> usize {
    let requested = floor_pow2(requested.max(1));
    let Some(budget_pages) = budget_pages else {
        return requested;
    };
    let per_buffer = budget_pages / buffers.max(1) as u64;
    // 1 + data <= per_buffer
    let fit = if per_buffer >= 2 {
        floor_pow2((per_buffer - 1).min(usize::MAX as u64) as usize)
    } else {
        1
    };
    requested.min(fit)
}

/// What perf events this process may use here.
pub fn probe_access() -> PerfAccess {
    let mut access = PerfAccess::default();
    access.paranoid =
        procfs::read_trimmed("/proc/sys/kernel/perf_event_paranoid").and_then(|s| s.parse().ok());
    access.mlock_kb =
        procfs::read_trimmed("/proc/sys/kernel/perf_event_mlock_kb").and_then(|s| s.parse().ok());
    // SAFETY: geteuid has no arguments and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let caps = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| procfs::parse_cap_eff(&s))
        .unwrap_or(0);
    access.privileged = root || has_perf_caps(caps);
    access
}

/// CAP_PERFMON (38) or CAP_SYS_ADMIN (21) in an effective capability mask.
pub(super) fn has_perf_caps(cap_eff: u64) -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    cap_eff & (1 << CAP_PERFMON | 1 << CAP_SYS_ADMIN) != 0
}

/// How sampling was reduced at start, for [`crate::Sampler::warnings`] and the session's
/// `sampling.reason`: a value, so that deciding whether one was already said needs no
/// reading of its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reduction {
    /// Ring buffers made smaller to fit the unprivileged locked-memory budget.
    BuffersForBudget {
        requested: usize,
        pages: usize,
        mlock_kb: u64,
        cpus: usize,
    },
    /// Ring buffers made smaller because the kernel refused larger ones.
    BuffersRefused { requested: usize, pages: usize },
    /// Kernel frames left out; the reason and its fix.
    KernelFramesExcluded(String),
    /// Off-CPU stacks left out; the reason and its fix.
    OffCpuStacksExcluded(String),
    /// Page faults taken in kernel mode (inside system calls) left out of the memory
    /// profile; the reason and its fix.
    KernelFaultsExcluded(String),
    /// Waits left out (no tracepoint, or its raw records refused); the reason and its
    /// fix.
    WaitsUnavailable(String),
    /// One page fault in `period` sampled instead of one in `asked`, for ring buffers of
    /// `pages` data pages (an unprivileged user's, with stack copies).
    MemPeriodRaised {
        asked: u64,
        period: u64,
        pages: usize,
    },
}

impl Reduction {
    /// The ring buffers were made smaller.
    pub(super) fn is_buffers(&self) -> bool {
        matches!(
            self,
            Reduction::BuffersForBudget { .. } | Reduction::BuffersRefused { .. }
        )
    }
}

impl std::fmt::Display for Reduction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reduction::BuffersForBudget {
                requested,
                pages,
                mlock_kb,
                cpus,
            } => write!(
                f,
                "ring buffers reduced from {requested} to {pages} data pages per CPU to fit \
                 the locked-memory budget of perf_event_mlock_kb={mlock_kb} KiB per CPU over {cpus} CPUs; \
                 samples may be lost under load (run as root or with CAP_IPC_LOCK for larger \
                 buffers)"
            ),
            Reduction::BuffersRefused { requested, pages } => write!(
                f,
                "ring buffers reduced from {requested} down to {pages} data pages per CPU: the \
                 kernel refused larger ones (locked-memory limit); samples may be lost under load"
            ),
            Reduction::MemPeriodRaised {
                asked,
                period,
                pages,
            } => write!(
                f,
                "memory samples: one page fault in {period}, not {asked}: stack copies at \
                 high fault rates overflow ring buffers of {pages} data pages per CPU (the \
                 locked-memory budget of an unprivileged user); shares stay exact, each \
                 sample stands for more bytes (run as root or with CAP_IPC_LOCK, or with \
                 --unwind fp, for the period asked)"
            ),
            Reduction::KernelFramesExcluded(reason)
            | Reduction::OffCpuStacksExcluded(reason)
            | Reduction::KernelFaultsExcluded(reason)
            | Reduction::WaitsUnavailable(reason) => f.write_str(reason),
        }
    }
}
