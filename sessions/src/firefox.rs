//! A session in the Firefox Profiler's processed format (`profile.json.gz`, for
//! <https://profiler.firefox.com>), written with `fxprof-processed-profile`, the crate
//! samply writes its profiles with.
//!
//! What goes in:
//!
//! - one process (the workload, the worker's pid) with one thread track per sampled
//!   thread, its on-CPU samples over time; stacks.jsonl keeps weights per report interval,
//!   so each (interval, thread, stack) is one sample weighted by its count, placed inside
//!   its interval (spread evenly over it, in stack order) — the timeline is
//!   interval-granular — unless the session was recorded with `--keep-samples`: then each
//!   sample is placed at its own time (when the kept samples are all of them; a run past
//!   the cap falls back to the intervals, with a warning);
//! - off-CPU time, where recorded with stacks, on a track of its own per thread
//!   (`<thread> (off-CPU)`), weighted in milliseconds blocked;
//! - markers on the main thread: the run (its status), each workload phase, and the
//!   session's warnings;
//! - with waits, a marker per long wait (a blocked interval of 1 ms or more, stacks.jsonl's
//!   `long_waits`) on the waiting thread's track, over the time it waited, naming the
//!   thread that woke it (and where), or the interrupt or timer, and where it waited;
//! - counters: RSS and the throughput metric's count per row of timeseries.jsonl.
//!
//! A session recorded before per-interval stacks (schema 1) has only the whole-run
//! cpu.folded: its samples are placed at the run's middle, and a warning says so.

use std::collections::HashMap;
use std::time::SystemTime;

use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags,
    MarkerFieldFormat, MarkerTiming, Profile, ReferenceTimestamp, SamplingInterval, StackHandle,
    StaticSchemaMarker, StaticSchemaMarkerField, StringHandle, ThreadHandle, Timestamp, WeightType,
};

use benchtop_profile::waits::{self, Waker};

use crate::Session;
use crate::intervals::IntervalStacks;
use crate::kinds::{Kind, WeightUnit};

/// The version of `fxprof-processed-profile` the profile is written with (pinned in
/// Cargo.toml; the processed format's `meta.version` follows it).
pub const WRITER_VERSION: &str = "0.8.1";

