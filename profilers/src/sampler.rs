//! On-CPU stack sampling of a process tree with perf events.
//!
//! [`Sampler::start`] opens one software `cpu-clock` event per online CPU on the
//! process, with `inherit` so that threads and children it creates afterwards are
//! sampled too, and maps a ring buffer for each. One background thread owned by the
//! sampler polls the buffers, reads records in place, aggregates callchains and
//! symbolizes them in batches while the run goes on, so that [`Sampler::finish`] only
//! has the last fraction of a second left to resolve.
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
//! # Ok(())
//! # }
//! ```

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use benchtop_sessions::StackTree;
use benchtop_sessions::meta::{PerfAccess, SamplingInfo};
use perf_event::events::{Hardware, Software};
use perf_event::{Builder, SampleFlag};

use crate::ProfilerError;
use crate::collect::{Collected, Collector};
use crate::procfs;
use crate::symbolize::SymbolDetail;

/// The perf ring buffer of one event (perf-event2's sampler).
pub(crate) type Ring = perf_event::Sampler;

/// Data pages per CPU when the user is privileged (no mlock budget applies): 512 KiB
/// with 4 KiB pages. A sample with a 64-entry callchain is 568 bytes (8 header, 8 IP,
/// 8 pid/tid, 8 time, 8 cpu, 8 period, 8 chain length, 64 × 8 chain), so 512 KiB hold
/// 923 of them: ~0.92 s of 999 Hz samples on one CPU if the reader stalls.
const PRIVILEGED_DATA_PAGES: usize = 128;
/// Data pages per CPU asked for without privileges (256 KiB, ~0.46 s as above). With the
/// default perf_event_mlock_kb of 516 (one metadata page plus 128 data pages per CPU)
/// it fits the user's budget with half of it left to other perf users of the account.
const UNPRIVILEGED_DATA_PAGES: usize = 64;

/// How to sample.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SamplerOptions {
    /// Samples per second per CPU while a sampled thread runs (default 999, which avoids
    /// lockstep with timers at round frequencies).
    pub frequency_hz: u64,
    /// Include kernel frames when permitted (default true). When not permitted the
    /// sampler falls back to user frames and says why in [`Sampler::warnings`].
    pub kernel_frames: bool,
    /// Data pages per CPU ring buffer, rounded down to a power of two. `None` picks 128
    /// when privileged, else the largest size that fits `perf_event_mlock_kb`.
    pub buffer_pages: Option<usize>,
    /// Add the thread name as the second frame of every stack (default false: stacks
    /// of all threads of a process are merged under the process name).
    pub per_thread: bool,
    /// Symbol lookup depth (default: DWARF names with inlined frames).
    pub symbols: SymbolDetail,
    /// How often the background thread symbolizes what it collected (default 200 ms).
    pub batch_interval: Duration,
    /// Which event drives sampling (default: hardware cycles where the machine has a
    /// PMU, else the software cpu-clock).
    pub event: SampleEvent,
}

/// The perf event that drives sampling.
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
            frequency_hz: 999,
            kernel_frames: true,
            buffer_pages: None,
            per_thread: false,
            symbols: SymbolDetail::default(),
            batch_interval: Duration::from_millis(200),
            event: SampleEvent::Auto,
        }
    }
}

/// Live counters of a running sampler; cheap to read for a progress line.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct SamplerStats {
    /// Samples read so far.
    pub samples: u64,
    /// Samples the kernel reported lost (ring buffer full).
    pub lost: u64,
    /// Times the kernel throttled the sampling rate (perf_cpu_time_max_percent).
    pub throttled: u64,
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
    /// On-CPU stacks, root first: process name, [thread name,] user frames from the
    /// outermost caller, then kernel frames (suffixed `_[k]`). Weights are samples.
    pub cpu: StackTree,
    /// Samples taken.
    pub samples: u64,
    /// Samples lost (ring buffers full).
    pub lost: u64,
    /// The event that drove sampling: `cycles` or `cpu-clock`.
    pub event: &'static str,
    /// How frames were named.
    pub symbols: SymbolDetail,
    /// Kernel frames were included.
    pub kernel_frames: bool,
    /// Sampling frequency per CPU, Hz.
    pub frequency_hz: u64,
    /// Data pages per CPU ring buffer.
    pub buffer_pages: usize,
    /// CPUs sampled.
    pub cpus: usize,
    /// Everything reduced, excluded or unresolved, in words for the user.
    pub warnings: Vec<String>,
    /// The part of `warnings` that says how sampling itself was reduced at start:
    /// kernel frames excluded, ring buffers made smaller. Empty for a full-fidelity run.
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
}

