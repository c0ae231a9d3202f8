//! Stacks of code built without frame pointers, unwound from stack copies (DWARF CFI
//! with framehop): fixtures built here with the system C compiler and rustc, with a
//! known call tree and known shares of time.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use benchtop_profile::kinds::{Kind, KindSet};
use benchtop_profilers::{Profile, Sampler, SamplerOptions, UnwindMode};

use crate::fixture::expect_sampler;

/// main → mid_x → leaf_a (5 units) / leaf_b (3 units) → spin; main → mid_y → leaf_c
/// (2 units) → spin: 50/30/20 % of the time. Every function is a real call
/// (`-fno-inline -fno-optimize-sibling-calls`), none keeps a frame pointer. Each round's
/// unit is drawn between half and one and a half `UNIT`: rounds of one fixed length let
/// the sampling clock fall in step with them, and the samples then split as the clock's
/// phase does, not as the work (see `crate::rounds`).
const SPLIT_C: &str = r#"
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) void spin(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i ^ (sink >> 3);
}
#define UNIT 230000UL
__attribute__((noinline)) void leaf_a(unsigned long u) { spin(5 * u); }
__attribute__((noinline)) void leaf_b(unsigned long u) { spin(3 * u); }
__attribute__((noinline)) void leaf_c(unsigned long u) { spin(2 * u); }
__attribute__((noinline)) void mid_x(unsigned long u) { leaf_a(u); leaf_b(u); }
__attribute__((noinline)) void mid_y(unsigned long u) { leaf_c(u); }
/* A round's unit, UNIT/2 to 3*UNIT/2 (xorshift64). */
static unsigned long next_unit(void) {
    static unsigned long x = 88172645463325252UL;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return UNIT / 2 + x % UNIT;
}
/* Runs for argv[1] seconds of its own CPU time, so that a busy machine delays it but
   does not thin its samples. */
