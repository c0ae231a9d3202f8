//! Programs that are not built in: `benchtop run -- <command>` and `benchtop attach`.

use std::path::Path;
use std::process::Output;

use benchtop_sessions::Status;
use benchtop_sessions::store::Session;

use crate::support::{attach_to_shell, benchtop};

fn run_command(dir: &Path, options: &[&str], command: &[&str]) -> Output {
    benchtop()
        .args(["run", "--quiet", "--record"])
        .arg(dir)
        .args(options)
        .arg("--")
        .args(command)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Stacks whose root frame (the process name) is `root`, by weight.
fn weight_under(folded: &str, root: &str) -> u64 {
    folded
        .lines()
        .filter(|line| line.split(';').next() == Some(root))
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_command_after_dashes_is_recorded_with_its_stacks_and_output() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dd");
    let output = run_command(
        &dir,
        &["--interval", "100ms"],
        &[
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=4k",
            // About 1 s on a quiet machine (18 GB/s here): several 100 ms rows of
            // monitors, which a run shorter than one interval would not have.
            "count=4000000",
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    assert_eq!(session.meta.workload.name, "dd");
    assert_eq!(
        session.meta.workload.params["command"],
        "dd if=/dev/zero of=/dev/null bs=4k count=4000000"
    );
    // dd reports on stderr: the session keeps it.
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    assert!(log.contains("4000000+0 records in"), "{log}");
    let folded = std::fs::read_to_string(dir.join("cpu.folded")).unwrap();
    let total: u64 = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    assert!(weight_under(&folded, "dd") > 0, "{folded}");
    // The gate (benchtop itself, before the exec) is not what was sampled.
    assert!(
        weight_under(&folded, "benchtop") * 10 <= total,
        "the exec gate shows in the profile:\n{folded}"
    );
    assert!(session.rows.iter().any(|r| r.resources.is_some()));
}

#[test]
fn a_command_is_unwound_per_module_by_default_and_with_dwarf_when_asked() {
    // dd's own code and the C library keep no frame pointers here: the default for a
    // command copies stacks and says how each module was walked.
    let tmp = tempfile::tempdir().unwrap();
    let dd = [
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=4k",
        // About 0.4 s on a quiet machine: hundreds of samples to unwind.
        "count=2000000",
    ];
    for (options, unwind) in [(&[][..], "auto"), (&["--unwind", "dwarf"][..], "dwarf")] {
        let dir = tmp.path().join(unwind);
        let output = run_command(&dir, options, &dd);
        assert!(output.status.success(), "{}", text(&output.stderr));
        let sampling = Session::load(&dir).unwrap().meta.sampling;
        assert_eq!(sampling.unwind, unwind);
        let unwinding = sampling.unwinding.expect("unwinding counts");
        assert_eq!(unwinding.stack_size, 8192);
        assert!(unwinding.unwound > 0, "{unwinding:?}");
        assert_eq!(
            unwinding.modules.get("libc.so.6").map(String::as_str),
            Some("dwarf"),
            "{unwinding:?}"
        );
    }
    // Frame pointers only: no copies, nothing to count.
    let dir = tmp.path().join("fp");
    let output = run_command(&dir, &["--unwind", "fp"], &dd);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let sampling = Session::load(&dir).unwrap().meta.sampling;
    assert_eq!(sampling.unwind, "frame-pointers");
    assert!(sampling.unwinding.is_none());
}

#[test]
fn a_command_that_cannot_run_is_refused_before_a_session_exists_saying_why() {
    let tmp = tempfile::tempdir().unwrap();
    for (command, why) in [
        ("/nonexistent/benchtop-test-program", "No such file"),
        ("benchtop-test-no-such-command", "no such command in PATH"),
        ("/tmp", "not an executable file"),
    ] {
        let dir = tmp.path().join("missing");
        let output = run_command(&dir, &[], &[command]);
        assert_eq!(output.status.code(), Some(1));
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains(&format!("cannot run `{command}`")) && stderr.contains(why),
            "{stderr}"
        );
        assert!(!dir.exists(), "no session for a command that never started");
    }
}

#[test]
fn a_duration_ends_a_command_with_sigint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sleep");
    let output = run_command(
        &dir,
        &["--duration", "300ms", "--profile", "none"],
        &["sleep", "600"],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    let exit = session.meta.worker.exit.unwrap();
    assert!(exit.contains("signal 2"), "{exit}");
    // Cut short: its wall time would be the duration's, not the command's.
    assert!(
        session.meta.summary.iter().all(|f| f.name != "wall_time_s"),
        "{:?}",
        session.meta.summary
    );
}

#[test]
fn a_command_that_ends_by_itself_is_timed_from_its_start_to_its_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sleep");
    let output = run_command(&dir, &["--profile", "none"], &["sleep", "0.2"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let session = Session::load(&dir).unwrap();
    let figure = |name: &str| {
        session
            .meta
            .summary
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name}: {:?}", session.meta.summary))
    };
    let wall = figure("wall_time_s");
    assert_eq!(wall.unit, "s");
    assert_eq!(wall.better, Some(benchtop_sessions::meta::Better::Lower));
    // Its sleep and an exec, on a loaded machine: not the conductor's 50 ms turns.
    assert!((0.2..0.45).contains(&wall.value), "{}", wall.value);
    let cpu = figure("cpu_time_s");
    assert!(cpu.value < wall.value, "{} {}", cpu.value, wall.value);
}

#[test]
fn a_command_speaking_the_report_protocol_adds_its_latencies_and_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("protocol");
    let worker = env!("CARGO_BIN_EXE_benchtop");
    let output = run_command(
        &dir,
        &["--profile", "none", "--interval", "100ms"],
        &[
            worker,
            "worker",
            "ring",
            "--num-nodes",
            "100",
            "--num-rounds",
            "20000",
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    assert!(
        session
            .meta
            .summary
            .iter()
            .any(|f| f.name == "final_sum_after_ring_messaging"),
        "{:?}",
        session.meta.summary
    );
    assert!(!session.latency.is_empty(), "no latency histograms");
    assert!(
        session
            .rows
            .iter()
            .any(|r| r.counters.contains_key("messages"))
    );
}

#[test]
fn attach_profiles_a_running_process_and_leaves_it_running() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("attach");
    let (output, still_running) =
        attach_to_shell("while :; do :; done", &["--interval", "200ms"], &dir);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(still_running, "attach ended the process");
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    assert_eq!(session.meta.workload.name, "sh");
    assert!(session.rows.len() >= 3, "{} rows", session.rows.len());
    let folded = std::fs::read_to_string(dir.join("cpu.folded")).unwrap();
    // A second of a busy shell at 999 Hz: far fewer samples when the machine is loaded and
    // the shell gets less of a CPU, but never none.
    assert!(weight_under(&folded, "sh") > 20, "{folded}");
}

#[test]
fn attach_to_a_missing_process_is_refused_before_any_session() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("none");
    let output = benchtop()
        .args(["attach", "4194304", "--record"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("no process with pid 4194304"));
    assert!(!dir.exists());
}

#[test]
fn attach_to_a_zombie_is_refused_in_its_own_words_before_any_session() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("zombie");
    // A child this test never waits for until the end: once it exits, it is a zombie.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    crate::support::wait_until(
        "the child a zombie",
        std::time::Duration::from_secs(30),
        || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
        },
    );
    let output = benchtop()
        .args(["attach", &pid.to_string(), "--record"])
        .arg(&dir)
        .output()
        .unwrap();
    child.wait().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!("pid {pid} is a zombie"))
            && stderr.contains(&format!("parent (pid {})", std::process::id())),
        "{stderr}"
    );
    assert!(!stderr.contains("no process with pid"), "{stderr}");
    assert!(!dir.exists());
}

