//! The tree the flame pane lays out: the profile with its hidden frames merged into their
//! callers, as the Firefox Profiler's "merge function" does.
//!
//! A hidden frame's children become children of its nearest shown caller (merged with
//! the children of the same name it has), and its self weight becomes the caller's. The
//! total is unchanged, and a merged frame weighs the sum of what was merged into it.

use std::collections::hash_map::Entry;

use benchtop_sessions::{FrameId, NodeId, StackTree};
use rustc_hash::FxHashMap;

/// The frames hidden by default: Rust's, the C library's and tokio's plumbing between
/// `main` (or a thread's start) and the code that does the work. `*` matches any run of
/// characters; a pattern matches a whole frame name.
pub const DEFAULT_HIDDEN: &[&str] = &[
    "_start",
    "__libc_start_main*",
    "__libc_start_call_main",
    "start_thread",
    "clone",
    "clone3",
    "__clone*",
    "std::rt::*",
    "std::panicking::*",
    "std::panic::*",
    "std::sys::backtrace::*",
    "std::sys_common::backtrace::*",
    "std::sys::*::thread::Thread::new::thread_start",
    "std::thread::Builder::spawn_unchecked_*",
    "std::thread::local::LocalKey<*>::*",
    "core::ops::function::*",
    "<* as core::ops::function::FnOnce<*>>::call_once*",
    "<alloc::boxed::Box<*> as core::ops::function::Fn*",
    "<core::pin::Pin<*> as core::future::future::Future>::poll",
    "tokio::runtime::context::*",
    "tokio::runtime::runtime::Runtime::block_on*",
    "tokio::runtime::scheduler::*::block_on*",
    "tokio::runtime::scheduler::*::enter*",
    "tokio::runtime::scheduler::*::run*",
    "tokio::runtime::scheduler::*::Context::run*",
    "tokio::runtime::task::*",
    "tokio::runtime::coop::*",
    "tokio::runtime::blocking::*",
    "tokio::loom::*",
];

/// The most patterns a pane takes, and the longest one: matching stays cheap however
/// many frames a profile has (`benches/flame.rs`).
pub const MAX_PATTERNS: usize = 256;
/// See [`MAX_PATTERNS`].
pub const MAX_PATTERN_LEN: usize = 512;

/// Patterns of frame names to hide, grouped by their first byte so that a name is only
/// tried against the patterns that can match it.
#[derive(Debug, Clone)]
pub struct HidePatterns {
    patterns: Vec<Box<[u8]>>,
    /// Per first byte of a name, the patterns that start with it; `any`: those that start
    /// with `*`.
    by_first: Vec<Vec<u16>>,
    any: Vec<u16>,
}

impl Default for HidePatterns {
    fn default() -> Self {
        HidePatterns::new(DEFAULT_HIDDEN.iter().copied())
    }
}

impl HidePatterns {
    /// The patterns given (empty ones ignored), at most [`MAX_PATTERNS`] of at most
    /// [`MAX_PATTERN_LEN`] bytes each (longer ones are left out).
    pub fn new<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Self {
        let patterns: Vec<Box<[u8]>> = patterns
            .into_iter()
            .filter(|p| !p.is_empty() && p.len() <= MAX_PATTERN_LEN)
            .take(MAX_PATTERNS)
            .map(|p| Box::from(p.as_bytes()))
            .collect();
        let mut by_first = vec![Vec::new(); 256];
        let mut any = Vec::new();
        for (i, p) in patterns.iter().enumerate() {
            match p[0] {
                b'*' => any.push(i as u16),
                b => by_first[usize::from(b)].push(i as u16),
            }
        }
        HidePatterns {
            patterns,
            by_first,
            any,
        }
    }

    /// The patterns, as given.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.patterns
            .iter()
            .map(|p| std::str::from_utf8(p).unwrap_or(""))
    }

    /// Whether `name` matches a pattern.
    pub fn matches(&self, name: &str) -> bool {
        let name = name.as_bytes();
        let Some(&first) = name.first() else {
            return false;
        };
        self.by_first[usize::from(first)]
            .iter()
            .chain(&self.any)
            .any(|&i| {
                let pattern = &self.patterns[usize::from(i)];
                // Most patterns are a literal prefix and a star: compared at once.
                let literal = pattern
                    .iter()
                    .position(|&b| b == b'*')
                    .unwrap_or(pattern.len());
                name.starts_with(&pattern[..literal]) && glob(pattern, name)
            })
    }

    /// Whether each frame of `tree` is hidden, by [`FrameId`], into `out`; empty when
    /// `on` is false.
    pub fn hidden_frames(&self, tree: &StackTree, on: bool, out: &mut Vec<bool>) {
        out.clear();
        self.more_hidden_frames(tree, on, out);
    }

    /// As [`HidePatterns::hidden_frames`] for the frames of `tree` past those `out`
    /// holds: the frames a growing profile interned since.
    pub fn more_hidden_frames(&self, tree: &StackTree, on: bool, out: &mut Vec<bool>) {
        if !on || self.patterns.is_empty() {
            return;
        }
        out.extend(
            (out.len()..tree.frame_count()).map(|i| self.matches(tree.name(FrameId(i as u32)))),
        );
    }
}

