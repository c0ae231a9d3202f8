//! The bottom-up (inverted) tree: functions with self weight at the roots, their callers
//! below them, each caller's weight the self weight of the root that went through it.
//!
//! Only what is expanded is computed: a row holds the tree nodes it stands for (with the
//! weight each carries up from its leaf), and expanding a row groups their parents by
//! function. Expanded rows are remembered by their names, so a new tree of a live run
//! opens the same way.

use std::collections::HashSet;

use benchtop_sessions::{FrameId, NodeId, StackTree};

use super::index::heaviest_first;

/// A node of the tree and the weight it carries up from its leaf.
type Occurrence = (NodeId, u64);

/// One visible row of the inverted tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvertedRow {
    /// From the root (a function with self weight) down to this caller.
    pub path: Vec<FrameId>,
    /// The self weight of the root that reached here through this path.
    pub weight: u64,
    /// Its callers show below it.
    pub expanded: bool,
    /// It has callers to show.
    pub has_callers: bool,
}

/// The inverted tree: the visible rows and the selection.
#[derive(Debug, Default)]
pub struct Inverted {
    /// The rows shown, depth first.
    pub rows: Vec<InvertedRow>,
    /// The selected row.
    pub selected: usize,
    /// Expanded rows, by the names on their path.
    expanded: HashSet<Vec<Box<str>>>,
    /// Whether it was ever built: the first build opens the heaviest root.
    opened: bool,
}

/// Rows of callers shown under one row at most; the rest are summed into none (the
/// heaviest come first).
const MAX_CALLERS: usize = 200;

impl Inverted {
    /// The rows of `tree`, keeping what was expanded and the selection's path when they
    /// are still there. The roots come from the self weights the tree keeps per
    /// function; only the expanded roots look at the nodes where they occur.
    pub fn rebuild(&mut self, tree: &StackTree) {
        let keep: Option<Vec<Box<str>>> =
            self.rows.get(self.selected).map(|r| names(tree, &r.path));
        let roots = heaviest_first(
            (0..tree.frame_count())
                .map(|f| FrameId(f as u32))
                .map(|f| (f, tree.frame_self(f)))
                .filter(|&(_, w)| w > 0)
                .collect(),
        );
        if !self.opened {
            self.opened = true;
            if let Some(&(f, _)) = roots.first() {
                self.expanded.insert(vec![tree.name(f).into()]);
            }
        }
        // Self weight of stacks of one frame: a root whose self weight is all there has
        // no callers to show.
        let mut first_frames: Vec<(FrameId, u64)> = tree
            .root()
            .children
            .iter()
            .map(|&c| (tree.node(c).frame, tree.node(c).self_weight))
            .collect();
        first_frames.sort_unstable();
        let alone = |f: FrameId| {
            first_frames
                .binary_search_by_key(&f, |&(g, _)| g)
                .map_or(0, |i| first_frames[i].1)
        };
        let open_roots: HashSet<Box<str>> = self
            .expanded
            .iter()
            .filter_map(|k| k.first().cloned())
            .collect();
        self.rows.clear();
        let mut path = Vec::new();
        for (f, weight) in roots {
            if !open_roots.contains(tree.name(f)) {
                self.rows.push(InvertedRow {
                    path: vec![f],
                    weight,
                    expanded: false,
                    has_callers: weight > alone(f),
                });
                continue;
            }
            let occ: Vec<(NodeId, u64)> = tree
                .frame_nodes(f)
                .iter()
                .map(|&n| (n, tree.node(n).self_weight))
                .filter(|&(_, w)| w > 0)
                .collect();
            path.clear();
            path.push(f);
            self.emit(tree, &mut path, weight, &occ);
        }
        self.selected = keep
            .and_then(|k| self.rows.iter().position(|r| same_path(tree, &r.path, &k)))
            .unwrap_or(0)
            .min(self.rows.len().saturating_sub(1));
    }

    /// Pushes the row of `path` (carrying `occ`), and its callers when it is expanded.
    fn emit(
        &mut self,
        tree: &StackTree,
        path: &mut Vec<FrameId>,
        weight: u64,
        occ: &[(NodeId, u64)],
    ) {
        let callers: Vec<(NodeId, u64)> = occ
            .iter()
            .map(|&(n, w)| (tree.node(n).parent, w))
            .filter(|&(p, _)| p != NodeId::ROOT)
            .collect();
        let expanded = !callers.is_empty() && self.expanded.contains(&names(tree, path));
        self.rows.push(InvertedRow {
            path: path.clone(),
            weight,
            expanded,
            has_callers: !callers.is_empty(),
        });
        if !expanded {
            return;
        }
        let mut callers = callers;
        callers.sort_unstable_by_key(|&(p, _)| (tree.node(p).frame, p));
        let mut groups: Vec<(FrameId, u64, &[Occurrence])> = callers
            .chunk_by(|a, b| tree.node(a.0).frame == tree.node(b.0).frame)
            .map(|g| {
                let w = g.iter().fold(0u64, |a, &(_, w)| a.saturating_add(w));
                (tree.node(g[0].0).frame, w, g)
            })
            .collect();
        groups.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for (f, w, sub) in groups.into_iter().take(MAX_CALLERS) {
            path.push(f);
            self.emit(tree, path, w, sub);
            path.pop();
        }
    }

    /// Expands the selected row (`open`) or collapses it; collapsing a row that is not
    /// expanded selects its parent row. Returns whether anything changed.
    pub fn set_expanded(&mut self, tree: &StackTree, open: bool) -> bool {
        let Some(row) = self.rows.get(self.selected) else {
            return false;
        };
        let key = names(tree, &row.path);
        if open {
            return row.has_callers && self.expanded.insert(key);
        }
        if self.expanded.remove(&key) {
            return true;
        }
        let depth = row.path.len();
        if depth > 1
            && let Some(p) = self.rows[..self.selected]
                .iter()
                .rposition(|r| r.path.len() == depth - 1)
        {
            self.selected = p;
        }
        false
    }

    /// The function of the selected row.
    pub fn selected_frame(&self) -> Option<FrameId> {
        self.rows.get(self.selected)?.path.last().copied()
    }
}

fn names(tree: &StackTree, path: &[FrameId]) -> Vec<Box<str>> {
    path.iter().map(|&f| tree.name(f).into()).collect()
}

/// Whether `path` names the frames of `key`, without copying them.
fn same_path(tree: &StackTree, path: &[FrameId], key: &[Box<str>]) -> bool {
    path.len() == key.len() && path.iter().zip(key).all(|(&f, k)| tree.name(f) == &**k)
}
