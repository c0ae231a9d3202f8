//! Stack sampling of a process tree with perf events: on-CPU (where threads run) and
//! off-CPU (where they block, weighted by the time blocked).
//!
//! Three ways to begin:
//!
//! - [`Sampler::start`] opens the events on a process that is waiting to begin its work
//!   (a built-in worker before its start message): threads and child processes it
//!   creates from then on are followed (`inherit`), exec'd programs too.
//! - [`Sampler::start_on_exec`] does the same on a process that has not yet exec'd the
//!   program to profile (a launcher waiting on a pipe): the kernel enables the events at
//!   its exec (`enable_on_exec`), so nothing of the launcher is recorded.
//! - [`Sampler::attach`] profiles a process that is already running: it opens the events
//!   on each of its existing threads (with `inherit`, so threads they create are
//!   followed) and looks again for threads created while it was doing so.
//!
//! Per online CPU there is one ring buffer. The on-CPU event is the software
//! `cpu-clock` (or hardware cycles) at a set frequency. Off-CPU time comes from
//! `PERF_RECORD_SWITCH` records (`context_switch`) — a switch-out and the next switch-in
//! of a thread bound each blocked interval — and, where kernel sampling is permitted,
//! from the software `context-switches` event sampled at every switch (period 1) with
//! its callchain, taken in the blocked thread's context: the stack the time is
//! attributed to (kernel frames such as `schedule` and `futex_wait`, then user frames).
//! That event writes into the on-CPU event's buffer of its CPU (`PERF_EVENT_IOC_SET_OUTPUT`)
//! and samples carry the id of their event, so one reader thread tells them apart.
//! Without kernel sampling (perf_event_paranoid 2 for an unprivileged user) the
//! `context-switches` samples never come (the kernel filters samples taken in kernel
//! mode), so blocked time is reported per thread without stacks, and
//! [`Sampler::warnings`] says why.
//!
//! A switch-out's interval is closed by the thread's next switch-in, whichever CPU it
//! wakes on; records of different CPUs are put in time order before pairing. Preempted
//! switch-outs (`PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`) are runnable time, not blocked
//! time: like `perf sched` and `offcputime` filtered on blocked states, they are left out
//! of the off-CPU profile and only counted ([`Profile::preempted`]). Intervals still open
//! when recording stops are not counted, and intervals that may have lost their end to a
//! ring-buffer overflow are dropped rather than stretched over on-CPU time.
//!
//! One background thread owned by the sampler polls the buffers, reads records in
//! place, aggregates callchains and symbolizes them in batches while the run goes on,
//! so that [`Sampler::finish`] only has the last fraction of a second left to resolve.
//!
//! Cost: the off-CPU event writes a sample (some 300–600 bytes with its callchain) and
//! two switch records per context switch of the sampled threads, so a workload that
//! switches a hundred thousand times a second per CPU fills buffers fast: privileged
//! buffers are larger when off-CPU stacks are taken, and lost records are counted
//! ([`SamplerStats::lost`]). `--profile cpu` avoids the cost entirely.
//!
//! ```no_run
//! use benchtop_profilers::sampler::{Sampler, SamplerOptions};
//!
//! # fn main() -> Result<(), benchtop_profilers::ProfilerError> {
//! let pid = 4242; // a worker waiting for its start message
//! let sampler = Sampler::start(pid, &SamplerOptions::default())?;
//! // … tell the worker to start, wait for the run to end …
//! let profile = sampler.finish()?;
//! for (kind, stacks) in profile.profiles.iter() {
//!     if profile.kind.contains(kind) {
//!         std::fs::write(kind.folded_file(), stacks.to_folded()).ok();
//!     }
//! }
//! # Ok(())
//! # }
//! ```

mod collect;
mod drain;
mod events;
mod frames;
mod lines;
mod offcpu;
mod options;
mod shared;
mod timeline;
mod tracepoint;
mod waits;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchtop_profile::intervals::StacksChunk;
use benchtop_profile::kinds::{Kind, KindSet};
use benchtop_profile::sampling::{MemSamplingInfo, SamplingInfo, UnwindingInfo};
use benchtop_profile::{ByKind, StackTree};

use self::collect::{Collected, Collector, Setup};
use self::drain::Follow;
pub use self::events::probe_access;
use self::events::{
    EventPlan, OpenError, Reduction, Role, ensure_fd_limit, event_builder, fit_buffer_pages,
    floor_pow2, is_missing_event, kernel_excluded_reason, kernel_faults_excluded_reason,
    list_threads, offcpu_stacks_excluded_reason, open_cpu_wakes, open_events, page_size,
    permission_reason, stack_copy_size, user_budget_pages,
};
pub use self::options::{DEFAULT_MEM_PERIOD, SampleEvent, SamplerOptions};
use self::shared::Shared;
pub use self::shared::Snapshot;
pub use self::timeline::monotonic_ns;
use self::waits::{plan_waits, waits_denied_reason};
use crate::ProfilerError;
use crate::procfs;
use crate::symbolize::SymbolDetail;
use crate::unwind::{MAX_STACK_SIZE, UnwindCounts, UnwindMode};

