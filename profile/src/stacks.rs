//! Stack aggregation: an interned stack tree with weights, and the folded format.
//!
//! Frames are interned once to [`FrameId`]s; stacks are paths in a tree of [`NodeId`]s
//! from a virtual root, each node carrying its self weight (samples, or microseconds for
//! off-CPU stacks) and its total weight (self plus descendants). The flame views walk the
//! tree; exports write Brendan Gregg's folded lines (`root;…;leaf weight`).
//!
//! The tree also keeps, as stacks are added, what the views of a profile ask of every
//! function: its self and total weight (a stack counted once however often the function
//! recurs in it), the nodes where it occurs, and which of them are outermost (no caller
//! above them is the same function). A view of 100,000 distinct stacks then reads them
//! instead of walking a million nodes each time the profile changes.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::io::{BufRead, Write};

use crate::ProfileError;

/// An interned frame name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);

/// A node of a [`StackTree`]: one frame reached by one path from the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The virtual root: the parent of every first frame; it has no name.
    pub const ROOT: NodeId = NodeId(0);
}

/// One node of a [`StackTree`].
#[derive(Debug, Clone)]
pub struct Node {
    /// The frame of this node (meaningless for the root).
    pub frame: FrameId,
    /// Parent node; the root is its own parent.
    pub parent: NodeId,
    /// Weight of stacks ending exactly here.
    pub self_weight: u64,
    /// Weight of stacks through here: self plus all descendants.
    pub total_weight: u64,
    /// Children in insertion order.
    pub children: Children,
}

/// The children of a [`Node`], in insertion order, as a slice. One is held inline (most
/// nodes of a deep profile have exactly one), more in a `Vec`: a tree of a million nodes
/// is copied and freed with an allocation per fork rather than per node, which is what a
/// live view pays each time the sampler hands it a new copy.
#[derive(Clone)]
pub struct Children {
    /// The only child; `NodeId::ROOT` (never a child) when there is none, or when `more`
    /// holds them all.
    one: NodeId,
    /// Every child, once there are two or more.
    more: Vec<NodeId>,
}

impl Default for Children {
    fn default() -> Self {
        Children {
            one: NodeId::ROOT,
            more: Vec::new(),
        }
    }
}

impl Children {
    fn push(&mut self, id: NodeId) {
        if !self.more.is_empty() {
            self.more.push(id);
        } else if self.one == NodeId::ROOT {
            self.one = id;
        } else {
            self.more = vec![std::mem::replace(&mut self.one, NodeId::ROOT), id];
        }
    }
}

impl std::ops::Deref for Children {
    type Target = [NodeId];

    fn deref(&self) -> &[NodeId] {
        if !self.more.is_empty() {
            &self.more
        } else if self.one != NodeId::ROOT {
            std::slice::from_ref(&self.one)
        } else {
            &[]
        }
    }
}

impl<'a> IntoIterator for &'a Children {
    type Item = &'a NodeId;
    type IntoIter = std::slice::Iter<'a, NodeId>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl std::fmt::Debug for Children {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// What a tree knows of one function (an interned frame) over all its stacks.
#[derive(Debug, Clone, Default)]
struct FrameStats {
    /// Weight of stacks ending in it.
    self_weight: u64,
    /// Weight of stacks through it, each stack counted once.
    total_weight: u64,
    /// Its nodes, in the order they were made.
    nodes: Vec<NodeId>,
    /// The number of the [`StackTree::add`] that last met it: a frame met again in the
    /// same stack is a recursion, whose weight counts once in the total.
    met: u64,
}

/// Interned frame names and the tree of stacks over them.
#[derive(Debug, Clone)]
pub struct StackTree {
    names: Vec<Box<str>>,
    name_index: HashMap<Box<str>, FrameId>,
    nodes: Vec<Node>,
    /// Keyed by ids this tree handed out (never a file's text): hashed fast.
    child_index: FxHashMap<(NodeId, FrameId), NodeId>,
    /// Per interned frame, by [`FrameId`].
    frames: Vec<FrameStats>,
    /// Per node: no node above it has its frame (the root's entry is `false`).
    outer: Vec<bool>,
    /// Stacks added so far (the numbers [`FrameStats::met`] holds).
    adds: u64,
}

/// What [`StackTree::read_folded_within`] keeps of a folded file at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoldedLimits {
    /// Distinct stacks ([`crate::limits::MAX_STACKS`]).
    pub max_stacks: usize,
    /// Nodes of the tree: distinct call paths ([`crate::limits::MAX_STACK_NODES`]).
    pub max_nodes: usize,
    /// Distinct frame names ([`crate::limits::MAX_FRAMES`]).
    pub max_frames: usize,
}

