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
use benchtop_sessions::{StackKind, StackTree};
use ratatui::crossterm::event::{
    self, Event, KeyCode, KeyEventKind, KeyModifiers, MouseButton, MouseEventKind,
};

use benchtop_profilers::reaper::{self, ReapOptions};

use crate::cli::{OpenArgs, RecordArgs};
use crate::record::live::{Control, Detail, LiveLink};
use crate::record::{self, RecordOptions, RecordOutcome};
use crate::state::launcher::{LauncherState, RecentSession};
use crate::state::{AppEvent, Effect, Key, MouseKind, Pane, State};
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
    let (tx, rx) = mpsc::channel();
    let mut runs = Runs {
        tx: tx.clone(),
        current: None,
        finished: Vec::new(),
    };
    let (mut state, record) = match start {
        Start::Run(opts, record) => {
            let params = crate::state::live::params_text(&opts.params);
            let state = State::new(&opts.workload, &params, color);
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
    let input_done = Arc::new(AtomicBool::new(false));
    let input = read_terminal(tx.clone(), input_done.clone())?;

    let result = {
        let mut guard =
            TerminalGuard::enter(!record.no_mouse).context("cannot set the terminal up")?;
        drive(&mut guard, &mut state, &rx, &mut runs, Some(&record))
    };
    input_done.store(true, Ordering::SeqCst);
    let _ = input.join();

    // Left while a run goes on (q twice, or the loop failed): stop it and wait for its
    // session here, so that it is finished whatever happened to the screen.
    if runs.current.is_some() && !state.run.status.is_over() {
        runs.stop();
        eprintln!("benchtop: stopping the workload and writing the session…");
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
                eprintln!("benchtop: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    Ok(code)
}

/// `benchtop open A [B]`: one saved session on the live screen, or two on the compare
/// screen. Both load (and are checked) before the terminal changes.
pub fn open(args: &OpenArgs) -> Result<ExitCode> {
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let load = |dir: &Path, which: &str| {
        benchtop_sessions::Session::load(dir)
            .with_context(|| format!("cannot open session {which}({})", dir.display()))
    };
    let a = load(&args.a, if args.b.is_some() { "A " } else { "" })?;
    let b = args.b.as_deref().map(|b| load(b, "B ")).transpose()?;
    if !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "the TUI needs a terminal; `benchtop show DIR` and `benchtop compare A B` print              the same figures"
        );
    }
    let mut state = match b {
        Some(b) => {
            let mut opts = benchtop_sessions::compare::CompareOptions::default();
            opts.threshold = args.threshold;
            let comparison = benchtop_sessions::compare::compare(&a, &b, &opts);
            State::with_comparison(a, b, comparison, color)
        }
        None => State::with_session(a, Instant::now(), color),
    };
    let (tx, rx) = mpsc::channel();
    let mut runs = Runs {
        tx: tx.clone(),
        current: None,
        finished: Vec::new(),
    };
    let input_done = Arc::new(AtomicBool::new(false));
    let input = read_terminal(tx, input_done.clone())?;
    let result = {
        let mut guard =
            TerminalGuard::enter(!args.no_mouse).context("cannot set the terminal up")?;
        drive(&mut guard, &mut state, &rx, &mut runs, None)
    };
    input_done.store(true, Ordering::SeqCst);
    let _ = input.join();
    result.map(|()| ExitCode::SUCCESS)
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
            guard
                .terminal()
                .draw(|frame| view::draw(state, now, frame.area(), frame.buffer_mut()))
                .context("cannot draw")?;
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
                    .map(|(o, outcome)| (o.pid, outcome.to_string()))
                    .collect(),
            )
        }),
        Effect::ListSessions => background(tx, "bt-sessions", || {
            AppEvent::Sessions(recent_sessions(Path::new(record::DEFAULT_SESSIONS_DIR)))
        }),
    }
    Ok(())
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

/// Reads the terminal's events until `done`; polls so that it can notice `done`.
fn read_terminal(tx: Sender<AppEvent>, done: Arc<AtomicBool>) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("bt-input".into())
        .spawn(move || {
            while !done.load(Ordering::SeqCst) {
                match event::poll(Duration::from_millis(50)) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(_) => break,
                }
                let event = match event::read() {
                    Ok(Event::Key(key)) if key.kind != KeyEventKind::Release => {
                        match translate(key.code, key.modifiers) {
                            Some(key) => AppEvent::Key(key),
                            None => continue,
                        }
                    }
                    Ok(Event::Resize(w, h)) => AppEvent::Resize(w, h),
                    Ok(Event::Mouse(m)) => {
                        let kind = match m.kind {
                            MouseEventKind::Down(MouseButton::Left) => MouseKind::Click,
                            MouseEventKind::ScrollUp => MouseKind::ScrollUp,
                            MouseEventKind::ScrollDown => MouseKind::ScrollDown,
                            _ => continue,
                        };
                        AppEvent::Mouse {
                            kind,
                            x: m.column,
                            y: m.row,
                        }
                    }
                    Ok(_) => continue,
                    Err(_) => break,
                };
                if tx.send(event).is_err() {
                    break;
                }
            }
        })
        .context("cannot start the terminal input thread")
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
        _ => return None,
    })
}

/// Reads the finished session's folded stacks on a thread and sends them back.
fn load_final_stacks(dir: std::path::PathBuf, tx: Sender<AppEvent>) {
    let spawned = std::thread::Builder::new()
        .name("bt-load".into())
        .spawn(move || {
            let cpu = read_folded(&dir, StackKind::Cpu);
            let offcpu = read_folded(&dir, StackKind::OffCpu);
            let _ = tx.send(AppEvent::FinalStacks(Box::new((dir, cpu, offcpu))));
        });
    // Without the thread the live stacks stay on screen: nothing is lost.
    drop(spawned);
}

fn read_folded(dir: &Path, kind: StackKind) -> Option<StackTree> {
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