/// Data pages per CPU when the user is privileged (no mlock budget applies): 512 KiB
/// with 4 KiB pages. A sample with a 64-entry callchain is 576 bytes (8 header, 8 id,
/// 8 IP, 8 pid/tid, 8 time, 8 cpu, 8 period, 8 chain length, 64 × 8 chain), so 512 KiB
/// hold 910 of them: ~0.9 s of 999 Hz samples on one CPU if the reader stalls.
const PRIVILEGED_DATA_PAGES: usize = 128;
/// Data pages per CPU when privileged and off-CPU stacks are taken (1 MiB): every
/// context switch of the sampled threads writes a sample with its callchain and two
/// switch records (some 400 bytes together), so a workload switching 100 000 times a
/// second on a CPU writes some 40 MB/s there. Measured with the fixture's `switch-storm`
/// mode (two threads handing a byte back and forth, ~240 000 switches/s over the two
/// CPUs here, release build), with the drainer thread copying records out as they come:
/// records lost in one of two 2 s runs at 64 pages, none at 128 or 256.
const PRIVILEGED_OFFCPU_DATA_PAGES: usize = 256;
/// Data pages per CPU (4 KiB each) when privileged and samples carry stack copies:
/// 2 MiB, some 250 samples of 8 KiB, a quarter of a second at 999 Hz before the
/// drainer (woken at a quarter full) must have read them.
const PRIVILEGED_STACK_DATA_PAGES: usize = 512;
/// Data pages per CPU when privileged, page faults are sampled and samples carry stack
/// copies: 8 MiB. A program touching fresh memory at 1.5 GB/s takes 370 000 faults a
/// second, 11 500 samples at a period of 32, 95 MB/s of 8 KiB stack copies:
/// 2 MiB (20 ms) lost 3.6 % of the samples of the memory test's fixture (300 + 100 MB)
/// while builds ran beside it, 8 MiB (85 ms) none.
const PRIVILEGED_MEM_STACK_DATA_PAGES: usize = 2048;
/// The least period of an unprivileged memory profile with stack copies, whose ring
/// buffers are a thirtieth of root's (4 MiB a sample with 4 KiB pages): at a period of 32
/// the memory test's fixture lost 20 % of its samples as `nobody`, none at this.
const UNPRIVILEGED_MEM_STACK_PERIOD: u64 = 1024;
/// Data pages per CPU asked for without privileges (256 KiB, ~0.46 s as above). With the
/// default perf_event_mlock_kb of 516 (one metadata page plus 128 data pages per CPU)
/// it fits the user's budget with half of it left to other perf users of the account.
/// Off-CPU adds only switch records here (no stacks without kernel sampling).
const UNPRIVILEGED_DATA_PAGES: usize = 64;

/// Rounds of looking for threads created while [`Sampler::attach`] opened the events.
const ATTACH_ROUNDS: usize = 3;

/// The name [`Sampler::event`] gives the off-CPU event when it drives sampling alone.
const CONTEXT_SWITCHES: &str = "context-switches";
/// The name [`Sampler::event`] gives the memory event when it drives sampling alone.
const PAGE_FAULTS: &str = "page-faults";

/// Live counters of a running sampler; cheap to read for a progress line.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct SamplerStats {
    /// On-CPU samples read so far.
    pub samples: u64,
    /// Records the kernel reported lost (ring buffer full): samples of either kind and
    /// switch records.
    pub lost: u64,
    /// Times the kernel throttled sampling (perf_cpu_time_max_percent, or more samples
    /// per tick than kernel.perf_event_max_sample_rate allows, which a storm of context
    /// switches can reach).
    pub throttled: u64,
    /// Off-CPU (`context-switches`) samples read so far: one per switch of a sampled
    /// thread, when kernel sampling is permitted.
    pub offcpu_samples: u64,
    /// Switch-out records read so far (voluntary and preempted).
    pub switches: u64,
    /// Page-fault samples read so far (memory profiles).
    pub mem_samples: u64,
    /// Blocked time paired so far (closed intervals of voluntary switch-outs).
    pub blocked: Duration,
    /// Symbolization batches done.
    pub batches: u64,
    /// Distinct stacks waiting for the next batch.
    pub pending_stacks: u64,
    /// Time spent symbolizing and aggregating in batches so far.
    pub symbolize_time: Duration,
    /// Duration of the last batch.
    pub last_batch_time: Duration,
    /// Duration of the longest batch.
    pub max_batch_time: Duration,
}

/// The result of a recording.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Profile {
    /// The profiles asked for.
    pub kind: KindSet,
    /// The folded stacks of each kind asked for, in the unit of the kind's folded file
    /// (the kind table's `folded_unit`); empty for a kind not asked for.
    ///
    /// Each stack is root first: process name, [thread name,] user frames from the
    /// outermost caller, then kernel frames (suffixed `_[k]`). On-CPU weights are
    /// samples. Off-CPU weights are microseconds blocked; without kernel sampling
    /// ([`Profile::offcpu_stacks`] false) each thread has one stack,
    /// `process;thread;[blocked: no stack — kernel sampling not permitted]`, and blocked
    /// intervals whose sample was lost or throttled end in `[blocked: stack not sampled]`.
    /// Memory (`Kind::Mem`) weights are bytes of sampled page faults (each sample
    /// [`Profile::mem_period`] faults × [`Profile::page_size`]).
    pub profiles: ByKind<StackTree>,
    /// Page-fault samples taken.
    pub mem_samples: u64,
    /// One page fault in this many was sampled.
    pub mem_period: u64,
    /// The page size: a sample weighs `mem_period × page_size` bytes. A fault that maps a
    /// transparent huge page counts as one page of this size.
    pub page_size: u64,
    /// On-CPU samples taken.
    pub samples: u64,
    /// Records lost (ring buffers full): samples of either kind and switch records.
    pub lost: u64,
    /// Off-CPU samples taken (one per context switch, with kernel sampling).
    pub offcpu_samples: u64,
    /// Switch-out records read (voluntary and preempted).
    pub switches: u64,
    /// Off-CPU stacks were sampled (kernel sampling permitted); else blocked time is
    /// per thread only.
    pub offcpu_stacks: bool,
    /// Total blocked time in `offcpu`.
    pub blocked: Duration,
    /// Time threads spent runnable after being preempted: not blocked, so not in
    /// `offcpu`.
    pub preempted: Duration,
    /// The event that drove sampling: `cycles` or `cpu-clock`, or `context-switches`
    /// for an off-CPU-only profile.
    pub event: &'static str,
    /// How frames were named.
    pub symbols: SymbolDetail,
    /// Kernel frames were included.
    pub kernel_frames: bool,
    /// On-CPU sampling frequency per CPU, Hz.
    pub frequency_hz: u64,
    /// Data pages per CPU ring buffer.
    pub buffer_pages: usize,
    /// CPUs sampled.
    pub cpus: usize,
    /// Everything reduced, excluded or unresolved, in words for the user.
    pub warnings: Vec<String>,
    /// The part of `warnings` that says how sampling itself was reduced at start:
    /// kernel frames excluded, off-CPU stacks unavailable, ring buffers made smaller.
    /// Empty for a full-fidelity run.
    pub reduced: Vec<String>,
    /// Time spent symbolizing and aggregating, all batches together.
    pub symbolize_time: Duration,
    /// Time of the last batch, run by [`Sampler::finish`] after the events stopped.
    pub final_batch_time: Duration,
    /// From the events being enabled (the end of [`Sampler::start`]) to their being
    /// disabled.
    pub duration: Duration,
    /// Addresses that resolved to no symbol (frames `[unknown]`, or `[file]` inside a file).
    pub unresolved_addresses: u64,
    /// How user stacks were walked.
    pub unwind: UnwindMode,
    /// Bytes of user stack copied per sample (0 with frame pointers).
    pub stack_size: u32,
    /// What unwinding from stack copies did (empty with frame pointers).
    pub unwinding: UnwindCounts,
    /// The per-interval stacks not taken by [`Sampler::take_stacks`] before the end:
    /// with what was taken, every on-CPU sample (`samples` of them) and every blocked
    /// interval of `offcpu`, attributed to report intervals.
    pub stacks: StacksChunk,
}

