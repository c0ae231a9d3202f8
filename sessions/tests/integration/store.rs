//! Writing a session directory and loading it back.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use benchtop_sessions::{Kind, Session, SessionError, SessionWriter, StackTree, Status};

use crate::{histogram, meta, row};

fn cpu_tree() -> StackTree {
    let mut t = StackTree::new();
    t.add_names(["main", "ring::run", "ring::hop"], 60);
    t.add_names(["main", "ring::run", "memcpy"], 25);
    t.add_names(["main", "ring::run"], 10);
    t.add_names(["main", "alloc", "memcpy"], 5);
    t
}

/// A finished session with three rows, two metrics of latency and both kinds of stacks.
fn write_complete(dir: &Path) -> SessionWriter {
    let mut w = SessionWriter::create(dir, meta("20240501-120000-ring")).unwrap();
    for i in 1..=3 {
        w.append_row(&row(i as f64, i * 1000, i * (10 << 20), 3 + i as u32))
            .unwrap();
        let t = (i - 1) as f64;
        w.append_latency("rtt", t, 1.0, &histogram(&[1_000, 1_500, 2_000_000]))
            .unwrap();
        w.append_latency("ask", t, 1.0, &histogram(&[50_000]))
            .unwrap();
    }
    w.append_worker_log(b"ring: 3000 messages\n").unwrap();
    w.write_stacks(Kind::Cpu, &cpu_tree(), "ring: on-CPU")
        .unwrap();
    let mut off = StackTree::new();
    off.add_names(["main", "futex_wait"], 1_500);
    w.write_stacks(Kind::OffCpu, &off, "ring: off-CPU").unwrap();
    w
}

#[test]
fn session_json_round_trips_through_the_writer_and_the_loader() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("a/b/s");
    let w = SessionWriter::create(&dir, meta("20240501-120000-ring")).unwrap();
    assert_eq!(w.meta().status, Status::Running);
    let path = w
        .finish(Status::Stopped, "2024-05-01T12:00:03.500Z".into())
        .unwrap();
    assert_eq!(path, dir);

    let loaded = Session::load(&dir).unwrap();
    let mut expected = meta("20240501-120000-ring");
    expected.status = Status::Stopped;
    expected.ended_at = Some("2024-05-01T12:00:03.500Z".into());
    assert_eq!(loaded.meta, expected);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert!(loaded.rows.is_empty() && loaded.latency.is_empty());
    assert!(loaded.profile(Kind::Cpu).is_none() && loaded.profile(Kind::OffCpu).is_none());
}

#[test]
fn a_finished_session_loads_with_everything_it_was_given() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let w = write_complete(&dir);
    w.finish(Status::Complete, "2024-05-01T12:00:03.000Z".into())
        .unwrap();

    let s = Session::load(&dir).unwrap();
    assert_eq!(s.meta.status, Status::Complete);
    assert_eq!(
        s.rows,
        (1..=3)
            .map(|i| row(i as f64, i * 1000, i * (10 << 20), 3 + i as u32))
            .collect::<Vec<_>>()
    );
    assert_eq!(s.latency.len(), 6);
    let rtt: Vec<_> = s.latency.iter().filter(|i| i.tag == "rtt").collect();
    assert_eq!(rtt.len(), 3);
    assert_eq!(rtt[2].start_offset_s, 2.0);
    assert_eq!(rtt[2].length_s, 1.0);
    assert_eq!(rtt[2].histogram, histogram(&[1_000, 1_500, 2_000_000]));
    assert_eq!(
        s.profile(Kind::Cpu).unwrap().to_folded(),
        cpu_tree().to_folded()
    );
    assert_eq!(s.profile(Kind::OffCpu).unwrap().total_weight(), 1_500);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);

    assert_eq!(
        fs::read_to_string(dir.join("worker.log")).unwrap(),
        "ring: 3000 messages\n"
    );
    let svg = fs::read_to_string(dir.join("offcpu.svg")).unwrap();
    assert!(svg.contains("futex_wait") && svg.contains("µs"));
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "cpu.folded",
            "cpu.svg",
            "digest.json",
            "latency.hlog",
            "offcpu.folded",
            "offcpu.svg",
            "session.json",
            "timeseries.jsonl",
            "worker.log"
        ],
        "no temporary file is left behind"
    );
}

