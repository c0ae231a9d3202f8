//! The history model on synthetic sessions and series written to disk.

use std::collections::BTreeMap;
use std::fs;

use super::*;
use crate::series::{RunRole, SeriesMeta, SeriesWriter};
use crate::synthetic::{SyntheticHistory, SyntheticSession};

fn load_all(root: &std::path::Path, opts: &HistoryOptions) -> Histories {
    load(&[root.to_path_buf()], opts).unwrap()
}

#[test]
fn a_step_in_written_sessions_is_found_with_its_points_and_interval() {
    let root = tempfile::tempdir().unwrap();
    let mut spec = SyntheticHistory::new(40, 0.01, 2);
    spec.steps = vec![(20, -0.10)];
    spec.write(root.path()).unwrap();
    let found = load_all(root.path(), &HistoryOptions::default());
    assert!(found.warnings.is_empty(), "{:?}", found.warnings);
    assert_eq!(found.histories.len(), 1);
    let h = &found.histories[0];
    assert_eq!(h.ordered_by, "started_at");
    assert_eq!(h.points.len(), 40);
    let laps = h.figure("laps/s").unwrap();
    assert_eq!(laps.better, Some(Better::Higher));
    assert_eq!(laps.changes.len(), 1, "{:?}", laps.changes);
    let c = &laps.changes[0];
    assert!(c.at.abs_diff(20) <= 1, "{}", c.at);
    assert_eq!(c.change.verdict, crate::compare::Verdict::Regressed);
    let (lo, hi) = c.change.ci.unwrap();
    assert!(lo < -0.05 && hi > -0.15 && lo < c.change.change && c.change.change < hi);
    assert!(c.change.change > -0.15 && c.change.change < -0.05);
    assert_eq!(c.before, format!("point {} (c{:03})", c.at - 1, c.at - 1));
    let newest = laps.newest.as_ref().unwrap();
    assert_ne!(newest.verdict, crate::compare::Verdict::Regressed);
}

#[test]
fn a_label_orders_the_points_numerically_and_equal_labels_pool() {
    let root = tempfile::tempdir().unwrap();
    for (i, (build, laps)) in [("10", 100.0), ("9", 90.0), ("10", 110.0), ("100", 50.0)]
        .into_iter()
        .enumerate()
    {
        let s = SyntheticSession {
            intervals: 2,
            values_per_interval: 10,
            laps_per_s: laps,
            labels: BTreeMap::from([("build".to_owned(), build.to_owned())]),
            ..SyntheticSession::default()
        };
        s.write(&root.path().join(format!("s{i}"))).unwrap();
    }
    let opts = HistoryOptions {
        order_by: Some("build".into()),
        ..HistoryOptions::default()
    };
    let h = &load_all(root.path(), &opts).histories[0];
    let orders: Vec<&str> = h.points.iter().map(|p| p.order.as_str()).collect();
    assert_eq!(orders, ["9", "10", "100"]);
    assert_eq!(h.points[1].dirs.len(), 2);
    let laps = h.figure("laps/s").unwrap();
    assert_eq!(laps.points[1].runs.len(), 2);
    assert!(
        laps.points[1].low < laps.points[1].value && laps.points[1].value < laps.points[1].high
    );
}

#[test]
fn a_recording_without_the_order_label_is_left_out_saying_so() {
    let root = tempfile::tempdir().unwrap();
    SyntheticHistory::new(3, 0.01, 1)
        .write(root.path())
        .unwrap();
    let opts = HistoryOptions {
        order_by: Some("branch".into()),
        ..HistoryOptions::default()
    };
    let found = load_all(root.path(), &opts);
    assert!(found.histories.is_empty());
    assert_eq!(found.warnings.len(), 3);
    assert!(
        found.warnings[0].contains("no label branch"),
        "{:?}",
        found.warnings
    );
}