impl Profile {
    /// The `sampling` section of session.json for this profile: the event that drove
    /// sampling, and a `reason` only when sampling was reduced ([`Profile::reduced`]);
    /// other warnings (lost samples, unresolved files) belong to the session's warnings.
    /// `samples` counts on-CPU samples, `lost` every lost record.
    pub fn sampling_info(&self) -> SamplingInfo {
        let mut info = SamplingInfo::default();
        info.enabled = true;
        info.event = self.event.into();
        info.frequency_hz = self.frequency_hz;
        info.kernel_frames = self.kernel_frames;
        info.samples = self.samples;
        info.lost = self.lost;
        info.unwind = match self.unwind {
            UnwindMode::FramePointers => "frame-pointers".into(),
            other => other.name().into(),
        };
        if self.unwind.copies_stacks() {
            let u = &self.unwinding;
            let mut unwinding = UnwindingInfo::default();
            unwinding.stack_size = self.stack_size;
            unwinding.unwound = u.unwound;
            unwinding.truncated_no_unwind_info = u.truncated_no_unwind_info;
            unwinding.truncated_stack_copy = u.truncated_stack_copy;
            unwinding.truncated_other = u.truncated_other;
            unwinding.no_stack = u.no_stack;
            unwinding.modules = u
                .modules
                .iter()
                .map(|(name, how)| (name.clone(), how.name().to_owned()))
                .collect();
            info.unwinding = Some(unwinding);
        }
        info.symbols = self.symbols.name().into();
        info.reason = (!self.reduced.is_empty()).then(|| self.reduced.join("; "));
        info.profile = self.kind.name();
        if self.kind.contains(Kind::OffCpu) {
            info.offcpu_stacks = self.offcpu_stacks;
            info.switches = self.switches;
            info.blocked_s = self.blocked.as_secs_f64();
            info.preempted_s = self.preempted.as_secs_f64();
        }
        if self.kind.contains(Kind::Mem) {
            let mut mem = MemSamplingInfo::default();
            mem.period = self.mem_period;
            mem.page_size = self.page_size;
            mem.samples = self.mem_samples;
            mem.bytes = self.profiles[Kind::Mem].total_weight();
            mem.kernel_faults = self.kernel_frames;
            info.mem = Some(mem);
        }
        info
    }
}

/// How the events of a sampler begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Opened on the process, enabled once the reader runs.
    Start,
    /// Opened on the process, enabled by the kernel at its next exec.
    OnExec,
    /// Opened on every existing thread, enabled at once.
    Attach,
}

/// A running sampler of one process and the threads and children it creates.
///
/// Its background thread is named `sampler-<pid>` after the sampled process. Dropping
/// it without [`Sampler::finish`] stops and joins that thread, discarding the data.
#[derive(Debug)]
pub struct Sampler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// The collector's result, sent before it frees its caches.
    /// (In a mutex only so that a `Sampler` is `Sync`.)
    done: std::sync::Mutex<std::sync::mpsc::Receiver<Result<Collected, ProfilerError>>>,
    kind: KindSet,
    event: &'static str,
    offcpu_stacks: bool,
    symbols: SymbolDetail,
    kernel_frames: bool,
    /// What start reduced or excluded (kernel frames, off-CPU stacks, buffer sizes),
    /// then other notes (an open-file limit raised for attach).
    warnings: Vec<String>,
    /// How many of `warnings` are reductions of sampling.
    reductions: usize,
    frequency_hz: u64,
    buffer_pages: usize,
    cpus: usize,
    started: Instant,
    unwind: UnwindMode,
    stack_size: u32,
    offcpu_stack_every: u32,
    mem_period: u64,
}

impl Sampler {
    /// Starts sampling `pid` on every online CPU.
    ///
    /// Threads and child processes that `pid` creates from now on are sampled too, and
    /// programs they exec; threads that already exist, other than `pid` itself, are not
    /// (built-in workers wait for a start message, so theirs do not exist yet; see
    /// [`Sampler::attach`] for a process already at work).
    ///
    /// It returns once the events are enabled (under a millisecond here). The background
    /// thread then loads kernel symbols and the symbols and debug info of the files the
    /// process has mapped while the workload starts, draining the ring buffers between
    /// files so that nothing is lost to it.
    ///
    /// Errors: [`ProfilerError::ProcessNotFound`] when there is no such process,
    /// [`ProfilerError::PermissionDenied`] (with the fix) when perf events are not
    /// allowed at all, [`ProfilerError::PerfOpen`] and [`ProfilerError::RingBuffer`]
    /// for anything else the kernel refuses. Kernel frames or off-CPU stacks that are
    /// not permitted are not errors: they are left out and [`Sampler::warnings`] says why.
    pub fn start(pid: u32, opts: &SamplerOptions) -> Result<Sampler, ProfilerError> {
        Self::launch(pid, Mode::Start, opts)
    }

    /// Starts sampling `pid` at its next exec: for a child that has been spawned but has
    /// not yet exec'd the program to profile (a launcher that waits on a pipe, then
    /// execs). The events are opened now, disabled, with `enable_on_exec`: the kernel
    /// enables them when `pid` execs, so nothing the launcher does before is recorded,
    /// and everything the exec'd program and its threads and children do is.
    ///
    /// If `pid` never execs, the profile is empty. Errors as [`Sampler::start`].
    pub fn start_on_exec(pid: u32, opts: &SamplerOptions) -> Result<Sampler, ProfilerError> {
        Self::launch(pid, Mode::OnExec, opts)
    }

