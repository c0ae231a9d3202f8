//! What a sampler is asked to do: which profiles, which event, how to unwind.

use std::time::Duration;

use crate::symbolize::SymbolDetail;
#[cfg(doc)]
use benchtop_profile::kinds::Kind;
use benchtop_profile::kinds::KindSet;

use crate::unwind::{DEFAULT_STACK_SIZE, UnwindMode};

/// How to sample.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SamplerOptions {
    /// Which profiles to take, a set of the sampled kinds of the profile model's table
    /// (default on- and off-CPU). Off-CPU stacks need kernel sampling; without it
    /// off-CPU time is recorded per thread without stacks and
    /// [`Sampler::warnings`](super::Sampler::warnings) says why. Memory ([`Kind::Mem`]) is
    /// the `page-faults` software event sampled with its callchain, each sample weighted
    /// in bytes ([`SamplerOptions::mem_period`] faults times the page size); a fault is
    /// the first touch of a page, not its allocation.
    pub kind: KindSet,
    /// On-CPU samples per second per CPU while a sampled thread runs (default 999, which
    /// avoids lockstep with timers at round frequencies). Off-CPU sampling does not use
    /// it: every context switch is recorded.
    pub frequency_hz: u64,
    /// Include kernel frames when permitted (default true), on- and off-CPU. When not
    /// permitted the sampler falls back to user frames and says why in
    /// [`Sampler::warnings`](super::Sampler::warnings).
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
    /// Directories searched for the separate debug files of files without a symbol
    /// table of their own (by build id, `DIR/.build-id/xx/yyyy.debug`, and by debug
    /// link), before `/usr/lib/debug` and `/lib/debug` (default: none).
    pub debug_dirs: Vec<std::path::PathBuf>,
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
    /// With waits ([`Kind::Waits`]), the waker's stack is taken at one wake-up in this
    /// many (default 1: every wake-up); every wake-up is still recorded, without a stack,
    /// so that each blocked interval has its waker's thread. A blocked interval whose
    /// waker's stack was taken then stands for this many (its time scaled by N); those
    /// ended by a followed thread's wake-up without a stack stay in the off-CPU profile
    /// only. Raise it for programs that wake tens of thousands of times a second. Since
    /// [`SamplerOptions::offcpu_stack_every`] samples the blocked side independently, both
    /// stacks are taken together at one wake-up in the product of the two.
    pub waker_stack_every: u32,
    /// Memory profiles sample one page fault in this many (default
    /// [`DEFAULT_MEM_PERIOD`]); each sample weighs this many pages. The kernel counts
    /// every fault and samples at each overflow, so shares are exact to one period per
    /// thread; a period of 1 with stack copies loses samples at high fault rates.
    pub mem_period: u64,
    /// Also hand out each on-CPU sample on its own, with its time, thread and stack
    /// (default false: per-interval weights only), for exports that place samples at
    /// their real times. At most [`benchtop_profile::intervals::MAX_KEPT_SAMPLES`] a run.
    pub keep_samples: bool,
}

/// One page fault in this many is sampled by default: 512 KiB of 4 KiB pages per sample,
/// so a program touching 4 GiB writes 8 192 samples, as many as `perf record -e
/// page-faults -g` takes of it at its default of 4 000 a second. Chosen with
/// `benches/mem_overhead.py`: at 32 (32 768 samples) frame-pointer sampling cost the
/// program more than perf did; at 128 no more (see docs/user-guide.md for the figures).
pub const DEFAULT_MEM_PERIOD: u64 = 128;

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
            kind: KindSet::BOTH,
            frequency_hz: 999,
            kernel_frames: true,
            buffer_pages: None,
            per_thread: false,
            symbols: SymbolDetail::default(),
            debug_dirs: Vec::new(),
            batch_interval: Duration::from_millis(200),
            event: SampleEvent::Auto,
            unwind: UnwindMode::Auto,
            stack_size: DEFAULT_STACK_SIZE,
            offcpu_stack_every: 1,
            waker_stack_every: 1,
            mem_period: DEFAULT_MEM_PERIOD,
            keep_samples: false,
        }
    }
}
