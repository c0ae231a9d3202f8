//! Frame names: one rule for every frame (the qualified, demangled path), whatever
//! debug level a program was built with and whether a function was inlined or not.
//! Fixtures are built here with rustc.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use benchtop_profile::kinds::{Kind, KindSet};
use benchtop_profilers::{Profile, Sampler, SamplerOptions, SymbolDetail, UnwindMode};

use crate::fixture::expect_sampler;
use crate::unwind::{Held, assert_split, niced, one_at_a_time, record, user_stacks};

/// Three functions that cannot be inlined, with 60/30/10 % of the work, each burning
/// its time in its own loop (its self time), called from `main` for argv[1] seconds of
/// CPU time. `step`, inlined into each, is a method of a type in a module, so that an
/// inlined frame has a path to show; `main` calls them through a closure that is a real
/// call too.
const SHARES_RS: &str = r#"
use std::hint::black_box;
mod inner {
    pub struct Acc(pub u64);
    impl Acc {
        #[inline(always)]
        pub fn step(&mut self, i: u64) {
            self.0 = std::hint::black_box(self.0 ^ i).wrapping_add(i >> 3);
        }
    }
}
const UNIT: u64 = 300_000;
#[inline(never)]
fn f1(u: u64) -> u64 { let mut a = inner::Acc(1); for i in 0..6 * u { a.step(i) } a.0 }
#[inline(never)]
fn f2(u: u64) -> u64 { let mut a = inner::Acc(2); for i in 0..3 * u { a.step(i) } a.0 }
#[inline(never)]
fn f3(u: u64) -> u64 { let mut a = inner::Acc(3); for i in 0..u { a.step(i) } a.0 }
fn cpu_seconds() -> f64 {
    let mut t = std::mem::MaybeUninit::<[i64; 2]>::uninit();
    // CLOCK_PROCESS_CPUTIME_ID is 2 on Linux.
    unsafe extern "C" { fn clock_gettime(clock: i32, t: *mut [i64; 2]) -> i32; }
    unsafe { clock_gettime(2, t.as_mut_ptr()); let t = t.assume_init(); t[0] as f64 + t[1] as f64 / 1e9 }
}
fn main() {
    let seconds: f64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1.0);
    // Called through a pointer the optimizer cannot see through: never inlined.
    let round: &dyn Fn(&mut u64, u64) = &|s: &mut u64, u: u64| {
        *s = s.wrapping_add(f1(u)).wrapping_add(f2(u)).wrapping_add(f3(u))
    };
    let mut sum = 0;
    // Each round's unit is drawn between half and one and a half UNIT (xorshift64):
    // rounds of one fixed length let the sampling clock fall in step with them.
    let mut x: u64 = 88172645463325252;
    while cpu_seconds() < seconds {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        black_box(round)(&mut sum, black_box(UNIT / 2 + x % UNIT));
    }
    println!("{sum}");
}
"#;

/// The fixture's functions and their shares of the samples, under the names the rule
/// gives them.
const SHARES: [(&str, f64); 3] = [
    ("shares::f1", 0.6),
    ("shares::f2", 0.3),
    ("shares::f3", 0.1),
];

