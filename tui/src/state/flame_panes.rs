//! The flamegraph of a screen (live or compare): a pane per kind of profile the kind
//! table gives one ([`KindSpec::pane`](benchtop_sessions::kinds::KindSpec::pane)), which
//! one shows, whether against the baseline, and the search being typed.

use benchtop_sessions::{ByKind, Kind, KindSet, StackTree};

use super::flame::{FlameOptions, FlameState, FlameUnit};
use super::profile_views::ProfileViews;

/// The kinds with a pane, in the order `o` shows them.
pub fn pane_kinds() -> impl Iterator<Item = Kind> {
    Kind::ALL.into_iter().filter(|k| k.spec().pane)
}

/// The memory profiles with a pane (resident growth, allocated, live), in the order `o`
/// shows them.
pub fn memory_panes() -> impl Iterator<Item = Kind> {
    pane_kinds().filter(|k| k.spec().memory)
}

/// The flamegraph panes of one screen.
#[derive(Debug)]
pub struct FlamePanes {
    /// A pane per kind, each in its kind's unit (on-CPU samples, off-CPU µs blocked,
    /// memory bytes); kinds without a pane keep an empty one. On the heap: a pane is
    /// large, and a screen holds one per kind.
    pub panes: Box<ByKind<FlameState>>,
    /// Which stacks show.
    pub kind: Kind,
    /// They show the difference against the baseline.
    pub differential: bool,
    /// The search being typed, when the search line is open.
    pub search_input: Option<String>,
    /// The other views of the stacks shown (top functions, bottom-up, callers, source).
    pub views: ProfileViews,
}

impl Default for FlamePanes {
    fn default() -> Self {
        FlamePanes {
            panes: Box::new(ByKind::from_fn(|k| FlameState::new(FlameUnit::from(k)))),
            kind: Kind::Cpu,
            differential: false,
            search_input: None,
            views: ProfileViews::default(),
        }
    }
}

impl FlamePanes {
    /// The pane of the stacks that show.
    pub fn shown(&self) -> &FlameState {
        &self.panes[self.kind]
    }

    /// The pane of the stacks that show, to change.
    pub fn shown_mut(&mut self) -> &mut FlameState {
        self.pane_mut(self.kind)
    }

    /// The pane of `kind`'s stacks.
    pub fn pane(&self, kind: Kind) -> &FlameState {
        &self.panes[kind]
    }

    /// The pane of `kind`'s stacks, to change.
    pub fn pane_mut(&mut self, kind: Kind) -> &mut FlameState {
        &mut self.panes[kind]
    }

    /// Every pane, to change.
    fn all_mut(&mut self) -> impl Iterator<Item = &mut FlameState> {
        self.panes.iter_mut().map(|(_, pane)| pane)
    }

    /// The difference against the baseline, on or off, in every pane.
    pub fn set_differential(&mut self, on: bool) {
        self.differential = on;
        for pane in self.all_mut() {
            pane.set_differential(on);
        }
    }

    /// Sets how every pane shows its profile.
    pub fn set_options(&mut self, options: &FlameOptions) {
        for pane in self.all_mut() {
            pane.set_options(options);
        }
    }

    /// Folds chains of single-child frames, or unfolds them, in every pane (as the shown
    /// one was).
    pub fn toggle_folding(&mut self) {
        let on = !self.shown().folding();
        for pane in self.all_mut() {
            pane.set_folding(on);
        }
    }

    /// Short names, or full ones, in every pane.
    pub fn toggle_short_names(&mut self) {
        let on = !self.shown().short_names();
        for pane in self.all_mut() {
            pane.set_short_names(on);
        }
    }

    /// Hides the plumbing frames, or shows every frame, in every pane.
    pub fn toggle_hiding(&mut self) {
        let on = !self.shown().hiding();
        for pane in self.all_mut() {
            pane.set_hiding(on);
        }
    }

