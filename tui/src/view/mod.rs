//! The TUI's views: pure functions of the state into a buffer. They read the state and
//! the time they are given; they change nothing and read no clock. The footer and the
//! help are drawn in `keys`, from the key tables.

mod ab;
#[cfg(test)]
mod catalog_tests;
mod chart;
mod compare;
pub mod fit;
pub mod flame;
mod history;
mod keys;
mod launcher;
#[cfg(test)]
mod memory_tests;
mod orphans;
mod panes;
mod picker;
pub mod picture;
pub mod profile_views;
mod program;
mod scale;
mod timeline;
#[cfg(test)]
mod waits_tests;

use benchtop_sessions::escape::{Escaped, escaped};
use std::time::Instant;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

use crate::state::live::RunStatus;
use crate::state::{Pane, Screen, State};

/// Below this size the screen only says what size it needs.
pub const MIN_SIZE: (u16, u16) = (60, 18);

/// Draws the whole screen for `state` at `now` into `buf`.
pub fn draw(state: &State, now: Instant, area: Rect, buf: &mut Buffer) {
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        too_small(area, buf);
        return;
    }
    let [screen, footer] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(area);
    match state.screen {
        Screen::Launcher => launcher::draw(state, screen, buf),
        Screen::Orphans => orphans::draw(state, screen, buf),
        Screen::Live => draw_live(state, now, screen, buf),
        Screen::Compare => compare::draw(state, screen, buf),
        Screen::Ab => ab::draw(state, screen, buf),
        Screen::History => history::draw(state, screen, buf),
    }
    keys::draw_footer(state, now, footer, buf);
    if state.help {
        // Over the screen; the footer says the help's own keys.
        keys::draw_help(state, screen, buf);
    }
}

/// The live run: header, then the panes (or the focused one, maximized).
fn draw_live(state: &State, now: Instant, area: Rect, buf: &mut Buffer) {
    let [header, _] = Layout::vertical([Constraint::Length(2), Constraint::Min(0)]).areas(area);
    draw_header(state, now, header, buf);
    if let Some(strip) = timeline_strip(state, area) {
        timeline::draw(state, strip, buf);
    }
    for (pane, rect) in live_panes(state, area) {
        draw_pane(state, pane, rect, buf);
    }
}

/// Where each pane of the live screen goes in `area` (the screen above the footer): the
/// focused one alone when maximized.
fn live_panes(state: &State, area: Rect) -> Vec<(Pane, Rect)> {
    let [_, mut body] = Layout::vertical([Constraint::Length(2), Constraint::Min(0)]).areas(area);
    if timeline::shown(state, body) {
        [_, body] = Layout::vertical([Constraint::Length(timeline::HEIGHT), Constraint::Min(0)])
            .areas(body);
    }
    if state.maximized {
        return vec![(state.focus, body)];
    }
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(body);
    let [throughput, latency, resources] = Layout::vertical([
        Constraint::Percentage(28),
        Constraint::Percentage(40),
        Constraint::Percentage(32),
    ])
    .areas(left);
    vec![
        (Pane::Throughput, throughput),
        (Pane::Latency, latency),
        (Pane::Resources, resources),
        (Pane::Flame, right),
    ]
}

/// Where the timeline strip goes: the top of the body, when it is shown.
fn timeline_strip(state: &State, area: Rect) -> Option<Rect> {
    let [_, body] = Layout::vertical([Constraint::Length(2), Constraint::Min(0)]).areas(area);
    timeline::shown(state, body).then_some(Rect {
        height: timeline::HEIGHT,
        ..body
    })
}

/// The live screen's pane at column `x`, row `y` of a terminal of `area`, for the mouse.
pub fn pane_at(state: &State, area: Rect, x: u16, y: u16) -> Option<Pane> {
    if state.screen != Screen::Live || area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        return None;
    }
    let [screen, _] = Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(area);
    live_panes(state, screen)
        .into_iter()
        .find(|(_, r)| r.contains(ratatui::layout::Position::new(x, y)))
        .map(|(pane, _)| pane)
}

/// The interval of the timeline strip at column `x`, row `y` of a terminal of `area`, for
/// the mouse; with `clamp` (a drag going on) any row, and a column past either end of
/// the strip gives the interval at that end.
pub fn timeline_at(state: &State, area: Rect, x: u16, y: u16, clamp: bool) -> Option<usize> {
    if state.screen != Screen::Live
        || state.help
        || area.width < MIN_SIZE.0
        || area.height < MIN_SIZE.1
    {
        return None;
    }
    let [screen, _] = Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(area);
    let strip = timeline_strip(state, screen)?;
    if !clamp && !strip.contains(ratatui::layout::Position::new(x, y)) {
        return None;
    }
    timeline::interval_at(state, strip, x, clamp)
}

/// The compare screen's pane at column `x`, row `y` of a terminal of `area`.
pub fn compare_pane_at(
    state: &State,
    area: Rect,
    x: u16,
    y: u16,
) -> Option<crate::state::compare::ComparePane> {
    if state.screen != Screen::Compare || area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        return None;
    }
    let [screen, _] = Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(area);
    compare::pane_at(state, screen, x, y)
}

/// The style of emphasis: a color, or bold when colors are off.
fn accent(state: &State, color: Color) -> Style {
    if state.color {
        Style::new().fg(color)
    } else {
        Style::new().add_modifier(Modifier::BOLD)
    }
}

/// Below the minimum: the size needed first, so that even a sliver of a terminal shows
/// the start of it, then the size it has and how to leave.
fn too_small(area: Rect, buf: &mut Buffer) {
    let text = vec![
        Line::from(format!(
            "{}×{} or more needed; this terminal is {}×{}",
            MIN_SIZE.0, MIN_SIZE.1, area.width, area.height
        )),
        Line::from("benchtop: make the terminal larger, or q quits"),
    ];
    Paragraph::new(text)
        .wrap(Wrap { trim: true })
        .render(area, buf);
}

fn draw_header(state: &State, now: Instant, area: Rect, buf: &mut Buffer) {
    let run = &state.live.run;
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
            escaped(&run.workload),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::raw(" "),
        Span::styled(
            format!("● {}", run.status_label()),
            accent(state, status_color),
        ),
        Span::raw(format!(
            "  {:02}:{:02}:{:02}",
            elapsed / 3600,
            elapsed / 60 % 60,
            elapsed % 60
        )),
    ];
    if state.live.paused {
        first.push(Span::raw("  "));
        first.push(Span::styled(
            format!(" PAUSED ({} held) ", state.held()),
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
        ));
    }
    if let Some(baseline) = &state.live.baseline {
        first.push(Span::raw(format!(
            "  baseline {}",
            Escaped(&baseline.source)
        )));
    }
    if !run.sampling.is_empty() {
        first.push(Span::raw(format!("  {}", run.sampling)));
    }
    let width = usize::from(area.width);
    // The name, the status and the time stay; the sampling, then the baseline, then the
    // pause give way.
    let first = fit::fit_spans(first, width, 5);
    let second = fit::fit_spans(header_details(state, status_color, width), width, 1);
    Paragraph::new(vec![Line::from(first), Line::from(second)]).render(area, buf);
}

