//! What the live run screen shows, accumulated from the recorder's events: the run's
//! identity and status, the throughput series, the latency histogram of the whole run
//! (binned when data arrives, not per frame), resources, and the stacks.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Instant;

use benchtop_sessions::histogram::Total;
use benchtop_sessions::sparse::SparseHistogram;
use benchtop_sessions::{Resources, Status, TimeseriesRow};
use hdrhistogram::Histogram;

/// Points kept in the throughput and RSS series: an hour at the default 1 s interval.
const MAX_POINTS: usize = 3600;
/// Latency bins of the histogram pane: log-scaled, a few per decade.
pub const LATENCY_BINS_PER_DECADE: u32 = 4;

/// Where the run is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RunStatus {
    /// The worker is being started (hello, ready).
    #[default]
    Starting,
    /// Measured work is running.
    Running,
    /// A stop was asked for; the worker is finishing.
    Stopping,
    /// The recording is over: the session's final status.
    Finished(Status),
    /// The recording could not be made at all.
    Failed(String),
}

impl RunStatus {
    /// The word the header shows.
    pub fn label(&self) -> String {
        match self {
            RunStatus::Starting => "starting".into(),
            RunStatus::Running => "running".into(),
            RunStatus::Stopping => "stopping".into(),
            RunStatus::Finished(status) => status.to_string(),
            RunStatus::Failed(_) => "failed".into(),
        }
    }

    /// The recording is over (finished or failed).
    pub fn is_over(&self) -> bool {
        matches!(self, RunStatus::Finished(_) | RunStatus::Failed(_))
    }
}

/// Percentiles of a latency histogram, in its unit (ns).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest value.
    pub max: u64,
}

impl LatencySummary {
    /// The percentiles of `h`.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// One bar of the latency histogram: values in `[low, high)`, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyBin {
    /// Lowest value of the bin.
    pub low: u64,
    /// First value past the bin.
    pub high: u64,
    /// Values recorded in it.
    pub count: u64,
}

/// The latency histogram of the whole run so far, and its bins.
#[derive(Debug, Clone, Default)]
pub struct Latency {
    /// The metric's name (`lap`, `rtt`…).
    pub metric: String,
    /// Every interval so far, merged.
    pub total: Total,
    /// The last interval's percentiles.
    pub last: LatencySummary,
    /// The whole run's percentiles.
    pub run: LatencySummary,
    /// Log-scaled bins of the whole run, from the lowest to the highest non-empty bin.
    pub bins: Vec<LatencyBin>,
}

impl Latency {
    /// Adds one interval's histogram, then recomputes percentiles and bins.
    pub fn add(&mut self, interval: &Histogram<u64>) {
        self.last = LatencySummary::of(interval);
        // An interval left out (past the cap, or not fitting) leaves the run's figures as
        // they were.
        if self.total.add(interval).is_err() {
            return;
        }
        if let Some(total) = self.total.histogram() {
            self.run = LatencySummary::of(total);
            self.bins = log_bins(total);
        }
    }
}

impl Latency {
    /// The latency of a recorded session's intervals of one metric, in order: merged into
    /// one total first, its percentiles and bins computed once (not after each interval,
    /// as a live run's are), the last interval's percentiles as `last`.
    pub fn of_intervals<'a>(
        metric: String,
        intervals: impl IntoIterator<Item = &'a SparseHistogram>,
    ) -> Latency {
        let mut latency = Latency {
            metric,
            ..Latency::default()
        };
        let mut last = None;
        for interval in intervals {
            last = Some(interval);
            // An interval left out (past the cap, or not fitting) leaves the run's figures
            // as they were.
            let _ = latency.total.add_sparse(interval);
        }
        if let Some(last) = last {
            latency.last = LatencySummary::of(&last.to_histogram());
        }
        if let Some(total) = latency.total.histogram() {
            latency.run = LatencySummary::of(total);
            latency.bins = log_bins(total);
        }
        latency
    }
}

/// Bins `h` into `LATENCY_BINS_PER_DECADE` log-scaled bins per decade, from the bin of
/// its lowest value to the bin of its highest.
pub fn log_bins(h: &Histogram<u64>) -> Vec<LatencyBin> {
    if h.is_empty() {
        return Vec::new();
    }
    let step = 10f64.powf(1.0 / f64::from(LATENCY_BINS_PER_DECADE));
    let index = |v: u64| ((v.max(1) as f64).log10() * f64::from(LATENCY_BINS_PER_DECADE)).floor();
    let lo_i = index(h.min());
    let hi_i = index(h.max());
    let n = (hi_i - lo_i) as usize + 1;
    let mut bins: Vec<LatencyBin> = (0..n)
        .map(|i| {
            let low = step.powf(lo_i + i as f64).round() as u64;
            let high = step.powf(lo_i + i as f64 + 1.0).round() as u64;
            LatencyBin {
                low,
                high: high.max(low + 1),
                count: 0,
            }
        })
        .collect();
    for v in h.iter_recorded() {
        let i = (index(v.value_iterated_to()) - lo_i).clamp(0.0, (n - 1) as f64) as usize;
        bins[i].count += v.count_at_value();
    }
    bins
}

