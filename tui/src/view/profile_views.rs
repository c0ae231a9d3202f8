//! The flame pane's other views, drawn in its place: top functions, the bottom-up tree,
//! callers and callees, source lines. Pure functions of the state built in
//! `state::profile_views`; each draws a title line, then its rows from the one that
//! keeps the selection on screen.

use benchtop_sessions::FrameId;
use benchtop_sessions::escape::escaped;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Clear, Paragraph, Widget, Wrap};

use super::fit;
use crate::state::flame::FlameState;
use crate::state::flame_panes::FlamePanes;
use crate::state::profile_views::butterfly::ButterflyRow;
use crate::state::profile_views::source::{SourceRow, SourceText};
use crate::state::profile_views::top::TopSort;
use crate::state::profile_views::{ProfileViews, ViewKind};

/// Draws the view `flames` shows (not the flamegraph, which `flame` draws) into `area`
/// (the inside of the pane's border). `focused` shows the selection reversed;
/// `color == false` draws with modifiers only.
pub fn render_views(flames: &FlamePanes, area: Rect, buf: &mut Buffer, focused: bool, color: bool) {
    let area = area.intersection(buf.area);
    if area.is_empty() {
        return;
    }
    Clear.render(area, buf);
    let flame = flames.shown();
    let views = &flames.views;
    let pen = Pen { focused, color };
    if flame.is_empty() && views.kind != ViewKind::Source {
        message(area, buf, "no samples yet");
        return;
    }
    match views.kind {
        ViewKind::Flame => {}
        ViewKind::Top => top(flame, views, area, buf, pen),
        ViewKind::Inverted => inverted(flame, views, area, buf, pen),
        ViewKind::Butterfly => butterfly(flame, views, area, buf, pen),
        ViewKind::Source => source(views, area, buf, pen),
    }
}

/// How rows are drawn.
#[derive(Clone, Copy)]
struct Pen {
    focused: bool,
    color: bool,
}

impl Pen {
    fn selected(self) -> Style {
        if self.focused {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        }
    }

    fn title(self) -> Style {
        if self.focused {
            Style::new().add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        }
    }

    fn dim(self) -> Style {
        Style::new().add_modifier(Modifier::DIM)
    }

    /// A hot share: redder the hotter, bold without color.
    fn heat(self, share: f64) -> Style {
        if !self.color {
            return if share >= 0.2 {
                Style::new().add_modifier(Modifier::BOLD)
            } else {
                Style::new()
            };
        }
        let s = share.clamp(0.0, 1.0);
        let g = (200.0 - 160.0 * s.sqrt()) as u8;
        Style::new().fg(Color::Rgb(230, g, 60))
    }
}

/// Writes `text` at column `x` of row `y`, at most `width` columns, and returns the
/// columns used.
fn put(buf: &mut Buffer, x: u16, y: u16, text: &str, width: usize, style: Style) -> usize {
    if width == 0 {
        return 0;
    }
    let (end, _) = buf.set_stringn(x, y, text, width, style);
    usize::from(end.saturating_sub(x))
}

/// A line centred in `area`, wrapped when it does not fit.
fn message(area: Rect, buf: &mut Buffer, text: &str) {
    Paragraph::new(text)
        .wrap(Wrap { trim: true })
        .render(area, buf);
}

/// `part / whole` as a percentage with one decimal, right-aligned in six columns.
fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        return format!("{:>6}", "-");
    }
    format!("{:>5.1}%", part as f64 * 100.0 / whole as f64)
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The first row to draw so that `selected` is among `rows` rows shown.
fn first_row(selected: usize, rows: usize) -> usize {
    if rows == 0 {
        return 0;
    }
    selected.saturating_sub(rows - 1)
}

/// The title line and the area below it.
fn title_line(area: Rect, buf: &mut Buffer, text: &str, style: Style) -> Rect {
    // A title is prose: whole words of its start and its end stay.
    let text = fit::fit_prose(text, usize::from(area.width));
    put(buf, area.x, area.y, &text, usize::from(area.width), style);
    Rect {
        y: area.y + 1,
        height: area.height.saturating_sub(1),
        ..area
    }
}

