//! The TUI's state: plain data updated by events, no terminal and no I/O.
//!
//! Every producer (the terminal, the recorder's live link, the render tick) feeds one
//! [`AppEvent`] channel; [`State::update`] applies an event and returns the side effects
//! ([`Effect`]) for the loop to carry out. Views read the state and never change it.
//!
//! What a key does is looked up in the key tables ([`keys`]) and carried out by
//! `State::act`.
//!
//! It holds the events, effects and screens every part of the TUI names, and `update` and
//! `act`, which carry every screen's events and actions in one match each. The live
//! screen's handlers are in [`LiveScreen`]'s module (`live_screen.rs`), as the launcher,
//! the orphans, the compare and the ab screens keep theirs.

pub mod ab;
pub mod activity;
pub mod compare;
pub mod flame;
pub mod flame_panes;
pub mod history;
pub mod keys;
pub mod launcher;
pub mod live;
mod live_screen;
pub use live_screen::LiveScreen;
mod live_stacks;
pub mod orphans;
pub mod picker;
pub mod profile_views;
mod signals;
pub use signals::{Ending, Signal};
pub mod timeline;
pub mod timeline_live;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use benchtop_profilers::reaper::{Orphan, ReapOutcome, ReapSignal};
use benchtop_sessions::{ByKind, Kind, StackTree};
use benchtop_workloads::worker::Workload;

use crate::record::RecordOutcome;
use crate::record::live::LiveEvent;
use ab::AbState;
use benchtop_record::NoticeKind;
use compare::{ComparePane, CompareState};
use flame::FlameState;
use flame_panes::FlamePanes;
use keys::Action;
use launcher::{LauncherFocus, LauncherState, RecentSession};
use live::{LatencySummary, LiveRun, RunStatus};
use orphans::OrphansState;

/// How long a flash message stays in the footer.
pub const FLASH_FOR: Duration = Duration::from_secs(5);
/// The narrowest and widest time window of the series panes, seconds.
pub const WINDOW_RANGE_S: (f64, f64) = (10.0, 3600.0);
/// The time window the series panes start with, seconds.
pub const DEFAULT_WINDOW_S: f64 = 60.0;
/// Rows a PageUp or PageDown moves the flamegraph's selection: about the icicle's height
/// at 80×24, so a page never jumps past what was on screen.
pub const FLAME_PAGE: usize = 8;

/// A key, as the state sees it (the loop translates the terminal's key events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A printable character.
    Char(char),
    /// Ctrl-C.
    CtrlC,
    /// Enter.
    Enter,
    /// Escape.
    Esc,
    /// Tab.
    Tab,
    /// Shift-Tab.
    BackTab,
    /// Backspace.
    Backspace,
    /// Arrow up.
    Up,
    /// Arrow down.
    Down,
    /// Arrow left.
    Left,
    /// Arrow right.
    Right,
    /// F1.
    F1,
    /// Page Up.
    PageUp,
    /// Page Down.
    PageDown,
    /// Home.
    Home,
    /// End.
    End,
}

/// Everything that can happen to the TUI.
#[derive(Debug)]
pub enum AppEvent {
    /// A key was pressed.
    Key(Key),
    /// The terminal was resized (columns, rows).
    Resize(u16, u16),
    /// A pane was clicked: it takes the focus.
    Focus(Pane),
    /// The mouse, at a terminal cell; the loop turns it into [`AppEvent::Focus`] and keys
    /// with the view's layout, so the state never sees it.
    Mouse {
        /// What the mouse did.
        kind: MouseKind,
        /// Column.
        x: u16,
        /// Row.
        y: u16,
    },
    /// The render tick (about 10 Hz): time passes for flash messages.
    Tick,
    /// The recording told something.
    Live(LiveEvent),
    /// The recording is over (the recorder's result, or why it failed).
    Finished(Result<RecordOutcome, String>),
    /// The complete stacks of a finished session, read from its folded files: the
    /// session's directory, then the stacks of each kind a part of the run shows (on-
    /// and off-CPU), where the session has them.
    FinalStacks(Box<(PathBuf, ByKind<Option<StackTree>>)>),
    /// Something the loop could not do; said in the footer.
    Error(String),
    /// What a scan for orphans found, or why it failed.
    Orphans(Result<Vec<Orphan>, String>),
    /// What became of the orphans asked to end: pid and outcome.
    Reaped(Vec<(u32, ReapOutcome)>),
    /// The most recent sessions under ./sessions.
    Sessions(Vec<RecentSession>),
    /// The running processes for the launcher's picker, or why they cannot be listed.
    Processes(Result<Vec<picker::ProcessRow>, String>),
    /// A signal asked benchtop to end: the TUI leaves at once (a run goes on being
    /// stopped and written once the terminal is restored).
    Signal(Signal),
    /// The terminal is gone (hung up, closed): the TUI leaves at once.
    TerminalGone,
    /// The experiment of `ab --tui` told something.
    Ab(ab::AbEvent),
    /// Sessions opened from the launcher: the screen of `benchtop open` for them, or why
    /// they could not be read.
    Opened(Result<Box<State>, String>),
    /// A session's source lines ([`Effect::LoadLines`]), or why they could not be read.
    Lines {
        /// The session directory.
        dir: PathBuf,
        /// Its lines, or why not.
        lines: Result<benchtop_sessions::lines::FrameLines, String>,
    },
    /// The mouse on the timeline strip: the loop finds the interval under it.
    Timeline(timeline_live::Pointer),
    /// A source file the source view asked for ([`Effect::ReadSource`]): its text, or
    /// why it could not be read.
    Source {
        /// The path as asked for.
        path: String,
        /// The text, or why not.
        text: Result<String, String>,
    },
}

/// What the mouse did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MouseKind {
    /// The left button went down.
    Click,
    /// The mouse moved with the left button down.
    Drag,
    /// The left button went up.
    Release,
    /// The wheel turned up.
    ScrollUp,
    /// The wheel turned down.
    ScrollDown,
}

