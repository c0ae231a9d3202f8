//! The live screen of a program that names no throughput or latency of its own (`run
//! --tui -- <command>`, `attach --tui`): in the places of those panes, its process
//! tree's CPU over time, and its context switches and the samples taken per second.

use benchtop_sessions::units::human_count;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::chart::{Unit, render_series};
use super::{accent, fit};
use crate::state::{Pane, State};

/// The title of `pane` on the live screen of `state`.
pub fn title(state: &State, pane: Pane) -> &'static str {
    match pane {
        Pane::Throughput if state.live.run.shows_activity() => "process CPU",
        Pane::Latency if state.live.run.shows_activity() => "switches, samples",
        pane => pane.title(),
    }
}

/// The process tree's CPU over the time window, percent of one core.
pub fn cpu(state: &State, area: Rect, buf: &mut Buffer) {
    let run = &state.live.run;
    let series = &run.activity.cpu;
    // Live, the last interval; a recorded session, the mean of its intervals.
    let now = if run.recorded {
        mean(series).map(|v| format!("mean {v:.0}%"))
    } else {
        series.back().map(|&(_, v)| format!("{v:.0}%"))
    };
    let threads = run
        .resources
        .map(|r| format!("  threads {}  procs {}", r.threads, r.processes.max(1)))
        .unwrap_or_default();
    let head = head_line("CPU ", now, &threads, run.status.is_over());
    with_head(head, area, buf, |chart, buf| {
        render_series(
            series,
            state.window_s,
            run.time_axis(),
            Unit::Percent,
            accent(state, Color::Green),
            chart,
            buf,
        );
    });
}

/// Context switches per second above samples per second, each over the time window.
pub fn activity(state: &State, area: Rect, buf: &mut Buffer) {
    let a = &state.live.run.activity;
    let [top, bottom] =
        Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area);
    let n = |v: f64| human_count(v).replace(' ', "");
    let recorded = state.live.run.recorded;
    let switches = if recorded {
        mean(&a.switches).map(|v| format!("mean {}/s", n(v)))
    } else {
        a.last_switches.map(|(vol, invol)| {
            format!("{}/s  ({} vol, {} invol)", n(vol + invol), n(vol), n(invol))
        })
    };
    with_head(
        head_line("switches ", switches, "", state.live.run.status.is_over()),
        top,
        buf,
        |chart, buf| {
            render_series(
                &a.switches,
                state.window_s,
                state.live.run.time_axis(),
                Unit::Count,
                accent(state, Color::Yellow),
                chart,
                buf,
            );
        },
    );
    let samples = if recorded {
        mean(&a.samples).map(|v| format!("mean {}/s", n(v)))
    } else {
        a.samples.back().map(|&(_, v)| format!("{}/s", n(v)))
    };
    let sampling = if state.live.run.sampling.is_empty() {
        String::new()
    } else {
        format!("  {}", state.live.run.sampling)
    };
    with_head(
        head_line(
            "samples ",
            samples,
            &sampling,
            state.live.run.status.is_over(),
        ),
        bottom,
        buf,
        |chart, buf| {
            render_series(
                &a.samples,
                state.window_s,
                state.live.run.time_axis(),
                Unit::Count,
                accent(state, Color::Blue),
                chart,
                buf,
            );
        },
    );
}

/// The mean of a series' values.
fn mean(series: &std::collections::VecDeque<(f64, f64)>) -> Option<f64> {
    (!series.is_empty()).then(|| series.iter().map(|&(_, v)| v).sum::<f64>() / series.len() as f64)
}

