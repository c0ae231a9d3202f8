//! The footer and the `?` help, both drawn from the key tables (`state::keys`), so that
//! they say what the keys do and nothing else.

use std::time::Instant;

use benchtop_sessions::escape::Escaped;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use super::{accent, fit};
use crate::state::keys::{self, HelpLine, Hint, Table};
use crate::state::launcher::LauncherFocus;
use crate::state::{Screen, State};

/// The hints of `table` that show in `state`, joined by `sep`.
pub(super) fn hints_text(table: &Table, state: &State, sep: &str) -> String {
    join(&table.hints(state), sep)
}

fn join(hints: &[Hint], sep: &str) -> String {
    hints.iter().map(|h| h.text).collect::<Vec<_>>().join(sep)
}

/// The keys that work where the focus is, or the flash message, or the search line.
pub(super) fn draw_footer(state: &State, now: Instant, area: Rect, buf: &mut Buffer) {
    let width = usize::from(area.width);
    let line = if let Some(query) = &state.flames().search_input {
        // What is typed first; the keys in what is left.
        let typed = format!("{query}▏");
        let room = width.saturating_sub(1 + fit::width(&typed));
        let (_, hints) = fit_hints(Vec::new(), keys::SEARCH.hints(state), room, " · ");
        Line::from(vec![
            Span::styled("/", accent(state, Color::Yellow)),
            Span::raw(typed),
            Span::styled(
                format!("  {}", join(&hints, " · ")),
                Style::new().add_modifier(Modifier::DIM),
            ),
        ])
    } else if own_keys(state) {
        let (_, hints) = fit_hints(Vec::new(), keys::table(state).hints(state), width, "  ");
        Line::from(Span::styled(
            format!(" {}", join(&hints, "  ")),
            accent(state, Color::Yellow),
        ))
    } else if let Some(error) = state
        .launcher
        .error
        .as_ref()
        .filter(|_| state.screen == Screen::Launcher)
    {
        Line::from(Span::styled(
            fit_line(&format!(" {error}"), area.width),
            accent(state, Color::Red),
        ))
    } else if let Some(flash) = state
        .flash
        .as_ref()
        .filter(|f| now.saturating_duration_since(f.at) < crate::state::FLASH_FOR)
    {
        let style = if flash.error {
            accent(state, Color::Red)
        } else {
            accent(state, Color::Yellow)
        };
        Line::from(Span::styled(
            fit_line(&format!(" {}", Escaped(&flash.text)), area.width),
            style,
        ))
    } else {
        let table = footer_table(state);
        let (pane, rest): (Vec<Hint>, Vec<Hint>) = table
            .hints(state)
            .into_iter()
            .partition(|h| h.when.is_pane());
        let (pane, rest) = fit_hints(pane, rest, width, "  ");
        if table.has_panes() {
            // The focused pane's keys first, set apart, then the screen's.
            let mut pane = join(&pane, "  ");
            if !pane.is_empty() {
                pane.push_str("  ");
            }
            Line::from(vec![
                Span::styled(format!(" {pane}"), accent(state, Color::Cyan)),
                Span::raw(join(&rest, "  ")),
            ])
        } else {
            Line::from(Span::raw(format!(" {}", join(&rest, "  "))))
        }
    };
    Paragraph::new(line).render(area, buf);
}

/// Whether the footer says the keys of a mode over the screen (the help, or the launcher's
/// typing modes) rather than the screen's own.
fn own_keys(state: &State) -> bool {
    let typing = state.launcher.editing.is_some()
        || matches!(
            state.launcher.focus,
            LauncherFocus::Command | LauncherFocus::Processes
        );
    state.help || state.screen == Screen::Launcher && typing
}

/// The table whose hints the footer says in `state`, when no flash or error stands in
/// their place.
pub(super) fn footer_table(state: &State) -> &'static Table {
    if state.flames().search_input.is_some() {
        &keys::SEARCH
    } else if own_keys(state) {
        keys::table(state)
    } else {
        keys::screen(state.screen)
    }
}

