//! The screen of `benchtop ab --tui`: the experiment's plan, its runs as they end, and
//! at each look the chosen figures with their intervals, kept look by look so that the
//! screen shows them narrowing as the runs come in. The experiment runs on a thread of its
//! own (`crate::ab`) and tells what happens in [`AbEvent`]s.

use std::path::PathBuf;

use benchtop_sessions::Status;
use benchtop_sessions::compare::Verdict;

use super::Key;
use super::keys::{Action, HELP_ROW, Row, Table, When, hint, section};

/// Where a chosen figure stands at a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Changed beyond the threshold: improved, regressed or changed.
    Changed(Verdict),
    /// Same: the interval lies within ± the threshold.
    Equivalent,
    /// Not decided yet.
    Open,
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decision::Changed(v) => write!(f, "{v}"),
            Decision::Equivalent => f.write_str("same"),
            Decision::Open => f.write_str("undecided"),
        }
    }
}

/// The side of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The baseline.
    A,
    /// The side judged against it.
    B,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::A => "A",
            Side::B => "B",
        })
    }
}

/// What the experiment is: its sides, how many runs, how it judges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AbPlan {
    /// The experiment's directory.
    pub dir: PathBuf,
    /// What A runs: its run arguments (`ring --num-nodes 100`, `-- ./bench`).
    pub a: String,
    /// What B runs: its run arguments.
    pub b: String,
    /// Runs of each side: planned, or the most with `until_decided`.
    pub pairs: usize,
    /// Stops once every chosen figure is decided.
    pub until_decided: bool,
    /// The error rate of the first look (later looks spend less).
    pub alpha: f64,
    /// A change smaller than this (a fraction) is never a verdict of change; an interval
    /// inside ± it is *same*.
    pub threshold: f64,
}

/// A run that ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLine {
    /// Its number in the experiment, from 1.
    pub n: usize,
    /// Its side.
    pub side: Side,
    /// Its directory's name in its side's series.
    pub name: String,
    /// How it ended.
    pub status: Status,
    /// Its wall time, seconds.
    pub seconds: f64,
    /// Its warnings.
    pub warnings: Vec<String>,
}

/// One chosen figure at one look.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureLook {
    /// The figure (`messages/s`, `lap p99`).
    pub name: String,
    /// B against A, as a fraction.
    pub change: f64,
    /// The interval of the change, as fractions, once there is one.
    pub ci: Option<(f64, f64)>,
    /// Where it stands.
    pub decision: Decision,
}

/// The runs so far judged, after a pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Look {
    /// The pair it follows, from 1.
    pub pair: usize,
    /// Complete runs of A judged.
    pub runs_a: usize,
    /// Complete runs of B judged.
    pub runs_b: usize,
    /// The chosen figures.
    pub figures: Vec<FigureLook>,
}

/// How the experiment ended.
#[derive(Debug, Clone, PartialEq)]
pub struct AbOutcome {
    /// The comparison's table, as `compare` prints it.
    pub text: String,
    /// Each chosen figure's final decision.
    pub decided: Vec<(String, Decision)>,
    /// Complete runs of A.
    pub runs_a: usize,
    /// Complete runs of B.
    pub runs_b: usize,
    /// The user stopped it.
    pub stopped: bool,
    /// The figures that regressed beyond the threshold.
    pub regressed: Vec<String>,
    /// A run failed.
    pub failed: bool,
}

/// What the experiment tells as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum AbEvent {
    /// Run `n` of at most `total` starts.
    RunStarted {
        /// Its number, from 1.
        n: usize,
        /// The most runs there can be.
        total: usize,
        /// Its side.
        side: Side,
    },
    /// A run ended.
    RunEnded(RunLine),
    /// The runs so far were judged.
    Look(Look),
    /// The experiment is over: how, or why it failed.
    Finished(Result<AbOutcome, String>),
}

/// The `ab --tui` screen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AbState {
    /// What the experiment is.
    pub plan: AbPlan,
    /// The run going on: its number, the most there can be, its side.
    pub current: Option<(usize, usize, Side)>,
    /// The runs that ended, in order.
    pub runs: Vec<RunLine>,
    /// Every look, in order.
    pub looks: Vec<Look>,
    /// The figure whose intervals are drawn, as an index into the looks' figures.
    pub selected: usize,
    /// Stopping was asked for: the run going on is stopped and the runs so far judged.
    pub stopping: bool,
    /// How it ended, once it has.
    pub finished: Option<Result<AbOutcome, String>>,
}

/// The keys of the `ab` screen that are its own (the rest of its rows: [`AB`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbAction {
    /// The figure above.
    Up,
    /// The figure below.
    Down,
}

impl AbState {
    /// The screen of the experiment `plan`, before its first run.
    pub fn new(plan: AbPlan) -> Self {
        AbState {
            plan,
            ..AbState::default()
        }
    }

    /// Applies what the experiment told.
    pub fn on_event(&mut self, event: AbEvent) {
        match event {
            AbEvent::RunStarted { n, total, side } => self.current = Some((n, total, side)),
            AbEvent::RunEnded(line) => {
                if self.current.is_some_and(|(n, ..)| n == line.n) {
                    self.current = None;
                }
                self.runs.push(line);
            }
            AbEvent::Look(look) => {
                self.looks.push(look);
                self.selected = self.selected.min(self.figures().saturating_sub(1));
            }
            AbEvent::Finished(result) => {
                self.current = None;
                self.finished = Some(result);
            }
        }
    }

