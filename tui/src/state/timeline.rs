//! The timeline strip: the run's report intervals side by side (throughput, latency p99,
//! CPU), a cursor over them, and the parts of the run the user picks with it — a range of
//! intervals, or the slow intervals and the rest. The live screen shows the selected
//! part in its latency pane, and its flamegraph and other views when the run kept
//! per-interval stacks (stacks.jsonl, or a live run's as they come); a second part can be
//! the baseline of the differential flamegraph.
//!
//! Pure data: the intervals arrive as rows (a live run's, or a saved session's), the
//! stacks as loaded by the caller; nothing here reads a file or a clock. A live run's
//! own side (its stacks as they arrive, the mouse) is `timeline_live`.

use benchtop_sessions::intervals::{ChunkIds, IntervalStacks};
use benchtop_sessions::sparse::SparseHistogram;
use benchtop_sessions::{ByKind, Kind, StackTree, TimeseriesRow};

use super::live::Latency;

/// The most intervals the strip keeps: an hour at `--interval 100ms`. A longer live run
/// keeps its latest.
pub const MAX_INTERVALS: usize = 36_000;
/// What "the last seconds" selects.
pub const LAST_S: f64 = 10.0;
/// Weights of per-interval stacks a live run keeps at most, 16 bytes each (32 MB): past
/// them the stacks of its oldest intervals go (their latency and figures stay).
pub const MAX_LIVE_WEIGHTS: usize = 2_000_000;
/// Stacks (a parent stack and a frame each) a live run's table holds at most, some
/// 40 bytes each with their ids: four times the distinct stacks a folded file loads. Past
/// them, new stacks are left out of the live profiles (the session keeps them all).
pub const MAX_LIVE_STACKS: usize = 4_000_000;

/// One report interval as the strip draws it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Point {
    /// Where it begins and ends, seconds from the run's start.
    pub t0_s: f64,
    /// Where it ends.
    pub t1_s: f64,
    /// The throughput metric's rate, per second.
    pub rate: Option<f64>,
    /// The latency metric's p99 in the interval, ns.
    pub p99_ns: Option<u64>,
    /// CPU of the process tree, percent of one core.
    pub cpu_percent: Option<f64>,
}

/// A part of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The intervals from the first to the second index, both included.
    Range(usize, usize),
    /// The intervals whose p99 is above the whole run's p99.
    Slow,
    /// Every other interval.
    Rest,
}

/// The strip's state: the intervals, the cursor and the parts picked.
#[derive(Debug, Default)]
pub struct Timeline {
    /// The intervals, in order.
    pub points: Vec<Point>,
    /// Each interval's histogram of the latency metric, where it has one.
    pub latency: Vec<Option<SparseHistogram>>,
    /// The session's per-interval stacks, when it kept them.
    pub stacks: Option<IntervalStacks>,
    /// The interval under the cursor.
    pub cursor: usize,
    /// Where a range being marked began.
    pub anchor: Option<usize>,
    /// The part shown; `None`: the whole run.
    pub selected: Option<Part>,
    /// The part the selected one is compared with.
    pub baseline: Option<Part>,
    /// The whole run's p99, ns: what makes an interval slow.
    pub run_p99_ns: Option<u64>,
    /// The latency of the part shown, which the latency pane draws instead of the run's.
    pub latency_shown: Option<Latency>,
    /// The live screen's baseline is the timeline's (not one `b` took).
    pub baseline_shown: bool,
    /// A live run's ids of its stacks, as its chunks arrive.
    pub(super) live_ids: ChunkIds,
    /// Intervals whose stacks a live run dropped to stay within [`MAX_LIVE_WEIGHTS`].
    pub dropped_stacks: usize,
    /// The live table reached its bound (and the screen said so).
    pub stacks_full: bool,
    /// The live table's bound when not [`MAX_LIVE_STACKS`].
    pub(super) max_stacks: Option<usize>,
    /// Where a mouse drag on the strip began (the button is down).
    pub drag: Option<usize>,
    /// The whole run's stacks of the kinds a part shows ([`part_kinds`]), set aside
    /// while a part of the run shows (a live run's growing there): `A` shows them again
    /// at once.
    pub whole: Option<ByKind<Option<StackTree>>>,
    /// How a live run's chunks grew the whole run's trees.
    pub(super) grow: super::live_stacks::WholeRun,
}

