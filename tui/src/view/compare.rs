//! The compare screen (`benchtop open A B`): which sessions, the figures with their
//! verdicts, both latency histograms on one scale, and B's flamegraph against A's.

use benchtop_sessions::compare::{TABLE_HEAD, Verdict};
use benchtop_sessions::escape::{Escaped, escaped};
use benchtop_sessions::units::{human_count, human_ns};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::panes::PERCENTILES;
use super::{accent, fit, scale};
use crate::state::State;
use crate::state::compare::{ComparePane, LatencyOverlay};
use crate::state::live::LatencyBin;

/// Draws the compare screen into `area` (the screen above the footer).
pub fn draw(state: &State, area: Rect, buf: &mut Buffer) {
    let [header, body] = Layout::vertical([Constraint::Length(2), Constraint::Min(0)]).areas(area);
    draw_header(state, header, buf);
    for (pane, rect) in panes(state, body) {
        draw_pane(state, pane, rect, buf);
    }
}

/// The pane at column `x`, row `y` of `area` (the screen above the footer).
pub fn pane_at(state: &State, area: Rect, x: u16, y: u16) -> Option<ComparePane> {
    let [_, body] = Layout::vertical([Constraint::Length(2), Constraint::Min(0)]).areas(area);
    panes(state, body)
        .into_iter()
        .find(|(_, r)| r.contains(ratatui::layout::Position::new(x, y)))
        .map(|(pane, _)| pane)
}

/// Where each pane goes in `body`: the figures over the latency on the left, the
/// flamegraph on the right; the focused one alone when maximized.
fn panes(state: &State, body: Rect) -> Vec<(ComparePane, Rect)> {
    if state.maximized {
        return vec![(state.compare.focus, body)];
    }
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(body);
    let [table, latency] =
        Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(left);
    vec![
        (ComparePane::Table, table),
        (ComparePane::Latency, latency),
        (ComparePane::Flame, right),
    ]
}

fn draw_header(state: &State, area: Rect, buf: &mut Buffer) {
    let c = &state.compare;
    let side = |label: &str, color: Color, side: &Option<crate::state::compare::Side>| {
        let mut spans = vec![Span::styled(
            format!(" {label} "),
            accent(state, color).add_modifier(Modifier::BOLD),
        )];
        if let Some(s) = side {
            spans.push(Span::styled(
                escaped(&s.id).into_owned(),
                Style::new().add_modifier(Modifier::BOLD),
            ));
            spans.push(Span::raw(format!("  {}  ", Escaped(&s.what))));
            spans.push(Span::styled(
                escaped(&s.status).into_owned(),
                Style::new().add_modifier(Modifier::DIM),
            ));
        }
        Line::from(spans)
    };
    let mut first = side("A", Color::Blue, &c.a);
    first.spans.insert(
        0,
        Span::styled(
            " benchtop compare",
            accent(state, Color::Cyan).add_modifier(Modifier::BOLD),
        ),
    );
    Paragraph::new(vec![
        first,
        side(&format!("{:>17}", "B"), Color::Magenta, &c.b),
    ])
    .render(area, buf);
}

fn draw_pane(state: &State, pane: ComparePane, area: Rect, buf: &mut Buffer) {
    let focused = state.compare.focus == pane;
    let mut title = vec![Span::raw(format!(" {} {} ", pane.number(), pane.title()))];
    if pane == ComparePane::Flame {
        title = vec![Span::raw(format!(
            " {} {} ",
            pane.number(),
            state.compare.flames.views.kind.title()
        ))];
        title.push(Span::raw(format!(
            "{} ",
            state.compare.flames.kind.spec().pane_title
        )));
        if state.compare.flames.differential {
            title.push(Span::styled(
                "diff: B against A ",
                accent(state, Color::Red),
            ));
        } else {
            title.push(Span::raw("of B "));
        }
    }
    let inner = super::pane_frame(state, focused, title, area, buf);
    match pane {
        ComparePane::Table => table(state, inner, buf),
        ComparePane::Latency => match &state.compare.latency {
            Some(overlay) => latency(state, overlay, inner, buf),
            None => {
                Paragraph::new("no latency metric recorded by both sessions").render(inner, buf)
            }
        },
        ComparePane::Flame => {
            if state.flame().is_empty() {
                let flames = &state.compare.flames;
                Paragraph::new(format!(
                    "no {} stacks in B (o: {})",
                    flames.kind.spec().pane_title,
                    flames.next_kind().spec().pane_title
                ))
                .render(inner, buf);
            } else {
                super::draw_flame_pane(state.flames(), inner, buf, focused, state.color);
            }
        }
    }
}

