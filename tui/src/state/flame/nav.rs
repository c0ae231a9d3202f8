//! Moving the selection: arrows, pages, the ends of the hot path, the hottest leaf; zoom
//! and unfolding.

use benchtop_sessions::NodeId;
use benchtop_sessions::waits::WOKEN_BY;

use super::FlameState;
use super::tree::path_to;

impl FlameState {
    /// Selects the parent of the selected box (up). False when there is none on screen.
    pub fn select_parent(&mut self) -> bool {
        let Some((row, index)) = self.selected else {
            return false;
        };
        if row == 0 {
            return false;
        }
        let Some(b) = self.rows.get(row).and_then(|r| r.get(index)) else {
            return false;
        };
        let parent = self.view.node(b.node).parent;
        // The parent starts where its first child does: the last box starting at or
        // before this one.
        let above = &self.rows[row - 1];
        let at = above.partition_point(|p| p.start <= b.start);
        let found = at
            .checked_sub(1)
            .filter(|&i| above[i].last == parent)
            .or_else(|| above.iter().position(|p| p.last == parent));
        match found {
            Some(i) => {
                self.selected = Some((row - 1, i));
                true
            }
            None => false,
        }
    }

    /// Selects the widest child of the selected box (down; the first of equals). False
    /// when it has none laid out.
    pub fn select_child(&mut self) -> bool {
        let Some((row, index)) = self.selected else {
            return false;
        };
        match self.widest_child(row, index) {
            Some(i) => {
                self.selected = Some((row + 1, i));
                true
            }
            None => false,
        }
    }

    /// The index on the next row of the widest child of the box at `(row, index)`.
    fn widest_child(&self, row: usize, index: usize) -> Option<usize> {
        let b = self.rows.get(row)?.get(index)?;
        let below = self.rows.get(row + 1)?;
        let first = below.partition_point(|c| c.start < b.start);
        let mut best: Option<(usize, f64)> = None;
        for (i, c) in below.iter().enumerate().skip(first) {
            if self.view.node(c.node).parent != b.last {
                break;
            }
            if best.is_none_or(|(_, w)| c.width > w) {
                best = Some((i, c.width));
            }
        }
        best.map(|(i, _)| i)
    }

    /// Selects the box left of the selected one on its row. False at the left end.
    pub fn select_prev(&mut self) -> bool {
        match self.selected {
            Some((row, index)) if index > 0 => {
                self.selected = Some((row, index - 1));
                true
            }
            _ => false,
        }
    }

    /// Selects the box right of the selected one on its row. False at the right end.
    pub fn select_next(&mut self) -> bool {
        match self.selected {
            Some((row, index)) if index + 1 < self.rows.get(row).map_or(0, Vec::len) => {
                self.selected = Some((row, index + 1));
                true
            }
            _ => false,
        }
    }

    /// Moves `rows` rows down the widest path (PageDown). False when it cannot move.
    pub fn page_down(&mut self, rows: usize) -> bool {
        let mut moved = false;
        for _ in 0..rows {
            if !self.select_child() {
                break;
            }
            moved = true;
        }
        moved
    }

    /// Moves `rows` rows up towards the top (PageUp). False when it cannot move.
    pub fn page_up(&mut self, rows: usize) -> bool {
        let mut moved = false;
        for _ in 0..rows {
            if !self.select_parent() {
                break;
            }
            moved = true;
        }
        moved
    }

    /// Selects the top row's box above the selection (Home).
    pub fn select_top(&mut self) -> bool {
        self.page_up(usize::MAX)
    }

    /// Follows the widest children down to the bottom of the layout (End).
    pub fn select_bottom(&mut self) -> bool {
        self.page_down(usize::MAX)
    }

