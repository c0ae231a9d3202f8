//! The launcher: workloads, the selected one's parameters, recent sessions, and a warning
//! when earlier runs left processes behind.

use benchtop_sessions::escape::{Escaped, escaped};
use benchtop_sessions::units::human_bytes;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use super::accent;
use crate::state::State;
use crate::state::launcher::{Entry, LauncherFocus, PROGRAM_ENTRIES};

/// Draws the launcher into `area` (everything but the footer).
pub fn draw(state: &State, area: Rect, buf: &mut Buffer) {
    let l = &state.launcher;
    let [head, top, recent] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(6),
        Constraint::Length((l.recent.len() as u16).clamp(1, 8) + 2),
    ])
    .areas(area);
    let mut lines = vec![Line::from(vec![
        Span::styled(
            " benchtop ",
            accent(state, Color::Cyan).add_modifier(Modifier::BOLD),
        ),
        Span::raw(
            "pick a workload, a command or a process; Enter runs it, profiled and recorded \
             under ./sessions/",
        ),
    ])];
    let orphans = state.orphans.count();
    if orphans > 0 {
        lines.push(Line::from(Span::styled(
            format!(
                " ⚠ {orphans} process{} left behind by earlier runs ({} resident) — r reviews \
                 and ends them",
                if orphans == 1 { "" } else { "es" },
                human_bytes(state.orphans.rss())
            ),
            accent(state, Color::Red).add_modifier(Modifier::BOLD),
        )));
    }
    Paragraph::new(lines).render(head, buf);

    let [list, params] =
        Layout::horizontal([Constraint::Percentage(38), Constraint::Percentage(62)]).areas(top);
    let focused = |f: LauncherFocus| {
        if l.focus == f {
            accent(state, Color::Cyan).add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::DIM)
        }
    };
    let block = Block::new()
        .borders(Borders::ALL)
        .border_style(focused(LauncherFocus::Workloads))
        .title(" workloads ");
    let inner = block.inner(list);
    block.render(list, buf);
    workload_list(state, inner, buf);
    match l.entry() {
        Entry::Workload(_) => parameters(state, params, buf),
        Entry::Command => super::picker::command(state, params, buf),
        Entry::Process => super::picker::processes(state, params, buf),
    }
    recent_sessions(state, recent, buf);
}

