//! The keys: one table per screen (and per mode within a screen: the search line, a
//! parameter being edited, a confirmation, the help overlay).
//!
//! A table is the only place a key is given a meaning. [`State::update`] looks the key up
//! in the table of what is shown ([`table`], [`Table::action`]) and carries out the
//! [`Action`] it finds; the footer draws the table's [`Hint`]s that hold
//! ([`Table::hints`]); the `?` help lists the table's help lines ([`help`]). So the three
//! cannot disagree: a key without a row does nothing, and a row is drawn from what it does.
//! A screen with keys of its own keeps its tables and their actions beside its state
//! (`launcher`: [`LAUNCHER`], [`EDITING`], [`LauncherAction`]; `orphans`: [`ORPHANS`],
//! [`CONFIRM`], [`OrphansAction`]; `compare`: [`COMPARE`], [`CompareAction`]); the live
//! screen's, the rows it shares with the compare screen and the flamegraph's stay here.

pub use super::ab::AB;
use super::ab::AbAction;
pub use super::compare::COMPARE;
use super::compare::{CompareAction, ComparePane};
pub use super::history::HISTORY;
use super::history::HistoryAction;
pub use super::launcher::{EDITING, LAUNCHER};
use super::launcher::{LauncherAction, LauncherFocus};
use super::orphans::OrphansAction;
pub use super::orphans::{CONFIRM, ORPHANS};
use super::picker::PickAction;
pub use super::picker::{COMMAND_LINE, PICKER};
use super::profile_views::{ViewKind, ViewsAction};
use super::timeline::TimelineAction;
use super::{Key, Pane, Screen, State};

/// What a key does. Each is carried out by [`State::update`], in one `match` without a
/// catch-all, so an action that a table names is always handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Leave (on the live screen: stop the run and write its session first).
    Quit,
    /// Open the help overlay.
    Help,
    /// Close the help overlay.
    CloseHelp,
    /// Help overlay: scroll down a line, when its lines do not all fit.
    HelpDown,
    /// Help overlay: scroll up a line.
    HelpUp,
    /// Focus the next pane.
    FocusNext,
    /// Focus the previous pane.
    FocusPrev,
    /// Focus the pane of the digit pressed.
    FocusNumber,
    /// Maximize the focused pane, or restore it.
    Maximize,
    /// Live: close what is open, one level at a time; a run that is over goes back to
    /// the launcher it came from.
    BackOut,
    /// Live: pause the display, or resume it.
    Pause,
    /// Live: a narrower time window.
    Narrow,
    /// Live: a wider time window.
    Widen,
    /// Live: take the profile and latency now as the baseline.
    Baseline,
    /// Live: save a snapshot of the session.
    Snapshot,
    /// Live: the flamegraph against the baseline, or alone.
    Difference,
    /// Live: the timeline's cursor and the parts of the run it picks.
    Timeline(TimelineAction),
    /// Compare: out of the flamegraph's zoom, then out of a maximized pane.
    CompareBackOut,
    /// The compare screen's own keys: the figures, B against A.
    Compare(CompareAction),
    /// Flamegraph: select the parent frame.
    FlameParent,
    /// Flamegraph: select a child frame.
    FlameChild,
    /// Flamegraph: select the frame on the left.
    FlamePrev,
    /// Flamegraph: select the frame on the right.
    FlameNext,
    /// Flamegraph: zoom into the selected frame, or unfold a folded chain.
    FlameZoom,
    /// Flamegraph: a page up.
    FlamePageUp,
    /// Flamegraph: a page down the widest path.
    FlamePageDown,
    /// Flamegraph: the top row.
    FlameTop,
    /// Flamegraph: the bottom of the widest path.
    FlameBottom,
    /// Flamegraph: the hottest leaf under the selection.
    FlameHottest,
    /// Flamegraph of waits: from a waker to what it was waiting for itself.
    FlameWaker,
    /// Flamegraph: fold chains of single-child frames, or not.
    FlameFold,
    /// Flamegraph: short names, or full.
    FlameNames,
    /// Flamegraph: hide the plumbing frames, or show every frame.
    FlameHide,
    /// Flamegraph: the next search match.
    NextMatch,
    /// Flamegraph: the previous search match.
    PrevMatch,
    /// Flamegraph: open the search line.
    Search,
    /// Flamegraph: on-CPU or off-CPU stacks.
    Kind,
    /// The flame pane's other views: which shows, and their own keys.
    Views(ViewsAction),
    /// Search line: type the character.
    SearchType,
    /// Search line: erase the last character.
    SearchErase,
    /// Search line: close it and keep the search.
    SearchKeep,
    /// Search line: close it and clear the search.
    SearchClear,
    /// Search line: match anywhere in a name, or whole path segments.
    SearchSubstring,
    /// The launcher's own keys: selection, focus, editing a parameter.
    Launcher(LauncherAction),
    /// Launcher: run the selected workload, or edit the selected parameter.
    LauncherEnter,
    /// Launcher: the orphans screen.
    ToOrphans,
    /// The orphans screen's own keys: selection, ending, the confirmation.
    Orphans(OrphansAction),
    /// Orphans: back to the launcher.
    ToLauncher,
    /// The `ab` screen's own keys: the figure drawn.
    Ab(AbAction),
    /// Launcher: the command line or the process picker (type, select, run, back).
    Pick(PickAction),
    /// The history screen's own keys: the figure, the change point, opening it.
    History(HistoryAction),
}

