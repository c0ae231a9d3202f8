//! Reading `.def` text into a [`Defs`].
//!
//! One pass over the lines, each split into borrowed tokens; names and values are
//! interned (a string seen before costs a hash lookup, no allocation), and a node is
//! three allocations of the exact size: itself, its attributes and its children. A task
//! ends at the next `task`, `family`, `endfamily`, `endsuite` or an optional `endtask`.
//! Attributes may come in any order; one the reader does not know is kept verbatim
//! ([`Attr::Other`]). A large definition is read on several threads, split at its
//! suites ([`super::parallel`]).

use std::sync::Arc;

use super::expr::Interner;
use super::model::{
    Attr, Clock, Defs, Event, ExprAttr, Inlimit, Label, Late, Limit, Meter, Node, NodeKind, Part,
    Repeat, State, Sym, TimeAttr, Variable,
};

/// Why a definition does not parse: where (1-based line and column, in characters) and
/// what was wrong. No tree is returned with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {reason}")]
#[non_exhaustive]
pub struct ParseError {
    /// 1-based line number.
    pub line: u64,
    /// 1-based column, in characters.
    pub column: u64,
    /// What is wrong there.
    pub reason: String,
}

/// Parses a whole definition.
///
/// ```
/// use benchtop_workloads::defs::parse;
///
/// let defs = parse("suite s\n  family f\n    task t\n      event 1\n  endfamily\nendsuite\n")?;
/// assert_eq!(defs.counts().tasks, 1);
/// let err = parse("suite s\n  meter m 0 x\nendsuite\n").unwrap_err();
/// assert_eq!((err.line, err.column), (2, 13));
/// # Ok::<(), benchtop_workloads::defs::ParseError>(())
/// ```
pub fn parse(text: &str) -> Result<Defs, ParseError> {
    super::parallel::parse(text)
}

/// Parses a whole definition on the calling thread alone: the tree [`parse`] gives.
pub fn parse_serial(text: &str) -> Result<Defs, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = Reader::new(text.len());
    let mut last = 0u64;
    for (index, raw) in text.split('\n').enumerate() {
        let number = index as u64 + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if !line.trim().is_empty() {
            last = number;
        }
        reader.line(line, number)?;
    }
    if let Some(open) = reader.stack.last() {
        return Err(ParseError {
            line: last.max(1),
            column: 1,
            reason: format!(
                "end of input with {} {} still open (missing end{})",
                open.kind.keyword(),
                reader.name(open.name),
                if open.kind == NodeKind::Task {
                    reader
                        .stack
                        .iter()
                        .rev()
                        .find(|n| n.kind != NodeKind::Task)
                        .map_or("suite", |n| n.kind.keyword())
                } else {
                    open.kind.keyword()
                }
            ),
        });
    }
    Ok(reader.finish())
}

/// Suites, families and tasks nested deeper than this are refused: real definitions
/// nest a handful of levels, and the limit keeps a hostile file from exhausting the
/// stack of the writer and the serializers (serde_json reads at most 128 levels).
pub const MAX_NESTING: usize = 50;

/// The state of a reading: what is done, the nodes still open and, for them, their
/// attributes and closed children so far (each node takes its own from the end of
/// these when it closes, in one allocation of the exact size).
pub(crate) struct Reader {
    pub(crate) defs: Defs,
    pub(crate) interner: Interner,
    pub(crate) stack: Vec<Open>,
    attrs: Vec<Attr>,
    children: Vec<Arc<Node>>,
}

/// A node being read.
pub(crate) struct Open {
    kind: NodeKind,
    name: Sym,
    note: Option<String>,
    attrs_from: usize,
    children_from: usize,
}

/// The whitespace-separated tokens of a line with their byte offsets.
struct Tokens<'a> {
    line: &'a str,
    pos: usize,
}

impl<'a> Tokens<'a> {
    fn new(line: &'a str) -> Self {
        Tokens { line, pos: 0 }
    }

