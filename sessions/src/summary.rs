//! What `benchtop show DIR` prints of a session: a text summary for people, every string
//! from the session escaped. Kept apart from the session's storage (store.rs).

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

use crate::escape::{Escaped, escaped};
use crate::meta::{PeakFrom, ended_words};
use crate::names::short_names;
use crate::stacks::{FrameId, NodeId};
use crate::store::{LATENCY_FILE, THREADS_FILE};
use crate::units::{human_bytes, human_figure, human_ns};
use crate::{ContextSwitches, IoCounters, Session, StackTree, ThreadSummary};
use crate::{Kind, KindSet};

use serde::Serialize;

/// What `show` computes of a session beyond session.json: the same figures for the text
/// summary and for `show --json`, so the two cannot disagree. Numbers are raw, each with
/// its unit in its name (`_ns`, `_bytes`, `_s`, `_us`); names are the session's own,
/// unescaped (JSON escapes them).
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Overview<'a> {
    /// The run's length from started_at to ended_at, seconds.
    pub duration_s: Option<f64>,
    /// Latency percentiles per metric over the whole run, in tag order.
    pub latency: Vec<LatencyRow<'a>>,
    /// Peaks and totals of timeseries.jsonl.
    pub resources: Resources,
    /// Threads in threads.csv (an aggregated line counts the threads it holds).
    pub threads_seen: u64,
    /// Processes in threads.csv: its main threads, and those aggregated lines hold.
    pub processes_seen: u64,
    /// The five threads with the most CPU time.
    pub busiest_threads: Vec<BusyThread<'a>>,
    /// The five frames with the most self samples in cpu.folded.
    pub hottest_frames: Vec<FrameShare<'a>>,
    /// The five frames that blocked longest in offcpu.folded (weights in microseconds).
    pub blocking_frames: Vec<FrameShare<'a>>,
    /// The five wakers that ended the most blocked time in waits.folded: `thread
    /// (process) at frame`, or what woke without a thread (weights in microseconds).
    pub wakers: Vec<WakerShare>,
    /// The files whose code ran without symbols (frames `FILE+0xSTART` and `[FILE]`),
    /// each with its self samples in cpu.folded, most first: `frame` is the file's name.
    pub without_symbols: Vec<FrameShare<'a>>,
    /// The stacks holding the most bytes of each memory profile (mem.folded,
    /// alloc.folded, live.folded, live-end.folded) the session has.
    pub memory: Vec<crate::memory::MemoryTop>,
    /// session.json's warnings, then what loading found.
    pub warnings: Vec<&'a str>,
    /// What merging the latency log noted.
    pub notes: Vec<String>,
}

/// One latency metric over the whole run.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct LatencyRow<'a> {
    /// The histogram's tag (the metric); empty when untagged.
    pub metric: &'a str,
    /// Values recorded.
    pub count: u64,
    /// Percentiles, nanoseconds.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest value.
    pub max_ns: u64,
}

/// Peaks over timeseries.jsonl's rows and totals of its last row that has them.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[non_exhaustive]
pub struct Resources {
    /// Peak resident set size: the program's own (the largest peak of any one process
    /// of the tree, session.json's `resources.peak_rss_bytes`); in older sessions the
    /// monitor's peak over the rows, or the worker's wait4 figure.
    pub peak_rss_bytes: Option<u64>,
    /// How the program's own peak was had; `None` for older sessions.
    pub peak_rss_from: Option<PeakFrom>,
    /// The largest the tree's summed resident size was at an interval; `None` for older
    /// sessions.
    pub tree_peak_rss_bytes: Option<u64>,
    /// Most threads at once.
    pub max_threads: Option<u32>,
    /// Most processes at once.
    pub max_processes: Option<u32>,
    /// CPU time of the process tree, seconds: the kernel's count where `measured` says
    /// so, else the polls'.
    pub cpu_time_s: Option<f64>,
    /// How CPU time, context switches and page faults were measured.
    pub measured: Measured,
    /// Context switches of the process tree, as the polls split them.
    pub ctx_switches: Option<ContextSwitches>,
    /// Context switches of the whole tree, counted by the kernel.
    pub context_switches: Option<u64>,
    /// Minor page faults of the whole tree, counted by the kernel.
    pub minor_faults: Option<u64>,
    /// Major page faults of the whole tree, counted by the kernel.
    pub major_faults: Option<u64>,
    /// I/O of the process tree.
    pub io: Option<IoCounters>,
    /// The largest live bytes of a built-in worker's counting allocator.
    pub peak_live_bytes: Option<u64>,
    /// The worker's allocation counters at its last row.
    pub alloc: Option<crate::AllocTotals>,
}

/// How a session's CPU time, context switches and page faults were measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Measured {
    /// Counted by the kernel for every thread and process of the tree, however short
    /// it lived (session.json's `resources.exact`).
    Counted,
    /// CPU time counted by the kernel; context switches polled, page faults not
    /// recorded (kernel events were refused).
    CpuCounted,
    /// Polled from /proc every interval: what lived between two polls is missed. Older
    /// sessions, and where the kernel refused counting.
    #[default]
    Polled,
}

/// A waker of waits.folded and the blocked time it ended.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct WakerShare {
    /// `thread (process) at frame`, the waker's innermost frame outside the kernel; or
    /// the frame that names a waker without a thread.
    pub waker: String,
    /// Blocked time it ended, microseconds.
    pub weight: u64,
    /// Its share of the waits profile, percent.
    pub percent: f64,
}

