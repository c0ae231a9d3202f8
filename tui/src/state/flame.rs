//! The flame pane's model: a laid-out stack tree, zoom and search.
//!
//! [`FlameState`] owns the live [`StackTree`] and lays it out as an icicle when data
//! arrives ([`FlameState::set_tree`]), when the zoom, the search or the baseline changes —
//! never per frame. The layout is in normalized coordinates (fractions of the zoomed node's
//! total), so the view only scales it to the columns it has.
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
//!
//! Over 1,000 lines only with its tests, which stay at the end of the file as the
//! project's tests do; the code is about 940 lines.

use std::collections::HashMap;

use benchtop_sessions::units::human_ns;
use benchtop_sessions::{FrameId, NodeId, StackKind, StackTree};

/// Boxes narrower than this fraction of the zoomed node's total are left out of the layout.
///
/// At 1/2000 a box is a twelfth of a column of a 160-column terminal: it would never be
/// drawn, and leaving it out bounds a row to 2000 boxes however wide the tree is. Chosen
/// with `benches/flame.rs`, which lays out and draws 100k distinct frames.
pub const MIN_BOX_WIDTH: f64 = 1.0 / 2000.0;

/// Rows laid out from the zoomed node down; deeper frames are reached by zooming in.
/// Bounds the layout with [`MIN_BOX_WIDTH`] to `MAX_DEPTH * 2000` boxes
/// (`benches/flame.rs`).
pub const MAX_DEPTH: usize = 128;

/// What the weights of the tree count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FlameUnit {
    /// On-CPU samples.
    #[default]
    Samples,
    /// Microseconds blocked (off-CPU stacks).
    Micros,
}

impl FlameUnit {
    /// The unit's name as a count is followed by it: `samples` or `µs`.
    pub fn label(self) -> &'static str {
        match self {
            FlameUnit::Samples => "samples",
            FlameUnit::Micros => "µs",
        }
    }

    /// A weight for people: `12,345 samples`, or a duration with three significant digits
    /// (`1.23 ms`) for microseconds.
    pub fn format(self, weight: u64) -> String {
        match self {
            FlameUnit::Samples => format!("{} samples", thousands(weight)),
            FlameUnit::Micros => human_ns(weight as f64 * 1e3),
        }
    }
}

impl From<StackKind> for FlameUnit {
    fn from(kind: StackKind) -> Self {
        match kind {
            StackKind::OffCpu => FlameUnit::Micros,
            _ => FlameUnit::Samples,
        }
    }
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One laid-out box: a node of the tree on one row of the icicle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlameBox {
    /// The node drawn.
    pub node: NodeId,
    /// Left edge, as a fraction of the zoomed node's total (0 to 1).
    pub start: f64,
    /// Width, as a fraction of the zoomed node's total.
    pub width: f64,
    /// In differential mode with a baseline: the node's share of its tree's total minus its
    /// share of the baseline's (positive is hotter). `None` otherwise.
    pub delta: Option<f64>,
    /// In differential mode: the stack through this node is absent from the baseline (its
    /// delta is then its whole share).
    pub new_frame: bool,
    /// The frame's name matches the search.
    pub matched: bool,
}

/// The flame pane's state: the profile, its layout, zoom, selection, search and baseline.
///
/// Positions in the layout are `(row, index)` pairs: `rows()[row][index]`.
#[derive(Debug, Default)]
pub struct FlameState {
    tree: StackTree,
    unit: FlameUnit,
    baseline: Option<Baseline>,
    differential: bool,
    /// From a child of the root down to the zoomed node; empty when not zoomed.
    zoom_path: Vec<NodeId>,
    rows: Vec<Vec<FlameBox>>,
    selected: Option<(usize, usize)>,
    max_abs_delta: f64,
    search: Search,
    /// Reused while laying out: the children of one box, and the baseline nodes of the
    /// boxes of the previous and the current row.
    scratch: Vec<NodeId>,
    base_prev: Vec<Option<NodeId>>,
    base_next: Vec<Option<NodeId>>,
}

/// The search and what it found under the zoomed node.
#[derive(Debug, Default)]
struct Search {
    /// The query as given; empty when not searching.
    query: String,
    /// Whether each frame of the tree matches, by [`FrameId`].
    frame_matches: Vec<bool>,
    /// Matching nodes under the zoomed node (itself included).
    matches: usize,
    /// Weight of the stacks through a match under the zoomed node, each counted once.
    matched_weight: u64,
    /// Reused while counting: per node, whether it is under the zoomed node and a match.
    node_flags: Vec<u8>,
    /// Reused while matching: the frame names lowered, a line each, and where each starts.
    names: String,
    starts: Vec<usize>,
}

/// A baseline tree with the indexes that find a node of the live tree in it.
#[derive(Debug)]
struct Baseline {
    tree: StackTree,
    frames: HashMap<Box<str>, FrameId>,
    children: HashMap<(NodeId, FrameId), NodeId>,
}

impl Baseline {
    fn new(tree: StackTree) -> Self {
        let frames = (0..tree.frame_count())
            .map(|i| {
                let id = FrameId(i as u32);
                (Box::from(tree.name(id)), id)
            })
            .collect();
        let mut children = HashMap::with_capacity(tree.node_count());
        for i in 0..tree.node_count() {
            let parent = NodeId(i as u32);
            for &child in &tree.node(parent).children {
                children.insert((parent, tree.node(child).frame), child);
            }
        }
        Baseline {
            tree,
            frames,
            children,
        }
    }