    /// The rest of the line from the next token on, and its offset.
    fn rest(&mut self) -> (usize, &'a str) {
        let bytes = self.line.as_bytes();
        while self.pos < bytes.len() && bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let at = self.pos;
        self.pos = bytes.len();
        (at, self.line[at..].trim_end())
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = (usize, &'a str);

    fn next(&mut self) -> Option<(usize, &'a str)> {
        let bytes = self.line.as_bytes();
        while self.pos < bytes.len() && bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        if self.pos >= bytes.len() {
            return None;
        }
        let start = self.pos;
        while self.pos < bytes.len() && !bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        Some((start, &self.line[start..self.pos]))
    }
}

/// Context for errors on one line.
struct At<'a> {
    line: &'a str,
    number: u64,
}

impl At<'_> {
    fn err(&self, offset: usize, reason: impl Into<String>) -> ParseError {
        let offset = offset.min(self.line.len());
        let column = self
            .line
            .get(..offset)
            .map_or(offset, |prefix| prefix.chars().count()) as u64
            + 1;
        ParseError {
            line: self.number,
            column,
            reason: reason.into(),
        }
    }

    /// The next token, or an error naming what was expected.
    fn need<'t>(
        &self,
        tokens: &mut Tokens<'t>,
        what: &str,
    ) -> Result<(usize, &'t str), ParseError> {
        tokens
            .next()
            .ok_or_else(|| self.err(self.line.trim_end().len(), format!("expected {what}")))
    }

    fn int<T: std::str::FromStr>(
        &self,
        (at, token): (usize, &str),
        what: &str,
    ) -> Result<T, ParseError> {
        token
            .parse()
            .map_err(|_| self.err(at, format!("expected {what}, found {token:?}")))
    }

    fn end(&self, tokens: &mut Tokens<'_>) -> Result<(), ParseError> {
        match tokens.next() {
            None => Ok(()),
            Some((_, t)) if t.starts_with('#') => Ok(()),
            Some((at, t)) => Err(self.err(at, format!("unexpected {t:?} at the end of the line"))),
        }
    }

    fn clock(&self, (at, token): (usize, &str)) -> Result<Clock, ParseError> {
        let bad = || self.err(at, format!("expected a time [+]HH:MM, found {token:?}"));
        let (relative, hm) = match token.strip_prefix('+') {
            Some(hm) => (true, hm),
            None => (false, token),
        };
        let (h, m) = hm.split_once(':').ok_or_else(bad)?;
        if h.is_empty() || h.len() > 2 || m.len() != 2 {
            return Err(bad());
        }
        let hour: u8 = h.parse().map_err(|_| bad())?;
        let minute: u8 = m.parse().map_err(|_| bad())?;
        if minute > 59 {
            return Err(bad());
        }
        Ok(Clock {
            relative,
            hour,
            minute,
        })
    }

    /// A quoted value (`'…'` or `"…"`, the last matching quote closing it) or, unquoted,
    /// the rest of the line; and whether it was double-quoted.
    fn quoted<'t>(
        &self,
        (at, rest): (usize, &'t str),
        what: &str,
    ) -> Result<(&'t str, bool), ParseError> {
        let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
            if rest.is_empty() {
                return Err(self.err(at, format!("expected {what}")));
            }
            return Ok((rest, false));
        };
        let body = &rest[1..];
        let Some(close) = body.rfind(quote) else {
            return Err(self.err(at, format!("{what}: no closing {quote}")));
        };
        let after = body[close + 1..].trim_start();
        if !after.is_empty() && !after.starts_with('#') {
            return Err(self.err(
                at + 1 + close + 1,
                format!("unexpected text after the closing {quote} of {what}"),
            ));
        }
        Ok((&body[..close], quote == '"'))
    }
}