/// One row of a list: a share column (with its style) then a name, elided to fit, the
/// whole row in `style` when it is the selection.
#[allow(clippy::too_many_arguments)]
fn list_row(
    buf: &mut Buffer,
    area: Rect,
    y: u16,
    cells: &[(String, Style)],
    name: &str,
    name_style: Style,
    selected: Option<Style>,
) {
    let width = usize::from(area.width);
    let mut x = 0usize;
    for (text, style) in cells {
        let style = selected.map_or(*style, |s| style.patch(s));
        x += put(
            buf,
            area.x + x as u16,
            y,
            text,
            width.saturating_sub(x),
            style,
        );
    }
    let room = width.saturating_sub(x);
    let name = escaped(name);
    let shown: String = if Span::raw(&*name).width() > room && room > 0 {
        let mut cut = String::new();
        for c in name.chars() {
            if Span::raw(cut.as_str()).width() + 2 > room {
                break;
            }
            cut.push(c);
        }
        cut.push('…');
        cut
    } else {
        name.into_owned()
    };
    let style = selected.map_or(name_style, |s| name_style.patch(s));
    put(buf, area.x + x as u16, y, &shown, room, style);
    if let Some(s) = selected {
        // The selection spans the row.
        for cx in area.x + x as u16 + Span::raw(shown.as_str()).width() as u16..area.right() {
            buf[(cx, y)].set_style(s);
        }
    }
}

fn top(flame: &FlameState, views: &ProfileViews, area: Rect, buf: &mut Buffer, pen: Pen) {
    let tree = flame.tree();
    let t = &views.top;
    let total = tree.total_weight();
    let sort = match t.sort {
        TopSort::SelfWeight => "self",
        TopSort::Total => "total",
        TopSort::Name => "name",
    };
    let mut title = format!(
        "{} functions by {sort} · {}",
        t.rows.len(),
        flame.unit().format(total)
    );
    if t.filtered && !flame.query().is_empty() {
        let query = match flame.substring() {
            true => format!("*{}*", escaped(flame.query())),
            false => escaped(flame.query()).into_owned(),
        };
        title.push_str(&format!(" · /{query}: {} left out", t.hidden));
    }
    let body = title_line(area, buf, &title, pen.title());
    if body.height == 0 {
        return;
    }
    let mark = |s: TopSort, name: &str| {
        if s == t.sort {
            format!("{name}▼")
        } else {
            format!("{name} ")
        }
    };
    let header = format!(
        "{:>6} {:>7} {}",
        mark(TopSort::SelfWeight, "self"),
        mark(TopSort::Total, "total"),
        mark(TopSort::Name, "function")
    );
    let rows = title_line(body, buf, &header, pen.dim());
    if t.rows.is_empty() {
        put(
            buf,
            rows.x,
            rows.y,
            "no function matches the search",
            usize::from(rows.width),
            Style::new(),
        );
        return;
    }
    let first = first_row(t.selected, usize::from(rows.height));
    for (i, r) in t
        .rows
        .iter()
        .enumerate()
        .skip(first)
        .take(usize::from(rows.height))
    {
        let y = rows.y + (i - first) as u16;
        let self_share = share(r.self_weight, total);
        list_row(
            buf,
            rows,
            y,
            &[
                (pct(r.self_weight, total), pen.heat(self_share)),
                (" ".into(), Style::new()),
                (format!("{} ", pct(r.total_weight, total)), Style::new()),
                (" ".into(), Style::new()),
            ],
            tree.name(r.frame),
            Style::new(),
            (i == t.selected).then(|| pen.selected()),
        );
    }
}

fn inverted(flame: &FlameState, views: &ProfileViews, area: Rect, buf: &mut Buffer, pen: Pen) {
    let tree = flame.tree();
    let inv = &views.inverted;
    let total = tree.total_weight();
    let title = format!(
        "bottom-up: self {} at the roots, callers below · {}",
        flame.unit().label(),
        flame.unit().format(total)
    );
    let rows = title_line(area, buf, &title, pen.title());
    let first = first_row(inv.selected, usize::from(rows.height));
    for (i, r) in inv
        .rows
        .iter()
        .enumerate()
        .skip(first)
        .take(usize::from(rows.height))
    {
        let y = rows.y + (i - first) as u16;
        let marker = match (r.has_callers, r.expanded) {
            (false, _) => "  ",
            (true, false) => "▸ ",
            (true, true) => "▾ ",
        };
        let indent = "  ".repeat((r.path.len() - 1).min(40));
        let name = r.path.last().map_or("", |&f| tree.name(f));
        list_row(
            buf,
            rows,
            y,
            &[
                (pct(r.weight, total), pen.heat(share(r.weight, total))),
                (format!("  {indent}{marker}"), pen.dim()),
            ],
            name,
            Style::new(),
            (i == inv.selected).then(|| pen.selected()),
        );
    }
}

