//! `show`, `compare` and `export` on hostile sessions, through the binary: FIFOs and links in
//! place of session files, escape sequences in a session's strings, huge files (peak RSS of
//! the child, from wait4), links planted in an `--out` directory, and a full disk.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::symlink;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use benchtop_sessions::meta::{Figure, HostInfo, WorkloadInfo};
use benchtop_sessions::{Kind, SessionMeta, SessionWriter, StackTree, Status, TimeseriesRow};
use hdrhistogram::Histogram;

use crate::compare::session;
use crate::support::benchtop;

/// Each hostile case runs under this peak RSS.
pub(crate) const RSS_LIMIT_BYTES: u64 = 256 << 20;

/// What a run of the binary gave.
pub(crate) struct Run {
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    /// Peak RSS of the benchtop process alone, bytes.
    pub(crate) max_rss: u64,
    pub(crate) took: Duration,
}

/// Starts the command given as its arguments, waits for it with wait4 and writes its own
/// peak RSS (KiB) to the file named by `BENCHTOP_RSS_FILE`, exiting as it did. The peak
/// is benchtop's alone: were benchtop the test process's direct child, the kernel would
/// carry the forked copy's high-water mark (the test's own pages) across exec.
/// With `BENCHTOP_TEST_AS` set (bytes), benchtop runs under that RLIMIT_AS, so a load
/// that would take gigabytes fails instead of pressing on the machine.
const MEASURE: &str = r#"
import os, resource, sys
limit = os.environ.pop("BENCHTOP_TEST_AS", None)
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(os.environ["BENCHTOP_RSS_FILE"], "w") as f:
    f.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"#;

/// Runs `command` under [`MEASURE`] with its output in files, waits at most `limit` (then
/// kills its process group and fails the test), and reads benchtop's peak RSS.
pub(crate) fn run(command: Command, limit: Duration) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (out, err, rss) = (
        dir.path().join("out"),
        dir.path().join("err"),
        dir.path().join("rss"),
    );
    let mut measured = Command::new("python3");
    measured
        .args(["-c", MEASURE])
        .arg(command.get_program())
        .args(command.get_args())
        .env("BENCHTOP_RSS_FILE", &rss)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap())
        .process_group(0);
    let start = Instant::now();
    let mut child = measured
        .spawn()
        .expect("python3 is needed to measure peak RSS (scripts/test installs it)");
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let group = child.id() as libc::pid_t;
            // SAFETY: kill(2) of the process group this test made for the child.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            let _ = child.wait();
            panic!("{command:?} still running after {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = start.elapsed();
    let kib: u64 = fs::read_to_string(&rss)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no peak RSS: {}",
                fs::read_to_string(&err).unwrap_or_default()
            )
        });
    Run {
        code: status.code(),
        stdout: fs::read_to_string(&out).unwrap(),
        stderr: fs::read_to_string(&err).unwrap(),
        max_rss: kib * 1024,
        took,
    }
}

pub(crate) fn show(dir: &Path) -> Command {
    let mut c = benchtop();
    c.arg("show").arg(dir);
    c
}

pub(crate) fn compare(a: &Path, b: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut c = benchtop();
    c.arg("compare")
        .arg(a)
        .arg(b)
        .arg("--out")
        .arg(out)
        .args(extra);
    c
}

pub(crate) fn export(dir: &Path, out: &Path, formats: &str) -> Command {
    let mut c = benchtop();
    c.arg("export")
        .arg(dir)
        .arg("--out")
        .arg(out)
        .args(["--format", formats]);
    c
}