    /// Attaches to a running process: opens the events on each thread listed in
    /// `/proc/<pid>/task` (one per thread per CPU, with `inherit`, so threads and
    /// children they create later are followed; all writing into one ring buffer per
    /// CPU), enabled at once, warms the symbolizer from the live mappings, and finishes
    /// like [`Sampler::start`].
    ///
    /// Threads created while the events are being opened are found by listing the
    /// threads again: a thread that neither has events of its own nor was announced by
    /// a fork record of a followed thread gets events of its own. Child processes that
    /// exist before the attach are not followed.
    ///
    /// Cost: threads × CPUs perf events (twice that with off-CPU stacks), each a file
    /// descriptor; measured here, 2 CPUs: 4 fds per thread with both profiles. When the
    /// soft open-file limit is too low it is raised towards the hard limit (and
    /// [`Sampler::warnings`] says so); past the hard limit attaching fails with
    /// [`ProfilerError::TooManyEvents`].
    ///
    /// Errors: as [`Sampler::start`]; [`ProfilerError::PermissionDenied`] also when the
    /// process belongs to another user (perf events need ptrace access to it).
    pub fn attach(pid: u32, opts: &SamplerOptions) -> Result<Sampler, ProfilerError> {
        Self::launch(pid, Mode::Attach, opts)
    }

    fn launch(pid: u32, mode: Mode, opts: &SamplerOptions) -> Result<Sampler, ProfilerError> {
        validate_options(opts)?;
        if pid == 0 || pid > i32::MAX as u32 {
            return Err(ProfilerError::ProcessNotFound { pid });
        }
        if std::fs::metadata(format!("/proc/{pid}")).is_err() {
            return Err(ProfilerError::ProcessNotFound { pid });
        }
        let cpus = procfs::online_cpus()?;
        let access = probe_access();
        let page_size = page_size();
        let mut reductions: Vec<Reduction> = Vec::new();
        let mut notes = Vec::new();
        let (mut kind, mut waking) = plan_waits(opts.kind, &mut reductions);

        let tids = match mode {
            Mode::Attach => list_threads(pid)?,
            Mode::Start | Mode::OnExec => vec![pid],
        };
        if mode == Mode::Attach {
            // One event per kind, per CPU, per thread.
            let events = u64::from(kind.len());
            let per_thread = cpus.len() as u64 * events.max(1);
            if let Some(note) = ensure_fd_limit(pid, tids.len(), per_thread)? {
                notes.push(note);
            }
        }

        let requested = opts.buffer_pages.unwrap_or(if !access.privileged {
            UNPRIVILEGED_DATA_PAGES
        } else if opts.unwind.copies_stacks() && kind.contains(Kind::Mem) {
            PRIVILEGED_MEM_STACK_DATA_PAGES
        } else if opts.unwind.copies_stacks() {
            PRIVILEGED_STACK_DATA_PAGES
        } else if kind.contains(Kind::OffCpu) {
            PRIVILEGED_OFFCPU_DATA_PAGES
        } else {
            PRIVILEGED_DATA_PAGES
        });
        let requested = floor_pow2(requested.max(1));
        let budget = if access.privileged {
            None
        } else {
            access
                .mlock_kb
                .map(|kb| user_budget_pages(kb, cpus.len(), page_size))
        };
        let mut pages = fit_buffer_pages(requested, cpus.len(), budget);
        if pages < requested {
            reductions.push(Reduction::BuffersForBudget {
                requested,
                pages,
                mlock_kb: access.mlock_kb.unwrap_or(0),
                cpus: cpus.len(),
            });
        }

        // Memory samples with stack copies need large buffers at high fault rates (see
        // PRIVILEGED_MEM_STACK_DATA_PAGES); an unprivileged user's are a fraction of that
        // size, so one fault in proportionally more is sampled: the kernel still counts
        // every fault, so shares stay exact, only coarser.
        let mut mem_period = opts.mem_period.max(1);
        if kind.contains(Kind::Mem)
            && opts.unwind.copies_stacks()
            && !access.privileged
            && pages < PRIVILEGED_MEM_STACK_DATA_PAGES
            && mem_period < UNPRIVILEGED_MEM_STACK_PERIOD
        {
            let asked = mem_period;
            mem_period = UNPRIVILEGED_MEM_STACK_PERIOD;
            reductions.push(Reduction::MemPeriodRaised {
                asked,
                period: mem_period,
                pages,
            });
        }

        let candidates: &[Option<SampleEvent>] = if !kind.contains(Kind::Cpu) {
            &[None]
        } else {
            match opts.event {
                SampleEvent::Auto => &[Some(SampleEvent::Cycles), Some(SampleEvent::CpuClock)],
                SampleEvent::Cycles => &[Some(SampleEvent::Cycles)],
                SampleEvent::CpuClock => &[Some(SampleEvent::CpuClock)],
            }
        };
        let mut opened = None;
        for (i, &event) in candidates.iter().enumerate() {
            let last = i + 1 == candidates.len();
            let mut plan = EventPlan {
                on_cpu: event,
                off_cpu: kind.contains(Kind::OffCpu),
                off_stacks: kind.contains(Kind::OffCpu),
                kernel_frames: opts.kernel_frames,
                frequency_hz: opts.frequency_hz,
                on_exec: mode == Mode::OnExec,
                enabled: mode == Mode::Attach,
                stack_size: opts
                    .unwind
                    .copies_stacks()
                    .then(|| stack_copy_size(opts.stack_size)),
                off_every: opts.offcpu_stack_every.max(1),
                mem_period: kind.contains(Kind::Mem).then_some(mem_period),
                waking: waking.map(|w| w.id),
                wake_every: opts.waker_stack_every.max(1),
            };
            let attempt = match open_events(&tids, &cpus, &plan, &mut pages) {
                Err(OpenError::Denied(errno)) if plan.kernel_sampled() => {
                    let reduced = EventPlan {
                        kernel_frames: false,
                        off_stacks: false,
                        waking: None,
                        ..plan.clone()
                    };
                    let retry = open_events(&tids, &cpus, &reduced, &mut pages);
                    if retry.is_ok() {
                        if plan.on_cpu.is_some() && plan.kernel_frames {
                            reductions.push(Reduction::KernelFramesExcluded(
                                kernel_excluded_reason(&access, errno),
                            ));
                        }
                        if plan.off_stacks {
                            reductions.push(Reduction::OffCpuStacksExcluded(
                                offcpu_stacks_excluded_reason(&access, errno),
                            ));
                        }
                        if plan.waking.is_some() {
                            reductions.push(Reduction::WaitsUnavailable(waits_denied_reason(
                                &access, errno,
                            )));
                            kind = kind.without(Kind::Waits);
                            waking = None;
                        }
                        if plan.mem_period.is_some() && plan.kernel_frames {
                            reductions.push(Reduction::KernelFaultsExcluded(
                                kernel_faults_excluded_reason(&access, errno),
                            ));
                        }
                        plan = reduced;
                    }
                    retry
                }
                other => other,
            };
            match attempt {
                Ok(events) => {
                    opened = Some((events, plan));
                    break;
                }
                // No PMU (VMs): the hardware event does not exist; try the next one.
                Err(OpenError::Open(_, e)) if is_missing_event(&e) => {
                    if last {
                        return Err(ProfilerError::EventUnavailable {
                            event: event.map_or(CONTEXT_SWITCHES, SampleEvent::name),
                            source: e,
                        });
                    }
                }
                Err(e) => return Err(e.into_error(pid, &access)),
            }
        }
        let Some((mut events, plan)) = opened else {
            return Err(ProfilerError::InvalidOptions {
                reason: "no sampling event to open".into(),
            });
        };
        if pages < requested && !reductions.iter().any(Reduction::is_buffers) {
            reductions.push(Reduction::BuffersRefused { requested, pages });
        }

        if let Some(note) = open_cpu_wakes(&cpus, &plan, &mut events) {
            notes.push(note);
        }
        let shared = Arc::new(Shared::new().map_err(|source| ProfilerError::Thread {
            reason: format!("cannot create the wake-up eventfd: {source}"),
        })?);
        let setup = Setup {
            unwind: plan.stack_size.map(|_| opts.unwind),
            kernel_frames: plan.kernel_frames,
            off_cpu: plan.off_cpu,
            off_stacks: plan.off_stacks,
            ids: events.ids,
            mem_bytes: plan
                .mem_period
                .map_or(0, |p| p.saturating_mul(page_size as u64)),
            enable: mode == Mode::Start,
            on_exec: mode == Mode::OnExec,
            waking,
            wake_every: plan.wake_every,
            follow: (mode == Mode::Attach).then(|| Follow {
                pid,
                opened: events.tids.iter().copied().collect(),
                plan: plan.clone(),
                cpus: cpus.clone(),
                rounds: ATTACH_ROUNDS,
            }),
        };
        // The thread reads the target's name and mappings, enables the events and says
        // so; it then warms its symbol caches while the workload starts, draining the
        // ring buffers between steps.
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let (done_tx, done_rx) = std::sync::mpsc::sync_channel(1);
        let rings = events.rings;
        let counters = events.counters;
        let thread = std::thread::Builder::new()
            .name(thread_name(pid))
            .spawn({
                // blazesym's symbolizer is not Send: the collector is built on its thread.
                let shared = Arc::clone(&shared);
                let opts = opts.clone();
                move || {
                    let collector = Collector::new(shared, pid, &opts, setup);
                    collector.run(rings, counters, ready_tx, done_tx)
                }
            })
            .map_err(|e| ProfilerError::Thread {
                reason: format!("cannot spawn the sampler thread: {e}"),
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                return Err(match thread.join() {
                    Err(panic) => panic_error(panic),
                    Ok(_) => ProfilerError::Thread {
                        reason: "the sampler thread ended before enabling the events".into(),
                    },
                });
            }
        }

        Ok(Sampler {
            shared,
            thread: Some(thread),
            done: std::sync::Mutex::new(done_rx),
            kind,
            event: match (plan.on_cpu, plan.main_role()) {
                (Some(event), _) => event.name(),
                (None, Role::Mem) => PAGE_FAULTS,
                (None, _) => CONTEXT_SWITCHES,
            },
            offcpu_stacks: plan.off_stacks,
            symbols: opts.symbols,
            kernel_frames: plan.kernel_frames,
            reductions: reductions.len(),
            warnings: reductions
                .iter()
                .map(ToString::to_string)
                .chain(notes)
                .collect(),
            frequency_hz: opts.frequency_hz,
            buffer_pages: pages,
            cpus: cpus.len(),
            started: Instant::now(),
            unwind: opts.unwind,
            stack_size: plan.stack_size.unwrap_or(0),
            offcpu_stack_every: plan.off_every,
            mem_period: plan.mem_period.unwrap_or(0),
        })
    }

