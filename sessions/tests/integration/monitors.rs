//! What the tree monitors add to a session: the tree's resources and per-core figures in
//! timeseries.jsonl, and threads.csv.
//!
//! tests/data/v1-tree-session was written once by `write_the_v1_tree_session_fixture`
//! (`BENCHTOP_BLESS=1 cargo test -p benchtop-sessions --test integration
//! the_checked_in_v1_tree_session_keeps_loading`); like tests/data/v1-session it guards
//! the format: never regenerate it to make a test pass.

use std::fs;
use std::path::{Path, PathBuf};

use benchtop_sessions::store::THREADS_FILE;
use benchtop_sessions::{
    ContextSwitches, IoCounters, Session, SessionError, SessionWriter, Status, ThreadCpu,
    ThreadSummary, TimeseriesRow,
};

use crate::{meta, row};

/// A row of a two-process tree at `t_s`, with every monitor field filled in.
fn tree_row(t_s: f64) -> TimeseriesRow {
    let i = t_s as u64;
    let mut row = row(t_s, i * 1000, i * (10 << 20), 5 + i as u32);
    let r = row.resources.as_mut().unwrap();
    r.processes = 2;
    r.cpu_time_s = 1.5 * t_s;
    r.ctx_switches_total = Some(ContextSwitches::new(1_000 * i, 10 * i));
    r.ctx_switches_interval = Some(ContextSwitches::new(1_000, 10));
    let mut io = IoCounters::default();
    io.syscr = 100 * i;
    io.syscw = 50 * i;
    io.rchar = (1 << 20) * i;
    io.wchar = (2 << 20) * i;
    io.read_bytes = 4096 * i;
    io.write_bytes = 8192 * i;
    r.io_total = Some(io);
    let mut interval = IoCounters::default();
    interval.syscr = 100;
    interval.syscw = 50;
    interval.rchar = 1 << 20;
    interval.wchar = 2 << 20;
    interval.read_bytes = 4096;
    interval.write_bytes = 8192;
    r.io_interval = Some(interval);
    row.cpu_percent_per_core = vec![97.5, 12.25];
    row.top_threads = vec![
        ThreadCpu::new(4242, 4250, "benchtop", "ring-node-0", 95.0),
        ThreadCpu::new(4300, 4300, "benchtop", "ring, \"node\" 1", 12.5),
    ];
    row
}

/// The threads of a two-process ring run.
fn threads() -> Vec<ThreadSummary> {
    let mut main = ThreadSummary::new(4242, 4242, "benchtop", "benchtop");
    main.user_s = 0.25;
    main.system_s = 0.125;
    main.ctx_switches = ContextSwitches::new(120, 3);
    main.last_seen_s = 3.0;
    let mut node = ThreadSummary::new(4242, 4250, "benchtop", "ring-node-0");
    node.user_s = 2.5;
    node.system_s = 0.375;
    node.ctx_switches = ContextSwitches::new(3_000, 30);
    node.first_seen_s = 0.001;
    node.last_seen_s = 3.0;
    let mut child = ThreadSummary::new(4300, 4300, "benchtop", "ring, \"node\" 1");
    child.user_s = 0.5;
    child.ctx_switches = ContextSwitches::new(7, 1);
    child.first_seen_s = 1.0;
    child.last_seen_s = 2.0;
    vec![node, child, main]
}

fn write_tree_session(dir: &Path) -> PathBuf {
    let mut w = SessionWriter::create(dir, meta("20240501-120000-ring")).unwrap();
    for i in 1..=3 {
        w.append_row(&tree_row(f64::from(i))).unwrap();
    }
    // Written during the run, then again at the end: the last one stays.
    w.write_threads(&threads()[..1]).unwrap();
    w.write_threads(&threads()).unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:03.000Z".into())
        .unwrap()
}