/// The header's second line in `width` columns: how the run ended and what the collector
/// missed first, then the parameters, the session's directory and the pid. The
/// parameters give way first (whole words, then all), then the pid, then the
/// directory's middle: where the session is matters more than what is already on the
/// command line.
fn header_details(state: &State, status_color: Color, width: usize) -> Vec<Span<'static>> {
    let run = &state.live.run;
    let mut second = Vec::new();
    if !run.status_line.is_empty() && run.status != RunStatus::Running {
        // Starting, stopping, how the run ended (SIGTERM to a worker that ignored stop…),
        // before anything else on the line.
        second.push(Span::styled(
            format!(" {}", Escaped(&run.status_line)),
            accent(state, status_color),
        ));
    }
    if let Some(drops) = &run.stream_drops {
        // What the collector did not get; the flash said it in full.
        second.push(Span::styled(
            format!(" OTLP: {} dropped ({})", drops.dropped(), drops.reason()),
            accent(state, Color::Yellow),
        ));
    }
    let dim = Style::new().add_modifier(Modifier::DIM);
    // Set apart from what went before by two spaces, as the header's parts are.
    let lead = if second.is_empty() { " " } else { "  " };
    let params = (!run.params.is_empty()).then(|| format!("{lead}{}", Escaped(&run.params)));
    let mut dir = run
        .dir
        .as_ref()
        .map(|dir| format!("  → {}", Escaped(&dir.to_string_lossy())));
    let mut pid = run.pid.map(|pid| format!("  pid {pid}"));
    let fixed: usize = second.iter().map(|s| fit::width(&s.content)).sum();
    let tail = |dir: &Option<String>, pid: &Option<String>| {
        dir.as_deref().map_or(0, fit::width) + pid.as_deref().map_or(0, fit::width)
    };
    // The fewest columns worth giving the parameters: a word or two.
    const PARAMS_AT_LEAST: usize = 16;
    let wanted = params.as_deref().map_or(0, fit::width);
    let mut room = width.saturating_sub(fixed + tail(&dir, &pid));
    if room < wanted && room < PARAMS_AT_LEAST {
        pid = None;
        room = width.saturating_sub(fixed + tail(&dir, &pid));
    }
    match params {
        Some(params) if room >= wanted => second.push(Span::raw(params)),
        Some(params) if room >= PARAMS_AT_LEAST => {
            // The words that fit whole, then ` …`.
            let words = fit::wrap(&params, room - lead.len() - 2);
            let first = words.first().map_or("", String::as_str);
            second.push(Span::raw(format!("{lead}{first} {}", fit::ELLIPSIS)));
        }
        // No parameters shown: the directory in what is left, its middle given way.
        _ => dir = dir.map(|d| fit::fit(&d, width.saturating_sub(fixed)).into_owned()),
    }
    second.extend(dir.map(|d| Span::styled(d, dim)));
    second.extend(pid.map(|p| Span::styled(p, dim)));
    second
}

fn draw_pane(state: &State, pane: Pane, area: Rect, buf: &mut Buffer) {
    let focused = state.focus == pane;
    let mut title = vec![Span::raw(format!(
        " {} {} ",
        pane.number(),
        program::title(state, pane)
    ))];
    if pane == Pane::Flame {
        title = vec![Span::raw(format!(
            " {} {} ",
            pane.number(),
            state.live.flames.views.kind.title()
        ))];
        title.push(Span::raw(format!(
            "{} ",
            state.live.flames.kind.spec().pane_title
        )));
        if state.live.flames.differential {
            title.push(Span::styled("diff ", accent(state, Color::Red)));
        }
    }
    let inner = pane_frame(state, focused, title, area, buf);
    match pane {
        Pane::Throughput => panes::throughput(state, inner, buf),
        Pane::Latency => panes::latency(state, inner, buf),
        Pane::Resources => panes::resources(state, inner, buf),
        Pane::Flame => draw_flame_pane(state.flames(), inner, buf, focused, state.color),
    }
}

/// The flame pane's inside: the flamegraph, or the view shown in its place.
fn draw_flame_pane(
    flames: &crate::state::flame_panes::FlamePanes,
    inner: Rect,
    buf: &mut Buffer,
    focused: bool,
    color: bool,
) {
    if flames.views.kind == crate::state::profile_views::ViewKind::Flame {
        flame::render_flame(flames.shown(), inner, buf, focused, color);
    } else {
        profile_views::render_views(flames, inner, buf, focused, color);
    }
}

