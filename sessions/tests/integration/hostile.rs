//! Hostile directories and files: links planted where a session is recorded, FIFOs and
//! devices in place of session files, files past their limits, a disk that fills up.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use benchtop_sessions::limits::{LoadOptions, MAX_PARAMS, MAX_ROW_BYTES, MAX_TAGS};
use benchtop_sessions::meta::FailureKind;
use benchtop_sessions::timeseries::row_held_bytes;
use benchtop_sessions::{Kind, Session, SessionError, SessionWriter, StackTree, Status, ThreadCpu};

use crate::{histogram, meta, row};

/// A file another user cares about, with its content.
fn victim(root: &Path) -> PathBuf {
    let path = root.join("victim");
    fs::write(&path, b"precious\n").unwrap();
    path
}

fn assert_untouched(victim: &Path) {
    assert_eq!(
        fs::read(victim).unwrap(),
        b"precious\n",
        "the victim file changed"
    );
}

#[test]
fn links_planted_in_a_record_directory_make_it_refused_and_leave_their_targets_alone() {
    let root = tempfile::tempdir().unwrap();
    let victim = victim(root.path());
    for name in [
        "latency.hlog",
        "timeseries.jsonl",
        "worker.log",
        "session.json.tmp",
        "threads.csv.tmp",
    ] {
        let dir = root.path().join(format!("rec-{name}"));
        fs::create_dir(&dir).unwrap();
        symlink(&victim, dir.join(name)).unwrap();
        let err = SessionWriter::create(&dir, meta("x")).unwrap_err();
        assert!(
            matches!(&err, SessionError::NotEmpty { entry, .. } if entry == name),
            "{name}: {err}"
        );
        assert!(
            err.to_string().contains(&dir.display().to_string()),
            "{err}"
        );
        assert_untouched(&victim);
    }
}

#[test]
fn links_planted_while_recording_are_never_written_through() {
    let root = tempfile::tempdir().unwrap();
    let victim = victim(root.path());
    let dir = root.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    for name in [
        "timeseries.jsonl",
        "latency.hlog",
        "worker.log",
        "session.json.tmp",
        "threads.csv.tmp",
        "cpu.folded.tmp",
        "threads.csv",
    ] {
        symlink(&victim, dir.join(name)).unwrap();
    }
    let err = w.append_row(&row(1.0, 1, 1, 1)).unwrap_err();
    assert!(err.to_string().contains("timeseries.jsonl"), "{err}");
    let err = w
        .append_latency("rtt", 0.0, 1.0, &histogram(&[1_000]))
        .unwrap_err();
    assert!(err.to_string().contains("latency.hlog"), "{err}");
    let err = w.append_worker_log(b"hello\n").unwrap_err();
    assert!(err.to_string().contains("worker.log"), "{err}");
    // Atomic writes pick a temporary name of their own and replace a planted final name.
    w.write_threads(&[]).unwrap();
    assert!(
        !fs::symlink_metadata(dir.join("threads.csv"))
            .unwrap()
            .is_symlink()
    );
    let mut t = StackTree::new();
    t.add_names(["main"], 1);
    w.write_stacks(Kind::Cpu, &t, "t").unwrap();
    w.update_meta(|m| m.sampling.samples = 1).unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:01Z".into())
        .unwrap();
    assert_untouched(&victim);
    // The loader refuses the links left in place of the appended files, naming one.
    let err = Session::load(&dir).unwrap_err();
    assert!(matches!(err, SessionError::NotAFile { .. }), "{err}");
    for name in ["timeseries.jsonl", "latency.hlog", "worker.log"] {
        fs::remove_file(dir.join(name)).unwrap();
    }
    let s = Session::load(&dir).unwrap();
    assert_eq!(s.profiles[Kind::Cpu].clone().unwrap().total_weight(), 1);
    // The planted links are where they were; nothing was renamed from them.
    for name in ["session.json.tmp", "threads.csv.tmp", "cpu.folded.tmp"] {
        assert!(fs::symlink_metadata(dir.join(name)).unwrap().is_symlink());
    }
}

