//! The TUI ended every way but by its keys, in a real terminal (tmux): signals to `open`
//! and to `run --tui`, a terminal that goes away, and terminals too small for it. After
//! each the pane must be the shell's again: out of the alternate screen, cursor shown,
//! mouse reporting off, and `stty -a` in the same pane showing canonical input and echo.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use benchtop_sessions::Status;
use benchtop_sessions::store::Session;

use crate::terminal::{Tmux, shell_quote};

const SIGNALS: [(libc::c_int, &str); 4] = [
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGHUP, "SIGHUP"),
    (libc::SIGINT, "SIGINT"),
    (libc::SIGQUIT, "SIGQUIT"),
];

impl Tmux {
    /// A pane variable (`alternate_on`, `cursor_flag`, `mouse_any_flag`…).
    fn pane_flag(&self, name: &str) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "display", "-p", "-t", "t"])
            .arg(format!("#{{{name}}}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn resize(&self, width: u16, height: u16) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "resize-window", "-t", "t", "-x"])
            .arg(width.to_string())
            .arg("-y")
            .arg(height.to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The pane is the shell's again, and `stty -a` (printed after `EXIT=` by the command
    /// line of [`shell_after`]) shows the terminal out of raw mode.
    fn assert_restored(&self) {
        let screen = self.wait_for("STTY-END");
        assert_eq!(
            self.pane_flag("alternate_on"),
            "0",
            "alternate screen:\n{screen}"
        );
        assert_eq!(
            self.pane_flag("cursor_flag"),
            "1",
            "cursor hidden:\n{screen}"
        );
        assert_eq!(self.pane_flag("mouse_any_flag"), "0", "mouse on:\n{screen}");
        let words: Vec<&str> = screen
            .split(|c: char| c.is_whitespace() || c == ';')
            .collect();
        for mode in ["icanon", "echo", "isig"] {
            assert!(words.contains(&mode), "{mode} is off:\n{screen}");
            assert!(!words.contains(&format!("-{mode}").as_str()), "{screen}");
        }
    }
}

/// A shell command line that runs `args` of benchtop as a process whose pid lands in
/// `pid_file`, then prints its exit code and `stty -a`.
pub(crate) fn shell_after(pid_file: &Path, args: &str) -> String {
    format!(
        "sh -c 'echo $$ > {}; exec {} {args}'; echo EXIT=$?; stty -a; echo STTY-END; sleep 60",
        shell_quote(pid_file),
        shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop"))),
    )
}

pub(crate) fn read_pid(pid_file: &Path) -> libc::pid_t {
    let start = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no pid file");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) on the benchtop this test started.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

fn two_sessions(tmp: &Path) -> (PathBuf, PathBuf) {
    let (a, b) = (tmp.join("tell"), tmp.join("ask"));
    crate::compare::session(&a, "tell", 1.2e6, "AskActor::poll", 10);
    crate::compare::session(&b, "ask", 0.8e6, "AskActor::poll", 60);
    (a, b)
}

#[test]
fn each_ending_signal_to_open_restores_the_terminal_and_ends_it_as_that_signal() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = two_sessions(tmp.path());
    for (number, name) in SIGNALS {
        let pid_file = tmp.path().join(format!("open-{number}.pid"));
        let tmux = Tmux::start_sized(
            &shell_after(
                &pid_file,
                &format!("open {} {}", shell_quote(&a), shell_quote(&b)),
            ),
            80,
            24,
        );
        tmux.wait_for_all(&["diff: B against A", "p99.9", "q quit"]);
        assert_eq!(tmux.pane_flag("alternate_on"), "1");
        signal(read_pid(&pid_file), number);
        let screen = tmux.wait_for("EXIT=");
        assert!(
            screen.contains(&format!("EXIT={}", 128 + number)),
            "{name}:\n{screen}"
        );
        assert!(screen.contains(&format!("benchtop: {name}")), "{screen}");
        tmux.assert_restored();
    }
}

#[test]
fn each_ending_signal_to_run_tui_stops_the_run_writes_the_session_and_restores_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    for (number, name) in SIGNALS {
        let dir = tmp.path().join(format!("run-{number}"));
        let pid_file = tmp.path().join(format!("run-{number}.pid"));
        let tmux = Tmux::start_sized(
            &shell_after(
                &pid_file,
                &format!(
                    "run ring --num-nodes 1000 --num-rounds 100000000 --interval 200ms \
                     --tui --record {}",
                    shell_quote(&dir)
                ),
            ),
            80,
            24,
        );
        tmux.wait_for("● running");
        signal(read_pid(&pid_file), number);
        let screen = tmux.wait_for("EXIT=");
        assert!(
            screen.contains(&format!("EXIT={}", 128 + number)),
            "{name}:\n{screen}"
        );
        assert!(screen.contains("(stopped)"), "{name}:\n{screen}");
        tmux.assert_restored();
        let session = Session::load(&dir).unwrap();
        assert_eq!(session.meta.status, Status::Stopped, "{name}");
        assert!(!session.rows.is_empty(), "{name}");
        // The worker was stopped, not left behind.
        let worker = session.meta.worker.pid.expect("the worker's pid");
        assert!(
            !Path::new(&format!("/proc/{worker}")).exists()
                || std::fs::read_to_string(format!("/proc/{worker}/stat"))
                    .is_ok_and(|s| s.contains(") Z ")),
            "{name}: worker {worker} still runs"
        );
    }
}

/// Runs `args` of benchtop in tmux in a session of its own (setsid: the terminal's
/// hang-up sends it no SIGHUP, so only the TUI itself can notice the terminal went away),
/// waits for `ready` on the screen, closes the terminal, and returns what benchtop said
/// on stderr once it ended.
fn close_the_terminal_under(tmp: &Path, args: &str, ready: &[&str]) -> String {
    let pid_file = tmp.join("gone.pid");
    let err = tmp.join("gone.err");
    let tmux = Tmux::start_sized(
        &format!(
            "setsid sh -c 'echo $$ > {}; exec {} {args} 2>{}'; sleep 60",
            shell_quote(&pid_file),
            shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop"))),
            shell_quote(&err),
        ),
        80,
        24,
    );
    tmux.wait_for_all(ready);
    let pid = read_pid(&pid_file);
    drop(tmux); // kill-server: the pane's terminal closes.
    let start = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
    {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "benchtop still runs a minute after its terminal went away: {stat}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let said = std::fs::read_to_string(&err).unwrap();
    assert!(said.contains("the terminal went away"), "{said}");
    assert!(!said.contains("panicked"), "{said}");
    said
}

#[test]
fn a_terminal_that_goes_away_ends_open_and_its_input_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = two_sessions(tmp.path());
    close_the_terminal_under(
        tmp.path(),
        &format!("open {} {}", shell_quote(&a), shell_quote(&b)),
        &["diff: B against A", "q quit"],
    );
}

#[test]
fn a_terminal_that_goes_away_under_run_tui_stops_the_run_and_writes_the_session() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("gone");
    close_the_terminal_under(
        tmp.path(),
        &format!(
            "run ring --num-nodes 1000 --num-rounds 100000000 --interval 200ms --tui \
             --record {}",
            shell_quote(&dir)
        ),
        &["● running"],
    );
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Stopped);
}

