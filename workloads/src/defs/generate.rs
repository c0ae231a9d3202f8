//! A synthetic definition with the shape of a real operational suite.
//!
//! [`FULL_SCALE`] holds the node and attribute counts of ECMWF's 58 MB "3199.def", the
//! definition of ecFlow's performance notebook. [`generate`] builds a tree with those
//! counts multiplied by a scale (rounded; at least one suite and one task, and one limit
//! when there are inlimits), deterministically from a seed. Families nest up to four deep;
//! every trigger and complete expression names nodes that exist (absolute paths), every
//! inlimit a limit that exists, and no suite has a trigger or complete expression (ecFlow
//! refuses them there): ecFlow loads the result and its `check()` finds nothing wrong.

use std::sync::Arc;

use super::expr::{CmpOp, Expr, Interner};
use super::model::{
    Attr, Clock, Counts, Defs, Event, ExprAttr, Inlimit, Label, Late, Limit, Meter, Node, NodeKind,
    Part, Repeat, State, Sym, TimeAttr, Variable,
};

/// The counts of 3199.def: 18 suites, 105,375 families, 215,437 tasks (320,830 nodes).
pub const FULL_SCALE: Counts = Counts {
    suites: 18,
    families: 105_375,
    tasks: 215_437,
    variables: 885_533,
    triggers: 115_613,
    completes: 6_870,
    lates: 41_023,
    events: 35_477,
    meters: 14_994,
    labels: 46_714,
    limits: 635,
    inlimits: 52_376,
    times: 245,
    repeats: 90,
    defstatus: 1_975,
    others: 0,
};

/// The largest scale accepted (about 3.2 million nodes).
pub const MAX_SCALE: f64 = 10.0;

/// The counts [`generate`] produces at `scale`.
pub fn shape(scale: f64) -> Counts {
    let n = |c: u64| (c as f64 * scale).round() as u64;
    let f = FULL_SCALE;
    let mut shape = Counts {
        suites: n(f.suites).max(1),
        families: n(f.families),
        tasks: n(f.tasks).max(1),
        variables: n(f.variables),
        triggers: n(f.triggers),
        completes: n(f.completes),
        lates: n(f.lates),
        events: n(f.events),
        meters: n(f.meters),
        labels: n(f.labels),
        limits: n(f.limits),
        inlimits: n(f.inlimits),
        times: n(f.times),
        repeats: n(f.repeats),
        defstatus: n(f.defstatus),
        others: 0,
    };
    if shape.inlimits > 0 {
        shape.limits = shape.limits.max(1);
    }
    // Attributes held at most once per node cannot outnumber the nodes (expressions
    // the families and tasks).
    let nodes = shape.nodes();
    for c in [&mut shape.triggers, &mut shape.completes] {
        *c = (*c).min(nodes - shape.suites);
    }
    for c in [
        &mut shape.lates,
        &mut shape.inlimits,
        &mut shape.times,
        &mut shape.repeats,
        &mut shape.defstatus,
    ] {
        *c = (*c).min(nodes);
    }
    shape
}

/// SplitMix64: small, fast, and the same sequence on every machine.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

struct Slot {
    node: Node,
    parent: u32,
    depth: u8,
    suite: u32,
    /// Position among the parent's children.
    index: u32,
    children: Vec<u32>,
    families: u32,
    tasks: u32,
}

const NO_PARENT: u32 = u32::MAX;
const MAX_FAMILY_DEPTH: u8 = 4;

const VARIABLE_NAMES: [&str; 12] = [
    "ECF_FILES",
    "ECF_INCLUDE",
    "ECF_JOB_CMD",
    "YMD",
    "MEMBER",
    "PARAM",
    "LEVEL",
    "STEP",
    "EXPVER",
    "CLASS",
    "STREAM",
    "QUEUE",
];

/// Builds a definition of [`shape`]`(scale)` from `seed`.
///
/// ```
/// use benchtop_workloads::defs::generate::{generate, shape};
///
/// let defs = generate(0.001, 7);
/// assert_eq!(defs.counts(), shape(0.001));
/// assert_eq!(defs, generate(0.001, 7));
/// ```
pub fn generate(scale: f64, seed: u64) -> Defs {
    let shape = shape(scale);
    let mut rng = Rng::new(seed);
    let mut interner = Interner::new();
    let slots = tree(&shape, &mut rng, &mut interner);
    let paths = full_paths(&slots, &interner);
    let mut defs = Defs::new();
    defs.version = Some(super::DEFAULT_VERSION.to_owned());
    let n = slots.len() as u64;
    let mut draft = Draft {
        shape,
        rng,
        slots,
        interner,
        order: (0..n as u32).collect(),
        paths,
    };

    // Attributes in the order ecFlow writes them: defstatus, late, complete, trigger,
    // repeat, edit, limit, inlimit, label, meter, event, time (each step draws from the
    // one random source in turn, so their order is the definition's).
    draft.defstatus_and_late();
    draft.complete_and_trigger();
    draft.repeats();
    draft.variables();
    draft.limits();
    draft.labels_and_meters();
    draft.events();
    draft.times();

    defs.suites = build(&mut draft.slots);
    draft.interner.finish(&mut defs);
    defs
}