#[test]
fn a_link_planted_at_the_digest_is_replaced_and_a_digest_unwritable_is_said() {
    use benchtop_sessions::digest::{DIGEST_FILE, Digested, Source};
    let root = tempfile::tempdir().unwrap();
    let victim = victim(root.path());
    let dir = root.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    w.append_row(&row(1.0, 1, 1, 1)).unwrap();
    symlink(&victim, dir.join(DIGEST_FILE)).unwrap();
    symlink(&victim, dir.join(format!("{DIGEST_FILE}.tmp"))).unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:01Z".into())
        .unwrap();
    assert_untouched(&victim);
    assert!(
        fs::symlink_metadata(dir.join(DIGEST_FILE))
            .unwrap()
            .is_file()
    );
    let read = Digested::load(&dir).unwrap();
    assert_eq!(read.source, Source::File);
    assert!(read.digest.unwrap().figures.contains_key("ops/s"));

    // A data file that cannot be read back at the end: no digest, the session finished
    // all the same, and session.json says why.
    let dir = root.path().join("t");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    w.append_row(&row(1.0, 1, 1, 1)).unwrap();
    fs::remove_file(dir.join("timeseries.jsonl")).unwrap();
    symlink(&victim, dir.join("timeseries.jsonl")).unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:01Z".into())
        .unwrap();
    assert_untouched(&victim);
    assert!(fs::symlink_metadata(dir.join(DIGEST_FILE)).is_err());
    let text = fs::read_to_string(dir.join("session.json")).unwrap();
    assert!(
        text.contains("digest.json was not written") && text.contains("symbolic link"),
        "{text}"
    );
}

#[test]
fn a_directory_holding_anything_is_refused_a_stale_timeseries_or_an_earlier_session() {
    let root = tempfile::tempdir().unwrap();
    let stale = root.path().join("stale");
    fs::create_dir(&stale).unwrap();
    fs::write(
        stale.join("timeseries.jsonl"),
        b"{\"t_s\":1,\"interval_s\":1}\n",
    )
    .unwrap();
    let err = SessionWriter::create(&stale, meta("x")).unwrap_err();
    assert!(matches!(err, SessionError::NotEmpty { .. }), "{err}");
    assert_eq!(
        fs::read(stale.join("timeseries.jsonl")).unwrap(),
        b"{\"t_s\":1,\"interval_s\":1}\n"
    );

    let earlier = root.path().join("earlier");
    SessionWriter::create(&earlier, meta("x"))
        .unwrap()
        .finish(Status::Complete, "2024-05-01T12:00:01Z".into())
        .unwrap();
    let err = SessionWriter::create(&earlier, meta("y")).unwrap_err();
    assert!(matches!(err, SessionError::AlreadyExists { .. }), "{err}");
}

#[test]
fn of_two_recorders_started_into_one_directory_exactly_one_records() {
    let root = tempfile::tempdir().unwrap();
    for round in 0..20 {
        let dir = root.path().join(format!("race-{round}"));
        fs::create_dir(&dir).unwrap();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let racers: Vec<_> = (0..2)
            .map(|i| {
                let (dir, barrier) = (dir.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    SessionWriter::create(&dir, meta(&format!("racer-{i}"))).map(|_| i)
                })
            })
            .collect();
        let results: Vec<_> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for err in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(
                matches!(
                    err,
                    SessionError::AlreadyExists { .. } | SessionError::NotEmpty { .. }
                ),
                "{err}"
            );
            assert!(
                err.to_string().contains(&dir.display().to_string()),
                "{err}"
            );
        }
        let id = Session::load(&dir).unwrap().meta.id;
        assert_eq!(id, format!("racer-{}", winners[0]));
    }
}

#[test]
fn a_link_or_another_users_directory_is_refused_as_a_record_directory() {
    let root = tempfile::tempdir().unwrap();
    let real = root.path().join("real");
    fs::create_dir(&real).unwrap();
    symlink(&real, root.path().join("link")).unwrap();
    let err = SessionWriter::create(&root.path().join("link"), meta("x")).unwrap_err();
    assert!(
        matches!(&err, SessionError::UnsafeDirectory { reason, .. } if reason.contains("symbolic link")),
        "{err}"
    );
    assert_eq!(fs::read_dir(&real).unwrap().count(), 0);

    // A device in place of the directory (`--record /dev/null`): said as what it is.
    let err = SessionWriter::create(Path::new("/dev/null"), meta("x")).unwrap_err();
    assert!(
        matches!(&err, SessionError::UnsafeDirectory { reason, .. } if reason.contains("not a directory")),
        "{err}"
    );
    assert!(err.to_string().starts_with("/dev/null: "), "{err}");

    // `nobody`'s empty directory: chown needs root, which these tests run as.
    let theirs = root.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534))
        .expect("chown to uid 65534 needs root: run the tests as root");
    let err = SessionWriter::create(&theirs, meta("x")).unwrap_err();
    assert!(
        matches!(&err, SessionError::UnsafeDirectory { reason, .. } if reason.contains("65534")),
        "{err}"
    );
}

