//! The driver: the I/O around the [`machine`](crate::machine). It creates the session,
//! starts the worker and the threads that read its streams, feeds what happens into
//! [`step`] as [`Event`]s, and carries out the [`Action`]s that come back (attach the
//! profilers, send `start` or `stop`, signal the group, tell the user). Rows and stacks
//! are [`rows`](crate::rows)' job, the end of the run [`finish`](crate::finish)'s.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

use benchtop_profilers::counting::TreeCounters;
use benchtop_profilers::lifetimes::Lifetimes;

/// Why a session's figures are polled when `--polled-figures` asked for it.
const POLLED_ASKED: &str = "the tree's figures are polled every interval, not counted: \
                            --polled-figures asked for it";
use benchtop_profilers::monitor::{TreeMonitor, TreeMonitorOptions};
use benchtop_profilers::sampler::{Sampler, monotonic_ns};
use benchtop_profilers::{ProfilerError, host};
use benchtop_protocol::{
    self as protocol, ConductorMessage, MetricKind, ProtocolError, WorkerMessage,
};
use benchtop_sessions::histogram::{HistogramDecoder, Total};
use benchtop_sessions::meta::{PhaseInfo, WorkloadInfo};
use benchtop_sessions::store::{SessionWriter, new_session_id, rfc3339};
use benchtop_sessions::{EndedBy, SessionMeta, Status};
use hdrhistogram::Histogram;

use crate::child::{Process, WorkerExit, WorkerPipes, WorkerProcess, WorkerSpec};
use crate::live::LiveEvent;
use crate::machine::{Action, Conductor, Event, Kind, Signal, step};
use crate::notice::{Failure, Notice, ReportIssue};
use crate::options::{DEFAULT_SESSIONS_DIR, RecordOptions, Target};
use crate::streams::{Input, spawn_readers};
use crate::{Interrupts, RecordError};

/// Bad report lines kept verbatim in the session's warnings; the rest are counted.
pub(crate) const MAX_PROTOCOL_WARNINGS: usize = 20;
/// Phases kept in session.json; a workload reporting more (a long server-sim run
/// checkpointing every second) has the rest counted in a warning.
pub(crate) const MAX_PHASES: usize = 1000;
/// Streams read from a worker: reports, stdout, stderr.
const STREAMS: usize = 3;
/// What worker.log keeps of a worker's output (64 MiB; docs/session-format.md): a chatty
/// worker cannot fill the disk through it.
pub(crate) const MAX_WORKER_LOG_BYTES: u64 = 64 << 20;
/// How often the loop turns when nothing arrives: the resolution of every grace period.
const TURN: Duration = Duration::from_millis(50);

/// How a recording ended.
#[derive(Debug, Clone)]
pub struct RecordOutcome {
    /// The session directory.
    pub dir: PathBuf,
    /// Its final status.
    pub status: Status,
    /// What ended it, when complete and not ended by the workload itself.
    pub ended_by: Option<EndedBy>,
    /// The workload's summary lines, as it printed them.
    pub summary: Vec<String>,
    /// The session's warnings, for the user to see at the end.
    pub warnings: Vec<String>,
}