#[test]
fn a_series_is_one_point_and_its_runs_are_not_points_of_their_own() {
    let root = tempfile::tempdir().unwrap();
    SyntheticHistory::new(5, 0.01, 1)
        .write(root.path())
        .unwrap();
    let mut meta = SeriesMeta::new("ring", "2026-12-01T00:00:00Z");
    meta.labels.insert("commit".into(), "s".into());
    let mut series = SeriesWriter::create(&root.path().join("zseries"), meta).unwrap();
    for laps in [100.0, 104.0, 102.0] {
        let dir = series.next_run_dir(RunRole::Run, BTreeMap::new()).unwrap();
        let s = SyntheticSession {
            intervals: 2,
            values_per_interval: 10,
            laps_per_s: laps,
            started_at: "2026-12-01T00:00:00Z".into(),
            ..SyntheticSession::default()
        };
        s.write(&dir).unwrap();
    }
    let found = load_all(root.path(), &HistoryOptions::default());
    let h = &found.histories[0];
    assert_eq!(h.points.len(), 6);
    let last = h.figure("laps/s").unwrap().points.last().unwrap();
    assert_eq!(last.runs.len(), 3);
    assert_eq!(h.points[5].name, "point 5 (s)");
}

#[test]
fn different_parameters_make_different_histories() {
    let root = tempfile::tempdir().unwrap();
    SyntheticHistory::new(3, 0.01, 1)
        .write(root.path())
        .unwrap();
    let dir = root.path().join("other");
    SyntheticSession {
        intervals: 2,
        values_per_interval: 10,
        ..SyntheticSession::default()
    }
    .write(&dir)
    .unwrap();
    let path = dir.join("session.json");
    let text = fs::read_to_string(&path)
        .unwrap()
        .replace("\"num-nodes\": 1000", "\"num-nodes\": 2000");
    fs::write(&path, text).unwrap();
    let found = load_all(root.path(), &HistoryOptions::default());
    assert_eq!(found.histories.len(), 2);
    assert_eq!(found.histories[0].points.len(), 3);
    assert_eq!(found.histories[1].key.params, "num-nodes=2000");
}

#[test]
fn a_broken_or_unfinished_session_is_named_and_the_rest_are_judged() {
    let root = tempfile::tempdir().unwrap();
    SyntheticHistory::new(6, 0.01, 1)
        .write(root.path())
        .unwrap();
    fs::create_dir(root.path().join("broken")).unwrap();
    fs::write(root.path().join("broken/session.json"), "{ not json").unwrap();
    let running = root.path().join("point-003/session.json");
    let text = fs::read_to_string(&running)
        .unwrap()
        .replace("\"complete\"", "\"crashed\"");
    fs::write(&running, text).unwrap();
    let found = load_all(root.path(), &HistoryOptions::default());
    assert_eq!(found.warnings.len(), 2, "{:?}", found.warnings);
    assert!(found.warnings.iter().any(|w| w.contains("broken")));
    assert!(found.warnings.iter().any(|w| w.contains("point-003")));
    assert_eq!(found.histories[0].points.len(), 5);
}

#[test]
fn the_text_and_markdown_name_the_change_point_and_escape_labels() {
    let root = tempfile::tempdir().unwrap();
    let mut spec = SyntheticHistory::new(20, 0.005, 4);
    spec.steps = vec![(10, 0.3)];
    let dirs = spec.write(root.path()).unwrap();
    let path = dirs[19].join("session.json");
    let text = fs::read_to_string(&path)
        .unwrap()
        .replace("\"c019\"", "\"c\\u001b[31m|x\"");
    fs::write(&path, text).unwrap();
    let found = load_all(root.path(), &HistoryOptions::default());
    let text = found.to_text();
    assert!(
        text.contains("from point 10 (c010) (after point 9 (c009))"),
        "{text}"
    );
    assert!(!text.contains('\u{1b}'), "{text}");
    let md = found.to_markdown();
    assert!(md.contains("| laps/s |"), "{md}");
    assert!(!md.contains('\u{1b}'), "{md}");
    assert!(md.contains("from point 10 (c010)"), "{md}");
}