/// Whether `name` matches `pattern` as a whole, `*` matching any run of bytes (the
/// classic two-pointer match: linear unless stars backtrack).
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// One node of a [`ViewTree`].
#[derive(Debug, Clone, Copy)]
pub struct ViewNode {
    /// Its frame, an id of the profile's [`StackTree`].
    pub frame: FrameId,
    /// Its caller; the root is its own.
    pub parent: NodeId,
    /// Weight of the stacks ending here, hidden callees' included.
    pub self_weight: u64,
    /// Weight of the stacks through here.
    pub total_weight: u64,
}

/// The profile as laid out: nodes in an order where every parent comes before its
/// children, their children in one flat array. Building one reuses the buffers of the
/// last, so a new profile once a second allocates nothing once warm.
#[derive(Debug)]
pub struct ViewTree {
    nodes: Vec<ViewNode>,
    /// The children of node `i` are `children[starts[i]..starts[i + 1]]`.
    starts: Vec<u32>,
    children: Vec<NodeId>,
    /// Nodes of the profile merged into their callers.
    merged: usize,
    /// Per node of the profile, its node here (hidden ones: their nearest shown
    /// caller's), for the first `map.len()` nodes of the profile.
    map: Vec<NodeId>,
    /// Nodes whose children the flat array holds (the others were added since).
    linked: usize,
    // Reused while building.
    slots: Vec<u32>,
    index: FxHashMap<(u32, u32), u32>,
    /// Per node of the profile, whether it adopts hidden callees' callees; per node of
    /// this tree, the first node of the profile merged into it, and whether its children
    /// are in `index`.
    adopts: Vec<bool>,
    first_source: Vec<u32>,
    indexed: Vec<bool>,
}

impl Default for ViewTree {
    /// The tree of an empty profile: a root alone.
    fn default() -> Self {
        let mut tree = ViewTree {
            nodes: Vec::new(),
            starts: Vec::new(),
            children: Vec::new(),
            merged: 0,
            map: Vec::new(),
            linked: 0,
            slots: Vec::new(),
            index: FxHashMap::default(),
            adopts: Vec::new(),
            first_source: Vec::new(),
            indexed: Vec::new(),
        };
        tree.build(&StackTree::new(), &[]);
        tree
    }
}

/// [`ViewTree::link_new`] is used while the nodes added are at most one in this many.
const NEW_AT_MOST: usize = 4;