/// When a row applies or a hint shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Always.
    Always,
    /// The flamegraph has the focus (live or compare screen) and shows the flamegraph.
    Flame,
    /// The flame pane has the focus, whatever view it shows.
    FlamePane,
    /// The flame pane has the focus and shows a view other than the flamegraph.
    Views,
    /// The flame pane has the focus and shows this view.
    View(ViewKind),
    /// This pane of the live screen has the focus.
    Live(Pane),
    /// This pane of the compare screen has the focus.
    Compare(ComparePane),
    /// The launcher's keys go here.
    Launcher(LauncherFocus),
    /// The run goes on.
    RunGoesOn,
    /// The run goes on, of a workload or a command (which `q` stops).
    WorkloadGoesOn,
    /// The run goes on, attached to a process (which `q` detaches from).
    AttachedGoesOn,
    /// The run is over and was started from the launcher.
    RunOverFromLauncher,
    /// The run is over.
    RunOver,
    /// The experiment of `ab --tui` goes on.
    ExperimentGoesOn,
    /// The experiment of `ab --tui` is over.
    ExperimentOver,
    /// The search shown matches anywhere in a name (true) or whole path segments (false).
    Substring(bool),
    /// The history screen's figure has a change point selected.
    HasChangePoint,
}

impl When {
    /// Whether it holds in `state`.
    pub fn holds(self, state: &State) -> bool {
        match self {
            When::Always => true,
            When::Flame => {
                flame_pane_focused(state) && state.flames().views.kind == ViewKind::Flame
            }
            When::FlamePane => flame_pane_focused(state),
            When::Views => {
                flame_pane_focused(state) && state.flames().views.kind != ViewKind::Flame
            }
            When::View(kind) => flame_pane_focused(state) && state.flames().views.kind == kind,
            When::Live(pane) => state.focus == pane,
            When::Compare(pane) => state.compare.focus == pane,
            When::Launcher(focus) => state.launcher.focus == focus,
            When::RunGoesOn => !state.live.run.status.is_over(),
            When::WorkloadGoesOn => !state.live.run.status.is_over() && !state.live.run.attached,
            When::AttachedGoesOn => !state.live.run.status.is_over() && state.live.run.attached,
            When::RunOverFromLauncher => state.live.run.status.is_over() && state.from_launcher,
            When::RunOver => state.live.run.status.is_over(),
            When::ExperimentGoesOn => !state.ab.is_over(),
            When::ExperimentOver => state.ab.is_over(),
            When::Substring(on) => state.flames().shown().substring() == on,
            When::HasChangePoint => state.history.selected_change().is_some(),
        }
    }

    /// A hint of this condition belongs to the focused pane (drawn apart, first).
    pub fn is_pane(self) -> bool {
        matches!(
            self,
            When::Flame
                | When::FlamePane
                | When::Views
                | When::View(_)
                | When::Live(_)
                | When::Compare(_)
        )
    }
}

/// Whether the flame pane has the focus (live or compare screen).
fn flame_pane_focused(state: &State) -> bool {
    match state.screen {
        Screen::Live => state.focus == Pane::Flame,
        Screen::Compare => state.compare.focus == ComparePane::Flame,
        Screen::Launcher | Screen::Orphans | Screen::Ab | Screen::History => false,
    }
}

