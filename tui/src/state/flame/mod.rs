//! The flame pane's model: a laid-out stack tree, zoom, search, and what makes a real
//! profile readable: hidden plumbing, folded chains, short names.
//!
//! [`FlameState`] owns the live [`StackTree`] and lays it out as an icicle when data
//! arrives ([`FlameState::set_tree`]), when the zoom, the search, the baseline or a toggle
//! changes — never per frame. The layout is in normalized coordinates (fractions of the
//! zoomed node's total), so the view only scales it to the columns it has.
//!
//! What is laid out is the profile with its hidden frames merged into their callers
//! ([`tree`]); chains of frames that each call one other fold into one box
//! (`layout.rs`), and the pane opens on the first frame that forks or does work of its own.
//!
//! ```
//! use benchtop::state::flame::FlameState;
//! use benchtop_sessions::StackTree;
//!
//! let mut tree = StackTree::new();
//! tree.add_names(["bt-ring", "main", "run"], 3);
//! tree.add_names(["bt-ring", "main", "idle"], 1);
//! let mut flame = FlameState::default();
//! flame.set_tree(tree);
//! assert_eq!(flame.rows().len(), 3);
//! assert_eq!(flame.name(flame.rows()[2][0].node), "idle");
//!
//! flame.search("RUN");
//! assert_eq!(flame.matches(), 1);
//! assert_eq!(flame.match_share(), 0.75);
//! ```

mod category;
pub mod diff;
mod layout;
mod nav;
mod search;
pub mod tree;
mod unit;

use std::borrow::Cow;

use benchtop_sessions::names::short_name;
use benchtop_sessions::{FrameId, NodeId, StackTree};

pub use category::Category;
use diff::Baseline;
pub use layout::{FOLD_SIDE, FlameBox, MAX_DEPTH, MIN_BOX_WIDTH, MIN_FOLD};
use search::Search;
use tree::{HidePatterns, Named, ViewTree, path_to, resolve};
pub use unit::FlameUnit;

/// How a pane shows its profile: the toggles and the frames hidden, as the config file
/// sets them (`[tui]` in [`crate::config`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlameOptions {
    /// Names shortened: generic parameters and closures elided, module paths cut.
    pub short_names: bool,
    /// Frames matching `hidden` merged into their callers.
    pub hide: bool,
    /// The patterns of frames to hide (see [`tree::HidePatterns`]).
    pub hidden: Vec<String>,
    /// Chains of single-child frames folded into one box.
    pub fold: bool,
}

impl Default for FlameOptions {
    fn default() -> Self {
        FlameOptions {
            short_names: true,
            hide: true,
            hidden: tree::DEFAULT_HIDDEN
                .iter()
                .map(|p| (*p).to_owned())
                .collect(),
            fold: true,
        }
    }
}

/// The flame pane's state: the profile, its layout, zoom, selection, search and baseline.
///
/// Positions in the layout are `(row, index)` pairs: `rows()[row][index]`. Node ids
/// ([`FlameBox::node`], [`FlameState::name`]…) are ids of the laid-out tree, not of the
/// profile's [`StackTree`].
#[derive(Debug)]
pub struct FlameState {
    tree: StackTree,
    /// The tree laid out, and the one the next is built into.
    view: ViewTree,
    spare: ViewTree,
    unit: FlameUnit,
    baseline: Option<Baseline>,
    differential: bool,
    /// From a child of the root down to the zoomed node; empty when not zoomed.
    zoom_path: Vec<NodeId>,
    rows: Vec<Vec<FlameBox>>,
    selected: Option<(usize, usize)>,
    max_abs_delta: f64,
    search: Search,
    short_names: bool,
    hide: bool,
    fold: bool,
    patterns: HidePatterns,
    /// Per frame of the profile, whether it is hidden.
    hidden: Vec<bool>,
    /// How many times the profile was replaced.
    generation: u64,
    /// The first nodes of the chains unfolded with Enter, and per node whether it is a link
    /// of one of them.
    expanded: Vec<NodeId>,
    unfolded: Vec<bool>,
    /// The crates counted as the program's own, from the processes' names.
    own: Vec<String>,
    /// Reused while laying out: the children of one box, and the baseline nodes of the
    /// boxes of the previous and the current row.
    scratch: Vec<NodeId>,
    base_prev: Vec<Option<NodeId>>,
    base_next: Vec<Option<NodeId>>,
}

