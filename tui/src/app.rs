//! The TUI's loop: receive events, update the state, carry out effects, draw.
//!
//! Producers — the terminal reader, the recorder (its live link's events, then its
//! result), the loader of the final stacks — run on threads of their own and feed one
//! channel of [`AppEvent`]s. The loop drains it, applies every event to the [`State`],
//! carries out the effects, and draws at most once per tick from the state.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use benchtop_sessions::{ByKind, Kind, Session, StackTree};
use ratatui::crossterm::event::{
    self, Event, KeyCode, KeyEventKind, KeyModifiers, MouseButton, MouseEventKind,
};

use benchtop_profilers::reaper::{self, ReapOptions};

use crate::cli::{AbArgs, OpenArgs, RecordArgs};
use crate::record::live::{Control, Detail, LiveLink};
use crate::record::{self, RecordOptions, RecordOutcome};
use crate::state::ab::AbEvent;
use crate::state::launcher::{LauncherState, RecentSession};
use crate::state::{AppEvent, Effect, Ending, Key, MouseKind, Pane, Signal, State};
use crate::term::TerminalGuard;
use crate::view;

/// The render tick: the screen is redrawn at most this often.
const TICK: Duration = Duration::from_millis(100);
/// Recent sessions the launcher lists.
const RECENT_SESSIONS: usize = 8;

/// What the TUI opens on.
#[derive(Debug)]
pub enum Start {
    /// The launcher; runs are recorded with these options.
    Launcher(RecordArgs),
    /// A run of these options, at once; later runs are recorded with the arguments.
    Run(Box<RecordOptions>, RecordArgs),
}

/// Runs the TUI on this terminal; once the terminal is restored, prints each session's
/// path and summary as a headless run does. The exit code is the last run's.
pub fn run_tui(start: Start) -> Result<ExitCode> {
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let baseline = match &start {
        Start::Launcher(record) => record.baseline.clone(),
        Start::Run(_, record) => record.baseline.clone(),
    };
    // Refused before the terminal changes or a run starts: a bad directory is a typo.
    let baseline = baseline
        .map(|dir| {
            benchtop_sessions::Session::load(&dir)
                .map(crate::state::live::session_baseline)
                .with_context(|| format!("cannot use {} as the baseline", dir.display()))
        })
        .transpose()?;
    if !std::io::stdout().is_terminal() {
        anyhow::bail!("the TUI needs a terminal; record headless without --tui");
    }
    // Before any recorder starts: the TUI, not the recorder, hears the signals.
    let tui = Tui::new()?;
    let tx = tui.tx.clone();
    let mut runs = tui.runs();
    let (mut state, record) = match start {
        Start::Run(opts, record) => {
            let params = crate::state::live::params_text(&opts.params);
            let mut state = State::new(&opts.workload, &params, color);
            state.live.run.program = !matches!(opts.target, record::Target::Worker);
            state.live.run.attached = matches!(opts.target, record::Target::Attach { .. });
            runs.start(*opts)?;
            (state, record)
        }
        Start::Launcher(record) => {
            let state = State::with_launcher(LauncherState::from_cli(), color);
            for effect in [Effect::ListSessions, Effect::ScanOrphans] {
                carry_out(effect, &tx, &mut runs, Some(&record))?;
            }
            (state, record)
        }
    };
    if let Some(baseline) = baseline {
        state.set_initial_baseline(baseline);
    }
    state.set_flame_options(&flame_options());
    let result = tui.run(&mut state, &mut runs, !record.no_mouse, Some(&record));

    // Left while a run goes on (q twice, a signal, or the loop failed): stop it and wait
    // for its session here, so that it is finished whatever happened to the screen.
    if runs.current.is_some() && !state.live.run.status.is_over() {
        runs.stop();
        let what = if state.live.run.attached {
            "detaching from the process (it goes on running)"
        } else {
            "stopping the workload"
        };
        crate::say(format_args!(
            "{what} and writing the session… (a signal now ends benchtop at once and leaves \
             the session cut off)"
        ));
    }
    runs.finish_all();
    if let Err(e) = result {
        for outcome in runs.finished.iter().flatten() {
            crate::report(outcome)?;
        }
        return Err(e);
    }
    let mut code = ExitCode::SUCCESS;
    for outcome in runs.finished {
        code = match outcome {
            Ok(outcome) => crate::report(&outcome)?,
            Err(e) => {
                crate::say(format_args!("{e:#}"));
                ExitCode::FAILURE
            }
        };
    }
    Ok(signalled_code(&state).unwrap_or(code))
}

/// The one set-up of the TUI, for `run_tui` and `open` alike: the channel every producer
/// feeds and the signals it hears (from [`Tui::new`], before any recorder starts), then the
/// terminal reader and the terminal itself for the loop ([`Tui::run`]).
struct Tui {
    tx: Sender<AppEvent>,
    rx: Receiver<AppEvent>,
    signals: SignalWatch,
}

impl Tui {
    /// The channel, and the signals heard into it.
    fn new() -> Result<Tui> {
        let (tx, rx) = mpsc::channel();
        let signals = watch_signals(tx.clone())?;
        Ok(Tui { tx, rx, signals })
    }

    /// The recordings of this TUI, whose events come into its channel.
    fn runs(&self) -> Runs {
        Runs {
            tx: self.tx.clone(),
            current: None,
            finished: Vec::new(),
        }
    }

