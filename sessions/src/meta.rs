//! session.json: what was run, where, by which benchtop, and how it ended.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use benchtop_profile::sampling::{
    AllocSamplingInfo, HostInfo, MemSamplingInfo, PerfAccess, SamplingInfo, UnwindingInfo,
};

/// The content of session.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SessionMeta {
    /// Format version of the session directory, [`crate::SCHEMA_VERSION`] when written.
    pub schema_version: u32,
    /// Unique id, also the default directory name: `<yyyymmdd>-<hhmmss>-<workload>`.
    pub id: String,
    /// A name for people; the id unless given.
    pub name: String,
    /// The workload and its parameters.
    pub workload: WorkloadInfo,
    /// The conductor's command line, program first.
    pub command_line: Vec<String>,
    /// The machine it ran on.
    pub host: HostInfo,
    /// `CARGO_PKG_VERSION` of the benchtop that recorded it.
    pub benchtop_version: String,
    /// Start of the run, RFC 3339 UTC.
    pub started_at: String,
    /// End of the run, RFC 3339 UTC; `None` while recording.
    #[serde(default)]
    pub ended_at: Option<String>,
    /// How the run ended.
    pub status: Status,
    /// What ended a complete run that the workload did not end itself: `"duration"` when
    /// `--duration` elapsed. Absent otherwise, and in sessions recorded before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<EndedBy>,
    /// Why the recording failed, with [`Status::Failed`]; absent otherwise (and in every
    /// session recorded before failures were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// How stacks were sampled.
    pub sampling: SamplingInfo,
    /// The worker process.
    #[serde(default)]
    pub worker: WorkerInfo,
    /// The workload's own result figures, in the order it printed them.
    #[serde(default)]
    pub summary: Vec<Figure>,
    /// Everything a reader should know that went wrong or was left out.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The timed phases of a workload made of phases (e.g. `defs`), in the order they
    /// ended; empty for other workloads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseInfo>,
    /// Where the run's profiles and figures were streamed as OTLP (`--otlp`), and what
    /// arrived; absent when they were not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp: Option<OtlpInfo>,
    /// How the process tree's resources were measured, and what the kernel counted for
    /// the whole run; absent in sessions recorded before they were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesInfo>,
    /// The user's labels (`--label key=value`), by key; empty when none were given.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The git commit checked out where the run was started; absent outside a checkout,
    /// without git, and in sessions recorded before it was picked up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitInfo>,
}

/// The git commit checked out in the directory a run was started from: what a history
/// orders its points by when no `--order-by` label is given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GitInfo {
    /// The commit's full hash.
    pub commit: String,
    /// Its committer date, RFC 3339 UTC.
    pub committed_at: String,
}

impl GitInfo {
    /// The commit `commit` committed at `committed_at` (RFC 3339).
    pub fn new(commit: impl Into<String>, committed_at: impl Into<String>) -> Self {
        GitInfo {
            commit: commit.into(),
            committed_at: committed_at.into(),
        }
    }
}

/// session.json's `resources`: whether the tree's CPU time, context switches and page
/// faults were counted by the kernel for every thread and process the run started (at
/// their exit, however short they lived) or only polled from /proc each interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResourcesInfo {
    /// Every one of them counted: CPU time, context switches and page faults.
    pub exact: bool,
    /// What the kernel counted over the whole run; `None` when nothing was (polled only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<crate::TreeCounts>,
    /// Why some or all figures are polled; `None` when `exact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The program's peak resident set size: the largest peak of any one process of the
    /// tree (what `/usr/bin/time -v` calls the maximum resident set size), bytes, from
    /// the program's exec on: benchtop's exec gate is not counted. `None` in sessions
    /// recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    /// How `peak_rss_bytes` was had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_from: Option<PeakFrom>,
}

/// How a session's peak resident set size was had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PeakFrom {
    /// The kernel's account when the tree exited (wait4's `ru_maxrss` of the command
    /// and the children it waited for, larger than anything before the exec could
    /// be): exact, peaks between two polls and in the last moments included.
    Exit,
    /// VmHWM read at each interval: a process that lived between two polls, or a peak
    /// reached after the last one, is missed.
    Polled,
}

