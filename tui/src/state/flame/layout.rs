//! Laying the zoomed subtree out as rows of boxes, folding chains of single-child frames
//! into one box each.
//!
//! A frame is a link of a chain when one callee carries it on and what it does on the
//! side is too little to read at a glance: the callee holds at least half of it, and its
//! self weight and each other callee weigh less than [`FOLD_SIDE`] of the zoomed node
//! (and less than a quarter of that callee). The icicle would show such frames as a
//! column of boxes of nearly one width, pushing the first fork of a real profile (whose
//! plumbing calls allocators, timers and the scheduler a little at every level) below
//! the pane. [`MIN_FOLD`] or more links in a row become one box (`… 37 frames:
//! lang_start → block_on`), whose callees are the last link's, drawn on the next row;
//! Enter unfolds it, and with it what the links did on the side.

use benchtop_sessions::waits::WOKEN_BY;
use benchtop_sessions::{NodeId, StackTree};

use super::FlameState;
use super::diff::Baseline;
use super::search::chain_matches;
use super::share;
use super::tree::ViewTree;

/// Boxes narrower than this fraction of the zoomed node's total are left out of the layout.
///
/// At 1/2000 a box is a twelfth of a column of a 160-column terminal: it would never be
/// drawn, and leaving it out bounds a row to 2000 boxes however wide the tree is. Chosen
/// with `benches/flame.rs`, which lays out and draws 100k distinct frames.
pub const MIN_BOX_WIDTH: f64 = 1.0 / 2000.0;

/// Rows laid out from the zoomed node down; deeper frames are reached by zooming in.
/// Bounds the layout with [`MIN_BOX_WIDTH`] to `MAX_DEPTH * 2000` boxes
/// (`benches/flame.rs`).
pub const MAX_DEPTH: usize = 128;

/// The fewest links of a chain that fold into one box: two rows would save only one.
pub const MIN_FOLD: u32 = 3;

/// What a link of a chain may do on the side, as a fraction of the zoomed node's total:
/// each part of it (its self weight, each callee but the one that carries it on) must
/// weigh less.
///
/// A 20th is two columns of the flame pane at 80×24, too narrow for a name. Chosen with
/// the ring as recorded (`tests/data/flame/ring-cpu.folded.gz`): its runtime's plumbing
/// spends up to 2.3 % beside the hot path at a level, and at a 20th the first fork
/// (the actor's `handle` and its mailbox's `poll_recv`, about a quarter each) is on the
/// third row instead of the fourteenth.
pub const FOLD_SIDE: f64 = 1.0 / 20.0;

/// One laid-out box: a node of the tree on one row of the icicle, or a folded chain of
/// nodes from `node` down to `last`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlameBox {
    /// The node drawn (the first of a folded chain).
    pub node: NodeId,
    /// The last node of a folded chain, whose callees are on the next row; `node` when the
    /// box is one frame.
    pub last: NodeId,
    /// The frames the box stands for: 1, or the links of a folded chain.
    pub frames: u32,
    /// Left edge, as a fraction of the zoomed node's total (0 to 1).
    pub start: f64,
    /// Width, as a fraction of the zoomed node's total.
    pub width: f64,
    /// In differential mode with a baseline: the node's share of its tree's total minus its
    /// share of the baseline's (positive is hotter). `None` otherwise.
    pub delta: Option<f64>,
    /// In differential mode: the stack through this node is absent from the baseline (its
    /// delta is then its whole share).
    pub new_frame: bool,
    /// The frame's name (a frame's of the chain) matches the search.
    pub matched: bool,
}

impl FlameBox {
    /// Whether the box is a folded chain of frames.
    pub fn is_fold(&self) -> bool {
        self.frames > 1
    }
}

impl FlameState {
    /// The weight under which a box is not laid out.
    pub(super) fn min_weight(&self) -> f64 {
        self.zoom_total() as f64 * MIN_BOX_WIDTH
    }

    /// The weight a link's side work stays under ([`FOLD_SIDE`]).
    pub(super) fn fold_side(&self) -> f64 {
        self.zoom_total() as f64 * FOLD_SIDE
    }

