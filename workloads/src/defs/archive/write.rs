//! Writing a binary checkpoint: the tree streamed through a buffer, section by section.

use std::io::{self, Write};

use super::format::{FOOTER_MAGIC, MAGIC, MAX_EXPR_DEPTH, SECTIONS};
use crate::defs::expr::Expr;
use crate::defs::model::{Attr, Clock, Defs, Node, Repeat, Sym};
use crate::defs::parse::MAX_NESTING;

/// Writes `defs` as a binary checkpoint to `w`.
pub fn write<W: Write>(defs: &Defs, w: W) -> io::Result<()> {
    let mut out = Out {
        w,
        buf: Vec::with_capacity(CHUNK + 4096),
        pos: 0,
        start: 0,
        crc: crc32fast::Hasher::new(),
        dir: Vec::with_capacity(SECTIONS.len()),
    };
    out.buf.extend_from_slice(&MAGIC);
    out.flush_buf()?;

    out.begin();
    out.opt_str(defs.version.as_deref())?;
    out.len(defs.externs.len())?;
    for e in &defs.externs {
        out.str(e)?;
    }
    out.len(defs.comments.len())?;
    for (before, text) in &defs.comments {
        out.u32(*before);
        out.str(text)?;
    }
    out.end(SECTIONS[0].0)?;

    out.begin();
    out.len(defs.strings.len())?;
    for &end in defs.strings.ends() {
        out.u32(end);
        out.spill()?;
    }
    out.big(defs.strings.text().as_bytes())?;
    out.end(SECTIONS[1].0)?;

    out.begin();
    out.len(defs.paths.len())?;
    for sym in defs.paths.iter() {
        out.sym(*sym);
        out.spill()?;
    }
    out.end(SECTIONS[2].0)?;

    out.begin();
    out.len(defs.exprs.len())?;
    for expr in defs.exprs.iter() {
        out.expr(expr, 0)?;
        out.spill()?;
    }
    out.end(SECTIONS[3].0)?;

    out.begin();
    out.len(defs.suites.len())?;
    for suite in &defs.suites {
        out.node(suite, 1)?;
    }
    out.end(SECTIONS[4].0)?;

    // The directory and the footer.
    let dir_offset = out.pos;
    let mut crc = crc32fast::Hasher::new();
    let dir = std::mem::take(&mut out.dir);
    for (tag, offset, len, sum) in &dir {
        out.u32(*tag);
        out.u64(*offset);
        out.u64(*len);
        out.u32(*sum);
    }
    out.u64(dir_offset);
    out.u32(dir.len() as u32);
    crc.update(&out.buf);
    let sum = crc.finalize();
    out.u32(sum);
    out.buf.extend_from_slice(&FOOTER_MAGIC);
    out.flush_buf()?;
    out.w.flush()
}

/// The size of the buffer between the tree and the writer.
const CHUNK: usize = 256 << 10;

struct Out<W: Write> {
    w: W,
    buf: Vec<u8>,
    /// Bytes handed to `w` so far.
    pos: u64,
    /// Where the current section began.
    start: u64,
    crc: crc32fast::Hasher,
    dir: Vec<(u32, u64, u64, u32)>,
}

fn too_large(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what} too large for the binary checkpoint"),
    )
}