/// A thread of threads.csv and its CPU time.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct BusyThread<'a> {
    /// User plus system CPU time, seconds.
    pub cpu_s: f64,
    /// Thread name.
    pub thread: &'a str,
    /// Thread id.
    pub tid: u32,
    /// Process name.
    pub process: &'a str,
    /// Process id.
    pub pid: u32,
}

/// A frame and its weight.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct FrameShare<'a> {
    /// The frame's name.
    pub frame: &'a str,
    /// Its weight: samples (on-CPU) or microseconds blocked (off-CPU).
    pub weight: u64,
    /// Its share of the profile's total weight, percent.
    pub percent: f64,
}

/// The longest frame name in the text, in characters; `--json` keeps the full names.
const NAME_WIDTH: usize = 80;

/// Everything `show --json` prints: session.json as it is, and the [`Overview`].
#[derive(Debug, Serialize)]
struct ShowJson<'a> {
    session: &'a crate::SessionMeta,
    overview: Overview<'a>,
}

impl Session {
    /// The program's peak resident set size, bytes: session.json's
    /// `resources.peak_rss_bytes` (the largest peak of any one process of the tree, from
    /// the exec); in sessions recorded before it, the monitor's peak over the rows, else
    /// wait4's figure of the worker.
    pub fn peak_rss_bytes(&self) -> Option<u64> {
        self.meta
            .resources
            .as_ref()
            .and_then(|i| i.peak_rss_bytes)
            .or(self.row_summary.peak_rss_bytes)
            .or(self.meta.worker.peak_rss_bytes)
            // 0 is a peak nobody saw: a run that ended before its first poll (the
            // closing row of a gone tree reads 0).
            .filter(|&peak| peak > 0)
    }

    /// What `benchtop show DIR` prints: the run, its host and sampling, the workload's
    /// figures, latency percentiles per metric over the whole run, resources (peaks, CPU
    /// time, context switches, I/O), the busiest threads of threads.csv, the hottest
    /// on-CPU frames, where threads blocked longest (off-CPU) and every warning.
    pub fn summary_text(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = self.write_summary(&mut out);
        out
    }

    /// What `benchtop show DIR --json` prints: session.json's fields under `session`, and
    /// the figures the text summary computes (latency percentiles, resources, busiest
    /// threads, hottest and blocking frames, warnings) under `overview`, raw numbers with
    /// their units in their names.
    pub fn summary_json(&self) -> String {
        let json = ShowJson {
            session: &self.meta,
            overview: self.overview(),
        };
        // Serializing plain data into a String does not fail; NaN becomes null.
        let mut text = serde_json::to_string_pretty(&json).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The figures `show` computes beyond session.json.
    pub fn overview(&self) -> Overview<'_> {
        let mut notes = Vec::new();
        let mut latency = Vec::new();
        self.for_each_merged_latency(&mut notes, |metric, h| {
            latency.push(LatencyRow {
                metric,
                count: h.len(),
                p50_ns: h.value_at_quantile(0.5),
                p90_ns: h.value_at_quantile(0.9),
                p99_ns: h.value_at_quantile(0.99),
                p999_ns: h.value_at_quantile(0.999),
                max_ns: h.max(),
            });
        });
        let r = &self.row_summary;
        // The kernel's counts of the whole run, else those of the last row that has them.
        let counted = self
            .meta
            .resources
            .as_ref()
            .and_then(|i| i.counted)
            .or(r.counted_total);
        let measured = match (&self.meta.resources, counted) {
            (Some(info), Some(_)) if info.exact => Measured::Counted,
            (_, Some(_)) => Measured::CpuCounted,
            (_, None) => Measured::Polled,
        };
        let info = self.meta.resources.as_ref();
        let lives = most_alive_at_once(&self.threads);
        let resources = Resources {
            peak_rss_bytes: self.peak_rss_bytes(),
            peak_rss_from: info.and_then(|i| i.peak_rss_bytes.and(i.peak_rss_from)),
            tree_peak_rss_bytes: self.row_summary.tree_peak_rss_bytes,
            // The polls' peaks, raised to what the threads' lives show (a tree whose
            // processes lived between two polls has none alive at any poll).
            max_threads: r.max_threads.max(lives.map(|(t, _)| t)).filter(|&t| t > 0),
            max_processes: r
                .max_processes
                .max(lives.map(|(_, p)| p))
                .filter(|&p| p > 0),
            cpu_time_s: counted
                .map(|c| c.cpu_time_s)
                .or(r.cpu_time_s)
                .filter(|&t| t > 0.0),
            measured,
            ctx_switches: r.ctx_switches_total,
            context_switches: counted.and_then(|c| c.context_switches),
            minor_faults: counted.and_then(|c| c.minor_faults),
            major_faults: counted.and_then(|c| c.major_faults),
            io: r.io_total,
            peak_live_bytes: r.peak_live_bytes,
            alloc: r.alloc_total,
        };
        let mut busiest: Vec<&ThreadSummary> = self.threads.iter().collect();
        busiest.sort_by(|a, b| {
            b.cpu_s()
                .total_cmp(&a.cpu_s())
                .then(a.pid.cmp(&b.pid))
                .then(a.tid.cmp(&b.tid))
        });
        let busiest_threads = busiest
            .into_iter()
            .take(5)
            .map(|t| BusyThread {
                cpu_s: t.cpu_s(),
                thread: or_unknown(&t.thread),
                tid: t.tid,
                process: or_unknown(&t.process),
                pid: t.pid,
            })
            .collect();
        let cpu = self.profile(Kind::Cpu).filter(|t| !t.is_empty());
        let off = self.profile(Kind::OffCpu).filter(|t| !t.is_empty());
        Overview {
            duration_s: self.duration().map(|d| d.as_secs_f64()),
            latency,
            resources,
            threads_seen: self.threads.iter().map(ThreadSummary::threads).sum(),
            processes_seen: self.threads.iter().map(ThreadSummary::processes).sum(),
            busiest_threads,
            hottest_frames: cpu
                .map(|t| shares(t, hottest_frames(t, 5)))
                .unwrap_or_default(),
            blocking_frames: off
                .map(|t| shares(t, blocking_frames(t, 5)))
                .unwrap_or_default(),
            wakers: self
                .profile(Kind::Waits)
                .map(|t| top_wakers(t, 5))
                .unwrap_or_default(),
            without_symbols: cpu
                .map(|t| shares(t, without_symbols(t)))
                .unwrap_or_default(),
            memory: crate::memory::memory_tops(self, crate::memory::TOP_STACKS),
            warnings: self
                .meta
                .warnings
                .iter()
                .chain(&self.warnings)
                .map(String::as_str)
                .collect(),
            notes,
        }
    }

