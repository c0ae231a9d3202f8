//! Histories as people read them: text for a terminal (each figure's series), and
//! Markdown for a pull request comment (a row a figure).

use std::fmt::Write as _;

use super::moved::span;
use super::{ChangePoint, FigureHistory, Histories, History, Moved, ProfileMove};
use crate::Kind;
use crate::compare::Verdict;
use crate::compare::table::{percent, show};
use crate::escape::{Escaped, escaped, markdown_cell};
use crate::meta::Better;
use crate::names::short_names;

/// The longest function name in the text's movers, in characters (as `compare`'s).
const NAME_WIDTH: usize = 80;
/// The functions a profile lists in Markdown, where a comment has less room.
const MARKDOWN_MOVERS: usize = 5;

/// The figure's unit and better direction, in words.
fn kind(f: &FigureHistory) -> String {
    let better = match f.better {
        Some(Better::Higher) => ", higher is better",
        Some(Better::Lower) => ", lower is better",
        _ => "",
    };
    if f.unit.is_empty() {
        better.trim_start_matches(", ").to_owned()
    } else {
        format!("{}{better}", f.unit)
    }
}

/// A change point in one line.
fn change_line(c: &ChangePoint) -> String {
    let ci = c.change.ci.map_or(String::new(), |(lo, hi)| {
        format!(" [{}, {}]", percent(lo), percent(hi))
    });
    format!(
        "{}{ci} {}, from {} (after {}), p = {:.3}",
        percent(c.change.change),
        c.change.verdict_text(),
        c.after,
        c.before,
        c.p_value
    )
}

/// The newest point's judgement in one line.
fn newest_line(h: &History, f: &FigureHistory) -> Option<String> {
    let change = f.newest.as_ref()?;
    let last = f.points.last()?;
    let since = f
        .changes
        .last()
        .map_or_else(|| "the first point".to_owned(), |c| c.after.clone());
    let ci = change.ci.map_or(String::new(), |(lo, hi)| {
        format!(" [{}, {}]", percent(lo), percent(hi))
    });
    Some(format!(
        "newest, {}: {}{ci} against the {} points since {since}: {}",
        h.points[last.point].name,
        percent(change.change),
        f.points.len() - 1 - f.changes.last().map_or(0, |c| c.at),
        change.verdict_text()
    ))
}

/// A profile's title: `on-CPU`, `off-CPU` …
fn title(p: &ProfileMove) -> &'static str {
    Kind::from_name(p.profile).map_or(p.profile, Kind::title)
}

/// The differential flamegraph among a profile's files (not its negated twin).
fn flamegraph(p: &ProfileMove) -> Option<&str> {
    p.files
        .iter()
        .map(String::as_str)
        .find(|f| f.ends_with(".svg") && !f.ends_with("-negated.svg"))
}

/// The heading of what moved at a change point: where, which figures, which segments.
fn moved_heading(h: &History, m: &Moved) -> String {
    let name = |i: Option<&usize>| i.and_then(|&i| h.points.get(i)).map(|p| p.name.as_str());
    format!(
        "what moved from {} (after {}): {} against {}, the change point of {}",
        name(Some(&m.at)).unwrap_or("-"),
        name(m.before.last()).unwrap_or("-"),
        span(&m.after),
        span(&m.before),
        escaped(&m.changes.join(", "))
    )
}

/// What moved at a change point, as text: every figure, then each profile's movers and
/// its differential flamegraph.
fn moved_text(h: &History, m: &Moved, out: &mut String) {
    let _ = writeln!(out, "\n  {}", moved_heading(h, m));
    let width = m
        .figures
        .iter()
        .map(|f| escaped(&f.name).chars().count())
        .max()
        .unwrap_or(0);
    for f in &m.figures {
        let ci = f.change.ci.map_or(String::new(), |(lo, hi)| {
            format!(" [{}, {}]", percent(lo), percent(hi))
        });
        let _ = writeln!(
            out,
            "    {:<width$}  {:>12} → {:>12}  {}{ci} {}",
            escaped(&f.name),
            escaped(&show(f.before, &f.unit)),
            escaped(&show(f.after, &f.unit)),
            percent(f.change.change),
            f.change.verdict_text()
        );
    }
    for p in &m.profiles {
        let _ = writeln!(
            out,
            "    {} of {} against {} (share of the profile, before → after)",
            title(p),
            span(&m.profiled.1),
            span(&m.profiled.0)
        );
        let _ = writeln!(out, "      {:>17}  {:>17}  function", "self", "total");
        let names: Vec<&str> = p.movers.iter().map(|x| x.name.as_str()).collect();
        for (x, label) in p.movers.iter().zip(short_names(&names, NAME_WIDTH)) {
            let _ = writeln!(
                out,
                "      {:>6.1}% → {:>5.1}%  {:>6.1}% → {:>5.1}%  {}",
                x.self_a * 100.0,
                x.self_b * 100.0,
                x.total_a * 100.0,
                x.total_b * 100.0,
                Escaped(&label)
            );
        }
        if let Some(svg) = flamegraph(p) {
            let _ = writeln!(out, "      differential flamegraph: {}", Escaped(svg));
        }
    }
}