    /// The child of baseline node `parent` named `name`.
    fn child(&self, parent: NodeId, name: &str) -> Option<NodeId> {
        let frame = *self.frames.get(name)?;
        self.children.get(&(parent, frame)).copied()
    }

    /// The share of the baseline's total through `node`.
    fn share(&self, node: NodeId) -> f64 {
        share(self.tree.node(node).total_weight, self.tree.total_weight())
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
        let zoom = resolve(&self.tree, &self.zoom_path, &tree);
        let selected = self
            .selected_box()
            .map(|b| resolve(&self.tree, &path_to(&self.tree, b.node), &tree));
        let old = std::mem::replace(&mut self.tree, tree);
        self.zoom_path = zoom;
        self.match_frames();
        self.lay_out();
        self.count_matches();
        // A selection that fell back above the zoomed node goes to the default: the
        // zoomed node, or the widest of the top row.
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

    /// Sets or clears the baseline that differential mode compares the profile with.
    pub fn set_baseline(&mut self, baseline: Option<StackTree>) {
        self.baseline = baseline.map(Baseline::new);
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

    /// The largest `|delta|` of the laid-out boxes (0 outside differential mode): the
    /// delta that gets the most intense color, as difffolded flamegraphs scale them.
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
            .map(|&n| self.tree.name(self.tree.node(n).frame))
    }

    /// The total weight of the zoomed node: what the widths are fractions of.
    pub fn zoom_total(&self) -> u64 {
        self.tree.node(self.zoom_node()).total_weight
    }

    /// The frame name of `node`; empty for the root or a node this tree does not have.
    pub fn name(&self, node: NodeId) -> &str {
        if node == NodeId::ROOT || node.0 as usize >= self.tree.node_count() {
            return "";
        }
        self.tree.name(self.tree.node(node).frame)
    }

    /// The total weight of `node` (0 for a node this tree does not have).
    pub fn total(&self, node: NodeId) -> u64 {
        if node.0 as usize >= self.tree.node_count() {
            return 0;
        }
        self.tree.node(node).total_weight
    }

    // ---- navigation ----

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
        let parent = self.tree.node(b.node).parent;
        // The parent starts where its first child does: the last box starting at or
        // before this one.
        let above = &self.rows[row - 1];
        let at = above.partition_point(|p| p.start <= b.start);
        let found = at
            .checked_sub(1)
            .filter(|&i| above[i].node == parent)
            .or_else(|| above.iter().position(|p| p.node == parent));
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
        let b = self.rows.get(row).and_then(|r| r.get(index));
        let (Some(b), Some(below)) = (b, self.rows.get(row + 1)) else {
            return false;
        };
        let first = below.partition_point(|c| c.start < b.start);
        let mut best: Option<(usize, f64)> = None;
        for (i, c) in below.iter().enumerate().skip(first) {
            if self.tree.node(c.node).parent != b.node {
                break;
            }
            if best.is_none_or(|(_, w)| c.width > w) {
                best = Some((i, c.width));
            }
        }
        match best {
            Some((i, _)) => {
                self.selected = Some((row + 1, i));
                true
            }
            None => false,
        }
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

    /// Zooms in on the selected box (Enter): it becomes the top row at full width. False
    /// when nothing is selected or the selection is already the zoomed node.
    pub fn zoom_in(&mut self) -> bool {
        let Some(node) = self.selected_box().map(|b| b.node) else {
            return false;
        };
        if node == self.zoom_node() {
            return false;
        }
        self.zoom_path = path_to(&self.tree, node);
        self.relayout_selecting(node);
        true
    }

    /// Zooms out one level (Esc), keeping the node that was zoomed selected. False when
    /// not zoomed, so Esc can back out of something else.
    pub fn zoom_out(&mut self) -> bool {
        let Some(node) = self.zoom_path.pop() else {
            return false;
        };
        self.relayout_selecting(node);
        true
    }

    /// Shows the whole tree again, keeping the selection. False when not zoomed.
    pub fn reset_zoom(&mut self) -> bool {
        if self.zoom_path.is_empty() {
            return false;
        }
        self.zoom_path.clear();
        self.relayout_keeping_selection();
        true
    }

    // ---- search ----

    /// Searches frame names for `query`, ignoring case; an empty query ends the search.
    /// The selection stays where it is: [`FlameState::next_match`] moves to a match.
    pub fn search(&mut self, query: &str) {
        if self.search.query == query {
            return;
        }
        self.search.query.clear();
        self.search.query.push_str(query);
        self.match_frames();
        for row in &mut self.rows {
            for b in row {
                b.matched = frame_matches(&self.search.frame_matches, &self.tree, b.node);
            }
        }
        self.count_matches();
    }

    /// The query searched for; empty when not searching.
    pub fn query(&self) -> &str {
        &self.search.query
    }

    /// Matching nodes under the zoomed node, itself included (a node per stack prefix, so a
    /// frame called from two places counts twice). Some may be too narrow to be laid out.
    pub fn matches(&self) -> usize {
        self.search.matches
    }

    /// The share of the zoomed node's total in stacks through a match (0 to 1), each stack
    /// counted once even when a match is nested in another.
    pub fn match_share(&self) -> f64 {
        share(self.search.matched_weight, self.zoom_total())
    }

    /// The weight of the stacks through a match under the zoomed node, each counted once.
    pub fn matched_weight(&self) -> u64 {
        self.search.matched_weight
    }

    /// Selects the next matching box in layout order (rows top to bottom, boxes left to
    /// right), wrapping around (`n`). False when no laid-out box matches.
    pub fn next_match(&mut self) -> bool {
        self.step_match(true)
    }

    /// Selects the previous matching box in layout order, wrapping around (`N`). False when
    /// no laid-out box matches.
    pub fn prev_match(&mut self) -> bool {
        self.step_match(false)
    }

    fn step_match(&mut self, forward: bool) -> bool {
        let positions = || {
            self.rows
                .iter()
                .enumerate()
                .flat_map(|(r, row)| row.iter().enumerate().map(move |(i, b)| ((r, i), b)))
                .filter(|(_, b)| b.matched)
                .map(|(p, _)| p)
        };
        let found = match (self.selected, forward) {
            (Some(at), true) => positions().find(|&p| p > at).or_else(|| positions().next()),
            (Some(at), false) => positions()
                .take_while(|&p| p < at)
                .last()
                .or_else(|| positions().next_back()),
            (None, true) => positions().next(),
            (None, false) => positions().next_back(),
        };
        match found {
            Some(p) => {
                self.selected = Some(p);
                true
            }
            None => false,
        }
    }

    /// Selects the heaviest node of the frame named `name`, leaving the zoom when that
    /// node lies outside it: how the other views of the profile select a function here.
    /// False when the tree has no such frame.
    pub fn select_frame(&mut self, name: &str) -> bool {
        let Some(frame) = self.tree.find(name) else {
            return false;
        };
        let tree = &self.tree;
        let best = (1..tree.node_count() as u32)
            .map(NodeId)
            .filter(|&n| tree.node(n).frame == frame)
            .max_by_key(|&n| (tree.node(n).total_weight, std::cmp::Reverse(n)));
        let Some(node) = best else {
            return false;
        };
        if self.is_zoomed() && !path_to(&self.tree, node).contains(&self.zoom_node()) {
            self.zoom_path.clear();
        }
        self.relayout_selecting(node);
        true
    }

    // ---- layout ----

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

    /// Selects `node`, or its nearest laid-out ancestor, or the default.
    fn select_node(&mut self, node: NodeId) {
        let top = self.zoom_path.len().max(1);
        let mut path = path_to(&self.tree, node);
        while path.len() >= top {
            let Some(&n) = path.last() else { break };
            let row = path.len() - top;
            if let Some(i) = self
                .rows
                .get(row)
                .and_then(|r| r.iter().position(|b| b.node == n))
            {
                self.selected = Some((row, i));
                return;
            }
            path.pop();
        }
        self.select_default();
    }

    /// The widest box of the top row (the first of equals).
    fn select_default(&mut self) {
        self.selected = self.rows.first().and_then(|row| {
            let mut best: Option<(usize, f64)> = None;
            for (i, b) in row.iter().enumerate() {
                if best.is_none_or(|(_, w)| b.width > w) {
                    best = Some((i, b.width));
                }
            }
            best.map(|(i, _)| (0, i))
        });
    }

    /// Which frames match the search, by id.
    fn match_frames(&mut self) {
        let search = &mut self.search;
        search.frame_matches.clear();
        if search.query.is_empty() {
            // The buffers hold as much as the names: give them back with the search.
            search.names = String::new();
            search.starts = Vec::new();
            search.node_flags = Vec::new();
            return;
        }
        let tree = &self.tree;
        search.frame_matches.resize(tree.frame_count(), false);
        let needle = search.query.to_lowercase();
        // Names hold no line breaks, so neither can a match.
        if needle.contains('\n') {
            return;
        }
        // All names lowered into one text, a line each, searched in one pass: a searcher
        // per name would cost more to set up than to run.
        let (text, starts) = (&mut search.names, &mut search.starts);
        text.clear();
        starts.clear();
        for i in 0..tree.frame_count() {
            starts.push(text.len());
            let name = tree.name(FrameId(i as u32));
            if needle.is_ascii() {
                // Only ASCII letters can match an ASCII needle's: lowered below, at once.
                text.push_str(name);
            } else {
                text.extend(name.chars().flat_map(char::to_lowercase));
            }
            text.push('\n');
        }
        if needle.is_ascii() {
            text.make_ascii_lowercase();
        }
        let mut frame = 0;
        let mut mark = |at: usize| {
            while starts.get(frame + 1).is_some_and(|&next| next <= at) {
                frame += 1;
            }
            if let Some(m) = search.frame_matches.get_mut(frame) {
                *m = true;
            }
        };
        let pattern = needle.as_bytes();
        // Look for the needle's rarest ASCII byte with memchr (as `str::match_indices` of a
        // char does) and compare around each: several times faster than the general
        // substring search on names that share most of their letters.
        let rarest = pattern
            .iter()
            .enumerate()
            .filter(|(_, b)| b.is_ascii())
            .min_by_key(|&(_, &b)| commonness(b));
        match rarest {
            Some((offset, &rare)) => {
                for (at, _) in text.match_indices(char::from(rare)) {
                    let Some(start) = at.checked_sub(offset) else {
                        continue;
                    };
                    if text.as_bytes()[start..].starts_with(pattern) {
                        mark(start);
                    }
                }
            }
            None => text
                .match_indices(needle.as_str())
                .for_each(|(at, _)| mark(at)),
        }
    }

    /// Counts the matches under the zoomed node and the weight through them.
    fn count_matches(&mut self) {
        let search = &mut self.search;
        search.matches = 0;
        search.matched_weight = 0;
        if search.query.is_empty() {
            return;
        }
        // A StackTree creates every node under an existing one, so a parent's id is below
        // its children's: one pass in id order from the zoomed node sees each parent before
        // its children, and reads memory in order where a walk from the root would jump.
        // Were it not so, a node would only be left out of the counts.
        const IN_ZOOM: u8 = 1;
        const UNDER_MATCH: u8 = 2;
        let tree = &self.tree;
        let zoom = self.zoom_path.last().copied().unwrap_or(NodeId::ROOT);
        let flags = &mut search.node_flags;
        flags.clear();
        flags.resize(tree.node_count(), 0);
        flags[zoom.0 as usize] = IN_ZOOM;
        if zoom != NodeId::ROOT && frame_matches(&search.frame_matches, tree, zoom) {
            search.matches += 1;
            search.matched_weight = tree.node(zoom).total_weight;
            flags[zoom.0 as usize] |= UNDER_MATCH;
        }
        for i in zoom.0 as usize + 1..tree.node_count() {
            let id = NodeId(i as u32);
            let node = tree.node(id);
            let above = flags[node.parent.0 as usize];
            if above & IN_ZOOM == 0 {
                continue;
            }
            let mut flag = above;
            if frame_matches(&search.frame_matches, tree, id) {
                search.matches += 1;
                if above & UNDER_MATCH == 0 {
                    search.matched_weight = search.matched_weight.saturating_add(node.total_weight);
                }
                flag |= UNDER_MATCH;
            }
            flags[i] = flag;
        }
    }

    /// Lays the zoomed subtree out into `rows`: each row's boxes placed from their parent's
    /// left edge in name order, narrow boxes left out, deltas against the baseline.
    fn lay_out(&mut self) {
        let FlameState {
            tree,
            baseline,
            differential,
            zoom_path,
            rows,
            max_abs_delta,
            search,
            scratch,
            base_prev,
            base_next,
            ..
        } = self;
        let baseline = baseline.as_ref().filter(|_| *differential);
        *max_abs_delta = 0.0;
        let zoom = zoom_path.last().copied().unwrap_or(NodeId::ROOT);
        let zoom_total = tree.node(zoom).total_weight;
        let mut used = 0;
        if zoom_total > 0 {
            let tree_total = tree.total_weight();
            let zoom_total = zoom_total as f64;
            let mut lay = Lay {
                tree,
                baseline,
                frame_matches: &search.frame_matches,
                tree_total,
                zoom_total,
                max_abs_delta: 0.0,
            };
            base_prev.clear();
            // The first row: the zoomed node itself, or the root's children.
            let first = next_row(rows, 0);
            if zoom_path.is_empty() {
                let root_base = baseline.map(|_| NodeId::ROOT);
                lay.children(NodeId::ROOT, root_base, 0.0, 1.0, scratch, first, base_prev);
            } else {
                let base = baseline.and_then(|b| {
                    zoom_path.iter().try_fold(NodeId::ROOT, |parent, &n| {
                        b.child(parent, tree.name(tree.node(n).frame))
                    })
                });
                first.push(lay.place(zoom, base, 0.0, 1.0));
                base_prev.push(base);
            }
            used = 1;
            while used < MAX_DEPTH && !rows[used - 1].is_empty() {
                next_row(rows, used);
                let (above, below) = rows.split_at_mut(used);
                let above = &above[used - 1];
                let row = &mut below[0];
                base_next.clear();
                for (parent, &base) in above.iter().zip(base_prev.iter()) {
                    lay.children(
                        parent.node,
                        base,
                        parent.start,
                        parent.start + parent.width,
                        scratch,
                        row,
                        base_next,
                    );
                }
                std::mem::swap(base_prev, base_next);
                used += 1;
            }
            if rows[used - 1].is_empty() {
                used -= 1;
            }
            *max_abs_delta = lay.max_abs_delta;
        }
        rows.truncate(used);
        self.selected = None;
    }
}

/// The row at `index` of `rows`, cleared, reusing its allocation.
fn next_row(rows: &mut Vec<Vec<FlameBox>>, index: usize) -> &mut Vec<FlameBox> {
    if rows.len() <= index {
        rows.resize_with(index + 1, Vec::new);
    }
    let row = &mut rows[index];
    row.clear();
    row
}

/// What laying out one tree needs, borrowed from the state.
struct Lay<'a> {
    tree: &'a StackTree,
    baseline: Option<&'a Baseline>,
    frame_matches: &'a [bool],
    tree_total: u64,
    zoom_total: f64,
    max_abs_delta: f64,
}

impl Lay<'_> {
    /// Places the children of `parent` wide enough to keep, sorted by name, from `start`,
    /// never past `end` (weights that saturated could claim more than their parent has).
    #[allow(clippy::too_many_arguments)]
    fn children(
        &mut self,
        parent: NodeId,
        parent_base: Option<NodeId>,
        start: f64,
        end: f64,
        scratch: &mut Vec<NodeId>,
        row: &mut Vec<FlameBox>,
        bases: &mut Vec<Option<NodeId>>,
    ) {
        let tree = self.tree;
        let min_weight = self.zoom_total * MIN_BOX_WIDTH;
        scratch.clear();
        scratch.extend(
            tree.node(parent)
                .children
                .iter()
                .copied()
                .filter(|&c| tree.node(c).total_weight as f64 >= min_weight),
        );
        // Siblings have distinct names, so the order is total.
        scratch.sort_unstable_by(|&a, &b| {
            tree.name(tree.node(a).frame)
                .cmp(tree.name(tree.node(b).frame))
        });
        let mut cursor = start;
        for &child in scratch.iter() {
            let width = (tree.node(child).total_weight as f64 / self.zoom_total).min(end - cursor);
            if width < MIN_BOX_WIDTH {
                break;
            }
            let base = match (self.baseline, parent_base) {
                (Some(b), Some(p)) => b.child(p, tree.name(tree.node(child).frame)),
                _ => None,
            };
            row.push(self.place(child, base, cursor, width));
            bases.push(base);
            cursor += width;
        }
    }

