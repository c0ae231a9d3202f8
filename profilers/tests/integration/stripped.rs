//! Code without symbols: a stripped library is named from its separate debug file where
//! there is one, else its functions are told apart by their unwind tables
//! (`FILE+0xSTART`); PLT stubs are named for their targets (`labs@plt`). Fixtures built
//! here with the system C compiler and binutils' `strip` and `objcopy`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use benchtop_profile::kinds::{Kind, KindSet};
use benchtop_profilers::{Profile, Sampler, SamplerOptions, SymbolDetail, UnwindMode};
use object::{Object as _, ObjectSymbol as _};

use crate::fixture::expect_sampler;
use crate::unwind::{Held, NO_FP, assert_split, build_c, one_at_a_time, record, user_stacks};

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

/// Builds `libhot.so` from [`LIB_C`] (with debug info, unstripped) and the program `hot`
/// calling it from [`MAIN_C`], in `dir`.
fn build_hot(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut lib_flags = NO_FP.to_vec();
    lib_flags.extend(["-shared", "-fPIC", "-Wl,--build-id"]);
    let lib = build_c(dir, "libhot.so", LIB_C, &lib_flags);
    let dir_arg = dir.to_str().expect("utf-8 path");
    let main_flags: Vec<String> = NO_FP
        .iter()
        .map(|f| f.to_string())
        .chain([format!("-L{dir_arg}"), format!("-Wl,-rpath,{dir_arg}")])
        .collect();
    let main_flags: Vec<&str> = main_flags.iter().map(String::as_str).collect();
    let main_src = dir.join("main.c");
    std::fs::write(&main_src, MAIN_C).expect("write main.c");
    let prog = dir.join("hot");
    let status = Command::new("cc")
        .args(&main_flags)
        .arg("-o")
        .arg(&prog)
        .arg(&main_src)
        .arg("-lhot")
        .status()
        .expect("cc");
    assert!(status.success(), "cc main.c -lhot");
    (lib, prog)
}

/// Runs a binutils tool (`strip`, `objcopy`) on the fixture.
fn binutils(tool: &str, args: &[&std::ffi::OsStr]) {
    let status = Command::new(tool)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("this test runs `{tool}` (binutils): {e}; install binutils"));
    assert!(status.success(), "{tool} {args:?}: {status}");
}

/// Strips every symbol of `lib`, checking that it did.
fn strip_all(lib: &Path) {
    binutils("strip", &["--strip-all".as_ref(), lib.as_os_str()]);
    assert!(
        !symbol_addresses(lib).contains_key("hot_a"),
        "strip left the symbol table"
    );
}

#[test]
fn a_stripped_library_is_split_into_its_functions() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let (lib, prog) = build_hot(dir.path());
    let addresses = symbol_addresses(&lib);
    strip_all(&lib);
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
    // And the session says the library had no symbols, and where its debug file was
    // looked for: by its build id in the default directories.
    let build_id = hex(&build_id_of(&lib));
    let warning = profile
        .warnings
        .iter()
        .find(|w| w.contains("libhot.so has no symbol table"))
        .unwrap_or_else(|| panic!("no warning about libhot.so: {:#?}", profile.warnings));
    assert!(
        warning.contains(&format!(
            "/usr/lib/debug/.build-id/{}/{}.debug",
            &build_id[..2],
            &build_id[2..]
        )),
        "{warning}"
    );
}

/// The GNU build id of the ELF file at `path`.
fn build_id_of(path: &Path) -> Vec<u8> {
    let data = std::fs::read(path).expect("read the library");
    let file = object::File::parse(&*data).expect("an ELF file");
    file.build_id()
        .expect("notes")
        .expect("a build id")
        .to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Records `prog 1.5` from its exec with `symbols`, looking for debug files in `dirs`.
fn record_symbols(prog: &Path, symbols: SymbolDetail, dirs: &[&Path]) -> Profile {
    let held = Held::spawn(prog, &["1.5"]);
    let mut opts = SamplerOptions::default();
    opts.kind = KindSet::of(Kind::Cpu);
    opts.unwind = UnwindMode::Auto;
    opts.symbols = symbols;
    opts.debug_dirs = dirs.iter().map(|d| d.to_path_buf()).collect();
    let sampler = expect_sampler(Sampler::start_on_exec(held.pid(), &opts), "start");
    held.run();
    sampler.finish().expect("finish")
}

#[test]
fn a_stripped_library_is_named_from_its_debug_file_under_either_symbols_setting() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let (lib, prog) = build_hot(dir.path());
    // Its debug file where a debug package puts it, under a directory of our own:
    // DIR/.build-id/xx/yyyy.debug. No debug link: found by build id alone.
    let id = hex(&build_id_of(&lib));
    let debug_dir = dir.path().join("debug");
    let by_id = debug_dir.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&by_id).expect("mkdir");
    let debug_file = by_id.join(format!("{}.debug", &id[2..]));
    binutils(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            lib.as_os_str(),
            debug_file.as_os_str(),
        ],
    );
    strip_all(&lib);
    let split = [
        ("work;hot_a", 0.6),
        ("work;hot_b", 0.3),
        ("work;hot_c", 0.1),
    ];
    for symbols in [SymbolDetail::NamesOnly, SymbolDetail::Inlined] {
        let profile = record_symbols(&prog, symbols, &[&debug_dir]);
        let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
        assert_split(&stacks, &split, 3.0, symbols.name());
        assert!(
            !stacks.keys().any(|s| s.contains("libhot.so+")),
            "{}: code of libhot.so without a name: {stacks:#?}",
            symbols.name()
        );
        assert!(
            !profile.warnings.iter().any(|w| w.contains("libhot.so")),
            "{:?}",
            profile.warnings
        );
    }
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
