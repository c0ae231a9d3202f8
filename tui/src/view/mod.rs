//! The TUI's views: pure functions of the state into a buffer. They read the state and
//! the time they are given; they change nothing and read no clock.

pub mod flame;
mod panes;

use std::time::Instant;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

use crate::state::live::RunStatus;
use crate::state::{FlameKind, Pane, State};

/// Below this size the screen only says what size it needs.
pub const MIN_SIZE: (u16, u16) = (60, 18);

/// Draws the whole screen for `state` at `now` into `buf`.
pub fn draw(state: &State, now: Instant, area: Rect, buf: &mut Buffer) {
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        too_small(area, buf);
        return;
    }
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(state, now, header, buf);
    if state.maximized {
        draw_pane(state, state.focus, body, buf);
    } else {
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)])
                .areas(body);
        let [throughput, latency, resources] = Layout::vertical([
            Constraint::Percentage(28),
            Constraint::Percentage(40),
            Constraint::Percentage(32),
        ])
        .areas(left);
        draw_pane(state, Pane::Throughput, throughput, buf);
        draw_pane(state, Pane::Latency, latency, buf);
        draw_pane(state, Pane::Resources, resources, buf);
        draw_pane(state, Pane::Flame, right, buf);
    }
    draw_footer(state, footer, buf);
    if state.help {
        draw_help(state, area, buf);
    }
}

/// The style of emphasis: a color, or bold when colors are off.
fn accent(state: &State, color: Color) -> Style {
    if state.color {
        Style::new().fg(color)
    } else {
        Style::new().add_modifier(Modifier::BOLD)
    }
}

fn too_small(area: Rect, buf: &mut Buffer) {
    let text = vec![
        Line::from("benchtop needs a larger terminal"),
        Line::from(format!(
            "at least {}×{}; this one is {}×{}",
            MIN_SIZE.0, MIN_SIZE.1, area.width, area.height
        )),
        Line::from("q quits"),
    ];
    Paragraph::new(text)
        .wrap(Wrap { trim: true })
        .render(area, buf);
}