impl Default for FlameState {
    fn default() -> Self {
        let options = FlameOptions::default();
        FlameState {
            tree: StackTree::default(),
            view: ViewTree::default(),
            spare: ViewTree::default(),
            unit: FlameUnit::default(),
            baseline: None,
            differential: false,
            zoom_path: Vec::new(),
            rows: Vec::new(),
            selected: None,
            max_abs_delta: 0.0,
            search: Search::default(),
            short_names: options.short_names,
            hide: options.hide,
            fold: options.fold,
            patterns: HidePatterns::default(),
            hidden: Vec::new(),
            generation: 0,
            expanded: Vec::new(),
            unfolded: Vec::new(),
            own: Vec::new(),
            scratch: Vec::new(),
            base_prev: Vec::new(),
            base_next: Vec::new(),
        }
    }
}

/// `part / whole`, 0 for an empty whole.
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

impl FlameState {
    /// An empty pane whose weights count `unit`.
    pub fn new(unit: FlameUnit) -> Self {
        FlameState {
            unit,
            ..FlameState::default()
        }
    }

    /// Replaces the profile (about once a second while a run goes on) and lays it out.
    ///
    /// The zoom and the selection are kept by their frame names from the root, so they
    /// survive a new tree; a path that no longer exists falls back to its deepest prefix
    /// that does. Returns the tree it replaced: freeing 100k nodes (a `Vec` and a name
    /// each) takes about 5 ms, ten times the layout's work (`benches/flame.rs`), so the
    /// caller decides where that happens.
    pub fn set_tree(&mut self, tree: StackTree) -> StackTree {
        self.rebuild(Some(tree)).unwrap_or_default()
    }

    /// Interns a frame name in the profile, for [`FlameState::node_under`].
    pub fn intern(&mut self, name: &str) -> FrameId {
        self.tree.intern(name)
    }

    /// The profile's node of the stack `parent` plus `frame` ([`NodeId::ROOT`] as
    /// `parent` for a one-frame stack), made without weight when new: what
    /// [`FlameState::add_stacks`] adds weights to. The ids hold while
    /// [`FlameState::generation`] stays the same.
    pub fn node_under(&mut self, parent: NodeId, frame: FrameId) -> NodeId {
        self.tree.node_under(parent, frame)
    }

    /// How many times the profile was replaced ([`FlameState::set_tree`]): node ids of
    /// [`FlameState::node_under`] held elsewhere are stale once it moves on.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Adds weights to stacks of the profile, each `(node, weight)` a node of
    /// [`FlameState::node_under`], and lays the pane out again with its zoom, selection,
    /// search and unfolded chains kept. A live run's interval adds a few thousand stacks
    /// to a profile that may hold a million nodes: this takes time in proportion to what
    /// was added, where [`FlameState::set_tree`] rebuilds the whole.
    pub fn add_stacks(&mut self, adds: &[(NodeId, u64)]) {
        for &(node, weight) in adds {
            self.tree.add_at(node, weight);
        }
        self.patterns
            .more_hidden_frames(&self.tree, self.hide, &mut self.hidden);
        let (known, now) = (self.view.mapped(), self.tree.node_count());
        if now - known > known / 2 {
            // Most of the profile is new (its first stacks): built whole, which also
            // indexes only what merges.
            self.rebuild(None);
            return;
        }
        self.view.extend(&self.tree, &self.hidden, adds);
        self.own = category::own_crates(
            self.view
                .children(NodeId::ROOT)
                .iter()
                .map(|&c| self.tree.name(self.view.node(c).frame)),
        );
        self.mark_unfolded();
        self.match_frames();
        self.relayout_keeping_selection();
    }

