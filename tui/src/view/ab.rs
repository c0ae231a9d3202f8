//! The `ab --tui` screen: the experiment's plan and where it stands, the chosen figures
//! at the latest look, the selected figure's interval at every look on one axis (so it
//! is seen narrowing toward a decision, with the ± threshold marked), and the runs.

use benchtop_sessions::Status;
use benchtop_sessions::escape::Escaped;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use super::{accent, fit};
use crate::state::State;
use crate::state::ab::{AbState, Decision, FigureLook};
use benchtop_sessions::compare::Verdict;

/// Draws the `ab` screen into `area` (everything but the footer).
pub fn draw(state: &State, area: Rect, buf: &mut Buffer) {
    let ab = &state.ab;
    let figures = ab.latest().len().max(1) as u16;
    let runs_rows = if area.height >= 30 { 8 } else { 5 };
    let [header, table, intervals, runs] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length((figures + 3).min(area.height / 3)),
        Constraint::Min(4),
        Constraint::Length(runs_rows),
    ])
    .areas(area);
    draw_header(state, header, buf);
    draw_figures(state, table, buf);
    draw_intervals(state, intervals, buf);
    draw_runs(state, runs, buf);
}

/// A change as a percentage: one decimal below 1000 %, none above.
fn pct(x: f64) -> String {
    if (x * 100.0).abs() < 1000.0 {
        format!("{:+.1}%", x * 100.0)
    } else {
        format!("{:+.0}%", x * 100.0)
    }
}

/// An interval as `[-3.0%, +5.4%]`.
fn interval(ci: Option<(f64, f64)>, none: &str) -> String {
    ci.map_or_else(
        || none.to_owned(),
        |(lo, hi)| format!("[{}, {}]", pct(lo), pct(hi)),
    )
}

fn decision_style(state: &State, d: Decision) -> Style {
    match d {
        Decision::Changed(Verdict::Regressed) => accent(state, Color::Red),
        Decision::Changed(Verdict::Improved) => accent(state, Color::Green),
        Decision::Changed(_) => accent(state, Color::Yellow),
        Decision::Equivalent => Style::new(),
        Decision::Open => Style::new().add_modifier(Modifier::DIM),
    }
}

/// Where the experiment stands, in a few words.
fn standing(ab: &AbState) -> String {
    let (a, b) = ab.ran();
    match (&ab.finished, ab.current) {
        (Some(Err(e)), _) => format!("failed: {e}"),
        (Some(Ok(o)), _) => {
            let how = if o.stopped { "stopped" } else { "done" };
            format!("{how}: {} runs of A, {} of B", o.runs_a, o.runs_b)
        }
        (None, Some((n, total, side))) => {
            let stopping = if ab.stopping { ", stopping" } else { "" };
            format!("run {n} of at most {total}: {side}{stopping}")
        }
        (None, None) => format!("{a} runs of A, {b} of B"),
    }
}

fn draw_header(state: &State, area: Rect, buf: &mut Buffer) {
    let ab = &state.ab;
    let plan = &ab.plan;
    let status_style = match &ab.finished {
        Some(Err(_)) => accent(state, Color::Red),
        Some(Ok(_)) => accent(state, Color::Green),
        None => accent(state, Color::Yellow),
    };
    let runs = if plan.until_decided {
        format!("until decided, at most {} runs a side", plan.pairs)
    } else {
        format!("{} runs a side", plan.pairs)
    };
    let width = usize::from(area.width);
    let dim = Style::new().add_modifier(Modifier::DIM);
    // Where the experiment stands stays; how it is judged gives way, a part at a time.
    let first = fit::fit_spans(
        vec![
            Span::styled(
                " benchtop ab ",
                accent(state, Color::Cyan).add_modifier(Modifier::BOLD),
            ),
            Span::styled(standing(ab), status_style),
            Span::styled(format!(" · {runs}"), dim),
            Span::styled(
                format!(" · α {:.3}% at the first look", plan.alpha * 100.0),
                dim,
            ),
            Span::styled(format!(" · threshold ±{:.1}%", plan.threshold * 100.0), dim),
        ],
        width,
        2,
    );
    let sides = format!(" A: {}   B: {}", Escaped(&plan.a), Escaped(&plan.b));
    Paragraph::new(vec![
        Line::from(first),
        Line::from(fit::fit_prose(&sides, width).into_owned()),
    ])
    .render(area, buf);
}