impl FoldedLimits {
    /// No limit at all: for files benchtop wrote itself.
    pub const UNLIMITED: FoldedLimits = FoldedLimits {
        max_stacks: usize::MAX,
        max_nodes: usize::MAX,
        max_frames: usize::MAX,
    };
}

impl Default for StackTree {
    fn default() -> Self {
        StackTree {
            names: Vec::new(),
            name_index: HashMap::new(),
            nodes: vec![Node {
                frame: FrameId(u32::MAX),
                parent: NodeId::ROOT,
                self_weight: 0,
                total_weight: 0,
                children: Children::default(),
            }],
            child_index: FxHashMap::default(),
            frames: Vec::new(),
            outer: vec![false],
            adds: 0,
        }
    }
}

impl StackTree {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Interns a frame name. Characters that would break the folded format (`;` and line
    /// breaks) are replaced by `:` and spaces.
    pub fn intern(&mut self, name: &str) -> FrameId {
        if let Some(&id) = self.name_index.get(name) {
            return id;
        }
        let clean: Box<str> = if name.contains([';', '\n', '\r']) {
            name.replace(';', ":").replace(['\n', '\r'], " ").into()
        } else {
            name.into()
        };
        if let Some(&id) = self.name_index.get(&clean) {
            return id;
        }
        let id = FrameId(self.names.len() as u32);
        self.names.push(clean.clone());
        self.frames.push(FrameStats::default());
        self.name_index.insert(clean, id);
        if name.contains([';', '\n', '\r']) {
            self.name_index.insert(name.into(), id);
        }
        id
    }

    /// The name of an interned frame; empty for an id this tree did not hand out.
    pub fn name(&self, id: FrameId) -> &str {
        self.names.get(id.0 as usize).map_or("", |n| n)
    }

    /// The id of the frame named `name`, if the tree has one.
    pub fn find(&self, name: &str) -> Option<FrameId> {
        self.name_index.get(name).copied()
    }

    /// Number of distinct frame names.
    pub fn frame_count(&self) -> usize {
        self.names.len()
    }

    /// Adds `weight` to the stack `frames`, ordered root first. An empty stack is ignored.
    /// Each frame's self and total weight move with it (in time linear in the stack's
    /// depth), so a view of the profile never walks the tree for them.
    pub fn add(&mut self, frames: &[FrameId], weight: u64) {
        if frames.is_empty() || weight == 0 {
            return;
        }
        self.adds += 1;
        let stamp = self.adds;
        // Weights come from files: saturate rather than overflow on hostile ones.
        let mut node = NodeId::ROOT;
        self.nodes[0].total_weight = self.nodes[0].total_weight.saturating_add(weight);
        for &frame in frames {
            // The frame's first time in this stack: its node is an outermost one, and
            // the stack's weight counts in the frame's total. An id this tree did not
            // hand out has no figures (and its nodes count as outermost).
            let first = match self.frames.get_mut(frame.0 as usize) {
                Some(stats) if stats.met == stamp => false,
                Some(stats) => {
                    stats.met = stamp;
                    stats.total_weight = stats.total_weight.saturating_add(weight);
                    true
                }
                None => true,
            };
            node = self.child(node, frame, first);
            let n = &mut self.nodes[node.0 as usize];
            n.total_weight = n.total_weight.saturating_add(weight);
        }
        let n = &mut self.nodes[node.0 as usize];
        n.self_weight = n.self_weight.saturating_add(weight);
        if let Some(stats) = self.frames.get_mut(n.frame.0 as usize) {
            stats.self_weight = stats.self_weight.saturating_add(weight);
        }
    }

    /// The node of the stack `parent` plus `frame` (`NodeId::ROOT` as `parent` for a
    /// one-frame stack), made without weight when the tree has none: with [`add_at`],
    /// a live view adds a stack it knows by its parent and last frame in time linear in
    /// its depth, without looking its frames up again. A `parent` this tree did not hand
    /// out is taken as the root.
    ///
    /// [`add_at`]: StackTree::add_at
    pub fn node_under(&mut self, parent: NodeId, frame: FrameId) -> NodeId {
        let parent = if (parent.0 as usize) < self.nodes.len() {
            parent
        } else {
            NodeId::ROOT
        };
        if let Some(&id) = self.child_index.get(&(parent, frame)) {
            return id;
        }
        // Outermost unless a node above has the same frame.
        let mut outer = true;
        let mut at = parent;
        while at != NodeId::ROOT {
            let n = &self.nodes[at.0 as usize];
            if n.frame == frame {
                outer = false;
                break;
            }
            at = n.parent;
        }
        self.child(parent, frame, outer)
    }

    /// Adds `weight` to the stack that ends at `node`, as [`add`](StackTree::add) adds it
    /// to that stack's frames: the node's self weight, the total of every node up to the
    /// root, and each frame's figures (a recursion counted once). Nothing for the root or
    /// an id this tree did not hand out.
    pub fn add_at(&mut self, node: NodeId, weight: u64) {
        if node == NodeId::ROOT || node.0 as usize >= self.nodes.len() || weight == 0 {
            return;
        }
        self.adds += 1;
        let stamp = self.adds;
        let n = &mut self.nodes[node.0 as usize];
        n.self_weight = n.self_weight.saturating_add(weight);
        if let Some(stats) = self.frames.get_mut(n.frame.0 as usize) {
            stats.self_weight = stats.self_weight.saturating_add(weight);
        }
        let mut at = node;
        loop {
            let n = &mut self.nodes[at.0 as usize];
            n.total_weight = n.total_weight.saturating_add(weight);
            if at == NodeId::ROOT {
                break;
            }
            if let Some(stats) = self.frames.get_mut(n.frame.0 as usize)
                && stats.met != stamp
            {
                stats.met = stamp;
                stats.total_weight = stats.total_weight.saturating_add(weight);
            }
            at = n.parent;
        }
    }

    /// Weight of the stacks that end in `frame` (0 for an id this tree did not hand out).
    pub fn frame_self(&self, frame: FrameId) -> u64 {
        self.frames
            .get(frame.0 as usize)
            .map_or(0, |s| s.self_weight)
    }

    /// Weight of the stacks through `frame`, each counted once however often the frame
    /// recurs in it.
    pub fn frame_total(&self, frame: FrameId) -> u64 {
        self.frames
            .get(frame.0 as usize)
            .map_or(0, |s| s.total_weight)
    }

    /// The nodes of `frame`, in the order they were made (parents before children).
    pub fn frame_nodes(&self, frame: FrameId) -> &[NodeId] {
        self.frames
            .get(frame.0 as usize)
            .map_or(&[], |s| s.nodes.as_slice())
    }

    /// Whether `node` is an outermost occurrence of its frame: no node above it has the
    /// same frame (false for the root and for an id from another tree).
    pub fn is_outer(&self, node: NodeId) -> bool {
        self.outer.get(node.0 as usize).copied().unwrap_or(false)
    }

    /// Adds `weight` to the stack named by `frames`, root first, interning them.
    pub fn add_names<'a>(&mut self, frames: impl IntoIterator<Item = &'a str>, weight: u64) {
        let ids: Vec<FrameId> = frames.into_iter().map(|f| self.intern(f)).collect();
        self.add(&ids, weight);
    }

