//! Top functions, as `perf top` lists them: every function with its self and total
//! weight, sorted by a column, filtered by the search.

use benchtop_sessions::{FrameId, StackTree};

/// The column the table is sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TopSort {
    /// Self weight, heaviest first (as `perf top`).
    #[default]
    SelfWeight,
    /// Total weight, heaviest first.
    Total,
    /// Name, A to Z.
    Name,
}

impl TopSort {
    /// The next column (`>`), wrapping.
    pub fn next(self) -> Self {
        match self {
            TopSort::SelfWeight => TopSort::Total,
            TopSort::Total => TopSort::Name,
            TopSort::Name => TopSort::SelfWeight,
        }
    }

    /// The previous column (`<`), wrapping.
    pub fn prev(self) -> Self {
        self.next().next()
    }
}

/// One function of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopRow {
    /// The function (a frame of the tree shown).
    pub frame: FrameId,
    /// Weight of stacks ending in it.
    pub self_weight: u64,
    /// Weight of stacks through it.
    pub total_weight: u64,
}

/// The table: its rows in order, the sort column and the selected row.
#[derive(Debug, Default)]
pub struct TopTable {
    /// The column sorted by.
    pub sort: TopSort,
    /// The rows that pass the search, in order.
    pub rows: Vec<TopRow>,
    /// The selected row.
    pub selected: usize,
    /// Functions the search left out.
    pub hidden: usize,
    /// The search filters the table: it was typed while the table showed. A table opened
    /// from another view starts unfiltered, whatever the flamegraph searched for.
    pub filtered: bool,
    /// The name of the selected row's function, which a rebuild keeps selected (empty:
    /// the first row).
    selected_name: String,
}

impl TopTable {
    /// The rows of `tree` that `shown` keeps (the search's matches), sorted; the
    /// selection stays on its function when it is still there. Reads the weights the
    /// tree keeps per function: the cost is the functions', not the nodes'.
    pub fn rebuild(&mut self, tree: &StackTree, shown: impl Fn(FrameId) -> bool) {
        let keep = std::mem::take(&mut self.selected_name);
        self.rows.clear();
        self.hidden = 0;
        for f in 0..tree.frame_count() {
            let frame = FrameId(f as u32);
            let total_weight = tree.frame_total(frame);
            if total_weight == 0 {
                continue;
            }
            if !shown(frame) {
                self.hidden += 1;
                continue;
            }
            self.rows.push(TopRow {
                frame,
                self_weight: tree.frame_self(frame),
                total_weight,
            });
        }
        let name = |r: &TopRow| tree.name(r.frame);
        match self.sort {
            TopSort::SelfWeight => self.rows.sort_by(|a, b| {
                (b.self_weight, b.total_weight)
                    .cmp(&(a.self_weight, a.total_weight))
                    .then_with(|| name(a).cmp(name(b)))
            }),
            TopSort::Total => self.rows.sort_by(|a, b| {
                (b.total_weight, b.self_weight)
                    .cmp(&(a.total_weight, a.self_weight))
                    .then_with(|| name(a).cmp(name(b)))
            }),
            TopSort::Name => self.rows.sort_by(|a, b| name(a).cmp(name(b))),
        }
        self.selected = self
            .rows
            .iter()
            .position(|r| !keep.is_empty() && name(r) == keep)
            .unwrap_or(0);
        self.selected_name = self
            .selected_row()
            .map(|r| tree.name(r.frame).to_owned())
            .unwrap_or_default();
    }

    /// Selects row `i` (clamped to the rows there are).
    pub fn select(&mut self, i: usize, tree: &StackTree) {
        self.selected = i.min(self.rows.len().saturating_sub(1));
        self.selected_name = self
            .selected_row()
            .map(|r| tree.name(r.frame).to_owned())
            .unwrap_or_default();
    }

    /// Forgets the selection and the filter: the next rebuild selects the first row of
    /// every function.
    pub fn reset(&mut self) {
        self.selected = 0;
        self.selected_name.clear();
        self.filtered = false;
    }

    /// The selected row.
    pub fn selected_row(&self) -> Option<&TopRow> {
        self.rows.get(self.selected)
    }
}