int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    struct timespec t;
    do {
        unsigned long u = next_unit();
        mid_x(u);
        mid_y(u);
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
pub(crate) fn build_c(dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).expect("write the fixture's source");
    let out = dir.join(name);
    let status = niced("cc")
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
pub(crate) const NO_FP: &[&str] = &[
    "-O2",
    "-g",
    "-fomit-frame-pointer",
    "-fno-optimize-sibling-calls",
    "-fno-inline",
];

/// A command run at a lower priority (nice 5): the CPU-bound fixtures here run for
/// seconds of their own CPU time, and at the default priority they would take a CPU from
/// the tests running beside them that measure a fixture's samples over wall time. The
/// fixtures count their work in CPU time, and samples come per CPU time, so a lower
/// priority only makes them take longer.
pub(crate) fn niced(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("nice");
    c.args(["-n", "5"]).arg(program);
    c
}

/// A program started held at a `read`, so that a sampler can be opened to begin at its
/// exec (as `benchtop run -- cmd` does).
pub(crate) struct Held {
    child: Child,
}

impl Held {
    pub(crate) fn spawn(program: &Path, args: &[&str]) -> Held {
        Self::spawn_with(niced("sh"), program, args)
    }

    /// As [`Held::spawn`], at the default priority: for a program that sleeps, whose
    /// off-CPU time would grow by the wait for a CPU after each wake-up.
    pub(crate) fn spawn_unniced(program: &Path, args: &[&str]) -> Held {
        Self::spawn_with(Command::new("sh"), program, args)
    }

    fn spawn_with(mut sh: Command, program: &Path, args: &[&str]) -> Held {
        let child = sh
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

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets it exec the program and waits for it to end.
    pub(crate) fn run(mut self) {
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

pub(crate) fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records `program args` from its exec to its end with `unwind`.
pub(crate) fn record(program: &Path, args: &[&str], unwind: UnwindMode) -> Profile {
    let held = Held::spawn(program, args);
    let mut opts = SamplerOptions::default();
    opts.kind = KindSet::of(Kind::Cpu);
    opts.unwind = unwind;
    let sampler = expect_sampler(
        Sampler::start_on_exec(held.pid(), &opts),
        "Sampler::start_on_exec",
    );
    held.run();
    sampler.finish().expect("finish")
}

/// Folded lines with the process name and kernel frames left out, merged.
pub(crate) fn user_stacks(folded: &str) -> BTreeMap<String, u64> {
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
pub(crate) fn share_of(stacks: &BTreeMap<String, u64>, path: &str) -> f64 {
    let total: u64 = stacks.values().sum();
    let hits: u64 = stacks
        .iter()
        .filter(|(s, _)| format!(";{s};").contains(&format!(";{path};")))
        .map(|(_, n)| n)
        .sum();
    hits as f64 / total.max(1) as f64
}

/// Share of the weight whose stack reaches `root` (a frame named exactly so).
pub(crate) fn reaching(stacks: &BTreeMap<String, u64>, root: &str) -> f64 {
    let total: u64 = stacks.values().sum();
    let hits: u64 = stacks
        .iter()
        .filter(|(s, _)| s.split(';').any(|f| f == root))
        .map(|(_, n)| n)
        .sum();
    hits as f64 / total.max(1) as f64
}

/// One standard error, in percentage points, of a share `p` estimated from `n`
/// independent samples. Timer samples of a loaded machine are about that noisy: a
/// band narrower than a few of these fails now and then on a busy machine with no
/// fault in the unwinder.
pub(crate) fn sampling_error(p: f64, n: u64) -> f64 {
    100.0 * (p * (1.0 - p) / n.max(1) as f64).sqrt()
}

/// Every share of `split` within `points` percentage points in `stacks`, plus three
/// standard errors of sampling (none to speak of where the weights are blocked
/// microseconds rather than samples).
pub(crate) fn assert_split(
    stacks: &BTreeMap<String, u64>,
    split: &[(&str, f64)],
    points: f64,
    what: &str,
) {
    let n: u64 = stacks.values().sum();
    for &(path, want) in split {
        let got = share_of(stacks, path);
        let band = points + 3.0 * sampling_error(want, n);
        assert!(
            (got - want).abs() * 100.0 <= band,
            "{what}: {path} has {:.1} % of the {n} samples, expected {:.1} % ± {band:.1}:\n{stacks:#?}",
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
    let profile = record(&prog, &["2"], UnwindMode::Dwarf);
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
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
fn a_program_on_a_tmpfs_of_another_mount_namespace_is_unwound_and_named() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "split", SPLIT_C, NO_FP);
    // An empty directory here; in the program's own mount namespace, a tmpfs over it
    // holding the program: its path names a file this process cannot open.
    let mnt = dir.path().join("elsewhere");
    std::fs::create_dir(&mnt).expect("mkdir");
    let script = format!(
        "mount -t tmpfs none '{m}' && cp '{p}' '{m}/split' && exec '{m}/split' 1.5",
        m = mnt.display(),
        p = prog.display()
    );
    let profile = record(
        Path::new("/usr/bin/unshare"),
        &["-m", "--propagation", "private", "sh", "-c", &script],
        UnwindMode::Dwarf,
    );
    assert!(
        !mnt.join("split").exists(),
        "the tmpfs leaked into this namespace: the test proves nothing"
    );
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
    let main = reaching(&stacks, "main");
    assert!(
        profile.samples > 500 && main >= 0.95,
        "{:.1} % of {} samples reach main (a file of another namespace unread?): \
         {stacks:#?}\n{:?}",
        main * 100.0,
        profile.samples,
        profile.warnings
    );
    assert_split(
        &stacks,
        &SPLIT,
        3.0,
        "benchtop on another namespace's tmpfs",
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
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
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
    opts.kind = KindSet::of(Kind::Cpu);
    opts.unwind = UnwindMode::Dwarf;
    opts.stack_size = 64;
    let sampler = expect_sampler(Sampler::start_on_exec(held.pid(), &opts), "start");
    held.run();
    let profile = sampler.finish().expect("finish");
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
    let truncated = reaching(&stacks, "[truncated: stack copy too small]");
    assert!(truncated > 0.5, "{:.2} %:\n{stacks:#?}", truncated * 100.0);
    let u = &profile.unwinding;
    assert!(u.truncated_stack_copy > u.unwound / 2, "{u:?}");
    // The frame is the outermost one: what was unwound is below it. (A sample taken in
    // the shell's execve, whose stack copy comes from the new image, ends in another.)
    for s in stacks.keys().filter(|s| s.contains("[truncated")) {
        assert!(s.starts_with("[truncated: "), "{s}");
        assert!(
            s.starts_with("[truncated: stack copy too small]") || !s.contains("spin"),
            "{s}"
        );
    }
}

/// `perf record --call-graph dwarf` on `program args`, folded from `perf script`.
fn perf_dwarf(dir: &Path, program: &Path, args: &[&str]) -> BTreeMap<String, u64> {
    let data = dir.join("perf.data");
    let status = niced("perf")
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
    let out = niced("perf")
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
    let perf = perf_dwarf(dir.path(), &prog, &["2"]);
    let ours =
        user_stacks(&record(&prog, &["2"], UnwindMode::Dwarf).profiles[Kind::Cpu].to_folded());
    assert!(perf.values().sum::<u64>() > 1000, "{perf:#?}");
    let (n_ours, n_perf) = (ours.values().sum(), perf.values().sum());
    for (path, want) in SPLIT {
        let (a, b) = (share_of(&ours, path), share_of(&perf, path));
        // Two independent sample sets: their difference's error adds in quadrature.
        let error = sampling_error(want, n_ours).hypot(sampling_error(want, n_perf));
        let band = 2.0 + 3.0 * error;
        assert!(
            (a - b).abs() * 100.0 <= band,
            "{path}: benchtop {:.1} %, perf {:.1} % (± {band:.1})\nbenchtop: {ours:#?}\nperf: {perf:#?}",
            a * 100.0,
            b * 100.0
        );
    }
}

/// A library that the program below loads after its start: work → lib_a (6 units) /
/// lib_b (4 units) → lib_spin, 60/40 %, each call's unit drawn as [`SPLIT_C`]'s.
const LIB_C: &str = r#"
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) void lib_spin(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i ^ (sink >> 3);
}
#define UNIT 200000UL
__attribute__((noinline)) void lib_a(unsigned long u) { lib_spin(6 * u); }
__attribute__((noinline)) void lib_b(unsigned long u) { lib_spin(4 * u); }
static unsigned long next_unit(void) {
    static unsigned long x = 88172645463325252UL;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return UNIT / 2 + x % UNIT;
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
/* Adds the CPU time spent in lib_a and in lib_b to *a and *b. */
void work(double *a, double *b) {
    unsigned long u = next_unit();
    double t0 = now();
    lib_a(u);
    double t1 = now();
    lib_b(u);
    *a += t1 - t0;
    *b += now() - t1;
}
"#;

/// Loads argv[2] with dlopen once running and calls its `work` for argv[1] seconds
/// of CPU time, then writes to argv[3] the CPU seconds spent in `lib_a`, in `lib_b`
/// and in the whole process: the shares a profile should find, as this run measured
/// them (a shared machine's stolen time makes them differ from the 60/40 of the work).
const DLOPEN_C: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    double seconds = atof(argv[1]);
    void *lib = dlopen(argv[2], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    void (*work)(double *, double *) = (void (*)(double *, double *))dlsym(lib, "work");
    double a = 0, b = 0, total;
    struct timespec t;
    do {
        work(&a, &b);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        total = t.tv_sec + t.tv_nsec / 1e9;
    } while (total < seconds);
    FILE *out = fopen(argv[3], "w");
    if (!out) { perror(argv[3]); return 1; }
    fprintf(out, "%f %f %f\n", a, b, total);
    return fclose(out) == 0 ? 0 : 1;
}
"#;

#[test]
fn a_library_loaded_after_the_start_is_unwound_through() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut lib_flags = NO_FP.to_vec();
    lib_flags.extend(["-shared", "-fPIC"]);
    let lib = build_c(dir.path(), "libwork.so", LIB_C, &lib_flags);
    let prog = build_c(dir.path(), "loader", DLOPEN_C, NO_FP);
    let lib_arg = lib.to_str().expect("utf-8 path");
    let times = dir.path().join("times");
    let times_arg = times.to_str().expect("utf-8 path");
    let profile = record(&prog, &["3", lib_arg, times_arg], UnwindMode::Auto);
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
    let main = reaching(&stacks, "main");
    assert!(
        main >= 0.99,
        "{:.2} % reach main:\n{stacks:#?}",
        main * 100.0
    );
    let measured = std::fs::read_to_string(&times).expect("the loader's CPU times");
    let [a, b, total]: [f64; 3] = measured
        .split_whitespace()
        .map(|x| x.parse().expect("a number of seconds"))
        .collect::<Vec<f64>>()
        .try_into()
        .expect("three figures");
    // About 60/40 of the whole; the run's own measure keeps stolen time out of the band.
    assert!((0.5..0.7).contains(&(a / total)), "{measured}");
    let split = [
        ("main;work;lib_a;lib_spin", a / total),
        ("main;work;lib_b;lib_spin", b / total),
    ];
    assert_split(&stacks, &split, 2.0, "dlopen'd library");
    let modules = &profile.unwinding.modules;
    assert_eq!(
        modules.get("libwork.so").map(|m| m.name()),
        Some("dwarf"),
        "{modules:?}"
    );
}

/// Forks a child that execs argv[1..] and waits for it.
const LAUNCHER_C: &str = r#"
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argc;
    pid_t child = fork();
    if (child == 0) { execv(argv[1], argv + 1); perror("execv"); _exit(127); }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
"#;

#[test]
fn a_forked_child_that_execs_a_program_without_frame_pointers_is_unwound() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "split", SPLIT_C, NO_FP);
    let launcher = build_c(
        dir.path(),
        "launcher",
        LAUNCHER_C,
        &["-O2", "-fno-omit-frame-pointer"],
    );
    let prog_arg = prog.to_str().expect("utf-8 path");
    let profile = record(&launcher, &[prog_arg, "2"], UnwindMode::Auto);
    let folded = profile.profiles[Kind::Cpu].to_folded();
    // The child's samples only: its stacks are rooted at its name after the exec.
    let child: String = folded
        .lines()
        .filter(|l| l.starts_with("split;"))
        .map(|l| format!("{l}\n"))
        .collect();
    let stacks = user_stacks(&child);
    assert!(
        stacks.values().sum::<u64>() > 1000,
        "too few samples of the child:\n{folded}"
    );
    let main = reaching(&stacks, "main");
    assert!(
        main >= 0.99,
        "{:.2} % reach main:\n{stacks:#?}",
        main * 100.0
    );
    assert_split(&stacks, &SPLIT, 2.0, "forked and exec'd child");
}

/// The same call tree in Rust, built by rustc without `force-frame-pointers` (as
/// release builds are by default): rounds of rs_mid_x → rs_leaf_a / rs_leaf_b and
/// rs_mid_y → rs_leaf_c, 50/30/20 %, each round's unit drawn as [`SPLIT_C`]'s, for
/// argv[1] seconds of its own CPU time.
const SPLIT_RS: &str = r#"
use std::hint::black_box;
// Each caller uses its callee's result, so that no call is a tail call.
#[inline(never)]
fn rs_spin(n: u64) -> u64 {
    let mut s = 0u64;
    for i in 0..n {
        s = black_box(s ^ i).wrapping_add(i >> 3);
    }
    s
}
const UNIT: u64 = 400_000;
#[inline(never)]
fn rs_leaf_a(u: u64) -> u64 { rs_spin(5 * u).wrapping_add(1) }
#[inline(never)]
fn rs_leaf_b(u: u64) -> u64 { rs_spin(3 * u).wrapping_add(2) }
#[inline(never)]
fn rs_leaf_c(u: u64) -> u64 { rs_spin(2 * u).wrapping_add(3) }
#[inline(never)]
fn rs_mid_x(u: u64) -> u64 { rs_leaf_a(u).wrapping_add(rs_leaf_b(u)).wrapping_add(4) }
#[inline(never)]
fn rs_mid_y(u: u64) -> u64 { rs_leaf_c(u).wrapping_add(5) }
#[repr(C)]
struct Timespec { sec: i64, nsec: i64 }
extern "C" { fn clock_gettime(clock: i32, t: *mut Timespec) -> i32; }
fn cpu_seconds() -> f64 {
    let mut t = Timespec { sec: 0, nsec: 0 };
    // SAFETY: t is a live timespec; 2 is CLOCK_PROCESS_CPUTIME_ID.
    unsafe { clock_gettime(2, &mut t) };
    t.sec as f64 + t.nsec as f64 / 1e9
}
fn main() {
    let seconds: f64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2.0);
    let mut x: u64 = 88172645463325252;
    while cpu_seconds() < seconds {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        let u = black_box(UNIT / 2 + x % UNIT);
        black_box(rs_mid_x(u).wrapping_add(rs_mid_y(u)));
    }
}
"#;

#[test]
fn a_rust_program_built_without_frame_pointers_gets_full_stacks_in_auto() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("rsplit.rs");
    std::fs::write(&src, SPLIT_RS).expect("write the fixture");
    let prog = dir.path().join("rsplit");
    let status = niced("rustc")
        .args([
            "-O",
            "-C",
            "force-frame-pointers=no",
            "-C",
            "debuginfo=1",
            "-o",
        ])
        .arg(&prog)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("this test builds a Rust fixture with `rustc`: {e}"));
    assert!(status.success(), "rustc {}", src.display());
    let profile = record(&prog, &["2"], UnwindMode::Auto);
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
    assert!(profile.samples > 1000, "{} samples", profile.samples);
    let main = reaching(&stacks, "rsplit::main");
    assert!(
        main >= 0.99,
        "{:.2} % reach main:\n{stacks:#?}",
        main * 100.0
    );
    let split = [
        ("rsplit::rs_mid_x;rsplit::rs_leaf_a;rsplit::rs_spin", 0.5),
        ("rsplit::rs_mid_x;rsplit::rs_leaf_b;rsplit::rs_spin", 0.3),
        ("rsplit::rs_mid_y;rsplit::rs_leaf_c;rsplit::rs_spin", 0.2),
    ];
    assert_split(&stacks, &split, 2.0, "rustc without frame pointers");
    let modules = &profile.unwinding.modules;
    assert_eq!(
        modules.get("rsplit").map(|m| m.name()),
        Some("dwarf"),
        "{modules:?}"
    );
    assert_eq!(profile.sampling_info().unwind, "auto");
}

/// Blocks in the C library's nanosleep from two functions: wait_long 3 units and
/// wait_short 1 unit per loop, about 75/25 % of the blocked time, for argv[1] loops of
/// argv[2] ms units; writes to argv[3] the seconds each function spent from before its
/// sleep to after it. Off-CPU time runs to the switch-in, so the wait for a CPU after the
/// timer fires (milliseconds on a busy machine) adds to both sleeps and pulls the split
/// off 75/25: the program's own measure of the same spans includes that wait, and is
/// the split the profile must show.
const SLEEP_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static long unit_ns;
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
__attribute__((noinline)) void wait_long(void) {
    struct timespec t = {0, 3 * unit_ns};
    nanosleep(&t, 0);
}
__attribute__((noinline)) void wait_short(void) {
    struct timespec t = {0, unit_ns};
    nanosleep(&t, 0);
}
int main(int argc, char **argv) {
    int loops = atoi(argv[1]);
    unit_ns = atol(argv[2]) * 1000000L;
    double in_long = 0, in_short = 0;
    for (int i = 0; i < loops; i++) {
        double t0 = now();
        wait_long();
        double t1 = now();
        wait_short();
        in_long += t1 - t0;
        in_short += now() - t1;
    }
    FILE *out = fopen(argv[3], "w");
    if (!out) { perror(argv[3]); return 1; }
    fprintf(out, "%f %f\n", in_long, in_short);
    return fclose(out) == 0 ? 0 : 1;
}
"#;

/// Off-CPU stacks of [`SLEEP_C`] built with `flags`, recorded with `unwind`, and the
/// shares of wait_long and wait_short that the program measured.
fn sleeping(
    flags: &[&str],
    unwind: UnwindMode,
    every: u32,
    loops: &str,
    unit_ms: &str,
) -> (BTreeMap<String, u64>, [f64; 2]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "sleeper", SLEEP_C, flags);
    let times = dir.path().join("times");
    let times_arg = times.to_str().expect("utf-8 path");
    let held = Held::spawn_unniced(&prog, &[loops, unit_ms, times_arg]);
    let mut opts = SamplerOptions::default();
    opts.kind = KindSet::of(Kind::OffCpu);
    opts.unwind = unwind;
    opts.offcpu_stack_every = every;
    let sampler = expect_sampler(Sampler::start_on_exec(held.pid(), &opts), "start");
    crate::fixture::require_offcpu_stacks(&sampler);
    held.run();
    let profile = sampler.finish().expect("finish");
    let measured = std::fs::read_to_string(&times).expect("the sleeper's times");
    let [long, short]: [f64; 2] = measured
        .split_whitespace()
        .map(|x| x.parse().expect("a number of seconds"))
        .collect::<Vec<f64>>()
        .try_into()
        .expect("two figures");
    let shares = [long / (long + short), short / (long + short)];
    // About 75/25: a wait for a CPU of the unit's size would mean a broken machine.
    assert!((0.6..0.8).contains(&shares[0]), "{measured}");
    let mut stacks = user_stacks(&profile.profiles[Kind::OffCpu].to_folded());
    // What the sampler said (records lost, throttling …) rides along for a failure's
    // message, under a key no stack has.
    if !profile.warnings.is_empty() {
        stacks.insert(format!("[warnings: {:?}]", profile.warnings), 0);
    }
    (stacks, shares)
}