    /// Runs the loop from `state` with the terminal set up and read, and restores the
    /// terminal however the loop ends; then says why the TUI left when no key left it.
    /// From its return on, a signal takes its default action.
    fn run(
        self,
        state: &mut State,
        runs: &mut Runs,
        mouse: bool,
        record: Option<&RecordArgs>,
    ) -> Result<()> {
        let input = Input::start(self.tx.clone())?;
        let result = in_terminal(mouse, |guard| drive(guard, state, &self.rx, runs, record));
        input.end();
        // The terminal is restored: a signal from here on ends benchtop at once.
        self.signals.leave();
        say_ending(state);
        result
    }
}

/// Runs `body` with the terminal set up, and restores it however `body` ends: returning,
/// failing, or panicking (the panic becomes an error, so that a run still gets stopped
/// and written; the panic hook has printed its message once the terminal was restored).
fn in_terminal(mouse: bool, body: impl FnOnce(&mut TerminalGuard) -> Result<()>) -> Result<()> {
    let mut guard = TerminalGuard::enter(mouse).context("cannot set the terminal up")?;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&mut guard)));
    drop(guard);
    result.unwrap_or_else(|payload| {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(anyhow::anyhow!(
            "the TUI failed (a bug in benchtop; the terminal was restored): {why}"
        ))
    })
}

/// Says on the restored terminal why the TUI left, when no key left it.
fn say_ending(state: &State) {
    match state.ending {
        Some(Ending::Signal(signal)) => crate::say(format_args!("{signal}: leaving the TUI")),
        Some(Ending::TerminalGone) => crate::say("the terminal went away"),
        None => {}
    }
}

/// The exit code of a TUI a signal ended: 128 plus the signal's number, as shells report
/// a process that a signal ended.
fn signalled_code(state: &State) -> Option<ExitCode> {
    match state.ending {
        Some(Ending::Signal(signal)) => {
            u8::try_from(128 + signal.number()).ok().map(ExitCode::from)
        }
        _ => None,
    }
}

/// `benchtop open A [B]`: one saved session on the live screen, or two on the compare
/// screen. Both load (and are checked) before the terminal changes.
pub fn open(args: &OpenArgs) -> Result<ExitCode> {
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut state = opened_state(&args.a, args.b.as_deref(), args.threshold, color)?;
    state.set_flame_options(&flame_options());
    if !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "the TUI needs a terminal; `benchtop show DIR` and `benchtop compare A B` print \
             the same figures"
        );
    }
    let tui = Tui::new()?;
    let mut runs = tui.runs();
    let result = tui.run(&mut state, &mut runs, !args.no_mouse, None);
    result.map(|()| signalled_code(&state).unwrap_or(ExitCode::SUCCESS))
}

/// The screen of `benchtop open A [B]`: a session (or a series) as its run ended, or two
/// side by side, judged with `threshold`.
fn opened_state(a: &Path, b: Option<&Path>, threshold: f64, color: bool) -> Result<State> {
    if b.is_none() && crate::open_history::is_history(a) {
        return crate::open_history::history_state(a, threshold, color);
    }
    // B gets what A left of the latency and rows budgets: the two hold at most each.
    let load = |dir: &Path, which: &str, held: benchtop_sessions::limits::Held| {
        benchtop_sessions::series::Recorded::load_after(dir, held).with_context(|| {
            format!(
                "cannot open session {which}({})",
                benchtop_sessions::escape::EscapedPath(dir)
            )
        })
    };
    let a = load(a, if b.is_some() { "A " } else { "" }, Default::default())?;
    let held = a.held();
    let b = b.map(|b| load(b, "B ", held)).transpose()?;
    Ok(match b {
        Some(b) => {
            let mut opts = benchtop_sessions::compare::CompareOptions::default();
            opts.threshold = threshold;
            // Series are judged across their runs; the screen's histograms and stacks are
            // the first run's, with the stacks of every run added.
            let comparison = benchtop_sessions::compare::compare_runs(&a.runs(), &b.runs(), &opts);
            State::with_comparison(representative(a)?, representative(b)?, comparison, color)
        }
        None => {
            let session = representative(a)?;
            // The timeline's parts need the per-interval stacks; without them (a session
            // recorded before schema 2, or one that cannot be read) the parts show their
            // latency only, and the timeline says so.
            let limits = benchtop_sessions::limits::LoadOptions::from_env()?;
            let stacks = benchtop_sessions::intervals::IntervalStacks::load(&session.dir, &limits)
                .ok()
                .flatten();
            let mut state = State::with_session(session, Instant::now(), color);
            crate::state::timeline::Timeline::set_stacks(&mut state.live, stacks);
            state
        }
    })
}