/// How a chart labels its time axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeAxis {
    /// Live: `-60s … now`.
    BeforeNow,
    /// A recorded session: seconds since its start, `0s … 42s`.
    SinceStart,
}

/// The live run: what the recorder told so far.
#[derive(Debug, Default)]
pub struct LiveRun {
    /// Workload name.
    pub workload: String,
    /// Its parameters, `name=value` separated by spaces.
    pub params: String,
    /// The session directory, once created.
    pub dir: Option<PathBuf>,
    /// The worker's pid.
    pub pid: Option<u32>,
    /// Where the run is.
    pub status: RunStatus,
    /// What ended it, once finished complete and not by the workload itself.
    pub ended_by: Option<benchtop_sessions::EndedBy>,
    /// The last status line of the recorder.
    pub status_line: String,
    /// When measured work started (for the elapsed time).
    pub started_at: Option<Instant>,
    /// When the recording ended.
    pub ended_at: Option<Instant>,
    /// The event sampling runs on, and its frequency.
    pub sampling: String,
    /// Shown from a recorded session (`open`), not live: its charts read times since
    /// its start, not `-60s … now`, and its rates are the run's mean and peak.
    pub recorded: bool,
    /// The counter shown as throughput.
    pub throughput_metric: Option<String>,
    /// Every interval's throughput seen, whatever the window: (sum, count, peak).
    pub rates_seen: (f64, u64, f64),
    /// Throughput: (seconds since start, per second).
    pub throughput: VecDeque<(f64, f64)>,
    /// The latency metric of the run.
    pub latency: Latency,
    /// The last resources sample of the tree.
    pub resources: Option<Resources>,
    /// RSS over time: (seconds since start, bytes).
    pub rss: VecDeque<(f64, f64)>,
    /// A built-in worker's live bytes and allocation rate (bytes/s) in the last interval,
    /// from its counting allocator.
    pub allocation: Option<(u64, Option<f64>)>,
    /// Per-core CPU of the machine, percent.
    pub cpu_per_core: Vec<f64>,
    /// The busiest threads of the last interval: (process, thread, CPU %).
    pub top_threads: Vec<(String, String, f64)>,
    /// The run is of a program benchtop does not know (a command, an attached process),
    /// not of a built-in workload.
    pub program: bool,
    /// The program was attached to (`attach PID`, the launcher's process picker): the
    /// end of the recording detaches from it and leaves it running.
    pub attached: bool,
    /// The process tree's CPU, context switches and samples per second.
    pub activity: super::activity::Activity,
    /// What the run's stream to a collector (`--otlp`) dropped, as last told.
    pub stream_drops: Option<benchtop_record::StreamDrops>,
}

impl LiveRun {
    /// Adds one interval.
    pub fn add_row(&mut self, row: &TimeseriesRow, histograms: &[(String, Histogram<u64>)]) {
        self.activity.add_row(row);
        if let Some(rate) = self
            .throughput_metric
            .as_ref()
            .and_then(|m| row.rates.get(m))
        {
            push_bounded(&mut self.throughput, (row.t_s, *rate));
            let (sum, n, peak) = &mut self.rates_seen;
            *sum += *rate;
            *n += 1;
            *peak = peak.max(*rate);
        }
        let wanted = (!self.latency.metric.is_empty()).then_some(self.latency.metric.as_str());
        if let Some((name, h)) = histograms
            .iter()
            .find(|(name, _)| wanted.is_none_or(|w| w == name))
        {
            if self.latency.metric.is_empty() {
                self.latency.metric.clone_from(name);
            }
            self.latency.add(h);
        }
        if let Some(r) = row.resources {
            push_bounded(&mut self.rss, (row.t_s, r.rss_bytes as f64));
            self.resources = Some(r);
        }
        if let Some(&live) = row.counters.get(benchtop_protocol::LIVE_BYTES) {
            let rate = row.rates.get(benchtop_protocol::ALLOC_BYTES).copied();
            self.allocation = Some((live, rate));
        }
        if !row.cpu_percent_per_core.is_empty() {
            self.cpu_per_core.clone_from(&row.cpu_percent_per_core);
        }
        self.top_threads = row
            .top_threads
            .iter()
            .map(|t| (t.process.clone(), t.thread.clone(), t.cpu_percent))
            .collect();
    }

    /// Whether the screen shows the process tree's activity in place of throughput and
    /// latency: a program that names neither (one speaking the report protocol is shown
    /// as a workload is).
    pub fn shows_activity(&self) -> bool {
        self.program && self.throughput_metric.is_none() && self.latency.metric.is_empty()
    }

    /// How the header names the status: an attached process is detached from, not
    /// stopped; a run the duration ended is `complete (duration reached)`.
    pub fn status_label(&self) -> String {
        match self.status {
            RunStatus::Stopping if self.attached => "detaching".into(),
            RunStatus::Finished(status) => benchtop_sessions::status_words(status, self.ended_by),
            _ => self.status.label(),
        }
    }

    /// The highest throughput of any interval of the run, whatever the window shows.
    pub fn peak_rate(&self) -> Option<f64> {
        (self.rates_seen.1 > 0).then_some(self.rates_seen.2)
    }

