//! Callers and callees of one function, merged over every place it occurs (the
//! "butterfly" view of hotspot and the Firefox Profiler).
//!
//! Only the outermost occurrences count, so a recursive function's stacks are counted
//! once: a caller's weight is the total of the occurrences it calls, a callee's the total
//! of its calls from them.

use benchtop_sessions::{FrameId, NodeId, StackTree};

use super::index::heaviest_first;

/// Which part of the view a row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ButterflyRow {
    /// A caller, by index of [`Butterfly::callers`].
    Caller(usize),
    /// The function itself.
    Function,
    /// A callee, by index of [`Butterfly::callees`].
    Callee(usize),
}

/// The function, its callers and callees, and the selected row.
#[derive(Debug, Default)]
pub struct Butterfly {
    /// The function; `None` when the tree has no function of the selected name.
    pub function: Option<FrameId>,
    /// Its self weight.
    pub self_weight: u64,
    /// Its total weight.
    pub total_weight: u64,
    /// Weight through it that came straight from the root (it was a first frame).
    pub from_root: u64,
    /// Callers, heaviest first.
    pub callers: Vec<(FrameId, u64)>,
    /// Callees, heaviest first.
    pub callees: Vec<(FrameId, u64)>,
    /// The selected row, of [`Butterfly::row`].
    pub selected: usize,
}

impl Butterfly {
    /// The view of the function named `name` in `tree`.
    pub fn rebuild(&mut self, tree: &StackTree, name: &str) {
        let keep_function = self.function.map(|f| tree.name(f) == name).unwrap_or(false);
        self.callers.clear();
        self.callees.clear();
        self.from_root = 0;
        self.function = tree.find(name).filter(|&f| tree.frame_total(f) > 0);
        let Some(f) = self.function else {
            self.self_weight = 0;
            self.total_weight = 0;
            self.selected = 0;
            return;
        };
        self.self_weight = tree.frame_self(f);
        self.total_weight = tree.frame_total(f);
        let mut callers = Vec::new();
        let mut callees = Vec::new();
        for &n in tree.frame_nodes(f) {
            if !tree.is_outer(n) {
                continue;
            }
            let node = tree.node(n);
            if node.parent == NodeId::ROOT {
                self.from_root = self.from_root.saturating_add(node.total_weight);
            } else {
                callers.push((tree.node(node.parent).frame, node.total_weight));
            }
            for &c in &node.children {
                let child = tree.node(c);
                callees.push((child.frame, child.total_weight));
            }
        }
        self.callers = heaviest_first(callers);
        self.callees = heaviest_first(callees);
        if !keep_function || self.selected >= self.len() {
            self.selected = self.callers.len();
        }
    }

    /// Rows: the callers, the function, the callees.
    pub fn len(&self) -> usize {
        if self.function.is_none() {
            return 0;
        }
        self.callers.len() + 1 + self.callees.len()
    }

    /// Whether there is nothing to show.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What row `i` is.
    pub fn row(&self, i: usize) -> ButterflyRow {
        let c = self.callers.len();
        if i < c {
            ButterflyRow::Caller(i)
        } else if i == c {
            ButterflyRow::Function
        } else {
            ButterflyRow::Callee(i - c - 1)
        }
    }

    /// The function of row `i`.
    pub fn frame_of(&self, i: usize) -> Option<FrameId> {
        match self.row(i) {
            ButterflyRow::Caller(j) => self.callers.get(j).map(|c| c.0),
            ButterflyRow::Function => self.function,
            ButterflyRow::Callee(j) => self.callees.get(j).map(|c| c.0),
        }
    }
}
