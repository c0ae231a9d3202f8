//! The blocking experiment (`--server-sim`): does checkpointing stall the server?
//!
//! A request loop plays a workflow server: requests arrive on a fixed schedule
//! (`--rate` per second) and each updates one node's state in the tree (kept as the
//! node's `# state:…` note, as ecFlow's checkpoints carry it) and appends a line to a
//! request log, written through at once (`--log-flush every-write`, one write system call
//! per request) or buffered (`buffered`). Every `--checkpoint-every` seconds the tree is
//! checkpointed in the first of `--formats`:
//!
//! - **blocking**: in the request loop, which waits for the checkpoint's encoding,
//!   writing and fsync;
//! - **background**: the loop takes a snapshot (a clone of the tree) and hands it to a
//!   writer thread; only the clone holds the loop up. Nodes are shared (`Arc`), so the
//!   clone copies the suites' pointers, and a request that then changes a node copies it
//!   and the nodes above it (copy on write) while the snapshot keeps what it saw. A deep
//!   copy of 3199.def's tree took as long as writing its binary checkpoint (~0.3 s),
//!   which left nothing to gain. A checkpoint falling due while the previous one is still
//!   being written is skipped (and counted).
//!
//! Each request's latency is measured from its scheduled time, so requests that queued
//! behind a checkpoint count their wait (coordinated omission corrected); the `request`
//! histogram shows what blocking costs. Each checkpoint is a `server-checkpoint` phase
//! with the time it held the loop (`stall_s`). The summary gives the latency
//! percentiles and the write system calls the process made (`syscw` of /proc/self/io).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::checkpoint::{self, Format};
use super::generate::Rng;
use super::model::{Defs, Node};
use super::{DefsMetrics, DefsParams, Phases};
use crate::WorkloadError;
use crate::protocol::{Better, Figure, new_latency_histogram};
use crate::report::StopSignal;

/// The name of each checkpoint's phase.
pub const CHECKPOINT_PHASE: &str = "server-checkpoint";

/// Where a server-sim checkpoint is written from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckpointMode {
    /// In the request loop, which waits for it.
    Blocking,
    /// On a writer thread, from a snapshot the loop takes.
    Background,
}

impl CheckpointMode {
    /// The mode's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointMode::Blocking => "blocking",
            CheckpointMode::Background => "background",
        }
    }
}

/// How the server-sim request log is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogFlush {
    /// One write system call per request.
    EveryWrite,
    /// Through a 64 KiB buffer.
    Buffered,
}

impl LogFlush {
    /// The choice's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            LogFlush::EveryWrite => "every-write",
            LogFlush::Buffered => "buffered",
        }
    }
}

/// What the request loop did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServerOutcome {
    /// Requests answered.
    pub requests: u64,
    /// How long the loop ran.
    pub elapsed: Duration,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Background checkpoints skipped because the previous one was still being written.
    pub skipped: u64,
    /// The longest time a checkpoint held the request loop up.
    pub max_stall: Duration,
    /// Request latency percentiles (50, 99, 99.9) and maximum, in nanoseconds.
    pub latency_ns: [u64; 4],
    /// Write system calls of the process during the loop (/proc/self/io `syscw`).
    pub write_syscalls: Option<u64>,
    /// Bytes of request log written.
    pub log_bytes: u64,
    /// The checkpoint mode.
    pub mode: CheckpointMode,
    /// The log flushing.
    pub log_flush: LogFlush,
    /// Whether a stop ended the loop early.
    pub stopped: bool,
}

impl ServerOutcome {
    /// The latency at percentile 99, in nanoseconds.
    pub fn p99_ns(&self) -> u64 {
        self.latency_ns[1]
    }

    /// The summary figures.
    pub fn figures(&self) -> Vec<Figure> {
        let secs = self.elapsed.as_secs_f64();
        let mut figures = vec![
            Figure::new("requests", self.requests as f64, "requests"),
            Figure::new(
                "requests_per_s",
                if secs > 0.0 {
                    self.requests as f64 / secs
                } else {
                    0.0
                },
                "requests/s",
            )
            .better(Better::Higher),
            Figure::new("request_p50_ns", self.latency_ns[0] as f64, "ns").better(Better::Lower),
            Figure::new("request_p99_ns", self.latency_ns[1] as f64, "ns").better(Better::Lower),
            Figure::new("request_p999_ns", self.latency_ns[2] as f64, "ns").better(Better::Lower),
            Figure::new("request_max_ns", self.latency_ns[3] as f64, "ns").better(Better::Lower),
            Figure::new("checkpoints", self.checkpoints as f64, ""),
            Figure::new("checkpoints_skipped", self.skipped as f64, ""),
            Figure::new("max_stall_s", self.max_stall.as_secs_f64(), "s").better(Better::Lower),
            Figure::new("log_bytes", self.log_bytes as f64, "bytes"),
        ];
        if let Some(n) = self.write_syscalls {
            figures.push(Figure::new("write_syscalls", n as f64, "syscalls").better(Better::Lower));
        }
        figures
    }

