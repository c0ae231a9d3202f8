//! A time series as a chart people can read: bars from a zero baseline, a y axis with its
//! top, middle and zero labelled in the series' unit, and a time axis under the last
//! seconds of the window: `-60s … now` live, seconds since the start (`0s … 42s`) for a
//! recorded session. The arithmetic is in [`super::scale`].

use std::collections::VecDeque;

use benchtop_sessions::units::human_bytes;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};

use super::scale::{nice_ceiling, since_start_ticks, time_columns, time_ticks};
use crate::state::live::TimeAxis;

/// What a series' values are, for its axis labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A count or a rate (`2.5M`).
    Count,
    /// Percent (`150%`).
    Percent,
    /// Bytes, binary units (`8MiB`).
    Bytes,
}

impl Unit {
    /// The top of the axis for a largest value of `max`: a round number in this unit.
    fn top(self, max: f64) -> f64 {
        match self {
            Unit::Bytes => {
                let step = 1024f64.powi((max.max(1.0).log2() / 10.0).floor() as i32);
                nice_ceiling(max / step) * step
            }
            Unit::Count | Unit::Percent => nice_ceiling(max),
        }
    }

    /// A short label of `v` in this unit.
    fn label(self, v: f64) -> String {
        if v == 0.0 {
            return "0".into();
        }
        match self {
            Unit::Percent => format!("{}%", short(v)),
            Unit::Bytes => human_bytes(v as u64).replace(' ', ""),
            Unit::Count => {
                let (div, suffix) = if v >= 1e9 {
                    (1e9, "G")
                } else if v >= 1e6 {
                    (1e6, "M")
                } else if v >= 1e3 {
                    (1e3, "k")
                } else {
                    (1.0, "")
                };
                format!("{}{suffix}", short(v / div))
            }
        }
    }
}

/// Up to three significant digits, trailing zeros dropped (`2.5`, `10`, `1.25`).
fn short(v: f64) -> String {
    let text = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// Eighths of a cell, from one to eight.
const EIGHTHS: [&str; 8] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];

