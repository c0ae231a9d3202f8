//! The headless recorder: the conductor of one worker process.
//!
//! It starts the worker, performs the hello / ready / start handshake, attaches the
//! sampler and the monitor between `ready` and `start`, turns each tick into a
//! timeseries row and a latency.hlog interval, and finalizes the session however the run
//! ends: the workload finishes, the duration elapses, the user presses Ctrl-C, or the
//! worker dies.

pub mod child;
pub mod live;
pub mod progress;

use std::collections::BTreeMap;
use std::io::{BufReader, Read};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use benchtop_profilers::monitor::{TreeMonitor, TreeMonitorOptions};
use benchtop_profilers::sampler::{SampleEvent, Sampler, SamplerOptions};
use benchtop_profilers::{ProfilerError, SymbolDetail, UnwindMode, host, process_start_ticks};
use benchtop_sessions::histogram::{HistogramDecoder, Total};
use benchtop_sessions::meta::{Better, Figure, PhaseInfo, WorkloadInfo};
use benchtop_sessions::store::{SessionWriter, StackKind, new_session_id, rfc3339};
use benchtop_sessions::{Percentiles, SessionMeta, Status, TimeseriesRow};
use benchtop_workloads::protocol::{
    self, ConductorMessage, MetricKind, ProtocolError, ReportReader, WorkerMessage,
};
use hdrhistogram::Histogram;

use crate::cli::{PerfEvent, RecordArgs, Symbols, Unwind};
use child::{WorkerExit, WorkerProcess, WorkerSpec};
use live::{LiveEvent, LiveLink};
use progress::{Progress, ProgressFigures};

/// How long a worker may take to say hello, and then to say ready.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a worker told to stop may take before it gets SIGTERM, then SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long a worker that sent its summary (or error) may take to exit before it is
/// told to stop.
const EXIT_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for the worker's pipes to close after it exited (a grandchild may
/// hold them open).
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Bad report lines kept verbatim in the session's warnings; the rest are counted.
const MAX_PROTOCOL_WARNINGS: usize = 20;

/// Phases kept in session.json; a workload reporting more (a long server-sim run
/// checkpointing every second) has the rest counted in a warning.
const MAX_PHASES: usize = 1000;
/// Events queued between the reader threads and the conductor: beyond this the pipes
/// push back on the worker instead of the conductor's memory growing.
const EVENT_QUEUE: usize = 256;

/// Busiest threads kept in each timeseries row (every thread is in threads.csv).
const TOP_THREADS: usize = 5;
/// threads.csv is rewritten every this many rows during a run, and at its end.
const THREADS_EVERY_ROWS: u32 = 10;

/// Where sessions go when no `--record DIR` is given, relative to the working directory.
pub const DEFAULT_SESSIONS_DIR: &str = "sessions";

/// What the conductor records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A built-in workload's worker: hello, ready, `start`, ticks, summary.
    Worker,
    /// Any command, held at the exec gate (`program` is `benchtop exec-gate -- …`) until
    /// the sampler is attached. It may speak the report protocol; it need not.
    Command,
    /// A process that is already running: profiled and watched, never signalled.
    Attach {
        /// Its pid.
        pid: u32,
        /// Its start time (clock ticks after boot), to tell its exit from a reused pid.
        start_ticks: u64,
    },
}

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// What kind of process is recorded.
    pub target: Target,
    /// Workload name for the session.
    pub workload: String,
    /// Workload parameters by their command-line names.
    pub params: BTreeMap<String, serde_json::Value>,
    /// The worker command.
    pub program: std::ffi::OsString,
    /// Its arguments.
    pub args: Vec<std::ffi::OsString>,
    /// The conductor's command line, for the session.
    pub command_line: Vec<String>,
    /// How to record.
    pub record: RecordArgs,
    /// A live view to tell as the run goes on (the TUI); `None` headless.
    pub live: Option<LiveLink>,
}

/// How a recording ended.
#[derive(Debug, Clone)]
pub struct RecordOutcome {
    /// The session directory.
    pub dir: PathBuf,
    /// Its final status.
    pub status: Status,
    /// The workload's summary lines, as it printed them.
    pub summary: Vec<String>,
    /// The session's warnings, for the user to see at the end.
    pub warnings: Vec<String>,
}

/// Every producer thread feeds one channel of these.
#[derive(Debug)]
enum Event {
    Report(Result<WorkerMessage, ProtocolError>),
    Output(Vec<u8>),
    /// One of the worker's three streams (reports, stdout, stderr) reached its end.
    Closed,
}

/// Streams read from a worker: reports, stdout, stderr.
const STREAMS: usize = 3;

static INTERRUPTS: AtomicUsize = AtomicUsize::new(0);

fn install_interrupt_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // A failure only means Ctrl-C keeps its default action; nothing to record.
        let _ = ctrlc::set_handler(|| {
            INTERRUPTS.fetch_add(1, Ordering::SeqCst);
        });
    });
}