/// `benchtop ab --tui`: the experiment on a thread of its own, shown on the `ab` screen
/// as it goes. Leaving before it is over (q twice, a signal) stops the run going on and
/// judges the runs so far, as Ctrl-C does headless; then the comparison is printed as
/// headless `ab` prints it, and the exit code is the same.
pub fn run_ab_tui(args: &AbArgs) -> Result<ExitCode> {
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    if !std::io::stdout().is_terminal() {
        anyhow::bail!("the TUI needs a terminal; leave out --tui to run the experiment headless");
    }
    // Refused before the terminal changes: a bad side or directory is a typo.
    let experiment = crate::ab::Experiment::prepare(args, true)?;
    let plan = experiment.plan();
    // Before the experiment starts: the TUI hears the signals too.
    let tui = Tui::new()?;
    let tx = tui.tx.clone();
    let worker = std::thread::Builder::new()
        .name("bt-ab".into())
        .spawn(move || {
            let result = experiment.run(&mut |event| {
                let _ = tx.send(AppEvent::Ab(event));
            });
            let told = match &result {
                Ok(outcome) => Ok(outcome.clone()),
                Err(e) => Err(format!("{e:#}")),
            };
            let _ = tx.send(AppEvent::Ab(AbEvent::Finished(told)));
            result
        })
        .context("cannot start the experiment's thread")?;
    let mut state = State::with_ab(plan.clone(), color);
    let mut runs = tui.runs();
    let shown = tui.run(&mut state, &mut runs, false, None);
    if !state.ab.is_over() {
        crate::say("stopping the run going on and judging the runs so far…");
        record::interrupts()?.raise();
    }
    let outcome = worker
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the experiment panicked")))?;
    shown?;
    if outcome.stopped {
        crate::say("ab stopped: judging the runs recorded so far");
    }
    let code = crate::ab::finish(&plan, &outcome)?;
    Ok(signalled_code(&state).unwrap_or(code))
}

/// The flamegraph's options from the config file's `[tui]`. The command line read the
/// config already and refused it if it was wrong; read again here (a few lines), a
/// config that went wrong since leaves the defaults.
fn flame_options() -> crate::state::flame::FlameOptions {
    crate::config::Config::load()
        .map(|config| config.tui.flame_options())
        .unwrap_or_default()
}

/// What the screens show of a session or a series: the session, or a series' first
/// complete run with the stacks of all its runs added together.
fn representative(recorded: benchtop_sessions::series::Recorded) -> Result<Session> {
    // A session is moved, not copied: a long one holds tens of thousands of rows and
    // intervals, and a copy would double what `open` holds.
    let recorded = match recorded {
        benchtop_sessions::series::Recorded::Session(session) => return Ok(*session),
        series => series,
    };
    let runs = recorded.runs();
    let Some(first) = runs.first() else {
        anyhow::bail!("the series has no complete run to show");
    };
    let mut shown = (*first).clone();
    if runs.len() > 1 {
        // Stacks of time (on- and off-CPU) add up over the runs; memory profiles are
        // the first run's.
        for (kind, mine) in shown.profiles.iter_mut() {
            if kind.spec().memory {
                continue;
            }
            for run in &runs[1..] {
                if let (Some(sum), Some(tree)) = (mine.as_mut(), run.profile(kind)) {
                    sum.merge(tree);
                }
            }
        }
    }
    Ok(shown)
}

/// The signals that end the TUI, heard on a thread of their own (`bt-signals`) and sent
/// as [`AppEvent::Signal`]s to the loop, which leaves through the state.
struct SignalWatch {
    /// Once set, a signal takes its default action (the TUI has left).
    leaving: Arc<AtomicBool>,
}

/// Starts hearing SIGTERM, SIGHUP, SIGINT and SIGQUIT for the TUI. Installed before a
/// recorder starts, so that its own Ctrl-C handler stands aside.
fn watch_signals(tx: Sender<AppEvent>) -> Result<SignalWatch> {
    // The recorder installs no handler of its own: the runs of the TUI are stopped through
    // their live link when a signal arrives here.
    let numbers = Signal::ALL.map(Signal::number);
    let leaving = Arc::new(AtomicBool::new(false));
    for number in numbers {
        signal_hook::flag::register_conditional_default(number, leaving.clone())
            .context("cannot watch for signals")?;
    }
    let mut signals =
        signal_hook::iterator::Signals::new(numbers).context("cannot watch for signals")?;
    std::thread::Builder::new()
        .name("bt-signals".into())
        .spawn(move || {
            for number in signals.forever() {
                let Some(signal) = Signal::from_number(number) else {
                    continue;
                };
                if tx.send(AppEvent::Signal(signal)).is_err() {
                    break;
                }
            }
        })
        .context("cannot start the thread that hears signals")?;
    Ok(SignalWatch { leaving })
}

impl SignalWatch {
    /// The TUI has left and the terminal is restored: from now on a signal takes its
    /// default action and ends benchtop at once.
    fn leave(&self) {
        self.leaving.store(true, Ordering::SeqCst);
    }
}

/// The recordings of this TUI: the one running, and those that ended.
struct Runs {
    tx: Sender<AppEvent>,
    current: Option<(Control, JoinHandle<Result<RecordOutcome>>)>,
    finished: Vec<Result<RecordOutcome>>,
}

impl Runs {
    /// Starts recording `opts` with a live link to the TUI.
    fn start(&mut self, mut opts: RecordOptions) -> Result<()> {
        self.finish_all();
        // The recording's events arrive in the TUI's own channel, as they are.
        let tx = self.tx.clone();
        let link = LiveLink::new(Detail::Full, move |event| {
            let _ = tx.send(AppEvent::Live(event));
        });
        let control = link.control();
        opts.live = Some(link);
        let recorder = spawn_recorder(opts, self.tx.clone())?;
        self.current = Some((control, recorder));
        Ok(())
    }

    fn stop(&self) {
        if let Some((control, _)) = &self.current {
            control.stop();
        }
    }

    fn save(&self) {
        if let Some((control, _)) = &self.current {
            control.save();
        }
    }