/// A finished session with every file the loader reads.
fn complete_session(dir: &Path) {
    let mut w = SessionWriter::create(dir, meta("x")).unwrap();
    w.append_row(&row(1.0, 1, 1, 1)).unwrap();
    w.append_latency("rtt", 0.0, 1.0, &histogram(&[1_000]))
        .unwrap();
    let mut t = StackTree::new();
    t.add_names(["main"], 1);
    w.write_stacks(Kind::Cpu, &t, "t").unwrap();
    w.write_stacks(Kind::OffCpu, &t, "t").unwrap();
    w.write_threads(&[]).unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:01Z".into())
        .unwrap();
}

const LOADED_FILES: [&str; 6] = [
    "session.json",
    "timeseries.jsonl",
    "latency.hlog",
    "cpu.folded",
    "offcpu.folded",
    "threads.csv",
];

/// Loads `dir` on a thread of its own: a load that hangs fails the test instead of the run.
fn load_within(dir: &Path, limit: Duration) -> Result<Session, SessionError> {
    let (tx, rx) = mpsc::channel();
    let dir = dir.to_owned();
    std::thread::spawn(move || {
        let _ = tx.send(Session::load_with(&dir, &LoadOptions::default()));
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("loading hung for {limit:?}"))
}

#[test]
fn a_fifo_in_place_of_any_session_file_is_refused_at_once() {
    let root = tempfile::tempdir().unwrap();
    for name in LOADED_FILES {
        let dir = root.path().join(format!("s-{name}"));
        complete_session(&dir);
        fs::remove_file(dir.join(name)).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.join(name),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let err = load_within(&dir, Duration::from_secs(20)).unwrap_err();
        assert!(
            matches!(&err, SessionError::NotAFile { path, what: "a FIFO" } if path.ends_with(name)),
            "{name}: {err}"
        );
    }
}

#[test]
fn a_link_to_dev_zero_in_place_of_any_session_file_is_refused_unread() {
    let root = tempfile::tempdir().unwrap();
    for name in LOADED_FILES {
        let dir = root.path().join(format!("s-{name}"));
        complete_session(&dir);
        fs::remove_file(dir.join(name)).unwrap();
        symlink("/dev/zero", dir.join(name)).unwrap();
        let err = load_within(&dir, Duration::from_secs(20)).unwrap_err();
        assert!(
            matches!(&err, SessionError::NotAFile { path, what: "a symbolic link" } if path.ends_with(name)),
            "{name}: {err}"
        );
        assert!(err.to_string().contains(name), "{err}");
    }
}

#[test]
fn a_file_past_its_size_limit_is_refused_naming_the_limit() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    complete_session(&dir);
    let mut opts = LoadOptions::default();
    opts.max_file_bytes = Some(64);
    let err = Session::load_with(&dir, &opts).unwrap_err();
    assert!(
        matches!(
            &err,
            SessionError::TooLarge {
                limit: 64,
                kind: "session.json",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("BENCHTOP_MAX_FILE_BYTES"), "{err}");
}

#[test]
fn parameters_past_ten_thousand_are_dropped_with_a_warning() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut m = meta("x");
    for i in 0..MAX_PARAMS + 5 {
        m.workload.params.insert(format!("p{i:05}"), i.into());
    }
    SessionWriter::create(&dir, m)
        .unwrap()
        .finish(Status::Complete, "2024-05-01T12:00:01Z".into())
        .unwrap();
    let s = Session::load(&dir).unwrap();
    assert_eq!(s.meta.workload.params.len(), MAX_PARAMS);
    let warning = s
        .warnings
        .iter()
        .find(|w| w.contains("parameters"))
        .unwrap();
    assert!(warning.contains("7 were dropped"), "{warning}");
}

#[test]
fn histogram_tags_past_a_thousand_are_dropped_with_a_warning() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    let h = histogram(&[1_000]);
    for i in 0..MAX_TAGS + 3 {
        w.append_latency(&format!("t{i}"), 0.0, 1.0, &h).unwrap();
    }
    w.append_latency("t0", 1.0, 1.0, &h).unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:01Z".into())
        .unwrap();
    let s = Session::load(&dir).unwrap();
    assert_eq!(
        s.latency.len(),
        MAX_TAGS + 1,
        "the known tag's later interval is kept"
    );
    let warning = s.warnings.iter().find(|w| w.contains("tags")).unwrap();
    assert!(warning.contains("3 interval lines"), "{warning}");
}