    /// Adds every stack of `other` to this tree.
    pub fn merge(&mut self, other: &StackTree) {
        other.for_each_stack(|frames, weight| {
            let ids: Vec<FrameId> = frames.iter().map(|&f| self.intern(other.name(f))).collect();
            self.add(&ids, weight);
        });
    }

    /// The node of `frame` under `parent`, made when there is none; `outer` says whether
    /// `frame` is on the path above it (false) or not (true).
    fn child(&mut self, parent: NodeId, frame: FrameId, outer: bool) -> NodeId {
        if let Some(&id) = self.child_index.get(&(parent, frame)) {
            return id;
        }
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(Node {
            frame,
            parent,
            self_weight: 0,
            total_weight: 0,
            children: Children::default(),
        });
        self.outer.push(outer);
        if let Some(stats) = self.frames.get_mut(frame.0 as usize) {
            stats.nodes.push(id);
        }
        self.nodes[parent.0 as usize].children.push(id);
        self.child_index.insert((parent, frame), id);
        id
    }

    /// A node of the tree. Panics on an id from another tree.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// The root node, whose total weight is the weight of the whole tree.
    pub fn root(&self) -> &Node {
        &self.nodes[0]
    }

    /// Total weight of all stacks.
    pub fn total_weight(&self) -> u64 {
        self.nodes[0].total_weight
    }

