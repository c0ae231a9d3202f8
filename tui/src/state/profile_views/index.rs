//! What every view of a profile needs from its stack tree, computed in one pass: each
//! function's self and total weight, the nodes where it occurs, and which occurrences are
//! outermost (no caller above them is the same function, so recursion is counted once).

use benchtop_sessions::{FrameId, NodeId, StackTree};

/// The functions of one [`StackTree`] and where they occur.
#[derive(Debug, Default)]
pub struct ProfileIndex {
    /// Weight of the whole tree.
    pub total: u64,
    /// Per frame: weight of stacks ending in it.
    pub self_weight: Vec<u64>,
    /// Per frame: weight of stacks through it, each stack counted once.
    pub total_weight: Vec<u64>,
    /// Nodes of frame `f` are `nodes[starts[f]..starts[f + 1]]`.
    starts: Vec<u32>,
    nodes: Vec<NodeId>,
    /// Per node: no ancestor has the same frame.
    outer: Vec<bool>,
}

impl ProfileIndex {
    /// Indexes `tree`: one walk over its nodes.
    pub fn new(tree: &StackTree) -> Self {
        let frames = tree.frame_count();
        let n = tree.node_count();
        let mut index = ProfileIndex {
            total: tree.total_weight(),
            self_weight: vec![0; frames],
            total_weight: vec![0; frames],
            starts: vec![0; frames + 1],
            nodes: vec![NodeId::ROOT; n.saturating_sub(1)],
            outer: vec![false; n],
        };
        // Nodes are created after their parents, so one pass in id order sees every parent
        // first. Counting occurrences per frame on the path needs a walk, done depth first.
        let mut on_path = vec![0u32; frames];
        let mut todo: Vec<(NodeId, bool)> = tree
            .root()
            .children
            .iter()
            .rev()
            .map(|&c| (c, true))
            .collect();
        while let Some((id, enter)) = todo.pop() {
            let node = tree.node(id);
            let f = node.frame.0 as usize;
            if f >= frames {
                continue;
            }
            if !enter {
                on_path[f] -= 1;
                continue;
            }
            index.starts[f + 1] += 1;
            index.self_weight[f] = index.self_weight[f].saturating_add(node.self_weight);
            if on_path[f] == 0 {
                index.outer[id.0 as usize] = true;
                index.total_weight[f] = index.total_weight[f].saturating_add(node.total_weight);
            }
            on_path[f] += 1;
            todo.push((id, false));
            todo.extend(node.children.iter().rev().map(|&c| (c, true)));
        }
        for f in 0..frames {
            index.starts[f + 1] += index.starts[f];
        }
        let mut at: Vec<u32> = index.starts[..frames].to_vec();
        for i in 1..n {
            let f = tree.node(NodeId(i as u32)).frame.0 as usize;
            if let Some(slot) = at.get_mut(f) {
                index.nodes[*slot as usize] = NodeId(i as u32);
                *slot += 1;
            }
        }
        index
    }

    /// The nodes of `frame`, in id order.
    pub fn occurrences(&self, frame: FrameId) -> &[NodeId] {
        let f = frame.0 as usize;
        match (self.starts.get(f), self.starts.get(f + 1)) {
            (Some(&a), Some(&b)) => &self.nodes[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Whether `node` is an outermost occurrence of its frame.
    pub fn is_outer(&self, node: NodeId) -> bool {
        self.outer.get(node.0 as usize).copied().unwrap_or(false)
    }

    /// Self weight of `frame`.
    pub fn self_of(&self, frame: FrameId) -> u64 {
        self.self_weight.get(frame.0 as usize).copied().unwrap_or(0)
    }

    /// Total weight of `frame`.
    pub fn total_of(&self, frame: FrameId) -> u64 {
        self.total_weight
            .get(frame.0 as usize)
            .copied()
            .unwrap_or(0)
    }
}

/// Sums `(key, weight)` pairs by key and sorts them heaviest first (then by key, so equal
/// weights keep one order).
pub fn heaviest_first(mut pairs: Vec<(FrameId, u64)>) -> Vec<(FrameId, u64)> {
    pairs.sort_unstable_by_key(|&(f, _)| f);
    let mut out: Vec<(FrameId, u64)> = Vec::with_capacity(pairs.len());
    for (f, w) in pairs {
        match out.last_mut() {
            Some(last) if last.0 == f => last.1 = last.1.saturating_add(w),
            _ => out.push((f, w)),
        }
    }
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recursion_counts_a_stack_once_in_the_total() {
        let mut t = StackTree::new();
        t.add_names(["main", "f", "g", "f"], 3);
        t.add_names(["main", "f"], 1);
        let i = ProfileIndex::new(&t);
        let f = t.find("f").unwrap();
        assert_eq!(i.total_of(f), 4);
        assert_eq!(i.self_of(f), 4);
        assert_eq!(i.occurrences(f).len(), 2);
        let outer: Vec<bool> = i.occurrences(f).iter().map(|&n| i.is_outer(n)).collect();
        assert_eq!(outer, [true, false]);
    }
}
