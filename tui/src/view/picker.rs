//! The launcher's right pane for the entries of programs that are not built in: the
//! command line being typed, and the running processes to pick from (pid, name, CPU,
//! user, command; filtered by typing).

use benchtop_sessions::escape::escaped;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

use super::accent;
use crate::state::State;
use crate::state::launcher::LauncherFocus;

/// The pane's border, bold when it has the keys.
fn framed(
    state: &State,
    focus: LauncherFocus,
    title: String,
    area: Rect,
    buf: &mut Buffer,
) -> Rect {
    let style = if state.launcher.focus == focus {
        accent(state, Color::Cyan).add_modifier(Modifier::BOLD)
    } else {
        Style::new().add_modifier(Modifier::DIM)
    };
    let block = Block::new()
        .borders(Borders::ALL)
        .border_style(style)
        .title(title);
    let inner = block.inner(area);
    block.render(area, buf);
    inner
}

/// The command line: what was typed (a cursor while typing), why it was refused, and
/// what Enter does.
pub fn command(state: &State, area: Rect, buf: &mut Buffer) {
    let typing = state.launcher.focus == LauncherFocus::Command;
    let inner = framed(
        state,
        LauncherFocus::Command,
        " command line ".into(),
        area,
        buf,
    );
    let entry = &state.launcher.command;
    let dim = Style::new().add_modifier(Modifier::DIM);
    let text = if typing {
        Span::styled(
            format!("{}▏", escaped(&entry.text)),
            Style::new().add_modifier(Modifier::REVERSED),
        )
    } else if entry.text.is_empty() {
        Span::styled("(Enter, then type a command)", dim)
    } else {
        Span::styled(escaped(&entry.text), accent(state, Color::Yellow))
    };
    let mut lines = vec![Line::from(vec![Span::raw("$ "), text]), Line::from("")];
    if let Some(error) = &entry.error {
        lines.push(Line::from(Span::styled(
            escaped(error),
            accent(state, Color::Red),
        )));
    }
    lines.push(Line::from(Span::styled(
        "Runs the command as `benchtop run --tui -- <command>` does: sampled from its \
         first instruction, its on- and off-CPU flamegraph, its process tree's CPU, context \
         switches and samples per second live, recorded under ./sessions/. Quotes group \
         words as in a shell; q stops it (SIGINT).",
        dim,
    )));
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);
}

