//! Writing a [`Defs`] as `.def` text, as ecFlow 5.9 `save_as_defs` lays it out: the
//! version line (when the tree has a version), externs, then each suite with two spaces of indentation per level,
//! attributes before child nodes, `endfamily`/`endsuite` closing (tasks need no end).

use std::fmt::Write as _;

use super::expr::write_expr;
use super::model::{Attr, Clock, Defs, Node, NodeKind, Part, Repeat};

/// The ecFlow release whose layout the writer follows, which the generator puts in the
/// version line. A tree read without a version line is written without one.
pub const DEFAULT_VERSION: &str = "5.9.2";

/// The definition as text.
///
/// ```
/// use benchtop_workloads::defs::{parse, write};
///
/// let text = "#5.9.2\nsuite s\n  family f\n    task t\n      trigger ../g/t eq complete\n  endfamily\nendsuite\n";
/// let written = write(&parse(text)?);
/// assert!(written.contains("      trigger ../g/t == complete\n"));
/// assert_eq!(parse(&written)?, parse(text)?);
/// # Ok::<(), benchtop_workloads::defs::ParseError>(())
/// ```
pub fn write(defs: &Defs) -> String {
    let mut out = String::with_capacity(estimate(defs));
    write_into(defs, &mut out);
    out
}

/// Appends the definition as text to `out`.
pub fn write_into(defs: &Defs, out: &mut String) {
    if let Some(version) = &defs.version {
        out.push('#');
        out.push_str(version);
        out.push('\n');
    }
    for path in &defs.externs {
        out.push_str("extern ");
        out.push_str(path);
        out.push('\n');
    }
    let mut comments = defs.comments.iter().peekable();
    for (i, suite) in defs.suites.iter().enumerate() {
        while let Some((_, text)) = comments.next_if(|(before, _)| *before as usize <= i) {
            out.push('#');
            out.push_str(text);
            out.push('\n');
        }
        write_node(defs, suite, 0, out);
    }
    for (_, text) in comments {
        out.push('#');
        out.push_str(text);
        out.push('\n');
    }
}

/// A guess at the text's size, so the buffer grows once or not at all.
fn estimate(defs: &Defs) -> usize {
    let mut attrs = 0usize;
    let mut nodes = 0usize;
    defs.walk(|node, _| {
        nodes += 1;
        attrs += node.attrs.len();
    });
    nodes * 24 + attrs * 40 + 64
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn write_node(defs: &Defs, node: &Node, depth: usize, out: &mut String) {
    indent(out, depth);
    out.push_str(node.kind.keyword());
    out.push(' ');
    out.push_str(defs.str(node.name));
    if let Some(note) = &node.note {
        out.push_str(" #");
        out.push_str(note);
    }
    out.push('\n');
    for attr in &node.attrs {
        indent(out, depth + 1);
        write_attr(defs, attr, out);
        out.push('\n');
    }
    for child in &node.children {
        write_node(defs, child, depth + 1, out);
    }
    match node.kind {
        NodeKind::Task => {}
        NodeKind::Family => {
            indent(out, depth);
            out.push_str("endfamily\n");
        }
        NodeKind::Suite => {
            indent(out, depth);
            out.push_str("endsuite\n");
        }
    }
}

fn clock(out: &mut String, c: Clock) {
    if c.relative {
        out.push('+');
    }
    let _ = write!(out, "{:02}:{:02}", c.hour, c.minute);
}

fn write_attr(defs: &Defs, attr: &Attr, out: &mut String) {
    match attr {
        Attr::Edit(v) => {
            let q = if v.double_quoted { '"' } else { '\'' };
            out.push_str("edit ");
            out.push_str(defs.str(v.name));
            out.push(' ');
            out.push(q);
            out.push_str(defs.str(v.value));
            out.push(q);
        }
        Attr::Trigger(e) | Attr::Complete(e) => {
            out.push_str(attr.keyword(defs));
            match e.part {
                Part::First => {}
                Part::And => out.push_str(" -a"),
                Part::Or => out.push_str(" -o"),
            }
            out.push(' ');
            match defs.expr(e.expr) {
                Some(expr) => write_expr(defs, expr, out),
                None => out.push('?'),
            }
        }
        Attr::Event(e) => {
            out.push_str("event");
            if let Some(n) = e.number {
                let _ = write!(out, " {n}");
            }
            match e.name {
                Some(name) => {
                    out.push(' ');
                    out.push_str(defs.str(name));
                }
                // ecFlow writes the empty name after a number: `event 3 `.
                None if e.number.is_some() => out.push(' '),
                None => {}
            }
            match e.initial {
                Some(true) => out.push_str(" set"),
                Some(false) => out.push_str(" clear"),
                None => {}
            }
        }
        Attr::Meter(m) => {
            let _ = write!(out, "meter {} {} {}", defs.str(m.name), m.min, m.max);
            if let Some(t) = m.threshold {
                let _ = write!(out, " {t}");
            }
        }
        Attr::Label(l) => {
            out.push_str("label ");
            out.push_str(defs.str(l.name));
            out.push_str(" \"");
            out.push_str(defs.str(l.text));
            out.push('"');
        }
        Attr::Limit(l) => {
            let _ = write!(out, "limit {} {}", defs.str(l.name), l.max);
        }
        Attr::Inlimit(l) => {
            out.push_str("inlimit ");
            if let Some(f) = l.flag {
                out.push('-');
                out.push(f);
                out.push(' ');
            }
            if let Some(path) = l.path {
                out.push_str(defs.str(path));
                out.push(':');
            }
            out.push_str(defs.str(l.name));
            if let Some(t) = l.tokens {
                let _ = write!(out, " {t}");
            }
        }
        Attr::Late(l) => {
            out.push_str("late");
            for (flag, c) in [
                (" -s ", l.submitted),
                (" -a ", l.active),
                (" -c ", l.complete),
            ] {
                if let Some(c) = c {
                    out.push_str(flag);
                    clock(out, c);
                }
            }
        }
        Attr::Time(t) => {
            out.push_str("time ");
            clock(out, t.start);
            if let Some((end, step)) = t.series {
                out.push(' ');
                clock(out, end);
                out.push(' ');
                clock(out, step);
            }
        }
        Attr::Repeat(r) => {
            out.push_str("repeat ");
            match &**r {
                Repeat::Date {
                    var,
                    start,
                    end,
                    step,
                } => {
                    let _ = write!(out, "date {var} {start} {end} {step}");
                }
                Repeat::Integer {
                    var,
                    start,
                    end,
                    step,
                } => {
                    // As ecFlow writes it: no step when it is 1.
                    let _ = write!(out, "integer {var} {start} {end}");
                    if *step != 1 {
                        let _ = write!(out, " {step}");
                    }
                }
                Repeat::Enumerated { var, items } | Repeat::String { var, items } => {
                    let kind = if matches!(**r, Repeat::String { .. }) {
                        "string"
                    } else {
                        "enumerated"
                    };
                    let _ = write!(out, "{kind} {var}");
                    for item in items {
                        let q = if item.contains('"') { '\'' } else { '"' };
                        let _ = write!(out, " {q}{item}{q}");
                    }
                }
                Repeat::Day { step } => {
                    let _ = write!(out, "day {step}");
                }
                Repeat::Other(rest) => out.push_str(rest),
            }
        }
        Attr::Defstatus(s) => {
            out.push_str("defstatus ");
            out.push_str(s.as_str());
        }
        Attr::Comment(text) => {
            out.push('#');
            out.push_str(defs.str(*text));
        }
        Attr::Other(line) => out.push_str(defs.str(*line)),
    }
}