fn butterfly(flame: &FlameState, views: &ProfileViews, area: Rect, buf: &mut Buffer, pen: Pen) {
    let tree = flame.tree();
    let b = &views.butterfly;
    let total = tree.total_weight();
    let Some(function) = b.function else {
        let text = if views.function.is_empty() {
            "no function selected: select one in the flamegraph (f) or top functions (t)".to_owned()
        } else {
            format!(
                "{} has no samples in these stacks",
                escaped(&views.function)
            )
        };
        message(area, buf, &text);
        return;
    };
    let mut figures = vec![
        format!(" · total {}", pct(b.total_weight, total).trim_start()),
        format!(" · self {}", pct(b.self_weight, total).trim_start()),
    ];
    if b.from_root > 0 {
        figures.push(format!(
            " · {} as a first frame",
            pct(b.from_root, total).trim_start()
        ));
    }
    // The function's name gives up its middle (keeping its own last segment), down to
    // a few columns; narrower still, the figures give way to it from the last.
    let head = "callers and callees of ";
    let name = escaped(tree.name(function));
    let width = usize::from(area.width);
    let room = |figures: &[String]| {
        width
            .saturating_sub(fit::width(head) + figures.iter().map(|f| fit::width(f)).sum::<usize>())
    };
    let wanted = fit::width(&name).min(NAME_AT_LEAST);
    while room(&figures) < wanted && figures.pop().is_some() {}
    let title = format!(
        "{head}{}{}",
        fit::fit(&name, room(&figures)),
        figures.concat()
    );
    let rows = title_line(area, buf, &title, pen.title());
    let first = first_row(b.selected, usize::from(rows.height));
    for i in (first..b.len()).take(usize::from(rows.height)) {
        let y = rows.y + (i - first) as u16;
        let (weight, arrow, frame, name_style): (u64, &str, FrameId, Style) = match b.row(i) {
            ButterflyRow::Caller(j) => (b.callers[j].1, "  ↑ ", b.callers[j].0, Style::new()),
            ButterflyRow::Function => (
                b.total_weight,
                "● ",
                function,
                Style::new().add_modifier(Modifier::BOLD),
            ),
            ButterflyRow::Callee(j) => (b.callees[j].1, "  ↓ ", b.callees[j].0, Style::new()),
        };
        list_row(
            buf,
            rows,
            y,
            &[
                (pct(weight, total), pen.heat(share(weight, total))),
                ("  ".into(), Style::new()),
                (arrow.into(), pen.dim()),
            ],
            tree.name(frame),
            name_style,
            (i == b.selected).then(|| pen.selected()),
        );
    }
}

/// The fewest columns the callers view's title gives its function's name.
const NAME_AT_LEAST: usize = 16;

/// The fewest columns the source view's title gives its file's path.
const FILE_AT_LEAST: usize = 12;