/// Records one run into a session directory.
pub fn record(opts: &RecordOptions) -> Result<RecordOutcome> {
    install_interrupt_handler();
    let interrupts_at_start = INTERRUPTS.load(Ordering::SeqCst);
    let started = SystemTime::now();
    let began = Instant::now();
    let id = new_session_id(&opts.workload, started);

    let mut meta = SessionMeta::new(
        id.clone(),
        WorkloadInfo::new(opts.workload.clone(), opts.params.clone()),
        host::host_info(),
        rfc3339(started),
    );
    meta.command_line = opts.command_line.clone();
    meta.benchtop_version = env!("CARGO_PKG_VERSION").to_owned();
    let sampler_opts = sampler_options(&opts.record, opts.target);
    // What is asked for; the sampler says what it got once it runs.
    meta.sampling.event = sampler_opts.event.name().into();
    meta.sampling.frequency_hz = sampler_opts.frequency_hz;
    if opts.record.profile.kind().is_some() {
        match Sampler::check(&sampler_opts) {
            // Refused perf events are not fatal: the run goes on without stacks.
            Ok(()) | Err(ProfilerError::PermissionDenied { .. }) => {}
            Err(e) => return Err(anyhow::Error::new(e).context("cannot sample as asked")),
        }
    }
    let mut writer = match &opts.record.record {
        Some(dir) => SessionWriter::create(dir, meta)
            .with_context(|| format!("cannot create the session in {}", dir.display()))?,
        // Two recordings started in the same second get `-2`, `-3`… directories.
        None => SessionWriter::create_unique(Path::new(DEFAULT_SESSIONS_DIR), &id, meta)
            .with_context(|| format!("cannot create a session under ./{DEFAULT_SESSIONS_DIR}"))?,
    };
    let id = writer.meta().id.clone();

    let (worker, pipes) = match opts.target {
        Target::Attach { pid, start_ticks } => (Process::Attached { pid, start_ticks }, None),
        Target::Worker | Target::Command => {
            let spec = WorkerSpec {
                program: opts.program.clone(),
                args: opts.args.clone(),
                session_id: id,
                interval: opts.record.interval,
                gate: opts.target == Target::Command,
            };
            match WorkerProcess::spawn(&spec) {
                Ok((worker, pipes)) => (Process::Child(worker), Some(pipes)),
                Err(e) => {
                    let reason = format!(
                        "cannot start the worker {}: {e}",
                        std::path::Path::new(&opts.program).display()
                    );
                    let _ = writer.update_meta(|m| m.warnings.push(reason.clone()));
                    let _ = writer.finish(Status::Crashed, rfc3339(SystemTime::now()));
                    anyhow::bail!(reason);
                }
            }
        }
    };
    // A failed write here is retried by every later one and by finish.
    let _ = writer.update_meta(|m| m.worker.pid = Some(worker.pid()));

    let progress = Progress::new(&opts.workload, opts.record.quiet);
    progress.message("starting");
    if let Some(live) = &opts.live {
        live.send(LiveEvent::Spawned {
            dir: writer.dir().to_owned(),
            pid: worker.pid(),
        });
        live.send(LiveEvent::Status("starting".into()));
    }
    let mut run = Run {
        opts,
        writer,
        worker,
        stdin: None,
        progress,
        sampler: None,
        sampler_opts,
        monitor: None,
        rows_since_threads: 0,
        save_pending: false,
        started_at: None,
        stop_sent_at: None,
        term_sent_at: None,
        kill_sent: false,
        exited: None,
        exited_at: None,
        closed_streams: 0,
        stop_status: None,
        summary: None,
        worker_error: None,
        protocol_errors: 0,
        phases_dropped: 0,
        histograms: HistogramDecoder::new(),
        latency_totals: BTreeMap::new(),
        hello_at: None,
        ready: false,
        last_t_ns: 0,
        last_counters: BTreeMap::new(),
        throughput_metric: None,
        latency_metric: None,
        interrupts_at_start,
        start_offset_s: 0.0,
        began,
        failure: None,
        done_at: None,
        lingered: false,
        killed_by_user: false,
        next_row_at: None,
    };
    let events = match pipes {
        Some(pipes) => {
            run.stdin = Some(pipes.stdin);
            spawn_readers(pipes.reports, pipes.stdout, pipes.stderr)
        }
        // An attached process has no streams: the loop sees them all closed.
        None => Ok(mpsc::sync_channel(1).1),
    };
    // Whatever happens in the loop, even a panic, the session is finalized.
    let result = events.and_then(|events| {
        std::panic::catch_unwind(AssertUnwindSafe(|| run.drive(&events))).unwrap_or_else(|panic| {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            Err(anyhow::anyhow!("the recorder panicked: {text}"))
        })
    });
    run.finalize(result)
}

fn spawn_readers(
    reports: std::fs::File,
    stdout: impl Read + Send + 'static,
    stderr: impl Read + Send + 'static,
) -> Result<Receiver<Event>> {
    let (tx, rx) = mpsc::sync_channel(EVENT_QUEUE);
    let report_tx = tx.clone();
    std::thread::Builder::new()
        .name("bt-reports".into())
        .spawn(move || {
            let mut reader = ReportReader::new(BufReader::new(reports));
            while let Some(message) = reader.next_message() {
                if report_tx.send(Event::Report(message)).is_err() {
                    return;
                }
            }
            let _ = report_tx.send(Event::Closed);
        })
        .context("cannot start the thread that reads worker reports")?;
    forward_output("bt-stdout", stdout, tx.clone())?;
    forward_output("bt-stderr", stderr, tx)?;
    Ok(rx)
}

fn forward_output(
    name: &str,
    mut source: impl Read + Send + 'static,
    tx: SyncSender<Event>,
) -> Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match source.read(&mut buf) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(Event::Closed);
                        return;
                    }
                    Ok(n) => {
                        if tx.send(Event::Output(buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                }
            }
        })
        .with_context(|| format!("cannot start the thread {name}"))?;
    Ok(())
}

