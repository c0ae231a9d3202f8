//! `defs`: ecFlow definition parse, checkpoint and reload at the scale of a real
//! operational suite, after the performance notebook of the ecFlow workflow server.
//!
//! [`parse`] reads ecFlow `.def` text into a [`Defs`] tree and [`write()`] writes it back
//! as ecFlow 5.9 does; writing and reading again gives the same tree.
//!
//! ```
//! use benchtop_workloads::defs::{parse, write};
//!
//! let text = "#5.9.2\nsuite s\n  family f\n    task a\n    task b\n      trigger a == complete\n  endfamily\nendsuite\n";
//! let defs = parse(text)?;
//! assert_eq!(defs.counts().triggers, 1);
//! assert_eq!(write(&defs), text);
//! # Ok::<(), benchtop_workloads::defs::ParseError>(())
//! ```
//!
//! The workload runs timed phases, each reported as a protocol `phase` with its bytes,
//! seconds, MB/s and RSS: `generate` ([`generate::generate`] at `--scale`, then written
//! as text) or `read` (`--input FILE`), `parse`, then for each of `--formats`
//! `checkpoint-<format>` (written with fsync and an atomic rename, see [`checkpoint`]),
//! `reload-<format>` and `compare-<format>` (the reloaded tree must equal the parsed
//! one). With `--server-sim` it runs the blocking experiment instead of the format loop
//! (see [`server`]).
//!
//! Metrics: counter `bytes` (bytes parsed, written and read so far) first, or with
//! `--server-sim` counter `requests` first; histogram `request` (server-sim request
//! latency, coordinated-omission corrected).

pub mod archive;
pub mod checkpoint;
pub mod expr;
pub mod generate;
pub mod model;
mod parallel;
mod parse;
pub mod server;
mod strings;
mod write;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use self::checkpoint::Format;
pub use self::model::{Attr, Counts, Defs, ExprId, Node, NodeKind, PathId, State, Strings, Sym};
pub use self::parallel::{PARALLEL_MIN_BYTES, parse_in};
pub use self::parse::{MAX_NESTING, ParseError, parse, parse_serial};
pub use self::server::{CheckpointMode, LogFlush};
pub use self::write::{DEFAULT_VERSION, write, write_into};
use crate::WorkloadError;
use crate::protocol::{Better, Figure, Phase, Summary, WorkerMessage};
use crate::report::{Counter, IntervalHistogram, Metrics, Reporter, Start, StopSignal};

/// The workload's name on the command line and in `hello`.
pub const NAME: &str = "defs";

/// Parameters of the defs workload.
/// Its serde form, less what [`DefsParams::params_json`] leaves out, is the `hello`
/// parameters sessions record.
#[derive(Debug, Clone, PartialEq, clap::Args, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct DefsParams {
    /// Generate a definition with the shape of 3199.def (the default when --input is not
    /// given)
    #[arg(long, conflicts_with = "input")]
    pub generate: bool,
    /// Read this .def file instead of generating one
    #[arg(long, value_name = "FILE")]
    #[serde(serialize_with = "lossy_path", skip_serializing_if = "Option::is_none")]
    pub input: Option<PathBuf>,
    /// Size of the generated definition: 1.0 is 3199.def (320,830 nodes)
    #[arg(long, default_value_t = 1.0, value_parser = parse_scale)]
    pub scale: f64,
    /// Seed of the generator
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Checkpoint formats, comma-separated
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "text,json,binary"
    )]
    #[serde(serialize_with = "joined_formats")]
    pub formats: Vec<Format>,
    /// Directory for checkpoints (default: a temporary directory, removed at the end)
    #[arg(long, value_name = "DIR")]
    #[serde(serialize_with = "lossy_path", skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// Run the blocking experiment: a request loop with periodic checkpoints
    #[arg(long)]
    pub server_sim: bool,
    /// Server-sim: seconds the request loop runs (a conductor's stop ends it sooner)
    #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = parse_seconds)]
    pub sim_seconds: f64,
    /// Server-sim: requests per second, sent on a fixed schedule
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub rate: u32,
    /// Server-sim: seconds between checkpoints (in the first of --formats)
    #[arg(long, value_name = "SECS", default_value_t = 1.0, value_parser = parse_seconds)]
    pub checkpoint_every: f64,
    /// Server-sim: checkpoint in the request loop, or snapshot and write on another thread
    #[arg(long, value_enum, default_value_t = CheckpointMode::Blocking)]
    pub checkpoint_mode: CheckpointMode,
    /// Server-sim: flush the request log on every write, or buffer it
    #[arg(long, value_enum, default_value_t = LogFlush::EveryWrite)]
    pub log_flush: LogFlush,
}

