//! A live run's side of the timeline strip: its per-interval stacks as the recorder hands
//! them out (appended, the oldest dropped past [`MAX_LIVE_WEIGHTS`] or the strip's
//! [`MAX_INTERVALS`]), the whole run's stacks set aside while a part of the run shows,
//! and the mouse on the strip (a click moves the cursor, a drag selects a range). Apart
//! from `timeline`, which holds what an opened session and a live run share.

use benchtop_sessions::intervals::{IntervalStacks, StacksChunk};
use benchtop_sessions::{ByKind, Kind, StackTree};

use super::timeline::{MAX_INTERVALS, MAX_LIVE_STACKS, MAX_LIVE_WEIGHTS, Part};

/// The bounds of a live run's table of stacks: [`MAX_LIVE_STACKS`], or `max_stacks`.
pub(super) fn live_limits(max_stacks: Option<usize>) -> benchtop_sessions::limits::LoadOptions {
    let mut limits = benchtop_sessions::limits::LoadOptions::default();
    limits.max_stacks = max_stacks.unwrap_or(MAX_LIVE_STACKS);
    limits
}

/// The mouse on the strip, at an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pointer {
    /// The button went down: the cursor goes there.
    Press(usize),
    /// The mouse moved with the button down: the range from the press to here is being
    /// marked.
    Drag(usize),
    /// The button went up: a drag selects the range from the press to here and shows it.
    Release(usize),
}

impl super::State {
    /// The mouse on the strip: a click moves the cursor, a drag selects a range (as
    /// `r`, moving, `r` does) and shows it.
    pub(super) fn timeline_pointer(&mut self, pointer: Pointer, now: std::time::Instant) {
        let t = &mut self.live.timeline;
        if !t.is_usable() || self.screen != super::Screen::Live {
            return;
        }
        let last = t.points.len() - 1;
        match pointer {
            Pointer::Press(i) => {
                t.cursor = i.min(last);
                t.anchor = None;
                t.drag = Some(t.cursor);
            }
            Pointer::Drag(i) => {
                let Some(from) = t.drag else { return };
                t.cursor = i.min(last);
                t.anchor = (t.cursor != from).then_some(from);
            }
            Pointer::Release(i) => {
                let Some(from) = t.drag.take() else { return };
                t.cursor = i.min(last);
                t.anchor = None;
                if t.cursor != from {
                    t.selected = Some(Part::Range(from.min(t.cursor), from.max(t.cursor)));
                    self.show_timeline_parts(now);
                }
            }
        }
    }

    /// The whole run's stacks (a finished run's, read from its session): shown, or
    /// held while a part of the run shows with its own stacks.
    pub(super) fn whole_run_stacks(&mut self, trees: ByKind<Option<StackTree>>) {
        let t = &mut self.live.timeline;
        // Trees of their own: the nodes grown from chunks were the replaced trees'.
        t.grow.forget();
        if t.selected.is_some() && t.stacks.is_some() {
            if trees.values().any(Option::is_some)
                && let Some(old) = t.whole.replace(trees)
            {
                self.retired.extend(old.into_values().flatten());
            }
            return;
        }
        for (kind, tree) in Kind::ALL.into_iter().zip(trees.into_values()) {
            if let Some(tree) = tree {
                self.set_tree(kind, tree);
            }
        }
    }