    fn write_summary(&self, out: &mut String) -> fmt::Result {
        let m = &self.meta;
        let overview = self.overview();
        // Every string from the files goes through Escaped: a session may come from anyone,
        // and this text goes to a terminal.
        writeln!(out, "id        {}", Escaped(&m.id))?;
        if m.name != m.id {
            writeln!(out, "name      {}", Escaped(&m.name))?;
        }
        write!(out, "workload  {}", Escaped(&m.workload.name))?;
        for (k, v) in &m.workload.params {
            match v {
                serde_json::Value::String(s) => write!(out, " {}={}", Escaped(k), Escaped(s))?,
                // JSON text escapes control characters in strings already.
                v => write!(out, " {}={v}", Escaped(k))?,
            }
        }
        writeln!(out)?;
        if !m.command_line.is_empty() {
            write!(out, "command  ")?;
            for arg in &m.command_line {
                write!(out, " {}", Escaped(arg))?;
            }
            writeln!(out)?;
        }
        let h = &m.host;
        write!(out, "host      {}", Escaped(or_unknown(&h.hostname)))?;
        if !h.cpu_model.is_empty() {
            write!(out, ", {}", Escaped(&h.cpu_model))?;
        }
        write!(out, ", {} cores", h.cores)?;
        if h.memory_bytes > 0 {
            write!(out, ", {} RAM", human_bytes(h.memory_bytes))?;
        }
        if !h.kernel.is_empty() {
            write!(out, ", Linux {}", Escaped(&h.kernel))?;
        }
        writeln!(out)?;
        if !m.benchtop_version.is_empty() {
            writeln!(out, "benchtop  {}", Escaped(&m.benchtop_version))?;
        }
        write!(out, "status    {}", m.status)?;
        if let Some(failure) = &m.failure {
            // Failure's Display escapes its strings.
            write!(out, ": {failure}")?;
        }
        // `complete (duration reached; worker: exit code 0)`
        let how: Vec<String> = ended_words(m.status, m.ended_by)
            .map(str::to_owned)
            .into_iter()
            .chain(
                m.worker
                    .exit
                    .as_ref()
                    .map(|exit| format!("worker: {}", Escaped(exit))),
            )
            .collect();
        if !how.is_empty() {
            write!(out, " ({})", how.join("; "))?;
        }
        writeln!(out)?;
        writeln!(out, "started   {}", Escaped(&m.started_at))?;
        writeln!(
            out,
            "ended     {}",
            Escaped(m.ended_at.as_deref().unwrap_or("-"))
        )?;
        if let Some(d) = self.duration() {
            let ms = Duration::from_millis(d.as_millis().try_into().unwrap_or(u64::MAX));
            writeln!(out, "duration  {}", humantime::format_duration(ms))?;
        }
        let s = &m.sampling;
        if s.enabled {
            // Sessions before --profile took sets say one word (cpu, both, all …), which
            // parses as a set too; one that does not (hand-edited) reads as on-CPU only.
            let kinds: KindSet = s.profile.parse().unwrap_or(KindSet::of(Kind::Cpu));
            if !kinds.contains(Kind::Cpu)
                && !kinds.contains(Kind::OffCpu)
                && let Some(mem) = &s.mem
            {
                // No timer drives a memory profile: one page fault in `period` is sampled.
                write!(
                    out,
                    "sampling  {} (memory only), one fault in {} ({} a sample): {} samples, {} records lost",
                    Escaped(&s.event),
                    mem.period,
                    human_bytes(mem.period.saturating_mul(mem.page_size)),
                    mem.samples,
                    s.lost
                )?;
            } else if !kinds.contains(Kind::Cpu)
                && (kinds.contains(Kind::OffCpu) || kinds.contains(Kind::Waits))
            {
                // No timer drives an off-CPU profile: every context switch is recorded,
                // and with waits every wake-up of the tree's threads too.
                write!(
                    out,
                    "sampling  {} ({}): {} records lost",
                    Escaped(&s.event),
                    if kinds.contains(Kind::Waits) {
                        "off-CPU and waits: switches and wake-ups"
                    } else {
                        "off-CPU only"
                    },
                    s.lost
                )?;
            } else {
                write!(
                    out,
                    "sampling  {} at {} Hz: {} samples, {} records lost, kernel frames {}",
                    Escaped(&s.event),
                    s.frequency_hz,
                    s.samples,
                    s.lost,
                    if s.kernel_frames { "on" } else { "off" }
                )?;
            }
            match &s.reason {
                Some(reason) => writeln!(out, " ({})", Escaped(reason))?,
                None => writeln!(out)?,
            }
            if kinds.contains(Kind::Mem)
                && (kinds.contains(Kind::Cpu) || kinds.contains(Kind::OffCpu))
                && let Some(mem) = &s.mem
            {
                writeln!(
                    out,
                    "memory    page-faults, one in {} ({} a sample): {} samples, {} in mem.folded",
                    mem.period,
                    human_bytes(mem.period.saturating_mul(mem.page_size)),
                    mem.samples,
                    human_bytes(mem.bytes)
                )?;
            }
            if matches!(s.profile.as_str(), "offcpu" | "both" | "all") {
                writeln!(
                    out,
                    "off-CPU   {} switches, {:.3} s blocked{}, {:.3} s preempted",
                    s.switches,
                    s.blocked_s,
                    if s.offcpu_stacks {
                        " (with stacks)"
                    } else {
                        " (per thread, no stacks)"
                    },
                    s.preempted_s
                )?;
            }
            write_unwinding(out, s)?;
        } else {
            let reason = s.reason.as_deref().unwrap_or("not requested");
            writeln!(out, "sampling  off: {}", Escaped(reason))?;
        }

        if !m.summary.is_empty() {
            writeln!(out, "\nsummary")?;
            // A command's CPU time is the kernel's count of its whole tree where it gave
            // one (the resources' figure); else, and in older sessions, wait4's.
            let counted = m.resources.as_ref().is_some_and(|i| i.counted.is_some());
            for f in &m.summary {
                write!(
                    out,
                    "  {}: {}",
                    Escaped(&f.name),
                    Escaped(&human_figure(f.value, &f.unit))
                )?;
                if f.name == "cpu_time_s" && !counted {
                    write!(out, " (wait4: the command and the children it waited for)")?;
                }
                writeln!(out)?;
            }
        }

        if !m.phases.is_empty() {
            writeln!(out, "\nphases")?;
            let names: Vec<_> = m.phases.iter().map(|p| escaped(&p.name)).collect();
            let width = names.iter().map(|n| n.len()).max().unwrap_or(0).min(64);
            for (p, name) in m.phases.iter().zip(&names) {
                write!(out, "  {name:<width$} {:>9.3} s", p.duration_s)?;
                let figure = |name: &str| p.figures.iter().find(|f| f.name == name);
                if let Some(f) = figure("bytes") {
                    write!(out, "  {:>10}", human_bytes(f.value as u64))?;
                }
                if let Some(f) = figure("mb_per_s") {
                    write!(out, "  {:>8.1} MB/s", f.value)?;
                }
                if let Some(f) = figure("rss_bytes") {
                    write!(out, "  RSS {}", human_bytes(f.value as u64))?;
                }
                writeln!(out)?;
            }
        }

        let width = overview
            .latency
            .iter()
            .map(|r| escaped(r.metric).len())
            .max()
            .unwrap_or(0)
            .clamp(6, 64);
        if !overview.latency.is_empty() {
            writeln!(out, "\nlatency ({LATENCY_FILE}, whole run)")?;
            writeln!(
                out,
                "  {:<width$} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
                "metric", "count", "p50", "p90", "p99", "p99.9", "max"
            )?;
            for row in &overview.latency {
                let tag = escaped(row.metric);
                let q = |ns: u64| human_ns(ns as f64);
                writeln!(
                    out,
                    "  {:<width$} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
                    if tag.is_empty() { "(untagged)" } else { &tag },
                    row.count,
                    q(row.p50_ns),
                    q(row.p90_ns),
                    q(row.p99_ns),
                    q(row.p999_ns),
                    q(row.max_ns),
                )?;
            }
        }

        let polled_reason = m.resources.as_ref().and_then(|i| i.reason.as_deref());
        write_resources(&overview.resources, polled_reason, out)?;
        write_busiest_threads(&overview, out)?;
        crate::memory::write_memory_tops(&overview.memory, out)?;

        if !overview.hottest_frames.is_empty() {
            writeln!(
                out,
                "\nhottest frames (self samples, {})",
                Kind::Cpu.folded_file()
            )?;
            let names: Vec<&str> = overview.hottest_frames.iter().map(|f| f.frame).collect();
            let labels = short_names(&names, NAME_WIDTH);
            for (f, name) in overview.hottest_frames.iter().zip(&labels) {
                writeln!(out, "  {:5.1}%  {}", f.percent, Escaped(name))?;
            }
        }

        if !overview.without_symbols.is_empty() {
            writeln!(
                out,
                "\nfiles without symbols (self samples, {}; install their debug files, \
                 e.g. the -dbg or -dbgsym package, or record with --debug-dir DIR; the \
                 warnings say where they were looked for)",
                Kind::Cpu.folded_file()
            )?;
            for f in &overview.without_symbols {
                writeln!(out, "  {:5.1}%  {}", f.percent, Escaped(f.frame))?;
            }
        }

        let blocked = overview.blocking_frames.iter();
        write_blocked_time(
            out,
            &format!(
                "where threads blocked (innermost user frame, {})",
                Kind::OffCpu.folded_file()
            ),
            blocked.map(|f| (f.percent, f.weight, f.frame)),
        )?;
        let wakers = overview.wakers.iter();
        write_blocked_time(
            out,
            &format!(
                "what woke them (waker thread at its innermost user frame, {})",
                Kind::Waits.folded_file()
            ),
            wakers.map(|w| (w.percent, w.weight, w.waker.as_str())),
        )?;

        let warnings: Vec<&str> = overview
            .warnings
            .iter()
            .copied()
            .chain(overview.notes.iter().map(String::as_str))
            .collect();
        if !warnings.is_empty() {
            writeln!(out, "\nwarnings")?;
            for w in warnings {
                writeln!(out, "  - {}", Escaped(w))?;
            }
        }
        Ok(())
    }
}

