//! `--profile mem` and `--profile all` end to end: a C program that touches 300 MB from
//! `big_a` and 100 MB from `big_b` through memset, recorded with `benchtop run`, as root
//! and as an unprivileged user.

use benchtop_sessions::Kind;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use benchtop_sessions::Status;
use benchtop_sessions::intervals::IntervalStacks;
use benchtop_sessions::limits::LoadOptions;
use benchtop_sessions::store::Session;

use crate::support::{benchtop, succeeded};

const TOUCH_C: &str = r#"
#include <stdlib.h>
#include <string.h>
#define MB (1024UL * 1024UL)
__attribute__((noinline)) char *big_a(void) { char *p = malloc(300 * MB); memset(p, 1, 300 * MB); return p; }
__attribute__((noinline)) char *big_b(void) { char *p = malloc(100 * MB); memset(p, 2, 100 * MB); return p; }
int main(void) { char *a = big_a(); char *b = big_b(); return a[12345] + b[6789] == 3 ? 0 : 1; }
"#;

const TOUCHED: f64 = 400.0 * 1024.0 * 1024.0;

/// Builds the fixture with frame pointers into `dir` (readable by everyone).
fn build(dir: &Path) -> PathBuf {
    let src = dir.join("touch.c");
    std::fs::write(&src, TOUCH_C).unwrap();
    let out = dir.join("touch");
    let status = Command::new("cc")
        .args([
            "-O2",
            "-g",
            "-fno-omit-frame-pointer",
            "-fno-optimize-sibling-calls",
        ])
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .expect("this test builds a C fixture with `cc`: install gcc");
    assert!(status.success());
    out
}

/// Share of mem.folded's bytes under a frame named `frame`.
fn share(folded: &str, frame: &str) -> f64 {
    let mut total = 0u64;
    let mut hits = 0u64;
    for line in folded.lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let n: u64 = n.parse().unwrap_or(0);
        total += n;
        if stack.split(';').any(|f| f == frame) {
            hits += n;
        }
    }
    hits as f64 / total.max(1) as f64
}

fn assert_split(session: &Session, what: &str) {
    let mem = session.profile(Kind::Mem).expect("mem.folded");
    let folded = mem.to_folded();
    let total = mem.total_weight() as f64;
    let (a, b) = (share(&folded, "big_a"), share(&folded, "big_b"));
    let report = format!(
        "{what}: big_a {:.1} %, big_b {:.1} %, {:.1} MiB:\n{folded}\nwarnings: {:?}",
        a * 100.0,
        b * 100.0,
        total / 1048576.0,
        session.meta.warnings
    );
    assert!((a - 0.75).abs() <= 0.02, "{report}");
    assert!((b - 0.25).abs() <= 0.02, "{report}");
    assert!((total / TOUCHED - 1.0).abs() <= 0.05, "{report}");
}

#[test]
fn profile_all_records_where_memory_grew_beside_the_cpu_stacks_and_per_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = build(tmp.path());
    let dir = tmp.path().join("all");
    succeeded(
        benchtop()
            .args([
                "run",
                "--quiet",
                "--profile",
                "all",
                "--interval",
                "100ms",
                "--record",
            ])
            .arg(&dir)
            .arg("--")
            .arg(&prog),
    );
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    assert_eq!(session.meta.sampling.profile, "all");
    assert!(dir.join("mem.svg").exists() && dir.join("cpu.folded").exists());
    assert_split(&session, "run --profile all");
    // The per-interval weights add up to the whole-run file.
    let stacks = IntervalStacks::load(&dir, &LoadOptions::default())
        .unwrap()
        .expect("stacks.jsonl");
    let per_interval = stacks.tree_in(Kind::Mem, 0, u64::MAX).total_weight();
    let whole = session.profile(Kind::Mem).unwrap().total_weight();
    assert_eq!(per_interval, whole);
    let show = benchtop().arg("show").arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("memory: resident growth") && text.contains("big_a"),
        "{text}"
    );
}

