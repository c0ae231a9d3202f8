//! Frames of generated code named from the runtime's perf map (`/tmp/perf-PID.map`):
//! a JavaScript program with three functions of known shares, run by node with
//! `--perf-basic-prof`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use benchtop_profile::kinds::{Kind, KindSet};
use benchtop_profilers::{Sampler, SamplerOptions, UnwindMode};

use crate::fixture::expect_sampler;
use crate::unwind::{Held, assert_split, one_at_a_time, user_stacks};

/// f1, f2 and f3 with about 60/30/10 % of the work, for argv[2] seconds of CPU time;
/// writes to argv[3] the CPU seconds each took, as this run measured them (the shares a
/// profile should find: the three loops' code differs a little in speed).
const SHARES_JS: &str = r#"
"use strict";
function f1(n) { let s = 0; for (let i = 0; i < n; i++) { s = (s + i * 7) % 1000003; } return s; }
function f2(n) { let s = 1; for (let i = 0; i < n; i++) { s = (s + i * 11) % 1000033; } return s; }
function f3(n) { let s = 2; for (let i = 0; i < n; i++) { s = (s + i * 13) % 1000037; } return s; }
const UNIT = 1000000;
const seconds = Number(process.argv[2] || 1);
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
let sum = 0;
const spent = [0, 0, 0];
const timed = (i, f, n) => { const t0 = cpu(); sum += f(n); spent[i] += cpu() - t0; };
while (cpu() < seconds) {
  timed(0, f1, 6 * UNIT);
  timed(1, f2, 3 * UNIT);
  timed(2, f3, UNIT);
}
require("fs").writeFileSync(process.argv[3], spent.join(" ") + "\n");
console.log(sum);
// Alive a while longer: generated code is named and walked only while its process
// lives, and a loaded machine reads the last samples late.
setTimeout(() => {}, 1500);
"#;

/// The JavaScript function a perf map's frame names (`JS:*f1 /path/x.js:2:12` → `f1`).
fn js_function(frame: &str) -> Option<&str> {
    let first = frame.split(' ').next()?;
    let name = first.strip_prefix("JS:")?;
    Some(name.trim_start_matches(['*', '~', '^', '+']))
}

#[test]
fn node_frames_are_named_from_its_perf_map_and_walked_by_frame_pointers() {
    node_shares(SamplerOptions::default().batch_interval);
}

#[test]
fn node_frames_of_a_process_gone_before_they_are_named_are_named_from_the_map_it_left() {
    // One batch, at the end: every sample is named after node exited and was reaped (as
    // on a machine loaded enough to read a short program's samples late), when
    // /proc/PID is gone and only the map node left in /tmp names its code.
    node_shares(Duration::from_secs(600));
}

/// node's three functions sampled with `batch_interval` between the sampler's batches:
/// their shares are the measured ones, under the perf map's names.
fn node_shares(batch_interval: Duration) {
    // The kernel's frame-pointer walk. Under `auto` (node's own code by its CFI, V8's
    // by frame pointer) 74 to 95 % of the stacks reach main from one run to the next:
    // not asserted until that is understood (docs/user-guide.md says to use fp).
    let unwind = UnwindMode::FramePointers;
    {
        let _one = one_at_a_time();
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("shares.js");
        std::fs::write(&script, SHARES_JS).expect("write the script");
        let script_arg = script.to_str().expect("utf-8 path");
        let times = dir.path().join("times");
        let times_arg = times.to_str().expect("utf-8 path");
        // --perf-basic-prof also writes V8's log: into the temporary directory.
        let log = format!("--logfile={}", dir.path().join("v8.log").display());
        let held = Held::spawn(
            Path::new("node"),
            &[
                "--perf-basic-prof",
                &log,
                "--no-logfile-per-isolate",
                "--interpreted-frames-native-stack",
                "--no-turbo-inlining",
                script_arg,
                "2",
                times_arg,
            ],
        );
        let pid = held.pid();
        let mut opts = SamplerOptions::default();
        opts.kind = KindSet::of(Kind::Cpu);
        opts.unwind = unwind;
        opts.batch_interval = batch_interval;
        let sampler = expect_sampler(Sampler::start_on_exec(pid, &opts), "start");
        held.run();
        let profile = sampler.finish().expect("finish");
        // The map node wrote (sh exec'd node, which kept the pid).
        let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
        let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
        let what = format!("node --unwind {}", unwind.name());
        assert_known_shares(
            &stacks,
            js_function,
            (&script, &times),
            &what,
            &profile.unwinding,
        );
    }
}

/// The same three functions in Python, for argv[1] seconds of CPU time, their measured
/// CPU seconds written to argv[2].
const SHARES_PY: &str = r#"
import sys, time

def f1(n):
    s = 0
    for i in range(n):
        s = (s + i * 7) % 1000003
    return s

def f2(n):
    s = 1
    for i in range(n):
        s = (s + i * 11) % 1000033
    return s

def f3(n):
    s = 2
    for i in range(n):
        s = (s + i * 13) % 1000037
    return s

UNIT = 20000
seconds = float(sys.argv[1])
spent = [0.0, 0.0, 0.0]
total = 0
while time.process_time() < seconds:
    for i, (f, n) in enumerate(((f1, 6 * UNIT), (f2, 3 * UNIT), (f3, UNIT))):
        t0 = time.process_time()
        total += f(n)
        spent[i] += time.process_time() - t0
with open(sys.argv[2], "w") as out:
    out.write(" ".join(map(str, spent)) + "\n")
