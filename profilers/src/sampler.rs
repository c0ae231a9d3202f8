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
//! std::fs::write("cpu.folded", profile.cpu.to_folded()).ok();
//! std::fs::write("offcpu.folded", profile.offcpu.to_folded()).ok();
//! # Ok(())
//! # }
//! ```

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchtop_sessions::StackTree;
use benchtop_sessions::meta::{PerfAccess, SamplingInfo, UnwindingInfo};
use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter, SampleFlag};

use crate::ProfilerError;
use crate::collect::{Collected, Collector, Follow, Setup};
use crate::procfs;
use crate::symbolize::SymbolDetail;
use crate::unwind::{DEFAULT_STACK_SIZE, MAX_STACK_SIZE, UnwindCounts, UnwindMode};

/// The perf ring buffer of one event (perf-event2's sampler).
pub(crate) type Ring = perf_event::Sampler;

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
/// Data pages per CPU asked for without privileges (256 KiB, ~0.46 s as above). With the
/// default perf_event_mlock_kb of 516 (one metadata page plus 128 data pages per CPU)
/// it fits the user's budget with half of it left to other perf users of the account.
/// Off-CPU adds only switch records here (no stacks without kernel sampling).
const UNPRIVILEGED_DATA_PAGES: usize = 64;

/// Rounds of looking for threads created while [`Sampler::attach`] opened the events.
const ATTACH_ROUNDS: usize = 3;

/// The name [`Sampler::event`] gives the off-CPU event when it drives sampling alone.
const CONTEXT_SWITCHES: &str = "context-switches";

/// `PERF_EVENT_IOC_SET_OUTPUT`: `_IO('$', 5)`.
const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = 0x2405;

/// Which profiles a sampler takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ProfileKind {
    /// On-CPU stacks only: where threads run, sampled at
    /// [`SamplerOptions::frequency_hz`]. No cost per context switch.
    Cpu,
    /// Off-CPU stacks only: where threads block, weighted by the time blocked (µs).
    OffCpu,
    /// Both (the default). Off-CPU stacks need kernel sampling; without it off-CPU time
    /// is recorded per thread without stacks and [`Sampler::warnings`] says why.
    #[default]
    Both,
}

impl ProfileKind {
    /// On-CPU stacks are taken.
    pub fn on_cpu(self) -> bool {
        matches!(self, ProfileKind::Cpu | ProfileKind::Both)
    }

    /// Off-CPU time is recorded.
    pub fn off_cpu(self) -> bool {
        matches!(self, ProfileKind::OffCpu | ProfileKind::Both)
    }

    /// The name the command line uses: `cpu`, `offcpu` or `both`.
    pub fn name(self) -> &'static str {
        match self {
            ProfileKind::Cpu => "cpu",
            ProfileKind::OffCpu => "offcpu",
            ProfileKind::Both => "both",
        }
    }
}

/// How to sample.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SamplerOptions {
    /// Which profiles to take (default both on- and off-CPU).
    pub kind: ProfileKind,
    /// On-CPU samples per second per CPU while a sampled thread runs (default 999, which
    /// avoids lockstep with timers at round frequencies). Off-CPU sampling does not use
    /// it: every context switch is recorded.
    pub frequency_hz: u64,
    /// Include kernel frames when permitted (default true), on- and off-CPU. When not
    /// permitted the sampler falls back to user frames and says why in
    /// [`Sampler::warnings`].
    pub kernel_frames: bool,
    /// Data pages per CPU ring buffer, rounded down to a power of two. `None` picks 128
    /// when privileged (256 with off-CPU stacks), else the largest size that fits
    /// `perf_event_mlock_kb`.
    pub buffer_pages: Option<usize>,
    /// Add the thread name as the second frame of every stack (default false: stacks
    /// of all threads of a process are merged under the process name). Off-CPU time
    /// without stacks is always per thread.
    pub per_thread: bool,
    /// Symbol lookup depth (default: DWARF names with inlined frames).
    pub symbols: SymbolDetail,
    /// How often the background thread symbolizes what it collected (default 200 ms).
    pub batch_interval: Duration,
    /// Which event drives on-CPU sampling (default: hardware cycles where the machine
    /// has a PMU, else the software cpu-clock).
    pub event: SampleEvent,
    /// How user stacks are walked (default [`UnwindMode::Auto`]: frame pointers where a
    /// module keeps them, its DWARF CFI where it does not).
    pub unwind: UnwindMode,
    /// Bytes of user stack copied with each sample when unwinding from copies (default
    /// 8 KiB, perf's): rounded down to a multiple of 8, at most
    /// [`crate::unwind::MAX_STACK_SIZE`]. Deeper stacks end in
    /// `[truncated: stack copy too small]`.
    pub stack_size: u32,
    /// Off-CPU stacks are sampled at one context switch in this many (default 1: every
    /// switch). Each sampled blocked interval then stands for this many, its time
    /// multiplied by it; the others are not recorded. Raise it for programs that switch
    /// tens of thousands of times a second, where a stack copy per switch would be
    /// hundreds of MB/s (8 KiB each).
    pub offcpu_stack_every: u32,
}

