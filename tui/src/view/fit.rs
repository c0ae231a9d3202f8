//! Fitting text to the columns there are: the one rule every label of the TUI gives way
//! by.
//!
//! A label that does not fit loses its middle, never its ends: `…` marks the cut, the
//! start stays so the reader knows what it is, and the end stays because it is what
//! tells (a function's own name after its path, a number's unit, the last part of a
//! directory's name). A frame's name keeps its last `::` segment whole when that fits
//! with a letter before it (`TellActor<…>::handle` in 12 columns is `Tel…::handle`), and
//! otherwise one letter of its start and as much of its end as fits; other text keeps a
//! third of its start.
//! Columns are measured as the terminal draws them (wide characters count two).
//!
//! ```
//! use benchtop::view::fit::fit;
//!
//! assert_eq!(fit("Mailbox<…>::poll_recv", 30), "Mailbox<…>::poll_recv");
//! assert_eq!(fit("Mailbox<…>::poll_recv", 13), "M…::poll_recv");
//! assert_eq!(fit("Mailbox<…>::poll_recv", 8), "M…l_recv");
//! assert_eq!(fit("sessions/20261123-120000-ring", 20), "sessio…3-120000-ring");
//! ```

use std::borrow::Cow;

use ratatui::text::Span;
use unicode_width::UnicodeWidthChar;
use unicode_width::UnicodeWidthStr;

/// The mark of a cut.
pub const ELLIPSIS: char = '…';

/// The columns `text` takes on a terminal.
pub fn width(text: &str) -> usize {
    text.width()
}

/// `text` in at most `room` columns: whole when it fits, else its middle replaced by `…`
/// (see the module's documentation). One column holds only the `…`; none holds nothing.
pub fn fit(text: &str, room: usize) -> Cow<'_, str> {
    if text.width() <= room {
        return Cow::Borrowed(text);
    }
    if room <= 1 {
        return Cow::Owned(if room == 1 {
            ELLIPSIS.to_string()
        } else {
            String::new()
        });
    }
    let room = room - 1;
    // A name's last segment, kept whole when a letter of the start fits before it.
    let tail = text
        .rfind("::")
        .map(|i| &text[i..])
        .filter(|tail| tail.width() < room && tail.len() < text.len());
    let head_room = match tail {
        Some(tail) => room - tail.width(),
        // A name too long for its last segment keeps one letter of its start; other
        // text a third (one letter at least). The end is what tells.
        None => {
            if text.contains("::") {
                1
            } else {
                (room / 3).max(1)
            }
        }
    };
    // A label that opens with the mark (a folded chain's `… 3 frames: a → b`) keeps its
    // first clause when that takes at most half the room, else only its end: never a
    // mark beside the mark.
    let head = if text.starts_with(ELLIPSIS) {
        text.find(": ")
            .map(|i| &text[..i + 2])
            .filter(|clause| clause.width() * 2 <= room)
            .unwrap_or("")
    } else {
        take_start(text, head_room)
    };
    let rest = &text[head.len()..];
    let mut end = take_end(rest, room - head.width());
    // Half a `::` says nothing.
    if end.starts_with(':') && !end.starts_with("::") {
        end = &end[1..];
    }
    let mut out = String::with_capacity(head.len() + end.len() + ELLIPSIS.len_utf8());
    out.push_str(head);
    out.push(ELLIPSIS);
    out.push_str(end);
    Cow::Owned(out)
}

/// `text` in at most `room` columns, its end replaced by `…` when it does not fit: for
/// prose, which reads from its start.
pub fn fit_end(text: &str, room: usize) -> Cow<'_, str> {
    if text.width() <= room {
        return Cow::Borrowed(text);
    }
    if room == 0 {
        return Cow::Owned(String::new());
    }
    let head = take_start(text, room - 1);
    Cow::Owned(format!("{head}{ELLIPSIS}"))
}

