//! The binary checkpoint: the tree's own tables, laid out as they are in memory, each
//! section checksummed.
//!
//! ```text
//! header     8 bytes   magic "BTDEFS" 0x00 and the format version (1)
//! sections   META, STRINGS, PATHS, EXPRS, NODES, one after the other
//! directory  per section: tag u32, offset u64, length u64, CRC-32 u32
//! footer     directory offset u64, section count u32, CRC-32 u32 of the directory
//!            and these two fields, magic "BTDEFEND"
//! ```
//!
//! Integers are little-endian and fixed-width. `META` holds the version line, externs and
//! top-level comments; `STRINGS` the string table as [`Strings`] holds it: the count,
//! each string's end offset (u32) and then all the text, so it loads with one copy and
//! one UTF-8 check, whatever the number of strings; `PATHS` each path's string; `EXPRS`
//! each expression in prefix order (a tag byte, then its operands); `NODES` the suites'
//! count and every node in preorder: kind, note flag, name, attribute count, child
//! count (14 bytes), its note when it has one, then its attributes (a tag byte and
//! fixed-width fields, names as string indices). Reading is one pass that allocates
//! per node only the node and its two lists, of their exact size: no text is parsed and
//! nothing is interned again. Writing streams the same from the tree through a buffer:
//! no copy of the tree is built.
//!
//! **Checks on load**: the magic and version, the footer's magic, the directory's
//! checksum, that the sections come in order and tile the file with no gap, each
//! section's CRC-32 (so a flipped bit or a truncated file is refused before anything is
//! decoded), then while decoding every length against the bytes left, every index
//! against its table, every tag and flag against its values, nesting against
//! [`MAX_NESTING`] and [`MAX_EXPR_DEPTH`], and that each section is used up exactly. An
//! error names the byte offset in the file where the check failed; decoding never
//! panics and never allocates more than the bytes it was given justify.

use std::io::{self, Write};
use std::sync::Arc;

use super::expr::{ArithOp, CmpOp, Expr};
use super::model::{
    Attr, Clock, Defs, Event, ExprAttr, ExprId, Inlimit, Label, Late, Limit, Meter, Node, NodeKind,
    Part, PathId, Repeat, State, Strings, Sym, TimeAttr, Variable,
};
use super::parse::MAX_NESTING;

const MAGIC: [u8; 8] = *b"BTDEFS\x00\x01";
const FOOTER_MAGIC: [u8; 8] = *b"BTDEFEND";
const FOOTER_LEN: usize = 8 + 4 + 4 + 8;
const ENTRY_LEN: usize = 4 + 8 + 8 + 4;
/// The sections, in the order they are written and must be read.
const SECTIONS: [(u32, &str); 5] = [
    (1, "META"),
    (2, "STRINGS"),
    (3, "PATHS"),
    (4, "EXPRS"),
    (5, "NODES"),
];
/// A node's fixed record: kind, note flag, name, attribute count, child count.
const NODE_LEN: usize = 1 + 1 + 4 + 4 + 4;

/// Expressions nested deeper than this (operators within operators) are neither written
/// nor read: the reader recurses, and a hostile file must not exhaust its stack. The
/// text reader's own limit on parentheses and `not` keeps real expressions far below.
pub const MAX_EXPR_DEPTH: u32 = 1000;

/// Why a checkpoint was refused: where (the byte offset in the file) and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte offset {offset}: {reason}")]
#[non_exhaustive]
pub struct Corrupt {
    /// Byte offset in the file.
    pub offset: u64,
    /// What is wrong there.
    pub reason: String,
}

fn corrupt(offset: usize, reason: impl Into<String>) -> Corrupt {
    Corrupt {
        offset: offset as u64,
        reason: reason.into(),
    }
}

// ---------------------------------------------------------------------------------------
// Writing

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

// ---------------------------------------------------------------------------------------
// Reading