/// A side effect for the loop to carry out.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Ask the recording to stop (the worker is told `stop`).
    StopRecording,
    /// Ask the recording to write the stacks so far and threads.csv into the session now.
    SaveSnapshot,
    /// Read the finished session's folded stacks (answered with
    /// [`AppEvent::FinalStacks`]).
    LoadFinalStacks(PathBuf),
    /// Leave the TUI.
    Quit,
    /// Start recording this workload (from the launcher).
    Launch(Box<Workload>),
    /// Look for orphans (answered with [`AppEvent::Orphans`]).
    ScanOrphans,
    /// End these orphans with this first signal (answered with [`AppEvent::Reaped`]).
    Reap(Vec<Orphan>, ReapSignal),
    /// List the recent sessions (answered with [`AppEvent::Sessions`]).
    ListSessions,
    /// Ask the experiment of `ab --tui` to stop: its run going on ends, the runs so far
    /// are judged (answered with [`ab::AbEvent::Finished`]).
    StopExperiment,
    /// Open these sessions (one, or A and B) as `benchtop open` does (answered with
    /// [`AppEvent::Opened`]).
    OpenSessions(Vec<PathBuf>),
    /// List the running processes (answered with [`AppEvent::Processes`]).
    ListProcesses,
    /// Start recording this command line (from the launcher), as `run --tui --` does.
    RunCommand(Vec<String>),
    /// Attach to this process (from the launcher), as `attach PID --tui` does.
    Attach(u32),
    /// Read the source lines of a session's stacks.jsonl (answered with
    /// [`AppEvent::Lines`]).
    LoadLines(PathBuf),
    /// Read a source file for the source view, through the session crate's safe loader
    /// (answered with [`AppEvent::Source`]).
    ReadSource(String),
    /// Open the segments either side of a change point side by side, as `benchtop open
    /// A B` does (answered with [`AppEvent::Opened`]).
    OpenSegments(history::Segments),
}

/// The screens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Screen {
    /// The workloads, their parameters, the recent sessions.
    Launcher,
    /// A run, live.
    #[default]
    Live,
    /// What earlier runs left behind.
    Orphans,
    /// Two saved sessions side by side (`benchtop open A B`).
    Compare,
    /// An interleaved A/B experiment (`benchtop ab --tui`).
    Ab,
    /// A figure across many sessions (`benchtop open DIR` on a directory of them).
    History,
}

/// The panes of the live screen, in focus order (`1`–`4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pane {
    /// Throughput over time.
    Throughput,
    /// Latency histogram and percentiles.
    Latency,
    /// RSS, threads, per-core CPU, context switches.
    Resources,
    /// The flamegraph.
    #[default]
    Flame,
}

impl Pane {
    /// Every pane, in focus order.
    pub const ALL: [Pane; 4] = [
        Pane::Throughput,
        Pane::Latency,
        Pane::Resources,
        Pane::Flame,
    ];

    /// The pane's title.
    pub fn title(self) -> &'static str {
        match self {
            Pane::Throughput => "throughput",
            Pane::Latency => "latency",
            Pane::Resources => "resources",
            Pane::Flame => "flamegraph",
        }
    }

    /// Its number (the key that focuses it).
    pub fn number(self) -> usize {
        Pane::ALL.iter().position(|&p| p == self).unwrap_or(0) + 1
    }

    fn step(self, by: isize) -> Pane {
        let n = Pane::ALL.len() as isize;
        let i = (self.number() as isize - 1 + by).rem_euclid(n);
        Pane::ALL[i as usize]
    }
}

/// A message in the footer for a few seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Flash {
    /// What it says.
    pub text: String,
    /// An error (drawn in red) rather than a notice.
    pub error: bool,
    /// When it was raised.
    pub at: Instant,
}

/// What `b` took: the profile and latency at that moment.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// The stacks of each kind then. Memory profiles are a saved session's (`b` takes
    /// the live ones in their panes instead): a memory kind without stacks keeps the
    /// pane's own baseline, any other kind's is cleared.
    pub stacks: ByKind<Option<StackTree>>,
    /// The run's latency percentiles then.
    pub latency: LatencySummary,
    /// Where it came from: `taken at 12.3 s` or a session directory.
    pub source: String,
}

/// The whole state of the TUI.
#[derive(Debug)]
pub struct State {
    /// The screen shown.
    pub screen: Screen,
    /// The launcher.
    pub launcher: LauncherState,
    /// The orphans screen.
    pub orphans: OrphansState,
    /// The compare screen.
    pub compare: CompareState,
    /// The `ab --tui` screen.
    pub ab: AbState,
    /// The history screen.
    pub history: history::HistoryState,
    /// The run was started from the launcher (Esc goes back there once it is over).
    pub from_launcher: bool,
    /// The live screen: the run shown, its flamegraph, its baseline.
    pub live: LiveScreen,
    /// The focused pane.
    pub focus: Pane,
    /// The focused pane fills the body.
    pub maximized: bool,
    /// The help overlay is open.
    pub help: bool,
    /// Help lines scrolled past, when they do not all fit.
    pub help_scroll: usize,
    /// Seconds of history the series panes show.
    pub window_s: f64,
    /// The footer's message.
    pub flash: Option<Flash>,
    /// The TUI was ended by a signal or by its terminal going away, not by a key.
    pub ending: Option<Ending>,
    /// Colors are allowed (`NO_COLOR` unset).
    pub color: bool,
    /// Stacks replaced by newer ones, for the loop to free off the render path.
    retired: Vec<StackTree>,
    /// The baseline every run starts with (`--baseline DIR`).
    initial_baseline: Option<Baseline>,
    /// The flamegraph's options from the config file, for every new run's flamegraph.
    flame_options: Option<flame::FlameOptions>,
}

impl State {
    /// The state of a new run of `workload` with `params` (`name=value …`).
    pub fn new(workload: &str, params: &str, color: bool) -> Self {
        State {
            screen: Screen::Live,
            launcher: LauncherState::default(),
            orphans: OrphansState::default(),
            compare: CompareState::default(),
            ab: AbState::default(),
            history: history::HistoryState::default(),
            from_launcher: false,
            live: LiveScreen::new(workload, params),
            focus: Pane::Flame,
            maximized: false,
            help: false,
            help_scroll: 0,
            window_s: DEFAULT_WINDOW_S,
            flash: None,
            ending: None,
            color,
            retired: Vec::new(),
            initial_baseline: None,
            flame_options: None,
        }
    }