impl Profile {
    /// The `sampling` section of session.json for this profile: the event that drove
    /// sampling, and a `reason` only when sampling was reduced ([`Profile::reduced`]);
    /// other warnings (lost samples, unresolved files) belong to the session's warnings.
    pub fn sampling_info(&self) -> SamplingInfo {
        let mut info = SamplingInfo::default();
        info.enabled = true;
        info.event = self.event.into();
        info.frequency_hz = self.frequency_hz;
        info.kernel_frames = self.kernel_frames;
        info.samples = self.samples;
        info.lost = self.lost;
        info.unwind = "frame-pointers".into();
        info.symbols = self.symbols.name().into();
        info.reason = (!self.reduced.is_empty()).then(|| self.reduced.join("; "));
        info
    }
}

/// State shared between a [`Sampler`] and its background thread.
#[derive(Debug)]
pub(crate) struct Shared {
    pub samples: AtomicU64,
    pub lost: AtomicU64,
    pub throttled: AtomicU64,
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
            batches: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            symbolize_ns: AtomicU64::new(0),
            last_batch_ns: AtomicU64::new(0),
            max_batch_ns: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            abandon: AtomicBool::new(false),
            // SAFETY: fd is a fresh descriptor that nothing else owns.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to an eventfd we own. A failure
        // (counter overflow) still leaves the eventfd readable, which is all we need.
        let _ = unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
}

/// A running on-CPU sampler of one process and the threads and children it creates.
///
/// Its background thread is named `sampler-<pid>` after the sampled process. Dropping
/// it without [`Sampler::finish`] stops and joins that thread, discarding the data.
#[derive(Debug)]
pub struct Sampler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<Collected, ProfilerError>>>,
    event: SampleEvent,
    symbols: SymbolDetail,
    kernel_frames: bool,
    /// What start reduced or excluded (kernel frames, buffer sizes).
    reductions: Vec<String>,
    frequency_hz: u64,
    buffer_pages: usize,
    cpus: usize,
    started: Instant,
}