impl Timeline {
    /// A saved session's intervals on `live`'s timeline: its rows, and the histograms of
    /// latency metric `tag`, moved out of `latency` (the session keeps none).
    pub fn fill(
        live: &mut super::LiveScreen,
        rows: &[TimeseriesRow],
        tag: Option<&str>,
        latency: &mut Vec<benchtop_sessions::hlog::HlogInterval>,
    ) {
        let mut histograms = std::mem::take(latency)
            .into_iter()
            .filter(|i| Some(i.tag.as_str()) == tag)
            .map(|i| i.histogram);
        let t = &mut live.timeline;
        let rate = live.run.throughput_metric.as_deref();
        for row in rows {
            t.push(row, rate, histograms.next().map(|h| ("", h)));
        }
        t.run_p99_ns = (live.run.latency.run.count > 0).then_some(live.run.latency.run.p99);
        t.cursor = 0;
    }

    /// A saved session's per-interval stacks (`None`: it kept none) on `live`'s
    /// timeline; the samples per second the program screen draws come from them.
    pub fn set_stacks(live: &mut super::LiveScreen, stacks: Option<IntervalStacks>) {
        if let Some(s) = &stacks {
            live.run
                .activity
                .samples_of_intervals(s.intervals.values().map(|i| {
                    let length_s = i.t1_ns.saturating_sub(i.t0_ns) as f64 / 1e9;
                    let samples = i.weights[Kind::Cpu]
                        .iter()
                        .fold(0u64, |a, &(_, _, w)| a.saturating_add(w));
                    (i.t1_ns as f64 / 1e9, length_s, samples)
                }));
        }
        live.timeline.stacks = stacks;
    }

    /// A live run's interval: `row` and the histogram of the run's latency metric.
    pub fn add_live(
        live: &mut super::LiveScreen,
        row: &TimeseriesRow,
        histograms: &[(String, hdrhistogram::Histogram<u64>)],
    ) {
        let metric = &live.run.latency.metric;
        let histogram = histograms
            .iter()
            .find(|(name, _)| name == metric)
            .map(|(name, h)| (name.as_str(), SparseHistogram::from(h)));
        let t = &mut live.timeline;
        t.push(row, live.run.throughput_metric.as_deref(), histogram);
        t.run_p99_ns = (live.run.latency.run.count > 0).then_some(live.run.latency.run.p99);
    }

    /// Adds one interval: `row` and the latency metric's histogram in it.
    pub fn push(
        &mut self,
        row: &TimeseriesRow,
        rate_metric: Option<&str>,
        latency: Option<(&str, SparseHistogram)>,
    ) {
        if self.points.len() == MAX_INTERVALS {
            self.points.remove(0);
            self.latency.remove(0);
            self.cursor = self.cursor.saturating_sub(1);
        }
        let at_end = self.cursor + 1 >= self.points.len();
        let p99 = latency
            .as_ref()
            .map(|(_, h)| h.value_at_quantile(0.99))
            .or_else(|| row.latency.values().next().map(|p| p.p99));
        self.points.push(Point {
            t0_s: (row.t_s - row.interval_s).max(0.0),
            t1_s: row.t_s,
            rate: rate_metric.and_then(|m| row.rates.get(m).copied()),
            p99_ns: p99,
            cpu_percent: row.resources.map(|r| r.cpu_percent),
        });
        self.latency.push(latency.map(|(_, h)| h));
        // The cursor follows the run while it is at its end.
        if at_end {
            self.cursor = self.points.len() - 1;
        }
    }