/// The suites, then the families (nested up to [`MAX_FAMILY_DEPTH`]), then the tasks, as
/// slots without attributes.
fn tree(shape: &Counts, rng: &mut Rng, interner: &mut Interner) -> Vec<Slot> {
    let mut slots: Vec<Slot> = Vec::with_capacity(shape.nodes() as usize);
    for s in 0..shape.suites {
        slots.push(Slot {
            node: Node::new(NodeKind::Suite, sym(interner, &format!("s{s}"))),
            parent: NO_PARENT,
            depth: 0,
            suite: s as u32,
            index: s as u32,
            children: Vec::new(),
            families: 0,
            tasks: 0,
        });
    }
    // The families of each suite, for nesting and for placing tasks.
    let mut families: Vec<u32> = Vec::with_capacity(shape.families as usize);
    let mut last_at_depth = vec![[NO_PARENT; MAX_FAMILY_DEPTH as usize]; shape.suites as usize];
    for f in 0..shape.families {
        let suite = (f % shape.suites) as u32;
        let level = rng.below(u64::from(MAX_FAMILY_DEPTH)) as usize;
        // A family goes in the latest family one level up, or in the suite.
        let parent = (0..level)
            .rev()
            .map(|l| last_at_depth[suite as usize][l])
            .find(|&p| p != NO_PARENT)
            .unwrap_or(suite);
        let id = add(&mut slots, interner, parent, NodeKind::Family);
        let depth = slots[id as usize].depth as usize;
        last_at_depth[suite as usize][depth - 1] = id;
        families.push(id);
    }
    for _ in 0..shape.tasks {
        let parent = if families.is_empty() {
            rng.below(shape.suites) as u32
        } else {
            families[rng.below(families.len() as u64) as usize]
        };
        add(&mut slots, interner, parent, NodeKind::Task);
    }
    slots
}

/// A definition being generated: its nodes, strings and random source, and the node order
/// its attributes are picked from.
struct Draft {
    shape: Counts,
    rng: Rng,
    slots: Vec<Slot>,
    interner: Interner,
    order: Vec<u32>,
    paths: Vec<String>,
}

impl Draft {
    /// Defstatus on some nodes, then late on some.
    fn defstatus_and_late(&mut self) {
        for i in pick(&mut self.rng, &mut self.order, self.shape.defstatus) {
            // Not `queued`: that is every node's default, which ecFlow does not write.
            let state = if self.rng.chance(70) {
                State::Complete
            } else {
                State::Suspended
            };
            self.slots[i].node.attrs.push(Attr::Defstatus(state));
        }
        for i in pick(&mut self.rng, &mut self.order, self.shape.lates) {
            let late = match self.rng.below(3) {
                0 => Late {
                    submitted: Some(clock(true, 0, 15)),
                    active: Some(clock(false, 20, 0)),
                    complete: Some(clock(true, 2, 0)),
                },
                1 => Late {
                    submitted: None,
                    active: None,
                    complete: Some(clock(true, self.rng.below(6) as u8, 30)),
                },
                _ => Late {
                    submitted: Some(clock(true, 0, 5 + self.rng.below(50) as u8)),
                    active: None,
                    complete: None,
                },
            };
            self.slots[i].node.attrs.push(Attr::Late(late));
        }
    }

    /// Complete, then trigger expressions, on nodes below the suites (ecFlow allows
    /// none on a suite).
    fn complete_and_trigger(&mut self) {
        let n = self.slots.len() as u32;
        let mut below_suites: Vec<u32> = (self.shape.suites as u32..n).collect();
        for (kind, count) in [
            ("complete", self.shape.completes),
            ("trigger", self.shape.triggers),
        ] {
            for i in pick(&mut self.rng, &mut below_suites, count) {
                let expr = expression(
                    &mut self.rng,
                    &self.slots,
                    &self.paths,
                    i,
                    &mut self.interner,
                );
                let id = self.interner.expr(expr);
                let e = ExprAttr {
                    part: Part::First,
                    expr: id,
                };
                self.slots[i].node.attrs.push(if kind == "trigger" {
                    Attr::Trigger(e)
                } else {
                    Attr::Complete(e)
                });
            }
        }
    }