    /// The screen of the experiment `plan` (`benchtop ab --tui`), before its first run.
    pub fn with_ab(plan: ab::AbPlan, color: bool) -> Self {
        State {
            screen: Screen::Ab,
            ab: AbState::new(plan),
            ..State::new("", "", color)
        }
    }

    /// The state of the launcher, the start screen.
    pub fn with_launcher(launcher: LauncherState, color: bool) -> Self {
        State {
            screen: Screen::Launcher,
            launcher,
            from_launcher: true,
            ..State::new("", "", color)
        }
    }

    /// The live screen showing a saved session, as its run ended (`benchtop open DIR`):
    /// its series, latency, resources and stacks, to browse.
    pub fn with_session(session: benchtop_sessions::Session, now: Instant, color: bool) -> Self {
        let meta = &session.meta;
        let mut state = State::new(
            &meta.workload.name,
            &live::params_text(&meta.workload.params),
            color,
        );
        let run = &mut state.live.run;
        run.dir = Some(session.dir.clone());
        run.pid = meta.worker.pid;
        run.status = RunStatus::Finished(meta.status);
        run.ended_by = meta.ended_by;
        run.status_line = format!("recorded {}, {}", meta.started_at, meta.status_words());
        // Recorded from a command or an attached process (`run -- cmd`, `attach`): its
        // screen shows the process tree's activity, as the live one did.
        run.program = meta.workload.params.contains_key("command");
        let length = session.duration().unwrap_or_default();
        run.recorded = true;
        // The whole run in view, on its own time axis.
        state.window_s = length
            .as_secs_f64()
            .ceil()
            .clamp(WINDOW_RANGE_S.0, WINDOW_RANGE_S.1);
        let run = &mut state.live.run;
        run.started_at = Some(now.checked_sub(length).unwrap_or(now));
        run.ended_at = Some(now);
        run.sampling = if meta.sampling.enabled {
            format!("{} {} Hz", meta.sampling.event, meta.sampling.frequency_hz)
        } else {
            "no sampling".into()
        };
        // The workload's own counter, not the counting allocator's (which sort first).
        run.throughput_metric = session.rows.iter().find_map(|r| {
            r.rates
                .keys()
                .find(|k| !benchtop_sessions::timeseries::is_allocation_counter(k))
                .cloned()
        });
        for row in &session.rows {
            run.add_row(row, &[]);
        }
        let tag = session.latency.first().map(|i| i.tag.clone());
        if let Some(tag) = tag.clone() {
            let metric = if tag.is_empty() {
                "latency".into()
            } else {
                tag.clone()
            };
            run.latency = live::Latency::of_intervals(
                metric,
                session
                    .latency
                    .iter()
                    .filter(|i| i.tag == tag)
                    .map(|i| &i.histogram),
            );
        }
        state.live.flames.views.lines_dir = Some(session.dir.clone());
        let mut session = session;
        timeline::Timeline::fill(
            &mut state.live,
            &session.rows,
            tag.as_deref(),
            &mut session.latency,
        );
        for kind in flame_panes::pane_kinds() {
            if let Some(tree) = session.profiles.take(kind) {
                state.set_tree(kind, tree);
            }
        }
        state.live.flames.prefer_what_has_stacks();
        state.retired.clear();
        state
    }

    /// The compare screen of sessions `a` and `b` (`benchtop open A B`): the table of
    /// `comparison`, both latencies, and B's stacks against A's, differential on.
    pub fn with_comparison(
        mut a: benchtop_sessions::Session,
        mut b: benchtop_sessions::Session,
        comparison: benchtop_sessions::compare::Comparison,
        color: bool,
    ) -> Self {
        let mut state = State::new(&b.meta.workload.name, "", color);
        state.screen = Screen::Compare;
        state.compare = CompareState::new(&a, &b, comparison);
        let flames = &mut state.compare.flames;
        flames.views.lines_dir = Some(b.dir.clone());
        for kind in flame_panes::pane_kinds() {
            let tree_a = a.profiles.take(kind);
            let tree_b = b.profiles.take(kind);
            flames.set_pair(kind, tree_b, tree_a);
        }
        flames.set_differential(true);
        flames.prefer_what_has_stacks();
        state
    }

    /// Shows what the launcher opened: the session as its run ended on the live screen,
    /// or two side by side on the compare screen; Esc comes back to the launcher.
    fn show_opened(&mut self, opened: State) {
        match opened.screen {
            Screen::Compare => {
                self.compare = opened.compare;
                self.screen = Screen::Compare;
            }
            _ => {
                self.live = opened.live;
                self.focus = opened.focus;
                self.screen = Screen::Live;
            }
        }
        self.maximized = false;
        self.from_launcher = true;
    }

    /// A new run of `workload` replaces the last one on the live screen.
    fn begin_run(&mut self, workload: &str, params: &str) {
        self.live = LiveScreen::new(workload, params);
        if let Some(options) = &self.flame_options {
            self.live.flames.set_options(options);
        }
        if let Some(baseline) = self.initial_baseline.clone() {
            self.apply_baseline(baseline);
        }
        self.screen = Screen::Live;
    }

    /// A baseline for this run and every later one (a saved session).
    pub fn set_initial_baseline(&mut self, baseline: Baseline) {
        self.initial_baseline = Some(baseline.clone());
        self.apply_baseline(baseline);
    }

    /// Hands the baseline's stacks to the flame panes (which keep them) and keeps the
    /// rest.
    fn apply_baseline(&mut self, mut baseline: Baseline) {
        for (kind, tree) in baseline.stacks.iter_mut() {
            if tree.is_some() || !kind.spec().memory {
                self.live.flames.panes[kind].set_baseline(tree.take());
            }
        }
        self.live.baseline = Some(baseline);
    }

    /// Sets how the flamegraphs of every screen show their profiles (the config file's
    /// `[tui]` keys).
    pub fn set_flame_options(&mut self, options: &flame::FlameOptions) {
        self.live.flames.set_options(options);
        self.compare.flames.set_options(options);
        self.flame_options = Some(options.clone());
    }