fn block<'a>(state: &State, title: String) -> Block<'a> {
    Block::new()
        .borders(Borders::ALL)
        .border_style(accent(state, Color::Cyan))
        .title(title)
}

fn draw_figures(state: &State, area: Rect, buf: &mut Buffer) {
    let ab = &state.ab;
    let title = match ab.looks.last() {
        Some(l) => format!(
            " figures, B against A: {} runs of A, {} of B ",
            l.runs_a, l.runs_b
        ),
        None => " figures, B against A ".into(),
    };
    let block = block(state, title);
    let inner = block.inner(area);
    block.render(area, buf);
    let figures = ab.latest();
    if figures.is_empty() {
        Paragraph::new(Span::styled(
            " judged once both sides have a complete run",
            Style::new().add_modifier(Modifier::DIM),
        ))
        .render(inner, buf);
        return;
    }
    let name_w = figures
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(8, 24);
    // The selected row stays on screen.
    let rows = usize::from(inner.height);
    let first = ab.selected.saturating_sub(rows.saturating_sub(1));
    let lines: Vec<Line> = figures
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, f)| {
            let ci = interval(f.ci, "no interval yet");
            let name: String = f.name.chars().take(name_w).collect();
            let mut line = Line::from(vec![
                Span::raw(format!(" {name:<name_w$} {:>7}  {ci:<18} ", pct(f.change))),
                Span::styled(f.decision.to_string(), decision_style(state, f.decision)),
            ]);
            if i == ab.selected {
                line = line.style(Style::new().add_modifier(Modifier::REVERSED));
            }
            line
        })
        .collect();
    Paragraph::new(lines).render(inner, buf);
}

/// One look's interval on an axis of `width` cells spanning ± `span`: the interval drawn
/// `━`, the change `●`, no change `│`, the threshold `┆`, the rest `·`.
pub fn interval_bar(f: &FigureLook, threshold: f64, span: f64, width: usize) -> String {
    if width < 3 || span.is_nan() || span <= 0.0 {
        return String::new();
    }
    // Symmetric about the middle cell, whatever the width.
    let middle = (width - 1) / 2;
    let col = |x: f64| -> usize {
        let t = (x / span).clamp(-1.0, 1.0);
        (middle as f64 + t * middle as f64).round() as usize
    };
    let mut cells = vec!['·'; width];
    for x in [-threshold, threshold] {
        if x.abs() <= span {
            cells[col(x)] = '┆';
        }
    }
    cells[col(0.0)] = '│';
    if let Some((lo, hi)) = f.ci {
        for cell in &mut cells[col(lo)..=col(hi).max(col(lo))] {
            *cell = '━';
        }
    }
    cells[col(f.change)] = '●';
    cells.into_iter().collect()
}

/// The half-width of the axis that holds every interval of `history` and the threshold
/// with room to spare.
pub fn axis_span(history: &[(usize, &FigureLook)], threshold: f64) -> f64 {
    history
        .iter()
        .flat_map(|(_, f)| {
            let (lo, hi) = f.ci.unwrap_or((f.change, f.change));
            [lo.abs(), hi.abs(), f.change.abs()]
        })
        .filter(|x| x.is_finite())
        .fold(threshold * 2.0, f64::max)
        .max(1e-3)
}

fn draw_intervals(state: &State, area: Rect, buf: &mut Buffer) {
    let ab = &state.ab;
    let name = ab.selected_name().unwrap_or("-");
    let block = block(state, format!(" {} by look ", Escaped(name)));
    let inner = block.inner(area);
    block.render(area, buf);
    let history = ab.history();
    if history.is_empty() || inner.height < 2 {
        return;
    }
    let threshold = ab.plan.threshold;
    let span = axis_span(&history, threshold);
    let texts: Vec<String> = history
        .iter()
        .map(|(_, f)| interval(f.ci, "no interval"))
        .collect();
    let ci_w = texts.iter().map(|t| t.chars().count()).max().unwrap_or(0);
    // ` pair  interval  ` before the axis.
    let label = 9 + ci_w.max(8);
    let width = usize::from(inner.width).saturating_sub(label + 1);
    // The axis's 0 over the bars' middle cell ([`interval_bar`]).
    let half = width.saturating_sub(1) / 2;
    let left = format!("-{}", pct(span).trim_start_matches('+'));
    let right = pct(span);
    let axis = format!(
        "{:label$}{left:<half$}0{right:>rest$}",
        " pair  interval",
        rest = width.saturating_sub(half + 1)
    );
    let mut lines = vec![Line::from(Span::styled(
        axis,
        Style::new().add_modifier(Modifier::DIM),
    ))];
    let rows = usize::from(inner.height) - 1;
    let skip = history.len().saturating_sub(rows);
    for ((pair, f), ci) in history.into_iter().zip(texts).skip(skip) {
        let ci_w = label - 9;
        lines.push(Line::from(vec![
            Span::raw(format!(" {pair:>4}  {ci:<ci_w$}  ")),
            Span::styled(
                interval_bar(f, threshold, span, width),
                decision_style(state, f.decision),
            ),
        ]));
    }
    Paragraph::new(lines).render(inner, buf);
}

