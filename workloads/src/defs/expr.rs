//! Trigger and complete expressions: their syntax tree, parser, writer and interning.
//!
//! The grammar, loosest binding first (ecFlow's spellings in brackets):
//!
//! ```text
//! or      := and ( ("or" | "OR" | "||") and )*
//! and     := not ( ("and" | "AND" | "&&") not )*
//! not     := ("not" | "NOT" | "!" | "~") not | compare
//! compare := sum [ ("==" | "eq" | "!=" | "ne" | "<" | "lt" | "<=" | "le" | ">" | "gt" | ">=" | "ge") sum ]
//! sum     := term ( ("+" | "-") term )*
//! term    := primary ( ("*" | "/" | "%") primary )*
//! primary := "(" or ")" | integer | state | "set" | "clear" | path [ ":" name ]
//! ```
//!
//! Paths are absolute (`/s/f/t`) or relative (`../f/t`, `./t`, `t`); `path:name` names an
//! event, meter or variable of that node. The writer uses the first spelling of each
//! operator, so a written expression parses back to the same tree.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::model::{Defs, ExprId, PathId, State};
use super::strings::{FxHasher, StringInterner, Strings, Sym, TableFull};

/// An expression's syntax tree.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Expr {
    /// Two or more operands joined by `or`.
    Or(Vec<Expr>),
    /// Two or more operands joined by `and`.
    And(Vec<Expr>),
    /// `not X`.
    Not(Box<Expr>),
    /// A comparison.
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    /// Arithmetic.
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    /// `( X )`, kept so the text reads as written.
    Paren(Box<Expr>),
    /// A node path: the node's state in a comparison.
    Node(PathId),
    /// `path:name`: an event, meter or variable of a node (the name in
    /// [`Defs::strings`]).
    Attr(PathId, Sym),
    /// A state name.
    State(State),
    /// `set` (true) or `clear` (false), an event's value.
    Event(bool),
    /// An integer.
    Int(i64),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CmpOp {
    /// `==`, `eq`.
    Eq,
    /// `!=`, `ne`.
    Ne,
    /// `<`, `lt`.
    Lt,
    /// `<=`, `le`.
    Le,
    /// `>`, `gt`.
    Gt,
    /// `>=`, `ge`.
    Ge,
}

impl CmpOp {
    /// The operator as the writer spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// An arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArithOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `%`.
    Rem,
}

impl ArithOp {
    /// The operator's text.
    pub fn as_str(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::Rem => "%",
        }
    }
}

/// Why an expression does not parse, and where (byte offset in the expression).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExprError {
    pub(crate) offset: usize,
    pub(crate) reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    Word(&'a str),
    Int(i64),
    LParen,
    RParen,
    Cmp(CmpOp),
    Arith(ArithOp),
    And,
    Or,
    Not,
    Colon,
    End,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/')
}

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    peeked: Option<(usize, Tok<'a>)>,
}

impl<'a> Lexer<'a> {
    fn new(text: &'a str) -> Self {
        Lexer {
            text,
            pos: 0,
            peeked: None,
        }
    }

    fn peek(&mut self) -> Result<(usize, Tok<'a>), ExprError> {
        if let Some(t) = self.peeked {
            return Ok(t);
        }
        let t = self.lex()?;
        self.peeked = Some(t);
        Ok(t)
    }