#[test]
fn run_without_a_workload_or_command_says_what_to_give() {
    let output = benchtop().arg("run").output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("benchtop run ring") && stderr.contains("--"),
        "{stderr}"
    );
}

/// pyenv's CPython 3.12 (under `$PYENV_ROOT` or `~/.pyenv`): the `python3.12` on PATH
/// is a pyenv shim that fails while another version is global. scripts/test checks that
/// it is there.
fn python312() -> std::path::PathBuf {
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
            "no CPython 3.12 under {}: install it with `pyenv install 3.12`",
            versions.display()
        )
    })
}

#[test]
fn jit_sets_the_runtimes_environment_and_python_frames_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    // The environment the command gets: the user's own node options kept.
    let dir = tmp.path().join("env");
    let output = benchtop()
        .env("NODE_OPTIONS", "--max-old-space-size=512")
        .env_remove("JAVA_TOOL_OPTIONS")
        .args(["run", "--quiet", "--jit", "--profile", "none", "--record"])
        .arg(&dir)
        .args(["--", "sh", "-c"])
        .arg("echo \"$PYTHONPERFSUPPORT|$NODE_OPTIONS|$JAVA_TOOL_OPTIONS\" >&2")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    assert!(
        log.contains(
            "1|--max-old-space-size=512 --perf-basic-prof --interpreted-frames-native-stack|\
             -XX:+PreserveFramePointer -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit"
        ),
        "{log}"
    );
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.workload.params["jit"], true);

    // CPython with nothing but --jit: its functions are named from its perf map.
    let script = tmp.path().join("loop.py");
    std::fs::write(
        &script,
        "import time\n\
         def spin_here(n):\n    s = 0\n    for i in range(n):\n        s = (s + i) % 7919\n    return s\n\
         t = time.process_time()\n\
         while time.process_time() - t < 1.0:\n    spin_here(100000)\n",
    )
    .unwrap();
    let dir = tmp.path().join("py");
    let python = python312();
    // One interval longer than the run: its samples are named after the process ended
    // (as on a loaded machine, which reads them late), from the map it left in /tmp.
    let output = run_command(
        &dir,
        &["--jit", "--profile", "cpu", "--interval", "30s"],
        &[python.to_str().unwrap(), script.to_str().unwrap()],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let folded = std::fs::read_to_string(dir.join("cpu.folded")).unwrap();
    let total: u64 = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    let named: u64 = folded
        .lines()
        .filter(|l| l.contains(";py::spin_here:"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    assert!(
        named * 10 >= total * 7,
        "py::spin_here in {named} of {total} samples:\n{folded}"
    );
}