    /// Waits for the recorder of the last run, if there is one.
    fn finish_all(&mut self) {
        if let Some((_, recorder)) = self.current.take() {
            let outcome = recorder
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the recorder panicked")));
            self.finished.push(outcome);
        }
    }
}

/// The loop proper, inside the terminal guard.
fn drive(
    guard: &mut TerminalGuard,
    state: &mut State,
    rx: &Receiver<AppEvent>,
    runs: &mut Runs,
    record: Option<&RecordArgs>,
) -> Result<()> {
    // Replaced stacks are freed here, off the render path.
    let (free, freed) = mpsc::channel::<Vec<StackTree>>();
    let _freer = std::thread::Builder::new()
        .name("bt-free".into())
        .spawn(move || freed.into_iter().for_each(drop))
        .context("cannot start the thread that frees old stacks")?;
    let tx = runs.tx.clone();
    let mut next_draw = Instant::now();
    loop {
        let now = Instant::now();
        if now >= next_draw {
            let drawn = guard
                .terminal()
                .draw(|frame| view::draw(state, now, frame.area(), frame.buffer_mut()));
            if drawn.is_err() {
                // A terminal that cannot be drawn on has gone away (hung up, closed): it
                // ends the TUI as the input thread's word that it is gone would.
                state.update(AppEvent::TerminalGone, now);
                return Ok(());
            }
            next_draw = now + TICK;
        }
        let first = match rx.recv_timeout(next_draw.saturating_duration_since(Instant::now())) {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => AppEvent::Tick,
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        };
        // Everything that is waiting, then one draw.
        let mut events = Vec::new();
        for event in std::iter::once(first).chain(rx.try_iter()) {
            match event {
                AppEvent::Mouse { kind, x, y } => {
                    let size = guard.terminal().size().context("cannot read the size")?;
                    let area = ratatui::layout::Rect::new(0, 0, size.width, size.height);
                    events.extend(mouse_events(state, area, kind, x, y));
                }
                event => events.push(event),
            }
        }
        for event in events {
            let is_key = matches!(
                event,
                AppEvent::Key(_) | AppEvent::Resize(..) | AppEvent::Focus(_)
            );
            for effect in state.update(event, Instant::now()) {
                if effect == Effect::Quit {
                    return Ok(());
                }
                if let Err(e) = carry_out(effect, &tx, runs, record) {
                    // An effect that fails is said in the footer; the TUI stays up.
                    let _ = tx.send(AppEvent::Error(format!("{e:#}")));
                }
            }
            if is_key {
                // Answer keys at once rather than at the next tick.
                next_draw = Instant::now();
            }
        }
        let retired = state.take_retired();
        if !retired.is_empty() {
            // The thread only ends with this loop: a failed send drops the trees here.
            let _ = free.send(retired);
        }
    }
}

/// What a mouse event means where it happened: a click focuses the pane under it; the
/// wheel over the flamegraph moves the selection up or down a frame.
fn mouse_events(
    state: &State,
    area: ratatui::layout::Rect,
    kind: MouseKind,
    x: u16,
    y: u16,
) -> Vec<AppEvent> {
    if let Some(pane) = view::compare_pane_at(state, area, x, y) {
        // The compare screen focuses by number, as its keys do.
        let focus = AppEvent::Key(Key::Char(char::from(b'0' + pane.number() as u8)));
        let flame = pane == crate::state::compare::ComparePane::Flame;
        let table = pane == crate::state::compare::ComparePane::Table;
        return match kind {
            MouseKind::Click => vec![focus],
            MouseKind::ScrollUp if flame || table => vec![focus, AppEvent::Key(Key::Up)],
            MouseKind::ScrollDown if flame || table => vec![focus, AppEvent::Key(Key::Down)],
            _ => Vec::new(),
        };
    }
    // On the timeline strip, a click puts the cursor there and a drag marks a range; a
    // drag goes on (and ends) wherever the mouse goes.
    let dragging = state.live.timeline.drag.is_some();
    let on_strip = match kind {
        MouseKind::Click => view::timeline_at(state, area, x, y, false),
        MouseKind::Drag | MouseKind::Release if dragging => {
            view::timeline_at(state, area, x, y, true)
        }
        _ => None,
    };
    if let Some(i) = on_strip {
        use crate::state::timeline_live::Pointer;
        let pointer = match kind {
            MouseKind::Drag => Pointer::Drag(i),
            MouseKind::Release => Pointer::Release(i),
            _ => Pointer::Press(i),
        };
        return vec![AppEvent::Timeline(pointer)];
    }
    let Some(pane) = view::pane_at(state, area, x, y) else {
        return Vec::new();
    };
    match kind {
        MouseKind::Click => vec![AppEvent::Focus(pane)],
        MouseKind::ScrollUp if pane == Pane::Flame => {
            vec![AppEvent::Focus(pane), AppEvent::Key(Key::Up)]
        }
        MouseKind::ScrollDown if pane == Pane::Flame => {
            vec![AppEvent::Focus(pane), AppEvent::Key(Key::Down)]
        }
        _ => Vec::new(),
    }
}

