//! The history screen: what was read, the figures of every history (the one drawn
//! marked), the figure drawn over its points with the segments between change points and
//! the change points marked (the selected one heavier), and the selected change point in
//! words with what Enter opens.

use benchtop_sessions::escape::{Escaped, EscapedPath};
use benchtop_sessions::history::{FigureHistory, History};
use benchtop_sessions::meta::Better;
use benchtop_sessions::units::{human_bytes, human_count, human_figure};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

use super::accent;
use super::fit::fit;
use crate::state::State;
use crate::state::history::HistoryState;
use benchtop_sessions::compare::Verdict;

/// Draws the history screen into `area` (everything but the footer).
pub fn draw(state: &State, area: Rect, buf: &mut Buffer) {
    let [header, body, detail] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(6),
        Constraint::Length(5),
    ])
    .areas(area);
    draw_header(state, header, buf);
    let h = &state.history;
    if h.figures.is_empty() {
        let mut lines = vec![Line::from(format!(
            " No history under {}: no session or series that ended complete.",
            roots(h)
        ))];
        lines.extend(
            h.found
                .warnings
                .iter()
                .take(usize::from(body.height.saturating_sub(2)))
                .map(|w| Line::from(format!(" {}", Escaped(w)))),
        );
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .render(body, buf);
        return;
    }
    let list_width = (body.width / 3).clamp(22, 40);
    let [list, chart] =
        Layout::horizontal([Constraint::Length(list_width), Constraint::Min(0)]).areas(body);
    draw_figures(state, list, buf);
    draw_chart(state, chart, buf);
    draw_detail(state, detail, buf);
}

/// The directories read, as the header names them.
fn roots(h: &HistoryState) -> String {
    h.roots
        .iter()
        .map(|r| EscapedPath(r).to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn draw_header(state: &State, area: Rect, buf: &mut Buffer) {
    let h = &state.history;
    let dim = Style::new().add_modifier(Modifier::DIM);
    let recordings: usize = h
        .found
        .histories
        .iter()
        .map(|x| x.points.iter().map(|p| p.dirs.len()).sum::<usize>())
        .sum();
    let left_out = match h.found.warnings.len() {
        0 => String::new(),
        1 => " · a warning (`benchtop history` says it)".to_owned(),
        n => format!(" · {n} warnings (`benchtop history` lists them)"),
    };
    let histories = match h.found.histories.len() {
        1 => "1 history".to_owned(),
        n => format!("{n} histories"),
    };
    let first = Line::from(vec![
        Span::styled(
            " benchtop history ",
            accent(state, Color::Cyan).add_modifier(Modifier::BOLD),
        ),
        Span::raw(fit(&roots(h), usize::from(area.width / 2)).into_owned()),
        Span::styled(
            format!(" · {histories} · {recordings} recordings{left_out}"),
            dim,
        ),
    ]);
    let second = match h.shown() {
        Some((history, _)) => Line::from(vec![
            Span::raw(format!(" {}", history.key)),
            Span::styled(
                format!(
                    " · {} points, ordered by {}",
                    history.points.len(),
                    history.ordered_by
                ),
                dim,
            ),
        ]),
        None => Line::default(),
    };
    Paragraph::new(vec![first, second]).render(area, buf);
}

fn block<'a>(state: &State, title: String) -> Block<'a> {
    Block::new()
        .borders(Borders::ALL)
        .border_style(Style::new().add_modifier(Modifier::DIM))
        .title(Span::styled(
            title,
            accent(state, Color::Cyan).add_modifier(Modifier::BOLD),
        ))
}

/// How the newest point's verdict, or a figure's change points, colour it.
fn verdict_style(state: &State, verdict: Option<Verdict>) -> Style {
    match verdict {
        Some(Verdict::Regressed) => accent(state, Color::Red),
        Some(Verdict::Improved) => accent(state, Color::Green),
        _ => Style::new(),
    }
}

/// The figures of every history, a line each: the one drawn marked, its change points
/// counted; a figure whose newest point regressed in red.
fn draw_figures(state: &State, area: Rect, buf: &mut Buffer) {
    let h = &state.history;
    let block = block(state, " figures ".into());
    let inner = block.inner(area);
    block.render(area, buf);
    let rows = usize::from(inner.height);
    if rows == 0 {
        return;
    }
    // The selected figure stays in view.
    let first = h.selected.saturating_sub(rows - 1);
    let width = usize::from(inner.width);
    let many = h.found.histories.len() > 1;
    let lines: Vec<Line> = h
        .figures
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, &(hi, fi))| {
            let f = &h.found.histories[hi].figures[fi];
            let mark = if i == h.selected { "▶" } else { " " };
            let count = match f.changes.len() {
                0 => String::new(),
                n => format!(" {n}▴"),
            };
            let history = if many {
                format!("{} ", hi + 1)
            } else {
                String::new()
            };
            let room = width.saturating_sub(2 + history.len() + count.chars().count());
            let name = fit(&Escaped(&f.name).to_string(), room).into_owned();
            let style = verdict_style(state, f.newest.as_ref().map(|c| c.verdict));
            let style = if i == h.selected {
                style.add_modifier(Modifier::REVERSED)
            } else {
                style
            };
            Line::from(vec![
                Span::raw(mark),
                Span::styled(format!("{history}{name:<room$}{count} "), style),
            ])
        })
        .collect();
    Paragraph::new(lines).render(inner, buf);
}

