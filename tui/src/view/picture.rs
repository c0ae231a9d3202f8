//! A drawn screen as an SVG picture: the README's image of the TUI is the live screen as
//! the views draw it, rendered from the same buffer the snapshot tests read, so it cannot
//! drift from what a user sees (a test compares it with docs/live-screen.svg).

use std::fmt::Write as _;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

/// Width and height of one cell, in pixels: a monospace font at 14 px.
const CELL_W: f64 = 8.4;
const CELL_H: f64 = 17.0;
/// The terminal's own colours, for cells that keep the defaults.
const DEFAULT_FG: &str = "#d0d0d0";
const DEFAULT_BG: &str = "#1c1c1c";

/// The 16 ANSI colours as xterm draws them.
const ANSI: [&str; 16] = [
    "#000000", "#cd0000", "#00cd00", "#cdcd00", "#0000ee", "#cd00cd", "#00cdcd", "#e5e5e5",
    "#7f7f7f", "#ff0000", "#00ff00", "#ffff00", "#5c5cff", "#ff00ff", "#00ffff", "#ffffff",
];

/// `color` as an SVG colour, `default` for [`Color::Reset`].
fn hex(color: Color, default: &str) -> String {
    let ansi = |i: usize| ANSI[i].to_owned();
    match color {
        Color::Reset => default.to_owned(),
        Color::Black => ansi(0),
        Color::Red => ansi(1),
        Color::Green => ansi(2),
        Color::Yellow => ansi(3),
        Color::Blue => ansi(4),
        Color::Magenta => ansi(5),
        Color::Cyan => ansi(6),
        Color::Gray => ansi(7),
        Color::DarkGray => ansi(8),
        Color::LightRed => ansi(9),
        Color::LightGreen => ansi(10),
        Color::LightYellow => ansi(11),
        Color::LightBlue => ansi(12),
        Color::LightMagenta => ansi(13),
        Color::LightCyan => ansi(14),
        Color::White => ansi(15),
        Color::Rgb(r, g, b) => format!("#{r:02x}{g:02x}{b:02x}"),
        Color::Indexed(i) => indexed(i),
    }
}

/// xterm's 256-colour palette: the 16 ANSI colours, a 6×6×6 cube, 24 greys.
fn indexed(i: u8) -> String {
    match i {
        0..=15 => ANSI[usize::from(i)].to_owned(),
        16..=231 => {
            let level = |v: u8| if v == 0 { 0 } else { 55 + 40 * v };
            let n = i - 16;
            format!(
                "#{:02x}{:02x}{:02x}",
                level(n / 36),
                level(n / 6 % 6),
                level(n % 6)
            )
        }
        _ => {
            let v = 8 + 10 * (i - 232);
            format!("#{v:02x}{v:02x}{v:02x}")
        }
    }
}

fn xml_escape(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
}

/// The colours and weight a cell is drawn with.
#[derive(PartialEq)]
struct Look {
    fg: String,
    bg: String,
    bold: bool,
    dim: bool,
}

fn look(cell: &ratatui::buffer::Cell) -> Look {
    let mut fg = hex(cell.fg, DEFAULT_FG);
    let mut bg = hex(cell.bg, DEFAULT_BG);
    if cell.modifier.contains(Modifier::REVERSED) {
        std::mem::swap(&mut fg, &mut bg);
    }
    Look {
        fg,
        bg,
        bold: cell.modifier.contains(Modifier::BOLD),
        dim: cell.modifier.contains(Modifier::DIM),
    }
}

/// `buf` drawn as an SVG picture of a terminal: one rectangle per run of a background
/// colour, one text element per run of cells that look alike, each placed on its cell so
/// the columns line up whatever font the viewer picks.
pub fn svg(buf: &Buffer) -> String {
    let area = buf.area;
    let (w, h) = (
        f64::from(area.width) * CELL_W,
        f64::from(area.height) * CELL_H,
    );
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.1} {h:.1}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="100%" height="100%" fill="{DEFAULT_BG}"/>"#
    );
    for y in 0..area.height {
        let row: Vec<&ratatui::buffer::Cell> = (0..area.width)
            .map(|x| &buf[(area.x + x, area.y + y)])
            .collect();
        let top = f64::from(y) * CELL_H;
        // Backgrounds, in runs.
        let mut x = 0;
        while x < row.len() {
            let bg = look(row[x]).bg;
            let start = x;
            while x < row.len() && look(row[x]).bg == bg {
                x += 1;
            }
            if bg != DEFAULT_BG {
                let _ = writeln!(
                    out,
                    r#"<rect x="{:.1}" y="{top:.1}" width="{:.1}" height="{CELL_H:.1}" fill="{bg}"/>"#,
                    start as f64 * CELL_W,
                    (x - start) as f64 * CELL_W
                );
            }
        }
        // Text, in runs of cells that look alike.
        let mut x = 0;
        while x < row.len() {
            let first = look(row[x]);
            let start = x;
            let mut text = String::new();
            while x < row.len() && look(row[x]) == first {
                text.push_str(row[x].symbol());
                x += 1;
            }
            if text.trim().is_empty() {
                continue;
            }
            let mut escaped = String::new();
            xml_escape(&text, &mut escaped);
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" textLength="{:.1}" lengthAdjust="spacingAndGlyphs" fill="{}"{}{} xml:space="preserve">{escaped}</text>"#,
                start as f64 * CELL_W,
                top + CELL_H * 0.78,
                (x - start) as f64 * CELL_W,
                first.fg,
                if first.bold {
                    r#" font-weight="bold""#
                } else {
                    ""
                },
                if first.dim { r#" opacity="0.6""# } else { "" },
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    use super::*;

    #[test]
    fn cells_become_placed_text_and_coloured_backgrounds() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 10, 2));
        buf.set_string(0, 0, "a<b&", Style::new().fg(Color::Red));
        buf.set_string(
            4,
            1,
            "hi",
            Style::new()
                .bg(Color::Indexed(196))
                .add_modifier(Modifier::BOLD),
        );
        let svg = svg(&buf);
        assert!(
            svg.starts_with("<svg") && svg.ends_with("</svg>\n"),
            "{svg}"
        );
        assert!(
            svg.contains(r##"fill="#cd0000" xml:space="preserve">a&lt;b&amp;</text>"##),
            "{svg}"
        );
        assert!(
            svg.contains(r##"x="33.6" y="17.0" width="16.8" height="17.0" fill="#ff0000""##),
            "{svg}"
        );
        assert!(svg.contains(r#"font-weight="bold""#), "{svg}");
    }

    #[test]
    fn the_palette_follows_xterm() {
        assert_eq!(indexed(16), "#000000");
        assert_eq!(indexed(231), "#ffffff");
        assert_eq!(indexed(232), "#080808");
        assert_eq!(indexed(255), "#eeeeee");
        assert_eq!(hex(Color::Rgb(1, 2, 3), DEFAULT_FG), "#010203");
    }
}