impl Sampler {
    /// Starts sampling `pid` on every online CPU.
    ///
    /// Threads and child processes that `pid` creates from now on are sampled too;
    /// threads that already exist, other than `pid` itself, are not (built-in workers
    /// wait for a start message, so theirs do not exist yet).
    ///
    /// It returns once the events are enabled (under a millisecond here). The background
    /// thread then loads kernel symbols and the symbols and debug info of the files the
    /// process has mapped while the workload starts, draining the ring buffers between
    /// files so that nothing is lost to it.
    ///
    /// Errors: [`ProfilerError::ProcessNotFound`] when there is no such process,
    /// [`ProfilerError::PermissionDenied`] (with the fix) when perf events are not
    /// allowed at all, [`ProfilerError::PerfOpen`] and [`ProfilerError::RingBuffer`]
    /// for anything else the kernel refuses.
    pub fn start(pid: u32, opts: &SamplerOptions) -> Result<Sampler, ProfilerError> {
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
        let mut warnings = Vec::new();

        let requested = opts.buffer_pages.unwrap_or(if access.privileged {
            PRIVILEGED_DATA_PAGES
        } else {
            UNPRIVILEGED_DATA_PAGES
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

        let candidates: &[SampleEvent] = match opts.event {
            SampleEvent::Auto => &[SampleEvent::Cycles, SampleEvent::CpuClock],
            SampleEvent::Cycles => &[SampleEvent::Cycles],
            SampleEvent::CpuClock => &[SampleEvent::CpuClock],
        };
        let mut kernel = opts.kernel_frames;
        let mut opened = None;
        for (i, &event) in candidates.iter().enumerate() {
            let last = i + 1 == candidates.len();
            let attempt = match open_rings(pid, &cpus, opts, event, kernel, &mut pages) {
                Err(OpenError::Denied(errno)) if kernel => {
                    let retry = open_rings(pid, &cpus, opts, event, false, &mut pages);
                    if retry.is_ok() {
                        kernel = false;
                        warnings.push(kernel_excluded_reason(&access, errno));
                    }
                    retry
                }
                other => other,
            };
            match attempt {
                Ok(rings) => {
                    opened = Some((rings, event));
                    break;
                }
                // No PMU (VMs): the hardware event does not exist; try the next one.
                Err(OpenError::Open(_, e)) if is_missing_event(&e) => {
                    if last {
                        return Err(ProfilerError::EventUnavailable {
                            event: event.name(),
                            source: e,
                        });
                    }
                }
                Err(e) => return Err(e.into_error(pid, &access)),
            }
        }
        let Some((rings, event)) = opened else {
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
        // The thread reads the target's name and mappings, enables the events and says
        // so; it then warms its symbol caches while the workload starts, draining the
        // ring buffers between steps.
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name(thread_name(pid))
            .spawn({
                // blazesym's symbolizer is not Send: the collector is built on its thread.
                let shared = Arc::clone(&shared);
                let opts = opts.clone();
                move || {
                    let collector = Collector::new(shared, pid, &opts, kernel);
                    collector.run(rings, ready_tx)
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
            event,
            symbols: opts.symbols,
            kernel_frames: kernel,
            reductions: warnings,
            frequency_hz: opts.frequency_hz,
            buffer_pages: pages,
            cpus: cpus.len(),
            started: Instant::now(),
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
    /// thread; nothing is mapped or sampled. Kernel frames that are not permitted are not
    /// an error: [`Sampler::start`] leaves them out and says why.
    pub fn check(opts: &SamplerOptions) -> Result<(), ProfilerError> {
        validate_options(opts)?;
        let event = match opts.event {
            SampleEvent::Cycles => SampleEvent::Cycles,
            // Auto falls back to cpu-clock, which is what has to work.
            SampleEvent::Auto | SampleEvent::CpuClock => SampleEvent::CpuClock,
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
            batches: s.batches.load(Ordering::Relaxed),
            pending_stacks: s.pending.load(Ordering::Relaxed),
            symbolize_time: ns(&s.symbolize_ns),
            last_batch_time: ns(&s.last_batch_ns),
            max_batch_time: ns(&s.max_batch_ns),
        }
    }

    /// Whether kernel frames are being sampled.
    pub fn kernel_frames(&self) -> bool {
        self.kernel_frames
    }

    /// What was reduced or excluded at start (kernel frames, buffer sizes), in words
    /// for the user.
    pub fn warnings(&self) -> &[String] {
        &self.reductions
    }

    /// The event that drives sampling: `cycles` or `cpu-clock`.
    pub fn event(&self) -> &'static str {
        self.event.name()
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
        let collected = thread.join().map_err(panic_error)??;
        let stats = self.stats();
        let reduced = std::mem::take(&mut self.reductions);
        let mut warnings = reduced.clone();
        warnings.extend(collected.warnings);
        if stats.lost > 0 {
            warnings.push(format!(
                "{} samples lost: ring buffers overflowed ({} data pages per CPU)",
                stats.lost, self.buffer_pages
            ));
        }
        if stats.throttled > 0 {
            warnings.push(format!(
                "the kernel throttled sampling {} times (kernel.perf_cpu_time_max_percent)",
                stats.throttled
            ));
        }
        Ok(Profile {
            cpu: collected.tree,
            samples: stats.samples,
            lost: stats.lost,
            event: self.event.name(),
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

fn builder(
    pid: u32,
    cpu: usize,
    opts: &SamplerOptions,
    event: SampleEvent,
    kernel: bool,
    data_bytes: usize,
) -> Builder<'static> {
    let mut b = event_builder(event);
    b.observe_pid(pid as libc::pid_t)
        .one_cpu(cpu)
        .inherit(true)
        .sample_frequency(opts.frequency_hz)
        .sample(
            SampleFlag::IP
                | SampleFlag::TID
                | SampleFlag::TIME
                | SampleFlag::CPU
                | SampleFlag::PERIOD
                | SampleFlag::CALLCHAIN,
        )
        .comm(true)
        .comm_exec(true)
        .task(true)
        .mmap(true)
        .mmap2(true)
        .sample_id_all(true)
        .exclude_hv(true)
        .exclude_kernel(!kernel)
        .exclude_callchain_kernel(!kernel)
        // Wake the poll when a quarter of the buffer is used; it times out anyway.
        .wakeup_watermark((data_bytes / 4).max(1))
        .enabled(false);
    b
}

/// Opens and maps one event per CPU. `pages` is halved while the kernel refuses to
/// map buffers that large (locked-memory limits), and left at the size used.
fn open_rings(
    pid: u32,
    cpus: &[usize],
    opts: &SamplerOptions,
    event: SampleEvent,
    kernel: bool,
    pages: &mut usize,
) -> Result<Vec<Ring>, OpenError> {
    let page_size = page_size();
    let mut rings = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        loop {
            let b = builder(pid, cpu, opts, event, kernel, *pages * page_size);
            let counter = match b.build() {
                Ok(c) => c,
                Err(e) => {
                    return Err(match e.raw_os_error() {
                        Some(errno @ (libc::EACCES | libc::EPERM)) => OpenError::Denied(errno),
                        Some(libc::ESRCH) => OpenError::NoProcess,
                        _ => OpenError::Open(cpu, e),
                    });
                }
            };
            match counter.sampled(*pages * page_size) {
                Ok(ring) => {
                    rings.push(ring);
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
        }
    }
    Ok(rings)
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
            cpu: StackTree::new(),
            samples: 1234,
            lost: 5,
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