    /// Checks `opts` without a target process, so that bad options are refused before a
    /// worker is spawned: a frequency of 0 or above `kernel.perf_event_max_sample_rate`
    /// is [`ProfilerError::InvalidOptions`]; an event asked for explicitly that the
    /// machine lacks ([`SampleEvent::Cycles`] without a PMU) is
    /// [`ProfilerError::EventUnavailable`]; perf events refused altogether is
    /// [`ProfilerError::PermissionDenied`], with the same reason as [`Sampler::start`].
    ///
    /// It opens (and closes) a disabled, user-space-only counting event on the calling
    /// thread; nothing is mapped or sampled. Kernel frames or off-CPU stacks that are not
    /// permitted are not an error: [`Sampler::start`] leaves them out and says why.
    pub fn check(opts: &SamplerOptions) -> Result<(), ProfilerError> {
        validate_options(opts)?;
        let event = match opts.event {
            SampleEvent::Cycles if opts.kind.contains(Kind::Cpu) => SampleEvent::Cycles,
            // Auto falls back to cpu-clock, which is what has to work; an off-CPU-only
            // profile needs software events only.
            _ => SampleEvent::CpuClock,
        };
        let mut b = event_builder(event);
        b.observe_self()
            .any_cpu()
            .exclude_kernel(true)
            .exclude_hv(true)
            .enabled(false);
        match b.build() {
            Ok(counter) => {
                drop(counter);
                Ok(())
            }
            Err(e) => Err(match e.raw_os_error() {
                Some(errno @ (libc::EACCES | libc::EPERM)) => ProfilerError::PermissionDenied {
                    reason: permission_reason(&probe_access(), errno),
                },
                _ if is_missing_event(&e) => ProfilerError::EventUnavailable {
                    event: event.name(),
                    source: e,
                },
                _ => ProfilerError::PerfCheck {
                    event: event.name(),
                    source: e,
                },
            }),
        }
    }