/// The running processes, busiest first, filtered by what was typed; the selected one
/// in view.
pub fn processes(state: &State, area: Rect, buf: &mut Buffer) {
    let picker = &state.launcher.picker;
    let picking = state.launcher.focus == LauncherFocus::Processes;
    let title = format!(
        " running processes {}/{} ",
        picker.shown.len(),
        picker.rows.len()
    );
    let inner = framed(state, LauncherFocus::Processes, title, area, buf);
    let dim = Style::new().add_modifier(Modifier::DIM);
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let filter = if picking {
        Span::styled(
            format!("{}▏", escaped(&picker.filter)),
            Style::new().add_modifier(Modifier::REVERSED),
        )
    } else if picker.filter.is_empty() {
        Span::styled("Enter to pick, then type to filter", dim)
    } else {
        Span::raw(escaped(&picker.filter))
    };
    let mut lines = vec![Line::from(vec![Span::styled("filter ", bold), filter])];
    if let Some(error) = &picker.error {
        lines.push(Line::from(Span::styled(
            escaped(error),
            accent(state, Color::Red),
        )));
    }
    lines.push(Line::from(Span::styled(
        format!(
            "{:>7} {:<15} {:>5} {:<9} COMMAND",
            "PID", "NAME", "CPU%", "USER"
        ),
        bold,
    )));
    let rows = usize::from(inner.height).saturating_sub(lines.len());
    if picker.rows.is_empty() && picker.error.is_none() {
        lines.push(Line::from(Span::styled("listing the processes…", dim)));
    }
    let first = picker.selected.saturating_sub(rows.saturating_sub(1));
    for (at, &i) in picker.shown.iter().enumerate().skip(first).take(rows) {
        let row = &picker.rows[i];
        let style = if at == picker.selected && picking {
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else if at == picker.selected {
            bold
        } else {
            Style::new()
        };
        let name: String = escaped(&row.name).chars().take(15).collect();
        let user: String = escaped(&row.user).chars().take(9).collect();
        lines.push(Line::from(Span::styled(
            format!(
                "{:>7} {name:<15} {:>5.1} {user:<9} {}",
                row.pid,
                row.cpu_percent,
                escaped(&row.command)
            ),
            style,
        )));
    }
    Paragraph::new(lines).render(inner, buf);
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::Instant;

    use crate::state::picker::ProcessRow;
    use crate::state::{AppEvent, Effect, Key, State};
    use crate::view::tests::{launcher, render};

    fn keys(s: &mut State, keys: &[Key], now: Instant) -> Vec<Effect> {
        keys.iter()
            .flat_map(|&k| s.update(AppEvent::Key(k), now))
            .collect()
    }

    fn type_text(s: &mut State, text: &str, now: Instant) {
        for c in text.chars() {
            s.update(AppEvent::Key(Key::Char(c)), now);
        }
    }

    /// The launcher with the selection moved to the program entries, `down` past the
    /// last workload.
    pub(crate) fn at_entry(down: usize, now: Instant) -> State {
        let mut s = launcher();
        let n = s.launcher.workloads.len() + down;
        for _ in 0..n {
            s.update(AppEvent::Key(Key::Down), now);
        }
        s
    }

    #[test]
    fn the_command_entry_takes_a_command_line_and_runs_it() {
        let now = Instant::now();
        let mut s = at_entry(0, now);
        insta::assert_snapshot!("command_entry_80x24", render(&s, now, 80, 24));
        assert!(keys(&mut s, &[Key::Enter], now).is_empty());
        type_text(&mut s, "./calltree 'a b' 30", now);
        let screen = render(&s, now, 160, 48);
        assert!(screen.contains("$ ./calltree 'a b' 30▏"), "{screen}");
        assert!(screen.contains("type a command line"), "{screen}");
        insta::assert_snapshot!("command_entry_typing_160x48", screen);
        let effects = keys(&mut s, &[Key::Enter], now);
        assert_eq!(
            effects,
            [Effect::RunCommand(vec![
                "./calltree".into(),
                "a b".into(),
                "30".into()
            ])]
        );
        assert_eq!(s.screen, crate::state::Screen::Live);
        assert!(s.live.run.program && s.live.run.workload == "calltree");
    }

    fn rows() -> Vec<ProcessRow> {
        let row = |pid: u32, name: &str, user: &str, cpu: f64, command: &str| ProcessRow {
            pid,
            name: name.into(),
            user: user.into(),
            command: command.into(),
            cpu_percent: cpu,
        };
        vec![
            row(5151, "calltree", "ada", 99.2, "./calltree 3600"),
            row(
                812,
                "postgres",
                "postgres",
                12.5,
                "/usr/lib/postgresql/16/bin/postgres -D /var/lib/postgresql",
            ),
            row(1, "systemd", "root", 0.0, "/sbin/init"),
            row(901, "nginx", "www-data", 0.4, "nginx: worker process"),
        ]
    }

    #[test]
    fn the_process_entry_lists_filters_by_typing_and_attaches() {
        let now = Instant::now();
        let mut s = at_entry(1, now);
        let effects = keys(&mut s, &[Key::Enter], now);
        assert_eq!(effects, [Effect::ListProcesses]);
        s.update(AppEvent::Processes(Ok(rows())), now);
        insta::assert_snapshot!("process_picker_160x48", render(&s, now, 160, 48));
        type_text(&mut s, "POST", now);
        let screen = render(&s, now, 80, 24);
        assert!(screen.contains("running processes 1/4"), "{screen}");
        assert!(
            screen.contains("postgres") && !screen.contains("calltree"),
            "{screen}"
        );
        insta::assert_snapshot!("process_picker_filtered_80x24", screen);
        // The list is read again while it is shown, not more often than REFRESH.
        assert!(s.update(AppEvent::Tick, now).is_empty());
        let later = now + crate::state::picker::REFRESH;
        assert_eq!(s.update(AppEvent::Tick, later), [Effect::ListProcesses]);
        assert!(s.update(AppEvent::Tick, later).is_empty(), "one at a time");
        assert_eq!(keys(&mut s, &[Key::Enter], now), [Effect::Attach(812)]);
        assert!(s.live.run.program && s.live.run.workload == "postgres");
    }

    #[test]
    fn a_question_mark_is_text_in_the_command_line_and_the_filter_not_help() {
        use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
        let now = Instant::now();
        // As the terminal gives it: `?` with Shift held.
        let question = || {
            crate::app::app_event(Event::Key(KeyEvent::new(
                KeyCode::Char('?'),
                KeyModifiers::SHIFT,
            )))
            .expect("a key")
        };
        let mut s = at_entry(0, now);
        keys(&mut s, &[Key::Enter], now);
        type_text(&mut s, "grep -c x", now);
        s.update(question(), now);
        type_text(&mut s, " f", now);
        assert!(!s.help, "typed, not the help");
        assert_eq!(s.launcher.command.text, "grep -c x? f");
        let screen = render(&s, now, 80, 24);
        assert!(screen.contains("$ grep -c x? f▏"), "{screen}");
        insta::assert_snapshot!("command_entry_question_mark_80x24", screen);
        let mut s = at_entry(1, now);
        keys(&mut s, &[Key::Enter], now);
        s.update(AppEvent::Processes(Ok(rows())), now);
        s.update(question(), now);
        assert!(!s.help);
        assert_eq!(s.launcher.picker.filter, "?");
        insta::assert_snapshot!(
            "process_picker_question_mark_160x48",
            render(&s, now, 160, 48)
        );
        // Outside the entries `?` is the help, as the footer says.
        let mut s = at_entry(0, now);
        s.update(question(), now);
        assert!(s.help);
    }

    #[test]
    fn quitting_an_attached_process_detaches_and_says_it_goes_on_running() {
        let now = Instant::now();
        let mut s = at_entry(1, now);
        keys(&mut s, &[Key::Enter], now);
        s.update(AppEvent::Processes(Ok(rows())), now);
        assert_eq!(keys(&mut s, &[Key::Enter], now), [Effect::Attach(5151)]);
        assert!(s.live.run.attached);
        let screen = render(&s, now, 160, 48);
        assert!(
            screen.contains("q detach+quit") && !screen.contains("stop+quit"),
            "{screen}"
        );
        assert_eq!(
            keys(&mut s, &[Key::Char('q')], now),
            [Effect::StopRecording]
        );
        let flash = s.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
        assert!(
            flash.contains("detaching") && flash.contains("goes on running"),
            "{flash}"
        );
        assert!(!flash.contains("stopping the workload"), "{flash}");
        let screen = render(&s, now, 80, 24);
        assert!(screen.contains("● detaching"), "{screen}");
        insta::assert_snapshot!("attached_quitting_80x24", screen);
        // A command is stopped, as a workload is.
        let mut s = at_entry(0, now);
        keys(&mut s, &[Key::Enter], now);
        type_text(&mut s, "./calltree", now);
        keys(&mut s, &[Key::Enter], now);
        assert!(!s.live.run.attached);
        keys(&mut s, &[Key::Char('q')], now);
        let flash = s.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
        assert!(flash.contains("stopping the workload"), "{flash}");
    }

    #[test]
    fn at_80x24_the_list_scrolls_to_the_last_entry() {
        let now = Instant::now();
        let s = at_entry(1, now);
        let screen = render(&s, now, 80, 24);
        assert!(screen.contains("▶ running process…"), "{screen}");
        let n = s.launcher.entries();
        assert!(screen.contains(&format!(" {n}/{n} ")), "{screen}");
        insta::assert_snapshot!("launcher_scrolled_80x24", screen);
    }
}