#[test]
fn a_killed_recorder_leaves_a_session_that_loads_as_crashed_up_to_its_last_complete_row() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    drop(write_complete(&dir));
    // The kill came in the middle of the next row and the next interval.
    let append = |name: &str, bytes: &[u8]| {
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.join(name))
            .unwrap();
        f.write_all(bytes).unwrap();
    };
    append("timeseries.jsonl", br#"{"t_s":4.0,"interval_s":1.0,"coun"#);
    append("latency.hlog", b"Tag=rtt,3.000,1.000,2.001,HISTFAAAAC");

    let s = Session::load(&dir).unwrap();
    assert_eq!(s.meta.status, Status::Crashed);
    assert_eq!(s.meta.ended_at, None);
    assert_eq!(s.rows.len(), 3);
    assert_eq!(s.rows[2].t_s, 3.0);
    assert_eq!(s.latency.len(), 6);
    assert_eq!(s.warnings.len(), 4, "{:#?}", s.warnings);
    assert!(s.warnings[0].contains("cut off"));
    assert!(s.warnings[1].contains("timeseries.jsonl: line 4 is incomplete"));
    assert!(s.warnings[2].contains("latency.hlog: line 13 is incomplete"));
    // The space held for the last write of session.json was never freed: said.
    assert!(s.warnings[3].contains("session.json.reserve was left behind"));
    let summary = s.summary_text();
    assert!(summary.contains("status    crashed"), "{summary}");
}

#[test]
fn a_truncated_last_timeseries_line_is_dropped_with_a_warning() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    w.append_row(&row(1.0, 1, 1, 1)).unwrap();
    w.append_row(&row(2.0, 2, 2, 2)).unwrap();
    let path = w
        .finish(Status::Complete, "2024-05-01T12:00:02Z".into())
        .unwrap();
    let file = path.join("timeseries.jsonl");
    let text = fs::read_to_string(&file).unwrap();
    fs::write(&file, &text[..text.len() - 7]).unwrap();

    let s = Session::load(&path).unwrap();
    assert_eq!(s.rows.len(), 1);
    assert_eq!(s.warnings.len(), 1);
    assert!(
        s.warnings[0].contains("line 2 is incomplete"),
        "{}",
        s.warnings[0]
    );
}

#[test]
fn a_corrupt_row_in_the_middle_is_an_error_naming_the_file_and_line() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    w.append_row(&row(1.0, 1, 1, 1)).unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:02Z".into())
        .unwrap();
    let mut f = OpenOptions::new()
        .append(true)
        .open(dir.join("timeseries.jsonl"))
        .unwrap();
    f.write_all(b"{\"t_s\": \"soon\"}\n\n{\"t_s\":3,\"interval_s\":1}\n")
        .unwrap();

    let err = Session::load(&dir).unwrap_err();
    let SessionError::Corrupt { path, reason } = &err else {
        panic!("{err}")
    };
    assert_eq!(path, &dir.join("timeseries.jsonl"));
    assert!(reason.starts_with("line 2, column "), "{reason}");
}

/// Loads a session whose session.json is `text`; the error, and the directory to
/// compare paths against.
fn load_session_json(text: &str) -> (tempfile::TempDir, SessionError) {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("session.json"), text).unwrap();
    let err = Session::load(root.path()).unwrap_err();
    (root, err)
}

#[test]
fn a_corrupt_session_json_is_an_error_with_its_path_and_line() {
    let (root, err) = load_session_json("{\n  \"schema_version\": 1,\n  \"id\": \n");
    let SessionError::Corrupt { path, reason } = &err else {
        panic!("{err}")
    };
    assert_eq!(path, &root.path().join("session.json"));
    assert!(reason.starts_with("line 4, column"), "{reason}");
}