/// A value in the figure's unit, short, for the y axis.
fn axis_label(v: f64, unit: &str) -> String {
    match unit {
        "bytes" => human_bytes(v.max(0.0) as u64).replace(' ', ""),
        "/s" | "" | "%" => human_count(v).replace(' ', ""),
        unit => human_figure(v, unit).replace(' ', ""),
    }
}

/// The figure's unit and better direction, in words.
fn unit_words(f: &FigureHistory) -> String {
    let better = match f.better {
        Some(Better::Higher) => "higher is better",
        Some(Better::Lower) => "lower is better",
        _ => "",
    };
    match (f.unit.is_empty(), better.is_empty()) {
        (true, _) => better.to_owned(),
        (false, true) => f.unit.clone(),
        (false, false) => format!("{}, {better}", f.unit),
    }
}

fn draw_chart(state: &State, area: Rect, buf: &mut Buffer) {
    let Some((history, figure)) = state.history.shown() else {
        return;
    };
    let title = format!(
        " {} ({}) over {} points ",
        Escaped(&figure.name),
        unit_words(figure),
        figure.points.len()
    );
    let title = fit(&title, usize::from(area.width.saturating_sub(2))).into_owned();
    let block = block(state, title);
    let inner = block.inner(area);
    block.render(area, buf);
    let marks = Marks {
        change: accent(state, Color::Yellow).add_modifier(Modifier::BOLD),
        point: accent(state, Color::Cyan),
        dim: Style::new().add_modifier(Modifier::DIM),
    };
    plot(history, figure, state.history.change, &marks, inner, buf);
}

/// The styles of the chart's marks.
struct Marks {
    /// The selected change point.
    change: Style,
    /// A point's value.
    point: Style,
    /// Segment levels, spreads, other change points, axes.
    dim: Style,
}