    /// Selects the frame with the largest self weight under the selection (the end of
    /// the hottest stack), zooming into the selection when that frame is too deep or too
    /// narrow to be laid out, and unfolding the chain it may be in. False when nothing is
    /// selected or the selection is that frame already.
    pub fn select_hottest_leaf(&mut self) -> bool {
        let Some(b) = self.selected_box().copied() else {
            return false;
        };
        let Some(leaf) = self.hottest_under(b.node) else {
            return false;
        };
        if b.node == leaf && !b.is_fold() {
            return false;
        }
        self.select_node(leaf);
        // Too narrow from here: zoom into where it started; too deep: into the deepest
        // frame on its way that is laid out, until it is.
        let mut zoom_to = b.node;
        while let Some(found) = self.selected_box().map(|s| s.node)
            && found != leaf
        {
            if self.zoom_node() == zoom_to {
                if found == zoom_to {
                    break;
                }
                zoom_to = found;
            }
            self.zoom_path = path_to(&self.view, zoom_to);
            self.mark_unfolded();
            self.relayout_selecting(leaf);
        }
        true
    }

    /// In a waits profile, from a box of a waker (above `— woken by —`) to what that
    /// waker was itself waiting for: zooms into the blocked stacks of the waker's process
    /// that share the most of the waker's callers (its thread's own waits, and who ended
    /// them). False when the selection is not in a waker's part, or nothing matches.
    pub fn follow_waker(&mut self) -> bool {
        let Some(b) = self.selected_box().copied() else {
            return false;
        };
        let path = path_to(&self.view, b.last);
        let name = |n: NodeId| self.tree.name(self.view.node(n).frame);
        let Some(at) = path.iter().position(|&n| name(n) == WOKEN_BY) else {
            return false;
        };
        let waker: Vec<&str> = path[at + 1..].iter().map(|&n| name(n)).collect();
        let [process, thread, frames @ ..] = waker.as_slice() else {
            return false;
        };
        let child = |parent: NodeId, want: &str| {
            self.view
                .children(parent)
                .iter()
                .copied()
                .find(|&c| name(c) == want)
        };
        let Some(mut target) = child(NodeId::ROOT, process) else {
            return false;
        };
        // Blocked stacks recorded per thread name the thread second.
        if let Some(t) = child(target, thread) {
            target = t;
        }
        // As deep as the waker's callers lead; a frame the blocked stacks lack (hidden
        // plumbing, the call that woke) is passed over.
        for f in frames {
            if let Some(c) = child(target, f) {
                target = c;
            }
        }
        if target == self.zoom_node() {
            return false;
        }
        self.zoom_path = path_to(&self.view, target);
        self.mark_unfolded();
        self.relayout_selecting(target);
        true
    }

    /// The node under `top` (itself included) with the largest self weight; the first of
    /// equals in id order.
    fn hottest_under(&self, top: NodeId) -> Option<NodeId> {
        let view = &self.view;
        if !view.has(top) {
            return None;
        }
        // Parents come before children: one pass in id order marks the subtree.
        let mut inside = vec![false; view.node_count() - top.0 as usize];
        inside[0] = true;
        let mut best = (top, view.node(top).self_weight);
        for i in top.0 as usize + 1..view.node_count() {
            let node = view.node(NodeId(i as u32));
            let Some(p) = (node.parent.0 as usize).checked_sub(top.0 as usize) else {
                continue;
            };
            if !inside.get(p).copied().unwrap_or(false) {
                continue;
            }
            inside[i - top.0 as usize] = true;
            if node.self_weight > best.1 {
                best = (NodeId(i as u32), node.self_weight);
            }
        }
        Some(best.0)
    }

    /// Selects the heaviest node of the frame named `name`, leaving the zoom when that
    /// node lies outside it and unfolding the chain it is in: how the other views of the
    /// profile select a function here. False when the laid-out tree has no such frame (a
    /// hidden frame has none).
    pub fn select_frame(&mut self, name: &str) -> bool {
        let Some(frame) = self.tree.find(name) else {
            return false;
        };
        let view = &self.view;
        let best = (1..view.node_count() as u32)
            .map(NodeId)
            .filter(|&n| view.node(n).frame == frame)
            .max_by_key(|&n| (view.node(n).total_weight, std::cmp::Reverse(n)));
        let Some(node) = best else {
            return false;
        };
        if self.is_zoomed() && !path_to(&self.view, node).contains(&self.zoom_node()) {
            self.zoom_path.clear();
            self.mark_unfolded();
        }
        self.relayout_selecting(node);
        if let Some(b) = self.selected_box().copied()
            && b.is_fold()
            && b.node != node
        {
            self.unfold(b.node);
            self.select_node(node);
        }
        true
    }