/// A session with every file the loader reads: timeseries, latency, stacks of both kinds,
/// threads.
fn full_session(dir: &Path) {
    session(dir, "tell", 1e6, "hot", 10);
    // Add what `session` leaves out, through the files themselves.
    let mut off = StackTree::new();
    off.add_names(["bt-ring", "futex_wait"], 10);
    fs::write(dir.join("offcpu.folded"), off.to_folded()).unwrap();
    fs::write(
        dir.join("threads.csv"),
        "pid,tid,process,thread,user_s,system_s,voluntary_ctxt_switches,\
         involuntary_ctxt_switches,first_seen_s,last_seen_s\n1,1,p,t,1.0,0.0,1,1,0.0,1.0\n",
    )
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

/// For each session file, a session whose file is replaced by what `plant` makes; show,
/// compare and export must fail promptly with `expected` and the file's name.
fn each_file_replaced(plant: impl Fn(&Path), expected: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    full_session(&good);
    for name in LOADED_FILES {
        let dir = tmp.path().join(format!("bad-{name}"));
        full_session(&dir);
        fs::remove_file(dir.join(name)).unwrap();
        plant(&dir.join(name));
        let out = tmp.path().join(format!("out-{name}"));
        for (what, command) in [
            ("show", show(&dir)),
            ("compare", compare(&good, &dir, &out, &[])),
            ("export", export(&dir, &out, "speedscope")),
        ] {
            let r = run(command, Duration::from_secs(60));
            // compare's errors exit 2 (1 says a figure regressed).
            let code = if what == "compare" { 2 } else { 1 };
            assert_eq!(
                r.code,
                Some(code),
                "{what} {name}: {}{}",
                r.stdout,
                r.stderr
            );
            assert!(
                r.stderr.contains(name) && r.stderr.contains(expected),
                "{what} {name}: {}",
                r.stderr
            );
        }
    }
}

#[test]
fn a_fifo_in_place_of_any_session_file_is_refused_promptly_by_show_compare_and_export() {
    each_file_replaced(
        |path| {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: c is a NUL-terminated path that lives across the call.
            let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
            assert_eq!(r, 0, "mkfifo: {}", std::io::Error::last_os_error());
        },
        "a FIFO",
    );
}

#[test]
fn a_link_to_dev_zero_in_place_of_any_session_file_is_refused_unread() {
    each_file_replaced(
        |path| symlink("/dev/zero", path).unwrap(),
        "a symbolic link",
    );
}

/// Text that would move the cursor, retitle the terminal, clear the screen and forge lines
/// and table rows if printed raw.
const HOSTILE: &str = "x\x1b]0;owned\x07\x1b[2J\r\n| forged | row |\u{9b}31m";

/// A session whose every recorded string carries [`HOSTILE`].
fn hostile_session(dir: &Path, rate: f64) {
    let params = BTreeMap::from([(format!("p{HOSTILE}"), serde_json::Value::from(HOSTILE))]);
    let mut host = HostInfo::default();
    host.hostname = HOSTILE.into();
    host.kernel = HOSTILE.into();
    let mut meta = SessionMeta::new(
        format!("id{HOSTILE}"),
        WorkloadInfo::new(HOSTILE, params),
        host,
        "2026-11-23T12:00:00Z",
    );
    meta.name = format!("name{HOSTILE}");
    meta.command_line = vec!["benchtop".into(), HOSTILE.into()];
    meta.benchtop_version = HOSTILE.into();
    meta.summary = vec![Figure::new(format!("fig{HOSTILE}"), rate, HOSTILE)];
    meta.warnings = vec![format!("warn{HOSTILE}")];
    meta.worker.exit = Some(HOSTILE.into());
    meta.sampling.reason = Some(HOSTILE.into());
    let mut w = SessionWriter::create(dir, meta).unwrap();
    for i in 0..10u32 {
        let mut row = TimeseriesRow::default();
        row.t_s = f64::from(i + 1);
        row.interval_s = 1.0;
        row.rates.insert(format!("rate{HOSTILE}"), rate);
        w.append_row(&row).unwrap();
        let mut h = Histogram::<u64>::new(3).unwrap();
        h.record_n(1_000_000, 10).unwrap();
        // The writer turns a tag's line breaks into `_`; the rest stays.
        w.append_latency(&format!("tag{HOSTILE}"), f64::from(i), 1.0, &h)
            .unwrap();
    }
    let mut cpu = StackTree::new();
    cpu.add_names(["bt", &format!("frame{HOSTILE}")], 10);
    w.write_stacks(Kind::Cpu, &cpu, "t").unwrap();
    w.finish(Status::Complete, "2026-11-23T12:00:10Z".into())
        .unwrap();
    fs::write(
        dir.join("threads.csv"),
        format!(
            "pid,tid,process,thread,user_s,system_s,voluntary_ctxt_switches,\
             involuntary_ctxt_switches,first_seen_s,last_seen_s\n1,1,\"{HOSTILE}\",\"{HOSTILE}\",\
             1.0,0.0,1,1,0.0,1.0\n"
        ),
    )
    .unwrap();
}

/// No control character but the line breaks of the output itself (for JSON, whose strings
/// serde escapes, no C0 control: JSON leaves C1 characters as they are).
fn assert_no_raw_controls(what: &str, text: &str) {
    let json = what.contains("json");
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| c != '\n' && (c.is_control() || c == '\u{202e}'))
        .filter(|&c| !json || c.is_ascii_control())
        .collect();
    assert!(bad.is_empty(), "{what}: raw {bad:?} in:\n{text}");
    assert!(
        !text.contains("\n| forged"),
        "{what}: a forged line:\n{text}"
    );
}

