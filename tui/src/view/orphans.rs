//! The orphans screen: what the reaper finds, and the confirmation before ending them.

use benchtop_profilers::reaper::ReapSignal;
use benchtop_sessions::escape::{Escaped, escaped};
use benchtop_sessions::units::human_bytes;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use super::{accent, fit};
use crate::state::State;

/// Draws the orphans screen into `area` (everything but the footer).
pub fn draw(state: &State, area: Rect, buf: &mut Buffer) {
    let o = &state.orphans;
    let [head, table] = Layout::vertical([Constraint::Length(2), Constraint::Min(3)]).areas(area);
    let summary = match (&o.list, &o.error) {
        (_, Some(e)) => format!("cannot list processes: {e}"),
        (None, None) => "looking…".into(),
        (Some(l), None) if l.is_empty() => "none: nothing left behind by an earlier run".into(),
        (Some(l), None) => format!(
            "{} process{} ({} resident)",
            l.len(),
            if l.len() == 1 { "" } else { "es" },
            human_bytes(o.rss())
        ),
    };
    Paragraph::new(vec![
        Line::from(vec![
            Span::styled(
                " benchtop ",
                accent(state, Color::Cyan).add_modifier(Modifier::BOLD),
            ),
            Span::raw("processes left behind by earlier runs: "),
            Span::styled(summary, Style::new().add_modifier(Modifier::BOLD)),
        ]),
        if o.left_alone > 0 {
            Line::from(Span::styled(
                format!(
                    " {} of other users left alone: `benchtop reap --all-users` as root ends them",
                    o.left_alone
                ),
                accent(state, Color::Yellow),
            ))
        } else {
            Line::from(Span::styled(
                " only processes carrying benchtop's marker whose owner (pid and start time) is gone",
                Style::new().add_modifier(Modifier::DIM),
            ))
        },
    ])
    .render(head, buf);

    let block = Block::new()
        .borders(Borders::ALL)
        .border_style(accent(state, Color::Cyan))
        .title(" orphans ");
    let inner = block.inner(table);
    block.render(table, buf);
    // The session column only where the command still fits beside it.
    let with_session = inner.width >= 110;
    let session_col = |s: &str| {
        if with_session {
            format!("{s:<26}  ")
        } else {
            String::new()
        }
    };
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "  {:>7}  {:<8}  {:>8}  {:>9}  {:<16}  {}COMMAND",
            "PID",
            "USER",
            "AGE",
            "RSS",
            "OWNER",
            session_col("SESSION")
        ),
        Style::new().add_modifier(Modifier::BOLD),
    ))];
    let rows = usize::from(inner.height.saturating_sub(1));
    let first = o.selected.saturating_sub(rows.saturating_sub(1));
    for (i, orphan) in o.list.iter().flatten().enumerate().skip(first).take(rows) {
        let secs = orphan.age.as_secs();
        let age = if secs >= 3600 {
            format!("{}h{}m", secs / 3600, secs / 60 % 60)
        } else {
            format!("{}m{}s", secs / 60, secs % 60)
        };
        let mut text = format!(
            "{} {:>7}  {:<8}  {:>8}  {:>9}  {:<16}  {}",
            if i == o.selected { "▶" } else { " " },
            orphan.pid,
            Escaped(&orphan.user).to_string(),
            age,
            human_bytes(orphan.rss_bytes),
            format!("{} ({})", orphan.owner.pid, orphan.owner_state.describe()),
            session_col(&escaped(orphan.session.as_deref().unwrap_or("-"))),
        );
        // The command in what is left, its middle given way: the program and its last
        // arguments stay.
        let room = usize::from(inner.width).saturating_sub(fit::width(&text));
        text.push_str(&fit::fit(&Escaped(&orphan.command).to_string(), room));
        let style = if i == o.selected {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::new()
        };
        lines.push(Line::from(Span::styled(text, style)));
    }
    Paragraph::new(lines).render(inner, buf);

    if let Some(confirm) = &o.confirm {
        let what = if confirm.all {
            format!("all {} orphans", o.count())
        } else {
            let pid = o
                .list
                .as_ref()
                .and_then(|l| l.get(o.selected))
                .map_or(0, |x| x.pid);
            format!("process {pid}")
        };
        let choice = |signal: ReapSignal, label: &str| {
            if confirm.signal == signal {
                Span::styled(
                    format!(" [{label}] "),
                    Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
                )
            } else {
                Span::raw(format!("  {label}  "))
            }
        };
        let width = area.width.min(64);
        let popup = Rect {
            x: area.x + (area.width - width) / 2,
            y: area.y + area.height / 2 - 2,
            width,
            height: 5.min(area.height),
        };
        Clear.render(popup, buf);
        Paragraph::new(vec![
            Line::from(format!("End {what}?")),
            Line::from(vec![
                Span::raw("signal:"),
                choice(ReapSignal::Term, "TERM, then KILL after 5 s"),
                choice(ReapSignal::Kill, "KILL"),
            ]),
            Line::from(Span::styled(
                super::keys::hints_text(&crate::state::keys::CONFIRM, state, " · "),
                Style::new().add_modifier(Modifier::DIM),
            )),
        ])
        .block(Block::new().borders(Borders::ALL).title(" confirm "))
        .render(popup, buf);
    }
}
