//! Stacks of code built without frame pointers, unwound from stack copies (DWARF CFI
//! with framehop): fixtures built here with the system C compiler and rustc, with a
//! known call tree and known shares of time.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use benchtop_profilers::{Profile, ProfileKind, Sampler, SamplerOptions, UnwindMode};

use crate::fixture::expect_sampler;

/// main → mid_x → leaf_a (5 units) / leaf_b (3 units) → spin; main → mid_y → leaf_c
/// (2 units) → spin: 50/30/20 % of the time. Every function is a real call
/// (`-fno-inline -fno-optimize-sibling-calls`), none keeps a frame pointer.
const SPLIT_C: &str = r#"
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) void spin(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i ^ (sink >> 3);
}
#define UNIT 230000UL
__attribute__((noinline)) void leaf_a(void) { spin(5 * UNIT); }
__attribute__((noinline)) void leaf_b(void) { spin(3 * UNIT); }
__attribute__((noinline)) void leaf_c(void) { spin(2 * UNIT); }
__attribute__((noinline)) void mid_x(void) { leaf_a(); leaf_b(); }
__attribute__((noinline)) void mid_y(void) { leaf_c(); }
/* Runs for argv[1] seconds of its own CPU time, so that a busy machine delays it but
   does not thin its samples. */
int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    struct timespec t;
    do {
        mid_x();
        mid_y();
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while (t.tv_sec + t.tv_nsec / 1e9 < seconds);
    return 0;
}
"#;

/// The leaf paths of [`SPLIT_C`] and their shares of the time.
const SPLIT: [(&str, f64); 3] = [
    ("main;mid_x;leaf_a;spin", 0.5),
    ("main;mid_x;leaf_b;spin", 0.3),
    ("main;mid_y;leaf_c;spin", 0.2),
];

/// Compiles C `source` with the system compiler into `dir/name` with `flags`.
fn build_c(dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).expect("write the fixture's source");
    let out = dir.join(name);
    let status = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| {
            panic!("this test builds a C fixture with the system compiler `cc`: {e}; install gcc")
        });
    assert!(status.success(), "cc {flags:?} {} failed", src.display());
    out
}

/// Flags of a C build without frame pointers.
const NO_FP: &[&str] = &[
    "-O2",
    "-g",
    "-fomit-frame-pointer",
    "-fno-optimize-sibling-calls",
    "-fno-inline",
];

/// A program started held at a `read`, so that a sampler can be opened to begin at its
/// exec (as `benchtop run -- cmd` does).
struct Held {
    child: Child,
}

impl Held {
    fn spawn(program: &Path, args: &[&str]) -> Held {
        let child = Command::new("sh")
            .arg("-c")
            .arg("read go; exec \"$0\" \"$@\"")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn sh");
        Held { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets it exec the program and waits for it to end.
    fn run(mut self) {
        let mut stdin = self.child.stdin.take().expect("stdin");
        stdin.write_all(b"go\n").expect("release the child");
        drop(stdin);
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "{status}");
    }
}

/// One CPU-bound fixture at a time: they would otherwise take both CPUs of a small
/// machine from the other tests running beside them.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records `program args` from its exec to its end with `unwind`.
fn record(program: &Path, args: &[&str], unwind: UnwindMode) -> Profile {
    let held = Held::spawn(program, args);
    let mut opts = SamplerOptions::default();
    opts.kind = ProfileKind::Cpu;
    opts.unwind = unwind;
    let sampler = expect_sampler(
        Sampler::start_on_exec(held.pid(), &opts),
        "Sampler::start_on_exec",
    );
    held.run();
    sampler.finish().expect("finish")
}

/// Folded lines with the process name and kernel frames left out, merged.
fn user_stacks(folded: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in folded.lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let n: u64 = n.parse().unwrap_or(0);
        let frames: Vec<&str> = stack
            .split(';')
            .skip(1)
            .filter(|f| !f.ends_with("_[k]"))
            .collect();
        *out.entry(frames.join(";")).or_default() += n;
    }
    out
}

/// Share of the weight whose stack holds `path` (`;`-joined frames, contiguous).
fn share_of(stacks: &BTreeMap<String, u64>, path: &str) -> f64 {
    let total: u64 = stacks.values().sum();
    let hits: u64 = stacks
        .iter()
        .filter(|(s, _)| format!(";{s};").contains(&format!(";{path};")))
        .map(|(_, n)| n)
        .sum();
    hits as f64 / total.max(1) as f64
}

/// Share of the weight whose stack reaches `root` (a frame named exactly so).
fn reaching(stacks: &BTreeMap<String, u64>, root: &str) -> f64 {
    let total: u64 = stacks.values().sum();
    let hits: u64 = stacks
        .iter()
        .filter(|(s, _)| s.split(';').any(|f| f == root))
        .map(|(_, n)| n)
        .sum();
    hits as f64 / total.max(1) as f64
}

/// Every share of `split` within `points` percentage points in `stacks`.
fn assert_split(stacks: &BTreeMap<String, u64>, split: &[(&str, f64)], points: f64, what: &str) {
    for &(path, want) in split {
        let got = share_of(stacks, path);
        assert!(
            (got - want).abs() * 100.0 <= points,
            "{what}: {path} has {:.1} % of the samples, expected {:.1} % ± {points}:\n{stacks:#?}",
            got * 100.0,
            want * 100.0
        );
    }
}