/// A few words in the footer naming a key and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hint {
    /// The words (`b baseline`).
    pub text: &'static str,
    /// When it shows.
    pub when: When,
    /// Its place in the footer, left to right.
    pub at: u8,
}

impl Hint {
    /// Whether it stays in a footer too narrow for every hint: the keys that teach the
    /// rest (`? help`) and that leave (`q quit`, `q stop+quit`…).
    pub fn stays(&self) -> bool {
        self.text.starts_with("? ") || self.text.starts_with("q ")
    }
}

pub(super) const fn hint(text: &'static str, when: When, at: u8) -> Hint {
    Hint { text, when, at }
}

/// One row of a table: keys, what each does, and how the footer and the help say it.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The keys and the action of each.
    pub keys: &'static [(Key, Action)],
    /// The keys work only while this holds; otherwise they fall through to later rows.
    pub only: When,
    /// The help's line: the keys as it names them, and what they do. None: the row is
    /// said in the footer only.
    pub help: Option<(&'static str, &'static str)>,
    /// What the footer says of it.
    pub hints: &'static [Hint],
}

/// What every key without a row does, and how the footer says it.
#[derive(Debug, Clone, Copy)]
pub struct Otherwise {
    /// The action.
    pub action: Action,
    /// The footer's words for it.
    pub hint: Option<Hint>,
}

/// Rows under a heading: the help lists their lines under it.
#[derive(Debug, Clone, Copy)]
pub struct Section {
    /// The heading (`Timeline`); empty for a mode whose keys the help does not list.
    pub heading: &'static str,
    /// The rows.
    pub rows: &'static [Row],
}

pub(super) const fn section(heading: &'static str, rows: &'static [Row]) -> Section {
    Section { heading, rows }
}

/// One line of the help: a key (or keys named together) and what it does, under a heading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelpLine {
    /// The heading of the row's section.
    pub heading: &'static str,
    /// The keys as the help names them (`Home, End`).
    pub keys: &'static str,
    /// What they do.
    pub what: &'static str,
}

/// The keys of one screen or mode.
#[derive(Debug)]
pub struct Table {
    /// Its name, for tests and messages.
    pub name: &'static str,
    /// Its rows by section, in the help's order; a key is looked up in this order.
    pub rows: &'static [Section],
    /// What any other key does; none: nothing.
    pub otherwise: Option<Otherwise>,
}

impl Table {
    /// Every row, in order.
    pub fn all_rows(&self) -> impl Iterator<Item = &'static Row> + '_ {
        self.rows.iter().flat_map(|section| section.rows.iter())
    }

    /// What `key` does in `state`: the first row that holds and names it, else the
    /// table's `otherwise`.
    pub fn action(&self, state: &State, key: Key) -> Option<Action> {
        self.all_rows()
            .filter(|row| row.only.holds(state))
            .find_map(|row| row.keys.iter().find(|(k, _)| *k == key).map(|&(_, a)| a))
            .or(self.otherwise.map(|o| o.action))
    }

    /// The hints that show in `state`, left to right.
    pub fn hints(&self, state: &State) -> Vec<Hint> {
        let mut hints: Vec<Hint> = self
            .all_rows()
            .flat_map(|row| row.hints.iter().copied())
            .chain(self.otherwise.and_then(|o| o.hint))
            .filter(|h| h.when.holds(state))
            .collect();
        hints.sort_by_key(|h| h.at);
        hints
    }

    /// Every hint it has, whatever the state.
    pub fn every_hint(&self) -> impl Iterator<Item = Hint> + '_ {
        self.all_rows()
            .flat_map(|row| row.hints.iter().copied())
            .chain(self.otherwise.and_then(|o| o.hint))
    }

    /// Its help lines, in order.
    pub fn help(&self) -> impl Iterator<Item = HelpLine> + '_ {
        self.rows.iter().flat_map(|section| {
            section.rows.iter().filter_map(|row| {
                row.help.map(|(keys, what)| HelpLine {
                    heading: section.heading,
                    keys,
                    what,
                })
            })
        })
    }

    /// Whether the footer keeps a part for the focused pane's keys.
    pub fn has_panes(&self) -> bool {
        self.every_hint().any(|h| h.when.is_pane())
    }
}