    /// A live run's per-interval stacks: kept (the oldest dropped past
    /// [`MAX_LIVE_WEIGHTS`]), and the part shown built again when they add to it.
    pub(super) fn live_interval_stacks(&mut self, chunk: &StacksChunk, now: std::time::Instant) {
        let t = &mut self.live.timeline;
        let stacks = t.stacks.get_or_insert_with(IntervalStacks::default);
        let limits = live_limits(t.max_stacks);
        let dropped = t.live_ids.dropped;
        stacks.append(chunk, &mut t.live_ids, &limits);
        t.dropped_stacks += stacks.drop_oldest(MAX_INTERVALS, MAX_LIVE_WEIGHTS);
        // Stacks were left out, and the bound is why.
        let full = t.live_ids.dropped > dropped && stacks.stack_count() >= limits.max_stacks;
        self.grow_whole_run(chunk);
        let t = &mut self.live.timeline;
        if full && !std::mem::replace(&mut t.stacks_full, true) {
            self.flash(
                format!(
                    "the live profile holds {} stacks: newer ones are left out until the run \
                     ends (the session keeps them all)",
                    limits.max_stacks
                ),
                true,
                now,
            );
        }
        let t = &mut self.live.timeline;
        let Some(part) = t.selected else {
            return;
        };
        let adds_to_part = chunk.intervals.iter().any(|i| {
            let mid_s = (i.t0_ns + i.t1_ns.saturating_sub(i.t0_ns) / 2) as f64 / 1e9;
            t.includes(part, t.points.partition_point(|p| p.t1_s <= mid_s))
        });
        if let (true, Some(trees)) = (adds_to_part, t.stacks_of(part)) {
            for (kind, tree) in Kind::ALL.into_iter().zip(trees.into_values()) {
                if let Some(tree) = tree {
                    self.set_tree(kind, tree);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::live::LiveEvent;
    use crate::state::timeline::tests::{flame_weights, press, row};
    use crate::state::{AppEvent, State};
    use benchtop_sessions::Kind;
    use benchtop_sessions::intervals::{IntervalWeights, Weight};

    /// A live run of eight 1 s intervals: `first` runs in the first four, `second` in
    /// the last four, with the recorder's rows and per-interval stacks in the order it
    /// sends them.
    #[allow(clippy::field_reassign_with_default)]
    fn live_run() -> (State, StackTree) {
        use benchtop_sessions::intervals::StackEntry;
        let now = std::time::Instant::now();
        let mut state = State::new("ring", "", false);
        let live = |state: &mut State, e: LiveEvent| state.update(AppEvent::Live(e), now);
        live(
            &mut state,
            LiveEvent::Started {
                throughput: Some("ops".into()),
                latency: None,
                sampling: String::new(),
            },
        );
        let mut whole = StackTree::new();
        for i in 0..8u32 {
            let second = i >= 4;
            let mut chunk = StacksChunk::default();
            if i == 0 {
                chunk.frames = vec![
                    (0, "main".into()),
                    (1, "first".into()),
                    (2, "second".into()),
                ];
                chunk.stacks = [(0, None, 0), (1, Some(0), 1), (2, Some(0), 2)]
                    .map(|(id, parent, frame)| StackEntry { id, parent, frame })
                    .to_vec();
            }
            let weight = if second { 30 } else { 10 };
            chunk.intervals.push(IntervalWeights {
                index: i,
                t0_ns: u64::from(i) * 1_000_000_000,
                t1_ns: u64::from(i + 1) * 1_000_000_000,
                weights: [(
                    Kind::Cpu,
                    vec![Weight {
                        tid: 1,
                        stack: if second { 2 } else { 1 },
                        weight,
                    }],
                )]
                .into_iter()
                .collect(),
            });
            live(&mut state, LiveEvent::IntervalStacks(Box::new(chunk)));
            live(
                &mut state,
                LiveEvent::Row {
                    row: Box::new(row(f64::from(i + 1), 100.0, 1)),
                    histograms: vec![],
                },
            );
            let leaf = if second { "second" } else { "first" };
            whole.add_names(["main", leaf], weight);
        }
        (state, whole)
    }

    #[test]
    #[allow(clippy::field_reassign_with_default)]
    fn a_live_run_shows_the_range_picked_in_its_flamegraph_and_top_functions() {
        let (mut state, whole) = live_run();
        assert_eq!(flame_weights(&state).0, 160);
        press(&mut state, ",,,,,,r.r");
        assert_eq!(state.live.timeline.selected, Some(Part::Range(1, 2)));
        assert_eq!(flame_weights(&state), (20, vec!["main;first".to_owned()]));
        press(&mut state, "t");
        let top = &state.live.flames.views.top;
        let tree = state.live.flames.panes[Kind::Cpu].tree();
        let rows: Vec<(&str, u64)> = top
            .rows
            .iter()
            .map(|r| (tree.name(r.frame), r.total_weight))
            .collect();
        assert_eq!(rows, [("first", 20), ("main", 20)]);
        // The run goes on: its next interval grows the whole run set aside, not the part.
        let mut chunk = StacksChunk::default();
        chunk.intervals.push(IntervalWeights {
            index: 8,
            t0_ns: 8_000_000_000,
            t1_ns: 9_000_000_000,
            weights: [(
                Kind::Cpu,
                vec![Weight {
                    tid: 1,
                    stack: 2,
                    weight: 30,
                }],
            )]
            .into_iter()
            .collect(),
        });
        state.update(
            AppEvent::Live(LiveEvent::IntervalStacks(Box::new(chunk))),
            std::time::Instant::now(),
        );
        assert_eq!(flame_weights(&state).0, 20);
        // A: the whole run at once, grown while the part showed.
        press(&mut state, "A");
        assert_eq!(flame_weights(&state).0, 190);
        assert_eq!(whole.total_weight() + 30, 190);
        let shown = state.live.flames.panes[Kind::Cpu].tree();
        let main = shown.find("second").unwrap();
        assert_eq!(
            shown.frame_total(main),
            150,
            "four intervals of 30, and one more"
        );
        assert!(state.live.timeline.whole.is_none());
        // S: the slow intervals of a live run, from its own per-interval stacks.
        state.live.timeline.run_p99_ns = Some(0);
        for (i, p) in state.live.timeline.points.iter_mut().enumerate() {
            p.p99_ns = Some(if i >= 6 { 5 } else { 0 });
        }
        press(&mut state, "S");
        assert_eq!(flame_weights(&state), (60, vec!["main;second".to_owned()]));
    }

    #[test]
    fn a_live_table_at_its_bound_leaves_new_stacks_out_and_says_so_once() {
        use benchtop_sessions::synthetic::TreeChunks;
        let now = std::time::Instant::now();
        let mut state = State::new("ring", "", false);
        state.live.timeline.max_stacks = Some(3);
        let mut chunks = TreeChunks::default();
        let mut send = |state: &mut State, stacks: &[(&str, u64)]| {
            let mut tree = StackTree::new();
            for (stack, w) in stacks {
                tree.add_names(stack.split(';'), *w);
            }
            let chunk = chunks.cpu(&tree);
            state.update(
                AppEvent::Live(LiveEvent::IntervalStacks(Box::new(chunk))),
                now,
            );
        };
        // main, main;a, main;b: the table's three.
        send(&mut state, &[("main;a", 2), ("main;b", 1)]);
        assert!(state.flash.is_none());
        send(&mut state, &[("main;a", 1), ("main;c", 5)]);
        let flash = state.flash.clone().expect("said");
        assert!(
            flash.error && flash.text.contains("holds 3 stacks"),
            "{}",
            flash.text
        );
        // Known stacks go on adding up; the new one is left out.
        assert_eq!(flame_weights(&state).0, 4);
        state.flash = None;
        send(&mut state, &[("main;b", 1), ("main;d", 1)]);
        assert!(state.flash.is_none(), "said once");
        assert_eq!(flame_weights(&state).0, 5);
    }
}