// Floats are checked finite by the parsers and `validate`.
impl Eq for DefsParams {}

impl Default for DefsParams {
    fn default() -> Self {
        DefsParams {
            generate: false,
            input: None,
            scale: 1.0,
            seed: 1,
            formats: Format::ALL.to_vec(),
            dir: None,
            server_sim: false,
            sim_seconds: 10.0,
            rate: 5000,
            checkpoint_every: 1.0,
            checkpoint_mode: CheckpointMode::Blocking,
            log_flush: LogFlush::EveryWrite,
        }
    }
}

fn parse_scale(text: &str) -> Result<f64, String> {
    let scale: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    check_scale(scale).map_err(str::to_owned)?;
    Ok(scale)
}

fn check_scale(scale: f64) -> Result<(), &'static str> {
    if scale.is_finite() && scale > 0.0 && scale <= generate::MAX_SCALE {
        Ok(())
    } else {
        Err("the scale must be above 0 and at most 10")
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    check_seconds(secs).map_err(str::to_owned)?;
    Ok(secs)
}

fn check_seconds(secs: f64) -> Result<(), &'static str> {
    if (0.001..=86_400.0).contains(&secs) {
        Ok(())
    } else {
        Err("seconds must be between 0.001 and 86400")
    }
}

/// The parameters of the server simulation alone, recorded only when it runs.
const SERVER_SIM_PARAMS: [&str; 5] = [
    "sim-seconds",
    "rate",
    "checkpoint-every",
    "checkpoint-mode",
    "log-flush",
];

/// A path as text (lossy where it is not UTF-8), for the serde form.
fn lossy_path<S: serde::Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match path {
        Some(p) => s.collect_str(&p.display()),
        None => s.serialize_none(),
    }
}

/// The formats as the command line takes them: `text,json,binary`.
fn joined_formats<S: serde::Serializer>(formats: &[Format], s: S) -> Result<S::Ok, S::Error> {
    let names: Vec<&str> = formats.iter().map(|f| f.as_str()).collect();
    s.collect_str(&names.join(","))
}

impl DefsParams {
    /// The command-line arguments that parse back into these parameters, derived from
    /// the clap definition and the serde form ([`crate::params::args_of`]).
    pub fn to_args(&self) -> Vec<String> {
        crate::params::args_of(self)
    }

    /// The parameters for `hello`, keyed by their command-line names: the serde form,
    /// without `generate` (the default whenever no `input` is named) and, unless the
    /// server simulation runs, without its parameters.
    pub fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        let mut json = crate::params::json_of(self);
        json.remove("generate");
        if !self.server_sim {
            for key in SERVER_SIM_PARAMS {
                json.remove(key);
            }
        }
        json
    }

    /// Checks what clap checks, for parameters built in code.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        check_scale(self.scale).map_err(|reason| WorkloadError::BadParam {
            name: "scale",
            value: self.scale.to_string(),
            reason,
        })?;
        for (name, secs) in [
            ("sim-seconds", self.sim_seconds),
            ("checkpoint-every", self.checkpoint_every),
        ] {
            check_seconds(secs).map_err(|reason| WorkloadError::BadParam {
                name,
                value: secs.to_string(),
                reason,
            })?;
        }
        if self.formats.is_empty() {
            return Err(WorkloadError::BadParam {
                name: "formats",
                value: String::new(),
                reason: "name at least one of text, json, binary",
            });
        }
        if self.generate && self.input.is_some() {
            return Err(WorkloadError::BadParam {
                name: "generate",
                value: "true".to_owned(),
                reason: "--generate and --input exclude each other",
            });
        }
        if self.rate == 0 {
            return Err(WorkloadError::BadParam {
                name: "rate",
                value: "0".to_owned(),
                reason: "must be at least 1",
            });
        }
        if self.input.is_none() {
            crate::footprint::check(
                &format!("a generated definition at scale {}", self.scale),
                self.estimated_bytes(),
            )?;
        }
        Ok(())
    }

    /// The peak memory of a run on a generated definition: 512 MiB per unit of `--scale`
    /// and 32 MiB besides. Measured with the recorder's peak RSS of `--profile none` runs
    /// at scale 0.1 and 0.3 (67.6 and 151.0 MiB: 417 MiB per unit, 26 MiB besides),
    /// rounded up. A definition read from `--input` costs what its file holds and is not
    /// estimated here.
    pub fn estimated_bytes(&self) -> u64 {
        const PER_SCALE: f64 = 512.0 * 1024.0 * 1024.0;
        const BESIDES: u64 = 32 << 20;
        // At most 10 (check_scale): the product fits a u64.
        ((self.scale.max(0.0) * PER_SCALE) as u64).saturating_add(BESIDES)
    }
}

