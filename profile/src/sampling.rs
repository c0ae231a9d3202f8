//! How a session was sampled: the machine and its perf permissions ([`HostInfo`],
//! [`PerfAccess`]), and what the sampler, the unwinder and a worker's allocator did
//! ([`SamplingInfo`], [`UnwindingInfo`], [`MemSamplingInfo`], [`AllocSamplingInfo`]).
//! The recorder fills them in; session.json keeps them (docs/session-format.md).

use serde::{Deserialize, Serialize};

/// Facts about the machine a session ran on.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Online logical CPUs.
    pub cores: u32,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Physical memory in bytes.
    pub memory_bytes: u64,
    /// What perf events this user may use here.
    pub perf: PerfAccess,
}

/// What perf events the recording user may use.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PerfAccess {
    /// /proc/sys/kernel/perf_event_paranoid, when readable.
    pub paranoid: Option<i32>,
    /// Effective root or CAP_PERFMON / CAP_SYS_ADMIN.
    pub privileged: bool,
    /// perf_event_mlock_kb: the ring-buffer budget of an unprivileged user.
    pub mlock_kb: Option<u64>,
}

/// How stacks were sampled in a session.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SamplingInfo {
    /// Stacks were sampled at all.
    pub enabled: bool,
    /// The perf event, e.g. `cpu-clock`.
    pub event: String,
    /// Sampling frequency per CPU, Hz.
    pub frequency_hz: u64,
    /// Kernel frames were included.
    pub kernel_frames: bool,
    /// Samples taken.
    pub samples: u64,
    /// Records the kernel reported lost (ring buffer full): on-CPU samples, off-CPU
    /// samples and switch records alike.
    pub lost: u64,
    /// How callchains were walked: `frame-pointers`, `dwarf` (CFI from each module's
    /// `.eh_frame`, frame pointers where none covers an address) or `auto` (per module:
    /// frame pointers where it keeps them, its CFI where it does not). Sessions compared
    /// with each other should agree on it. Empty in sessions that did not record it.
    #[serde(default)]
    pub unwind: String,
    /// What unwinding from stack copies did (`dwarf` and `auto`); absent with frame
    /// pointers and in sessions that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwinding: Option<UnwindingInfo>,
    /// How frames were named: `inlined` (DWARF, inlined functions as frames of their
    /// own) or `names` (ELF symbol tables only). Empty in sessions that did not record it.
    #[serde(default)]
    pub symbols: String,
    /// Why sampling is off or reduced, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Which profiles were taken: `cpu`, `offcpu` or `both`. Empty in sessions that did
    /// not record it (on-CPU only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub profile: String,
    /// Off-CPU time has stacks (kernel sampling was permitted); without them
    /// offcpu.folded holds one `[blocked: no stack …]` frame per thread.
    #[serde(default)]
    pub offcpu_stacks: bool,
    /// Stacks carry the thread's name under the process's (`--per-thread`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_thread: bool,
    /// Context switches of the sampled threads that were recorded (off-CPU).
    #[serde(default)]
    pub switches: u64,
    /// Time blocked, in offcpu.folded, seconds.
    #[serde(default)]
    pub blocked_s: f64,
    /// Time runnable after preemption, seconds: not blocked, so not in offcpu.folded.
    #[serde(default)]
    pub preempted_s: f64,
    /// The memory profile (`mem` and `all`): one page fault in this many was sampled.
    /// Absent when memory was not profiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem: Option<MemSamplingInfo>,
    /// The allocation profiles of a built-in worker (alloc.folded, live.folded,
    /// live-end.folded): how its allocator sampled. Absent when no allocation was
    /// sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc: Option<AllocSamplingInfo>,
}

/// How a worker's allocator sampled its allocation stacks (docs/protocol.md, "Allocation
/// samples"): the `sampling.alloc` of session.json.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AllocSamplingInfo {
    /// Mean bytes allocated between two samples.
    #[serde(default)]
    pub rate: u64,
    /// Samples received.
    #[serde(default)]
    pub samples: u64,
    /// Bytes they stand for: what alloc.folded adds up to.
    #[serde(default)]
    pub bytes: u64,
    /// Distinct stacks.
    #[serde(default)]
    pub stacks: u64,
    /// Samples still live at the end.
    #[serde(default)]
    pub live_samples: u64,
    /// Live bytes the samples stood for at the peak of live bytes (live.folded's total).
    #[serde(default)]
    pub peak_live_bytes: u64,
    /// Live bytes the samples stood for at the end (live-end.folded's total).
    #[serde(default)]
    pub end_live_bytes: u64,
    /// When the peak of live bytes was (the tick live.folded was taken at), ns from the
    /// run's start; absent in sessions recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_t_ns: Option<u64>,
    /// Samples the worker could not take because its tables were full.
    #[serde(default)]
    pub dropped: u64,
    /// Samples of stacks the recorder did not keep (past its stack limit, or never sent):
    /// in no profile.
    #[serde(default)]
    pub unattributed: u64,
}

/// How page faults were sampled for mem.folded.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MemSamplingInfo {
    /// One fault in this many was sampled.
    pub period: u64,
    /// The page size, bytes: each sample weighs `period × page_size` bytes.
    pub page_size: u64,
    /// Page-fault samples taken.
    pub samples: u64,
    /// Bytes in mem.folded (`samples × period × page_size`).
    pub bytes: u64,
    /// Faults taken in kernel mode (inside system calls) were sampled too (kernel
    /// sampling permitted).
    #[serde(default)]
    pub kernel_faults: bool,
}

/// How user stacks were unwound from the copies the kernel took with each sample.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct UnwindingInfo {
    /// Bytes of user stack copied per sample.
    #[serde(default)]
    pub stack_size: u32,
    /// Samples whose user stack was unwound.
    #[serde(default)]
    pub unwound: u64,
    /// Stacks ending in `[truncated: no unwind info for …]`.
    #[serde(default)]
    pub truncated_no_unwind_info: u64,
    /// Stacks ending in `[truncated: stack copy too small]`.
    #[serde(default)]
    pub truncated_stack_copy: u64,
    /// Stacks ending in another `[truncated: …]` frame (unwind info that led nowhere, a
    /// stack deeper than the unwinder walks).
    #[serde(default)]
    pub truncated_other: u64,
    /// Samples that came without registers or a stack copy.
    #[serde(default)]
    pub no_stack: u64,
    /// Each module (file name) and how its addresses were unwound: `dwarf`, `fp` or
    /// `none` (neither unwind info nor frame pointers).
    #[serde(default)]
    pub modules: std::collections::BTreeMap<String, String>,
}