    /// The kinds `o` goes through: on- and off-CPU always, each memory profile when it
    /// has stacks.
    /// The kinds of the default profile set (on- and off-CPU) always; the others (waits,
    /// each memory profile) when they have stacks.
    fn cycle(&self) -> Vec<Kind> {
        pane_kinds()
            .filter(|&k| KindSet::BOTH.contains(k) || !self.panes[k].is_empty())
            .collect()
    }

    /// The next stacks, in the order on-CPU, off-CPU, then each other profile that has
    /// stacks (waits, resident growth, allocated, live), and back to on-CPU.
    pub fn toggle_kind(&mut self) {
        self.kind = self.next_kind();
    }

    /// The stacks `o` shows next.
    pub fn next_kind(&self) -> Kind {
        let order = self.cycle();
        let at = order.iter().position(|&k| k == self.kind).unwrap_or(0);
        order
            .get((at + 1) % order.len().max(1))
            .copied()
            .unwrap_or(Kind::Cpu)
    }

    /// The first kind with stacks, in `o`'s order, when on-CPU has none: off-CPU when only
    /// those stacks have anything to show; a memory profile when only it has.
    pub fn prefer_what_has_stacks(&mut self) {
        if !self.panes[Kind::Cpu].is_empty() {
            return;
        }
        if let Some(k) = pane_kinds().find(|&k| !self.panes[k].is_empty()) {
            self.kind = k;
        }
    }

    /// Whether any memory profile has stacks.
    pub fn any_memory(&self) -> bool {
        memory_panes().any(|k| !self.panes[k].is_empty())
    }

    /// The memory profiles as they stand now become their own baselines (`b`).
    pub fn take_memory_baseline(&mut self) {
        for kind in memory_panes() {
            let pane = &mut self.panes[kind];
            let tree = (!pane.is_empty()).then(|| pane.tree().clone());
            pane.set_baseline(tree);
        }
    }

    /// Sets the stacks of `kind` and their baseline (the compare screen: B's stacks
    /// against A's).
    pub fn set_pair(&mut self, kind: Kind, tree: Option<StackTree>, baseline: Option<StackTree>) {
        let pane = &mut self.panes[kind];
        if let Some(tree) = tree {
            // A fresh pane hands back an empty tree.
            drop(pane.set_tree(tree));
        }
        pane.set_baseline(baseline);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(frames: &[&str], weight: u64) -> StackTree {
        let mut t = StackTree::new();
        t.add_names(frames.iter().copied(), weight);
        t
    }

    #[test]
    fn o_cycles_through_the_profiles_that_have_stacks() {
        let mut panes = FlamePanes::default();
        panes.toggle_kind();
        assert_eq!(panes.kind, Kind::OffCpu);
        panes.toggle_kind();
        assert_eq!(panes.kind, Kind::Cpu, "no memory stacks: on and off only");
        drop(panes.panes[Kind::Alloc].set_tree(tree(&["w", "alloc_here"], 4096)));
        drop(panes.panes[Kind::Live].set_tree(tree(&["w", "keep_here"], 1024)));
        let mut seen = Vec::new();
        for _ in 0..4 {
            panes.toggle_kind();
            seen.push(panes.kind);
        }
        assert_eq!(seen, [Kind::OffCpu, Kind::Alloc, Kind::Live, Kind::Cpu,]);
        assert_eq!(panes.panes[Kind::Live].unit(), FlameUnit::Bytes);
    }

    #[test]
    fn a_memory_only_profile_shows_first_and_b_takes_its_baseline() {
        let mut panes = FlamePanes::default();
        drop(panes.panes[Kind::Mem].set_tree(tree(&["p", "touch"], 1 << 20)));
        panes.prefer_what_has_stacks();
        assert_eq!(panes.kind, Kind::Mem);
        panes.take_memory_baseline();
        assert!(panes.panes[Kind::Mem].baseline().is_some());
        assert!(
            panes.panes[Kind::Live].baseline().is_none(),
            "nothing to take"
        );
        panes.set_differential(true);
        assert!(panes.shown().differential());
    }
}