/// Builds [`SHARES_RS`] as `dir/shares-<name>` with rustc `flags` after `-O`.
fn build_shares(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join("shares.rs");
    std::fs::write(&src, SHARES_RS).expect("write the fixture");
    let out = dir.join(format!("shares-{name}"));
    let status = niced("rustc")
        .args(["-O", "--crate-name", "shares", "--edition", "2024"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("this test builds a Rust fixture with `rustc`: {e}"));
    assert!(status.success(), "rustc {flags:?} {}", src.display());
    out
}

/// The weights of `stacks` by their path from `shares::main` down to the first of the
/// fixture's three functions (stacks that reach none are `other`): the same paths
/// whatever the build, since every function on them is a real call.
fn paths_to_functions(stacks: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (stack, &n) in stacks {
        let frames: Vec<&str> = stack.split(';').collect();
        let from = frames.iter().position(|f| *f == "shares::main");
        let to = frames
            .iter()
            .position(|f| SHARES.iter().any(|(name, _)| f == name));
        let path = match (from, to) {
            (Some(from), Some(to)) if from < to => frames[from..=to].join(";"),
            _ => "other".to_owned(),
        };
        *out.entry(path).or_default() += n;
    }
    out
}

/// The paths [`paths_to_functions`] must find, with their shares.
fn expected_paths() -> Vec<(String, f64)> {
    SHARES
        .iter()
        .map(|&(f, share)| {
            (
                format!("shares::main;shares::main::{{{{closure}}}};{f}"),
                share,
            )
        })
        .collect()
}

/// Asserts that `stacks` split as the fixture does, under the names the rule gives,
/// and returns the paths it found (`other` left out).
fn assert_named_split(stacks: &BTreeMap<String, u64>, what: &str) -> BTreeSet<String> {
    let paths = paths_to_functions(stacks);
    let want = expected_paths();
    let split: Vec<(&str, f64)> = want.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    assert_split(&paths, &split, 3.0, what);
    let frames: BTreeSet<&str> = stacks.keys().flat_map(|s| s.split(';')).collect();
    // (`main` alone is the C entry point that calls Rust's: a real symbol.)
    for bare in ["f1", "f2", "f3", "{closure#0}", "{{closure}}"] {
        assert!(
            !frames.contains(bare),
            "{what}: a bare `{bare}` in {frames:?}"
        );
    }
    paths.into_keys().filter(|p| p != "other").collect()
}

/// Records the fixture for 1.5 s of CPU time with `symbols`.
fn record_shares(prog: &Path, symbols: SymbolDetail) -> Profile {
    let held = Held::spawn(prog, &["1.5"]);
    let mut opts = SamplerOptions::default();
    opts.kind = KindSet::of(Kind::Cpu);
    opts.unwind = UnwindMode::Auto;
    opts.symbols = symbols;
    let sampler = expect_sampler(Sampler::start_on_exec(held.pid(), &opts), "start");
    held.run();
    sampler.finish().expect("finish")
}

#[test]
fn default_release_and_line_tables_only_builds_give_the_same_labels() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    // Cargo's release defaults: no debug info of our own, and std's stripped.
    let default = build_shares(dir.path(), "default", &["-C", "strip=debuginfo"]);
    let lines = build_shares(dir.path(), "lines", &["-C", "debuginfo=line-tables-only"]);
    let a =
        user_stacks(&record(&default, &["1.5"], UnwindMode::Auto).profiles[Kind::Cpu].to_folded());
    let b =
        user_stacks(&record(&lines, &["1.5"], UnwindMode::Auto).profiles[Kind::Cpu].to_folded());
    let a_paths = assert_named_split(&a, "default release build");
    let b_paths = assert_named_split(&b, "line-tables-only build");
    assert_eq!(
        a_paths, b_paths,
        "the two builds name the calls differently"
    );
}

#[test]
fn symbols_names_and_symbols_inlined_name_outer_frames_alike() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_shares(dir.path(), "lines", &["-C", "debuginfo=line-tables-only"]);
    let names =
        user_stacks(&record_shares(&prog, SymbolDetail::NamesOnly).profiles[Kind::Cpu].to_folded());
    let inlined =
        user_stacks(&record_shares(&prog, SymbolDetail::Inlined).profiles[Kind::Cpu].to_folded());
    assert_eq!(
        assert_named_split(&names, "--symbols names"),
        assert_named_split(&inlined, "--symbols inlined")
    );
}

#[test]
fn inlined_frames_get_their_path_from_limited_debug_info() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_shares(dir.path(), "limited", &["-C", "debuginfo=limited"]);
    let stacks =
        user_stacks(&record(&prog, &["1"], UnwindMode::Auto).profiles[Kind::Cpu].to_folded());
    let frames: BTreeSet<&str> = stacks.keys().flat_map(|s| s.split(';')).collect();
    assert!(
        frames.contains("shares::inner::Acc::step"),
        "no qualified inlined frame in {frames:?}"
    );
    assert!(
        frames.contains("shares::main::{{closure}}"),
        "the closure is not spelled `shares::main::{{{{closure}}}}` in {frames:?}"
    );
    for bare in ["step", "{closure#0}", "{{closure}}", "f1", "black_box<u64>"] {
        assert!(!frames.contains(bare), "a bare `{bare}` in {frames:?}");
    }
}