    /// The flamegraph of the screen shown (the live screen's unless comparing).
    pub fn flames(&self) -> &FlamePanes {
        match self.screen {
            Screen::Compare => &self.compare.flames,
            _ => &self.live.flames,
        }
    }

    fn flames_mut(&mut self) -> &mut FlamePanes {
        match self.screen {
            Screen::Compare => &mut self.compare.flames,
            _ => &mut self.live.flames,
        }
    }

    /// The flame pane's state for the stacks it shows.
    pub fn flame(&self) -> &FlameState {
        self.flames().shown()
    }

    fn flame_mut(&mut self) -> &mut FlameState {
        self.flames_mut().shown_mut()
    }

    /// Applies `event` at `now` and returns what the loop must do.
    pub fn update(&mut self, event: AppEvent, now: Instant) -> Vec<Effect> {
        let mut effects = self.apply(event, now);
        for flames in [&mut self.live.flames, &mut self.compare.flames] {
            let (lines, file) = flames.views.take_loads();
            effects.extend(lines.map(Effect::LoadLines));
            effects.extend(file.map(Effect::ReadSource));
        }
        effects
    }

    fn apply(&mut self, event: AppEvent, now: Instant) -> Vec<Effect> {
        match event {
            AppEvent::Key(key) => self.on_key(key, now),
            AppEvent::Resize(..) | AppEvent::Mouse { .. } => Vec::new(),
            AppEvent::Timeline(pointer) => {
                self.timeline_pointer(pointer, now);
                Vec::new()
            }
            AppEvent::Focus(pane) => {
                if self.screen == Screen::Live && !self.help {
                    self.focus = pane;
                }
                Vec::new()
            }
            AppEvent::Tick => {
                let refresh = self.refresh_processes(now);
                if self
                    .flash
                    .as_ref()
                    .is_some_and(|f| now.duration_since(f.at) >= FLASH_FOR)
                {
                    self.flash = None;
                }
                refresh
            }
            AppEvent::Processes(rows) => {
                self.launcher.picker.set(rows, now);
                Vec::new()
            }
            AppEvent::Live(event) => {
                self.live_event(event, now);
                Vec::new()
            }
            AppEvent::Finished(result) => self.on_finished(result, now),
            AppEvent::Orphans(result) => {
                self.orphans.set(result);
                Vec::new()
            }
            AppEvent::Reaped(outcomes) => {
                self.orphans.ending = 0;
                let failed = outcomes.iter().filter(|(_, o)| o.is_failure()).count();
                let text = match outcomes.as_slice() {
                    [(pid, outcome)] => format!("{pid}: {outcome}"),
                    _ => format!(
                        "{} processes ended, {failed} failed",
                        outcomes.len() - failed
                    ),
                };
                self.flash(text, failed > 0, now);
                vec![Effect::ScanOrphans]
            }
            AppEvent::Sessions(sessions) => {
                self.launcher.set_recent(sessions);
                Vec::new()
            }
            AppEvent::Opened(result) => {
                match result {
                    Ok(opened) => self.show_opened(*opened),
                    Err(e) => self.flash(e, true, now),
                }
                Vec::new()
            }
            AppEvent::Error(text) => {
                self.flash(text, true, now);
                Vec::new()
            }
            AppEvent::Ab(event) => {
                if let ab::AbEvent::Finished(Err(e)) = &event {
                    self.flash(format!("the experiment failed: {e}"), true, now);
                }
                self.ab.on_event(event);
                Vec::new()
            }
            AppEvent::Signal(signal) => {
                self.ending = Some(Ending::Signal(signal));
                vec![Effect::Quit]
            }
            AppEvent::TerminalGone => {
                self.ending = Some(Ending::TerminalGone);
                vec![Effect::Quit]
            }
            AppEvent::Lines { dir, lines } => {
                for flames in [&mut self.live.flames, &mut self.compare.flames] {
                    flames.views.set_session_lines(&dir, lines.clone());
                    flames.refresh_views();
                }
                Vec::new()
            }
            AppEvent::Source { path, text } => {
                for flames in [&mut self.live.flames, &mut self.compare.flames] {
                    flames.views.source.set_text(&path, text.clone());
                }
                Vec::new()
            }
            AppEvent::FinalStacks(stacks) => {
                let (dir, trees) = *stacks;
                if self.live.run.dir.as_ref() != Some(&dir) {
                    // An earlier run's, arriving after a new run began.
                    return Vec::new();
                }
                self.whole_run_stacks(trees);
                Vec::new()
            }
        }
    }

    fn flash(&mut self, text: String, error: bool, now: Instant) {
        self.flash = Some(Flash {
            text,
            error,
            at: now,
        });
    }

    fn on_key(&mut self, key: Key, now: Instant) -> Vec<Effect> {
        // A refusal is said until the next key, which may refuse again.
        if self.screen == Screen::Launcher {
            self.launcher.error = None;
        }
        match keys::table(self).action(self, key) {
            Some(action) => self.act(action, key, now),
            None => Vec::new(),
        }
    }