impl ViewTree {
    /// Rebuilds the tree from `tree` with the frames `hidden` (by [`FrameId`]; empty:
    /// none) merged into their callers.
    pub fn build(&mut self, tree: &StackTree, hidden: &[bool]) {
        let root = tree.root();
        // Every node anew: children linked from scratch.
        self.linked = 0;
        self.nodes.clear();
        self.merged = 0;
        self.nodes.push(ViewNode {
            frame: root.frame,
            parent: NodeId::ROOT,
            self_weight: root.self_weight,
            total_weight: root.total_weight,
        });
        let hiding = hidden.contains(&true);
        let is_hidden = |frame: FrameId| hiding && hidden.get(frame.0 as usize) == Some(&true);
        self.map.clear();
        self.map.resize(tree.node_count(), NodeId::ROOT);
        self.index.clear();
        self.first_source.clear();
        self.first_source.push(0);
        self.indexed.clear();
        // Which nodes of the profile adopt the callees of hidden callees: only under those,
        // and under nodes that two sources merged into, can children of one name meet, so
        // only their children are looked up (hashing every node would cost more than the
        // rest of the build).
        self.adopts.clear();
        if hiding {
            let reps = &mut self.map;
            self.adopts.resize(tree.node_count(), false);
            for i in 1..tree.node_count() {
                let node = tree.node(NodeId(i as u32));
                let p = node.parent.0 as usize;
                let rep = if p < i { reps[p] } else { NodeId::ROOT };
                if is_hidden(node.frame) {
                    reps[i] = rep;
                    self.adopts[rep.0 as usize] = true;
                } else {
                    reps[i] = NodeId(i as u32);
                }
            }
        }
        self.indexed
            .push(self.adopts.first().copied().unwrap_or(false));
        // A StackTree creates every node under an existing one, so a parent's id is below
        // its children's: one pass in id order sees each caller first.
        for i in 1..tree.node_count() {
            let node = tree.node(NodeId(i as u32));
            let p = node.parent.0 as usize;
            let parent = if p < i { self.map[p] } else { NodeId::ROOT };
            if is_hidden(node.frame) {
                self.map[i] = parent;
                let p = &mut self.nodes[parent.0 as usize];
                p.self_weight = p.self_weight.saturating_add(node.self_weight);
                self.merged += 1;
                continue;
            }
            let id = self.nodes.len() as u32;
            if self.indexed[parent.0 as usize] {
                // Children of a node with hidden callees meet children of the same name
                // from elsewhere: merged into one.
                match self.index.entry((parent.0, node.frame.0)) {
                    Entry::Occupied(e) => {
                        let at = *e.get();
                        let n = &mut self.nodes[at as usize];
                        n.self_weight = n.self_weight.saturating_add(node.self_weight);
                        n.total_weight = n.total_weight.saturating_add(node.total_weight);
                        self.map[i] = NodeId(at);
                        if !self.indexed[at as usize] {
                            // Two sources now: the children made from the first (which
                            // adopted none, or it would be indexed) go into the index.
                            self.indexed[at as usize] = true;
                            let first = NodeId(self.first_source[at as usize]);
                            for &c in &tree.node(first).children {
                                if (c.0 as usize) < i {
                                    let view = self.map[c.0 as usize];
                                    self.index.insert((at, tree.node(c).frame.0), view.0);
                                }
                            }
                        }
                        continue;
                    }
                    Entry::Vacant(e) => {
                        e.insert(id);
                    }
                }
            }
            self.map[i] = NodeId(id);
            self.first_source.push(i as u32);
            self.indexed
                .push(self.adopts.get(i).copied().unwrap_or(false));
            self.nodes.push(ViewNode {
                frame: node.frame,
                parent,
                self_weight: node.self_weight,
                total_weight: node.total_weight,
            });
        }
        self.link_children();
    }

    /// Adds to the tree what the profile gained since the tree was built from it (or last
    /// extended): the nodes `tree` made since, merged as [`ViewTree::build`] merges them,
    /// and `adds`, the weights added to the stacks ending at those nodes of the profile.
    /// `hidden` covers every frame of `tree`. Node ids stay as they were, so a zoom or a
    /// selection held by id stays valid; the work is linear in the nodes and stacks
    /// added, plus one pass over the nodes to link children when there are new ones.
    pub fn extend(&mut self, tree: &StackTree, hidden: &[bool], adds: &[(NodeId, u64)]) {
        let is_hidden = |frame: FrameId| hidden.get(frame.0 as usize) == Some(&true);
        let before = self.nodes.len();
        for i in self.map.len()..tree.node_count() {
            let node = tree.node(NodeId(i as u32));
            let p = node.parent.0 as usize;
            let parent = if p < i { self.map[p] } else { NodeId::ROOT };
            if is_hidden(node.frame) {
                // The caller adopts this frame's callees: they meet its children by name.
                self.map.push(parent);
                self.merged += 1;
                self.index_children(parent);
                continue;
            }
            // Nodes made here all go into the index; a parent not indexed before has no
            // child of this name (the profile's children of one node differ in frame).
            let id = self.nodes.len() as u32;
            match self.index.entry((parent.0, node.frame.0)) {
                Entry::Occupied(e) => {
                    let at = NodeId(*e.get());
                    self.map.push(at);
                    // Two sources now: the first one's children meet this one's.
                    self.index_children(at);
                    continue;
                }
                Entry::Vacant(e) => {
                    e.insert(id);
                }
            }
            self.map.push(NodeId(id));
            self.first_source.push(i as u32);
            self.indexed.push(false);
            self.nodes.push(ViewNode {
                frame: node.frame,
                parent,
                self_weight: 0,
                total_weight: 0,
            });
        }
        for &(leaf, weight) in adds {
            let Some(&at) = self.map.get(leaf.0 as usize) else {
                continue;
            };
            let n = &mut self.nodes[at.0 as usize];
            n.self_weight = n.self_weight.saturating_add(weight);
            // A node's callers here are the distinct shown ones of its profile's path.
            let mut at = at;
            loop {
                let n = &mut self.nodes[at.0 as usize];
                n.total_weight = n.total_weight.saturating_add(weight);
                if at == NodeId::ROOT {
                    break;
                }
                at = n.parent;
            }
        }
        if self.nodes.len() > before {
            self.link_children();
        }
    }

