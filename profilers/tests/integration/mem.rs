//! Memory profiles: the `page-faults` event sampled with callchains, each sample weighted
//! in bytes. A C fixture touches 300 MB from `big_a` and 100 MB from `big_b` through the
//! C library's `memset`, which keeps no frame pointer: both callers must still own their
//! bytes, with frame pointers in the program (and CFI for the library) and without them.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::Stdio;

use benchtop_profile::kinds::{Kind, KindSet};
use benchtop_profilers::{Profile, Sampler, SamplerOptions, UnwindMode};

use crate::fixture::expect_sampler;
use crate::unwind::{Held, NO_FP, build_c, niced, one_at_a_time, reaching, user_stacks};

/// Touches 300 MB from `big_a` and 100 MB from `big_b` with `memset` (a value other than
/// 0, so the compiler cannot turn malloc + memset into calloc). With an argument, it
/// first prints `ready` and waits for a line (for attaching).
const TOUCH_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define MB (1024UL * 1024UL)
__attribute__((noinline)) char *big_a(void) {
    char *p = malloc(300 * MB);
    memset(p, 1, 300 * MB);
    return p;
}
__attribute__((noinline)) char *big_b(void) {
    char *p = malloc(100 * MB);
    memset(p, 2, 100 * MB);
    return p;
}
int main(int argc, char **argv) {
    if (argc > 1) {
        char line[16];
        puts("ready");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) return 2;
    }
    char *a = big_a();
    char *b = big_b();
    return a[12345] + b[6789] == 3 ? 0 : 1;
}
"#;

/// Bytes the fixture touches.
const TOUCHED: f64 = 400.0 * 1024.0 * 1024.0;

/// Flags of a C build with frame pointers.
const WITH_FP: &[&str] = &[
    "-O2",
    "-g",
    "-fno-omit-frame-pointer",
    "-fno-optimize-sibling-calls",
    "-fno-inline",
];

/// Records the fixture from its exec to its end.
fn record(program: &Path, kind: KindSet, unwind: UnwindMode) -> Profile {
    let held = Held::spawn(program, &[]);
    let mut opts = SamplerOptions::default();
    opts.kind = kind;
    opts.unwind = unwind;
    let sampler = expect_sampler(
        Sampler::start_on_exec(held.pid(), &opts),
        "Sampler::start_on_exec",
    );
    held.run();
    sampler.finish().expect("finish")
}

/// big_a and big_b hold 75 % and 25 % of the bytes within 2 points, and the total is
/// within 5 % of the 400 MB touched.
fn assert_split(profile: &Profile, what: &str) {
    let stacks = user_stacks(&profile.profiles[Kind::Mem].to_folded());
    let total = profile.profiles[Kind::Mem].total_weight() as f64;
    let (a, b) = (reaching(&stacks, "big_a"), reaching(&stacks, "big_b"));
    let report = format!(
        "{what}: big_a {:.1} %, big_b {:.1} %, {:.1} MB in all, {} samples, {} lost:\n{stacks:#?}",
        a * 100.0,
        b * 100.0,
        total / 1048576.0,
        profile.mem_samples,
        profile.lost,
    );
    assert!((a - 0.75).abs() <= 0.02, "{report}");
    assert!((b - 0.25).abs() <= 0.02, "{report}");
    assert!((total / TOUCHED - 1.0).abs() <= 0.05, "{report}");
    let info = profile.sampling_info();
    let mem = info
        .mem
        .expect("the sampling section says how faults were sampled");
    assert_eq!(mem.bytes, profile.profiles[Kind::Mem].total_weight());
    assert_eq!(
        mem.bytes,
        mem.samples * mem.period * mem.page_size,
        "each sample weighs period × page size"
    );
}

#[test]
fn page_faults_split_between_the_callers_of_memset_with_frame_pointers() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "touch", TOUCH_C, WITH_FP);
    // Every profile at once: the page-fault samples must stay apart from the others.
    let profile = record(&prog, KindSet::ALL, UnwindMode::Auto);
    assert_split(
        &profile,
        "frame pointers, C library by CFI (auto), --profile all",
    );
    assert_eq!(profile.sampling_info().profile, "all");
    assert!(
        !profile.profiles[Kind::Mem].to_folded().contains("[blocked"),
        "no off-CPU frame in the memory profile"
    );
}

#[test]
fn page_faults_split_between_the_callers_of_memset_without_frame_pointers() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "touch", TOUCH_C, NO_FP);
    let profile = record(&prog, KindSet::of(Kind::Mem), UnwindMode::Dwarf);
    assert_split(&profile, "no frame pointers, DWARF");
    assert_eq!(profile.event, "page-faults");
    assert!(profile.profiles[Kind::Cpu].is_empty() && profile.profiles[Kind::OffCpu].is_empty());
}

#[test]
fn frame_pointers_alone_lose_the_callers_of_memset() {
    // The contrast that makes the tests above mean something: memset keeps no frame
    // pointer, so the kernel's walk skips its caller.
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "touch", TOUCH_C, WITH_FP);
    let profile = record(&prog, KindSet::of(Kind::Mem), UnwindMode::FramePointers);
    let stacks = user_stacks(&profile.profiles[Kind::Mem].to_folded());
    let callers = reaching(&stacks, "big_a") + reaching(&stacks, "big_b");
    let total = profile.profiles[Kind::Mem].total_weight() as f64;
    assert!(
        (total / TOUCHED - 1.0).abs() <= 0.05,
        "{:.1} MB sampled",
        total / 1048576.0
    );
    assert!(
        callers < 0.5,
        "{:.1} % reach big_a or big_b by frame pointers:\n{stacks:#?}",
        callers * 100.0
    );
}

#[test]
fn attaching_samples_the_page_faults_of_a_running_program() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "touch", TOUCH_C, NO_FP);
    let mut child = niced(&prog)
        .arg("wait")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the fixture");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read ready");
    assert_eq!(line.trim(), "ready");
    let mut opts = SamplerOptions::default();
    opts.kind = KindSet::of(Kind::Mem);
    let sampler = expect_sampler(Sampler::attach(child.id(), &opts), "Sampler::attach");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("release the fixture");
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
    let profile = sampler.finish().expect("finish");
    assert_split(&profile, "attach, auto");
}