    /// Builds the laid-out tree again, from `new` when given (which replaces the profile,
    /// handed back) or from the profile with other frames hidden; keeps the zoom, the
    /// selection and the unfolded chains by their names.
    fn rebuild(&mut self, new: Option<StackTree>) -> Option<StackTree> {
        let lenient = new.is_none();
        let through = lenient.then_some(&self.patterns);
        let selected = self.selected_box().map(|b| b.node);
        let (zoom, selected, expanded) = {
            let source = new.as_ref().unwrap_or(&self.tree);
            self.patterns
                .hidden_frames(source, self.hide, &mut self.hidden);
            self.spare.build(source, &self.hidden);
            let old = Named {
                view: &self.view,
                names: &self.tree,
            };
            let fresh = Named {
                view: &self.spare,
                names: source,
            };
            let zoom = resolve(old, &self.zoom_path, fresh, through);
            let selected = selected.map(|n| resolve(old, &path_to(&self.view, n), fresh, through));
            let expanded: Vec<NodeId> = self
                .expanded
                .iter()
                .filter_map(|&n| {
                    let path = path_to(&self.view, n);
                    let found = resolve(old, &path, fresh, None);
                    (found.len() == path.len()).then(|| found.last().copied())?
                })
                .collect();
            (zoom, selected, expanded)
        };
        std::mem::swap(&mut self.view, &mut self.spare);
        if new.is_some() {
            self.generation += 1;
        }
        let old = new.map(|tree| std::mem::replace(&mut self.tree, tree));
        self.own = category::own_crates(
            self.view
                .children(NodeId::ROOT)
                .iter()
                .map(|&c| self.tree.name(self.view.node(c).frame)),
        );
        if lenient && let Some(baseline) = &mut self.baseline {
            baseline.rehide(&self.patterns, self.hide);
        }
        self.zoom_path = zoom;
        self.expanded = expanded;
        self.mark_unfolded();
        self.match_frames();
        self.lay_out();
        self.count_matches();
        // A selection that fell back above the zoomed node goes to the default: the
        // zoomed node, or the first fork of the hot path.
        match selected.filter(|path| path.len() >= self.zoom_path.len().max(1)) {
            Some(path) => match path.last() {
                Some(&node) => self.select_node(node),
                None => self.select_default(),
            },
            None => self.select_default(),
        }
        // Last, so that freeing it does not slow the work above down.
        old
    }

    /// Sets how the pane shows its profile, and lays it out again when that changed.
    pub fn set_options(&mut self, options: &FlameOptions) {
        self.short_names = options.short_names;
        let patterns = HidePatterns::new(options.hidden.iter().map(String::as_str));
        let hidden_changed = !patterns.patterns().eq(self.patterns.patterns());
        let changed = hidden_changed || options.hide != self.hide;
        self.patterns = patterns;
        self.hide = options.hide;
        if changed {
            self.rebuild(None);
        }
        self.set_folding(options.fold);
    }

    /// Sets or clears the baseline that differential mode compares the profile with.
    pub fn set_baseline(&mut self, baseline: Option<StackTree>) {
        self.baseline = baseline.map(|tree| Baseline::new(tree, &self.patterns, self.hide));
        self.relayout_keeping_selection();
    }

    /// Turns differential mode on or off. It colors boxes only while a baseline is set.
    pub fn set_differential(&mut self, on: bool) {
        if self.differential != on {
            self.differential = on;
            self.relayout_keeping_selection();
        }
    }

    /// Whether differential mode is on (whether or not a baseline is set).
    pub fn differential(&self) -> bool {
        self.differential
    }

    /// Whether the boxes carry deltas: differential mode is on and a baseline is set.
    pub fn differential_active(&self) -> bool {
        self.differential && self.baseline.is_some()
    }

    /// The baseline, when one is set.
    pub fn baseline(&self) -> Option<&StackTree> {
        self.baseline.as_ref().map(|b| &b.tree)
    }

    /// The largest `|delta|` of the laid-out boxes (0 outside differential mode).
    pub fn max_abs_delta(&self) -> f64 {
        self.max_abs_delta
    }

    /// Sets what the weights count.
    pub fn set_unit(&mut self, unit: FlameUnit) {
        self.unit = unit;
    }

    /// What the weights count.
    pub fn unit(&self) -> FlameUnit {
        self.unit
    }

    /// The profile.
    pub fn tree(&self) -> &StackTree {
        &self.tree
    }

    /// True when the profile has no samples.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    // ---- toggles ----

    /// Whether names are shortened.
    pub fn short_names(&self) -> bool {
        self.short_names
    }

    /// Shortens names, or shows them in full. Nothing is laid out again: names are only
    /// drawn.
    pub fn set_short_names(&mut self, on: bool) {
        self.short_names = on;
    }

    /// Whether frames matching the hide patterns are merged into their callers.
    pub fn hiding(&self) -> bool {
        self.hide
    }

    /// Merges the frames matching the hide patterns into their callers, or shows every
    /// frame; the selection and the zoom stay on the frames they were on.
    pub fn set_hiding(&mut self, on: bool) {
        if self.hide != on {
            self.hide = on;
            self.rebuild(None);
        }
    }

    /// Nodes of the profile merged into their callers (0 when not hiding).
    pub fn hidden_nodes(&self) -> usize {
        self.view.merged()
    }