#[test]
fn escape_sequences_in_a_sessions_strings_reach_no_terminal_raw() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    hostile_session(&a, 100.0);
    hostile_session(&b, 50.0);

    let r = run(show(&a), Duration::from_secs(60));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_no_raw_controls("show", &r.stdout);
    assert!(r.stdout.contains("\\x1b]0;owned\\x07"), "{}", r.stdout);

    let out = tmp.path().join("cmp");
    for extra in [&[][..], &["--markdown"], &["--json"]] {
        let r = run(compare(&a, &b, &out, extra), Duration::from_secs(60));
        assert_eq!(r.code, Some(0), "{extra:?}: {}", r.stderr);
        assert_no_raw_controls(&format!("compare {extra:?}"), &r.stdout);
        assert_no_raw_controls(&format!("compare {extra:?} stderr"), &r.stderr);
        if extra == ["--json"] {
            serde_json::from_str::<serde_json::Value>(&r.stdout).unwrap();
        }
        if extra == ["--markdown"] {
            assert_table_rows_keep_their_columns(&r.stdout);
        }
    }

    let out = tmp.path().join("exp");
    let r = run(
        export(&a, &out, "summary-md,speedscope"),
        Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_no_raw_controls("export", &r.stdout);
    let md = fs::read_to_string(out.join("summary.md")).unwrap();
    assert_no_raw_controls("summary.md", &md);
    assert_table_rows_keep_their_columns(&md);
    let json = fs::read_to_string(out.join("cpu.speedscope.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    // Frame names keep their characters, but for what the folded format cannot hold.
    let frame = format!("frame{HOSTILE}")
        .replace(';', ":")
        .replace(['\r', '\n'], " ");
    assert_eq!(v["shared"]["frames"][1]["name"], frame);
}

/// Every Markdown table row has as many unescaped `|` as the table's header.
fn assert_table_rows_keep_their_columns(md: &str) {
    let pipes = |l: &str| l.replace("\\|", "").matches('|').count();
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    assert!(!rows.is_empty(), "no table:\n{md}");
    let header = pipes(rows[0]);
    for row in rows {
        assert_eq!(pipes(row), header, "a row with other columns: {row}\n{md}");
    }
}

#[test]
fn links_planted_in_an_out_directory_are_replaced_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    fs::write(&victim, b"precious\n").unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    session(&a, "tell", 1e6, "hot", 10);
    session(&b, "tell", 2e6, "hot", 20);

    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    for name in [
        "summary.md",
        "summary.md.tmp",
        "cpu.speedscope.json",
        "diff-cpu.folded",
        "diff-cpu.folded.tmp",
        "latency.svg",
    ] {
        symlink(&victim, out.join(name)).unwrap();
    }
    let r = run(
        export(&a, &out, "summary-md,speedscope"),
        Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let r = run(compare(&a, &b, &out, &[]), Duration::from_secs(60));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(fs::read(&victim).unwrap(), b"precious\n");
    for name in [
        "summary.md",
        "cpu.speedscope.json",
        "diff-cpu.folded",
        "latency.svg",
    ] {
        let meta = fs::symlink_metadata(out.join(name)).unwrap();
        assert!(meta.is_file() && meta.len() > 0, "{name}");
    }

    // An --out that is itself a link is refused, naming it.
    let real = tmp.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    symlink(&real, &link).unwrap();
    for (command, code) in [
        (export(&a, &link, "summary-md"), 1),
        (compare(&a, &b, &link, &[]), 2),
    ] {
        let r = run(command, Duration::from_secs(60));
        assert_eq!(r.code, Some(code), "{}", r.stdout);
        assert!(
            r.stderr.contains("link") && r.stderr.contains("symbolic link"),
            "{}",
            r.stderr
        );
    }
    assert_eq!(fs::read_dir(&real).unwrap().count(), 0);
}

/// A tmpfs of `size` mounted on a new directory, unmounted when dropped.
pub(crate) struct Tmpfs {
    _root: tempfile::TempDir,
    pub(crate) mount: PathBuf,
}

impl Tmpfs {
    pub(crate) fn new(size: &str) -> Tmpfs {
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

/// A session with `n` distinct on-CPU stacks of long frame names (a few MB of output).
fn wide_session(dir: &Path, n: usize) {
    session(dir, "tell", 1e6, "hot", 10);
    let mut folded = String::new();
    for i in 0..n {
        let _ = writeln!(
            folded,
            "bt-ring;main;some::rather::long::module::path::function_number_{i};leaf_{i} 1"
        );
    }
    fs::write(dir.join("cpu.folded"), folded).unwrap();
}

/// Names in `dir` that are temporary or empty files.
fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.contains(".tmp") || e.metadata().unwrap().len() == 0
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_full_disk_leaves_no_empty_or_temporary_file_from_export_or_compare() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    wide_session(&a, 40_000);
    wide_session(&b, 40_000);
    let disk = Tmpfs::new("2m");

    let out = disk.mount.join("export");
    let r = run(export(&a, &out, "speedscope"), Duration::from_secs(120));
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("No space left on device")
            && r.stderr
                .contains(&out.join("cpu.speedscope.json").display().to_string()),
        "{}",
        r.stderr
    );
    assert_eq!(leftovers(&out), Vec::<String>::new());

    let out = disk.mount.join("compare");
    let r = run(compare(&a, &b, &out, &[]), Duration::from_secs(120));
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("No space left on device") && r.stderr.contains("diff-cpu"),
        "{}",
        r.stderr
    );
    assert_eq!(leftovers(&out), Vec::<String>::new());
}

/// A session.json with `params` workload parameters of about 100 bytes each.
fn session_with_params(dir: &Path, params: usize) {
    session(dir, "tell", 1e6, "hot", 10);
    let text = fs::read_to_string(dir.join("session.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let map = json["workload"]["params"].as_object_mut().unwrap();
    for i in 0..params {
        map.insert(
            format!("parameter_{i:07}_{}", "k".repeat(40)),
            serde_json::Value::from("v".repeat(40)),
        );
    }
    fs::write(dir.join("session.json"), serde_json::to_vec(&json).unwrap()).unwrap();
}

pub(crate) fn assert_bounded(what: &str, r: &Run) {
    eprintln!(
        "{what}: peak RSS {:.1} MiB in {:.2} s",
        r.max_rss as f64 / f64::from(1 << 20),
        r.took.as_secs_f64()
    );
    assert!(
        r.max_rss < RSS_LIMIT_BYTES,
        "{what}: peak RSS {} MiB",
        r.max_rss >> 20
    );
}

#[test]
fn a_100_mb_session_json_is_refused_within_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    session_with_params(&dir, 900_000);
    assert!(fs::metadata(dir.join("session.json")).unwrap().len() > 80 << 20);
    let out = tmp.path().join("out");
    for (what, command) in [
        ("show", show(&dir)),
        ("export pprof", export(&dir, &out, "pprof")),
    ] {
        let r = run(command, Duration::from_secs(120));
        assert_eq!(r.code, Some(1), "{what}: {}", r.stdout);
        assert!(
            r.stderr.contains("session.json") && r.stderr.contains("BENCHTOP_MAX_FILE_BYTES"),
            "{what}: {}",
            r.stderr
        );
        assert_bounded(what, &r);
    }
}

#[test]
fn parameters_past_the_limit_cost_bounded_memory_in_a_pprof_export() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    // Just under the 16 MiB limit of session.json: 120,000 parameters, 10,000 kept.
    session_with_params(&dir, 120_000);
    let out = tmp.path().join("out");
    let r = run(export(&dir, &out, "pprof"), Duration::from_secs(300));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(fs::metadata(out.join("profile.pb.gz")).unwrap().len() > 0);
    assert_bounded("export pprof, 120,000 parameters", &r);
    let r = run(show(&dir), Duration::from_secs(120));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.contains("only the first 10000 (by name) are kept"),
        "{}",
        r.stdout
    );
    assert_bounded("show, 120,000 parameters", &r);
}