/// A pane's border and title (bold and coloured when focused, dim otherwise), drawn
/// into `area`; returns the area inside.
fn pane_frame(
    state: &State,
    focused: bool,
    title: Vec<Span<'static>>,
    area: Rect,
    buf: &mut Buffer,
) -> Rect {
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
    inner
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use benchtop_sessions::synthetic::TreeChunks;
    use benchtop_sessions::timeseries::ThreadCpu;
    use benchtop_sessions::{ContextSwitches, Kind, Resources, StackTree, TimeseriesRow};
    use hdrhistogram::Histogram;

    use super::*;
    use crate::record::live::LiveEvent;
    use crate::state::launcher::LauncherFocus;
    use crate::state::{AppEvent, Effect, Key};

    /// The text of a buffer, one line per row (trailing spaces trimmed).
    pub(super) fn text(buf: &Buffer) -> String {
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

    pub(crate) fn render(state: &State, now: Instant, width: u16, height: u16) -> String {
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
    pub(super) fn running(base: Instant) -> State {
        running_with(base, &ring_cpu(), &RING_LAP.map(|v| (v, 100)))
    }

    /// The on-CPU profile of [`running`].
    pub(super) fn ring_cpu() -> StackTree {
        tree(&[
            ("bt-ring;main;run;ring::actors::hop;mailbox::send", 600),
            ("bt-ring;main;run;ring::actors::hop;mailbox::recv", 250),
            ("bt-ring;main;run;tokio::park", 100),
            ("bt-ring;benchtop-ticker;sleep", 50),
        ])
    }

    /// The lap values of [`running`]'s intervals, ns.
    pub(super) const RING_LAP: [u64; 5] = [480_000, 500_000, 510_000, 620_000, 1_900_000];

    /// A ring run whose latency has a long tail: p50 400 µs, p99 4.6 ms, p99.9 10.4 ms,
    /// max 28.7 ms.
    pub(super) fn long_tail(base: Instant) -> State {
        let cpu = tree(&[("bt-ring;main;run;ring::actors::hop", 10)]);
        let lap = [
            (400_000, 9000),
            (1_000_000, 700),
            (2_000_000, 190),
            (4_600_000, 95),
            (10_400_000, 14),
            (28_700_000, 1),
        ];
        running_with(base, &cpu, &lap)
    }

    /// The ring's on-CPU profile as recorded (`benchtop run ring --record`, a debug
    /// build: 2,057 samples, 570 stacks up to 150 frames deep).
    pub(crate) fn recorded_ring() -> StackTree {
        use std::io::Read as _;
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/flame/ring-cpu.folded.gz"
        );
        let file = std::fs::File::open(path).expect("the recorded ring");
        let mut folded = Vec::new();
        flate2::read::GzDecoder::new(file)
            .read_to_end(&mut folded)
            .expect("gzip");
        StackTree::read_folded(&folded[..], "ring-cpu.folded").expect("folded stacks")
    }

    /// The ring run of [`running`] with `cpu` as its on-CPU profile and the values `lap`
    /// (value in ns, count) in each interval's latency, the `i`th interval `i` times.
    pub(super) fn running_with(base: Instant, cpu: &StackTree, lap: &[(u64, u64)]) -> State {
        running_with_trees(base, &[(Kind::Cpu, cpu)], lap)
    }

    /// [`running_with`], its first interval's stacks the `trees` of each kind.
    pub(super) fn running_with_trees(
        base: Instant,
        trees: &[(Kind, &StackTree)],
        lap: &[(u64, u64)],
    ) -> State {
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
            for &(v, n) in lap {
                h.record_n(v, u64::from(i) * n).unwrap();
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
        let chunk = TreeChunks::default().chunk((0, 1_000_000_000), trees);
        ev(&mut s, LiveEvent::IntervalStacks(Box::new(chunk)), 3);
        s
    }

    pub(super) fn at(base: Instant, secs: u64) -> Instant {
        base + Duration::from_secs(secs)
    }

    #[test]
    fn the_live_screen_at_80x24() {
        let base = Instant::now();
        let s = running(base);
        insta::assert_snapshot!(render(&s, at(base, 12), 80, 24));
    }

    /// The first row of the flamegraph where a box forks into two callees of at least a
    /// tenth of the profile each: the row and the two callees' last name segments.
    fn first_fork(s: &State) -> Option<(usize, [String; 2])> {
        let flame = s.flame();
        flame.rows().iter().enumerate().find_map(|(r, row)| {
            let wide: Vec<_> = row.iter().filter(|b| b.width >= 0.1).collect();
            wide.windows(2).find_map(|pair| {
                let [a, b] = [pair[0], pair[1]];
                (flame.parent(a.node) == flame.parent(b.node)).then(|| {
                    let end = |n| {
                        let name = flame.name(n);
                        name.rsplit("::").next().unwrap_or(name).to_owned()
                    };
                    (r, [end(a.node), end(b.node)])
                })
            })
        })
    }

    #[test]
    fn the_recorded_ring_shows_its_first_fork_on_the_first_screen_at_every_size() {
        let base = Instant::now();
        let lap = [(500_000, 100)];
        let s = running_with(base, &recorded_ring(), &lap);
        let (row, [a, b]) = first_fork(&s).expect("the ring forks");
        assert!(row <= 8, "the fork is laid out on row {row}");
        for (w, h) in [(80, 24), (100, 30), (160, 48)] {
            let text = render(&s, at(base, 12), w, h);
            // Both callees on one line: their names may lose their middles, not their
            // last few letters.
            let tail = |n: &str| n.chars().rev().take(4).collect::<String>();
            let (ta, tb) = (tail(&a), tail(&b));
            assert!(
                text.lines().any(|l| {
                    let rev: String = l.chars().rev().collect();
                    rev.contains(&ta) && rev.contains(&tb)
                }),
                "{w}x{h}: {a} and {b} not side by side:\n{text}"
            );
            insta::assert_snapshot!(format!("the_recorded_ring_{w}x{h}"), text);
        }
    }

    #[test]
    fn a_long_tail_keeps_its_p99_9_and_max_bins_on_screen_at_every_size() {
        let base = Instant::now();
        let s = long_tail(base);
        let run = &s.live.run.latency.run;
        assert_eq!(
            (run.p50 / 100_000, run.p999 / 100_000, run.max / 100_000),
            (4, 104, 287),
            "{run:?}"
        );
        for (w, h) in [(80, 24), (100, 30), (160, 48)] {
            let text = render(&s, at(base, 12), w, h);
            for bin in ["10.0–17.8ms", "17.8–31.6ms", "3.16–5.62ms", "316–562µs"] {
                assert!(
                    text.contains(bin),
                    "{w}x{h}: the bin {bin} is not drawn:\n{text}"
                );
            }
            assert!(text.contains("◂max"), "{w}x{h}: max unmarked:\n{text}");
            insta::assert_snapshot!(format!("a_long_tail_{w}x{h}"), text);
        }
        // Maximized at 80x24 every bin fits: none is left out.
        let mut s = s;
        s.update(AppEvent::Key(Key::Char('2')), at(base, 12));
        s.update(AppEvent::Key(Key::Char('e')), at(base, 12));
        let text = render(&s, at(base, 12), 80, 24);
        assert!(!text.contains("left out"), "{text}");
        insta::assert_snapshot!("a_long_tail_maximized_80x24", text);
    }

    #[test]
    fn the_live_screen_at_160x48() {
        let base = Instant::now();
        let s = running(base);
        insta::assert_snapshot!(render(&s, at(base, 12), 160, 48));
    }

    /// The live screen after the collector `--otlp` streams to stopped answering.
    pub(super) fn dropping(base: Instant) -> State {
        let mut s = running(base);
        let drops = benchtop_record::StreamDrops::new(
            "http://127.0.0.1:4317",
            12,
            0,
            Some("gRPC Unavailable: connection refused".into()),
        );
        s.update(
            AppEvent::Live(LiveEvent::Notice(benchtop_record::Notice::StreamDropped(
                drops,
            ))),
            at(base, 11),
        );
        s
    }

    #[test]
    fn the_live_screen_with_otlp_batches_dropped_at_80x24() {
        let base = Instant::now();
        insta::assert_snapshot!(render(&dropping(base), at(base, 12), 80, 24));
    }

    #[test]
    fn the_live_screen_with_otlp_batches_dropped_at_160x48() {
        let base = Instant::now();
        insta::assert_snapshot!(render(&dropping(base), at(base, 12), 160, 48));
    }

    /// The README's picture of the live screen, docs/live-screen.svg, is this screen as
    /// drawn; `BENCHTOP_BLESS=1` writes it anew after a change to the views.
    #[test]
    fn the_readme_picture_is_the_live_screen_as_drawn() {
        let base = Instant::now();
        let s = running(base);
        let area = Rect::new(0, 0, 120, 32);
        let mut buf = Buffer::empty(area);
        draw(&s, at(base, 12), area, &mut buf);
        let drawn = picture::svg(&buf);
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/live-screen.svg");
        if std::env::var_os("BENCHTOP_BLESS").is_some() {
            std::fs::write(&path, &drawn).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == drawn,
            "{} is not the live screen as drawn now: run this test with BENCHTOP_BLESS=1 and \
             commit the new picture",
            path.display()
        );
    }

    #[test]
    fn a_terminal_too_small_says_what_size_it_needs() {
        let base = Instant::now();
        let s = running(base);
        let screen = render(&s, at(base, 12), 50, 10);
        assert!(
            screen.contains("60×18 or more needed; this terminal is 50×10"),
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
            ended_by: None,
            summary: Vec::new(),
            warnings: vec!["the worker ended before its summary (signal 9)".into()],
        };
        s.update(AppEvent::Finished(Ok(outcome)), at(base, 5));
        let screen = render(&s, at(base, 30), 80, 24);
        assert!(screen.contains("● crashed  00:00:05"), "{screen}");
        assert!(screen.contains("signal 9"), "{screen}");
    }

    /// A ring session recorded into `dir`: 20 intervals of `rate` laps per second (100 laps
    /// of 1e11 / `rate` ns each) and on-CPU stacks where `hot` takes `hot_share` of 100
    /// samples.
    fn recorded(dir: &std::path::Path, mode: &str, rate: f64, hot: &str, hot_share: u64) {
        recorded_with_tail(dir, mode, rate, hot, hot_share, 0.0);
    }

    /// [`recorded`], and when `tail` is not zero a long tail: in the eighth interval a few
    /// values `tail` times and one value 10 times `tail` times the usual lap.
    fn recorded_with_tail(
        dir: &std::path::Path,
        mode: &str,
        rate: f64,
        hot: &str,
        hot_share: u64,
        tail: f64,
    ) {
        use benchtop_sessions::meta::{HostInfo, WorkloadInfo};
        use benchtop_sessions::{Kind, SessionMeta, SessionWriter, Status};
        let mut params =
            std::collections::BTreeMap::from([("mode".to_owned(), serde_json::Value::from(mode))]);
        // As today's ask rings say how they time laps (docs/workloads.md).
        if mode == "ask" {
            params.insert("lap-version".to_owned(), serde_json::Value::from(2));
        }
        let meta = SessionMeta::new(
            format!("20261123-12000{}-ring", if mode == "tell" { 0 } else { 9 }),
            WorkloadInfo::new("ring", params),
            HostInfo::default(),
            "2026-11-23T12:00:00Z",
        );
        let mut w = SessionWriter::create(dir, meta).unwrap();
        for i in 0..20u32 {
            let mut row = TimeseriesRow::default();
            row.t_s = f64::from(i + 1) * 0.2;
            row.interval_s = 0.2;
            let wobble = 1.0 + (f64::from(i % 5) - 2.0) * 0.005;
            row.rates.insert("messages".into(), rate * wobble);
            w.append_row(&row).unwrap();
            let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
            h.record_n((1e11 / rate * wobble) as u64, 95).unwrap();
            h.record_n((4e11 / rate * wobble) as u64, 5).unwrap();
            if tail > 0.0 && i == 7 {
                h.record_n((1e11 / rate * tail) as u64, 3).unwrap();
                h.record((1e12 / rate * tail) as u64).unwrap();
            }
            w.append_latency("lap", f64::from(i) * 0.2, 0.2, &h)
                .unwrap();
        }
        let mut cpu = StackTree::new();
        cpu.add_names(["bt-ring", "main", "run", hot], hot_share);
        cpu.add_names(["bt-ring", "main", "run", "mailbox::send"], 100 - hot_share);
        w.write_stacks(Kind::Cpu, &cpu, "on-CPU").unwrap();
        w.finish(Status::Complete, "2026-11-23T12:00:05Z".into())
            .unwrap();
    }

    /// The compare screen of a tell session against a slower ask session, where
    /// `AskActor::poll` grew from 10 % to 60 % of the samples.
    pub(super) fn comparing() -> State {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        recorded(&a, "tell", 1.2e6, "AskActor::poll", 10);
        recorded(&b, "ask", 0.8e6, "AskActor::poll", 60);
        let (a, b) = (
            benchtop_sessions::Session::load(&a).unwrap(),
            benchtop_sessions::Session::load(&b).unwrap(),
        );
        // Judged as parts of one run (intervals the unit), so that the screen has verdicts
        // to colour: two sessions alone get none.
        let mut opts = benchtop_sessions::compare::CompareOptions::default();
        opts.parts = true;
        let comparison = benchtop_sessions::compare::compare(&a, &b, &opts);
        State::with_comparison(a, b, comparison, true)
    }

    #[test]
    fn open_a_b_keeps_both_sides_tails_on_screen() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        recorded_with_tail(&a, "tell", 1.2e6, "AskActor::poll", 10, 60.0);
        recorded_with_tail(&b, "ask", 0.8e6, "AskActor::poll", 60, 90.0);
        let (a, b) = (
            benchtop_sessions::Session::load(&a).unwrap(),
            benchtop_sessions::Session::load(&b).unwrap(),
        );
        let comparison = benchtop_sessions::compare::compare(&a, &b, &Default::default());
        let mut s = State::with_comparison(a, b, comparison, true);
        let now = Instant::now();
        // At 160x48 the bars show under the figures; smaller, only the percentiles do
        // until `2` and `e` give the latency the screen.
        let mut screens = vec![(160, 48, render(&s, now, 160, 48))];
        s.update(AppEvent::Key(Key::Char('2')), now);
        s.update(AppEvent::Key(Key::Char('e')), now);
        screens.push((80, 24, render(&s, now, 80, 24)));
        screens.push((100, 30, render(&s, now, 100, 30)));
        for (w, h, text) in screens {
            // A's p99.9 is 5.00 ms and max 50.0 ms, B's 11.3 ms and 113 ms: the bins
            // from 3.16, 10.0, 31.6 and 100 ms.
            for bin in ["3.16 ms", "10.0 ms", "31.6 ms", "100 ms"] {
                assert!(
                    text.contains(bin),
                    "{w}x{h}: the bin {bin} is not drawn:\n{text}"
                );
            }
            assert!(text.contains("⋮"), "{w}x{h}: no elision said:\n{text}");
            insta::assert_snapshot!(format!("open_a_b_with_long_tails_{w}x{h}"), text);
        }
    }

    #[test]
    fn long_figure_names_give_way_to_every_column_of_the_compare_table() {
        let mut s = comparing();
        for f in &mut s.compare.figures {
            f.name = format!("time_taken_for_ring_messaging_{}", f.name);
        }
        let screen = render(&s, Instant::now(), 160, 48);
        let head = screen
            .lines()
            .find(|l| l.contains("change verdict"))
            .unwrap_or_else(|| panic!("{screen}"));
        for column in ["A", "B", "interval"] {
            assert!(head.contains(&format!(" {column} ")), "{column}: {head}");
        }
        // The end of a name tells the figures apart: it stays.
        assert!(screen.contains("time_tak…essaging_lap p50 "), "{screen}");
        // Narrower, the interval goes first; the change and verdict stay.
        let screen = render(&s, Instant::now(), 80, 24);
        let head = screen
            .lines()
            .find(|l| l.contains("change verdict"))
            .unwrap_or_else(|| panic!("{screen}"));
        assert!(!head.contains("interval"), "{head}");
    }

    /// A session whose every recorded string carries escape sequences and line breaks:
    /// the workload's name, a parameter, a warning, a thread's name, a frame's name.
    fn hostile(dir: &std::path::Path) -> benchtop_sessions::Session {
        use benchtop_sessions::meta::{HostInfo, WorkloadInfo};
        use benchtop_sessions::{Kind, SessionMeta, SessionWriter, Status};
        let params = std::collections::BTreeMap::from([(
            "mode".to_owned(),
            serde_json::Value::from("\x1b[2J\x1b[Hfake\r\nrow"),
        )]);
        let mut meta = SessionMeta::new(
            "20261123-120000-ring",
            WorkloadInfo::new("ring\x1b]0;owned\x07", params),
            HostInfo::default(),
            "2026-11-23T12:00:00Z",
        );
        meta.warnings.push("warn\x1b[31m\u{202e}desrever".into());
        let mut w = SessionWriter::create(dir, meta).unwrap();
        for i in 0..5u32 {
            let mut row = TimeseriesRow::default();
            row.t_s = f64::from(i + 1);
            row.interval_s = 1.0;
            row.rates.insert("messages\x1b[5m".into(), 1e6);
            row.top_threads = vec![ThreadCpu::new(1, 2, "bt\x1b[8m", "th\x1bread\n", 50.0)];
            let mut r = Resources::default();
            r.threads = 1;
            r.processes = 1;
            row.resources = Some(r);
            w.append_row(&row).unwrap();
        }
        let mut cpu = StackTree::new();
        cpu.add_names(["bt-ring", "evil\x1b[31m\x07frame"], 10);
        w.write_stacks(Kind::Cpu, &cpu, "on-CPU").unwrap();
        w.finish(Status::Complete, "2026-11-23T12:00:05Z".into())
            .unwrap();
        benchtop_sessions::Session::load(dir).unwrap()
    }

    /// Draws `state` through ratatui's TestBackend, as the terminal would get it.
    fn backend_cells(state: &State, width: u16, height: u16) -> (String, Vec<String>) {
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height)).unwrap();
        let now = Instant::now();
        terminal
            .draw(|frame| draw(state, now, frame.area(), frame.buffer_mut()))
            .unwrap();
        let buf = terminal.backend().buffer().clone();
        let cells = buf.content.iter().map(|c| c.symbol().to_owned()).collect();
        (text(&buf), cells)
    }

    #[test]
    fn open_a_b_draws_through_the_test_backend_at_80x24_and_1x1() {
        let s = comparing();
        let (screen, _) = backend_cells(&s, 80, 24);
        assert!(
            screen.contains("p99.9  337 µs   505 µs  +49.9%"),
            "{screen}"
        );
        assert!(screen.contains("q quit"), "{screen}");
        let (tiny, cells) = backend_cells(&s, 1, 1);
        assert_eq!(cells, ["6"], "{tiny}");
    }

    #[test]
    fn escape_sequences_in_a_sessions_strings_are_drawn_visible_and_never_sent() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        let live = State::with_session(hostile(&a), Instant::now(), true);
        let comparison = {
            let (a, b) = (hostile(&b), hostile(&tmp.path().join("b2")));
            let c = benchtop_sessions::compare::compare(&a, &b, &Default::default());
            State::with_comparison(a, b, c, true)
        };
        let mut zoomed = State::with_session(hostile(&tmp.path().join("z")), Instant::now(), true);
        for key in [Key::Char('4'), Key::Down, Key::Down, Key::Enter] {
            zoomed.update(AppEvent::Key(key), Instant::now());
        }
        for (what, state) in [("live", live), ("compare", comparison), ("zoomed", zoomed)] {
            for (w, h) in [(80, 24), (160, 48)] {
                let (screen, cells) = backend_cells(&state, w, h);
                for cell in &cells {
                    assert!(
                        !cell.chars().any(|c| c.is_control()
                            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
                        "{what} {w}x{h}: a control character reached the screen: {cell:?}\n{screen}"
                    );
                }
                assert!(
                    screen.contains("\\x1b"),
                    "{what} {w}x{h}: not shown\n{screen}"
                );
            }
        }
        let (screen, _) = backend_cells(
            &State::with_session(hostile(&tmp.path().join("c")), Instant::now(), true),
            160,
            48,
        );
        assert!(screen.contains("ring\\x1b]0;owned\\x07"), "{screen}");
        assert!(screen.contains("\\x1b[2J\\x1b[Hfake\\r\\nrow"), "{screen}");
        assert!(screen.contains("th\\x1bread\\n"), "{screen}");
        assert!(screen.contains("evil\\x1b[31m\\x07frame"), "{screen}");
        assert!(screen.contains("messages\\x1b[5m"), "{screen}");
    }

    #[test]
    fn the_compare_screen_at_120x32() {
        let s = comparing();
        let screen = render(&s, Instant::now(), 120, 32);
        assert!(screen.contains("parameter mode"), "{screen}");
        assert!(screen.contains("regressed"), "{screen}");
        assert!(screen.contains("diff: B against A"), "{screen}");
        assert!(
            screen.contains("AskActor::poll") || screen.contains("run"),
            "{screen}"
        );
        insta::assert_snapshot!(screen);
    }

    #[test]
    fn the_compare_screen_at_80x24_with_the_latency_maximized() {
        let mut s = comparing();
        for key in [Key::Char('2'), Key::Char('e')] {
            s.update(AppEvent::Key(key), Instant::now());
        }
        let screen = render(&s, Instant::now(), 80, 24);
        assert!(screen.contains("share per bin"), "{screen}");
        insta::assert_snapshot!(screen);
    }

    #[test]
    fn the_compare_flamegraph_zooms_and_shows_b_alone_with_d() {
        let mut s = comparing();
        for key in [
            Key::Char('3'),
            Key::Down,
            Key::Down,
            Key::Enter,
            Key::Char('d'),
        ] {
            s.update(AppEvent::Key(key), Instant::now());
        }
        let screen = render(&s, Instant::now(), 120, 32);
        assert!(screen.contains("on-CPU of B"), "{screen}");
        insta::assert_snapshot!(screen);
        s.update(AppEvent::Key(Key::Char('?')), Instant::now());
        let help = render(&s, Instant::now(), 120, 32);
        assert!(help.contains("B against A"), "{help}");
    }

    #[test]
    fn an_opened_session_shows_its_run_as_it_ended() {
        let session = benchtop_sessions::Session::load(std::path::Path::new(
            "../sessions/tests/data/v1-session",
        ))
        .unwrap();
        let now = Instant::now();
        let s = State::with_session(session, now, true);
        let screen = render(&s, now, 100, 30);
        assert!(screen.contains("● complete"), "{screen}");
        assert!(screen.contains("ring::hop"), "{screen}");
        insta::assert_snapshot!(screen);
    }

    pub(super) fn launcher() -> State {
        let mut s = State::with_launcher(crate::state::launcher::LauncherState::from_cli(), true);
        s.launcher.recent = ["20261123-154211-ring", "20261123-150002-storm"]
            .into_iter()
            .map(|name| crate::state::launcher::RecentSession {
                name: name.into(),
                workload: name.rsplit('-').next().unwrap_or_default().into(),
                status: "complete".into(),
                started: "2026-11-23T15:42:11.463Z".into(),
                dir: std::path::Path::new("sessions").join(name),
            })
            .collect();
        s
    }

    #[test]
    fn tab_and_shift_tab_go_round_the_launchers_panes_both_ways() {
        use crate::state::launcher::LauncherFocus::{Params, Recent, Workloads};
        let mut s = launcher();
        let now = Instant::now();
        let mut seen = vec![s.launcher.focus];
        for _ in 0..3 {
            s.update(AppEvent::Key(Key::Tab), now);
            seen.push(s.launcher.focus);
        }
        assert_eq!(seen, [Workloads, Params, Recent, Workloads]);
        let mut back = vec![s.launcher.focus];
        for _ in 0..3 {
            s.update(AppEvent::Key(Key::BackTab), now);
            back.push(s.launcher.focus);
        }
        assert_eq!(back, [Workloads, Recent, Params, Workloads]);
        s.update(AppEvent::Key(Key::BackTab), now);
        for (w, h) in [(80, 24), (160, 48)] {
            let screen = render(&s, now, w, h);
            assert!(screen.contains("Enter open"), "{screen}");
            insta::assert_snapshot!(
                format!("the_launcher_on_its_recent_sessions_{w}x{h}"),
                screen
            );
        }
    }

    #[test]
    fn enter_on_a_recent_session_opens_it_and_a_marked_one_compares_with_it() {
        let mut s = launcher();
        let now = Instant::now();
        s.update(AppEvent::Key(Key::BackTab), now);
        assert_eq!(s.launcher.focus, LauncherFocus::Recent);
        let open = |s: &mut State| s.update(AppEvent::Key(Key::Enter), now);
        assert_eq!(
            open(&mut s),
            vec![Effect::OpenSessions(vec![
                "sessions/20261123-154211-ring".into()
            ])]
        );
        s.update(AppEvent::Key(Key::Char('m')), now);
        s.update(AppEvent::Key(Key::Down), now);
        let screen = render(&s, now, 80, 24);
        assert!(screen.contains("A 20261123-154211-ring"), "{screen}");
        insta::assert_snapshot!("the_launcher_recent_sessions_with_a_mark_80x24", screen);
        insta::assert_snapshot!(
            "the_launcher_recent_sessions_with_a_mark_160x48",
            render(&s, now, 160, 48)
        );
        assert_eq!(
            open(&mut s),
            vec![Effect::OpenSessions(vec![
                "sessions/20261123-154211-ring".into(),
                "sessions/20261123-150002-storm".into()
            ])]
        );
        assert_eq!(s.launcher.marked, None, "the mark is used up");
    }

    #[test]
    fn a_session_opened_from_the_launcher_goes_back_there_on_esc() {
        let mut s = launcher();
        let now = Instant::now();
        let opened = comparing();
        s.update(AppEvent::Opened(Ok(Box::new(opened))), now);
        assert_eq!(s.screen, Screen::Compare);
        assert!(render(&s, now, 160, 48).contains("figure"));
        assert_eq!(
            s.update(AppEvent::Key(Key::Esc), now),
            vec![Effect::ListSessions]
        );
        assert_eq!(s.screen, Screen::Launcher);
        s.update(
            AppEvent::Opened(Err("cannot open session (x): gone".into())),
            now,
        );
        assert_eq!(s.screen, Screen::Launcher);
        assert!(render(&s, now, 80, 24).contains("cannot open session (x): gone"));
    }

    #[test]
    fn a_refusal_clears_on_the_next_key() {
        let mut s = launcher();
        let now = Instant::now();
        // num-nodes 0 is refused.
        for key in [Key::Tab, Key::Enter, Key::Char('0'), Key::Enter] {
            s.update(AppEvent::Key(key), now);
        }
        let refused = render(&s, now, 80, 24);
        let footer = refused.lines().last().unwrap_or_default().to_owned();
        assert!(s.launcher.error.is_some(), "{refused}");
        insta::assert_snapshot!("the_launcher_refusing_a_value_80x24", refused);
        insta::assert_snapshot!(
            "the_launcher_refusing_a_value_160x48",
            render(&s, now, 160, 48)
        );
        s.update(AppEvent::Key(Key::Down), now);
        assert_eq!(s.launcher.error, None);
        let footer_after = render(&s, now, 80, 24)
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned();
        assert_ne!(footer, footer_after);
        assert!(footer_after.contains("Enter edit"), "{footer_after}");
        for (w, h) in [(80, 24), (160, 48)] {
            insta::assert_snapshot!(
                format!("the_launcher_after_a_refusal_cleared_{w}x{h}"),
                render(&s, now, w, h)
            );
        }
    }

    #[test]
    fn the_selected_parameter_is_described_whole_in_lines_of_its_own() {
        let mut s = launcher();
        let now = Instant::now();
        s.update(AppEvent::Key(Key::Tab), now);
        let selected = &s.launcher.workloads[s.launcher.selected].params[s.launcher.param];
        let head = format!("--{}: ", selected.name);
        let screen = render(&s, now, 160, 48);
        assert!(screen.contains(&head), "{head}\n{screen}");
        insta::assert_snapshot!("the_launcher_describing_a_parameter_160x48", screen);
    }

    pub(super) fn orphan(pid: u32) -> benchtop_profilers::reaper::Orphan {
        benchtop_profilers::reaper::Orphan {
            pid,
            start_ticks: 1,
            command: "/usr/bin/benchtop worker ipc-node --role ring --node-id 1".into(),
            owner: benchtop_profilers::reaper::Owner {
                pid: 4242,
                start_ticks: 2,
            },
            owner_state: benchtop_profilers::reaper::OwnerState::Gone,
            session: Some("20261123-154211-ring".into()),
            age: Duration::from_secs(192),
            rss_bytes: 3 << 20,
            uid: benchtop_profilers::reaper::current_uid(),
            user: "tester".into(),
        }
    }

    #[test]
    fn the_launcher_at_80x24_with_an_orphan_warning() {
        let base = Instant::now();
        let mut s = launcher();
        s.update(AppEvent::Orphans(Ok(vec![orphan(101)])), base);
        let screen = render(&s, base, 80, 24);
        assert!(screen.contains("1 process left behind"), "{screen}");
        insta::assert_snapshot!(screen);
    }

    #[test]
    fn the_launcher_at_160x48_editing_a_parameter() {
        let base = Instant::now();
        let mut s = launcher();
        for key in [Key::Tab, Key::Enter, Key::Char('1'), Key::Char('0')] {
            s.update(AppEvent::Key(key), base);
        }
        insta::assert_snapshot!(render(&s, base, 160, 48));
    }

    #[test]
    fn searching_the_recorded_ring_for_lock_finds_the_locks_and_counts_them_at_every_width() {
        let base = Instant::now();
        let mut s = running_with(base, &recorded_ring(), &RING_LAP.map(|v| (v, 100)));
        for key in "/lock".chars().map(Key::Char).chain([Key::Enter]) {
            s.update(AppEvent::Key(key), at(base, 12));
        }
        let cpu = s.flames().shown();
        let lock = |name: &str| {
            (0..cpu.tree().frame_count())
                .map(|i| benchtop_sessions::FrameId(i as u32))
                .find(|&f| cpu.tree().name(f) == name)
                .is_some_and(|f| cpu.frame_matches(f))
        };
        assert!(lock("std::sys::sync::mutex::futex::Mutex::lock"));
        assert!(!lock("clock_gettime") && !lock("tokio::runtime::runtime::Runtime::block_on"));
        assert!(!lock("std::sys::sync::mutex::futex::Mutex::unlock"));
        for (w, h) in [(80, 24), (160, 48)] {
            let screen = render(&s, at(base, 12), w, h);
            let title = screen
                .lines()
                .find(|l| l.contains("matches"))
                .unwrap_or_else(|| panic!("{w}x{h}: no count: {screen}"));
            assert!(title.contains("matches, "), "{w}x{h}: {title}");
            insta::assert_snapshot!(format!("searching_the_recorded_ring_{w}x{h}"), screen);
        }
    }

    #[test]
    fn callers_from_a_bottom_up_row_are_that_rows_at_80x24_and_160x48() {
        let base = Instant::now();
        let mut s = running_with(base, &recorded_ring(), &RING_LAP.map(|v| (v, 100)));
        for key in [Key::Char('i'), Key::Down, Key::Down] {
            s.update(AppEvent::Key(key), at(base, 12));
        }
        let cpu = s.flames().shown();
        let row = s.flames().views.inverted.selected_frame().expect("a row");
        let name = cpu.tree().name(row).to_owned();
        s.update(AppEvent::Key(Key::Char('c')), at(base, 12));
        assert_eq!(s.flames().views.function, name);
        for (w, h) in [(80, 24), (160, 48)] {
            let screen = render(&s, at(base, 12), w, h);
            insta::assert_snapshot!(format!("callers_from_bottom_up_{w}x{h}"), screen);
        }
    }

    /// The column (in characters) where `needle` starts in `line`.
    fn column(line: &str, needle: &str) -> Option<usize> {
        line.find(needle).map(|at| line[..at].chars().count())
    }

    #[test]
    fn the_launchers_parameters_stand_in_columns_with_descriptions_under_them_when_narrow() {
        let base = Instant::now();
        let mut s = launcher();
        s.update(AppEvent::Key(Key::Tab), base);
        let params = s.launcher.workload().expect("a workload").params.clone();
        assert!(params.len() >= 4);
        let wide = render(&s, base, 160, 48);
        let mut values = Vec::new();
        let mut helps = Vec::new();
        for p in &params {
            let line = wide
                .lines()
                .find(|l| l.contains(&format!("│{} ", p.name)))
                .unwrap_or_else(|| panic!("{}: {wide}", p.name));
            let name_at = column(line, &format!("│{} ", p.name)).unwrap() + 1;
            let name_at = name_at + p.name.len();
            let rest: Vec<char> = line.chars().skip(name_at).collect();
            let value_at = rest.iter().position(|&c| c != ' ').unwrap();
            let value_end = value_at + rest[value_at..].iter().position(|&c| c == ' ').unwrap();
            let help_at = value_end + rest[value_end..].iter().position(|&c| c != ' ').unwrap();
            values.push(name_at + value_at);
            helps.push(name_at + help_at);
            // The description is whole or ends in an ellipsis before the border.
            let help: String = rest[help_at..].iter().collect();
            let help = help.trim_end_matches(['│', ' ']);
            assert!(
                p.help.ends_with(help) || help.ends_with('…'),
                "{}: `{help}`",
                p.name
            );
        }
        values.dedup();
        helps.dedup();
        assert_eq!(
            (values.len(), helps.len()),
            (1, 1),
            "one column each: {wide}"
        );
        insta::assert_snapshot!("the_launcher_parameters_160x48", wide);

        let narrow = render(&s, base, 80, 24);
        let lines: Vec<&str> = narrow.lines().collect();
        let mut under = 0;
        for p in &params {
            let Some(y) = lines
                .iter()
                .position(|l| l.contains(&format!("│{} ", p.name)))
            else {
                continue;
            };
            let next = lines[y + 1];
            let start: String = p.help.chars().take(10).collect();
            assert!(
                next.contains(&format!("│    {start}")) || next.contains("│    ["),
                "{}: its description under it: {narrow}",
                p.name
            );
            under += 1;
        }
        assert!(under >= 3, "{narrow}");
        assert!(
            lines[0].trim_end().ends_with("Enter runs and records it"),
            "the header's saying that fits, whole: {}",
            lines[0]
        );
        insta::assert_snapshot!("the_launcher_parameters_80x24", narrow);
    }

    #[test]
    fn a_refused_value_is_said_in_the_footer() {
        let base = Instant::now();
        let mut s = launcher();
        for key in [Key::Tab, Key::Enter, Key::Char('x'), Key::Enter] {
            s.update(AppEvent::Key(key), base);
        }
        let screen = render(&s, base, 80, 24);
        let footer = screen.lines().last().unwrap();
        assert!(footer.contains("'x'"), "{footer}");
    }

    #[test]
    fn the_orphans_screen_with_a_confirmation() {
        let base = Instant::now();
        let mut s = launcher();
        s.update(AppEvent::Key(Key::Char('r')), base);
        s.update(AppEvent::Orphans(Ok(vec![orphan(101), orphan(102)])), base);
        s.update(AppEvent::Key(Key::Down), base);
        insta::assert_snapshot!("orphans_list", render(&s, base, 80, 24));
        s.update(AppEvent::Key(Key::Char('k')), base);
        let screen = render(&s, base, 80, 24);
        assert!(screen.contains("End process 102?"), "{screen}");
        insta::assert_snapshot!("orphans_confirm", screen);
    }

    #[test]
    fn the_orphans_screen_and_the_help_at_160x48() {
        let base = Instant::now();
        let mut s = launcher();
        s.update(AppEvent::Key(Key::Char('r')), base);
        s.update(AppEvent::Orphans(Ok(vec![orphan(101), orphan(102)])), base);
        let screen = render(&s, base, 160, 48);
        assert!(
            screen.contains("SESSION"),
            "wide enough for the session column"
        );
        insta::assert_snapshot!("orphans_160x48", screen);
        s.update(AppEvent::Key(Key::Char('?')), base);
        insta::assert_snapshot!("orphans_help_160x48", render(&s, base, 160, 48));
    }

    #[test]
    fn the_live_help_at_160x48() {
        let base = Instant::now();
        let mut s = running(base);
        s.update(AppEvent::Key(Key::F1), at(base, 12));
        insta::assert_snapshot!(render(&s, at(base, 12), 160, 48));
    }

    /// Every screen and overlay, in the states that lay out differently: each pane
    /// focused and maximized, help open, colors off.
    fn every_screen(base: Instant) -> Vec<State> {
        let mut states = vec![
            running(base),
            State::new("ring", "", false),
            launcher(),
            comparing(),
        ];
        let mut orphans = launcher();
        orphans.update(
            AppEvent::Orphans(Ok(vec![orphan(4242), orphan(4243)])),
            at(base, 1),
        );
        orphans.update(AppEvent::Key(Key::Char('r')), at(base, 1));
        states.push(orphans);
        for keys in [
            &[Key::Char('e')][..],
            &[Key::Char('2'), Key::Char('e')],
            &[Key::Char('3'), Key::Char('e')],
            &[Key::Char('4'), Key::Char('e')],
            &[Key::Char('?')],
            &[Key::Char('/'), Key::Char('x')],
        ] {
            for mut s in [running(base), comparing()] {
                for key in keys {
                    s.update(AppEvent::Key(*key), at(base, 12));
                }
                states.push(s);
            }
        }
        states
    }

    #[test]
    fn views_survive_every_size_from_1x1() {
        let base = Instant::now();
        // Every width where the panes squeeze (at the minimum up to past 85 columns, where
        // the compare screen's latency bars once asked for less than no room), every height,
        // and the corners of both.
        let mut sizes = Vec::new();
        for w in MIN_SIZE.0 - 4..=100 {
            sizes.extend([(w, 1), (w, MIN_SIZE.1), (w, 24)]);
        }
        for h in 0..=50 {
            sizes.extend([(1, h), (MIN_SIZE.0, h), (80, h)]);
        }
        for w in [0, 1, 2, 3, 7, 20, 120, 160, 170] {
            for h in [0, 1, 2, 5, 17, 19, 31, 48] {
                sizes.push((w, h));
            }
        }
        for state in every_screen(base) {
            for &(w, h) in &sizes {
                render(&state, at(base, 12), w, h);
            }
        }
    }

    #[test]
    fn the_compare_screen_at_80x24_and_at_the_minimum() {
        let s = comparing();
        // Too narrow for the bars beside the percentiles: the percentiles come first.
        let screen = render(&s, Instant::now(), 80, 24);
        assert!(
            screen.contains("p99.9  337 µs   505 µs  +49.9%"),
            "{screen}"
        );
        assert!(screen.contains("diff: B against A"), "{screen}");
        insta::assert_snapshot!(screen);
        let small = render(&s, Instant::now(), MIN_SIZE.0, MIN_SIZE.1);
        assert!(small.contains("p50"), "{small}");
    }

    #[test]
    fn the_compare_screen_at_160x48() {
        let s = comparing();
        let screen = render(&s, Instant::now(), 160, 48);
        assert!(screen.contains("share per bin"), "{screen}");
        assert!(screen.contains("p99.9"), "{screen}");
        insta::assert_snapshot!(screen);
    }

    #[test]
    fn at_1x1_and_below_the_minimum_the_size_needed_comes_first() {
        let s = comparing();
        let tiny = render(&s, Instant::now(), 1, 1);
        assert_eq!(tiny.trim(), "6", "{tiny}");
        let narrow = render(&s, Instant::now(), 12, 3);
        assert!(narrow.starts_with("60×18 or"), "{narrow}");
    }
}