#[test]
fn intervals_past_the_limit_are_dropped_with_a_warning() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    let h = histogram(&[1_000]);
    for i in 0..5 {
        w.append_row(&row(f64::from(i) + 1.0, 1, 1, 1)).unwrap();
        w.append_latency("rtt", f64::from(i), 1.0, &h).unwrap();
    }
    w.finish(Status::Complete, "2024-05-01T12:00:05Z".into())
        .unwrap();
    let mut opts = LoadOptions::default();
    opts.max_intervals = 3;
    let s = Session::load_with(&dir, &opts).unwrap();
    assert_eq!((s.rows.len(), s.latency.len()), (3, 3));
    let text = s.warnings.join("\n");
    assert!(
        text.contains("2 rows from line 4 on were dropped"),
        "{text}"
    );
    assert!(text.contains("2 interval lines from line"), "{text}");
}

#[test]
fn interval_buckets_past_the_byte_budget_are_dropped_with_a_warning() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    // 10,000 distinct values an interval: a short line, many buckets.
    let wide = histogram(&(1..=10_000u64).collect::<Vec<_>>());
    for i in 0..6 {
        w.append_latency("rtt", f64::from(i), 1.0, &wide).unwrap();
    }
    w.finish(Status::Complete, "2024-05-01T12:00:06Z".into())
        .unwrap();
    let whole = Session::load(&dir).unwrap();
    assert_eq!(whole.latency.len(), 6);
    let per_interval = whole.latency[0].held_bytes();
    assert_eq!(whole.latency_held_bytes(), per_interval * 6);
    // At the edge: four intervals' worth holds four; a byte less, three.
    let mut opts = LoadOptions::default();
    opts.max_interval_bytes = per_interval * 4;
    let s = Session::load_with(&dir, &opts).unwrap();
    assert_eq!(s.latency.len(), 4);
    let text = s.warnings.join("\n");
    assert!(
        text.contains("(held: 4 intervals, ") && text.contains("2 intervals from 4.000 s on"),
        "{text}"
    );
    opts.max_interval_bytes = per_interval * 4 - 1;
    let s = Session::load_with(&dir, &opts).unwrap();
    assert_eq!(s.latency.len(), 3);
    assert!(
        s.warnings
            .join("\n")
            .contains("3 intervals from 3.000 s on"),
        "{:?}",
        s.warnings
    );
    // What one session held, a second loaded by the same command does not get.
    let mut opts = LoadOptions::default();
    opts.max_interval_bytes = per_interval * 8;
    let first = Session::load_with(&dir, &opts).unwrap();
    opts = opts.after(first.held());
    let second = Session::load_with(&dir, &opts).unwrap();
    assert_eq!((first.latency.len(), second.latency.len()), (6, 2));
}

#[test]
fn two_hours_of_real_latency_fit_the_budget_with_room() {
    // Intervals of the synthetic hour (sessions/examples/synthetic_session.rs, the
    // session_load bench's): 1,000 values around 50 µs at 100 ms.
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut synthetic = benchtop_sessions::synthetic::SyntheticSession::default();
    synthetic.intervals = 360;
    synthetic.write(&dir).unwrap();
    let s = Session::load(&dir).unwrap();
    assert_eq!(s.latency.len(), 360);
    let hour = s.latency_held_bytes() * 100;
    // compare A B and open A B of two hours, and a third besides.
    assert!(
        hour * 3 <= benchtop_sessions::limits::MAX_INTERVAL_BYTES,
        "an hour holds {hour} bytes"
    );
}

