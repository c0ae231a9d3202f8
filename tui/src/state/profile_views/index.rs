//! What the views share of a profile's functions. Each function's self and total weight
//! (recursion counted once), the nodes where it occurs and which of them are outermost
//! are kept by the stack tree itself as stacks are added (`StackTree::frame_self`,
//! `frame_total`, `frame_nodes`, `is_outer`): a view reads them and never walks the tree,
//! so building one costs about the functions it lists, not the tree's nodes.

use benchtop_sessions::FrameId;

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
    fn pairs_add_up_by_key_heaviest_first() {
        let pairs = vec![
            (FrameId(2), 1),
            (FrameId(1), 3),
            (FrameId(2), 4),
            (FrameId(0), 3),
        ];
        assert_eq!(
            heaviest_first(pairs),
            [(FrameId(2), 5), (FrameId(0), 3), (FrameId(1), 3)]
        );
    }
}