    fn next(&mut self) -> Result<(usize, Tok<'a>), ExprError> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lex(),
        }
    }

    fn lex(&mut self) -> Result<(usize, Tok<'a>), ExprError> {
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len() && bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let start = self.pos;
        let Some(&b) = bytes.get(start) else {
            return Ok((start, Tok::End));
        };
        let next = bytes.get(start + 1).copied();
        let (len, tok) = match (b, next) {
            (b'(', _) => (1, Tok::LParen),
            (b')', _) => (1, Tok::RParen),
            (b'=', Some(b'=')) => (2, Tok::Cmp(CmpOp::Eq)),
            (b'!', Some(b'=')) => (2, Tok::Cmp(CmpOp::Ne)),
            (b'<', Some(b'=')) => (2, Tok::Cmp(CmpOp::Le)),
            (b'>', Some(b'=')) => (2, Tok::Cmp(CmpOp::Ge)),
            (b'<', _) => (1, Tok::Cmp(CmpOp::Lt)),
            (b'>', _) => (1, Tok::Cmp(CmpOp::Gt)),
            (b'&', Some(b'&')) => (2, Tok::And),
            (b'|', Some(b'|')) => (2, Tok::Or),
            (b'!' | b'~', _) => (1, Tok::Not),
            (b':', _) => (1, Tok::Colon),
            (b'+', _) => (1, Tok::Arith(ArithOp::Add)),
            (b'-', _) => (1, Tok::Arith(ArithOp::Sub)),
            (b'*', _) => (1, Tok::Arith(ArithOp::Mul)),
            (b'%', _) => (1, Tok::Arith(ArithOp::Rem)),
            // A `/` followed by a name is an absolute path, otherwise division.
            (b'/', n) if !n.is_some_and(is_word_byte) => (1, Tok::Arith(ArithOp::Div)),
            (b, _) if is_word_byte(b) => {
                let len = bytes[start..]
                    .iter()
                    .position(|&c| !is_word_byte(c))
                    .unwrap_or(bytes.len() - start);
                let word = &self.text[start..start + len];
                let tok = match word {
                    "and" | "AND" => Tok::And,
                    "or" | "OR" => Tok::Or,
                    "not" | "NOT" => Tok::Not,
                    "eq" => Tok::Cmp(CmpOp::Eq),
                    "ne" => Tok::Cmp(CmpOp::Ne),
                    "lt" => Tok::Cmp(CmpOp::Lt),
                    "le" => Tok::Cmp(CmpOp::Le),
                    "gt" => Tok::Cmp(CmpOp::Gt),
                    "ge" => Tok::Cmp(CmpOp::Ge),
                    // `007` is a node's name (an integer would be written back as `7`).
                    _ if word.bytes().all(|c| c.is_ascii_digit())
                        && !(word.len() > 1 && word.starts_with('0')) =>
                    {
                        match word.parse() {
                            Ok(n) => Tok::Int(n),
                            Err(_) => {
                                return Err(ExprError {
                                    offset: start,
                                    reason: format!("integer {word} is out of range"),
                                });
                            }
                        }
                    }
                    _ => Tok::Word(word),
                };
                (len, tok)
            }
            _ => {
                let c = self.text[start..].chars().next().unwrap_or('?');
                return Err(ExprError {
                    offset: start,
                    reason: format!("unexpected character {c:?}"),
                });
            }
        };
        self.pos = start + len;
        Ok((start, tok))
    }
}

type FxBuild = BuildHasherDefault<FxHasher>;

/// Turns expression text into trees, interning strings, paths and whole expressions as
/// it goes; [`Interner::finish`] puts the tables into a [`Defs`]. Ids are given in
/// order of first occurrence, so the same text read in the same order gives the same
/// tables.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    pub(crate) strings: StringInterner,
    path_ids: HashMap<Sym, PathId, FxBuild>,
    paths: Vec<Sym>,
    expr_ids: HashMap<u64, Slot, FxBuild>,
    exprs: Vec<Expr>,
}

#[derive(Debug)]
enum Slot {
    One(ExprId),
    Many(Vec<ExprId>),
}

impl Interner {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// An interner sized for about `text_len` bytes of definition.
    pub(crate) fn for_text(text_len: usize) -> Self {
        Interner {
            strings: StringInterner::for_text(text_len),
            ..Self::default()
        }
    }

    /// The symbol of `s`.
    pub(crate) fn str(&mut self, s: &str) -> Result<Sym, TableFull> {
        self.strings.intern(s)
    }

    /// The id of `path`, added to the paths when new.
    pub(crate) fn path(&mut self, path: &str) -> Result<PathId, TableFull> {
        let sym = self.strings.intern(path)?;
        Ok(self.path_of(sym))
    }

    /// The id of the path whose text `sym` names.
    pub(crate) fn path_of(&mut self, sym: Sym) -> PathId {
        if let Some(&id) = self.path_ids.get(&sym) {
            return id;
        }
        let id = PathId(u32::try_from(self.paths.len()).unwrap_or(u32::MAX));
        self.paths.push(sym);
        self.path_ids.insert(sym, id);
        id
    }

    /// The expressions so far, by [`ExprId`].
    #[cfg(test)]
    pub(crate) fn exprs(&self) -> &[Expr] {
        &self.exprs
    }