#[test]
fn rows_past_their_budget_are_dropped_with_a_warning_and_the_budget_is_shared() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    let h = histogram(&[1_000]);
    for i in 0..6 {
        // Rows of one shape: 64 per-core figures besides the counters of `row`.
        let mut r = row(f64::from(i) + 1.0, 1, 1, 1);
        r.cpu_percent_per_core = vec![50.0; 64];
        w.append_row(&r).unwrap();
        w.append_latency("rtt", f64::from(i), 1.0, &h).unwrap();
    }
    w.finish(Status::Complete, "2024-05-01T12:00:06Z".into())
        .unwrap();
    let whole = Session::load(&dir).unwrap();
    assert_eq!(whole.rows.len(), 6);
    assert!(whole.warnings.is_empty(), "{:?}", whole.warnings);
    let per_row = row_held_bytes(&whole.rows[0]);
    assert!(per_row > 64 * 8, "{per_row}");
    // At the edge: four rows' worth holds four (and their list no more); a byte less,
    // three. What else the session recorded is all there.
    let mut opts = LoadOptions::default();
    opts.max_row_bytes = per_row * 4;
    let s = Session::load_with(&dir, &opts).unwrap();
    assert_eq!((s.rows.len(), s.latency.len()), (4, 6));
    assert_eq!(s.rows_held_bytes(), per_row * 4);
    let text = s.warnings.join("\n");
    assert!(
        text.contains(&format!(
            "timeseries.jsonl: its rows pass the budget of {} bytes (held: 4 rows, 268 \
             figures); 2 rows from line 5 on were dropped",
            per_row * 4
        )),
        "{text}"
    );
    opts.max_row_bytes = per_row * 4 - 1;
    let s = Session::load_with(&dir, &opts).unwrap();
    assert_eq!(s.rows.len(), 3);
    assert!(s.rows_held_bytes() <= opts.max_row_bytes);
    assert!(
        s.warnings.join("\n").contains("3 rows from line 4 on"),
        "{:?}",
        s.warnings
    );
    // What one session held, a second loaded by the same command does not get; the
    // summary load holds no row, so each row on its own meets the budget.
    opts.max_row_bytes = per_row * 8;
    let first = Session::load_with(&dir, &opts).unwrap();
    let second = Session::load_with(&dir, &opts.after(first.held())).unwrap();
    assert_eq!((first.rows.len(), second.rows.len()), (6, 1));
    assert!(first.rows_held_bytes() + second.rows_held_bytes() <= opts.max_row_bytes);
    let show = Session::load_summary(&dir).unwrap();
    assert_eq!(show.row_summary.rows, 6);
}

#[test]
fn two_synthetic_hours_of_rows_fit_the_budget_with_room_and_one_of_a_64_core_machine() {
    // The synthetic hour's rows (the session_load bench's: 36,000 rows of 100 ms), and
    // the same with the per-core figures and top threads of a 64-core machine. `open A B`
    // of two such hours shares the budget: it holds both with a quarter to spare (rows
    // grow a little as the recorder learns to say more of a run: the kernel's counts of
    // the tree took the hour from 31 to 36 MiB).
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut synthetic = benchtop_sessions::synthetic::SyntheticSession::default();
    synthetic.intervals = 360;
    synthetic.write(&dir).unwrap();
    let s = Session::load(&dir).unwrap();
    assert_eq!(s.rows.len(), 360);
    let hour = s.rows_held_bytes() * 100;
    let mut wide = s.rows[0].clone();
    wide.cpu_percent_per_core = vec![12.5; 64];
    wide.top_threads = (0..5)
        .map(|i| ThreadCpu::new(7, 7 + i, "kvstore", format!("kvstore-w{i}"), 99.0))
        .collect();
    let wide_hour = row_held_bytes(&wide) * 36_000;
    assert!(
        hour * 2 * 5 / 4 <= MAX_ROW_BYTES && wide_hour * 5 / 4 <= MAX_ROW_BYTES,
        "an hour holds {hour} bytes; on 64 cores {wide_hour}"
    );
}