/// Carries out one effect; work that takes time runs on a thread and answers with an
/// event.
fn carry_out(
    effect: Effect,
    tx: &Sender<AppEvent>,
    runs: &mut Runs,
    record: Option<&RecordArgs>,
) -> Result<()> {
    match effect {
        Effect::StopRecording => runs.stop(),
        Effect::SaveSnapshot => runs.save(),
        Effect::LoadFinalStacks(dir) => load_final_stacks(dir, tx.clone()),
        Effect::Quit => {}
        Effect::Launch(workload) => {
            let record = record.context("this screen does not record runs")?;
            let opts = crate::workload_options(*workload, record)?;
            runs.start(opts)?;
        }
        Effect::ScanOrphans => background(tx, "bt-orphans", || {
            AppEvent::Orphans(reaper::find_orphans().map_err(|e| e.to_string()))
        }),
        Effect::Reap(orphans, signal) => background(tx, "bt-reap", move || {
            let mut opts = ReapOptions::default();
            opts.signal = signal;
            let outcomes = reaper::reap(&orphans, &opts);
            AppEvent::Reaped(
                orphans
                    .iter()
                    .zip(outcomes)
                    .map(|(o, outcome)| (o.pid, outcome))
                    .collect(),
            )
        }),
        Effect::ListProcesses => background(tx, "bt-processes", || {
            AppEvent::Processes(crate::processes::list())
        }),
        Effect::RunCommand(words) => {
            let record = record.context("this screen does not record runs")?;
            let words: Vec<std::ffi::OsString> = words.into_iter().map(Into::into).collect();
            start_or_fail(runs, tx, crate::external::command_options(&words, record))?;
        }
        Effect::Attach(pid) => {
            let record = record.context("this screen does not record runs")?;
            start_or_fail(runs, tx, crate::external::attach_options(pid, record))?;
        }
        Effect::ListSessions => background(tx, "bt-sessions", || {
            AppEvent::Sessions(recent_sessions(Path::new(record::DEFAULT_SESSIONS_DIR)))
        }),
        Effect::OpenSessions(dirs) => {
            background(tx, "bt-open", move || {
                let threshold = benchtop_sessions::compare::CompareOptions::default().threshold;
                let opened = match dirs.as_slice() {
                    [a] => opened_state(a, None, threshold, true),
                    [a, b, ..] => opened_state(a, Some(b), threshold, true),
                    [] => Err(anyhow::anyhow!("no session to open")),
                };
                let opened = opened.map(|mut state| {
                    state.set_flame_options(&flame_options());
                    Box::new(state)
                });
                AppEvent::Opened(opened.map_err(|e| {
                    benchtop_sessions::escape::escaped(&format!("{e:#}")).into_owned()
                }))
            })
        }
        Effect::OpenSegments(segments) => background(tx, "bt-open", move || {
            crate::open_history::opened(&segments, &flame_options())
        }),
        Effect::StopExperiment => {
            record::interrupts()?.raise();
        }
        Effect::LoadLines(dir) => background(tx, "bt-lines", move || {
            use benchtop_sessions::intervals::IntervalStacks;
            let lines = benchtop_sessions::limits::LoadOptions::from_env()
                .and_then(|opts| IntervalStacks::load(&dir, &opts))
                .map_err(|e| e.to_string())
                .and_then(|stacks| match stacks {
                    Some(stacks) => Ok(stacks.lines),
                    None => Err(
                        "the session has no stacks.jsonl (recorded before schema 2, \
                                 or without sampling): no source lines"
                            .into(),
                    ),
                });
            AppEvent::Lines { dir, lines }
        }),
        Effect::ReadSource(path) => background(tx, "bt-source", move || {
            let text = benchtop_sessions::limits::LoadOptions::from_env()
                .and_then(|opts| benchtop_sessions::lines::read_source(Path::new(&path), &opts))
                .map_err(|e| e.to_string());
            AppEvent::Source { path, text }
        }),
    }
    Ok(())
}

/// Starts recording `opts`; when they could not be made (a command that cannot run, a
/// process that cannot be attached to), the run the screen shows has failed, saying why.
fn start_or_fail(
    runs: &mut Runs,
    tx: &Sender<AppEvent>,
    opts: Result<RecordOptions>,
) -> Result<()> {
    match opts {
        Ok(opts) => runs.start(opts),
        Err(e) => {
            let _ = tx.send(AppEvent::Finished(Err(format!("{e:#}"))));
            Ok(())
        }
    }
}

/// Runs `work` on a thread of its own and sends its event. Without a thread nothing is
/// sent: the screen keeps what it had.
fn background(tx: &Sender<AppEvent>, name: &str, work: impl FnOnce() -> AppEvent + Send + 'static) {
    let tx = tx.clone();
    let _ = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = tx.send(work());
        });
}

/// The most recent sessions under `root` (newest first, by directory name, which starts
/// with the date); directories that are not sessions are skipped.
fn recent_sessions(root: &Path) -> Vec<RecentSession> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut dirs: Vec<std::path::PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("session.json").is_file())
        .collect();
    dirs.sort_unstable_by(|a, b| b.cmp(a));
    dirs.into_iter()
        .filter_map(|dir| {
            // Foreign, corrupt or newer sessions are left out of the list.
            let meta = benchtop_sessions::store::load_meta(&dir).ok()?;
            Some(RecentSession {
                name: dir.file_name()?.to_string_lossy().into_owned(),
                workload: meta.workload.name,
                status: meta.status.to_string(),
                started: meta.started_at,
                dir: dir.clone(),
            })
        })
        .take(RECENT_SESSIONS)
        .collect()
}