#[test]
fn a_session_json_missing_a_field_is_corrupt() {
    let (_root, err) = load_session_json(r#"{"schema_version": 1, "id": "x"}"#);
    let err = err.to_string();
    assert!(
        err.contains("session.json: corrupt: line 1") && err.contains("missing field"),
        "{err}"
    );
}

#[test]
fn foreign_json_is_not_taken_for_a_session() {
    let (root, err) = load_session_json(r#"{"name": "left-pad", "version": "1.3.0"}"#);
    assert!(matches!(err, SessionError::Corrupt { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("session.json") && text.contains("not a benchtop session.json"),
        "{text}"
    );

    fs::write(root.path().join("session.json"), "[1, 2, 3]").unwrap();
    assert!(matches!(
        Session::load(root.path()).unwrap_err(),
        SessionError::Corrupt { .. }
    ));
}

#[test]
fn a_future_schema_is_refused_with_both_versions() {
    // A future version may change anything but the version field.
    let (root, err) = load_session_json(r#"{"schema_version": 3, "id": 7}"#);
    let SessionError::UnsupportedSchema {
        path,
        found,
        supported,
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(path, &root.path().join("session.json"));
    assert_eq!((*found, *supported), (3, 2));
}

#[test]
fn a_directory_without_session_json_is_not_a_session() {
    let root = tempfile::tempdir().unwrap();
    for dir in [root.path().to_owned(), root.path().join("missing")] {
        let err = Session::load(&dir).unwrap_err();
        assert!(
            matches!(&err, SessionError::NotASession { path } if path == &dir),
            "{err}"
        );
    }
    let file = root.path().join("file");
    fs::write(&file, "").unwrap();
    assert!(matches!(
        Session::load(&file).unwrap_err(),
        SessionError::NotASession { .. }
    ));
}

#[test]
fn creating_a_session_where_one_is_recorded_is_refused() {
    let root = tempfile::tempdir().unwrap();
    SessionWriter::create(root.path(), meta("first")).unwrap();
    let err = SessionWriter::create(root.path(), meta("second")).unwrap_err();
    assert!(
        matches!(&err, SessionError::AlreadyExists { path } if path == root.path()),
        "{err}"
    );
    assert_eq!(Session::load(root.path()).unwrap().meta.id, "first");
}

#[test]
fn unknown_fields_from_newer_writers_of_the_same_schema_are_ignored() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    w.append_row(&row(1.0, 1, 1, 1)).unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:02Z".into())
        .unwrap();
    let json = fs::read_to_string(dir.join("session.json")).unwrap();
    let json = json.replacen('{', "{\"gpu\": {\"model\": \"none\"},", 1);
    fs::write(dir.join("session.json"), json).unwrap();
    let rows = fs::read_to_string(dir.join("timeseries.jsonl")).unwrap();
    fs::write(
        dir.join("timeseries.jsonl"),
        rows.replacen('{', "{\"gpu_percent\":3,", 1),
    )
    .unwrap();

    let s = Session::load(&dir).unwrap();
    assert_eq!(s.meta.id, "x");
    assert_eq!(s.rows, [row(1.0, 1, 1, 1)]);
}

#[test]
fn a_corrupt_folded_file_is_an_error_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let w = SessionWriter::create(&dir, meta("x")).unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:02Z".into())
        .unwrap();
    fs::write(dir.join("cpu.folded"), "main;a 3\nmain;b three\n").unwrap();
    let err = Session::load(&dir).unwrap_err().to_string();
    assert!(
        err.contains("cpu.folded") && err.contains("line 2"),
        "{err}"
    );
}

#[test]
fn an_svg_that_cannot_be_written_still_leaves_the_folded_stacks_and_no_stale_svg() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("x")).unwrap();
    let mut old = StackTree::new();
    old.add_names(["main", "old"], 1);
    w.write_stacks(Kind::Cpu, &old, "t").unwrap();
    assert!(dir.join("cpu.svg").exists());

    // Something in the way of every temporary name the SVG could take (none is ever
    // reused): the SVG cannot be written.
    fs::create_dir(dir.join("cpu.svg.tmp")).unwrap();
    for n in 2..=100 {
        fs::create_dir(dir.join(format!("cpu.svg.tmp.{n}"))).unwrap();
    }
    let err = w
        .write_stacks(Kind::Cpu, &cpu_tree(), "ring: on-CPU")
        .unwrap_err();
    let folded_path = dir.join("cpu.folded");
    assert!(
        matches!(&err, SessionError::FlamegraphNotWritten { folded, .. } if *folded == folded_path),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("cpu.svg.tmp") && text.contains("the folded stacks were written to"),
        "{text}"
    );
    assert!(!dir.join("cpu.svg").exists(), "the old SVG is left behind");
    assert_eq!(
        fs::read_to_string(&folded_path).unwrap(),
        cpu_tree().to_folded()
    );
    w.finish(Status::Complete, "2024-05-01T12:00:02Z".into())
        .unwrap();
    let loaded = Session::load(&dir).unwrap();
    assert_eq!(
        loaded.profiles[Kind::Cpu].clone().unwrap().total_weight(),
        100
    );
}

#[test]
fn sessions_started_in_the_same_second_get_directories_of_their_own() {
    let root = tempfile::tempdir().unwrap();
    let parent = root.path().join("sessions");
    let id = "20240501-120000-ring";
    let mut dirs = Vec::new();
    for _ in 0..3 {
        let w = SessionWriter::create_unique(&parent, id, meta(id)).unwrap();
        dirs.push(
            w.finish(Status::Complete, "2024-05-01T12:00:02Z".into())
                .unwrap(),
        );
    }
    let names = [
        "20240501-120000-ring",
        "20240501-120000-ring-2",
        "20240501-120000-ring-3",
    ];
    for (dir, name) in dirs.iter().zip(names) {
        assert_eq!(*dir, parent.join(name));
        let loaded = Session::load(dir).unwrap();
        assert_eq!(loaded.meta.id, name);
        assert_eq!(loaded.meta.name, name);
    }

    // A name given by the user stays; an empty directory takes its name too.
    fs::create_dir(parent.join("other")).unwrap();
    let mut named = meta("other");
    named.name = "baseline".into();
    let w = SessionWriter::create_unique(&parent, "other", named).unwrap();
    assert_eq!(w.dir(), parent.join("other-2"));
    assert_eq!(w.meta().id, "other-2");
    assert_eq!(w.meta().name, "baseline");
}

#[test]
fn create_unique_refuses_ids_that_are_not_one_directory_name_and_gives_up_after_its_attempts() {
    let root = tempfile::tempdir().unwrap();
    for id in ["../escape", "a/b", "", ".", ".."] {
        let err = SessionWriter::create_unique(root.path(), id, meta("x")).unwrap_err();
        assert!(
            matches!(err, SessionError::InvalidMeta { .. }),
            "{id}: {err}"
        );
    }
    assert!(!root.path().join("escape").exists() && !root.path().join("a").exists());

    fs::create_dir(root.path().join("x")).unwrap();
    for n in 2..=benchtop_sessions::store::MAX_UNIQUE_ATTEMPTS {
        fs::create_dir(root.path().join(format!("x-{n}"))).unwrap();
    }
    let err = SessionWriter::create_unique(root.path(), "x", meta("x")).unwrap_err();
    assert!(
        matches!(&err, SessionError::AlreadyExists { path } if path.ends_with("x-100")),
        "{err}"
    );
}

#[test]
fn a_run_the_duration_ended_is_shown_as_complete_duration_reached() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut w = write_complete(&dir);
    w.set_meta(|m| m.ended_by = Some(benchtop_sessions::EndedBy::Duration));
    w.finish(Status::Complete, "2024-05-01T12:00:03.250Z".into())
        .unwrap();
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status_words(), "complete (duration reached)");
    let text = session.summary_text();
    assert!(
        text.contains("status    complete (duration reached; worker: exit code 0)"),
        "{text}"
    );
}

