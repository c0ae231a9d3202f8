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
use benchtop_sessions::{ByKind, Kind, Session, SessionMeta, StackTree};
use hdrhistogram::Histogram;
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::resource::v1::Resource;

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
fn session_resource(meta: &SessionMeta) -> Resource {
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
    if let Some(request) = session_allocations(&session, &resource, start_unix_ns, sampling) {
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
fn session_allocations(
    session: &Session,
    resource: &Resource,
    start_unix_ns: u64,
    sampling: Sampling,
) -> Option<ExportProfilesServiceRequest> {
    let end_s = session
        .rows
        .iter()
        .map(|r| r.t_s)
        .filter(|t| t.is_finite() && *t >= 0.0)
        .fold(0.0, f64::max);
    let peak_ns = session
        .meta
        .sampling
        .alloc
        .as_ref()
        .and_then(|a| a.peak_t_ns);
    let times = RunTimes {
        start_unix_ns,
        end_ns: (end_s.min(1e9) * 1e9) as u64,
        peak_ns,
    };
    allocations_request(&session.profiles, resource, times, sampling)
}

/// When a saved run began (wall clock), ended and peaked (ns from its start).
#[derive(Debug, Clone, Copy)]
struct RunTimes {
    start_unix_ns: u64,
    end_ns: u64,
    peak_ns: Option<u64>,
}

/// The allocation profiles of `memory` as one request (see [`session_allocations`]).
fn allocations_request(
    memory: &ByKind<Option<StackTree>>,
    resource: &Resource,
    times: RunTimes,
    sampling: Sampling,
) -> Option<ExportProfilesServiceRequest> {
    let (alloc, live) = (kind_index("alloc")?, kind_index("live")?);
    let RunTimes {
        start_unix_ns,
        end_ns,
        peak_ns,
    } = times;
    let mut stacks = FoldedStacks::default();
    let mut intervals = Vec::new();
    if let Some(tree) = &memory[Kind::Alloc] {
        let mut whole = BatchInterval {
            t0_ns: 0,
            t1_ns: end_ns.max(1),
            ..BatchInterval::default()
        };
        whole.weights[alloc] = stacks.add(tree);
        intervals.push(whole);
    }
    let mut snapshot = |tree: &StackTree, at_ns: u64| {
        let mut at = BatchInterval {
            t0_ns: at_ns,
            t1_ns: at_ns,
            ..BatchInterval::default()
        };
        at.weights[live] = stacks.add(tree);
        intervals.push(at);
    };
    if let (Some(tree), Some(peak)) = (&memory[Kind::Live], peak_ns.filter(|&p| p < end_ns)) {
        snapshot(tree, peak);
    }
    if let Some(tree) = &memory[Kind::LiveEnd] {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(lines: &[(&str, u64)]) -> StackTree {
        let mut t = StackTree::new();
        for (stack, weight) in lines {
            let frames: Vec<_> = stack.split(';').map(|f| t.intern(f)).collect();
            t.add(&frames, *weight);
        }
        t
    }

    /// (kind, folded stack, time, value) of every value a request carries.
    fn values(req: &ExportProfilesServiceRequest) -> Vec<(String, String, u64, i64)> {
        let dict = req.dictionary.as_ref().expect("dictionary");
        let s = |i: i32| dict.string_table[i as usize].clone();
        let mut out = Vec::new();
        for p in &req.resource_profiles[0].scope_profiles[0].profiles {
            let kind = s(p.sample_type.expect("type").type_strindex);
            for sample in &p.samples {
                let stack =
                    crate::profiles::folded_stack(dict, sample.stack_index).expect("a stack");
                for (&t, &v) in sample.timestamps_unix_nano.iter().zip(&sample.values) {
                    out.push((kind.clone(), stack.clone(), t, v));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_saved_run_s_allocations_go_out_whole_with_live_bytes_at_the_peak_and_the_end() {
        let mut memory = ByKind::<Option<StackTree>>::default();
        memory[Kind::Alloc] = Some(tree(&[("ring;grow", 8_192), ("ring;tick", 1_024)]));
        memory[Kind::Live] = Some(tree(&[("ring;grow", 4_096)]));
        memory[Kind::LiveEnd] = Some(tree(&[("ring;tick", 512)]));
        let times = RunTimes {
            start_unix_ns: 1_000_000,
            end_ns: 10_000,
            peak_ns: Some(4_000),
        };
        let sampling = Sampling {
            alloc_rate: 4_096,
            ..Sampling::default()
        };
        let req = allocations_request(&memory, &Resource::default(), times, sampling)
            .expect("allocations");
        let at = |ns: u64| 1_000_000 + ns;
        assert_eq!(
            values(&req),
            [
                ("alloc_space".into(), "ring;grow".into(), at(5_000), 8_192),
                ("alloc_space".into(), "ring;tick".into(), at(5_000), 1_024),
                ("inuse_space".into(), "ring;grow".into(), at(4_000), 4_096),
                ("inuse_space".into(), "ring;tick".into(), at(10_000), 512),
            ]
        );
        // Without the peak's time (an older session), or a peak at the end, the end only.
        for peak_ns in [None, Some(10_000)] {
            let times = RunTimes { peak_ns, ..times };
            let req = allocations_request(&memory, &Resource::default(), times, sampling)
                .expect("allocations");
            let live: Vec<_> = values(&req)
                .into_iter()
                .filter(|v| v.0 == "inuse_space")
                .collect();
            assert_eq!(
                live,
                [("inuse_space".into(), "ring;tick".into(), at(10_000), 512)]
            );
        }
        // A session without allocation profiles sends none.
        let none = ByKind::<Option<StackTree>>::default();
        assert!(allocations_request(&none, &Resource::default(), times, sampling).is_none());
    }
}
