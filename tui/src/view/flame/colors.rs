//! The flame pane's colors: where a frame's code comes from, the change of its share in
//! differential mode on a fixed scale, and the legend that says so.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Span;

use super::dim;
use crate::state::flame::diff::{FULL_SCALE, NOISE_FLOOR, saturation};
use crate::state::flame::{Category, FlameState};

/// Background of a change under the noise floor in differential mode.
pub(super) const NEUTRAL: Color = Color::Rgb(225, 225, 225);

/// Background of a folded chain of frames.
pub(super) const FOLD_BG: Color = Color::Rgb(200, 200, 200);

/// Whether a legend line is drawn: with color, or without it in differential mode.
pub(super) fn has_legend(state: &FlameState, color: bool) -> bool {
    color || state.differential_active()
}

/// The legend: the colors of the categories `present` on screen, or in differential mode
/// the scale of the changes and the noise floor.
pub(super) fn draw_legend(
    state: &FlameState,
    line: Rect,
    buf: &mut Buffer,
    color: bool,
    present: &[Category],
) {
    // Groups of parts drawn whole or not at all: a legend cut in a word says less than a
    // shorter one.
    let mut groups: Vec<Vec<(String, Style)>> = Vec::new();
    let floor = NOISE_FLOOR * 100.0;
    let full = FULL_SCALE * 100.0;
    match (state.differential_active(), color) {
        (true, true) => {
            let mut scale = vec![(format!("−{full:.0} pp "), Style::new())];
            for s in [1.0, 0.6, 0.2] {
                scale.push(("█".into(), Style::new().fg(diff_color(-FULL_SCALE * s))));
            }
            scale.push(("█".into(), Style::new().fg(NEUTRAL)));
            for s in [0.2, 0.6, 1.0] {
                scale.push(("█".into(), Style::new().fg(diff_color(FULL_SCALE * s))));
            }
            scale.push((format!(" +{full:.0} pp"), Style::new()));
            groups.push(scale);
            groups.push(vec![(format!(" · <{floor:.1} pp neutral"), Style::new())]);
            groups.push(vec![(" · Δ of share".into(), dim(color))]);
        }
        (true, false) => {
            groups.push(vec![(
                format!("+ hotter, - colder by {floor:.1} pp or more"),
                Style::new(),
            )]);
        }
        (false, true) => {
            let shown = Category::LEGEND.into_iter().filter(|c| present.contains(c));
            for (i, category) in shown.enumerate() {
                let gap = if i == 0 { "" } else { " " };
                groups.push(vec![
                    (format!("{gap}■"), Style::new().fg(category_base(category))),
                    (format!(" {}", category.label()), Style::new()),
                ]);
            }
        }
        (false, false) => return,
    }
    let mut x = line.x;
    for group in groups {
        let w: u16 = group
            .iter()
            .map(|(text, _)| Span::raw(text.as_str()).width() as u16)
            .sum();
        if x + w > line.right() {
            break;
        }
        for (text, style) in group {
            let w = Span::raw(text.as_str()).width();
            buf.set_stringn(x, line.y, &text, w, style);
            x += w as u16;
        }
    }
}

/// A category's hue (degrees), saturation and lightness (0 to 1).
fn category_hsl(category: Category) -> (f64, f64, f64) {
    match category {
        Category::Ours => (18.0, 0.80, 0.60),
        Category::Crates => (44.0, 0.75, 0.58),
        Category::Std => (213.0, 0.62, 0.66),
        Category::Tokio => (267.0, 0.55, 0.68),
        Category::Libc => (128.0, 0.38, 0.60),
        Category::Kernel => (177.0, 0.38, 0.54),
        Category::Process => (0.0, 0.0, 0.69),
        Category::Unknown => (0.0, 0.0, 0.59),
    }
}

/// How far a module's hue may stray from its category's, either way (degrees): less
/// than half the 26° between the nearest two categories (ours and crates), so a box's
/// category still reads from its color.
pub(super) const HUE_SPREAD: f64 = 10.0;