/// The workloads, then the entries for any command and a running process; scrolled so
/// that the selected entry is in view, its place in the title.
fn workload_list(state: &State, area: Rect, buf: &mut Buffer) {
    let l = &state.launcher;
    let width = usize::from(area.width).max(1);
    let names = l
        .workloads
        .iter()
        .map(|w| (w.name.as_str(), w.about.as_str()))
        .chain(
            PROGRAM_ENTRIES
                .iter()
                .map(|&(_, name, about)| (name, about)),
        );
    // Each entry's lines: its name, then what it is, wrapped.
    let mut entries: Vec<Vec<Line>> = Vec::new();
    for (i, (name, about)) in names.enumerate() {
        let selected = i == l.selected;
        let mark = if selected { "▶ " } else { "  " };
        let style = if selected {
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else {
            Style::new()
        };
        let mut lines = vec![Line::from(Span::styled(format!("{mark}{name}"), style))];
        lines.extend(
            wrap(about, width.saturating_sub(2).max(1))
                .into_iter()
                .map(|text| {
                    Line::from(Span::styled(
                        format!("  {text}"),
                        Style::new().add_modifier(Modifier::DIM),
                    ))
                }),
        );
        entries.push(lines);
    }
    let rows = usize::from(area.height);
    let before: usize = entries.iter().take(l.selected).map(Vec::len).sum();
    let selected_end = before + entries.get(l.selected).map_or(0, Vec::len);
    // The first line shown: the selected entry ends on the last row when it would be
    // below, and starts on the first when it would be above.
    let need = selected_end.saturating_sub(rows).min(before);
    // Scrolled by whole entries: the first shown starts at an entry's first line.
    let first = entries
        .iter()
        .scan(0, |start, e| {
            let at = *start;
            *start += e.len();
            Some(at)
        })
        .find(|&start| start >= need)
        .unwrap_or(need)
        .min(before);
    let lines: Vec<Line> = entries
        .into_iter()
        .flatten()
        .skip(first)
        .take(rows)
        .collect();
    Paragraph::new(lines).render(area, buf);
    let title = format!(" {}/{} ", l.selected + 1, l.entries());
    let x = (area.right() + 1).saturating_sub(title.chars().count() as u16 + 1);
    if area.y > 0 && x > area.x {
        buf.set_string(
            x,
            area.y - 1,
            title,
            Style::new().add_modifier(Modifier::DIM),
        );
    }
}

/// `text` in lines of at most `width` characters, broken between words (a word longer
/// than a line is cut).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let word: String = word.chars().take(width).collect();
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The parameters of the selected workload, the selected one in view.
fn parameters(state: &State, params: Rect, buf: &mut Buffer) {
    let l = &state.launcher;
    let focused = |f: LauncherFocus| {
        if l.focus == f {
            accent(state, Color::Cyan).add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::DIM)
        }
    };
    let title = match l.workload() {
        Some(w) => format!(" parameters of {} ", w.name),
        None => " parameters ".into(),
    };
    let block = Block::new()
        .borders(Borders::ALL)
        .border_style(focused(LauncherFocus::Params))
        .title(title);
    let inner = block.inner(params);
    block.render(params, buf);
    if let Some(w) = l.workload() {
        // The selected parameter's whole description, in lines of its own at the bottom.
        let described = w.params.get(l.param).map(|p| {
            let mut text = format!("--{}: {}", p.name, p.description);
            if !p.choices.is_empty() {
                text.push_str(&format!(" [{}]", p.choices.join("|")));
            }
            wrap(&text, usize::from(inner.width))
        });
        let described = described.unwrap_or_default();
        let room = (usize::from(inner.height) / 3).clamp(1, 3);
        let desc_rows = described.len().min(room) as u16;
        let [inner, desc] = Layout::vertical([
            Constraint::Min(1),
            Constraint::Length(if inner.height > 4 { desc_rows } else { 0 }),
        ])
        .areas(inner);
        Paragraph::new(
            described
                .into_iter()
                .take(usize::from(desc.height))
                .map(|l| Line::from(Span::styled(l, accent(state, Color::Yellow))))
                .collect::<Vec<_>>(),
        )
        .render(desc, buf);
        let name_width = w.params.iter().map(|p| p.name.len()).max().unwrap_or(0);
        let rows = usize::from(inner.height);
        // Keep the selected parameter in view.
        let first = l.param.saturating_sub(rows.saturating_sub(1));
        let lines: Vec<Line> = w
            .params
            .iter()
            .enumerate()
            .skip(first)
            .take(rows)
            .map(|(i, p)| {
                let selected = l.focus == LauncherFocus::Params && i == l.param;
                let value = match (&l.editing, selected) {
                    (Some(typed), true) => Span::styled(
                        format!("{typed}▏"),
                        Style::new().add_modifier(Modifier::REVERSED),
                    ),
                    _ if p.value.is_empty() => Span::styled(
                        if p.default.is_empty() {
                            "-".to_owned()
                        } else {
                            p.default.clone()
                        },
                        Style::new().add_modifier(Modifier::DIM),
                    ),
                    _ => Span::styled(p.value.clone(), accent(state, Color::Yellow)),
                };
                let name_style = if selected {
                    Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
                } else {
                    Style::new().add_modifier(Modifier::BOLD)
                };
                let mut help = p.help.clone();
                if !p.choices.is_empty() {
                    help = format!("[{}] {help}", p.choices.join("|"));
                }
                Line::from(vec![
                    Span::styled(format!("{:<name_width$}", p.name), name_style),
                    Span::raw("  "),
                    value,
                    Span::styled(
                        format!("  {help}"),
                        Style::new().add_modifier(Modifier::DIM),
                    ),
                ])
            })
            .collect();
        Paragraph::new(lines).render(inner, buf);
    }
}

/// The most recent sessions under ./sessions.
fn recent_sessions(state: &State, recent: Rect, buf: &mut Buffer) {
    let l = &state.launcher;
    let focused = l.focus == LauncherFocus::Recent;
    let title = if l.marked.is_some() {
        " recent sessions (./sessions): A marked, Enter on another compares "
    } else {
        " recent sessions (./sessions) "
    };
    let block = Block::new()
        .borders(Borders::ALL)
        .border_style(if focused {
            accent(state, Color::Cyan).add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::DIM)
        })
        .title(title);
    let inner = block.inner(recent);
    block.render(recent, buf);
    let lines: Vec<Line> = if l.recent.is_empty() {
        vec![Line::from(Span::styled(
            "none yet",
            Style::new().add_modifier(Modifier::DIM),
        ))]
    } else {
        // The selected session stays in view.
        let rows = usize::from(inner.height);
        let first = l.recent_selected.saturating_sub(rows.saturating_sub(1));
        l.recent
            .iter()
            .enumerate()
            .skip(first)
            .take(rows)
            .map(|(i, s)| {
                let mark = if l.marked == Some(i) { "A " } else { "  " };
                let line = Line::from(format!(
                    "{mark}{:<32} {:<8} {:<9} {}",
                    escaped(&s.name),
                    escaped(&s.workload),
                    escaped(&s.status),
                    Escaped(&s.started)
                ));
                if focused && i == l.recent_selected {
                    line.style(Style::new().add_modifier(Modifier::REVERSED))
                } else {
                    line
                }
            })
            .collect()
    };
    Paragraph::new(lines).render(inner, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_wraps_between_words_and_cuts_a_word_longer_than_a_line() {
        assert_eq!(wrap("one two three", 7), ["one two", "three"]);
        assert_eq!(wrap("abcdefghij xy", 4), ["abcd", "xy"]);
        assert!(wrap("", 5).is_empty());
    }
}
