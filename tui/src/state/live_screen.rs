//! The live screen: one run, live or as it ended — what arrives from its recorder (rows,
//! chunks of stacks, allocation trees, notices), held while the display is paused, and
//! the screen's own actions on it (a snapshot, a baseline, the difference against it).

use std::time::Instant;

use benchtop_sessions::intervals::IntervalWeights;
use benchtop_sessions::{ByKind, Kind, StackTree};

use super::flame::FlameState;
use super::*;

/// The stack weights a paused live screen holds before it resumes by itself: the live
/// timeline's own bound ([`timeline::MAX_LIVE_WEIGHTS`], 32 MB), a few minutes of a
/// program sampled at 4,999 Hz whose every sample is a new stack.
pub(super) const MAX_HELD_WEIGHTS: usize = timeline::MAX_LIVE_WEIGHTS;

/// The live screen's state: one run, live or as it ended. A new run gets a fresh one.
#[derive(Debug)]
pub struct LiveScreen {
    /// The run.
    pub run: LiveRun,
    /// Its flamegraph.
    pub flames: FlamePanes,
    /// The baseline, once taken.
    pub baseline: Option<Baseline>,
    /// The display is frozen (the recording goes on; events are held).
    pub paused: bool,
    /// Quitting was asked for: leave once the recording is finished.
    pub quit_requested: bool,
    /// Events held while paused, applied on resume.
    held: Vec<LiveEvent>,
    /// Stack weights in the chunks held (16 bytes each).
    held_weights: usize,
    /// The run's intervals and the parts of it picked.
    pub timeline: timeline::Timeline,
}

impl LiveScreen {
    /// The screen of a new run of `workload` with `params` (`name=value …`).
    pub fn new(workload: &str, params: &str) -> Self {
        LiveScreen {
            run: LiveRun {
                workload: workload.to_owned(),
                params: params.to_owned(),
                ..LiveRun::default()
            },
            flames: FlamePanes::default(),
            baseline: None,
            paused: false,
            quit_requested: false,
            held: Vec::new(),
            held_weights: 0,
            timeline: timeline::Timeline::default(),
        }
    }
}

impl State {
    /// A live event: applied, or held while the display is paused (the newest
    /// allocation trees only, each holding the whole run's; every chunk of stacks, up to
    /// [`MAX_HELD_WEIGHTS`]).
    pub(super) fn live_event(&mut self, event: LiveEvent, now: Instant) {
        if self.live.paused {
            let held = &mut self.live.held;
            if matches!(event, LiveEvent::Allocations(_)) {
                held.retain(|e| !matches!(e, LiveEvent::Allocations(_)));
            }
            if let LiveEvent::IntervalStacks(chunk) = &event {
                self.live.held_weights += chunk
                    .intervals
                    .iter()
                    .map(IntervalWeights::len)
                    .sum::<usize>();
            }
            held.push(event);
            if self.live.held_weights > MAX_HELD_WEIGHTS {
                // Held any longer, the stacks would take memory without bound.
                self.resume(now);
                self.flash(
                    "resumed: the stacks held while paused reached their limit".into(),
                    true,
                    now,
                );
            }
        } else {
            self.on_live(event, now);
        }
    }

    /// Events held while the display is paused.
    pub fn held(&self) -> usize {
        self.live.held.len()
    }