#[test]
fn what_moved_at_a_step_names_the_function_it_moved_from_the_nearest_points() {
    let root = tempfile::tempdir().unwrap();
    let mut spec = SyntheticHistory::new(50, 0.01, 4);
    spec.steps = vec![(25, 0.5)];
    spec.moved_function = Some("ring::grown".into());
    spec.write(root.path()).unwrap();
    let found = load_all(root.path(), &HistoryOptions::default());
    assert!(found.warnings.is_empty(), "{:?}", found.warnings);
    let h = &found.histories[0];
    assert_eq!(h.moved.len(), 1, "{:?}", h.moved);
    let m = &h.moved[0];
    assert!(m.at.abs_diff(25) <= 1, "{}", m.at);
    assert!(m.changes.contains(&"laps/s".to_owned()), "{:?}", m.changes);
    assert_eq!(m.before.len() + m.after.len(), 50);
    // Every figure across the segments; laps/s with its step.
    let laps = m.figures.iter().find(|f| f.name == "laps/s").unwrap();
    assert!(laps.after > 1.4 * laps.before, "{laps:?}");
    assert_eq!(laps.change.verdict, crate::compare::Verdict::Improved);
    // The profiles of the nearest points only: all of the shorter side, 20 of the other.
    let (near_before, near_after) = &m.profiled;
    assert_eq!(near_before.len(), MOVED_POINTS.min(m.before.len()));
    assert_eq!(near_after.len(), MOVED_POINTS.min(m.after.len()));
    assert_eq!(near_before.last(), m.before.last());
    assert_eq!(near_after.first(), m.after.first());
    assert_eq!(m.profiles.len(), 1);
    let cpu = &m.profiles[0];
    assert_eq!(cpu.profile, "cpu");
    // 1,200 samples a point before, 1,400 after (where the step is at 25).
    assert!(cpu.weight.1 > cpu.weight.0, "{:?}", cpu.weight);
    let first = &cpu.movers[0];
    assert_eq!(first.name, "ring::grown", "{:?}", cpu.movers);
    assert!(first.total_b > first.total_a + 0.05, "{first:?}");
    assert!(cpu.diff_folded.contains("ring;ring::hop;ring::grown "));
    assert_eq!(m.diff_stem("cpu"), format!("p0-p{}-p49-diff-cpu", m.at));
    // In the text and the Markdown, under the history.
    let text = found.to_text();
    assert!(text.contains("what moved from point"), "{text}");
    assert!(text.contains("ring::grown"), "{text}");
    let md = found.to_markdown();
    assert!(md.contains("| on-CPU function |"), "{md}");
    assert!(md.contains("| ring::grown |"), "{md}");

    // Without profiles: the figures alone.
    let opts = HistoryOptions {
        profiles: false,
        ..HistoryOptions::default()
    };
    let found = load_all(root.path(), &opts);
    let m = &found.histories[0].moved[0];
    assert!(m.profiles.is_empty() && m.profiled.0.is_empty());
    assert!(m.figures.iter().any(|f| f.name == "laps/s"));
}

#[test]
fn a_history_without_change_points_moves_nothing() {
    let root = tempfile::tempdir().unwrap();
    let mut spec = SyntheticHistory::new(12, 0.01, 3);
    spec.moved_function = Some("ring::grown".into());
    spec.write(root.path()).unwrap();
    let found = load_all(root.path(), &HistoryOptions::default());
    assert!(found.histories[0].moved.is_empty());
    assert!(!found.to_text().contains("what moved"));
}

/// The same histories, number for number (compared as JSON: an undecided change's NaN
/// is unequal to itself).
fn assert_same<T: serde::Serialize>(a: &T, b: &T) {
    let (a, b) = (
        serde_json::to_string_pretty(a).unwrap(),
        serde_json::to_string_pretty(b).unwrap(),
    );
    if let Some((x, y)) = a.lines().zip(b.lines()).find(|(x, y)| x != y) {
        panic!("the histories differ: {x} against {y}");
    }
    assert_eq!(a.len(), b.len());
}

#[test]
fn histories_read_from_digests_are_those_read_from_the_sessions() {
    let root = tempfile::tempdir().unwrap();
    let mut spec = SyntheticHistory::new(30, 0.02, 5);
    spec.steps = vec![(15, 0.2)];
    spec.moved_function = Some("ring::grown".into());
    let dirs = spec.write(root.path()).unwrap();
    assert!(
        dirs.iter()
            .all(|d| d.join(crate::digest::DIGEST_FILE).is_file())
    );
    let from_digests = load_all(root.path(), &HistoryOptions::default());
    assert!(
        from_digests.warnings.is_empty(),
        "{:?}",
        from_digests.warnings
    );
    for d in &dirs {
        fs::remove_file(d.join(crate::digest::DIGEST_FILE)).unwrap();
    }
    // Older sessions, without digests: digested in memory, saying nothing.
    let from_sessions = load_all(root.path(), &HistoryOptions::default());
    assert!(
        dirs.iter()
            .all(|d| !d.join(crate::digest::DIGEST_FILE).exists())
    );
    assert_same(&from_digests, &from_sessions);
    let laps = from_digests.histories[0].figure("laps/s").unwrap();
    assert!(
        laps.changes.iter().any(|c| c.at.abs_diff(15) <= 1),
        "{laps:?}"
    );
    assert!(
        laps.points
            .iter()
            .all(|p| p.within.is_some_and(|w| w > 0.0))
    );
    let peak = from_digests.histories[0].figure("peak RSS").unwrap();
    assert!(peak.points.iter().all(|p| p.within.is_none()));
}

