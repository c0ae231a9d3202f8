//! The flamegraph of a screen (live or compare): its on-CPU and off-CPU panes, which one
//! shows, whether against the baseline, and the search being typed.

use super::FlameKind;
use super::flame::{FlameOptions, FlameState, FlameUnit};
use super::profile_views::ProfileViews;

/// The flamegraph panes of one screen.
#[derive(Debug)]
pub struct FlamePanes {
    /// The on-CPU stacks (samples).
    pub cpu: FlameState,
    /// The off-CPU stacks (µs blocked).
    pub off: FlameState,
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
        }
    }

    /// The pane of the stacks that show, to change.
    pub fn shown_mut(&mut self) -> &mut FlameState {
        match self.kind {
            FlameKind::OnCpu => &mut self.cpu,
            FlameKind::OffCpu => &mut self.off,
        }
    }

    /// The pane of `kind`'s stacks, to change.
    pub fn pane_mut(&mut self, kind: FlameKind) -> &mut FlameState {
        match kind {
            FlameKind::OnCpu => &mut self.cpu,
            FlameKind::OffCpu => &mut self.off,
        }
    }

    /// The difference against the baseline, on or off, in both panes.
    pub fn set_differential(&mut self, on: bool) {
        self.differential = on;
        self.cpu.set_differential(on);
        self.off.set_differential(on);
    }

    /// Sets how both panes show their profiles.
    pub fn set_options(&mut self, options: &FlameOptions) {
        self.cpu.set_options(options);
        self.off.set_options(options);
    }

    /// Folds chains of single-child frames, or unfolds them, in both panes (as the shown
    /// one was).
    pub fn toggle_folding(&mut self) {
        let on = !self.shown().folding();
        self.cpu.set_folding(on);
        self.off.set_folding(on);
    }

    /// Short names, or full ones, in both panes.
    pub fn toggle_short_names(&mut self) {
        let on = !self.shown().short_names();
        self.cpu.set_short_names(on);
        self.off.set_short_names(on);
    }

    /// Hides the plumbing frames, or shows every frame, in both panes.
    pub fn toggle_hiding(&mut self) {
        let on = !self.shown().hiding();
        self.cpu.set_hiding(on);
        self.off.set_hiding(on);
    }

    /// On-CPU or off-CPU: the other one.
    pub fn toggle_kind(&mut self) {
        self.kind = match self.kind {
            FlameKind::OnCpu => FlameKind::OffCpu,
            FlameKind::OffCpu => FlameKind::OnCpu,
        };
    }

    /// Off-CPU when only those stacks have anything to show.
    pub fn prefer_what_has_stacks(&mut self) {
        if self.cpu.is_empty() && !self.off.is_empty() {
            self.kind = FlameKind::OffCpu;
        }
    }
}