    /// Whether there is a run to pick from: two intervals at least.
    pub fn is_usable(&self) -> bool {
        self.points.len() >= 2
    }

    /// Moves the cursor by `by` intervals, within the run.
    pub fn step(&mut self, by: isize) {
        let last = self.points.len().saturating_sub(1);
        self.cursor = self.cursor.saturating_add_signed(by).min(last);
    }

    /// Begins a range at the cursor, or ends the one begun there and selects it.
    pub fn mark(&mut self) -> Option<Part> {
        match self.anchor.take() {
            None => {
                self.anchor = Some(self.cursor);
                None
            }
            Some(a) => {
                let part = Part::Range(a.min(self.cursor), a.max(self.cursor));
                self.selected = Some(part);
                Some(part)
            }
        }
    }

    /// Selects the intervals of the last [`LAST_S`] seconds.
    pub fn last_seconds(&mut self) -> Option<Part> {
        let end = self.points.last()?.t1_s;
        let from = self
            .points
            .iter()
            .position(|p| p.t1_s > end - LAST_S)
            .unwrap_or(0);
        let part = Part::Range(from, self.points.len() - 1);
        self.anchor = None;
        self.selected = Some(part);
        Some(part)
    }

    /// The whole run again: no part selected, no baseline.
    pub fn whole(&mut self) {
        self.anchor = None;
        self.selected = None;
        self.baseline = None;
    }

    /// The slow intervals selected, against the rest as the baseline; `None` when no
    /// interval has a p99 (no latency metric).
    pub fn slow_against_rest(&mut self) -> Option<u64> {
        let threshold = self.run_p99_ns?;
        self.anchor = None;
        self.selected = Some(Part::Slow);
        self.baseline = Some(Part::Rest);
        Some(threshold)
    }

    /// The selected part becomes the baseline (the whole run is selected again).
    pub fn selected_as_baseline(&mut self) -> Option<Part> {
        let part = self.selected.take()?;
        self.baseline = Some(part);
        Some(part)
    }

    /// Whether interval `i` is in `part`.
    pub fn includes(&self, part: Part, i: usize) -> bool {
        let slow = || {
            matches!(
                (self.points.get(i).and_then(|p| p.p99_ns), self.run_p99_ns),
                (Some(p), Some(t)) if p > t
            )
        };
        match part {
            Part::Range(a, b) => (a..=b).contains(&i),
            Part::Slow => slow(),
            Part::Rest => i < self.points.len() && !slow(),
        }
    }

    /// How the footer and the strip name `part`.
    pub fn label(&self, part: Part) -> String {
        match part {
            Part::Range(a, b) => {
                let t0 = self.points.get(a).map_or(0.0, |p| p.t0_s);
                let t1 = self.points.get(b).map_or(0.0, |p| p.t1_s);
                format!("{t0:.1}–{t1:.1} s")
            }
            Part::Slow => "slow intervals".into(),
            Part::Rest => "other intervals".into(),
        }
    }

    /// The latency of `part`: its intervals' histograms merged.
    pub fn latency_of(&self, part: Part, metric: &str) -> Latency {
        Latency::of_intervals(
            metric.to_owned(),
            self.latency
                .iter()
                .enumerate()
                .filter(|&(i, _)| self.includes(part, i))
                .filter_map(|(_, h)| h.as_ref()),
        )
    }

    /// The stacks of `part` of each kind a part shows ([`part_kinds`]), from the
    /// per-interval stacks; `None` when the session has none.
    pub fn stacks_of(&self, part: Part) -> Option<ByKind<Option<StackTree>>> {
        let stacks = self.stacks.as_ref()?;
        let keep = |i: &benchtop_sessions::intervals::LoadedInterval| {
            let mid_s = i.mid_ns() as f64 / 1e9;
            // The interval of the strip whose span holds the stacks' interval's middle.
            let at = self.points.partition_point(|p| p.t1_s <= mid_s);
            self.includes(part, at)
        };
        Some(ByKind::from_fn(|kind| {
            is_part_kind(kind).then(|| stacks.tree(kind, keep))
        }))
    }
}

