//! The launcher's two entries for programs that are not built in: a command line to type
//! (run as `benchtop run --tui -- <command>` runs it) and a running process to pick (a
//! list filtered by typing, attached to as `benchtop attach PID --tui` does), with their
//! key tables.

use std::time::{Duration, Instant};

use super::keys::{Action, Otherwise, Row, Table, When, hint, section};
use super::launcher::{LauncherAction, LauncherFocus};
use super::{Effect, Key, Screen, State};

/// How often the process list is read again while it is shown.
pub const REFRESH: Duration = Duration::from_secs(2);

/// One running process, as the picker lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessRow {
    /// Its pid.
    pub pid: u32,
    /// Its name (comm).
    pub name: String,
    /// The user it runs as.
    pub user: String,
    /// Its command line, arguments separated by spaces.
    pub command: String,
    /// CPU over the last moment, percent of one core.
    pub cpu_percent: f64,
}

/// The picker of a running process.
#[derive(Debug, Clone, Default)]
pub struct ProcessPicker {
    /// Every process listed, busiest first.
    pub rows: Vec<ProcessRow>,
    /// What was typed: the rows shown hold it in their pid, name, user or command.
    pub filter: String,
    /// The rows the filter keeps, as indices into `rows`.
    pub shown: Vec<usize>,
    /// The selected row among those shown.
    pub selected: usize,
    /// Why the last listing failed.
    pub error: Option<String>,
    /// When the last listing was asked for; None: never, or it has been answered.
    pub asked_at: Option<Instant>,
    /// When the last listing arrived.
    pub listed_at: Option<Instant>,
}

impl ProcessPicker {
    /// A new listing: the selection stays on the same pid when it is still there.
    pub fn set(&mut self, rows: Result<Vec<ProcessRow>, String>, now: Instant) {
        self.asked_at = None;
        self.listed_at = Some(now);
        match rows {
            Ok(rows) => {
                let pid = self.selected_row().map(|r| r.pid);
                self.rows = rows;
                self.error = None;
                self.refilter();
                if let Some(i) =
                    pid.and_then(|pid| self.shown.iter().position(|&i| self.rows[i].pid == pid))
                {
                    self.selected = i;
                }
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// Whether a listing should be asked for at `now`: none is on its way, and the last
    /// is older than [`REFRESH`] (or there is none).
    pub fn due(&self, now: Instant) -> bool {
        self.asked_at.is_none()
            && self
                .listed_at
                .is_none_or(|at| now.saturating_duration_since(at) >= REFRESH)
    }

    /// The selected process.
    pub fn selected_row(&self) -> Option<&ProcessRow> {
        self.shown
            .get(self.selected)
            .and_then(|&i| self.rows.get(i))
    }

    /// Keeps the rows that hold the filter (any case), the selection in range.
    fn refilter(&mut self) {
        let filter = self.filter.to_lowercase();
        self.shown = self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                filter.is_empty()
                    || r.pid.to_string().contains(&filter)
                    || r.name.to_lowercase().contains(&filter)
                    || r.user.to_lowercase().contains(&filter)
                    || r.command.to_lowercase().contains(&filter)
            })
            .map(|(i, _)| i)
            .collect();
        self.selected = self.selected.min(self.shown.len().saturating_sub(1));
    }

    fn act(&mut self, action: PickAction, key: Key) {
        match action {
            PickAction::Type => {
                if let Key::Char(c) = key {
                    self.filter.push(c);
                    self.selected = 0;
                    self.refilter();
                }
            }
            PickAction::Erase => {
                self.filter.pop();
                self.refilter();
            }
            PickAction::Up => self.selected = self.selected.saturating_sub(1),
            PickAction::Down => {
                self.selected = (self.selected + 1).min(self.shown.len().saturating_sub(1));
            }
            PickAction::Back | PickAction::Run => {}
        }
    }
}

/// The command line typed in the launcher.
#[derive(Debug, Clone, Default)]
pub struct CommandEntry {
    /// What was typed.
    pub text: String,
    /// Why the last one was refused.
    pub error: Option<String>,
}

impl CommandEntry {
    fn act(&mut self, action: PickAction, key: Key) {
        match action {
            PickAction::Type => {
                if let Key::Char(c) = key {
                    self.text.push(c);
                    self.error = None;
                }
            }
            PickAction::Erase => _ = self.text.pop(),
            _ => {}
        }
    }