    /// Carries out what a key does, as the screen's table says.
    pub fn act(&mut self, action: AbAction) {
        let last = self.figures().saturating_sub(1);
        self.selected = match action {
            AbAction::Up => self.selected.saturating_sub(1),
            AbAction::Down => (self.selected + 1).min(last),
        };
    }

    /// Whether the experiment is over (or failed).
    pub fn is_over(&self) -> bool {
        self.finished.is_some()
    }

    /// The chosen figures of the latest look.
    pub fn latest(&self) -> &[FigureLook] {
        self.looks.last().map_or(&[], |l| l.figures.as_slice())
    }

    fn figures(&self) -> usize {
        self.latest().len()
    }

    /// The name of the figure whose intervals are drawn.
    pub fn selected_name(&self) -> Option<&str> {
        self.latest().get(self.selected).map(|f| f.name.as_str())
    }

    /// The selected figure at every look that judged it: the look's pair and the figure.
    pub fn history(&self) -> Vec<(usize, &FigureLook)> {
        let Some(name) = self.selected_name() else {
            return Vec::new();
        };
        self.looks
            .iter()
            .filter_map(|l| {
                l.figures
                    .iter()
                    .find(|f| f.name == name)
                    .map(|f| (l.pair, f))
            })
            .collect()
    }

    /// Runs that ended, of each side.
    pub fn ran(&self) -> (usize, usize) {
        let a = self.runs.iter().filter(|r| r.side == Side::A).count();
        (a, self.runs.len() - a)
    }
}

/// The `ab` screen.
pub const AB: Table = Table {
    name: "ab",
    rows: &[section("Experiment", AB_ROWS)],
    otherwise: None,
};

const AB_ROWS: &[Row] = &[
    Row {
        keys: &[(Key::Char('q'), Action::Quit), (Key::CtrlC, Action::Quit)],
        only: When::Always,
        help: Some((
            "q, Ctrl-C",
            "stop the run and judge the runs so far; again: leave",
        )),
        hints: &[
            hint("q stop", When::ExperimentGoesOn, 30),
            hint("q quit", When::ExperimentOver, 31),
        ],
    },
    HELP_ROW,
    Row {
        keys: &[
            (Key::Up, Action::Ab(AbAction::Up)),
            (Key::Char('k'), Action::Ab(AbAction::Up)),
            (Key::Down, Action::Ab(AbAction::Down)),
            (Key::Char('j'), Action::Ab(AbAction::Down)),
        ],
        only: When::Always,
        help: Some(("↑ ↓, k j", "the figure whose intervals are drawn")),
        hints: &[hint("↑↓ figure", When::Always, 10)],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(name: &str, lo: f64, hi: f64, decision: Decision) -> FigureLook {
        FigureLook {
            name: name.into(),
            change: (lo + hi) / 2.0,
            ci: Some((lo, hi)),
            decision,
        }
    }

    fn look(pair: usize, figures: Vec<FigureLook>) -> AbEvent {
        AbEvent::Look(Look {
            pair,
            runs_a: pair,
            runs_b: pair,
            figures,
        })
    }

    #[test]
    fn a_run_is_current_from_its_start_to_its_end() {
        let mut s = AbState::new(AbPlan::default());
        s.on_event(AbEvent::RunStarted {
            n: 1,
            total: 4,
            side: Side::A,
        });
        assert_eq!(s.current, Some((1, 4, Side::A)));
        s.on_event(AbEvent::RunEnded(RunLine {
            n: 1,
            side: Side::A,
            name: "run-0001".into(),
            status: Status::Complete,
            seconds: 1.5,
            warnings: Vec::new(),
        }));
        assert_eq!(s.current, None);
        assert_eq!(s.ran(), (1, 0));
    }

    #[test]
    fn the_selected_figures_history_follows_it_by_name_across_looks() {
        let mut s = AbState::new(AbPlan::default());
        s.on_event(look(
            2,
            vec![figure("messages/s", -0.2, 0.3, Decision::Open)],
        ));
        s.on_event(look(
            3,
            vec![
                figure("lap p50", -0.5, 0.5, Decision::Open),
                figure("messages/s", -0.1, 0.1, Decision::Open),
            ],
        ));
        s.act(AbAction::Down);
        s.act(AbAction::Down);
        assert_eq!(s.selected_name(), Some("messages/s"), "stops at the last");
        let history = s.history();
        assert_eq!(history.len(), 2);
        assert_eq!(history[0].0, 2);
        assert_eq!(history[1].1.ci, Some((-0.1, 0.1)));
        s.act(AbAction::Up);
        assert_eq!(s.selected_name(), Some("lap p50"));
        assert_eq!(s.history().len(), 1, "judged only at the second look");
    }

    #[test]
    fn fewer_figures_at_a_later_look_keep_the_selection_in_range() {
        let mut s = AbState::new(AbPlan::default());
        s.on_event(look(
            2,
            vec![
                figure("a", -0.1, 0.1, Decision::Open),
                figure("b", -0.1, 0.1, Decision::Open),
            ],
        ));
        s.act(AbAction::Down);
        s.on_event(look(3, vec![figure("a", -0.1, 0.1, Decision::Open)]));
        assert_eq!(s.selected_name(), Some("a"));
    }
}
