//! The orphans screen: the processes earlier runs left behind, as the reaper finds them,
//! and a confirmation before any of them is signalled.

use benchtop_profilers::reaper::{Orphan, ReapSignal};

use super::keys::{Action, Otherwise, Row, Table, When, hint, section};
use super::{Effect, Key};

/// A confirmation that is open: which orphans, and the signal chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirm {
    /// Every orphan (`K`) or the selected one (`k`).
    pub all: bool,
    /// The first signal: TERM (then KILL after the grace period) or KILL at once.
    pub signal: ReapSignal,
}

/// The orphans screen's state.
#[derive(Debug, Clone, Default)]
pub struct OrphansState {
    /// What the last scan found; `None` until one has come back.
    pub list: Option<Vec<Orphan>>,
    /// The selected row.
    pub selected: usize,
    /// The confirmation, while it is open.
    pub confirm: Option<Confirm>,
    /// The orphans being ended, while the reaper works.
    pub ending: usize,
    /// Why the last scan failed.
    pub error: Option<String>,
    /// Other users' processes the last confirmation left alone (`benchtop reap
    /// --all-users`, as root, ends them).
    pub left_alone: usize,
}

impl OrphansState {
    /// How many orphans the last scan found.
    pub fn count(&self) -> usize {
        self.list.as_ref().map_or(0, Vec::len)
    }

    /// Their resident memory, bytes.
    pub fn rss(&self) -> u64 {
        self.list.as_ref().map_or(0, |l| {
            l.iter()
                .fold(0u64, |sum, o| sum.saturating_add(o.rss_bytes))
        })
    }