fn source(views: &ProfileViews, area: Rect, buf: &mut Buffer, pen: Pen) {
    let s = &views.source;
    if let Some(why) = &s.no_lines {
        let text = if s.function.is_empty() {
            why.clone()
        } else {
            format!("no source lines for {}: {why}", escaped(&s.function))
        };
        message(area, buf, &text);
        return;
    }
    let file = s.file.as_deref().unwrap_or("");
    let file_weight: u64 = s.lines.iter().map(|&(_, w)| w).sum();
    let mut tail = format!(
        ", lines {} · {} of its samples",
        s.ranges(),
        pct(file_weight, s.total).trim_start()
    );
    if !s.other_files.is_empty() {
        tail.push_str(&format!(" · {} more files", s.other_files.len()));
    }
    // The file's path gives up its middle before anything else does.
    let head = format!("{} — ", escaped(&s.function));
    let file = escaped(file);
    let room = usize::from(area.width).saturating_sub(fit::width(&head) + fit::width(&tail));
    let title = format!("{head}{}{tail}", fit::fit(&file, room.max(FILE_AT_LEAST)));
    let mut body = title_line(area, buf, &title, pen.title());
    let text = match s.text() {
        Some(SourceText::Lines(lines)) => Some(lines),
        Some(SourceText::Unreadable(why)) => {
            body = title_line(
                body,
                buf,
                &format!("the text is not shown: {}", escaped(why)),
                pen.dim(),
            );
            None
        }
        Some(SourceText::Reading) | None => {
            body = title_line(body, buf, "reading the file…", pen.dim());
            None
        }
    };
    let number_width = s
        .rows
        .iter()
        .filter_map(|r| match r {
            SourceRow::Line { line, .. } => Some(line.to_string().len()),
            SourceRow::Gap => None,
        })
        .max()
        .unwrap_or(1);
    let hottest = s.lines.iter().map(|&(_, w)| w).max().unwrap_or(0);
    for (i, row) in s
        .rows
        .iter()
        .skip(s.top)
        .take(usize::from(body.height))
        .enumerate()
    {
        let y = body.y + i as u16;
        let width = usize::from(body.width);
        match *row {
            SourceRow::Gap => {
                put(
                    buf,
                    body.x,
                    y,
                    &format!("{:>number_width$} ⋮", ""),
                    width,
                    pen.dim(),
                );
            }
            SourceRow::Line { line, weight } => {
                let mut x = put(
                    buf,
                    body.x,
                    y,
                    &format!("{line:>number_width$} "),
                    width,
                    pen.dim(),
                );
                let cell = if weight > 0 {
                    pct(weight, s.total)
                } else {
                    format!("{:>6}", "")
                };
                let mut style = pen.heat(share(weight, s.total));
                if weight > 0 && weight == hottest {
                    style = style.add_modifier(Modifier::BOLD);
                }
                x += put(
                    buf,
                    body.x + x as u16,
                    y,
                    &cell,
                    width.saturating_sub(x),
                    style,
                );
                x += put(
                    buf,
                    body.x + x as u16,
                    y,
                    " │ ",
                    width.saturating_sub(x),
                    pen.dim(),
                );
                if let Some(code) = text.and_then(|t| t.get(line as usize - 1)) {
                    let code = escaped(&code.replace('\t', "    ")).into_owned();
                    put(
                        buf,
                        body.x + x as u16,
                        y,
                        &code,
                        width.saturating_sub(x),
                        Style::new(),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::Instant;

    use benchtop_sessions::lines::FrameLines;
    use benchtop_sessions::synthetic::TreeChunks;
    use benchtop_sessions::{Kind, StackTree};

    use super::super::tests::render;
    use crate::record::live::LiveEvent;
    use crate::state::{AppEvent, Key, State};

    /// The live screen with the known profile of `state::profile_views`' tests (and the
    /// source lines of `lex`), after `keys`.
    pub(crate) fn screen(keys: &str) -> State {
        let now = Instant::now();
        let mut s = State::new("ring", "mode=tell", true);
        let mut t = StackTree::new();
        for (stack, w) in [
            ("main;parse;lex", 30),
            ("main;parse;alloc", 10),
            ("main;eval;alloc", 20),
            ("main;eval", 25),
            ("main;idle", 15),
        ] {
            t.add_names(stack.split(';'), w);
        }
        let mut lines = FrameLines::default();
        lines.add("lex", "/src/lex.c", 4, 24);
        lines.add("lex", "/src/lex.c", 5, 3);
        lines.add("lex", "/src/lex.c", 12, 3);
        let chunk = TreeChunks::default().cpu(&t);
        s.update(
            AppEvent::Live(LiveEvent::IntervalStacks(Box::new(chunk))),
            now,
        );
        s.live.flames.views.lines = lines;
        for c in keys.chars() {
            let key = match c {
                '\n' => Key::Enter,
                '↓' => Key::Down,
                '→' => Key::Right,
                c => Key::Char(c),
            };
            for effect in s.update(AppEvent::Key(key), now) {
                if let crate::state::Effect::ReadSource(path) = effect {
                    let text: String = (1..=14)
                        .map(|i| match i {
                            4 => "    while (*p && isalnum(*p)) p++;\n".to_owned(),
                            5 => "    tok->len = p - tok->start;\n".to_owned(),
                            12 => "    return tok;\n".to_owned(),
                            i => format!("    /* line {i} */\n"),
                        })
                        .collect();
                    s.update(
                        AppEvent::Source {
                            path,
                            text: Ok(text),
                        },
                        now,
                    );
                }
            }
        }
        s
    }

    fn both(keys: &str) -> (String, String) {
        let s = screen(keys);
        let now = Instant::now();
        (render(&s, now, 80, 24), render(&s, now, 160, 48))
    }

    #[test]
    fn top_functions_at_80x24_and_160x48() {
        let (small, large) = both("t");
        assert!(small.contains(" 30.0%  30.0%  alloc"), "{small}");
        insta::assert_snapshot!("top_80x24", small);
        insta::assert_snapshot!("top_160x48", large);
    }

    #[test]
    fn bottom_up_at_80x24_and_160x48() {
        let (small, large) = both("i↓↓→");
        insta::assert_snapshot!("bottom_up_80x24", small);
        insta::assert_snapshot!("bottom_up_160x48", large);
    }

    #[test]
    fn callers_and_callees_at_80x24_and_160x48() {
        let (small, large) = both("t\nc");
        assert!(
            small.contains("↑ eval") && small.contains("↑ parse"),
            "{small}"
        );
        insta::assert_snapshot!("butterfly_80x24", small);
        insta::assert_snapshot!("butterfly_160x48", large);
    }

    #[test]
    fn source_at_80x24_and_160x48() {
        let (small, large) = both("tj\na");
        assert!(small.contains(" 80.0% │     while"), "{small}");
        insta::assert_snapshot!("source_80x24", small);
        insta::assert_snapshot!("source_160x48", large);
    }

    #[test]
    #[allow(clippy::field_reassign_with_default)]
    fn an_opened_synthetic_session_shows_every_view_with_its_heaviest_function_first() {
        use benchtop_sessions::synthetic::SyntheticStacks;
        let tmp = tempfile::tempdir().unwrap();
        let mut spec = SyntheticStacks::default();
        spec.stacks = 3_000;
        let dir = spec.write(&tmp.path().join("s")).unwrap();
        let session = benchtop_sessions::Session::load(&dir).unwrap();
        // The known answer, from the folded stacks: self weight per leaf function.
        let tree = session.profiles[Kind::Cpu].clone().unwrap();
        let mut self_of: std::collections::HashMap<String, u64> = Default::default();
        tree.for_each_stack(|frames, w| {
            let leaf = tree.name(*frames.last().unwrap()).to_owned();
            *self_of.entry(leaf).or_default() += w;
        });
        let (hottest, _) = self_of
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .unwrap();
        let now = Instant::now();
        let mut s = State::with_session(session, now, true);
        let keys = [
            Key::Char('t'),
            Key::Enter,
            Key::Char('i'),
            Key::Char('c'),
            Key::Char('a'),
        ];
        for key in keys {
            for effect in s.update(AppEvent::Key(key), now) {
                if let crate::state::Effect::LoadLines(d) = effect {
                    let stacks = benchtop_sessions::intervals::IntervalStacks::load(
                        &d,
                        &benchtop_sessions::limits::LoadOptions::default(),
                    )
                    .unwrap()
                    .unwrap();
                    s.update(
                        AppEvent::Lines {
                            dir: d,
                            lines: Ok(stacks.lines),
                        },
                        now,
                    );
                }
            }
            let screen = render(&s, now, 80, 24);
            assert!(!screen.contains("no samples yet"), "{screen}");
        }
        assert_eq!(&s.flames().views.function, hottest);
        let screen = render(&s, now, 160, 48);
        assert!(screen.contains(".rs, lines "), "{screen}");
        assert!(screen.contains(" │ "), "{screen}");
    }

    #[test]
    fn the_source_view_of_the_off_cpu_stacks_says_why_it_is_empty() {
        let s = screen("tj\nao");
        let small = render(&s, Instant::now(), 80, 24);
        assert!(small.contains("on-CPU samples only"), "{small}");
    }
}