#[test]
fn the_sampling_line_of_a_run_without_on_cpu_says_what_drove_it() {
    let root = tempfile::tempdir().unwrap();
    for (profile, said) in [
        (
            "offcpu",
            "sampling  context-switches (off-CPU only): 0 records lost",
        ),
        (
            "waits",
            "sampling  context-switches (off-CPU and waits: switches and wake-ups): 0 records \
             lost",
        ),
    ] {
        let dir = root.path().join(profile);
        let mut w = write_complete(&dir);
        w.set_meta(|m| {
            m.sampling.profile = profile.to_owned();
            m.sampling.event = "context-switches".to_owned();
            m.sampling.lost = 0;
            m.sampling.reason = None;
        });
        w.finish(Status::Complete, "2024-05-01T12:00:03.250Z".into())
            .unwrap();
        let text = Session::load(&dir).unwrap().summary_text();
        assert!(text.contains(said), "{said:?} missing from\n{text}");
    }
}

#[test]
fn the_summary_shows_the_run_its_figures_latency_resources_and_hot_frames() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    write_complete(&dir)
        .finish(Status::Complete, "2024-05-01T12:00:03.250Z".into())
        .unwrap();
    let text = Session::load(&dir).unwrap().summary_text();
    for needle in [
        "id        20240501-120000-ring",
        "workload  ring mode=ask workers=4",
        "host      bench-1, AMD EPYC 7B13, 8 cores, 32.0 GiB RAM, Linux 6.8.0-45-generic",
        "status    complete (worker: exit code 0)",
        "duration  3s 250ms",
        "sampling  cpu-clock at 999 Hz: 2990 samples, 3 records lost, kernel frames off (kernel frames need perf_event_paranoid <= 1)",
        "  messages/s: 1.25 M msg/s",
        "  time taken: 3.20 s",
        "peak RSS     30.0 MiB",
        "max threads  6",
        "   60.0%  ring::hop",
        "   30.0%  memcpy",
        "   10.0%  ring::run",
        "  - the worker's stderr was not captured",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }
    let rtt = text
        .lines()
        .find(|l| l.trim_start().starts_with("rtt"))
        .unwrap();
    let cols: Vec<&str> = rtt.split_whitespace().collect();
    // metric, count, then p50 p90 p99 p99.9 max as value + unit pairs.
    assert_eq!(&cols[..4], ["rtt", "9", "1.50", "µs"], "{rtt}");
    assert_eq!(&cols[cols.len() - 2..], ["2.00", "ms"], "{rtt}");
}

