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

/// The legend: the colors of the categories, or in differential mode the scale of the
/// changes and the noise floor. False when there is none to draw (no color and no
/// differences).
pub(super) fn draw_legend(state: &FlameState, line: Rect, buf: &mut Buffer, color: bool) -> bool {
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
            for (i, category) in Category::LEGEND.into_iter().enumerate() {
                let gap = if i == 0 { "" } else { " " };
                groups.push(vec![
                    (format!("{gap}■"), Style::new().fg(category_base(category))),
                    (format!(" {}", category.label()), Style::new()),
                ]);
            }
        }
        (false, false) => return false,
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
    true
}

/// The color of a category, as the legend shows it.
pub(super) fn category_base(category: Category) -> Color {
    let (r, g, b) = match category {
        Category::Ours => (236, 112, 60),
        Category::Crates => (226, 180, 70),
        Category::Std => (110, 160, 220),
        Category::Tokio => (165, 125, 215),
        Category::Libc => (110, 185, 120),
        Category::Kernel => (90, 180, 175),
        Category::Process => (175, 175, 175),
        Category::Unknown => (150, 150, 150),
    };
    Color::Rgb(r, g, b)
}

/// A box's color: its category's, a little lighter or darker by a stable hash of its
/// name, so that neighbours of one category stay apart and a frame keeps its color across
/// refreshes and runs.
pub(super) fn category_color(category: Category, name: &str) -> Color {
    let Color::Rgb(r, g, b) = category_base(category) else {
        return Color::Reset;
    };
    let shift = (fnv1a(name.as_bytes()) % 25) as i16 - 12;
    let at = |c: u8| (i16::from(c) + shift).clamp(0, 255) as u8;
    Color::Rgb(at(r), at(g), at(b))
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