    /// Number of nodes, the root included.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// True when no stack was added.
    pub fn is_empty(&self) -> bool {
        self.total_weight() == 0
    }

    /// Calls `f` with every stack (root first) that has a self weight, depth first in
    /// insertion order.
    pub fn for_each_stack(&self, mut f: impl FnMut(&[FrameId], u64)) {
        let mut path: Vec<FrameId> = Vec::new();
        // (node, depth) pairs; depth is the path length of the node.
        let mut todo: Vec<(NodeId, usize)> = self.nodes[0]
            .children
            .iter()
            .rev()
            .map(|&c| (c, 1))
            .collect();
        while let Some((id, depth)) = todo.pop() {
            let node = &self.nodes[id.0 as usize];
            path.truncate(depth - 1);
            path.push(node.frame);
            if node.self_weight > 0 {
                f(&path, node.self_weight);
            }
            todo.extend(node.children.iter().rev().map(|&c| (c, depth + 1)));
        }
    }

    /// Writes folded lines (`a;b;c weight`), sorted by stack text as inferno and
    /// FrameGraph expect.
    pub fn write_folded<W: Write>(&self, mut out: W) -> std::io::Result<()> {
        let mut lines: Vec<(String, u64)> = Vec::new();
        self.for_each_stack(|frames, weight| {
            let mut line = String::new();
            for (i, &f) in frames.iter().enumerate() {
                if i > 0 {
                    line.push(';');
                }
                line.push_str(self.name(f));
            }
            lines.push((line, weight));
        });
        lines.sort_unstable();
        for (line, weight) in lines {
            writeln!(out, "{line} {weight}")?;
        }
        out.flush()
    }

