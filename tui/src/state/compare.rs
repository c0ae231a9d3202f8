//! The compare screen's state (`benchtop open A B`): the two sessions, the comparison
//! table with its verdicts, and both latency histograms binned on one scale. The
//! differential flamegraph is the live screen's flame panes, with A as the baseline.

use benchtop_sessions::Session;
use benchtop_sessions::compare::{Comparison, FigureComparison};
use hdrhistogram::Histogram;

use super::Key;
use super::keys::{
    Action, FLAME_ROWS, FOCUS_ROW, HELP_ROW, MAXIMIZE_ROW, Row, Table, When, hint, section,
};
use super::live::{LATENCY_BINS_PER_DECADE, Latency, LatencySummary, params_text};

/// The panes of the compare screen, in focus order (`1`–`3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ComparePane {
    /// Every comparable figure with its verdict.
    #[default]
    Table,
    /// Both latency histograms, overlaid.
    Latency,
    /// The differential flamegraph.
    Flame,
}

impl ComparePane {
    /// Every pane, in focus order.
    pub const ALL: [ComparePane; 3] =
        [ComparePane::Table, ComparePane::Latency, ComparePane::Flame];

    /// The pane's title.
    pub fn title(self) -> &'static str {
        match self {
            ComparePane::Table => "figures",
            ComparePane::Latency => "latency",
            ComparePane::Flame => "flamegraph",
        }
    }

    /// Its number (the key that focuses it).
    pub fn number(self) -> usize {
        ComparePane::ALL
            .iter()
            .position(|&p| p == self)
            .unwrap_or(0)
            + 1
    }

    /// The pane `by` steps on, wrapping.
    pub fn step(self, by: isize) -> ComparePane {
        let n = ComparePane::ALL.len() as isize;
        let i = (self.number() as isize - 1 + by).rem_euclid(n);
        ComparePane::ALL[i as usize]
    }
}

/// One session as the compare screen names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// Session id.
    pub id: String,
    /// Workload and parameters, `ring mode=tell …`.
    pub what: String,
    /// How the recording ended.
    pub status: String,
}

impl Side {
    fn of(s: &Session) -> Self {
        let params = params_text(&s.meta.workload.params);
        Side {
            id: s.meta.id.clone(),
            what: format!("{} {params}", s.meta.workload.name)
                .trim_end()
                .to_owned(),
            status: s.meta.status_words(),
        }
    }
}

/// A latency bin of the overlay: its range and the count of each session in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverlayBin {
    /// Lowest value of the bin, nanoseconds.
    pub low: u64,
    /// Values of A in the bin.
    pub a: u64,
    /// Values of B in the bin.
    pub b: u64,
}

/// The latency of both sessions, for one metric both have.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyOverlay {
    /// The metric.
    pub metric: String,
    /// A's whole-run percentiles.
    pub a: LatencySummary,
    /// B's.
    pub b: LatencySummary,
    /// Log-scaled bins from the lowest value of either to the highest, with both counts.
    pub bins: Vec<OverlayBin>,
}

/// The compare screen.
#[derive(Debug, Default)]
pub struct CompareState {
    /// Session A (the baseline).
    pub a: Option<Side>,
    /// Session B.
    pub b: Option<Side>,
    /// Every comparable figure.
    pub figures: Vec<FigureComparison>,
    /// What differs between the sessions beyond their figures.
    pub warnings: Vec<String>,
    /// The smallest change called regressed or improved (a fraction).
    pub threshold: f64,
    /// The family-wise error rate of the verdicts.
    pub alpha: f64,
    /// How many figures were judged together.
    pub judged: usize,
    /// Latency of a metric both recorded, when there is one.
    pub latency: Option<LatencyOverlay>,
    /// The focused pane.
    pub focus: ComparePane,
    /// The first row of the table shown.
    pub scroll: usize,
    /// B's stacks, against A's.
    pub flames: super::flame_panes::FlamePanes,
}