    /// Puts the children of `node` that the flat array holds into the index, once: those
    /// made since are in it already.
    fn index_children(&mut self, node: NodeId) {
        let i = node.0 as usize;
        if std::mem::replace(&mut self.indexed[i], true) || i >= self.linked {
            return;
        }
        let (a, b) = (self.starts[i] as usize, self.starts[i + 1] as usize);
        for &c in &self.children[a..b] {
            self.index
                .insert((node.0, self.nodes[c.0 as usize].frame.0), c.0);
        }
    }

    /// Groups the children by parent into the flat array (a counting sort, in id order
    /// within each); when few nodes were added since the last time, only those are
    /// merged in ([`ViewTree::link_new`]).
    fn link_children(&mut self) {
        let count = self.nodes.len();
        let old = self.linked;
        let linked_so_far =
            old >= 2 && self.children.len() == old - 1 && self.starts.len() == old + 1;
        if linked_so_far && old < count && (count - old) * NEW_AT_MOST <= count {
            self.link_new(old);
            return;
        }
        self.starts.clear();
        self.starts.resize(count + 1, 0);
        for n in &self.nodes[1..] {
            self.starts[n.parent.0 as usize + 1] += 1;
        }
        for i in 1..=count {
            self.starts[i] += self.starts[i - 1];
        }
        self.children.clear();
        self.children.resize(count - 1, NodeId::ROOT);
        // Each parent's next free place.
        self.slots.clear();
        self.slots.extend_from_slice(&self.starts[..count]);
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            let slot = &mut self.slots[n.parent.0 as usize];
            self.children[*slot as usize] = NodeId(i as u32);
            *slot += 1;
        }
        self.linked = count;
    }

    /// Merges the children of nodes `old..` into a flat array that holds those of the
    /// nodes before: a node's final place moves right by the new children of lower
    /// parents, so the runs of parents between two that gain children move as one block
    /// (from the highest down, into the room made at the end), and a parent's new
    /// children go after its old ones (ids keep their order). Sequential copies over the
    /// array instead of a scattered write per node: a live profile of millions of nodes
    /// gains a few thousand a second.
    fn link_new(&mut self, old: usize) {
        let count = self.nodes.len();
        let mut new: Vec<(u32, u32)> = (old..count)
            .map(|i| (self.nodes[i].parent.0, i as u32))
            .collect();
        new.sort_unstable();
        let old_total = old - 1;
        self.children.resize(count - 1, NodeId::ROOT);
        // Nodes new here have no old children: empty ranges at the old end.
        self.starts.resize(count + 1, old_total as u32);
        self.starts[count] = (count - 1) as u32;
        let mut j = new.len();
        let mut hi = count;
        let mut old_hi = old_total;
        while j > 0 {
            let p = new[j - 1].0 as usize;
            let first = new[..j].partition_point(|&(q, _)| (q as usize) < p);
            // Parents p+1..hi: their old children move right by the j new ones below.
            // (`hi`'s own entry is already final: its old start is `old_hi`.)
            let a = if p + 1 == hi {
                old_hi
            } else {
                self.starts[p + 1] as usize
            };
            self.children.copy_within(a..old_hi, a + j);
            for start in &mut self.starts[p + 1..hi] {
                *start += j as u32;
            }
            // p's new children after its old ones, which move right by those below p.
            for (slot, &(_, id)) in self.children[a + first..a + j]
                .iter_mut()
                .zip(&new[first..j])
            {
                *slot = NodeId(id);
            }
            let s = self.starts[p] as usize;
            self.children.copy_within(s..a, s + first);
            self.starts[p] += first as u32;
            (hi, old_hi, j) = (p, s, first);
        }
        self.linked = count;
    }

    /// A node. Panics on an id this tree did not hand out.
    pub fn node(&self, id: NodeId) -> &ViewNode {
        &self.nodes[id.0 as usize]
    }

    /// Whether `id` is a node of this tree.
    pub fn has(&self, id: NodeId) -> bool {
        (id.0 as usize) < self.nodes.len()
    }

    /// The children of `id`, in no particular order.
    pub fn children(&self, id: NodeId) -> &[NodeId] {
        let i = id.0 as usize;
        match (self.starts.get(i), self.starts.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.children[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Nodes, the root included.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Nodes of the profile the tree was built or extended from.
    pub fn mapped(&self) -> usize {
        self.map.len()
    }

    /// The total weight.
    pub fn total_weight(&self) -> u64 {
        self.nodes.first().map_or(0, |n| n.total_weight)
    }

    /// Nodes of the profile merged into their callers.
    pub fn merged(&self) -> usize {
        self.merged
    }

    /// The callee that carries `id` on when `id` is a link of a chain: its widest child,
    /// when that child is at least `min_weight` heavy (wide enough to lay out) and holds
    /// at least half of `id`, and each other part of `id` (its self weight, each other
    /// child) weighs less than `side` and less than a quarter of that child. A chain of
    /// links is plumbing on the way to the work: what it does on the side is too little
    /// to read at a glance, and Enter unfolds it.
    pub fn chain_child(&self, id: NodeId, min_weight: f64, side: f64) -> Option<NodeId> {
        let node = self.node(id);
        let children = self.children(id);
        let &child = children
            .iter()
            .max_by_key(|&&c| (self.node(c).total_weight, std::cmp::Reverse(c.0)))?;
        let weight = self.node(child).total_weight;
        let limit = side.min(weight as f64 / 4.0);
        let carries = weight as f64 >= min_weight && weight.saturating_mul(2) >= node.total_weight;
        let small = |w: u64| (w as f64) < limit;
        let side_small = small(node.self_weight)
            && children
                .iter()
                .filter(|&&c| c != child)
                .all(|&c| small(self.node(c).total_weight));
        (carries && side_small).then_some(child)
    }
}

/// The nodes from a child of the root down to `node`; empty for the root.
pub fn path_to(tree: &ViewTree, node: NodeId) -> Vec<NodeId> {
    let mut path = Vec::new();
    let mut n = node;
    // A tree's parents lead to the root; the bound only guards against a malformed one.
    while n != NodeId::ROOT && tree.has(n) && path.len() < tree.node_count() {
        path.push(n);
        n = tree.node(n).parent;
    }
    path.reverse();
    path
}

/// A tree with the names of its frames.
#[derive(Debug, Clone, Copy)]
pub struct Named<'a> {
    /// The laid-out tree.
    pub view: &'a ViewTree,
    /// The profile it was built from, which names its frames.
    pub names: &'a StackTree,
}

impl Named<'_> {
    fn name(&self, node: NodeId) -> &str {
        self.names.name(self.view.node(node).frame)
    }
}