/// A message line in `width` columns: whole, or its middle given way (its end says what
/// happened last).
fn fit_line(text: &str, width: u16) -> String {
    fit::fit_prose(text, usize::from(width)).into_owned()
}

/// The hints that fit in `width` columns, each whole: the focused pane's (`pane`) and the
/// screen's (`rest`), joined by `sep` after a leading space (or two before the search
/// line's). Those that do not fit give way from the right, the screen's before the
/// pane's, except the keys that teach the rest and that leave (`? help`, `q quit`): they
/// stay while anything does.
pub(super) fn fit_hints(
    mut pane: Vec<Hint>,
    mut rest: Vec<Hint>,
    width: usize,
    sep: &str,
) -> (Vec<Hint>, Vec<Hint>) {
    let taken = |pane: &[Hint], rest: &[Hint]| {
        let n = pane.len() + rest.len();
        let words: usize = pane.iter().chain(rest).map(|h| fit::width(h.text)).sum();
        // The leading space, and the pane's part set apart by two.
        2 + words + fit::width(sep) * n.saturating_sub(1)
    };
    while taken(&pane, &rest) > width {
        if let Some(i) = rest.iter().rposition(|h| !h.stays()) {
            rest.remove(i);
        } else if pane.pop().is_none() && rest.pop().is_none() {
            break;
        }
    }
    (pane, rest)
}

/// The screen's keys as its help lists them: every help line of its tables.
pub(super) fn help_lines(screen: Screen) -> Vec<HelpLine> {
    keys::help(screen).iter().flat_map(|t| t.help()).collect()
}

/// The indent of the keys under a heading in the help.
const HELP_INDENT: usize = 2;

/// The help's lines in `width` columns: each heading, then its keys in a column as wide
/// as the widest, what each does wrapped under itself.
pub(super) fn help_text(state: &State, width: usize) -> Vec<Line<'static>> {
    let help = help_lines(state.screen);
    let keys_width = help.iter().map(|l| fit::width(l.keys)).max().unwrap_or(0);
    let room = width.saturating_sub(HELP_INDENT + keys_width + 2).max(10);
    let mut lines = Vec::new();
    let mut heading = "";
    for line in help {
        if line.heading != heading && !line.heading.is_empty() {
            heading = line.heading;
            lines.push(Line::from(Span::styled(
                format!(" {heading}"),
                Style::new().add_modifier(Modifier::BOLD),
            )));
        }
        for (i, part) in fit::wrap(line.what, room).into_iter().enumerate() {
            let keys = if i == 0 { line.keys } else { "" };
            let pad = keys_width.saturating_sub(fit::width(keys));
            lines.push(Line::from(vec![
                Span::styled(
                    format!("{:HELP_INDENT$}{keys}{:pad$}  ", "", ""),
                    accent(state, Color::Cyan),
                ),
                Span::raw(part),
            ]));
        }
    }
    lines
}

/// The widest the help's box is drawn, centred over the screen.
pub(super) const HELP_WIDTH: u16 = 78;