/// Draws the last `window_s` seconds of `points` (seconds since start, value) into
/// `area`: y labels on the left, bars from zero, the time axis on the bottom row (when
/// the area has two rows or more) labelled as `axis_labels` says. Nothing is drawn
/// without points.
pub fn render_series(
    points: &VecDeque<(f64, f64)>,
    window_s: f64,
    axis_labels: TimeAxis,
    unit: Unit,
    style: Style,
    area: Rect,
    buf: &mut Buffer,
) {
    let Some(&(end_s, _)) = points.back() else {
        return;
    };
    if area.height == 0 || area.width < 8 {
        return;
    }
    let axis = area.height >= 2;
    let rows = usize::from(area.height) - usize::from(axis);
    // A recorded run has nothing before its start: a window longer than the run shows
    // the run across the whole width.
    let window_s = match axis_labels {
        TimeAxis::SinceStart if end_s > 0.0 => window_s.min(end_s),
        _ => window_s,
    };
    let start = end_s - window_s;
    let max = points
        .iter()
        .filter(|&&(t, _)| t > start)
        .map(|&(_, v)| v)
        .fold(0.0f64, f64::max);
    let top = unit.top(max);
    let mut labels = vec![(0usize, unit.label(top))];
    if rows >= 2 {
        labels.push((rows - 1, "0".to_owned()));
    }
    if rows >= 5 {
        labels.push((rows / 2, unit.label(top / 2.0)));
    }
    let label_w = labels
        .iter()
        .map(|(_, l)| l.chars().count())
        .max()
        .unwrap_or(1);
    let plot_x = area.x + label_w as u16 + 1;
    let width = usize::from(area.right().saturating_sub(plot_x));
    if width == 0 {
        return;
    }
    let dim = Style::new().add_modifier(Modifier::DIM);
    for row in 0..rows {
        let y = area.y + row as u16;
        buf.set_string(area.x + label_w as u16, y, "│", dim);
    }
    for (row, text) in &labels {
        let pad = label_w - text.chars().count();
        buf.set_string(area.x + pad as u16, area.y + *row as u16, text, dim);
    }
    let columns = time_columns(points.iter().copied(), end_s, window_s, width);
    let cells = rows * 8;
    for (i, value) in columns.iter().enumerate() {
        let Some(v) = *value else { continue };
        let mut eighths = ((v.max(0.0) / top) * cells as f64).round() as usize;
        if v > 0.0 {
            eighths = eighths.max(1);
        }
        let mut eighths = eighths.min(cells);
        let x = plot_x + i as u16;
        for row in (0..rows).rev() {
            if eighths == 0 {
                break;
            }
            let fill = eighths.min(8);
            buf.set_string(x, area.y + row as u16, EIGHTHS[fill - 1], style);
            eighths -= fill;
        }
    }
    if axis {
        let y = area.bottom() - 1;
        buf.set_string(area.x + label_w as u16, y, "└", dim);
        buf.set_string(plot_x, y, "─".repeat(width), dim);
        let ticks = match axis_labels {
            TimeAxis::BeforeNow => time_ticks(width, window_s),
            TimeAxis::SinceStart => since_start_ticks(width, start, end_s),
        };
        for (col, text) in ticks {
            buf.set_string(plot_x + col as u16, y, text, dim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::tests::text;

    fn draw(points: &[(f64, f64)], unit: Unit, width: u16, height: u16) -> String {
        draw_on(TimeAxis::BeforeNow, points, unit, width, height)
    }

    fn draw_on(
        axis: TimeAxis,
        points: &[(f64, f64)],
        unit: Unit,
        width: u16,
        height: u16,
    ) -> String {
        let area = Rect::new(0, 0, width, height);
        let mut buf = Buffer::empty(area);
        let series: VecDeque<(f64, f64)> = points.iter().copied().collect();
        render_series(&series, 60.0, axis, unit, Style::new(), area, &mut buf);
        text(&buf)
    }

    #[test]
    fn labels_are_short_and_round() {
        assert_eq!(Unit::Count.label(1e7), "10M");
        assert_eq!(Unit::Count.label(1.25e6), "1.25M");
        assert_eq!(Unit::Count.label(250.0), "250");
        assert_eq!(Unit::Percent.label(150.0), "150%");
        assert_eq!(Unit::Bytes.label(8.0 * 1048576.0), "8.00MiB");
        assert_eq!(Unit::Bytes.top(7.0 * 1048576.0), 10.0 * 1048576.0);
        assert_eq!(Unit::Percent.top(97.0), 100.0);
    }

    #[test]
    fn a_rate_chart_from_zero_with_its_axes() {
        let points: Vec<(f64, f64)> = (1..=60)
            .map(|i| (f64::from(i), if i > 30 { 8.0e6 } else { 4.0e6 }))
            .collect();
        insta::assert_snapshot!(draw(&points, Unit::Count, 40, 6));
    }

    #[test]
    fn a_short_run_sits_at_the_right_of_the_window_and_one_row_still_reads() {
        let points = [(1.0, 50.0), (2.0, 100.0), (3.0, 75.0)];
        insta::assert_snapshot!(draw(&points, Unit::Percent, 30, 3));
        let one = draw(&points, Unit::Percent, 30, 1);
        assert!(one.starts_with("100%│"), "{one}");
    }

    #[test]
    fn a_recorded_run_fills_the_width_on_an_axis_of_seconds_since_its_start() {
        let points = [(1.0, 50.0), (2.0, 100.0), (3.0, 75.0)];
        let screen = draw_on(TimeAxis::SinceStart, &points, Unit::Percent, 30, 3);
        let rows: Vec<&str> = screen.lines().collect();
        assert!(
            rows[2].contains("└0s") && rows[2].trim_end().ends_with("3s"),
            "{screen}"
        );
        assert!(
            !screen.contains("now") && !screen.contains("-60s"),
            "{screen}"
        );
        // The first second is before the first interval ends; the rest is drawn.
        let bars = rows[1].split('│').nth(1).unwrap_or_default();
        let drawn = bars.chars().filter(|&c| c != ' ').count();
        assert!(drawn * 3 >= bars.chars().count() * 2, "{screen}");
    }

    #[test]
    fn half_the_top_is_half_the_height() {
        // Two columns: 5 (half of the top, 10) and 10, on four rows.
        let screen = draw(&[(51.0, 5.0), (60.0, 10.0)], Unit::Count, 10, 5);
        let rows: Vec<&str> = screen.lines().collect();
        let last = |row: &str| row.chars().last();
        assert_eq!(last(rows[0]), Some('█'), "{screen}");
        assert_eq!(last(rows[3]), Some('█'), "{screen}");
        let half = rows[1].chars().nth_back(1);
        assert_eq!(
            half,
            Some(' '),
            "half the top leaves the upper half empty:\n{screen}"
        );
        assert_eq!(rows[2].chars().nth_back(1), Some('█'), "{screen}");
        assert!(rows[4].contains("now"), "{screen}");
    }
}