/// The kinds a part of the run shows with its own stacks: those weighed per interval
/// that are not memory profiles (on- and off-CPU).
pub fn part_kinds() -> impl Iterator<Item = Kind> {
    Kind::ALL.into_iter().filter(|&k| is_part_kind(k))
}

/// Whether a part of the run shows `kind` with its own stacks ([`part_kinds`]).
pub fn is_part_kind(kind: Kind) -> bool {
    let spec = kind.spec();
    spec.interval_field.is_some() && !spec.memory
}

/// A saved session of eight 1 s intervals for the tests: `first` runs in the first four,
/// `second` (three times as often) in the last four, whose p99 is ten times higher.
#[cfg(test)]
pub(crate) fn example_state() -> super::State {
    use benchtop_sessions::intervals::StacksChunk;
    let mut state = super::State::new("ring", "num-nodes=5", false);
    state.live.run.status = super::live::RunStatus::Finished(benchtop_sessions::Status::Complete);
    state.live.run.throughput_metric = Some("ops".into());
    let mut chunks = benchtop_sessions::synthetic::TreeChunks::default();
    let mut bytes = StacksChunk::header();
    for i in 0..8u32 {
        let second = i >= 4;
        let mut row = TimeseriesRow::default();
        row.t_s = f64::from(i + 1);
        row.interval_s = 1.0;
        row.rates
            .insert("ops".into(), 1000.0 + f64::from(i) * 100.0);
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        h.record_n(if second { 50_000 } else { 5_000 }, 100)
            .unwrap();
        state.live.run.latency.add(&h);
        state
            .live
            .timeline
            .push(&row, Some("ops"), Some(("lap", SparseHistogram::from(&h))));
        let mut cpu = StackTree::new();
        // And waits: the slow intervals' ended by another waker.
        let mut waits = StackTree::new();
        let woken_by = benchtop_sessions::waits::WOKEN_BY;
        if second {
            cpu.add_names(["main", "second"], 30);
            waits.add_names(["main", "recv", woken_by, "p", "peer", "slow_send"], 900);
        } else {
            cpu.add_names(["main", "first"], 10);
            waits.add_names(["main", "recv", woken_by, "p", "peer", "fast_send"], 100);
        }
        let span = (
            u64::from(i) * 1_000_000_000,
            u64::from(i + 1) * 1_000_000_000,
        );
        chunks
            .chunk(span, &[(Kind::Cpu, &cpu), (Kind::Waits, &waits)])
            .write_jsonl(&mut bytes);
    }
    state.live.run.latency.metric = "lap".into();
    state.live.timeline.run_p99_ns = Some(20_000);
    let stacks = IntervalStacks::parse(
        &bytes,
        std::path::Path::new("stacks.jsonl"),
        &benchtop_sessions::limits::LoadOptions::default(),
    )
    .unwrap();
    let whole = stacks.tree_in(Kind::Cpu, 0, u64::MAX);
    let waits = stacks.tree_in(Kind::Waits, 0, u64::MAX);
    state.live.timeline.stacks = Some(stacks);
    state.set_tree(Kind::Cpu, whole);
    state.set_tree(Kind::Waits, waits);
    state
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::state::{AppEvent, Key, State};

    pub(in crate::state) fn press(state: &mut State, keys: &str) {
        let now = std::time::Instant::now();
        for c in keys.chars() {
            state.update(AppEvent::Key(Key::Char(c)), now);
        }
    }

    pub(in crate::state) fn flame_weights(state: &State) -> (u64, Vec<String>) {
        let tree = state.live.flames.panes[Kind::Cpu].tree();
        let mut names = Vec::new();
        tree.for_each_stack(|frames, _| {
            names.push(
                frames
                    .iter()
                    .map(|&f| tree.name(f))
                    .collect::<Vec<_>>()
                    .join(";"),
            );
        });
        (tree.total_weight(), names)
    }

    #[test]
    fn a_selected_range_gives_the_flame_pane_that_ranges_weights() {
        let mut state = example_state();
        assert_eq!(flame_weights(&state).0, 4 * 10 + 4 * 30);
        // From the end: back to interval 1, mark, on to 2, mark: intervals 1 and 2.
        press(&mut state, ",,,,,,r.r");
        assert_eq!(state.live.timeline.selected, Some(Part::Range(1, 2)));
        assert_eq!(flame_weights(&state), (20, vec!["main;first".to_owned()]));
        // The latency pane shows the range's intervals only.
        let shown = state.live.timeline.latency_shown.as_ref().unwrap();
        assert_eq!(shown.run.count, 200);
        // The last ten seconds hold the whole of this short run; A: the whole run.
        press(&mut state, "....r.r");
        assert_eq!(
            flame_weights(&state),
            (60, vec!["main;second".to_owned()]),
            "intervals 6 and 7"
        );
        press(&mut state, "A");
        assert_eq!(flame_weights(&state).0, 160);
        assert!(state.live.timeline.latency_shown.is_none());
    }

    #[test]
    fn a_range_made_the_baseline_is_the_difference_against_the_next_one() {
        let mut state = example_state();
        press(&mut state, ",,,,,,,r...rB");
        assert_eq!(state.live.timeline.baseline, Some(Part::Range(0, 3)));
        press(&mut state, ".r...r");
        let baseline = state.live.baseline.as_ref().expect("a baseline");
        assert_eq!(baseline.source, "0.0–4.0 s");
        assert!(state.live.flames.differential);
        assert_eq!(flame_weights(&state), (120, vec!["main;second".to_owned()]));
    }

    #[test]
    fn the_slow_key_shows_the_slow_intervals_against_the_rest() {
        let mut state = example_state();
        press(&mut state, "S");
        assert_eq!(flame_weights(&state), (120, vec!["main;second".to_owned()]));
        let baseline = state
            .live
            .baseline
            .as_ref()
            .expect("the rest as the baseline");
        assert_eq!(baseline.source, "other intervals");
        assert!(state.live.flames.differential);
        // A clears the timeline's baseline, and only it.
        press(&mut state, "A");
        assert!(state.live.baseline.is_none());
    }

    #[test]
    fn the_slow_key_on_the_waits_pane_shows_who_ended_the_slow_intervals_waits() {
        let mut state = example_state();
        press(&mut state, "oo");
        assert_eq!(state.live.flames.kind, Kind::Waits);
        press(&mut state, "S");
        let tree = state.live.flames.panes[Kind::Waits].tree();
        let mut stacks = Vec::new();
        tree.for_each_stack(|frames, w| {
            let names: Vec<&str> = frames.iter().map(|&f| tree.name(f)).collect();
            stacks.push((names.join(";"), w));
        });
        assert_eq!(
            stacks,
            [("main;recv;— woken by —;p;peer;slow_send".to_owned(), 3_600)]
        );
        assert!(
            state.live.flames.differential,
            "against the other intervals"
        );
    }

    #[test]
    fn a_run_of_one_interval_has_no_timeline_to_pick_from() {
        let mut state = State::new("ring", "", false);
        state
            .live
            .timeline
            .push(&row(1.0, 1.0, 1), Some("ops"), None);
        press(&mut state, "rS");
        assert_eq!(state.live.timeline.selected, None);
        assert!(state.flash.is_some());
    }

    pub(in crate::state) fn row(t_s: f64, rate: f64, p99: u64) -> TimeseriesRow {
        let mut row = TimeseriesRow::default();
        row.t_s = t_s;
        row.interval_s = 1.0;
        row.rates.insert("ops".into(), rate);
        let mut p = benchtop_sessions::Percentiles::default();
        p.p99 = p99;
        row.latency.insert("lap".into(), p);
        row
    }

    fn timeline(n: usize) -> Timeline {
        let mut t = Timeline::default();
        for i in 0..n {
            let p99 = if i % 5 == 4 { 9_000 } else { 1_000 };
            t.push(&row(i as f64 + 1.0, 100.0, p99), Some("ops"), None);
        }
        t.run_p99_ns = Some(5_000);
        t
    }

    #[test]
    fn the_cursor_follows_the_run_until_moved_and_stays_inside_it() {
        let mut t = timeline(3);
        assert_eq!(t.cursor, 2);
        t.step(-5);
        assert_eq!(t.cursor, 0);
        t.push(&row(4.0, 1.0, 1), Some("ops"), None);
        assert_eq!(t.cursor, 0, "moved away: it stays");
        t.step(10);
        assert_eq!(t.cursor, 3);
        t.push(&row(5.0, 1.0, 1), Some("ops"), None);
        assert_eq!(t.cursor, 4, "at the end: it follows");
    }

    #[test]
    fn marking_twice_selects_the_range_between_either_way_round() {
        let mut t = timeline(10);
        t.cursor = 6;
        assert_eq!(t.mark(), None);
        t.step(-4);
        assert_eq!(t.mark(), Some(Part::Range(2, 6)));
        assert!(t.includes(Part::Range(2, 6), 2) && !t.includes(Part::Range(2, 6), 7));
        assert_eq!(t.label(Part::Range(2, 6)), "2.0–7.0 s");
    }

    #[test]
    fn the_last_seconds_are_the_intervals_ending_in_them() {
        let mut t = timeline(30);
        assert_eq!(t.last_seconds(), Some(Part::Range(20, 29)));
        let mut short = timeline(4);
        assert_eq!(short.last_seconds(), Some(Part::Range(0, 3)));
        assert_eq!(Timeline::default().last_seconds(), None);
    }

    #[test]
    fn slow_intervals_are_those_above_the_run_p99_and_the_rest_the_others() {
        let mut t = timeline(10);
        assert_eq!(t.slow_against_rest(), Some(5_000));
        let slow: Vec<usize> = (0..10).filter(|&i| t.includes(Part::Slow, i)).collect();
        assert_eq!(slow, [4, 9]);
        assert_eq!((0..10).filter(|&i| t.includes(Part::Rest, i)).count(), 8);
        let mut none = timeline(3);
        none.run_p99_ns = None;
        assert_eq!(none.slow_against_rest(), None, "no latency metric");
    }

    #[test]
    fn a_selection_becomes_the_baseline_and_whole_clears_both() {
        let mut t = timeline(10);
        t.cursor = 1;
        t.mark();
        t.cursor = 3;
        t.mark();
        assert_eq!(t.selected_as_baseline(), Some(Part::Range(1, 3)));
        assert_eq!(t.selected, None);
        t.whole();
        assert_eq!((t.selected, t.baseline), (None, None));
        assert_eq!(t.selected_as_baseline(), None, "nothing selected");
    }

    #[test]
    fn the_strip_keeps_at_most_an_hour_of_100ms_intervals() {
        let mut t = Timeline::default();
        for i in 0..MAX_INTERVALS + 5 {
            t.push(&row(i as f64 * 0.1, 1.0, 1), Some("ops"), None);
        }
        assert_eq!(t.points.len(), MAX_INTERVALS);
        assert_eq!(t.latency.len(), MAX_INTERVALS);
    }
}