/// The definition a binary checkpoint holds, checked (see the module's documentation).
pub fn read(bytes: &[u8]) -> Result<Defs, Corrupt> {
    let sections = sections(bytes)?;
    let [meta, strings, paths, exprs, nodes] = sections;

    let mut defs = Defs::new();
    let mut c = Cursor::new(bytes, meta);
    defs.version = c.opt_str()?;
    let n = c.count(4)?;
    defs.externs = Vec::with_capacity(n);
    for _ in 0..n {
        defs.externs.push(c.string()?);
    }
    let n = c.count(8)?;
    defs.comments = Vec::with_capacity(n);
    for _ in 0..n {
        let before = c.u32()?;
        defs.comments.push((before, c.string()?));
    }
    c.done("META")?;

    let mut c = Cursor::new(bytes, strings);
    let n = c.count(4)?;
    let ends_at = c.at();
    let ends: Vec<u32> = c
        .take(n * 4)?
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let text_at = c.at();
    let text = c.rest();
    let text = std::str::from_utf8(text)
        .map_err(|e| corrupt(text_at + e.valid_up_to(), "a string is not UTF-8"))?;
    let table = Strings::from_parts(text.to_owned(), ends).map_err(|e| {
        corrupt(
            ends_at + e.index * 4,
            format!("string {}: {}", e.index, e.reason),
        )
    })?;
    let strings_len = table.len();

    let mut c = Cursor::new(bytes, paths);
    let n = c.count(4)?;
    let mut path_table = Vec::with_capacity(n);
    for _ in 0..n {
        path_table.push(c.sym(strings_len)?);
    }
    c.done("PATHS")?;

    let mut c = Cursor::new(bytes, exprs);
    let n = c.count(2)?;
    let mut expr_table = Vec::with_capacity(n);
    let limits = Limits {
        strings: strings_len,
        paths: path_table.len(),
        exprs: 0,
    };
    for _ in 0..n {
        expr_table.push(c.expr(&limits, 0)?);
    }
    c.done("EXPRS")?;

    let mut c = Cursor::new(bytes, nodes);
    let limits = Limits {
        exprs: expr_table.len(),
        ..limits
    };
    let n = c.count(NODE_LEN)?;
    defs.suites = Vec::with_capacity(n);
    for _ in 0..n {
        let at = c.at();
        let suite = c.node(&limits, 1)?;
        if suite.kind != NodeKind::Suite {
            return Err(corrupt(at, "a top-level node that is not a suite"));
        }
        defs.suites.push(Arc::new(suite));
    }
    c.done("NODES")?;

    defs.strings = Arc::new(table);
    defs.paths = Arc::new(path_table);
    defs.exprs = Arc::new(expr_table);
    Ok(defs)
}

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// The byte ranges of the sections, every frame check passed.
fn sections(bytes: &[u8]) -> Result<[std::ops::Range<usize>; 5], Corrupt> {
    let least = MAGIC.len() + SECTIONS.len() * ENTRY_LEN + FOOTER_LEN;
    if bytes.len() < least {
        return Err(corrupt(
            bytes.len(),
            format!(
                "truncated: {} bytes, a checkpoint has at least {least}",
                bytes.len()
            ),
        ));
    }
    if bytes[..6] != MAGIC[..6] {
        return Err(corrupt(
            0,
            "not a benchtop defs checkpoint (no BTDEFS magic)",
        ));
    }
    if bytes[6..8] != MAGIC[6..8] {
        return Err(corrupt(
            6,
            format!(
                "format version {:02x}{:02x}, this build reads version {:02x}{:02x}",
                bytes[6], bytes[7], MAGIC[6], MAGIC[7]
            ),
        ));
    }
    let footer = bytes.len() - FOOTER_LEN;
    if bytes[footer + 16..] != FOOTER_MAGIC {
        return Err(corrupt(
            footer + 16,
            "no footer magic at the end: the checkpoint is truncated or was not finished",
        ));
    }
    let dir_offset = le_u64(bytes, footer);
    let count = le_u32(bytes, footer + 8) as usize;
    let stored = le_u32(bytes, footer + 12);
    let dir_len = count.saturating_mul(ENTRY_LEN);
    let dir_start = footer.checked_sub(dir_len);
    if count != SECTIONS.len() || dir_start.map(|s| s as u64) != Some(dir_offset) {
        return Err(corrupt(
            footer,
            format!(
                "the footer says {count} sections from offset {dir_offset}; a checkpoint has \
                 {} sections with the directory just before the footer, at {}",
                SECTIONS.len(),
                footer.saturating_sub(SECTIONS.len() * ENTRY_LEN)
            ),
        ));
    }
    let dir_start = footer - dir_len;
    let computed = crc32fast::hash(&bytes[dir_start..footer + 12]);
    if computed != stored {
        return Err(corrupt(
            dir_start,
            format!(
                "the directory's checksum does not match (stored {stored:08x}, computed {computed:08x})"
            ),
        ));
    }
    let mut ranges: [std::ops::Range<usize>; 5] = Default::default();
    let mut next = MAGIC.len();
    for (i, (tag, name)) in SECTIONS.iter().enumerate() {
        let e = dir_start + i * ENTRY_LEN;
        let (t, offset, len, sum) = (
            le_u32(bytes, e),
            le_u64(bytes, e + 4),
            le_u64(bytes, e + 12),
            le_u32(bytes, e + 20),
        );
        if t != *tag {
            return Err(corrupt(
                e,
                format!("section {i} has tag {t}, expected {tag} ({name})"),
            ));
        }
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= dir_start as u64);
        let (Some(end), true) = (end, offset == next as u64) else {
            return Err(corrupt(
                e,
                format!(
                    "section {name} at {offset}, {len} bytes: expected to start at {next} and end by {dir_start}"
                ),
            ));
        };
        let range = next..end as usize;
        let computed = crc32fast::hash(&bytes[range.clone()]);
        if computed != sum {
            return Err(corrupt(
                range.start,
                format!(
                    "section {name} ({len} bytes) fails its checksum (stored {sum:08x}, computed {computed:08x})"
                ),
            ));
        }
        next = range.end;
        ranges[i] = range;
    }
    if next != dir_start {
        return Err(corrupt(
            next,
            "bytes between the last section and the directory",
        ));
    }
    Ok(ranges)
}

