//! `--otlp ENDPOINT`: a recording's intervals streamed to an OpenTelemetry Collector
//! (`benchtop_otlp`), and the command line's edge of it: the options, their redaction in
//! the recorded command line, and the recorder's [`IntervalStream`] that feeds the
//! exporter.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use benchtop_otlp::{
    BatchInterval, Exporter, OtlpOptions, Protocol, RunContext, Sampling, StackNamer, StackSource,
};
use benchtop_profilers::allocations::{AllocInterval, AllocNames, AllocStacks};
use benchtop_record::{IntervalStream, StreamDrops};
use benchtop_sessions::intervals::StacksChunk;
use benchtop_sessions::meta::OtlpInfo;
use benchtop_sessions::{SessionMeta, TimeseriesRow};
use clap::Args;
use hdrhistogram::Histogram;

/// How long the end of a run waits for the batches still queued.
const FINISH_WAIT: Duration = Duration::from_secs(10);

/// The environment variable of OTLP headers every OpenTelemetry exporter reads.
pub const HEADERS_ENV: &str = "OTEL_EXPORTER_OTLP_HEADERS";

/// The environment variable of the OTLP transport every OpenTelemetry exporter reads.
pub const PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";

/// The OTLP options of `run` and `attach` (and of the config file's `[record]`).
#[derive(Debug, Clone, Default, Args, PartialEq, Eq)]
#[command(next_help_heading = "OTLP export")]
pub struct OtlpArgs {
    /// Stream every interval's profiles (on-CPU, off-CPU, memory) and figures (counters,
    /// latency, resources) to an OpenTelemetry Collector as OTLP, e.g.
    /// `http://localhost:4317` (gRPC) or `https://otel.example:4318` with `--otlp-protocol
    /// http/protobuf`. The run and its session come first: a collector that is slow or
    /// away costs dropped batches (counted in the session's warnings), never the run.
    #[arg(long, global = true, value_name = "ENDPOINT", value_parser = parse_endpoint)]
    pub otlp: Option<String>,
    /// The OTLP transport: `grpc` or `http/protobuf` [default: OTEL_EXPORTER_OTLP_PROTOCOL,
    /// else `http/protobuf` for an endpoint on port 4318 and `grpc` for any other]
    #[arg(long, global = true, value_name = "PROTOCOL",
          value_parser = ["grpc", "http/protobuf"])]
    pub otlp_protocol: Option<String>,
    /// Headers sent with every OTLP request, `key=value,key2=value2` (a token:
    /// `authorization=Bearer%20…`); also read from OTEL_EXPORTER_OTLP_HEADERS. Their values
    /// are never printed nor recorded in the session.
    #[arg(long, global = true, value_name = "K=V,…", value_parser = parse_headers)]
    pub otlp_headers: Option<String>,
    /// A PEM file of the certificate authorities to trust for an https:// endpoint,
    /// instead of the web's roots.
    #[arg(long, global = true, value_name = "FILE")]
    pub otlp_ca: Option<PathBuf>,
}

fn parse_endpoint(text: &str) -> Result<String, String> {
    OtlpOptions::new(text, Protocol::Grpc)
        .map(|o| o.endpoint)
        .map_err(|e| e.to_string())
}

fn parse_headers(text: &str) -> Result<String, String> {
    benchtop_otlp::parse_headers(text)
        .map(|_| text.to_owned())
        .map_err(|e| e.to_string())
}

