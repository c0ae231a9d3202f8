//! What `benchtop show DIR` prints of a session: a text summary for people, every string
//! from the session escaped. Kept apart from the session's storage (store.rs).

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

use crate::escape::{Escaped, escaped};
use crate::stacks::{FrameId, NodeId};
use crate::store::{LATENCY_FILE, StackKind, THREADS_FILE};
use crate::units::{human_bytes, human_ns};
use crate::{Session, StackTree, ThreadSummary};

impl Session {
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

    fn write_summary(&self, out: &mut String) -> fmt::Result {
        let m = &self.meta;
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
        if let Some(exit) = &m.worker.exit {
            write!(out, " (worker: {})", Escaped(exit))?;
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
            if s.profile == "offcpu" {
                // No timer drives an off-CPU profile: every context switch is recorded.
                write!(
                    out,
                    "sampling  {} (off-CPU only): {} lost",
                    Escaped(&s.event),
                    s.lost
                )?;
            } else {
                write!(
                    out,
                    "sampling  {} at {} Hz: {} samples, {} lost, kernel frames {}",
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
            if matches!(s.profile.as_str(), "offcpu" | "both") {
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
            for f in &m.summary {
                write!(out, "  {}: {}", Escaped(&f.name), f.value)?;
                if !f.unit.is_empty() {
                    write!(out, " {}", Escaped(&f.unit))?;
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

        // One metric merged at a time: a log of many tags costs one total, not one per tag.
        let mut notes = Vec::new();
        let width = self
            .latency_tags()
            .iter()
            .map(|t| escaped(t).len())
            .max()
            .unwrap_or(0)
            .clamp(6, 64);
        let mut rows = Vec::new();
        self.for_each_merged_latency(&mut notes, |tag, h| {
            rows.push((
                tag,
                h.len(),
                [0.5, 0.9, 0.99, 0.999].map(|q| h.value_at_quantile(q)),
                h.max(),
            ));
        });
        if !rows.is_empty() {
            writeln!(out, "\nlatency ({LATENCY_FILE}, whole run)")?;
            writeln!(
                out,
                "  {:<width$} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
                "metric", "count", "p50", "p90", "p99", "p99.9", "max"
            )?;
            for (tag, count, quantiles, max) in rows {
                let tag = escaped(tag);
                let q = |i: usize| human_ns(quantiles[i] as f64);
                writeln!(
                    out,
                    "  {:<width$} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
                    if tag.is_empty() { "(untagged)" } else { &tag },
                    count,
                    q(0),
                    q(1),
                    q(2),
                    q(3),
                    human_ns(max as f64),
                )?;
            }
        }

        self.write_resources(out)?;
        self.write_busiest_threads(out, 5)?;

        if let Some(cpu) = self.cpu.as_ref().filter(|t| !t.is_empty()) {
            writeln!(
                out,
                "\nhottest frames (self samples, {})",
                StackKind::Cpu.folded_file()
            )?;
            for (name, weight) in hottest_frames(cpu, 5) {
                let share = weight as f64 * 100.0 / cpu.total_weight() as f64;
                writeln!(out, "  {share:5.1}%  {}", Escaped(name))?;
            }
        }

        if let Some(off) = self.offcpu.as_ref().filter(|t| !t.is_empty()) {
            writeln!(
                out,
                "\nwhere threads blocked (innermost user frame, {})",
                StackKind::OffCpu.folded_file()
            )?;
            for (name, weight) in blocking_frames(off, 5) {
                let share = weight as f64 * 100.0 / off.total_weight() as f64;
                let secs = weight as f64 / 1e6;
                writeln!(out, "  {share:5.1}%  {secs:9.3} s  {}", Escaped(name))?;
            }
        }

        let warnings: Vec<&str> = m
            .warnings
            .iter()
            .chain(&self.warnings)
            .chain(&notes)
            .map(String::as_str)
            .collect();
        if !warnings.is_empty() {
            writeln!(out, "\nwarnings")?;
            for w in warnings {
                writeln!(out, "  - {}", Escaped(w))?;
            }
        }
        Ok(())
    }

    /// The resources section: peaks over the rows, and the totals of the last row that has
    /// them.
    fn write_resources(&self, out: &mut String) -> fmt::Result {
        let r = &self.row_summary;
        let peak_rss = r.peak_rss_bytes;
        let max_threads = r.max_threads;
        let max_processes = r.max_processes.filter(|&p| p > 0);
        let switches = r.ctx_switches_total;
        let io = r.io_total;
        let cpu_time = r.cpu_time_s;
        // The monitor's VmHWM counts from exec; wait4's figure (for runs too short to be
        // sampled) also holds pages inherited from the conductor at fork.
        let peak_rss = peak_rss.or(self.meta.worker.peak_rss_bytes);
        if peak_rss.is_none() && max_threads.is_none() {
            return Ok(());
        }
        writeln!(out, "\nresources")?;
        if let Some(rss) = peak_rss {
            writeln!(out, "  peak RSS     {}", human_bytes(rss))?;
        }
        if let Some(threads) = max_threads {
            writeln!(out, "  max threads  {threads}")?;
        }
        if let Some(processes) = max_processes {
            writeln!(out, "  max procs    {processes}")?;
        }
        if let Some(cpu) = cpu_time.filter(|&t| t > 0.0) {
            writeln!(out, "  CPU time     {cpu:.2} s")?;
        }
        if let Some(s) = switches {
            writeln!(
                out,
                "  ctx switches {} voluntary, {} involuntary",
                s.voluntary, s.involuntary
            )?;
        }
        if let Some(io) = io {
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
        Ok(())
    }

    /// The `n` threads of threads.csv with the most CPU time.
    fn write_busiest_threads(&self, out: &mut String, n: usize) -> fmt::Result {
        if self.threads.is_empty() {
            return Ok(());
        }
        let mut busiest: Vec<&ThreadSummary> = self.threads.iter().collect();
        busiest.sort_by(|a, b| {
            b.cpu_s()
                .total_cmp(&a.cpu_s())
                .then(a.pid.cmp(&b.pid))
                .then(a.tid.cmp(&b.tid))
        });
        writeln!(
            out,
            "\nbusiest threads ({THREADS_FILE}: {} threads seen)",
            self.threads.len()
        )?;
        for t in busiest.into_iter().take(n) {
            writeln!(
                out,
                "  {:>9.2} s  {} (tid {}) in {} (pid {})",
                t.cpu_s(),
                Escaped(or_unknown(&t.thread)),
                t.tid,
                Escaped(or_unknown(&t.process)),
                t.pid
            )?;
        }
        Ok(())
    }
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
    fn the_hottest_frames_sum_self_weight_over_every_path() {
        let mut t = StackTree::new();
        t.add_names(["main", "a", "memcpy"], 3);
        t.add_names(["main", "b", "memcpy"], 2);
        t.add_names(["main", "b"], 4);
        t.add_names(["main", "c"], 1);
        assert_eq!(hottest_frames(&t, 2), vec![("memcpy", 5), ("b", 4)]);
    }
}