/// What moved at a change point, as Markdown: a table of the figures, one of each
/// profile's movers, and a link to its differential flamegraph.
fn moved_markdown(h: &History, m: &Moved, out: &mut String) {
    let _ = writeln!(out, "{}\n", markdown_cell(&moved_heading(h, m)));
    out.push_str("| figure | before | after | change |\n|---|---:|---:|---|\n");
    for f in &m.figures {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} {} |",
            markdown_cell(&f.name),
            markdown_cell(&show(f.before, &f.unit)),
            markdown_cell(&show(f.after, &f.unit)),
            percent(f.change.change),
            markdown_cell(&f.change.verdict_text())
        );
    }
    out.push('\n');
    for p in &m.profiles {
        let _ = writeln!(
            out,
            "| {} function | self, before → after | total, before → after |\n|---|---:|---:|",
            title(p)
        );
        let names: Vec<&str> = p.movers.iter().map(|x| x.name.as_str()).collect();
        let labels = short_names(&names, NAME_WIDTH);
        for (x, label) in p.movers.iter().zip(&labels).take(MARKDOWN_MOVERS) {
            let _ = writeln!(
                out,
                "| {} | {:.1}% → {:.1}% | {:.1}% → {:.1}% |",
                markdown_cell(label),
                x.self_a * 100.0,
                x.self_b * 100.0,
                x.total_a * 100.0,
                x.total_b * 100.0
            );
        }
        out.push('\n');
        if let Some(svg) = flamegraph(p) {
            let _ = writeln!(
                out,
                "[{} differential flamegraph]({})\n",
                title(p),
                escaped(svg)
                    .replace(' ', "%20")
                    .replace('(', "%28")
                    .replace(')', "%29")
            );
        }
    }
}

/// A point's spread: half its runs' range, relative to its value, and its runs.
fn spread(p: &super::FigurePoint) -> String {
    if p.runs.len() < 2 || p.value <= 0.0 {
        return String::new();
    }
    format!(
        "±{:.1}% ({} runs)",
        50.0 * (p.high - p.low) / p.value,
        p.runs.len()
    )
}

impl Histories {
    /// Every history as text: each figure's change points, its newest point's judgement
    /// and its series (value and spread at each point).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {}", Escaped(w));
        }
        if !self.warnings.is_empty() {
            out.push('\n');
        }
        if self.histories.is_empty() {
            out.push_str("no sessions or series found\n");
        }
        for h in &self.histories {
            let _ = writeln!(
                out,
                "history of {}: {} points, ordered by {}",
                h.key,
                h.points.len(),
                Escaped(&h.ordered_by)
            );
            for f in &h.figures {
                let _ = writeln!(
                    out,
                    "\n  {} ({}): {} points, {} change point{}",
                    Escaped(&f.name),
                    kind(f),
                    f.points.len(),
                    f.changes.len(),
                    if f.changes.len() == 1 { "" } else { "s" }
                );
                for c in &f.changes {
                    let _ = writeln!(out, "    change {}", change_line(c));
                }
                if let Some(line) = newest_line(h, f) {
                    let _ = writeln!(out, "    {line}");
                }
                let width = f
                    .points
                    .iter()
                    .map(|p| h.points[p.point].name.chars().count())
                    .max()
                    .unwrap_or(0);
                for (i, p) in f.points.iter().enumerate() {
                    let mark = if f.changes.iter().any(|c| c.at == i) {
                        "▶"
                    } else if f.outliers.contains(&i) {
                        "×"
                    } else {
                        " "
                    };
                    let _ = writeln!(
                        out,
                        "    {mark} {:<width$}  {:>12}  {}",
                        h.points[p.point].name,
                        escaped(&show(p.value, &f.unit)),
                        spread(p)
                    );
                }
            }
            for m in &h.moved {
                moved_text(h, m, &mut out);
            }
            out.push('\n');
        }
        let _ = writeln!(out, "{}", self.method);
        out
    }

    /// Every history as Markdown, for a pull request comment: a table a history, a row a
    /// figure (its newest value, change points and the newest point's verdict).
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        for w in &self.warnings {
            let _ = writeln!(out, "> ⚠ {}", escaped(w));
        }
        if !self.warnings.is_empty() {
            out.push('\n');
        }
        for h in &self.histories {
            let _ = writeln!(
                out,
                "**{}** — {} points, ordered by {}\n",
                markdown_cell(&h.key.to_string()),
                h.points.len(),
                markdown_cell(&h.ordered_by)
            );
            out.push_str(
                "| figure | newest | change points | newest against its segment |\n\
                 |---|---:|---|---|\n",
            );
            for f in &h.figures {
                let newest = f
                    .points
                    .last()
                    .map_or_else(|| "-".to_owned(), |p| show(p.value, &f.unit));
                let changes: Vec<String> = f
                    .changes
                    .iter()
                    .map(|c| {
                        format!(
                            "{} from {} ({})",
                            percent(c.change.change),
                            c.after,
                            c.change.verdict_text()
                        )
                    })
                    .collect();
                let judged = f.newest.as_ref().map_or_else(String::new, |c| {
                    let verdict = match c.verdict {
                        Verdict::Regressed => "**regressed**".to_owned(),
                        _ => c.verdict_text(),
                    };
                    format!("{} {verdict}", percent(c.change))
                });
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} |",
                    markdown_cell(&f.name),
                    markdown_cell(&newest),
                    markdown_cell(&changes.join("; ")),
                    markdown_cell(&judged)
                );
            }
            out.push('\n');
            for m in &h.moved {
                moved_markdown(h, m, &mut out);
            }
        }
        let _ = writeln!(out, "{}", self.method);
        out
    }
}