/// The figure over its points in `area`: the y axis on the left (top, middle and bottom
/// labelled), a column per point (points share a column when there are more than
/// columns), each point's value `•` over its runs' range `│` (an outlier `×`), each
/// segment's level `─`, each change point a `┊` line just before its first point, or
/// through it when the points are packed (the selected one `┃`), and the x axis with the first and last points' numbers and the selected
/// change point's.
fn plot(
    history: &History,
    figure: &FigureHistory,
    selected: usize,
    marks: &Marks,
    area: Rect,
    buf: &mut Buffer,
) {
    let n = figure.points.len();
    if n == 0 || area.height < 4 || area.width < 16 {
        return;
    }
    let (lo, hi) = figure
        .points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.low.min(p.value)), hi.max(p.high.max(p.value)))
        });
    let pad = ((hi - lo) * 0.05)
        .max(hi.abs() * 0.005)
        .max(f64::MIN_POSITIVE);
    let (lo, hi) = (lo - pad, hi + pad);
    let rows = usize::from(area.height) - 1;
    let labels = [hi, (hi + lo) / 2.0, lo].map(|v| axis_label(v, &figure.unit));
    let label_w = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let x0 = area.x + label_w as u16 + 1;
    let cols = usize::from(area.width).saturating_sub(label_w + 1);
    if cols < 4 {
        return;
    }
    let col = |i: usize| -> u16 {
        let c = if n <= 1 { 0 } else { i * (cols - 1) / (n - 1) };
        x0 + c as u16
    };
    let row = |v: f64| -> u16 {
        let f = ((hi - v) / (hi - lo)).clamp(0.0, 1.0);
        area.y + (f * (rows - 1) as f64).round() as u16
    };
    let set = |buf: &mut Buffer, x: u16, y: u16, symbol: &str, style: Style| {
        buf[(x, y)].set_symbol(symbol).set_style(style);
    };
    // The y axis.
    for y in area.y..area.y + rows as u16 {
        set(buf, x0 - 1, y, "│", marks.dim);
    }
    for (label, y) in labels.iter().zip([
        area.y,
        area.y + (rows as u16 - 1) / 2,
        area.y + rows as u16 - 1,
    ]) {
        buf.set_string(
            area.x + (label_w - label.chars().count()) as u16,
            y,
            label,
            marks.dim,
        );
        set(buf, x0 - 1, y, "┤", marks.dim);
    }
    // Each segment's level (the geometric mean of its points).
    let mut bounds = vec![0];
    bounds.extend(figure.changes.iter().map(|c| c.at));
    bounds.push(n);
    for pair in bounds.windows(2) {
        let points = &figure.points[pair[0]..pair[1]];
        if points.is_empty() {
            continue;
        }
        let level = (points.iter().map(|p| p.value.ln()).sum::<f64>() / points.len() as f64).exp();
        let y = row(level);
        for x in col(pair[0])..=col(pair[1] - 1) {
            set(buf, x, y, "─", marks.dim);
        }
    }
    // Where a change point's line goes: in the gap before its first point where there
    // is one, else through it.
    let line_x = |at: usize| {
        let x = col(at);
        if at > 0 && col(at - 1) + 1 < x {
            x - 1
        } else {
            x
        }
    };
    // The change points, before the points so that no point is hidden.
    for (k, c) in figure.changes.iter().enumerate() {
        let x = line_x(c.at);
        let (symbol, style) = if k == selected {
            ("┃", marks.change)
        } else {
            ("┊", marks.dim)
        };
        for y in area.y..area.y + rows as u16 {
            if buf[(x, y)].symbol() == " " || k == selected {
                set(buf, x, y, symbol, style);
            }
        }
    }
    for (i, p) in figure.points.iter().enumerate() {
        let x = col(i);
        for y in row(p.high)..=row(p.low) {
            if buf[(x, y)].symbol() != "•" {
                set(buf, x, y, "│", marks.dim);
            }
        }
        let symbol = if figure.outliers.contains(&i) {
            "×"
        } else {
            "•"
        };
        set(buf, x, row(p.value), symbol, marks.point);
    }
    // The x axis: the first and last points' numbers, and the selected change point's.
    let y = area.y + rows as u16;
    let end = x0 + cols as u16;
    for x in x0..end {
        set(buf, x, y, "─", marks.dim);
    }
    set(buf, x0 - 1, y, "└", marks.dim);
    let number = |i: usize| history.points[figure.points[i].point].name.clone();
    let first = short_point(&number(0));
    buf.set_string(x0, y, &first, marks.dim);
    let last = short_point(&number(n - 1));
    let last_x = end.saturating_sub(last.chars().count() as u16).max(x0);
    buf.set_string(last_x, y, &last, marks.dim);
    if let Some(c) = figure.changes.get(selected) {
        let text = format!("▲{}", short_point(&number(c.at)));
        let x = line_x(c.at).min(end.saturating_sub(text.chars().count() as u16));
        buf.set_string(x, y, &text, marks.change);
    }
}