/// What a key does to the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimelineAction {
    /// The cursor one interval back.
    Prev,
    /// The cursor one interval on.
    Next,
    /// Begin a range at the cursor, or end it there and show it.
    Mark,
    /// Show the last [`LAST_S`] seconds.
    Last,
    /// Show the whole run again.
    Whole,
    /// The part shown becomes the baseline of the difference.
    AsBaseline,
    /// The slow intervals against the rest.
    Slow,
}

impl super::State {
    /// Carries out `action` on the live screen's timeline and shows what it selects.
    pub(super) fn timeline_act(&mut self, action: TimelineAction, now: std::time::Instant) {
        let t = &mut self.live.timeline;
        if !t.is_usable() {
            self.flash("the timeline needs two intervals".into(), true, now);
            return;
        }
        match action {
            TimelineAction::Prev => t.step(-1),
            TimelineAction::Next => t.step(1),
            TimelineAction::Mark => {
                if t.mark().is_none() {
                    let at = t.label(Part::Range(t.cursor, t.cursor));
                    self.flash(format!("range from {at}: move, then r again"), false, now);
                    return;
                }
            }
            TimelineAction::Last => _ = t.last_seconds(),
            TimelineAction::Whole => t.whole(),
            TimelineAction::AsBaseline => {
                if t.selected_as_baseline().is_none() {
                    self.flash("no range selected: r … r selects one".into(), true, now);
                    return;
                }
            }
            TimelineAction::Slow => {
                if t.slow_against_rest().is_none() {
                    self.flash(
                        "no latency metric: no interval is slow or fast".into(),
                        true,
                        now,
                    );
                    return;
                }
            }
        }
        if !matches!(action, TimelineAction::Prev | TimelineAction::Next) {
            self.show_timeline_parts(now);
        }
    }

