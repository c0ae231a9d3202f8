//! Reading a binary checkpoint: the frame checked, then each section decoded in one
//! bounds-checked pass.

use std::sync::Arc;

use super::format::{
    Corrupt, ENTRY_LEN, FOOTER_LEN, FOOTER_MAGIC, MAGIC, MAX_EXPR_DEPTH, NODE_LEN, SECTIONS,
    corrupt,
};
use crate::defs::expr::{ArithOp, CmpOp, Expr};
use crate::defs::model::{
    Attr, Clock, Defs, Event, ExprAttr, ExprId, Inlimit, Label, Late, Limit, Meter, Node, NodeKind,
    Part, PathId, Repeat, State, Strings, Sym, TimeAttr, Variable,
};
use crate::defs::parse::MAX_NESTING;

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
pub(super) fn sections(bytes: &[u8]) -> Result<[std::ops::Range<usize>; 5], Corrupt> {
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
