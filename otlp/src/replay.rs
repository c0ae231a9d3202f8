//! A saved session sent again, with its original times: each row as a metrics request
//! (with the latency.hlog intervals that end with it), each interval of stacks.jsonl as a
//! profiles request, and a built-in worker's allocation profiles as one more, so that
//! sessions recorded offline reach the same pipeline.
//!
//! A session keeps its allocation profiles for the whole run only (alloc.folded,
//! live.folded, live-end.folded), so they go out as the run's: the bytes allocated over
//! the run (stamped with its middle), and the live bytes at the peak (at its tick, when
//! session.json says when it was) and at the end (at the last row).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use benchtop_sessions::intervals::IntervalStacks;
use benchtop_sessions::limits::LoadOptions;
use benchtop_sessions::{Session, SessionMeta, StackTree};
use hdrhistogram::Histogram;

use crate::exporter::Counts;
use crate::kinds::{BatchInterval, Sampling, kind_index};
use crate::metrics::{RowTimes, metrics_request};
use crate::options::OtlpOptions;
use crate::profiles::{StackSource, profiles_request};
use crate::resource::resource;
use crate::transport::{Payload, Transport};
use crate::{OtlpError, Report};

/// The run's start on the wall clock: the session's `started_at` plus the offset of its
/// first latency interval (the run starts measuring a moment after the session is
/// created); `started_at` alone for a session without latency.
fn run_start_unix_ns(session: &Session) -> Result<(u64, f64), OtlpError> {
    let started = humantime::parse_rfc3339_weak(&session.meta.started_at).map_err(|e| {
        OtlpError::Session(format!(
            "{}: started_at {:?} is not an RFC 3339 time: {e}",
            session.dir.display(),
            session.meta.started_at
        ))
    })?;
    let offset_s = session
        .latency
        .iter()
        .map(|i| i.start_offset_s)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .fold(f64::INFINITY, f64::min);
    let offset_s = if offset_s.is_finite() { offset_s } else { 0.0 };
    let start = started + Duration::from_secs_f64(offset_s.min(86_400.0));
    let ns = start
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    Ok((u64::try_from(ns).unwrap_or(u64::MAX), offset_s))
}

/// The resource of a saved session.
fn session_resource(meta: &SessionMeta) -> opentelemetry_proto::tonic::resource::v1::Resource {
    resource(meta, meta.worker.pid)
}

/// Sends the session in `dir` to the collector `opts` names; the report says what went
/// and what was dropped (after the retries `opts` allows).
pub fn replay(dir: &Path, opts: &OtlpOptions) -> Result<Report, OtlpError> {
    let session =
        Session::load(dir).map_err(|e| OtlpError::Session(format!("{}: {e}", dir.display())))?;
    let load = LoadOptions::from_env().map_err(|e| OtlpError::Session(e.to_string()))?;
    let stacks = IntervalStacks::load(dir, &load)
        .map_err(|e| OtlpError::Session(format!("{}: {e}", dir.display())))?;
    let (start_unix_ns, offset_s) = run_start_unix_ns(&session)?;
    let resource = session_resource(&session.meta);
    let mut transport = Transport::new(opts)?;
    let counts = Counts::default();
    let never = AtomicBool::new(false);
    // Each latency interval goes with the row whose end is nearest its own.
    let mut by_row: Vec<Vec<(String, Histogram<u64>)>> = vec![Vec::new(); session.rows.len()];
    for interval in &session.latency {
        let end_s = interval.start_offset_s - offset_s + interval.length_s;
        let nearest = session
            .rows
            .iter()
            .enumerate()
            .min_by(|(_, a), (_, b)| (a.t_s - end_s).abs().total_cmp(&(b.t_s - end_s).abs()))
            .map(|(i, _)| i);
        if let Some(i) = nearest {
            by_row[i].push((interval.tag.clone(), interval.histogram.to_histogram()));
        }
    }
    let sampling = Sampling::of(&session.meta);
    for (row, histograms) in session.rows.iter().zip(&by_row) {
        let request = metrics_request(&resource, row, histograms, RowTimes::of(row, start_unix_ns));
        counts.send(&mut transport, opts, &Payload::Metrics(request), &never);
    }
    if let Some(stacks) = &stacks {
        for interval in stacks.intervals.values() {
            let batch = [BatchInterval::from_saved(interval)];
            if let Some(request) =
                profiles_request(&resource, stacks, &batch, start_unix_ns, sampling)
            {
                counts.send(&mut transport, opts, &Payload::Profiles(request), &never);
            }
        }
    }
    if let Some(request) = allocations_request(&session, &resource, start_unix_ns, sampling) {
        counts.send(&mut transport, opts, &Payload::Profiles(request), &never);
    }
    Ok(counts.report(opts))
}