/// The perf event that drives on-CPU sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SampleEvent {
    /// Hardware CPU cycles when the machine offers them, else `cpu-clock`.
    #[default]
    Auto,
    /// The software `cpu-clock` event (an hrtimer): works everywhere, VMs included.
    CpuClock,
    /// Hardware CPU cycles: needs a PMU (not in most VMs).
    Cycles,
}

impl SampleEvent {
    /// The event's name as perf spells it.
    pub fn name(self) -> &'static str {
        match self {
            SampleEvent::Cycles => "cycles",
            SampleEvent::Auto | SampleEvent::CpuClock => "cpu-clock",
        }
    }
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            kind: ProfileKind::default(),
            frequency_hz: 999,
            kernel_frames: true,
            buffer_pages: None,
            per_thread: false,
            symbols: SymbolDetail::default(),
            batch_interval: Duration::from_millis(200),
            event: SampleEvent::Auto,
            unwind: UnwindMode::Auto,
            stack_size: DEFAULT_STACK_SIZE,
            offcpu_stack_every: 1,
        }
    }
}

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
    pub kind: ProfileKind,
    /// On-CPU stacks, root first: process name, [thread name,] user frames from the
    /// outermost caller, then kernel frames (suffixed `_[k]`). Weights are samples.
    /// Empty when [`ProfileKind::OffCpu`] was asked for.
    pub cpu: StackTree,
    /// Off-CPU stacks, laid out as `cpu`; weights are microseconds blocked (the
    /// `offcpu.folded` of a session). Without kernel sampling ([`Profile::offcpu_stacks`]
    /// false) each thread has one stack, `process;thread;[blocked: no stack — kernel
    /// sampling not permitted]`. Blocked intervals whose sample was lost or throttled end
    /// in `[blocked: stack not sampled]`. Empty when [`ProfileKind::Cpu`] was asked for.
    pub offcpu: StackTree,
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
        info.profile = self.kind.name().into();
        if self.kind.off_cpu() {
            info.offcpu_stacks = self.offcpu_stacks;
            info.switches = self.switches;
            info.blocked_s = self.blocked.as_secs_f64();
            info.preempted_s = self.preempted.as_secs_f64();
        }
        info
    }
}

/// State shared between a [`Sampler`] and its background thread.
#[derive(Debug)]
pub(crate) struct Shared {
    pub samples: AtomicU64,
    pub lost: AtomicU64,
    pub throttled: AtomicU64,
    pub offcpu_samples: AtomicU64,
    pub switches: AtomicU64,
    pub blocked_ns: AtomicU64,
    /// Bytes of records copied out of the ring buffers and not yet folded.
    pub queued_bytes: AtomicU64,
    pub batches: AtomicU64,
    pub pending: AtomicU64,
    pub symbolize_ns: AtomicU64,
    pub last_batch_ns: AtomicU64,
    pub max_batch_ns: AtomicU64,
    /// Stop reading: [`Sampler::finish`] or drop.
    pub stop: AtomicBool,
    /// Skip the final batch: the sampler was dropped without finish.
    pub abandon: AtomicBool,
    /// An eventfd that wakes the thread's poll.
    pub wake: OwnedFd,
    /// A copy of the profile so far was asked for ([`Sampler::request_snapshot`]).
    pub snapshot_wanted: AtomicBool,
    /// The copy, published after the batch that followed the request.
    pub snapshot: Mutex<Option<Snapshot>>,
}