/// The workload's metrics, registered in a worker's [`Metrics`].
#[derive(Debug, Clone)]
pub struct DefsMetrics {
    /// `bytes`: bytes parsed, written and read by the phases so far.
    pub bytes: Arc<Counter>,
    /// `requests`: server-sim requests answered so far.
    pub requests: Arc<Counter>,
    /// `request`: server-sim request latency, from the request's scheduled time.
    pub request: Arc<IntervalHistogram>,
}

impl DefsMetrics {
    /// Registers `bytes`, `requests` (`requests` first with `--server-sim`, so a
    /// conductor takes it for throughput) and `request`.
    pub fn register(metrics: &mut Metrics, params: &DefsParams) -> Result<Self, WorkloadError> {
        let bytes = |m: &mut Metrics| {
            m.counter(
                "bytes",
                "bytes",
                "bytes of definition parsed, checkpointed and reloaded so far",
            )
        };
        let requests = |m: &mut Metrics| {
            m.counter(
                "requests",
                "requests",
                "server-sim node-state updates answered so far",
            )
        };
        let (bytes, requests) = if params.server_sim {
            let r = requests(metrics)?;
            (bytes(metrics)?, r)
        } else {
            let b = bytes(metrics)?;
            (b, requests(metrics)?)
        };
        Ok(DefsMetrics {
            bytes,
            requests,
            request: metrics.histogram(
                "request",
                "server-sim request latency from its scheduled time (coordinated omission corrected)",
            )?,
        })
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Outcome {
    /// The parameters run.
    pub params: DefsParams,
    /// Nodes and attributes of the definition.
    pub counts: Counts,
    /// Size of the definition as text.
    pub text_bytes: u64,
    /// The phases, in order.
    pub phases: Vec<Phase>,
    /// The server-sim results, with `--server-sim`.
    pub server: Option<server::ServerOutcome>,
    /// Peak RSS of the worker at the end, when /proc tells.
    pub peak_rss_bytes: Option<u64>,
    /// Whether the run was stopped before it completed.
    pub stopped: bool,
}

/// Times phases and reports each as a protocol `phase`.
#[derive(Debug)]
pub struct Phases<'a> {
    reporter: &'a Reporter,
    start: Instant,
    done: Vec<Phase>,
    /// The process's CPU time when the last phase ended (or the phases began).
    cpu_mark: Option<Duration>,
}

impl<'a> Phases<'a> {
    /// Phases timed from `start`, reported to `reporter`.
    pub fn new(reporter: &'a Reporter, start: Start) -> Self {
        Phases {
            reporter,
            start: start.at,
            done: Vec::new(),
            cpu_mark: process_cpu(),
        }
    }

    /// Reports the phase `name` that began at `began` and ends now, with `bytes` moved
    /// (0 for none) and `more` figures; bytes, seconds, MB/s, RSS and `cpu_s` (the
    /// process's CPU time since the previous phase ended) are added.
    pub fn finish(
        &mut self,
        name: impl Into<String>,
        began: Instant,
        bytes: u64,
        more: Vec<Figure>,
    ) -> Result<(), WorkloadError> {
        self.record(name, began, began.elapsed(), bytes, more)
    }

    /// Reports a phase that began at `began` and took `took` (for work timed on another
    /// thread), as [`Phases::finish`] does.
    pub fn record(
        &mut self,
        name: impl Into<String>,
        began: Instant,
        took: Duration,
        bytes: u64,
        more: Vec<Figure>,
    ) -> Result<(), WorkloadError> {
        let at = began.saturating_duration_since(self.start);
        let mut more = more;
        let cpu = process_cpu();
        if let (Some(then), Some(now)) = (self.cpu_mark, cpu) {
            // Every thread's, so a parallel phase shows what its threads cost together.
            let spent = now.saturating_sub(then).as_secs_f64();
            more.push(Figure::new("cpu_s", spent, "s").better(Better::Lower));
        }
        self.cpu_mark = cpu;
        let phase = phase(name.into(), at, took, bytes, more);
        self.reporter.send(&WorkerMessage::Phase(phase.clone()))?;
        self.done.push(phase);
        Ok(())
    }