    /// The folded lines as a string (see [`StackTree::write_folded`]).
    pub fn to_folded(&self) -> String {
        let mut out = Vec::new();
        // Writing into a Vec cannot fail.
        let _ = self.write_folded(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Reads folded lines. `source` names the input in errors (a path, usually). Empty
    /// lines are skipped; a line without a trailing weight is an error naming its number.
    /// Reads every stack; see [`StackTree::read_folded_limited`] for files from elsewhere.
    pub fn read_folded<R: BufRead>(input: R, source: &str) -> Result<Self, ProfileError> {
        let mut warnings = Vec::new();
        Self::read_folded_limited(input, source, usize::MAX, &mut warnings)
    }

    /// Reads folded lines as [`StackTree::read_folded`] does, keeping at most `max_stacks`
    /// distinct stacks: lines that would add a stack past them are dropped, and a warning
    /// says how many lines and how much weight. Weights that add up past `u64::MAX`
    /// saturate, with a warning too (the shares of such a file mean little).
    pub fn read_folded_limited<R: BufRead>(
        input: R,
        source: &str,
        max_stacks: usize,
        warnings: &mut Vec<String>,
    ) -> Result<Self, ProfileError> {
        let limits = FoldedLimits {
            max_stacks,
            ..FoldedLimits::UNLIMITED
        };
        Self::read_folded_within(input, source, limits, warnings)
    }

    /// Reads folded lines as [`StackTree::read_folded_limited`] does, within `limits`:
    /// besides distinct stacks, the tree's nodes (distinct call paths) and distinct frame
    /// names, what the tree's memory grows with. A line that would pass any of them is
    /// dropped, and one warning says which budget cut and how many lines and how much
    /// weight were dropped.
    pub fn read_folded_within<R: BufRead>(
        mut input: R,
        source: &str,
        limits: FoldedLimits,
        warnings: &mut Vec<String>,
    ) -> Result<Self, ProfileError> {
        let max_stacks = limits.max_stacks;
        let mut cut_by: Option<&'static str> = None;
        let mut tree = StackTree::new();
        let mut ids = Vec::new();
        let mut stacks = 0usize;
        let (mut dropped_lines, mut dropped_weight, mut first_dropped) = (0u64, 0u64, 0usize);
        let mut saturated = false;
        let mut buf = Vec::new();
        let mut n = 0usize;
        loop {
            buf.clear();
            let read = input
                .read_until(b'\n', &mut buf)
                .map_err(|e| ProfileError::io(source, e))?;
            if read == 0 {
                break;
            }
            n += 1;
            let line = std::str::from_utf8(&buf)
                .map_err(|_| ProfileError::corrupt_line(source, n, "not UTF-8"))?;
            let line = line.trim_end();
            if line.is_empty() {
                continue;
            }
            let bad = |reason: &str| ProfileError::corrupt_line(source, n, reason);
            let (stack, weight) = line
                .rsplit_once(' ')
                .ok_or_else(|| bad("no weight after the stack"))?;
            let weight: u64 = weight
                .parse()
                .map_err(|_| bad("the weight is not a whole number"))?;
            if weight == 0 {
                continue;
            }
            let over = if stacks >= max_stacks && !tree.has_stack(stack.split(';')) {
                Some("distinct stacks")
            } else {
                let (frames, nodes) = tree.new_parts(stack.split(';'));
                if tree.names.len().saturating_add(frames) > limits.max_frames {
                    Some("distinct frames")
                } else if tree.nodes.len().saturating_add(nodes) > limits.max_nodes {
                    Some("call-path nodes")
                } else {
                    None
                }
            };
            if let Some(what) = over {
                if dropped_lines == 0 {
                    first_dropped = n;
                    cut_by = Some(what);
                }
                dropped_lines += 1;
                dropped_weight = dropped_weight.saturating_add(weight);
                continue;
            }
            ids.clear();
            for frame in stack.split(';') {
                ids.push(tree.intern(frame));
            }
            saturated |= tree.total_weight().checked_add(weight).is_none();
            if tree.add_counting(&ids, weight) {
                stacks += 1;
            }
        }
        if dropped_lines > 0 {
            let limit = match cut_by {
                Some("distinct frames") => limits.max_frames,
                Some("call-path nodes") => limits.max_nodes,
                _ => max_stacks,
            };
            let what = cut_by.unwrap_or("distinct stacks");
            warnings.push(format!(
                "{source}: more than {limit} {what}; {dropped_lines} lines from line \
                 {first_dropped} on, of total weight {dropped_weight}, were dropped"
            ));
        }
        if saturated {
            warnings.push(format!(
                "{source}: the weights add up past {}; totals stop there, so shares are not \
                 exact",
                u64::MAX
            ));
        }
        Ok(tree)
    }

    /// How many frame names and nodes adding the stack `frames` (root first) would make:
    /// the names not interned yet, the nodes past the longest path already in the tree.
    fn new_parts<'a>(&self, frames: impl Iterator<Item = &'a str>) -> (usize, usize) {
        let (mut names, mut nodes) = (0usize, 0usize);
        let mut node = Some(NodeId::ROOT);
        let mut fresh: Vec<&str> = Vec::new();
        for frame in frames {
            let id = self.name_index.get(frame);
            if id.is_none() && !fresh.contains(&frame) {
                names += 1;
                // A stack repeating a new frame interns it once; a deep stack of new
                // frames compares against the few of this line only.
                if fresh.len() < 64 {
                    fresh.push(frame);
                }
            }
            node = match (node, id) {
                (Some(parent), Some(&id)) => self.child_index.get(&(parent, id)).copied(),
                _ => None,
            };
            if node.is_none() {
                nodes += 1;
            }
        }
        (names, nodes)
    }

    /// Whether the stack named by `frames` (root first) is in the tree with a self weight.
    fn has_stack<'a>(&self, frames: impl Iterator<Item = &'a str>) -> bool {
        let mut node = NodeId::ROOT;
        for frame in frames {
            let Some(&id) = self.name_index.get(frame) else {
                return false;
            };
            let Some(&child) = self.child_index.get(&(node, id)) else {
                return false;
            };
            node = child;
        }
        node != NodeId::ROOT && self.nodes[node.0 as usize].self_weight > 0
    }