#[test]
fn a_10_mb_folded_file_of_500_000_stacks_exports_within_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    session(&dir, "tell", 1e6, "hot", 10);
    let mut folded = String::new();
    // 500,000 distinct stacks of 1,500 functions: within the folded budgets (a leaf
    // function of its own per stack would pass the 200,000 distinct frames).
    for i in 0..500_000 {
        let _ = writeln!(folded, "bt;main;f{};g{} 1", i % 1000, i / 1000);
    }
    assert!(folded.len() > 9 << 20);
    fs::write(dir.join("cpu.folded"), folded).unwrap();
    let out = tmp.path().join("out");
    for (what, format) in [("speedscope", "speedscope"), ("pprof", "pprof")] {
        let r = run(export(&dir, &out, format), Duration::from_secs(300));
        assert_eq!(r.code, Some(0), "{what}: {}", r.stderr);
        assert_bounded(&format!("export {what}, 500,000 stacks"), &r);
    }
    let v: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("cpu.speedscope.json")).unwrap()).unwrap();
    assert_eq!(
        v["profiles"][0]["samples"].as_array().unwrap().len(),
        500_000
    );
    let r = run(show(&dir), Duration::from_secs(120));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_bounded("show, 500,000 stacks", &r);
}

#[test]
fn ten_thousand_hlog_tags_cost_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    session(&dir, "tell", 1e6, "hot", 10);
    // 10,000 tags, one interval each, each histogram holding one value of one second.
    let mut h = Histogram::<u64>::new(3).unwrap();
    h.record(1_000_000_000).unwrap();
    let path = dir.join("many-tags.hlog");
    let mut w = benchtop_sessions::HlogWriter::create(
        &path,
        std::time::UNIX_EPOCH + Duration::from_secs(1_795_000_000),
    )
    .unwrap();
    for i in 0..10_000 {
        w.append(&format!("tag{i}"), 0.0, 1.0, &h).unwrap();
    }
    drop(w);
    fs::rename(&path, dir.join("latency.hlog")).unwrap();
    let r = run(show(&dir), Duration::from_secs(300));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("more than 1000 tags"), "{}", r.stdout);
    assert_bounded("show, 10,000 hlog tags", &r);
}