    /// Carries out what `key` does, as its screen's table says ([`keys`]).
    fn act(&mut self, action: Action, key: Key, now: Instant) -> Vec<Effect> {
        match action {
            Action::Quit => return self.quit(now),
            Action::Help => {
                self.help = true;
                self.help_scroll = 0;
            }
            Action::CloseHelp => self.help = false,
            Action::HelpDown => {
                let lines = keys::help_lines_at_most(self.screen);
                self.help_scroll = (self.help_scroll + 1).min(lines.saturating_sub(1));
            }
            Action::HelpUp => self.help_scroll = self.help_scroll.saturating_sub(1),
            Action::FocusNext | Action::FocusPrev => {
                let by = if action == Action::FocusNext { 1 } else { -1 };
                match self.screen {
                    Screen::Compare => self.compare.focus = self.compare.focus.step(by),
                    _ => self.focus = self.focus.step(by),
                }
            }
            Action::FocusNumber => {
                if let Key::Char(c @ '1'..='9') = key {
                    let i = c as usize - '1' as usize;
                    match self.screen {
                        Screen::Compare => {
                            if let Some(&pane) = ComparePane::ALL.get(i) {
                                self.compare.focus = pane;
                            }
                        }
                        _ => {
                            if let Some(&pane) = Pane::ALL.get(i) {
                                self.focus = pane;
                            }
                        }
                    }
                }
            }
            Action::Maximize => self.maximized = !self.maximized,
            Action::BackOut => return self.back_out(),
            Action::Pause => {
                if self.live.paused {
                    self.resume(now);
                } else {
                    self.live.paused = true;
                }
            }
            Action::Narrow => self.window_s = (self.window_s / 2.0).max(WINDOW_RANGE_S.0),
            Action::Widen => self.window_s = (self.window_s * 2.0).min(WINDOW_RANGE_S.1),
            Action::Baseline => self.take_baseline(now),
            Action::Snapshot => return self.snapshot(now),
            Action::Difference => self.toggle_differential(now),
            Action::CompareBackOut => {
                if self.compare.focus == ComparePane::Flame && self.back_to_flamegraph() {
                    return Vec::new();
                }
                // Out of the flamegraph's zoom first, then out of a maximized pane, then
                // back to the launcher the sessions were opened from.
                let zoomed_out =
                    self.compare.focus == ComparePane::Flame && self.flame_mut().zoom_out();
                if !zoomed_out && !self.maximized && self.history.is_shown() {
                    self.screen = Screen::History;
                    return Vec::new();
                }
                if !zoomed_out && !self.maximized && self.from_launcher {
                    self.screen = Screen::Launcher;
                    return vec![Effect::ListSessions];
                }
                self.maximized = self.maximized && zoomed_out;
            }
            Action::Compare(action) => self.compare.act(action),
            Action::Ab(action) => self.ab.act(action),
            Action::History(action) => {
                let effects: Vec<Effect> = self.history.act(action).into_iter().collect();
                if !effects.is_empty() {
                    self.flash("reading the points either side…".into(), false, now);
                }
                return effects;
            }
            Action::Timeline(action) => self.timeline_act(action, now),
            // A move at an edge (or with nothing to select) changes nothing, as in a list;
            // what each returns (whether it moved) is not needed here.
            Action::FlameParent => _ = self.flame_mut().select_parent(),
            Action::FlameChild => _ = self.flame_mut().select_child(),
            Action::FlamePrev => _ = self.flame_mut().select_prev(),
            Action::FlameNext => _ = self.flame_mut().select_next(),
            Action::FlameZoom => _ = self.flame_mut().zoom_in(),
            Action::FlamePageUp => _ = self.flame_mut().page_up(FLAME_PAGE),
            Action::FlamePageDown => _ = self.flame_mut().page_down(FLAME_PAGE),
            Action::FlameTop => _ = self.flame_mut().select_top(),
            Action::FlameBottom => _ = self.flame_mut().select_bottom(),
            Action::FlameHottest => _ = self.flame_mut().select_hottest_leaf(),
            Action::FlameWaker => _ = self.flame_mut().follow_waker(),
            Action::FlameFold => self.flames_mut().toggle_folding(),
            Action::FlameNames => self.flames_mut().toggle_short_names(),
            Action::FlameHide => self.flames_mut().toggle_hiding(),
            Action::NextMatch => _ = self.flame_mut().next_match(),
            Action::PrevMatch => _ = self.flame_mut().prev_match(),
            Action::Search
            | Action::SearchType
            | Action::SearchErase
            | Action::SearchSubstring
            | Action::SearchKeep
            | Action::SearchClear => self.search_act(action, key),
            Action::Kind => {
                self.flames_mut().toggle_kind();
                self.flames_mut().refresh_views();
            }
            Action::Views(action) => {
                if let profile_views::ViewsAction::Show(_) = action {
                    self.focus_flame();
                }
                self.flames_mut().act_views(action);
            }
            Action::Launcher(action) => {
                self.launcher.act(action, key);
                return self.refresh_processes(now);
            }
            Action::Pick(action) => return self.pick(action, key),
            Action::LauncherEnter => {
                if self.launcher.focus == LauncherFocus::Recent {
                    let dirs = self.launcher.to_open();
                    if dirs.is_empty() {
                        return Vec::new();
                    }
                    let names: Vec<String> = dirs
                        .iter()
                        .filter_map(|d| d.file_name())
                        .map(|n| n.to_string_lossy().into_owned())
                        .collect();
                    self.flash(format!("opening {}…", names.join(" against ")), false, now);
                    self.launcher.marked = None;
                    return vec![Effect::OpenSessions(dirs)];
                }
                if self.launcher.focus == LauncherFocus::Params {
                    self.launcher.edit();
                } else if self.launcher.workload().is_none() {
                    self.launcher.act(launcher::LauncherAction::Params, key);
                    return self.refresh_processes(now);
                } else if let Some(workload) = self.launcher.launch() {
                    let params = live::params_text(&workload.params_json());
                    self.begin_run(workload.name(), &params);
                    return vec![Effect::Launch(Box::new(workload))];
                }
            }
            Action::ToOrphans => {
                self.screen = Screen::Orphans;
                return vec![Effect::ScanOrphans];
            }
            Action::Orphans(action) => return self.orphans.act(action),
            Action::ToLauncher => self.screen = Screen::Launcher,
        }
        Vec::new()
    }

    /// Esc: close what is open, one level at a time; never quits. A run that is over
    /// goes back to the launcher it came from.
    fn back_out(&mut self) -> Vec<Effect> {
        if self.focus == Pane::Flame && self.back_to_flamegraph() {
            return Vec::new();
        }
        if self.focus == Pane::Flame && self.flame_mut().zoom_out() {
            return Vec::new();
        }
        if self.maximized {
            self.maximized = false;
            return Vec::new();
        }
        if self.from_launcher && self.live.run.status.is_over() {
            self.screen = Screen::Launcher;
            return vec![Effect::ListSessions, Effect::ScanOrphans];
        }
        Vec::new()
    }