fn draw_runs(state: &State, area: Rect, buf: &mut Buffer) {
    let ab = &state.ab;
    let block = block(
        state,
        format!(
            " runs, A and B alternately, in {} ",
            Escaped(&ab.plan.dir.display().to_string())
        ),
    );
    let inner = block.inner(area);
    block.render(area, buf);
    let rows = usize::from(inner.height);
    let mut lines: Vec<Line> = Vec::new();
    let current = ab.current.map(|(n, total, side)| {
        Line::from(Span::styled(
            format!(" {n:>4}/{total} {side}  running…"),
            accent(state, Color::Yellow),
        ))
    });
    let room = rows.saturating_sub(usize::from(current.is_some()));
    let skip = ab.runs.len().saturating_sub(room);
    for run in ab.runs.iter().skip(skip) {
        let style = if run.status == Status::Complete {
            Style::new()
        } else {
            accent(state, Color::Red)
        };
        let warnings = match run.warnings.len() {
            0 => String::new(),
            1 => format!("  warning: {}", Escaped(&run.warnings[0])),
            n => format!("  {n} warnings"),
        };
        lines.push(Line::from(vec![
            Span::raw(format!(
                " {:>4} {}  {}  {:.2} s  ",
                run.n,
                run.side,
                Escaped(&run.name),
                run.seconds
            )),
            Span::styled(run.status.to_string(), style),
            Span::styled(warnings, accent(state, Color::Yellow)),
        ]));
    }
    lines.extend(current);
    Paragraph::new(lines).render(inner, buf);
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::state::ab::{AbEvent, AbOutcome, AbPlan, Look, RunLine, Side};
    use crate::state::{AppEvent, Key};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use std::time::Instant;

    fn figure(name: &str, change: f64, ci: (f64, f64), decision: Decision) -> FigureLook {
        FigureLook {
            name: name.into(),
            change,
            ci: Some(ci),
            decision,
        }
    }

    /// An experiment of a large known change, decided at its fourth pair.
    pub(crate) fn experiment(over: bool) -> State {
        let plan = AbPlan {
            dir: "sessions/2026-11-24-ab".into(),
            a: "ring --num-nodes 100".into(),
            b: "ring --num-nodes 200".into(),
            pairs: 20,
            until_decided: true,
            alpha: 0.01 * 6.0 / std::f64::consts::PI.powi(2),
            threshold: 0.02,
        };
        let mut s = State::with_ab(plan, false);
        let now = Instant::now();
        let mut ev = |e| {
            s.update(AppEvent::Ab(e), now);
        };
        for n in 1..=8 {
            let side = if n % 2 == 1 { Side::A } else { Side::B };
            ev(AbEvent::RunStarted { n, total: 40, side });
            ev(AbEvent::RunEnded(RunLine {
                n,
                side,
                name: format!("run-{:04}", n.div_ceil(2)),
                status: Status::Complete,
                seconds: 1.0 + n as f64 / 100.0,
                warnings: Vec::new(),
            }));
            if side == Side::B && n >= 4 {
                let pair = n / 2;
                let w = 0.4 / pair as f64;
                let open = pair < 4;
                ev(AbEvent::Look(Look {
                    pair,
                    runs_a: pair,
                    runs_b: pair,
                    figures: vec![
                        figure(
                            "messages/s",
                            -0.30,
                            (-0.30 - w, -0.30 + w),
                            if open {
                                Decision::Open
                            } else {
                                Decision::Changed(Verdict::Regressed)
                            },
                        ),
                        figure(
                            "lap p50",
                            0.01,
                            (0.01 - w / 10.0, 0.01 + w / 10.0),
                            Decision::Equivalent,
                        ),
                    ],
                }));
            }
        }
        if over {
            ev(AbEvent::Finished(Ok(AbOutcome {
                text: String::new(),
                decided: Vec::new(),
                runs_a: 4,
                runs_b: 4,
                stopped: false,
                regressed: vec!["messages/s".into()],
                failed: false,
            })));
        } else {
            ev(AbEvent::RunStarted {
                n: 9,
                total: 40,
                side: Side::A,
            });
        }
        s
    }

    fn render(state: &State, w: u16, h: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("terminal");
        terminal
            .draw(|f| crate::view::draw(state, Instant::now(), f.area(), f.buffer_mut()))
            .expect("draw");
        let buf = terminal.backend().buffer();
        (0..h)
            .map(|y| {
                (0..w)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    .trim_end()
                    .to_owned()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_bar_puts_the_interval_the_change_zero_and_the_threshold_in_place() {
        let f = figure("x", -0.5, (-0.75, -0.25), Decision::Open);
        let bar = interval_bar(&f, 0.1, 1.0, 21);
        let cells: Vec<char> = bar.chars().collect();
        assert_eq!(cells.len(), 21);
        assert_eq!(cells[10], '│', "no change in the middle: {bar}");
        assert_eq!(cells[5], '●', "the change at -50 %: {bar}");
        assert_eq!(cells[3], '━', "{bar}");
        assert_eq!(cells[7], '━', "{bar}");
        assert_eq!(cells[2], '·', "outside the interval: {bar}");
        assert_eq!((cells[9], cells[11]), ('┆', '┆'), "± the threshold: {bar}");
    }

    #[test]
    fn the_axis_holds_every_interval_and_twice_the_threshold() {
        let a = figure("x", 0.1, (0.05, 0.3), Decision::Open);
        let b = figure("x", -0.2, (-0.4, 0.0), Decision::Open);
        assert_eq!(axis_span(&[(2, &a), (3, &b)], 0.02), 0.4);
        let small = figure("x", 0.001, (0.0, 0.002), Decision::Open);
        assert_eq!(axis_span(&[(2, &small)], 0.02), 0.04);
    }

    #[test]
    fn the_intervals_narrow_look_by_look_on_one_axis() {
        let s = experiment(false);
        let screen = render(&s, 160, 48);
        let bars: Vec<usize> = screen
            .lines()
            .filter(|l| l.contains('●'))
            .map(|l| l.chars().filter(|&c| c == '━').count())
            .collect();
        assert_eq!(
            bars.len(),
            3,
            "one line per look (pairs 2, 3, 4):\n{screen}"
        );
        assert!(
            bars.windows(2).all(|w| w[0] > w[1]),
            "narrowing: {bars:?}\n{screen}"
        );
    }

    #[test]
    fn the_screen_at_80x24_and_160x48() {
        for over in [false, true] {
            let s = experiment(over);
            insta::assert_snapshot!(
                format!("ab_{}_80x24", if over { "over" } else { "running" }),
                render(&s, 80, 24)
            );
            insta::assert_snapshot!(
                format!("ab_{}_160x48", if over { "over" } else { "running" }),
                render(&s, 160, 48)
            );
        }
    }

    #[test]
    fn q_stops_the_experiment_then_leaves() {
        use crate::state::Effect;
        let mut s = experiment(false);
        let now = Instant::now();
        assert_eq!(
            s.update(AppEvent::Key(Key::Char('q')), now),
            vec![Effect::StopExperiment]
        );
        assert!(s.ab.stopping);
        assert_eq!(
            s.update(AppEvent::Key(Key::Char('q')), now),
            vec![Effect::Quit]
        );
        let mut over = experiment(true);
        assert_eq!(
            over.update(AppEvent::Key(Key::Char('q')), now),
            vec![Effect::Quit]
        );
    }

    #[test]
    fn down_selects_the_next_figure_and_its_history() {
        let mut s = experiment(false);
        s.update(AppEvent::Key(Key::Char('j')), Instant::now());
        let screen = render(&s, 160, 48);
        assert!(screen.contains(" lap p50 by look "), "{screen}");
    }
}