/// The table of the keys in `state`: the mode's when one is open, else the screen's.
pub fn table(state: &State) -> &'static Table {
    if state.flames().search_input.is_some() {
        &SEARCH
    } else if state.help {
        &HELP
    } else {
        match state.screen {
            Screen::Launcher if state.launcher.editing.is_some() => &EDITING,
            Screen::Launcher if state.launcher.focus == LauncherFocus::Command => &COMMAND_LINE,
            Screen::Launcher if state.launcher.focus == LauncherFocus::Processes => &PICKER,
            Screen::Launcher => &LAUNCHER,
            Screen::Orphans if state.orphans.confirm.is_some() => &CONFIRM,
            Screen::Orphans => &ORPHANS,
            Screen::Compare => &COMPARE,
            Screen::Live => &LIVE,
            Screen::Ab => &AB,
            Screen::History => &HISTORY,
        }
    }
}

/// The table of `screen` itself, without its modes: what its footer says.
pub fn screen(screen: Screen) -> &'static Table {
    match screen {
        Screen::Launcher => &LAUNCHER,
        Screen::Orphans => &ORPHANS,
        Screen::Live => &LIVE,
        Screen::Compare => &COMPARE,
        Screen::Ab => &AB,
        Screen::History => &HISTORY,
    }
}

/// The tables the `?` help of `screen` lists, in order.
pub fn help(screen: Screen) -> &'static [&'static Table] {
    match screen {
        Screen::Launcher => &[&LAUNCHER, &EDITING, &COMMAND_LINE, &PICKER],
        Screen::Orphans => &[&ORPHANS],
        Screen::Live => &[&LIVE],
        Screen::Compare => &[&COMPARE],
        Screen::Ab => &[&AB],
        Screen::History => &[&HISTORY],
    }
}

/// At most how many lines the help of `screen` takes to draw: its headings and lines, each
/// line wrapped at most once (what a key does is at most twice the room of the narrowest
/// help box). The view scrolls no further than its last line.
pub fn help_lines_at_most(screen: Screen) -> usize {
    help(screen)
        .iter()
        .map(|t| t.rows.len() + 2 * t.help().count())
        .sum()
}

/// Every table.
pub const TABLES: [&Table; 12] = [
    &LIVE,
    &COMPARE,
    &LAUNCHER,
    &EDITING,
    &COMMAND_LINE,
    &PICKER,
    &ORPHANS,
    &CONFIRM,
    &SEARCH,
    &HELP,
    &AB,
    &HISTORY,
];

/// The live screen.
pub const LIVE: Table = Table {
    name: "live",
    rows: &[
        section("Screen", SCREEN_ROWS),
        section("Run", RUN_ROWS),
        section("Timeline", &TIMELINE_ROWS),
        section("Profile", PROFILE_ROWS),
        section("Views", VIEW_ROWS),
        section("Flamegraph", FLAME_ROWS),
    ],
    otherwise: None,
};

const SCREEN_ROWS: &[Row] = &[
    Row {
        keys: &[(Key::Char('q'), Action::Quit), (Key::CtrlC, Action::Quit)],
        only: When::Always,
        help: Some((
            "q, Ctrl-C",
            "stop or detach, write the session, quit (twice: at once)",
        )),
        hints: &[
            hint("q quit", When::RunOver, 31),
            hint("q stop+quit", When::WorkloadGoesOn, 31),
            hint("q detach+quit", When::AttachedGoesOn, 31),
        ],
    },
    Row {
        keys: &[(Key::Esc, Action::BackOut)],
        only: When::Always,
        help: Some((
            "Esc",
            "back out: zoom out, leave a maximized pane, close help",
        )),
        hints: &[
            hint("Esc out", When::Flame, 3),
            hint("Esc launcher", When::RunOverFromLauncher, 30),
        ],
    },
    HELP_ROW,
    FOCUS_ROW,
    Row {
        keys: &[
            (Key::Char('1'), Action::FocusNumber),
            (Key::Char('2'), Action::FocusNumber),
            (Key::Char('3'), Action::FocusNumber),
            (Key::Char('4'), Action::FocusNumber),
        ],
        only: When::Always,
        help: Some(("1-4", "focus throughput, latency, resources, flamegraph")),
        hints: &[],
    },
    MAXIMIZE_ROW,
    Row {
        keys: &[(Key::Char(' '), Action::Pause)],
        only: When::Always,
        help: Some(("space", "pause the display (the recording goes on)")),
        hints: &[hint("space pause", When::Always, 22)],
    },
    Row {
        keys: &[
            (Key::Char('+'), Action::Narrow),
            (Key::Char('='), Action::Narrow),
            (Key::Char('-'), Action::Widen),
        ],
        only: When::Always,
        help: Some(("+ / -", "narrow / widen the time window of the series")),
        hints: &[
            hint("+/- time", When::Live(Pane::Throughput), 10),
            hint("+/- time", When::Live(Pane::Resources), 10),
        ],
    },
];

