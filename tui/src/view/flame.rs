//! The flame pane: an icicle drawn from the laid-out stack tree.
//!
//! The top row is the zoomed node (or the root's children), deeper frames below, one
//! terminal row per box; [`FlameState`] has laid the boxes out already (hidden frames
//! merged, chains folded), so drawing only scales them to the columns there are. Boxes
//! are colored by where their code comes from (ours, other crates, std, tokio, libc, the
//! kernel), with a legend; in differential mode red or blue as deep as their change in
//! share, neutral under the noise floor, with the scale as the legend; magenta when they
//! match the search; the selected box is reversed. Without color (`NO_COLOR`) matches are
//! underlined, boxes end in a `│`, and changes show as `+` and `-`.

use benchtop_sessions::escape::escaped;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Clear, Widget};

mod colors;

use super::fit::{self, fit};
use crate::state::flame::diff::NOISE_FLOOR;
use crate::state::flame::{Category, FlameBox, FlameState};
use colors::{FOLD_BG, category_color, diff_color, draw_legend, has_legend, shade, text_on};

/// Background of boxes that match the search (flamegraph.pl's search color).
const MATCH_BG: Color = Color::Rgb(230, 0, 230);

/// Columns the breadcrumb keeps before the figures on the right of the title line are
/// left out.
const MIN_CRUMBS: usize = 12;

/// Separates the names of the zoom path in the title line.
const CRUMB: &str = " › ";

/// The fewest rows of the pane that also get a legend line (the icicle keeps three).
const LEGEND_FROM: u16 = 6;

/// Draws the flame pane into `area` of `buf` (the inside of the pane's border): a title
/// line with the zoom path and the total (or the search's figures), the icicle, a legend,
/// and a line on the selected frame. `focused` shows the selection reversed (bold only
/// otherwise); `color == false` draws with modifiers and markers only, for `NO_COLOR`.
/// Any size works, down to nothing: below three rows the icicle keeps the rows there are.
pub fn render_flame(state: &FlameState, area: Rect, buf: &mut Buffer, focused: bool, color: bool) {
    let area = area.intersection(buf.area);
    if area.is_empty() {
        return;
    }
    Clear.render(area, buf);
    if state.is_empty() {
        let text = "no samples yet";
        let width = Span::raw(text).width().min(usize::from(area.width)) as u16;
        let x = area.x + (area.width - width) / 2;
        let y = area.y + (area.height - 1) / 2;
        buf.set_stringn(x, y, text, usize::from(width), dim(color));
        return;
    }
    let mut icicle = area;
    if area.height >= 2 {
        draw_title(state, Rect { height: 1, ..area }, buf, focused);
        icicle.y += 1;
        icicle.height -= 1;
    }
    if area.height >= 3 {
        icicle.height -= 1;
        let line = Rect {
            y: area.bottom() - 1,
            height: 1,
            ..area
        };
        draw_selection(state, line, buf);
    }
    let legend = (area.height >= LEGEND_FROM && has_legend(state, color)).then(|| {
        icicle.height -= 1;
        Rect {
            y: icicle.bottom(),
            height: 1,
            ..area
        }
    });
    let present = draw_icicle(state, icicle, buf, focused, color);
    if let Some(line) = legend {
        draw_legend(state, line, buf, color, &present);
    }
}

/// The title line: the zoom path on the left, cut from the left to fit; the search's
/// figures, or the zoomed total, on the right when there is room.
fn draw_title(state: &FlameState, line: Rect, buf: &mut Buffer, focused: bool) {
    let width = usize::from(line.width);
    let (right, show_right) = match state.query() {
        "" => {
            let total = state.unit().format(state.zoom_total());
            let fits = Span::raw(total.as_str()).width() + 1 + MIN_CRUMBS <= width;
            (total, fits)
        }
        // Searching, the figures show at every width: shorter forms first give way to
        // the breadcrumb's room, then the breadcrumb to the count.
        _ => {
            let forms = search_figures(state);
            let fits = |extra: usize| {
                forms
                    .iter()
                    .find(|f| Span::raw(f.as_str()).width() + extra <= width)
                    .cloned()
            };
            match fits(1 + MIN_CRUMBS).or_else(|| fits(0)) {
                Some(form) => (form, true),
                None => (String::new(), false),
            }
        }
    };
    let right_width = Span::raw(right.as_str()).width();
    let room = if show_right {
        width.saturating_sub(right_width + 1)
    } else {
        width
    };
    // Frames the hide patterns merged into their callers are said, so that a caller
    // that seems to call what it does not is explained (`x` shows every frame).
    let hidden = state.hidden_nodes();
    let mut note = String::new();
    if state.hiding() && hidden > 0 {
        let plural = if hidden == 1 { "" } else { "s" };
        note = format!(" · {hidden} frame{plural} hidden");
    }
    let note_width = Span::raw(note.as_str()).width();
    if room < note_width + MIN_CRUMBS {
        note.clear();
    }
    let mut left = breadcrumb(state, room - Span::raw(note.as_str()).width());
    left.push_str(&note);
    if state.differential() && !state.differential_active() {
        left.push_str(" · diff: no baseline");
    }
    let style = if focused {
        Style::new().add_modifier(Modifier::BOLD)
    } else {
        Style::new()
    };
    buf.set_stringn(line.x, line.y, &left, room, style);
    if show_right {
        let x = line.right() - right_width as u16;
        buf.set_stringn(x, line.y, &right, right_width, Style::new());
    }
}

