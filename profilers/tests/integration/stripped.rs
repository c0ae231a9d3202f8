//! Code without symbols: a stripped library's functions are told apart by their unwind
//! tables (`FILE+0xSTART`), and PLT stubs are named for their targets (`labs@plt`).
//! Fixtures built here with the system C compiler and binutils' `strip`.

use benchtop_profile::Kind;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use benchtop_profilers::UnwindMode;
use object::{Object as _, ObjectSymbol as _};

use crate::unwind::{NO_FP, assert_split, build_c, one_at_a_time, record, user_stacks};

/// Three internal functions (not exported) with 60/30/10 % of the work, called by the
/// exported `work` with a unit of work its caller draws each round (rounds of one fixed
/// length let the sampling clock fall in step with them: see `crate::rounds`).
const LIB_C: &str = r#"
static volatile unsigned long sink;
__attribute__((noinline)) static void hot_a(unsigned long u) {
    for (unsigned long i = 0; i < 6 * u; i++) sink += i ^ (sink >> 3);
}
__attribute__((noinline)) static void hot_b(unsigned long u) {
    for (unsigned long i = 0; i < 3 * u; i++) sink += i ^ (sink >> 5);
}
__attribute__((noinline)) static void hot_c(unsigned long u) {
    for (unsigned long i = 0; i < u; i++) sink += i ^ (sink >> 7);
}
void work(unsigned long u) { hot_a(u); hot_b(u); hot_c(u); }
"#;

/// Calls the library's `work` for argv[1] seconds of CPU time, each round with a unit
/// drawn between 50,000 and 150,000 iterations (xorshift64).
const MAIN_C: &str = r#"
#include <stdlib.h>
#include <time.h>
void work(unsigned long u);
int main(int argc, char **argv) {
    double seconds = atof(argv[1]);
    struct timespec t;
    unsigned long x = 88172645463325252UL;
    do {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        work(50000UL + x % 100000UL);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while (t.tv_sec + t.tv_nsec / 1e9 < seconds);
    return 0;
}
"#;

/// Calls `labs` through the PLT in a loop for argv[1] seconds of CPU time.
const PLT_C: &str = r#"
#include <stdlib.h>
#include <time.h>
static volatile long sink;
__attribute__((noinline)) void calls(void) {
    for (long i = 0; i < 1000000; i++) sink += labs(sink - i);
}
int main(int argc, char **argv) {
    double seconds = atof(argv[1]);
    struct timespec t;
    do {
        calls();
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while (t.tv_sec + t.tv_nsec / 1e9 < seconds);
    return 0;
}
"#;

/// The address of each named function of the ELF file `path`.
fn symbol_addresses(path: &Path) -> BTreeMap<String, u64> {
    let data = std::fs::read(path).expect("read the library");
    let file = object::File::parse(&*data).expect("an ELF file");
    file.symbols()
        .filter_map(|s| Some((s.name().ok()?.to_owned(), s.address())))
        .collect()
}

/// Self weights by leaf frame.
fn by_leaf(stacks: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (stack, &n) in stacks {
        let leaf = stack.rsplit(';').next().unwrap_or_default();
        *out.entry(leaf.to_owned()).or_default() += n;
    }
    out
}

#[test]
fn a_stripped_library_is_split_into_its_functions() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut lib_flags = NO_FP.to_vec();
    lib_flags.extend(["-shared", "-fPIC"]);
    let lib = build_c(dir.path(), "libhot.so", LIB_C, &lib_flags);
    let addresses = symbol_addresses(&lib);
    let status = Command::new("strip")
        .arg("--strip-all")
        .arg(&lib)
        .status()
        .unwrap_or_else(|e| panic!("this test strips a library with `strip` (binutils): {e}"));
    assert!(status.success(), "strip: {status}");
    assert!(
        !symbol_addresses(&lib).contains_key("hot_a"),
        "strip left the symbol table"
    );
    let dir_arg = dir.path().to_str().expect("utf-8 path");
    let main_flags: Vec<String> = NO_FP
        .iter()
        .map(|f| f.to_string())
        .chain([format!("-L{dir_arg}"), format!("-Wl,-rpath,{dir_arg}")])
        .collect();
    let main_flags: Vec<&str> = main_flags.iter().map(String::as_str).collect();
    let main_src = dir.path().join("main.c");
    std::fs::write(&main_src, MAIN_C).expect("write main.c");
    let prog = dir.path().join("hot");
    let status = Command::new("cc")
        .args(&main_flags)
        .arg("-o")
        .arg(&prog)
        .arg(&main_src)
        .arg("-lhot")
        .status()
        .expect("cc");
    assert!(status.success(), "cc main.c -lhot");
    let profile = record(&prog, &["2"], UnwindMode::Auto);
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
    let leaves = by_leaf(&stacks);
    let label = |f: &str| format!("libhot.so+{:#x}", addresses[f]);
    let split = [
        (label("hot_a"), 0.6),
        (label("hot_b"), 0.3),
        (label("hot_c"), 0.1),
    ];
    let split: Vec<(&str, f64)> = split.iter().map(|(l, s)| (l.as_str(), *s)).collect();
    assert_split(&leaves, &split, 3.0, "stripped library");
    let module_box = leaves.get("[libhot.so]").copied().unwrap_or(0);
    assert!(
        module_box * 100 <= leaves.values().sum::<u64>(),
        "{module_box} samples in one [libhot.so] box: {leaves:#?}"
    );
    // The exported function keeps its name from the dynamic symbol table.
    assert!(
        stacks.keys().any(|s| s.contains(";work;libhot.so+")),
        "{stacks:#?}"
    );
}

#[test]
fn a_call_through_the_plt_is_named_for_its_target() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut flags = NO_FP.to_vec();
    flags.push("-fno-builtin");
    let prog = build_c(dir.path(), "plt", PLT_C, &flags);
    let profile = record(&prog, &["3"], UnwindMode::Auto);
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
    let leaves = by_leaf(&stacks);
    // A stub is one jump: it holds some tenths of a percent of the samples, some ten of
    // 3,000 (none at all about once in 10,000 runs).
    assert!(
        leaves.get("labs@plt").is_some_and(|&n| n > 0),
        "no sample named labs@plt: {leaves:#?}"
    );
    for wrong in ["_init", "[plt]"] {
        assert!(
            !leaves.contains_key(wrong),
            "a `{wrong}` frame: {leaves:#?}"
        );
    }
    assert!(
        stacks.keys().any(|s| s.ends_with("calls;labs@plt")),
        "the stub is called from `calls`: {stacks:#?}"
    );
}