    /// [`StackTree::add`], returning whether the stack is new (had no self weight).
    fn add_counting(&mut self, frames: &[FrameId], weight: u64) -> bool {
        if frames.is_empty() || weight == 0 {
            return false;
        }
        let mut node = Some(NodeId::ROOT);
        for &frame in frames {
            node = node.and_then(|n| self.child_index.get(&(n, frame)).copied());
        }
        let new = node.is_none_or(|n| self.nodes[n.0 as usize].self_weight == 0);
        self.add(frames, weight);
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_aggregate_into_a_tree_with_self_and_total_weights() {
        let mut t = StackTree::new();
        t.add_names(["main", "run", "hop"], 3);
        t.add_names(["main", "run"], 1);
        t.add_names(["main", "idle"], 2);
        assert_eq!(t.total_weight(), 6);
        let main = t.root().children[0];
        assert_eq!(t.node(main).total_weight, 6);
        let run = t.node(main).children[0];
        assert_eq!(t.node(run).self_weight, 1);
        assert_eq!(t.node(run).total_weight, 4);
        assert_eq!(t.frame_count(), 4);
    }

    #[test]
    fn stacks_added_by_node_give_the_tree_that_adding_by_frames_gives() {
        // Recursion (a;b;a), a one-frame stack, a stack that is a prefix of another.
        let stacks: [(&[&str], u64); 6] = [
            (&["a", "b", "a", "c"], 3),
            (&["a", "b"], 2),
            (&["d"], 1),
            (&["a", "b", "a", "c"], 4),
            (&["a", "c", "c"], 5),
            (&["d", "a"], 6),
        ];
        let mut by_frames = StackTree::new();
        let mut by_node = StackTree::new();
        for (frames, w) in stacks {
            by_frames.add_names(frames.iter().copied(), w);
            let mut node = NodeId::ROOT;
            for f in frames {
                let id = by_node.intern(f);
                node = by_node.node_under(node, id);
            }
            by_node.add_at(node, w);
        }
        assert_eq!(by_node.to_folded(), by_frames.to_folded());
        assert_eq!(by_node.node_count(), by_frames.node_count());
        for name in ["a", "b", "c", "d"] {
            let (x, y) = (by_node.find(name).unwrap(), by_frames.find(name).unwrap());
            assert_eq!(by_node.frame_self(x), by_frames.frame_self(y), "{name}");
            assert_eq!(by_node.frame_total(x), by_frames.frame_total(y), "{name}");
            let outer = |t: &StackTree, f| -> Vec<bool> {
                t.frame_nodes(f).iter().map(|&n| t.is_outer(n)).collect()
            };
            assert_eq!(outer(&by_node, x), outer(&by_frames, y), "{name}");
        }
        // The root, an unknown node and a zero weight add nothing.
        let before = by_node.to_folded();
        by_node.add_at(NodeId::ROOT, 9);
        by_node.add_at(NodeId(1 << 30), 9);
        by_node.add_at(NodeId(1), 0);
        assert_eq!(by_node.to_folded(), before);
        assert_eq!(by_node.total_weight(), by_frames.total_weight());
    }

    #[test]
    fn folded_lines_round_trip_sorted() {
        let mut t = StackTree::new();
        t.add_names(["main", "run", "hop"], 3);
        t.add_names(["main", "idle"], 2);
        t.add_names(["main", "run"], 1);
        let folded = t.to_folded();
        assert_eq!(folded, "main;idle 2\nmain;run 1\nmain;run;hop 3\n");
        let back = StackTree::read_folded(folded.as_bytes(), "test").unwrap();
        assert_eq!(back.to_folded(), folded);
    }

    #[test]
    fn separators_inside_frame_names_do_not_break_folded_lines() {
        let mut t = StackTree::new();
        t.add_names(["<[u8; 4] as Debug>::fmt"], 1);
        assert_eq!(t.to_folded(), "<[u8: 4] as Debug>::fmt 1\n");
    }

    #[test]
    fn folded_files_are_cut_at_their_node_and_frame_budgets_exactly() {
        // The root, a, b, c: four nodes; a, b, c: three frames. `a;b` again adds none.
        let text = &b"a;b 1\na;c 2\na;b 4\n"[..];
        let read = |max_nodes, max_frames| {
            let mut warnings = Vec::new();
            let limits = FoldedLimits {
                max_nodes,
                max_frames,
                ..FoldedLimits::UNLIMITED
            };
            let t =
                StackTree::read_folded_within(text, "cpu.folded", limits, &mut warnings).unwrap();
            (t.total_weight(), warnings.join("\n"))
        };
        assert_eq!(read(4, 3), (7, String::new()));
        let (weight, warning) = read(3, 3);
        assert_eq!(weight, 5, "the line past the budget alone is dropped");
        assert!(
            warning.contains(
                "more than 3 call-path nodes; 1 lines from line 2 on, of total \
                              weight 2, were dropped"
            ),
            "{warning}"
        );
        let (weight, warning) = read(4, 2);
        assert_eq!(weight, 5);
        assert!(warning.contains("more than 2 distinct frames"), "{warning}");
    }

    #[test]
    fn a_folded_line_without_weight_names_its_line() {
        let err = StackTree::read_folded(&b"a;b 1\na;b\n"[..], "cpu.folded")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cpu.folded") && err.contains("line 2"),
            "{err}"
        );
    }