/// The search's figures in the title, longest first: `/lock: 5 matches, 17.5% of 2,976
/// samples`, then without the total, without the query, and the count alone. A substring
/// search shows its query as `*lock*`.
fn search_figures(state: &FlameState) -> [String; 4] {
    let n = state.matches();
    let count = format!("{n} {}", if n == 1 { "match" } else { "matches" });
    let share = format!("{:.1}%", state.match_share() * 100.0);
    let query = match state.substring() {
        true => format!("/*{}*", escaped(state.query())),
        false => format!("/{}", escaped(state.query())),
    };
    let total = state.unit().format(state.zoom_total());
    [
        format!("{query}: {count}, {share} of {total}"),
        format!("{query}: {count}, {share}"),
        format!("{count}, {share}"),
        count,
    ]
}

/// `all › bt-ring › main`, keeping the deepest names that fit in `room` columns and an
/// ellipsis for the others.
fn breadcrumb(state: &FlameState, room: usize) -> String {
    let crumbs: Vec<std::borrow::Cow<'_, str>> = std::iter::once("all")
        .chain(state.zoom_path())
        .map(|name| {
            if state.short_names() {
                std::borrow::Cow::Owned(
                    escaped(&benchtop_sessions::names::short_name(name, 0)).into_owned(),
                )
            } else {
                escaped(name)
            }
        })
        .collect();
    let sep = Span::raw(CRUMB).width();
    let mut keep = crumbs.len();
    let mut used = 0;
    for (i, crumb) in crumbs.iter().enumerate().rev() {
        let width = Span::raw(&**crumb).width() + if i + 1 < crumbs.len() { sep } else { 0 };
        let ellipsis = if i > 0 { 1 + sep } else { 0 };
        // The deepest name always stays; the line cuts it if it must.
        if used + width + ellipsis > room && i + 1 < crumbs.len() {
            break;
        }
        used += width;
        keep = i;
    }
    let mut text = String::new();
    if keep > 0 {
        text.push('…');
        text.push_str(CRUMB);
    }
    text.push_str(&crumbs[keep..].join(CRUMB));
    text
}

/// The selected frame: its name, total, share of the zoomed total and change. The
/// figures always show whole; the name gives up its middle to make room for them.
fn draw_selection(state: &FlameState, line: Rect, buf: &mut Buffer) {
    let Some(b) = state.selected_box() else {
        return;
    };
    let total = state.total(b.node);
    let share = total as f64 / state.zoom_total().max(1) as f64;
    let mut figures = format!(" · {} · {:.1}%", state.unit().format(total), share * 100.0);
    match b.delta {
        Some(_) if b.new_frame => figures.push_str(" · new"),
        Some(delta) => figures.push_str(&format!(" · Δ {:+.2} pp", delta * 100.0)),
        None => {}
    }
    let label = state.label(b);
    let label = escaped(&label);
    let width = usize::from(line.width);
    let figures_width = Span::raw(figures.as_str()).width();
    let room = width.saturating_sub(figures_width);
    let name = if room < 2 {
        String::new()
    } else {
        fit(&label, room).into_owned()
    };
    let text = if name.is_empty() {
        figures.trim_start_matches(" · ").to_owned()
    } else {
        name + &figures
    };
    buf.set_stringn(line.x, line.y, &text, width, Style::new());
}

/// Secondary text: dim with color, plain without.
pub(super) fn dim(color: bool) -> Style {
    if color {
        Style::new().add_modifier(Modifier::DIM)
    } else {
        Style::new()
    }
}