/// A run's OTLP stream as session.json records it: the options without the values of
/// the headers (tokens), and what was sent and dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OtlpInfo {
    /// The collector's endpoint.
    pub endpoint: String,
    /// `grpc` or `http/protobuf`.
    pub protocol: String,
    /// The names of the headers sent (their values are not recorded).
    #[serde(default)]
    pub headers: Vec<String>,
    /// Requests the collector took.
    #[serde(default)]
    pub requests: u64,
    /// Their protobuf bytes.
    #[serde(default)]
    pub bytes: u64,
    /// Batches that did not arrive (the warnings say why).
    #[serde(default)]
    pub dropped: u64,
    /// The bound in bytes of what the export held queued (absent in older sessions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_bytes: Option<u64>,
    /// The most bytes the export held queued at once, never above `queue_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_peak_bytes: Option<u64>,
}

impl SessionMeta {
    /// [`status_words`] of this session: `complete (duration reached)`.
    pub fn status_words(&self) -> String {
        status_words(self.status, self.ended_by)
    }

    /// Metadata for a new recording with status [`Status::Running`].
    pub fn new(
        id: impl Into<String>,
        workload: WorkloadInfo,
        host: HostInfo,
        started_at: impl Into<String>,
    ) -> Self {
        let id = id.into();
        SessionMeta {
            schema_version: crate::SCHEMA_VERSION,
            name: id.clone(),
            id,
            workload,
            command_line: Vec::new(),
            host,
            benchtop_version: String::new(),
            started_at: started_at.into(),
            ended_at: None,
            status: Status::Running,
            ended_by: None,
            failure: None,
            sampling: SamplingInfo::default(),
            worker: WorkerInfo::default(),
            summary: Vec::new(),
            warnings: Vec::new(),
            phases: Vec::new(),
            otlp: None,
            resources: None,
            labels: BTreeMap::new(),
            git: None,
        }
    }
}

/// How a recording ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Status {
    /// Still recording, as written while the run goes on. A loaded session that still
    /// says so was cut off: [`crate::Session::load`] reports it as [`Status::Crashed`].
    Running,
    /// The workload finished, or the requested duration elapsed.
    Complete,
    /// Stopped early by the user (Ctrl-C, `q`).
    Stopped,
    /// The worker or the recorder died before the end.
    Crashed,
    /// The worker ignored the request to stop and was killed.
    Killed,
    /// The recording failed (the disk filled up, a write failed): `failure` says why.
    Failed,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Running => "running",
            Status::Complete => "complete",
            Status::Stopped => "stopped",
            Status::Crashed => "crashed",
            Status::Killed => "killed",
            Status::Failed => "failed",
        })
    }
}

/// What ended a complete run that the workload did not end itself: session.json's
/// `ended_by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EndedBy {
    /// The `--duration` asked for elapsed and the workload stopped when asked.
    Duration,
}

impl EndedBy {
    /// How people read it beside the status: `complete (duration reached)`.
    pub fn words(self) -> &'static str {
        match self {
            EndedBy::Duration => "duration reached",
        }
    }
}

/// A status as people read it, with what ended the run when that was not the workload:
/// `complete (duration reached)`, `stopped`.
/// Only a complete run says what ended it (a run that failed as it ended is `failed`).
pub fn status_words(status: Status, ended_by: Option<EndedBy>) -> String {
    match ended_words(status, ended_by) {
        Some(words) => format!("{status} ({words})"),
        None => status.to_string(),
    }
}

/// What ended the run, in words, when the status says it (see [`status_words`]).
pub fn ended_words(status: Status, ended_by: Option<EndedBy>) -> Option<&'static str> {
    ended_by
        .filter(|_| status == Status::Complete)
        .map(EndedBy::words)
}

/// Why a recording failed: session.json's `failure`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Failure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// The file or directory it happened to, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The error, for people.
    #[serde(default)]
    pub message: String,
}

impl Failure {
    /// A failure of `kind` on `path`.
    pub fn new(kind: FailureKind, path: Option<String>, message: impl Into<String>) -> Self {
        Failure {
            kind,
            path,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::escape::Escaped;
        f.write_str(match self.kind {
            FailureKind::NoSpace => "no space left on device",
            FailureKind::WriteError => "write error",
            FailureKind::Other => "error",
        })?;
        if let Some(path) = &self.path {
            write!(f, " ({})", Escaped(path))?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", Escaped(&self.message))?;
        }
        Ok(())
    }
}

/// The kind of a [`Failure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// The disk or the user's quota was full (`ENOSPC`, `EDQUOT`).
    NoSpace,
    /// Writing a file of the session failed otherwise.
    WriteError,
    /// Anything else, and kinds this build does not know (written by a newer benchtop).
    #[serde(other)]
    Other,
}

/// The workload of a session.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WorkloadInfo {
    /// Workload name, e.g. `ring`, or the program name for `run -- cmd`.
    pub name: String,
    /// Parameters by their command-line names.
    #[serde(default)]
    pub params: BTreeMap<String, serde_json::Value>,
}