    /// Repeats on some nodes.
    fn repeats(&mut self) {
        for i in pick(&mut self.rng, &mut self.order, self.shape.repeats) {
            let repeat = match self.rng.below(5) {
                0 => Repeat::Date {
                    var: "YMD".into(),
                    start: 20200101,
                    end: 20201231,
                    step: 1,
                },
                1 => Repeat::Integer {
                    var: "MEMBER".into(),
                    start: 0,
                    end: 50,
                    step: 1 + self.rng.below(3) as i64,
                },
                2 => Repeat::Enumerated {
                    var: "PARAM".into(),
                    items: vec!["2t".into(), "msl".into(), "10u".into()],
                },
                3 => Repeat::String {
                    var: "STREAM".into(),
                    items: vec!["oper".into(), "enfo".into()],
                },
                _ => Repeat::Day { step: 1 },
            };
            self.slots[i]
                .node
                .attrs
                .push(Attr::Repeat(Box::new(repeat)));
        }
    }

    /// Variables (`edit`), numbered per node after the usual names.
    fn variables(&mut self) {
        let n = self.slots.len() as u64;
        let mut per_node = vec![0u32; n as usize];
        for _ in 0..self.shape.variables {
            let i = self.rng.below(n) as usize;
            let k = per_node[i] as usize;
            per_node[i] += 1;
            let base = VARIABLE_NAMES[k % VARIABLE_NAMES.len()];
            let name = match k / VARIABLE_NAMES.len() {
                0 => base.to_owned(),
                round => format!("{base}_{round}"),
            };
            let value = match self.rng.below(4) {
                0 => format!("/hpc/perm/ecf/{}", self.paths[i]),
                1 => format!("%ECF_HOME%/include/{k}"),
                2 => (self.rng.below(1000)).to_string(),
                _ => "%ECF_JOB% 1> %ECF_JOBOUT% 2>&1".to_owned(),
            };
            self.slots[i].node.attrs.push(Attr::Edit(Variable {
                name: sym(&mut self.interner, &name),
                value: sym(&mut self.interner, &value),
                double_quoted: false,
            }));
        }
    }

    /// Limits on the suites, in turn, then inlimits on some nodes.
    fn limits(&mut self) {
        // Limits on the suites, in turn; inlimits name one of their own suite's limits, or
        // another suite's by path when theirs has none.
        let suites = self.shape.suites;
        for l in 0..self.shape.limits {
            let suite = (l % suites) as usize;
            self.slots[suite].node.attrs.push(Attr::Limit(Limit {
                name: sym(&mut self.interner, &format!("lim{}", l / suites)),
                max: 1 + self.rng.below(20) as i64,
            }));
        }
        let limits_in =
            |suite: u64| self.shape.limits / suites + u64::from(suite < self.shape.limits % suites);
        for i in pick(&mut self.rng, &mut self.order, self.shape.inlimits) {
            let own = u64::from(self.slots[i].suite);
            let (suite, by_path) = if limits_in(own) > 0 {
                (own, self.rng.chance(30))
            } else {
                (self.rng.below(self.shape.limits.min(suites)), true)
            };
            let name = format!("lim{}", self.rng.below(limits_in(suite)));
            let path = by_path.then(|| sym(&mut self.interner, &format!("/s{suite}")));
            self.slots[i].node.attrs.push(Attr::Inlimit(Inlimit {
                flag: None,
                path,
                name: sym(&mut self.interner, &name),
                tokens: None,
            }));
        }
    }

    /// Labels, then meters, numbered per node.
    fn labels_and_meters(&mut self) {
        let n = self.slots.len() as u64;
        let mut per_node = vec![0u32; n as usize];
        for _ in 0..self.shape.labels {
            let i = self.rng.below(n) as usize;
            let k = per_node[i];
            per_node[i] += 1;
            let text = match self.rng.below(3) {
                0 => String::new(),
                1 => format!("step {}", self.rng.below(240)),
                _ => "waiting for data".to_owned(),
            };
            self.slots[i].node.attrs.push(Attr::Label(Label {
                name: sym(&mut self.interner, &suffixed("info", k)),
                text: sym(&mut self.interner, &text),
            }));
        }
        per_node.iter_mut().for_each(|c| *c = 0);
        for _ in 0..self.shape.meters {
            let i = self.rng.below(n) as usize;
            let k = per_node[i];
            per_node[i] += 1;
            self.slots[i].node.attrs.push(Attr::Meter(Box::new(Meter {
                name: sym(&mut self.interner, &suffixed("step", k)),
                min: 0,
                max: 240,
                // ecFlow writes the threshold even when it is not set (it is the maximum).
                threshold: Some(240),
            })));
        }
    }

