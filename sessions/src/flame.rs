//! Flamegraph SVGs rendered by inferno.
//!
//! Colours are chosen by hashing frame names (inferno's `hash` option), never at random, so
//! the same stacks always render to the same bytes and similar names get similar colours.

use std::io::{BufRead, Write};

use inferno::flamegraph::{self, Options};

use crate::{SessionError, StackTree};

/// Width of the "no samples" placeholder, as inferno's default image width.
const EMPTY_WIDTH: usize = 1200;

/// Renders `tree` as a flamegraph SVG titled `title`, its weights counted in `count_name`
/// (`samples` for on-CPU stacks, `µs` for off-CPU ones). An empty tree renders a small SVG
/// saying "no samples".
pub fn write_flamegraph_svg(
    tree: &StackTree,
    title: &str,
    count_name: &str,
    out: impl Write,
) -> Result<(), SessionError> {
    write_sorted_folded_svg(&tree.to_folded(), title, count_name, out)
}

/// Renders folded text as [`StackTree::to_folded`] writes it (each stack once, lines
/// sorted), like [`write_flamegraph_svg`]; empty text renders the "no samples" SVG.
pub(crate) fn write_sorted_folded_svg(
    folded: &str,
    title: &str,
    count_name: &str,
    mut out: impl Write,
) -> Result<(), SessionError> {
    let render = |e| SessionError::Flamegraph { source: e };
    if folded.is_empty() {
        return write_empty_svg(title, &mut out).map_err(render);
    }
    let mut options = Options::default();
    options.title = title.to_owned();
    options.count_name = count_name.to_owned();
    options.hash = true;
    // to_folded sorts its lines already.
    options.no_sort = true;
    flamegraph::from_lines(&mut options, folded.lines(), &mut out).map_err(render)?;
    out.flush().map_err(render)
}

/// Renders differential folded text ([`crate::compare::diff_folded`]: `stack a b` lines)
/// as inferno's differential flamegraph: widths from B, red where B grew, blue where it
/// shrank. `negate` draws the other view: widths from A, colours as from B to A (the
/// frames that vanished stand out).
pub fn write_differential_svg(
    diff_folded: &str,
    title: &str,
    count_name: &str,
    negate: bool,
    mut out: impl Write,
) -> Result<(), SessionError> {
    let render = |e| SessionError::Flamegraph { source: e };
    if diff_folded.trim().is_empty() {
        return write_empty_svg(title, &mut out).map_err(render);
    }
    let mut options = Options::default();
    options.title = title.to_owned();
    options.count_name = count_name.to_owned();
    options.hash = true;
    options.negate_differentials = negate;
    flamegraph::from_lines(&mut options, diff_folded.lines(), &mut out).map_err(render)?;
    out.flush().map_err(render)
}

/// Renders folded stack lines (see [`StackTree::read_folded`]; `source` names them in errors)
/// like [`write_flamegraph_svg`].
pub fn write_folded_flamegraph_svg(
    folded: impl BufRead,
    source: &str,
    title: &str,
    count_name: &str,
    out: impl Write,
) -> Result<(), SessionError> {
    let tree = StackTree::read_folded(folded, source)?;
    write_flamegraph_svg(&tree, title, count_name, out)
}

/// inferno refuses empty input; draw the title and say why there is nothing else.
fn write_empty_svg(title: &str, out: &mut impl Write) -> std::io::Result<()> {
    let mid = EMPTY_WIDTH / 2;
    write!(
        out,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
         <svg version=\"1.1\" width=\"{EMPTY_WIDTH}\" height=\"80\" \
         viewBox=\"0 0 {EMPTY_WIDTH} 80\" xmlns=\"http://www.w3.org/2000/svg\">\n\
         <rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#eeeeee\"/>\n\
         <text x=\"{mid}\" y=\"24\" text-anchor=\"middle\" font-family=\"Verdana\" \
         font-size=\"17\">{}</text>\n\
         <text x=\"{mid}\" y=\"56\" text-anchor=\"middle\" font-family=\"Verdana\" \
         font-size=\"12\">no samples</text>\n\
         </svg>\n",
        XmlText(title)
    )?;
    out.flush()
}

/// Text escaped for XML content and attributes.
struct XmlText<'a>(&'a str);

impl std::fmt::Display for XmlText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut rest = self.0;
        while let Some(i) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..i])?;
            f.write_str(match rest.as_bytes()[i] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&apos;",
            })?;
            rest = &rest[i + 1..];
        }
        f.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(tree: &StackTree, title: &str) -> String {
        let mut out = Vec::new();
        write_flamegraph_svg(tree, title, "samples", &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_differential_svg_colours_growth_and_its_negation_differs() {
        let diff = "p;grew 10 30\np;shrank 30 10\n";
        let mut out = Vec::new();
        write_differential_svg(diff, "diff", "samples", false, &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.contains("grew") && svg.contains("shrank"));
        let mut negated = Vec::new();
        write_differential_svg(diff, "diff", "samples", true, &mut negated).unwrap();
        assert_ne!(svg.as_bytes(), negated.as_slice());
    }

    #[test]
    fn an_empty_tree_renders_a_small_svg_saying_no_samples() {
        let svg = render(&StackTree::new(), "cpu <ring> & co");
        assert!(svg.contains("no samples"));
        assert!(svg.contains("cpu &lt;ring&gt; &amp; co"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn frames_and_title_appear_in_the_svg() {
        let mut t = StackTree::new();
        t.add_names(["main", "ring::hop"], 3);
        t.add_names(["main", "idle"], 1);
        let svg = render(&t, "on-CPU");
        for needle in ["main", "ring::hop", "idle", "on-CPU", "samples"] {
            assert!(svg.contains(needle), "{needle} missing");
        }
    }

    #[test]
    fn folded_text_renders_like_the_tree() {
        let mut t = StackTree::new();
        t.add_names(["a", "b"], 2);
        let mut out = Vec::new();
        write_folded_flamegraph_svg(&b"a;b 2\n"[..], "x.folded", "t", "µs", &mut out).unwrap();
        let mut direct = Vec::new();
        write_flamegraph_svg(&t, "t", "µs", &mut direct).unwrap();
        assert_eq!(out, direct);
    }
}