#[test]
fn show_of_a_100_mb_timeseries_holds_no_row_past_its_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    session(&dir, "tell", 1e6, "hot", 10);
    // What a worker flooding ticks left: 138,000 rows of 20 counters and rates (100 MB).
    let names: Vec<String> = (0..20).map(|j| format!("counter_{j}")).collect();
    let mut text = String::with_capacity(110 << 20);
    for i in 0..138_000u64 {
        let _ = write!(
            text,
            "{{\"t_s\":{},\"interval_s\":0.1,\"counters\":{{",
            i as f64 * 0.1
        );
        for (j, n) in names.iter().enumerate() {
            let _ = write!(text, "{}\"{n}\":{i}", if j > 0 { "," } else { "" });
        }
        text.push_str("},\"rates\":{");
        for (j, n) in names.iter().enumerate() {
            let _ = write!(text, "{}\"{n}\":1.5", if j > 0 { "," } else { "" });
        }
        let _ = writeln!(
            text,
            "}},\"cpu_percent_per_core\":[12.5,12.5,12.5,12.5],\"resources\":{{\"rss_bytes\":{},\
             \"peak_rss_bytes\":1,\"threads\":3,\"cpu_percent\":1.0,\"cpu_time_s\":{i}}}}}",
            i * 4096
        );
    }
    assert!(text.len() > 90 << 20, "{} bytes", text.len());
    fs::write(dir.join("timeseries.jsonl"), &text).unwrap();
    drop(text);
    let r = run(show(&dir), Duration::from_secs(300));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // The summary still sees every row: the peak RSS of the last one, its CPU time.
    assert!(r.stdout.contains("peak RSS     539 MiB"), "{}", r.stdout);
    assert!(
        r.stdout.contains("CPU time     137999.00 s"),
        "{}",
        r.stdout
    );
    assert_bounded("show, 138,000 timeseries rows (100 MB)", &r);
}

