//! The worker's counting allocator end to end: its counters in every tick of a recorded
//! ring session, in timeseries.jsonl and in `show`.

use std::path::Path;

use benchtop_sessions::store::Session;

use crate::support::{benchtop, record_run, run_command};

/// The allocation counters of every row: (alloc_bytes, free_bytes, live_bytes, allocs,
/// frees), each row required to carry all five.
fn alloc_rows(session: &Session) -> Vec<[u64; 5]> {
    session
        .rows
        .iter()
        .map(|row| {
            ["alloc_bytes", "free_bytes", "live_bytes", "allocs", "frees"].map(|name| {
                *row.counters
                    .get(name)
                    .unwrap_or_else(|| panic!("no {name} in {:?}", row.counters))
            })
        })
        .collect()
}

fn peak_live(dir: &Path, nodes: &str) -> u64 {
    let (_, session) = record_run(
        dir,
        &[
            "ring",
            "--num-nodes",
            nodes,
            "--num-rounds",
            "200",
            "--interval",
            "100ms",
        ],
    );
    alloc_rows(&session).iter().map(|r| r[2]).max().unwrap()
}

#[test]
fn every_tick_of_a_ring_session_carries_consistent_allocation_counters() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ask");
    let (_, session) = record_run(
        &dir,
        &[
            "ring",
            "--mode",
            "ask",
            "--num-nodes",
            "2000",
            "--num-rounds",
            "300",
            "--interval",
            "100ms",
        ],
    );
    let rows = alloc_rows(&session);
    assert!(rows.len() >= 2, "{} rows", rows.len());
    for (i, &[alloc, free, live, allocs, frees]) in rows.iter().enumerate() {
        assert_eq!(alloc - free, live, "row {i}: {alloc} - {free} != {live}");
        assert!(allocs >= frees, "row {i}: {allocs} allocs, {frees} frees");
        assert!(live > 0, "row {i}: nothing live in a running worker");
    }
    for pair in rows.windows(2) {
        let ([a0, f0, _, n0, m0], [a1, f1, _, n1, m1]) = (pair[0], pair[1]);
        assert!(a1 >= a0 && f1 >= f0 && n1 >= n0 && m1 >= m0, "{pair:?}");
    }
    // The ticker's own encodings allocate every interval, if nothing else does.
    let (first, last) = (rows[0], rows[rows.len() - 1]);
    assert!(last[3] > first[3], "allocs {} then {}", first[3], last[3]);
    // A level has no rate; the cumulative counters do.
    let last = session.rows.last().unwrap();
    assert!(!last.rates.contains_key("live_bytes"), "{:?}", last.rates);
    assert!(last.rates.contains_key("alloc_bytes"), "{:?}", last.rates);

    let shown = benchtop().arg("show").arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.status.success(), "{text}");
    assert!(text.contains("live bytes   peak "), "{text}");
    assert!(text.contains("allocated    "), "{text}");

    // Opened, the session's throughput is the ring's own count, not the allocator's
    // (whose names sort first).
    let opened = benchtop::state::State::with_session(session, std::time::Instant::now(), false);
    let metric = opened.live.run.throughput_metric.as_deref();
    assert!(
        metric.is_some_and(|m| !benchtop_sessions::timeseries::is_allocation_counter(m)),
        "{metric:?}"
    );
}

#[test]
fn the_protocol_s_allocation_counters_are_the_ones_sessions_skip() {
    use benchtop_protocol::{ALLOC_BYTES, ALLOCS, FREE_BYTES, FREES, LIVE_BYTES};
    let mut protocol = [ALLOC_BYTES, FREE_BYTES, ALLOCS, FREES, LIVE_BYTES];
    let mut sessions = benchtop_sessions::timeseries::ALLOCATION_COUNTERS;
    protocol.sort_unstable();
    sessions.sort_unstable();
    assert_eq!(protocol, sessions);
}

#[test]
fn live_bytes_grow_with_the_actors_the_ring_keeps() {
    let tmp = tempfile::tempdir().unwrap();
    let small = peak_live(&tmp.path().join("small"), "200");
    let large = peak_live(&tmp.path().join("large"), "20200");
    // Each actor holds at least its mailbox and task: well over 64 bytes.
    assert!(
        large > small + 20_000 * 64,
        "peak live bytes: {small} with 200 actors, {large} with 20,200"
    );
}

#[test]
fn switched_off_the_worker_reports_no_allocation_counters() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("off");
    let output = run_command(&dir, &["ring", "--num-nodes", "100", "--num-rounds", "100"])
        .env("BENCHTOP_ALLOC", "off")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let session = Session::load(&dir).unwrap();
    assert!(!session.rows.is_empty());
    for row in &session.rows {
        assert!(
            !row.counters.contains_key("alloc_bytes"),
            "{:?}",
            row.counters
        );
    }
}

#[test]
fn ring_ask_reports_the_bytes_each_pending_ask_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let ring = |mode: &str| {
        let dir = tmp.path().join(mode);
        let (_, session) = record_run(
            &dir,
            &[
                "ring",
                "--mode",
                mode,
                "--num-nodes",
                "1000",
                "--num-rounds",
                "100",
                "--profile",
                "none",
            ],
        );
        session
    };
    let ask = ring("ask");
    let per_ask = crate::support::figure(&ask, "bytes_per_pending_ask");
    // A continuation is 8 bytes in its actor's slab, which grows by doubling: between
    // 8 and 16 bytes an ask, plus what the mailboxes queue meanwhile.
    assert!(
        (8.0..64.0).contains(&per_ask),
        "{per_ask} bytes per pending ask"
    );
    let tell = ring("tell");
    assert!(
        !tell
            .meta
            .summary
            .iter()
            .any(|f| f.name == "bytes_per_pending_ask"),
        "tell keeps no asks pending: {:?}",
        tell.meta.summary
    );
}
