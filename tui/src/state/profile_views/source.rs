//! The source view of one function: its file, the ranges of lines that have samples with
//! a few lines around them, and each line's share of the function's samples; or why
//! there is nothing to show.
//!
//! The state never reads a file: it names the file it needs ([`SourceView::rebuild`]
//! returns it), the loop reads it through the session crate's safe loader (a path in a
//! session can come from anyone) and hands back its text or why it could not
//! ([`SourceView::set_text`]).

use std::collections::HashMap;

use benchtop_sessions::lines::FrameLines;

/// Lines shown before and after each line that has samples.
pub const CONTEXT: u32 = 2;

/// Source files held at once; the oldest goes first.
const MAX_FILES: usize = 8;

/// A source file as the view knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceText {
    /// Asked for; not here yet.
    Reading,
    /// Its lines.
    Lines(Vec<String>),
    /// Why it could not be read.
    Unreadable(String),
}

/// One row of the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceRow {
    /// A line of the file, with the weight on it (0 for context).
    Line {
        /// The line number, from 1.
        line: u32,
        /// Samples on it.
        weight: u64,
    },
    /// Lines left out between two ranges.
    Gap,
}

/// The source view's state.
#[derive(Debug, Default)]
pub struct SourceView {
    /// The function shown.
    pub function: String,
    /// Why no line can be shown, when none can.
    pub no_lines: Option<String>,
    /// The file shown: the function's file with the most samples.
    pub file: Option<String>,
    /// The lines of `file` with samples, by line number.
    pub lines: Vec<(u32, u64)>,
    /// The weight on every line of the function (all its files): what shares are of.
    pub total: u64,
    /// The function's other files, heaviest first, with their weight.
    pub other_files: Vec<(String, u64)>,
    /// The rows drawn.
    pub rows: Vec<SourceRow>,
    /// The first row shown (↑/↓ scroll).
    pub top: usize,
    texts: HashMap<String, SourceText>,
    order: Vec<String>,
}

impl SourceView {
    /// Shows `function`'s lines from `lines`; `no_lines` says why there are none when the
    /// profile has none at all (an older session, names-only symbols, off-CPU stacks).
    /// Returns the file to read when its text is not held yet.
    pub fn rebuild(
        &mut self,
        function: &str,
        lines: &FrameLines,
        no_lines: Option<&str>,
    ) -> Option<String> {
        if self.function != function {
            self.top = 0;
        }
        self.function = function.to_owned();
        self.lines.clear();
        self.other_files.clear();
        self.file = None;
        self.total = 0;
        self.no_lines = None;
        if function.is_empty() {
            self.no_lines = Some("no function selected: select one in another view".into());
            self.rows.clear();
            return None;
        }
        let own = lines.lines(function);
        if own.is_empty() {
            self.no_lines = Some(match no_lines {
                Some(why) => why.to_owned(),
                None => "no source lines were recorded for this function (no debug line \
                         information in its binary)"
                    .into(),
            });
            self.rows.clear();
            return None;
        }
        let mut by_file: Vec<(u32, u64)> = Vec::new();
        for l in own {
            self.total = self.total.saturating_add(l.weight);
            match by_file.iter_mut().find(|(f, _)| *f == l.file) {
                Some((_, w)) => *w = w.saturating_add(l.weight),
                None => by_file.push((l.file, l.weight)),
            }
        }
        by_file.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let hottest = by_file[0].0;
        self.file = Some(lines.file(hottest).to_owned());
        self.other_files = by_file[1..]
            .iter()
            .map(|&(f, w)| (lines.file(f).to_owned(), w))
            .collect();
        self.lines = own
            .iter()
            .filter(|l| l.file == hottest)
            .map(|l| (l.line, l.weight))
            .collect();
        self.lines.sort_unstable();
        self.lay_out();
        let file = self.file.clone()?;
        if self.texts.contains_key(&file) {
            return None;
        }
        self.remember(file.clone(), SourceText::Reading);
        Some(file)
    }

    /// The text of `path`, or why it could not be read, as the loop read it.
    pub fn set_text(&mut self, path: &str, text: Result<String, String>) {
        let text = match text {
            Ok(t) => SourceText::Lines(t.lines().map(str::to_owned).collect()),
            Err(why) => SourceText::Unreadable(why),
        };
        self.remember(path.to_owned(), text);
        if self.file.as_deref() == Some(path) {
            self.lay_out();
        }
    }