    pub(super) fn on_live(&mut self, event: LiveEvent, now: Instant) {
        match event {
            LiveEvent::Spawned { dir, pid } => {
                self.live.run.dir = Some(dir);
                self.live.run.pid = Some(pid);
            }
            LiveEvent::Started {
                throughput,
                latency,
                sampling,
            } => {
                if self.live.run.status == RunStatus::Starting {
                    self.live.run.status = RunStatus::Running;
                }
                self.live.run.started_at = Some(now);
                self.live.run.throughput_metric = throughput;
                self.live.run.latency.metric = latency.unwrap_or_default();
                self.live.run.sampling = sampling;
            }
            LiveEvent::Row { row, histograms } => {
                self.live.run.add_row(&row, &histograms);
                timeline::Timeline::add_live(&mut self.live, &row, &histograms);
            }
            LiveEvent::Allocations(trees) => {
                // While the run goes on, what the worker holds now.
                self.set_tree(Kind::Alloc, trees.alloc);
                self.set_tree(Kind::Live, trees.live_end);
            }
            LiveEvent::IntervalStacks(chunk) => self.live_interval_stacks(&chunk, now),
            LiveEvent::Notice(notice) => {
                if let benchtop_record::Notice::StreamDropped(drops) = &notice {
                    self.live.run.stream_drops = Some(drops.clone());
                }
                let text = notice.to_string();
                match notice.kind() {
                    NoticeKind::Warning => self.flash(text.clone(), true, now),
                    NoticeKind::Done => self.flash(text.clone(), false, now),
                    NoticeKind::Progress => {}
                }
                self.live.run.status_line = text;
            }
            // The progress line's figures: the screen draws the rows themselves.
            LiveEvent::Progress(_) => {}
        }
    }

    pub(super) fn set_tree(&mut self, kind: Kind, tree: StackTree) {
        let old = self.replace_tree(kind, tree);
        self.retired.push(old);
    }

    /// Shows `tree` in the pane of `kind`; returns the tree it showed.
    pub(super) fn replace_tree(&mut self, kind: Kind, tree: StackTree) -> StackTree {
        let old = self.live.flames.pane_mut(kind).set_tree(tree);
        if kind == self.live.flames.kind {
            self.live.flames.refresh_views();
        }
        old
    }

    /// The stacks replaced since the last call: freeing a big tree takes milliseconds,
    /// which the loop spends off the render path.
    pub fn take_retired(&mut self) -> Vec<StackTree> {
        std::mem::take(&mut self.retired)
    }

    pub(super) fn on_finished(
        &mut self,
        result: Result<RecordOutcome, String>,
        now: Instant,
    ) -> Vec<Effect> {
        self.resume(now);
        self.live.run.ended_at = Some(now);
        let mut effects = Vec::new();
        match result {
            Ok(outcome) => {
                let status = outcome.status;
                self.live.run.status = RunStatus::Finished(status);
                self.live.run.ended_by = outcome.ended_by;
                let mut text = format!(
                    "the run ended: {}",
                    benchtop_sessions::status_words(status, outcome.ended_by)
                );
                // The last warning says why, when the run did not end well.
                if let Some(w) = outcome.warnings.last() {
                    text.push_str(&format!(" ({w})"));
                }
                // In the header for good; the footer keeps the keys.
                self.live.run.status_line = text;
                self.live.flames.views.lines_dir = Some(outcome.dir.clone());
                effects.push(Effect::LoadFinalStacks(outcome.dir));
            }
            Err(e) => {
                self.live.run.status_line = format!("the recording failed: {e}");
                self.live.run.status = RunStatus::Failed(e);
            }
        }
        if self.live.quit_requested {
            effects.push(Effect::Quit);
        }
        effects
    }

    pub(super) fn resume(&mut self, now: Instant) {
        self.live.paused = false;
        self.live.held_weights = 0;
        for event in std::mem::take(&mut self.live.held) {
            self.on_live(event, now);
        }
    }

    /// `s`: a snapshot of the session while the run goes on.
    pub(super) fn snapshot(&mut self, now: Instant) -> Vec<Effect> {
        match self.live.run.status {
            RunStatus::Running => {
                self.flash("saving a snapshot of the session…".into(), false, now);
                return vec![Effect::SaveSnapshot];
            }
            RunStatus::Starting => {
                self.flash(
                    "nothing to save yet: the run has not started".into(),
                    true,
                    now,
                );
            }
            _ => self.flash("the run is over: its session is written".into(), false, now),
        }
        Vec::new()
    }