#[test]
fn open_a_b_at_1x1_says_nothing_wrong_then_draws_at_80x24() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = two_sessions(tmp.path());
    let pid_file = tmp.path().join("tiny.pid");
    let tmux = Tmux::start_sized(
        &shell_after(
            &pid_file,
            &format!("open {} {}", shell_quote(&a), shell_quote(&b)),
        ),
        1,
        1,
    );
    read_pid(&pid_file);
    // The first cell of "60×18 or more needed".
    tmux.wait_for("6");
    assert_eq!(tmux.pane_flag("alternate_on"), "1");
    tmux.resize(30, 4);
    tmux.wait_for("60×18 or more needed");
    tmux.resize(80, 24);
    tmux.wait_for_all(&["diff: B against A", "p99.9", "q quit"]);
    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    tmux.assert_restored();
}

/// The names of `pid`'s threads; empty once it is gone (or a zombie).
fn thread_names(pid: libc::pid_t) -> Vec<String> {
    if std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z ")) {
        return Vec::new();
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

#[test]
fn keys_typed_as_the_terminal_goes_away_leave_no_input_thread_behind() {
    // The terminal closes while keys arrive, several times over: a hang-up landing while
    // crossterm reads the keys used to keep the input thread reading for ever, at 100 %
    // CPU, while `run --tui` went on to finish its session.
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..4 {
        let dir = tmp.path().join(format!("gone-{round}"));
        let pid_file = tmp.path().join(format!("gone-{round}.pid"));
        let tmux = Tmux::start_sized(
            &format!(
                "setsid sh -c 'echo $$ > {}; exec {} run ring --num-nodes 1000 \
                 --num-rounds 100000000 --interval 200ms --tui --record {} 2>/dev/null'; \
                 sleep 60",
                shell_quote(&pid_file),
                shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop"))),
                shell_quote(&dir),
            ),
            80,
            24,
        );
        tmux.wait_for("● running");
        let pid = read_pid(&pid_file);
        let socket = tmux.socket.clone();
        let typist = std::thread::spawn(move || {
            // Arrow keys until the server is gone.
            while Command::new("tmux")
                .args([
                    "-L",
                    &socket,
                    "send-keys",
                    "-t",
                    "t",
                    "Down",
                    "Up",
                    "Down",
                    "Up",
                ])
                .status()
                .is_ok_and(|s| s.success())
            {}
        });
        std::thread::sleep(Duration::from_millis(100 * round));
        drop(tmux); // kill-server: the pane's terminal closes under the keys.
        typist.join().unwrap();
        let closed = Instant::now();
        loop {
            let threads = thread_names(pid);
            if threads.is_empty() {
                break;
            }
            assert!(
                closed.elapsed() < Duration::from_secs(3)
                    || !threads.iter().any(|t| t == "bt-input"),
                "round {round}: the input thread outlives its terminal by 3 s: {threads:?}"
            );
            assert!(
                closed.elapsed() < Duration::from_secs(60),
                "round {round}: benchtop still runs a minute after its terminal went away"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let session = Session::load(&dir).unwrap();
        assert_eq!(session.meta.status, Status::Stopped, "round {round}");
    }
}