/// The blocked time of [`SLEEP_C`] split as the program measured it (`shares`), every
/// stack through main.
fn assert_sleep_split(stacks: &BTreeMap<String, u64>, shares: [f64; 2], what: &str) {
    let main = reaching(stacks, "main");
    assert!(
        main >= 0.99,
        "{what}: {:.2} % reach main:\n{stacks:#?}",
        main * 100.0
    );
    let split = [
        ("main;wait_long", shares[0]),
        ("main;wait_short", shares[1]),
    ];
    assert_split(stacks, &split, 2.0, what);
}

#[test]
fn off_cpu_stacks_keep_the_function_that_blocked_in_the_c_library_with_frame_pointers() {
    // The program keeps frame pointers, the C library does not: by frame pointers
    // alone the frame that called nanosleep is lost.
    let fp = [
        "-O2",
        "-fno-omit-frame-pointer",
        "-mno-omit-leaf-frame-pointer",
    ];
    let (stacks, shares) = sleeping(&fp, UnwindMode::Auto, 1, "8", "100");
    assert_sleep_split(&stacks, shares, "auto, program with frame pointers");
}

#[test]
fn off_cpu_stacks_of_a_program_without_frame_pointers_are_unwound() {
    let (stacks, shares) = sleeping(NO_FP, UnwindMode::Dwarf, 1, "8", "100");
    assert_sleep_split(&stacks, shares, "dwarf, program without frame pointers");
}