/// The run's keys: the baseline, a snapshot, the difference.
const RUN_ROWS: &[Row] = &[
    Row {
        keys: &[(Key::Char('b'), Action::Baseline)],
        only: When::Always,
        help: Some(("b", "take the current profile and latency as the baseline")),
        hints: &[hint("b baseline", When::Always, 20)],
    },
    Row {
        keys: &[(Key::Char('s'), Action::Snapshot)],
        only: When::Always,
        help: Some((
            "s",
            "save the stacks so far and threads.csv in the session now",
        )),
        hints: &[],
    },
    Row {
        keys: &[(Key::Char('d'), Action::Difference)],
        only: When::Always,
        help: Some(("d", "flamegraph: difference against the baseline")),
        hints: &[hint("d diff", When::Always, 21)],
    },
];

/// The timeline strip's keys on the live screen (a saved session's or a live run's).
const TIMELINE_ROWS: [Row; 6] = [
    Row {
        keys: &[
            (Key::Char(','), Action::Timeline(TimelineAction::Prev)),
            (Key::Char('.'), Action::Timeline(TimelineAction::Next)),
        ],
        only: When::Always,
        help: Some((", .", "move the cursor one interval")),
        hints: &[],
    },
    Row {
        keys: &[(Key::Char('r'), Action::Timeline(TimelineAction::Mark))],
        only: When::Always,
        help: Some(("r … r", "mark a range; flamegraph and latency show it")),
        hints: &[],
    },
    Row {
        keys: &[(Key::Char('L'), Action::Timeline(TimelineAction::Last))],
        only: When::Always,
        help: Some(("L", "the last 10 seconds")),
        hints: &[hint("L last 10s", When::RunGoesOn, 24)],
    },
    Row {
        keys: &[(Key::Char('B'), Action::Timeline(TimelineAction::AsBaseline))],
        only: When::Always,
        help: Some(("B", "the range shown becomes the diff's baseline")),
        hints: &[],
    },
    Row {
        keys: &[(Key::Char('S'), Action::Timeline(TimelineAction::Slow))],
        only: When::Always,
        help: Some(("S", "the slow intervals against the rest")),
        hints: &[],
    },
    Row {
        keys: &[(Key::Char('A'), Action::Timeline(TimelineAction::Whole))],
        only: When::Always,
        help: Some(("A", "the whole run again")),
        hints: &[],
    },
];

/// The `?` row of the live and compare screens.
pub(super) const HELP_ROW: Row = Row {
    keys: &[(Key::Char('?'), Action::Help), (Key::F1, Action::Help)],
    only: When::Always,
    help: Some(("? , F1", "this help")),
    hints: &[hint("? help", When::Always, 29)],
};

/// Tab and Shift-Tab on the live and compare screens.
pub(super) const FOCUS_ROW: Row = Row {
    keys: &[
        (Key::Tab, Action::FocusNext),
        (Key::BackTab, Action::FocusPrev),
    ],
    only: When::Always,
    help: Some(("Tab, Shift-Tab", "focus the next, previous pane")),
    hints: &[hint("Tab focus", When::Always, 28)],
};

/// `e` on the live and compare screens.
pub(super) const MAXIMIZE_ROW: Row = Row {
    keys: &[(Key::Char('e'), Action::Maximize)],
    only: When::Always,
    help: Some(("e", "maximize the focused pane (again: restore)")),
    hints: &[hint("e max", When::Always, 27)],
};