#[test]
fn tree_resources_and_the_threads_table_round_trip() {
    let root = tempfile::tempdir().unwrap();
    let dir = write_tree_session(&root.path().join("s"));
    let s = Session::load(&dir).unwrap();
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert_eq!(
        s.rows,
        (1..=3).map(|i| tree_row(f64::from(i))).collect::<Vec<_>>()
    );
    assert_eq!(s.threads, threads());
    assert!(!dir.join("threads.csv.tmp").exists());
    let csv = fs::read_to_string(dir.join(THREADS_FILE)).unwrap();
    assert!(
        csv.starts_with("pid,tid,process,thread,cpu_s,"),
        "a header other tools read: {csv}"
    );
    assert!(
        csv.contains(r#"4300,4300,benchtop,"ring, ""node"" 1",0.500,"#),
        "{csv}"
    );
}

#[test]
fn the_summary_shows_the_tree_its_switches_io_and_busiest_threads() {
    let root = tempfile::tempdir().unwrap();
    let dir = write_tree_session(&root.path().join("s"));
    let text = Session::load(&dir).unwrap().summary_text();
    for needle in [
        "peak RSS     30.0 MiB",
        "max threads  8",
        "max procs    2",
        "CPU time     4.50 s",
        "ctx switches 3000 voluntary, 30 involuntary",
        "I/O          3.00 MiB read in 300 calls, 6.00 MiB written in 150 calls; storage 12.0 KiB read, 24.0 KiB written",
        "busiest threads (threads.csv: 3 threads of 2 processes seen)",
        "       2.88 s  ring-node-0 (tid 4250) in benchtop (pid 4242)",
        "       0.50 s  ring, \"node\" 1 (tid 4300) in benchtop (pid 4300)",
        "       0.38 s  benchtop (tid 4242) in benchtop (pid 4242)",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }
}

#[test]
fn a_corrupt_threads_csv_is_an_error_naming_it_and_the_line() {
    let root = tempfile::tempdir().unwrap();
    let dir = write_tree_session(&root.path().join("s"));
    let path = dir.join(THREADS_FILE);
    let mut csv = fs::read_to_string(&path).unwrap();
    csv.push_str("4301,4301,benchtop,x,1.0,1.0,0.0,many,0,1.0,2.0,4242,,,,1,1\n");
    fs::write(&path, csv).unwrap();
    let err = Session::load(&dir).unwrap_err();
    let SessionError::Corrupt {
        path: named,
        reason,
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(named, &path);
    assert_eq!(
        reason,
        "line 5: voluntary_ctxt_switches \"many\" is not a number"
    );

    fs::write(&path, b"").unwrap();
    let err = Session::load(&dir).unwrap_err().to_string();
    assert!(err.contains("threads.csv: corrupt: empty"), "{err}");
}

#[test]
fn a_session_without_threads_csv_loads_with_no_threads() {
    let root = tempfile::tempdir().unwrap();
    let dir = write_tree_session(&root.path().join("s"));
    fs::remove_file(dir.join(THREADS_FILE)).unwrap();
    let s = Session::load(&dir).unwrap();
    assert!(s.threads.is_empty());
    assert!(!s.summary_text().contains("busiest threads"));
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1-tree-session")
}

#[test]
fn the_checked_in_v1_tree_session_keeps_loading() {
    if std::env::var_os("BENCHTOP_BLESS").is_some() {
        let dir = fixture();
        let _ = fs::remove_dir_all(&dir);
        write_tree_session(&dir);
    }
    let s = Session::load(&fixture()).unwrap();
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert_eq!(s.meta.status, Status::Complete);
    assert_eq!(s.rows.len(), 3);
    let last = &s.rows[2];
    let r = last.resources.unwrap();
    assert_eq!((r.processes, r.threads), (2, 8));
    assert_eq!(r.ctx_switches_total, Some(ContextSwitches::new(3_000, 30)));
    assert_eq!(
        r.ctx_switches_interval,
        Some(ContextSwitches::new(1_000, 10))
    );
    let io = r.io_total.unwrap();
    assert_eq!(
        (
            io.syscr,
            io.syscw,
            io.rchar,
            io.wchar,
            io.read_bytes,
            io.write_bytes
        ),
        (300, 150, 3 << 20, 6 << 20, 12_288, 24_576)
    );
    assert_eq!(r.io_interval.unwrap().wchar, 2 << 20);
    assert_eq!(last.cpu_percent_per_core, [97.5, 12.25]);
    assert_eq!(last.top_threads[1].thread, "ring, \"node\" 1");
    assert_eq!(s.threads.len(), 3);
    assert_eq!(
        (
            s.threads[0].tid,
            s.threads[0].thread.as_str(),
            s.threads[0].user_s
        ),
        (4250, "ring-node-0", 2.5)
    );
    assert_eq!(s.threads[0].ctx_switches, ContextSwitches::new(3_000, 30));
}