    /// Whether chains of single-child frames are folded.
    pub fn folding(&self) -> bool {
        self.fold
    }

    /// Folds chains of single-child frames into one box, or shows every frame on its own
    /// row. Folding again folds the chains unfolded with Enter too.
    pub fn set_folding(&mut self, on: bool) {
        if self.fold != on {
            self.fold = on;
            self.expanded.clear();
            self.mark_unfolded();
            self.relayout_keeping_selection();
        }
    }

    // ---- the layout ----

    /// The laid-out rows, top (the zoomed node, or the root's children when not zoomed)
    /// to bottom; each row's boxes are left to right, siblings sorted by name.
    pub fn rows(&self) -> &[Vec<FlameBox>] {
        &self.rows
    }

    /// The selected box's `(row, index)` in [`FlameState::rows`].
    pub fn selected_position(&self) -> Option<(usize, usize)> {
        self.selected
    }

    /// The selected box.
    pub fn selected_box(&self) -> Option<&FlameBox> {
        let (row, index) = self.selected?;
        self.rows.get(row)?.get(index)
    }

    /// The zoomed node; [`NodeId::ROOT`] when not zoomed.
    pub fn zoom_node(&self) -> NodeId {
        self.zoom_path.last().copied().unwrap_or(NodeId::ROOT)
    }

    /// Whether a node other than the root is zoomed in on.
    pub fn is_zoomed(&self) -> bool {
        !self.zoom_path.is_empty()
    }

    /// The names from the root's child down to the zoomed node (the breadcrumb); empty when
    /// not zoomed.
    pub fn zoom_path(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.zoom_path
            .iter()
            .map(|&n| self.tree.name(self.view.node(n).frame))
    }

    /// The total weight of the zoomed node: what the widths are fractions of.
    pub fn zoom_total(&self) -> u64 {
        self.total(self.zoom_node())
    }

    /// The frame name of `node`; empty for the root or a node this tree does not have.
    pub fn name(&self, node: NodeId) -> &str {
        if node == NodeId::ROOT || !self.view.has(node) {
            return "";
        }
        self.tree.name(self.view.node(node).frame)
    }

    /// The name of `node` as the pane shows it: shortened when names are.
    pub fn display_name(&self, node: NodeId) -> Cow<'_, str> {
        let name = self.name(node);
        if self.short_names {
            Cow::Owned(short_name(name, 0))
        } else {
            Cow::Borrowed(name)
        }
    }

    /// What a box says: its frame's name, or for a folded chain
    /// `… 37 frames: first → last`.
    pub fn label(&self, b: &FlameBox) -> Cow<'_, str> {
        if b.is_fold() {
            Cow::Owned(format!(
                "… {} frames: {} → {}",
                b.frames,
                self.display_name(b.node),
                self.display_name(b.last)
            ))
        } else {
            self.display_name(b.node)
        }
    }

    /// Where `node`'s code comes from: the top frames are processes, the others are
    /// read from their names.
    pub fn category(&self, node: NodeId) -> Category {
        if !self.view.has(node) || node == NodeId::ROOT {
            return Category::Unknown;
        }
        if self.view.node(node).parent == NodeId::ROOT {
            return Category::Process;
        }
        category::category(self.name(node), &self.own)
    }

    /// The total weight of `node` (0 for a node this tree does not have).
    pub fn total(&self, node: NodeId) -> u64 {
        if !self.view.has(node) {
            return 0;
        }
        self.view.node(node).total_weight
    }

    /// The self weight of `node`: stacks ending there, hidden callees' included (0 for a
    /// node this tree does not have).
    pub fn self_weight(&self, node: NodeId) -> u64 {
        if !self.view.has(node) {
            return 0;
        }
        self.view.node(node).self_weight
    }

    /// The caller of `node` in the laid-out tree ([`NodeId::ROOT`] for a top frame or a
    /// node this tree does not have).
    pub fn parent(&self, node: NodeId) -> NodeId {
        if !self.view.has(node) {
            return NodeId::ROOT;
        }
        self.view.node(node).parent
    }

    fn relayout_keeping_selection(&mut self) {
        match self.selected_box().map(|b| b.node) {
            Some(node) => self.relayout_selecting(node),
            None => {
                self.lay_out();
                self.count_matches();
                self.select_default();
            }
        }
    }

    fn relayout_selecting(&mut self, node: NodeId) {
        self.lay_out();
        self.count_matches();
        self.select_node(node);
    }
}

#[cfg(test)]
mod tests;
