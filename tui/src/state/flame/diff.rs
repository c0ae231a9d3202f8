//! Differential mode: the baseline a profile is compared with, and the scale its changes
//! are drawn on.
//!
//! A box's change is its share of its tree's total minus its share of the baseline's, in
//! the same frames (hidden frames merged alike in both). Changes under [`NOISE_FLOOR`]
//! are noise between two runs and stay neutral; above it the color's depth is
//! proportional to the change, full at [`FULL_SCALE`], so the same color means the same
//! change on every screen (not "the largest change on this one").

use benchtop_sessions::{FrameId, NodeId, StackTree};
use rustc_hash::FxHashMap;

use super::share;
use super::tree::{HidePatterns, ViewTree};

/// Changes smaller than this share of the total (half a percentage point) are drawn
/// neutral: two runs of one workload differ by that much in frames that did not change.
pub const NOISE_FLOOR: f64 = 0.005;

/// The change drawn fully saturated (five percentage points); larger ones are too.
pub const FULL_SCALE: f64 = 0.05;

/// How deep the color of a change of `delta` (a difference of shares) is, 0 (neutral) to
/// 1: 0 under the noise floor, else `|delta| / FULL_SCALE`, at most 1.
pub fn saturation(delta: f64) -> f64 {
    let size = delta.abs();
    if size.is_nan() || size < NOISE_FLOOR {
        return 0.0;
    }
    (size / FULL_SCALE).min(1.0)
}

/// A baseline tree, laid out as the profile is, with the index that finds a node of the
/// profile in it.
#[derive(Debug)]
pub(super) struct Baseline {
    pub(super) tree: StackTree,
    view: ViewTree,
    children: FxHashMap<(NodeId, FrameId), NodeId>,
}

impl Baseline {
    pub(super) fn new(tree: StackTree, patterns: &HidePatterns, hide: bool) -> Self {
        let mut baseline = Baseline {
            tree,
            view: ViewTree::default(),
            children: FxHashMap::default(),
        };
        baseline.rehide(patterns, hide);
        baseline
    }

    /// Lays the baseline out again with other frames hidden.
    pub(super) fn rehide(&mut self, patterns: &HidePatterns, hide: bool) {
        let mut hidden = Vec::new();
        patterns.hidden_frames(&self.tree, hide, &mut hidden);
        self.view.build(&self.tree, &hidden);
        self.children.clear();
        for i in 0..self.view.node_count() {
            let parent = NodeId(i as u32);
            for &child in self.view.children(parent) {
                self.children
                    .insert((parent, self.view.node(child).frame), child);
            }
        }
    }

    /// The child of baseline node `parent` named `name`.
    pub(super) fn child(&self, parent: NodeId, name: &str) -> Option<NodeId> {
        let frame = self.tree.find(name)?;
        self.children.get(&(parent, frame)).copied()
    }

    /// The share of the baseline's total through `node`.
    pub(super) fn share(&self, node: NodeId) -> f64 {
        share(self.view.node(node).total_weight, self.view.total_weight())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_under_the_noise_floor_are_neutral_and_above_it_proportional() {
        assert_eq!(saturation(0.0), 0.0);
        assert_eq!(saturation(NOISE_FLOOR * 0.9), 0.0);
        assert_eq!(saturation(-NOISE_FLOOR * 0.9), 0.0);
        assert_eq!(saturation(f64::NAN), 0.0);
        let one = saturation(0.01);
        assert!(one > 0.0);
        assert!((saturation(0.02) / one - 2.0).abs() < 1e-9, "proportional");
        assert_eq!(saturation(-0.02), saturation(0.02));
        assert_eq!(saturation(FULL_SCALE * 3.0), 1.0);
    }
}