impl<W: Write> Out<W> {
    fn flush_buf(&mut self) -> io::Result<()> {
        self.crc.update(&self.buf);
        self.w.write_all(&self.buf)?;
        self.pos += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= CHUNK {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn big(&mut self, data: &[u8]) -> io::Result<()> {
        self.flush_buf()?;
        self.crc.update(data);
        self.w.write_all(data)?;
        self.pos += data.len() as u64;
        Ok(())
    }

    fn begin(&mut self) {
        self.start = self.pos + self.buf.len() as u64;
        self.crc = crc32fast::Hasher::new();
    }

    fn end(&mut self, tag: u32) -> io::Result<()> {
        self.flush_buf()?;
        let crc = std::mem::replace(&mut self.crc, crc32fast::Hasher::new()).finalize();
        self.dir.push((tag, self.start, self.pos - self.start, crc));
        Ok(())
    }

    fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn len(&mut self, n: usize) -> io::Result<()> {
        self.u32(u32::try_from(n).map_err(|_| too_large("a list"))?);
        Ok(())
    }

    fn sym(&mut self, s: Sym) {
        self.u32(s.index() as u32);
    }

    fn str(&mut self, s: &str) -> io::Result<()> {
        self.len(s.len())?;
        self.buf.extend_from_slice(s.as_bytes());
        self.spill()
    }

    fn opt_str(&mut self, s: Option<&str>) -> io::Result<()> {
        match s {
            None => {
                self.u8(0);
                Ok(())
            }
            Some(s) => {
                self.u8(1);
                self.str(s)
            }
        }
    }

    fn expr(&mut self, expr: &Expr, depth: u32) -> io::Result<()> {
        if depth > MAX_EXPR_DEPTH {
            return Err(too_large("an expression nested more than 1000 deep is"));
        }
        match expr {
            Expr::Or(items) | Expr::And(items) => {
                self.u8(if matches!(expr, Expr::Or(_)) { 0 } else { 1 });
                self.len(items.len())?;
                for item in items {
                    self.expr(item, depth + 1)?;
                }
            }
            Expr::Not(inner) => {
                self.u8(2);
                self.expr(inner, depth + 1)?;
            }
            Expr::Cmp(op, lhs, rhs) => {
                self.u8(3);
                self.u8(*op as u8);
                self.expr(lhs, depth + 1)?;
                self.expr(rhs, depth + 1)?;
            }
            Expr::Arith(op, lhs, rhs) => {
                self.u8(4);
                self.u8(*op as u8);
                self.expr(lhs, depth + 1)?;
                self.expr(rhs, depth + 1)?;
            }
            Expr::Paren(inner) => {
                self.u8(5);
                self.expr(inner, depth + 1)?;
            }
            Expr::Node(path) => {
                self.u8(6);
                self.u32(path.0);
            }
            Expr::Attr(path, name) => {
                self.u8(7);
                self.u32(path.0);
                self.sym(*name);
            }
            Expr::State(state) => {
                self.u8(8);
                self.u8(*state as u8);
            }
            Expr::Event(set) => {
                self.u8(9);
                self.u8(u8::from(*set));
            }
            Expr::Int(n) => {
                self.u8(10);
                self.i64(*n);
            }
        }
        Ok(())
    }

    fn clock(&mut self, c: Clock) {
        self.u8(u8::from(c.relative));
        self.u8(c.hour);
        self.u8(c.minute);
    }

    fn opt_clock(&mut self, c: Option<Clock>) {
        match c {
            None => self.u8(0),
            Some(c) => {
                self.u8(1);
                self.clock(c);
            }
        }
    }

    fn node(&mut self, node: &Node, depth: usize) -> io::Result<()> {
        if depth > MAX_NESTING {
            return Err(too_large("a tree nested more than MAX_NESTING deep is"));
        }
        self.u8(node.kind as u8);
        self.u8(u8::from(node.note.is_some()));
        self.sym(node.name);
        self.len(node.attrs.len())?;
        self.len(node.children.len())?;
        if let Some(note) = &node.note {
            self.str(note)?;
        }
        for attr in &node.attrs {
            self.attr(attr)?;
        }
        self.spill()?;
        for child in &node.children {
            self.node(child, depth + 1)?;
        }
        Ok(())
    }

    fn attr(&mut self, attr: &Attr) -> io::Result<()> {
        match attr {
            Attr::Edit(v) => {
                self.u8(1);
                self.sym(v.name);
                self.sym(v.value);
                self.u8(u8::from(v.double_quoted));
            }
            Attr::Trigger(e) | Attr::Complete(e) => {
                self.u8(if matches!(attr, Attr::Trigger(_)) {
                    2
                } else {
                    3
                });
                self.u8(e.part as u8);
                self.u32(e.expr.0);
            }
            Attr::Event(e) => {
                self.u8(4);
                let flags = u8::from(e.number.is_some())
                    | u8::from(e.name.is_some()) << 1
                    | u8::from(e.initial.is_some()) << 2
                    | u8::from(e.initial == Some(true)) << 3;
                self.u8(flags);
                if let Some(n) = e.number {
                    self.u32(n);
                }
                if let Some(name) = e.name {
                    self.sym(name);
                }
            }
            Attr::Meter(m) => {
                self.u8(5);
                self.sym(m.name);
                self.i64(m.min);
                self.i64(m.max);
                self.u8(u8::from(m.threshold.is_some()));
                if let Some(t) = m.threshold {
                    self.i64(t);
                }
            }
            Attr::Label(l) => {
                self.u8(6);
                self.sym(l.name);
                self.sym(l.text);
            }
            Attr::Limit(l) => {
                self.u8(7);
                self.sym(l.name);
                self.i64(l.max);
            }
            Attr::Inlimit(l) => {
                self.u8(8);
                self.u32(l.flag.map_or(u32::MAX, u32::from));
                self.u32(l.path.map_or(0, |p| p.index() as u32 + 1));
                self.sym(l.name);
                self.u8(u8::from(l.tokens.is_some()));
                if let Some(t) = l.tokens {
                    self.u32(t);
                }
            }
            Attr::Late(l) => {
                self.u8(9);
                self.opt_clock(l.submitted);
                self.opt_clock(l.active);
                self.opt_clock(l.complete);
            }
            Attr::Time(t) => {
                self.u8(10);
                self.clock(t.start);
                self.u8(u8::from(t.series.is_some()));
                if let Some((end, step)) = t.series {
                    self.clock(end);
                    self.clock(step);
                }
            }
            Attr::Repeat(r) => {
                self.u8(11);
                self.repeat(r)?;
            }
            Attr::Defstatus(s) => {
                self.u8(12);
                self.u8(*s as u8);
            }
            Attr::Comment(t) => {
                self.u8(13);
                self.sym(*t);
            }
            Attr::Other(t) => {
                self.u8(14);
                self.sym(*t);
            }
        }
        Ok(())
    }

    fn repeat(&mut self, r: &Repeat) -> io::Result<()> {
        match r {
            Repeat::Date {
                var,
                start,
                end,
                step,
            } => {
                self.u8(0);
                self.str(var)?;
                self.u32(*start);
                self.u32(*end);
                self.i64(*step);
            }
            Repeat::Integer {
                var,
                start,
                end,
                step,
            } => {
                self.u8(1);
                self.str(var)?;
                self.i64(*start);
                self.i64(*end);
                self.i64(*step);
            }
            Repeat::Enumerated { var, items } | Repeat::String { var, items } => {
                self.u8(if matches!(r, Repeat::Enumerated { .. }) {
                    2
                } else {
                    3
                });
                self.str(var)?;
                self.len(items.len())?;
                for item in items {
                    self.str(item)?;
                }
            }
            Repeat::Day { step } => {
                self.u8(4);
                self.i64(*step);
            }
            Repeat::Other(rest) => {
                self.u8(5);
                self.str(rest)?;
            }
        }
        Ok(())
    }
}
