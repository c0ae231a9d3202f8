//! Histories as people read them: text for a terminal (each figure's series), and
//! Markdown for a pull request comment (a row a figure).

use std::fmt::Write as _;

use super::{ChangePoint, FigureHistory, Histories, History};
use crate::compare::Verdict;
use crate::compare::table::{percent, show};
use crate::escape::{Escaped, escaped, markdown_cell};
use crate::meta::Better;

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
        }
        let _ = writeln!(out, "{}", self.method);
        out
    }
}
