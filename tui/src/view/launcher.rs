//! The launcher: workloads, the selected one's parameters, recent sessions, and a warning
//! when earlier runs left processes behind.

use benchtop_sessions::escape::{Escaped, escaped};
use benchtop_sessions::units::human_bytes;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

use super::accent;
use crate::state::State;
use crate::state::launcher::LauncherFocus;

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
        Span::raw("pick a workload; Enter runs it, profiled and recorded under ./sessions/"),
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
    let mut lines = Vec::new();
    for (i, w) in l.workloads.iter().enumerate() {
        let selected = i == l.selected;
        let mark = if selected { "▶ " } else { "  " };
        let style = if selected {
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else {
            Style::new()
        };
        lines.push(Line::from(Span::styled(format!("{mark}{}", w.name), style)));
        lines.push(Line::from(Span::styled(
            format!("  {}", w.about),
            Style::new().add_modifier(Modifier::DIM),
        )));
    }
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);

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

    let block = Block::new()
        .borders(Borders::ALL)
        .border_style(Style::new().add_modifier(Modifier::DIM))
        .title(" recent sessions (./sessions) ");
    let inner = block.inner(recent);
    block.render(recent, buf);
    let lines: Vec<Line> = if l.recent.is_empty() {
        vec![Line::from(Span::styled(
            "none yet",
            Style::new().add_modifier(Modifier::DIM),
        ))]
    } else {
        l.recent
            .iter()
            .map(|s| {
                Line::from(format!(
                    "{:<32} {:<8} {:<9} {}",
                    escaped(&s.name),
                    escaped(&s.workload),
                    escaped(&s.status),
                    Escaped(&s.started)
                ))
            })
            .collect()
    };
    Paragraph::new(lines).render(inner, buf);
}