#[test]
fn profile_mem_as_an_unprivileged_user_keeps_the_split_and_says_what_it_misses() {
    // SAFETY: geteuid(2) cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && std::env::var_os("BENCHTOP_TESTS_WITHOUT_ROOT").is_some() {
        return;
    }
    assert!(
        root,
        "this test needs root (to run benchtop as nobody); BENCHTOP_TESTS_WITHOUT_ROOT=1 opts out"
    );
    let tmp = tempfile::tempdir().unwrap();
    let prog = build(tmp.path());
    // nobody creates the session inside.
    let mut perms = std::fs::metadata(tmp.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o777);
    std::fs::set_permissions(tmp.path(), perms).unwrap();
    let dir = tmp.path().join("nobody");
    succeeded(
        benchtop()
            .args(["run", "--quiet", "--profile", "mem", "--record"])
            .arg(&dir)
            .arg("--")
            .arg(&prog)
            .env("HOME", tmp.path())
            .uid(65534)
            .gid(65534),
    );
    let session = Session::load(&dir).unwrap();
    assert_split(&session, "run --profile mem as nobody");
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if paranoid >= 2 {
        let mem = session.meta.sampling.mem.as_ref().expect("sampling.mem");
        assert!(!mem.kernel_faults);
        assert!(
            session
                .meta
                .warnings
                .iter()
                .any(|w| w.contains("page faults inside system calls not sampled")),
            "{:?}",
            session.meta.warnings
        );
    }
}

/// A finished session of 20 intervals whose worker holds `live` bytes (±1 %), with a
/// memory profile where `big_b` holds `b_share` % of the bytes.
fn memory_session(dir: &Path, live: f64, b_share: u64) {
    use benchtop_sessions::meta::{HostInfo, WorkloadInfo};
    use benchtop_sessions::{Kind, SessionMeta, SessionWriter, StackTree, TimeseriesRow};
    let meta = SessionMeta::new(
        "s",
        WorkloadInfo::new("touch", Default::default()),
        HostInfo::default(),
        "2026-11-23T12:00:00Z",
    );
    let mut w = SessionWriter::create(dir, meta).unwrap();
    for i in 0..20u32 {
        let mut row = TimeseriesRow::default();
        row.t_s = f64::from(i + 1) * 0.2;
        row.interval_s = 0.2;
        let wobble = 1.0 + (f64::from(i % 5) - 2.0) * 0.005;
        row.counters
            .insert("live_bytes".into(), (live * wobble) as u64);
        w.append_row(&row).unwrap();
    }
    for kind in [Kind::Mem, Kind::Live] {
        let mut t = StackTree::new();
        t.add_names(["touch", "main", "big_a", "memset"], (100 - b_share) << 20);
        t.add_names(["touch", "main", "big_b", "memset"], b_share << 20);
        w.write_stacks(kind, &t, "memory").unwrap();
    }
    w.finish(Status::Complete, "2026-11-23T12:00:05Z".into())
        .unwrap();
}

#[test]
fn compare_judges_live_bytes_and_writes_the_memory_diff_flamegraphs() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, out) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("diff"),
    );
    memory_session(&a, 64e6, 25);
    memory_session(&b, 96e6, 60);
    let table = benchtop()
        .arg("compare")
        .args([&a, &b])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    let live = text
        .lines()
        .find(|l| l.starts_with("live bytes "))
        .unwrap_or_else(|| panic!("no live bytes row:\n{text}"));
    // One session a side: no verdict, the runs a side one would take.
    assert!(live.contains("undecided — needs ≥"), "{text}");
    for file in [
        "diff-mem.folded",
        "diff-mem.svg",
        "diff-mem-negated.svg",
        "diff-live.folded",
        "diff-live.svg",
    ] {
        assert!(out.join(file).exists(), "{file} missing:\n{text}");
    }
    let movers = text.split("moved most (mem").nth(1).unwrap_or_default();
    let first = movers.lines().nth(2).unwrap_or_default();
    assert!(first.contains("big_b") || first.contains("big_a"), "{text}");
    let show = benchtop().arg("show").arg(&b).output().unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    let live_top = shown
        .split("memory: live at peak")
        .nth(1)
        .unwrap_or_else(|| panic!("{shown}"));
    let top = live_top.lines().nth(1).unwrap_or_default();
    assert!(top.contains("60.0%") && top.contains("big_b"), "{shown}");
}