    /// The search's keys: open the search line (on the flame pane), type, switch between
    /// segments and substrings, keep or clear it.
    fn search_act(&mut self, action: Action, key: Key) {
        match action {
            Action::Search => {
                self.focus_flame();
                let flames = self.flames_mut();
                flames.search_input = Some(String::new());
                // Top functions follow a search typed while they show, not an earlier one.
                if flames.views.kind == profile_views::ViewKind::Top {
                    flames.views.top.filtered = true;
                }
            }
            Action::SearchType | Action::SearchErase => {
                let flames = self.flames_mut();
                if let Some(query) = &mut flames.search_input {
                    match key {
                        Key::Char(c) => query.push(c),
                        Key::Backspace => _ = query.pop(),
                        _ => {}
                    }
                    let query = query.clone();
                    flames.shown_mut().search(&query);
                    flames.refresh_views();
                }
            }
            Action::SearchSubstring => {
                let flames = self.flames_mut();
                let on = !flames.shown().substring();
                flames.shown_mut().set_substring(on);
                flames.refresh_views();
            }
            Action::SearchKeep => self.flames_mut().search_input = None,
            Action::SearchClear => {
                self.flames_mut().search_input = None;
                self.flame_mut().search("");
                self.flames_mut().refresh_views();
            }
            // The other actions are carried out by `act`, which hands only these here.
            _ => {}
        }
    }

    /// The flame pane takes the focus (live or compare screen).
    fn focus_flame(&mut self) {
        match self.screen {
            Screen::Compare => self.compare.focus = ComparePane::Flame,
            _ => self.focus = Pane::Flame,
        }
    }

    /// Esc in a view other than the flamegraph: back to the flamegraph.
    fn back_to_flamegraph(&mut self) -> bool {
        use profile_views::{ViewKind, ViewsAction};
        if self.flames().views.kind == ViewKind::Flame {
            return false;
        }
        self.flames_mut()
            .act_views(ViewsAction::Show(ViewKind::Flame));
        true
    }

