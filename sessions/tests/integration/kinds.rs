//! Every kind of the profile model's table round-trips through the session store, its
//! stacks over time where the table gives it weights per interval, and each export the
//! table marks as carrying it — and no export carries a kind the table does not mark.

use benchtop_sessions::firefox::firefox_profile;
use benchtop_sessions::intervals::{
    IntervalStacks, IntervalWeights, StackEntry, StacksChunk, Weight,
};
use benchtop_sessions::kinds::KINDS;
use benchtop_sessions::limits::LoadOptions;
use benchtop_sessions::{Kind, Session, SessionWriter, StackTree, Status, pprof};

use crate::meta;

/// The frame that only `kind`'s stacks hold.
fn hot(kind: Kind) -> String {
    format!("{}_hot", kind.name().replace('-', "_"))
}

/// A session with every kind's folded file, and stacks.jsonl with one interval that
/// weighs each kind that has weights per interval (on its own thread and stack).
fn every_kind(dir: &std::path::Path) -> Session {
    let mut w = SessionWriter::create(dir, meta("20240501-120000-ring")).unwrap();
    let mut chunk = StacksChunk::default();
    chunk.frames.push((0, "main".into()));
    chunk.stacks.push(StackEntry {
        id: 0,
        parent: None,
        frame: 0,
    });
    let mut interval = IntervalWeights {
        t1_ns: 1_000_000_000,
        ..IntervalWeights::default()
    };
    for (i, spec) in KINDS.iter().enumerate() {
        let mut tree = StackTree::new();
        tree.add_names(["main", hot(spec.kind).as_str()], 40 + i as u64);
        w.write_stacks(spec.kind, &tree, spec.title).unwrap();
        let id = i as u32 + 1;
        chunk.frames.push((id, hot(spec.kind)));
        chunk.stacks.push(StackEntry {
            id,
            parent: Some(0),
            frame: id,
        });
        let weight = Weight {
            tid: 100 + id,
            stack: id,
            // A whole number of the folded file's units, in the interval's unit.
            weight: (40 + i as u64)
                * spec
                    .interval_unit
                    .and_then(|u| u.per(spec.folded_unit))
                    .unwrap_or(1),
        };
        if spec.interval_field.is_some() {
            interval.weights[spec.kind].push(weight);
        }
    }
    chunk.intervals.push(interval);
    w.append_stacks(&chunk).unwrap();
    let dir = w
        .finish(Status::Complete, "2024-05-01T12:00:05Z".into())
        .unwrap();
    Session::load(&dir).unwrap()
}

#[test]
fn every_kind_of_the_table_round_trips_through_the_store_and_its_exports() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let session = every_kind(&dir);
    let stacks = IntervalStacks::load(&dir, &LoadOptions::default())
        .unwrap()
        .expect("stacks.jsonl");

    let pprof = pprof::decode(&pprof::encode_session(&session)).unwrap();
    let in_pprof = |frame: &str| {
        pprof
            .sample
            .iter()
            .any(|s| pprof.frames(s).contains(&frame))
    };
    let (firefox, _) = firefox_profile(&session, Some(&stacks));
    let firefox = serde_json::to_string(&firefox).unwrap();

    for (i, spec) in KINDS.iter().enumerate() {
        let kind = spec.kind;
        let frame = hot(kind);
        // The store: the folded file, named by the table, read back as written.
        let tree = session
            .profile(kind)
            .unwrap_or_else(|| panic!("{} not loaded", spec.folded_file));
        assert_eq!(tree.total_weight(), 40 + i as u64, "{}", spec.name);
        assert!(dir.join(spec.folded_file).is_file(), "{}", spec.folded_file);
        assert!(dir.join(spec.svg_file).is_file(), "{}", spec.svg_file);
        // Stacks over time, in the folded file's unit whatever the interval's.
        let over_time = stacks.tree(kind, |_| true);
        if spec.interval_field.is_some() {
            assert_eq!(over_time.to_folded(), tree.to_folded(), "{}", spec.name);
        } else {
            assert_eq!(over_time.total_weight(), 0, "{}", spec.name);
        }
        // The exports carry exactly the kinds the table marks.
        assert_eq!(
            in_pprof(&frame),
            spec.exports.pprof,
            "pprof and {}",
            spec.name
        );
        assert_eq!(
            firefox.contains(&frame),
            spec.exports.firefox,
            "the Firefox profile and {}",
            spec.name
        );
    }
}