    /// Events, numbered per node.
    fn events(&mut self) {
        let n = self.slots.len() as u64;
        let mut per_node = vec![0u32; n as usize];
        for _ in 0..self.shape.events {
            let i = self.rng.below(n) as usize;
            let k = per_node[i];
            per_node[i] += 1;
            let event = match self.rng.below(3) {
                0 => Event {
                    number: Some(k + 1),
                    name: None,
                    initial: None,
                },
                1 => Event {
                    number: None,
                    name: Some(sym(&mut self.interner, &suffixed("ev", k))),
                    initial: None,
                },
                _ => Event {
                    number: Some(k + 1),
                    name: Some(sym(&mut self.interner, &suffixed("done", k))),
                    initial: None,
                },
            };
            self.slots[i].node.attrs.push(Attr::Event(event));
        }
    }

    /// Times on some nodes.
    fn times(&mut self) {
        for i in pick(&mut self.rng, &mut self.order, self.shape.times) {
            let time = match self.rng.below(3) {
                0 => TimeAttr {
                    start: clock(false, self.rng.below(24) as u8, 0),
                    series: None,
                },
                1 => TimeAttr {
                    start: clock(true, 0, 30),
                    series: None,
                },
                _ => TimeAttr {
                    start: clock(false, 0, 0),
                    series: Some((clock(false, 23, 0), clock(false, 1, 0))),
                },
            };
            self.slots[i].node.attrs.push(Attr::Time(time));
        }
    }
}

/// The symbol of `s`: a generated definition's strings are far below the table's 4 GiB
/// (at [`MAX_SCALE`], about 100 MB).
fn sym(interner: &mut Interner, s: &str) -> Sym {
    interner
        .str(s)
        .expect("a generated definition's strings fit in the string table")
}

fn suffixed(base: &str, k: u32) -> String {
    if k == 0 {
        base.to_owned()
    } else {
        format!("{base}{k}")
    }
}

fn clock(relative: bool, hour: u8, minute: u8) -> Clock {
    Clock {
        relative,
        hour,
        minute,
    }
}

fn add(slots: &mut Vec<Slot>, interner: &mut Interner, parent: u32, kind: NodeKind) -> u32 {
    let id = slots.len() as u32;
    let p = &mut slots[parent as usize];
    let name = match kind {
        NodeKind::Family => {
            p.families += 1;
            format!("f{}", p.families - 1)
        }
        _ => {
            p.tasks += 1;
            format!("t{}", p.tasks - 1)
        }
    };
    let index = p.children.len() as u32;
    p.children.push(id);
    let (depth, suite) = (p.depth + 1, p.suite);
    slots.push(Slot {
        node: Node::new(kind, sym(interner, &name)),
        parent,
        depth,
        suite,
        index,
        children: Vec::new(),
        families: 0,
        tasks: 0,
    });
    id
}

fn full_paths(slots: &[Slot], interner: &Interner) -> Vec<String> {
    let mut paths: Vec<String> = Vec::with_capacity(slots.len());
    for slot in slots {
        let name = interner.strings.get(slot.node.name).unwrap_or("?");
        let path = if slot.parent == NO_PARENT {
            format!("/{name}")
        } else {
            // Parents come before their children.
            format!("{}/{name}", paths[slot.parent as usize])
        };
        paths.push(path);
    }
    paths
}

/// `count` distinct node indices (a partial Fisher–Yates shuffle of `order`).
fn pick(rng: &mut Rng, order: &mut [u32], count: u64) -> Vec<usize> {
    let n = order.len();
    let count = (count as usize).min(n);
    for i in 0..count {
        let j = i + rng.below((n - i) as u64) as usize;
        order.swap(i, j);
    }
    let mut picked: Vec<usize> = order[..count].iter().map(|&i| i as usize).collect();
    // In tree order, so the text reads naturally and the result does not depend on the
    // shuffle's leftovers.
    picked.sort_unstable();
    picked
}