#[test]
fn failed_and_killed_sessions_load_and_say_why() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    SessionWriter::create(&dir, meta("x"))
        .unwrap()
        .finish(Status::Killed, "2024-05-01T12:00:01Z".into())
        .unwrap();
    assert_eq!(Session::load(&dir).unwrap().meta.status, Status::Killed);

    let dir = root.path().join("f");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    let err = SessionError::io(
        dir.join("worker.log"),
        std::io::Error::from_raw_os_error(28), // ENOSPC
    );
    assert!(err.is_no_space());
    w.fail(err.failure(), "2024-05-01T12:00:01Z".into())
        .unwrap();
    let s = Session::load(&dir).unwrap();
    assert_eq!(s.meta.status, Status::Failed);
    let failure = s.meta.failure.as_ref().unwrap();
    assert_eq!(failure.kind, FailureKind::NoSpace);
    assert!(failure.path.as_deref().unwrap().ends_with("worker.log"));
    let text = s.summary_text();
    assert!(text.contains("status    failed"), "{text}");
    assert!(text.contains("no space left on device"), "{text}");

    // A kind this build does not know reads as `other`.
    let json = fs::read_to_string(dir.join("session.json"))
        .unwrap()
        .replace("\"no_space\"", "\"cosmic_ray\"");
    fs::write(dir.join("session.json"), json).unwrap();
    let s = Session::load(&dir).unwrap();
    assert_eq!(s.meta.failure.unwrap().kind, FailureKind::Other);
}

/// A tmpfs of `size` mounted on a new directory, unmounted when dropped.
struct Tmpfs {
    _root: tempfile::TempDir,
    mount: PathBuf,
}

impl Tmpfs {
    fn new(size: &str) -> Tmpfs {
        let root = tempfile::tempdir().unwrap();
        let mount = root.path().join("small");
        fs::create_dir(&mount).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mount)
            .status()
            .expect("mount(8) is needed to test a full disk");
        assert!(
            status.success(),
            "mounting a tmpfs failed: these tests need root (mount -t tmpfs)"
        );
        Tmpfs { _root: root, mount }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
    }
}

/// Every name in `dir` ending in `.tmp` or holding `.tmp.`.
fn tmp_files(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp") || n.contains(".tmp."))
        .collect()
}

#[test]
fn a_full_disk_ends_the_session_as_failed_and_leaves_what_was_written_valid() {
    let fs_ = Tmpfs::new("2m");
    let dir = fs_.mount.join("s");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    w.append_row(&row(1.0, 1, 1, 1)).unwrap();
    let chunk = vec![b'x'; 256 * 1024];
    let err = loop {
        if let Err(e) = w.append_worker_log(&chunk) {
            break e;
        }
    };
    assert!(err.is_no_space(), "{err}");
    assert!(err.to_string().contains("worker.log"), "{err}");

    // The disk is full to the last block: a rewrite of session.json may fail; when it
    // does, the one written before stays whole, and no temporary file is left.
    let failure = err.failure();
    assert_eq!(failure.kind, FailureKind::NoSpace);
    let mut stacks = StackTree::new();
    for i in 0..20_000 {
        stacks.add_names(["main", &format!("frame-{i}")], 1);
    }
    let err = w.write_stacks(Kind::Cpu, &stacks, "t").unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert!(
        !dir.join("cpu.folded").exists(),
        "a partial cpu.folded was left"
    );
    assert_eq!(tmp_files(&dir), Vec::<String>::new());
    if w.fail(failure.clone(), "2024-05-01T12:00:01Z".into())
        .is_err()
    {
        assert_eq!(tmp_files(&dir), Vec::<String>::new());
        assert_eq!(Session::load(&dir).unwrap().meta.status, Status::Crashed);
        // Space freed (as a recorder may do by ending the worker's log): now it is said.
        fs::write(dir.join("worker.log"), b"").unwrap();
        w.fail(failure, "2024-05-01T12:00:01Z".into()).unwrap();
    }
    let s = Session::load(&dir).unwrap();
    assert_eq!(s.meta.status, Status::Failed);
    assert_eq!(s.meta.failure.as_ref().unwrap().kind, FailureKind::NoSpace);
    assert_eq!(s.rows.len(), 1);
    assert_eq!(tmp_files(&dir), Vec::<String>::new());
}
