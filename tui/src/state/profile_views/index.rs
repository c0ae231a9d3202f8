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
    /// Indexes `tree`: linear passes over its nodes, then one walk, depth first, over
    /// compact copies of its links (the nodes' own child lists are scattered over the
    /// heap; walking them costs a cache miss a node).
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
        // Pass 1, in id order: each node's frame, self weight per frame, occurrences per
        // frame, children per node.
        let mut frame_of: Vec<u32> = vec![u32::MAX; n];
        let mut totals: Vec<u64> = vec![0; n];
        let mut kids_start: Vec<u32> = vec![0; n + 1];
        for i in 1..n {
            let node = tree.node(NodeId(i as u32));
            let f = node.frame.0 as usize;
            if f >= frames {
                continue;
            }
            frame_of[i] = f as u32;
            totals[i] = node.total_weight;
            index.self_weight[f] = index.self_weight[f].saturating_add(node.self_weight);
            index.starts[f + 1] += 1;
            kids_start[node.parent.0 as usize + 1] += 1;
        }
        for f in 0..frames {
            index.starts[f + 1] += index.starts[f];
        }
        for i in 0..n {
            kids_start[i + 1] += kids_start[i];
        }
        // Pass 2: the occurrences of each frame, and each node's children, in id order.
        let mut at: Vec<u32> = index.starts[..frames].to_vec();
        let mut kid_at: Vec<u32> = kids_start[..n].to_vec();
        let mut kids: Vec<u32> = vec![0; n.saturating_sub(1)];
        for (i, &f) in frame_of.iter().enumerate().skip(1) {
            if f == u32::MAX {
                continue;
            }
            let slot = &mut at[f as usize];
            index.nodes[*slot as usize] = NodeId(i as u32);
            *slot += 1;
            let parent = tree.node(NodeId(i as u32)).parent.0 as usize;
            kids[kid_at[parent] as usize] = i as u32;
            kid_at[parent] += 1;
        }
        drop(kid_at);
        // The walk: how many times each frame is on the path decides whether a node is
        // its frame's outermost occurrence, whose total counts.
        let mut on_path = vec![0u32; frames];
        let mut todo: Vec<(u32, bool)> = Vec::with_capacity(256);
        let root_kids = &kids[kids_start[0] as usize..kids_start[1] as usize];
        todo.extend(root_kids.iter().rev().map(|&c| (c, true)));
        while let Some((id, enter)) = todo.pop() {
            let f = frame_of[id as usize] as usize;
            if f >= frames {
                continue;
            }
            if !enter {
                on_path[f] -= 1;
                continue;
            }
            if on_path[f] == 0 {
                index.outer[id as usize] = true;
                let w = totals[id as usize];
                index.total_weight[f] = index.total_weight[f].saturating_add(w);
            }
            on_path[f] += 1;
            todo.push((id, false));
            let (a, b) = (kids_start[id as usize], kids_start[id as usize + 1]);
            todo.extend(kids[a as usize..b as usize].iter().map(|&c| (c, true)));
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