    /// The summary lines.
    pub fn lines(&self) -> Vec<String> {
        let ms = |ns: u64| ns as f64 / 1e6;
        vec![
            format!(
                "server-sim: {} requests in {:.2} s, checkpoints {} ({}), {} skipped, longest stall {:.1} ms",
                self.requests,
                self.elapsed.as_secs_f64(),
                self.checkpoints,
                self.mode.as_str(),
                self.skipped,
                self.max_stall.as_secs_f64() * 1e3
            ),
            format!(
                "request latency: p50 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms",
                ms(self.latency_ns[0]),
                ms(self.latency_ns[1]),
                ms(self.latency_ns[2]),
                ms(self.latency_ns[3])
            ),
            format!(
                "request log ({}): {} bytes, write syscalls {}",
                self.log_flush.as_str(),
                self.log_bytes,
                self.write_syscalls
                    .map_or_else(|| "unknown".to_owned(), |n| n.to_string())
            ),
        ]
    }
}

/// Write system calls of this process so far (`syscw` in /proc/self/io).
pub fn write_syscalls() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("syscw:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Every node as a path of child indices: `starts[i]..starts[i + 1]` in `steps`.
struct NodeIndex {
    steps: Vec<u32>,
    starts: Vec<u32>,
}

impl NodeIndex {
    fn new(defs: &Defs) -> Self {
        fn go(node: &Node, path: &mut Vec<u32>, index: &mut NodeIndex) {
            index.starts.push(index.steps.len() as u32);
            index.steps.extend_from_slice(path);
            for (i, child) in node.children.iter().enumerate() {
                path.push(i as u32);
                go(child, path, index);
                path.pop();
            }
        }
        let mut index = NodeIndex {
            steps: Vec::new(),
            starts: Vec::new(),
        };
        let mut path = Vec::new();
        for (i, suite) in defs.suites.iter().enumerate() {
            path.push(i as u32);
            go(suite, &mut path, &mut index);
            path.pop();
        }
        index.starts.push(index.steps.len() as u32);
        index
    }

    fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// Node `i`, to change: a node shared with a snapshot is copied first, with the
    /// nodes above it (copy on write), so the snapshot keeps what it saw.
    fn node<'d>(&self, defs: &'d mut Defs, i: usize) -> Option<&'d mut Node> {
        let path = &self.steps[self.starts[i] as usize..self.starts[i + 1] as usize];
        let (first, rest) = path.split_first()?;
        let mut node = Arc::make_mut(defs.suites.get_mut(*first as usize)?);
        for &step in rest {
            node = Arc::make_mut(node.children.get_mut(step as usize)?);
        }
        Some(node)
    }
}

const STATES: [&str; 4] = ["queued", "submitted", "active", "complete"];

type Written = (Result<u64, WorkloadError>, Instant, Duration, Duration);