#[test]
fn off_cpu_stacks_sampled_at_one_switch_in_three_keep_the_split_and_the_total() {
    // One in three, not two: the program's switches alternate between its two
    // functions, and sampling one in two of them could see only one.
    // 60 loops of 80 ms: some 40 sampled switches, about half of each function's.
    let (every_one, _) = sleeping(NO_FP, UnwindMode::Auto, 1, "60", "20");
    let (every_other, shares) = sleeping(NO_FP, UnwindMode::Auto, 3, "60", "20");
    // Some 40 sampled intervals, whose phase against the program's alternation other
    // switches (start-up, exit) shift: one more of either function moves the split by
    // about a point and a half, so the band is wider than for a stack at every switch.
    let main = reaching(&every_other, "main");
    assert!(
        main >= 0.99,
        "{:.2} % reach main:\n{every_other:#?}",
        main * 100.0
    );
    let split = [
        ("main;wait_long", shares[0]),
        ("main;wait_short", shares[1]),
    ];
    assert_split(&every_other, &split, 7.0, "one switch in three");
    // Scaled by three, the blocked time is about the whole of it.
    let (all, half): (u64, u64) = (every_one.values().sum(), every_other.values().sum());
    let ratio = half as f64 / all as f64;
    assert!((0.8..=1.2).contains(&ratio), "{half} µs against {all} µs");
}