/// Records one run into a session directory.
///
/// Once the session exists it is always finished, however the run ends; the outcome's
/// status says how. An error means no run took place (the options, the directory, the
/// worker could not start) or the recorder itself failed.
///
/// It installs no signal handler: it stops its worker on the first of
/// `opts.interrupts` raised after it began and kills it on the second.
pub fn record(opts: &RecordOptions) -> Result<RecordOutcome, RecordError> {
    let interrupts_at_start = opts.interrupts.as_ref().map_or(0, Interrupts::count);
    let began = Instant::now();
    let (mut writer, worker, pipes) = start_worker(opts, create_session(opts)?)?;
    // A failed write here is retried by every later one and by finish. A command's pid
    // is written when it is released from its gate, with the sampling (one write less
    // before it starts).
    if opts.target != Target::Command {
        let _ = writer.update_meta(|m| m.worker.pid = Some(worker.pid()));
    }

    if let Some(live) = &opts.live {
        live.send(LiveEvent::Spawned {
            dir: writer.dir().to_owned(),
            pid: worker.pid(),
        });
    }
    let kind = match opts.target {
        Target::Worker => Kind::Worker,
        Target::Command => Kind::Command,
        Target::Attach { .. } => Kind::Attach,
    };
    let (conductor, first) = Conductor::new(kind, opts.duration, Instant::now());
    let (stdin, inputs) = match pipes {
        Some(pipes) => (
            Some(pipes.stdin),
            spawn_readers(pipes.reports, pipes.stdout, pipes.stderr),
        ),
        // An attached process has no streams: the loop sees them all closed.
        None => (None, Ok(mpsc::sync_channel(1).1)),
    };
    let mut run = Run {
        opts,
        writer,
        worker,
        stdin,
        conductor,
        inputs: None,
        closed_streams: 0,
        exit: None,
        exited_at: None,
        interrupts_at_start,
        interrupts_seen: 0,
        summary: None,
        protocol_errors: 0,
        phases_dropped: 0,
        data: RunData::new(began),
        sampler: None,
        allocs: None,
        monitor: None,
        counters: None,
        save_pending: false,
        write_failure: None,
    };
    run.say(Notice::Starting);
    // Whatever happens in the loop, even a panic, the session is finalized.
    let result = inputs.and_then(|inputs| {
        run.inputs = Some(inputs);
        std::panic::catch_unwind(AssertUnwindSafe(|| run.drive(first))).unwrap_or_else(|panic| {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            Err(RecordError::Panicked(text))
        })
    });
    run.finalize(result)
}

/// The session directory with its first session.json, once the sampling options are
/// known to work (before any directory or worker exists).
fn create_session(opts: &RecordOptions) -> Result<SessionWriter, RecordError> {
    let started = SystemTime::now();
    let id = new_session_id(&opts.workload, started);

    let mut meta = SessionMeta::new(
        id.clone(),
        WorkloadInfo::new(opts.workload.clone(), opts.params.clone()),
        host::host_info(),
        rfc3339(started),
    );
    meta.command_line = opts.command_line.clone();
    meta.benchtop_version = env!("CARGO_PKG_VERSION").to_owned();
    meta.labels = opts.labels.clone();
    meta.git = opts.git.clone();
    meta.warnings.extend(opts.warnings.iter().cloned());
    // What is asked for; the sampler says what it got once it runs.
    meta.sampling.event = opts.sampler.event.name().into();
    meta.sampling.frequency_hz = opts.sampler.frequency_hz;
    if opts.sample_stacks {
        match Sampler::check(&opts.sampler) {
            // Refused perf events are not fatal: the run goes on without stacks.
            Ok(()) | Err(ProfilerError::PermissionDenied { .. }) => {}
            Err(e) => return Err(RecordError::Sampling(e)),
        }
    }
    let writer = match &opts.dir {
        Some(dir) => {
            SessionWriter::create(dir, meta).map_err(|source| RecordError::CreateSession {
                path: dir.clone(),
                source,
            })?
        }
        // Two recordings started in the same second get `-2`, `-3`… directories.
        None => SessionWriter::create_unique(Path::new(DEFAULT_SESSIONS_DIR), &id, meta).map_err(
            |source| RecordError::CreateSessionUnder {
                root: DEFAULT_SESSIONS_DIR.into(),
                source,
            },
        )?,
    };
    // The disk that recorders which crashed under the same root still hold for their
    // last write is freed (this one's is locked, so left alone).
    if let Some(root) = writer.dir().parent() {
        benchtop_sessions::store::remove_left_behind(root);
    }
    Ok(writer)
}