    pub(super) fn take_baseline(&mut self, now: Instant) {
        let flames = &self.live.flames;
        if flames.panes.values().all(FlameState::is_empty)
            && self.live.run.latency.total.histogram().is_none()
        {
            self.flash("nothing to take as a baseline yet".into(), true, now);
            return;
        }
        let elapsed = self
            .live
            .run
            .started_at
            .map_or(0.0, |s| now.duration_since(s).as_secs_f64());
        // Memory panes take their own baselines below.
        let tree = |(kind, f): (Kind, &FlameState)| {
            (!f.is_empty() && !kind.spec().memory).then(|| f.tree().clone())
        };
        let baseline = Baseline {
            stacks: ByKind::from_fn(|k| tree((k, &self.live.flames.panes[k]))),
            latency: self.live.run.latency.run,
            source: format!("taken at {elapsed:.1} s"),
        };
        self.flash(
            format!("baseline {} — d shows the difference", baseline.source),
            false,
            now,
        );
        self.apply_baseline(baseline);
        self.live.flames.take_memory_baseline();
    }

    pub(super) fn toggle_differential(&mut self, now: Instant) {
        if self.live.baseline.is_none() {
            self.flash("no baseline: b takes one".into(), true, now);
            return;
        }
        let flames = &mut self.live.flames;
        flames.set_differential(!flames.differential);
    }
}

#[cfg(test)]
#[allow(clippy::field_reassign_with_default)]
mod tests {
    use super::*;
    use crate::state::tests::{keys, stacks, state, tree};
    use benchtop_sessions::synthetic::TreeChunks;

    #[test]
    fn pause_holds_live_events_and_resume_applies_them() {
        let mut c = TreeChunks::default();
        let mut s = state();
        let now = Instant::now();
        keys(&mut s, &[Key::Char(' ')], now);
        assert!(s.live.paused);
        s.update(stacks(&mut c, tree(&[("bt-ring;main;work", 3)])), now);
        assert_eq!(s.held(), 1);
        assert!(
            s.flames().panes[Kind::Cpu].is_empty(),
            "the display is frozen"
        );
        keys(&mut s, &[Key::Char(' ')], now);
        assert!(!s.live.paused && s.held() == 0);
        assert_eq!(s.flames().panes[Kind::Cpu].tree().total_weight(), 3);
    }

    #[test]
    fn a_baseline_is_taken_with_b_and_d_toggles_the_difference() {
        let mut c = TreeChunks::default();
        let mut s = state();
        let now = Instant::now();
        keys(&mut s, &[Key::Char('d')], now);
        assert!(!s.flames().differential, "no baseline yet");
        assert!(s.flash.as_ref().is_some_and(|f| f.error));
        s.update(stacks(&mut c, tree(&[("bt-ring;main;work", 3)])), now);
        keys(&mut s, &[Key::Char('b'), Key::Char('d')], now);
        assert!(s.live.baseline.is_some() && s.flames().differential);
        assert!(s.flames().panes[Kind::Cpu].differential());
        keys(&mut s, &[Key::Char('d')], now);
        assert!(!s.flames().differential && !s.flames().panes[Kind::Cpu].differential());
    }

    #[test]
    fn grown_stacks_stay_and_replaced_ones_are_handed_to_the_loop_to_free() {
        let mut c = TreeChunks::default();
        let mut s = state();
        let now = Instant::now();
        s.update(
            AppEvent::Live(LiveEvent::Spawned {
                dir: "sessions/a".into(),
                pid: 2,
            }),
            now,
        );
        s.update(stacks(&mut c, tree(&[("bt-ring;main;work", 3)])), now);
        s.update(stacks(&mut c, tree(&[("bt-ring;main;work", 5)])), now);
        assert!(s.take_retired().is_empty(), "the profile grew in place");
        assert_eq!(s.flames().panes[Kind::Cpu].tree().total_weight(), 8);
        // The session's own stacks at the end replace it.
        s.update(
            AppEvent::FinalStacks(Box::new((
                "sessions/a".into(),
                [
                    (Kind::Cpu, Some(tree(&[("bt-ring;main;work", 9)]))),
                    (Kind::OffCpu, Some(tree(&[("bt-ring;main;wait", 1)]))),
                ]
                .into_iter()
                .collect(),
            ))),
            now,
        );
        let retired = s.take_retired();
        let weights: Vec<u64> = retired.iter().map(StackTree::total_weight).collect();
        assert_eq!(weights, [8, 0], "the grown profiles");
        assert!(s.take_retired().is_empty());
    }