fn spawn_recorder(
    opts: RecordOptions,
    tx: Sender<AppEvent>,
) -> Result<JoinHandle<Result<RecordOutcome>>> {
    std::thread::Builder::new()
        .name("bt-recorder".into())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                record::record(&opts).map_err(anyhow::Error::new)
            }))
            .unwrap_or_else(|payload| {
                let why = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(anyhow::anyhow!("the recorder panicked: {why}"))
            });
            let event = match &result {
                Ok(outcome) => Ok(outcome.clone()),
                Err(e) => Err(format!("{e:#}")),
            };
            let _ = tx.send(AppEvent::Finished(event));
            result
        })
        .context("cannot start the recorder thread")
}

/// The terminal reader (`bt-input`), and the flag that ends it.
struct Input {
    done: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Input {
    /// How long the reader waits for the terminal before it looks at its flag again.
    const POLL: Duration = Duration::from_millis(50);

    /// Starts reading the terminal's events into `tx`.
    fn start(tx: Sender<AppEvent>) -> Result<Input> {
        let done = Arc::new(AtomicBool::new(false));
        let tty = TerminalInput::open().context("cannot read the terminal")?;
        let flag = done.clone();
        let thread = std::thread::Builder::new()
            .name("bt-input".into())
            .spawn(move || read_terminal(&tty, &tx, &flag))
            .context("cannot start the terminal input thread")?;
        Ok(Input { done, thread })
    }

    /// Ends the reader and waits for it a moment. A reader caught inside crossterm on a
    /// terminal that went away (where crossterm reads again and again) is let go first
    /// ([`TerminalInput::release`]); one that still does not end is left behind, to end
    /// with the process, rather than holding the exit up.
    fn end(self) {
        self.done.store(true, Ordering::SeqCst);
        TerminalInput::release();
        let asked = Instant::now();
        while !self.thread.is_finished() && asked.elapsed() < Input::POLL * 20 {
            std::thread::sleep(Duration::from_millis(5));
        }
        if self.thread.is_finished() {
            let _ = self.thread.join();
        }
    }
}

/// The descriptor crossterm reads keys from, made standard input.
///
/// crossterm reads standard input when it is a terminal and a /dev/tty of its own
/// otherwise; and once inside its read loop it does not leave it on a terminal that hung
/// up: a read of 0 bytes, or any error but EAGAIN and EINTR, and it reads again, at 100 %
/// CPU, for ever. A hang-up between the reader's poll and crossterm's read catches it
/// there. So /dev/tty is put on standard input when that is not the terminal (the TUI
/// reads nothing else from it; workers get pipes), and crossterm's descriptor is then
/// one [`TerminalInput::release`] can reach.
#[derive(Debug)]
struct TerminalInput;

impl TerminalInput {
    fn open() -> std::io::Result<TerminalInput> {
        use std::os::fd::AsRawFd;
        if !std::io::stdin().is_terminal() {
            let tty = std::fs::File::options()
                .read(true)
                .write(true)
                .open("/dev/tty")?;
            // SAFETY: dup2 of the descriptor `tty` holds onto standard input; `tty` is
            // closed on return, the copy on fd 0 stays.
            if unsafe { libc::dup2(tty.as_raw_fd(), libc::STDIN_FILENO) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(TerminalInput)
    }

    /// Puts an empty non-blocking pipe on standard input in place of the terminal: a
    /// reader inside crossterm's read loop then reads EAGAIN, goes back to waiting and
    /// returns (crossterm's wait is edge-triggered: the terminal's hang-up was its last
    /// event), and the reader's own poll sees no input, so it ends on its flag. The
    /// pipe's write end is kept open for the process's life, so that its reads say
    /// EAGAIN and never end of file. Called once the terminal is restored.
    fn release() {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 fills the two descriptors of `fds`, an array of two c_ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return;
        }
        // SAFETY: dup2 of the pipe's read end, just made and ours, onto standard input,
        // then close of that read end (fd 0 keeps it); the write end fds[1] is left open
        // on purpose.
        unsafe {
            libc::dup2(fds[0], libc::STDIN_FILENO);
            libc::close(fds[0]);
        }
    }

    /// Waits up to `timeout` for input: `Some(true)` when there is some, `Some(false)` when
    /// there is none yet, `None` when the terminal is gone (hung up, closed, in error).
    fn wait(&self, timeout: Duration) -> Option<bool> {
        let fd = libc::STDIN_FILENO;
        let mut pollfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `pollfd` is one valid, initialized pollfd that outlives the call, and the
        // count passed is 1; `fd` is open (stdin, or the file `self` holds).
        let ready = unsafe { libc::poll(&mut pollfd, 1, millis) };
        if ready < 0 {
            // Interrupted by a signal: no input yet. Any other failure: no terminal.
            return (std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted)
                .then_some(false);
        }
        if pollfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return None;
        }
        Some(ready > 0)
    }
}

/// Reads the terminal's events until `done` or until the terminal is gone.
///
/// crossterm's reader loops for ever on a terminal that hangs up (its reads return 0 or
/// EIO and it reads again), so the descriptor is polled here first: a hang-up or an error
/// ends the reader (with [`AppEvent::TerminalGone`]), and crossterm is asked only for
/// what is waiting (keys, and the resizes it hears of by SIGWINCH).
fn read_terminal(tty: &TerminalInput, tx: &Sender<AppEvent>, done: &AtomicBool) {
    while !done.load(Ordering::SeqCst) {
        let Some(_input) = tty.wait(Input::POLL) else {
            let _ = tx.send(AppEvent::TerminalGone);
            return;
        };
        loop {
            match event::poll(Duration::ZERO) {
                Ok(true) => {}
                Ok(false) => break,
                Err(_) => {
                    let _ = tx.send(AppEvent::TerminalGone);
                    return;
                }
            }
            let event = match event::read() {
                Ok(event) => event,
                Err(_) => {
                    let _ = tx.send(AppEvent::TerminalGone);
                    return;
                }
            };
            let Some(event) = app_event(event) else {
                continue;
            };
            if tx.send(event).is_err() {
                return;
            }
        }
    }
}

/// The app's event for a terminal event, if it has one.
pub(crate) fn app_event(event: Event) -> Option<AppEvent> {
    Some(match event {
        Event::Key(key) if key.kind != KeyEventKind::Release => {
            AppEvent::Key(translate(key.code, key.modifiers)?)
        }
        Event::Resize(w, h) => AppEvent::Resize(w, h),
        Event::Mouse(m) => {
            let kind = match m.kind {
                MouseEventKind::Down(MouseButton::Left) => MouseKind::Click,
                MouseEventKind::Drag(MouseButton::Left) => MouseKind::Drag,
                MouseEventKind::Up(MouseButton::Left) => MouseKind::Release,
                MouseEventKind::ScrollUp => MouseKind::ScrollUp,
                MouseEventKind::ScrollDown => MouseKind::ScrollDown,
                _ => return None,
            };
            AppEvent::Mouse {
                kind,
                x: m.column,
                y: m.row,
            }
        }
        _ => return None,
    })
}

/// The state's key for a terminal key, if it has one.
fn translate(code: KeyCode, modifiers: KeyModifiers) -> Option<Key> {
    Some(match code {
        KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => Key::CtrlC,
        // Ctrl-Q is not q, Alt-S is not s.
        KeyCode::Char(_) if modifiers.intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) => {
            return None;
        }
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Tab => Key::Tab,
        KeyCode::BackTab => Key::BackTab,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::F(1) => Key::F1,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        _ => return None,
    })
}

