//! Rows and stacks as the run goes on: each tick becomes a timeseries row and
//! latency.hlog intervals, a target without ticks gets a row of monitors every interval,
//! and a live consumer gets the rows, the sampler's stacks and the progress figures.

use std::collections::BTreeMap;

use benchtop_sessions::intervals::StacksChunk;
use benchtop_sessions::{Percentiles, Resources, TimeseriesRow};
use hdrhistogram::Histogram;

use crate::RecordError;
use crate::child::Process;
use crate::driver::Run;
use crate::live::{Detail, LiveEvent, ProgressFigures};
use crate::notice::{Notice, ReportIssue};

/// Busiest threads kept in each timeseries row (every thread is in threads.csv).
const TOP_THREADS: usize = 5;
/// threads.csv is rewritten every this many rows during a run, and at its end.
const THREADS_EVERY_ROWS: u32 = 10;

impl Run<'_> {
    /// Whether the live consumer takes this much.
    fn wants(&self, detail: Detail) -> bool {
        self.opts
            .live
            .as_ref()
            .is_some_and(|l| l.detail() == detail)
    }

    /// A tick: its histograms decoded, then a row and latency.hlog intervals. A tick that
    /// comes sooner than half an interval after the last row (a worker flooding ticks) is
    /// held and merged into the next row, so rows come at most about once an interval
    /// whatever the worker sends; [`Run::flush_held_tick`] writes what is held at the end.
    pub(crate) fn on_tick(&mut self, tick: &benchtop_protocol::Tick) -> Result<(), RecordError> {
        self.data.ticks += 1;
        self.data.last_tick_ns = tick.t_ns;
        let mut decoded = BTreeMap::new();
        for (name, encoded) in &tick.histograms {
            match self.data.histograms.decode(encoded) {
                Ok(histogram) => {
                    decoded.insert(name.clone(), histogram);
                }
                Err(e) => self.report_issue(ReportIssue::histogram(name, &e))?,
            }
        }
        if let Some((_, held)) = self.data.held.take() {
            self.data.ticks_merged += 1;
            for (name, histogram) in held {
                match decoded.get_mut(&name) {
                    // Merging only fails past the decoder's own bounds: the tick keeps its own.
                    Some(mine) => {
                        let _ = mine.add(&histogram);
                    }
                    None => {
                        decoded.insert(name, histogram);
                    }
                }
            }
        }
        let since_row = tick.t_ns.saturating_sub(self.data.last_t_ns);
        let too_soon = u128::from(since_row) * 2 < self.opts.interval.as_nanos();
        if too_soon && self.data.ticks > 1 {
            self.data.held = Some((tick.clone(), decoded));
            return Ok(());
        }
        self.write_tick_row(tick, decoded, true)
    }

    /// Writes what a held tick carries, as the run's last row (a short one: its rates are
    /// over its own length). No progress line: the run has been reported as ending.
    pub(crate) fn flush_held_tick(&mut self) -> Result<(), RecordError> {
        match self.data.held.take() {
            Some((tick, histograms)) => self.write_tick_row(&tick, histograms, false),
            None => Ok(()),
        }
    }

    fn write_tick_row(
        &mut self,
        tick: &benchtop_protocol::Tick,
        histograms: BTreeMap<String, Histogram<u64>>,
        progress: bool,
    ) -> Result<(), RecordError> {
        let interval_ns = tick.t_ns.saturating_sub(self.data.last_t_ns);
        let interval_s = interval_ns as f64 / 1e9;
        // latency.hlog offsets count from the session's start time (its StartTime header).
        let start_s = self.data.start_offset_s + self.data.last_t_ns as f64 / 1e9;
        let mut row = TimeseriesRow::default();
        row.t_s = tick.t_ns as f64 / 1e9;
        row.interval_s = interval_s;
        row.counters.clone_from(&tick.counters);
        for (name, &value) in &tick.counters {
            let before = self.data.last_counters.get(name).copied().unwrap_or(0);
            // A level (the allocator's live bytes) falls as well as rises: no rate.
            if interval_s > 0.0 && !benchtop_protocol::is_level_counter(name) {
                row.rates.insert(
                    name.clone(),
                    value.saturating_sub(before) as f64 / interval_s,
                );
            }
        }
        let mut live_histograms = Vec::new();
        let mut streamed = Vec::new();
        for (name, histogram) in histograms {
            if self.opts.stream.is_some() {
                streamed.push((name.clone(), histogram.clone()));
            }
            row.latency
                .insert(name.clone(), Percentiles::of(&histogram));
            self.writer
                .append_latency(&name, start_s, interval_s, &histogram)?;
            // A total past its cap stops growing; latency.hlog keeps every interval.
            let _ = self
                .data
                .latency_totals
                .entry(name.clone())
                .or_default()
                .add(&histogram);
            if self.wants(Detail::Full) {
                live_histograms.push((name, histogram));
            }
        }
        self.monitor_row(&mut row, false)?;
        self.writer.append_row(&row)?;
        self.data.rows += 1;
        if let Some(stream) = &self.opts.stream {
            stream.row(&row, &streamed);
        }
        self.tell_stream_drops();
        self.end_stacks_interval(tick.t_ns)?;
        self.stream_allocs(self.data.last_t_ns, tick.t_ns);
        self.publish(&row, live_histograms);
        self.data.last_t_ns = tick.t_ns;
        self.data.last_counters.clone_from(&tick.counters);
        if progress {
            self.show_progress(&row);
        }
        Ok(())
    }

    /// For a target that sends no ticks (a command that does not speak the protocol, an
    /// attached process), a row of monitors every interval.
    pub(crate) fn write_monitor_row(&mut self) -> Result<(), RecordError> {
        let (Some(started), Some(due)) = (self.data.started_at, self.data.next_row_at) else {
            return Ok(());
        };
        if self.conductor.said.hello {
            // The program speaks the protocol: its ticks make the rows.
            self.data.next_row_at = None;
            return Ok(());
        }
        let now = std::time::Instant::now();
        if now < due || self.exit.is_some() {
            return Ok(());
        }
        let interval = self.opts.interval;
        let t_s = now.duration_since(started).as_secs_f64();
        let mut row = TimeseriesRow::default();
        row.t_s = t_s;
        row.interval_s = t_s - self.data.last_t_ns as f64 / 1e9;
        self.monitor_row(&mut row, false)?;
        self.writer.append_row(&row)?;
        self.data.rows += 1;
        if let Some(stream) = &self.opts.stream {
            stream.row(&row, &[]);
        }
        self.tell_stream_drops();
        self.end_stacks_interval((t_s * 1e9) as u64)?;
        self.publish(&row, Vec::new());
        self.data.last_t_ns = (t_s * 1e9) as u64;
        // The next row is due one interval later, without drifting, and never in the past.
        self.data.next_row_at = Some((due + interval).max(now));
        self.show_progress(&row);
        Ok(())
    }

    /// Tells the live consumer when the stream has dropped more batches than it was last
    /// told: at once the first time, then at most every [`crate::STREAM_NOTICE_EVERY`].
    fn tell_stream_drops(&mut self) {
        let Some(stream) = &self.opts.stream else {
            return;
        };
        let drops = stream.drops();
        let (told, at) = self.data.stream_drops_told;
        let now = std::time::Instant::now();
        if drops.dropped() > told
            && at.is_none_or(|at| now.saturating_duration_since(at) >= crate::STREAM_NOTICE_EVERY)
        {
            self.data.stream_drops_told = (drops.dropped(), Some(now));
            self.say(Notice::StreamDropped(drops));
        }
    }

    /// Where a command's clock starts, on the sampler's: a command counts `t_ns` from the
    /// moment it began its own work, which the recorder does not see. It is later than
    /// the gate's opening by the command's exec and start-up (hundreds of milliseconds
    /// for a large binary on a busy machine), and a tick read at `read_ns` says it was at
    /// most `read_ns - t_ns` (the line took some time to arrive and be read). The
    /// earliest such bound over the ticks is the estimate, never before the gate opened.
    /// The first one also moves the start of the sampler's first interval, so that
    /// interval *i* of stacks spans the same `t_ns` as row *i* (the sampler takes a new
    /// start only until the first interval ends).
    pub(crate) fn align_command_clock(&mut self, t_ns: u64, read_ns: u64) {
        let bound = read_ns
            .saturating_sub(t_ns)
            .max(self.data.start_monotonic_ns);
        match self.data.command_origin_ns {
            None => {
                self.data.command_origin_ns = Some(bound);
                if let Some(sampler) = &self.sampler {
                    sampler.mark_start(bound);
                }
            }
            Some(origin) if bound < origin => self.data.command_origin_ns = Some(bound),
            Some(_) => {}
        }
    }

    /// A row ended its interval `t_ns` after the start: the sampler attributes stacks up
    /// to that moment to it, and what it has attributed so far goes to stacks.jsonl, so
    /// that a recorder killed mid-run keeps the stacks of every interval but the last few.
    fn end_stacks_interval(&mut self, t_ns: u64) -> Result<(), RecordError> {
        let Some(sampler) = &self.sampler else {
            return Ok(());
        };
        let origin = self
            .data
            .command_origin_ns
            .unwrap_or(self.data.start_monotonic_ns);
        sampler.mark_interval_end(origin.saturating_add(t_ns));
        let chunk = sampler.take_stacks();
        self.writer.append_stacks(&chunk)?;
        if let Some(stream) = &self.opts.stream {
            stream.stacks(&chunk);
        }
        self.publish_stacks(chunk);
        Ok(())
    }

    /// Hands per-interval stacks, once written, to a live view that draws them.
    pub(crate) fn publish_stacks(&self, chunk: StacksChunk) {
        if chunk.is_empty() {
            return;
        }
        if let Some(live) = self
            .opts
            .live
            .as_ref()
            .filter(|l| l.detail() == Detail::Full)
        {
            live.send(LiveEvent::IntervalStacks(Box::new(chunk)));
        }
    }

    /// Hands a written row and its histograms to the live view (its stacks come as
    /// [`LiveEvent::IntervalStacks`] chunks, which it grows its profiles from).
    fn publish(&mut self, row: &TimeseriesRow, histograms: Vec<(String, Histogram<u64>)>) {
        let Some(live) = self
            .opts
            .live
            .as_ref()
            .filter(|l| l.detail() == Detail::Full)
        else {
            return;
        };
        live.send(LiveEvent::Row {
            row: Box::new(row.clone()),
            histograms,
        });
        self.publish_allocs();
    }

    /// Saves the stacks so far (and threads.csv) into the session when the live view
    /// asked: the sampler's copy of its stacks, once it is made.
    pub(crate) fn take_stacks(&mut self) -> Result<(), RecordError> {
        let Some(live) = &self.opts.live else {
            return Ok(());
        };
        if live.take_save_request() {
            match &self.sampler {
                Some(sampler) => {
                    sampler.request_snapshot();
                    self.save_pending = true;
                }
                None => {
                    self.save_threads()?;
                    self.say(Notice::ThreadsSaved);
                }
            }
        }
        let Some(snapshot) = self
            .sampler
            .as_ref()
            .and_then(benchtop_profilers::sampler::Sampler::take_snapshot)
        else {
            return Ok(());
        };
        if std::mem::take(&mut self.save_pending) {
            let workload = &self.opts.workload;
            let mut saved = Vec::new();
            for (kind, tree) in snapshot.profiles.iter() {
                if self.opts.sampler.kind.contains(kind) {
                    let title = format!("{workload} — {} (so far)", kind.spec().flame_title);
                    self.writer.write_stacks(kind, tree, &title)?;
                    saved.push(kind.folded_file());
                }
            }
            self.save_threads()?;
            saved.push("threads.csv");
            self.say(Notice::SnapshotSaved { files: saved });
        }
        Ok(())
    }

    pub(crate) fn save_threads(&mut self) -> Result<(), RecordError> {
        if let Some(monitor) = &mut self.monitor {
            self.writer.write_threads(&monitor.threads_summary())?;
        }
        Ok(())
    }

    /// One last row once the target has exited, with what the kernel counted since the
    /// row before (the target's last moments, its children's exits): the rows' intervals
    /// then add up to the run's total. Written only for a target whose rows are the
    /// monitors' (a command that does not speak the protocol, an attached process), and
    /// only when the counts moved or no row was written at all (a command shorter than
    /// one interval).
    pub(crate) fn write_closing_row(&mut self) -> Result<(), RecordError> {
        // A target whose ticks make the rows (a worker, a program that said `hello`) ends
        // on its last tick: a row of monitors after it would be one without its counters,
        // rates and latency. Its counted total is the session's (resources.counted).
        if self.conductor.said.hello && self.data.rows > 0 {
            return Ok(());
        }
        let (Some(started), Some(counters)) = (self.data.started_at, &mut self.counters) else {
            return Ok(());
        };
        let moved = match (counters.read(), &self.data.last_counts) {
            (Ok(now), Some((before, _))) => now != *before,
            _ => true,
        };
        if !moved && self.data.rows > 0 {
            return Ok(());
        }
        let end = self.exited_at.unwrap_or_else(std::time::Instant::now);
        let end_ns = u64::try_from(end.saturating_duration_since(started).as_nanos())
            .unwrap_or(u64::MAX)
            .max(self.data.last_t_ns);
        let mut row = TimeseriesRow::default();
        row.t_s = end_ns as f64 / 1e9;
        row.interval_s = end_ns.saturating_sub(self.data.last_t_ns) as f64 / 1e9;
        self.monitor_row(&mut row, true)?;
        self.writer.append_row(&row)?;
        self.data.rows += 1;
        if let Some(stream) = &self.opts.stream {
            stream.row(&row, &[]);
        }
        self.end_stacks_interval(end_ns)?;
        self.publish(&row, Vec::new());
        self.data.last_t_ns = end_ns;
        Ok(())
    }

    /// The kernel's counts of the tree into the row's resources: the totals, the growth
    /// since the last row, and the CPU figures taken from them. A row whose tree is gone
    /// gets resources of its own (no process, no thread, the peak so far).
    fn count_row(&mut self, row: &mut TimeseriesRow) {
        let Some(counters) = &mut self.counters else {
            return;
        };
        let now = std::time::Instant::now();
        let total = match counters.read() {
            Ok(total) => total,
            Err(e) => {
                // Not seen to happen: the figures from here on are the polls'.
                self.counters = None;
                self.data.polled_reason = Some(format!(
                    "the kernel's counts of the tree could not be read, so CPU time and \
                     context switches are polled from then on: {e}"
                ));
                return;
            }
        };
        let (before, at) = self.data.last_counts.unwrap_or((
            benchtop_sessions::TreeCounts::default(),
            self.data.started_at.unwrap_or(now),
        ));
        let interval = total.since(&before);
        self.data.last_counts = Some((total, now));
        let peak = self.data.last_peak_rss;
        let res = row.resources.get_or_insert_with(|| {
            let mut r = Resources::default();
            r.peak_rss_bytes = peak;
            r
        });
        let wall = now.saturating_duration_since(at).as_secs_f64();
        res.cpu_time_s = total.cpu_time_s;
        res.cpu_percent = if wall > 0.0 {
            100.0 * interval.cpu_time_s / wall
        } else {
            0.0
        };
        res.counted_total = Some(total);
        res.counted_interval = Some(interval);
    }

    /// The monitors' part of a row: the tree's resources, per-core CPU and busiest
    /// threads, with the kernel's counts where it gives them. threads.csv is rewritten
    /// every [`THREADS_EVERY_ROWS`] rows, so a run cut off keeps a recent table.
    /// The monitors' figures into `row`. When the tree is gone (the worker exited before
    /// its last tick was read) the row goes without resources, as a row read after the
    /// end always has; only the `closing` row (after the reap) carries the kernel's
    /// counts of a gone tree.
    fn monitor_row(&mut self, row: &mut TimeseriesRow, closing: bool) -> Result<(), RecordError> {
        let Some(monitor) = &mut self.monitor else {
            return Ok(());
        };
        // Once the command has replaced its gate, the peak counts from there: the samples
        // before read the gate (benchtop itself), not the program.
        if self.data.gate_pass.is_none()
            && let Process::Child(child) = &mut self.worker
            && let Some(pass) = child.gate_pass()
        {
            monitor.restart_peak();
            self.data.gate_pass = Some(pass);
        }
        let polled = match monitor.sample() {
            Ok(sample) => {
                sample.fill_row(row, TOP_THREADS);
                self.data.last_peak_rss = sample.resources.peak_rss_bytes;
                true
            }
            Err(_) => false,
        };
        if polled || closing {
            self.count_row(row);
        }
        self.data.rows_since_threads += 1;
        if self.data.rows_since_threads >= THREADS_EVERY_ROWS {
            self.data.rows_since_threads = 0;
            self.save_threads()?;
        }
        Ok(())
    }

    fn show_progress(&self, row: &TimeseriesRow) {
        let Some(live) = self
            .opts
            .live
            .as_ref()
            .filter(|l| l.detail() == Detail::Progress)
        else {
            return;
        };
        let figures = ProgressFigures {
            elapsed_s: self
                .data
                .started_at
                .map_or(0.0, |s| s.elapsed().as_secs_f64()),
            rate: self
                .data
                .throughput_metric
                .as_ref()
                .and_then(|m| row.rates.get(m).map(|r| (m.clone(), *r))),
            latency: self
                .data
                .latency_metric
                .as_ref()
                .and_then(|m| row.latency.get(m).map(|p| (m.clone(), p.p50, p.p99))),
            rss_bytes: row.resources.map(|r| r.rss_bytes),
            samples: self.sampler.as_ref().map(|s| {
                let stats = s.stats();
                (stats.samples, stats.lost)
            }),
        };
        live.send(LiveEvent::Progress(figures));
    }
}