/// Starts the worker (or takes the attached process); a worker that cannot start leaves
/// the session finished as crashed, saying why.
fn start_worker(
    opts: &RecordOptions,
    mut writer: SessionWriter,
) -> Result<(SessionWriter, Process, Option<WorkerPipes>), RecordError> {
    let id = writer.meta().id.clone();
    let (worker, pipes) = match opts.target {
        Target::Attach { pid, start_ticks } => (Process::Attached { pid, start_ticks }, None),
        Target::Worker | Target::Command => {
            let spec = WorkerSpec {
                program: opts.program.clone(),
                args: opts.args.clone(),
                session_id: id,
                interval: opts.interval,
                gate: opts.target == Target::Command,
                env: opts
                    .alloc_sample_bytes
                    .map(|bytes| {
                        vec![(protocol::ALLOC_SAMPLE_ENV.into(), bytes.to_string().into())]
                    })
                    .unwrap_or_default(),
            };
            match WorkerProcess::spawn(&spec) {
                Ok((worker, pipes)) => (Process::Child(worker), Some(pipes)),
                Err(source) => {
                    let error = RecordError::Spawn {
                        program: PathBuf::from(&opts.program),
                        source,
                    };
                    let reason = error.to_string();
                    let _ = writer.update_meta(|m| m.warnings.push(reason));
                    let _ = writer.finish(Status::Crashed, rfc3339(SystemTime::now()));
                    return Err(error);
                }
            }
        }
    };
    Ok((writer, worker, pipes))
}

/// What the run has measured so far: the data side, apart from the lifecycle.
pub(crate) struct RunData {
    /// When the session started, for offsets.
    pub(crate) began: Instant,
    /// When measured work started.
    pub(crate) started_at: Option<Instant>,
    /// Seconds from the session's start time to the worker's `start`.
    pub(crate) start_offset_s: f64,
    /// CLOCK_MONOTONIC when `start` was sent (or the command's gate opened), ns: the
    /// sampler's clock, against which a row's `t_ns` ends its interval of stacks.
    pub(crate) start_monotonic_ns: u64,
    /// For a command: CLOCK_MONOTONIC at its `t_ns` 0, estimated from its ticks (see
    /// [`Run::align_command_clock`]); `None` until its first tick.
    pub(crate) command_origin_ns: Option<u64>,
    /// Decodes tick histograms with every size bounded (worker input is untrusted).
    pub(crate) histograms: HistogramDecoder,
    /// The whole run's latency per metric, for latency.svg.
    pub(crate) latency_totals: BTreeMap<String, Total>,
    /// The end of the last row written, ns from `start`.
    pub(crate) last_t_ns: u64,
    pub(crate) last_counters: BTreeMap<String, u64>,
    /// Ticks accepted, and the last one's `t_ns`.
    pub(crate) ticks: u64,
    pub(crate) last_tick_ns: u64,
    /// Ticks that came too soon after the last row, merged into the next one: their
    /// latest tick and their histograms together.
    pub(crate) held: Option<(benchtop_protocol::Tick, BTreeMap<String, Histogram<u64>>)>,
    /// Ticks merged into a later row.
    pub(crate) ticks_merged: u64,
    /// Bytes kept in worker.log, and those dropped past its cap.
    pub(crate) worker_log_bytes: u64,
    pub(crate) worker_log_dropped: u64,
    pub(crate) throughput_metric: Option<String>,
    pub(crate) latency_metric: Option<String>,
    /// Rows written since threads.csv was last rewritten.
    pub(crate) rows_since_threads: u32,
    /// When the conductor writes the next monitor-only row (a target that sends no ticks).
    pub(crate) next_row_at: Option<Instant>,
    /// The stream's drops last told, and when.
    pub(crate) stream_drops_told: (u64, Option<Instant>),
    /// Rows written to timeseries.jsonl.
    pub(crate) rows: u64,
    /// The kernel's counts of the tree at the last row, and when they were read.
    pub(crate) last_counts: Option<(benchtop_sessions::TreeCounts, Instant)>,
    /// Why the tree's figures are polled rather than all counted; `None` when all are
    /// counted (or nothing was monitored).
    pub(crate) polled_reason: Option<String>,
    /// The peak RSS of the last row with resources, for rows after the tree is gone.
    pub(crate) last_peak_rss: u64,
    /// What the exec gate said as the command replaced it, once it has.
    pub(crate) gate_pass: Option<crate::child::GatePass>,
    /// Why threads.csv holds only the threads the polls saw; `None` when the kernel's
    /// records of every thread's life are followed (or nothing was monitored).
    pub(crate) lifetimes_reason: Option<String>,
}

