//! The definition tree: suites, families and tasks with their attributes.
//!
//! Attributes keep the order they were read in, so writing a tree and reading it back
//! gives the same tree. Trigger and complete expressions live once in
//! [`Defs::exprs`] and node paths once in [`Defs::paths`]: a node refers to them by
//! [`ExprId`] and an expression to its paths by [`PathId`]. Names and values (node,
//! variable, event, meter, label and limit names, variable values, label texts, paths,
//! comments) live once in [`Defs::strings`] and are [`Sym`]s (four bytes) in the tree;
//! an attribute takes 24 bytes in its node's list (meters and repeats, rare and larger,
//! are boxed).
//!
//! Nodes, the expression table and the path table are shared (`Arc`), so cloning a whole
//! definition copies a few pointers: a snapshot for a checkpoint costs next to nothing,
//! and changing a node of a shared tree ([`std::sync::Arc::make_mut`]) copies only the
//! nodes on its path. Serialized, an `Arc` is its content.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::expr::Expr;
pub use super::strings::{Strings, Sym};

/// A whole definition: the content of a `.def` file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Defs {
    /// The version of the header line (`#5.9.2` → `5.9.2`), when there is one.
    pub version: Option<String>,
    /// `extern` declarations, in order.
    pub externs: Vec<String>,
    /// Top-level comments: how many suites come before each, and its text after `#`.
    pub comments: Vec<(u32, String)>,
    /// The suites, in order.
    pub suites: Vec<Arc<Node>>,
    /// Every distinct trigger or complete expression, indexed by [`ExprId`].
    pub exprs: Arc<Vec<Expr>>,
    /// Every distinct node path named in an expression, indexed by [`PathId`]: its
    /// text in [`Defs::strings`].
    pub paths: Arc<Vec<Sym>>,
    /// Every distinct name and value of the tree, indexed by [`Sym`].
    pub strings: Arc<Strings>,
}

/// An index into [`Defs::exprs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExprId(pub u32);

/// An index into [`Defs::paths`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PathId(pub u32);

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeKind {
    /// `suite NAME … endsuite`, top level only.
    Suite,
    /// `family NAME … endfamily`, in a suite or a family.
    Family,
    /// `task NAME`, a leaf.
    Task,
}

impl NodeKind {
    /// The keyword opening a node of this kind.
    pub fn keyword(self) -> &'static str {
        match self {
            NodeKind::Suite => "suite",
            NodeKind::Family => "family",
            NodeKind::Task => "task",
        }
    }
}

/// A suite, family or task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Suite, family or task.
    pub kind: NodeKind,
    /// The node's name, in [`Defs::strings`].
    pub name: Sym,
    /// A comment on the node's own line (`task t1 # state:complete`), after the `#`.
    pub note: Option<String>,
    /// Attributes in the order read.
    pub attrs: Vec<Attr>,
    /// Families and tasks inside (always empty for a task).
    pub children: Vec<Arc<Node>>,
}

impl Node {
    /// A node without attributes or children.
    pub fn new(kind: NodeKind, name: Sym) -> Self {
        Node {
            kind,
            name,
            note: None,
            attrs: Vec::new(),
            children: Vec::new(),
        }
    }
}

/// One attribute line of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Attr {
    /// `edit NAME 'value'`: a variable.
    Edit(Variable),
    /// `trigger EXPR` (or a part expression `trigger -a|-o EXPR`).
    Trigger(ExprAttr),
    /// `complete EXPR` (or `complete -a|-o EXPR`).
    Complete(ExprAttr),
    /// `event N [name]` or `event name`, with an optional initial `set`/`clear`.
    Event(Event),
    /// `meter NAME MIN MAX [THRESHOLD]`.
    Meter(Box<Meter>),
    /// `label NAME "text"`.
    Label(Label),
    /// `limit NAME N`.
    Limit(Limit),
    /// `inlimit [-n|-s] [/path:]NAME [TOKENS]`.
    Inlimit(Inlimit),
    /// `late -s +HH:MM -a HH:MM -c +HH:MM` (each part optional).
    Late(Late),
    /// `time [+]HH:MM` or `time [+]HH:MM HH:MM HH:MM`.
    Time(TimeAttr),
    /// `repeat …`.
    Repeat(Box<Repeat>),
    /// `defstatus STATE`.
    Defstatus(State),
    /// `# text` on a line of its own inside a node: the text after the `#`.
    Comment(Sym),
    /// Any other attribute (`cron`, `today`, `autocancel`, …), kept verbatim: the line
    /// without its indentation.
    Other(Sym),
}

