//! Recorded strings made safe to print on a terminal.
//!
//! Everything a session holds may come from someone else: a workload's name and
//! parameters, its summary lines, thread names, hlog tags, another user's process
//! environment and argv. Printed raw, a string carrying an escape sequence can clear the
//! screen, change the terminal's title or forge table rows; a carriage return or newline
//! can fake lines. [`escaped`] turns every control character into a visible escape, so
//! the text shows what it holds and nothing more.
//!
//! ```
//! use benchtop_profile::escape::escaped;
//!
//! assert_eq!(escaped("ring"), "ring");
//! assert_eq!(escaped("a\x1b]0;owned\x07b"), "a\\x1b]0;owned\\x07b");
//! assert_eq!(escaped("two\nlines"), "two\\nlines");
//! ```

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

/// `text` with every control character escaped: C0 controls and DEL as `\n`, `\r`, `\t`
/// or `\xHH`; C1 controls (which some terminals read as escape sequences) and the Unicode
/// bidirectional overrides and isolates (which reorder what is shown) as `\u{…}`.
/// Borrows when there is nothing to escape, which is almost always.
pub fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(Escaped(text).to_string())
}

/// Displays a string as [`escaped`] does, without building it first.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(needs_escape) {
            f.write_str(&rest[..at])?;
            let mut chars = rest[at..].chars();
            let Some(c) = chars.next() else { break };
            match c {
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                c if (c as u32) < 0x80 => write!(f, "\\x{:02x}", c as u32)?,
                c => write!(f, "\\u{{{:x}}}", c as u32)?,
            }
            rest = chars.as_str();
        }
        f.write_str(rest)
    }
}

/// Displays a path as [`Escaped`] displays text: a directory or file name is chosen by
/// whoever made it, and an error message that names it must not carry its escape
/// sequences to the terminal. Bytes that are not UTF-8 show as `\u{fffd}`, as
/// [`Path::display`] shows them.
#[derive(Debug, Clone, Copy)]
pub struct EscapedPath<'a>(pub &'a Path);

impl fmt::Display for EscapedPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Escaped(&self.0.to_string_lossy()).fmt(f)
    }
}

/// `text` for a Markdown table cell: [`escaped`], and `|` written `\|`, so a cell cannot
/// end early and forge columns or rows.
pub fn markdown_cell(text: &str) -> Cow<'_, str> {
    match escaped(text) {
        Cow::Borrowed(t) if !t.contains('|') => Cow::Borrowed(t),
        t => Cow::Owned(t.replace('|', "\\|")),
    }
}

/// `text` for a Markdown code span (between backticks): [`escaped`], and a backtick,
/// which would end the span, written `\x60`.
pub fn markdown_code(text: &str) -> Cow<'_, str> {
    match escaped(text) {
        Cow::Borrowed(t) if !t.contains('`') => Cow::Borrowed(t),
        t => Cow::Owned(t.replace('`', "\\x60")),
    }
}

/// Whether `c` must not reach a terminal as it is.
fn needs_escape(c: char) -> bool {
    c.is_control() // C0, DEL and C1
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        assert!(matches!(escaped("bt-ring-node µs ✓"), Cow::Borrowed(_)));
    }

    #[test]
    fn escape_sequences_and_line_breaks_become_visible() {
        assert_eq!(escaped("\x1b[2J\x1b[H"), "\\x1b[2J\\x1b[H");
        assert_eq!(escaped("a\rb\tc\x7f"), "a\\rb\\tc\\x7f");
        assert_eq!(escaped("\u{9b}31m"), "\\u{9b}31m");
    }

    #[test]
    fn bidirectional_overrides_are_escaped() {
        assert_eq!(escaped("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escaped("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
    }

    #[test]
    fn markdown_cells_and_code_spans_cannot_be_broken_out_of() {
        assert_eq!(markdown_cell("a|b\n| x |"), "a\\|b\\n\\| x \\|");
        assert_eq!(markdown_code("id`**bold**"), "id\\x60**bold**");
        assert!(matches!(markdown_cell("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn paths_show_their_control_characters_escaped() {
        let dir = Path::new("e\x1b[2Jdir/cpu.folded");
        assert_eq!(EscapedPath(dir).to_string(), "e\\x1b[2Jdir/cpu.folded");
        assert_eq!(
            EscapedPath(Path::new("/tmp/plain")).to_string(),
            "/tmp/plain"
        );
    }

    #[test]
    fn the_display_form_agrees_with_escaped() {
        let hostile = "name\x1b]0;title\x07\n| forged | row |";
        assert_eq!(Escaped(hostile).to_string(), escaped(hostile));
        assert!(!escaped(hostile).chars().any(needs_escape));
    }
}