    /// Live counters (atomic reads).
    pub fn stats(&self) -> SamplerStats {
        let s = &self.shared;
        let ns = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        SamplerStats {
            samples: s.samples.load(Ordering::Relaxed),
            lost: s.lost.load(Ordering::Relaxed),
            throttled: s.throttled.load(Ordering::Relaxed),
            offcpu_samples: s.offcpu_samples.load(Ordering::Relaxed),
            switches: s.switches.load(Ordering::Relaxed),
            mem_samples: s.mem_samples.load(Ordering::Relaxed),
            blocked: ns(&s.blocked_ns),
            batches: s.batches.load(Ordering::Relaxed),
            pending_stacks: s.pending.load(Ordering::Relaxed),
            symbolize_time: ns(&s.symbolize_ns),
            last_batch_time: ns(&s.last_batch_ns),
            max_batch_time: ns(&s.max_batch_ns),
        }
    }

    /// Asks the background thread for a copy of the stacks folded so far; it makes one
    /// after its next batch (every [`SamplerOptions::batch_interval`]), for
    /// [`Sampler::take_snapshot`]. Copying costs the thread time in proportion to the
    /// trees' size: a live view asks about once a second, not every frame.
    pub fn request_snapshot(&self) {
        self.shared.snapshot_wanted.store(true, Ordering::Relaxed);
    }

    /// Says when the run started: the [`monotonic_ns`] time at which the worker was told
    /// to start. Per-interval stacks count their times from it; without it, from the
    /// sampler's start.
    pub fn mark_start(&self, monotonic: u64) {
        self.shared
            .feed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .start_ns = Some(monotonic);
    }

    /// Says that a report interval ended at this [`monotonic_ns`] time: the run's start
    /// plus the `t_ns` of the worker's tick that closed it. Samples up to it are
    /// attributed to that interval, those after it to the next. Ends at or before the
    /// last one are ignored.
    pub fn mark_interval_end(&self, monotonic: u64) {
        self.shared
            .feed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .ends
            .push(monotonic);
    }

    /// The per-interval stacks the background thread has attributed since the last call
    /// (frames, stacks and threads new since then, and interval weights), for the
    /// session's stacks.jsonl; the rest comes with [`Profile::stacks`].
    pub fn take_stacks(&self) -> StacksChunk {
        std::mem::take(
            &mut *self
                .shared
                .stacks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The copy made since the last request, if one is ready.
    pub fn take_snapshot(&self) -> Option<Snapshot> {
        self.shared
            .snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// The profiles being taken.
    pub fn kind(&self) -> KindSet {
        self.kind
    }

    /// Whether kernel frames are being sampled.
    pub fn kernel_frames(&self) -> bool {
        self.kernel_frames
    }

    /// Whether off-CPU stacks are being sampled (off-CPU asked for and kernel sampling
    /// permitted); when off-CPU was asked for without them, blocked time is recorded per
    /// thread and [`Sampler::warnings`] says why.
    pub fn offcpu_stacks(&self) -> bool {
        self.offcpu_stacks
    }

    /// What was reduced or excluded at start (kernel frames, off-CPU stacks and why,
    /// buffer sizes) and anything else start changed (an open-file limit raised by
    /// [`Sampler::attach`]), in words for the user.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The event that drives sampling: `cycles` or `cpu-clock`, or `context-switches`
    /// for an off-CPU-only profile.
    pub fn event(&self) -> &'static str {
        self.event
    }

    /// Data pages per CPU ring buffer actually mapped.
    pub fn buffer_pages(&self) -> usize {
        self.buffer_pages
    }

    /// Stops sampling, reads what is left in the ring buffers, symbolizes the last
    /// batch and returns the profile.
    pub fn finish(mut self) -> Result<Profile, ProfilerError> {
        let thread = self.thread.take().ok_or_else(|| ProfilerError::Thread {
            reason: "the sampler thread is gone".into(),
        })?;
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake();
        // The thread goes on freeing its caches; it ends on its own.
        let received = self
            .done
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .recv();
        let collected = match received {
            Ok(result) => result?,
            Err(_) => {
                return Err(match thread.join() {
                    Err(panic) => panic_error(panic),
                    Ok(()) => ProfilerError::Thread {
                        reason: "the sampler thread ended without a result".into(),
                    },
                });
            }
        };
        let stats = self.stats();
        let mut warnings = std::mem::take(&mut self.warnings);
        let reduced = warnings[..self.reductions.min(warnings.len())].to_vec();
        warnings.extend(collected.warnings);
        if stats.lost > 0 {
            // The kernel counts records, not samples: samples, and the mappings, names
            // and switches written beside them.
            let what = if self.kind.contains(Kind::OffCpu) {
                "samples and switch records"
            } else {
                "samples and the records beside them"
            };
            warnings.push(format!(
                "{} records lost ({what}): ring buffers overflowed ({} data pages per CPU)",
                stats.lost, self.buffer_pages
            ));
        }
        if self.offcpu_stacks && self.offcpu_stack_every > 1 {
            warnings.push(format!(
                "off-CPU stacks were sampled at one context switch in {}: each sampled \
                 blocked interval stands for {} and its time is scaled so",
                self.offcpu_stack_every, self.offcpu_stack_every
            ));
        }
        if stats.throttled > 0 {
            let offcpu = if self.offcpu_stacks {
                "; off-CPU time of throttled switches is under `[blocked: stack not sampled]`"
            } else {
                ""
            };
            warnings.push(format!(
                "the kernel throttled sampling {} times (kernel.perf_cpu_time_max_percent, \
                 kernel.perf_event_max_sample_rate){offcpu}",
                stats.throttled
            ));
        }
        Ok(Profile {
            kind: self.kind,
            profiles: collected.profiles,
            mem_samples: stats.mem_samples,
            mem_period: self.mem_period,
            page_size: page_size() as u64,
            samples: stats.samples,
            lost: stats.lost,
            offcpu_samples: stats.offcpu_samples,
            switches: stats.switches,
            offcpu_stacks: self.offcpu_stacks,
            blocked: Duration::from_nanos(collected.blocked_ns),
            preempted: Duration::from_nanos(collected.preempted_ns),
            event: self.event,
            symbols: self.symbols,
            kernel_frames: self.kernel_frames,
            frequency_hz: self.frequency_hz,
            buffer_pages: self.buffer_pages,
            cpus: self.cpus,
            warnings,
            reduced,
            symbolize_time: stats.symbolize_time,
            final_batch_time: collected.final_batch_time,
            duration: collected.stopped_at.saturating_duration_since(self.started),
            unresolved_addresses: collected.unresolved,
            unwind: self.unwind,
            stack_size: self.stack_size,
            unwinding: collected.unwinding,
            stacks: self.take_stacks(),
        })
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.shared.abandon.store(true, Ordering::SeqCst);
            self.shared.stop.store(true, Ordering::SeqCst);
            self.shared.wake();
            let _ = thread.join();
        }
    }
}

/// Options that no process or machine could sample with.
fn validate_options(opts: &SamplerOptions) -> Result<(), ProfilerError> {
    if opts.unwind.copies_stacks() && !(8..=MAX_STACK_SIZE + 8).contains(&opts.stack_size) {
        return Err(ProfilerError::InvalidOptions {
            reason: format!(
                "stack_size {} is outside 8..=65536 bytes (the kernel copies at most {MAX_STACK_SIZE})",
                opts.stack_size
            ),
        });
    }
    if opts.mem_period == 0 {
        return Err(ProfilerError::InvalidOptions {
            reason: "mem_period must be at least 1 (one page fault in mem_period is sampled)"
                .into(),
        });
    }
    if opts.frequency_hz == 0 {
        return Err(ProfilerError::InvalidOptions {
            reason: "frequency_hz must be at least 1".into(),
        });
    }
    if let Some(max) = procfs::read_trimmed("/proc/sys/kernel/perf_event_max_sample_rate")
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&max| opts.frequency_hz > max)
    {
        return Err(ProfilerError::InvalidOptions {
            reason: format!(
                "frequency_hz {} is above kernel.perf_event_max_sample_rate ({max})",
                opts.frequency_hz
            ),
        });
    }
    Ok(())
}

