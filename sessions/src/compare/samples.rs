//! What a session offers a comparison: per-interval series with their weights, the
//! latency intervals of each metric, whole-run values and single values.

use std::collections::{BTreeMap, HashMap};

use super::judge::{QUANTILES, Run};
use crate::Session;
use crate::meta::Better;
use crate::sparse::SparseHistogram;

/// A session's samples: per-interval series, whole-run values, single values.
#[derive(Default)]
pub(crate) struct Samples<'a> {
    /// The non-empty latency intervals of each metric.
    pub(crate) intervals: BTreeMap<String, Vec<&'a SparseHistogram>>,
    /// Per-interval samples by figure name, in a stable order, each weighted by its
    /// interval's length (a short last interval counts for what it is).
    pub(crate) series: BTreeMap<String, Run>,
    /// Unit and better direction by figure name.
    pub(crate) kinds: HashMap<String, (String, Option<Better>)>,
    /// The whole run's value, where it is not the mean of the intervals (percentiles).
    pub(crate) whole: HashMap<String, f64>,
    /// One value per session: name → (value, unit, better).
    pub(crate) single: BTreeMap<String, (f64, String, Option<Better>)>,
    /// The latency percentiles: figure name → (metric, index into `QUANTILES`).
    pub(crate) percentiles: HashMap<String, (String, usize)>,
    /// The run's `--duration`, when it was given one, seconds.
    pub(crate) duration_s: Option<f64>,
    /// What a ring's `lap` histogram timed ([`lap_version`]); `None` for other workloads.
    pub(crate) lap_version: Option<u64>,
}

/// The ring's lap definition today, as its `LAP_VERSION` (this crate does not depend on
/// the workloads'): one value per round of the message forward, in every mode.
const LAP_VERSION: u64 = 2;

/// What a ring session's `lap` histogram timed: its `lap-version` parameter, else 1 for
/// an ask-mode ring recorded before there was one (it timed the replies' passes at node 0
/// too, two values a round); tell mode's laps never changed and carry no version. `None`
/// for other workloads.
pub(crate) fn lap_version(workload: &crate::meta::WorkloadInfo) -> Option<u64> {
    if workload.name != "ring" {
        return None;
    }
    let param = |key: &str| workload.params.get(key);
    match param("lap-version").and_then(serde_json::Value::as_u64) {
        Some(version) => Some(version),
        None if param("mode").and_then(serde_json::Value::as_str) == Some("ask") => Some(1),
        None => Some(LAP_VERSION),
    }
}