/// The rows of the layout that fit in `area`, scrolled so the selection shows. Returns
/// the categories of the boxes drawn in their category's color, for the legend.
fn draw_icicle(
    state: &FlameState,
    area: Rect,
    buf: &mut Buffer,
    focused: bool,
    color: bool,
) -> Vec<Category> {
    let mut present = Vec::new();
    let height = usize::from(area.height);
    let selected = state.selected_position();
    let first = match selected {
        Some((row, _)) if row >= height => row + 1 - height,
        _ => 0,
    };
    let columns = f64::from(area.width);
    for (y, (r, row)) in (area.y..).zip(state.rows().iter().enumerate().skip(first).take(height)) {
        // Where the last box drawn ended, its background, and whether it was the darker
        // of two neighbours.
        let mut left: Option<(u16, Color, bool)> = None;
        for (i, b) in row.iter().enumerate() {
            let x0 = (b.start * columns).round().clamp(0.0, columns) as u16;
            let x1 = ((b.start + b.width) * columns).round().clamp(0.0, columns) as u16;
            if x1 <= x0 {
                continue;
            }
            let cell = Rect::new(area.x + x0, y, x1 - x0, 1);
            let touching = left.filter(|&(end, ..)| end == x0);
            let look = Look {
                state,
                selected: selected == Some((r, i)),
                focused,
                at_right_edge: x1 == area.width,
                color,
                touching: touching.map(|(_, bg, _)| bg),
                darker: touching.is_some_and(|(.., darker)| !darker),
            };
            if color && b.delta.is_none() && !b.matched && !b.is_fold() {
                let category = state.category(b.node);
                if !present.contains(&category) {
                    present.push(category);
                }
            }
            left = look.draw(b, cell, buf).map(|bg| (x1, bg, look.darker));
        }
    }
    present
}

/// How one box is drawn.
struct Look<'a> {
    state: &'a FlameState,
    selected: bool,
    focused: bool,
    at_right_edge: bool,
    color: bool,
    /// The background of the box that ends where this one starts.
    touching: Option<Color>,
    /// The box touches a lighter neighbour on its left: it is drawn darker.
    darker: bool,
}

impl Look<'_> {
    /// Draws `b` in `cell`; returns its background.
    fn draw(&self, b: &FlameBox, cell: Rect, buf: &mut Buffer) -> Option<Color> {
        let style = self.style(b);
        buf.set_style(cell, style);
        let mut x = cell.x;
        let mut width = cell.width;
        // A box's last column separates its label from the next box's: a bar without
        // backgrounds, blank with them, so two labels never run together.
        if !self.at_right_edge {
            width -= 1;
            if !self.color {
                buf.set_stringn(x + width, cell.y, "│", 1, style);
            }
        }
        if !self.color {
            let marker = match b.delta {
                Some(_) if b.new_frame => "+",
                Some(d) if d >= NOISE_FLOOR => "+",
                Some(d) if d <= -NOISE_FLOOR => "-",
                _ => "",
            };
            if !marker.is_empty() && width > 0 {
                buf.set_stringn(x, cell.y, marker, 1, style);
                x += 1;
                width -= 1;
            }
        }
        // A box too narrow for a letter and an ellipsis says nothing: its label is not made.
        if width >= 2 {
            put_name(buf, x, cell.y, width, &self.state.label(b), style);
        }
        style.bg
    }

    fn style(&self, b: &FlameBox) -> Style {
        let mut style = if self.color {
            let bg = if b.matched {
                MATCH_BG
            } else if let Some(delta) = b.delta {
                diff_color(delta)
            } else if b.is_fold() {
                FOLD_BG
            } else {
                // Neighbours alternate in lightness, whatever their names.
                let name = self.state.name(b.node);
                category_color(self.state.category(b.node), name, self.darker)
            };
            // Two neighbours of one color would read as one box (the same name under two
            // parents, two matches, two unchanged frames): the second is shaded.
            let bg = if self.touching == Some(bg) {
                shade(bg)
            } else {
                bg
            };
            Style::new().bg(bg).fg(text_on(bg))
        } else if b.matched {
            Style::new().add_modifier(Modifier::UNDERLINED | Modifier::BOLD)
        } else {
            Style::new()
        };
        if self.selected && self.focused {
            style = style.add_modifier(Modifier::REVERSED | Modifier::BOLD);
        } else if self.selected {
            style = style.add_modifier(Modifier::BOLD);
        }
        style
    }
}