    /// The phases reported so far.
    pub fn into_done(self) -> Vec<Phase> {
        self.done
    }
}

fn phase(name: String, at: Duration, took: Duration, bytes: u64, more: Vec<Figure>) -> Phase {
    let secs = took.as_secs_f64();
    let mut figures = Vec::with_capacity(6 + more.len());
    if bytes > 0 {
        figures.push(Figure::new("bytes", bytes as f64, "bytes"));
    }
    figures.push(Figure::new("seconds", secs, "s").better(Better::Lower));
    if bytes > 0 && secs > 0.0 {
        figures.push(
            Figure::new("mb_per_s", bytes as f64 / 1e6 / secs, "MB/s").better(Better::Higher),
        );
    }
    figures.extend(more);
    let rss = rss();
    if let Some(now) = rss.current {
        figures.push(Figure::new("rss_bytes", now as f64, "bytes"));
    }
    if let Some(peak) = rss.peak {
        figures.push(Figure::new("peak_rss_bytes", peak as f64, "bytes").better(Better::Lower));
    }
    Phase {
        name,
        t_ns: u64::try_from(at.as_nanos()).unwrap_or(u64::MAX),
        duration_ns: u64::try_from(took.as_nanos()).unwrap_or(u64::MAX),
        figures,
    }
}

/// The CPU time of the whole process so far (every thread's, user and system), or
/// `None` when the clock cannot be read.
fn process_cpu() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through the valid pointer it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| {
        Duration::new(
            u64::try_from(ts.tv_sec).unwrap_or(0),
            u32::try_from(ts.tv_nsec).unwrap_or(0),
        )
    })
}

/// Resident set size now and at its peak, from /proc/self/status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rss {
    /// VmRSS in bytes.
    pub current: Option<u64>,
    /// VmHWM in bytes.
    pub peak: Option<u64>,
}

/// This process's [`Rss`] (both `None` where /proc is not there).
pub fn rss() -> Rss {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return Rss::default();
    };
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Rss {
        current: kb("VmRSS:"),
        peak: kb("VmHWM:"),
    }
}

/// A checkpoint directory: the one asked for, or a temporary one removed on drop.
struct Dir {
    path: PathBuf,
    remove: bool,
}

impl Dir {
    fn new(asked: Option<&Path>) -> Result<Self, WorkloadError> {
        let (path, remove) = match asked {
            Some(p) => (p.to_owned(), false),
            None => (
                std::env::temp_dir().join(format!("benchtop-defs-{}", std::process::id())),
                true,
            ),
        };
        std::fs::create_dir_all(&path).map_err(|source| WorkloadError::File {
            action: "creating checkpoint directory",
            path: path.clone(),
            source,
        })?;
        checkpoint::remove_stale_temps(&path);
        Ok(Dir { path, remove })
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Runs the workload: the phases, or with `--server-sim` the blocking experiment.
pub fn run(
    params: &DefsParams,
    metrics: &DefsMetrics,
    stop: &StopSignal,
    reporter: &Reporter,
    start: Start,
) -> Result<Outcome, WorkloadError> {
    params.validate()?;
    let mut phases = Phases::new(reporter, start);
    let dir = Dir::new(params.dir.as_deref())?;

    let began = Instant::now();
    let (text, origin) = match &params.input {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::File {
                action: "reading definition",
                path: path.clone(),
                source,
            })?;
            phases.finish("read", began, text.len() as u64, vec![])?;
            (text, path.display().to_string())
        }
        None => {
            let generated = generate::generate(params.scale, params.seed);
            let text = write(&generated);
            let nodes = generate::shape(params.scale).nodes();
            phases.finish(
                "generate",
                began,
                text.len() as u64,
                vec![Figure::new("nodes", nodes as f64, "")],
            )?;
            // Freed before parsing, as before, but outside the phase's time.
            drop(generated);
            (text, "generated definition".to_owned())
        }
    };
    let text_bytes = text.len() as u64;