/// The flamegraph's keys, on the live and compare screens.
pub(super) const FLAME_ROWS: &[Row] = &[
    Row {
        keys: &[
            (Key::Up, Action::FlameParent),
            (Key::Char('k'), Action::FlameParent),
            (Key::Down, Action::FlameChild),
            (Key::Char('j'), Action::FlameChild),
            (Key::Left, Action::FlamePrev),
            (Key::Char('h'), Action::FlamePrev),
            (Key::Right, Action::FlameNext),
            (Key::Char('l'), Action::FlameNext),
        ],
        only: When::Flame,
        // Said with the views' arrows: one line a key.
        help: None,
        hints: &[hint("←↓↑→ select", When::Flame, 1)],
    },
    Row {
        keys: &[(Key::Enter, Action::FlameZoom)],
        only: When::Flame,
        // Said with the views' Enter: one line a key.
        help: None,
        hints: &[hint("Enter zoom", When::Flame, 2)],
    },
    Row {
        keys: &[
            (Key::PageUp, Action::FlamePageUp),
            (Key::PageDown, Action::FlamePageDown),
        ],
        only: When::Flame,
        help: Some(("PgUp, PgDn", "a page up, down the widest path")),
        hints: &[],
    },
    Row {
        keys: &[
            (Key::Home, Action::FlameTop),
            (Key::End, Action::FlameBottom),
        ],
        only: When::Flame,
        help: Some(("Home, End", "the top frame, the bottom of the widest path")),
        hints: &[],
    },
    Row {
        keys: &[(Key::Char('g'), Action::FlameHottest)],
        only: When::Flame,
        help: Some(("g", "the hottest leaf under the selection")),
        hints: &[],
    },
    Row {
        keys: &[(Key::Char('W'), Action::FlameWaker)],
        only: When::Flame,
        help: Some(("W", "waits: from the selected waker to its own waits")),
        hints: &[],
    },
    Row {
        keys: &[
            (Key::Char('n'), Action::NextMatch),
            (Key::Char('N'), Action::PrevMatch),
        ],
        only: When::Flame,
        help: Some(("n, N", "the next, previous search match")),
        hints: &[hint("n/N", When::Flame, 5)],
    },
];

/// The keys of the profile shown in the flame pane, on the live and compare screens:
/// they work whatever pane has the focus (the search moves it to the flame pane).
pub(super) const PROFILE_ROWS: &[Row] = &[
    Row {
        keys: &[(Key::Char('o'), Action::Kind)],
        only: When::Always,
        help: Some(("o", "on-CPU, off-CPU, waits, then each memory profile")),
        hints: &[hint("o on/off", When::FlamePane, 6)],
    },
    Row {
        keys: &[(Key::Char('/'), Action::Search)],
        only: When::Always,
        help: Some((
            "/",
            "search frames or filter top functions (Tab: any substring)",
        )),
        hints: &[
            hint("/ search", When::Flame, 4),
            hint("/ filter", When::View(ViewKind::Top), 5),
        ],
    },
    Row {
        keys: &[
            (Key::Char('z'), Action::FlameFold),
            (Key::Char('w'), Action::FlameNames),
            (Key::Char('x'), Action::FlameHide),
        ],
        only: When::Always,
        help: Some((
            "z, w, x",
            "fold chains, whole names, hide plumbing (each on/off)",
        )),
        hints: &[],
    },
];