#[test]
fn a_damaged_planted_or_stale_digest_is_passed_over_for_its_session_saying_so() {
    let root = tempfile::tempdir().unwrap();
    let mut spec = SyntheticHistory::new(12, 0.01, 6);
    spec.steps = vec![(6, 0.3)];
    let dirs = spec.write(root.path()).unwrap();
    let intact = load_all(root.path(), &HistoryOptions::default());
    let digest = |i: usize| dirs[i].join(crate::digest::DIGEST_FILE);
    fs::write(digest(1), "{ not json").unwrap();
    fs::remove_file(digest(2)).unwrap();
    std::os::unix::fs::symlink("/dev/zero", digest(2)).unwrap();
    fs::remove_file(digest(3)).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        digest(3),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let huge = fs::File::create(digest(4)).unwrap();
    huge.set_len(64 << 20).unwrap();
    fs::copy(digest(6), digest(5)).unwrap();
    fs::remove_file(digest(7)).unwrap();
    fs::create_dir(digest(7)).unwrap();
    // A digest whose numbers lie but whose stamp is another's: not believed.
    let lie = fs::read_to_string(digest(8))
        .unwrap()
        .replace("\"value\": ", "\"value\": 1");
    fs::write(digest(8), lie).unwrap();
    let text = fs::read_to_string(dirs[8].join("session.json")).unwrap();
    fs::write(dirs[8].join("session.json"), format!("{text} ")).unwrap();
    let found = load_all(root.path(), &HistoryOptions::default());
    assert_same(&found.histories, &intact.histories);
    assert_eq!(found.warnings.len(), 7, "{:#?}", found.warnings);
    for (i, what) in [
        (1, "line 1"),
        (2, "symbolic link"),
        (3, "FIFO"),
        (4, "larger"),
        (5, "other files"),
        (7, "directory"),
        (8, "other files"),
    ] {
        let name = format!("point-{i:03}/digest.json");
        assert!(
            found
                .warnings
                .iter()
                .any(|w| w.contains(&name) && w.contains(what) && w.contains("read instead")),
            "{name}, {what}: {:#?}",
            found.warnings
        );
    }
}

#[test]
fn two_hundred_points_with_two_steps_find_both_and_the_function_the_first_moved_first() {
    // The history the issue names: 2 % between points, +8 % from point 80 with the stacks
    // moved to a known function, −6 % from point 150.
    let root = tempfile::tempdir().unwrap();
    let mut spec = SyntheticHistory::new(200, 0.02, 1);
    spec.steps = vec![(80, 0.08), (150, -0.06)];
    spec.moved_function = Some("ring::grown".into());
    spec.write(root.path()).unwrap();
    let found = load_all(root.path(), &HistoryOptions::default());
    assert!(found.warnings.is_empty(), "{:?}", found.warnings);
    let h = &found.histories[0];
    assert_eq!(h.points.len(), 200);
    let laps = h.figure("laps/s").unwrap();
    let changes: Vec<(usize, f64)> = laps
        .changes
        .iter()
        .map(|c| (c.at, c.change.change))
        .collect();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(
        changes[0].0.abs_diff(80) <= 2 && changes[0].1 > 0.04,
        "{changes:?}"
    );
    assert!(
        changes[1].0.abs_diff(150) <= 2 && changes[1].1 < -0.03,
        "{changes:?}"
    );
    // At each, the function the step moved comes first among the on-CPU movers: grown
    // at the first, shrunk at the second.
    for (&(at, step), grew) in changes.iter().zip([true, false]) {
        let m = h
            .moved
            .iter()
            .find(|m| m.at == at)
            .unwrap_or_else(|| panic!("nothing moved at {at} ({step:+.3}): {:?}", h.moved));
        let cpu = m.profiles.iter().find(|p| p.profile == "cpu").unwrap();
        let first = &cpu.movers[0];
        assert_eq!(first.name, "ring::grown", "at {at}: {:?}", cpu.movers);
        assert_eq!(first.total_b > first.total_a, grew, "at {at}: {first:?}");
    }
}