fn draw_header(state: &State, now: Instant, area: Rect, buf: &mut Buffer) {
    let run = &state.run;
    let status_color = match &run.status {
        RunStatus::Running => Color::Green,
        RunStatus::Starting | RunStatus::Stopping => Color::Yellow,
        RunStatus::Finished(benchtop_sessions::Status::Complete)
        | RunStatus::Finished(benchtop_sessions::Status::Stopped) => Color::Cyan,
        RunStatus::Finished(_) | RunStatus::Failed(_) => Color::Red,
    };
    let elapsed = match (run.started_at, run.ended_at) {
        (Some(start), Some(end)) => end.saturating_duration_since(start).as_secs(),
        (Some(start), None) => now.saturating_duration_since(start).as_secs(),
        _ => 0,
    };
    let mut first = vec![
        Span::styled(
            " benchtop ",
            accent(state, Color::Cyan).add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            run.workload.clone(),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::raw(" "),
        Span::styled(
            format!("● {}", run.status.label()),
            accent(state, status_color),
        ),
        Span::raw(format!(
            "  {:02}:{:02}:{:02}",
            elapsed / 3600,
            elapsed / 60 % 60,
            elapsed % 60
        )),
    ];
    if !run.sampling.is_empty() {
        first.push(Span::raw(format!("  {}", run.sampling)));
    }
    if state.paused {
        first.push(Span::raw("  "));
        first.push(Span::styled(
            format!(" PAUSED ({} held) ", state.held()),
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
        ));
    }
    if let Some(baseline) = &state.baseline {
        first.push(Span::raw(format!("  baseline {}", baseline.source)));
    }
    let mut second = vec![Span::raw(format!(" {}", run.params))];
    if let Some(dir) = &run.dir {
        second.push(Span::styled(
            format!("  → {}", dir.display()),
            Style::new().add_modifier(Modifier::DIM),
        ));
    }
    Paragraph::new(vec![Line::from(first), Line::from(second)]).render(area, buf);
}

fn draw_pane(state: &State, pane: Pane, area: Rect, buf: &mut Buffer) {
    let focused = state.focus == pane;
    let mut title = vec![Span::raw(format!(" {} {} ", pane.number(), pane.title()))];
    if pane == Pane::Flame {
        title.push(Span::raw(match state.flame_kind {
            FlameKind::OnCpu => "on-CPU ",
            FlameKind::OffCpu => "off-CPU ",
        }));
        if state.differential {
            title.push(Span::styled("diff ", accent(state, Color::Red)));
        }
    }
    let border = if focused {
        accent(state, Color::Cyan).add_modifier(Modifier::BOLD)
    } else {
        Style::new().add_modifier(Modifier::DIM)
    };
    let block = Block::new()
        .borders(Borders::ALL)
        .border_style(border)
        .title(Line::from(title));
    let inner = block.inner(area);
    block.render(area, buf);
    match pane {
        Pane::Throughput => panes::throughput(state, inner, buf),
        Pane::Latency => panes::latency(state, inner, buf),
        Pane::Resources => panes::resources(state, inner, buf),
        Pane::Flame => {
            flame::render_flame(state.flame(), inner, buf, focused, state.color);
        }
    }
}

/// The keys that work where the focus is, or the flash message, or the search line.
fn draw_footer(state: &State, area: Rect, buf: &mut Buffer) {
    let line = if let Some(query) = &state.search_input {
        Line::from(vec![
            Span::styled("/", accent(state, Color::Yellow)),
            Span::raw(format!("{query}▏")),
            Span::styled(
                "  Enter keep · Esc clear",
                Style::new().add_modifier(Modifier::DIM),
            ),
        ])
    } else if let Some(flash) = &state.flash {
        let style = if flash.error {
            accent(state, Color::Red)
        } else {
            accent(state, Color::Yellow)
        };
        Line::from(Span::styled(format!(" {}", flash.text), style))
    } else {
        let pane_keys = match state.focus {
            Pane::Flame => "←↓↑→ select  Enter zoom  Esc out  / search  n/N  o on/off-CPU  ",
            Pane::Throughput | Pane::Resources => "+/- time  ",
            Pane::Latency => "",
        };
        let over = if state.run.status.is_over() {
            "q quit"
        } else {
            "q stop+quit"
        };
        Line::from(vec![
            Span::styled(format!(" {pane_keys}"), accent(state, Color::Cyan)),
            Span::raw(format!(
                "b baseline  d diff  space pause  e max  Tab focus  ? help  {over}"
            )),
        ])
    };
    Paragraph::new(line).render(area, buf);
}

/// Every key, in a box over the screen.
fn draw_help(state: &State, area: Rect, buf: &mut Buffer) {
    let keys: &[(&str, &str)] = &[
        (
            "q, Ctrl-C",
            "stop the workload, write the session, quit (twice: at once)",
        ),
        (
            "Esc",
            "back out: zoom out, leave a maximized pane, close help",
        ),
        ("? , F1", "this help"),
        ("Tab, Shift-Tab", "focus the next, previous pane"),
        ("1-4", "focus throughput, latency, resources, flamegraph"),
        ("e", "maximize the focused pane (again: restore)"),
        ("space", "pause the display (the recording goes on)"),
        ("+ / -", "narrow / widen the time window of the series"),
        ("b", "take the current profile and latency as the baseline"),
        ("d", "flamegraph: difference against the baseline"),
        ("arrows, hjkl", "flamegraph: select a frame"),
        ("Enter", "flamegraph: zoom into the selected frame"),
        (
            "/ , n, N",
            "flamegraph: search frames, next, previous match",
        ),
        ("o", "flamegraph: on-CPU / off-CPU stacks"),
    ];
    let width = area.width.min(78);
    let height = (keys.len() as u16 + 4).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    Clear.render(popup, buf);
    let lines: Vec<Line> = keys
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!(" {k:<15}"), accent(state, Color::Cyan)),
                Span::raw(*what),
            ])
        })
        .collect();
    Paragraph::new(lines)
        .block(
            Block::new()
                .borders(Borders::ALL)
                .title(" keys — any key closes "),
        )
        .render(popup, buf);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use benchtop_profilers::Snapshot;
    use benchtop_sessions::timeseries::ThreadCpu;
    use benchtop_sessions::{ContextSwitches, Resources, StackTree, TimeseriesRow};
    use hdrhistogram::Histogram;

    use super::*;
    use crate::record::live::LiveEvent;
    use crate::state::{AppEvent, Key};

    /// The text of a buffer, one line per row (trailing spaces trimmed).
    fn text(buf: &Buffer) -> String {
        let area = buf.area;
        let mut out = String::new();
        for y in 0..area.height {
            let mut line = String::new();
            for x in 0..area.width {
                line.push_str(buf[(x, y)].symbol());
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    fn render(state: &State, now: Instant, width: u16, height: u16) -> String {
        let area = Rect::new(0, 0, width, height);
        let mut buf = Buffer::empty(area);
        draw(state, now, area, &mut buf);
        text(&buf)
    }

    fn tree(stacks: &[(&str, u64)]) -> StackTree {
        let mut t = StackTree::new();
        for (stack, weight) in stacks {
            t.add_names(stack.split(';'), *weight);
        }
        t
    }

    /// A ring run twelve seconds in: three intervals, stacks, resources.
    fn running(base: Instant) -> State {
        let mut s = State::new(
            "ring",
            "mode=tell num-nodes=5000 num-rounds=2000 runtime-threads=1",
            true,
        );
        let ev = |s: &mut State, e: LiveEvent, at: u64| {
            s.update(AppEvent::Live(e), base + Duration::from_secs(at));
        };
        ev(
            &mut s,
            LiveEvent::Spawned {
                dir: "sessions/20261123-120000-ring".into(),
                pid: 4242,
            },
            0,
        );
        ev(
            &mut s,
            LiveEvent::Started {
                throughput: Some("messages".into()),
                latency: Some("lap".into()),
                sampling: "cpu-clock 999 Hz".into(),
            },
            0,
        );
        for i in 1..=3u32 {
            let mut row = TimeseriesRow::default();
            row.t_s = f64::from(i);
            row.interval_s = 1.0;
            row.rates
                .insert("messages".into(), 8.0e6 + f64::from(i) * 1e5);
            let mut r = Resources::default();
            r.rss_bytes = 6 << 20;
            r.peak_rss_bytes = 7 << 20;
            r.threads = 3;
            r.processes = 1;
            r.cpu_percent = 99.0;
            r.ctx_switches_interval = Some(ContextSwitches::new(120, 4));
            row.resources = Some(r);
            row.cpu_percent_per_core = vec![97.0, 12.5];
            row.top_threads = vec![ThreadCpu::new(4242, 4242, "bt-ring", "bt-ring", 98.5)];
            let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
            for v in [480_000u64, 500_000, 510_000, 620_000, 1_900_000] {
                h.record_n(v, u64::from(i) * 100).unwrap();
            }
            ev(
                &mut s,
                LiveEvent::Row {
                    row: Box::new(row),
                    histograms: vec![("lap".into(), h)],
                },
                u64::from(i),
            );
        }
        let mut snapshot = Snapshot::default();
        snapshot.cpu = tree(&[
            ("bt-ring;main;run;ring::actors::hop;mailbox::send", 600),
            ("bt-ring;main;run;ring::actors::hop;mailbox::recv", 250),
            ("bt-ring;main;run;tokio::park", 100),
            ("bt-ring;benchtop-ticker;sleep", 50),
        ]);
        ev(&mut s, LiveEvent::Stacks(Box::new(snapshot)), 3);
        s
    }

    fn at(base: Instant, secs: u64) -> Instant {
        base + Duration::from_secs(secs)
    }

    #[test]
    fn the_live_screen_at_80x24() {
        let base = Instant::now();
        let s = running(base);
        insta::assert_snapshot!(render(&s, at(base, 12), 80, 24));
    }

    #[test]
    fn the_live_screen_at_160x48() {
        let base = Instant::now();
        let s = running(base);
        insta::assert_snapshot!(render(&s, at(base, 12), 160, 48));
    }

    #[test]
    fn a_terminal_too_small_says_what_size_it_needs() {
        let base = Instant::now();
        let s = running(base);
        let screen = render(&s, at(base, 12), 50, 10);
        assert!(
            screen.contains("at least 60×18; this one is 50×10"),
            "{screen}"
        );
        insta::assert_snapshot!(screen);
    }

    #[test]
    fn the_help_overlay_lists_the_keys() {
        let base = Instant::now();
        let mut s = running(base);
        s.update(AppEvent::Key(Key::Char('?')), at(base, 12));
        insta::assert_snapshot!(render(&s, at(base, 12), 80, 24));
    }

    #[test]
    fn paused_with_a_baseline_and_the_difference_maximized() {
        let base = Instant::now();
        let mut s = running(base);
        for key in [
            Key::Char('b'),
            Key::Char('d'),
            Key::Char('e'),
            Key::Char(' '),
        ] {
            s.update(AppEvent::Key(key), at(base, 12));
        }
        let screen = render(&s, at(base, 12), 80, 24);
        assert!(screen.contains("PAUSED"), "{screen}");
        assert!(screen.contains("diff"), "{screen}");
        insta::assert_snapshot!(screen);
    }

    #[test]
    fn a_finished_run_shows_its_status_and_the_elapsed_time_stops() {
        let base = Instant::now();
        let mut s = running(base);
        let outcome = crate::record::RecordOutcome {
            dir: "sessions/20261123-120000-ring".into(),
            status: benchtop_sessions::Status::Crashed,
            summary: Vec::new(),
            warnings: vec!["the worker ended before its summary (signal 9)".into()],
        };
        s.update(AppEvent::Finished(Ok(outcome)), at(base, 5));
        let screen = render(&s, at(base, 30), 80, 24);
        assert!(screen.contains("● crashed  00:00:05"), "{screen}");
        assert!(screen.contains("signal 9"), "{screen}");
    }

    #[test]
    fn views_survive_every_small_size() {
        let base = Instant::now();
        let s = running(base);
        for (w, h) in [(0, 0), (1, 1), (60, 18), (61, 19), (80, 24)] {
            render(&s, at(base, 1), w, h);
        }
        render(&State::new("ring", "", false), base, 80, 24);
    }
}