/// The request log at `path`, flushed as `flush` says.
fn open_log(path: &Path, flush: LogFlush) -> Result<Box<dyn Write>, WorkloadError> {
    let file = File::create(path).map_err(|source| WorkloadError::File {
        action: "creating request log",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(match flush {
        LogFlush::EveryWrite => Box::new(file),
        LogFlush::Buffered => Box::new(BufWriter::with_capacity(64 << 10, file)),
    })
}

impl ServerOutcome {
    /// A run of `params` before its first request.
    fn nothing_yet(params: &DefsParams) -> ServerOutcome {
        ServerOutcome {
            requests: 0,
            elapsed: Duration::ZERO,
            checkpoints: 0,
            skipped: 0,
            max_stall: Duration::ZERO,
            latency_ns: [0; 4],
            write_syscalls: None,
            log_bytes: 0,
            mode: params.checkpoint_mode,
            log_flush: params.log_flush,
            stopped: false,
        }
    }

    /// The run's figures completed at its end: the write system calls since
    /// `syscw_before` (when /proc tells them) and the quantiles of its latencies `total`.
    fn ended(mut self, syscw_before: Option<u64>, total: &Histogram<u64>) -> ServerOutcome {
        self.write_syscalls = syscw_before
            .zip(write_syscalls())
            .map(|(before, after)| after.saturating_sub(before));
        self.latency_ns = [
            total.value_at_quantile(0.5),
            total.value_at_quantile(0.99),
            total.value_at_quantile(0.999),
            total.max(),
        ];
        self
    }
}

/// Runs the request loop on `defs` (see the module's documentation).
pub(crate) fn run(
    params: &DefsParams,
    mut defs: Defs,
    metrics: &DefsMetrics,
    stop: &StopSignal,
    dir: &Path,
    phases: &mut Phases<'_>,
) -> Result<ServerOutcome, WorkloadError> {
    let format = params.formats.first().copied().unwrap_or(Format::Binary);
    let path = dir.join(format.file_name());
    let log_path = dir.join("server.log");
    let mut log = open_log(&log_path, params.log_flush)?;
    let log_err = |source| WorkloadError::File {
        action: "writing request log",
        path: log_path.clone(),
        source,
    };
    let index = NodeIndex::new(&defs);
    if index.len() == 0 {
        return Err(WorkloadError::Broken {
            workload: super::NAME,
            reason: "the definition has no nodes to update".to_owned(),
        });
    }
    let mut rng = Rng::new(params.seed);
    let period_ns = 1e9 / f64::from(params.rate);
    let every = Duration::from_secs_f64(params.checkpoint_every);
    let length = Duration::from_secs_f64(params.sim_seconds);
    let mut total = new_latency_histogram();
    let mut line = String::with_capacity(64);
    let mut outcome = ServerOutcome::nothing_yet(params);
    let syscw_before = write_syscalls();

    std::thread::scope(|scope| -> Result<(), WorkloadError> {
        let (to_writer, snapshots) = mpsc::sync_channel::<(Defs, Instant, Duration)>(1);
        let (written_tx, written) = mpsc::channel::<Written>();
        if params.checkpoint_mode == CheckpointMode::Background {
            let path = path.clone();
            std::thread::Builder::new()
                .name("bt-defs-ckpt".to_owned())
                .spawn_scoped(scope, move || {
                    for (snapshot, began, stall) in snapshots {
                        let result = checkpoint::save(&snapshot, format, &path);
                        drop(snapshot);
                        let _ = written_tx.send((result, began, began.elapsed(), stall));
                    }
                })
                .map_err(|source| WorkloadError::Thread {
                    thread: "bt-defs-ckpt",
                    source,
                })?;
        } else {
            drop(snapshots);
            drop(written_tx);
        }
        let mut in_flight = false;
        let on_written = |w: Written, phases: &mut Phases<'_>, outcome: &mut ServerOutcome| {
            let (result, began, took, stall) = w;
            let bytes = result?;
            outcome.checkpoints += 1;
            metrics.bytes.add(bytes);
            phases.record(
                CHECKPOINT_PHASE,
                began,
                took,
                bytes,
                vec![Figure::new("stall_s", stall.as_secs_f64(), "s").better(Better::Lower)],
            )
        };

        let t0 = Instant::now();
        let mut next_checkpoint = t0 + every;
        let mut k: u64 = 0;
        loop {
            let scheduled = t0 + Duration::from_nanos((k as f64 * period_ns) as u64);
            if scheduled.saturating_duration_since(t0) >= length {
                break;
            }
            if stop.is_set() {
                outcome.stopped = true;
                break;
            }
            let now = Instant::now();
            if now < scheduled {
                std::thread::sleep(scheduled - now);
            }
            let now = Instant::now();
            if now >= next_checkpoint {
                next_checkpoint = (next_checkpoint + every).max(now);
                let began = Instant::now();
                match params.checkpoint_mode {
                    CheckpointMode::Blocking => {
                        let bytes = checkpoint::save(&defs, format, &path)?;
                        let stall = began.elapsed();
                        outcome.max_stall = outcome.max_stall.max(stall);
                        on_written((Ok(bytes), began, stall, stall), phases, &mut outcome)?;
                    }
                    CheckpointMode::Background if in_flight => outcome.skipped += 1,
                    CheckpointMode::Background => {
                        let snapshot = defs.clone();
                        let stall = began.elapsed();
                        outcome.max_stall = outcome.max_stall.max(stall);
                        in_flight = to_writer.send((snapshot, began, stall)).is_ok();
                    }
                }
            }
            while let Ok(w) = written.try_recv() {
                in_flight = false;
                on_written(w, phases, &mut outcome)?;
            }

            // The request: one node's new state, logged.
            let i = rng.below(index.len() as u64) as usize;
            let state = STATES[rng.below(STATES.len() as u64) as usize];
            if let Some(node) = index.node(&mut defs, i) {
                let note = node.note.get_or_insert_with(String::new);
                note.clear();
                note.push_str(" state:");
                note.push_str(state);
            }
            line.clear();
            let _ = writeln!(line, "{k} {i} {state}");
            log.write_all(line.as_bytes()).map_err(log_err)?;
            outcome.log_bytes += line.len() as u64;

            let latency = u64::try_from(scheduled.elapsed().as_nanos()).unwrap_or(u64::MAX);
            metrics.request.record(latency);
            if total.record(latency).is_err() {
                total.saturating_record(latency);
            }
            metrics.requests.increment();
            k += 1;
        }
        outcome.elapsed = t0.elapsed();
        outcome.requests = k;
        drop(to_writer);
        // The writer ends with the channel; take its last results.
        for w in written.iter() {
            on_written(w, phases, &mut outcome)?;
        }
        log.flush().map_err(log_err)?;
        Ok(())
    })?;

    Ok(outcome.ended(syscw_before, &total))
}