impl<'a> Samples<'a> {
    pub(crate) fn of(s: &'a Session) -> Samples<'a> {
        let mut out = Samples {
            lap_version: lap_version(&s.meta.workload),
            ..Samples::default()
        };
        let push = |out: &mut Samples, name: String, unit: &str, better, v: f64, w: f64| {
            out.kinds
                .entry(name.clone())
                .or_insert_with(|| (unit.to_owned(), better));
            out.series.entry(name).or_default().push((v, w));
        };
        for row in &s.rows {
            let w = if row.interval_s.is_finite() && row.interval_s > 0.0 {
                row.interval_s
            } else {
                1.0
            };
            for (counter, rate) in &row.rates {
                push(
                    &mut out,
                    format!("{counter}/s"),
                    "/s",
                    counter_better(counter),
                    *rate,
                    w,
                );
            }
            // A built-in worker's bytes live (a level, judged per interval as RSS is).
            if let Some(&live) = row.counters.get(benchtop_protocol_live_bytes()) {
                push(
                    &mut out,
                    "live bytes".into(),
                    "bytes",
                    Some(Better::Lower),
                    live as f64,
                    w,
                );
            }
            if let Some(r) = &row.resources {
                push(
                    &mut out,
                    "RSS".into(),
                    "bytes",
                    Some(Better::Lower),
                    r.rss_bytes as f64,
                    w,
                );
                push(
                    &mut out,
                    "threads".into(),
                    "",
                    None,
                    f64::from(r.threads),
                    w,
                );
                push(
                    &mut out,
                    "CPU".into(),
                    "%",
                    Some(Better::Lower),
                    r.cpu_percent,
                    w,
                );
                if let Some(ctx) = r.ctx_switches_interval
                    && row.interval_s > 0.0
                {
                    let per_s = (ctx.voluntary + ctx.involuntary) as f64 / row.interval_s;
                    push(
                        &mut out,
                        "context switches/s".into(),
                        "/s",
                        Some(Better::Lower),
                        per_s,
                        w,
                    );
                }
            }
        }
        // Latency percentiles of each interval of latency.hlog; the whole run's from the
        // merged histogram.
        for interval in &s.latency {
            let h = &interval.histogram;
            if h.is_empty() {
                continue;
            }
            out.intervals
                .entry(tag_name(&interval.tag).to_owned())
                .or_default()
                .push(h);
            for (i, (q_name, q)) in QUANTILES.into_iter().enumerate() {
                let name = format!("{} {q_name}", tag_name(&interval.tag));
                out.percentiles
                    .entry(name.clone())
                    .or_insert_with(|| (tag_name(&interval.tag).to_owned(), i));
                let v = if q >= 1.0 {
                    h.max()
                } else {
                    h.value_at_quantile(q)
                };
                push(&mut out, name, "ns", Some(Better::Lower), v as f64, 1.0);
            }
        }
        let mut notes = Vec::new();
        for (tag, h) in s.merged_latency(&mut notes) {
            for (q_name, q) in QUANTILES {
                let v = if q >= 1.0 {
                    h.max()
                } else {
                    h.value_at_quantile(q)
                };
                out.whole
                    .insert(format!("{} {q_name}", tag_name(tag)), v as f64);
            }
        }
        // The program's own (session.json's), else the rows' peak (older sessions). A
        // peak of 0 is none: a run that ended before its first poll (a closing row of a
        // gone tree reads 0) has no peak to judge.
        if let Some(peak) = s
            .meta
            .resources
            .as_ref()
            .and_then(|i| i.peak_rss_bytes)
            .or(s
                .rows
                .iter()
                .filter_map(|r| {
                    r.resources.map(|r| match r.tree_peak_rss_bytes {
                        Some(_) => r.peak_rss_bytes,
                        // Older rows mixed the tree's sum into their peak.
                        None => r.peak_rss_bytes.max(r.rss_bytes),
                    })
                })
                .max())
            .filter(|&peak| peak > 0)
        {
            out.single.insert(
                "peak RSS".into(),
                (peak as f64, "bytes".into(), Some(Better::Lower)),
            );
        }
        for f in &s.meta.summary {
            out.single
                .insert(f.name.clone(), (f.value, f.unit.clone(), f.better));
        }
        out.duration_s = requested_duration(&s.meta.command_line);
        out
    }
}

/// The `--duration` of a recorded command line (`--duration 2s` or `--duration=2s`), in
/// seconds; the words after a lone `--` are a command's own and are not read.
fn requested_duration(words: &[String]) -> Option<f64> {
    let mut words = words.iter().take_while(|w| *w != "--");
    while let Some(w) = words.next() {
        let value = if w == "--duration" {
            words.next().map(String::as_str)
        } else {
            w.strip_prefix("--duration=")
        };
        if let Some(value) = value {
            return humantime::parse_duration(value)
                .ok()
                .map(|d| d.as_secs_f64());
        }
    }
    None
}

/// The runs of a side whose wall time is over twice their CPU time's ratio to it at the
/// side's median (a descheduled run): each run's index and its wall-to-CPU ratio. A run's
/// wall time is its last row's time (or its `wall_time_s`), its CPU time the worker's.
pub(crate) fn disturbed(runs: &[&Session]) -> Vec<(usize, f64)> {
    let ratios: Vec<Option<f64>> = runs
        .iter()
        .map(|s| {
            let cpu = s.meta.worker.cpu_time_s.filter(|c| *c > 0.0)?;
            let wall = s
                .meta
                .summary
                .iter()
                .find(|f| f.name == "wall_time_s")
                .map(|f| f.value)
                .or_else(|| s.rows.last().map(|r| r.t_s))?;
            (wall.is_finite() && wall > 0.0).then_some(wall / cpu)
        })
        .collect();
    let mut known: Vec<f64> = ratios.iter().flatten().copied().collect();
    if known.len() < 3 {
        return Vec::new();
    }
    known.sort_by(f64::total_cmp);
    let median = known[known.len() / 2];
    ratios
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.filter(|r| *r > 2.0 * median).map(|r| (i, r)))
        .collect()
}

/// The tick counter of a worker's live bytes (`live_bytes` in the report protocol; this
/// crate does not depend on the protocol's).
fn benchtop_protocol_live_bytes() -> &'static str {
    "live_bytes"
}

pub(crate) fn tag_name(tag: &str) -> &str {
    if tag.is_empty() { "latency" } else { tag }
}

/// Which way a counter's rate is better: higher for the workload's own counts, lower for
/// a built-in worker's allocation rate, and not judged for its frees (they follow the
/// allocations).
fn counter_better(counter: &str) -> Option<Better> {
    match counter {
        "alloc_bytes" | "allocs" => Some(Better::Lower),
        "free_bytes" | "frees" => None,
        _ => Some(Better::Higher),
    }
}
