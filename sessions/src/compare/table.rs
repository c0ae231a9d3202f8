//! A comparison as people read it: a text table, and Markdown for CI comments.

use std::fmt::Write as _;

use super::{Comparison, FigureComparison, Verdict};
use crate::escape::{Escaped, escaped, markdown_cell, markdown_code};
use crate::units::human_count;

/// A value in its unit, for the table: `1.23 ms`, `8.20 M/s`, `21.4 MiB`.
pub(crate) fn show(value: f64, unit: &str) -> String {
    if !value.is_finite() {
        return "-".into();
    }
    match unit {
        "bytes" => crate::units::human_bytes(value.max(0.0) as u64),
        "/s" => format!("{}/s", human_count(value)),
        "%" => format!("{value:.1}%"),
        "" => human_count(value),
        // Durations in the unit that keeps three digits (`307.7 µs`, not `0.000 s`).
        unit => crate::units::human_figure(value, unit),
    }
}

pub(crate) fn percent(c: f64) -> String {
    if c.is_finite() {
        format!("{:+.1}%", c * 100.0)
    } else {
        "-".into()
    }
}

/// The columns of a comparison table, as [`FigureComparison::cells`] fills them.
pub const TABLE_HEAD: [&str; 6] = ["figure", "A", "B", "change", "interval", "verdict"];

impl FigureComparison {
    /// The row as the table shows it: figure, A, B, change, interval, verdict.
    pub fn cells(&self) -> [String; 6] {
        [
            escaped(&self.name).into_owned(),
            escaped(&show(self.a, &self.unit)).into_owned(),
            escaped(&show(self.b, &self.unit)).into_owned(),
            percent(self.change.change),
            self.change.ci.map_or(String::new(), |(lo, hi)| {
                format!("[{}, {}]", percent(lo), percent(hi))
            }),
            self.change.verdict_text(),
        ]
    }
}

impl Comparison {
    /// The table as text: figure, A, B, change, interval, verdict.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "A: {}\nB: {}\n", Escaped(&self.a), Escaped(&self.b));
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {}", Escaped(w));
        }
        if !self.warnings.is_empty() {
            out.push('\n');
        }
        let cells: Vec<[String; 6]> = self.figures.iter().map(FigureComparison::cells).collect();
        let head = TABLE_HEAD.map(String::from);
        let mut widths = head.clone().map(|h| h.chars().count());
        for row in &cells {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in std::iter::once(&head).chain(&cells) {
            let [name, a, b, change, ci, verdict] = row;
            let _ = writeln!(
                out,
                "{name:<w0$}  {a:>w1$}  {b:>w2$}  {change:>w3$}  {ci:>w4$}  {verdict}",
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3],
                w4 = widths[4],
            );
        }
        for note in &self.notes {
            let _ = writeln!(out, "\nnote: {}", Escaped(note));
        }
        let _ = writeln!(out, "\n{}", self.method());
        out
    }

    /// How the verdicts were reached, in one line: the unit of evidence, how intervals are
    /// made, the confidence and the threshold.
    pub fn method(&self) -> String {
        let (na, nb) = self.runs;
        // 99 %, or 99.39 % when an A/B run spends its error rate over its looks.
        let confidence = format!("{:.3}", (1.0 - self.alpha) * 100.0);
        let confidence = confidence.trim_end_matches('0').trim_end_matches('.');
        let threshold = self.threshold * 100.0;
        let family = format!(
            "{confidence} % confidence for all {} judged figures together (Bonferroni); \
             regressed/improved past ±{threshold:.1}%, same inside it",
            self.judged
        );
        match self.noise {
            "runs" => format!(
                "{na} run(s) of A, {nb} of B, runs the unit: intervals on the log ratio of the \
                 runs' geometric means (Student t, spread between runs pooled); {family}"
            ),
            "intervals" => format!(
                "parts of one run: its intervals stand in for runs (block bootstrap on the log \
                 ratio), so the noise between runs is not seen; {family}"
            ),
            _ => format!(
                "one run a side: the noise between runs is unseen, so no verdicts; the runs a \
                 side a verdict would take are from the noise within the run (a floor) at \
                 {confidence} % for all figures together and a threshold of ±{threshold:.1}% — \
                 record with --runs N"
            ),
        }
    }

    /// The table as Markdown, for CI comments.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "**A** `{}` → **B** `{}`\n",
            markdown_code(&self.a),
            markdown_code(&self.b)
        );
        for w in &self.warnings {
            let _ = writeln!(out, "> ⚠ {}", escaped(w));
        }
        if !self.warnings.is_empty() {
            out.push('\n');
        }
        out.push_str(
            "| figure | A | B | change | interval | verdict |\n|---|---:|---:|---:|---|---|\n",
        );
        for f in &self.figures {
            let ci = f.change.ci.map_or(String::new(), |(lo, hi)| {
                format!("{} … {}", percent(lo), percent(hi))
            });
            let verdict = match f.change.verdict {
                Verdict::Regressed => "**regressed**".to_owned(),
                _ => markdown_cell(&f.change.verdict_text()).into_owned(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                markdown_cell(&f.name),
                markdown_cell(&show(f.a, &f.unit)),
                markdown_cell(&show(f.b, &f.unit)),
                percent(f.change.change),
                ci,
                verdict
            );
        }
        for note in &self.notes {
            let _ = writeln!(out, "\n> {}", escaped(note));
        }
        let _ = writeln!(out, "\n{}", self.method());
        out
    }
}