/// Stacks of folded profiles, by the order they were added.
#[derive(Debug, Default)]
struct FoldedStacks {
    /// Each stack's frames, root first.
    paths: Vec<Vec<String>>,
}

impl FoldedStacks {
    /// The (thread 0, stack, weight) of `tree`'s stacks, each added.
    fn add(&mut self, tree: &StackTree) -> Vec<(u32, u32, u64)> {
        let mut weights = Vec::new();
        tree.for_each_stack(|frames, weight| {
            let id = u32::try_from(self.paths.len()).unwrap_or(u32::MAX);
            self.paths
                .push(frames.iter().map(|&f| tree.name(f).to_owned()).collect());
            weights.push((0, id, weight));
        });
        weights
    }
}

impl StackSource for FoldedStacks {
    fn frames<'a>(&'a self, id: u32, out: &mut Vec<&'a str>) {
        if let Some(path) = self.paths.get(id as usize) {
            out.extend(path.iter().rev().map(String::as_str));
        }
    }

    fn thread(&self, _tid: u32) -> Option<&str> {
        None
    }
}

/// The session's allocation profiles as one request: alloc.folded over the run,
/// live.folded at the peak's tick (when session.json says when it was, and it was before
/// the last row) and live-end.folded at the last row, so the bytes per stack a collector
/// receives are the folded files'. `None` for a session without them.
fn allocations_request(
    session: &Session,
    resource: &opentelemetry_proto::tonic::resource::v1::Resource,
    start_unix_ns: u64,
    sampling: Sampling,
) -> Option<
    opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest,
> {
    let memory = &session.memory;
    let (alloc, live) = (kind_index("alloc")?, kind_index("live")?);
    let end_ns = session
        .rows
        .iter()
        .map(|r| r.t_s)
        .filter(|t| t.is_finite() && *t >= 0.0)
        .fold(0.0, f64::max);
    let end_ns = (end_ns.min(1e9) * 1e9) as u64;
    let mut stacks = FoldedStacks::default();
    let mut intervals = Vec::new();
    if let Some(tree) = &memory.alloc {
        let mut whole = BatchInterval {
            t0_ns: 0,
            t1_ns: end_ns.max(1),
            ..BatchInterval::default()
        };
        whole.weights[alloc] = stacks.add(tree);
        intervals.push(whole);
    }
    let peak_ns = session
        .meta
        .sampling
        .alloc
        .as_ref()
        .and_then(|a| a.peak_t_ns);
    let mut snapshot = |tree: &StackTree, at_ns: u64| {
        let mut at = BatchInterval {
            t0_ns: at_ns,
            t1_ns: at_ns,
            ..BatchInterval::default()
        };
        at.weights[live] = stacks.add(tree);
        intervals.push(at);
    };
    if let (Some(tree), Some(peak)) = (&memory.live, peak_ns.filter(|&p| p < end_ns)) {
        snapshot(tree, peak);
    }
    if let Some(tree) = &memory.live_end {
        snapshot(tree, end_ns);
    }
    profiles_request(resource, &stacks, &intervals, start_unix_ns, sampling)
}

/// Now on the wall clock, ns since the epoch.
pub fn unix_now_ns() -> u64 {
    let ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    u64::try_from(ns).unwrap_or(u64::MAX)
}