impl CompareState {
    /// The screen for `comparison` of sessions `a` and `b`.
    pub fn new(a: &Session, b: &Session, comparison: Comparison) -> Self {
        CompareState {
            a: Some(Side::of(a)),
            b: Some(Side::of(b)),
            figures: comparison.figures,
            warnings: comparison.warnings,
            threshold: comparison.threshold,
            alpha: comparison.alpha,
            judged: comparison.judged,
            latency: overlay(a, b),
            focus: ComparePane::Table,
            scroll: 0,
            flames: super::flame_panes::FlamePanes::default(),
        }
    }

    /// Moves the table by `rows`, within its length.
    pub fn scroll_by(&mut self, rows: isize) {
        let last = self.figures.len().saturating_sub(1);
        self.scroll = self.scroll.saturating_add_signed(rows).min(last);
    }
}

/// The whole-run latency of the first metric A and B both recorded.
fn overlay(a: &Session, b: &Session) -> Option<LatencyOverlay> {
    let tag = b
        .latency
        .iter()
        .map(|i| &i.tag)
        .find(|tag| a.latency.iter().any(|i| &i.tag == *tag))?;
    let total = |s: &Session| {
        Latency::of_intervals(
            String::new(),
            s.latency
                .iter()
                .filter(|i| &i.tag == tag)
                .map(|i| &i.histogram),
        )
    };
    let (la, lb) = (total(a), total(b));
    let (ha, hb) = (la.total.histogram()?, lb.total.histogram()?);
    Some(LatencyOverlay {
        metric: if tag.is_empty() {
            "latency".into()
        } else {
            tag.clone()
        },
        a: la.run,
        b: lb.run,
        bins: overlay_bins(ha, hb),
    })
}

/// Both histograms binned on one log scale (`LATENCY_BINS_PER_DECADE` bins per decade),
/// from the bin of the lowest value of either to the bin of the highest.
pub fn overlay_bins(a: &Histogram<u64>, b: &Histogram<u64>) -> Vec<OverlayBin> {
    let per_decade = f64::from(LATENCY_BINS_PER_DECADE);
    let index = |v: u64| ((v.max(1) as f64).log10() * per_decade).floor() as i64;
    let non_empty = [a, b].into_iter().filter(|h| !h.is_empty());
    let (Some(lo), Some(hi)) = (
        non_empty.clone().map(|h| index(h.min())).min(),
        non_empty.map(|h| index(h.max())).max(),
    ) else {
        return Vec::new();
    };
    let step = 10f64.powf(1.0 / per_decade);
    let mut bins: Vec<OverlayBin> = (lo..=hi)
        .map(|i| OverlayBin {
            low: step.powf(i as f64).round() as u64,
            a: 0,
            b: 0,
        })
        .collect();
    let last = bins.len() - 1;
    for (h, is_a) in [(a, true), (b, false)] {
        for v in h.iter_recorded() {
            let i = (index(v.value_iterated_to()) - lo).clamp(0, last as i64) as usize;
            if is_a {
                bins[i].a += v.count_at_value();
            } else {
                bins[i].b += v.count_at_value();
            }
        }
    }
    bins
}

/// What a key does on the compare screen beyond what it shares with the live screen (its
/// rows: [`COMPARE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareAction {
    /// Scroll the figures up.
    ScrollUp,
    /// Scroll the figures down.
    ScrollDown,
    /// B against A, or B alone.
    Difference,
}

impl CompareState {
    /// Carries out what a key does, as the screen's table says.
    pub fn act(&mut self, action: CompareAction) {
        match action {
            CompareAction::ScrollUp => self.scroll_by(-1),
            CompareAction::ScrollDown => self.scroll_by(1),
            CompareAction::Difference => self.flames.set_differential(!self.flames.differential),
        }
    }
}

/// The compare screen (`benchtop open A B`).
pub const COMPARE: Table = Table {
    name: "compare",
    rows: &[
        section("Screen", COMPARE_ROWS),
        section("Profile", super::keys::PROFILE_ROWS),
        section("Views", super::keys::VIEW_ROWS),
        section("Flamegraph", FLAME_ROWS),
    ],
    otherwise: None,
};