/// The process being recorded: a child of the conductor, or one it attached to.
enum Process {
    Child(WorkerProcess),
    Attached { pid: u32, start_ticks: u64 },
}

impl Process {
    fn pid(&self) -> u32 {
        match self {
            Process::Child(child) => child.pid(),
            Process::Attached { pid, .. } => *pid,
        }
    }

    /// Signals a child's process group; an attached process is never signalled.
    fn signal_group(&self, signal: i32) {
        if let Process::Child(child) = self {
            child.signal_group(signal);
        }
    }

    /// How the process ended, once it has. An attached process is not ours to wait
    /// for: it has ended when its pid no longer names it.
    fn try_reap(&mut self) -> std::io::Result<Option<WorkerExit>> {
        match self {
            Process::Child(child) => child.try_reap(),
            Process::Attached { pid, start_ticks } => Ok((process_start_ticks(*pid)
                != Some(*start_ticks))
            .then_some(WorkerExit {
                code: None,
                signal: None,
                cpu_time_s: f64::NAN,
                peak_rss_bytes: 0,
            })),
        }
    }
}

struct Run<'a> {
    opts: &'a RecordOptions,
    writer: SessionWriter,
    worker: Process,
    stdin: Option<std::process::ChildStdin>,
    progress: Progress,
    sampler: Option<Sampler>,
    /// The sampler's options, checked before the worker was spawned.
    sampler_opts: SamplerOptions,
    monitor: Option<TreeMonitor>,
    /// Rows written since threads.csv was last rewritten.
    rows_since_threads: u32,
    /// The live view asked for a save; it happens when the sampler's copy comes.
    save_pending: bool,
    started_at: Option<Instant>,
    stop_sent_at: Option<Instant>,
    term_sent_at: Option<Instant>,
    kill_sent: bool,
    exited: Option<WorkerExit>,
    exited_at: Option<Instant>,
    /// Worker streams that reached their end.
    closed_streams: usize,
    /// Set when the conductor decided to end the run (duration, Ctrl-C).
    stop_status: Option<Status>,
    /// The worker's summary, once it arrived.
    summary: Option<protocol::Summary>,
    worker_error: Option<String>,
    protocol_errors: usize,
    /// Phases beyond [`MAX_PHASES`], counted rather than kept.
    phases_dropped: usize,
    /// Decodes tick histograms with every size bounded (worker input is untrusted).
    histograms: HistogramDecoder,
    /// The whole run's latency per metric, for latency.svg.
    latency_totals: BTreeMap<String, Total>,
    /// When the worker said hello (the clock for `ready` starts there).
    hello_at: Option<Instant>,
    ready: bool,
    last_t_ns: u64,
    last_counters: BTreeMap<String, u64>,
    throughput_metric: Option<String>,
    latency_metric: Option<String>,
    interrupts_at_start: usize,
    /// Seconds from the session's start time to the worker's `start`.
    start_offset_s: f64,
    /// When the session started, for offsets.
    began: Instant,
    /// Why the conductor gave up on the worker (handshake timeout, refused version).
    failure: Option<String>,
    /// When the worker had said all it will, while it has not exited.
    done_at: Option<Instant>,
    /// The worker was stopped because it did not exit after its summary.
    lingered: bool,
    /// The user asked twice: the worker was killed at once.
    killed_by_user: bool,
    /// When the conductor writes the next monitor-only row (a target that sends no ticks).
    next_row_at: Option<Instant>,
}