/// The profile of `session`, from its per-interval `stacks` when it has them, with the
/// warnings of what could not go in.
pub fn firefox_profile(
    session: &Session,
    stacks: Option<&IntervalStacks>,
) -> (Profile, Vec<String>) {
    let m = &session.meta;
    let start = humantime::parse_rfc3339_weak(&m.started_at).unwrap_or(SystemTime::UNIX_EPOCH);
    let hz = m.sampling.frequency_hz.max(1) as f32;
    let mut profile = Profile::new(
        &format!("benchtop {}", m.workload.name),
        ReferenceTimestamp::from_system_time(start),
        SamplingInterval::from_hz(hz),
    );
    profile.set_os_name("Linux");
    let mut warnings = Vec::new();
    let pid = m.worker.pid.unwrap_or(0);
    let process = profile.add_process(
        &m.workload.name,
        pid,
        Timestamp::from_nanos_since_reference(0),
    );
    let end_ns = session
        .duration()
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));

    let mut tracks = Tracks::new(&mut profile, process, pid);
    let main_name = stacks
        .and_then(|s| s.threads.get(&pid))
        .map_or(m.workload.name.as_str(), String::as_str);
    let main = tracks.thread(&mut profile, pid, main_name, false);
    match stacks {
        Some(stacks) => {
            let names = &stacks.threads;
            let kept = stacks.samples.len() as u64;
            let own_times = kept > 0 && kept == stacks.cpu_samples();
            if kept > 0 && !own_times {
                warnings.push(format!(
                    "{kept} samples were kept with their own times, of {} taken: on-CPU \
                     samples are placed in their intervals instead",
                    stacks.cpu_samples()
                ));
            }
            if own_times {
                for sample in &stacks.samples {
                    let name = names.get(&sample.tid).map_or("", String::as_str);
                    let thread = tracks.thread(&mut profile, sample.tid, name, false);
                    let handle = tracks.stack(&mut profile, thread, stacks, sample.stack);
                    add_weighted(&mut profile, thread, sample.t_ns, handle, 1);
                }
            }
            for interval in stacks.intervals.values() {
                let span = interval.t1_ns.saturating_sub(interval.t0_ns);
                for (kind, rows) in interval.weights.iter() {
                    let spec = kind.spec();
                    // On-CPU samples kept with their own times were placed above.
                    let on_cpu = kind == Kind::Cpu;
                    if !spec.exports.firefox || (on_cpu && own_times) {
                        continue;
                    }
                    let n = rows.len() as u64;
                    for (k, &(tid, stack, weight)) in rows.iter().enumerate() {
                        let name = names.get(&tid).map_or("", String::as_str);
                        let thread = tracks.thread(&mut profile, tid, name, !on_cpu);
                        let handle = tracks.stack(&mut profile, thread, stacks, stack);
                        let at = interval.t0_ns + span * (2 * k as u64 + 1) / (2 * n.max(1));
                        // Times are nanoseconds in stacks.jsonl; the track counts
                        // milliseconds.
                        let weight = if spec.interval_unit == Some(WeightUnit::Nanoseconds) {
                            weight.div_ceil(1_000_000)
                        } else {
                            weight
                        };
                        add_weighted(&mut profile, thread, at, handle, weight);
                    }
                }
            }
            for wait in &stacks.long_waits {
                let name = names.get(&wait.tid).map_or("", String::as_str);
                let thread = tracks.thread(&mut profile, wait.tid, name, false);
                let marker = WaitMarker::new(&mut profile, stacks, wait.stack);
                let timing = MarkerTiming::Interval(
                    Timestamp::from_nanos_since_reference(wait.t0_ns),
                    Timestamp::from_nanos_since_reference(wait.t1_ns),
                );
                profile.add_marker(thread, timing, marker);
            }
        }
        None => {
            warnings.push(
                "no per-interval stacks (a session recorded before schema 2): every sample \
                 is placed at the run's middle"
                    .to_owned(),
            );
            if let Some(cpu) = session.profile(Kind::Cpu) {
                let at = end_ns / 2;
                cpu.for_each_stack(|frames, weight| {
                    let names = frames.iter().map(|&f| cpu.name(f));
                    let handle = tracks.stack_of_names(&mut profile, main, names);
                    add_weighted(&mut profile, main, at, handle, weight);
                });
            }
        }
    }

    // Markers on the main thread: the run, its phases, its warnings.
    let ts = |ns: u64| Timestamp::from_nanos_since_reference(ns);
    let secs = |s: f64| (s.is_finite() && s >= 0.0).then(|| ts((s * 1e9) as u64));
    let text = |profile: &mut Profile, name: &str, detail: &str| TextMarker {
        name: profile.intern_string(name),
        text: profile.intern_string(detail),
    };
    let run = text(&mut profile, "run", &m.status.to_string());
    profile.add_marker(main, MarkerTiming::Interval(ts(0), ts(end_ns)), run);
    for phase in &m.phases {
        if let (Some(a), Some(b)) = (secs(phase.t_s), secs(phase.t_s + phase.duration_s)) {
            let marker = text(&mut profile, "phase", &phase.name);
            profile.add_marker(main, MarkerTiming::Interval(a, b), marker);
        }
    }
    for w in m.warnings.iter().chain(&session.warnings) {
        let marker = text(&mut profile, "warning", w);
        profile.add_marker(main, MarkerTiming::Instant(ts(end_ns)), marker);
    }

    // Counters: RSS, and the throughput metric's count, per row.
    let rss = profile.add_counter(process, "RSS", "Memory", "Resident set of the process tree");
    let mut last_rss = 0.0;
    // The workload's first counter (their names sort; the ring has one), not the counting
    // allocator's.
    let metric = session.rows.iter().find_map(|r| {
        r.counters
            .keys()
            .find(|k| !crate::timeseries::is_allocation_counter(k))
            .cloned()
    });
    let count = metric.as_ref().map(|name| {
        profile.add_counter(
            process,
            name,
            "Throughput",
            "The workload's count, per interval",
        )
    });
    let mut last_count = 0u64;
    for row in &session.rows {
        let Some(at) = secs(row.t_s) else { continue };
        if let Some(r) = &row.resources {
            let value = r.rss_bytes as f64;
            profile.add_counter_sample(rss, at, value - last_rss, 1);
            last_rss = value;
        }
        if let (Some(counter), Some(name)) = (count, &metric)
            && let Some(&value) = row.counters.get(name)
        {
            let delta = value.saturating_sub(last_count);
            let ops = u32::try_from(delta).unwrap_or(u32::MAX);
            profile.add_counter_sample(counter, at, delta as f64, ops);
            last_count = value;
        }
    }
    (profile, warnings)
}

/// `weight` samples of `stack` at `at_ns`, as few entries as an i32 weight allows.
fn add_weighted(
    profile: &mut Profile,
    thread: ThreadHandle,
    at_ns: u64,
    stack: Option<StackHandle>,
    mut weight: u64,
) {
    while weight > 0 {
        let w = weight.min(i32::MAX as u64);
        let at = Timestamp::from_nanos_since_reference(at_ns);
        profile.add_sample(thread, at, stack, CpuDelta::ZERO, w as i32);
        weight -= w;
    }
}

/// The thread tracks and their interned stacks.
struct Tracks {
    process: fxprof_processed_profile::ProcessHandle,
    pid: u32,
    user: CategoryHandle,
    kernel: CategoryHandle,
    blocked: CategoryHandle,
    /// (tid, off-CPU) → track.
    threads: HashMap<(u32, bool), ThreadHandle>,
    /// (track, stack index of stacks.jsonl) → interned stack.
    stacks: HashMap<(ThreadHandle, u32), StackHandle>,
}

impl Tracks {
    fn new(
        profile: &mut Profile,
        process: fxprof_processed_profile::ProcessHandle,
        pid: u32,
    ) -> Self {
        Tracks {
            process,
            pid,
            user: profile.add_category("User", CategoryColor::Yellow),
            kernel: profile.add_category("Kernel", CategoryColor::Orange),
            blocked: profile.add_category("Blocked", CategoryColor::Blue),
            threads: HashMap::new(),
            stacks: HashMap::new(),
        }
    }