    /// Zooms in on the selected box (Enter): it becomes the top row at full width. A
    /// folded chain unfolds instead. False when nothing is selected or the selection is
    /// already the zoomed node.
    pub fn zoom_in(&mut self) -> bool {
        let Some(b) = self.selected_box().copied() else {
            return false;
        };
        if b.is_fold() {
            self.unfold(b.node);
            return true;
        }
        if b.node == self.zoom_node() {
            return false;
        }
        self.zoom_path = path_to(&self.view, b.node);
        self.mark_unfolded();
        self.relayout_selecting(b.node);
        true
    }

    /// Unfolds the chain that starts at `first`, keeping it selected.
    fn unfold(&mut self, first: NodeId) {
        if !self.expanded.contains(&first) {
            self.expanded.push(first);
        }
        self.mark_unfolded();
        self.relayout_selecting(first);
    }

    /// Zooms out one level (Esc), keeping the node that was zoomed selected. False when
    /// not zoomed, so Esc can back out of something else.
    pub fn zoom_out(&mut self) -> bool {
        let Some(node) = self.zoom_path.pop() else {
            return false;
        };
        self.mark_unfolded();
        self.relayout_selecting(node);
        true
    }

    /// Shows the whole tree again, keeping the selection. False when not zoomed.
    pub fn reset_zoom(&mut self) -> bool {
        if self.zoom_path.is_empty() {
            return false;
        }
        self.zoom_path.clear();
        self.mark_unfolded();
        self.relayout_keeping_selection();
        true
    }

    /// Selects `node`, or the box that holds it (a folded chain), or its nearest
    /// laid-out ancestor, or the default.
    pub(super) fn select_node(&mut self, node: NodeId) {
        match self.locate(node) {
            Some(at) => self.selected = Some(at),
            None => self.select_default(),
        }
    }

    /// The position of the box of `node`, or of the deepest box on its path: found by
    /// following the path down the rows, one parent's children at a time.
    fn locate(&self, node: NodeId) -> Option<(usize, usize)> {
        let path = path_to(&self.view, node);
        // Zoomed, the top row is the zoomed node: the path from there.
        let skip = self.zoom_path.len().saturating_sub(1);
        let path = path.get(skip..).filter(|p| !p.is_empty())?;
        let mut index = self.rows.first()?.iter().position(|b| b.node == path[0])?;
        let mut row = 0;
        // The path's index of the last node of the box found.
        let mut at = 0;
        loop {
            let b = &self.rows[row][index];
            let last = at + b.frames as usize - 1;
            if path.get(last) != Some(&b.last) {
                // The node is inside this folded chain.
                return Some((row, index));
            }
            let Some(&next) = path.get(last + 1) else {
                return Some((row, index));
            };
            let Some(below) = self.rows.get(row + 1) else {
                return Some((row, index));
            };
            let first = below.partition_point(|c| c.start < b.start);
            let found = below[first..]
                .iter()
                .take_while(|c| self.view.node(c.node).parent == b.last)
                .position(|c| c.node == next);
            match found {
                Some(i) => {
                    row += 1;
                    index = first + i;
                    at = last + 1;
                }
                None => return Some((row, index)),
            }
        }
    }

    /// The default selection: the widest box of the top row (the first of equals), then
    /// down the widest path to the first frame that forks or does work of its own.
    pub(super) fn select_default(&mut self) {
        self.selected = self.rows.first().and_then(|row| {
            let mut best: Option<(usize, f64)> = None;
            for (i, b) in row.iter().enumerate() {
                if best.is_none_or(|(_, w)| b.width > w) {
                    best = Some((i, b.width));
                }
            }
            best.map(|(i, _)| (0, i))
        });
        while let Some(b) = self.selected_box() {
            let link = b.is_fold() || self.chain_child(b.last).is_some();
            if !link || !self.select_child() {
                break;
            }
        }
    }
}
