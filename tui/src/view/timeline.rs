//! The timeline strip of the live screen: one row each for throughput, latency p99 and
//! CPU, every report interval of the run side by side (several to a column when they
//! outnumber the columns), the selected part drawn reversed, the baseline part
//! underlined, the cursor's column in the accent color.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};

use crate::state::State;
use crate::state::timeline::{Point, Timeline};

/// Rows the strip takes.
pub const HEIGHT: u16 = 3;
/// Columns of each row's label.
const LABEL: u16 = 5;
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A row of the strip: its label and the value it draws of an interval.
type Series = (&'static str, fn(&Point) -> Option<f64>);

/// Whether the strip is drawn: a run of two intervals or more, with room for it.
pub fn shown(state: &State, body: Rect) -> bool {
    state.live.timeline.is_usable() && !state.maximized && body.height >= 12 + HEIGHT
}

/// Draws the strip into `area` (its [`HEIGHT`] rows).
pub fn draw(state: &State, area: Rect, buf: &mut Buffer) {
    let t = &state.live.timeline;
    if area.width <= LABEL || area.height == 0 || t.points.is_empty() {
        return;
    }
    let width = usize::from(area.width - LABEL);
    let n = t.points.len();
    // Column c holds intervals [c·n/w, (c+1)·n/w): all of them, whatever the width.
    let cols = width.min(n);
    let span = |c: usize| c * n / cols..((c + 1) * n / cols).max(c * n / cols + 1);
    let series: [Series; 3] = [
        ("rate", |p| p.rate),
        ("p99", |p| p.p99_ns.map(|v| v as f64)),
        ("cpu", |p| p.cpu_percent),
    ];
    let accent = if state.color {
        Style::new().fg(Color::Yellow)
    } else {
        Style::new().add_modifier(Modifier::BOLD)
    };
    for (row, (label, value)) in series.iter().enumerate() {
        let y = area.y + row as u16;
        if y >= area.bottom() {
            break;
        }
        buf.set_stringn(area.x, y, label, usize::from(LABEL), Style::new());
        let columns: Vec<Option<f64>> = (0..cols)
            .map(|c| {
                // The highest value of the column's intervals (a spike stays visible).
                t.points[span(c)]
                    .iter()
                    .filter_map(value)
                    .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
            })
            .collect();
        let top = columns.iter().flatten().fold(0.0f64, |a, &b| a.max(b));
        for (c, v) in columns.iter().enumerate() {
            let level = match v {
                Some(v) if top > 0.0 && v.is_finite() => {
                    let i = (v / top * (LEVELS.len() - 1) as f64).round() as usize;
                    LEVELS[i.min(LEVELS.len() - 1)]
                }
                Some(_) => LEVELS[0],
                None => ' ',
            };
            let x = area.x + LABEL + c as u16;
            let mut style = column_style(t, span(c));
            if span(c).contains(&t.cursor) || t.anchor.is_some_and(|a| span(c).contains(&a)) {
                style = style.patch(accent);
            }
            buf.set_string(x, y, level.to_string(), style);
        }
    }
}

/// The interval drawn at column `x` of the strip in `area` (several share a column when
/// they outnumber the columns: the first of them); `None` on the labels or past the last
/// column, unless `clamp`, which takes the nearest end.
pub fn interval_at(state: &State, area: Rect, x: u16, clamp: bool) -> Option<usize> {
    let n = state.live.timeline.points.len();
    if area.width <= LABEL || n == 0 {
        return None;
    }
    let cols = usize::from(area.width - LABEL).min(n);
    let column = i64::from(x) - i64::from(area.x + LABEL);
    let column = match usize::try_from(column) {
        Ok(c) if c < cols => c,
        Ok(_) if clamp => cols - 1,
        Err(_) if clamp => 0,
        _ => return None,
    };
    Some(column * n / cols)
}

/// The column's style: reversed when the selected part holds one of its intervals,
/// underlined when the baseline part does.
fn column_style(t: &Timeline, intervals: std::ops::Range<usize>) -> Style {
    let mut style = Style::new();
    let holds = |part| intervals.clone().any(|i| t.includes(part, i));
    if t.selected.is_some_and(holds) {
        style = style.add_modifier(Modifier::REVERSED);
    }
    if t.baseline.is_some_and(holds) {
        style = style.add_modifier(Modifier::UNDERLINED);
    }
    style
}

#[cfg(test)]
mod tests {
    use crate::state::timeline::example_state;
    use crate::state::{AppEvent, Key};
    use crate::view::tests::{at, render};

    #[test]
    fn an_opened_session_with_a_range_selected_at_80x24() {
        let base = std::time::Instant::now();
        let mut state = example_state();
        for c in ",,,,,,r.r".chars() {
            state.update(AppEvent::Key(Key::Char(c)), at(base, 1));
        }
        insta::assert_snapshot!(render(&state, at(base, 1), 80, 24));
    }

    #[test]
    fn the_slow_intervals_against_the_rest_at_160x48() {
        let base = std::time::Instant::now();
        let mut state = example_state();
        state.update(AppEvent::Key(Key::Char('S')), at(base, 1));
        insta::assert_snapshot!(render(&state, at(base, 1), 160, 48));
    }
}
