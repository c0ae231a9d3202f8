//! The end of a run: the sampler's stacks and flamegraphs, latency.svg, threads.csv,
//! phases.svg and the final metadata, whatever happened. The session is always finished:
//! a failure along the way becomes a warning in it, and the [`Ending`] its status.

use std::time::{Duration, SystemTime};

use benchtop_profilers::monitor::TreeMonitorOptions;
use benchtop_protocol as protocol;
use benchtop_sessions::meta::{Better, Figure, PeakFrom, ResourcesInfo};
use benchtop_sessions::store::rfc3339;
use benchtop_sessions::{SessionError, Status};
use hdrhistogram::Histogram;

use crate::RecordError;
use crate::child::Process;
use crate::driver::{MAX_PHASES, MAX_PROTOCOL_WARNINGS, RecordOutcome, Run};
use crate::machine::{Ending, Phase};
use crate::notice::{Failure, Notice};

/// How much the exec gate may grow between reading its own peak and its exec (building
/// the command's environment, the exec's search of `PATH`): a few pages, with room.
const GATE_GROWTH_BYTES: u64 = 1 << 20;

impl Run<'_> {
    /// Writes stacks and the final metadata, whatever happened.
    pub(crate) fn finalize(
        mut self,
        result: Result<(), RecordError>,
    ) -> Result<RecordOutcome, RecordError> {
        self.say(Notice::WritingSession);
        let mut warnings = Vec::new();
        if let Err(e) = self.flush_held_tick() {
            warnings.push(format!("the last interval was not written: {e}"));
        }
        let ending = self.ending(&result, &mut warnings);
        let attached = matches!(self.worker, Process::Attached { .. });
        if !attached {
            self.end_worker();
            // The worker is reaped: what still carries this run's marker outlived it.
            let group = Some(self.worker.pid());
            let leftovers = crate::leftover::find(&self.writer.meta().id, group);
            if !leftovers.is_empty() {
                warnings.push(crate::leftover::Warning(&leftovers).to_string());
            }
        }
        // After the reap: the exited tree's counts are final.
        if let Err(e) = self.write_closing_row() {
            warnings.push(format!(
                "the row of the run's last moments was not written: {e}"
            ));
        }
        self.write_profile(&mut warnings);
        // The workload is over: a stream naming allocation stacks at a low priority
        // (which writing them below waits for) gets the recorder's back.
        if let Some(stream) = &self.opts.stream {
            stream.ending();
        }
        // After the sampler's: `sampling` is whole by then.
        self.write_allocs(&mut warnings);
        self.write_tables(&mut warnings);
        // The stream sends what it still holds (for a bounded time) and says what arrived.
        if let Some(stream) = self.opts.stream.clone() {
            self.writer.set_meta(|m| stream.finish(m));
        }
        // How the run ended, with the reason when it did not end well.
        warnings.extend(ending.warnings());
        let status = ending.status();
        let ended_by = ending.ended_by();
        let exit = self.exit;
        let summary = self.summary.take();
        let lines = summary.as_ref().map(summary_lines).unwrap_or_default();
        let mut figures: Vec<Figure> = summary
            .map(|s| s.figures.into_iter().map(session_figure).collect())
            .unwrap_or_default();
        figures.extend(self.command_figures(status));
        let resources = self.resources_info();
        // session.json is written once, by finish (or fail) below.
        self.writer.set_meta(|m| {
            m.ended_by = ended_by;
            m.worker.exit = exit.map(|e| e.to_string());
            // An attached process is not our child: wait4 tells nothing of it.
            m.worker.cpu_time_s = exit.filter(|_| !attached).map(|e| e.cpu_time_s);
            m.worker.peak_rss_bytes = exit.filter(|_| !attached).map(|e| e.peak_rss_bytes);
            m.summary = figures;
            m.resources = resources;
            m.warnings.extend(warnings);
        });
        let mut all_warnings = self.writer.meta().warnings.clone();
        let ended_at = rfc3339(SystemTime::now());
        let (dir, status) = match self.write_failure.take() {
            // The disk refused a write: session.json alone is rewritten, as `failed` with
            // the file and the error, so what is on disk stays as it was written.
            Some(failure) => {
                all_warnings.push(format!(
                    "the session could not be written, so the run was stopped: {}{}",
                    failure
                        .path
                        .as_deref()
                        .map_or(String::new(), |p| format!("{p}: ")),
                    failure.message
                ));
                self.writer.fail(failure, ended_at)?;
                (self.writer.dir().to_path_buf(), Status::Failed)
            }
            None => (self.writer.finish(status, ended_at)?, status),
        };
        Ok(RecordOutcome {
            dir,
            status,
            ended_by: ended_by.filter(|_| status == Status::Complete),
            summary: lines,
            warnings: all_warnings,
        })
    }

    /// A command that ran to its own end, exit code 0, is measured as hyperfine measures
    /// one: `wall_time_s`, from the gate opening (its first instruction) to its exit (as a
    /// thread waiting on it saw it, else as the conductor reaped it), and `cpu_time_s`, its user and system time with its reaped
    /// children's; both to be minimised. Nothing for a command cut short or failed, for
    /// a workload (which reports its own figures) or an attached process.
    fn command_figures(&self, status: Status) -> Vec<Figure> {
        let (Some(started), Some(exited), Some(exit)) =
            (self.data.started_at, self.exited_at, self.exit)
        else {
            return Vec::new();
        };
        if self.opts.target != crate::Target::Command
            || status != Status::Complete
            || !exit.success()
        {
            return Vec::new();
        }
        let figure = |name: &str, value: f64| {
            let mut f = Figure::new(name, value, "s");
            f.better = Some(Better::Lower);
            f
        };
        vec![
            figure(
                "wall_time_s",
                exited.saturating_duration_since(started).as_secs_f64(),
            ),
            // The kernel's count of the whole tree where it gave one, as the resources
            // say; else wait4's (the command and the children it waited for).
            figure(
                "cpu_time_s",
                self.data
                    .last_counts
                    .filter(|_| self.counters.is_some())
                    .map_or(exit.cpu_time_s, |(c, _)| c.cpu_time_s),
            ),
        ]
    }

    /// session.json's `resources`: whether the tree's figures were counted or polled,
    /// and the kernel's counts of the whole run (the last row's totals).
    fn resources_info(&self) -> Option<ResourcesInfo> {
        self.monitor.as_ref()?;
        let mut info = ResourcesInfo::default();
        info.counted = self
            .data
            .last_counts
            .filter(|_| self.counters.is_some())
            .map(|(c, _)| c);
        info.exact = info.counted.is_some() && self.data.polled_reason.is_none();
        info.reason.clone_from(&self.data.polled_reason);
        (info.peak_rss_bytes, info.peak_rss_from) = self.program_peak();
        Some(info)
    }

    /// The program's peak resident set size: the largest peak of any one process of the
    /// tree from the command's exec on, as `/usr/bin/time -v` gives it.
    ///
    /// wait4's `ru_maxrss` of a command is the largest peak of the images the child had
    /// (the conductor's copy at fork, the exec gate, the command) and of the children it
    /// waited for: exact, but the program's only when it is above what the gate said of
    /// the images before the exec ([`crate::child::GatePass`]), by more than the gate may
    /// have grown after saying it ([`GATE_GROWTH_BYTES`]). Otherwise (a program smaller
    /// than benchtop, a worker, an attached process), the largest VmHWM the monitor read
    /// after the exec.
    fn program_peak(&self) -> (Option<u64>, Option<PeakFrom>) {
        let Some(monitor) = &self.monitor else {
            return (None, None);
        };
        let polled = Some(monitor.largest_peak_bytes()).filter(|&b| b > 0);
        let at_exit = match (self.opts.target, self.exit, self.data.gate_pass) {
            (crate::Target::Command, Some(exit), Some(pass)) => pass
                .before_exec_peak_bytes
                .filter(|&before| exit.peak_rss_bytes > before.saturating_add(GATE_GROWTH_BYTES))
                .map(|_| exit.peak_rss_bytes),
            _ => None,
        };
        match (at_exit, polled) {
            // A process the command did not wait for (an orphan) can be the larger.
            (Some(exit), polled) => (Some(exit.max(polled.unwrap_or(0))), Some(PeakFrom::Exit)),
            (None, Some(polled)) => (Some(polled), Some(PeakFrom::Polled)),
            (None, None) => (None, None),
        }
    }

    /// Why the run ended: the machine's ending, or the loop's failure (said as the
    /// session's first warning).
    fn ending(&self, result: &Result<(), RecordError>, warnings: &mut Vec<String>) -> Ending {
        match result {
            // The loop failed (the disk, most likely): end the worker, keep what we can.
            Err(e) => {
                let failure = Failure::Recording(chain(e));
                warnings.push(failure.to_string());
                match e {
                    RecordError::Session(SessionError::Io { path, source }) => {
                        Ending::WriteFailed {
                            path: path.clone(),
                            kind: source.kind(),
                        }
                    }
                    _ => Ending::RecorderFailure(failure),
                }
            }
            Ok(()) => match &self.conductor.phase {
                Phase::Done(ending) => ending.clone(),
                _ => Ending::RecorderFailure(Failure::Recording(
                    "the recorder stopped before the run ended".into(),
                )),
            },
        }
    }

    /// A worker still running when the loop ended (it failed) is killed and reaped.
    fn end_worker(&mut self) {
        if self.exit.is_none() {
            self.worker.signal_group(libc::SIGKILL);
            for _ in 0..100 {
                if let Ok(Some(exit)) = self.worker.try_reap() {
                    self.exit = Some(exit);
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// A data file of the session that could not be written: said, and, when the disk
    /// refused it, the session ends `failed` with its path (as a refused write during
    /// the run does), so that what is missing is never taken for a complete session.
    fn data_file_failed(&mut self, what: &str, e: &SessionError, warnings: &mut Vec<String>) {
        warnings.push(format!("{what}: {e}"));
        if e.io_kind().is_some() && self.write_failure.is_none() {
            self.write_failure = Some(e.failure());
        }
    }

    /// The sampler's stacks, flamegraphs and pprof profile, and what it says of itself.
    fn write_profile(&mut self, warnings: &mut Vec<String>) {
        if let Some(sampler) = self.sampler.take() {
            match sampler.finish() {
                Ok(profile) => {
                    if let Err(e) = self.writer.append_stacks(&profile.stacks) {
                        self.data_file_failed("per-interval stacks", &e, warnings);
                    }
                    if let Some(stream) = &self.opts.stream {
                        stream.stacks(&profile.stacks);
                    }
                    self.publish_stacks(profile.stacks.clone());
                    // The sampler's start-up warnings are already in the session.
                    let known = &self.writer.meta().warnings;
                    warnings.extend(
                        profile
                            .warnings
                            .iter()
                            .filter(|w| !known.contains(w))
                            .cloned(),
                    );
                    let workload = &self.opts.workload;
                    for (kind, tree) in profile.profiles.iter() {
                        if !profile.kind.contains(kind) {
                            continue;
                        }
                        let title = format!("{workload} — {}", kind.spec().flame_title);
                        if let Err(e) = self.writer.write_stacks(kind, tree, &title) {
                            self.data_file_failed(kind.folded_file(), &e, warnings);
                        }
                    }
                    let mut sampling = profile.sampling_info();
                    sampling.per_thread = self.opts.sampler.per_thread;
                    // Written with the rest by the session's last write, after every
                    // file it counts.
                    self.writer.set_meta(|m| m.sampling = sampling);
                    let elapsed = self
                        .data
                        .started_at
                        .map_or(0.0, |t| t.elapsed().as_secs_f64());
                    let asked = profile
                        .profiles
                        .map_ref(|kind, tree| profile.kind.contains(kind).then_some(tree));
                    if let Err(e) = self.writer.write_pprof(&asked, elapsed) {
                        self.data_file_failed("profile.pb.gz", &e, warnings);
                    }
                }
                Err(e) => warnings.push(format!("stack sampling failed: {e}")),
            }
        }
    }

    /// latency.svg, threads.csv, phases.svg, and what was left out along the way.
    fn write_tables(&mut self, warnings: &mut Vec<String>) {
        let totals: Vec<(&str, &Histogram<u64>)> = self
            .data
            .latency_totals
            .iter()
            .filter_map(|(name, total)| Some((name.as_str(), total.histogram()?)))
            .collect();
        if !totals.is_empty()
            && let Err(e) = self.writer.write_latency_plot(&totals)
        {
            self.data_file_failed("latency.svg", &e, warnings);
        }
        let threads = match &mut self.monitor {
            Some(monitor) => self.writer.write_threads(&monitor.threads_summary()),
            None => Ok(()),
        };
        if let Err(e) = threads {
            self.data_file_failed("threads.csv", &e, warnings);
        }
        if let Some(monitor) = &mut self.monitor {
            let max = TreeMonitorOptions::default().max_exited_threads;
            let aggregated = monitor
                .lifetimes()
                .map_or(monitor.threads_dropped(), |l| l.aggregated());
            if aggregated > 0 {
                warnings.push(format!(
                    "threads.csv: {aggregated} exited threads are held in aggregated lines by \
                     process and thread name (pid and tid 0; the first {max} threads to exit \
                     have lines of their own)"
                ));
            }
            if let Some(lost) = monitor.lifetimes().map(|l| l.lost()).filter(|&n| n > 0) {
                warnings.push(format!(
                    "threads.csv: the kernel dropped {lost} records of threads' lives (its \
                     buffers filled between two reads): threads that lived between two polls \
                     may be missing"
                ));
            }
        }
        if let Some(reason) = &self.data.lifetimes_reason {
            warnings.push(reason.clone());
        }
        if let Err(e) = self.writer.write_phase_plot() {
            self.data_file_failed("phases.svg", &e, warnings);
        }
        if self.phases_dropped > 0 {
            warnings.push(format!(
                "{} phases left out of session.json (it keeps the first {MAX_PHASES})",
                self.phases_dropped
            ));
        }
        if self.data.ticks_merged > 0 {
            warnings.push(format!(
                "{} ticks came sooner than half an interval after the one before and were \
                 merged into the next row",
                self.data.ticks_merged
            ));
        }
        if self.data.worker_log_dropped > 0 {
            warnings.push(format!(
                "worker.log: {} bytes of the worker's output past its {} MiB cap were not kept",
                self.data.worker_log_dropped,
                crate::driver::MAX_WORKER_LOG_BYTES >> 20
            ));
        }
        if self.protocol_errors > MAX_PROTOCOL_WARNINGS {
            warnings.push(format!(
                "{} more bad report lines not listed",
                self.protocol_errors - MAX_PROTOCOL_WARNINGS
            ));
        }
    }
}

/// The summary as the workload printed it; `name: value unit` when it sent figures only.
fn summary_lines(summary: &protocol::Summary) -> Vec<String> {
    if !summary.lines.is_empty() {
        return summary.lines.clone();
    }
    summary
        .figures
        .iter()
        .map(|f| {
            format!("{}: {} {}", f.name, f.value, f.unit)
                .trim_end()
                .to_owned()
        })
        .collect()
}

/// An error and its sources, as one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

pub(crate) fn session_figure(f: protocol::Figure) -> Figure {
    let mut figure = Figure::new(f.name, f.value, f.unit);
    figure.better = match f.better {
        Some(protocol::Better::Higher) => Some(Better::Higher),
        Some(protocol::Better::Lower) => Some(Better::Lower),
        _ => None,
    };
    figure
}