/// The most threads and the most processes of the tree alive at once, from the
/// threads' lives the kernel's records gave (threads.csv's `start_s` and `end_s`):
/// exact where the polls see only the threads alive at each poll. `None` when no
/// thread has a start or end time (polled sessions, older sessions).
fn most_alive_at_once(threads: &[ThreadSummary]) -> Option<(u32, u32)> {
    let lives: Vec<(f64, f64, u32)> = threads
        .iter()
        .filter(|t| t.aggregated.is_none())
        .filter(|t| t.start_s.is_some() || t.end_s.is_some())
        .map(|t| {
            // Alive when recording began (the command's first process, held at its
            // gate): its first sighting; alive at the end: its last.
            let start = t.start_s.unwrap_or(t.first_seen_s);
            (start, t.end_s.unwrap_or(t.last_seen_s).max(start), t.pid)
        })
        .collect();
    if lives.is_empty() {
        return None;
    }
    // Starts before ends at one instant: a thread that began as another ended
    // counts with it, as the kernel ran both then.
    let most_at_once = |events: &mut Vec<(f64, i32)>| {
        events.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
        let (mut now, mut most) = (0i32, 0i32);
        for &(_, step) in events.iter() {
            now += step;
            most = most.max(now);
        }
        u32::try_from(most).unwrap_or(0)
    };
    let mut threads: Vec<(f64, i32)> = lives
        .iter()
        .flat_map(|&(start, end, _)| [(start, 1), (end, -1)])
        .collect();
    let mut spans: std::collections::BTreeMap<u32, (f64, f64)> = Default::default();
    for &(start, end, pid) in &lives {
        let span = spans.entry(pid).or_insert((start, end));
        span.0 = span.0.min(start);
        span.1 = span.1.max(end);
    }
    let mut processes: Vec<(f64, i32)> = spans
        .values()
        .flat_map(|&(start, end)| [(start, 1), (end, -1)])
        .collect();
    Some((most_at_once(&mut threads), most_at_once(&mut processes)))
}