    /// The text of the file shown.
    pub fn text(&self) -> Option<&SourceText> {
        self.texts.get(self.file.as_deref()?)
    }

    fn remember(&mut self, path: String, text: SourceText) {
        if !self.texts.contains_key(&path) {
            if self.order.len() >= MAX_FILES {
                let old = self.order.remove(0);
                self.texts.remove(&old);
            }
            self.order.push(path.clone());
        }
        self.texts.insert(path, text);
    }

    /// The rows: with the text, each range of lines with samples and [`CONTEXT`] lines
    /// around it, ranges that touch merged; without it, the lines with samples alone.
    fn lay_out(&mut self) {
        self.rows.clear();
        let len = match self.text() {
            Some(SourceText::Lines(l)) => Some(l.len() as u32),
            _ => None,
        };
        let Some(len) = len else {
            self.rows.extend(
                self.lines
                    .iter()
                    .map(|&(line, weight)| SourceRow::Line { line, weight }),
            );
            return;
        };
        let mut last: u32 = 0;
        let mut i = 0;
        while i < self.lines.len() {
            let first = self.lines[i].0.saturating_sub(CONTEXT).max(1);
            let mut end = self.lines[i].0.saturating_add(CONTEXT);
            let mut j = i + 1;
            while j < self.lines.len() && self.lines[j].0.saturating_sub(CONTEXT) <= end + 1 {
                end = self.lines[j].0.saturating_add(CONTEXT);
                j += 1;
            }
            // A line past the file's end (an older copy of it) shows without text.
            let end = end.min(len.max(self.lines[j - 1].0));
            let first = first.max(last + 1);
            if last > 0 && first > last + 1 {
                self.rows.push(SourceRow::Gap);
            }
            let mut k = i;
            for line in first..=end {
                let weight = match self.lines.get(k) {
                    Some(&(l, w)) if l == line => {
                        k += 1;
                        w
                    }
                    _ => 0,
                };
                self.rows.push(SourceRow::Line { line, weight });
            }
            last = end;
            i = j;
        }
        self.top = self.top.min(self.rows.len().saturating_sub(1));
    }

    /// The ranges of lines shown, as `12–20, 31–35`.
    pub fn ranges(&self) -> String {
        let mut out: Vec<String> = Vec::new();
        let mut start: Option<u32> = None;
        let mut prev = 0;
        for row in self.rows.iter().chain(std::iter::once(&SourceRow::Gap)) {
            match *row {
                SourceRow::Line { line, .. } => {
                    if start.is_some() && line != prev + 1 {
                        out.push(range(start.unwrap_or(prev), prev));
                        start = None;
                    }
                    start.get_or_insert(line);
                    prev = line;
                }
                SourceRow::Gap => {
                    if let Some(s) = start.take() {
                        out.push(range(s, prev));
                    }
                }
            }
        }
        out.join(", ")
    }

    /// Scrolls by `by` rows.
    pub fn scroll(&mut self, by: isize) {
        let max = self.rows.len().saturating_sub(1);
        self.top = self.top.saturating_add_signed(by).min(max);
    }
}

fn range(a: u32, b: u32) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}–{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_lines_show_with_context_and_ranges_that_touch_merge() {
        let mut lines = FrameLines::default();
        lines.add("spin", "/s/spin.c", 10, 80);
        lines.add("spin", "/s/spin.c", 13, 10);
        lines.add("spin", "/s/spin.c", 30, 10);
        lines.add("spin", "/s/other.h", 3, 5);
        let mut v = SourceView::default();
        assert_eq!(
            v.rebuild("spin", &lines, None).as_deref(),
            Some("/s/spin.c")
        );
        assert_eq!(v.rows.len(), 3, "without the text: the hot lines only");
        assert_eq!(v.total, 105);
        assert_eq!(v.other_files, [("/s/other.h".to_owned(), 5)]);
        let text: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        v.set_text("/s/spin.c", Ok(text));
        assert_eq!(v.ranges(), "8–15, 28–32");
        assert!(v.rows.contains(&SourceRow::Gap));
        assert_eq!(v.rebuild("spin", &lines, None), None, "held already");
    }

    #[test]
    fn a_function_without_lines_says_why() {
        let mut v = SourceView::default();
        v.rebuild(
            "f",
            &FrameLines::default(),
            Some("recorded before line numbers"),
        );
        assert_eq!(v.no_lines.as_deref(), Some("recorded before line numbers"));
        v.set_text("x", Err("no".into()));
    }
}
