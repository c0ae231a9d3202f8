//! The Firefox export of a session with waits: a marker per long wait on the waiting
//! thread's track, over the time it waited, naming what woke it and where it waited.

use benchtop_sessions::firefox::firefox_profile;
use benchtop_sessions::intervals::{IntervalStacks, LongWait, StackEntry, StacksChunk};
use benchtop_sessions::limits::LoadOptions;
use benchtop_sessions::waits::{NOT_SEEN, WOKEN_BY};
use benchtop_sessions::{Session, SessionWriter, Status};
use serde_json::Value;

use crate::meta;

/// A marker's string field: an index into its thread's string table (the processed
/// format's "unique-string").
fn text(thread: &Value, v: &Value) -> String {
    let i = v
        .as_u64()
        .unwrap_or_else(|| panic!("a string index, not {v}"));
    thread["stringArray"][i as usize]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// (start ms, end ms, waker, waited in) of each wait marker on the track named `name`.
fn wait_markers(profile: &Value, name: &str) -> Vec<(f64, f64, String, String)> {
    let thread = profile["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no track {name}: {}", profile["threads"]));
    let m = &thread["markers"];
    let n = m["length"].as_u64().unwrap() as usize;
    (0..n)
        .filter(|&i| m["data"][i]["type"] == "BenchtopWait")
        .map(|i| {
            let data = &m["data"][i];
            (
                m["startTime"][i].as_f64().unwrap(),
                m["endTime"][i].as_f64().unwrap(),
                text(thread, &data["waker"]),
                text(thread, &data["blocked"]),
            )
        })
        .collect()
}

#[test]
fn each_long_wait_is_a_marker_on_its_thread_naming_its_waker() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("20240501-120000-ring")).unwrap();
    let mut chunk = StacksChunk::default();
    // consumer: main;consume;futex_wait_[k];[futex 0x10] then woken by the producer at
    // produce, or not seen.
    let names = [
        "app",
        "consumer",
        "main",
        "consume",
        "futex_wait_[k]",
        "[futex 0x10]",
        WOKEN_BY,
        "app",
        "producer",
        "produce",
        "futex_wake_[k]",
    ];
    for (id, name) in names.iter().enumerate() {
        let id = id as u32;
        chunk.frames.push((id, (*name).into()));
        chunk.stacks.push(StackEntry {
            id,
            parent: id.checked_sub(1),
            frame: id,
        });
    }
    let not_seen = names.len() as u32;
    chunk.frames.push((not_seen, NOT_SEEN.into()));
    chunk.stacks.push(StackEntry {
        id: not_seen,
        parent: Some(5),
        frame: not_seen,
    });
    chunk.threads.push((7, "consumer".into()));
    chunk.long_waits = vec![
        LongWait {
            t0_ns: 10_000_000,
            t1_ns: 40_000_000,
            tid: 7,
            stack: not_seen - 1,
        },
        LongWait {
            t0_ns: 50_000_000,
            t1_ns: 52_000_000,
            tid: 7,
            stack: not_seen,
        },
    ];
    w.append_stacks(&chunk).unwrap();
    let dir = w
        .finish(Status::Complete, "2024-05-01T12:00:05Z".into())
        .unwrap();
    let session = Session::load(&dir).unwrap();
    let stacks = IntervalStacks::load(&dir, &LoadOptions::default())
        .unwrap()
        .expect("stacks.jsonl");
    assert_eq!(stacks.long_waits.len(), 2);

    let (profile, _) = firefox_profile(&session, Some(&stacks));
    let profile = serde_json::to_value(&profile).unwrap();
    let marks = wait_markers(&profile, "consumer");
    assert_eq!(
        marks,
        [
            (
                10.0,
                40.0,
                "producer (app) at produce".to_owned(),
                "consume [futex 0x10]".to_owned()
            ),
            (
                50.0,
                52.0,
                NOT_SEEN.to_owned(),
                "consume [futex 0x10]".to_owned()
            ),
        ]
    );
    // The schema says what the fields are.
    let schema = profile["meta"]["markerSchema"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "BenchtopWait")
        .expect("the wait marker's schema");
    assert!(schema.to_string().contains("Woken by"), "{schema}");
}