impl RunData {
    fn new(began: Instant) -> Self {
        RunData {
            began,
            started_at: None,
            start_offset_s: 0.0,
            start_monotonic_ns: 0,
            command_origin_ns: None,
            histograms: HistogramDecoder::new(),
            latency_totals: BTreeMap::new(),
            last_t_ns: 0,
            last_counters: BTreeMap::new(),
            ticks: 0,
            last_tick_ns: 0,
            held: None,
            ticks_merged: 0,
            worker_log_bytes: 0,
            worker_log_dropped: 0,
            throughput_metric: None,
            latency_metric: None,
            rows_since_threads: 0,
            next_row_at: None,
            stream_drops_told: (0, None),
            rows: 0,
            last_counts: None,
            polled_reason: None,
            last_peak_rss: 0,
            gate_pass: None,
            lifetimes_reason: None,
        }
    }
}

/// One recording under way: the machine's state and the I/O it drives.
pub(crate) struct Run<'a> {
    pub(crate) opts: &'a RecordOptions,
    pub(crate) writer: SessionWriter,
    pub(crate) worker: Process,
    stdin: Option<std::process::ChildStdin>,
    /// The lifecycle.
    pub(crate) conductor: Conductor,
    inputs: Option<Receiver<Input>>,
    /// Worker streams that reached their end.
    closed_streams: usize,
    /// How the worker exited, once it has.
    pub(crate) exit: Option<WorkerExit>,
    /// When the conductor reaped it.
    pub(crate) exited_at: Option<Instant>,
    interrupts_at_start: usize,
    /// Interrupts already fed to the machine.
    interrupts_seen: usize,
    /// The worker's summary, once it arrived.
    pub(crate) summary: Option<protocol::Summary>,
    pub(crate) protocol_errors: usize,
    /// Phases beyond [`MAX_PHASES`], counted rather than kept.
    pub(crate) phases_dropped: usize,
    pub(crate) data: RunData,
    pub(crate) sampler: Option<Sampler>,
    /// The worker's sampled allocations, once it sent any.
    pub(crate) allocs: Option<benchtop_profilers::allocations::AllocProfile>,
    pub(crate) monitor: Option<TreeMonitor>,
    /// The kernel's counts of the whole tree (CPU time, switches, faults), when it
    /// allows them.
    pub(crate) counters: Option<TreeCounters>,
    /// The live view asked for a save; it happens when the sampler's copy comes.
    pub(crate) save_pending: bool,
    /// The first write to the session that failed, for session.json's `failure`.
    pub(crate) write_failure: Option<benchtop_sessions::meta::Failure>,
}