/// The resources section: peaks over the rows, and the totals of the last row that has them.
fn write_resources(r: &Resources, polled_reason: Option<&str>, out: &mut String) -> fmt::Result {
    if r.peak_rss_bytes.is_none() && r.max_threads.is_none() {
        return Ok(());
    }
    writeln!(
        out,
        "\nresources ({})",
        match r.measured {
            Measured::Counted => "CPU time, switches and faults counted by the kernel, whole tree",
            Measured::CpuCounted => "CPU time counted by the kernel, whole tree; the rest polled",
            Measured::Polled => "polled: what lived between two polls is missed",
        }
    )?;
    if let Some(rss) = r.peak_rss_bytes {
        let from = match r.peak_rss_from {
            Some(PeakFrom::Exit) => " (largest process, counted at exit)",
            Some(PeakFrom::Polled) => " (largest process, polled)",
            None => "",
        };
        writeln!(out, "  peak RSS     {}{from}", human_bytes(rss))?;
    } else {
        writeln!(
            out,
            "  peak RSS     not seen (the tree ended before a poll read it)"
        )?;
    }
    // Of a tree of several processes, the sum is a figure of its own.
    if let Some(tree) = r
        .tree_peak_rss_bytes
        .filter(|_| r.max_processes.is_some_and(|n| n > 1))
    {
        writeln!(
            out,
            "  tree peak    {} (all processes, polled)",
            human_bytes(tree)
        )?;
    }
    if let Some(threads) = r.max_threads {
        writeln!(out, "  max threads  {threads}")?;
    }
    if let Some(processes) = r.max_processes {
        writeln!(out, "  max procs    {processes}")?;
    }
    if let Some(cpu) = r.cpu_time_s {
        writeln!(out, "  CPU time     {cpu:.2} s")?;
    }
    match (r.context_switches, r.ctx_switches) {
        (Some(n), Some(s)) => writeln!(
            out,
            "  ctx switches {n} (polled: {} voluntary, {} involuntary)",
            s.voluntary, s.involuntary
        )?,
        (Some(n), None) => writeln!(out, "  ctx switches {n}")?,
        (None, Some(s)) => writeln!(
            out,
            "  ctx switches {} voluntary, {} involuntary",
            s.voluntary, s.involuntary
        )?,
        (None, None) => {}
    }
    if let (Some(minor), Some(major)) = (r.minor_faults, r.major_faults) {
        writeln!(out, "  page faults  {minor} minor, {major} major")?;
    }
    if let Some(io) = r.io {
        writeln!(
            out,
            "  I/O          {} read in {} calls, {} written in {} calls; storage {} read, {} written",
            human_bytes(io.rchar),
            io.syscr,
            human_bytes(io.wchar),
            io.syscw,
            human_bytes(io.read_bytes),
            human_bytes(io.write_bytes)
        )?;
    }
    if let Some(reason) = polled_reason {
        writeln!(out, "  polled       {}", Escaped(reason))?;
    }
    if let (Some(peak), Some(alloc)) = (r.peak_live_bytes, r.alloc) {
        writeln!(
            out,
            "  live bytes   peak {}, {} at the end",
            human_bytes(peak),
            human_bytes(alloc.live_bytes)
        )?;
        let rate = if alloc.t_s > 0.0 {
            format!(
                ", {}/s",
                human_bytes((alloc.alloc_bytes as f64 / alloc.t_s) as u64)
            )
        } else {
            String::new()
        };
        writeln!(
            out,
            "  allocated    {} in {} calls{rate}",
            human_bytes(alloc.alloc_bytes),
            alloc.allocs
        )?;
    }
    Ok(())
}