    /// The callee that carries `node` on, when `node` is a link of a chain. A wait's
    /// `— woken by —` line is never a link: it keeps a row of its own, between the
    /// blocked stack and its waker's.
    pub(super) fn chain_child(&self, node: NodeId) -> Option<NodeId> {
        let child = self
            .view
            .chain_child(node, self.min_weight(), self.fold_side())?;
        let boundary = |n: NodeId| self.tree.name(self.view.node(n).frame) == WOKEN_BY;
        (!boundary(node) && !boundary(child)).then_some(child)
    }

    /// Marks the links of the unfolded chains, from their first nodes.
    pub(super) fn mark_unfolded(&mut self) {
        self.unfolded.clear();
        if self.expanded.is_empty() {
            return;
        }
        self.unfolded.resize(self.view.node_count(), false);
        for i in 0..self.expanded.len() {
            let mut n = self.expanded[i];
            while let Some(next) = self.chain_child(n) {
                if std::mem::replace(&mut self.unfolded[n.0 as usize], true) {
                    break;
                }
                n = next;
            }
        }
    }

    /// Lays the zoomed subtree out into `rows`: each row's boxes placed from their parent's
    /// left edge in name order, narrow boxes left out, chains folded, deltas against the
    /// baseline.
    pub(super) fn lay_out(&mut self) {
        let FlameState {
            tree,
            view,
            baseline,
            differential,
            zoom_path,
            rows,
            max_abs_delta,
            search,
            scratch,
            base_prev,
            base_next,
            fold,
            unfolded,
            ..
        } = self;
        let (view, tree, unfolded): (&ViewTree, &StackTree, &[bool]) = (view, tree, unfolded);
        let baseline = baseline.as_ref().filter(|_| *differential);
        *max_abs_delta = 0.0;
        let zoom = zoom_path.last().copied().unwrap_or(NodeId::ROOT);
        let zoom_total = view.node(zoom).total_weight;
        let mut used = 0;
        if zoom_total > 0 {
            let mut lay = Lay {
                view,
                names: tree,
                baseline,
                frame_matches: &search.frame_matches,
                tree_total: view.total_weight(),
                zoom_total: zoom_total as f64,
                min_weight: zoom_total as f64 * MIN_BOX_WIDTH,
                side: zoom_total as f64 * FOLD_SIDE,
                fold: *fold,
                unfolded,
                max_abs_delta: 0.0,
            };
            base_prev.clear();
            // The first row: the zoomed node itself, or the root's children.
            let first = next_row(rows, 0);
            if zoom_path.is_empty() {
                let root_base = baseline.map(|_| NodeId::ROOT);
                let top = Span {
                    parent: NodeId::ROOT,
                    base: root_base,
                    start: 0.0,
                    end: 1.0,
                };
                lay.children(top, false, scratch, first, base_prev);
            } else {
                let base = baseline.and_then(|b| {
                    zoom_path.iter().try_fold(NodeId::ROOT, |parent, &n| {
                        b.child(parent, tree.name(view.node(n).frame))
                    })
                });
                first.push(lay.place(zoom, zoom, 1, base, 0.0, 1.0));
                base_prev.push(base);
            }
            used = 1;
            while used < MAX_DEPTH && !rows[used - 1].is_empty() {
                next_row(rows, used);
                let (above, below) = rows.split_at_mut(used);
                let above = &above[used - 1];
                let row = &mut below[0];
                base_next.clear();
                for (parent, &base) in above.iter().zip(base_prev.iter()) {
                    let span = Span {
                        parent: parent.last,
                        base,
                        start: parent.start,
                        end: parent.start + parent.width,
                    };
                    lay.children(span, true, scratch, row, base_next);
                }
                std::mem::swap(base_prev, base_next);
                used += 1;
            }
            if rows[used - 1].is_empty() {
                used -= 1;
            }
            *max_abs_delta = lay.max_abs_delta;
        }
        rows.truncate(used);
        self.selected = None;
    }
}

/// The row at `index` of `rows`, cleared, reusing its allocation.
fn next_row(rows: &mut Vec<Vec<FlameBox>>, index: usize) -> &mut Vec<FlameBox> {
    if rows.len() <= index {
        rows.resize_with(index + 1, Vec::new);
    }
    let row = &mut rows[index];
    row.clear();
    row
}

/// Where the children of a box go: under `parent` (the box's last node, `base` in the
/// baseline), from `start` to `end`.
struct Span {
    parent: NodeId,
    base: Option<NodeId>,
    start: f64,
    end: f64,
}