/// The figures: warnings first, then one row per figure from the scroll position, the
/// verdict in colour, and how verdicts are judged at the bottom.
fn table(state: &State, area: Rect, buf: &mut Buffer) {
    let c = &state.compare;
    let mut lines: Vec<Line> = c
        .warnings
        .iter()
        .map(|w| {
            Line::from(Span::styled(
                fit::fit_prose(&format!("⚠ {}", Escaped(w)), usize::from(area.width)).into_owned(),
                accent(state, Color::Yellow),
            ))
        })
        .collect();
    let cells: Vec<[String; 6]> = c.figures.iter().map(|f| f.cells()).collect();
    let mut widths = TABLE_HEAD.map(str::len);
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // The judgement first (change and verdict), then the values, the interval last: a
    // narrow pane leaves out whole columns from the last (the interval, then B, then A),
    // never part of one. The figure's name gives way first (its middle elided, as its
    // end tells figures apart: `p50`, `p99`) down to 14 characters.
    const SHOWN: [(usize, bool); 6] = [
        (0, true),
        (3, false),
        (5, true),
        (1, false),
        (2, false),
        (4, true),
    ];
    let room = usize::from(area.width);
    let needs = |n: usize, name: usize| {
        SHOWN[1..n]
            .iter()
            .map(|&(i, _)| widths[i] + 1)
            .sum::<usize>()
            + name
    };
    let mut columns = SHOWN.len();
    while columns > 3 && needs(columns, widths[0].min(14)) > room {
        columns -= 1;
    }
    widths[0] = widths[0].min(room.saturating_sub(needs(columns, 0)).max(14));
    let row = |cells: [&str; 6]| {
        let mut line = String::new();
        for &(i, left) in &SHOWN[..columns] {
            let cell = if i == 0 {
                fit::fit(cells[0], widths[0])
            } else {
                cells[i].into()
            };
            if i != 0 {
                line.push(' ');
            }
            let pad = " ".repeat(widths[i].saturating_sub(fit::width(&cell)));
            if left {
                line.push_str(&cell);
                // The last column ends the line.
                if i != SHOWN[columns - 1].0 {
                    line.push_str(&pad);
                }
            } else {
                line.push_str(&pad);
                line.push_str(&cell);
            }
        }
        line
    };
    lines.push(Line::from(Span::styled(
        row(TABLE_HEAD),
        Style::new().add_modifier(Modifier::BOLD),
    )));
    let room = usize::from(area.height)
        .saturating_sub(lines.len() + 1)
        .max(1);
    for (f, cells) in c.figures.iter().zip(&cells).skip(c.scroll).take(room) {
        let text = row([
            &cells[0], &cells[1], &cells[2], &cells[3], &cells[4], &cells[5],
        ]);
        let style = match f.change.verdict {
            Verdict::Regressed => accent(state, Color::Red),
            Verdict::Improved => accent(state, Color::Green),
            Verdict::Changed => accent(state, Color::Yellow),
            _ => Style::new(),
        };
        lines.push(Line::from(Span::styled(text, style)));
    }
    let below = c.figures.len().saturating_sub(c.scroll + room);
    let mut note = if c.judged == 0 {
        "one run a side: no verdicts (record series: run … --runs 5)".to_owned()
    } else {
        format!(
            "{:.0}% for all {} judged together; same inside ±{:.1}%",
            (1.0 - c.alpha) * 100.0,
            c.judged,
            c.threshold * 100.0
        )
    };
    if below > 0 {
        note.push_str(&format!("  ↓ {below} more"));
    }
    lines.push(Line::from(Span::styled(
        fit::fit_prose(&note, usize::from(area.width)).into_owned(),
        Style::new().add_modifier(Modifier::DIM),
    )));
    Paragraph::new(lines).render(area, buf);
}

/// Columns of the percentile table beside the latency bars.
const NUMBERS_WIDTH: u16 = 30;
/// The narrowest the latency bars are drawn beside the table: a label and a few cells.
const BARS_MIN_WIDTH: u16 = 20;

