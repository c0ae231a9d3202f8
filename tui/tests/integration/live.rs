//! Any program, live, in a real terminal (tmux): `run --tui -- <command>` and `attach PID
//! --tui` on a C fixture with a known call tree (tests/data/live/calltree.c: main →
//! calltree_work → calltree_hot, calltree_cold), at 160×48 and at 80×24. Its functions
//! show in the flamegraph, the process CPU pane takes the throughput's place, `q` leaves
//! and restores the terminal, and the session it leaves reads with `show`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use benchtop_sessions::store::Session;

use crate::support::benchtop;
use crate::terminal::{Tmux, shell_quote};

/// Builds tests/data/live/calltree.c into `dir` with the system's C compiler.
fn build_calltree(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/live/calltree.c");
    let exe = dir.join("calltree");
    let out = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&source)
        .output()
        .expect("cc (gcc) is needed: scripts/test installs it");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// `benchtop <args>` in tmux at `width`×`height`, then its exit code on the screen.
fn in_tmux(args: &str, width: u16, height: u16) -> Tmux {
    Tmux::start_sized(
        &format!(
            "{} {args}; echo EXIT=$?; sleep 60",
            shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop")))
        ),
        width,
        height,
    )
}

/// The live screen shows the fixture's functions and its process CPU; `q` stops the run,
/// the TUI leaves with the terminal restored and the session is written.
fn watch_then_quit(tmux: &Tmux, dir: &Path) {
    // A frame is written top to bottom: wait for every part of it.
    let screen = tmux.wait_for_all(&["process CPU", "calltree_work", "calltree_hot"]);
    assert!(tmux.alternate_screen(), "{screen}");
    assert!(screen.contains("switches, samples"), "{screen}");
    // Samples per second come from the second stacks on (`samples 990/s  cpu-clock …`).
    tmux.wait_for("/s  cpu-clock");
    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        !tmux.alternate_screen(),
        "the terminal is restored: {screen}"
    );
    assert!(screen.contains("session: "), "{screen}");
    let session = Session::load(dir).unwrap();
    assert!(!session.rows.is_empty());
    let show = benchtop().arg("show").arg(dir).output().unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success(), "{text}");
    assert!(text.contains("calltree_hot"), "{text}");
}

fn run_tui_shows_the_commands_functions(width: u16, height: u16) {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_calltree(tmp.path());
    let dir = tmp.path().join("session");
    let tmux = in_tmux(
        &format!(
            "run --tui --interval 200ms --record {} -- {} 600",
            shell_quote(&dir),
            shell_quote(&exe)
        ),
        width,
        height,
    );
    watch_then_quit(&tmux, &dir);
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.workload.name, "calltree");
    // `q` stopped the command (SIGINT) rather than waiting its ten minutes out.
    assert_eq!(session.meta.status, benchtop_sessions::Status::Stopped);
}

#[test]
fn run_tui_of_a_command_shows_its_functions_live_at_160x48() {
    run_tui_shows_the_commands_functions(160, 48);
}

#[test]
fn run_tui_of_a_command_shows_its_functions_live_at_80x24() {
    run_tui_shows_the_commands_functions(80, 24);
}

fn attach_tui_shows_the_processs_functions(width: u16, height: u16) {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_calltree(tmp.path());
    let mut target = Command::new(&exe)
        .arg("600")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let dir = tmp.path().join("session");
    let tmux = in_tmux(
        &format!(
            "attach {} --tui --interval 200ms --record {}",
            target.id(),
            shell_quote(&dir)
        ),
        width,
        height,
    );
    watch_then_quit(&tmux, &dir);
    let still_running = target.try_wait().unwrap().is_none();
    let _ = target.kill();
    let _ = target.wait();
    assert!(still_running, "q detaches: the process keeps running");
}

#[test]
fn attach_tui_shows_a_running_processs_functions_live_at_160x48() {
    attach_tui_shows_the_processs_functions(160, 48);
}

#[test]
fn attach_tui_shows_a_running_processs_functions_live_at_80x24() {
    attach_tui_shows_the_processs_functions(80, 24);
}

#[test]
fn attach_refuses_only_a_baseline() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("refused");
    let out = benchtop()
        .args(["attach", "1", "--baseline"])
        .arg(tmp.path())
        .arg("--record")
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--baseline"), "{stderr}");
    assert!(!dir.exists());
    // --tui is taken: without a terminal it says so rather than refusing the flag.
    let out = benchtop()
        .args(["attach", &std::process::id().to_string(), "--tui"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("attach records headless"), "{stderr}");
}
