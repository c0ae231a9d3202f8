//! Reading a large definition on several threads.
//!
//! Suites are independent: the text is cut into as many pieces as there are threads, each
//! cut at the start of a line whose first word is `suite` (only a top-level suite can
//! open such a line), near an equal share of the bytes. Each piece is read on its own
//! thread with its own tables; then the pieces are merged in order: the strings, paths
//! and expressions of each later piece are interned into the first piece's tables in
//! their own order of first occurrence, and its nodes' ids rewritten. Interning gives
//! ids in order of first occurrence, so the merged tree, tables included, is the tree
//! the serial reader gives (tested on every fixture and on generated definitions).
//!
//! A piece that does not read (a malformed line, a node left open at the cut) sends the
//! whole text to the serial reader, so errors name the same line and column as ever.

use std::sync::Arc;

use super::expr::remap_expr;
use super::model::{Attr, Defs, ExprId, Node, PathId, Sym};
use super::parse::{ParseError, Reader, parse_serial};
use super::strings::TableFull;

/// Definitions smaller than this are read on one thread: below it, starting a thread and
/// merging cost about what the second core saves (the `defs` bench, parse, at
/// `BENCHTOP_DEFS_SCALE=0.01`, 2 MB: even).
pub const PARALLEL_MIN_BYTES: usize = 4 << 20;

/// At most this many threads read one definition.
const MAX_THREADS: usize = 8;

/// Parses `text` on as many threads as the machine gives this process (at most eight)
/// when it is at least [`PARALLEL_MIN_BYTES`], else on this one.
pub(crate) fn parse(text: &str) -> Result<Defs, ParseError> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS);
    if text.len() < PARALLEL_MIN_BYTES || threads < 2 {
        return parse_serial(text);
    }
    parse_in(text, threads)
}

/// Parses `text` in up to `pieces` pieces, each on its own thread: the tree
/// [`parse_serial`] gives, whatever the number of pieces.
///
/// ```
/// use benchtop_workloads::defs::{parse_in, parse_serial};
///
/// let text = "suite a\n  task t\nendsuite\nsuite b\n  task t\n    trigger /a/t == complete\nendsuite\n";
/// assert_eq!(parse_in(text, 2)?, parse_serial(text)?);
/// # Ok::<(), benchtop_workloads::defs::ParseError>(())
/// ```
pub fn parse_in(text: &str, pieces: usize) -> Result<Defs, ParseError> {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let cuts = split(body, pieces);
    if cuts.len() < 2 {
        return parse_serial(text);
    }
    let read: Vec<Option<Reader>> = std::thread::scope(|scope| {
        let handles: Vec<_> = cuts[1..]
            .iter()
            .map(|piece| scope.spawn(move || Reader::read(piece).ok()))
            .collect();
        let mut read = Vec::with_capacity(cuts.len());
        read.push(Reader::read(cuts[0]).ok());
        for handle in handles {
            read.push(handle.join().ok().flatten());
        }
        read
    });
    let mut read = read.into_iter();
    let Some(Some(mut first)) = read.next() else {
        return parse_serial(text);
    };
    if !first.stack.is_empty() {
        return parse_serial(text);
    }
    for piece in read {
        let Some(piece) = piece.filter(|p| p.stack.is_empty()) else {
            return parse_serial(text);
        };
        if merge(&mut first, piece).is_err() {
            return parse_serial(text);
        }
    }
    Ok(first.finish())
}

/// `text` cut into at most `pieces` pieces, each after the first starting at a line
/// whose first word is `suite`.
fn split(text: &str, pieces: usize) -> Vec<&str> {
    let mut cuts = Vec::with_capacity(pieces);
    let mut start = 0;
    for k in 1..pieces {
        let target = text.len() / pieces * k;
        if target <= start {
            continue;
        }
        match next_suite_line(text.as_bytes(), target) {
            Some(at) if at > start => {
                cuts.push(&text[start..at]);
                start = at;
            }
            Some(_) => {}
            None => break,
        }
    }
    cuts.push(&text[start..]);
    cuts
}