/// `"a" "b" c`: quoted or bare items to the end of the line.
fn items(at: &At<'_>, offset: usize, rest: &str) -> Result<Vec<String>, ParseError> {
    let mut out = Vec::new();
    let mut pos = 0;
    let bytes = rest.as_bytes();
    while pos < bytes.len() {
        if bytes[pos].is_ascii_whitespace() {
            pos += 1;
            continue;
        }
        let quote = bytes[pos];
        if quote == b'"' || quote == b'\'' {
            let Some(len) = rest[pos + 1..].find(quote as char) else {
                return Err(at.err(offset + pos, format!("no closing {}", quote as char)));
            };
            out.push(rest[pos + 1..pos + 1 + len].to_owned());
            pos += len + 2;
        } else {
            let len = rest[pos..]
                .find(|c: char| c.is_ascii_whitespace())
                .unwrap_or(rest.len() - pos);
            out.push(rest[pos..pos + len].to_owned());
            pos += len;
        }
    }
    Ok(out)
}

impl Reader {
    /// A reader for about `text_len` bytes of text.
    pub(crate) fn new(text_len: usize) -> Self {
        Reader {
            defs: Defs::new(),
            interner: Interner::for_text(text_len),
            stack: Vec::with_capacity(8),
            attrs: Vec::with_capacity(64),
            children: Vec::with_capacity(256),
        }
    }

    /// Reads `text`'s lines (a piece of a definition that starts at the top level), as
    /// [`parse_serial`] does but without the check that every node was closed.
    pub(crate) fn read(text: &str) -> Result<Self, ParseError> {
        let mut reader = Reader::new(text.len());
        for (index, raw) in text.split('\n').enumerate() {
            let line = raw.strip_suffix('\r').unwrap_or(raw);
            reader.line(line, index as u64 + 1)?;
        }
        Ok(reader)
    }

    /// The definition read, with its tables.
    pub(crate) fn finish(self) -> Defs {
        let mut defs = self.defs;
        self.interner.finish(&mut defs);
        defs
    }

    fn name(&self, sym: Sym) -> &str {
        self.interner.strings.get(sym).unwrap_or("?")
    }

    fn sym(&mut self, at: &At<'_>, offset: usize, s: &str) -> Result<Sym, ParseError> {
        self.interner.str(s).map_err(|_| {
            at.err(
                offset,
                "the definition holds more than 4 GiB of distinct names",
            )
        })
    }

    fn line(&mut self, line: &str, number: u64) -> Result<(), ParseError> {
        let at = At { line, number };
        let mut tokens = Tokens::new(line);
        let Some((key_at, keyword)) = tokens.next() else {
            return Ok(());
        };
        if keyword.starts_with('#') {
            let text = &line[key_at + 1..];
            if self.defs.version.is_none()
                && self.defs.suites.is_empty()
                && self.stack.is_empty()
                && self.defs.externs.is_empty()
                && self.defs.comments.is_empty()
                && text.starts_with(|c: char| c.is_ascii_digit())
                && !text.contains(char::is_whitespace)
            {
                self.defs.version = Some(text.to_owned());
            } else if !self.stack.is_empty() {
                let text = self.sym(&at, key_at, text)?;
                self.attrs.push(Attr::Comment(text));
            } else {
                let before = u32::try_from(self.defs.suites.len()).unwrap_or(u32::MAX);
                self.defs.comments.push((before, text.to_owned()));
            }
            return Ok(());
        }
        match keyword {
            "suite" => {
                if let Some(open) = self.stack.last() {
                    return Err(at.err(
                        key_at,
                        format!(
                            "suite inside {} {}: suites are top level only",
                            open.kind.keyword(),
                            self.name(open.name)
                        ),
                    ));
                }
                self.open(&at, &mut tokens, NodeKind::Suite)
            }
            "family" | "task" => {
                self.close_task();
                match self.stack.last() {
                    None => Err(at.err(key_at, format!("{keyword} outside a suite"))),
                    Some(_) => {
                        let kind = if keyword == "task" {
                            NodeKind::Task
                        } else {
                            NodeKind::Family
                        };
                        self.open(&at, &mut tokens, kind)
                    }
                }
            }
            "endtask" => match self.stack.last() {
                Some(node) if node.kind == NodeKind::Task => {
                    self.close_task();
                    at.end(&mut tokens)
                }
                _ => Err(at.err(key_at, "endtask without a task")),
            },
            "endfamily" | "endsuite" => {
                self.close_task();
                let want = if keyword == "endsuite" {
                    NodeKind::Suite
                } else {
                    NodeKind::Family
                };
                match self.stack.last() {
                    Some(node) if node.kind == want => {
                        self.close();
                        at.end(&mut tokens)
                    }
                    Some(node) => Err(at.err(
                        key_at,
                        format!(
                            "{keyword} while {} {} is open",
                            node.kind.keyword(),
                            self.name(node.name)
                        ),
                    )),
                    None => Err(at.err(key_at, format!("{keyword} outside a suite"))),
                }
            }
            "extern" => {
                if !self.stack.is_empty() {
                    return Err(at.err(key_at, "extern inside a suite: externs are top level only"));
                }
                let (_, path) = at.need(&mut tokens, "a path after extern")?;
                self.defs.externs.push(path.to_owned());
                at.end(&mut tokens)
            }
            _ => {
                if self.stack.is_empty() {
                    return Err(at.err(key_at, format!("unexpected {keyword:?} outside a suite")));
                }
                let attr = self.attr(&at, key_at, keyword, &mut tokens)?;
                self.attrs.push(attr);
                Ok(())
            }
        }
    }