impl OtlpArgs {
    /// The exporter's options, when `--otlp` was given: the protocol of `--otlp-protocol`,
    /// else of OTEL_EXPORTER_OTLP_PROTOCOL, else the one the endpoint's port implies
    /// (4318: http/protobuf; else gRPC); the headers of OTEL_EXPORTER_OTLP_HEADERS first,
    /// then `--otlp-headers`.
    pub fn options(&self) -> anyhow::Result<Option<OtlpOptions>> {
        let Some(endpoint) = &self.otlp else {
            return Ok(None);
        };
        let env = std::env::var_os(PROTOCOL_ENV);
        let protocol = chosen_protocol(
            self.otlp_protocol.as_deref(),
            env.as_deref()
                .map(std::ffi::OsStr::to_string_lossy)
                .as_deref(),
            endpoint,
        )?;
        let mut opts = OtlpOptions::new(endpoint, protocol)?;
        if let Some(env) = std::env::var_os(HEADERS_ENV) {
            let env = env.to_string_lossy();
            opts.add_headers(&env)
                .map_err(|e| anyhow::anyhow!("{HEADERS_ENV}: {e}"))?;
        }
        if let Some(list) = &self.otlp_headers {
            opts.add_headers(list)?;
        }
        if let Some(ca) = &self.otlp_ca {
            if !ca.is_file() {
                anyhow::bail!("--otlp-ca {}: not a readable file", ca.display());
            }
            opts.ca_file = Some(ca.clone());
        }
        Ok(Some(opts))
    }

    /// The stream a recording feeds, when `--otlp` was given.
    pub fn stream(&self) -> anyhow::Result<Option<std::sync::Arc<dyn IntervalStream>>> {
        Ok(self.options()?.map(|opts| {
            std::sync::Arc::new(OtlpStream::new(opts)) as std::sync::Arc<dyn IntervalStream>
        }))
    }
}

/// The protocol named by `--otlp-protocol` (`flag`), else by OTEL_EXPORTER_OTLP_PROTOCOL
/// (`env`; empty counts as unset), else the one `endpoint`'s port implies.
fn chosen_protocol(
    flag: Option<&str>,
    env: Option<&str>,
    endpoint: &str,
) -> anyhow::Result<Protocol> {
    Ok(match (flag, env) {
        (Some(name), _) => Protocol::parse(name)?,
        (None, Some(env)) if !env.trim().is_empty() => Protocol::parse(env.trim())
            .map_err(|e| anyhow::anyhow!("{PROTOCOL_ENV}={env:?}: {e}"))?,
        (None, _) => benchtop_otlp::protocol_for_endpoint(endpoint),
    })
}