/// The offset of the first line at or after `from` whose first word is `suite`.
fn next_suite_line(bytes: &[u8], from: usize) -> Option<usize> {
    let next_line = |at: usize| {
        bytes
            .get(at..)?
            .iter()
            .position(|&b| b == b'\n')
            .map(|p| at + p + 1)
    };
    let mut at = if from == 0 || bytes.get(from - 1) == Some(&b'\n') {
        from
    } else {
        next_line(from)?
    };
    while at < bytes.len() {
        let line = &bytes[at..];
        let word = line
            .iter()
            .position(|&b| b != b' ' && b != b'\t')
            .map_or(&line[line.len()..], |p| &line[p..]);
        if word.starts_with(b"suite") && word.get(5).is_none_or(|b| b.is_ascii_whitespace()) {
            return Some(at);
        }
        at = next_line(at)?;
    }
    None
}

/// Appends the piece read after `into` to it: its tables interned into `into`'s, its
/// ids rewritten, its suites, externs and comments appended.
fn merge(into: &mut Reader, from: Reader) -> Result<(), TableFull> {
    let (strings, paths, exprs) = from.interner.into_parts();
    let mut syms = Vec::with_capacity(strings.len());
    for i in 0..strings.len() {
        let s = Sym::from_index(i)
            .and_then(|sym| strings.get(sym))
            .ok_or(TableFull)?;
        syms.push(into.interner.str(s)?);
    }
    drop(strings);
    let path_ids: Vec<PathId> = paths
        .iter()
        .map(|&sym| into.interner.path_of(map_sym(&syms, sym)))
        .collect();
    let expr_ids: Vec<ExprId> = exprs
        .into_iter()
        .map(|mut expr| {
            remap_expr(&mut expr, &path_ids, &syms);
            into.interner.expr(expr)
        })
        .collect();

    let defs = from.defs;
    let suites_before = u32::try_from(into.defs.suites.len()).unwrap_or(u32::MAX);
    into.defs.externs.extend(defs.externs);
    into.defs.comments.extend(
        defs.comments
            .into_iter()
            .map(|(before, text)| (before.saturating_add(suites_before), text)),
    );
    for mut suite in defs.suites {
        remap_node(Arc::make_mut(&mut suite), &syms, &expr_ids);
        into.defs.suites.push(suite);
    }
    Ok(())
}

fn map_sym(syms: &[Sym], sym: Sym) -> Sym {
    syms.get(sym.index()).copied().unwrap_or(sym)
}

fn remap_node(node: &mut Node, syms: &[Sym], exprs: &[ExprId]) {
    let s = |sym: &mut Sym| *sym = map_sym(syms, *sym);
    s(&mut node.name);
    for attr in &mut node.attrs {
        match attr {
            Attr::Edit(v) => {
                s(&mut v.name);
                s(&mut v.value);
            }
            Attr::Trigger(e) | Attr::Complete(e) => {
                e.expr = exprs.get(e.expr.0 as usize).copied().unwrap_or(e.expr);
            }
            Attr::Event(e) => {
                if let Some(name) = &mut e.name {
                    s(name);
                }
            }
            Attr::Meter(m) => s(&mut m.name),
            Attr::Label(l) => {
                s(&mut l.name);
                s(&mut l.text);
            }
            Attr::Limit(l) => s(&mut l.name),
            Attr::Inlimit(l) => {
                if let Some(path) = &mut l.path {
                    s(path);
                }
                s(&mut l.name);
            }
            Attr::Comment(t) | Attr::Other(t) => s(t),
            Attr::Late(_) | Attr::Time(_) | Attr::Repeat(_) | Attr::Defstatus(_) => {}
        }
    }
    for child in &mut node.children {
        remap_node(Arc::make_mut(child), syms, exprs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_on_suite_lines_only() {
        let text = "#5.9.2\nsuite a\n  task suite\n  edit X 'suite y'\nendsuite\n  suite b\ntask\nendsuite\nsuite\tc\nendsuite\n";
        let cuts = split(text, 3);
        assert_eq!(cuts.concat(), text);
        for cut in &cuts[1..] {
            assert!(cut.trim_start().starts_with("suite"), "{cut:?}");
        }
        assert!(cuts.len() >= 2, "{cuts:?}");
        assert_eq!(split("suite a\nendsuite\n", 4), ["suite a\nendsuite\n"]);
        assert_eq!(next_suite_line(b"suites x\nsuite", 0), Some(9));
    }

    #[test]
    fn a_malformed_piece_gives_the_serial_readers_error() {
        let text = "suite a\n  task t\nendsuite\nsuite b\n  meter m 0 x\nendsuite\n";
        assert_eq!(parse_in(text, 2), parse_serial(text));
        let open = "suite a\n  family f\nsuite b\nendsuite\n";
        let err = parse_in(open, 2).unwrap_err();
        assert_eq!(Err(err), parse_serial(open));
    }
}