    let began = Instant::now();
    let defs = parse(&text).map_err(|source| WorkloadError::DefsParse { origin, source })?;
    drop(text);
    let counts = defs.counts();
    metrics.bytes.add(text_bytes);
    phases.finish(
        "parse",
        began,
        text_bytes,
        vec![
            Figure::new("nodes", counts.nodes() as f64, ""),
            Figure::new(
                "nodes_per_s",
                counts.nodes() as f64 / began.elapsed().as_secs_f64().max(1e-9),
                "nodes/s",
            )
            .better(Better::Higher),
        ],
    )?;

    let mut stopped = stop.is_set();
    let mut server_outcome = None;
    if params.server_sim && !stopped {
        let outcome = server::run(params, defs, metrics, stop, &dir.path, &mut phases)?;
        stopped = outcome.stopped;
        server_outcome = Some(outcome);
    } else {
        for &format in &params.formats {
            if stop.is_set() {
                stopped = true;
                break;
            }
            let path = dir.path.join(format.file_name());
            let began = Instant::now();
            let written = checkpoint::save(&defs, format, &path)?;
            metrics.bytes.add(written);
            phases.finish(
                format!("checkpoint-{}", format.as_str()),
                began,
                written,
                vec![],
            )?;

            let began = Instant::now();
            let (reloaded, read) = checkpoint::load(&path, format)?;
            metrics.bytes.add(read);
            phases.finish(format!("reload-{}", format.as_str()), began, read, vec![])?;

            let began = Instant::now();
            let equal = reloaded == defs;
            drop(reloaded);
            phases.finish(
                format!("compare-{}", format.as_str()),
                began,
                0,
                vec![Figure::new("equal", f64::from(u8::from(equal)), "")],
            )?;
            if !equal {
                return Err(WorkloadError::Broken {
                    workload: NAME,
                    reason: format!(
                        "the {} checkpoint reloaded to a tree different from the original",
                        format.as_str()
                    ),
                });
            }
        }
    }
    Ok(Outcome {
        params: params.clone(),
        counts,
        text_bytes,
        phases: phases.into_done(),
        server: server_outcome,
        peak_rss_bytes: rss().peak,
        stopped,
    })
}

/// The protocol summary of a run.
pub fn summary(outcome: &Outcome) -> Summary {
    let c = &outcome.counts;
    let mut figures = vec![
        Figure::new("nodes", c.nodes() as f64, ""),
        Figure::new("text_bytes", outcome.text_bytes as f64, "bytes"),
    ];
    for phase in &outcome.phases {
        if phase.name == server::CHECKPOINT_PHASE {
            continue;
        }
        let key = phase.name.replace('-', "_");
        figures.push(
            Figure::new(format!("{key}_s"), phase.duration_ns as f64 / 1e9, "s")
                .better(Better::Lower),
        );
        if let Some(f) = phase.figures.iter().find(|f| f.name == "mb_per_s") {
            figures.push(
                Figure::new(format!("{key}_mb_per_s"), f.value, "MB/s").better(Better::Higher),
            );
        }
        let written = phase.figures.iter().find(|f| f.name == "bytes");
        if let Some(f) = written.filter(|_| phase.name.starts_with("checkpoint-")) {
            figures.push(Figure::new(format!("{key}_bytes"), f.value, "bytes"));
        }
    }
    if let Some(server) = &outcome.server {
        figures.extend(server.figures());
    }
    if let Some(peak) = outcome.peak_rss_bytes {
        figures.push(Figure::new("peak_rss_bytes", peak as f64, "bytes").better(Better::Lower));
    }
    Summary {
        figures,
        lines: summary_lines(outcome),
    }
}

/// The summary for people: the definition's counts, one line per phase, the server-sim
/// results and the peak RSS.
pub fn summary_lines(outcome: &Outcome) -> Vec<String> {
    let c = &outcome.counts;
    let mut lines = vec![
        format!(
            "definition: {} suites, {} families, {} tasks ({} nodes), {} bytes of text",
            c.suites,
            c.families,
            c.tasks,
            c.nodes(),
            outcome.text_bytes
        ),
        format!(
            "attributes: {} variables, {} triggers, {} complete, {} late, {} events, {} meters, \
             {} labels, {} limits, {} inlimits, {} time, {} repeat, {} defstatus, {} other",
            c.variables,
            c.triggers,
            c.completes,
            c.lates,
            c.events,
            c.meters,
            c.labels,
            c.limits,
            c.inlimits,
            c.times,
            c.repeats,
            c.defstatus,
            c.others
        ),
    ];
    for phase in &outcome.phases {
        if phase.name == server::CHECKPOINT_PHASE {
            continue;
        }
        let mut line = format!("{}: {:.3} s", phase.name, phase.duration_ns as f64 / 1e9);
        for f in &phase.figures {
            match f.name.as_str() {
                "bytes" => line.push_str(&format!(", {:.1} MB", f.value / 1e6)),
                "mb_per_s" => line.push_str(&format!(", {:.0} MB/s", f.value)),
                "rss_bytes" => line.push_str(&format!(", RSS {:.0} MiB", f.value / 1048576.0)),
                _ => {}
            }
        }
        lines.push(line);
    }
    if let Some(server) = &outcome.server {
        lines.extend(server.lines());
    }
    if let Some(peak) = outcome.peak_rss_bytes {
        lines.push(format!("peak RSS: {:.0} MiB", peak as f64 / 1048576.0));
    }
    lines
}