print(total)
# Alive a while longer: generated code is named and walked only while its process
# lives, and a loaded machine reads the last samples late.
time.sleep(1.5)
"#;

/// pyenv's CPython 3.12 (`$(pyenv root)/versions/3.12*/bin/python3.12`, the root being
/// `$PYENV_ROOT` or `~/.pyenv`): the `python3.12` on PATH is a pyenv shim that fails
/// while another version is global. scripts/test checks that it is there.
pub(crate) fn python312() -> std::path::PathBuf {
    let root = std::env::var("PYENV_ROOT")
        .unwrap_or_else(|_| format!("{}/.pyenv", std::env::var("HOME").unwrap_or_default()));
    let versions = Path::new(&root).join("versions");
    let mut found: Vec<_> = std::fs::read_dir(&versions)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("3.12"))
        .map(|e| e.path().join("bin/python3.12"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "no CPython 3.12 under {}: install it with `pyenv install 3.12` \
             (the test needs its perf trampoline, `-X perf`)",
            versions.display()
        )
    })
}

/// The Python function a perf map's frame names (`py::f1:/path/x.py` → `f1`).
fn py_function(frame: &str) -> Option<&str> {
    frame.strip_prefix("py::")?.split(':').next()
}

#[test]
fn python_frames_are_named_from_its_perf_map_and_unwound_through_its_trampolines() {
    let _one = one_at_a_time();
    let python = python312();
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("shares.py");
    std::fs::write(&script, SHARES_PY).expect("write the script");
    let times = dir.path().join("times");
    let held = Held::spawn(
        &python,
        &[
            "-X",
            "perf",
            script.to_str().expect("utf-8 path"),
            "2",
            times.to_str().expect("utf-8 path"),
        ],
    );
    let pid = held.pid();
    let mut opts = SamplerOptions::default();
    opts.kind = KindSet::of(Kind::Cpu);
    // CPython is built without frame pointers: its C frames are unwound by their CFI,
    // the trampolines between them by their fixed shape.
    opts.unwind = UnwindMode::Auto;
    let sampler = expect_sampler(Sampler::start_on_exec(pid, &opts), "start");
    held.run();
    let profile = sampler.finish().expect("finish");
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
    assert_known_shares(
        &stacks,
        py_function,
        (&script, &times),
        "python -X perf",
        &profile.unwinding,
    );
}

/// Weight per function f1, f2, f3 (the innermost frame `name` recognizes), the rest
/// under "other", of the stacks that went through the script (a frame naming `script`):
/// the runtime's own start is not the program's work.
fn innermost_of(
    stacks: &BTreeMap<String, u64>,
    name: fn(&str) -> Option<&str>,
    script: &str,
) -> BTreeMap<String, u64> {
    let mut by_function: BTreeMap<String, u64> = BTreeMap::new();
    for (stack, &n) in stacks {
        if !stack.contains(script) {
            continue;
        }
        let innermost = stack
            .split(';')
            .rev()
            .find_map(|f| name(f).filter(|f| ["f1", "f2", "f3"].contains(f)))
            .unwrap_or("other");
        *by_function.entry(innermost.to_owned()).or_default() += n;
    }
    by_function
}

/// At least 80 % of the samples went through the script (a frame naming its file: the
/// rest is the runtime's start), 95 % of those were walked down to main's caller, f1,
/// f2 and f3 hold at least 95 % of them, split among
/// themselves as the program measured its own CPU time in each (written to `times`),
/// within 3 points and three sampling errors of the samples taken.
fn assert_known_shares(
    stacks: &BTreeMap<String, u64>,
    name: fn(&str) -> Option<&str>,
    (script, times): (&Path, &Path),
    what: &str,
    unwinding: &benchtop_profilers::UnwindCounts,
) {
    let script = script.to_str().expect("utf-8 path");
    let mut by_function = innermost_of(stacks, name, script);
    let all: u64 = stacks.values().sum();
    let total: u64 = by_function.values().sum();
    let ours = total - by_function.get("other").copied().unwrap_or(0);
    // Walked through the generated code down to the C library's start of main.
    let whole: u64 = stacks
        .iter()
        .filter(|(s, _)| s.contains(script) && s.split(';').any(|f| f == "__libc_start_call_main"))
        .map(|(_, n)| n)
        .sum();
    if total * 100 < all * 80 || ours * 100 < total * 95 || whole * 100 < total * 95 {
        let mut others: Vec<(&String, &u64)> = stacks
            .iter()
            .filter(|(s, _)| {
                !s.split(';')
                    .any(|f| name(f).is_some_and(|f| f.starts_with('f')))
            })
            .collect();
        others.sort_by_key(|&(_, n)| std::cmp::Reverse(*n));
        others.truncate(12);
        panic!(
            "{what}: {total} of {all} samples went through the script, {whole} of \
             those reached __libc_start_call_main, f1, f2 and f3 hold {ours}: \
             {by_function:#?}\n{unwinding:?}\n\
             the heaviest of the rest: {others:#?}"
        );
    }
    let measured = std::fs::read_to_string(times).expect("the script's CPU times");
    let spent: Vec<f64> = measured
        .split_whitespace()
        .map(|x| x.parse().expect("seconds"))
        .collect();
    let sum: f64 = spent.iter().sum();
    by_function.remove("other");
    let split = [
        ("f1", spent[0] / sum),
        ("f2", spent[1] / sum),
        ("f3", spent[2] / sum),
    ];
    assert_split(&by_function, &split, 3.0, what);
}