    /// The id of `expr`, added to the expressions when no equal one is there.
    pub(crate) fn expr(&mut self, expr: Expr) -> ExprId {
        let mut hasher = FxHasher::default();
        expr.hash(&mut hasher);
        let hash = hasher.finish();
        let new_id = ExprId(u32::try_from(self.exprs.len()).unwrap_or(u32::MAX));
        match self.expr_ids.get_mut(&hash) {
            None => {
                self.expr_ids.insert(hash, Slot::One(new_id));
            }
            Some(slot) => {
                let exprs = &self.exprs;
                let found = match slot {
                    Slot::One(id) => std::slice::from_ref(id),
                    Slot::Many(ids) => ids.as_slice(),
                }
                .iter()
                .copied()
                .find(|id| exprs.get(id.0 as usize) == Some(&expr));
                if let Some(id) = found {
                    return id;
                }
                match slot {
                    Slot::One(id) => *slot = Slot::Many(vec![*id, new_id]),
                    Slot::Many(ids) => ids.push(new_id),
                }
            }
        }
        self.exprs.push(expr);
        new_id
    }

    /// Parses `text` into a tree, interning its paths and names.
    pub(crate) fn parse(&mut self, text: &str) -> Result<Expr, ExprError> {
        let mut parser = Parser {
            lexer: Lexer::new(text),
            interner: self,
            depth: 0,
        };
        let expr = parser.or()?;
        match parser.lexer.next()? {
            (_, Tok::End) => Ok(expr),
            (offset, tok) => Err(ExprError {
                offset,
                reason: format!("unexpected {} after a complete expression", describe(tok)),
            }),
        }
    }

    /// The tables built: strings, paths, expressions.
    pub(crate) fn into_parts(self) -> (Strings, Vec<Sym>, Vec<Expr>) {
        (self.strings.into_strings(), self.paths, self.exprs)
    }

    /// Puts the tables built into `defs`.
    pub(crate) fn finish(self, defs: &mut Defs) {
        defs.strings = Arc::new(self.strings.into_strings());
        defs.paths = Arc::new(self.paths);
        defs.exprs = Arc::new(self.exprs);
    }
}

/// A full table, as an expression error.
fn full(offset: usize) -> ExprError {
    ExprError {
        offset,
        reason: "the definition holds more than 4 GiB of distinct names".to_owned(),
    }
}

/// Parentheses and `not` nested deeper than this are refused, so hostile input cannot
/// overflow the stack, and the JSON checkpoint of any expression stays within
/// serde_json's 128 levels.
pub const MAX_DEPTH: u32 = 20;

struct Parser<'a, 'i> {
    lexer: Lexer<'a>,
    interner: &'i mut Interner,
    depth: u32,
}

fn describe(tok: Tok<'_>) -> String {
    match tok {
        Tok::Word(w) => format!("{w:?}"),
        Tok::Int(n) => format!("{n}"),
        Tok::LParen => "\"(\"".to_owned(),
        Tok::RParen => "\")\"".to_owned(),
        Tok::Cmp(op) => format!("{:?}", op.as_str()),
        Tok::Arith(op) => format!("{:?}", op.as_str()),
        Tok::And => "\"and\"".to_owned(),
        Tok::Or => "\"or\"".to_owned(),
        Tok::Not => "\"not\"".to_owned(),
        Tok::Colon => "\":\"".to_owned(),
        Tok::End => "end of expression".to_owned(),
    }
}