#[test]
fn dwarf_unwinding_gives_full_stacks_of_a_c_program_without_frame_pointers() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "split", SPLIT_C, NO_FP);
    let profile = record(&prog, &["3"], UnwindMode::Dwarf);
    let stacks = user_stacks(&profile.cpu.to_folded());
    assert!(profile.samples > 1000, "{} samples", profile.samples);
    let main = reaching(&stacks, "main");
    assert!(
        main >= 0.99,
        "{:.2} % reach main:\n{stacks:#?}",
        main * 100.0
    );
    assert_split(&stacks, &SPLIT, 2.0, "benchtop --unwind dwarf");
    let u = &profile.unwinding;
    assert!(u.unwound >= profile.samples * 9 / 10, "{u:?}");
    assert!(u.truncated() * 100 <= u.unwound, "{u:?}");
    assert_eq!(
        u.modules.get("split").map(|m| m.name()),
        Some("dwarf"),
        "{u:?}"
    );
    let info = profile.sampling_info();
    assert_eq!(info.unwind, "dwarf");
    let recorded = info.unwinding.expect("unwinding counts in session.json");
    assert_eq!(recorded.stack_size, 8192);
    assert_eq!(
        recorded.modules.get("split").map(String::as_str),
        Some("dwarf")
    );
}

#[test]
fn frame_pointers_alone_lose_the_callers_of_the_same_program() {
    // The contrast that makes the test above mean something: the kernel's frame-pointer
    // walk of this build does not reach main.
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "split", SPLIT_C, NO_FP);
    let profile = record(&prog, &["1"], UnwindMode::FramePointers);
    let stacks = user_stacks(&profile.cpu.to_folded());
    let main = share_of(&stacks, "main;mid_x");
    assert!(
        main < 0.5,
        "{:.2} % reach main by frame pointers:\n{stacks:#?}",
        main * 100.0
    );
    assert_eq!(profile.sampling_info().unwind, "frame-pointers");
    assert!(profile.sampling_info().unwinding.is_none());
}

#[test]
fn a_stack_copy_too_small_ends_in_a_visible_truncated_frame() {
    // 64 bytes hold spin's frame and little more: most stacks cannot reach main.
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "split", SPLIT_C, NO_FP);
    let held = Held::spawn(&prog, &["1"]);
    let mut opts = SamplerOptions::default();
    opts.kind = ProfileKind::Cpu;
    opts.unwind = UnwindMode::Dwarf;
    opts.stack_size = 64;
    let sampler = expect_sampler(Sampler::start_on_exec(held.pid(), &opts), "start");
    held.run();
    let profile = sampler.finish().expect("finish");
    let stacks = user_stacks(&profile.cpu.to_folded());
    let truncated = reaching(&stacks, "[truncated: stack copy too small]");
    assert!(truncated > 0.5, "{:.2} %:\n{stacks:#?}", truncated * 100.0);
    let u = &profile.unwinding;
    assert!(u.truncated_stack_copy > u.unwound / 2, "{u:?}");
    // The frame is the outermost one: what was unwound is below it.
    for s in stacks.keys().filter(|s| s.contains("[truncated")) {
        assert!(s.starts_with("[truncated: stack copy too small]"), "{s}");
    }
}

/// `perf record --call-graph dwarf` on `program args`, folded from `perf script`.
fn perf_dwarf(dir: &Path, program: &Path, args: &[&str]) -> BTreeMap<String, u64> {
    let data = dir.join("perf.data");
    let status = Command::new("perf")
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "-F",
            "999",
            "--call-graph",
            "dwarf,8192",
            "-o",
        ])
        .arg(&data)
        .arg("--")
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("this test compares with `perf` (linux-perf): {e}; install it"));
    assert!(status.success(), "perf record: {status}");
    let out = Command::new("perf")
        .args(["script", "-F", "ip,sym", "-i"])
        .arg(&data)
        .output()
        .expect("perf script");
    assert!(
        out.status.success(),
        "perf script: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    fold_perf_script(&String::from_utf8_lossy(&out.stdout))
}

/// Folds `perf script -F ip,sym` output (frames leaf first, one sample per paragraph)
/// into root-first stacks.
fn fold_perf_script(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut frames: Vec<&str> = Vec::new();
    let mut flush = |frames: &mut Vec<&str>| {
        if !frames.is_empty() {
            frames.reverse();
            *out.entry(frames.join(";")).or_default() += 1;
            frames.clear();
        }
    };
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            flush(&mut frames);
            continue;
        }
        let sym = line.split_once(' ').map_or("[unknown]", |(_, s)| s.trim());
        frames.push(sym);
    }
    flush(&mut frames);
    out
}

#[test]
fn benchtop_and_perf_record_call_graph_dwarf_agree_on_the_same_program() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "split", SPLIT_C, NO_FP);
    let perf = perf_dwarf(dir.path(), &prog, &["3"]);
    let ours = user_stacks(&record(&prog, &["3"], UnwindMode::Dwarf).cpu.to_folded());
    assert!(perf.values().sum::<u64>() > 1000, "{perf:#?}");
    for (path, _) in SPLIT {
        let (a, b) = (share_of(&ours, path), share_of(&perf, path));
        assert!(
            (a - b).abs() * 100.0 <= 2.0,
            "{path}: benchtop {:.1} %, perf {:.1} %\nbenchtop: {ours:#?}\nperf: {perf:#?}",
            a * 100.0,
            b * 100.0
        );
    }
}
