//! Frames of generated code named from the runtime's perf map (`/tmp/perf-PID.map`):
//! a JavaScript program with three functions of known shares, run by node with
//! `--perf-basic-prof`.

use std::collections::BTreeMap;
use std::path::Path;

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
const UNIT = 200000;
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
"#;

/// The JavaScript function a perf map's frame names (`JS:*f1 /path/x.js:2:12` → `f1`).
fn js_function(frame: &str) -> Option<&str> {
    let first = frame.split(' ').next()?;
    let name = first.strip_prefix("JS:")?;
    Some(name.trim_start_matches(['*', '~', '^', '+']))
}

#[test]
fn node_frames_are_named_from_its_perf_map() {
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
    opts.unwind = UnwindMode::FramePointers;
    let sampler = expect_sampler(Sampler::start_on_exec(pid, &opts), "start");
    held.run();
    let profile = sampler.finish().expect("finish");
    // The map node wrote (sh exec'd node, which kept the pid).
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    let stacks = user_stacks(&profile.cpu.to_folded());
    let mut by_function: BTreeMap<String, u64> = BTreeMap::new();
    for (stack, &n) in &stacks {
        let innermost = stack
            .split(';')
            .rev()
            .find_map(|f| js_function(f).filter(|f| ["f1", "f2", "f3"].contains(f)))
            .unwrap_or("other");
        *by_function.entry(innermost.to_owned()).or_default() += n;
    }
    let total: u64 = by_function.values().sum();
    let ours = total - by_function.get("other").copied().unwrap_or(0);
    // The rest is node's start (its own JavaScript, the compiler) and the timing loop.
    assert!(
        ours * 100 >= total * 85,
        "f1, f2 and f3 hold {ours} of {total} samples: {by_function:#?}"
    );
    let measured = std::fs::read_to_string(&times).expect("the script's CPU times");
    let spent: Vec<f64> = measured
        .split_whitespace()
        .map(|x| x.parse().expect("seconds"))
        .collect();
    let sum: f64 = spent.iter().sum();
    // Their split among themselves, against what the script measured.
    by_function.remove("other");
    let split = [
        ("f1", spent[0] / sum),
        ("f2", spent[1] / sum),
        ("f3", spent[2] / sum),
    ];
    assert_split(&by_function, &split, 3.0, "node");
}