/// How much darker every other box of a run of touching boxes is drawn.
pub(super) const NEIGHBOUR_DARKER: f64 = 0.12;

/// The color of a category, as the legend shows it.
pub(super) fn category_base(category: Category) -> Color {
    let (h, s, l) = category_hsl(category);
    hsl(h, s, l)
}

/// A box's color: its category's hue turned a little by its module (the crate and the
/// module after it: `tokio::runtime`, `core::ptr`; a C or kernel function by its name),
/// so that frames of one package share a hue and frames of two packages differ; darker
/// when `darker` (every other one of touching boxes), so that neighbours stay apart. A
/// frame keeps its color across refreshes and runs.
pub(super) fn category_color(category: Category, name: &str, darker: bool) -> Color {
    let (h, s, l) = category_hsl(category);
    let spread = 2 * HUE_SPREAD as u64 + 1;
    let turn = (fnv1a(module(name).as_bytes()) % spread) as f64 - HUE_SPREAD;
    let l = if darker { l - NEIGHBOUR_DARKER } else { l };
    hsl(h + turn, s, l)
}

/// The package a frame's name is from: its first two `::` segments (after a `<` or `&`
/// that opens a trait method's name), or the whole name when it has no path.
fn module(name: &str) -> &str {
    let name = name.trim_start_matches(['<', '&']);
    let mut ends = name.match_indices("::").map(|(i, _)| i);
    match (ends.next(), ends.next()) {
        (Some(_), Some(second)) => &name[..second],
        (Some(first), None) => &name[..first],
        _ => name,
    }
}

/// The RGB color of hue `h` (degrees, any), saturation `s` and lightness `l` (0 to 1).
fn hsl(h: f64, s: f64, l: f64) -> Color {
    let h = h.rem_euclid(360.0) / 60.0;
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let x = c * (1.0 - (h % 2.0 - 1.0).abs());
    let (r, g, b) = match h as u8 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let at = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    Color::Rgb(at(r), at(g), at(b))
}

/// The hue of `color` in degrees, for tests.
#[cfg(test)]
pub(super) fn hue(color: Color) -> f64 {
    let Color::Rgb(r, g, b) = color else {
        return 0.0;
    };
    let (r, g, b) = (f64::from(r), f64::from(g), f64::from(b));
    let max = r.max(g).max(b);
    let d = max - r.min(g).min(b);
    if d == 0.0 {
        return 0.0;
    }
    let h = if max == r {
        ((g - b) / d).rem_euclid(6.0)
    } else if max == g {
        (b - r) / d + 2.0
    } else {
        (r - g) / d + 4.0
    };
    h * 60.0
}

/// Red for a grown share, blue for a shrunk one, as deep as [`saturation`] says (in
/// proportion to the change, full at [`FULL_SCALE`]); neutral under [`NOISE_FLOOR`].
pub(super) fn diff_color(delta: f64) -> Color {
    let s = saturation(delta);
    if s == 0.0 {
        return NEUTRAL;
    }
    let pale = (225.0 * (1.0 - s)).round() as u8;
    if delta > 0.0 {
        Color::Rgb(255, pale, pale)
    } else {
        Color::Rgb(pale, pale, 255)
    }
}

/// `color` a little darker.
pub(super) fn shade(color: Color) -> Color {
    match color {
        Color::Rgb(r, g, b) => {
            let dark = |c: u8| (u16::from(c) * 4 / 5) as u8;
            Color::Rgb(dark(r), dark(g), dark(b))
        }
        other => other,
    }
}

/// Black or white, whichever reads better on `bg` (WCAG relative luminance).
pub(super) fn text_on(bg: Color) -> Color {
    let Color::Rgb(r, g, b) = bg else {
        return Color::Black;
    };
    let linear = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let luminance = 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
    // Where the contrast with black, (L + 0.05) / 0.05, equals that with white.
    if luminance > 0.179 {
        Color::Black
    } else {
        Color::White
    }
}

/// 64-bit FNV-1a: stable across runs and Rust versions, unlike the std hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