    #[test]
    fn a_folded_line_that_is_not_utf8_is_corrupt_not_an_io_error() {
        let err = StackTree::read_folded(&b"a 1\n\xff\xfe 2\n"[..], "cpu.folded").unwrap_err();
        assert!(
            matches!(&err, ProfileError::Corrupt { reason, .. } if reason.starts_with("line 2")),
            "{err}"
        );
    }

    #[test]
    fn hostile_weights_saturate_instead_of_overflowing() {
        let t = StackTree::read_folded(
            &b"a;b 18446744073709551615\na;c 18446744073709551615\n"[..],
            "cpu.folded",
        )
        .unwrap();
        assert_eq!(t.total_weight(), u64::MAX);
        let mut warnings = Vec::new();
        StackTree::read_folded_limited(
            &b"a;b 18446744073709551615\na;c 18446744073709551615\n"[..],
            "cpu.folded",
            10,
            &mut warnings,
        )
        .unwrap();
        assert!(warnings[0].contains("add up past"), "{warnings:?}");
    }

    #[test]
    fn stacks_past_the_limit_are_dropped_and_counted() {
        let mut warnings = Vec::new();
        let t = StackTree::read_folded_limited(
            &b"a;b 1\na;c 2\na;b 4\na;d 8\na 16\n"[..],
            "cpu.folded",
            2,
            &mut warnings,
        )
        .unwrap();
        assert_eq!(t.to_folded(), "a;b 5\na;c 2\n");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("2 lines from line 4 on, of total weight 24"),
            "{warnings:?}"
        );
    }

    #[test]
    fn frame_weights_are_kept_as_stacks_are_added_and_recursion_counts_once() {
        let mut t = StackTree::new();
        t.add_names(["main", "f", "g", "f"], 3);
        t.add_names(["main", "f"], 1);
        t.add_names(["main", "g"], 2);
        let id = |n: &str| t.find(n).unwrap();
        assert_eq!((t.frame_self(id("f")), t.frame_total(id("f"))), (4, 4));
        assert_eq!((t.frame_self(id("g")), t.frame_total(id("g"))), (2, 5));
        assert_eq!(
            (t.frame_self(id("main")), t.frame_total(id("main"))),
            (0, 6)
        );
        let outer: Vec<bool> = t
            .frame_nodes(id("f"))
            .iter()
            .map(|&n| t.is_outer(n))
            .collect();
        assert_eq!(outer, [true, false], "the inner f is under the outer one");
        assert_eq!(t.frame_nodes(id("g")).len(), 2);
        assert!(!t.is_outer(NodeId::ROOT));
        assert_eq!(
            t.frame_total(FrameId(99)),
            0,
            "an id the tree did not hand out"
        );
        // A copy keeps them; a stack added to it moves them on its own.
        let mut copy = t.clone();
        copy.add_names(["main", "f"], 10);
        assert_eq!(copy.frame_total(id("f")), 14);
        assert_eq!(t.frame_total(id("f")), 4);
    }

    #[test]
    fn frame_weights_agree_with_a_walk_over_the_tree() {
        // Per frame, the walk's answer: self from the nodes, total from the outermost
        // nodes only.
        let mut t = StackTree::new();
        let stacks = [
            "a;b;c;b;c 5",
            "a;b;c 2",
            "a;c;a 7",
            "b;b;b 1",
            "a 4",
            "a;b;c;b;c 1",
        ];
        for line in stacks {
            let (stack, w) = line.rsplit_once(' ').unwrap();
            t.add_names(stack.split(';'), w.parse().unwrap());
        }
        for f in 0..t.frame_count() {
            let f = FrameId(f as u32);
            let mut self_w = 0;
            let mut total = 0;
            for i in 1..t.node_count() {
                let node = t.node(NodeId(i as u32));
                if node.frame != f {
                    continue;
                }
                self_w += node.self_weight;
                let mut up = node.parent;
                let mut outer = true;
                while up != NodeId::ROOT {
                    outer &= t.node(up).frame != f;
                    up = t.node(up).parent;
                }
                assert_eq!(t.is_outer(NodeId(i as u32)), outer);
                if outer {
                    total += node.total_weight;
                }
            }
            assert_eq!(
                (t.frame_self(f), t.frame_total(f)),
                (self_w, total),
                "{}",
                t.name(f)
            );
        }
        let read = StackTree::read_folded(t.to_folded().as_bytes(), "t").unwrap();
        let a = read.find("a").unwrap();
        assert_eq!(read.frame_total(a), t.frame_total(t.find("a").unwrap()));
    }

    #[test]
    fn children_stay_in_insertion_order_inline_or_not() {
        let mut c = Children::default();
        assert!(c.is_empty());
        c.push(NodeId(5));
        assert_eq!(&*c, [NodeId(5)]);
        c.push(NodeId(3));
        c.push(NodeId(9));
        assert_eq!(&*c, [NodeId(5), NodeId(3), NodeId(9)]);
        let seen: Vec<NodeId> = (&c).into_iter().copied().collect();
        assert_eq!(seen, [NodeId(5), NodeId(3), NodeId(9)]);
        assert_eq!(format!("{c:?}"), "[NodeId(5), NodeId(3), NodeId(9)]");
    }

    #[test]
    fn merging_adds_weights_of_equal_stacks() {
        let mut a = StackTree::new();
        a.add_names(["x", "y"], 2);
        let mut b = StackTree::new();
        b.add_names(["x", "y"], 3);
        b.add_names(["z"], 1);
        a.merge(&b);
        assert_eq!(a.to_folded(), "x;y 5\nz 1\n");
    }
}
