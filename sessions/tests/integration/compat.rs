//! The checked-in v1 session under tests/data/v1-session must keep loading: it guards the
//! format against changes that would make old recordings unreadable.
//!
//! It was written once by `write_the_v1_session_fixture` (`BENCHTOP_BLESS=1 cargo test -p
//! benchtop-sessions --test integration compat`). Never regenerate it to make
//! `the_checked_in_v1_session_keeps_loading` pass: a failure there means old sessions broke.

use std::path::PathBuf;

use benchtop_sessions::{Kind, Session, SessionWriter, StackTree, Status};

use crate::{histogram, meta, row};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1-session")
}

#[test]
fn the_checked_in_v1_session_keeps_loading() {
    if std::env::var_os("BENCHTOP_BLESS").is_some() {
        write_the_v1_session_fixture();
    }
    let s = Session::load(&fixture()).unwrap();
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    let m = &s.meta;
    assert_eq!(m.schema_version, 1);
    assert_eq!(m.id, "20240501-120000-ring");
    assert_eq!(m.status, Status::Complete);
    assert_eq!(m.started_at, "2024-05-01T12:00:00.000Z");
    assert_eq!(m.ended_at.as_deref(), Some("2024-05-01T12:00:03.000Z"));
    assert_eq!(m.workload.name, "ring");
    assert_eq!(m.workload.params["workers"], 4);
    assert_eq!(m.command_line, ["benchtop", "record", "ring"]);
    assert_eq!((m.host.cores, m.host.perf.paranoid), (8, Some(2)));
    assert_eq!((m.sampling.samples, m.sampling.lost), (2990, 3));
    assert_eq!(m.worker.exit.as_deref(), Some("exit code 0"));
    assert_eq!(
        (
            m.summary[0].name.as_str(),
            m.summary[0].value,
            m.summary[0].unit.as_str()
        ),
        ("messages/s", 1_250_000.0, "msg/s")
    );
    assert_eq!(m.warnings, ["the worker's stderr was not captured"]);

    assert_eq!(s.rows.len(), 3);
    let last = &s.rows[2];
    assert_eq!((last.t_s, last.interval_s), (3.0, 1.0));
    assert_eq!(last.counters["ops"], 3000);
    assert_eq!(last.rates["ops"], 1000.0);
    assert_eq!(
        (last.latency["rtt"].p50, last.latency["rtt"].max),
        (1000, 2000)
    );
    let resources = last.resources.unwrap();
    assert_eq!((resources.peak_rss_bytes, resources.threads), (30 << 20, 6));
    // Written before the tree monitors: their fields are empty, not errors.
    assert_eq!(resources.processes, 0);
    assert!(resources.ctx_switches_total.is_none() && resources.io_total.is_none());
    assert!(last.cpu_percent_per_core.is_empty() && last.top_threads.is_empty());
    assert!(s.threads.is_empty());

    assert_eq!(s.latency.len(), 3);
    for (i, interval) in s.latency.iter().enumerate() {
        assert_eq!(interval.tag, "rtt");
        assert_eq!(interval.start_offset_s, i as f64);
        assert_eq!(interval.length_s, 1.0);
        assert_eq!(interval.histogram, histogram(&[1_000, 1_500, 2_000_000]));
    }
    let cpu = s.profile(Kind::Cpu).unwrap();
    assert_eq!(
        cpu.to_folded(),
        "main;ring::run 10\nmain;ring::run;memcpy 25\nmain;ring::run;ring::hop 65\n"
    );
    assert!(s.profile(Kind::OffCpu).is_none());
}

/// Writes tests/data/v1-session, with `BENCHTOP_BLESS=1` only: once per schema version.
fn write_the_v1_session_fixture() {
    let dir = fixture();
    let _ = std::fs::remove_dir_all(&dir);
    let mut w = SessionWriter::create(&dir, meta("20240501-120000-ring")).unwrap();
    for i in 1..=3u64 {
        w.append_row(&row(i as f64, i * 1000, i * (10 << 20), 3 + i as u32))
            .unwrap();
        w.append_latency(
            "rtt",
            (i - 1) as f64,
            1.0,
            &histogram(&[1_000, 1_500, 2_000_000]),
        )
        .unwrap();
    }
    let mut cpu = StackTree::new();
    cpu.add_names(["main", "ring::run", "ring::hop"], 65);
    cpu.add_names(["main", "ring::run", "memcpy"], 25);
    cpu.add_names(["main", "ring::run"], 10);
    w.write_stacks(Kind::Cpu, &cpu, "ring: on-CPU").unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:03.000Z".into())
        .unwrap();
    // Keep the fixture small: the SVG is derived, not part of what must keep loading.
    std::fs::remove_file(dir.join("cpu.svg")).unwrap();
}

/// The checked-in v2 session (tests/data/v2-session): a real recording of
/// tui/tests/data/timeline/halves.c for one second at 250 ms intervals, its stacks per
/// interval in stacks.jsonl. Like the v1 session, it must keep loading.
#[test]
fn the_checked_in_v2_session_keeps_loading_with_its_per_interval_stacks() {
    use benchtop_sessions::intervals::IntervalStacks;
    use benchtop_sessions::limits::LoadOptions;

    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/v2-session");
    let s = Session::load(&dir).unwrap();
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert_eq!(s.meta.schema_version, 2);
    assert_eq!(s.meta.status, Status::Complete);
    assert_eq!(s.meta.sampling.samples, 296);
    let stacks = IntervalStacks::load(&dir, &LoadOptions::default())
        .unwrap()
        .expect("stacks.jsonl");
    assert!(stacks.warnings.is_empty(), "{:?}", stacks.warnings);
    assert_eq!(stacks.intervals.len(), 4);
    // Every sample taken is in an interval, and the intervals sum to cpu.folded.
    assert_eq!(stacks.cpu_samples(), 296);
    let whole = stacks.tree_in(Kind::Cpu, 0, u64::MAX);
    assert_eq!(whole.to_folded(), s.profile(Kind::Cpu).unwrap().to_folded());
    let first = stacks.tree_in(Kind::Cpu, 0, 300_000_000).to_folded();
    let second = stacks.tree_in(Kind::Cpu, 600_000_000, u64::MAX).to_folded();
    assert!(
        first.contains("first_half") && !first.contains("second_half"),
        "{first}"
    );
    assert!(
        second.contains("second_half") && !second.contains("first_half;"),
        "{second}"
    );
    assert_eq!(
        stacks.threads.get(&3756).map(String::as_str),
        Some("halves")
    );
}