    /// The command's words, split as a shell splits them (quotes kept together), or why
    /// they cannot be.
    pub fn words(&mut self) -> Option<Vec<String>> {
        let words = shlex::split(&self.text);
        self.error = match &words {
            None => Some("unbalanced quotes in the command line".into()),
            Some(w) if w.is_empty() => Some("type a command to run".into()),
            Some(_) => None,
        };
        words.filter(|w| !w.is_empty())
    }
}

/// What a key does in the command line or the picker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickAction {
    /// Type the character (into the command line, or the filter).
    Type,
    /// Erase the last character.
    Erase,
    /// Select the row above.
    Up,
    /// Select the row below.
    Down,
    /// Back to the list of workloads.
    Back,
    /// Run the command, or attach to the selected process.
    Run,
}

/// Where the launcher's typing goes, when it goes to one of these entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Typing {
    /// The command line.
    Command,
    /// The process filter.
    Processes,
}

/// Carries out `action` of `key` on the entry `typing` goes to.
pub fn act(
    command: &mut CommandEntry,
    picker: &mut ProcessPicker,
    typing: Typing,
    action: PickAction,
    key: Key,
) {
    match typing {
        Typing::Command => command.act(action, key),
        Typing::Processes => picker.act(action, key),
    }
}

impl State {
    /// A listing of the processes when the picker is shown and the last is old.
    pub(super) fn refresh_processes(&mut self, now: Instant) -> Vec<Effect> {
        let picker = &mut self.launcher.picker;
        if self.screen != Screen::Launcher
            || self.launcher.focus != LauncherFocus::Processes
            || !picker.due(now)
        {
            return Vec::new();
        }
        picker.asked_at = Some(now);
        vec![Effect::ListProcesses]
    }

    /// Carries out a key of the command line or the picker.
    pub(super) fn pick(&mut self, action: PickAction, key: Key) -> Vec<Effect> {
        let typing = match self.launcher.focus {
            LauncherFocus::Processes => Typing::Processes,
            _ => Typing::Command,
        };
        let launcher = &mut self.launcher;
        match (action, typing) {
            (PickAction::Back, _) => launcher.focus = LauncherFocus::Workloads,
            (PickAction::Run, Typing::Command) => {
                let Some(words) = launcher.command.words() else {
                    return Vec::new();
                };
                let name = std::path::Path::new(&words[0])
                    .file_name()
                    .map_or_else(|| words[0].clone(), |n| n.to_string_lossy().into_owned());
                let params = format!("command={}", words.join(" "));
                self.begin_run(&name, &params);
                self.live.run.program = true;
                return vec![Effect::RunCommand(words)];
            }
            (PickAction::Run, Typing::Processes) => {
                let Some(row) = launcher.picker.selected_row() else {
                    return Vec::new();
                };
                let (pid, name) = (row.pid, row.name.clone());
                let params = format!("command={} pid={pid}", row.command);
                self.begin_run(&name, &params);
                self.live.run.program = true;
                self.live.run.attached = true;
                return vec![Effect::Attach(pid)];
            }
            (action, typing) => act(
                &mut launcher.command,
                &mut launcher.picker,
                typing,
                action,
                key,
            ),
        }
        Vec::new()
    }
}

/// Tab from the command line or the picker: the next pane (the help says it under the
/// command line, which comes first).
const NEXT_PANE_ROW: Row = Row {
    keys: &[(Key::Tab, Action::Launcher(LauncherAction::Next))],
    only: When::Always,
    help: Some(("Tab", "the next pane (recent sessions, then the workloads)")),
    hints: &[],
};

/// Backspace in the command line or the picker's filter.
const ERASE_ROW: Row = Row {
    keys: &[(Key::Backspace, Action::Pick(PickAction::Erase))],
    only: When::Always,
    help: None,
    hints: &[],
};

/// Ctrl-C while typing: quit (every other key is text).
const QUIT_ROW: Row = Row {
    keys: &[(Key::CtrlC, Action::Quit)],
    only: When::Always,
    help: None,
    hints: &[],
};

/// Typing a command line in the launcher.
pub const COMMAND_LINE: Table = Table {
    name: "command line",
    rows: &[section(
        "Command line and processes",
        &[
            Row {
                keys: &[(Key::Enter, Action::Pick(PickAction::Run))],
                only: When::Always,
                help: Some((
                    "Enter",
                    "run the command typed, live (as run --tui -- <command>)",
                )),
                hints: &[hint("Enter run", When::Always, 1)],
            },
            NEXT_PANE_ROW,
            Row {
                keys: &[
                    (Key::Esc, Action::Pick(PickAction::Back)),
                    (Key::BackTab, Action::Pick(PickAction::Back)),
                ],
                only: When::Always,
                help: Some(("Esc, Shift-Tab", "back to the workloads")),
                hints: &[hint("Esc back", When::Always, 2)],
            },
            ERASE_ROW,
            QUIT_ROW,
        ],
    )],
    otherwise: Some(Otherwise {
        action: Action::Pick(PickAction::Type),
        hint: Some(hint("type a command line", When::Always, 0)),
    }),
};