const COMPARE_ROWS: &[Row] = &[
    Row {
        keys: &[(Key::Char('q'), Action::Quit), (Key::CtrlC, Action::Quit)],
        only: When::Always,
        help: Some(("q, Ctrl-C", "quit")),
        hints: &[hint("q quit", When::Always, 31)],
    },
    Row {
        keys: &[(Key::Esc, Action::CompareBackOut)],
        only: When::Always,
        help: Some((
            "Esc",
            "back out: zoom out, leave a maximized pane, close help; then back to the \
             history or the launcher the sessions were opened from",
        )),
        hints: &[hint("Esc out", When::Flame, 3)],
    },
    HELP_ROW,
    FOCUS_ROW,
    Row {
        keys: &[
            (Key::Char('1'), Action::FocusNumber),
            (Key::Char('2'), Action::FocusNumber),
            (Key::Char('3'), Action::FocusNumber),
        ],
        only: When::Always,
        help: Some(("1-3", "focus figures, latency, flamegraph")),
        hints: &[],
    },
    MAXIMIZE_ROW,
    Row {
        keys: &[
            (Key::Up, Action::Compare(CompareAction::ScrollUp)),
            (Key::Char('k'), Action::Compare(CompareAction::ScrollUp)),
            (Key::Down, Action::Compare(CompareAction::ScrollDown)),
            (Key::Char('j'), Action::Compare(CompareAction::ScrollDown)),
        ],
        only: When::Compare(ComparePane::Table),
        help: Some(("↑ ↓, j k", "figures: scroll")),
        hints: &[hint("↑↓ scroll", When::Compare(ComparePane::Table), 1)],
    },
    Row {
        keys: &[(Key::Char('d'), Action::Compare(CompareAction::Difference))],
        only: When::Always,
        help: Some((
            "d",
            "flamegraph: B against A (red grew, blue shrank), or B alone",
        )),
        hints: &[hint("d diff/B only", When::Always, 21)],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[(u64, u64)]) -> Histogram<u64> {
        let mut h = Histogram::new(3).unwrap();
        for &(v, n) in values {
            h.record_n(v, n).unwrap();
        }
        h
    }

    #[test]
    fn both_histograms_share_one_scale_and_keep_every_value() {
        let a = histogram(&[(1_000, 90), (10_000, 10)]);
        let b = histogram(&[(2_000, 50), (100_000, 50)]);
        let bins = overlay_bins(&a, &b);
        // From the bin of 1 µs to the bin of 100 µs: two decades, four bins each, plus one.
        assert_eq!(bins.len(), 9);
        assert_eq!(bins[0].low, 1_000);
        assert_eq!(bins.iter().map(|b| b.a).sum::<u64>(), 100);
        assert_eq!(bins.iter().map(|b| b.b).sum::<u64>(), 100);
        assert_eq!((bins[0].a, bins[0].b), (90, 0));
        assert_eq!(bins[8].b, 50);
    }

    #[test]
    fn an_empty_side_leaves_the_other_and_two_empty_sides_no_bins() {
        let empty = Histogram::<u64>::new(3).unwrap();
        let b = histogram(&[(5_000, 3)]);
        let bins = overlay_bins(&empty, &b);
        assert_eq!(bins.len(), 1);
        assert_eq!((bins[0].a, bins[0].b), (0, 3));
        assert!(overlay_bins(&empty, &empty).is_empty());
    }

    #[test]
    fn the_table_scrolls_within_its_rows_and_focus_wraps() {
        let mut s = CompareState::default();
        s.scroll_by(3);
        assert_eq!(s.scroll, 0, "no rows");
        assert_eq!(ComparePane::Table.step(-1), ComparePane::Flame);
        assert_eq!(ComparePane::Flame.step(1), ComparePane::Table);
    }
}
