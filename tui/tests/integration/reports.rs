//! What the conductor does with a program's reports when they break the rules of
//! docs/protocol.md: messages before `hello`, time going back, ticks flooding in, output
//! without end. Each is said in the session with the line it came from, and the run keeps
//! what is good.

use std::path::Path;
use std::process::Output;

use benchtop_sessions::Status;
use benchtop_sessions::store::Session;

use crate::support::benchtop;

/// `benchtop run -- sh -c SCRIPT` recorded into `dir`; the script writes its reports to
/// `$BENCHTOP_REPORT_FD`.
fn run_script(dir: &Path, script: &str) -> Output {
    benchtop()
        .args([
            "run",
            "--quiet",
            "--profile",
            "none",
            "--interval",
            "100ms",
            "--record",
        ])
        .arg(dir)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap()
}

const HELLO: &str = r#"{"type":"hello","protocol":1,"workload":"script","metrics":[{"name":"ops","kind":"counter","unit":"ops"}]}"#;

fn tick(t_ns: u64, ops: u64) -> String {
    format!(r#"{{"type":"tick","t_ns":{t_ns},"counters":{{"ops":{ops}}}}}"#)
}

#[test]
fn a_tick_before_hello_and_a_tick_back_in_time_are_said_with_their_lines_and_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let lines = [
        tick(50_000_000, 5),
        HELLO.to_owned(),
        tick(100_000_000, 10),
        tick(300_000_000, 30),
        tick(200_000_000, 999),
        tick(400_000_000, 40),
        r#"{"type":"summary","figures":[],"lines":["done"]}"#.to_owned(),
    ];
    let script = format!(
        "printf '%s\\n' {} >&$BENCHTOP_REPORT_FD",
        lines
            .iter()
            .map(|l| format!("'{l}'"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = run_script(&dir, &script);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = Session::load(&dir).unwrap();
    let warnings = session.meta.warnings.join("\n");
    assert!(
        warnings.contains("line 1: a tick before hello was ignored"),
        "{warnings}"
    );
    assert!(
        warnings.contains("line 5: a tick at t_ns 200000000, before the previous one's 300000000"),
        "{warnings}"
    );
    let ops: Vec<u64> = session
        .rows
        .iter()
        .filter_map(|r| r.counters.get("ops").copied())
        .collect();
    assert!(!ops.contains(&999) && !ops.contains(&5), "{ops:?}");
    assert_eq!(ops.last(), Some(&40), "{ops:?}");
}

#[test]
fn a_flood_of_ticks_is_merged_into_rows_about_an_interval_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    // 20 000 ticks 10 µs apart: 0.2 s of the program's time, two intervals.
    let script = format!(
        "{{ printf '%s\\n' '{HELLO}'; i=1; while [ $i -le 20000 ]; do \
         printf '{{\"type\":\"tick\",\"t_ns\":%d,\"counters\":{{\"ops\":%d}}}}\\n' \
         $((i * 10000)) $i; i=$((i + 1)); done; }} >&$BENCHTOP_REPORT_FD"
    );
    let out = run_script(&dir, &script);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = Session::load(&dir).unwrap();
    let rows: Vec<_> = session
        .rows
        .iter()
        .filter(|r| r.counters.contains_key("ops"))
        .collect();
    assert!(
        (1..=6).contains(&rows.len()),
        "{} rows for 0.2 s at 100 ms intervals",
        rows.len()
    );
    assert_eq!(rows.last().unwrap().counters["ops"], 20_000);
    // It said hello and exited 0 without a summary: optional for a command, so complete.
    assert_eq!(session.meta.status, Status::Complete);
    let warnings = session.meta.warnings.join("\n");
    assert!(
        warnings.contains("ticks came sooner than half an interval"),
        "{warnings}"
    );
}

#[test]
fn worker_log_keeps_its_cap_and_says_what_it_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    // 80 MiB on standard error, past the 64 MiB cap.
    let out = run_script(&dir, "head -c 83886080 /dev/zero | tr '\\0' x >&2");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = std::fs::metadata(dir.join("worker.log")).unwrap().len();
    assert!(
        ((64 << 20)..(64 << 20) + 4096).contains(&log),
        "worker.log is {log} bytes"
    );
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    let warnings = session.meta.warnings.join("\n");
    assert!(
        warnings.contains("worker.log: 16777216 bytes of the worker's output past its 64 MiB cap"),
        "{warnings}"
    );
}