/// Both histograms: two bars per bin (A above B) beside the percentiles of each.
fn latency(state: &State, overlay: &LatencyOverlay, area: Rect, buf: &mut Buffer) {
    // Side by side when the bars have room beside the percentiles; otherwise the
    // percentiles first and the bars in the rows left under them.
    let [bars, numbers] = if area.width >= NUMBERS_WIDTH + BARS_MIN_WIDTH {
        // A column apart, so a full bar never runs into the table.
        let [bars, _, numbers] = Layout::horizontal([
            Constraint::Min(0),
            Constraint::Length(1),
            Constraint::Length(NUMBERS_WIDTH),
        ])
        .areas(area);
        [bars, numbers]
    } else {
        let [numbers, bars] = Layout::vertical([
            Constraint::Length(PERCENTILES.len() as u16 + 2),
            Constraint::Min(0),
        ])
        .areas(area);
        [bars, numbers]
    };
    let bins = &overlay.bins;
    let per_bin = 2;
    let rows = usize::from(bars.height.saturating_sub(1)) / per_bin;
    // The bins of either side's p50, max, p99.9 and p99 first: the tail is always on
    // screen; a `⋮` says bins were left out before a bin.
    let edges: Vec<LatencyBin> = bins
        .iter()
        .enumerate()
        .map(|(i, b)| LatencyBin {
            low: b.low,
            // A bin ends where the next starts; the last holds everything above.
            high: bins.get(i + 1).map_or(u64::MAX, |next| next.low),
            count: b.a + b.b,
        })
        .collect();
    let (a, b) = (&overlay.a, &overlay.b);
    let must: Vec<usize> = [a.p50, b.p50, a.max, b.max, a.p999, b.p999, a.p99, b.p99]
        .into_iter()
        .filter_map(|v| scale::bin_of(&edges, v))
        .collect();
    let counts: Vec<u64> = edges.iter().map(|e| e.count).collect();
    let drawn = scale::bins_to_draw(&counts, &must, rows);
    let gaps = scale::left_out_before(&drawn);
    let left_out = bins.len() - drawn.len();
    let shown: Vec<_> = drawn.iter().map(|&i| &bins[i]).collect();
    // Each side's share of its own values, so sessions of different lengths compare.
    let total_a = bins.iter().map(|b| b.a).sum::<u64>().max(1) as f64;
    let total_b = bins.iter().map(|b| b.b).sum::<u64>().max(1) as f64;
    let most = shown
        .iter()
        .map(|b| (b.a as f64 / total_a).max(b.b as f64 / total_b))
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let label = 9usize;
    let room = usize::from(bars.width).saturating_sub(label + 1);
    let bar = |share: f64| {
        let len = (share / most * room as f64).ceil() as usize;
        // Any share shows as one cell at least, when there is a cell to show it in.
        "█".repeat(if share > 0.0 {
            len.min(room).max(room.min(1))
        } else {
            0
        })
    };
    let title = format!("{}, share per bin  ", overlay.metric);
    let note = format!("  ⋮ {left_out} bins left out");
    let show_note = left_out > 0 && fit::width(&title) + 3 + fit::width(&note) <= bars.width.into();
    let mut lines = vec![Line::from(vec![
        Span::styled(title, Style::new().add_modifier(Modifier::BOLD)),
        Span::styled("A", accent(state, Color::Blue)),
        Span::raw(" "),
        Span::styled("B", accent(state, Color::Magenta)),
        Span::styled(
            if show_note { note } else { String::new() },
            Style::new().add_modifier(Modifier::DIM),
        ),
    ])];
    for (b, &gap) in shown.iter().zip(&gaps) {
        lines.push(Line::from(vec![
            Span::raw(format!("{:>8}", human_ns(b.low as f64))),
            Span::styled(
                if gap > 0 { "⋮" } else { " " },
                Style::new().add_modifier(Modifier::DIM),
            ),
            Span::styled(bar(b.a as f64 / total_a), accent(state, Color::Blue)),
        ]));
        lines.push(Line::from(vec![
            Span::raw(" ".repeat(label)),
            Span::styled(bar(b.b as f64 / total_b), accent(state, Color::Magenta)),
        ]));
    }
    Paragraph::new(lines).render(bars, buf);

    let percent = |a: u64, b: u64| {
        if a == 0 {
            String::new()
        } else {
            format!("{:+.1}%", (b as f64 / a as f64 - 1.0) * 100.0)
        }
    };
    let mut lines = vec![Line::from(Span::styled(
        "          A        B  change",
        Style::new().add_modifier(Modifier::BOLD),
    ))];
    for (name, get) in PERCENTILES {
        let (a, b) = (get(&overlay.a), get(&overlay.b));
        lines.push(Line::from(format!(
            "{name:<5}{:>8} {:>8} {:>7}",
            human_ns(a as f64),
            human_ns(b as f64),
            percent(a, b)
        )));
    }
    lines.push(Line::from(format!(
        "count{:>8} {:>8}",
        human_count(overlay.a.count as f64),
        human_count(overlay.b.count as f64)
    )));
    Paragraph::new(lines).render(numbers, buf);
}
