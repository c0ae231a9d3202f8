//! `benchtop open DIR` on a directory that holds neither session.json nor series.json:
//! the histories of the recordings under it, on the history screen; and the segments
//! either side of a change point, opened side by side as `open A B` opens two sessions.

use std::path::Path;

use anyhow::{Context, Result};
use benchtop_sessions::Session;
use benchtop_sessions::compare::{CompareOptions, compare_runs};
use benchtop_sessions::escape::{EscapedPath, escaped};
use benchtop_sessions::history::{self, HistoryKey, HistoryOptions};
use benchtop_sessions::limits::Held;
use benchtop_sessions::series::{Recorded, SERIES_FILE};
use benchtop_sessions::store::SESSION_FILE;

use crate::state::flame::FlameOptions;
use crate::state::history::{HistoryState, Segment, Segments};
use crate::state::{AppEvent, Screen, State};

/// Whether `dir` is a directory of recordings rather than one: a directory holding
/// neither session.json nor series.json (anything by those names, a link included, makes
/// it a recording, which its loader then checks).
pub fn is_history(dir: &Path) -> bool {
    let holds = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok();
    dir.is_dir() && !holds(SESSION_FILE) && !holds(SERIES_FILE)
}

/// The history screen of the recordings under `dir`, judged with `threshold`. Profiles
/// are not read here: only the points either side of a change point, when it is opened.
pub fn history_state(dir: &Path, threshold: f64, color: bool) -> Result<State> {
    let mut opts = HistoryOptions::default();
    opts.compare.threshold = threshold;
    opts.profiles = false;
    let found = history::load(&[dir.to_path_buf()], &opts)
        .with_context(|| format!("cannot read the history under {}", EscapedPath(dir)))?;
    let mut state = State::new("history", "", color);
    state.screen = Screen::History;
    state.history = HistoryState::new(vec![dir.to_path_buf()], found);
    state.history.threshold = threshold;
    Ok(state)
}

/// The compare screen of `segments`: every run of the history in each segment's
/// recordings (within one shared budget of rows and latency, as `open A B`'s two
/// sessions share theirs), judged across runs as `open A B` judges two series, each side
/// shown as its nearest point's first run with the stacks and latency of all its runs.
pub fn segments_state(segments: &Segments) -> Result<State> {
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut held = Held::default();
    let mut load = |segment: &Segment| -> Result<Vec<Recorded>> {
        let mut loaded = Vec::new();
        for dir in &segment.dirs {
            let recorded = Recorded::load_after(dir, held)
                .with_context(|| format!("cannot open {}", EscapedPath(dir)))?;
            held = held + recorded.held();
            loaded.push(recorded);
        }
        Ok(loaded)
    };
    let (before, after) = (load(&segments.before)?, load(&segments.after)?);
    let (runs_a, runs_b) = (
        runs_of(&before, &segments.key),
        runs_of(&after, &segments.key),
    );
    let mut opts = CompareOptions::default();
    opts.threshold = segments.threshold;
    let comparison = compare_runs(&runs_a, &runs_b, &opts);
    let a = shown(&runs_a, &segments.before.name)?;
    let b = shown(&runs_b, &segments.after.name)?;
    Ok(State::with_comparison(a, b, comparison, color))
}

/// What the loop tells the state when it has read `segments` ([`segments_state`], its
/// flamegraphs drawn with `options`), or why it could not.
pub fn opened(segments: &Segments, options: &FlameOptions) -> AppEvent {
    let opened = segments_state(segments).map(|mut state| {
        state.set_flame_options(options);
        Box::new(state)
    });
    AppEvent::Opened(opened.map_err(|e| escaped(&format!("{e:#}")).into_owned()))
}

/// The complete measured runs of `loaded` that belong to the history `key` (a series
/// may hold a sweep's other points).
fn runs_of<'a>(loaded: &'a [Recorded], key: &HistoryKey) -> Vec<&'a Session> {
    loaded
        .iter()
        .flat_map(Recorded::runs)
        .filter(|s| HistoryKey::of(&s.meta) == *key)
        .collect()
}

/// What the compare screen shows of a segment's `runs`, named `name`: the first (nearest
/// the change point before it, for the segment after; the oldest, for the segment before
/// it) with the stacks of time and the latency of every run added.
fn shown(runs: &[&Session], name: &str) -> Result<Session> {
    let Some(first) = runs.first() else {
        anyhow::bail!("{name}: no complete run of this history");
    };
    let mut shown = (*first).clone();
    name.clone_into(&mut shown.meta.id);
    for run in &runs[1..] {
        // Stacks of time (on- and off-CPU) add up over the runs; memory profiles are the
        // first run's.
        for (kind, mine) in shown.profiles.iter_mut() {
            if kind.spec().memory {
                continue;
            }
            match (mine.as_mut(), run.profile(kind)) {
                (Some(sum), Some(tree)) => sum.merge(tree),
                (None, Some(tree)) => *mine = Some(tree.clone()),
                _ => {}
            }
        }
        shown.latency.extend(run.latency.iter().cloned());
    }
    Ok(shown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchtop_sessions::synthetic::{SyntheticHistory, SyntheticSession};

    #[test]
    fn a_directory_of_recordings_is_a_history_and_a_recording_is_not() {
        let root = tempfile::tempdir().unwrap();
        assert!(is_history(root.path()));
        let mut session = SyntheticSession::default();
        session.intervals = 2;
        session.values_per_interval = 10;
        let dir = session.write(&root.path().join("s")).unwrap();
        assert!(!is_history(&dir));
        assert!(is_history(root.path()));
        assert!(!is_history(&root.path().join("missing")));
    }

    #[test]
    fn the_segments_of_a_step_open_as_a_comparison_that_finds_it() {
        let root = tempfile::tempdir().unwrap();
        let mut spec = SyntheticHistory::new(30, 0.01, 2);
        spec.steps = vec![(15, 0.5)];
        spec.moved_function = Some("ring::grown".into());
        spec.write(root.path()).unwrap();
        let mut state = history_state(root.path(), 0.02, false).unwrap();
        assert_eq!(state.screen, Screen::History);
        let h = &mut state.history;
        h.selected = h
            .figures
            .iter()
            .position(|&(i, f)| h.found.histories[i].figures[f].name == "laps/s")
            .unwrap();
        let (_, laps) = h.shown().unwrap();
        h.change = laps
            .changes
            .iter()
            .position(|c| laps.points[c.at].point == 15)
            .unwrap_or_else(|| panic!("no change point at 15: {:?}", laps.changes));
        let segments = h.segments().unwrap();
        assert!(segments.after.dirs[0].ends_with("point-015"));
        assert!(!segments.before.dirs.is_empty());
        let opened = segments_state(&segments).unwrap();
        assert_eq!(opened.screen, Screen::Compare);
        let c = &opened.compare;
        assert_eq!(c.a.as_ref().unwrap().id, segments.before.name);
        let laps = c.figures.iter().find(|f| f.name == "laps/s").unwrap();
        assert!(laps.change.change > 0.3, "{laps:?}");
        assert_eq!(
            laps.change.verdict,
            benchtop_sessions::compare::Verdict::Improved
        );
        // The stacks of every run of each side, B's against A's.
        let cpu = opened.compare.flames.pane(benchtop_sessions::Kind::Cpu);
        assert!(!cpu.is_empty());
        assert!(
            cpu.tree().total_weight() > 10 * 1_400,
            "{}",
            cpu.tree().total_weight()
        );
    }
}