/// The threads of threads.csv with the most CPU time.
fn write_busiest_threads(overview: &Overview<'_>, out: &mut String) -> fmt::Result {
    if overview.threads_seen == 0 {
        return Ok(());
    }
    writeln!(
        out,
        "\nbusiest threads ({THREADS_FILE}: {} threads of {} processes seen)",
        overview.threads_seen, overview.processes_seen
    )?;
    for t in &overview.busiest_threads {
        writeln!(
            out,
            "  {:>9.2} s  {} (tid {}) in {} (pid {})",
            t.cpu_s,
            Escaped(t.thread),
            t.tid,
            Escaped(t.process),
            t.pid
        )?;
    }
    Ok(())
}

/// The `n` frames with the largest self weight, largest first.
fn hottest_frames(tree: &StackTree, n: usize) -> Vec<(&str, u64)> {
    let mut by_frame = HashMap::new();
    for id in 1..tree.node_count() {
        let node = tree.node(NodeId(id as u32));
        if node.self_weight > 0 {
            *by_frame.entry(node.frame).or_insert(0u64) += node.self_weight;
        }
    }
    let mut frames: Vec<(&str, u64)> = by_frame
        .into_iter()
        .map(|(frame, weight)| (tree.name(frame), weight))
        .collect();
    frames.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    frames.truncate(n);
    frames
}

/// The name of the file of a frame of code without symbols: `FILE` of `FILE+0xSTART`
/// (a function found from the file's unwind tables) or of `[FILE]`; `None` for other
/// frames, and for the markers (`[unknown]`, `[blocked: …]`, `[truncated: …]`…).
fn file_without_symbols(frame: &str) -> Option<&str> {
    if let Some((file, start)) = frame.rsplit_once("+0x") {
        let hex = !start.is_empty() && start.bytes().all(|b| b.is_ascii_hexdigit());
        return (hex && !file.is_empty() && !file.ends_with("_[k]")).then_some(file);
    }
    let inner = frame.strip_prefix('[')?.strip_suffix(']')?;
    let marker = inner == "unknown" || inner.contains(' ') || inner.contains(':');
    (!marker && !inner.is_empty()).then_some(inner)
}

/// The files whose code ran without symbols, with their self weight, heaviest first.
fn without_symbols(tree: &StackTree) -> Vec<(&str, u64)> {
    let mut by_file: HashMap<&str, u64> = HashMap::new();
    for id in 1..tree.node_count() {
        let node = tree.node(NodeId(id as u32));
        if node.self_weight > 0
            && let Some(file) = file_without_symbols(tree.name(node.frame))
        {
            *by_file.entry(file).or_insert(0) += node.self_weight;
        }
    }
    let mut files: Vec<(&str, u64)> = by_file.into_iter().collect();
    files.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    files
}

/// A section of blocked time (weights in microseconds) under `heading`: each line's
/// share, seconds and name; nothing when there are no lines.
fn write_blocked_time<'a>(
    out: &mut String,
    heading: &str,
    lines: impl Iterator<Item = (f64, u64, &'a str)>,
) -> fmt::Result {
    let mut lines = lines.peekable();
    if lines.peek().is_none() {
        return Ok(());
    }
    writeln!(out, "\n{heading}")?;
    for (percent, weight, name) in lines {
        let secs = weight as f64 / 1e6;
        writeln!(out, "  {percent:5.1}%  {secs:9.3} s  {}", Escaped(name))?;
    }
    Ok(())
}

/// The `n` frames that blocked longest: for each off-CPU stack its innermost frame that is
/// not a kernel frame (`…_[k]`; every stack ends in the scheduler, which says nothing),
/// or its leaf when it has only kernel frames.
fn blocking_frames(tree: &StackTree, n: usize) -> Vec<(&str, u64)> {
    let mut by_frame: HashMap<FrameId, u64> = HashMap::new();
    tree.for_each_stack(|frames, weight| {
        let frame = frames
            .iter()
            .rev()
            .find(|&&f| !tree.name(f).ends_with("_[k]"))
            .or(frames.last());
        if let Some(&frame) = frame {
            *by_frame.entry(frame).or_insert(0) += weight;
        }
    });
    let mut frames: Vec<(&str, u64)> = by_frame
        .into_iter()
        .map(|(frame, weight)| (tree.name(frame), weight))
        .collect();
    frames.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    frames.truncate(n);
    frames
}

