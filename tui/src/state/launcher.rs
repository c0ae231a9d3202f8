//! The launcher: the built-in workloads with their parameters, editable in place and
//! checked as the command line would check them, and the recent sessions.
//!
//! Workloads and parameters come from the command line's own definition (clap), so the
//! launcher offers exactly what `benchtop run <workload> --help` does, with the same
//! defaults, and refuses what it refuses, with its message.

use benchtop_workloads::worker::Workload;

use super::Key;
use super::keys::{Action, Otherwise, Row, Table, When, hint, section};
use clap::{Command, FromArgMatches, Subcommand};

/// Values the launcher starts from where the command line's defaults make a run too short
/// to watch: the ring's 5000 × 2000 (the original benchmark's figures, which `benchtop run
/// ring` and the headless default keep) ends in about half a second, before the live
/// screen's first interval; 5000 × 80000 runs about 20 s on a 2-core machine (`q` stops
/// it sooner). Shown as edited values, so the launch line says what runs.
pub const LAUNCHER_PRESETS: &[(&str, &str, &str)] = &[("ring", "num-rounds", "80000")];

/// One parameter of a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// Its long name, without dashes (`num-nodes`).
    pub name: String,
    /// Its help line.
    pub help: String,
    /// Its whole description, on one line.
    pub description: String,
    /// The default, as the command line prints it; empty when it has none.
    pub default: String,
    /// The value to launch with; empty means the default.
    pub value: String,
    /// The values it accepts, when it is a choice.
    pub choices: Vec<String>,
}

/// One workload of the launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadEntry {
    /// Its name (`ring`).
    pub name: String,
    /// What it mirrors, in a line.
    pub about: String,
    /// Its parameters.
    pub params: Vec<Param>,
}

impl WorkloadEntry {
    /// The command-line arguments for its current values: the name, then each value that
    /// differs from the default.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![self.name.clone()];
        for p in self.params.iter().filter(|p| !p.value.is_empty()) {
            args.push(format!("--{}", p.name));
            args.push(p.value.clone());
        }
        args
    }
}

/// A recent session, as the launcher lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentSession {
    /// Its directory name.
    pub name: String,
    /// Its workload.
    pub workload: String,
    /// Its status.
    pub status: String,
    /// When it started (RFC 3339).
    pub started: String,
    /// Its directory.
    pub dir: std::path::PathBuf,
}

/// Where the launcher's keys go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LauncherFocus {
    /// The list of workloads.
    #[default]
    Workloads,
    /// The parameters of the selected workload.
    Params,
    /// The command line, being typed.
    Command,
    /// The running processes, being picked from.
    Processes,
    /// The recent sessions.
    Recent,
}

/// An entry of the launcher's list: a workload, or one of the two entries for programs
/// that are not built in, after the workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// The workload of this index.
    Workload(usize),
    /// A command line to type and run.
    Command,
    /// A running process to attach to.
    Process,
}

/// The entries after the workloads: (entry, name, what it does).
pub const PROGRAM_ENTRIES: [(Entry, &str, &str); 2] = [
    (
        Entry::Command,
        "command…",
        "Any program: type its command line; it runs profiled and recorded",
    ),
    (
        Entry::Process,
        "running process…",
        "Attach to a process that runs already, picked from a list",
    ),
];

/// The launcher's state.
#[derive(Debug, Clone, Default)]
pub struct LauncherState {
    /// The workloads, the default first.
    pub workloads: Vec<WorkloadEntry>,
    /// The selected workload.
    pub selected: usize,
    /// The selected parameter of the selected workload.
    pub param: usize,
    /// Where the keys go.
    pub focus: LauncherFocus,
    /// The value being typed, while a parameter is edited.
    pub editing: Option<String>,
    /// Why the last value or launch was refused.
    pub error: Option<String>,
    /// The most recent sessions under ./sessions.
    pub recent: Vec<RecentSession>,
    /// The command line of the command entry.
    pub command: super::picker::CommandEntry,
    /// The running processes of the process entry.
    pub picker: super::picker::ProcessPicker,
    /// The selected recent session.
    pub recent_selected: usize,
    /// The recent session marked to be opened beside the selected one (`open A B`).
    pub marked: Option<usize>,
}