/// Reads the finished session's folded stacks on a thread and sends them back.
fn load_final_stacks(dir: std::path::PathBuf, tx: Sender<AppEvent>) {
    let spawned = std::thread::Builder::new()
        .name("bt-load".into())
        .spawn(move || {
            // The kinds a part of the run shows: the others stay as the live run grew
            // them.
            let trees = ByKind::from_fn(|kind| {
                crate::state::timeline::is_part_kind(kind)
                    .then(|| read_folded(&dir, kind))
                    .flatten()
            });
            let _ = tx.send(AppEvent::FinalStacks(Box::new((dir, trees))));
        });
    // Without the thread the live stacks stay on screen: nothing is lost.
    drop(spawned);
}

fn read_folded(dir: &Path, kind: Kind) -> Option<StackTree> {
    let file = std::fs::File::open(dir.join(kind.folded_file())).ok()?;
    StackTree::read_folded(std::io::BufReader::new(file), kind.folded_file()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_click_focuses_the_pane_under_it_and_the_wheel_moves_in_the_flamegraph() {
        let state = State::new("ring", "", true);
        let area = ratatui::layout::Rect::new(0, 0, 80, 24);
        let focus = |events: Vec<AppEvent>| match events.first() {
            Some(AppEvent::Focus(p)) => Some(*p),
            _ => None,
        };
        // Left column, top: throughput; right column: the flamegraph.
        assert_eq!(
            focus(mouse_events(&state, area, MouseKind::Click, 5, 4)),
            Some(Pane::Throughput)
        );
        let wheel = mouse_events(&state, area, MouseKind::ScrollDown, 60, 10);
        assert!(matches!(
            wheel.as_slice(),
            [AppEvent::Focus(Pane::Flame), AppEvent::Key(Key::Down)]
        ));
        assert!(mouse_events(&state, area, MouseKind::ScrollUp, 5, 4).is_empty());
        // The header and the footer are no pane.
        assert!(mouse_events(&state, area, MouseKind::Click, 5, 0).is_empty());
        assert!(mouse_events(&state, area, MouseKind::Click, 5, 23).is_empty());
    }

    /// Feeds a crossterm mouse event of the left button at `x`, `y` to `state`, as the
    /// loop does.
    fn mouse(state: &mut State, kind: MouseEventKind, x: u16, y: u16) {
        let area = ratatui::layout::Rect::new(0, 0, 80, 24);
        let event = Event::Mouse(event::MouseEvent {
            kind,
            column: x,
            row: y,
            modifiers: KeyModifiers::NONE,
        });
        let Some(AppEvent::Mouse { kind, x, y }) = app_event(event) else {
            panic!("not a mouse event the TUI takes")
        };
        for event in mouse_events(state, area, kind, x, y) {
            state.update(event, Instant::now());
        }
    }

    #[test]
    fn on_the_timeline_a_click_moves_the_cursor_and_a_drag_selects_a_range() {
        use crate::state::timeline::Part;
        let left = MouseButton::Left;
        // Eight intervals of 1 s; at 80x24 the strip is rows 2 to 4, its columns from
        // column 5 one interval each.
        let mut state = crate::state::timeline::example_state();
        mouse(&mut state, MouseEventKind::Down(left), 6, 3);
        mouse(&mut state, MouseEventKind::Up(left), 6, 3);
        let t = &state.live.timeline;
        assert_eq!((t.cursor, t.selected, t.anchor), (1, None, None), "a click");
        mouse(&mut state, MouseEventKind::Down(left), 6, 2);
        mouse(&mut state, MouseEventKind::Drag(left), 7, 2);
        mouse(&mut state, MouseEventKind::Drag(left), 8, 4);
        assert_eq!(state.live.timeline.anchor, Some(1), "marking");
        let screen = crate::view::tests::render(&state, Instant::now(), 80, 24);
        insta::assert_snapshot!("timeline_dragging_80x24", screen);
        mouse(&mut state, MouseEventKind::Up(left), 8, 4);
        let t = &state.live.timeline;
        assert_eq!(t.selected, Some(Part::Range(1, 3)));
        assert_eq!(
            state.live.flames.panes[Kind::Cpu].tree().total_weight(),
            30,
            "intervals 1 to 3"
        );
        // Dragged past the strip's end and below it: to the last interval.
        mouse(&mut state, MouseEventKind::Down(left), 10, 3);
        mouse(&mut state, MouseEventKind::Drag(left), 79, 15);
        mouse(&mut state, MouseEventKind::Up(left), 79, 15);
        assert_eq!(state.live.timeline.selected, Some(Part::Range(5, 7)));
        // Right to left, onto the labels: from the first interval.
        mouse(&mut state, MouseEventKind::Down(left), 7, 3);
        mouse(&mut state, MouseEventKind::Drag(left), 1, 3);
        mouse(&mut state, MouseEventKind::Up(left), 1, 3);
        assert_eq!(state.live.timeline.selected, Some(Part::Range(0, 2)));
        // A click on a label does nothing.
        mouse(&mut state, MouseEventKind::Down(left), 2, 3);
        assert_eq!(state.live.timeline.drag, None);
        // Moving without the button down marks nothing.
        mouse(&mut state, MouseEventKind::Up(left), 9, 3);
        assert_eq!(state.live.timeline.selected, Some(Part::Range(0, 2)));
    }

    #[test]
    fn on_the_compare_screen_a_click_focuses_by_number_and_the_wheel_scrolls() {
        let mut state = State::new("ring", "", true);
        state.screen = crate::state::Screen::Compare;
        let area = ratatui::layout::Rect::new(0, 0, 80, 24);
        // Left top: the figures (1); left bottom: the latency (2); right: the flamegraph (3).
        assert!(matches!(
            mouse_events(&state, area, MouseKind::Click, 5, 4).as_slice(),
            [AppEvent::Key(Key::Char('1'))]
        ));
        assert!(matches!(
            mouse_events(&state, area, MouseKind::Click, 5, 20).as_slice(),
            [AppEvent::Key(Key::Char('2'))]
        ));
        assert!(matches!(
            mouse_events(&state, area, MouseKind::ScrollDown, 60, 10).as_slice(),
            [AppEvent::Key(Key::Char('3')), AppEvent::Key(Key::Down)]
        ));
        assert!(mouse_events(&state, area, MouseKind::ScrollUp, 5, 20).is_empty());
        assert!(mouse_events(&state, area, MouseKind::Click, 5, 23).is_empty());
    }

    #[test]
    fn recent_sessions_are_the_newest_valid_ones() {
        let tmp = tempfile::tempdir().unwrap();
        for name in ["20261101-100000-ring", "20261102-100000-storm"] {
            let meta = benchtop_sessions::SessionMeta::new(
                name,
                benchtop_sessions::meta::WorkloadInfo::new(
                    name.rsplit('-').next().unwrap_or_default(),
                    Default::default(),
                ),
                Default::default(),
                "2026-11-01T10:00:00Z",
            );
            let w = benchtop_sessions::SessionWriter::create(&tmp.path().join(name), meta).unwrap();
            w.finish(
                benchtop_sessions::Status::Complete,
                "2026-11-01T10:00:01Z".into(),
            )
            .unwrap();
        }
        let broken = tmp.path().join("20261103-100000-ring");
        std::fs::create_dir(&broken).unwrap();
        std::fs::write(broken.join("session.json"), "{").unwrap();
        let recent = recent_sessions(tmp.path());
        let names: Vec<&str> = recent.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["20261102-100000-storm", "20261101-100000-ring"]);
        assert_eq!(
            (recent[0].workload.as_str(), recent[0].status.as_str()),
            ("storm", "complete")
        );
    }

    #[test]
    fn terminal_keys_translate_to_the_states_keys() {
        assert_eq!(
            translate(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Some(Key::CtrlC)
        );
        assert_eq!(
            translate(KeyCode::Char('q'), KeyModifiers::NONE),
            Some(Key::Char('q'))
        );
        assert_eq!(translate(KeyCode::F(1), KeyModifiers::NONE), Some(Key::F1));
        assert_eq!(translate(KeyCode::F(5), KeyModifiers::NONE), None);
        assert_eq!(translate(KeyCode::Char('q'), KeyModifiers::CONTROL), None);
        assert_eq!(translate(KeyCode::Char('s'), KeyModifiers::ALT), None);
        assert_eq!(
            translate(KeyCode::Char('N'), KeyModifiers::SHIFT),
            Some(Key::Char('N'))
        );
    }
}