/// The `n` wakers that ended the most blocked time of a waits profile.
fn top_wakers(tree: &StackTree, n: usize) -> Vec<WakerShare> {
    let mut by_waker: HashMap<String, u64> = HashMap::new();
    let mut names: Vec<&str> = Vec::new();
    tree.for_each_stack(|frames, weight| {
        names.clear();
        names.extend(frames.iter().map(|&f| tree.name(f)));
        let (_, waker) = benchtop_profile::waits::split(&names);
        *by_waker.entry(waker.label()).or_insert(0) += weight;
    });
    let total = tree.total_weight().max(1) as f64;
    let mut wakers: Vec<WakerShare> = by_waker
        .into_iter()
        .filter(|(w, _)| !w.is_empty())
        .map(|(waker, weight)| WakerShare {
            percent: weight as f64 * 100.0 / total,
            waker,
            weight,
        })
        .collect();
    wakers.sort_unstable_by(|a, b| b.weight.cmp(&a.weight).then(a.waker.cmp(&b.waker)));
    wakers.truncate(n);
    wakers
}

/// `frames` of `tree` with their share of its total weight.
fn shares<'a>(tree: &StackTree, frames: Vec<(&'a str, u64)>) -> Vec<FrameShare<'a>> {
    let total = tree.total_weight().max(1) as f64;
    frames
        .into_iter()
        .map(|(frame, weight)| FrameShare {
            frame,
            weight,
            percent: weight as f64 * 100.0 / total,
        })
        .collect()
}

/// Modules listed by name in the summary's `modules` line; the rest are counted.
const MAX_SUMMARY_MODULES: usize = 12;