/// The keys of the flame pane's other views (top functions, bottom-up, callers and
/// callees, source), on the live and compare screens. They come before the flamegraph's
/// rows, so that the arrows and Enter act on the view shown.
pub(super) const VIEW_ROWS: &[Row] = &[
    Row {
        keys: &[
            (
                Key::Char('f'),
                Action::Views(ViewsAction::Show(ViewKind::Flame)),
            ),
            (
                Key::Char('t'),
                Action::Views(ViewsAction::Show(ViewKind::Top)),
            ),
            (
                Key::Char('i'),
                Action::Views(ViewsAction::Show(ViewKind::Inverted)),
            ),
            (
                Key::Char('c'),
                Action::Views(ViewsAction::Show(ViewKind::Butterfly)),
            ),
            (
                Key::Char('a'),
                Action::Views(ViewsAction::Show(ViewKind::Source)),
            ),
        ],
        only: When::Always,
        help: Some((
            "f, t, i, c, a",
            "flamegraph, top functions, bottom-up, callers, source",
        )),
        hints: &[hint("t/i/c/a views", When::FlamePane, 7)],
    },
    Row {
        keys: &[
            (Key::Up, Action::Views(ViewsAction::Up)),
            (Key::Char('k'), Action::Views(ViewsAction::Up)),
            (Key::Down, Action::Views(ViewsAction::Down)),
            (Key::Char('j'), Action::Views(ViewsAction::Down)),
            (Key::Right, Action::Views(ViewsAction::Expand)),
            (Key::Char('l'), Action::Views(ViewsAction::Expand)),
            (Key::Left, Action::Views(ViewsAction::Collapse)),
            (Key::Char('h'), Action::Views(ViewsAction::Collapse)),
        ],
        only: When::Views,
        help: Some((
            "arrows, hjkl",
            "move the selection (source: scroll); bottom-up: →← callers",
        )),
        hints: &[
            hint("↑↓ select", When::View(ViewKind::Top), 1),
            hint("↑↓ select", When::View(ViewKind::Inverted), 1),
            hint("↑↓ select", When::View(ViewKind::Butterfly), 1),
            hint("↑↓ scroll", When::View(ViewKind::Source), 1),
            hint("→← open/close", When::View(ViewKind::Inverted), 2),
        ],
    },
    Row {
        keys: &[(Key::Enter, Action::Views(ViewsAction::Enter))],
        only: When::Views,
        help: Some((
            "Enter",
            "zoom in or unfold a frame; on a row: select it everywhere",
        )),
        hints: &[
            hint("Enter select", When::View(ViewKind::Top), 3),
            hint("Enter select", When::View(ViewKind::Inverted), 3),
            hint("Enter select", When::View(ViewKind::Butterfly), 3),
        ],
    },
    Row {
        keys: &[
            (Key::Char('>'), Action::Views(ViewsAction::SortNext)),
            (Key::Char('<'), Action::Views(ViewsAction::SortPrev)),
        ],
        only: When::View(ViewKind::Top),
        help: Some(("< , >", "top functions: sort by the previous, next column")),
        hints: &[hint("<> sort", When::View(ViewKind::Top), 4)],
    },
];

/// The flamegraph's search line.
pub const SEARCH: Table = Table {
    name: "search",
    rows: &[section(
        "",
        &[
            Row {
                keys: &[(Key::Enter, Action::SearchKeep)],
                only: When::Always,
                help: None,
                hints: &[hint("Enter keep", When::Always, 0)],
            },
            Row {
                keys: &[(Key::Esc, Action::SearchClear)],
                only: When::Always,
                help: None,
                hints: &[hint("Esc clear", When::Always, 1)],
            },
            Row {
                keys: &[(Key::Tab, Action::SearchSubstring)],
                only: When::Always,
                help: None,
                hints: &[
                    hint("Tab any substring", When::Substring(false), 2),
                    hint("Tab whole segments", When::Substring(true), 2),
                ],
            },
            Row {
                keys: &[(Key::Backspace, Action::SearchErase)],
                only: When::Always,
                help: None,
                hints: &[],
            },
            Row {
                keys: &[(Key::CtrlC, Action::Quit)],
                only: When::Always,
                help: None,
                hints: &[],
            },
        ],
    )],
    otherwise: Some(Otherwise {
        action: Action::SearchType,
        hint: None,
    }),
};

/// The help overlay: any key closes it.
pub const HELP: Table = Table {
    name: "help",
    rows: &[section(
        "",
        &[
            Row {
                keys: &[(Key::Char('q'), Action::Quit), (Key::CtrlC, Action::Quit)],
                only: When::Always,
                help: None,
                hints: &[hint("q quit", When::Always, 3)],
            },
            Row {
                keys: &[
                    (Key::Down, Action::HelpDown),
                    (Key::Char('j'), Action::HelpDown),
                    (Key::PageDown, Action::HelpDown),
                    (Key::Up, Action::HelpUp),
                    (Key::Char('k'), Action::HelpUp),
                    (Key::PageUp, Action::HelpUp),
                ],
                only: When::Always,
                help: None,
                hints: &[hint("↑↓ scroll", When::Always, 1)],
            },
        ],
    )],
    otherwise: Some(Otherwise {
        action: Action::CloseHelp,
        hint: Some(hint("other keys close", When::Always, 2)),
    }),
};
