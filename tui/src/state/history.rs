//! The history screen (`benchtop open DIR` on a directory of recordings): a figure over
//! the points of its history with its change points marked, ↑/↓ to choose the figure,
//! ←/→ the change point, and Enter to open the segments on either side of it side by
//! side, as `open A B` shows two sessions (answered with [`super::AppEvent::Opened`]).

use std::path::PathBuf;

use benchtop_sessions::history::{ChangePoint, FigureHistory, Histories, History, MOVED_POINTS};

use super::keys::{Action, HELP_ROW, Row, Table, When, hint, section};
use super::{Effect, Key};

/// The recordings of one segment of a history, for the compare screen.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Its recordings, oldest first.
    pub dirs: Vec<PathBuf>,
    /// How the compare screen names it: `points 60–79 (c060 … c079)`.
    pub name: String,
}

/// The two segments of a change point, as [`Effect::OpenSegments`] asks for them.
#[derive(Debug, Clone, PartialEq)]
pub struct Segments {
    /// What the history follows: only runs of it are read (a series may hold others).
    pub key: benchtop_sessions::history::HistoryKey,
    /// The points nearest before the change point.
    pub before: Segment,
    /// The points nearest after it.
    pub after: Segment,
    /// The smallest change called regressed or improved (a fraction).
    pub threshold: f64,
}

/// The keys of the history screen that are its own (the rest of its rows: [`HISTORY`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryAction {
    /// The figure above.
    Up,
    /// The figure below.
    Down,
    /// The change point before the selected one.
    PrevChange,
    /// The change point after it.
    NextChange,
    /// Open the segments on either side of the selected change point.
    Open,
}

/// The history screen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryState {
    /// The directories read.
    pub roots: Vec<PathBuf>,
    /// What was read.
    pub found: Histories,
    /// Every figure of every history, in order: (history, figure) indices into `found`.
    pub figures: Vec<(usize, usize)>,
    /// The figure shown, an index into `figures`.
    pub selected: usize,
    /// The change point selected in it, an index into its changes.
    pub change: usize,
    /// The smallest change called regressed or improved (a fraction), for the segments
    /// opened.
    pub threshold: f64,
}

impl HistoryState {
    /// The screen of the histories `found` under `roots`, the first figure with a change
    /// point selected (else the first figure).
    pub fn new(roots: Vec<PathBuf>, found: Histories) -> Self {
        let figures: Vec<(usize, usize)> = found
            .histories
            .iter()
            .enumerate()
            .flat_map(|(h, history)| (0..history.figures.len()).map(move |f| (h, f)))
            .collect();
        let selected = figures
            .iter()
            .position(|&(h, f)| !found.histories[h].figures[f].changes.is_empty())
            .unwrap_or(0);
        HistoryState {
            roots,
            found,
            figures,
            selected,
            change: 0,
            threshold: benchtop_sessions::compare::CompareOptions::default().threshold,
        }
    }

    /// Whether it holds a history (a screen to come back to).
    pub fn is_shown(&self) -> bool {
        !self.found.histories.is_empty()
    }

    /// The history and figure shown.
    pub fn shown(&self) -> Option<(&History, &FigureHistory)> {
        let &(h, f) = self.figures.get(self.selected)?;
        let history = self.found.histories.get(h)?;
        Some((history, history.figures.get(f)?))
    }

    /// The selected change point of the figure shown.
    pub fn selected_change(&self) -> Option<&ChangePoint> {
        self.shown()?.1.changes.get(self.change)
    }

    /// Carries out what a key does, as the screen's table says.
    pub fn act(&mut self, action: HistoryAction) -> Option<Effect> {
        let last = self.figures.len().saturating_sub(1);
        let changes = self.shown().map_or(0, |(_, f)| f.changes.len());
        match action {
            HistoryAction::Up | HistoryAction::Down => {
                self.selected = if action == HistoryAction::Up {
                    self.selected.saturating_sub(1)
                } else {
                    (self.selected + 1).min(last)
                };
                self.change = 0;
            }
            HistoryAction::PrevChange => self.change = self.change.saturating_sub(1),
            HistoryAction::NextChange => {
                self.change = (self.change + 1).min(changes.saturating_sub(1));
            }
            HistoryAction::Open => return self.segments().map(Effect::OpenSegments),
        }
        None
    }

    /// The segments either side of the selected change point: the [`MOVED_POINTS`]
    /// points nearest it on each side, within the neighbouring change points (as `history`
    /// reads their profiles for what moved).
    pub fn segments(&self) -> Option<Segments> {
        let (history, figure) = self.shown()?;
        let change = figure.changes.get(self.change)?;
        let k = self.change;
        let start = k.checked_sub(1).map_or(0, |j| figure.changes[j].at);
        let end = figure
            .changes
            .get(k + 1)
            .map_or(figure.points.len(), |c| c.at);
        let before_from = start.max(change.at.saturating_sub(MOVED_POINTS));
        let after_to = end.min(change.at + MOVED_POINTS);
        let segment = |range: std::ops::Range<usize>| {
            let points: Vec<usize> = figure.points[range].iter().map(|p| p.point).collect();
            let dirs = points
                .iter()
                .flat_map(|&i| history.points[i].dirs.iter().cloned())
                .collect();
            let name = match (points.first(), points.last()) {
                (Some(&a), Some(&b)) if a == b => history.points[a].name.clone(),
                (Some(&a), Some(&b)) => {
                    let tags = tag(&history.points[a].name).zip(tag(&history.points[b].name));
                    match tags {
                        Some((ta, tb)) => format!("points {a}–{b} ({ta}…{tb})"),
                        None => format!("points {a}–{b}"),
                    }
                }
                _ => "no points".to_owned(),
            };
            Segment { dirs, name }
        };
        Some(Segments {
            key: history.key.clone(),
            before: segment(before_from..change.at),
            after: segment(change.at..after_to),
            threshold: self.threshold,
        })
    }
}