impl Attr {
    /// The keyword opening this attribute's line (`#` for a comment, the first word for
    /// a verbatim attribute, looked up in `defs`).
    pub fn keyword<'a>(&'a self, defs: &'a Defs) -> &'a str {
        match self {
            Attr::Edit(_) => "edit",
            Attr::Trigger(_) => "trigger",
            Attr::Complete(_) => "complete",
            Attr::Event(_) => "event",
            Attr::Meter(_) => "meter",
            Attr::Label(_) => "label",
            Attr::Limit(_) => "limit",
            Attr::Inlimit(_) => "inlimit",
            Attr::Late(_) => "late",
            Attr::Time(_) => "time",
            Attr::Repeat(_) => "repeat",
            Attr::Defstatus(_) => "defstatus",
            Attr::Comment(_) => "#",
            Attr::Other(line) => defs
                .str(*line)
                .split_ascii_whitespace()
                .next()
                .unwrap_or(""),
        }
    }
}

/// `edit NAME 'value'`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variable {
    /// The variable's name.
    pub name: Sym,
    /// Its value, without the quotes (may hold `%VAR%` substitutions and quotes).
    pub value: Sym,
    /// Whether it was quoted with `"` rather than `'`.
    pub double_quoted: bool,
}

/// Which part of a node's expression a `trigger`/`complete` line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Part {
    /// The first (or only) line.
    First,
    /// `-a`: and-ed to the lines before.
    And,
    /// `-o`: or-ed to the lines before.
    Or,
}

/// A `trigger` or `complete` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExprAttr {
    /// First line or continuation.
    pub part: Part,
    /// The expression, in [`Defs::exprs`].
    pub expr: ExprId,
}

/// `event N [name] [set|clear]` or `event name [set|clear]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The event's number, when it has one.
    pub number: Option<u32>,
    /// The event's name, when it has one.
    pub name: Option<Sym>,
    /// The initial value, when given (`set` → true, `clear` → false).
    pub initial: Option<bool>,
}

/// `meter NAME MIN MAX [THRESHOLD]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meter {
    /// The meter's name.
    pub name: Sym,
    /// Lowest value.
    pub min: i64,
    /// Highest value.
    pub max: i64,
    /// The colour-change threshold, when given.
    pub threshold: Option<i64>,
}

/// `label NAME "text"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    /// The label's name.
    pub name: Sym,
    /// Its text, without the quotes.
    pub text: Sym,
}

/// `limit NAME N`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limit {
    /// The limit's name.
    pub name: Sym,
    /// How many tokens it holds.
    pub max: i64,
}

/// `inlimit [-n|-s] [/path:]NAME [TOKENS]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inlimit {
    /// `-n` (limit nodes rather than tasks) or `-s` (limit submission), when given.
    pub flag: Option<char>,
    /// The path of the node holding the limit, when given.
    pub path: Option<Sym>,
    /// The limit's name.
    pub name: Sym,
    /// Tokens taken, when given.
    pub tokens: Option<u32>,
}

/// A time of day, or a length of time after something (`+HH:MM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clock {
    /// Whether it is written with `+` (relative).
    pub relative: bool,
    /// Hours, 0–99.
    pub hour: u8,
    /// Minutes, 0–59.
    pub minute: u8,
}

/// `late -s +HH:MM -a HH:MM -c +HH:MM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Late {
    /// `-s`: longest time submitted.
    pub submitted: Option<Clock>,
    /// `-a`: latest time to become active.
    pub active: Option<Clock>,
    /// `-c`: latest (or longest, with `+`) time to complete.
    pub complete: Option<Clock>,
}

/// `time [+]HH:MM` or `time [+]HH:MM HH:MM HH:MM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeAttr {
    /// The (first) time.
    pub start: Clock,
    /// The end and the increment of a time series.
    pub series: Option<(Clock, Clock)>,
}

/// `repeat …`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Repeat {
    /// `repeat date VAR YYYYMMDD YYYYMMDD [step]`.
    Date {
        /// Variable name.
        var: String,
        /// First date.
        start: u32,
        /// Last date.
        end: u32,
        /// Days between dates (1 when not written).
        step: i64,
    },
    /// `repeat integer VAR start end [step]`.
    Integer {
        /// Variable name.
        var: String,
        /// First value.
        start: i64,
        /// Last value.
        end: i64,
        /// Increment (1 when not written).
        step: i64,
    },
    /// `repeat enumerated VAR "a" "b" …`.
    Enumerated {
        /// Variable name.
        var: String,
        /// The values, without quotes.
        items: Vec<String>,
    },
    /// `repeat string VAR "a" "b" …`.
    String {
        /// Variable name.
        var: String,
        /// The values, without quotes.
        items: Vec<String>,
    },
    /// `repeat day N`.
    Day {
        /// Days between runs.
        step: i64,
    },
    /// Another kind of repeat (`datelist`, `datetime`…), after `repeat`, verbatim.
    Other(String),
}

