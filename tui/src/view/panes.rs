//! The series and numbers panes of the live screen: throughput, latency, resources.

use benchtop_sessions::escape::Escaped;

use benchtop_sessions::units::{human_bytes, human_count, human_ns};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::accent;
use super::chart::{Unit, render_series};
use super::{fit, scale};
use crate::state::State;
use crate::state::live::{Latency, LatencySummary};
use crate::state::timeline::Part;

/// Throughput over the time window: a chart from zero with its axes (a program that
/// names no throughput: its process tree's CPU).
pub fn throughput(state: &State, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let run = &state.live.run;
    if run.shows_activity() {
        return super::program::cpu(state, area, buf);
    }
    let metric = run.throughput_metric.as_deref().unwrap_or("throughput");
    let [head, chart] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    // Live, the last interval's rate; a recorded session's, the run's mean. The peak is
    // the highest interval of the run, whatever the window shows.
    let (rate, said) = if run.recorded {
        (run.mean_rate(), "mean ")
    } else {
        (run.current_rate(), "")
    };
    let now_text = match rate {
        Some(rate) => format!("{said}{}/s", human_count(rate)),
        None if run.recorded => "none recorded".into(),
        None => "waiting for the first interval".into(),
    };
    let mut spans = vec![
        Span::styled(
            format!("{} ", Escaped(metric)),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::raw(now_text),
    ];
    if let Some(peak) = run.peak_rate() {
        spans.push(Span::styled(
            format!("  peak {}/s", human_count(peak)),
            Style::new().add_modifier(Modifier::DIM),
        ));
    }
    Paragraph::new(Line::from(spans)).render(head, buf);
    render_series(
        &run.throughput,
        state.window_s,
        run.time_axis(),
        Unit::Count,
        accent(state, Color::Green),
        chart,
        buf,
    );
}

/// The latency histogram of the whole run (log-scaled bins) beside its percentiles.
pub fn latency(state: &State, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    if state.live.run.shows_activity() {
        return super::program::activity(state, area, buf);
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
    // The percentile table beside the bars when both fit; else the bars alone, their
    // markers saying where the percentiles fall (`e` maximizes the pane for the table).
    let with_table = area.width >= table_width + MIN_BARS_WIDTH;
    // A column apart, so a bar's markers never run into the table.
    let [bars, _, table] = Layout::horizontal([
        Constraint::Min(0),
        Constraint::Length(u16::from(with_table)),
        Constraint::Length(if with_table { table_width } else { 0 }),
    ])
    .areas(area);
    latency_bars(state, latency, bars, buf);
    if !with_table {
        return;
    }
    let baseline = state.live.baseline.as_ref().map(|b| b.latency);
    let mut lines = vec![Line::from(Span::styled(
        {
            // The first column is what the pane shows: the run, or the part of it picked
            // on the timeline.
            let shown = match state.live.timeline.selected {
                None => "run",
                Some(Part::Range(..)) => "range",
                Some(Part::Slow) => "slow",
                Some(Part::Rest) => "others",
            };
            let base = if baseline.is_some() { "    base" } else { "" };
            format!("{shown:>9}     last{base}")
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
        "closed-loop figures",
        Style::new().add_modifier(Modifier::DIM),
    )));
    Paragraph::new(lines).render(table, buf);
}

/// The narrowest the bars get beside the table: a range label, markers and some bar.
const MIN_BARS_WIDTH: u16 = 30;

/// The latency histogram's bars: one line per bin, labelled by the bin's range, its
/// length on a log scale of count (so that the tail shows), the percentiles that fall in
/// it marked after it. When the bins do not all fit, those holding p50, max, p99.9 and
/// p99 are drawn first ([`scale::bins_to_draw`]), so the tail is always on screen; a `⋮`
/// before a bin's bar says bins were left out before it, and the title says how many.
fn latency_bars(state: &State, latency: &Latency, area: Rect, buf: &mut Buffer) {
    let rows = usize::from(area.height.saturating_sub(1));
    let bins = &latency.bins;
    let run = &latency.run;
    let must: Vec<usize> = [run.p50, run.max, run.p999, run.p99]
        .into_iter()
        .filter_map(|v| scale::bin_of(bins, v))
        .collect();
    let counts: Vec<u64> = bins.iter().map(|b| b.count).collect();
    let drawn = scale::bins_to_draw(&counts, &must, rows);
    let gaps = scale::left_out_before(&drawn);
    let left_out = bins.len() - drawn.len();
    let percentiles: Vec<(&str, u64)> = PERCENTILES
        .iter()
        .map(|&(name, get)| (name, get(run)))
        .collect();
    let all_marks = scale::markers(bins, &percentiles);
    let marks: Vec<String> = drawn
        .iter()
        .map(|&i| {
            let m = &all_marks[i];
            if m.is_empty() {
                String::new()
            } else {
                format!(" ◂{}", m.join(","))
            }
        })
        .collect();
    let most = drawn
        .iter()
        .map(|&i| bins[i].count)
        .max()
        .unwrap_or(1)
        .max(1);
    // The markers take at most half of what the labels leave; past it they lose their
    // middle, keeping the last percentile named.
    let room = usize::from(area.width).saturating_sub(scale::RANGE_LABEL_WIDTH + 1);
    let mark_width = marks
        .iter()
        .map(|m| fit::width(m))
        .max()
        .unwrap_or(0)
        .min(room / 2);
    let bar_room = room.saturating_sub(mark_width).max(1);
    let dim = Style::new().add_modifier(Modifier::DIM);
    let title = match state.live.timeline.selected {
        Some(part) => format!(
            "{}, {}",
            Escaped(&latency.metric),
            state.live.timeline.label(part)
        ),
        None => format!("{}, whole run", Escaped(&latency.metric)),
    };
    let notes = if left_out > 0 {
        [
            format!("  ⋮ {left_out} bins left out"),
            format!("  ⋮ {left_out} left out"),
        ]
    } else {
        ["  count, log scale".to_owned(), String::new()]
    };
    // The note that fits beside the title, else none: never one cut in a word.
    let room_for_note = usize::from(area.width).saturating_sub(fit::width(&title));
    let note = notes
        .into_iter()
        .find(|n| fit::width(n) <= room_for_note)
        .unwrap_or_default();
    let mut lines = vec![Line::from(vec![
        Span::styled(title, Style::new().add_modifier(Modifier::BOLD)),
        Span::styled(note, dim),
    ])];
    for ((&i, mark), &gap) in drawn.iter().zip(&marks).zip(&gaps) {
        let bin = bins[i];
        let len = scale::log_bar_len(bin.count, most, bar_room);
        lines.push(Line::from(vec![
            Span::raw(format!(
                "{:>width$}",
                scale::range_label(bin.low, bin.high),
                width = scale::RANGE_LABEL_WIDTH
            )),
            Span::styled(if gap > 0 { "⋮" } else { " " }, dim),
            Span::styled("█".repeat(len), accent(state, Color::Blue)),
            Span::styled(
                fit::fit(mark, mark_width).into_owned(),
                accent(state, Color::Yellow),
            ),
        ]));
    }
    Paragraph::new(lines).render(area, buf);
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
    // The tree's sum and its peak at an interval (older rows: their mixed peak), and of
    // several processes the largest one process reached.
    let tree_peak = r
        .tree_peak_rss_bytes
        .unwrap_or(r.peak_rss_bytes)
        .max(r.rss_bytes);
    let mut rss = vec![
        Span::styled("RSS ", bold),
        Span::raw(format!(
            "{}  peak {}",
            human_bytes(r.rss_bytes),
            human_bytes(tree_peak)
        )),
    ];
    if r.tree_peak_rss_bytes.is_some() && r.processes > 1 {
        rss.push(Span::styled(
            format!("  largest proc {}", human_bytes(r.peak_rss_bytes)),
            Style::new().add_modifier(Modifier::DIM),
        ));
    }
    let mut top = vec![Line::from(rss)];
    if let Some((live, rate)) = run.allocation {
        // Beside RSS: what the worker's allocator holds, and how fast it allocates.
        let mut line = vec![Span::styled("live ", bold), Span::raw(human_bytes(live))];
        if let Some(rate) = rate {
            line.push(Span::styled("  alloc ", bold));
            line.push(Span::raw(format!("{}/s", human_bytes(rate as u64))));
        }
        top.push(Line::from(line));
    }
    top.extend([Line::from(vec![
        Span::styled("threads ", bold),
        Span::raw(format!("{}  ", r.threads)),
        Span::styled("procs ", bold),
        Span::raw(format!("{}  ", r.processes.max(1))),
        Span::styled("CPU ", bold),
        Span::raw(format!("{:.0}%", r.cpu_percent)),
    ])]);
    if let Some(ctx) = r.ctx_switches_interval {
        top.push(Line::from(vec![
            Span::styled("switches ", bold),
            Span::raw(format!(
                "{} vol {} invol",
                human_count(ctx.voluntary as f64),
                human_count(ctx.involuntary as f64)
            )),
            Span::raw(" /interval"),
        ]));
    }
    // Each line's label and first figure stay; what follows gives way whole.
    let width = usize::from(area.width);
    let top: Vec<Line> = top
        .into_iter()
        .map(|line| Line::from(fit::fit_spans(line.spans, width, 2)))
        .collect();
    let cores = run.cpu_per_core.len() as u16;
    let rest = area.height.saturating_sub(top.len() as u16);
    // The RSS chart takes what the cores leave, two rows (a bar and the time axis) at
    // least and six at most.
    let chart_rows = rest.saturating_sub(cores).clamp(rest.min(2), 6);
    let [text, chart, bars] = Layout::vertical([
        Constraint::Length(top.len() as u16),
        Constraint::Length(chart_rows),
        Constraint::Min(0),
    ])
    .areas(area);
    Paragraph::new(top).render(text, buf);
    render_series(
        &run.rss,
        state.window_s,
        run.time_axis(),
        Unit::Bytes,
        accent(state, Color::Magenta),
        chart,
        buf,
    );
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
    fn a_tree_s_rss_peaks_beside_its_sum_and_the_largest_process_is_said_apart() {
        let draw = |r: benchtop_sessions::timeseries::Resources| {
            let mut state = State::new("ring", "", false);
            state.live.run.resources = Some(r);
            let area = Rect::new(0, 0, 60, 4);
            let mut buf = Buffer::empty(area);
            resources(&state, area, &mut buf);
            crate::view::tests::text(&buf)
        };
        let mut r = benchtop_sessions::timeseries::Resources::default();
        (r.rss_bytes, r.processes) = (30 << 20, 3);
        r.peak_rss_bytes = 12 << 20;
        r.tree_peak_rss_bytes = Some(40 << 20);
        let screen = draw(r);
        assert!(
            screen.contains("RSS 30.0 MiB  peak 40.0 MiB  largest proc 12.0 MiB"),
            "{screen}"
        );
        // A row of before: one peak, never below the sum.
        r.tree_peak_rss_bytes = None;
        let screen = draw(r);
        assert!(screen.contains("RSS 30.0 MiB  peak 30.0 MiB"), "{screen}");
        assert!(!screen.contains("largest"), "{screen}");
    }
}