/// The stacks a sampler has folded so far, for a live view: copies, taken after a batch.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Snapshot {
    /// On-CPU stacks so far, as in [`Profile::cpu`].
    pub cpu: StackTree,
    /// Off-CPU stacks so far (µs blocked), as in [`Profile::offcpu`].
    pub offcpu: StackTree,
    /// Batches folded when the copy was taken.
    pub batches: u64,
}

impl Shared {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: eventfd has no memory arguments; the result is checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Shared {
            samples: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            offcpu_samples: AtomicU64::new(0),
            switches: AtomicU64::new(0),
            blocked_ns: AtomicU64::new(0),
            queued_bytes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            symbolize_ns: AtomicU64::new(0),
            last_batch_ns: AtomicU64::new(0),
            max_batch_ns: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            abandon: AtomicBool::new(false),
            // SAFETY: fd is a fresh descriptor that nothing else owns.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
            snapshot_wanted: AtomicBool::new(false),
            snapshot: Mutex::new(None),
        })
    }

    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to an eventfd we own. A failure
        // (counter overflow) still leaves the eventfd readable, which is all we need.
        let _ = unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
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
    kind: ProfileKind,
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
        let kind = opts.kind;
        let mut warnings = Vec::new();
        let mut notes = Vec::new();

        let tids = match mode {
            Mode::Attach => list_threads(pid)?,
            Mode::Start | Mode::OnExec => vec![pid],
        };
        if mode == Mode::Attach {
            let per_thread = cpus.len() as u64 * (1 + u64::from(kind.on_cpu() && kind.off_cpu()));
            if let Some(note) = ensure_fd_limit(pid, tids.len(), per_thread)? {
                notes.push(note);
            }
        }

        let requested = opts.buffer_pages.unwrap_or(if !access.privileged {
            UNPRIVILEGED_DATA_PAGES
        } else if opts.unwind.copies_stacks() {
            PRIVILEGED_STACK_DATA_PAGES
        } else if kind.off_cpu() {
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
            warnings.push(format!(
                "ring buffers reduced from {requested} to {pages} data pages per CPU to fit \
                 the locked-memory budget of perf_event_mlock_kb={} KiB per CPU over {} CPUs; \
                 samples may be lost under load (run as root or with CAP_IPC_LOCK for larger \
                 buffers)",
                access.mlock_kb.unwrap_or(0),
                cpus.len()
            ));
        }

        let candidates: &[Option<SampleEvent>] = if !kind.on_cpu() {
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
                off_cpu: kind.off_cpu(),
                off_stacks: kind.off_cpu(),
                kernel_frames: opts.kernel_frames,
                frequency_hz: opts.frequency_hz,
                on_exec: mode == Mode::OnExec,
                enabled: mode == Mode::Attach,
                stack_size: opts
                    .unwind
                    .copies_stacks()
                    .then(|| stack_copy_size(opts.stack_size)),
                off_every: opts.offcpu_stack_every.max(1),
            };
            let attempt = match open_events(&tids, &cpus, &plan, &mut pages) {
                Err(OpenError::Denied(errno)) if plan.kernel_sampled() => {
                    let reduced = EventPlan {
                        kernel_frames: false,
                        off_stacks: false,
                        ..plan.clone()
                    };
                    let retry = open_events(&tids, &cpus, &reduced, &mut pages);
                    if retry.is_ok() {
                        if plan.on_cpu.is_some() && plan.kernel_frames {
                            warnings.push(kernel_excluded_reason(&access, errno));
                        }
                        if plan.off_stacks {
                            warnings.push(offcpu_stacks_excluded_reason(&access, errno));
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
        let Some((events, plan)) = opened else {
            return Err(ProfilerError::InvalidOptions {
                reason: "no sampling event to open".into(),
            });
        };
        if pages < requested && !warnings.iter().any(|w| w.starts_with("ring buffers")) {
            warnings.push(format!(
                "ring buffers reduced from {requested} down to {pages} data pages per CPU: the \
                 kernel refused larger ones (locked-memory limit); samples may be lost under load"
            ));
        }

        let shared = Arc::new(Shared::new().map_err(|source| ProfilerError::Thread {
            reason: format!("cannot create the wake-up eventfd: {source}"),
        })?);
        let setup = Setup {
            unwind: plan.stack_size.map(|_| opts.unwind),
            kernel_frames: plan.kernel_frames,
            off_cpu: plan.off_cpu,
            off_stacks: plan.off_stacks,
            off_ids: events.off_ids,
            enable: mode == Mode::Start,
            on_exec: mode == Mode::OnExec,
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
            event: plan.on_cpu.map_or(CONTEXT_SWITCHES, SampleEvent::name),
            offcpu_stacks: plan.off_stacks,
            symbols: opts.symbols,
            kernel_frames: plan.kernel_frames,
            reductions: warnings.len(),
            warnings: warnings.into_iter().chain(notes).collect(),
            frequency_hz: opts.frequency_hz,
            buffer_pages: pages,
            cpus: cpus.len(),
            started: Instant::now(),
            unwind: opts.unwind,
            stack_size: plan.stack_size.unwrap_or(0),
            offcpu_stack_every: plan.off_every,
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
            SampleEvent::Cycles if opts.kind.on_cpu() => SampleEvent::Cycles,
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

    /// The copy made since the last request, if one is ready.
    pub fn take_snapshot(&self) -> Option<Snapshot> {
        self.shared
            .snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// The profiles being taken.
    pub fn kind(&self) -> ProfileKind {
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
            let what = if self.kind.off_cpu() {
                "records (samples and switch records)"
            } else {
                "samples"
            };
            warnings.push(format!(
                "{} {what} lost: ring buffers overflowed ({} data pages per CPU)",
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
            cpu: collected.cpu,
            offcpu: collected.offcpu,
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

/// Why opening the events failed.
#[derive(Debug)]
enum OpenError {
    /// EACCES or EPERM from perf_event_open.
    Denied(i32),
    /// The process is gone.
    NoProcess,
    Open(usize, io::Error),
    Mmap(usize, usize, io::Error),
}

impl OpenError {
    fn into_error(self, pid: u32, access: &PerfAccess) -> ProfilerError {
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
fn is_missing_event(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENODEV | libc::EOPNOTSUPP)
    )
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

fn event_builder(event: SampleEvent) -> Builder<'static> {
    match event {
        SampleEvent::Cycles => Builder::new(Hardware::CPU_CYCLES),
        SampleEvent::Auto | SampleEvent::CpuClock => Builder::new(Software::CPU_CLOCK),
    }
}

/// The events to open on each thread and CPU.
#[derive(Debug, Clone)]
pub(crate) struct EventPlan {
    /// The on-CPU event; `None` for an off-CPU-only profile, where the
    /// `context-switches` event carries the side-band records instead.
    on_cpu: Option<SampleEvent>,
    /// Switch records for off-CPU time.
    off_cpu: bool,
    /// `context-switches` samples for off-CPU stacks (needs kernel sampling).
    off_stacks: bool,
    kernel_frames: bool,
    frequency_hz: u64,
    on_exec: bool,
    /// Opened enabled (attach); else enabled by the reader or at exec.
    enabled: bool,
    /// Samples carry the user registers and a copy of this many bytes of user stack
    /// (see [`crate::records::UserStack`]); the user part of the kernel's callchain is
    /// then left out.
    stack_size: Option<u32>,
    /// The `context-switches` event's sample period.
    off_every: u32,
}

impl EventPlan {
    /// Some event of the plan samples in kernel mode (needs permission).
    fn kernel_sampled(&self) -> bool {
        self.off_stacks || (self.on_cpu.is_some() && self.kernel_frames)
    }
}

/// The sample layout every event of a sampler shares (see [`crate::records`]). Not
/// PERIOD: with it, the kernel samples a software event at every occurrence whatever
/// its period, which [`SamplerOptions::offcpu_stack_every`] needs.
fn sample_flags(plan: &EventPlan) -> SampleFlag {
    let flags = SampleFlag::IDENTIFIER
        | SampleFlag::IP
        | SampleFlag::TID
        | SampleFlag::TIME
        | SampleFlag::CPU
        | SampleFlag::CALLCHAIN;
    if plan.stack_size.is_some() {
        flags | SampleFlag::REGS_USER | SampleFlag::STACK_USER
    } else {
        flags
    }
}

/// The stack copy the kernel is asked for: `size` rounded down to a multiple of 8,
/// between 8 bytes and [`MAX_STACK_SIZE`].
pub(crate) fn stack_copy_size(size: u32) -> u32 {
    (size.min(MAX_STACK_SIZE) & !7).max(8)
}

/// What every event of a sampler on thread `tid` and `cpu` has in common.
fn common(b: &mut Builder<'static>, tid: u32, cpu: usize, plan: &EventPlan, data_bytes: usize) {
    b.observe_pid(tid as libc::pid_t)
        .one_cpu(cpu)
        .inherit(true)
        .sample(sample_flags(plan))
        .sample_id_all(true)
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

/// The event that owns the ring buffer and carries the side-band records (names,
/// mappings, forks and exits, switches): the on-CPU event, or the off-CPU one alone.
fn main_builder(tid: u32, cpu: usize, plan: &EventPlan, data_bytes: usize) -> Builder<'static> {
    let (mut b, kernel) = match plan.on_cpu {
        Some(event) => {
            let mut b = event_builder(event);
            b.sample_frequency(plan.frequency_hz);
            (b, plan.kernel_frames)
        }
        None => (switches_builder(plan), plan.off_stacks),
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

/// The off-CPU stack event next to an on-CPU event.
fn off_builder(tid: u32, cpu: usize, plan: &EventPlan, data_bytes: usize) -> Builder<'static> {
    let mut b = switches_builder(plan);
    common(&mut b, tid, cpu, plan, data_bytes);
    // Its samples are taken in the scheduler, in kernel mode: excluding the kernel
    // would drop every one of them.
    b.exclude_kernel(false);
    b
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
struct Events {
    /// One ring buffer per CPU, in the order of the CPUs.
    rings: Vec<Ring>,
    /// Every other event, writing into the ring of its CPU.
    counters: Vec<Counter>,
    /// Ids of the events whose samples are off-CPU samples.
    off_ids: Vec<u64>,
    /// Threads with events of their own.
    tids: Vec<u32>,
}

/// Opens the plan's events for every thread of `tids` on every CPU. The first thread
/// whose event opens on a CPU owns that CPU's ring buffer; the other events write into
/// it. `pages` is halved while the kernel refuses to map buffers that large
/// (locked-memory limits), and left at the size used. A thread other than the first
/// that is gone by the time its events open is skipped.
fn open_events(
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
        off_ids: Vec::new(),
        tids: Vec::with_capacity(tids.len()),
    };
    'threads: for (i, &tid) in tids.iter().enumerate() {
        let mut counters = Vec::new();
        let mut off_ids = Vec::new();
        for (slot, &cpu) in rings.iter_mut().zip(cpus) {
            let opened = open_on(tid, cpu, plan, pages, page_size, slot);
            match opened {
                Ok((main, off)) => {
                    for c in main.into_iter().chain(off) {
                        // Without an on-CPU event the main event is the off-CPU one.
                        if plan.on_cpu.is_none() || !c.is_main {
                            off_ids.push(c.counter.id());
                        }
                        counters.push(c.counter);
                    }
                }
                Err(OpenError::NoProcess) if i > 0 => continue 'threads,
                Err(e) => return Err(e),
            }
        }
        events.counters.append(&mut counters);
        events.off_ids.append(&mut off_ids);
        events.tids.push(tid);
    }
    for (ring, &cpu) in rings.into_iter().zip(cpus) {
        match ring {
            Some(r) => {
                if plan.on_cpu.is_none() {
                    events.off_ids.push(r.id());
                }
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
    events.off_ids.sort_unstable();
    events.off_ids.dedup();
    Ok(events)
}

/// An opened event and whether it is the plan's main event.
struct Opened {
    counter: Counter,
    is_main: bool,
}

/// Opens the events of `tid` on `cpu`. When `ring` is empty, the main event is mapped
/// and becomes it; else the main event writes into it and is returned. The off-CPU
/// event, when planned, always writes into the ring.
fn open_on(
    tid: u32,
    cpu: usize,
    plan: &EventPlan,
    pages: &mut usize,
    page_size: usize,
    ring: &mut Option<Ring>,
) -> Result<(Option<Opened>, Option<Opened>), OpenError> {
    let main = match ring {
        Some(r) => {
            let b = main_builder(tid, cpu, plan, *pages * page_size);
            let counter = b.build().map_err(|e| OpenError::from_open(cpu, e))?;
            set_output(counter.as_raw_fd(), r.as_raw_fd()).map_err(|e| OpenError::Open(cpu, e))?;
            Some(Opened {
                counter,
                is_main: true,
            })
        }
        None => loop {
            let b = main_builder(tid, cpu, plan, *pages * page_size);
            let counter = b.build().map_err(|e| OpenError::from_open(cpu, e))?;
            match counter.sampled(*pages * page_size) {
                Ok(r) => {
                    *ring = Some(r);
                    break None;
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
    };
    let off = if plan.off_stacks && plan.on_cpu.is_some() {
        let Some(r) = ring.as_ref() else {
            return Err(OpenError::Open(
                cpu,
                io::Error::new(io::ErrorKind::NotFound, "no ring buffer"),
            ));
        };
        let b = off_builder(tid, cpu, plan, *pages * page_size);
        let counter = b.build().map_err(|e| OpenError::from_open(cpu, e))?;
        set_output(counter.as_raw_fd(), r.as_raw_fd()).map_err(|e| OpenError::Open(cpu, e))?;
        Some(Opened {
            counter,
            is_main: false,
        })
    } else {
        None
    };
    Ok((main, off))
}

/// Opens the plan's events on thread `tid` (found after attaching), writing into the
/// existing `rings` (one per CPU of `cpus`), enabled. Returns the counters and the ids
/// of the off-CPU ones.
pub(crate) fn open_thread_events(
    tid: u32,
    cpus: &[usize],
    rings: &[Ring],
    plan: &EventPlan,
) -> io::Result<(Vec<Counter>, Vec<u64>)> {
    let page_size = page_size();
    let mut counters = Vec::new();
    let mut off_ids = Vec::new();
    for (ring, &cpu) in rings.iter().zip(cpus) {
        // The watermark only matters for the ring's own event.
        let data_bytes = page_size;
        let mut main = main_builder(tid, cpu, plan, data_bytes).build()?;
        set_output(main.as_raw_fd(), ring.as_raw_fd())?;
        main.enable()?;
        if plan.on_cpu.is_none() {
            off_ids.push(main.id());
        }
        counters.push(main);
        if plan.off_stacks && plan.on_cpu.is_some() {
            let mut off = off_builder(tid, cpu, plan, data_bytes).build()?;
            set_output(off.as_raw_fd(), ring.as_raw_fd())?;
            off.enable()?;
            off_ids.push(off.id());
            counters.push(off);
        }
    }
    Ok((counters, off_ids))
}

/// The threads of `pid`, `pid` first.
pub(crate) fn list_threads(pid: u32) -> Result<Vec<u32>, ProfilerError> {
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
fn ensure_fd_limit(
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
fn permission_reason(access: &PerfAccess, errno: i32) -> String {
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
fn kernel_excluded_reason(access: &PerfAccess, errno: i32) -> String {
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
fn offcpu_stacks_excluded_reason(access: &PerfAccess, errno: i32) -> String {
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

fn page_size() -> usize {
    // SAFETY: sysconf has no memory arguments.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as usize } else { 4096 }
}

fn floor_pow2(n: usize) -> usize {
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
pub(crate) fn user_budget_pages(mlock_kb: u64, online_cpus: usize, page_size: usize) -> u64 {
    let per_cpu = mlock_kb.saturating_mul(1024) / page_size.max(1) as u64;
    per_cpu.saturating_mul(online_cpus as u64)
}

/// Data pages per buffer (a power of two, at most `requested`) such that `buffers`
/// buffers, each one metadata page plus its data pages, fit `budget_pages` together. At
/// least one page: the kernel then decides.
pub(crate) fn fit_buffer_pages(
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
pub(crate) fn has_perf_caps(cap_eff: u64) -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    cap_eff & (1 << CAP_PERFMON | 1 << CAP_SYS_ADMIN) != 0
}

#[cfg(test)]
mod tests {
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
            kind: ProfileKind::Both,
            cpu: StackTree::new(),
            offcpu: StackTree::new(),
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
        }
    }

    #[test]
    fn sampling_info_has_the_event_and_a_reason_only_when_sampling_was_reduced() {
        let full = profile(&[], &["5 samples lost", "cannot symbolize /x: gone"]).sampling_info();
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
            &["5 samples lost"],
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