#[test]
fn show_of_fifty_thousand_one_second_intervals_merges_them_as_it_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    session(&dir, "tell", 1e6, "hot", 10);
    // Each interval holds one value of one second: about 170 KiB decoded, 8 GiB for all
    // of them if they were held.
    let mut h = Histogram::<u64>::new(3).unwrap();
    h.record(1_000_000_000).unwrap();
    let path = dir.join("long.hlog");
    let mut w = benchtop_sessions::HlogWriter::create(
        &path,
        std::time::UNIX_EPOCH + Duration::from_secs(1_795_000_000),
    )
    .unwrap();
    for i in 0..50_000 {
        w.append("rtt", f64::from(i), 1.0, &h).unwrap();
    }
    drop(w);
    fs::rename(&path, dir.join("latency.hlog")).unwrap();
    let r = run(show(&dir), Duration::from_secs(600));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("rtt"))
        .unwrap_or_default();
    assert!(line.contains("50000"), "{}", r.stdout);
    assert_bounded("show, 50,000 one-second intervals", &r);
}

/// A directory name that would clear the screen if printed raw.
const ESCAPE_DIR: &str = "e\x1b[2Jdir";

#[test]
fn a_session_directorys_escape_sequence_is_shown_escaped_in_every_error() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    full_session(&good);
    // A session whose cpu.folded is a FIFO, and a directory with no session.json.
    let fifo = tmp.path().join(ESCAPE_DIR);
    full_session(&fifo);
    fs::remove_file(fifo.join("cpu.folded")).unwrap();
    let c = std::ffi::CString::new(fifo.join("cpu.folded").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let empty = tmp.path().join(format!("{ESCAPE_DIR}-empty"));
    fs::create_dir(&empty).unwrap();
    let out = tmp.path().join("out");
    for dir in [&fifo, &empty] {
        let mut open = benchtop();
        open.arg("open").arg(&good).arg(dir);
        for (what, command) in [
            ("show", show(dir)),
            ("compare", compare(&good, dir, &out, &[])),
            ("export", export(dir, &out, "speedscope")),
            ("open", open),
        ] {
            let r = run(command, Duration::from_secs(60));
            // compare's errors exit 2 (1 says a judged figure regressed).
            let code = if what == "compare" { 2 } else { 1 };
            assert_eq!(r.code, Some(code), "{what}: {}{}", r.stdout, r.stderr);
            assert!(
                !r.stderr.contains('\x1b'),
                "{what}: a raw escape in {:?}",
                r.stderr
            );
            // Both the context and the cause name the directory, each escaped.
            assert!(
                r.stderr.matches("e\\x1b[2Jdir").count() >= 2,
                "{what}: {}",
                r.stderr
            );
            let why = if dir == &empty {
                "no session.json"
            } else {
                "a FIFO"
            };
            assert!(r.stderr.contains(why), "{what}: {}", r.stderr);
        }
    }
}
