//! The flamegraph of a screen (live or compare): its on-CPU, off-CPU and memory panes,
//! which one shows, whether against the baseline, and the search being typed.

use benchtop_sessions::{Kind, StackTree};

use super::FlameKind;
use super::flame::{FlameOptions, FlameState, FlameUnit};
use super::profile_views::ProfileViews;

/// Which memory profile a memory pane holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// Where resident memory grew: sampled page faults, in bytes (mem.folded).
    Resident,
    /// Bytes a built-in worker allocated, per allocation stack (alloc.folded).
    Allocated,
    /// Bytes a built-in worker holds, per allocation stack: now, on a live run; at the
    /// peak of live bytes, in a saved session (live.folded).
    Live,
}

impl MemoryKind {
    /// In the order `o` shows them.
    pub const ALL: [MemoryKind; 3] = [
        MemoryKind::Resident,
        MemoryKind::Allocated,
        MemoryKind::Live,
    ];

    /// The profile kind the pane shows.
    pub fn kind(self) -> Kind {
        match self {
            MemoryKind::Resident => Kind::Mem,
            MemoryKind::Allocated => Kind::Alloc,
            MemoryKind::Live => Kind::Live,
        }
    }

    /// The pane's title: `resident growth`, `allocated`, `live`.
    pub fn title(self) -> &'static str {
        match self {
            MemoryKind::Resident => "resident growth",
            MemoryKind::Allocated => "allocated",
            MemoryKind::Live => "live",
        }
    }
}

impl FlameKind {
    /// The title of the stacks: `on-CPU`, `off-CPU`, `resident growth`, `allocated`,
    /// `live`.
    pub fn title(self) -> &'static str {
        match self {
            FlameKind::OnCpu => "on-CPU",
            FlameKind::OffCpu => "off-CPU",
            FlameKind::Memory(m) => m.title(),
        }
    }
}

/// The memory panes: one per [`MemoryKind`], in bytes.
#[derive(Debug)]
pub struct MemoryPanes {
    /// Resident growth (page faults).
    pub resident: FlameState,
    /// Bytes allocated.
    pub allocated: FlameState,
    /// Bytes live.
    pub live: FlameState,
}

impl Default for MemoryPanes {
    fn default() -> Self {
        MemoryPanes {
            resident: FlameState::new(FlameUnit::Bytes),
            allocated: FlameState::new(FlameUnit::Bytes),
            live: FlameState::new(FlameUnit::Bytes),
        }
    }
}

impl MemoryPanes {
    /// The pane of `kind`.
    pub fn get(&self, kind: MemoryKind) -> &FlameState {
        match kind {
            MemoryKind::Resident => &self.resident,
            MemoryKind::Allocated => &self.allocated,
            MemoryKind::Live => &self.live,
        }
    }

    /// The pane of `kind`, to change.
    pub fn get_mut(&mut self, kind: MemoryKind) -> &mut FlameState {
        match kind {
            MemoryKind::Resident => &mut self.resident,
            MemoryKind::Allocated => &mut self.allocated,
            MemoryKind::Live => &mut self.live,
        }
    }

    fn all_mut(&mut self) -> [&mut FlameState; 3] {
        [&mut self.resident, &mut self.allocated, &mut self.live]
    }

    /// The memory profiles as they stand now become their own baselines (`b`).
    pub fn take_baseline(&mut self) {
        for pane in self.all_mut() {
            let tree = (!pane.is_empty()).then(|| pane.tree().clone());
            pane.set_baseline(tree);
        }
    }

    /// Whether any memory profile has stacks.
    pub fn any(&self) -> bool {
        MemoryKind::ALL.iter().any(|&k| !self.get(k).is_empty())
    }
}

/// The flamegraph panes of one screen.
#[derive(Debug)]
pub struct FlamePanes {
    /// The on-CPU stacks (samples).
    pub cpu: FlameState,
    /// The off-CPU stacks (µs blocked).
    pub off: FlameState,
    /// The memory profiles (bytes).
    pub memory: MemoryPanes,
    /// Which stacks show.
    pub kind: FlameKind,
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
            cpu: FlameState::new(FlameUnit::Samples),
            off: FlameState::new(FlameUnit::Micros),
            memory: MemoryPanes::default(),
            kind: FlameKind::OnCpu,
            differential: false,
            search_input: None,
            views: ProfileViews::default(),
        }
    }
}