    /// The box of `node` at `start`, `width` wide; `base` is its node in the baseline.
    fn place(&mut self, node: NodeId, base: Option<NodeId>, start: f64, width: f64) -> FlameBox {
        let (delta, new_frame) = match self.baseline {
            Some(b) => {
                let now = share(self.tree.node(node).total_weight, self.tree_total);
                let before = base.map_or(0.0, |n| b.share(n));
                let delta = now - before;
                self.max_abs_delta = self.max_abs_delta.max(delta.abs());
                (Some(delta), base.is_none())
            }
            None => (None, false),
        };
        FlameBox {
            node,
            start,
            width,
            delta,
            new_frame,
            matched: frame_matches(self.frame_matches, self.tree, node),
        }
    }
}

/// Whether `node`'s frame matches (false for the root and when not searching).
fn frame_matches(frame_matches: &[bool], tree: &StackTree, node: NodeId) -> bool {
    frame_matches
        .get(tree.node(node).frame.0 as usize)
        .copied()
        .unwrap_or(false)
}

/// How common a byte is in frame names, roughly: 0 (rare) to 3 (in most names).
fn commonness(b: u8) -> u8 {
    match b {
        b':' | b'_' | b'e' | b't' | b'a' | b'o' | b'i' | b'n' | b's' | b'r' => 3,
        b'h' | b'l' | b'd' | b'c' | b'u' | b'm' | b'f' | b'p' | b'g' | b'<' | b'>' | b' ' => 2,
        b'0'..=b'9' | b'w' | b'y' | b'b' | b'v' | b'k' | b'.' | b'&' | b'-' => 1,
        _ => 0,
    }
}