#[test]
fn a_summary_load_keeps_no_rows_and_shows_the_same_text() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    write_complete(&dir)
        .finish(Status::Complete, "2024-05-01T12:00:03Z".into())
        .unwrap();
    let full = Session::load(&dir).unwrap();
    let summary = Session::load_summary(&dir).unwrap();
    assert_eq!(full.rows.len(), 3);
    assert!(summary.rows.is_empty());
    assert_eq!(summary.row_summary, full.row_summary);
    assert_eq!(summary.row_summary.rows, 3);
    assert_eq!(summary.summary_text(), full.summary_text());
    assert!(
        full.summary_text().contains("peak RSS"),
        "{}",
        full.summary_text()
    );
}

#[test]
fn show_says_how_stacks_were_unwound_and_how_many_were_truncated() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut m = meta("u");
    m.sampling.enabled = true;
    m.sampling.event = "cpu-clock".into();
    m.sampling.frequency_hz = 999;
    m.sampling.unwind = "dwarf".into();
    let mut u = benchtop_sessions::meta::UnwindingInfo::default();
    u.stack_size = 8192;
    u.unwound = 1000;
    u.truncated_no_unwind_info = 3;
    u.truncated_stack_copy = 17;
    u.truncated_other = 5;
    u.no_stack = 2;
    u.modules.insert("libc.so.6".into(), "dwarf".into());
    u.modules.insert("prog".into(), "fp".into());
    // A module name from a hostile session reaches the terminal escaped.
    u.modules.insert("\u{1b}[2Jevil.so".into(), "none".into());
    for i in 0..20 {
        u.modules.insert(format!("zz{i:02}.so"), "dwarf".into());
    }
    m.sampling.unwinding = Some(u);
    let w = SessionWriter::create(&dir, m).unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:01Z".into())
        .unwrap();
    let text = Session::load(&dir).unwrap().summary_text();
    let line = |start: &str| {
        text.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no `{start}` line in\n{text}"))
            .to_owned()
    };
    let unwind = line("unwind    dwarf, 8.00 KiB stack copies:");
    assert!(
        unwind.contains("1000 stacks unwound, 25 truncated (2.5%"),
        "{unwind}"
    );
    assert!(
        unwind.contains("3 no unwind info, 17 stack copy too small, 5 other"),
        "{unwind}"
    );
    assert!(unwind.contains("2 samples without a stack"), "{unwind}");
    let modules = line("modules  ");
    assert!(modules.contains("libc.so.6 dwarf"), "{modules}");
    assert!(modules.contains("prog fp"), "{modules}");
    assert!(modules.contains("evil.so none"), "{modules}");
    assert!(!modules.contains('\u{1b}'), "{modules}");
    // 23 modules: twelve named, the rest counted.
    assert!(modules.ends_with(", 11 more"), "{modules}");

    // Frame pointers: the mode alone, no counts.
    let dir = root.path().join("fp");
    let mut m = meta("fp");
    m.sampling.enabled = true;
    m.sampling.unwind = "fp".into();
    let w = SessionWriter::create(&dir, m).unwrap();
    w.finish(Status::Complete, "2024-05-01T12:00:01Z".into())
        .unwrap();
    let text = Session::load(&dir).unwrap().summary_text();
    assert!(text.lines().any(|l| l == "unwind    fp"), "{text}");
    assert!(!text.contains("modules  "), "{text}");
}