    /// The mean of the intervals' throughput.
    pub fn mean_rate(&self) -> Option<f64> {
        let (sum, n, _) = self.rates_seen;
        (n > 0).then(|| sum / n as f64)
    }

    /// How charts label time: since the session's start when it was opened, before now
    /// when live.
    pub fn time_axis(&self) -> TimeAxis {
        if self.recorded {
            TimeAxis::SinceStart
        } else {
            TimeAxis::BeforeNow
        }
    }

    /// The latest throughput.
    pub fn current_rate(&self) -> Option<f64> {
        self.throughput.back().map(|&(_, r)| r)
    }
}

/// The baseline a saved session gives: its stacks and the latency of its first metric.
pub fn session_baseline(mut session: benchtop_sessions::Session) -> super::Baseline {
    let tag = session.latency.first().map(|i| i.tag.clone());
    let latency = Latency::of_intervals(
        String::new(),
        session
            .latency
            .iter()
            .filter(|i| Some(&i.tag) == tag.as_ref())
            .map(|i| &i.histogram),
    );
    super::Baseline {
        stacks: std::mem::take(&mut session.profiles),
        latency: latency.run,
        source: format!("from {}", session.dir.display()),
    }
}

/// The `name=value …` line of a run's parameters, as the header shows them.
pub fn params_text(params: &std::collections::BTreeMap<String, serde_json::Value>) -> String {
    params
        .iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            v => format!("{k}={v}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn push_bounded<T>(series: &mut VecDeque<T>, item: T) {
    if series.len() == MAX_POINTS {
        series.pop_front();
    }
    series.push_back(item);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn bins_are_log_scaled_and_hold_every_value() {
        let h = histogram(&[1_000, 1_100, 10_000, 100_000, 100_000, 1_000_000]);
        let bins = log_bins(&h);
        // 1 µs to 1 ms: three decades, four bins each, plus the bin of 1 ms itself.
        assert_eq!(bins.len(), 13, "{bins:?}");
        assert_eq!(bins.iter().map(|b| b.count).sum::<u64>(), 6);
        assert_eq!(bins[0].count, 2, "1000 and 1100 share the first bin");
        for pair in bins.windows(2) {
            assert_eq!(pair[0].high, pair[1].low);
            let ratio = pair[1].low as f64 / pair[0].low as f64;
            assert!((ratio - 10f64.powf(0.25)).abs() < 0.01, "{ratio}");
        }
    }

    #[test]
    fn a_later_slower_interval_still_counts_in_the_run() {
        // Decoded intervals are compacted to their own range, as the recorder sends them.
        let decode = |values: &[u64]| {
            let encoded = benchtop_workloads::protocol::encode_histogram(&histogram(values));
            benchtop_sessions::histogram::HistogramDecoder::new()
                .decode(&encoded)
                .expect("decode")
        };
        let mut latency = Latency::default();
        latency.add(&decode(&[1_000, 2_000]));
        latency.add(&decode(&[5_000_000_000]));
        assert_eq!(latency.run.count, 3);
        assert!(latency.run.max >= 4_990_000_000, "{:?}", latency.run);
    }

    #[test]
    fn a_run_the_duration_ended_is_labelled_so_and_an_attached_one_detaches() {
        let mut run = LiveRun {
            status: RunStatus::Finished(benchtop_sessions::Status::Complete),
            ended_by: Some(benchtop_sessions::EndedBy::Duration),
            ..LiveRun::default()
        };
        assert_eq!(run.status_label(), "complete (duration reached)");
        run.ended_by = None;
        assert_eq!(run.status_label(), "complete");
        run.status = RunStatus::Stopping;
        run.attached = true;
        assert_eq!(run.status_label(), "detaching");
    }

    #[test]
    fn an_empty_histogram_has_no_bins() {
        assert!(log_bins(&histogram(&[])).is_empty());
    }

    #[test]
    fn intervals_merge_into_the_run_and_the_last_is_kept_apart() {
        let mut latency = Latency::default();
        latency.add(&histogram(&[100, 200]));
        latency.add(&histogram(&[10_000]));
        assert_eq!(latency.run.count, 3);
        assert_eq!(latency.last.count, 1);
        assert!(latency.run.max >= 10_000 && latency.last.p50 >= 9_990);
    }

    #[test]
    fn rows_feed_throughput_latency_and_resources() {
        let mut run = LiveRun {
            throughput_metric: Some("messages".into()),
            ..LiveRun::default()
        };
        let mut row = TimeseriesRow::default();
        row.t_s = 1.0;
        row.rates.insert("messages".into(), 5e6);
        row.resources = Some(Resources::default());
        row.cpu_percent_per_core = vec![50.0, 25.0];
        run.add_row(&row, &[("lap".into(), histogram(&[1_000]))]);
        assert_eq!(run.current_rate(), Some(5e6));
        assert_eq!(run.latency.metric, "lap");
        assert_eq!(run.latency.run.count, 1);
        assert_eq!(run.cpu_per_core, [50.0, 25.0]);
        assert_eq!(run.rss.len(), 1);
    }
}