/// Every key, in a box over the screen, set apart from what is under it by a blank
/// margin.
pub(super) fn draw_help(state: &State, area: Rect, buf: &mut Buffer) {
    let width = area.width.min(HELP_WIDTH);
    let lines = help_text(state, usize::from(width.saturating_sub(2)));
    let height = (lines.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    // The margin: a column each side and a row above and below, where there is room, so
    // that no pane's border runs into the box's.
    let margin = Rect {
        x: popup.x.saturating_sub(1).max(area.x),
        y: popup.y.saturating_sub(1).max(area.y),
        width: 0,
        height: 0,
    };
    let margin = Rect {
        width: (popup.right() + 1).min(area.right()) - margin.x,
        height: (popup.bottom() + 1).min(area.bottom()) - margin.y,
        ..margin
    };
    Clear.render(margin, buf);
    // When they do not all fit, the lines from the scroll position, and the title says
    // which and how to scroll.
    let room = usize::from(height.saturating_sub(2)).max(1);
    let first = state.help_scroll.min(lines.len().saturating_sub(room));
    let title = if lines.len() > room {
        format!(
            " keys {}–{} of {} — ↑↓ scroll, any other key closes ",
            first + 1,
            (first + room).min(lines.len()),
            lines.len()
        )
    } else {
        " keys — any key closes ".to_owned()
    };
    let shown: Vec<Line> = lines.into_iter().skip(first).collect();
    Paragraph::new(shown)
        .block(Block::new().borders(Borders::ALL).title(title))
        .render(popup, buf);
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeSet;
    use std::time::Instant;

    use super::help_lines;
    use crate::state::compare::ComparePane;
    use crate::state::keys::{self, Table, When};
    use crate::state::launcher::LauncherFocus;
    use crate::state::profile_views::ViewKind;
    use crate::state::{AppEvent, Key, Pane, Screen, State};
    use crate::view::tests::{at, comparing, launcher, orphan, render, running};

    /// Every key the terminal can send the state, printable or not.
    fn every_key() -> Vec<Key> {
        let mut keys: Vec<Key> = (' '..='~').map(Key::Char).collect();
        keys.extend([
            Key::CtrlC,
            Key::Enter,
            Key::Esc,
            Key::Tab,
            Key::BackTab,
            Key::Backspace,
            Key::Up,
            Key::Down,
            Key::Left,
            Key::Right,
            Key::F1,
        ]);
        keys
    }

    pub(crate) fn orphans_screen(base: Instant) -> State {
        let mut s = launcher();
        s.update(
            AppEvent::Orphans(Ok(vec![orphan(4242), orphan(4243)])),
            at(base, 1),
        );
        s.update(AppEvent::Key(Key::Char('r')), at(base, 1));
        s.update(
            AppEvent::Orphans(Ok(vec![orphan(4242), orphan(4243)])),
            at(base, 1),
        );
        assert_eq!(s.screen, Screen::Orphans);
        s
    }

    /// A run started from the launcher that is over.
    fn over_from_launcher(base: Instant) -> State {
        let mut s = launcher();
        s.update(AppEvent::Key(Key::Enter), at(base, 1));
        assert_eq!(s.screen, Screen::Live);
        s.update(AppEvent::Finished(Err("refused".into())), at(base, 2));
        assert!(s.live.run.status.is_over());
        s
    }

    /// The `ab --tui` screen, its experiment going on or over.
    fn ab_screen(over: bool) -> State {
        use crate::state::ab::{AbEvent, AbOutcome, AbPlan};
        let mut s = State::with_ab(AbPlan::default(), true);
        if over {
            s.update(
                AppEvent::Ab(AbEvent::Finished(Ok(AbOutcome {
                    text: String::new(),
                    decided: Vec::new(),
                    runs_a: 2,
                    runs_b: 2,
                    stopped: false,
                    regressed: Vec::new(),
                    failed: false,
                }))),
                Instant::now(),
            );
        }
        s
    }

    /// The screens and modes, with every focus, named for messages.
    fn every_state(base: Instant) -> Vec<(String, State)> {
        let mut states = Vec::new();
        for pane in Pane::ALL {
            for (what, mut s) in [
                ("running", running(base)),
                ("over", over_from_launcher(base)),
            ] {
                s.focus = pane;
                states.push((format!("live {what} {pane:?}"), s));
            }
        }
        let mut attached = running(base);
        attached.live.run.attached = true;
        states.push(("live attached".into(), attached));
        for pane in ComparePane::ALL {
            let mut s = comparing();
            s.compare.focus = pane;
            states.push((format!("compare {pane:?}"), s));
        }
        for focus in [
            LauncherFocus::Workloads,
            LauncherFocus::Params,
            LauncherFocus::Recent,
        ] {
            let mut s = launcher();
            s.launcher.focus = focus;
            states.push((format!("launcher {focus:?}"), s));
        }
        let mut editing = launcher();
        for key in [Key::Tab, Key::Enter, Key::Char('7')] {
            editing.update(AppEvent::Key(key), at(base, 1));
        }
        assert!(editing.launcher.editing.is_some());
        states.push(("editing".into(), editing));
        for (down, focus) in [(0, LauncherFocus::Command), (1, LauncherFocus::Processes)] {
            let mut s = launcher();
            s.launcher.selected = s.launcher.workloads.len() + down;
            s.launcher.focus = focus;
            states.push((format!("launcher {focus:?}"), s));
        }
        states.push(("orphans".into(), orphans_screen(base)));
        let mut confirm = orphans_screen(base);
        confirm.update(AppEvent::Key(Key::Char('K')), at(base, 1));
        assert!(confirm.orphans.confirm.is_some());
        states.push(("confirm".into(), confirm));
        states.push(("ab running".into(), ab_screen(false)));
        states.push(("ab over".into(), ab_screen(true)));
        states.push((
            "history".into(),
            super::super::history::tests::history_state(true),
        ));
        for view in ['t', 'i', 'c', 'a'] {
            for (what, mut s) in [("live", running(base)), ("compare", comparing())] {
                s.update(AppEvent::Key(Key::Char(view)), at(base, 1));
                states.push((format!("{what} view {view}"), s));
            }
        }
        for mut s in [running(base), comparing()] {
            s.update(AppEvent::Key(Key::Char('4')), at(base, 1));
            s.update(AppEvent::Key(Key::Char('3')), at(base, 1));
            if s.screen == Screen::Live {
                s.update(AppEvent::Key(Key::Char('4')), at(base, 1));
            }
            s.update(AppEvent::Key(Key::Char('/')), at(base, 1));
            s.update(AppEvent::Key(Key::Char('x')), at(base, 1));
            assert!(s.flames().search_input.is_some());
            states.push((format!("search {:?}", s.screen), s));
        }
        let mut substring = running(base);
        for key in [Key::Char('/'), Key::Tab, Key::Char('x')] {
            substring.update(AppEvent::Key(key), at(base, 1));
        }
        assert!(substring.flames().shown().substring());
        states.push(("search substring".into(), substring));
        for (what, mut s) in [
            ("live", running(base)),
            ("compare", comparing()),
            ("launcher", launcher()),
        ] {
            s.update(AppEvent::Key(Key::Char('?')), at(base, 1));
            assert!(s.help);
            states.push((format!("help {what}"), s));
        }
        states
    }

    /// The footer's line of a screen drawn at 160×48, long after any flash.
    fn footer(state: &State, base: Instant) -> String {
        render(state, at(base, 600), 160, 48)
            .lines()
            .nth(47)
            .unwrap_or_default()
            .to_owned()
    }

    /// The footer's words, split where the footer separates them.
    fn segments(footer: &str) -> Vec<String> {
        footer
            .split("  ")
            .flat_map(|s| s.split(" · "))
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    }

    #[test]
    fn every_footer_hint_comes_from_the_table_and_every_hint_is_drawn() {
        let base = Instant::now();
        let mut drawn: BTreeSet<(&str, &str)> = BTreeSet::new();
        for (name, state) in every_state(base) {
            let footer = footer(&state, base);
            let table = super::footer_table(&state);
            let mut words = segments(&footer);
            if table.name == "search" {
                assert!(words[0].starts_with("/x"), "{name}: {footer}");
                words.remove(0);
            }
            assert!(!words.is_empty(), "{name}: an empty footer");
            for word in words {
                let mut hints = table.every_hint().filter(|h| h.text == word).peekable();
                assert!(
                    hints.peek().is_some(),
                    "{name}: `{word}` in the footer is no hint of the {} table: {footer}",
                    table.name
                );
                let hint = hints.find(|h| h.when.holds(&state));
                let Some(hint) = hint else {
                    panic!("{name}: `{word}` shown when it does not hold: {footer}")
                };
                drawn.insert((table.name, hint.text));
            }
            if state.orphans.confirm.is_some() && state.screen == Screen::Orphans {
                let screen = render(&state, at(base, 600), 160, 48);
                let line = screen
                    .lines()
                    .find(|l| l.contains("signal ·"))
                    .unwrap_or_else(|| panic!("{name}: no keys in the confirmation: {screen}"));
                for word in segments(line.trim_matches(|c| c == '│' || c == ' ')) {
                    assert!(
                        keys::CONFIRM.every_hint().any(|h| h.text == word),
                        "{name}: `{word}` is no hint of the confirmation: {line}"
                    );
                    drawn.insert((
                        "confirm",
                        keys::CONFIRM
                            .every_hint()
                            .find(|h| h.text == word)
                            .map_or("", |h| h.text),
                    ));
                }
            }
        }
        for table in keys::TABLES {
            for hint in table.every_hint() {
                assert!(
                    drawn.contains(&(table.name, hint.text)),
                    "the {} table's hint `{}` is never drawn",
                    table.name,
                    hint.text
                );
            }
        }
    }

    #[test]
    fn at_80x24_the_help_scrolls_to_its_last_line() {
        let base = Instant::now();
        let mut s = running(base);
        s.update(AppEvent::Key(Key::Char('?')), at(base, 1));
        let lines = help_lines(s.screen);
        let first = render(&s, at(base, 600), 80, 24);
        // The box leaves the footer its line.
        assert!(first.contains("keys 1–21 of"), "{first}");
        let last_key = lines[lines.len() - 1].keys;
        assert!(!first.contains(&format!("│  {last_key}  ")), "{first}");
        for _ in 0..keys::help_lines_at_most(s.screen) + 5 {
            s.update(AppEvent::Key(Key::Char('j')), at(base, 1));
        }
        assert!(s.help, "scrolling keeps the help open");
        let end = render(&s, at(base, 600), 80, 24);
        assert!(end.contains(&format!("│  {last_key}  ")), "{end}");
        insta::assert_snapshot!("the_live_help_scrolled_to_its_end_80x24", end);
        s.update(AppEvent::Key(Key::Char('k')), at(base, 1));
        s.update(AppEvent::Key(Key::Char('x')), at(base, 1));
        assert!(!s.help, "any other key closes it");
    }

    /// The help box of a screen drawn `width` columns wide, read back: its headings and
    /// lines (a line's wrapped words joined), and the lines of the screen around it.
    fn read_help(screen: &str) -> (Vec<(String, String, String)>, [usize; 3]) {
        let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
        let top = lines
            .iter()
            .position(|l| l.iter().collect::<String>().contains(" keys "))
            .expect("the box");
        let title: String = lines[top].iter().collect();
        let left = title[..title.find(" keys ").expect("the title")]
            .chars()
            .count()
            - 1;
        assert_eq!(lines[top][left], '┌', "{screen}");
        let right = left
            + lines[top][left..]
                .iter()
                .position(|&c| c == '┐')
                .expect("corner");
        let mut read = Vec::new();
        let mut heading = String::new();
        let mut bottom = top;
        for (y, line) in lines.iter().enumerate().skip(top + 1) {
            if line[left] == '└' {
                bottom = y;
                break;
            }
            assert_eq!((line[left], line[right]), ('│', '│'), "{screen}");
            let inside: String = line[left + 1..right].iter().collect();
            let inside = inside.trim_end();
            if inside.is_empty() {
                continue;
            }
            if !inside.starts_with("  ") {
                heading = inside.trim().to_owned();
            } else if inside.starts_with("   ") {
                // A line's words wrapped under it.
                let last: &mut (String, String, String) = read.last_mut().expect("a line");
                last.2.push(' ');
                last.2.push_str(inside.trim());
            } else {
                // Keys never hold two spaces in a row: they end the keys' column.
                let (keys, what) = inside[2..].split_once("  ").expect("two columns");
                read.push((heading.clone(), keys.to_owned(), what.trim().to_owned()));
            }
        }
        (read, [top, left, bottom])
    }

    #[test]
    fn the_help_lists_exactly_the_tables_help_lines_under_their_headings() {
        let base = Instant::now();
        for mut state in [
            running(base),
            comparing(),
            launcher(),
            orphans_screen(base),
            ab_screen(false),
            super::super::history::tests::history_state(true),
        ] {
            state.update(AppEvent::Key(Key::Char('?')), at(base, 1));
            assert!(state.help, "? opens the help on {:?}", state.screen);
            let screen = render(&state, at(base, 600), 160, 48);
            let (read, _) = read_help(&screen);
            let expected: Vec<(String, String, String)> = help_lines(state.screen)
                .iter()
                .map(|l| (l.heading.to_owned(), l.keys.to_owned(), l.what.to_owned()))
                .collect();
            assert!(!expected.is_empty());
            assert_eq!(read, expected, "{:?}: {screen}", state.screen);
        }
    }

    #[test]
    fn each_key_is_said_once_under_its_heading_and_once_on_the_live_screen() {
        for screen in [
            Screen::Live,
            Screen::Compare,
            Screen::Launcher,
            Screen::Orphans,
            Screen::Ab,
        ] {
            let mut said: Vec<(&str, Key)> = Vec::new();
            for table in keys::help(screen) {
                for section in table.rows {
                    for row in section.rows.iter().filter(|r| r.help.is_some()) {
                        let mut row_keys: Vec<Key> = row.keys.iter().map(|&(k, _)| k).collect();
                        row_keys.dedup();
                        for key in row_keys {
                            let under = if screen == Screen::Live {
                                ""
                            } else {
                                section.heading
                            };
                            assert!(
                                !said.contains(&(under, key)),
                                "{screen:?}: {key:?} is said twice (under `{}`)",
                                section.heading
                            );
                            said.push((under, key));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_help_box_has_one_border_set_apart_by_a_blank_margin() {
        let base = Instant::now();
        for (w, h) in [(80, 24), (160, 48)] {
            for mut state in [running(base), comparing(), launcher()] {
                state.update(AppEvent::Key(Key::Char('?')), at(base, 1));
                let screen = render(&state, at(base, 600), w, h);
                let (read, [top, left, bottom]) = read_help(&screen);
                assert!(!read.is_empty());
                let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
                let right = left + 77;
                let blank = |x: usize, y: usize| {
                    lines
                        .get(y)
                        .and_then(|l| l.get(x))
                        .is_none_or(|&c| c == ' ')
                };
                // The footer's line stays the footer's: it says the help's keys.
                let footer = lines.len() - 1;
                let ys = (top.saturating_sub(1)..=bottom + 1).filter(|&y| y != footer);
                for y in ys.clone() {
                    for x in [left.checked_sub(1), Some(right + 1)].into_iter().flatten() {
                        assert!(
                            blank(x, y),
                            "{w}x{h} {:?}: row {y}:\n{screen}",
                            state.screen
                        );
                    }
                }
                let rows = [top.checked_sub(1), Some(bottom + 1)];
                for y in rows.into_iter().flatten().filter(|&y| y != footer) {
                    for x in left..=right {
                        assert!(
                            blank(x, y),
                            "{w}x{h} {:?}: row {y}:\n{screen}",
                            state.screen
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_launcher_help_groups_its_modes_keys_under_headings() {
        let base = Instant::now();
        let mut s = launcher();
        s.update(AppEvent::Key(Key::Char('?')), at(base, 1));
        for (w, h) in [(80, 24), (160, 48)] {
            let screen = render(&s, at(base, 600), w, h);
            for heading in ["Launcher", "Editing a parameter", "Processes"] {
                assert!(screen.contains(&format!("│ {heading}")), "{screen}");
            }
            insta::assert_snapshot!(format!("the_launcher_help_{w}x{h}"), screen);
        }
    }

    /// A state where `table` is the one in use and `only` holds.
    fn holding(table: &Table, only: When, base: Instant) -> State {
        let mut s = match table.name {
            "live" | "search" | "help" => running(base),
            "compare" => comparing(),
            "launcher" => launcher(),
            "editing" => {
                let mut s = launcher();
                s.launcher.focus = LauncherFocus::Params;
                s.launcher.edit();
                s
            }
            "command line" | "process picker" => {
                let mut s = launcher();
                s.launcher.selected = s.launcher.workloads.len();
                s.launcher.focus = LauncherFocus::Command;
                if table.name == "process picker" {
                    s.launcher.selected += 1;
                    s.launcher.focus = LauncherFocus::Processes;
                }
                s
            }
            "orphans" => orphans_screen(base),
            "ab" => State::with_ab(crate::state::ab::AbPlan::default(), true),
            "history" => super::super::history::tests::history_state(true),
            "confirm" => {
                let mut s = orphans_screen(base);
                s.orphans.ask(false);
                s
            }
            other => panic!("a table without a state in this test: {other}"),
        };
        match only {
            When::Always => {}
            When::Flame if s.screen == Screen::Compare => s.compare.focus = ComparePane::Flame,
            When::Flame => s.focus = Pane::Flame,
            When::Live(pane) => s.focus = pane,
            When::Compare(pane) => s.compare.focus = pane,
            When::Launcher(focus) => s.launcher.focus = focus,
            When::FlamePane | When::Views | When::View(_) => {
                let view = match only {
                    When::View(kind) => kind,
                    When::Views => ViewKind::Top,
                    _ => ViewKind::Flame,
                };
                let key = match view {
                    ViewKind::Flame => 'f',
                    ViewKind::Top => 't',
                    ViewKind::Inverted => 'i',
                    ViewKind::Butterfly => 'c',
                    ViewKind::Source => 'a',
                };
                s.update(AppEvent::Key(Key::Char(key)), base);
            }
            other => panic!("rows are not meant to depend on {other:?}"),
        }
        match table.name {
            "search" => s.live.flames.search_input = Some(String::new()),
            "help" => s.help = true,
            _ => {}
        }
        s
    }

    #[test]
    fn every_row_of_every_table_is_reached_and_handled() {
        let base = Instant::now();
        for table in keys::TABLES {
            for row in table.all_rows() {
                assert!(!row.keys.is_empty(), "{}: a row without keys", table.name);
                for &(key, action) in row.keys {
                    let mut s = holding(table, row.only, base);
                    assert!(row.only.holds(&s));
                    assert_eq!(keys::table(&s).name, table.name);
                    assert_eq!(
                        table.action(&s, key),
                        Some(action),
                        "{}: {key:?} is taken by an earlier row",
                        table.name
                    );
                    // Carried out without a panic (the match in `State::act` has no
                    // catch-all, so every action has its arm).
                    s.update(AppEvent::Key(key), at(base, 2));
                }
            }
        }
    }

    #[test]
    fn a_key_without_a_row_changes_nothing() {
        let base = Instant::now();
        let now = at(base, 3);
        for (name, mut state) in every_state(base) {
            let table = keys::table(&state);
            if table.otherwise.is_some() {
                // Typing modes: every key does something there.
                continue;
            }
            for key in every_key() {
                if table.action(&state, key).is_some() {
                    continue;
                }
                let before = render(&state, now, 160, 48);
                let effects = state.update(AppEvent::Key(key), now);
                assert!(effects.is_empty(), "{name}: {key:?} gave {effects:?}");
                assert_eq!(
                    render(&state, now, 160, 48),
                    before,
                    "{name}: {key:?} has no row but changed the screen"
                );
            }
        }
    }
}