/// The nodes from a child of the root down to `node`; empty for the root.
fn path_to(tree: &StackTree, node: NodeId) -> Vec<NodeId> {
    let mut path = Vec::new();
    let mut n = node;
    // A tree's parents lead to the root; the bound only guards against a malformed one.
    while n != NodeId::ROOT && path.len() < tree.node_count() {
        path.push(n);
        n = tree.node(n).parent;
    }
    path.reverse();
    path
}

/// The nodes of `new` named as `path` of `old` is, from the root down, as far as they exist.
fn resolve(old: &StackTree, path: &[NodeId], new: &StackTree) -> Vec<NodeId> {
    let mut out = Vec::with_capacity(path.len());
    let mut parent = NodeId::ROOT;
    for &n in path {
        let name = old.name(old.node(n).frame);
        let found = new
            .node(parent)
            .children
            .iter()
            .copied()
            .find(|&c| new.name(new.node(c).frame) == name);
        match found {
            Some(c) => {
                out.push(c);
                parent = c;
            }
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `a;b;c weight` lines into a tree.
    fn tree(folded: &str) -> StackTree {
        StackTree::read_folded(folded.as_bytes(), "test").unwrap()
    }

    fn state(folded: &str) -> FlameState {
        let mut s = FlameState::default();
        s.set_tree(tree(folded));
        s
    }

    fn row_names(s: &FlameState, row: usize) -> Vec<&str> {
        s.rows()[row].iter().map(|b| s.name(b.node)).collect()
    }

    fn selected_name(s: &FlameState) -> &str {
        s.name(s.selected_box().unwrap().node)
    }

    /// Selects the box named `name` on `row`.
    fn select(s: &mut FlameState, row: usize, name: &str) {
        let i = row_names(s, row).iter().position(|n| *n == name).unwrap();
        s.selected = Some((row, i));
    }

    fn box_named<'a>(s: &'a FlameState, row: usize, name: &str) -> &'a FlameBox {
        s.rows()[row]
            .iter()
            .find(|b| s.name(b.node) == name)
            .unwrap()
    }

    const PROFILE: &str = "\
bt-ring;main;run;hop 30
bt-ring;main;run;send 20
bt-ring;main;idle 10
bt-ring;worker;poll 25
bt-sock;main;recv 15
";

    #[test]
    fn the_top_row_is_the_roots_children_sorted_by_name_and_the_widest_is_selected() {
        let s = state("zeta;a 10\nalpha;b 30\nmid 20\n");
        assert_eq!(row_names(&s, 0), ["alpha", "mid", "zeta"]);
        assert_eq!(selected_name(&s), "alpha");
        let b = &s.rows()[0];
        assert_eq!((b[0].start, b[0].width), (0.0, 0.5));
        assert!((b[2].start + b[2].width - 1.0).abs() < 1e-12);
    }

    #[test]
    fn zoom_path_survives_set_tree_with_a_new_tree() {
        let mut s = state(PROFILE);
        select(&mut s, 2, "run");
        assert!(s.zoom_in());
        assert_eq!(
            s.zoom_path().collect::<Vec<_>>(),
            ["bt-ring", "main", "run"]
        );
        assert!(s.select_child());
        assert_eq!(selected_name(&s), "hop");

        // A new tree with more samples and new frames, inserted in another order.
        s.set_tree(tree(
            "bt-sock;main;recv 40\nbt-ring;main;run;send 50\nbt-ring;main;run;hop 60\nnew 5\n",
        ));
        assert_eq!(
            s.zoom_path().collect::<Vec<_>>(),
            ["bt-ring", "main", "run"]
        );
        assert_eq!(s.zoom_total(), 110);
        assert_eq!(row_names(&s, 0), ["run"]);
        assert_eq!(row_names(&s, 1), ["hop", "send"]);
        assert_eq!(selected_name(&s), "hop");
    }

    #[test]
    fn zoom_falls_back_to_the_deepest_prefix_when_the_zoomed_frame_vanished() {
        let mut s = state(PROFILE);
        select(&mut s, 2, "run");
        s.zoom_in();
        s.select_child();
        s.set_tree(tree("bt-ring;main;idle 10\nbt-ring;worker;poll 5\n"));
        assert_eq!(s.zoom_path().collect::<Vec<_>>(), ["bt-ring", "main"]);
        assert_eq!(row_names(&s, 0), ["main"]);
        // The selection (hop, under run) fell back to the zoomed node.
        assert_eq!(selected_name(&s), "main");

        s.set_tree(tree("other 1\n"));
        assert!(!s.is_zoomed());
        assert_eq!(selected_name(&s), "other");
    }

    #[test]
    fn zoom_in_and_out_step_one_level_and_report_the_top() {
        let mut s = state(PROFILE);
        select(&mut s, 1, "main");
        assert!(s.zoom_in());
        assert!(!s.zoom_in(), "the zoomed node is already the top");
        assert_eq!(s.zoom_total(), 60);
        assert_eq!(s.rows()[0].len(), 1);
        assert_eq!(s.rows()[0][0].width, 1.0);
        assert_eq!(row_names(&s, 1), ["idle", "run"]);
        assert_eq!(s.rows()[1][1].width, 50.0 / 60.0);

        assert!(s.zoom_out());
        assert_eq!(s.zoom_path().collect::<Vec<_>>(), ["bt-ring"]);
        assert_eq!(
            selected_name(&s),
            "main",
            "the node zoomed out of stays selected"
        );
        assert!(s.zoom_out());
        assert!(!s.is_zoomed());
        assert!(!s.zoom_out(), "Esc backs out further");
        assert_eq!(row_names(&s, 0), ["bt-ring", "bt-sock"]);

        select(&mut s, 3, "hop");
        s.zoom_in();
        assert!(s.reset_zoom());
        assert!(!s.reset_zoom());
        assert_eq!(selected_name(&s), "hop");
    }

    #[test]
    fn arrows_move_to_parent_widest_child_and_row_neighbours() {
        let mut s = state(PROFILE);
        assert_eq!(selected_name(&s), "bt-ring");
        assert!(!s.select_parent());
        assert!(s.select_child());
        assert_eq!(selected_name(&s), "main");
        assert!(s.select_child());
        assert_eq!(selected_name(&s), "run", "the widest child");
        assert!(s.select_prev());
        assert_eq!(selected_name(&s), "idle");
        assert!(!s.select_prev());
        assert!(s.select_next() && s.select_next());
        assert_eq!(selected_name(&s), "poll");
        assert!(s.select_next());
        assert_eq!(selected_name(&s), "recv", "neighbours cross parents");
        assert!(!s.select_next());
        assert!(s.select_parent());
        assert_eq!(selected_name(&s), "main");
        assert_eq!(s.selected_position(), Some((1, 2)));
        assert!(s.select_parent());
        assert_eq!(selected_name(&s), "bt-sock");
        s.select_child();
        s.select_child();
        assert!(!s.select_child(), "recv is a leaf");
    }

    #[test]
    fn search_counts_matches_and_share_without_double_counting_nested_matches() {
        // "run" matches run, run_inner (nested in run) and rerun (elsewhere).
        let mut s = state("p;run;run_inner 30\np;run 10\np;rerun 20\np;idle 40\n");
        s.search("RUN");
        assert_eq!(s.query(), "RUN");
        assert_eq!(s.matches(), 3);
        assert_eq!(s.matched_weight(), 60);
        assert_eq!(s.match_share(), 0.6);
        assert!(box_named(&s, 2, "run_inner").matched);
        assert!(!box_named(&s, 1, "idle").matched);

        // Under a zoom, only the zoomed subtree counts.
        select(&mut s, 1, "run");
        s.zoom_in();
        assert_eq!(s.matches(), 2);
        assert_eq!(s.match_share(), 1.0);

        s.search("");
        assert_eq!((s.matches(), s.match_share()), (0, 0.0));
        assert!(s.rows().iter().flatten().all(|b| !b.matched));
    }

    #[test]
    fn next_and_previous_match_cycle_in_layout_order() {
        let mut s = state("a;x;leaf 10\na;y 10\nb;x 10\n");
        s.search("x");
        let at = |s: &FlameState| (s.selected_position().unwrap(), selected_name(s).to_owned());
        // Selected: a (the widest of the top row). Matches: x under a, x under b (row 1).
        assert!(s.next_match());
        assert_eq!(at(&s), ((1, 0), "x".into()));
        assert!(s.next_match());
        assert_eq!(at(&s), ((1, 2), "x".into()));
        assert!(s.next_match(), "wraps around");
        assert_eq!(at(&s), ((1, 0), "x".into()));
        assert!(s.prev_match(), "wraps backwards");
        assert_eq!(at(&s), ((1, 2), "x".into()));
        assert!(s.prev_match());
        assert_eq!(at(&s), ((1, 0), "x".into()));

        s.search("nothing");
        assert!(!s.next_match() && !s.prev_match());
        assert_eq!(at(&s), ((1, 0), "x".into()));
    }

    #[test]
    fn a_frame_whose_share_doubled_is_hotter_and_one_absent_from_the_baseline_is_new() {
        let mut s = state("p;hot 50\np;cold 25\np;new 25\n");
        s.set_baseline(Some(tree("p;hot 25\np;cold 75\n")));
        assert!(s.rows().iter().flatten().all(|b| b.delta.is_none()));
        s.set_differential(true);
        assert!(s.differential() && s.differential_active());
        let hot = box_named(&s, 1, "hot");
        assert!((hot.delta.unwrap() - 0.25).abs() < 1e-12, "{hot:?}");
        assert!(!hot.new_frame);
        let cold = box_named(&s, 1, "cold");
        assert!((cold.delta.unwrap() + 0.5).abs() < 1e-12, "{cold:?}");
        let new = box_named(&s, 1, "new");
        assert!(new.new_frame);
        assert!((new.delta.unwrap() - 0.25).abs() < 1e-12, "{new:?}");
        assert_eq!(box_named(&s, 0, "p").delta, Some(0.0));
        assert!((s.max_abs_delta() - 0.5).abs() < 1e-12);

        // Deltas are shares of the whole trees, also under a zoom; widths stay current.
        select(&mut s, 1, "hot");
        s.zoom_in();
        assert!((s.rows()[0][0].delta.unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(s.rows()[0][0].width, 1.0);

        s.set_differential(false);
        assert!(s.rows().iter().flatten().all(|b| b.delta.is_none()));
        assert_eq!(s.max_abs_delta(), 0.0);
        s.set_differential(true);
        s.set_baseline(None);
        assert!(s.differential() && !s.differential_active());
        assert!(s.rows().iter().flatten().all(|b| b.delta.is_none()));
    }

    #[test]
    fn layout_widths_of_children_sum_to_at_most_the_parents() {
        let mut folded = String::new();
        for i in 0..50 {
            folded.push_str(&format!("p;f{};g{} {}\n", i % 7, i, 3 + i * 13 % 17));
            folded.push_str(&format!("p;f{} {}\n", i % 7, 1 + i % 3));
        }
        // Saturated weights claim more than their parent has.
        folded.push_str("q;a 18446744073709551615\nq;b 18446744073709551615\n");
        let s = state(&folded);
        for pair in s.rows().windows(2) {
            for parent in &pair[0] {
                let sum: f64 = pair[1]
                    .iter()
                    .filter(|c| s.tree().node(c.node).parent == parent.node)
                    .map(|c| {
                        assert!(c.start >= parent.start);
                        assert!(c.start + c.width <= parent.start + parent.width + 1e-12);
                        c.width
                    })
                    .sum();
                assert!(sum <= parent.width + 1e-12, "{sum} > {}", parent.width);
            }
            for w in pair[1].windows(2) {
                assert!(w[0].start + w[0].width <= w[1].start + 1e-12, "overlap");
            }
        }
    }

    #[test]
    fn nodes_below_the_threshold_are_skipped() {
        let mut t = StackTree::new();
        // p weighs 10_000, so the threshold is 5.
        t.add_names(["p", "wide"], 9_991);
        t.add_names(["p", "narrow"], 4);
        t.add_names(["p", "edge"], 5);
        let s = {
            let mut s = FlameState::default();
            s.set_tree(t);
            s
        };
        assert_eq!(row_names(&s, 1), ["edge", "wide"]);
        assert_eq!(s.rows().len(), 2);
    }

    #[test]
    fn layout_stops_at_the_maximum_depth() {
        let names: Vec<String> = (0..MAX_DEPTH + 10).map(|i| format!("f{i}")).collect();
        let mut t = StackTree::new();
        t.add_names(names.iter().map(String::as_str), 1);
        let mut s = FlameState::default();
        s.set_tree(t);
        assert_eq!(s.rows().len(), MAX_DEPTH);
        // Zooming in reaches deeper frames.
        s.selected = Some((MAX_DEPTH - 1, 0));
        s.zoom_in();
        assert_eq!(s.rows().len(), 11);
        assert_eq!(s.name(s.rows()[10][0].node), names[MAX_DEPTH + 9]);
    }

    #[test]
    fn layout_is_stable_across_set_tree_of_an_equal_tree() {
        let mut s = state(PROFILE);
        let names = |s: &FlameState| -> Vec<Vec<(String, f64, f64)>> {
            s.rows()
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|b| (s.name(b.node).to_owned(), b.start, b.width))
                        .collect()
                })
                .collect()
        };
        let before = names(&s);
        // The same stacks inserted in reverse order.
        let reversed: String = PROFILE.lines().rev().map(|l| format!("{l}\n")).collect();
        s.set_tree(tree(&reversed));
        assert_eq!(names(&s), before);
    }

    #[test]
    fn an_empty_tree_lays_out_nothing_and_navigation_does_nothing() {
        let mut s = FlameState::default();
        s.set_tree(StackTree::new());
        assert!(s.is_empty() && s.rows().is_empty() && s.selected_box().is_none());
        assert!(!s.select_parent() && !s.select_child() && !s.select_prev());
        assert!(!s.select_next() && !s.zoom_in() && !s.zoom_out() && !s.next_match());
        s.search("x");
        s.set_differential(true);
        s.set_baseline(Some(StackTree::new()));
        assert_eq!((s.matches(), s.match_share(), s.zoom_total()), (0, 0.0, 0));
        assert_eq!(s.name(NodeId(1234)), "");
    }

    #[test]
    fn big_trees_replaced_one_after_another_keep_the_zoom() {
        const BIG: usize = 10_000;
        let big = |extra: &str| {
            let mut t = StackTree::new();
            for i in 0..BIG {
                let leaf = format!("f{i}");
                t.add_names(["p", "hot", leaf.as_str()], 1);
            }
            t.add_names(["p", extra], 1);
            t
        };
        let mut s = FlameState::default();
        s.set_tree(big("a"));
        s.select_child();
        assert_eq!(selected_name(&s), "hot");
        s.zoom_in();
        // Each replaced tree comes back to the caller.
        for extra in ["b", "c", "d"] {
            let old = s.set_tree(big(extra));
            assert_eq!(old.total_weight(), BIG as u64 + 1);
            assert_eq!(s.zoom_path().collect::<Vec<_>>(), ["p", "hot"]);
            assert_eq!(s.zoom_total(), BIG as u64);
        }
    }

    #[test]
    fn matches_ignore_case_in_names_and_queries() {
        let mut s = state("Mpsc::Recv;x 1\nother 1\nrecv_From 1\n");
        s.search("RECV");
        assert_eq!(s.matches(), 2);
        s.search("recv_f");
        assert_eq!(s.matches(), 1);
        s.search("v\nr");
        assert_eq!(s.matches(), 0, "no match spans two names");
        s.search("::");
        assert_eq!(s.matches(), 1);
    }

    #[test]
    fn non_ascii_queries_ignore_case_too() {
        let s = {
            let mut s = state("Ärger;x 1\nother 1\n");
            s.search("äR");
            s
        };
        assert_eq!(s.matches(), 1);
    }

    #[test]
    fn weights_print_in_their_unit() {
        assert_eq!(FlameUnit::Samples.format(1_234_567), "1,234,567 samples");
        assert_eq!(FlameUnit::Samples.format(999), "999 samples");
        assert_eq!(FlameUnit::Micros.format(1_500), "1.50 ms");
        assert_eq!(FlameUnit::from(StackKind::OffCpu), FlameUnit::Micros);
        assert_eq!(FlameUnit::Micros.label(), "µs");
    }
}