#[cfg(test)]
mod tests {

    use super::*;

    fn parse_args(args: &[&str]) -> Result<DefsParams, String> {
        crate::test_support::parse_params("defs", args)
    }

    #[test]
    fn defaults_are_the_full_size_run_in_every_format() {
        let params = parse_args(&[]).unwrap();
        assert_eq!(params, DefsParams::default());
        assert_eq!(params.formats, Format::ALL);
        assert_eq!(params.scale, 1.0);
    }

    #[test]
    fn to_args_parse_back_to_the_same_params() {
        for params in [
            DefsParams::default(),
            DefsParams {
                input: Some("/tmp/x.def".into()),
                formats: vec![Format::Binary, Format::Text],
                dir: Some("/tmp/ck".into()),
                server_sim: true,
                sim_seconds: 2.5,
                rate: 100,
                checkpoint_every: 0.5,
                checkpoint_mode: CheckpointMode::Background,
                log_flush: LogFlush::Buffered,
                ..DefsParams::default()
            },
            DefsParams {
                generate: true,
                scale: 0.125,
                seed: 42,
                ..DefsParams::default()
            },
        ] {
            let args = params.to_args();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(parse_args(&args).unwrap(), params);
        }
        let json = DefsParams::default().params_json();
        assert_eq!(json["formats"], "text,json,binary");
        assert_eq!(json["scale"], 1.0);
        // The shape sessions have always recorded: the server simulation's parameters
        // only when it runs, no `generate`.
        assert_eq!(
            serde_json::Value::from_iter(json),
            serde_json::json!({
                "scale": 1.0, "seed": 1, "formats": "text,json,binary", "server-sim": false,
            })
        );
        let sim = DefsParams {
            generate: true,
            dir: Some("/tmp/ck".into()),
            server_sim: true,
            ..DefsParams::default()
        };
        assert_eq!(
            serde_json::Value::from_iter(sim.params_json()),
            serde_json::json!({
                "scale": 1.0, "seed": 1, "formats": "text,json,binary", "server-sim": true,
                "dir": "/tmp/ck", "sim-seconds": 10.0, "rate": 5000, "checkpoint-every": 1.0,
                "checkpoint-mode": "blocking", "log-flush": "every-write",
            })
        );
    }

    #[test]
    fn bad_params_are_refused_clearly() {
        for (args, words) in [
            (&["--scale", "0"][..], "above 0"),
            (&["--scale", "11"][..], "at most 10"),
            (&["--scale", "x"][..], "not a number"),
            (&["--formats", "xml"][..], "possible values"),
            (
                &["--generate", "--input", "a.def"][..],
                "cannot be used with",
            ),
            (&["--checkpoint-every", "0"][..], "between 0.001 and 86400"),
            (&["--rate", "0"][..], "--rate"),
        ] {
            let err = parse_args(args).unwrap_err();
            assert!(err.contains(words), "{args:?}: {err}");
        }
        let err = DefsParams {
            formats: vec![],
            ..DefsParams::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(err.contains("--formats"), "{err}");
    }

    #[test]
    fn a_generated_definition_is_estimated_by_its_scale() {
        let full = DefsParams::default();
        let largest = DefsParams {
            scale: 10.0,
            ..DefsParams::default()
        };
        // The measured 417 MiB per unit of scale, rounded up, and no more than twice it.
        assert!(full.estimated_bytes() > 417 << 20 && full.estimated_bytes() < 834 << 20);
        assert!(largest.estimated_bytes() > 9 * full.estimated_bytes());
        let err = crate::footprint::check_against(
            "a generated definition at scale 10",
            largest.estimated_bytes(),
            1 << 30,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("5.0 GiB of memory"), "{err}");
    }
}