    #[test]
    fn a_pause_holding_too_many_stacks_resumes_by_itself_and_says_so() {
        use benchtop_sessions::intervals::{IntervalWeights, StacksChunk, Weight};
        let mut s = state();
        let now = Instant::now();
        keys(&mut s, &[Key::Char(' ')], now);
        let chunk = |n: usize| {
            let mut c = StacksChunk::default();
            let mut i = IntervalWeights::default();
            i.weights[Kind::Cpu] = vec![
                Weight {
                    tid: 1,
                    stack: 7,
                    weight: 1,
                };
                n
            ];
            c.intervals.push(i);
            AppEvent::Live(LiveEvent::IntervalStacks(Box::new(c)))
        };
        s.update(chunk(MAX_HELD_WEIGHTS / 2), now);
        s.update(chunk(MAX_HELD_WEIGHTS / 2), now);
        assert!(s.live.paused && s.held() == 2, "at the limit, still held");
        s.update(chunk(1), now);
        assert!(!s.live.paused && s.held() == 0);
        let flash = s.flash.as_ref().unwrap();
        assert!(
            flash.error && flash.text.contains("limit"),
            "{}",
            flash.text
        );
        // Paused again, the count starts over.
        keys(&mut s, &[Key::Char(' ')], now);
        s.update(chunk(1), now);
        assert!(s.live.paused && s.held() == 1);
    }

    #[test]
    fn while_paused_every_intervals_stacks_are_held_and_added_on_resume() {
        let mut c = TreeChunks::default();
        let mut s = state();
        let now = Instant::now();
        keys(&mut s, &[Key::Char(' ')], now);
        for w in 1..=5 {
            s.update(stacks(&mut c, tree(&[("bt-ring;main;work", w)])), now);
        }
        assert_eq!(s.held(), 5, "each adds to the whole run");
        assert!(
            s.flames().panes[Kind::Cpu].is_empty(),
            "the display is frozen"
        );
        keys(&mut s, &[Key::Char(' ')], now);
        assert_eq!(s.flames().panes[Kind::Cpu].tree().total_weight(), 15);
    }

    #[test]
    fn final_stacks_of_an_earlier_run_are_ignored() {
        let mut s = state();
        let now = Instant::now();
        s.update(
            AppEvent::Live(LiveEvent::Spawned {
                dir: "sessions/b".into(),
                pid: 2,
            }),
            now,
        );
        let late = |dir: &str| {
            AppEvent::FinalStacks(Box::new((
                dir.into(),
                [
                    (Kind::Cpu, Some(tree(&[("bt-ring;main;work", 9)]))),
                    (Kind::OffCpu, None),
                ]
                .into_iter()
                .collect(),
            )))
        };
        s.update(late("sessions/a"), now);
        assert!(s.flames().panes[Kind::Cpu].is_empty());
        s.update(late("sessions/b"), now);
        assert_eq!(s.flames().panes[Kind::Cpu].tree().total_weight(), 9);
    }

    #[test]
    fn dropped_stream_batches_are_flashed_and_kept_for_the_header() {
        let mut s = state();
        let now = Instant::now();
        let drops = |failed| {
            benchtop_record::StreamDrops::new(
                "http://127.0.0.1:4317",
                failed,
                0,
                Some("connection refused".into()),
            )
        };
        for failed in [2, 7] {
            s.update(
                AppEvent::Live(LiveEvent::Notice(benchtop_record::Notice::StreamDropped(
                    drops(failed),
                ))),
                now,
            );
        }
        // The latest count stays for the header; the flash says it in full, as a warning.
        assert_eq!(s.live.run.stream_drops, Some(drops(7)));
        let flash = s.flash.as_ref().expect("a flash");
        assert!(flash.error);
        assert!(
            flash.text.contains("7 batches dropped") && flash.text.contains("connection refused"),
            "{}",
            flash.text
        );
        // Gone from the footer after a while, still in the header.
        s.update(AppEvent::Tick, now + FLASH_FOR);
        assert!(s.flash.is_none());
        assert_eq!(
            s.live.run.stream_drops.as_ref().map(|d| d.dropped()),
            Some(7)
        );
    }
}