    fn quit(&mut self, now: Instant) -> Vec<Effect> {
        if self.screen == Screen::Ab {
            if self.ab.is_over() || self.ab.stopping {
                return vec![Effect::Quit];
            }
            self.ab.stopping = true;
            self.flash(
                "stopping the run going on and judging the runs so far (q again leaves at once)"
                    .into(),
                false,
                now,
            );
            return vec![Effect::StopExperiment];
        }
        if self.screen != Screen::Live || self.live.run.status.is_over() || self.live.quit_requested
        {
            // Over, or asked twice: leave now.
            return vec![Effect::Quit];
        }
        self.live.quit_requested = true;
        self.live.run.status = RunStatus::Stopping;
        let text = if self.live.run.attached {
            "detaching (the process goes on running) and writing the session (q again \
             leaves at once)"
        } else {
            "stopping the workload and writing the session (q again leaves at once)"
        };
        self.flash(text.into(), false, now);
        vec![Effect::StopRecording]
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use benchtop_sessions::synthetic::TreeChunks;

    pub(super) fn state() -> State {
        State::new("ring", "num-nodes=5", true)
    }

    pub(super) fn tree(stacks: &[(&str, u64)]) -> StackTree {
        let mut t = StackTree::new();
        for (stack, weight) in stacks {
            t.add_names(stack.split(';'), *weight);
        }
        t
    }

    /// The next interval's chunk of on-CPU stacks, as a recorder hands it out.
    pub(super) fn stacks(chunks: &mut TreeChunks, cpu: StackTree) -> AppEvent {
        AppEvent::Live(LiveEvent::IntervalStacks(Box::new(chunks.cpu(&cpu))))
    }

    pub(super) fn keys(s: &mut State, keys: &[Key], now: Instant) -> Vec<Effect> {
        keys.iter()
            .flat_map(|&k| s.update(AppEvent::Key(k), now))
            .collect()
    }

    #[test]
    fn tab_and_numbers_move_the_focus_and_wrap() {
        let mut s = state();
        let now = Instant::now();
        assert_eq!(s.focus, Pane::Flame);
        keys(&mut s, &[Key::Tab], now);
        assert_eq!(s.focus, Pane::Throughput);
        keys(&mut s, &[Key::BackTab, Key::BackTab], now);
        assert_eq!(s.focus, Pane::Resources);
        keys(&mut s, &[Key::Char('2')], now);
        assert_eq!(s.focus, Pane::Latency);
        keys(&mut s, &[Key::Char('9')], now);
        assert_eq!(s.focus, Pane::Latency, "no ninth pane");
    }

    #[test]
    fn on_the_compare_screen_keys_focus_toggle_the_difference_and_q_quits_at_once() {
        let mut s = state();
        s.screen = Screen::Compare;
        s.compare.flames.differential = true;
        let now = Instant::now();
        assert_eq!(s.compare.focus, ComparePane::Table);
        keys(&mut s, &[Key::Tab, Key::Tab], now);
        assert_eq!(s.compare.focus, ComparePane::Flame);
        keys(&mut s, &[Key::Char('2')], now);
        assert_eq!(s.compare.focus, ComparePane::Latency);
        keys(&mut s, &[Key::Char('d')], now);
        assert!(!s.flames().differential && !s.flames().panes[Kind::Cpu].differential());
        keys(&mut s, &[Key::Char('e'), Key::Esc], now);
        assert!(!s.maximized);
        keys(&mut s, &[Key::Char('?')], now);
        assert!(s.help);
        keys(&mut s, &[Key::Char('x')], now);
        assert!(!s.help);
        assert_eq!(keys(&mut s, &[Key::Char('q')], now), [Effect::Quit]);
    }

    #[test]
    fn q_stops_the_run_first_and_quits_when_it_is_over() {
        let mut s = state();
        let now = Instant::now();
        assert_eq!(
            keys(&mut s, &[Key::Char('q')], now),
            [Effect::StopRecording]
        );
        assert_eq!(s.live.run.status, RunStatus::Stopping);
        let effects = s.update(AppEvent::Finished(Err("the disk is full".into())), now);
        assert_eq!(effects, [Effect::Quit]);
    }

    #[test]
    fn a_signal_or_a_lost_terminal_leaves_at_once_even_mid_run() {
        let now = Instant::now();
        for signal in Signal::ALL {
            let mut s = state();
            assert_eq!(s.update(AppEvent::Signal(signal), now), [Effect::Quit]);
            assert_eq!(s.ending, Some(Ending::Signal(signal)));
            assert_eq!(Signal::from_number(signal.number()), Some(signal));
        }
        let mut s = state();
        assert_eq!(s.update(AppEvent::TerminalGone, now), [Effect::Quit]);
        assert_eq!(s.ending, Some(Ending::TerminalGone));
        // A key leaves no ending behind.
        let mut s = state();
        keys(&mut s, &[Key::Char('q'), Key::Char('q')], now);
        assert_eq!(s.ending, None);
        assert_eq!(Signal::from_number(libc::SIGWINCH), None);
    }

    #[test]
    fn a_second_q_while_stopping_leaves_at_once() {
        let mut s = state();
        let now = Instant::now();
        keys(&mut s, &[Key::Char('q')], now);
        assert_eq!(keys(&mut s, &[Key::CtrlC], now), [Effect::Quit]);
    }

    #[test]
    fn esc_backs_out_and_never_quits() {
        let mut s = state();
        let now = Instant::now();
        keys(&mut s, &[Key::Char('e')], now);
        assert!(s.maximized);
        assert!(keys(&mut s, &[Key::Esc, Key::Esc, Key::Esc], now).is_empty());
        assert!(!s.maximized && !s.live.quit_requested);
    }

    #[test]
    fn slash_types_a_search_that_esc_clears() {
        let mut c = TreeChunks::default();
        let mut s = state();
        let now = Instant::now();
        s.update(
            stacks(
                &mut c,
                tree(&[("bt-ring;main;work", 3), ("bt-ring;main;idle", 1)]),
            ),
            now,
        );
        keys(
            &mut s,
            &[Key::Char('/'), Key::Char('w'), Key::Char('o'), Key::Enter],
            now,
        );
        assert!(s.flames().search_input.is_none());
        assert_eq!(
            s.flames().panes[Kind::Cpu].matches(),
            0,
            "whole segments: `wo` is not `work`"
        );
        keys(&mut s, &[Key::Char('/'), Key::Tab], now);
        assert_eq!(
            s.flames().panes[Kind::Cpu].matches(),
            1,
            "Tab: any substring"
        );
        keys(&mut s, &[Key::Tab], now);
        assert_eq!(
            s.flames().panes[Kind::Cpu].matches(),
            0,
            "Tab again: segments"
        );
        let work: Vec<Key> = "work".chars().map(Key::Char).collect();
        keys(&mut s, &work, now);
        assert_eq!(s.flames().panes[Kind::Cpu].matches(), 1, "`work` whole");
        keys(&mut s, &[Key::Enter], now);
        keys(&mut s, &[Key::Char('/'), Key::Char('x'), Key::Esc], now);
        assert_eq!(
            s.flames().panes[Kind::Cpu].matches(),
            0,
            "Esc drops the search"
        );
    }

    #[test]
    fn plus_and_minus_zoom_time_within_bounds() {
        let mut s = state();
        let now = Instant::now();
        keys(&mut s, &[Key::Char('+'); 10], now);
        assert_eq!(s.window_s, WINDOW_RANGE_S.0);
        keys(&mut s, &[Key::Char('-'); 20], now);
        assert_eq!(s.window_s, WINDOW_RANGE_S.1);
    }

    #[test]
    fn flashes_fade_after_a_while() {
        let mut s = state();
        let now = Instant::now();
        keys(&mut s, &[Key::Char('d')], now);
        assert!(s.flash.is_some());
        s.update(AppEvent::Tick, now + FLASH_FOR);
        assert!(s.flash.is_none());
    }

    #[test]
    fn the_launcher_edits_a_parameter_and_enter_launches_the_workload() {
        let mut s = State::with_launcher(LauncherState::from_cli(), true);
        let now = Instant::now();
        assert_eq!(s.screen, Screen::Launcher);
        // Tab to the parameters; the first is num-nodes; Enter edits, Enter keeps.
        keys(&mut s, &[Key::Tab, Key::Enter], now);
        assert!(s.launcher.editing.is_some());
        let mut typed: Vec<Key> = "250".chars().map(Key::Char).collect();
        typed.push(Key::Enter);
        keys(&mut s, &typed, now);
        assert!(s.launcher.error.is_none(), "{:?}", s.launcher.error);
        keys(&mut s, &[Key::BackTab], now);
        let effects = keys(&mut s, &[Key::Enter], now);
        let [Effect::Launch(workload)] = effects.as_slice() else {
            panic!("{effects:?}")
        };
        let Workload::Ring(params) = workload.as_ref() else {
            panic!("not the ring")
        };
        assert_eq!(params.num_nodes, 250);
        assert_eq!(s.screen, Screen::Live);
        assert_eq!(s.live.run.workload, "ring");
        assert!(
            s.live.run.params.contains("num-nodes=250"),
            "{}",
            s.live.run.params
        );
    }

    #[test]
    fn q_on_the_launcher_quits_and_esc_cancels_an_edit() {
        let mut s = State::with_launcher(LauncherState::from_cli(), true);
        let now = Instant::now();
        keys(
            &mut s,
            &[Key::Tab, Key::Enter, Key::Char('9'), Key::Esc],
            now,
        );
        assert!(s.launcher.editing.is_none());
        assert!(s.launcher.workloads[0].params[0].value.is_empty());
        assert_eq!(keys(&mut s, &[Key::Char('q')], now), [Effect::Quit]);
    }

    #[test]
    fn a_finished_run_goes_back_to_the_launcher_with_esc() {
        let mut s = State::with_launcher(LauncherState::from_cli(), true);
        let now = Instant::now();
        keys(&mut s, &[Key::Enter], now);
        assert_eq!(s.screen, Screen::Live);
        assert!(keys(&mut s, &[Key::Esc], now).is_empty(), "still running");
        assert_eq!(s.screen, Screen::Live);
        s.update(AppEvent::Finished(Err("refused".into())), now);
        let effects = keys(&mut s, &[Key::Esc], now);
        assert_eq!(s.screen, Screen::Launcher);
        assert!(effects.contains(&Effect::ListSessions));
    }

    #[test]
    fn orphans_are_ended_only_after_a_confirmation() {
        let mut s = State::with_launcher(LauncherState::from_cli(), true);
        let now = Instant::now();
        assert_eq!(keys(&mut s, &[Key::Char('r')], now), [Effect::ScanOrphans]);
        assert_eq!(s.screen, Screen::Orphans);
        let orphan = |pid| benchtop_profilers::reaper::Orphan {
            pid,
            start_ticks: 1,
            command: "bt-ring-node".into(),
            owner: benchtop_profilers::reaper::Owner {
                pid: 1,
                start_ticks: 2,
            },
            owner_state: benchtop_profilers::reaper::OwnerState::Gone,
            session: None,
            age: Duration::from_secs(5),
            rss_bytes: 0,
            uid: benchtop_profilers::reaper::current_uid(),
            user: "tester".into(),
        };
        s.update(AppEvent::Orphans(Ok(vec![orphan(7), orphan(8)])), now);
        assert!(
            keys(&mut s, &[Key::Char('K'), Key::Esc], now).is_empty(),
            "no"
        );
        let effects = keys(&mut s, &[Key::Char('K'), Key::Right, Key::Enter], now);
        let [Effect::Reap(targets, ReapSignal::Kill)] = effects.as_slice() else {
            panic!("{effects:?}")
        };
        assert_eq!(targets.len(), 2);
        let effects = s.update(
            AppEvent::Reaped(vec![(7, ReapOutcome::Ended), (8, ReapOutcome::Ended)]),
            now,
        );
        assert_eq!(effects, [Effect::ScanOrphans], "look again after ending");
        keys(&mut s, &[Key::Esc], now);
        assert_eq!(s.screen, Screen::Launcher);
    }

    #[test]
    fn s_asks_for_a_snapshot_while_the_run_goes_on() {
        let mut s = state();
        let now = Instant::now();
        assert!(
            keys(&mut s, &[Key::Char('s')], now).is_empty(),
            "not started"
        );
        s.update(
            AppEvent::Live(LiveEvent::Started {
                throughput: None,
                latency: None,
                sampling: String::new(),
            }),
            now,
        );
        assert_eq!(keys(&mut s, &[Key::Char('s')], now), [Effect::SaveSnapshot]);
        s.update(AppEvent::Finished(Err("gone".into())), now);
        assert!(keys(&mut s, &[Key::Char('s')], now).is_empty());
    }

    #[test]
    fn a_saved_sessions_baseline_holds_for_every_run() {
        let mut s = State::with_launcher(LauncherState::from_cli(), true);
        let now = Instant::now();
        s.set_initial_baseline(Baseline {
            stacks: [
                (Kind::Cpu, Some(tree(&[("bt-ring;main;work", 3)]))),
                (Kind::Live, Some(tree(&[("bt-ring;main;grow", 4096)]))),
            ]
            .into_iter()
            .collect(),
            latency: LatencySummary::default(),
            source: "from sessions/x".into(),
        });
        keys(&mut s, &[Key::Enter], now);
        assert!(s.live.baseline.is_some());
        let panes = &s.flames().panes;
        assert_eq!(
            panes[Kind::Live].baseline().map(StackTree::total_weight),
            Some(4096)
        );
        assert!(panes[Kind::Alloc].baseline().is_none(), "none saved");
        keys(&mut s, &[Key::Char('d')], now);
        let cpu = &s.flames().panes[Kind::Cpu];
        assert!(cpu.differential() && cpu.baseline().is_some());
    }

    #[test]
    fn q_with_the_help_open_on_the_launcher_quits_at_once() {
        let mut s = State::with_launcher(LauncherState::from_cli(), true);
        let now = Instant::now();
        keys(&mut s, &[Key::Char('?')], now);
        assert_eq!(keys(&mut s, &[Key::Char('q')], now), [Effect::Quit]);
    }

    #[test]
    fn the_profile_keys_work_from_any_pane_and_a_search_filters_only_where_it_was_typed() {
        let mut c = TreeChunks::default();
        let mut s = state();
        let now = Instant::now();
        s.update(
            stacks(
                &mut c,
                tree(&[("bt-ring;main;work", 3), ("bt-ring;main;idle", 1)]),
            ),
            now,
        );
        let chars = |text: &str| text.chars().map(Key::Char).collect::<Vec<_>>();
        keys(&mut s, &[Key::Char('1'), Key::Char('o')], now);
        assert_eq!(s.focus, Pane::Throughput);
        assert_eq!(s.flames().kind, Kind::OffCpu, "o from the throughput pane");
        keys(&mut s, &[Key::Char('3'), Key::Char('o')], now);
        assert_eq!(s.flames().kind, Kind::Cpu, "o from the resources pane");
        // The search moves the focus to the flame pane, whose search it types.
        keys(&mut s, &chars("/work"), now);
        assert_eq!(s.focus, Pane::Flame);
        keys(&mut s, &[Key::Enter], now);
        assert_eq!(s.flames().panes[Kind::Cpu].matches(), 1);
        // Top functions opened now list every function ...
        keys(&mut s, &[Key::Char('t')], now);
        let top = &s.flames().views.top;
        assert_eq!((top.rows.len(), top.hidden), (4, 0));
        // ... until a search is typed there.
        keys(&mut s, &chars("/idle"), now);
        keys(&mut s, &[Key::Enter], now);
        let top = &s.flames().views.top;
        assert_eq!((top.rows.len(), top.hidden), (1, 3));
    }

    #[test]
    fn o_switches_the_flame_pane_between_on_and_off_cpu() {
        let mut s = state();
        let now = Instant::now();
        keys(&mut s, &[Key::Char('o')], now);
        assert_eq!(s.flames().kind, Kind::OffCpu);
        keys(&mut s, &[Key::Char('o')], now);
        assert_eq!(s.flames().kind, Kind::Cpu);
    }
}