/// Writes `name` in `width` columns from `x`, its middle elided when it does not fit.
/// One column is too few to say anything: it stays blank.
fn put_name(buf: &mut Buffer, x: u16, y: u16, width: u16, name: &str, style: Style) {
    // A recorded name may hold control characters: shown escaped, measured as shown.
    let name = &*escaped(name);
    let width = usize::from(width);
    if width < 2 && fit::width(name) > width {
        return;
    }
    buf.set_stringn(x, y, fit(name, width), width, style);
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use benchtop_sessions::StackTree;

    use super::colors::{HUE_SPREAD, NEUTRAL, category_base, hue};
    use super::*;
    use crate::state::flame::diff::FULL_SCALE;
    use crate::state::flame::{Category, FlameUnit};

    const PROFILE: &[(&str, u64)] = &[
        ("bt-ring;main;ring::run;ring::hop;mpsc::send", 300),
        ("bt-ring;main;ring::run;ring::hop;mpsc::recv", 200),
        ("bt-ring;main;ring::run;ring::hop", 20),
        ("bt-ring;main;ring::run;alloc::vec::Vec<T>::push", 80),
        ("bt-ring;main;idle", 60),
        ("bt-ring;tokio-runtime-worker;tokio::runtime::park", 150),
        ("bt-ring;tokio-runtime-worker;std::sys::futex_wait", 40),
        ("bt-sock;main;socket::recv_from", 120),
        (
            "bt-sock;main;a_very_long_function_name_that_needs_cutting_in_any_box",
            30,
        ),
        ("bt-sock;gc", 5),
    ];

    /// The profile before: `ring::hop` was cheaper, `mpsc::recv` dearer, and nothing called
    /// `Vec::push`.
    const BASELINE: &[(&str, u64)] = &[
        ("bt-ring;main;ring::run;ring::hop;mpsc::send", 150),
        ("bt-ring;main;ring::run;ring::hop;mpsc::recv", 400),
        ("bt-ring;main;idle", 60),
        ("bt-ring;tokio-runtime-worker;tokio::runtime::park", 150),
        ("bt-ring;tokio-runtime-worker;std::sys::futex_wait", 40),
        ("bt-sock;main;socket::recv_from", 120),
        (
            "bt-sock;main;a_very_long_function_name_that_needs_cutting_in_any_box",
            30,
        ),
        ("bt-sock;gc", 5),
    ];

    fn tree(stacks: &[(&str, u64)]) -> StackTree {
        let mut t = StackTree::new();
        for (stack, weight) in stacks {
            t.add_names(stack.split(';'), *weight);
        }
        t
    }

    fn profile() -> FlameState {
        let mut s = FlameState::new(FlameUnit::Samples);
        s.set_tree(tree(PROFILE));
        s
    }

    fn render(state: &FlameState, width: u16, height: u16, color: bool) -> Buffer {
        let mut buf = Buffer::empty(Rect::new(0, 0, width, height));
        render_flame(state, buf.area, &mut buf, true, color);
        buf
    }

    /// The buffer's text, a line per row.
    fn text(buf: &Buffer) -> String {
        let width = usize::from(buf.area.width.max(1));
        let lines: Vec<String> = buf
            .content
            .chunks(width)
            .map(|row| row.iter().map(|c| c.symbol()).collect())
            .collect();
        lines.join("\n")
    }

    /// The buffer's styles, one line per run of equal style: `y x0..x1 fg bg modifiers`.
    fn styles(buf: &Buffer) -> String {
        let mut out = String::new();
        let width = usize::from(buf.area.width.max(1));
        for (y, row) in buf.content.chunks(width).enumerate() {
            let mut start = 0;
            for x in 1..=row.len() {
                let same = |a: &ratatui::buffer::Cell, b: &ratatui::buffer::Cell| {
                    (a.fg, a.bg, a.modifier) == (b.fg, b.bg, b.modifier)
                };
                if x == row.len() || !same(&row[x], &row[start]) {
                    let c = &row[start];
                    let _ = writeln!(
                        out,
                        "{y:>2} {start:>3}..{x:<3} fg {:?} bg {:?} {:?}",
                        c.fg, c.bg, c.modifier
                    );
                    start = x;
                }
            }
        }
        out
    }

    /// The cell under the first occurrence of `needle` inside the borders.
    fn cell_of<'a>(buf: &'a Buffer, needle: &str) -> &'a ratatui::buffer::Cell {
        let text = text(buf);
        let rows = text.lines().count();
        let (y, x) = text
            .lines()
            .enumerate()
            .take(rows.saturating_sub(1))
            .skip(1)
            .find_map(|(y, line)| {
                line.find(needle)
                    .map(|byte| (y, line[..byte].chars().count()))
            })
            .unwrap_or_else(|| panic!("{needle} not drawn:\n{text}"));
        &buf[(x as u16, y as u16)]
    }

    #[test]
    fn a_small_tree_at_80x12() {
        let buf = render(&profile(), 80, 12, true);
        insta::assert_snapshot!(text(&buf));
        insta::assert_snapshot!("a_small_tree_at_80x12_styles", styles(&buf));
    }

    #[test]
    fn a_small_tree_at_160x24() {
        insta::assert_snapshot!(text(&render(&profile(), 160, 24, true)));
    }

    #[test]
    fn a_zoomed_tree_shows_its_path_and_fills_the_width() {
        let mut s = profile();
        s.select_child(); // main
        s.select_child(); // ring::run
        assert!(s.zoom_in());
        let buf = render(&s, 80, 12, true);
        insta::assert_snapshot!(text(&buf));
        assert!(
            cell_of(&buf, "ring::run")
                .modifier
                .contains(Modifier::REVERSED)
        );

        // Out of focus, the selection is only bold.
        let mut buf = Buffer::empty(Rect::new(0, 0, 80, 12));
        render_flame(&s, buf.area, &mut buf, false, true);
        let run = cell_of(&buf, "ring::run").modifier;
        assert!(run.contains(Modifier::BOLD) && !run.contains(Modifier::REVERSED));
    }

    #[test]
    fn search_matches_are_magenta_and_counted_in_the_title() {
        let mut s = profile();
        // Anywhere in a name: `recv` in `recv_from` too.
        s.set_substring(true);
        s.search("RECV");
        s.next_match(); // socket::recv_from, on a row above mpsc::recv
        s.next_match();
        let buf = render(&s, 80, 12, true);
        insta::assert_snapshot!(text(&buf));
        let recv = cell_of(&buf, "mpsc::recv");
        assert_eq!(recv.bg, MATCH_BG);
        assert!(
            recv.modifier.contains(Modifier::REVERSED),
            "mpsc::recv is selected"
        );
        assert_eq!(cell_of(&buf, "cv_from").bg, MATCH_BG);
        assert_ne!(cell_of(&buf, "mpsc::send").bg, MATCH_BG);
    }

    #[test]
    fn the_search_count_shows_at_every_width() {
        let mut s = profile();
        s.search("recv");
        let full = "/recv: 1 match, ";
        assert!(
            text(&render(&s, 80, 12, true))
                .lines()
                .next()
                .unwrap()
                .contains(full)
        );
        // The width of the flame pane on an 80-column screen, and narrower.
        for (width, count) in [(42, "/recv: 1 match, "), (30, "1 match, "), (16, "1 match")] {
            let title = text(&render(&s, width, 12, true))
                .lines()
                .next()
                .unwrap()
                .to_owned();
            assert!(title.contains(count), "{width}: {title}");
        }
        s.set_substring(true);
        let title = text(&render(&s, 80, 12, true))
            .lines()
            .next()
            .unwrap()
            .to_owned();
        assert!(title.contains("/*recv*: 2 matches, "), "{title}");
    }

    #[test]
    fn touching_siblings_of_one_module_alternate_in_lightness() {
        let mut s = FlameState::default();
        s.set_folding(false);
        s.set_tree(tree(&[
            ("p;std::sync::Mutex::lock", 3),
            ("p;std::sync::Mutex::unlock", 3),
            ("p;std::sync::Mutex::try_lock", 3),
        ]));
        let buf = render(&s, 60, 5, true);
        let [lock, try_lock, unlock] = ["Mutex::lock", "try_lock", "unlock"].map(|n| {
            let Color::Rgb(r, g, b) = cell_of(&buf, n).bg else {
                panic!("{n} has no color")
            };
            u32::from(r) + u32::from(g) + u32::from(b)
        });
        // Sorted by name: lock, try_lock, unlock; the middle one darker than both.
        assert!(
            try_lock + 60 < lock && try_lock + 60 < unlock,
            "{lock} {try_lock} {unlock}"
        );
    }

    #[test]
    fn the_legend_names_only_the_categories_on_screen() {
        let mut s = FlameState::default();
        s.set_tree(tree(&[
            ("md5sum;main;md5_block", 8),
            ("md5sum;main;__memcpy", 2),
        ]));
        let text = text(&render(&s, 60, 8, true));
        let legend = text.lines().nth(6).unwrap_or_default();
        assert!(
            legend.contains("■ ours") && legend.contains("■ libc"),
            "{text}"
        );
        for absent in ["tokio", "crates", "std", "kernel"] {
            assert!(
                !legend.contains(absent),
                "{absent} is not on screen:\n{text}"
            );
        }
    }

    #[test]
    fn touching_boxes_of_one_color_are_told_apart() {
        let mut s = FlameState::default();
        s.set_folding(false);
        s.set_tree(tree(&[
            ("a;main", 1),
            ("b;main", 1),
            ("b;x", 1),
            ("c;x", 1),
        ]));
        s.search("x");
        let buf = render(&s, 40, 5, true);
        // Row 2: main | main (two parents), then x | x (two matches).
        let row: Vec<Color> = (1..39).map(|x| buf[(x, 2)].bg).collect();
        let changes = row.windows(2).filter(|w| w[0] != w[1]).count();
        assert_eq!(changes, 3, "{row:?}");
    }

    #[test]
    fn differential_boxes_are_red_when_hotter_and_blue_when_colder() {
        let mut s = profile();
        s.set_baseline(Some(tree(BASELINE)));
        s.set_differential(true);
        s.select_child();
        s.select_child();
        s.select_child(); // ring::hop
        let buf = render(&s, 80, 13, true);
        insta::assert_snapshot!(text(&buf));
        insta::assert_snapshot!("differential_styles", styles(&buf));
        let Color::Rgb(r, g, b) = cell_of(&buf, "mpsc::send").bg else {
            panic!("no color")
        };
        assert!(r == 255 && g < 100 && b < 100, "send doubled: deep red");
        let Color::Rgb(r, _, b) = cell_of(&buf, "mpsc::recv").bg else {
            panic!("no color")
        };
        assert!(b == 255 && r < 255, "recv halved: blue");
        let Color::Rgb(r, _, _) = cell_of(&buf, "V…").bg else {
            panic!("no color")
        };
        assert_eq!(r, 255, "push is new: red");
    }

    #[test]
    fn without_color_selection_matches_and_changes_still_show() {
        let mut s = profile();
        s.set_baseline(Some(tree(BASELINE)));
        s.set_differential(true);
        s.search("socket");
        s.select_child(); // main
        let buf = render(&s, 80, 12, false);
        insta::assert_snapshot!(text(&buf));
        insta::assert_snapshot!("without_color_styles", styles(&buf));
        assert!(buf.content.iter().all(|c| c.bg == Color::Reset));
        assert!(
            cell_of(&buf, "cv_from")
                .modifier
                .contains(Modifier::UNDERLINED)
        );
        assert!(cell_of(&buf, "main").modifier.contains(Modifier::REVERSED));
        assert_eq!(cell_of(&buf, "+mpsc::send").symbol(), "+");
        assert_eq!(cell_of(&buf, "-mpsc::recv").symbol(), "-");
    }

    #[test]
    fn an_empty_profile_says_there_are_no_samples_yet() {
        let mut s = FlameState::new(FlameUnit::Micros);
        s.set_tree(StackTree::new());
        insta::assert_snapshot!(text(&render(&s, 80, 12, true)));
    }

    #[test]
    fn tiny_areas_draw_what_fits_without_panicking() {
        let mut s = profile();
        s.search("a");
        s.set_baseline(Some(tree(BASELINE)));
        s.set_differential(true);
        let empty = FlameState::default();
        for state in [&s, &empty] {
            for (w, h) in [(0, 0), (1, 1), (2, 2), (10, 3), (3, 10), (80, 1), (1, 80)] {
                for color in [true, false] {
                    render(state, w, h, color);
                }
            }
        }
        assert_eq!(
            text(&render(&s, 10, 3, true)),
            " 0 matches\nbt-ring b…\n850 sample",
            "too narrow for the figures: they come first, and the search count"
        );
    }

    #[test]
    fn an_area_outside_the_buffer_is_clipped() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 20, 5));
        render_flame(&profile(), Rect::new(10, 2, 40, 40), &mut buf, false, true);
        render_flame(&profile(), Rect::new(50, 50, 4, 4), &mut buf, false, true);
        assert_eq!(text(&buf).lines().nth(2).unwrap(), "          all       ");
    }

    #[test]
    fn the_selection_scrolls_into_view_on_a_short_pane() {
        let mut s = profile();
        while s.select_child() {}
        // 5 rows deep (bt-ring … mpsc::send), 2 icicle rows.
        let buf = render(&s, 60, 4, false);
        insta::assert_snapshot!(text(&buf));
        assert!(
            cell_of(&buf, "mpsc::send")
                .modifier
                .contains(Modifier::REVERSED)
        );
    }

    #[test]
    fn a_long_zoom_path_keeps_its_deepest_names() {
        let mut s = profile();
        while s.select_child() {}
        s.zoom_in();
        let buf = render(&s, 40, 6, true);
        let top = text(&buf).lines().next().unwrap().to_owned();
        assert!(top.contains("…") && top.contains("mpsc::send"), "{top}");
    }

    /// The ring's stacks as recorded with frame pointers: 37 frames of C, std and tokio
    /// plumbing, one child each, before the workload's first fork.
    fn ring_plumbing() -> Vec<&'static str> {
        vec![
            "_start",
            "__libc_start_main@@GLIBC_2.34",
            "__libc_start_call_main",
            "main",
            "std::rt::lang_start_internal",
            "std::panic::catch_unwind",
            "std::panicking::try",
            "std::panicking::try::do_call",
            "std::rt::lang_start_internal::{{closure}}",
            "std::rt::lang_start::{{closure}}",
            "std::sys::backtrace::__rust_begin_short_backtrace",
            "core::ops::function::FnOnce::call_once",
            "benchtop::main",
            "benchtop_workloads::worker::run_worker",
            "tokio::runtime::runtime::Runtime::block_on",
            "tokio::runtime::scheduler::current_thread::CurrentThread::block_on",
            "tokio::runtime::context::runtime::enter_runtime",
            "tokio::runtime::scheduler::current_thread::CurrentThread::block_on::{{closure}}",
            "tokio::runtime::scheduler::current_thread::CoreGuard::block_on",
            "tokio::runtime::scheduler::current_thread::CoreGuard::enter",
            "tokio::runtime::context::set_scheduler",
            "std::thread::local::LocalKey<T>::with",
            "std::thread::local::LocalKey<T>::try_with",
            "tokio::runtime::context::set_scheduler::{{closure}}",
            "tokio::runtime::context::scoped::Scoped<T>::set",
            "tokio::runtime::scheduler::current_thread::CoreGuard::enter::{{closure}}",
            "tokio::runtime::scheduler::current_thread::CoreGuard::block_on::{{closure}}",
            "tokio::runtime::scheduler::current_thread::Context::run_task",
            "tokio::runtime::coop::budget",
            "tokio::runtime::task::raw::poll",
            "tokio::runtime::task::harness::Harness<T,S>::poll",
            "tokio::runtime::task::harness::poll_future",
            "tokio::runtime::task::core::Core<T,S>::poll",
            "<core::pin::Pin<P> as core::future::future::Future>::poll",
            "benchtop_workloads::ring::node::Node::run::{{closure}}",
            "benchtop_workloads::ring::node::Node::step",
            "benchtop_workloads::ring::actors::hop",
        ]
    }

    /// Below the plumbing: the workload's own fork, into std, libc and the kernel.
    const RING_LEAVES: &[(&str, u64)] = &[
        (
            "benchtop_workloads::ring::mailbox::Mailbox<T>::send;alloc::vec::Vec<T,A>::push",
            420,
        ),
        ("benchtop_workloads::ring::mailbox::Mailbox<T>::send", 180),
        (
            "benchtop_workloads::ring::mailbox::Mailbox<T>::recv;std::sync::mpsc::Receiver<T>::try_recv",
            150,
        ),
        (
            "benchtop_workloads::ring::mailbox::Mailbox<T>::recv;__memcpy_avx512_unaligned_erms",
            90,
        ),
        (
            "tokio::runtime::park::Inner::park;syscall;do_syscall_64_[k];futex_wait_[k]",
            100,
        ),
        ("hyper::proto::h1::encode", 60),
    ];

    fn ring_tree(scale: impl Fn(&str, u64) -> u64) -> StackTree {
        let plumbing = ring_plumbing().join(";");
        let mut t = StackTree::new();
        for (leaf, weight) in RING_LEAVES {
            let stack = format!("bt-ring;{plumbing};{leaf}");
            t.add_names(stack.split(';'), scale(leaf, *weight));
        }
        t
    }

    fn ring() -> FlameState {
        let mut s = FlameState::new(FlameUnit::Samples);
        s.set_tree(ring_tree(|_, w| w));
        s
    }

    /// The ring before: `send` pushed less, `recv` copied more, the rest alike but for a
    /// change under the noise floor.
    fn ring_diff() -> FlameState {
        let mut s = ring();
        s.set_baseline(Some(ring_tree(|leaf, w| {
            if leaf.ends_with("push") {
                w / 2
            } else if leaf.ends_with("erms") {
                w * 3
            } else if leaf.starts_with("hyper") {
                w + 1
            } else {
                w
            }
        })));
        s.set_differential(true);
        s
    }

    #[test]
    fn the_ring_at_80x24_and_160x48_with_its_legend() {
        for (w, h) in [(80, 24), (160, 48)] {
            let buf = render(&ring(), w, h, true);
            let text = text(&buf);
            insta::assert_snapshot!(format!("ring_{w}x{h}"), text);
            assert!(text.contains("■ ours"), "the legend:\n{text}");
            insta::assert_snapshot!(format!("ring_{w}x{h}_styles"), styles(&buf));
        }
    }

    #[test]
    fn the_ring_in_differential_mode_at_80x24_and_160x48_with_its_scale() {
        for (w, h) in [(80, 24), (160, 48)] {
            let buf = render(&ring_diff(), w, h, true);
            let text = text(&buf);
            insta::assert_snapshot!(format!("ring_diff_{w}x{h}"), text);
            assert!(text.contains("+5 pp"), "the scale:\n{text}");
            insta::assert_snapshot!(format!("ring_diff_{w}x{h}_styles"), styles(&buf));
        }
    }

    #[test]
    fn hidden_frames_are_counted_in_the_title_until_every_frame_shows() {
        let mut s = ring();
        let hidden = s.hidden_nodes();
        assert!(hidden > 1);
        for (w, h) in [(80, 24), (160, 48)] {
            let screen = text(&render(&s, w, h, true));
            let title = screen.lines().next().unwrap_or_default();
            assert!(
                title.contains(&format!("· {hidden} frames hidden")),
                "{w}x{h}: {title}"
            );
        }
        s.set_hiding(false);
        let all = text(&render(&s, 80, 24, true));
        assert!(!all.contains("hidden"), "{all}");
        // Too narrow for it and the path: the path stays.
        s.set_hiding(true);
        let narrow = text(&render(&s, 24, 12, true));
        assert!(!narrow.contains("hidden"), "{narrow}");
    }

    #[test]
    fn a_fork_is_on_screen_at_80x24_even_with_every_frame_shown() {
        let mut s = ring();
        s.set_hiding(false);
        // The flame pane's inside on the live screen at 80x24.
        let text = text(&render(&s, 42, 18, true));
        // recv and send side by side under hop (recv's name cut in its middle).
        assert!(
            text.lines()
                .any(|l| l.contains("::recv") && l.contains("::send")),
            "no fork on screen:\n{text}"
        );
        assert!(
            text.lines().last().unwrap().starts_with("actors::hop"),
            "the selection stays on hop with every frame shown:\n{text}"
        );
        assert!(text.contains("… 3"), "the plumbing folded:\n{text}");
    }

    #[test]
    fn a_change_under_the_noise_floor_is_neutral_and_above_it_deepens_in_proportion() {
        assert_eq!(diff_color(NOISE_FLOOR * 0.99), NEUTRAL);
        assert_eq!(diff_color(-NOISE_FLOOR * 0.5), NEUTRAL);
        let depth = |delta: f64| match diff_color(delta) {
            Color::Rgb(255, g, _) if delta > 0.0 => 225.0 - f64::from(g),
            Color::Rgb(r, _, 255) => 225.0 - f64::from(r),
            other => panic!("{other:?}"),
        };
        let one = depth(0.01);
        assert!(one > 0.0);
        assert!(
            (depth(0.02) / one - 2.0).abs() < 0.05,
            "{one} {}",
            depth(0.02)
        );
        assert!((depth(-0.02) / one - 2.0).abs() < 0.05);
        assert_eq!(depth(FULL_SCALE), 225.0);
        assert_eq!(depth(FULL_SCALE * 4.0), 225.0);

        // On screen: hyper's change (about 0.1 pp) stays neutral, push's is red.
        let buf = render(&ring_diff(), 160, 48, true);
        assert_eq!(cell_of(&buf, "encode").bg, NEUTRAL);
        assert!(matches!(cell_of(&buf, "Vec<…>::push").bg, Color::Rgb(255, g, _) if g < 225));
    }

    #[test]
    fn the_selection_line_elides_the_name_never_the_figures() {
        let mut s = ring_diff();
        while s.select_child() {}
        for width in [42, 60, 160] {
            let buf = render(&s, width, 10, true);
            let line = text(&buf).lines().last().unwrap().trim_end().to_owned();
            assert!(
                line.ends_with(" pp") || line.ends_with("new"),
                "{width}: {line}"
            );
            assert!(
                line.contains("samples") && line.contains('%'),
                "{width}: {line}"
            );
        }
        let buf = render(&s, 42, 10, true);
        let line = text(&buf).lines().last().unwrap().to_owned();
        assert!(
            line.starts_with('V') && line.contains("…push ·"),
            "the name gives up its middle: {line}"
        );
    }

    #[test]
    fn categories_color_the_boxes() {
        let mut s = ring();
        s.set_folding(false);
        let buf = render(&s, 160, 48, true);
        let bg = |needle: &str| cell_of(&buf, needle).bg;
        // A box's hue is its category's, turned by its module by at most HUE_SPREAD
        // (and a degree of rounding).
        let near = |c: Color, base: Category| {
            let turn = (hue(c) - hue(category_base(base)) + 540.0).rem_euclid(360.0) - 180.0;
            turn.abs() <= HUE_SPREAD + 1.0
        };
        assert!(near(bg("Vec<…>::push"), Category::Std));
        assert!(near(bg("__me"), Category::Libc));
        assert!(near(bg("futex_wait_[k]"), Category::Kernel));
        assert!(near(bg("Inner::park"), Category::Tokio));
        assert!(near(bg("encode"), Category::Crates));
    }
}