#[test]
fn attaching_to_a_running_program_without_frame_pointers_unwinds_its_stacks() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "split", SPLIT_C, NO_FP);
    let mut child = niced(&prog)
        .arg("2")
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the fixture");
    let mut opts = SamplerOptions::default();
    opts.kind = KindSet::of(Kind::Cpu);
    let sampler = expect_sampler(Sampler::attach(child.id(), &opts), "Sampler::attach");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
    let profile = sampler.finish().expect("finish");
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
    assert!(profile.samples > 500, "{} samples", profile.samples);
    let main = reaching(&stacks, "main");
    assert!(
        main >= 0.99,
        "{:.2} % reach main:\n{stacks:#?}",
        main * 100.0
    );
    assert_split(&stacks, &SPLIT, 2.0, "attach, auto");
    assert_eq!(profile.sampling_info().unwind, "auto");
}

#[test]
fn a_program_whose_file_is_deleted_before_it_is_read_is_unwound_through_map_files() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "split", SPLIT_C, NO_FP);
    let mut child = niced(&prog)
        .arg("2")
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the fixture");
    // Once it runs the fixture (nice has exec'd it), the file goes: the sampler, opened
    // after, finds `split (deleted)` in its maps.
    let exe = format!("/proc/{}/exe", child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_link(&exe).ok().as_deref() != Some(prog.as_path()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the fixture never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::fs::remove_file(&prog).expect("delete the fixture");
    let mut opts = SamplerOptions::default();
    opts.kind = KindSet::of(Kind::Cpu);
    opts.unwind = UnwindMode::Dwarf;
    let sampler = expect_sampler(Sampler::attach(child.id(), &opts), "Sampler::attach");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
    let profile = sampler.finish().expect("finish");
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
    assert!(profile.samples > 500, "{} samples", profile.samples);
    let u = &profile.unwinding;
    // The mapped file, through /proc/<pid>/map_files, needs CAP_SYS_ADMIN (or
    // CAP_CHECKPOINT_RESTORE); without it the module has no tables, and says so.
    let map_files = std::fs::read_dir("/proc/self/map_files")
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| std::fs::File::open(e.ok()?.path()).ok())
        .is_some();
    if !map_files {
        assert_eq!(
            u.modules.get("split").map(|m| m.name()),
            Some("none"),
            "{u:?}"
        );
        assert!(
            profile
                .warnings
                .iter()
                .any(|w| w.contains("no unwind tables for split")),
            "{:?}",
            profile.warnings
        );
        return;
    }
    assert_eq!(
        u.modules.get("split").map(|m| m.name()),
        Some("dwarf"),
        "{u:?}"
    );
    assert!(u.truncated() * 100 <= u.unwound, "{u:?}");
    // Its frames cannot be named (the file is gone), but they are there: spin, a leaf,
    // a mid, main, and the C library's start-up below.
    let deep: u64 = stacks
        .iter()
        .filter(|(s, _)| !s.contains("[truncated") && s.split(';').count() >= 5)
        .map(|(_, n)| n)
        .sum();
    let total: u64 = stacks.values().sum();
    assert!(deep * 100 >= total * 99, "{deep} of {total}:\n{stacks:#?}");
}