/// The longest start of `text` at most `room` columns wide.
fn take_start(text: &str, room: usize) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        let w = c.width().unwrap_or(0);
        if used + w > room {
            return &text[..i];
        }
        used += w;
    }
    text
}

/// The longest end of `text` at most `room` columns wide.
fn take_end(text: &str, room: usize) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > room {
            return &text[i + c.len_utf8()..];
        }
        used += w;
    }
    text
}

/// `text` in lines of at most `room` columns, broken between words; a word longer than a
/// line is cut in its middle, as [`fit`] cuts.
pub fn wrap(text: &str, room: usize) -> Vec<String> {
    let room = room.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let word = fit(word, room);
        let len = line.width();
        if len > 0 && len + 1 + word.width() > room {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Prose in at most `room` columns: whole when it fits; else whole words of its start
/// (a third of the room, or its first word in half) and of its end around ` … `, since a message says what
/// it is about first and what to do last. Text without a space to cut at loses its
/// middle as [`fit`] cuts.
pub fn fit_prose(text: &str, room: usize) -> Cow<'_, str> {
    if text.width() <= room {
        return Cow::Borrowed(text);
    }
    let words: Vec<&str> = text.split(' ').collect();
    let budget = room.saturating_sub(3);
    let span = |words: &[&str]| {
        words.iter().map(|w| w.width()).sum::<usize>() + words.len().saturating_sub(1)
    };
    let mut start = 0;
    while start < words.len()
        && (span(&words[..start + 1]) <= budget / 3
            || (start == 0 && words[0].width() <= budget / 2))
    {
        start += 1;
    }
    let mut end = words.len();
    while end > start && span(&words[..start]) + span(&words[end - 1..]) <= budget {
        end -= 1;
    }
    let (head, tail) = (&words[..start], &words[end..]);
    if span(head) == 0 || span(tail) == 0 {
        return fit(text, room);
    }
    Cow::Owned(format!("{} {ELLIPSIS} {}", head.join(" "), tail.join(" ")))
}

/// `spans` in at most `room` columns: whole when they fit; else the spans after the
/// first `keep` give way from the right, each whole (the least important last), and the
/// last span left loses its middle as [`fit_prose`] cuts (or goes, when only its `…` would
/// be left, and the one before it is cut).
pub fn fit_spans(mut spans: Vec<Span<'_>>, room: usize, keep: usize) -> Vec<Span<'_>> {
    let total = |spans: &[Span<'_>]| spans.iter().map(|s| s.content.width()).sum::<usize>();
    while spans.len() > keep.max(1) && total(&spans) > room {
        spans.pop();
    }
    // Kept spans too wide still: the last loses its middle, or goes and the one before
    // it gives way in turn.
    while let Some(last) = spans.pop() {
        let over = (total(&spans) + last.content.width()).saturating_sub(room);
        if over == 0 {
            spans.push(last);
            break;
        }
        let left = last.content.width().saturating_sub(over);
        if left > 1 || spans.is_empty() {
            let text = fit_prose(&last.content, left).into_owned();
            spans.push(Span::styled(text, last.style));
            break;
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_wraps_between_words_and_a_word_longer_than_a_line_loses_its_middle() {
        assert_eq!(wrap("one two three", 7), ["one two", "three"]);
        assert_eq!(wrap("abcdefghij xy", 4), ["a…ij", "xy"]);
        assert_eq!(wrap("höhe ünd", 4), ["höhe", "ünd"]);
        assert!(wrap("", 5).is_empty());
    }

    #[test]
    fn spans_give_way_whole_from_the_right_then_the_last_left_loses_its_middle() {
        let text = |spans: Vec<Span<'_>>| {
            spans
                .iter()
                .map(|s| s.content.to_string())
                .collect::<String>()
        };
        let line = || {
            vec![
                Span::raw("samples "),
                Span::raw("990/s"),
                Span::raw("  cpu-clock 999 Hz"),
            ]
        };
        assert_eq!(
            text(fit_spans(line(), 40, 2)),
            "samples 990/s  cpu-clock 999 Hz"
        );
        // Not "samples 990/s  cpu-clock 999 " with the unit cut off.
        assert_eq!(text(fit_spans(line(), 30, 2)), "samples 990/s");
        assert_eq!(text(fit_spans(line(), 10, 2)), "samples 9…");
        assert_eq!(text(fit_spans(line(), 10, 3)), "samples 9…");
        assert_eq!(text(fit_spans(line(), 6, 1)), "s…les ");
    }

    #[test]
    fn prose_keeps_whole_words_of_its_start_and_its_end() {
        let text = "detaching (the process goes on running) and writing the session (q again leaves at once)";
        assert_eq!(fit_prose(text, 100), text);
        let cut = fit_prose(text, 60);
        assert_eq!(cut, "detaching (the … the session (q again leaves at once)");
        assert!(cut.width() <= 60);
        assert_eq!(
            fit_prose("waiting for the first interval", 20),
            "waiting … interval"
        );
        // No space to cut at: a name's cut.
        assert_eq!(
            fit_prose("sessions/20261123-120000-ring", 20),
            "sessio…3-120000-ring"
        );
    }

    #[test]
    fn text_that_fits_is_borrowed_whole() {
        assert!(matches!(fit("lock", 4), Cow::Borrowed("lock")));
        assert!(matches!(fit_end("lock", 10), Cow::Borrowed("lock")));
    }

    #[test]
    fn a_name_keeps_its_last_segment_and_as_much_of_its_start_as_fits() {
        assert_eq!(fit("TellActor<…>::handle", 12), "Tel…::handle");
        assert_eq!(fit("TellActor<…>::handle", 10), "T…::handle");
        // Too narrow for the segment with a letter before it: the end still wins.
        assert_eq!(fit("TellActor<…>::handle", 6), "T…ndle");
        assert_eq!(fit("TellActor<…>::handle", 2), "T…");
        assert_eq!(fit("TellActor<…>::handle", 1), "…");
        assert_eq!(fit("TellActor<…>::handle", 0), "");
    }

    #[test]
    fn other_text_keeps_a_third_of_its_start_and_the_rest_of_its_end() {
        assert_eq!(fit("as recorded (closed loop)", 13), "as r…ed loop)");
        assert_eq!(fit("contextswitches/s", 10), "con…ches/s");
    }

    #[test]
    fn every_fit_is_at_most_its_room_and_marks_its_cut() {
        let texts = [
            "benchtop_workloads::ring::actors::TellActor<_>::handle",
            "日本語のフレーム名::関数",
            "a::b",
            "::",
            "x",
            "",
        ];
        for text in texts {
            for room in 0..60 {
                let fitted = fit(text, room);
                assert!(width(&fitted) <= room, "{text:?} in {room}: {fitted:?}");
                if fitted != text {
                    assert!(room == 0 || fitted.contains(ELLIPSIS), "{fitted:?}");
                }
                let ended = fit_end(text, room);
                assert!(width(&ended) <= room, "{text:?} in {room}: {ended:?}");
            }
        }
    }

    #[test]
    fn a_folded_chains_label_keeps_its_count_and_its_end() {
        assert_eq!(
            fit("… 3 frames: syscall → do_syscall_64_[k]", 8),
            "…_64_[k]"
        );
        assert_eq!(fit("Receiver<…>::try_recv", 11), "R…try_recv");
        assert_eq!(
            fit("… 4 frames: __rust_try → __rust_try", 27),
            "… 4 frames: …y → __rust_try"
        );
    }

    #[test]
    fn wide_characters_count_two_columns() {
        assert_eq!(width("日本"), 4);
        assert_eq!(fit("日本語です", 5), "…です");
        assert_eq!(fit_end("日本語です", 5), "日本…");
    }
}