/// `point 80 (c080)` as the axis says it: `80`.
fn short_point(name: &str) -> String {
    name.trim_start_matches("point ")
        .split(' ')
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The selected change point in words, and what Enter opens; without one, the newest
/// point's verdict.
fn draw_detail(state: &State, area: Rect, buf: &mut Buffer) {
    let h = &state.history;
    let Some((_, figure)) = h.shown() else {
        return;
    };
    let dim = Style::new().add_modifier(Modifier::DIM);
    let pct = |c: f64| format!("{:+.1}%", c * 100.0);
    let mut lines = Vec::new();
    let title = match (h.selected_change(), h.segments()) {
        (Some(c), Some(segments)) => {
            let ci = c.change.ci.map_or(String::new(), |(lo, hi)| {
                format!(" [{}, {}]", pct(lo), pct(hi))
            });
            lines.push(Line::from(vec![
                Span::styled(
                    format!("{}{ci} {}", pct(c.change.change), c.change.verdict_text()),
                    verdict_style(state, Some(c.change.verdict)).add_modifier(Modifier::BOLD),
                ),
                Span::raw(format!(" from {}, p = {:.3}", c.after, c.p_value)),
            ]));
            lines.push(Line::from(vec![
                Span::styled("Enter: ", dim),
                Span::raw(format!(
                    "{} against {}",
                    segments.before.name, segments.after.name
                )),
            ]));
            format!(
                " change point {} of {} ",
                h.change + 1,
                figure.changes.len()
            )
        }
        _ => {
            lines.push(Line::from(
                "No change point: the figure holds within its noise (E-divisive means, α = 1 %).",
            ));
            " no change point ".to_owned()
        }
    };
    if let Some(newest) = &figure.newest {
        lines.push(Line::from(vec![
            Span::styled("newest point: ", dim),
            Span::styled(
                format!("{} {}", pct(newest.change), newest.verdict_text()),
                verdict_style(state, Some(newest.verdict)),
            ),
        ]));
    }
    let block = block(state, title);
    Paragraph::new(lines)
        .block(block)
        .wrap(Wrap { trim: false })
        .render(area, buf);
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::state::history::HistoryState;
    use crate::state::{AppEvent, Effect, Key, Screen};
    use benchtop_sessions::history::{self, HistoryOptions};
    use benchtop_sessions::synthetic::SyntheticHistory;
    use std::time::Instant;

    /// A history of 60 points with a +30 % step at 20 and a −25 % one at 42, read as
    /// `open DIR` reads it (no profiles), its directory named `results`.
    pub(crate) fn history_state(color: bool) -> State {
        let root = tempfile::tempdir().unwrap();
        let mut spec = SyntheticHistory::new(60, 0.01, 7);
        spec.steps = vec![(20, 0.3), (42, -0.25)];
        spec.write(root.path()).unwrap();
        let mut opts = HistoryOptions::default();
        opts.profiles = false;
        let found = history::load(&[root.path().to_path_buf()], &opts).unwrap();
        let mut state = State::new("history", "", color);
        state.screen = Screen::History;
        state.history = HistoryState::new(vec!["results".into()], found);
        state
    }

    fn render(state: &State, w: u16, h: u16) -> String {
        crate::view::tests::render(state, Instant::now(), w, h)
    }

    #[test]
    fn a_history_at_80x24() {
        insta::assert_snapshot!(render(&history_state(false), 80, 24));
    }

    #[test]
    fn a_history_at_160x48() {
        insta::assert_snapshot!(render(&history_state(false), 160, 48));
    }

    #[test]
    fn the_second_change_point_selected_at_160x48() {
        let mut s = history_state(false);
        s.update(AppEvent::Key(Key::Right), Instant::now());
        insta::assert_snapshot!(render(&s, 160, 48));
    }

    #[test]
    fn the_chart_marks_each_change_point_and_the_selected_one_heavier() {
        let mut s = history_state(false);
        let (history, figure) = s.history.shown().unwrap();
        assert_eq!(figure.name, "laps/s", "the first figure with change points");
        assert_eq!(figure.changes.len(), 2);
        let at: Vec<usize> = figure
            .changes
            .iter()
            .map(|c| figure.points[c.at].point)
            .collect();
        assert!(at[0].abs_diff(20) <= 1 && at[1].abs_diff(42) <= 1, "{at:?}");
        assert_eq!(history.points.len(), 60);
        let screen = render(&s, 160, 48);
        let heavy = screen.lines().filter(|l| l.contains('┃')).count();
        let light = screen.lines().filter(|l| l.contains('┊')).count();
        assert!(heavy > 20 && light > 20, "{screen}");
        assert!(screen.contains(&format!("▲{}", at[0])), "{screen}");
        assert!(screen.contains("change point 1 of 2"), "{screen}");
        s.update(AppEvent::Key(Key::Char('l')), Instant::now());
        let screen = render(&s, 160, 48);
        assert!(screen.contains(&format!("▲{}", at[1])), "{screen}");
        assert!(screen.contains("change point 2 of 2"), "{screen}");
    }

    #[test]
    fn enter_on_a_change_point_asks_for_its_segments_and_esc_comes_back() {
        let mut s = history_state(false);
        let effects = s.update(AppEvent::Key(Key::Enter), Instant::now());
        let [Effect::OpenSegments(segments)] = effects.as_slice() else {
            panic!("{effects:?}");
        };
        assert_eq!(segments.before.dirs.len(), 20);
        assert_eq!(segments.after.dirs.len(), 20);
        // What the loop answers with: the compare screen of the two segments.
        let opened = crate::view::tests::comparing();
        s.update(AppEvent::Opened(Ok(Box::new(opened))), Instant::now());
        assert_eq!(s.screen, Screen::Compare);
        s.update(AppEvent::Key(Key::Esc), Instant::now());
        assert_eq!(s.screen, Screen::History);
        assert_eq!(s.history.change, 0, "the change point stays selected");
    }

    #[test]
    fn a_directory_without_recordings_says_so() {
        let root = tempfile::tempdir().unwrap();
        let found = history::load(&[root.path().to_path_buf()], &HistoryOptions::default());
        let mut state = State::new("history", "", false);
        state.screen = Screen::History;
        state.history = HistoryState::new(vec!["empty".into()], found.unwrap());
        let screen = render(&state, 80, 24);
        assert!(screen.contains("No history under empty"), "{screen}");
    }
}
