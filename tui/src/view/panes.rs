//! The series and numbers panes of the live screen: throughput, latency, resources.

use benchtop_sessions::escape::Escaped;
use std::collections::VecDeque;

use benchtop_sessions::units::{human_bytes, human_count, human_ns};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline, Widget};

use super::accent;
use crate::state::State;
use crate::state::live::LatencySummary;

/// Throughput over the time window: a sparkline, one column per slice of the window.
pub fn throughput(state: &State, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let run = &state.live.run;
    let metric = run.throughput_metric.as_deref().unwrap_or("throughput");
    let [head, chart] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    let now_text = match run.current_rate() {
        Some(rate) => format!("{}/s", human_count(rate)),
        None => "waiting for the first interval".into(),
    };
    let peak = window(&run.throughput, state.window_s)
        .map(|&(_, r)| r)
        .fold(0.0f64, f64::max);
    Paragraph::new(Line::from(vec![
        Span::styled(
            format!("{} ", Escaped(metric)),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::raw(now_text),
        Span::styled(
            format!(
                "  peak {}/s  last {:.0} s",
                human_count(peak),
                state.window_s
            ),
            Style::new().add_modifier(Modifier::DIM),
        ),
    ]))
    .render(head, buf);
    let data = columns(
        window(&run.throughput, state.window_s).map(|&(t, r)| (t, r)),
        chart.width,
    );
    Sparkline::default()
        .data(&data)
        .style(accent(state, Color::Green))
        .render(chart, buf);
}

/// The points of `series` within the last `window_s` seconds.
fn window<T>(series: &VecDeque<(f64, T)>, window_s: f64) -> impl Iterator<Item = &(f64, T)> {
    let last = series.back().map_or(0.0, |&(t, _)| t);
    series.iter().filter(move |&&(t, _)| t > last - window_s)
}

/// At most `width` values for a sparkline: the mean of each slice when there are more
/// points than columns.
fn columns(points: impl Iterator<Item = (f64, f64)>, width: u16) -> Vec<u64> {
    let values: Vec<f64> = points.map(|(_, v)| v.max(0.0)).collect();
    let width = usize::from(width).max(1);
    if values.len() <= width {
        return values.iter().map(|&v| v as u64).collect();
    }
    let per = values.len().div_ceil(width);
    values
        .chunks(per)
        .map(|c| (c.iter().sum::<f64>() / c.len() as f64) as u64)
        .collect()
}

/// The latency histogram of the whole run (log-scaled bins) beside its percentiles.
pub fn latency(state: &State, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    // A part of the run picked on the timeline, else the whole run.
    let latency = (state.live.timeline.latency_shown.as_ref()).unwrap_or(&state.live.run.latency);
    if latency.total.histogram().is_none() {
        let text = if latency.metric.is_empty() {
            "no latency metric yet"
        } else {
            "waiting for the first interval"
        };
        Paragraph::new(text).render(area, buf);
        return;
    }
    let table_width = if state.live.baseline.is_some() {
        31
    } else {
        22
    };
    let [bars, table] =
        Layout::horizontal([Constraint::Min(0), Constraint::Length(table_width)]).areas(area);
    // Bars: one line per bin, as many of the fullest consecutive bins as fit.
    let rows = usize::from(bars.height.saturating_sub(1));
    let bins = &latency.bins;
    let start = if bins.len() > rows {
        // The window of `rows` bins with the most values.
        (0..=bins.len() - rows)
            .max_by_key(|&i| bins[i..i + rows].iter().map(|b| b.count).sum::<u64>())
            .unwrap_or(0)
    } else {
        0
    };
    let shown = &bins[start..(start + rows).min(bins.len())];
    let most = shown.iter().map(|b| b.count).max().unwrap_or(1).max(1);
    let label_width = 8usize;
    let bar_room = usize::from(bars.width).saturating_sub(label_width + 1);
    let mut lines = vec![Line::from(Span::styled(
        match state.live.timeline.selected {
            Some(part) => format!(
                "{}, {}",
                Escaped(&latency.metric),
                state.live.timeline.label(part)
            ),
            None => format!("{}, whole run", Escaped(&latency.metric)),
        },
        Style::new().add_modifier(Modifier::BOLD),
    ))];
    for bin in shown {
        let len = (bin.count as f64 / most as f64 * bar_room as f64).ceil() as usize;
        let len = if bin.count == 0 { 0 } else { len.max(1) };
        lines.push(Line::from(vec![
            Span::raw(format!("{:>7} ", human_ns(bin.low as f64))),
            Span::styled("█".repeat(len.min(bar_room)), accent(state, Color::Blue)),
        ]));
    }
    Paragraph::new(lines).render(bars, buf);

    let baseline = state.live.baseline.as_ref().map(|b| b.latency);
    let mut lines = vec![Line::from(Span::styled(
        match baseline {
            Some(_) => "      run     last    base",
            None => "      run     last",
        },
        Style::new().add_modifier(Modifier::BOLD),
    ))];
    for (name, get) in PERCENTILES {
        let mut text = format!(
            "{name:<5}{:>8} {:>8}",
            human_ns(get(&latency.run) as f64),
            human_ns(get(&latency.last) as f64)
        );
        if let Some(b) = &baseline {
            text.push_str(&format!(" {:>8}", human_ns(get(b) as f64)));
        }
        lines.push(Line::from(text));
    }
    lines.push(Line::from(format!(
        "count{:>8} {:>8}",
        human_count(latency.run.count as f64),
        human_count(latency.last.count as f64)
    )));
    lines.push(Line::from(Span::styled(
        "as recorded (closed loop)",
        Style::new().add_modifier(Modifier::DIM),
    )));
    Paragraph::new(lines).render(table, buf);
}

/// A row of the percentile table: its name and how to read it from a summary.
pub(super) type Percentile = (&'static str, fn(&LatencySummary) -> u64);

/// The rows of the percentile tables.
pub(super) const PERCENTILES: [Percentile; 5] = [
    ("p50", |s| s.p50),
    ("p90", |s| s.p90),
    ("p99", |s| s.p99),
    ("p99.9", |s| s.p999),
    ("max", |s| s.max),
];

/// RSS (figure and sparkline), threads and processes, context switches, per-core CPU.
pub fn resources(state: &State, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let run = &state.live.run;
    let Some(r) = run.resources else {
        Paragraph::new("waiting for the first interval").render(area, buf);
        return;
    };
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut top = vec![
        Line::from(vec![
            Span::styled("RSS ", bold),
            Span::raw(format!(
                "{}  peak {}",
                human_bytes(r.rss_bytes),
                human_bytes(r.peak_rss_bytes.max(r.rss_bytes))
            )),
        ]),
        Line::from(vec![
            Span::styled("threads ", bold),
            Span::raw(format!("{}  ", r.threads)),
            Span::styled("procs ", bold),
            Span::raw(format!("{}  ", r.processes.max(1))),
            Span::styled("CPU ", bold),
            Span::raw(format!("{:.0}%", r.cpu_percent)),
        ]),
    ];
    if let Some(ctx) = r.ctx_switches_interval {
        top.push(Line::from(vec![
            Span::styled("switches ", bold),
            Span::raw(format!(
                "{} vol {} invol /interval",
                human_count(ctx.voluntary as f64),
                human_count(ctx.involuntary as f64)
            )),
        ]));
    }
    let cores = run.cpu_per_core.len() as u16;
    let [text, spark, bars] = Layout::vertical([
        Constraint::Length(top.len() as u16),
        Constraint::Length(if area.height > cores + 3 { 2 } else { 1 }),
        Constraint::Min(0),
    ])
    .areas(area);
    Paragraph::new(top).render(text, buf);
    let rss = columns(
        window(&run.rss, state.window_s).map(|&(t, b)| (t, b as f64)),
        spark.width,
    );
    Sparkline::default()
        .data(&rss)
        .style(accent(state, Color::Magenta))
        .render(spark, buf);
    let label = 6usize;
    let room = usize::from(bars.width).saturating_sub(label + 5);
    let lines: Vec<Line> = run
        .cpu_per_core
        .iter()
        .enumerate()
        .map(|(i, &pct)| {
            let fill = ((pct / 100.0) * room as f64).round() as usize;
            Line::from(vec![
                Span::raw(format!("cpu{i:<3}")),
                Span::styled("▮".repeat(fill.min(room)), accent(state, Color::Green)),
                Span::styled(
                    "·".repeat(room - fill.min(room)),
                    Style::new().add_modifier(Modifier::DIM),
                ),
                Span::raw(format!("{pct:>4.0}%")),
            ])
        })
        .chain(run.top_threads.iter().map(|(process, thread, pct)| {
            Line::from(Span::styled(
                format!("{pct:>5.1}%  {} ({})", Escaped(thread), Escaped(process)),
                Style::new().add_modifier(Modifier::DIM),
            ))
        }))
        .collect();
    Paragraph::new(lines).render(bars, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_at_a_glance() {
        assert_eq!(human_count(950.0), "950");
        assert_eq!(human_count(12_345.0), "12.3 k");
        assert_eq!(human_count(8_200_000.0), "8.20 M");
        assert_eq!(human_count(1.05e9), "1.05 G");
    }

    #[test]
    fn more_points_than_columns_are_averaged_per_slice() {
        let points = (0..10).map(|i| (f64::from(i), f64::from(i)));
        assert_eq!(columns(points, 5), [0, 2, 4, 6, 8]);
        let few = (0..3).map(|i| (f64::from(i), 7.0));
        assert_eq!(columns(few, 5), [7, 7, 7]);
    }

    #[test]
    fn the_window_keeps_the_last_seconds_only() {
        let series: VecDeque<(f64, f64)> = (1..=100).map(|i| (f64::from(i), 1.0)).collect();
        assert_eq!(window(&series, 10.0).count(), 10);
    }
}