/// The nodes of `new` named as `path` of `old` is, from the root down, as far as they
/// exist. With `through`, a name that is not a child's is also looked for below the
/// children that match those patterns (frames shown again after being hidden), and a
/// name not found at all is skipped (frames hidden now) rather than ending the path.
pub fn resolve(
    old: Named<'_>,
    path: &[NodeId],
    new: Named<'_>,
    through: Option<&HidePatterns>,
) -> Vec<NodeId> {
    let mut parent = NodeId::ROOT;
    let mut todo = Vec::new();
    for &n in path {
        if !old.view.has(n) {
            break;
        }
        let name = old.name(n);
        let mut found = new
            .view
            .children(parent)
            .iter()
            .copied()
            .find(|&c| new.name(c) == name);
        if let (None, Some(patterns)) = (found, through) {
            // Depth first through the frames the patterns hide, a bounded number of them.
            todo.clear();
            todo.extend(new.view.children(parent).iter().copied());
            let mut budget = 100_000usize;
            while let Some(c) = todo.pop() {
                budget = budget.saturating_sub(1);
                if budget == 0 {
                    break;
                }
                if new.name(c) == name {
                    found = Some(c);
                    break;
                }
                if patterns.matches(new.name(c)) {
                    todo.extend(new.view.children(c).iter().copied());
                }
            }
        }
        match found {
            Some(c) => parent = c,
            None if through.is_some() => {}
            None => break,
        }
    }
    path_to(new.view, parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_merged_in_are_in_the_places_a_link_from_scratch_gives() {
        let mut seed = 7u64;
        let mut below = |n: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) as usize) % n
        };
        let node = |parent: usize| ViewNode {
            frame: FrameId(0),
            parent: NodeId(parent as u32),
            self_weight: 0,
            total_weight: 0,
        };
        let mut tree = ViewTree::default();
        for _ in 0..2_000 {
            let parent = below(tree.nodes.len());
            tree.nodes.push(node(parent));
        }
        tree.link_children();
        for round in 0..40 {
            // A few new nodes under old ones and under each other, as a live interval adds.
            let before = tree.nodes.len();
            for _ in 0..1 + below(round * 20 + 1) {
                let parent = below(tree.nodes.len());
                tree.nodes.push(node(parent));
            }
            assert!((tree.nodes.len() - before) * NEW_AT_MOST <= tree.nodes.len());
            tree.link_children();
            let mut scratch = ViewTree::default();
            scratch.nodes.clone_from(&tree.nodes);
            scratch.linked = 0;
            scratch.link_children();
            for i in 0..tree.nodes.len() {
                let id = NodeId(i as u32);
                assert_eq!(
                    tree.children(id),
                    scratch.children(id),
                    "round {round}, node {i}"
                );
            }
        }
    }

    #[test]
    fn globs_match_whole_names_with_stars_anywhere() {
        for (pattern, name, matches) in [
            ("std::rt::*", "std::rt::lang_start", true),
            ("std::rt::*", "std::rtx", false),
            ("main", "main", true),
            ("main", "main2", false),
            ("*::poll", "a::b::poll", true),
            ("*::poll", "a::b::poll_next", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("**", "", true),
            (
                "<* as core::ops::function::FnOnce<*>>::call_once*",
                "<F as core::ops::function::FnOnce<()>>::call_once{{vtable.shim}}",
                true,
            ),
        ] {
            assert_eq!(
                glob(pattern.as_bytes(), name.as_bytes()),
                matches,
                "{pattern} {name}"
            );
        }
    }

    #[test]
    fn patterns_are_tried_by_first_byte_and_stars_everywhere() {
        let p = HidePatterns::new(["std::*", "*poll", "", "x"]);
        assert!(p.matches("std::rt::x"));
        assert!(p.matches("tokio::poll"));
        assert!(!p.matches("core::x"));
        assert!(!p.matches(""));
        assert_eq!(p.patterns().count(), 3);
        let too_long = "a".repeat(MAX_PATTERN_LEN + 1);
        assert_eq!(HidePatterns::new([too_long.as_str()]).patterns().count(), 0);
    }

    /// The stacks of `view` as sorted folded lines.
    fn folded(view: &ViewTree, names: &StackTree) -> Vec<String> {
        let mut lines = Vec::new();
        for i in 1..view.node_count() {
            let n = NodeId(i as u32);
            if view.node(n).self_weight == 0 {
                continue;
            }
            let path: Vec<&str> = path_to(view, n)
                .iter()
                .map(|&p| names.name(view.node(p).frame))
                .collect();
            lines.push(format!("{} {}", path.join(";"), view.node(n).self_weight));
        }
        lines.sort();
        lines
    }

    #[test]
    fn hidden_frames_merge_as_if_the_stacks_never_had_them() {
        // Random trees over a few names, some hidden: the tree built in one pass equals
        // the one built stack by stack with the hidden frames left out.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..200 {
            let mut tree = StackTree::new();
            for _ in 0..1 + next(40) {
                let depth = 1 + next(7) as usize;
                let stack: Vec<String> = (0..depth).map(|_| format!("f{}", next(6))).collect();
                tree.add_names(stack.iter().map(String::as_str), 1 + next(5));
            }
            let hidden: Vec<bool> = (0..tree.frame_count()).map(|_| next(3) == 0).collect();
            let mut expected = StackTree::new();
            tree.for_each_stack(|frames, weight| {
                let kept: Vec<&str> = frames
                    .iter()
                    .filter(|f| !hidden[f.0 as usize])
                    .map(|&f| tree.name(f))
                    .collect();
                expected.add_names(kept, weight);
            });
            let mut view = ViewTree::default();
            view.build(&tree, &hidden);
            let mut reference = ViewTree::default();
            reference.build(&expected, &[]);
            assert_eq!(
                folded(&view, &tree),
                folded(&reference, &expected),
                "round {round}"
            );
            // Stacks made only of hidden frames end at the root.
            let lost: u64 = {
                let mut lost = 0;
                tree.for_each_stack(|frames, weight| {
                    if frames.iter().all(|f| hidden[f.0 as usize]) {
                        lost += weight;
                    }
                });
                lost
            };
            assert_eq!(view.node(NodeId::ROOT).self_weight, lost);
            assert_eq!(view.total_weight(), tree.total_weight());
        }
    }
}