/// How stacks were unwound (`unwind` lines): the mode, and with stack copies how many
/// were unwound, how many ended in a `[truncated: …]` frame and why, and each module's
/// way (DWARF CFI, frame pointers, none), at most [`MAX_SUMMARY_MODULES`] of them.
fn write_unwinding(out: &mut String, s: &crate::meta::SamplingInfo) -> fmt::Result {
    let Some(u) = &s.unwinding else {
        if !s.unwind.is_empty() {
            writeln!(out, "unwind    {}", Escaped(&s.unwind))?;
        }
        return Ok(());
    };
    let truncated = u
        .truncated_no_unwind_info
        .saturating_add(u.truncated_stack_copy)
        .saturating_add(u.truncated_other);
    let share = if u.unwound > 0 {
        truncated as f64 * 100.0 / u.unwound as f64
    } else {
        0.0
    };
    writeln!(
        out,
        "unwind    {}, {} stack copies: {} stacks unwound, {} truncated ({share:.1}%: {} no unwind \
         info, {} stack copy too small, {} other), {} samples without a stack",
        Escaped(or_unknown(&s.unwind)),
        human_bytes(u64::from(u.stack_size)),
        u.unwound,
        truncated,
        u.truncated_no_unwind_info,
        u.truncated_stack_copy,
        u.truncated_other,
        u.no_stack
    )?;
    if !u.modules.is_empty() {
        write!(out, "modules  ")?;
        for (i, (name, how)) in u.modules.iter().take(MAX_SUMMARY_MODULES).enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            write!(out, "{sep}{} {}", Escaped(name), Escaped(how))?;
        }
        let more = u.modules.len().saturating_sub(MAX_SUMMARY_MODULES);
        if more > 0 {
            write!(out, ", {more} more")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "unknown" } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_of_processes_has_its_summed_peak_beside_the_largest_process_s() {
        let mut r = Resources {
            peak_rss_bytes: Some(1 << 20),
            peak_rss_from: Some(PeakFrom::Exit),
            tree_peak_rss_bytes: Some(3 << 20),
            max_processes: Some(3),
            ..Resources::default()
        };
        let mut out = String::new();
        write_resources(&r, None, &mut out).unwrap();
        assert!(
            out.contains("peak RSS     1.00 MiB (largest process, counted at exit)")
                && out.contains("tree peak    3.00 MiB (all processes, polled)"),
            "{out}"
        );
        // One process: one figure.
        r.max_processes = Some(1);
        let mut out = String::new();
        write_resources(&r, None, &mut out).unwrap();
        assert!(!out.contains("tree peak"), "{out}");
    }

    #[test]
    fn threads_and_processes_alive_at_once_come_from_their_lives() {
        let life = |pid: u32, tid: u32, start: f64, end: Option<f64>| {
            let mut t = ThreadSummary::new(pid, tid, "p", "t");
            (t.start_s, t.end_s, t.last_seen_s) = (Some(start), end, 9.0);
            t
        };
        // A shell (1, the whole run) and a pipeline of two short processes at a time, one
        // of them with a second thread; processes lived between polls, which saw none.
        let threads = [
            life(1, 1, 0.0, Some(3.0)),
            life(2, 2, 0.1, Some(0.4)),
            life(3, 3, 0.2, Some(0.5)),
            life(3, 4, 0.3, Some(0.45)),
            life(5, 5, 0.5, Some(0.7)),
            // Still alive at the end: counted to its last sighting.
            life(6, 6, 2.0, None),
        ];
        let mut root = ThreadSummary::new(7, 7, "p", "t");
        // There before the records began: from its first sighting to its end.
        (root.first_seen_s, root.end_s) = (5.0, Some(8.0));
        assert_eq!(most_alive_at_once(&threads), Some((4, 3)));
        let with_root: Vec<ThreadSummary> = threads.into_iter().chain([root]).collect();
        assert_eq!(most_alive_at_once(&with_root), Some((4, 3)));
        let late = &with_root[5..];
        assert_eq!(most_alive_at_once(late), Some((2, 2)));
        // Polled threads have no lives to read.
        let polled = [ThreadSummary::new(1, 1, "p", "t")];
        assert_eq!(most_alive_at_once(&polled), None);
    }

    #[test]
    fn a_peak_no_poll_saw_is_said_not_seen() {
        let r = Resources {
            max_threads: Some(5),
            ..Resources::default()
        };
        let mut out = String::new();
        write_resources(&r, None, &mut out).unwrap();
        assert!(
            out.contains("peak RSS     not seen (the tree ended before a poll read it)"),
            "{out}"
        );
    }

    #[test]
    fn the_resources_say_how_they_were_measured() {
        let mut r = Resources {
            peak_rss_bytes: Some(1 << 20),
            cpu_time_s: Some(2.5),
            measured: Measured::Counted,
            ctx_switches: Some(ContextSwitches::new(70, 30)),
            context_switches: Some(120),
            minor_faults: Some(900),
            major_faults: Some(2),
            ..Resources::default()
        };
        let mut out = String::new();
        write_resources(&r, None, &mut out).unwrap();
        assert!(out.contains("resources (CPU time, switches and faults counted by the kernel"));
        assert!(out.contains("ctx switches 120 (polled: 70 voluntary, 30 involuntary)"));
        assert!(out.contains("page faults  900 minor, 2 major"));
        assert!(!out.contains("polled   "), "{out}");

        r.measured = Measured::CpuCounted;
        (r.context_switches, r.minor_faults, r.major_faults) = (None, None, None);
        let mut out = String::new();
        write_resources(&r, Some("kernel events refused\x1b[2J"), &mut out).unwrap();
        assert!(out.contains("CPU time counted by the kernel, whole tree; the rest polled"));
        assert!(out.contains("ctx switches 70 voluntary, 30 involuntary"));
        assert!(!out.contains("page faults"));
        assert!(
            out.contains("  polled       kernel events refused\\x1b[2J"),
            "{out}"
        );

        r.measured = Measured::Polled;
        let mut out = String::new();
        write_resources(&r, None, &mut out).unwrap();
        assert!(out.contains("resources (polled: what lived between two polls is missed)"));
    }

    #[test]
    fn wakers_are_summed_by_thread_and_innermost_frame_outside_the_kernel() {
        use benchtop_profile::waits::{NOT_SEEN, WOKEN_BY};
        let mut t = StackTree::new();
        let blocked = ["app", "main", "consume", "futex_wait_[k]"];
        let by = |waker: &[&'static str]| -> Vec<&'static str> {
            blocked
                .iter()
                .copied()
                .chain([WOKEN_BY])
                .chain(waker.iter().copied())
                .collect()
        };
        t.add_names(
            by(&["app", "prod", "run", "produce_a", "futex_wake_[k]"]),
            300,
        );
        t.add_names(by(&["app", "prod", "run", "produce_a"]), 60);
        t.add_names(by(&["app", "prod", "run", "produce_b"]), 100);
        t.add_names(by(&["[woken by: hard interrupt (timer or device)]"]), 40);
        t.add_names(blocked.iter().copied().chain([NOT_SEEN]), 100);
        let wakers = top_wakers(&t, 3);
        let got: Vec<(&str, u64)> = wakers
            .iter()
            .map(|w| (w.waker.as_str(), w.weight))
            .collect();
        assert_eq!(
            got,
            [
                ("prod (app) at produce_a", 360),
                ("[woken: not seen]", 100),
                ("prod (app) at produce_b", 100),
            ]
        );
        assert!((wakers[0].percent - 60.0).abs() < 1e-9);
    }

    #[test]
    fn files_without_symbols_are_summed_from_their_functions_and_boxes() {
        let mut t = StackTree::new();
        t.add_names(["p", "main", "liblzma.so.5+0x15ae0"], 5);
        t.add_names(["p", "main", "liblzma.so.5+0x16880"], 3);
        t.add_names(["p", "main", "[md5sum]"], 2);
        t.add_names(["p", "main", "memcpy@plt"], 1);
        t.add_names(["p", "[unknown]"], 4);
        t.add_names(["p", "[truncated: stack copy too small]"], 4);
        t.add_names(["p", "main", "a+b"], 1);
        t.add_names(["p", "main", "f+0xzz"], 1);
        assert_eq!(
            without_symbols(&t),
            vec![("liblzma.so.5", 8), ("md5sum", 2)]
        );
    }

    #[test]
    fn the_hottest_frames_sum_self_weight_over_every_path() {
        let mut t = StackTree::new();
        t.add_names(["main", "a", "memcpy"], 3);
        t.add_names(["main", "b", "memcpy"], 2);
        t.add_names(["main", "b"], 4);
        t.add_names(["main", "c"], 1);
        assert_eq!(hottest_frames(&t, 2), vec![("memcpy", 5), ("b", 4)]);
    }
}