impl LauncherState {
    /// The built-in workloads, from the command line's definition; node processes and
    /// other hidden entries are left out.
    pub fn from_cli() -> Self {
        let command = Workload::augment_subcommands(Command::new("worker"));
        let workloads = command
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| WorkloadEntry {
                name: c.get_name().to_owned(),
                about: c.get_about().map(|a| a.to_string()).unwrap_or_default(),
                params: c
                    .get_arguments()
                    .filter(|a| !a.is_hide_set() && a.get_long().is_some())
                    .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
                    .map(|a| Param {
                        name: a.get_long().unwrap_or_default().to_owned(),
                        help: a
                            .get_help()
                            .map(|h| h.to_string())
                            .unwrap_or_default()
                            .lines()
                            .next()
                            .unwrap_or_default()
                            .to_owned(),
                        description: a
                            .get_long_help()
                            .or(a.get_help())
                            .map(|h| h.to_string())
                            .unwrap_or_default()
                            .split_whitespace()
                            .collect::<Vec<_>>()
                            .join(" "),
                        default: a
                            .get_default_values()
                            .iter()
                            .map(|v| v.to_string_lossy().into_owned())
                            .collect::<Vec<_>>()
                            .join(","),
                        value: String::new(),
                        choices: a
                            .get_possible_values()
                            .iter()
                            .filter(|v| !v.is_hide_set())
                            .map(|v| v.get_name().to_owned())
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        let mut launcher = LauncherState {
            workloads,
            ..LauncherState::default()
        };
        for &(workload, param, value) in LAUNCHER_PRESETS {
            let preset = launcher
                .workloads
                .iter_mut()
                .filter(|w| w.name == workload)
                .flat_map(|w| w.params.iter_mut())
                .find(|p| p.name == param);
            if let Some(p) = preset {
                p.value = value.to_owned();
            }
        }
        launcher
    }

    /// The pane of the selected entry: a workload's parameters, the command line, or
    /// the processes.
    pub fn entry_pane(&self) -> LauncherFocus {
        match self.entry() {
            Entry::Workload(_) => LauncherFocus::Params,
            Entry::Command => LauncherFocus::Command,
            Entry::Process => LauncherFocus::Processes,
        }
    }

    /// The panes Tab goes through, in order: the list, the entry's pane, and the recent
    /// sessions when there are any.
    pub fn panes(&self) -> Vec<LauncherFocus> {
        let mut panes = vec![LauncherFocus::Workloads, self.entry_pane()];
        if !self.recent.is_empty() {
            panes.push(LauncherFocus::Recent);
        }
        panes
    }

    /// Sets the recent sessions, keeping the selection in range and dropping a mark
    /// that no longer points at a session.
    pub fn set_recent(&mut self, recent: Vec<RecentSession>) {
        self.recent = recent;
        self.recent_selected = self
            .recent_selected
            .min(self.recent.len().saturating_sub(1));
        self.marked = self.marked.filter(|&m| m < self.recent.len());
        if self.recent.is_empty() && self.focus == LauncherFocus::Recent {
            self.focus = LauncherFocus::Workloads;
        }
    }

    /// What Enter on the recent sessions opens: the selected one, or the marked one (A)
    /// against the selected one (B).
    pub fn to_open(&self) -> Vec<std::path::PathBuf> {
        let Some(selected) = self.recent.get(self.recent_selected) else {
            return Vec::new();
        };
        match self.marked.and_then(|m| self.recent.get(m)) {
            Some(a) if self.marked != Some(self.recent_selected) => {
                vec![a.dir.clone(), selected.dir.clone()]
            }
            _ => vec![selected.dir.clone()],
        }
    }

    /// The selected workload.
    pub fn workload(&self) -> Option<&WorkloadEntry> {
        self.workloads.get(self.selected)
    }

    /// The selected entry of the list.
    pub fn entry(&self) -> Entry {
        match self.selected.checked_sub(self.workloads.len()) {
            None => Entry::Workload(self.selected),
            Some(i) => PROGRAM_ENTRIES.get(i).map_or(Entry::Process, |e| e.0),
        }
    }

    /// Entries in the list: the workloads, then [`PROGRAM_ENTRIES`].
    pub fn entries(&self) -> usize {
        self.workloads.len() + PROGRAM_ENTRIES.len()
    }

    /// Moves the selection (workloads or parameters) by `by`, staying in range.
    pub fn step(&mut self, by: isize) {
        let entries = self.entries();
        let (index, len) = match self.focus {
            LauncherFocus::Workloads | LauncherFocus::Command | LauncherFocus::Processes => {
                (&mut self.selected, entries)
            }
            LauncherFocus::Params => {
                let len = self.workload().map_or(0, |w| w.params.len());
                (&mut self.param, len)
            }
            LauncherFocus::Recent => (&mut self.recent_selected, self.recent.len()),
        };
        if len > 0 {
            *index = (*index as isize + by).clamp(0, len as isize - 1) as usize;
        }
        if self.focus == LauncherFocus::Workloads {
            self.param = 0;
        }
    }

    /// Starts editing the selected parameter with its current value.
    pub fn edit(&mut self) {
        let value = self
            .workload()
            .and_then(|w| w.params.get(self.param))
            .map(|p| p.value.clone());
        if let Some(value) = value {
            self.editing = Some(value);
        }
    }

    /// Ends editing: keeps the value if the command line accepts the workload with it,
    /// else keeps the old one and says why.
    pub fn commit(&mut self) {
        let Some(value) = self.editing.take() else {
            return;
        };
        let Some(entry) = self.workloads.get(self.selected) else {
            return;
        };
        let mut candidate = entry.clone();
        if let Some(p) = candidate.params.get_mut(self.param) {
            p.value = value.trim().to_owned();
        }
        match parse(&candidate.args()) {
            Ok(_) => {
                self.workloads[self.selected] = candidate;
                self.error = None;
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// The selected workload with its values, checked as `benchtop run` checks it.
    pub fn launch(&mut self) -> Option<Workload> {
        let args = self.workload()?.args();
        match parse(&args) {
            Ok(workload) => {
                self.error = None;
                Some(workload)
            }
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

/// Parses `args` (a workload name and its parameters) as `benchtop run` would, and checks
/// the combinations clap cannot see; the error is the command line's message, first line.
pub fn parse(args: &[String]) -> Result<Workload, String> {
    let command = Workload::augment_subcommands(
        Command::new("benchtop run")
            .subcommand_required(true)
            .no_binary_name(true),
    );
    let matches = command
        .try_get_matches_from(args)
        .map_err(|e| first_line(&e.to_string()))?;
    let workload = Workload::from_arg_matches(&matches).map_err(|e| first_line(&e.to_string()))?;
    workload.validate().map_err(|e| e.to_string())?;
    Ok(workload)
}

fn first_line(text: &str) -> String {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(text)
        .trim_start_matches("error: ")
        .to_owned()
}

/// What a key does on the launcher beyond leaving it (its rows: [`LAUNCHER`], [`EDITING`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LauncherAction {
    /// Select the previous workload or parameter.
    Up,
    /// Select the next workload or parameter.
    Down,
    /// To the parameters (or the command line, or the processes: the selected entry's
    /// pane).
    Params,
    /// To the workloads.
    Workloads,
    /// To the next pane: workloads, the entry's pane, the recent sessions, round.
    Next,
    /// To the previous pane.
    Prev,
    /// Recent sessions: mark the selected one to open beside another, or unmark it.
    Mark,
    /// Editing a parameter: type the character.
    Type,
    /// Editing a parameter: erase the last character.
    Erase,
    /// Editing a parameter: keep the value (checked).
    Keep,
    /// Editing a parameter: cancel.
    Cancel,
}

impl LauncherState {
    /// Carries out what `key` does, as the launcher's tables say.
    pub fn act(&mut self, action: LauncherAction, key: Key) {
        match action {
            LauncherAction::Up => self.step(-1),
            LauncherAction::Down => self.step(1),
            LauncherAction::Params => self.focus = self.entry_pane(),
            LauncherAction::Workloads => self.focus = LauncherFocus::Workloads,
            LauncherAction::Next | LauncherAction::Prev => {
                let panes = self.panes();
                let at = panes.iter().position(|&p| p == self.focus).unwrap_or(0);
                let by = if action == LauncherAction::Next {
                    1
                } else {
                    -1
                };
                let next = (at as isize + by).rem_euclid(panes.len() as isize);
                self.focus = panes[next as usize];
            }
            LauncherAction::Mark => {
                if self.focus == LauncherFocus::Recent && self.recent_selected < self.recent.len() {
                    self.marked = match self.marked {
                        Some(m) if m == self.recent_selected => None,
                        _ => Some(self.recent_selected),
                    };
                }
            }
            LauncherAction::Type | LauncherAction::Erase => {
                if let Some(value) = &mut self.editing {
                    match key {
                        Key::Char(c) => value.push(c),
                        Key::Backspace => _ = value.pop(),
                        _ => {}
                    }
                }
            }
            LauncherAction::Keep => self.commit(),
            LauncherAction::Cancel => self.editing = None,
        }
    }
}

/// The launcher, the start screen.
pub const LAUNCHER: Table = Table {
    name: "launcher",
    rows: &[section(
        "Launcher",
        &[
            Row {
                keys: &[
                    (Key::Up, Action::Launcher(LauncherAction::Up)),
                    (Key::Char('k'), Action::Launcher(LauncherAction::Up)),
                    (Key::Down, Action::Launcher(LauncherAction::Down)),
                    (Key::Char('j'), Action::Launcher(LauncherAction::Down)),
                ],
                only: When::Always,
                help: Some(("↑ ↓, j k", "select a workload or a parameter")),
                hints: &[hint("↑↓ select", When::Always, 20)],
            },
            Row {
                keys: &[
                    (Key::Tab, Action::Launcher(LauncherAction::Next)),
                    (Key::BackTab, Action::Launcher(LauncherAction::Prev)),
                ],
                only: When::Always,
                help: Some((
                    "Tab, Shift-Tab",
                    "next, previous pane: workloads, parameters, sessions",
                )),
                hints: &[hint("Tab pane", When::Always, 21)],
            },
            Row {
                keys: &[
                    (Key::Right, Action::Launcher(LauncherAction::Params)),
                    (Key::Char('l'), Action::Launcher(LauncherAction::Params)),
                    (Key::Left, Action::Launcher(LauncherAction::Workloads)),
                    (Key::Char('h'), Action::Launcher(LauncherAction::Workloads)),
                    (Key::Esc, Action::Launcher(LauncherAction::Workloads)),
                ],
                only: When::Always,
                help: Some(("← →, Esc", "to the workloads, to their parameters")),
                hints: &[],
            },
            Row {
                keys: &[
                    (Key::Char('m'), Action::Launcher(LauncherAction::Mark)),
                    (Key::Char(' '), Action::Launcher(LauncherAction::Mark)),
                ],
                only: When::Launcher(LauncherFocus::Recent),
                help: Some((
                    "m, Space",
                    "recent sessions: mark one; Enter on another compares them",
                )),
                hints: &[hint("m mark", When::Launcher(LauncherFocus::Recent), 23)],
            },
            Row {
                keys: &[(Key::Enter, Action::LauncherEnter)],
                only: When::Always,
                help: Some((
                    "Enter",
                    "run the workload, edit the parameter, open the session",
                )),
                hints: &[
                    hint("Enter run", When::Launcher(LauncherFocus::Workloads), 22),
                    hint("Enter edit", When::Launcher(LauncherFocus::Params), 22),
                    hint("Enter open", When::Launcher(LauncherFocus::Recent), 22),
                ],
            },
            Row {
                keys: &[(Key::Char('r'), Action::ToOrphans)],
                only: When::Always,
                help: Some(("r", "processes earlier runs left behind")),
                hints: &[hint("r orphans", When::Always, 23)],
            },
            Row {
                keys: &[(Key::Char('?'), Action::Help), (Key::F1, Action::Help)],
                only: When::Always,
                help: None,
                hints: &[hint("? help", When::Always, 29)],
            },
            Row {
                keys: &[(Key::Char('q'), Action::Quit), (Key::CtrlC, Action::Quit)],
                only: When::Always,
                help: Some(("q, Ctrl-C", "quit")),
                hints: &[hint("q quit", When::Always, 31)],
            },
        ],
    )],
    otherwise: None,
};

/// A launcher parameter being edited.
pub const EDITING: Table = Table {
    name: "editing",
    rows: &[section(
        "Editing a parameter",
        &[
            Row {
                keys: &[
                    (Key::Enter, Action::Launcher(LauncherAction::Keep)),
                    (Key::Tab, Action::Launcher(LauncherAction::Keep)),
                    (Key::Esc, Action::Launcher(LauncherAction::Cancel)),
                ],
                only: When::Always,
                help: Some(("Enter, Esc", "keep the value (it is checked first), cancel")),
                hints: &[
                    hint("Enter keep", When::Always, 1),
                    hint("Esc cancel", When::Always, 2),
                ],
            },
            Row {
                keys: &[(Key::Backspace, Action::Launcher(LauncherAction::Erase))],
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
        action: Action::Launcher(LauncherAction::Type),
        hint: Some(hint("type a value (empty: the default)", When::Always, 0)),
    }),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launcher_offers_the_visible_workloads_with_their_defaults_ring_first() {
        let l = LauncherState::from_cli();
        let names: Vec<&str> = l.workloads.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names[0], "ring", "{names:?}");
        assert!(
            names.contains(&"storm") && !names.contains(&"ipc-node"),
            "{names:?}"
        );
        let ring = &l.workloads[0];
        assert!(!ring.about.is_empty());
        let nodes = ring.params.iter().find(|p| p.name == "num-nodes").unwrap();
        assert_eq!(nodes.default, "5000");
        let mode = ring.params.iter().find(|p| p.name == "mode").unwrap();
        assert_eq!(mode.choices, ["tell", "ask"]);
        // Defaults are not spelled out; the launcher's preset for a run worth watching is.
        assert_eq!(ring.args(), ["ring", "--num-rounds", "80000"]);
        let rounds = ring.params.iter().find(|p| p.name == "num-rounds").unwrap();
        assert_eq!(
            rounds.default, "2000",
            "the command line keeps the original's"
        );
    }

    #[test]
    fn a_bad_value_is_refused_with_the_command_lines_message_and_the_old_one_kept() {
        let mut l = LauncherState::from_cli();
        l.focus = LauncherFocus::Params;
        let i = l.workloads[0]
            .params
            .iter()
            .position(|p| p.name == "num-nodes")
            .unwrap();
        l.param = i;
        l.edit();
        l.editing = Some("lots".into());
        l.commit();
        let error = l.error.clone().unwrap();
        assert!(
            error.contains("lots") && error.contains("num-nodes"),
            "{error}"
        );
        assert_eq!(l.workloads[0].params[i].value, "");
        l.edit();
        l.editing = Some("100".into());
        l.commit();
        assert!(l.error.is_none());
        assert_eq!(
            l.workloads[0].args(),
            ["ring", "--num-nodes", "100", "--num-rounds", "80000"]
        );
        let Some(Workload::Ring(params)) = l.launch() else {
            panic!("not a ring")
        };
        assert_eq!(params.num_nodes, 100);
    }

    #[test]
    fn combinations_the_workload_refuses_are_refused_at_launch() {
        let mut l = LauncherState::from_cli();
        let crash = l.workloads[0]
            .params
            .iter()
            .position(|p| p.name == "crash-after")
            .unwrap();
        l.workloads[0].params[crash].value = "5".into();
        assert!(l.launch().is_none());
        assert!(
            l.error.as_deref().unwrap().contains("--transport ipc"),
            "{:?}",
            l.error
        );
    }

    #[test]
    fn selection_stays_in_range_and_ends_on_the_program_entries() {
        let mut l = LauncherState::from_cli();
        l.step(-3);
        assert_eq!(l.selected, 0);
        assert_eq!(l.entry(), Entry::Workload(0));
        l.step(100);
        assert_eq!(l.selected, l.workloads.len() + 1);
        assert_eq!(l.entry(), Entry::Process);
        assert!(l.workload().is_none());
        l.step(-1);
        assert_eq!(l.entry(), Entry::Command);
        l.act(LauncherAction::Params, Key::Tab);
        assert_eq!(l.focus, LauncherFocus::Command);
    }
}