/// What laying out one tree needs, borrowed from the state.
struct Lay<'a> {
    view: &'a ViewTree,
    names: &'a StackTree,
    baseline: Option<&'a Baseline>,
    frame_matches: &'a [bool],
    tree_total: u64,
    zoom_total: f64,
    min_weight: f64,
    side: f64,
    fold: bool,
    unfolded: &'a [bool],
    max_abs_delta: f64,
}

impl Lay<'_> {
    fn name(&self, node: NodeId) -> &str {
        self.names.name(self.view.node(node).frame)
    }

    /// Places the children of `span.parent` wide enough to keep, sorted by name, from
    /// `span.start`, never past `span.end` (weights that saturated could claim more than
    /// their parent has); chains fold when `fold_here`. The baseline node of each box's
    /// last node goes to `bases`.
    fn children(
        &mut self,
        span: Span,
        fold_here: bool,
        scratch: &mut Vec<NodeId>,
        row: &mut Vec<FlameBox>,
        bases: &mut Vec<Option<NodeId>>,
    ) {
        let view = self.view;
        let min_weight = self.min_weight;
        scratch.clear();
        scratch.extend(
            view.children(span.parent)
                .iter()
                .copied()
                .filter(|&c| view.node(c).total_weight as f64 >= min_weight),
        );
        // Siblings have distinct names, so the order is total.
        scratch.sort_unstable_by(|&a, &b| self.name(a).cmp(self.name(b)));
        let mut cursor = span.start;
        for &child in scratch.iter() {
            let width =
                (view.node(child).total_weight as f64 / self.zoom_total).min(span.end - cursor);
            if width < MIN_BOX_WIDTH {
                break;
            }
            let (last, frames) = if fold_here && self.fold {
                self.chain(child)
            } else {
                (child, 1)
            };
            let base = match (self.baseline, span.base) {
                (Some(b), Some(p)) => b.child(p, self.name(child)),
                _ => None,
            };
            let mut last_base = base;
            if frames > 1
                && let Some(b) = self.baseline
            {
                // The baseline's node of each link below the first, down to the last.
                let mut n = last;
                let mut below = Vec::new();
                while n != child {
                    below.push(n);
                    n = view.node(n).parent;
                }
                for &n in below.iter().rev() {
                    last_base = last_base.and_then(|p| b.child(p, self.name(n)));
                }
            }
            row.push(self.place(child, last, frames, base, cursor, width));
            bases.push(last_base);
            cursor += width;
        }
    }

    /// The chain of links from `first`: its last link and how many there are, when they
    /// are enough to fold; else `(first, 1)`.
    fn chain(&self, first: NodeId) -> (NodeId, u32) {
        let mut last = first;
        let mut links = 0u32;
        let mut n = first;
        while !self.unfolded.get(n.0 as usize).copied().unwrap_or(false) {
            let Some(next) = self.view.chain_child(n, self.min_weight, self.side) else {
                break;
            };
            // As `FlameState::chain_child`: a wait's `— woken by —` is never a link.
            if self.name(n) == WOKEN_BY || self.name(next) == WOKEN_BY {
                break;
            }
            links += 1;
            last = n;
            n = next;
        }
        if links >= MIN_FOLD {
            (last, links)
        } else {
            (first, 1)
        }
    }

    /// The box of `node` (down to `last`, `frames` of them) at `start`, `width` wide;
    /// `base` is `node`'s node in the baseline.
    fn place(
        &mut self,
        node: NodeId,
        last: NodeId,
        frames: u32,
        base: Option<NodeId>,
        start: f64,
        width: f64,
    ) -> FlameBox {
        let (delta, new_frame) = match self.baseline {
            Some(b) => {
                let now = share(self.view.node(node).total_weight, self.tree_total);
                let before = base.map_or(0.0, |n| b.share(n));
                let delta = now - before;
                self.max_abs_delta = self.max_abs_delta.max(delta.abs());
                (Some(delta), base.is_none())
            }
            None => (None, false),
        };
        FlameBox {
            node,
            last,
            frames,
            start,
            width,
            delta,
            new_frame,
            matched: chain_matches(self.frame_matches, self.view, node, last),
        }
    }
}