/// The sizes of the tables, to check indices against.
#[derive(Clone, Copy)]
struct Limits {
    strings: usize,
    paths: usize,
    exprs: usize,
}

/// Reads one section, bounds-checked; errors carry the file offset.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
}

const CMP: [CmpOp; 6] = [
    CmpOp::Eq,
    CmpOp::Ne,
    CmpOp::Lt,
    CmpOp::Le,
    CmpOp::Gt,
    CmpOp::Ge,
];
const ARITH: [ArithOp; 5] = [
    ArithOp::Add,
    ArithOp::Sub,
    ArithOp::Mul,
    ArithOp::Div,
    ArithOp::Rem,
];
const KINDS: [NodeKind; 3] = [NodeKind::Suite, NodeKind::Family, NodeKind::Task];
const PARTS: [Part; 3] = [Part::First, Part::And, Part::Or];

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8], range: std::ops::Range<usize>) -> Self {
        Cursor {
            bytes,
            pos: range.start,
            end: range.end,
        }
    }

    fn at(&self) -> usize {
        self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Corrupt> {
        if n > self.end - self.pos {
            return Err(corrupt(
                self.pos,
                format!(
                    "{n} bytes needed, {} left in the section",
                    self.end - self.pos
                ),
            ));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn rest(&mut self) -> &'a [u8] {
        let s = &self.bytes[self.pos..self.end];
        self.pos = self.end;
        s
    }

    fn done(&self, name: &str) -> Result<(), Corrupt> {
        if self.pos != self.end {
            return Err(corrupt(
                self.pos,
                format!(
                    "{} bytes left over at the end of section {name}",
                    self.end - self.pos
                ),
            ));
        }
        Ok(())
    }

    fn u8(&mut self) -> Result<u8, Corrupt> {
        Ok(self.take(1)?[0])
    }

    fn bool(&mut self) -> Result<bool, Corrupt> {
        let at = self.pos;
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(corrupt(at, format!("flag {b}, expected 0 or 1"))),
        }
    }

    fn u32(&mut self) -> Result<u32, Corrupt> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i64(&mut self) -> Result<i64, Corrupt> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_le_bytes(a))
    }

    /// A count of items of at least `least` bytes each: no more than the bytes left hold.
    fn count(&mut self, least: usize) -> Result<usize, Corrupt> {
        let at = self.pos;
        let n = self.u32()? as usize;
        if n.saturating_mul(least) > self.end - self.pos {
            return Err(corrupt(
                at,
                format!(
                    "a count of {n} that the {} bytes left cannot hold",
                    self.end - self.pos
                ),
            ));
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String, Corrupt> {
        let n = self.count(1)?;
        let at = self.pos;
        let b = self.take(n)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|e| corrupt(at + e.valid_up_to(), "a string is not UTF-8"))
    }

    fn opt_str(&mut self) -> Result<Option<String>, Corrupt> {
        Ok(if self.bool()? {
            Some(self.string()?)
        } else {
            None
        })
    }

    fn index(&mut self, len: usize, what: &str) -> Result<u32, Corrupt> {
        let at = self.pos;
        let i = self.u32()?;
        if i as usize >= len {
            return Err(corrupt(at, format!("{what} {i} of {len}")));
        }
        Ok(i)
    }

    fn sym(&mut self, strings: usize) -> Result<Sym, Corrupt> {
        let at = self.pos;
        let i = self.index(strings, "string")?;
        Sym::from_index(i as usize).ok_or_else(|| corrupt(at, "string index out of range"))
    }

    fn pick<T: Copy>(&mut self, table: &[T], what: &str) -> Result<T, Corrupt> {
        let at = self.pos;
        let b = self.u8()?;
        table
            .get(b as usize)
            .copied()
            .ok_or_else(|| corrupt(at, format!("{what} {b} unknown")))
    }

    fn state(&mut self) -> Result<State, Corrupt> {
        self.pick(&State::ALL, "state")
    }

    fn boxed(&mut self, l: &Limits, depth: u32) -> Result<Box<Expr>, Corrupt> {
        Ok(Box::new(self.expr(l, depth + 1)?))
    }

    fn expr(&mut self, l: &Limits, depth: u32) -> Result<Expr, Corrupt> {
        let at = self.pos;
        if depth > MAX_EXPR_DEPTH {
            return Err(corrupt(
                at,
                format!("an expression nested more than {MAX_EXPR_DEPTH} deep"),
            ));
        }
        Ok(match self.u8()? {
            tag @ (0 | 1) => {
                let n = self.count(2)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.expr(l, depth + 1)?);
                }
                if tag == 0 {
                    Expr::Or(items)
                } else {
                    Expr::And(items)
                }
            }
            2 => Expr::Not(self.boxed(l, depth)?),
            3 => {
                let op = self.pick(&CMP, "comparison")?;
                Expr::Cmp(op, self.boxed(l, depth)?, self.boxed(l, depth)?)
            }
            4 => {
                let op = self.pick(&ARITH, "operator")?;
                Expr::Arith(op, self.boxed(l, depth)?, self.boxed(l, depth)?)
            }
            5 => Expr::Paren(self.boxed(l, depth)?),
            6 => Expr::Node(PathId(self.index(l.paths, "path")?)),
            7 => {
                let path = PathId(self.index(l.paths, "path")?);
                Expr::Attr(path, self.sym(l.strings)?)
            }
            8 => Expr::State(self.state()?),
            9 => Expr::Event(self.bool()?),
            10 => Expr::Int(self.i64()?),
            t => return Err(corrupt(at, format!("expression tag {t} unknown"))),
        })
    }

    fn clock(&mut self) -> Result<Clock, Corrupt> {
        Ok(Clock {
            relative: self.bool()?,
            hour: self.u8()?,
            minute: self.u8()?,
        })
    }

    fn opt_clock(&mut self) -> Result<Option<Clock>, Corrupt> {
        Ok(if self.bool()? {
            Some(self.clock()?)
        } else {
            None
        })
    }

    fn node(&mut self, l: &Limits, depth: usize) -> Result<Node, Corrupt> {
        let at = self.pos;
        if depth > MAX_NESTING {
            return Err(corrupt(
                at,
                format!("nodes nested more than {MAX_NESTING} deep"),
            ));
        }
        let kind = self.pick(&KINDS, "node kind")?;
        let has_note = self.bool()?;
        let name = self.sym(l.strings)?;
        let attrs = self.count(2)?;
        let children = self.count(NODE_LEN)?;
        if kind == NodeKind::Task && children > 0 {
            return Err(corrupt(at, "a task with children"));
        }
        let note = if has_note { Some(self.string()?) } else { None };
        let mut node = Node {
            kind,
            name,
            note,
            attrs: Vec::with_capacity(attrs),
            children: Vec::with_capacity(children),
        };
        for _ in 0..attrs {
            node.attrs.push(self.attr(l)?);
        }
        for _ in 0..children {
            let at = self.pos;
            let child = self.node(l, depth + 1)?;
            if child.kind == NodeKind::Suite {
                return Err(corrupt(at, "a suite inside another node"));
            }
            node.children.push(Arc::new(child));
        }
        Ok(node)
    }

    fn attr(&mut self, l: &Limits) -> Result<Attr, Corrupt> {
        let at = self.pos;
        Ok(match self.u8()? {
            1 => Attr::Edit(Variable {
                name: self.sym(l.strings)?,
                value: self.sym(l.strings)?,
                double_quoted: self.bool()?,
            }),
            tag @ (2 | 3) => {
                let e = ExprAttr {
                    part: self.pick(&PARTS, "part")?,
                    expr: ExprId(self.index(l.exprs, "expression")?),
                };
                if tag == 2 {
                    Attr::Trigger(e)
                } else {
                    Attr::Complete(e)
                }
            }
            4 => {
                let flags_at = self.pos;
                let flags = self.u8()?;
                if flags & !0b1111 != 0 || (flags & 0b1000 != 0 && flags & 0b100 == 0) {
                    return Err(corrupt(flags_at, format!("event flags {flags:#x}")));
                }
                let number = if flags & 1 != 0 {
                    Some(self.u32()?)
                } else {
                    None
                };
                let name = if flags & 2 != 0 {
                    Some(self.sym(l.strings)?)
                } else {
                    None
                };
                Attr::Event(Event {
                    number,
                    name,
                    initial: (flags & 4 != 0).then_some(flags & 8 != 0),
                })
            }
            5 => {
                let name = self.sym(l.strings)?;
                let min = self.i64()?;
                let max = self.i64()?;
                let threshold = if self.bool()? {
                    Some(self.i64()?)
                } else {
                    None
                };
                Attr::Meter(Box::new(Meter {
                    name,
                    min,
                    max,
                    threshold,
                }))
            }
            6 => Attr::Label(Label {
                name: self.sym(l.strings)?,
                text: self.sym(l.strings)?,
            }),
            7 => Attr::Limit(Limit {
                name: self.sym(l.strings)?,
                max: self.i64()?,
            }),
            8 => {
                let flag_at = self.pos;
                let flag = match self.u32()? {
                    u32::MAX => None,
                    c => Some(
                        char::from_u32(c)
                            .ok_or_else(|| corrupt(flag_at, format!("inlimit flag {c:#x}")))?,
                    ),
                };
                let path_at = self.pos;
                let path = match self.u32()? {
                    0 => None,
                    p if (p as usize) <= l.strings => Sym::from_index(p as usize - 1),
                    p => {
                        return Err(corrupt(
                            path_at,
                            format!("string {} of {}", p - 1, l.strings),
                        ));
                    }
                };
                let name = self.sym(l.strings)?;
                let tokens = if self.bool()? {
                    Some(self.u32()?)
                } else {
                    None
                };
                Attr::Inlimit(Inlimit {
                    flag,
                    path,
                    name,
                    tokens,
                })
            }
            9 => Attr::Late(Late {
                submitted: self.opt_clock()?,
                active: self.opt_clock()?,
                complete: self.opt_clock()?,
            }),
            10 => {
                let start = self.clock()?;
                let series = if self.bool()? {
                    Some((self.clock()?, self.clock()?))
                } else {
                    None
                };
                Attr::Time(TimeAttr { start, series })
            }
            11 => Attr::Repeat(Box::new(self.repeat()?)),
            12 => Attr::Defstatus(self.state()?),
            13 => Attr::Comment(self.sym(l.strings)?),
            14 => Attr::Other(self.sym(l.strings)?),
            t => return Err(corrupt(at, format!("attribute tag {t} unknown"))),
        })
    }

    fn repeat(&mut self) -> Result<Repeat, Corrupt> {
        let at = self.pos;
        Ok(match self.u8()? {
            0 => Repeat::Date {
                var: self.string()?,
                start: self.u32()?,
                end: self.u32()?,
                step: self.i64()?,
            },
            1 => Repeat::Integer {
                var: self.string()?,
                start: self.i64()?,
                end: self.i64()?,
                step: self.i64()?,
            },
            kind @ (2 | 3) => {
                let var = self.string()?;
                let n = self.count(4)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.string()?);
                }
                if kind == 2 {
                    Repeat::Enumerated { var, items }
                } else {
                    Repeat::String { var, items }
                }
            }
            4 => Repeat::Day { step: self.i64()? },
            5 => Repeat::Other(self.string()?),
            k => return Err(corrupt(at, format!("repeat kind {k} unknown"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defs::generate::generate;
    use crate::defs::parse;

    fn encoded(defs: &Defs) -> Vec<u8> {
        let mut out = Vec::new();
        write(defs, &mut out).unwrap();
        out
    }

    fn sample() -> Defs {
        let mut text = crate::defs::write(&generate(0.0004, 3));
        text.push_str(
            "# enddef\nsuite x # a note\n  edit Q \"it's\"\n  repeat date YMD 20200101 20201231 1\n  \
             repeat integer I 1 10 2\n  repeat enumerated E \"a\" \"b\"\n  repeat string S \"x\"\n  \
             repeat day 1\n  repeat datelist D 20200101\n  limit l 3\n  family f\n    cron 10:00\n    \
             # inside\n    inlimit -n /x:l 2\n    task t # state:complete\n      event 1 set\n      \
             event 2 e clear\n      meter m -1 9\n      label l \"\"\n      late -s +00:15 -a 20:00\n      \
             time 00:00 23:00 01:00\n      trigger (a:m + 1) * 2 >= 10 or not /x/f:e == set\n      \
             trigger -o ./t == active\n      complete -a 1 % 2 != 0\n      defstatus suspended\n  \
             endfamily\nendsuite\n",
        );
        let mut defs = parse(&text).unwrap();
        defs.externs.push("/ext/s:lim".to_owned());
        defs
    }

    #[test]
    fn every_attribute_round_trips() {
        let defs = sample();
        let bytes = encoded(&defs);
        assert_eq!(read(&bytes).unwrap(), defs);
        let empty = Defs::new();
        assert_eq!(read(&encoded(&empty)).unwrap(), empty);
    }

    #[test]
    fn every_truncation_is_refused_with_an_offset() {
        let bytes = encoded(&sample());
        for len in 0..bytes.len() {
            let err = read(&bytes[..len]).unwrap_err();
            assert!(err.offset <= len as u64, "{len}: {err}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(read(&longer).is_err());
    }

    #[test]
    fn every_flipped_bit_is_refused_with_an_offset() {
        let bytes = encoded(&sample());
        for i in 0..bytes.len() {
            let bit = i % 8;
            let mut bad = bytes.clone();
            bad[i] ^= 1 << bit;
            let err = read(&bad).unwrap_err();
            assert!(err.offset < bytes.len() as u64, "byte {i} bit {bit}: {err}");
        }
    }

    /// What a fuzzer would find past the checksums: any byte of a section changed, and
    /// its checksum made to match, decodes or is refused, and never panics.
    #[test]
    fn decoding_corrupted_sections_never_panics() {
        let bytes = encoded(&sample());
        let ranges = sections(&bytes).unwrap();
        let footer = bytes.len() - FOOTER_LEN;
        let dir_start = footer - SECTIONS.len() * ENTRY_LEN;
        let mut refused = 0;
        for (s, range) in ranges.iter().enumerate() {
            for i in range.clone() {
                let v = [0x00, 0xff, bytes[i].wrapping_add(1)][i % 3];
                {
                    let mut bad = bytes.clone();
                    bad[i] = v;
                    let sum = crc32fast::hash(&bad[range.clone()]);
                    let e = dir_start + s * ENTRY_LEN + 20;
                    bad[e..e + 4].copy_from_slice(&sum.to_le_bytes());
                    let dir_sum = crc32fast::hash(&bad[dir_start..footer + 12]);
                    bad[footer + 12..footer + 16].copy_from_slice(&dir_sum.to_le_bytes());
                    refused += usize::from(read(&bad).is_err());
                }
            }
        }
        assert!(refused > 0);
    }

    #[test]
    fn errors_name_the_offset() {
        let bytes = encoded(&sample());
        let err = read(b"suite s\nendsuite\n").unwrap_err();
        assert_eq!(err.offset, 17);
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert_eq!(read(&bad).unwrap_err().offset, 0);
        let ranges = sections(&bytes).unwrap();
        let mut bad = bytes.clone();
        let i = ranges[4].start + 3;
        bad[i] ^= 0x10;
        let err = read(&bad).unwrap_err();
        assert_eq!(err.offset, ranges[4].start as u64, "{err}");
        assert!(err.to_string().contains("section NODES"), "{err}");
        assert!(
            err.to_string()
                .starts_with(&format!("at byte offset {}", ranges[4].start)),
            "{err}"
        );
    }
}