    /// The track of `tid` (its off-CPU track when `off`), made on first use.
    fn thread(&mut self, profile: &mut Profile, tid: u32, name: &str, off: bool) -> ThreadHandle {
        if let Some(&t) = self.threads.get(&(tid, off)) {
            return t;
        }
        let start = Timestamp::from_nanos_since_reference(0);
        let t = profile.add_thread(self.process, tid, start, tid == self.pid && !off);
        let name = if name.is_empty() {
            format!("{tid}")
        } else {
            name.to_owned()
        };
        if off {
            profile.set_thread_name(t, &format!("{name} (off-CPU)"));
            profile.set_thread_samples_weight_type(t, WeightType::TracingMs);
        } else {
            profile.set_thread_name(t, &name);
        }
        self.threads.insert((tid, off), t);
        t
    }

    fn frame(&self, profile: &mut Profile, name: &str) -> FrameInfo {
        let category = if name.ends_with("_[k]") {
            self.kernel
        } else if name.starts_with("[blocked") {
            self.blocked
        } else {
            self.user
        };
        FrameInfo {
            frame: Frame::Label(profile.intern_string(name)),
            category_pair: category.into(),
            flags: FrameFlags::empty(),
        }
    }

    /// Stack `index` of `stacks` on `thread`, its prefixes interned first.
    fn stack(
        &mut self,
        profile: &mut Profile,
        thread: ThreadHandle,
        stacks: &IntervalStacks,
        index: u32,
    ) -> Option<StackHandle> {
        // The chain up to the first prefix already interned, leaf first.
        let mut chain = Vec::new();
        let mut at = Some(index);
        let mut parent = None;
        while let Some(i) = at {
            if let Some(&h) = self.stacks.get(&(thread, i)) {
                parent = Some(h);
                break;
            }
            let (up, name) = stacks.stack(i)?;
            chain.push((i, name));
            at = up;
        }
        for (i, name) in chain.into_iter().rev() {
            let frame = self.frame(profile, name);
            let frame = profile.intern_frame(thread, frame);
            let h = profile.intern_stack(thread, parent, frame);
            self.stacks.insert((thread, i), h);
            parent = Some(h);
        }
        parent
    }

    /// A stack of frame names, root first, on `thread`.
    fn stack_of_names<'a>(
        &mut self,
        profile: &mut Profile,
        thread: ThreadHandle,
        names: impl Iterator<Item = &'a str>,
    ) -> Option<StackHandle> {
        let frames: Vec<FrameInfo> = names.map(|n| self.frame(profile, n)).collect();
        profile.intern_stack_frames(thread, frames.into_iter())
    }
}

/// A marker with a line of text: the run's status, a phase's name, a warning.
#[derive(Debug, Clone)]
struct TextMarker {
    name: StringHandle,
    text: StringHandle,
}

impl StaticSchemaMarker for TextMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "BenchtopText";
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.text}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name} - {marker.data.text}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[StaticSchemaMarkerField {
        key: "text",
        label: "Text",
        format: MarkerFieldFormat::String,
        flags: MarkerFieldFlags::SEARCHABLE,
    }];

    fn name(&self, _profile: &mut Profile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        CategoryHandle::OTHER
    }

    fn string_field_value(&self, _field_index: u32) -> StringHandle {
        self.text
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        0.0
    }
}

/// A long wait: what woke the thread, and where it waited.
#[derive(Debug, Clone)]
struct WaitMarker {
    name: StringHandle,
    waker: StringHandle,
    blocked: StringHandle,
}

impl WaitMarker {
    /// The marker of a wait whose waits stack is `stack` of `stacks`.
    fn new(profile: &mut Profile, stacks: &IntervalStacks, stack: u32) -> Self {
        let frames = stacks.stack_frames(stack);
        let (blocked, waker) = waits::split(&frames);
        let waker = match waker {
            Waker::None => waits::NOT_SEEN.to_owned(),
            w => w.label(),
        };
        WaitMarker {
            name: profile.intern_string("wait"),
            waker: profile.intern_string(&waker),
            blocked: profile.intern_string(&waits::blocked_label(blocked)),
        }
    }
}

impl StaticSchemaMarker for WaitMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "BenchtopWait";
    const CHART_LABEL: Option<&'static str> = Some("woken by {marker.data.waker}");
    const TABLE_LABEL: Option<&'static str> =
        Some("wait in {marker.data.blocked} - woken by {marker.data.waker}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "waker",
            label: "Woken by",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "blocked",
            label: "Waited in",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
    ];

    fn name(&self, _profile: &mut Profile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        CategoryHandle::OTHER
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        if field_index == 0 {
            self.waker
        } else {
            self.blocked
        }
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        0.0
    }
}

/// `profile` as gzip-compressed JSON into `out`.
pub fn write_gz(profile: &Profile, out: impl std::io::Write) -> std::io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    serde_json::to_writer(&mut gz, profile)?;
    gz.finish()?;
    Ok(())
}