impl WorkloadInfo {
    /// A workload with its parameters.
    pub fn new(name: impl Into<String>, params: BTreeMap<String, serde_json::Value>) -> Self {
        WorkloadInfo {
            name: name.into(),
            params,
        }
    }
}

/// The worker process of a session.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// Process id.
    pub pid: Option<u32>,
    /// How it exited, e.g. `exit code 0`, `killed by signal 9 (SIGKILL)`.
    pub exit: Option<String>,
    /// CPU time (user + system) of the worker and its threads, seconds, from wait4.
    pub cpu_time_s: Option<f64>,
    /// Peak resident set size of the worker over its whole life, bytes, from wait4
    /// (`ru_maxrss`): known even for runs shorter than one interval. The kernel folds in
    /// the images before the exec (the conductor's copy at fork and, for `run -- CMD`,
    /// the exec gate: a few MiB), so for small programs it is benchtop's, not theirs:
    /// [`ResourcesInfo::peak_rss_bytes`] is the program's own.
    #[serde(default)]
    pub peak_rss_bytes: Option<u64>,
}

/// One timed phase of a workload, as its `phase` report gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PhaseInfo {
    /// Phase name, e.g. `parse`, `checkpoint-binary`.
    pub name: String,
    /// Start of the phase, seconds since the worker started measured work.
    #[serde(deserialize_with = "crate::timeseries::f64_or_nan")]
    pub t_s: f64,
    /// Length of the phase, seconds.
    #[serde(deserialize_with = "crate::timeseries::f64_or_nan")]
    pub duration_s: f64,
    /// Figures of the phase (bytes, MB/s, RSS…).
    #[serde(default)]
    pub figures: Vec<Figure>,
}

impl PhaseInfo {
    /// A phase of `duration_s` seconds starting `t_s` seconds into the run.
    pub fn new(name: impl Into<String>, t_s: f64, duration_s: f64, figures: Vec<Figure>) -> Self {
        PhaseInfo {
            name: name.into(),
            t_s,
            duration_s,
            figures,
        }
    }
}

/// One named result figure of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Figure {
    /// The original benchmark's name for it.
    pub name: String,
    /// The value in `unit`.
    #[serde(deserialize_with = "crate::timeseries::f64_or_nan")]
    pub value: f64,
    /// Unit; empty for plain numbers.
    #[serde(default)]
    pub unit: String,
    /// `higher` or `lower` when one direction is better.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub better: Option<Better>,
}

impl Figure {
    /// A figure with no preferred direction.
    pub fn new(name: impl Into<String>, value: f64, unit: impl Into<String>) -> Self {
        Figure {
            name: name.into(),
            value,
            unit: unit.into(),
            better: None,
        }
    }
}

/// Which direction of change is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Better {
    /// Higher is better.
    Higher,
    /// Lower is better.
    Lower,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> SessionMeta {
        SessionMeta::new(
            "20260101-000000-defs",
            WorkloadInfo::new("defs", BTreeMap::new()),
            HostInfo::default(),
            "2026-01-01T00:00:00.000Z",
        )
    }

    #[test]
    fn phases_are_optional_and_written_only_when_there_are_some() {
        let mut m = meta();
        let json = serde_json::to_string(&m).unwrap();
        assert!(!json.contains("phases"), "{json}");
        let back: SessionMeta = serde_json::from_str(&json).unwrap();
        assert!(back.phases.is_empty());

        m.phases.push(PhaseInfo::new(
            "parse",
            0.25,
            0.5,
            vec![Figure::new("bytes", 1e6, "bytes")],
        ));
        let json = serde_json::to_string(&m).unwrap();
        assert!(
            json.contains("\"phases\":[{\"name\":\"parse\",\"t_s\":0.25"),
            "{json}"
        );
        let back: SessionMeta = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn a_run_the_duration_ended_reads_complete_duration_reached() {
        let mut m = meta();
        m.status = Status::Complete;
        // Older sessions have no `ended_by`: plain `complete`.
        let json = serde_json::to_string(&m).unwrap();
        assert!(!json.contains("ended_by"), "{json}");
        assert_eq!(m.status_words(), "complete");

        m.ended_by = Some(EndedBy::Duration);
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains("\"ended_by\":\"duration\""), "{json}");
        let back: SessionMeta = serde_json::from_str(&json).unwrap();
        assert_eq!(back.status_words(), "complete (duration reached)");
        // Only a complete run says what ended it.
        m.status = Status::Failed;
        assert_eq!(m.status_words(), "failed");
    }
}