impl Parser<'_, '_> {
    fn deeper(&mut self, offset: usize) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ExprError {
                offset,
                reason: format!("nested more than {MAX_DEPTH} deep"),
            });
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        let first = self.and()?;
        if self.lexer.peek()?.1 != Tok::Or {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.lexer.peek()?.1 == Tok::Or {
            self.lexer.next()?;
            items.push(self.and()?);
        }
        Ok(Expr::Or(items))
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let first = self.not()?;
        if self.lexer.peek()?.1 != Tok::And {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.lexer.peek()?.1 == Tok::And {
            self.lexer.next()?;
            items.push(self.not()?);
        }
        Ok(Expr::And(items))
    }

    fn not(&mut self) -> Result<Expr, ExprError> {
        let (offset, tok) = self.lexer.peek()?;
        if tok == Tok::Not {
            self.lexer.next()?;
            self.deeper(offset)?;
            let inner = self.not()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.compare()
    }

    fn compare(&mut self) -> Result<Expr, ExprError> {
        let lhs = self.sum()?;
        if let (_, Tok::Cmp(op)) = self.lexer.peek()? {
            self.lexer.next()?;
            let rhs = self.sum()?;
            return Ok(Expr::Cmp(op, Box::new(lhs), Box::new(rhs)));
        }
        Ok(lhs)
    }

    fn sum(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.term()?;
        while let (_, Tok::Arith(op @ (ArithOp::Add | ArithOp::Sub))) = self.lexer.peek()? {
            self.lexer.next()?;
            let rhs = self.term()?;
            lhs = Expr::Arith(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn term(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.primary()?;
        while let (_, Tok::Arith(op @ (ArithOp::Mul | ArithOp::Div | ArithOp::Rem))) =
            self.lexer.peek()?
        {
            self.lexer.next()?;
            let rhs = self.primary()?;
            lhs = Expr::Arith(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn primary(&mut self) -> Result<Expr, ExprError> {
        let (offset, tok) = self.lexer.next()?;
        match tok {
            Tok::LParen => {
                self.deeper(offset)?;
                let inner = self.or()?;
                self.depth -= 1;
                match self.lexer.next()? {
                    (_, Tok::RParen) => Ok(Expr::Paren(Box::new(inner))),
                    (at, other) => Err(ExprError {
                        offset: at,
                        reason: format!(
                            "expected \")\" to close the \"(\" at column {}, found {}",
                            offset + 1,
                            describe(other)
                        ),
                    }),
                }
            }
            Tok::Int(n) => Ok(Expr::Int(n)),
            Tok::Word("set") => Ok(Expr::Event(true)),
            Tok::Word("clear") => Ok(Expr::Event(false)),
            Tok::Word(word) => {
                if let Some(state) = State::from_word(word) {
                    return Ok(Expr::State(state));
                }
                let path = self.interner.path(word).map_err(|_| full(offset))?;
                if self.lexer.peek()?.1 != Tok::Colon {
                    return Ok(Expr::Node(path));
                }
                self.lexer.next()?;
                match self.lexer.next()? {
                    (at, Tok::Word(name)) if !name.contains('/') => {
                        let name = self.interner.str(name).map_err(|_| full(at))?;
                        Ok(Expr::Attr(path, name))
                    }
                    (at, other) => Err(ExprError {
                        offset: at,
                        reason: format!(
                            "expected an event, meter or variable name after \"{word}:\", found {}",
                            describe(other)
                        ),
                    }),
                }
            }
            other => Err(ExprError {
                offset,
                reason: format!(
                    "expected a node path, state, number or \"(\", found {}",
                    describe(other)
                ),
            }),
        }
    }
}

/// Rewrites the ids of `expr`: path `i` becomes `paths[i]`, string `i` `syms[i]`.
pub(crate) fn remap_expr(expr: &mut Expr, paths: &[PathId], syms: &[Sym]) {
    let path = |p: &mut PathId| *p = paths.get(p.0 as usize).copied().unwrap_or(*p);
    match expr {
        Expr::Or(items) | Expr::And(items) => {
            for item in items {
                remap_expr(item, paths, syms);
            }
        }
        Expr::Not(inner) | Expr::Paren(inner) => remap_expr(inner, paths, syms),
        Expr::Cmp(_, lhs, rhs) | Expr::Arith(_, lhs, rhs) => {
            remap_expr(lhs, paths, syms);
            remap_expr(rhs, paths, syms);
        }
        Expr::Node(p) => path(p),
        Expr::Attr(p, name) => {
            path(p);
            *name = syms.get(name.index()).copied().unwrap_or(*name);
        }
        Expr::State(_) | Expr::Event(_) | Expr::Int(_) => {}
    }
}

/// Appends `expr` as text, its paths looked up in `defs`.
pub(crate) fn write_expr(defs: &Defs, expr: &Expr, out: &mut String) {
    match expr {
        Expr::Or(items) | Expr::And(items) => {
            let sep = if matches!(expr, Expr::Or(_)) {
                " or "
            } else {
                " and "
            };
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                write_expr(defs, item, out);
            }
        }
        Expr::Not(inner) => {
            out.push_str("not ");
            write_expr(defs, inner, out);
        }
        Expr::Cmp(op, lhs, rhs) => {
            write_expr(defs, lhs, out);
            out.push(' ');
            out.push_str(op.as_str());
            out.push(' ');
            write_expr(defs, rhs, out);
        }
        Expr::Arith(op, lhs, rhs) => {
            write_expr(defs, lhs, out);
            out.push(' ');
            out.push_str(op.as_str());
            out.push(' ');
            write_expr(defs, rhs, out);
        }
        Expr::Paren(inner) => {
            out.push('(');
            write_expr(defs, inner, out);
            out.push(')');
        }
        Expr::Node(path) => out.push_str(defs.path(*path).unwrap_or("?")),
        Expr::Attr(path, name) => {
            out.push_str(defs.path(*path).unwrap_or("?"));
            out.push(':');
            out.push_str(defs.str(*name));
        }
        Expr::State(state) => out.push_str(state.as_str()),
        Expr::Event(set) => out.push_str(if *set { "set" } else { "clear" }),
        Expr::Int(n) => {
            use std::fmt::Write as _;
            let _ = write!(out, "{n}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Defs, Result<Expr, ExprError>) {
        let mut defs = Defs::new();
        let mut interner = Interner::new();
        let result = interner.parse(text);
        interner.finish(&mut defs);
        (defs, result)
    }

    fn round(text: &str) -> String {
        let (defs, expr) = parse(text);
        let mut out = String::new();
        write_expr(&defs, &expr.unwrap(), &mut out);
        out
    }

    #[test]
    fn every_spelling_of_an_operator_reads_the_same() {
        assert_eq!(
            round("/s/f/t eq complete AND ../t ne aborted"),
            "/s/f/t == complete and ../t != aborted"
        );
        assert_eq!(
            round("a==complete&&!b==active"),
            "a == complete and not b == active"
        );
        assert_eq!(
            round("a == complete || ~b == queued"),
            "a == complete or not b == queued"
        );
        assert_eq!(round("x:m ge 2 and x:m le 9"), "x:m >= 2 and x:m <= 9");
        assert_eq!(round("x:m gt 2 or x:m lt 9"), "x:m > 2 or x:m < 9");
    }

    #[test]
    fn precedence_groups_and_before_or_and_keeps_parentheses() {
        let (_, expr) = parse("a == complete or b == complete and c == complete");
        let Expr::Or(items) = expr.unwrap() else {
            panic!("or at the top")
        };
        assert!(matches!(items[1], Expr::And(_)));
        assert_eq!(
            round("(a == complete or b:ev) and not (c:m + 1) * 2 >= 10"),
            "(a == complete or b:ev) and not (c:m + 1) * 2 >= 10"
        );
        assert_eq!(
            round("t:e == set or t:e == clear"),
            "t:e == set or t:e == clear"
        );
        assert_eq!(
            round("../007 == complete and x:m > 07"),
            "../007 == complete and x:m > 07"
        );
    }

    #[test]
    fn paths_are_interned_once() {
        let (defs, expr) = parse("/s/a == complete and /s/a != aborted and ./b:ev");
        expr.unwrap();
        let paths: Vec<&str> = (0..defs.paths.len() as u32)
            .filter_map(|i| defs.path(PathId(i)))
            .collect();
        assert_eq!(paths, ["/s/a", "./b"]);
    }

    #[test]
    fn equal_expressions_share_one_id() {
        let mut interner = Interner::new();
        let a = interner.parse("/s/a == complete").unwrap();
        let b = interner.parse("/s/a  eq  complete").unwrap();
        let c = interner.parse("/s/b == complete").unwrap();
        let ia = interner.expr(a);
        let ib = interner.expr(b);
        let ic = interner.expr(c);
        assert_eq!(ia, ib);
        assert_ne!(ia, ic);
        assert_eq!(interner.exprs().len(), 2);
    }

    #[test]
    fn errors_give_the_offset_and_what_was_expected() {
        for (text, offset, words) in [
            ("(a == complete", 14, "expected \")\""),
            ("a == complete and", 17, "found end of expression"),
            ("a == complete b", 14, "unexpected \"b\""),
            ("a == @", 5, "unexpected character '@'"),
            ("a: == complete", 3, "after \"a:\""),
            ("99999999999999999999", 0, "out of range"),
        ] {
            let err = parse(text).1.unwrap_err();
            assert_eq!(err.offset, offset, "{text}: {err:?}");
            assert!(err.reason.contains(words), "{text}: {err:?}");
        }
        let deep = format!("{}a{}", "(".repeat(100), ")".repeat(100));
        assert!(parse(&deep).1.unwrap_err().reason.contains("nested"));
    }
}