    /// A new scan's result.
    pub fn set(&mut self, result: Result<Vec<Orphan>, String>) {
        match result {
            Ok(list) => {
                self.selected = self.selected.min(list.len().saturating_sub(1));
                self.list = Some(list);
                self.error = None;
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// Moves the selection by `by`.
    pub fn step(&mut self, by: isize) {
        let len = self.count();
        if len > 0 {
            self.selected = (self.selected as isize + by).clamp(0, len as isize - 1) as usize;
        }
    }

    /// Opens the confirmation for the selected orphan or all of them; TERM is chosen.
    pub fn ask(&mut self, all: bool) {
        if self.count() > 0 && self.ending == 0 {
            self.confirm = Some(Confirm {
                all,
                signal: ReapSignal::Term,
            });
        }
    }

    /// Switches the confirmation's signal between TERM and KILL.
    pub fn toggle_signal(&mut self) {
        if let Some(c) = &mut self.confirm {
            c.signal = match c.signal {
                ReapSignal::Term => ReapSignal::Kill,
                _ => ReapSignal::Term,
            };
        }
    }

    /// Closes the confirmation; returns the orphans to end and the signal when it was
    /// confirmed.
    pub fn answer(&mut self, yes: bool) -> Option<(Vec<Orphan>, ReapSignal)> {
        let confirm = self.confirm.take()?;
        if !yes {
            return None;
        }
        let list = self.list.as_ref()?;
        let chosen: Vec<Orphan> = if confirm.all {
            list.clone()
        } else {
            list.get(self.selected).cloned().into_iter().collect()
        };
        // Another user's processes are never ended from here.
        let (targets, others): (Vec<Orphan>, Vec<Orphan>) = chosen
            .into_iter()
            .partition(|o| !o.belongs_to_another_user());
        self.left_alone = others.len();
        if targets.is_empty() {
            return None;
        }
        self.ending = targets.len();
        Some((targets, confirm.signal))
    }
}

/// What a key does on the orphans screen beyond leaving it (its rows: [`ORPHANS`],
/// [`CONFIRM`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrphansAction {
    /// Select the previous process.
    Up,
    /// Select the next process.
    Down,
    /// End the selected process (asks first).
    EndOne,
    /// End every process listed (asks first).
    EndAll,
    /// Look again.
    Rescan,
    /// Confirmation: the other signal.
    ToggleSignal,
    /// Confirmation: yes.
    Confirm,
    /// Confirmation: no.
    Refuse,
}

impl OrphansState {
    /// Carries out what a key does, as the screen's tables say.
    pub fn act(&mut self, action: OrphansAction) -> Vec<Effect> {
        match action {
            OrphansAction::Up => self.step(-1),
            OrphansAction::Down => self.step(1),
            OrphansAction::EndOne => self.ask(false),
            OrphansAction::EndAll => self.ask(true),
            OrphansAction::Rescan => return vec![Effect::ScanOrphans],
            OrphansAction::ToggleSignal => self.toggle_signal(),
            OrphansAction::Confirm => {
                if let Some((targets, signal)) = self.answer(true) {
                    return vec![Effect::Reap(targets, signal)];
                }
            }
            OrphansAction::Refuse => _ = self.answer(false),
        }
        Vec::new()
    }
}

/// The orphans screen.
pub const ORPHANS: Table = Table {
    name: "orphans",
    rows: &[section(
        "Orphans",
        &[
            Row {
                keys: &[
                    (Key::Up, Action::Orphans(OrphansAction::Up)),
                    (Key::Down, Action::Orphans(OrphansAction::Down)),
                    (Key::Char('j'), Action::Orphans(OrphansAction::Down)),
                ],
                only: When::Always,
                help: Some(("↑ ↓, j", "select a process")),
                hints: &[hint("↑↓ select", When::Always, 0)],
            },
            Row {
                keys: &[(Key::Char('k'), Action::Orphans(OrphansAction::EndOne))],
                only: When::Always,
                help: Some(("k", "end the selected process (asks first; TERM or KILL)")),
                hints: &[hint("k end one", When::Always, 1)],
            },
            Row {
                keys: &[(Key::Char('K'), Action::Orphans(OrphansAction::EndAll))],
                only: When::Always,
                help: Some(("K", "end every process listed (asks first)")),
                hints: &[hint("K end all", When::Always, 2)],
            },
            Row {
                keys: &[(Key::Char('r'), Action::Orphans(OrphansAction::Rescan))],
                only: When::Always,
                help: Some(("r", "look again")),
                hints: &[hint("r rescan", When::Always, 3)],
            },
            Row {
                keys: &[(Key::Esc, Action::ToLauncher)],
                only: When::Always,
                help: Some(("Esc", "back to the launcher")),
                hints: &[hint("Esc back", When::Always, 4)],
            },
            Row {
                keys: &[(Key::Char('?'), Action::Help), (Key::F1, Action::Help)],
                only: When::Always,
                help: None,
                hints: &[hint("? help", When::Always, 5)],
            },
            Row {
                keys: &[(Key::Char('q'), Action::Quit), (Key::CtrlC, Action::Quit)],
                only: When::Always,
                help: Some(("q, Ctrl-C", "quit")),
                hints: &[hint("q quit", When::Always, 6)],
            },
        ],
    )],
    otherwise: None,
};

/// The confirmation before orphans are ended.
pub const CONFIRM: Table = Table {
    name: "confirm",
    rows: &[section(
        "",
        &[
            Row {
                keys: &[
                    (Key::Left, Action::Orphans(OrphansAction::ToggleSignal)),
                    (Key::Right, Action::Orphans(OrphansAction::ToggleSignal)),
                    (Key::Tab, Action::Orphans(OrphansAction::ToggleSignal)),
                    (Key::Char('h'), Action::Orphans(OrphansAction::ToggleSignal)),
                    (Key::Char('l'), Action::Orphans(OrphansAction::ToggleSignal)),
                ],
                only: When::Always,
                help: None,
                hints: &[hint("←→ signal", When::Always, 0)],
            },
            Row {
                keys: &[
                    (Key::Enter, Action::Orphans(OrphansAction::Confirm)),
                    (Key::Char('y'), Action::Orphans(OrphansAction::Confirm)),
                ],
                only: When::Always,
                help: None,
                hints: &[hint("Enter yes", When::Always, 1)],
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
        action: Action::Orphans(OrphansAction::Refuse),
        hint: Some(hint("any other key no", When::Always, 2)),
    }),
};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use benchtop_profilers::reaper::{Owner, OwnerState};

    use super::*;

    fn orphan(pid: u32) -> Orphan {
        Orphan {
            pid,
            start_ticks: 100,
            command: "bt-ring-node".into(),
            owner: Owner {
                pid: 1,
                start_ticks: 7,
            },
            owner_state: OwnerState::Gone,
            session: Some("s".into()),
            age: Duration::from_secs(60),
            rss_bytes: 1 << 20,
            uid: benchtop_profilers::reaper::current_uid(),
            user: "tester".into(),
        }
    }

    #[test]
    fn k_ends_the_selected_one_and_capital_k_all_after_a_yes_with_term_by_default() {
        let mut o = OrphansState::default();
        o.set(Ok(vec![orphan(10), orphan(11), orphan(12)]));
        o.step(1);
        o.ask(false);
        assert_eq!(o.confirm.as_ref().map(|c| c.signal), Some(ReapSignal::Term));
        let (targets, signal) = o.answer(true).unwrap();
        assert_eq!(
            (targets[0].pid, targets.len(), signal),
            (11, 1, ReapSignal::Term)
        );
        o.ending = 0;
        o.ask(true);
        o.toggle_signal();
        let (targets, signal) = o.answer(true).unwrap();
        assert_eq!((targets.len(), signal), (3, ReapSignal::Kill));
    }

    #[test]
    fn another_users_orphans_are_left_alone_and_counted() {
        let mut o = OrphansState::default();
        let mut theirs = orphan(11);
        theirs.uid = benchtop_profilers::reaper::current_uid().wrapping_add(1);
        o.set(Ok(vec![orphan(10), theirs]));
        o.ask(true);
        let (targets, _) = o.answer(true).unwrap();
        assert_eq!(targets.iter().map(|t| t.pid).collect::<Vec<_>>(), [10]);
        assert_eq!(o.left_alone, 1);
        o.ending = 0;
        o.step(1);
        o.ask(false);
        assert!(o.answer(true).is_none());
        assert_eq!((o.left_alone, o.ending), (1, 0));
    }

    #[test]
    fn a_no_signals_nothing_and_nothing_is_asked_with_no_orphans() {
        let mut o = OrphansState::default();
        o.ask(true);
        assert!(o.confirm.is_none());
        o.set(Ok(vec![orphan(10)]));
        o.ask(false);
        assert!(o.answer(false).is_none() && o.confirm.is_none());
        assert_eq!(o.rss(), 1 << 20);
    }
}