    /// Shows the selected part in the latency and flame panes (the whole run when none),
    /// and the baseline part as the baseline of the difference.
    pub(super) fn show_timeline_parts(&mut self, now: std::time::Instant) {
        let t = &mut self.live.timeline;
        let metric = self.live.run.latency.metric.clone();
        let shown_latency = t.selected.map(|p| t.latency_of(p, &metric));
        // The whole run's trees go aside while a part shows (a live run's go on growing
        // there) and come back when none does.
        let (trees, aside) = match (t.selected, t.whole.take()) {
            (Some(part), held) => {
                let aside = held.is_none();
                t.whole = held;
                (t.stacks_of(part), aside)
            }
            (None, Some(whole)) => (Some(whole), false),
            // The panes show the whole run already.
            (None, None) => (None, false),
        };
        let t = &self.live.timeline;
        let baseline = t.baseline.map(|p| super::Baseline {
            stacks: t.stacks_of(p).unwrap_or_default(),
            latency: t.latency_of(p, &metric).run,
            source: t.label(p),
        });
        let text = match (t.selected, t.baseline) {
            (Some(s), Some(b)) => format!("{} against {}", t.label(s), t.label(b)),
            (Some(s), None) => format!("showing {}", t.label(s)),
            (None, Some(b)) => format!("the whole run against {}", t.label(b)),
            (None, None) => "the whole run".into(),
        };
        let no_stacks = t.stacks.is_none();
        self.live.timeline.latency_shown = shown_latency;
        if let Some(mut trees) = trees {
            let mut replaced: ByKind<Option<StackTree>> = ByKind::default();
            for kind in part_kinds() {
                let tree = trees.take(kind).unwrap_or_default();
                replaced[kind] = Some(self.replace_tree(kind, tree));
            }
            if aside {
                self.live.timeline.whole = Some(replaced);
            } else {
                self.retired.extend(replaced.into_values().flatten());
            }
        }
        match baseline {
            Some(b) => {
                self.apply_baseline(b);
                self.live.flames.set_differential(true);
                self.live.timeline.baseline_shown = true;
            }
            None => {
                if std::mem::take(&mut self.live.timeline.baseline_shown) {
                    self.live.baseline = None;
                    for kind in part_kinds() {
                        self.live.flames.panes[kind].set_baseline(None);
                    }
                    self.live.flames.set_differential(false);
                }
            }
        }
        let dropped = self.live.timeline.dropped_stacks;
        let note = if no_stacks {
            " (latency only: the run has no per-interval stacks)".to_owned()
        } else if dropped > 0 {
            format!(" (the stacks of the first {dropped} intervals were dropped to bound memory)")
        } else {
            String::new()
        };
        self.flash(format!("{text}{note}"), false, now);
    }
}