impl Run<'_> {
    /// Runs the event loop until the worker has exited and its reports are drained.
    fn drive(&mut self, events: &Receiver<Event>) -> Result<()> {
        let spawned = Instant::now();
        loop {
            match events.recv_timeout(Duration::from_millis(50)) {
                Ok(Event::Report(message)) => self.on_report(message)?,
                Ok(Event::Output(bytes)) => self.writer.append_worker_log(&bytes)?,
                Ok(Event::Closed) => self.closed_streams += 1,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    // Every reader is gone: nothing more can arrive; don't spin.
                    self.closed_streams = STREAMS;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            self.end_a_worker_that_does_not_exit();
            // A worker starts when it is ready; any other target at once.
            if (self.ready || self.opts.target != Target::Worker)
                && self.started_at.is_none()
                && self.stop_status.is_none()
                && self.failure.is_none()
            {
                self.start()?;
            }
            self.write_monitor_row()?;
            self.take_stacks()?;
            // The clock for `ready` starts at hello.
            let waiting_since = self.hello_at.unwrap_or(spawned);
            if self.opts.target == Target::Worker
                && self.started_at.is_none()
                && self.failure.is_none()
                && self.exited.is_none()
                && waiting_since.elapsed() > HANDSHAKE_TIMEOUT
            {
                let waiting_for = if self.hello_at.is_none() {
                    "hello"
                } else {
                    "ready"
                };
                self.fail(format!(
                    "the worker did not say {waiting_for} within {}s",
                    HANDSHAKE_TIMEOUT.as_secs()
                ));
            }
            self.check_stop_requests();
            if matches!(self.opts.target, Target::Attach { .. }) && self.stop_status.is_some() {
                // Detach: the process goes on, the recording ends.
                return Ok(());
            }
            self.escalate_stop();
            if self.exited.is_none()
                && let Some(exit) = self.worker.try_reap()?
            {
                self.exited = Some(exit);
                self.exited_at = Some(Instant::now());
            }
            if let Some(at) = self.exited_at
                && (self.closed_streams >= STREAMS || at.elapsed() > DRAIN_GRACE)
            {
                // Take what is still queued (the summary may be among it).
                while let Ok(event) = events.try_recv() {
                    match event {
                        Event::Report(message) => self.on_report(message)?,
                        Event::Output(bytes) => self.writer.append_worker_log(&bytes)?,
                        Event::Closed => {}
                    }
                }
                return Ok(());
            }
        }
    }

    fn on_report(&mut self, message: Result<WorkerMessage, ProtocolError>) -> Result<()> {
        let message = match message {
            Ok(m) => m,
            Err(ProtocolError::UnsupportedVersion { found, supported }) => {
                self.fail(format!(
                    "the worker speaks report protocol version {found}; this benchtop speaks \
                     version {supported}: refused"
                ));
                return Ok(());
            }
            Err(e) => {
                self.protocol_warning(e.to_string())?;
                return Ok(());
            }
        };
        match message {
            WorkerMessage::Hello(hello) => {
                if self.hello_at.is_some() {
                    return self.protocol_warning("a second hello was ignored".into());
                }
                let metrics = &hello.metrics;
                self.throughput_metric = metrics
                    .iter()
                    .find(|m| m.kind == MetricKind::Counter)
                    .map(|m| m.name.clone());
                self.latency_metric = metrics
                    .iter()
                    .find(|m| m.kind == MetricKind::Histogram)
                    .map(|m| m.name.clone());
                if !hello.params.is_empty() {
                    self.writer
                        .update_meta(|m| m.workload.params.extend(hello.params))?;
                }
                self.hello_at = Some(Instant::now());
            }
            WorkerMessage::Ready => {
                if self.hello_at.is_none() {
                    return self.protocol_warning("ready before hello".into());
                }
                self.ready = true;
                if self.opts.target == Target::Command && self.started_at.is_some() {
                    // A command speaking the protocol: sampling has run since its exec.
                    self.send(ConductorMessage::Start);
                }
            }
            WorkerMessage::Tick(tick) => {
                if self.started_at.is_none() {
                    return self.protocol_warning("a tick before start was ignored".into());
                }
                self.on_tick(&tick)?;
            }
            WorkerMessage::Phase(phase) => {
                let text = format!(
                    "phase {}: {:.3}s",
                    phase.name,
                    phase.duration_ns as f64 / 1e9
                );
                self.writer
                    .append_worker_log(format!("{text}\n").as_bytes())?;
                if self.writer.meta().phases.len() < MAX_PHASES {
                    let info = PhaseInfo::new(
                        phase.name,
                        phase.t_ns as f64 / 1e9,
                        phase.duration_ns as f64 / 1e9,
                        phase.figures.into_iter().map(session_figure).collect(),
                    );
                    self.writer.update_meta(|m| m.phases.push(info))?;
                } else {
                    self.phases_dropped += 1;
                }
            }
            WorkerMessage::Summary(summary) => {
                if self.summary.is_some() {
                    self.protocol_warning("a second summary replaced the first".into())?;
                }
                self.summary = Some(summary);
            }
            WorkerMessage::Error { message } => self.worker_error = Some(message),
            _ => self.protocol_warning("a message of a newer kind was ignored".into())?,
        }
        Ok(())
    }

    fn protocol_warning(&mut self, text: String) -> Result<()> {
        self.protocol_errors += 1;
        if self.protocol_errors <= MAX_PROTOCOL_WARNINGS {
            let text = format!("worker report: {text}");
            self.say(&text);
            self.writer.update_meta(|m| m.warnings.push(text))?;
        }
        Ok(())
    }

    /// Profilers attach between `ready` and `start`, so every thread the worker creates
    /// for measured work is followed.
    fn start(&mut self) -> Result<()> {
        let pid = self.worker.pid();
        if self.opts.record.profile.kind().is_some() {
            match Sampler::start(pid, &self.sampler_opts) {
                Ok(sampler) => {
                    let kernel = sampler.kernel_frames();
                    let event = sampler.event();
                    let notes = sampler.warnings().to_vec();
                    self.writer.update_meta(|m| {
                        m.sampling.enabled = true;
                        m.sampling.event = event.into();
                        m.sampling.kernel_frames = kernel;
                        m.warnings.extend(notes);
                    })?;
                    self.sampler = Some(sampler);
                }
                Err(e @ ProfilerError::PermissionDenied { .. }) => {
                    let reason = format!("no stack sampling: {e}");
                    self.say(&reason);
                    self.writer.update_meta(|m| {
                        m.sampling.enabled = false;
                        m.sampling.reason = Some(e.to_string());
                        m.warnings.push(reason);
                    })?;
                }
                Err(e) => {
                    // Anything else (the worker vanished, the kernel refused the buffers)
                    // is not a run the user asked for: end it and say why.
                    self.fail(format!("cannot sample the worker: {e}"));
                    return Ok(());
                }
            }
        } else {
            self.writer.update_meta(|m| {
                m.sampling.reason = Some("stack sampling off (--profile none)".into());
            })?;
        }
        self.monitor = Some(TreeMonitor::new(pid));
        match self.opts.target {
            Target::Worker => self.send(ConductorMessage::Start),
            Target::Command => {
                if let Process::Child(child) = &mut self.worker
                    && let Err(e) = child.open_gate()
                {
                    self.fail(format!("cannot release the command at its exec gate: {e}"));
                    return Ok(());
                }
                self.next_row_at = Some(Instant::now() + self.opts.record.interval);
            }
            Target::Attach { .. } => {
                self.next_row_at = Some(Instant::now() + self.opts.record.interval);
            }
        }
        let now = Instant::now();
        self.start_offset_s = now.duration_since(self.began).as_secs_f64();
        self.started_at = Some(now);
        self.say("running");
        if let Some(live) = &self.opts.live {
            let sampling = match &self.sampler {
                Some(s) if s.kind().on_cpu() => {
                    format!("{} {} Hz", s.event(), self.sampler_opts.frequency_hz)
                }
                Some(s) => s.event().to_owned(),
                None => "no sampling".to_owned(),
            };
            live.send(LiveEvent::Started {
                throughput: self.throughput_metric.clone(),
                latency: self.latency_metric.clone(),
                sampling,
            });
        }
        Ok(())
    }

    fn on_tick(&mut self, tick: &protocol::Tick) -> Result<()> {
        let interval_ns = tick.t_ns.saturating_sub(self.last_t_ns);
        let interval_s = interval_ns as f64 / 1e9;
        // latency.hlog offsets count from the session's start time (its StartTime header).
        let start_s = self.start_offset_s + self.last_t_ns as f64 / 1e9;
        let mut row = TimeseriesRow::default();
        row.t_s = tick.t_ns as f64 / 1e9;
        row.interval_s = interval_s;
        row.counters.clone_from(&tick.counters);
        for (name, &value) in &tick.counters {
            let before = self.last_counters.get(name).copied().unwrap_or(0);
            if interval_s > 0.0 {
                row.rates.insert(
                    name.clone(),
                    value.saturating_sub(before) as f64 / interval_s,
                );
            }
        }
        let mut live_histograms = Vec::new();
        for (name, encoded) in &tick.histograms {
            match self.histograms.decode(encoded) {
                Ok(histogram) => {
                    row.latency
                        .insert(name.clone(), Percentiles::of(&histogram));
                    self.writer
                        .append_latency(name, start_s, interval_s, &histogram)?;
                    // A total past its cap stops growing; latency.hlog keeps every interval.
                    let _ = self
                        .latency_totals
                        .entry(name.clone())
                        .or_default()
                        .add(&histogram);
                    if self.opts.live.is_some() {
                        live_histograms.push((name.clone(), histogram));
                    }
                }
                Err(e) => self.protocol_warning(format!("tick histogram {name:?}: {e}"))?,
            }
        }
        self.monitor_row(&mut row)?;
        self.writer.append_row(&row)?;
        self.publish(&row, live_histograms);
        self.last_t_ns = tick.t_ns;
        self.last_counters.clone_from(&tick.counters);
        self.show_progress(&row);
        Ok(())
    }

    /// For a target that sends no ticks (a command that does not speak the protocol, an
    /// attached process), a row of monitors every interval.
    fn write_monitor_row(&mut self) -> Result<()> {
        let (Some(started), Some(due)) = (self.started_at, self.next_row_at) else {
            return Ok(());
        };
        if self.hello_at.is_some() {
            // The program speaks the protocol: its ticks make the rows.
            self.next_row_at = None;
            return Ok(());
        }
        let now = Instant::now();
        if now < due || self.exited.is_some() {
            return Ok(());
        }
        let interval = self.opts.record.interval;
        let t_s = now.duration_since(started).as_secs_f64();
        let mut row = TimeseriesRow::default();
        row.t_s = t_s;
        row.interval_s = t_s - self.last_t_ns as f64 / 1e9;
        self.monitor_row(&mut row)?;
        self.writer.append_row(&row)?;
        self.publish(&row, Vec::new());
        self.last_t_ns = (t_s * 1e9) as u64;
        // The next row is due one interval later, without drifting, and never in the past.
        self.next_row_at = Some((due + interval).max(now));
        self.show_progress(&row);
        Ok(())
    }

    /// A status message, on the progress line and to the live view.
    fn say(&self, text: &str) {
        self.progress.message(text);
        if let Some(live) = &self.opts.live {
            live.send(LiveEvent::Status(text.to_owned()));
        }
    }

    /// Hands a written row and its histograms to the live view, and asks the sampler for
    /// a copy of its stacks ([`Run::take_stacks`] passes it on).
    fn publish(&self, row: &TimeseriesRow, histograms: Vec<(String, Histogram<u64>)>) {
        let Some(live) = &self.opts.live else {
            return;
        };
        live.send(LiveEvent::Row {
            row: Box::new(row.clone()),
            histograms,
        });
        if let Some(sampler) = &self.sampler {
            sampler.request_snapshot();
        }
    }

    /// Passes the sampler's copy of its stacks to the live view once it is made; a save
    /// asked for by the view writes it (and threads.csv) into the session first.
    fn take_stacks(&mut self) -> Result<()> {
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
                    self.say("snapshot saved: threads.csv (no stacks: sampling is off)");
                }
            }
        }
        let Some(snapshot) = self.sampler.as_ref().and_then(Sampler::take_snapshot) else {
            return Ok(());
        };
        if std::mem::take(&mut self.save_pending) {
            let workload = &self.opts.workload;
            let mut saved = Vec::new();
            for (kind, tree, title) in [
                (StackKind::Cpu, &snapshot.cpu, "on-CPU"),
                (
                    StackKind::OffCpu,
                    &snapshot.offcpu,
                    "off-CPU (time blocked)",
                ),
            ] {
                let wanted = match kind {
                    StackKind::Cpu => self.sampler_opts.kind.on_cpu(),
                    _ => self.sampler_opts.kind.off_cpu(),
                };
                if wanted {
                    self.writer.write_stacks(
                        kind,
                        tree,
                        &format!("{workload} — {title} (so far)"),
                    )?;
                    saved.push(kind.folded_file());
                }
            }
            self.save_threads()?;
            saved.push("threads.csv");
            self.say(&format!("snapshot saved: {}", saved.join(", ")));
        }
        if let Some(live) = &self.opts.live {
            live.send(LiveEvent::Stacks(Box::new(snapshot)));
        }
        Ok(())
    }

    fn save_threads(&mut self) -> Result<()> {
        if let Some(monitor) = &self.monitor {
            self.writer.write_threads(&monitor.threads_summary())?;
        }
        Ok(())
    }

    /// The monitors' part of a row: the tree's resources, per-core CPU and busiest
    /// threads. threads.csv is rewritten every [`THREADS_EVERY_ROWS`] rows, so a run cut
    /// off keeps a recent table.
    fn monitor_row(&mut self, row: &mut TimeseriesRow) -> Result<()> {
        let Some(monitor) = &mut self.monitor else {
            return Ok(());
        };
        // The tree is gone (the worker exited): the row goes without resources.
        if let Ok(sample) = monitor.sample() {
            sample.fill_row(row, TOP_THREADS);
        }
        self.rows_since_threads += 1;
        if self.rows_since_threads >= THREADS_EVERY_ROWS {
            self.rows_since_threads = 0;
            self.save_threads()?;
        }
        Ok(())
    }

    fn show_progress(&self, row: &TimeseriesRow) {
        let figures = ProgressFigures {
            elapsed_s: self.started_at.map_or(0.0, |s| s.elapsed().as_secs_f64()),
            rate: self
                .throughput_metric
                .as_ref()
                .and_then(|m| row.rates.get(m).map(|r| (m.clone(), *r))),
            latency: self
                .latency_metric
                .as_ref()
                .and_then(|m| row.latency.get(m).map(|p| (m.clone(), p.p50, p.p99))),
            rss_bytes: row.resources.map(|r| r.rss_bytes),
            samples: self.sampler.as_ref().map(|s| {
                let stats = s.stats();
                (stats.samples, stats.lost)
            }),
        };
        self.progress.update(&figures);
    }

    fn send(&mut self, message: ConductorMessage) {
        if let Some(stdin) = &mut self.stdin {
            let mut buf = Vec::with_capacity(32);
            if protocol::write_message(stdin, &mut buf, &message).is_err() {
                // The worker closed its stdin or exited; the exit path reports it.
                self.stdin = None;
            }
        }
    }

    /// The duration elapsed or the user pressed Ctrl-C: ask the worker to stop.
    fn check_stop_requests(&mut self) {
        if self.exited.is_some() {
            return;
        }
        let interrupts = INTERRUPTS.load(Ordering::SeqCst) - self.interrupts_at_start;
        if interrupts >= 2 && !self.kill_sent {
            self.say("interrupted twice: killing the worker");
            self.worker.signal_group(libc::SIGKILL);
            self.term_sent_at = Some(Instant::now());
            self.kill_sent = true;
            self.killed_by_user = true;
        }
        if self.stop_status.is_some() {
            return;
        }
        if interrupts >= 1 {
            self.request_stop(Status::Stopped, "interrupted: stopping the worker");
        } else if self
            .opts
            .live
            .as_ref()
            .is_some_and(LiveLink::stop_requested)
        {
            self.request_stop(Status::Stopped, "stop asked: stopping the worker");
        } else if let (Some(started), Some(duration)) = (self.started_at, self.opts.record.duration)
            && started.elapsed() >= duration
        {
            self.request_stop(Status::Complete, "duration reached: stopping the worker");
        }
    }

    fn request_stop(&mut self, status: Status, text: &str) {
        self.stop_status = Some(status);
        match self.opts.target {
            Target::Command if self.hello_at.is_none() => {
                // A program that does not speak the protocol stops as at a terminal.
                self.say(&text.replace("stopping the worker", "sending SIGINT"));
                self.worker.signal_group(libc::SIGINT);
            }
            Target::Attach { .. } => {
                self.say(&text.replace("stopping the worker", "detaching"));
                return;
            }
            // Before `start` too: a worker told to stop before it started exits quietly.
            Target::Worker | Target::Command => {
                self.say(text);
                self.send(ConductorMessage::Stop);
            }
        }
        self.stop_sent_at = Some(Instant::now());
    }

    /// A worker that has said all it will (its summary or an error) but does not exit
    /// within [`EXIT_GRACE`] is told to stop, then escalated as usual.
    fn end_a_worker_that_does_not_exit(&mut self) {
        if self.exited.is_some() || self.stop_status.is_some() || self.failure.is_some() {
            return;
        }
        let done = self.summary.is_some() || self.worker_error.is_some();
        match (done, self.done_at) {
            (true, None) => self.done_at = Some(Instant::now()),
            (true, Some(at)) if at.elapsed() > EXIT_GRACE => {
                self.lingered = true;
                self.request_stop(Status::Complete, "the worker does not exit: stopping it");
            }
            _ => {}
        }
    }

    /// Ends the worker for good: the conductor gave up on it. The first reason stands.
    fn fail(&mut self, reason: String) {
        if self.failure.is_some() {
            return;
        }
        self.say(&reason);
        self.failure = Some(reason);
        self.worker.signal_group(libc::SIGTERM);
        self.term_sent_at = Some(Instant::now());
    }

    /// A worker that ignores `stop` gets SIGTERM, then SIGKILL.
    fn escalate_stop(&mut self) {
        if self.exited.is_some() {
            return;
        }
        if let Some(at) = self.term_sent_at {
            if at.elapsed() > KILL_GRACE && !self.kill_sent {
                self.worker.signal_group(libc::SIGKILL);
                self.kill_sent = true;
            }
        } else if let Some(at) = self.stop_sent_at
            && at.elapsed() > STOP_GRACE
        {
            self.say("the worker ignores stop: sending SIGTERM");
            self.worker.signal_group(libc::SIGTERM);
            self.term_sent_at = Some(Instant::now());
        }
    }

    /// Writes stacks and the final metadata, whatever happened. The session is always
    /// finished: a failure along the way becomes a warning in it.
    fn finalize(mut self, result: Result<()>) -> Result<RecordOutcome> {
        self.say("writing the session");
        let mut warnings = Vec::new();
        if let Err(e) = &result {
            // The loop failed (the disk, most likely): end the worker, keep what we can.
            warnings.push(format!("recording failed: {e:#}"));
        }
        let attached = matches!(self.worker, Process::Attached { .. });
        if self.exited.is_none() && !attached {
            self.worker.signal_group(libc::SIGKILL);
            for _ in 0..100 {
                if let Ok(Some(exit)) = self.worker.try_reap() {
                    self.exited = Some(exit);
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if let Some(sampler) = self.sampler.take() {
            match sampler.finish() {
                Ok(profile) => {
                    // The sampler's start-up warnings are already in the session.
                    let known = &self.writer.meta().warnings;
                    warnings.extend(
                        profile
                            .warnings
                            .iter()
                            .filter(|w| !known.contains(w))
                            .cloned(),
                    );
                    let workload = &self.opts.workload;
                    if profile.kind.on_cpu() {
                        let title = format!("{workload} — on-CPU");
                        if let Err(e) =
                            self.writer
                                .write_stacks(StackKind::Cpu, &profile.cpu, &title)
                        {
                            warnings.push(format!("on-CPU stacks: {e}"));
                        }
                    }
                    if profile.kind.off_cpu() {
                        let title = format!("{workload} — off-CPU (time blocked)");
                        if let Err(e) =
                            self.writer
                                .write_stacks(StackKind::OffCpu, &profile.offcpu, &title)
                        {
                            warnings.push(format!("off-CPU stacks: {e}"));
                        }
                    }
                    let mut sampling = profile.sampling_info();
                    sampling.per_thread = self.opts.record.per_thread;
                    let _ = self.writer.update_meta(|m| m.sampling = sampling);
                    let elapsed = self.started_at.map_or(0.0, |t| t.elapsed().as_secs_f64());
                    let cpu = profile.kind.on_cpu().then_some(&profile.cpu);
                    let offcpu = profile.kind.off_cpu().then_some(&profile.offcpu);
                    if let Err(e) = self.writer.write_pprof(cpu, offcpu, elapsed) {
                        warnings.push(format!("profile.pb.gz: {e}"));
                    }
                }
                Err(e) => warnings.push(format!("stack sampling failed: {e}")),
            }
        }
        let totals: Vec<(&str, &Histogram<u64>)> = self
            .latency_totals
            .iter()
            .filter_map(|(name, total)| Some((name.as_str(), total.histogram()?)))
            .collect();
        if !totals.is_empty()
            && let Err(e) = self.writer.write_latency_plot(&totals)
        {
            warnings.push(format!("latency.svg: {e}"));
        }
        if let Some(monitor) = &self.monitor {
            if let Err(e) = self.writer.write_threads(&monitor.threads_summary()) {
                warnings.push(format!("threads.csv: {e}"));
            }
            let dropped = monitor.threads_dropped();
            if dropped > 0 {
                warnings.push(format!(
                    "threads.csv: {dropped} exited threads left out (the table keeps the first \
                     {} threads to exit)",
                    TreeMonitorOptions::default().max_exited_threads
                ));
            }
        }
        if let Err(e) = self.writer.write_phase_plot() {
            warnings.push(format!("phases.svg: {e}"));
        }
        if self.phases_dropped > 0 {
            warnings.push(format!(
                "{} phases left out of session.json (it keeps the first {MAX_PHASES})",
                self.phases_dropped
            ));
        }
        if self.protocol_errors > MAX_PROTOCOL_WARNINGS {
            warnings.push(format!(
                "{} more bad report lines not listed",
                self.protocol_errors - MAX_PROTOCOL_WARNINGS
            ));
        }
        let status = if result.is_err() {
            // The recorder failed, not (necessarily) the worker: its reason is above.
            Status::Crashed
        } else {
            self.final_status(&mut warnings)
        };
        let exit = self.exited;
        let summary = self.summary.take();
        let lines = summary.as_ref().map(summary_lines).unwrap_or_default();
        let figures: Vec<Figure> = summary
            .map(|s| s.figures.into_iter().map(session_figure).collect())
            .unwrap_or_default();
        let _ = self.writer.update_meta(|m| {
            m.worker.exit = exit.map(|e| e.to_string());
            // An attached process is not our child: wait4 tells nothing of it.
            m.worker.cpu_time_s = exit.filter(|_| !attached).map(|e| e.cpu_time_s);
            m.worker.peak_rss_bytes = exit.filter(|_| !attached).map(|e| e.peak_rss_bytes);
            m.summary = figures;
            m.warnings.extend(warnings);
        });
        self.progress.finish();
        let all_warnings = self.writer.meta().warnings.clone();
        let dir = self.writer.finish(status, rfc3339(SystemTime::now()))?;
        Ok(RecordOutcome {
            dir,
            status,
            summary: lines,
            warnings: all_warnings,
        })
    }

    /// How the run ended, with the reason in `warnings` when it did not end well.
    fn final_status(&self, warnings: &mut Vec<String>) -> Status {
        if let Some(reason) = &self.failure {
            warnings.push(reason.clone());
            return Status::Crashed;
        }
        match self.opts.target {
            Target::Attach { .. } => {
                // Detached on request, or the process ended (how is not ours to know).
                return self.stop_status.unwrap_or(Status::Complete);
            }
            Target::Command if self.hello_at.is_none() => {
                let Some(exit) = self.exited else {
                    warnings.push("the command did not exit and was killed".into());
                    return Status::Crashed;
                };
                return match self.stop_status {
                    Some(stop) => {
                        if self.killed_by_user {
                            warnings.push(format!(
                                "the command was killed on a second interrupt ({exit})"
                            ));
                        }
                        stop
                    }
                    None if exit.success() => Status::Complete,
                    None => {
                        warnings.push(match &self.worker_error {
                            Some(error) => format!("{error} ({exit})"),
                            None => format!("the command failed ({exit})"),
                        });
                        Status::Crashed
                    }
                };
            }
            Target::Worker | Target::Command => {}
        }
        let Some(exit) = self.exited else {
            warnings.push("the worker did not exit and was killed".into());
            return Status::Crashed;
        };
        if let Some(error) = &self.worker_error {
            warnings.push(format!("the worker failed: {error} ({exit})"));
            return Status::Crashed;
        }
        let ended_by_us = self.term_sent_at.is_some();
        match self.stop_status {
            Some(stop) if exit.success() || ended_by_us => {
                if self.killed_by_user {
                    warnings.push(format!(
                        "the worker was killed on a second interrupt ({exit})"
                    ));
                } else if self.lingered {
                    warnings.push(format!(
                        "the worker did not exit after its summary and was stopped ({exit})"
                    ));
                } else if !exit.success() {
                    warnings.push(format!("the worker ignored stop and was ended ({exit})"));
                }
                if self.summary.is_none() && self.started_at.is_some() {
                    warnings.push("the worker sent no summary".into());
                }
                stop
            }
            None if exit.success() && self.summary.is_some() => Status::Complete,
            None if exit.success() => {
                warnings.push("the worker exited without a summary".into());
                Status::Crashed
            }
            _ => {
                warnings.push(format!("the worker ended before its summary ({exit})"));
                Status::Crashed
            }
        }
    }
}

/// The summary as the workload printed it; `name: value unit` when it sent figures only.
fn summary_lines(summary: &protocol::Summary) -> Vec<String> {
    if !summary.lines.is_empty() {
        return summary.lines.clone();
    }
    summary
        .figures
        .iter()
        .map(|f| {
            format!("{}: {} {}", f.name, f.value, f.unit)
                .trim_end()
                .to_owned()
        })
        .collect()
}

/// The sampler's options from the command line's. Built-in workers keep frame pointers:
/// they stay on them unless `--unwind` says otherwise.
fn sampler_options(record: &RecordArgs, target: Target) -> SamplerOptions {
    let mut opts = SamplerOptions::default();
    opts.kind = record.profile.kind().unwrap_or_default();
    opts.per_thread = record.per_thread;
    opts.frequency_hz = record.frequency;
    opts.event = match record.event {
        PerfEvent::Auto => SampleEvent::Auto,
        PerfEvent::CpuClock => SampleEvent::CpuClock,
        PerfEvent::Cycles => SampleEvent::Cycles,
    };
    opts.symbols = match record.symbols {
        Symbols::Inlined => SymbolDetail::Inlined,
        Symbols::Names => SymbolDetail::NamesOnly,
    };
    opts.unwind = match (record.unwind, target) {
        (None, Target::Worker) | (Some(Unwind::Fp), _) => UnwindMode::FramePointers,
        (None | Some(Unwind::Auto), _) => UnwindMode::Auto,
        (Some(Unwind::Dwarf), _) => UnwindMode::Dwarf,
    };
    opts.stack_size = record.stack_size;
    opts.offcpu_stack_every = record.offcpu_stack_every;
    opts
}

fn session_figure(f: protocol::Figure) -> Figure {
    let mut figure = Figure::new(f.name, f.value, f.unit);
    figure.better = match f.better {
        Some(protocol::Better::Higher) => Some(Better::Higher),
        Some(protocol::Better::Lower) => Some(Better::Lower),
        _ => None,
    };
    figure
}
