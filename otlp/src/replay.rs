//! A saved session sent again, with its original times: each row as a metrics request
//! (with the latency.hlog intervals that end with it) and each interval of stacks.jsonl
//! as a profiles request, so that sessions recorded offline reach the same pipeline.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use benchtop_sessions::intervals::IntervalStacks;
use benchtop_sessions::limits::LoadOptions;
use benchtop_sessions::{Session, SessionMeta};
use hdrhistogram::Histogram;

use crate::exporter::Counts;
use crate::kinds::{BatchInterval, Sampling};
use crate::metrics::{RowTimes, metrics_request};
use crate::options::OtlpOptions;
use crate::profiles::profiles_request;
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
    for (row, histograms) in session.rows.iter().zip(&by_row) {
        let request = metrics_request(&resource, row, histograms, RowTimes::of(row, start_unix_ns));
        counts.send(&mut transport, opts, &Payload::Metrics(request), &never);
    }
    if let Some(stacks) = &stacks {
        let sampling = Sampling::of(&session.meta);
        for interval in stacks.intervals.values() {
            let batch = [BatchInterval::from_saved(interval)];
            if let Some(request) =
                profiles_request(&resource, stacks, &batch, start_unix_ns, sampling)
            {
                counts.send(&mut transport, opts, &Payload::Profiles(request), &never);
            }
        }
    }
    Ok(counts.report(opts))
}

/// Now on the wall clock, ns since the epoch.
pub fn unix_now_ns() -> u64 {
    let ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    u64::try_from(ns).unwrap_or(u64::MAX)
}