/// The commit or label a point's name carries: `c080` of `point 80 (c080)`.
fn tag(name: &str) -> Option<&str> {
    name.split_once(" (")
        .map(|(_, tag)| tag.strip_suffix(')').unwrap_or(tag))
}

/// The history screen.
pub const HISTORY: Table = Table {
    name: "history",
    rows: &[section("History", HISTORY_ROWS)],
    otherwise: None,
};

const HISTORY_ROWS: &[Row] = &[
    Row {
        keys: &[(Key::Char('q'), Action::Quit), (Key::CtrlC, Action::Quit)],
        only: When::Always,
        help: Some(("q, Ctrl-C", "quit")),
        hints: &[hint("q quit", When::Always, 31)],
    },
    HELP_ROW,
    Row {
        keys: &[
            (Key::Up, Action::History(HistoryAction::Up)),
            (Key::Char('k'), Action::History(HistoryAction::Up)),
            (Key::Down, Action::History(HistoryAction::Down)),
            (Key::Char('j'), Action::History(HistoryAction::Down)),
        ],
        only: When::Always,
        help: Some(("↑ ↓, k j", "the figure drawn")),
        hints: &[hint("↑↓ figure", When::Always, 10)],
    },
    Row {
        keys: &[
            (Key::Left, Action::History(HistoryAction::PrevChange)),
            (Key::Char('h'), Action::History(HistoryAction::PrevChange)),
            (Key::Right, Action::History(HistoryAction::NextChange)),
            (Key::Char('l'), Action::History(HistoryAction::NextChange)),
        ],
        only: When::Always,
        help: Some(("← →, h l", "the change point selected")),
        hints: &[hint("←→ change point", When::HasChangePoint, 11)],
    },
    Row {
        keys: &[(Key::Enter, Action::History(HistoryAction::Open))],
        only: When::Always,
        help: Some((
            "Enter",
            "the points before it against those after, side by side",
        )),
        hints: &[hint("Enter open", When::HasChangePoint, 12)],
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use benchtop_sessions::history::{self, HistoryOptions};
    use benchtop_sessions::synthetic::SyntheticHistory;

    fn stepped(points: usize, steps: Vec<(usize, f64)>) -> (tempfile::TempDir, HistoryState) {
        let root = tempfile::tempdir().unwrap();
        let mut spec = SyntheticHistory::new(points, 0.005, 3);
        spec.steps = steps;
        spec.write(root.path()).unwrap();
        let mut opts = HistoryOptions::default();
        opts.profiles = false;
        let found = history::load(&[root.path().to_path_buf()], &opts).unwrap();
        let state = HistoryState::new(vec![root.path().to_path_buf()], found);
        (root, state)
    }

    #[test]
    fn the_first_figure_with_a_change_point_is_shown_and_the_keys_move_within_bounds() {
        let (_root, mut s) = stepped(40, vec![(12, 0.3), (28, -0.3)]);
        let (_, figure) = s.shown().unwrap();
        assert!(!figure.changes.is_empty());
        let first = s.selected;
        s.act(HistoryAction::NextChange);
        s.act(HistoryAction::NextChange);
        s.act(HistoryAction::NextChange);
        let changes = s.shown().unwrap().1.changes.len();
        assert_eq!(s.change, changes - 1, "stops at the last");
        s.act(HistoryAction::Down);
        assert_eq!(s.change, 0, "a new figure starts at its first change point");
        for _ in 0..s.figures.len() + 2 {
            s.act(HistoryAction::Up);
        }
        assert_eq!(s.selected, 0);
        for _ in 0..s.figures.len() + 2 {
            s.act(HistoryAction::Down);
        }
        assert_eq!(s.selected, s.figures.len() - 1);
        assert!(first < s.figures.len());
    }

    #[test]
    fn enter_opens_the_nearest_points_within_the_neighbouring_change_points() {
        let (_root, mut s) = stepped(40, vec![(12, 0.3), (28, -0.3)]);
        let laps = s
            .figures
            .iter()
            .position(|&(h, f)| s.found.histories[h].figures[f].name == "laps/s")
            .unwrap();
        s.selected = laps;
        let changes: Vec<usize> = s.shown().unwrap().1.changes.iter().map(|c| c.at).collect();
        assert_eq!(changes.len(), 2, "{changes:?}");
        s.change = 1;
        let Some(Effect::OpenSegments(segments)) = s.act(HistoryAction::Open) else {
            panic!("no segments");
        };
        // Between the first change point and the end, not past them.
        assert_eq!(segments.before.dirs.len(), changes[1] - changes[0]);
        assert_eq!(segments.after.dirs.len(), 40 - changes[1]);
        assert!(segments.before.dirs[0].ends_with(format!("point-{:03}", changes[0])));
        let first = format!("points {}–39 (c{:03}…c039)", changes[1], changes[1]);
        assert_eq!(segments.after.name, first);
    }

    #[test]
    fn a_figure_without_change_points_opens_nothing() {
        let (_root, mut s) = stepped(12, Vec::new());
        assert!(s.shown().unwrap().1.changes.is_empty());
        assert_eq!(s.act(HistoryAction::Open), None);
        s.act(HistoryAction::NextChange);
        assert_eq!(s.change, 0);
    }
}
