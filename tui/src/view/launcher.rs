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
use super::fit::{self, fit, fit_end, wrap};
use crate::state::State;
use crate::state::launcher::{Entry, LauncherFocus, PROGRAM_ENTRIES};

/// What the header says, longest first: the first that fits is drawn.
const HEADER: [&str; 3] = [
    "pick a workload, a command or a process; Enter runs it, profiled and recorded under \
     ./sessions/",
    "pick a workload, a command or a process; Enter runs and records it",
    "pick what to run; Enter runs it",
];

/// What a parameter's description gets beside its value at the least; with less room it
/// goes on a line of its own under the parameter.
const MIN_DESCRIPTION: usize = 30;

/// Draws the launcher into `area` (everything but the footer).
pub fn draw(state: &State, area: Rect, buf: &mut Buffer) {
    let l = &state.launcher;
    let [head, top, recent] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(6),
        Constraint::Length((l.recent.len() as u16).clamp(1, 8) + 2),
    ])
    .areas(area);
    // The longest of the header's sayings that fits.
    let room = usize::from(head.width).saturating_sub(" benchtop ".len());
    let about = HEADER
        .iter()
        .find(|h| fit::width(h) <= room)
        .copied()
        .unwrap_or("");
    let mut lines = vec![Line::from(vec![
        Span::styled(
            " benchtop ",
            accent(state, Color::Cyan).add_modifier(Modifier::BOLD),
        ),
        Span::raw(about),
    ])];
    let orphans = state.orphans.count();
    if orphans > 0 {
        // The longest wording that fits: the count and the key to review them stay.
        let es = if orphans == 1 { "" } else { "es" };
        let rss = human_bytes(state.orphans.rss());
        let sayings = [
            format!(
                " ⚠ {orphans} process{es} left behind by earlier runs ({rss} resident) — r \
                 reviews and ends them"
            ),
            format!(
                " ⚠ {orphans} process{es} left behind by earlier runs — r reviews and ends them"
            ),
            format!(" ⚠ {orphans} process{es} left behind — r reviews and ends them"),
            format!(" ⚠ {orphans} left behind — r reviews them"),
        ];
        let width = usize::from(head.width);
        let warning = sayings.iter().find(|s| fit::width(s) <= width).map_or_else(
            || fit::fit_prose(&sayings[3], width).into_owned(),
            Clone::clone,
        );
        lines.push(Line::from(Span::styled(
            warning,
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
        let values: Vec<Span> = w
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let selected = l.focus == LauncherFocus::Params && i == l.param;
                match (&l.editing, selected) {
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
                }
            })
            .collect();
        let width = usize::from(inner.width);
        let name_width = w.params.iter().map(|p| fit::width(&p.name)).max();
        let name_width = name_width.unwrap_or(0).min(width / 3);
        // Values in a column as wide as the widest (a third of the pane at most).
        let value_width = values.iter().map(|v| fit::width(&v.content)).max();
        let value_width = value_width.unwrap_or(0).min(width / 3).max(1);
        let beside = width.saturating_sub(name_width + value_width + 4);
        // Narrow: the description on a line of its own, under the parameter.
        let per_param = if beside >= MIN_DESCRIPTION { 1 } else { 2 };
        let rows = usize::from(inner.height) / per_param;
        // Keep the selected parameter in view.
        let first = l.param.saturating_sub(rows.saturating_sub(1));
        let lines: Vec<Line> = w
            .params
            .iter()
            .zip(values)
            .enumerate()
            .skip(first)
            .take(rows.max(1))
            .flat_map(|(i, (p, value))| {
                let selected = l.focus == LauncherFocus::Params && i == l.param;
                let name_style = if selected {
                    Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
                } else {
                    Style::new().add_modifier(Modifier::BOLD)
                };
                let mut help = p.help.clone();
                if !p.choices.is_empty() {
                    help = format!("[{}] {help}", p.choices.join("|"));
                }
                let name = fit(&p.name, name_width);
                let value = Span::styled(
                    format!("{:<value_width$}", fit(&value.content, value_width)),
                    value.style,
                );
                let dim = Style::new().add_modifier(Modifier::DIM);
                let mut line = vec![
                    Span::styled(format!("{name:<name_width$}"), name_style),
                    Span::raw("  "),
                    value,
                ];
                if per_param == 1 {
                    let help = fit_end(&help, beside).into_owned();
                    line.push(Span::styled(format!("  {help}"), dim));
                    return vec![Line::from(line)];
                }
                let help = fit_end(&help, width.saturating_sub(4)).into_owned();
                vec![
                    Line::from(line),
                    Line::from(Span::styled(format!("    {help}"), dim)),
                ]
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