impl Run<'_> {
    /// Runs the loop until the machine says the run is over.
    fn drive(&mut self, first: Vec<Action>) -> Result<(), RecordError> {
        self.perform(first)?;
        while !self.conductor.is_done() {
            let input = match &self.inputs {
                // Every stream closed: the worker is exiting (or closed them and goes on).
                // Wait for its exit rather than a whole turn: the end of the run is on the
                // user's clock.
                Some(_) if self.closed_streams >= STREAMS && self.exit.is_none() => {
                    self.worker.wait_exit(TURN);
                    Err(RecvTimeoutError::Timeout)
                }
                Some(inputs) => inputs.recv_timeout(TURN),
                None => Err(RecvTimeoutError::Disconnected),
            };
            match input {
                Ok(input) => {
                    let handled = self.on_input(input);
                    self.unless_write_failed(handled)?;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    // Every reader is gone: nothing more can arrive; don't spin.
                    self.closed_streams = STREAMS;
                    std::thread::sleep(TURN);
                }
            }
            let written = self.write_monitor_row().and_then(|()| self.take_stacks());
            self.unless_write_failed(written)?;
            self.feed_requests()?;
            if self.exit.is_none()
                && let Some(exit) = self.worker.try_reap().map_err(|source| RecordError::Wait {
                    pid: self.worker.pid(),
                    source,
                })?
            {
                self.exit = Some(exit);
                self.exited_at = Some(self.worker.exit_seen().unwrap_or_else(Instant::now));
                self.feed(Event::Exited(exit))?;
            }
            if self.closed_streams >= STREAMS {
                self.feed(Event::StreamsClosed)?;
            }
            self.feed(Event::Tick)?;
        }
        Ok(())
    }

    /// A write to the session that failed (a full disk, most likely) stops the run as Ctrl-C
    /// does, so the worker ends its work and the session ends `failed` with what is already
    /// on disk; later writes that fail the same way are let go. Other errors end the loop.
    fn unless_write_failed(&mut self, result: Result<(), RecordError>) -> Result<(), RecordError> {
        match result {
            Err(RecordError::Session(e)) if e.io_kind().is_some() => {
                if self.write_failure.is_none() {
                    let failure = e.failure();
                    self.say(Notice::WriteFailed(e.to_string()));
                    self.write_failure = Some(failure);
                    self.feed(Event::WriteFailed)?;
                }
                Ok(())
            }
            other => other,
        }
    }

    /// Interrupts and the live view's stop, as events.
    fn feed_requests(&mut self) -> Result<(), RecordError> {
        let interrupts = self
            .opts
            .interrupts
            .as_ref()
            .map_or(0, Interrupts::count)
            .saturating_sub(self.interrupts_at_start);
        while self.interrupts_seen < interrupts {
            self.interrupts_seen += 1;
            self.feed(Event::Interrupt)?;
        }
        if self
            .opts
            .live
            .as_ref()
            .is_some_and(|live| live.stop_requested())
        {
            self.feed(Event::StopAsked)?;
        }
        Ok(())
    }

    /// Steps the machine and carries out what it asks.
    pub(crate) fn feed(&mut self, event: Event) -> Result<(), RecordError> {
        let (next, actions) = step(self.conductor.clone(), event, Instant::now());
        self.conductor = next;
        self.perform(actions)
    }

    fn perform(&mut self, actions: Vec<Action>) -> Result<(), RecordError> {
        for action in actions {
            match action {
                Action::Start => self.start()?,
                Action::SendStart => self.send(ConductorMessage::Start),
                Action::SendStop => self.send(ConductorMessage::Stop),
                Action::Signal(signal) => self.worker.signal_group(match signal {
                    Signal::Interrupt => libc::SIGINT,
                    Signal::Terminate => libc::SIGTERM,
                    Signal::Kill => libc::SIGKILL,
                }),
                Action::Say(notice) => self.say(notice),
                Action::Drain => {
                    // Take what is still queued (the summary may be among it).
                    while let Some(input) = self.inputs.as_ref().and_then(|i| i.try_recv().ok()) {
                        self.on_input(input)?;
                    }
                    self.feed(Event::Drained)?;
                }
            }
        }
        Ok(())
    }

    fn on_input(&mut self, input: Input) -> Result<(), RecordError> {
        match input {
            Input::Report(message, line, read_ns) => self.on_report(message, line, read_ns),
            Input::Output(bytes) => self.append_worker_log(&bytes),
            Input::Closed => {
                self.closed_streams += 1;
                Ok(())
            }
        }
    }

    /// What the worker printed, into worker.log up to [`MAX_WORKER_LOG_BYTES`]; beyond,
    /// counted and said once the run ends.
    fn append_worker_log(&mut self, bytes: &[u8]) -> Result<(), RecordError> {
        let room = MAX_WORKER_LOG_BYTES.saturating_sub(self.data.worker_log_bytes);
        let kept = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        if kept > 0 {
            self.writer.append_worker_log(&bytes[..kept])?;
            self.data.worker_log_bytes += kept as u64;
        }
        let dropped = (bytes.len() - kept) as u64;
        if dropped > 0 {
            if self.data.worker_log_dropped == 0 {
                let note = format!(
                    "\n[benchtop: worker.log is capped at {MAX_WORKER_LOG_BYTES} bytes; what \
                     the worker printed after this is counted, not kept]\n"
                );
                self.writer.append_worker_log(note.as_bytes())?;
            }
            self.data.worker_log_dropped += dropped;
        }
        Ok(())
    }

    fn on_report(
        &mut self,
        message: Result<WorkerMessage, ProtocolError>,
        line: u64,
        read_ns: u64,
    ) -> Result<(), RecordError> {
        let message = match message {
            Ok(m) => m,
            Err(ProtocolError::UnsupportedVersion { found, supported }) => {
                return self.feed(Event::Refused { found, supported });
            }
            Err(e) => return self.report_issue(e.into()),
        };
        match message {
            WorkerMessage::Hello(hello) => {
                if self.conductor.said.hello {
                    return self.report_issue(ReportIssue::SecondHello);
                }
                let metrics = &hello.metrics;
                self.data.throughput_metric = metrics
                    .iter()
                    .find(|m| m.kind == MetricKind::Counter)
                    .map(|m| m.name.clone());
                self.data.latency_metric = metrics
                    .iter()
                    .find(|m| m.kind == MetricKind::Histogram)
                    .map(|m| m.name.clone());
                if !hello.params.is_empty() {
                    self.writer
                        .update_meta(|m| m.workload.params.extend(hello.params))?;
                }
                self.feed(Event::Hello)
            }
            WorkerMessage::Ready => {
                if !self.conductor.said.hello {
                    return self.report_issue(ReportIssue::ReadyBeforeHello);
                }
                self.feed(Event::Ready)
            }
            WorkerMessage::Tick(_)
            | WorkerMessage::Phase(_)
            | WorkerMessage::Summary(_)
            | WorkerMessage::AllocSamples(_)
                if !self.conductor.said.hello =>
            {
                self.report_issue(ReportIssue::BeforeHello {
                    kind: message.kind(),
                    line,
                })
            }
            WorkerMessage::Tick(tick) => {
                if self.data.started_at.is_none() {
                    return self.report_issue(ReportIssue::TickBeforeStart);
                }
                if self.data.ticks > 0 && tick.t_ns < self.data.last_tick_ns {
                    return self.report_issue(ReportIssue::TimeWentBack {
                        line,
                        from_ns: self.data.last_tick_ns,
                        to_ns: tick.t_ns,
                    });
                }
                if matches!(self.opts.target, Target::Command) {
                    self.align_command_clock(tick.t_ns, read_ns);
                }
                self.alloc_tick(&tick);
                self.on_tick(&tick)
            }
            WorkerMessage::AllocSamples(samples) => self.on_alloc_samples(samples, line),
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
                        phase
                            .figures
                            .into_iter()
                            .map(crate::finish::session_figure)
                            .collect(),
                    );
                    self.writer.update_meta(|m| m.phases.push(info))?;
                } else {
                    self.phases_dropped += 1;
                }
                Ok(())
            }
            WorkerMessage::Summary(summary) => {
                if self.summary.is_some() {
                    self.report_issue(ReportIssue::SecondSummary)?;
                }
                self.summary = Some(summary);
                self.feed(Event::Summary)
            }
            WorkerMessage::Error { message } => self.feed(Event::WorkerError(message)),
            _ => self.report_issue(ReportIssue::NewerKind),
        }
    }

    /// A bad report line or message: said, and kept in the session's warnings (the first
    /// [`MAX_PROTOCOL_WARNINGS`]; the rest are counted).
    pub(crate) fn report_issue(&mut self, issue: ReportIssue) -> Result<(), RecordError> {
        self.protocol_errors += 1;
        if self.protocol_errors <= MAX_PROTOCOL_WARNINGS {
            let notice = Notice::Report(issue);
            let text = notice.to_string();
            self.say(notice);
            self.writer.update_meta(|m| m.warnings.push(text))?;
        }
        Ok(())
    }

    /// Profilers attach between `ready` and `start`, so every thread the worker creates
    /// for measured work is followed; then the worker is released.
    fn start(&mut self) -> Result<(), RecordError> {
        let pid = self.worker.pid();
        // What session.json learns here is written once the worker is released: the
        // writes (each synced) would otherwise delay the command's start.
        let sampling: Box<dyn FnOnce(&mut SessionMeta)>;
        if self.opts.sample_stacks {
            // A command waits at its exec gate: its events are enabled by the kernel when
            // it execs the command, so the gate (benchtop itself) is never looked at; its
            // mappings, symbols and unwind tables would cost the start-up for nothing.
            let started = match self.opts.target {
                Target::Command => Sampler::start_on_exec(pid, &self.opts.sampler),
                Target::Worker | Target::Attach { .. } => Sampler::start(pid, &self.opts.sampler),
            };
            match started {
                Ok(sampler) => {
                    let kernel = sampler.kernel_frames();
                    let event = sampler.event();
                    let notes = sampler.warnings().to_vec();
                    sampling = Box::new(move |m| {
                        m.sampling.enabled = true;
                        m.sampling.event = event.into();
                        m.sampling.kernel_frames = kernel;
                        m.warnings.extend(notes);
                    });
                    self.sampler = Some(sampler);
                }
                Err(e @ ProfilerError::PermissionDenied { .. }) => {
                    let notice = Notice::NoSampling(e.to_string());
                    let text = notice.to_string();
                    self.say(notice);
                    let reason = e.to_string();
                    sampling = Box::new(move |m| {
                        m.sampling.enabled = false;
                        m.sampling.reason = Some(reason);
                        m.warnings.push(text);
                    });
                }
                Err(e) => {
                    // Anything else (the worker vanished, the kernel refused the buffers)
                    // is not a run the user asked for: end it and say why.
                    return self.feed(Event::StartFailed(Failure::Sampler(e.to_string())));
                }
            }
        } else {
            sampling = Box::new(|m| {
                m.sampling.reason = Some("stack sampling off (--profile none)".into());
            });
        }
        let mut monitor = TreeMonitor::new(pid);
        self.start_counting(pid, &monitor);
        self.follow_lifetimes(pid, &mut monitor);
        self.monitor = Some(monitor);
        // The worker counts its `t_ns` from the moment it reads `start`, a fraction of a
        // millisecond after this: the start of the sampler's report intervals.
        self.data.start_monotonic_ns = monotonic_ns();
        if let Some(sampler) = &self.sampler {
            sampler.mark_start(self.data.start_monotonic_ns);
        }
        match self.opts.target {
            Target::Worker => self.send(ConductorMessage::Start),
            Target::Command => {
                if let Process::Child(child) = &mut self.worker
                    && let Err(e) = child.open_gate()
                {
                    return self.feed(Event::StartFailed(Failure::Gate(e.to_string())));
                }
                self.data.next_row_at = Some(Instant::now() + self.opts.interval);
            }
            Target::Attach { .. } => {
                self.data.next_row_at = Some(Instant::now() + self.opts.interval);
            }
        }
        let now = Instant::now();
        self.writer.update_meta(|m| {
            m.worker.pid = Some(pid);
            sampling(m);
        })?;
        self.data.start_offset_s = now.duration_since(self.data.began).as_secs_f64();
        self.data.started_at = Some(now);
        if let Some(stream) = &self.opts.stream {
            stream.began(self.writer.meta(), std::time::SystemTime::now());
        }
        if let Some(live) = &self.opts.live {
            let sampling = match &self.sampler {
                Some(s) if s.kind().contains(benchtop_sessions::Kind::Cpu) => {
                    format!("{} {} Hz", s.event(), self.opts.sampler.frequency_hz)
                }
                Some(s) => s.event().to_owned(),
                None => "no sampling".to_owned(),
            };
            live.send(LiveEvent::Started {
                throughput: self.data.throughput_metric.clone(),
                latency: self.data.latency_metric.clone(),
                sampling,
            });
        }
        self.feed(Event::Started)
    }

    /// Counting events on the whole tree: on a command from its exec (the gate is not
    /// counted), on a worker or an attached process on every thread it has now. Refused,
    /// the monitors' polls stand alone and the session says why.
    fn start_counting(&mut self, pid: u32, monitor: &TreeMonitor) {
        if !self.opts.count_tree {
            self.data.polled_reason = Some(POLLED_ASKED.to_owned());
            return;
        }
        let opened = match self.opts.target {
            Target::Command => TreeCounters::open(&[pid], true),
            Target::Worker | Target::Attach { .. } => {
                let mut tids = monitor.live_tids();
                if tids.is_empty() {
                    tids.push(pid);
                }
                TreeCounters::open(&tids, false)
            }
        };
        match opened {
            Ok(mut counters) => {
                self.data.polled_reason = counters.not_counted().map(str::to_owned);
                // A command's events wait for its exec: they read 0 until then.
                self.data.last_counts = counters.read().ok().map(|c| (c, Instant::now()));
                self.counters = Some(counters);
            }
            Err(e) => {
                self.data.polled_reason = Some(format!(
                    "the tree's CPU time and context switches are polled every interval \
                     (what starts and ends between two polls is missed) and page faults are \
                     not recorded: {e}"
                ));
            }
        }
    }

    /// The kernel's records of every thread's life, for threads.csv: on a command from
    /// its exec, on a worker or an attached process from every thread it has now (the
    /// root's first). Refused, threads.csv holds the threads the polls saw and the
    /// session says so.
    fn follow_lifetimes(&mut self, pid: u32, monitor: &mut TreeMonitor) {
        if !self.opts.count_tree {
            self.data.lifetimes_reason = Some(POLLED_ASKED.to_owned());
            return;
        }
        let (tids, on_exec) = match self.opts.target {
            Target::Command => (vec![pid], true),
            Target::Worker | Target::Attach { .. } => {
                let mut tids = monitor.live_tids();
                tids.retain(|&t| t != pid);
                tids.sort_unstable();
                tids.insert(0, pid);
                (tids, false)
            }
        };
        let max_exited = TreeMonitorOptions::default().max_exited_threads;
        match Lifetimes::open(&tids, on_exec, max_exited) {
            Ok(lifetimes) => monitor.follow_lifetimes(lifetimes),
            Err(e) => {
                self.data.lifetimes_reason = Some(format!(
                    "threads.csv lists the threads the polls saw, not those that lived \
                     between two polls: {e}"
                ));
            }
        }
    }

    /// A notice, to the live consumer (a progress line, the TUI).
    pub(crate) fn say(&self, notice: Notice) {
        if let Some(live) = &self.opts.live {
            live.send(LiveEvent::Notice(notice));
        }
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
}