/// `benchtop export DIR --otlp ENDPOINT`: the session in `dir` (or every run of the
/// series in it) sent with its original times; one line per session says what arrived.
/// Fails when a batch did not arrive.
pub fn export(dir: &std::path::Path, args: &OtlpArgs) -> anyhow::Result<std::process::ExitCode> {
    use anyhow::Context as _;
    use benchtop_sessions::escape::Escaped;
    use benchtop_sessions::series::{SERIES_FILE, Series};
    let Some(opts) = args.options()? else {
        anyhow::bail!("export to OTLP needs --otlp ENDPOINT");
    };
    let shown = |d: &std::path::Path| Escaped(&d.display().to_string()).to_string();
    let dirs: Vec<PathBuf> = if std::fs::symlink_metadata(dir.join(SERIES_FILE)).is_ok()
        && std::fs::symlink_metadata(dir.join(benchtop_sessions::store::SESSION_FILE)).is_err()
    {
        let series =
            Series::load(dir).with_context(|| format!("cannot open the series {}", shown(dir)))?;
        series.sessions.iter().map(|(_, s)| s.dir.clone()).collect()
    } else {
        vec![dir.to_owned()]
    };
    let mut all_arrived = true;
    for d in dirs {
        let report = benchtop_otlp::replay(&d, &opts)
            .with_context(|| format!("cannot send {}", shown(&d)))?;
        for w in report.warnings() {
            eprintln!("benchtop: warning: {}", Escaped(&w));
        }
        all_arrived &= report.dropped() == 0;
        println!(
            "{}: {} requests ({} profiles, {} metrics; {} bytes) to {} ({})",
            shown(&d),
            report.requests,
            report.profile_requests,
            report.metric_requests,
            report.bytes,
            opts.endpoint,
            opts.protocol.name()
        );
    }
    Ok(if all_arrived {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// benchtop's command line as a session records it: the value of `--otlp-headers`
/// replaced by its keys with `<redacted>` values.
pub fn redact_command_line(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut next_is_headers = false;
    for arg in args {
        if next_is_headers {
            out.push(benchtop_otlp::redact_headers(&arg));
            next_is_headers = false;
        } else if let Some(list) = arg.strip_prefix("--otlp-headers=") {
            out.push(format!(
                "--otlp-headers={}",
                benchtop_otlp::redact_headers(list)
            ));
        } else {
            next_is_headers = arg == "--otlp-headers";
            out.push(arg);
        }
    }
    out
}

/// The recorder's [`IntervalStream`] over an [`Exporter`]: one exporter per run (a series
/// shares the stream and runs one after another), started when measured work begins.
#[derive(Debug)]
pub struct OtlpStream {
    opts: OtlpOptions,
    run: Mutex<Run>,
}

#[derive(Default)]
struct Run {
    exporter: Option<Exporter>,
    /// Why the exporter could not start.
    failed: Option<String>,
    /// The worker's allocation stacks, once it sent allocations.
    alloc_namer: Option<std::sync::Arc<dyn StackNamer>>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("exporter", &self.exporter)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

/// A worker's allocation stacks, named on the exporter's naming thread with the
/// recorder's own symbolizer of them (the recorder's thread never waits on debug
/// information for them, and the program's symbols are read once).
struct AllocNamer(AllocStacks);

impl StackNamer for AllocNamer {
    fn with_names(&self, f: &mut dyn FnMut(&dyn StackSource)) {
        self.0.with_names(|names| f(&AllocNameSource(names)));
    }
}

struct AllocNameSource<'n, 'a>(&'n AllocNames<'a>);

impl StackSource for AllocNameSource<'_, '_> {
    fn frames<'s>(&'s self, id: u32, out: &mut Vec<&'s str>) {
        if let Some(frames) = self.0.frames(id) {
            out.extend(frames.rev());
        }
    }

    fn thread(&self, _tid: u32) -> Option<&str> {
        None
    }
}

impl OtlpStream {
    /// A stream sending with `opts`.
    pub fn new(opts: OtlpOptions) -> OtlpStream {
        OtlpStream {
            opts,
            run: Mutex::new(Run::default()),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Run) -> T) -> T {
        f(&mut self.run.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl IntervalStream for OtlpStream {
    fn began(&self, meta: &SessionMeta, start: SystemTime) {
        let context = RunContext {
            resource: benchtop_otlp::resource(meta, meta.worker.pid),
            start_unix_ns: u64::try_from(
                start
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos(),
            )
            .unwrap_or(u64::MAX),
            sampling: Sampling::of(meta),
        };
        self.with(|run| {
            // A run before it that did not finish (it cannot happen; a series finishes
            // each run) is not sent on into this one.
            *run = Run::default();
            match Exporter::start(self.opts.clone()) {
                Ok(exporter) => {
                    exporter.begin(context);
                    run.exporter = Some(exporter);
                }
                Err(e) => run.failed = Some(e.to_string()),
            }
        });
    }

    fn row(&self, row: &TimeseriesRow, histograms: &[(String, Histogram<u64>)]) {
        self.with(|run| {
            if let Some(e) = &run.exporter {
                e.row(row, histograms);
            }
        });
    }

    fn stacks(&self, chunk: &StacksChunk) {
        self.with(|run| {
            if let Some(e) = &run.exporter {
                e.stacks(chunk);
            }
        });
    }

    fn allocs(&self, interval: &AllocInterval) {
        self.with(|run| {
            let Some(e) = &run.exporter else { return };
            let namer = run.alloc_namer.get_or_insert_with(|| {
                std::sync::Arc::new(AllocNamer(interval.stacks.clone()))
                    as std::sync::Arc<dyn StackNamer>
            });
            let batch = BatchInterval::from_allocs(
                interval.t0_ns,
                interval.t1_ns,
                &interval.allocated,
                &interval.live,
            );
            e.allocs(namer, batch, interval.rate);
        });
    }

    fn ending(&self) {
        self.with(|run| {
            if let Some(e) = &run.exporter {
                e.restore_priority();
            }
        });
    }

    fn drops(&self) -> StreamDrops {
        self.with(|run| match &run.exporter {
            Some(e) => {
                let r = e.report();
                StreamDrops::new(
                    &self.opts.endpoint,
                    r.dropped_failed,
                    r.dropped_queue_full + r.dropped_table_full,
                    r.last_error,
                )
            }
            None => StreamDrops::default(),
        })
    }

    fn finish(&self, meta: &mut SessionMeta) {
        let (exporter, failed) = self.with(|run| (run.exporter.take(), run.failed.take()));
        let mut info = OtlpInfo::default();
        info.endpoint.clone_from(&self.opts.endpoint);
        info.protocol = self.opts.protocol.name().to_owned();
        info.headers = self.opts.header_names();
        if let Some(why) = failed {
            meta.warnings.push(format!(
                "OTLP export to {}: not started: {why}",
                self.opts.endpoint
            ));
        }
        if let Some(exporter) = exporter {
            let report = exporter.finish(FINISH_WAIT);
            meta.warnings.extend(report.warnings());
            info.requests = report.requests;
            info.bytes = report.bytes;
            info.dropped = report.dropped();
            info.queue_bytes = Some(report.queue_bytes);
            info.queue_peak_bytes = Some(report.queue_peak_bytes);
        }
        meta.otlp = Some(info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_file_may_set_the_endpoint_and_headers_and_refuses_a_bad_endpoint() {
        use clap::CommandFactory as _;
        let config = crate::config::Config::parse(
            "[record]\notlp = \"http://127.0.0.1:4317\"\notlp-headers = \"authorization=t0ken\"\n",
        )
        .expect("valid TOML");
        let command = config.apply(crate::Cli::command()).expect("valid values");
        let matches = command
            .try_get_matches_from(["benchtop", "run", "ring"])
            .expect("parses");
        let run = matches.subcommand_matches("run").expect("run");
        assert_eq!(
            run.get_one::<String>("otlp").map(String::as_str),
            Some("http://127.0.0.1:4317")
        );
        let bad = crate::config::Config::parse("[record]\notlp = \"ftp://x\"\n").expect("TOML");
        assert!(bad.apply(crate::Cli::command()).is_err());
    }

    #[test]
    fn header_values_are_redacted_from_the_recorded_command_line() {
        let args = [
            "benchtop",
            "run",
            "--otlp",
            "http://127.0.0.1:4317",
            "--otlp-headers",
            "authorization=Bearer s3cret",
            "--otlp-headers=x-tenant=t1,x-token=abc",
            "ring",
        ]
        .map(String::from)
        .to_vec();
        let recorded = redact_command_line(args).join(" ");
        assert!(
            !recorded.contains("s3cret") && !recorded.contains("abc"),
            "{recorded}"
        );
        assert!(recorded.contains("authorization=<redacted>"), "{recorded}");
        assert!(recorded.contains("--otlp-headers=x-tenant=<redacted>,x-token=<redacted>"));
        assert!(recorded.contains("http://127.0.0.1:4317"));
    }

    #[test]
    fn the_protocol_comes_from_the_flag_the_environment_then_the_port() {
        let chosen = |flag, env, endpoint| chosen_protocol(flag, env, endpoint).unwrap();
        let http = "http://collector:4318";
        assert_eq!(chosen(None, None, http), Protocol::HttpProtobuf);
        assert_eq!(chosen(None, None, "collector:4317"), Protocol::Grpc);
        assert_eq!(chosen(None, None, "https://otel.example"), Protocol::Grpc);
        assert_eq!(chosen(None, Some(""), http), Protocol::HttpProtobuf);
        assert_eq!(chosen(None, Some("grpc"), http), Protocol::Grpc);
        assert_eq!(
            chosen(Some("http/protobuf"), Some("grpc"), "h:4317"),
            Protocol::HttpProtobuf
        );
        let e = chosen_protocol(None, Some("http/json"), http)
            .unwrap_err()
            .to_string();
        assert!(e.contains(PROTOCOL_ENV) && e.contains("http/json"), "{e}");
    }

    #[test]
    fn malformed_endpoints_are_refused_before_the_run() {
        for (endpoint, words) in [
            ("127.0.0.1:99999", "not a port"),
            ("http://[::1", "not closed"),
        ] {
            let e = crate::Cli::parse_from_os(["benchtop", "run", "--otlp", endpoint, "ring"])
                .expect_err(endpoint)
                .to_string();
            assert!(e.contains(words), "{endpoint}: {e}");
        }
    }
}