/// A node state, as `defstatus` and expressions name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum State {
    /// `unknown`.
    Unknown,
    /// `queued`.
    Queued,
    /// `submitted`.
    Submitted,
    /// `active`.
    Active,
    /// `complete`.
    Complete,
    /// `aborted`.
    Aborted,
    /// `suspended` (defstatus only).
    Suspended,
}

impl State {
    /// Every state, in the order above.
    pub const ALL: [State; 7] = [
        State::Unknown,
        State::Queued,
        State::Submitted,
        State::Active,
        State::Complete,
        State::Aborted,
        State::Suspended,
    ];

    /// The state's name in a definition.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Unknown => "unknown",
            State::Queued => "queued",
            State::Submitted => "submitted",
            State::Active => "active",
            State::Complete => "complete",
            State::Aborted => "aborted",
            State::Suspended => "suspended",
        }
    }

    /// The state named `word`, if any.
    pub fn from_word(word: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.as_str() == word)
    }
}

/// How many nodes and attributes of each kind a definition has, as ecFlow counts them
/// (part expressions are not counted apart from their first line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Counts {
    /// Suites.
    pub suites: u64,
    /// Families.
    pub families: u64,
    /// Tasks.
    pub tasks: u64,
    /// `edit` variables.
    pub variables: u64,
    /// Nodes with a trigger.
    pub triggers: u64,
    /// Nodes with a complete expression.
    pub completes: u64,
    /// `late`.
    pub lates: u64,
    /// `event`.
    pub events: u64,
    /// `meter`.
    pub meters: u64,
    /// `label`.
    pub labels: u64,
    /// `limit`.
    pub limits: u64,
    /// `inlimit`.
    pub inlimits: u64,
    /// `time`.
    pub times: u64,
    /// `repeat`.
    pub repeats: u64,
    /// `defstatus`.
    pub defstatus: u64,
    /// Attributes kept verbatim.
    pub others: u64,
}

impl Counts {
    /// Suites, families and tasks.
    pub fn nodes(&self) -> u64 {
        self.suites + self.families + self.tasks
    }

    fn add_node(&mut self, node: &Node) {
        match node.kind {
            NodeKind::Suite => self.suites += 1,
            NodeKind::Family => self.families += 1,
            NodeKind::Task => self.tasks += 1,
        }
        for attr in &node.attrs {
            match attr {
                Attr::Edit(_) => self.variables += 1,
                Attr::Trigger(e) => self.triggers += u64::from(e.part == Part::First),
                Attr::Complete(e) => self.completes += u64::from(e.part == Part::First),
                Attr::Event(_) => self.events += 1,
                Attr::Meter(_) => self.meters += 1,
                Attr::Label(_) => self.labels += 1,
                Attr::Limit(_) => self.limits += 1,
                Attr::Inlimit(_) => self.inlimits += 1,
                Attr::Late(_) => self.lates += 1,
                Attr::Time(_) => self.times += 1,
                Attr::Repeat(_) => self.repeats += 1,
                Attr::Defstatus(_) => self.defstatus += 1,
                Attr::Comment(_) => {}
                Attr::Other(_) => self.others += 1,
            }
        }
        for child in &node.children {
            self.add_node(child);
        }
    }
}

impl Defs {
    /// An empty definition.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts nodes and attributes.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for suite in &self.suites {
            counts.add_node(suite);
        }
        counts
    }

    /// The expression `id` names (`None` for an id from another definition).
    pub fn expr(&self, id: ExprId) -> Option<&Expr> {
        self.exprs.get(id.0 as usize)
    }

    /// The path `id` names (`None` for an id from another definition).
    pub fn path(&self, id: PathId) -> Option<&str> {
        self.paths
            .get(id.0 as usize)
            .and_then(|&sym| self.strings.get(sym))
    }

    /// The string `sym` names (`?` for a symbol of another definition).
    pub fn str(&self, sym: Sym) -> &str {
        self.strings.get(sym).unwrap_or("?")
    }

    /// Calls `f` on every node, parents before children, with its depth (suites at 0).
    pub fn walk(&self, mut f: impl FnMut(&Node, usize)) {
        fn go(node: &Node, depth: usize, f: &mut impl FnMut(&Node, usize)) {
            f(node, depth);
            for child in &node.children {
                go(child, depth + 1, f);
            }
        }
        for suite in &self.suites {
            go(suite, 0, &mut f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_and_nodes_stay_small() {
        // An attribute is a list slot of 24 bytes with its names interned; a node is 80
        // bytes before its lists.
        assert!(
            std::mem::size_of::<Attr>() <= 24,
            "{}",
            std::mem::size_of::<Attr>()
        );
        assert!(
            std::mem::size_of::<Node>() <= 80,
            "{}",
            std::mem::size_of::<Node>()
        );
        assert_eq!(std::mem::size_of::<Option<Sym>>(), 4);
    }
}