#[test]
fn a_run_killed_before_its_folded_files_keeps_the_stacks_its_intervals_recorded() {
    use benchtop_sessions::synthetic::TreeChunks;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let mut w = SessionWriter::create(&dir, meta("20240501-120000-ring")).unwrap();
    let mut chunks = TreeChunks::default();
    let mut off = StackTree::new();
    off.add_names(["main", "futex_wait"], 400);
    for i in 0..3u64 {
        w.append_row(&row((i + 1) as f64, i * 1000, 10 << 20, 3))
            .unwrap();
        let span = (i * 1_000_000_000, (i + 1) * 1_000_000_000);
        let chunk = chunks.chunk(span, &[(Kind::Cpu, &cpu_tree()), (Kind::OffCpu, &off)]);
        w.append_stacks(&chunk).unwrap();
    }
    // Killed here: no folded files, session.json still says running, and the space held
    // for its last write never freed.
    std::mem::forget(w);
    assert!(!dir.join("cpu.folded").exists());

    let s = Session::load(&dir).unwrap();
    assert_eq!(s.meta.status, Status::Crashed);
    let cpu = s.profile(Kind::Cpu).expect("on-CPU stacks rebuilt");
    assert_eq!(cpu.total_weight(), 3 * 100);
    assert!(
        cpu.to_folded().contains("main;ring::run;ring::hop 180"),
        "{}",
        cpu.to_folded()
    );
    // Off-CPU in its folded unit: 3 × 400 µs.
    assert_eq!(
        s.profile(Kind::OffCpu).map(StackTree::total_weight),
        Some(1_200)
    );
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("cpu.folded was not written") && w.contains("rebuilt")),
        "{:#?}",
        s.warnings
    );
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("session.json.reserve")),
        "{:#?}",
        s.warnings
    );
    // show sees them.
    let summary = s.summary_text();
    assert!(summary.contains("ring::hop"), "{summary}");

    // A complete session without a folded file of a kind is not rebuilt: it had none.
    let dir = root.path().join("complete");
    let mut w = SessionWriter::create(&dir, meta("20240501-130000-ring")).unwrap();
    let chunk = TreeChunks::default().chunk((0, 1_000_000_000), &[(Kind::Cpu, &cpu_tree())]);
    w.append_stacks(&chunk).unwrap();
    w.finish(Status::Complete, "2024-05-01T13:00:01Z".into())
        .unwrap();
    let s = Session::load(&dir).unwrap();
    assert!(s.profile(Kind::Cpu).is_none());
    assert!(
        !s.warnings.iter().any(|w| w.contains("rebuilt")),
        "{:#?}",
        s.warnings
    );
}