impl FlamePanes {
    /// The pane of the stacks that show.
    pub fn shown(&self) -> &FlameState {
        match self.kind {
            FlameKind::OnCpu => &self.cpu,
            FlameKind::OffCpu => &self.off,
            FlameKind::Memory(m) => self.memory.get(m),
        }
    }

    /// The pane of the stacks that show, to change.
    pub fn shown_mut(&mut self) -> &mut FlameState {
        self.pane_mut(self.kind)
    }

    /// The pane of `kind`'s stacks, to change.
    pub fn pane_mut(&mut self, kind: FlameKind) -> &mut FlameState {
        match kind {
            FlameKind::OnCpu => &mut self.cpu,
            FlameKind::OffCpu => &mut self.off,
            FlameKind::Memory(m) => self.memory.get_mut(m),
        }
    }

    /// Every pane, to change.
    fn all_mut(&mut self) -> [&mut FlameState; 5] {
        let [resident, allocated, live] = self.memory.all_mut();
        [&mut self.cpu, &mut self.off, resident, allocated, live]
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

    /// The next stacks, in the order on-CPU, off-CPU, then each memory profile that has
    /// stacks (resident growth, allocated, live), and back to on-CPU.
    pub fn toggle_kind(&mut self) {
        let order: Vec<FlameKind> = [FlameKind::OnCpu, FlameKind::OffCpu]
            .into_iter()
            .chain(
                MemoryKind::ALL
                    .into_iter()
                    .filter(|&m| !self.memory.get(m).is_empty())
                    .map(FlameKind::Memory),
            )
            .collect();
        let at = order.iter().position(|&k| k == self.kind).unwrap_or(0);
        self.kind = order[(at + 1) % order.len()];
    }

    /// Off-CPU when only those stacks have anything to show; a memory profile when only
    /// it has.
    pub fn prefer_what_has_stacks(&mut self) {
        if !self.cpu.is_empty() {
            return;
        }
        if !self.off.is_empty() {
            self.kind = FlameKind::OffCpu;
        } else if let Some(&m) = MemoryKind::ALL
            .iter()
            .find(|&&m| !self.memory.get(m).is_empty())
        {
            self.kind = FlameKind::Memory(m);
        }
    }

    /// Sets the memory profile of `kind` and its baseline (the compare screen: B's
    /// stacks against A's).
    pub fn set_memory_pair(
        &mut self,
        kind: MemoryKind,
        tree: Option<StackTree>,
        baseline: Option<StackTree>,
    ) {
        let pane = self.memory.get_mut(kind);
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
        assert_eq!(panes.kind, FlameKind::OffCpu);
        panes.toggle_kind();
        assert_eq!(
            panes.kind,
            FlameKind::OnCpu,
            "no memory stacks: on and off only"
        );
        drop(
            panes
                .memory
                .allocated
                .set_tree(tree(&["w", "alloc_here"], 4096)),
        );
        drop(panes.memory.live.set_tree(tree(&["w", "keep_here"], 1024)));
        let mut seen = Vec::new();
        for _ in 0..4 {
            panes.toggle_kind();
            seen.push(panes.kind);
        }
        assert_eq!(
            seen,
            [
                FlameKind::OffCpu,
                FlameKind::Memory(MemoryKind::Allocated),
                FlameKind::Memory(MemoryKind::Live),
                FlameKind::OnCpu,
            ]
        );
        assert_eq!(panes.memory.live.unit(), FlameUnit::Bytes);
    }

    #[test]
    fn a_memory_only_profile_shows_first_and_b_takes_its_baseline() {
        let mut panes = FlamePanes::default();
        drop(
            panes
                .memory
                .resident
                .set_tree(tree(&["p", "touch"], 1 << 20)),
        );
        panes.prefer_what_has_stacks();
        assert_eq!(panes.kind, FlameKind::Memory(MemoryKind::Resident));
        panes.memory.take_baseline();
        assert!(panes.memory.resident.baseline().is_some());
        assert!(panes.memory.live.baseline().is_none(), "nothing to take");
        panes.set_differential(true);
        assert!(panes.shown().differential());
    }
}