/// A head line: the name in bold, the figure now (or that it is waiting, or that the run,
/// `over`, has none), dim extras.
fn head_line(name: &'static str, now: Option<String>, extra: &str, over: bool) -> Line<'static> {
    let waiting = now.is_none();
    let none = if over {
        "none recorded"
    } else {
        "waiting for the first interval"
    };
    let mut spans = vec![
        Span::styled(name, Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(now.unwrap_or_else(|| none.into())),
    ];
    if !waiting && !extra.is_empty() {
        spans.push(Span::styled(
            extra.to_owned(),
            Style::new().add_modifier(Modifier::DIM),
        ));
    }
    Line::from(spans)
}

/// The head line on the first row of `area`, the chart drawn by `chart` below it.
fn with_head(
    head: Line<'static>,
    area: Rect,
    buf: &mut Buffer,
    chart: impl FnOnce(Rect, &mut Buffer),
) {
    if area.height == 0 {
        return;
    }
    let [line, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    // The name and the figure stay; the extras give way whole.
    let head = Line::from(fit::fit_spans(head.spans, usize::from(line.width), 2));
    Paragraph::new(head).render(line, buf);
    chart(rest, buf);
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::{Duration, Instant};

    use benchtop_sessions::synthetic::TreeChunks;
    use benchtop_sessions::timeseries::ThreadCpu;
    use benchtop_sessions::{ContextSwitches, Resources, StackTree, TimeseriesRow};
    use hdrhistogram::Histogram;

    use crate::record::live::LiveEvent;
    use crate::state::{AppEvent, State};
    use crate::view::tests::{at, render};

    fn ev(s: &mut State, e: LiveEvent, base: Instant, secs: u64) {
        s.update(AppEvent::Live(e), base + Duration::from_secs(secs));
    }

    /// `run --tui -- ./calltree` twelve seconds in: a program that names no metric.
    pub(crate) fn program(base: Instant) -> State {
        program_with(
            base,
            "calltree",
            "command=./calltree 30",
            &[
                ("calltree;main;calltree_work;calltree_hot", 740),
                ("calltree;main;calltree_work;calltree_cold", 250),
            ],
        )
    }

    /// `run --tui -- COMMAND` twelve seconds in, each interval's samples `stacks`.
    pub(crate) fn program_with(
        base: Instant,
        workload: &str,
        params: &str,
        stacks: &[(&str, u64)],
    ) -> State {
        let mut s = State::new(workload, params, true);
        s.live.run.program = true;
        ev(
            &mut s,
            LiveEvent::Spawned {
                dir: "sessions/20261124-230000-calltree".into(),
                pid: 5151,
            },
            base,
            0,
        );
        ev(
            &mut s,
            LiveEvent::Started {
                throughput: None,
                latency: None,
                sampling: "cpu-clock 999 Hz".into(),
            },
            base,
            0,
        );
        let mut chunks = TreeChunks::default();
        for i in 1..=12u32 {
            let mut row = TimeseriesRow::default();
            row.t_s = f64::from(i);
            row.interval_s = 1.0;
            let mut r = Resources::default();
            r.rss_bytes = 2 << 20;
            r.peak_rss_bytes = 2 << 20;
            r.threads = 1;
            r.processes = 1;
            r.cpu_percent = if i < 4 { 50.0 } else { 99.0 };
            r.ctx_switches_interval = Some(ContextSwitches::new(3 * u64::from(i), 40));
            row.resources = Some(r);
            row.cpu_percent_per_core = vec![99.0, 3.0];
            row.top_threads = vec![ThreadCpu::new(5151, 5151, "calltree", "calltree", 99.0)];
            ev(
                &mut s,
                LiveEvent::Row {
                    row: Box::new(row),
                    histograms: Vec::new(),
                },
                base,
                u64::from(i),
            );
            let mut interval = StackTree::new();
            for &(stack, weight) in stacks {
                interval.add_names(stack.split(';'), weight);
            }
            ev(
                &mut s,
                LiveEvent::IntervalStacks(Box::new(chunks.cpu(&interval))),
                base,
                u64::from(i),
            );
        }
        s
    }

    #[test]
    fn a_program_shows_its_cpu_switches_and_samples_in_place_of_throughput_and_latency() {
        let base = Instant::now();
        let s = program(base);
        assert!(s.live.run.shows_activity());
        let screen = render(&s, at(base, 12), 160, 48);
        for text in [
            "1 process CPU",
            "2 switches, samples",
            "CPU 99%",
            "samples 990/s",
            "calltree_hot",
        ] {
            assert!(screen.contains(text), "{text}: {screen}");
        }
        insta::assert_snapshot!("program_160x48", screen);
        let screen = render(&s, at(base, 12), 80, 24);
        assert!(
            screen.contains("process CPU") && screen.contains("calltree"),
            "{screen}"
        );
        insta::assert_snapshot!("program_80x24", screen);
    }

    #[test]
    #[allow(clippy::field_reassign_with_default)]
    fn an_opened_session_of_a_command_shows_its_activity_not_waiting() {
        use benchtop_sessions::intervals::IntervalStacks;
        use benchtop_sessions::limits::LoadOptions;
        use benchtop_sessions::meta::{HostInfo, WorkloadInfo};
        use benchtop_sessions::{Kind, Session, SessionMeta, SessionWriter, Status};
        let tmp = tempfile::tempdir().unwrap();
        let params = std::collections::BTreeMap::from([(
            "command".to_owned(),
            serde_json::json!("./calltree 30"),
        )]);
        let mut meta = SessionMeta::new(
            "calltree",
            WorkloadInfo::new("calltree", params),
            HostInfo::default(),
            "2026-11-24T23:00:00Z",
        );
        meta.sampling.enabled = true;
        meta.sampling.event = "cpu-clock".into();
        meta.sampling.frequency_hz = 999;
        let mut w = SessionWriter::create(&tmp.path().join("s"), meta).unwrap();
        let mut chunks = TreeChunks::default();
        let mut hot = StackTree::new();
        hot.add_names(["calltree", "calltree_hot"], 990);
        for i in 1..=12u32 {
            let mut row = TimeseriesRow::default();
            row.t_s = f64::from(i);
            row.interval_s = 1.0;
            let mut r = Resources::default();
            r.rss_bytes = 2 << 20;
            r.threads = 1;
            r.processes = 1;
            r.cpu_percent = 99.0;
            r.ctx_switches_interval = Some(ContextSwitches::new(30, 40));
            row.resources = Some(r);
            w.append_row(&row).unwrap();
            let span = (
                u64::from(i - 1) * 1_000_000_000,
                u64::from(i) * 1_000_000_000,
            );
            w.append_stacks(&chunks.chunk(span, &[(Kind::Cpu, &hot)]))
                .unwrap();
        }
        let mut tree = StackTree::new();
        tree.add_names(["calltree", "calltree_hot"], 990 * 12);
        w.write_stacks(Kind::Cpu, &tree, "calltree — on-CPU")
            .unwrap();
        let dir = w
            .finish(Status::Complete, "2026-11-24T23:00:12Z".into())
            .unwrap();
        let stacks = IntervalStacks::load(&dir, &LoadOptions::default()).unwrap();
        let now = Instant::now();
        let mut s = State::with_session(Session::load(&dir).unwrap(), now, true);
        crate::state::timeline::Timeline::set_stacks(&mut s.live, stacks);
        // The temporary directory's name would change the header at every run.
        s.live.run.dir = Some("sessions/20261124-230000-calltree".into());
        assert!(s.live.run.shows_activity());
        let large = render(&s, now, 160, 48);
        for text in [
            "1 process CPU",
            "2 switches, samples",
            // An opened session gives its intervals' mean, not the last one's.
            "CPU mean 99%",
            "samples mean 990/s",
        ] {
            assert!(large.contains(text), "{text}: {large}");
        }
        assert!(!large.contains("waiting"), "{large}");
        insta::assert_snapshot!("opened_program_160x48", large);
        let small = render(&s, now, 80, 24);
        assert!(!small.contains("waiting"), "{small}");
        insta::assert_snapshot!("opened_program_80x24", small);
        // Without per-interval stacks, the samples pane says there are none.
        crate::state::timeline::Timeline::set_stacks(&mut s.live, None);
        s.live.run.activity.samples.clear();
        let large = render(&s, now, 160, 48);
        assert!(large.contains("samples none recorded"), "{large}");
    }

    #[test]
    fn a_program_speaking_the_report_protocol_is_shown_as_a_workload() {
        let base = Instant::now();
        let mut s = program(base);
        ev(
            &mut s,
            LiveEvent::Started {
                throughput: Some("requests".into()),
                latency: Some("rtt".into()),
                sampling: "cpu-clock 999 Hz".into(),
            },
            base,
            12,
        );
        assert!(!s.live.run.shows_activity());
        let screen = render(&s, at(base, 12), 160, 48);
        assert!(
            screen.contains("1 throughput") && screen.contains("2 latency"),
            "{screen}"
        );
    }

    /// kvstore's mix: reads of 10 ms, writes of 50 ms (a quarter), and a rare slow tail.
    pub(crate) fn kvstore(base: Instant) -> State {
        let mut s = crate::view::tests::running(base);
        s.live.run.latency = crate::state::live::Latency::default();
        s.live.run.latency.metric = "rpc".into();
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        h.record_n(10_000_000, 7_500).unwrap();
        h.record_n(50_000_000, 2_500).unwrap();
        h.record_n(900_000_000, 3).unwrap();
        s.live.run.latency.add(&h);
        s
    }

    #[test]
    fn latency_bars_are_labelled_by_range_on_a_log_scale_with_the_percentiles_on_them() {
        let base = Instant::now();
        let mut s = kvstore(base);
        s.focus = crate::state::Pane::Latency;
        let screen = render(&s, at(base, 12), 160, 48);
        // 50 ms sits in the bar of 31.6 to 56.2 ms, which holds p90 and p99.
        let writes = screen
            .lines()
            .find(|l| l.contains("31.6–56.2ms"))
            .unwrap_or_else(|| panic!("{screen}"));
        assert!(writes.contains("◂p90,p99,p99.9"), "{writes}");
        assert!(!screen.contains(" 31.6 ms "), "{screen}");
        // The tail of three slow values still draws a bar.
        let tail = screen
            .lines()
            .find(|l| l.contains("562–1000ms") || l.contains("0.56–1.00s"))
            .unwrap_or_else(|| panic!("{screen}"));
        assert!(tail.contains('█') && tail.contains("◂max"), "{tail}");
        insta::assert_snapshot!("kvstore_latency_160x48", screen);
        s.maximized = true;
        insta::assert_snapshot!(
            "kvstore_latency_maximized_80x24",
            render(&s, at(base, 12), 80, 24)
        );
    }
}