/// A node that `i`'s expression can name: its previous sibling, its parent's previous
/// sibling (shared by the whole family, so the expression repeats), or any other node.
fn reference(rng: &mut Rng, slots: &[Slot], i: usize) -> usize {
    let slot = &slots[i];
    let sibling_before = |s: &Slot| {
        (s.parent != NO_PARENT && s.index > 0)
            .then(|| slots[s.parent as usize].children[s.index as usize - 1] as usize)
    };
    let choice = rng.below(10);
    let near = if choice < 5 {
        sibling_before(slot)
    } else if choice < 8 && slot.parent != NO_PARENT {
        sibling_before(&slots[slot.parent as usize])
    } else {
        None
    };
    if let Some(j) = near {
        return j;
    }
    let n = slots.len() as u64;
    loop {
        let j = rng.below(n) as usize;
        if j != i || n == 1 {
            return j;
        }
    }
}

fn expression(
    rng: &mut Rng,
    slots: &[Slot],
    paths: &[String],
    i: usize,
    interner: &mut Interner,
) -> Expr {
    let mut node = |rng: &mut Rng| {
        let j = reference(rng, slots, i);
        Box::new(Expr::Node(interner.path(&paths[j]).expect(
            "a generated definition's strings fit in the string table",
        )))
    };
    let state = |s| Box::new(Expr::State(s));
    match rng.below(10) {
        0..=5 => Expr::Cmp(CmpOp::Eq, node(rng), state(State::Complete)),
        6 | 7 => Expr::And(vec![
            Expr::Cmp(CmpOp::Eq, node(rng), state(State::Complete)),
            Expr::Cmp(CmpOp::Eq, node(rng), state(State::Complete)),
        ]),
        8 => Expr::Cmp(CmpOp::Ne, node(rng), state(State::Aborted)),
        _ => Expr::And(vec![
            Expr::Paren(Box::new(Expr::Or(vec![
                Expr::Cmp(CmpOp::Eq, node(rng), state(State::Complete)),
                Expr::Cmp(CmpOp::Eq, node(rng), state(State::Aborted)),
            ]))),
            Expr::Not(Box::new(Expr::Cmp(
                CmpOp::Eq,
                node(rng),
                state(State::Active),
            ))),
        ]),
    }
}

/// Moves the slots' nodes into a tree, children in the order they were added.
fn build(slots: &mut [Slot]) -> Vec<Arc<Node>> {
    fn take(slots: &mut [Slot], i: usize) -> Arc<Node> {
        let placeholder = Node::new(NodeKind::Task, slots[i].node.name);
        let mut node = std::mem::replace(&mut slots[i].node, placeholder);
        let children = std::mem::take(&mut slots[i].children);
        node.children = children
            .into_iter()
            .map(|c| take(slots, c as usize))
            .collect();
        Arc::new(node)
    }
    let suites: Vec<usize> = (0..slots.len())
        .filter(|&i| slots[i].parent == NO_PARENT)
        .collect();
    suites.into_iter().map(|i| take(slots, i)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_scale_has_the_counts_of_3199_def() {
        let defs = generate(1.0, 1);
        let counts = defs.counts();
        assert_eq!(counts, FULL_SCALE);
        assert_eq!(counts.nodes(), 320_830);
    }

    #[test]
    fn small_scales_round_and_keep_a_suite_a_task_and_a_limit() {
        let s = shape(0.0001);
        assert_eq!((s.suites, s.families, s.tasks), (1, 11, 22));
        assert_eq!((s.limits, s.inlimits), (1, 5));
        let defs = generate(0.0001, 3);
        assert_eq!(defs.counts(), s);
        let s = shape(0.01);
        assert_eq!(
            (s.suites, s.families, s.tasks, s.variables),
            (1, 1054, 2154, 8855)
        );
    }

    #[test]
    fn the_seed_decides_everything() {
        assert_eq!(generate(0.002, 9), generate(0.002, 9));
        assert_ne!(generate(0.002, 9), generate(0.002, 10));
    }

    #[test]
    fn every_path_in_an_expression_names_a_node() {
        let defs = generate(0.01, 5);
        let mut nodes = std::collections::HashSet::new();
        let mut stack: Vec<(String, &Node)> = defs
            .suites
            .iter()
            .map(|s| (format!("/{}", defs.str(s.name)), &**s))
            .collect();
        while let Some((path, node)) = stack.pop() {
            for child in &node.children {
                stack.push((format!("{path}/{}", defs.str(child.name)), &**child));
            }
            nodes.insert(path);
        }
        assert!(!defs.paths.is_empty());
        for i in 0..defs.paths.len() as u32 {
            let path = defs.path(super::super::model::PathId(i)).unwrap();
            assert!(nodes.contains(path), "{path}");
        }
        // Whole expressions repeat and are stored once.
        assert!(defs.exprs.len() < (defs.counts().triggers + defs.counts().completes) as usize);
    }
}