    fn open(
        &mut self,
        at: &At<'_>,
        tokens: &mut Tokens<'_>,
        kind: NodeKind,
    ) -> Result<(), ParseError> {
        if self.stack.len() >= MAX_NESTING {
            return Err(at.err(0, format!("nodes nested more than {MAX_NESTING} deep")));
        }
        let what = match kind {
            NodeKind::Suite => "a name after suite",
            NodeKind::Family => "a name after family",
            NodeKind::Task => "a name after task",
        };
        let (name_at, name) = at.need(tokens, what)?;
        if name.starts_with('#') {
            return Err(at.err(name_at, format!("expected {what}")));
        }
        let name = self.sym(at, name_at, name)?;
        let (rest_at, rest) = tokens.rest();
        let mut note = None;
        if rest.starts_with('#') {
            note = Some(at.line[rest_at + 1..].to_owned());
        } else if !rest.is_empty() {
            return Err(at.err(rest_at, format!("unexpected {rest:?} after the name")));
        }
        self.stack.push(Open {
            kind,
            name,
            note,
            attrs_from: self.attrs.len(),
            children_from: self.children.len(),
        });
        Ok(())
    }

    fn close_task(&mut self) {
        if self.stack.last().is_some_and(|n| n.kind == NodeKind::Task) {
            self.close();
        }
    }

    fn close(&mut self) {
        if let Some(open) = self.stack.pop() {
            let node = Arc::new(Node {
                kind: open.kind,
                name: open.name,
                note: open.note,
                attrs: self.attrs.drain(open.attrs_from..).collect(),
                children: self.children.drain(open.children_from..).collect(),
            });
            if self.stack.is_empty() {
                self.defs.suites.push(node);
            } else {
                self.children.push(node);
            }
        }
    }