/// The name of the sampler thread of `pid`, unique per target so that it can be told
/// apart in `top -H` (the kernel keeps 15 bytes: `sampler-4194304` fits).
pub(crate) fn thread_name(pid: u32) -> String {
    format!("sampler-{pid}")
}

/// The error for a sampler thread that panicked.
fn panic_error(panic: Box<dyn std::any::Any + Send>) -> ProfilerError {
    ProfilerError::Thread {
        reason: format!(
            "the sampler thread panicked: {}",
            panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)")
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use benchtop_profile::sampling::PerfAccess;

    use super::events::has_perf_caps;
    use super::*;

    #[test]
    fn the_unprivileged_budget_is_perf_event_mlock_kb_per_online_cpu() {
        // 516 KiB with 4 KiB pages is 129 pages per CPU: one metadata page and 128 data.
        assert_eq!(user_budget_pages(516, 1, 4096), 129);
        assert_eq!(user_budget_pages(516, 2, 4096), 258);
        assert_eq!(user_budget_pages(516, 8, 4096), 1032);
        // The kernel rounds per CPU before multiplying.
        assert_eq!(user_budget_pages(10, 4, 4096), 8);
        assert_eq!(user_budget_pages(516, 2, 65536), 16);
    }

    #[test]
    fn buffers_fit_the_users_mlock_budget_across_cpus() {
        let budget = |kb, cpus| Some(user_budget_pages(kb, cpus, 4096));
        // 516 KiB per CPU over 2 CPUs: 258 pages, 129 per buffer: 1 + 128 data pages.
        assert_eq!(fit_buffer_pages(64, 2, budget(516, 2)), 64);
        assert_eq!(fit_buffer_pages(128, 2, budget(516, 2)), 128);
        assert_eq!(fit_buffer_pages(256, 2, budget(516, 2)), 128);
        assert_eq!(fit_buffer_pages(16, 2, budget(516, 2)), 16);
        // A smaller limit: 64 KiB per CPU is 16 pages, 1 + 8 data pages fit.
        assert_eq!(fit_buffer_pages(64, 8, budget(64, 8)), 8);
        // Too small for even one data page: one page, and the kernel decides.
        assert_eq!(fit_buffer_pages(64, 2, budget(4, 2)), 1);
        assert_eq!(fit_buffer_pages(64, 2, Some(0)), 1);
        // No budget (privileged): what was asked, as a power of two.
        assert_eq!(fit_buffer_pages(100, 2, None), 64);
        for cpus in 1..300 {
            for kb in [8, 64, 100, 516, 1024, 4096] {
                let total = user_budget_pages(kb, cpus, 4096);
                let pages = fit_buffer_pages(1 << 20, cpus, Some(total));
                assert!(pages.is_power_of_two());
                assert!(
                    pages == 1 || (cpus * (1 + pages)) as u64 <= total,
                    "{cpus} cpus, {kb} KiB: {pages}"
                );
            }
        }
    }

    #[test]
    fn a_default_unprivileged_run_keeps_its_buffers_whatever_the_cpu_count() {
        // No false "reduced" warning: the default size fits the default limit.
        for cpus in 1..=512 {
            let budget = Some(user_budget_pages(516, cpus, 4096));
            assert_eq!(
                fit_buffer_pages(UNPRIVILEGED_DATA_PAGES, cpus, budget),
                UNPRIVILEGED_DATA_PAGES,
                "{cpus} cpus"
            );
        }
    }

    #[test]
    fn perf_capabilities_are_read_from_the_effective_mask() {
        assert!(has_perf_caps(1 << 38));
        assert!(has_perf_caps(1 << 21));
        assert!(!has_perf_caps(1 << 12));
        assert!(has_perf_caps(0x1ff_ffff_ffff));
    }

    #[test]
    fn a_permission_error_says_what_is_missing_and_how_to_fix_it() {
        let mut access = PerfAccess::default();
        access.paranoid = Some(3);
        let reason = permission_reason(&access, libc::EACCES);
        for needle in [
            "EACCES",
            "perf_event_paranoid is 3",
            "CAP_PERFMON",
            "sysctl kernel.perf_event_paranoid=1",
            "setcap cap_perfmon",
        ] {
            assert!(reason.contains(needle), "{needle} missing from: {reason}");
        }
    }

    #[test]
    fn samplers_and_profiles_can_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Sampler>();
        send_sync::<Profile>();
        send_sync::<SamplerStats>();
    }

    #[test]
    fn einval_is_a_failed_open_not_a_missing_event() {
        let missing = |errno| is_missing_event(&io::Error::from_raw_os_error(errno));
        assert!(missing(libc::ENOENT));
        assert!(missing(libc::ENODEV));
        assert!(missing(libc::EOPNOTSUPP));
        assert!(!missing(libc::EINVAL));
        assert!(!missing(libc::EACCES));
    }

    #[test]
    fn sampler_threads_are_named_after_their_target_within_the_kernels_limit() {
        assert_eq!(thread_name(4242), "sampler-4242");
        // pid_max is at most 2^22: the longest name still fits comm's 15 bytes.
        assert!(thread_name(4_194_304).len() <= 15);
    }

    fn profile(reduced: &[&str], other: &[&str]) -> Profile {
        let reduced: Vec<String> = reduced.iter().map(|&r| r.to_owned()).collect();
        let mut warnings = reduced.clone();
        warnings.extend(other.iter().map(|&w| w.to_owned()));
        Profile {
            kind: KindSet::BOTH,
            profiles: ByKind::default(),
            mem_samples: 0,
            mem_period: 0,
            page_size: 4096,
            samples: 1234,
            lost: 5,
            offcpu_samples: 0,
            switches: 0,
            offcpu_stacks: true,
            blocked: Duration::ZERO,
            preempted: Duration::ZERO,
            event: "cpu-clock",
            symbols: SymbolDetail::NamesOnly,
            kernel_frames: reduced.is_empty(),
            frequency_hz: 999,
            buffer_pages: 64,
            cpus: 2,
            warnings,
            reduced,
            symbolize_time: Duration::ZERO,
            final_batch_time: Duration::ZERO,
            duration: Duration::from_secs(1),
            unresolved_addresses: 0,
            unwind: UnwindMode::FramePointers,
            stack_size: 0,
            unwinding: UnwindCounts::default(),
            stacks: StacksChunk::default(),
        }
    }

    #[test]
    fn sampling_info_has_the_event_and_a_reason_only_when_sampling_was_reduced() {
        let full = profile(&[], &["5 records lost", "cannot symbolize /x: gone"]).sampling_info();
        assert!(full.enabled);
        assert_eq!(full.event, "cpu-clock");
        assert_eq!(
            (full.unwind.as_str(), full.symbols.as_str()),
            ("frame-pointers", "names")
        );
        assert_eq!(
            (
                full.frequency_hz,
                full.samples,
                full.lost,
                full.kernel_frames
            ),
            (999, 1234, 5, true)
        );
        assert_eq!(full.reason, None);

        let mut cycles = profile(&[], &[]);
        cycles.event = "cycles";
        assert_eq!(cycles.sampling_info().event, "cycles");

        let reduced = profile(
            &[
                "kernel frames excluded: …",
                "ring buffers reduced from 64 to 16 …",
            ],
            &["5 records lost"],
        )
        .sampling_info();
        assert!(!reduced.kernel_frames);
        assert_eq!(
            reduced.reason.as_deref(),
            Some("kernel frames excluded: …; ring buffers reduced from 64 to 16 …")
        );
    }

    #[test]
    fn checking_refuses_a_frequency_of_zero_or_above_the_kernels_maximum() {
        let mut opts = SamplerOptions {
            frequency_hz: 0,
            ..SamplerOptions::default()
        };
        let err = Sampler::check(&opts).unwrap_err();
        assert!(matches!(err, ProfilerError::InvalidOptions { .. }), "{err}");
        let max: u64 = procfs::read_trimmed("/proc/sys/kernel/perf_event_max_sample_rate")
            .and_then(|s| s.parse().ok())
            .expect("kernel.perf_event_max_sample_rate");
        opts.frequency_hz = max + 1;
        let err = Sampler::check(&opts).unwrap_err();
        assert!(
            matches!(&err, ProfilerError::InvalidOptions { reason } if reason.contains("perf_event_max_sample_rate")),
            "{err}"
        );
    }

    #[test]
    fn checking_default_options_needs_no_target_process() {
        match Sampler::check(&SamplerOptions::default()) {
            Ok(()) => {}
            Err(e @ ProfilerError::PermissionDenied { .. }) => panic!(
                "this test opens a perf counter on itself, which this machine does not allow: {e}"
            ),
            Err(e) => panic!("check failed: {e}"),
        }
        let opts = SamplerOptions {
            event: SampleEvent::CpuClock,
            ..SamplerOptions::default()
        };
        Sampler::check(&opts).expect("cpu-clock exists everywhere");
    }

    #[test]
    fn checking_cycles_agrees_with_starting_on_cycles() {
        let opts = SamplerOptions {
            event: SampleEvent::Cycles,
            ..SamplerOptions::default()
        };
        let pid = std::process::id();
        match (Sampler::check(&opts), Sampler::start(pid, &opts)) {
            (Ok(()), Ok(sampler)) => assert_eq!(sampler.event(), "cycles"),
            (
                Err(ProfilerError::EventUnavailable { event: a, .. }),
                Err(ProfilerError::EventUnavailable { event: b, .. }),
            ) => assert_eq!((a, b), ("cycles", "cycles")),
            (check, start) => panic!("check {check:?} but start {:?}", start.map(|_| ())),
        }
    }

    #[test]
    fn starting_with_no_frequency_is_refused() {
        let opts = SamplerOptions {
            frequency_hz: 0,
            ..SamplerOptions::default()
        };
        let err = Sampler::start(std::process::id(), &opts).unwrap_err();
        assert!(matches!(err, ProfilerError::InvalidOptions { .. }), "{err}");
    }
}