/// Picking a running process in the launcher.
pub const PICKER: Table = Table {
    name: "process picker",
    rows: &[section(
        "Processes",
        &[
            Row {
                keys: &[
                    (Key::Up, Action::Pick(PickAction::Up)),
                    (Key::Down, Action::Pick(PickAction::Down)),
                ],
                only: When::Always,
                help: Some(("↑ ↓", "select a process")),
                hints: &[hint("↑↓ select", When::Always, 1)],
            },
            Row {
                keys: &[(Key::Enter, Action::Pick(PickAction::Run))],
                only: When::Always,
                help: Some((
                    "Enter",
                    "attach to the selected process, live (as attach PID --tui)",
                )),
                hints: &[hint("Enter attach", When::Always, 2)],
            },
            Row {
                help: None,
                ..NEXT_PANE_ROW
            },
            Row {
                keys: &[
                    (Key::Esc, Action::Pick(PickAction::Back)),
                    (Key::BackTab, Action::Pick(PickAction::Back)),
                ],
                only: When::Always,
                // Said under the command line, as Tab.
                help: None,
                hints: &[hint("Esc back", When::Always, 3)],
            },
            ERASE_ROW,
            QUIT_ROW,
        ],
    )],
    otherwise: Some(Otherwise {
        action: Action::Pick(PickAction::Type),
        hint: Some(hint("type to filter", When::Always, 0)),
    }),
};

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pid: u32, name: &str, user: &str, cpu: f64) -> ProcessRow {
        ProcessRow {
            pid,
            name: name.into(),
            user: user.into(),
            command: format!("/usr/bin/{name} --serve"),
            cpu_percent: cpu,
        }
    }

    fn picker() -> ProcessPicker {
        let mut p = ProcessPicker::default();
        let rows = vec![
            row(100, "postgres", "postgres", 40.0),
            row(200, "nginx", "www-data", 10.0),
            row(4242, "my-bench", "ada", 99.0),
        ];
        p.set(Ok(rows), Instant::now());
        p
    }

    #[test]
    fn typing_filters_by_name_user_pid_or_command_in_any_case() {
        let mut p = picker();
        assert_eq!(p.shown.len(), 3);
        for c in "NGI".chars() {
            p.act(PickAction::Type, Key::Char(c));
        }
        assert_eq!(p.selected_row().map(|r| r.pid), Some(200));
        p.filter.clear();
        p.act(PickAction::Type, Key::Char('4'));
        assert_eq!(p.selected_row().map(|r| r.pid), Some(4242));
        p.filter = "ada".into();
        p.refilter();
        assert_eq!(p.shown.len(), 1);
        p.filter = "nothing".into();
        p.refilter();
        assert!(p.selected_row().is_none());
        p.act(PickAction::Down, Key::Down);
        assert_eq!(p.selected, 0);
    }

    #[test]
    fn a_new_listing_keeps_the_selected_pid() {
        let mut p = picker();
        p.act(PickAction::Down, Key::Down);
        assert_eq!(p.selected_row().map(|r| r.pid), Some(200));
        let now = Instant::now();
        p.set(
            Ok(vec![
                row(200, "nginx", "www-data", 1.0),
                row(300, "new", "ada", 50.0),
            ]),
            now,
        );
        assert_eq!(p.selected_row().map(|r| r.pid), Some(200));
        assert!(!p.due(now) && p.due(now + REFRESH));
        p.set(Err("cannot read /proc".into()), now);
        assert_eq!(p.rows.len(), 2, "a failed listing keeps the last");
    }

    #[test]
    fn a_command_line_splits_as_a_shell_would() {
        let mut c = CommandEntry {
            text: "./bench --name 'two words' -n 3".into(),
            error: None,
        };
        assert_eq!(
            c.words().unwrap(),
            ["./bench", "--name", "two words", "-n", "3"]
        );
        c.text = "./bench 'open".into();
        assert!(c.words().is_none());
        assert!(c.error.as_deref().unwrap().contains("quotes"));
        c.text = "   ".into();
        assert!(c.words().is_none());
    }
}