    fn attr(
        &mut self,
        at: &At<'_>,
        key_at: usize,
        keyword: &str,
        tokens: &mut Tokens<'_>,
    ) -> Result<Attr, ParseError> {
        // Over 150 lines by design: the attribute grammar, one arm per keyword.
        let attr = match keyword {
            "edit" => {
                let (name_at, name) = at.need(tokens, "a variable name")?;
                let (value, double_quoted) = at.quoted(tokens.rest(), "a value")?;
                let name = self.sym(at, name_at, name)?;
                let value = self.sym(at, name_at, value)?;
                return Ok(Attr::Edit(Variable {
                    name,
                    value,
                    double_quoted,
                }));
            }
            "trigger" | "complete" => {
                let (mut rest_at, mut rest) = tokens.rest();
                let mut part = Part::First;
                for (flag, p) in [("-a", Part::And), ("-o", Part::Or)] {
                    if let Some(after) = rest
                        .strip_prefix(flag)
                        .filter(|a| a.starts_with(char::is_whitespace))
                    {
                        part = p;
                        let trimmed = after.trim_start();
                        rest_at += rest.len() - trimmed.len();
                        rest = trimmed;
                    }
                }
                // An expression holds no `#`: what follows one is a comment.
                if let Some(hash) = rest.find('#') {
                    rest = rest[..hash].trim_end();
                }
                if rest.is_empty() {
                    return Err(at.err(rest_at, format!("expected an expression after {keyword}")));
                }
                let expr = self
                    .interner
                    .parse(rest)
                    .map_err(|e| at.err(rest_at + e.offset, e.reason))?;
                let expr = self.interner.expr(expr);
                let e = ExprAttr { part, expr };
                return Ok(if keyword == "trigger" {
                    Attr::Trigger(e)
                } else {
                    Attr::Complete(e)
                });
            }
            "event" => {
                let first = at.need(tokens, "an event number or name")?;
                let mut event = Event {
                    number: None,
                    name: None,
                    initial: None,
                };
                let mut next = Some(first);
                if first.1.bytes().all(|b| b.is_ascii_digit()) {
                    event.number = Some(at.int(first, "an event number")?);
                    next = tokens.next();
                }
                if let Some((_, word)) = next.filter(|(_, w)| !w.starts_with('#')) {
                    match word {
                        "set" if event.number.is_some() => event.initial = Some(true),
                        "clear" if event.number.is_some() => event.initial = Some(false),
                        _ => {
                            event.name = Some(self.sym(at, first.0, word)?);
                            match tokens.next() {
                                Some((_, "set")) => event.initial = Some(true),
                                Some((_, "clear")) => event.initial = Some(false),
                                Some((a, w)) if !w.starts_with('#') => {
                                    return Err(
                                        at.err(a, format!("expected set or clear, found {w:?}"))
                                    );
                                }
                                _ => return Ok(Attr::Event(event)),
                            }
                        }
                    }
                }
                Attr::Event(event)
            }
            "meter" => {
                let (name_at, name) = at.need(tokens, "a meter name")?;
                let min = at.int(
                    at.need(tokens, "the meter's minimum")?,
                    "an integer minimum",
                )?;
                let max = at.int(
                    at.need(tokens, "the meter's maximum")?,
                    "an integer maximum",
                )?;
                let threshold = match tokens.next() {
                    Some((_, t)) if t.starts_with('#') => None,
                    Some(t) => Some(at.int(t, "an integer threshold")?),
                    None => None,
                };
                Attr::Meter(Box::new(Meter {
                    name: self.sym(at, name_at, name)?,
                    min,
                    max,
                    threshold,
                }))
            }
            "label" => {
                let (name_at, name) = at.need(tokens, "a label name")?;
                let (text, _) = at.quoted(tokens.rest(), "the label's text")?;
                return Ok(Attr::Label(Label {
                    name: self.sym(at, name_at, name)?,
                    text: self.sym(at, name_at, text)?,
                }));
            }
            "limit" => {
                let (name_at, name) = at.need(tokens, "a limit name")?;
                let max = at.int(at.need(tokens, "the limit's size")?, "an integer size")?;
                Attr::Limit(Limit {
                    name: self.sym(at, name_at, name)?,
                    max,
                })
            }
            "inlimit" => {
                let mut first = at.need(tokens, "a limit name")?;
                let mut flag = None;
                if let Some(f @ ('n' | 's')) = first.1.strip_prefix('-').and_then(|f| {
                    let mut chars = f.chars();
                    chars.next().filter(|_| chars.next().is_none())
                }) {
                    flag = Some(f);
                    first = at.need(tokens, "a limit name")?;
                }
                let (path, name) = match first.1.rsplit_once(':') {
                    Some((path, name)) => (Some(self.sym(at, first.0, path)?), name),
                    None => (None, first.1),
                };
                if name.is_empty() {
                    return Err(at.err(first.0, "expected a limit name"));
                }
                let tokens_taken = match tokens.next() {
                    Some((_, t)) if t.starts_with('#') => None,
                    Some(t) => Some(at.int(t, "a number of tokens")?),
                    None => None,
                };
                Attr::Inlimit(Inlimit {
                    flag,
                    path,
                    name: self.sym(at, first.0, name)?,
                    tokens: tokens_taken,
                })
            }
            "late" => {
                let mut late = Late {
                    submitted: None,
                    active: None,
                    complete: None,
                };
                let mut any = false;
                while let Some((a, flag)) = tokens.next() {
                    if flag.starts_with('#') {
                        break;
                    }
                    let slot = match flag {
                        "-s" => &mut late.submitted,
                        "-a" => &mut late.active,
                        "-c" => &mut late.complete,
                        _ => {
                            return Err(at.err(a, format!("expected -s, -a or -c, found {flag:?}")));
                        }
                    };
                    *slot = Some(at.clock(at.need(tokens, "a time after the flag")?)?);
                    any = true;
                }
                if !any {
                    return Err(at.err(key_at, "late needs at least one of -s, -a, -c"));
                }
                return Ok(Attr::Late(late));
            }
            "time" => {
                let start = at.clock(at.need(tokens, "a time")?)?;
                let series = match tokens.next() {
                    Some((_, t)) if t.starts_with('#') => None,
                    None => None,
                    Some(end) => {
                        let end = at.clock(end)?;
                        let step = at.clock(at.need(tokens, "the series' increment")?)?;
                        Some((end, step))
                    }
                };
                Attr::Time(TimeAttr { start, series })
            }
            "repeat" => {
                let (kind_at, kind) = at.need(tokens, "a repeat kind")?;
                let repeat = match kind {
                    "date" | "integer" => {
                        let (_, var) = at.need(tokens, "a variable name")?;
                        let start = at.need(tokens, "a start")?;
                        let end = at.need(tokens, "an end")?;
                        let step = match tokens.next() {
                            Some((_, t)) if t.starts_with('#') => 1,
                            Some(t) => at.int(t, "an integer step")?,
                            None => 1,
                        };
                        if kind == "date" {
                            Repeat::Date {
                                var: var.to_owned(),
                                start: at.int(start, "a date YYYYMMDD")?,
                                end: at.int(end, "a date YYYYMMDD")?,
                                step,
                            }
                        } else {
                            Repeat::Integer {
                                var: var.to_owned(),
                                start: at.int(start, "an integer start")?,
                                end: at.int(end, "an integer end")?,
                                step,
                            }
                        }
                    }
                    "enumerated" | "string" => {
                        let (_, var) = at.need(tokens, "a variable name")?;
                        let (rest_at, rest) = tokens.rest();
                        let values = items(at, rest_at, rest)?;
                        if values.is_empty() {
                            return Err(at.err(rest_at, "expected at least one value"));
                        }
                        if kind == "string" {
                            Repeat::String {
                                var: var.to_owned(),
                                items: values,
                            }
                        } else {
                            Repeat::Enumerated {
                                var: var.to_owned(),
                                items: values,
                            }
                        }
                    }
                    "day" => Repeat::Day {
                        step: match tokens.next() {
                            Some(t) => at.int(t, "a number of days")?,
                            None => 1,
                        },
                    },
                    _ => {
                        let rest = &at.line[kind_at..];
                        return Ok(Attr::Repeat(Box::new(Repeat::Other(
                            rest.trim_end().to_owned(),
                        ))));
                    }
                };
                Attr::Repeat(Box::new(repeat))
            }
            "defstatus" => {
                let (a, word) = at.need(tokens, "a state")?;
                let state = State::from_word(word)
                    .ok_or_else(|| at.err(a, format!("expected a state name, found {word:?}")))?;
                Attr::Defstatus(state)
            }
            _ => {
                return Ok(Attr::Other(self.sym(
                    at,
                    key_at,
                    at.line[key_at..].trim_end(),
                )?));
            }
        };
        at.end(tokens)?;
        Ok(attr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_nest_and_tasks_end_at_the_next_node() {
        let defs = parse(
            "#5.9.2\nsuite s\n family f\n  task a\n  task b\n  endtask\n  family g\n   task c\n  endfamily\n  task d\n endfamily\n task e\nendsuite\n",
        )
        .unwrap();
        assert_eq!(defs.version.as_deref(), Some("5.9.2"));
        let s = &defs.suites[0];
        let names: Vec<&str> = s.children.iter().map(|n| defs.str(n.name)).collect();
        assert_eq!(names, ["f", "e"]);
        let f: Vec<&str> = s.children[0]
            .children
            .iter()
            .map(|n| defs.str(n.name))
            .collect();
        assert_eq!(f, ["a", "b", "g", "d"]);
        let c = defs.counts();
        assert_eq!((c.suites, c.families, c.tasks), (1, 2, 5));
    }

    #[test]
    fn a_byte_order_mark_and_crlf_line_ends_are_read_through() {
        let defs = parse("\u{feff}#5.9.2\r\nsuite s\r\n  task t\r\nendsuite\r\n").unwrap();
        assert_eq!(defs.version.as_deref(), Some("5.9.2"));
        assert_eq!(defs.counts().tasks, 1);
    }

    #[test]
    fn quoted_values_run_to_the_last_quote() {
        let defs = parse("suite s\n edit A 'it's'\n edit B \"x y\"\n edit C bare\n label l \"say \"hi\"\"\nendsuite").unwrap();
        let attrs = &defs.suites[0].attrs;
        assert!(matches!(&attrs[0], Attr::Edit(v)
            if defs.str(v.name) == "A" && defs.str(v.value) == "it's" && !v.double_quoted));
        assert!(
            matches!(&attrs[1], Attr::Edit(v) if defs.str(v.value) == "x y" && v.double_quoted)
        );
        assert!(matches!(&attrs[2], Attr::Edit(v) if defs.str(v.value) == "bare"));
        assert!(matches!(&attrs[3], Attr::Label(l) if defs.str(l.text) == "say \"hi\""));
    }

    #[test]
    fn errors_name_line_and_column() {
        for (text, line, column, words) in [
            (
                "suite s\n  task t\n    meter m 0 x\nendsuite",
                3,
                15,
                "integer maximum",
            ),
            (
                "suite s\n  trigger a == complete and (\nendsuite",
                2,
                30,
                "found end of expression",
            ),
            ("suite s\n  late -s 25:99\nendsuite", 2, 11, "[+]HH:MM"),
            ("suite s\n  defstatus done\nendsuite", 2, 13, "state name"),
            ("task t\n", 1, 1, "task outside a suite"),
            ("suite s\n  suite t\n", 2, 3, "top level only"),
            (
                "suite s\n  family f\n  task t\nendsuite\n",
                4,
                1,
                "endsuite while family f is open",
            ),
            ("suite s\n  family f\n", 2, 1, "missing endfamily"),
            ("suite s\n  task t\n", 2, 1, "missing endsuite"),
            ("suite s\n  edit A 'x\nendsuite", 2, 10, "no closing '"),
            (
                "suite s\n  edit A 'x' y\nendsuite",
                2,
                13,
                "after the closing",
            ),
            (
                "suite s\n  label é \"x\" y\nendsuite",
                2,
                14,
                "after the closing",
            ),
            ("garbage\n", 1, 1, "outside a suite"),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!((err.line, err.column), (line, column), "{text:?}: {err}");
            assert!(err.reason.contains(words), "{text:?}: {err}");
        }
    }

    #[test]
    fn unknown_attributes_and_comments_are_kept() {
        let defs = parse("# top\nsuite s # a note\n  cron 10:00\n  # inside\n  autocancel +01:00\nendsuite\n# enddef\n").unwrap();
        assert_eq!(defs.version, None);
        assert_eq!(
            defs.comments,
            [(0, " top".to_owned()), (1, " enddef".to_owned())]
        );
        let s = &defs.suites[0];
        assert_eq!(s.note.as_deref(), Some(" a note"));
        let attrs: Vec<(&str, &str)> = s
            .attrs
            .iter()
            .map(|a| match a {
                Attr::Other(t) => ("other", defs.str(*t)),
                Attr::Comment(t) => ("comment", defs.str(*t)),
                _ => ("?", ""),
            })
            .collect();
        assert_eq!(
            attrs,
            [
                ("other", "cron 10:00"),
                ("comment", " inside"),
                ("other", "autocancel +01:00")
            ]
        );
        assert_eq!(defs.counts().others, 2);
    }
}
