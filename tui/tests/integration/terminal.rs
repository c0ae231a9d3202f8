//! The binary in a real terminal (tmux): the live progress line, and Ctrl-C typed at the
//! keyboard, which the terminal sends to the whole foreground process group.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use benchtop_sessions::Status;
use benchtop_sessions::store::Session;

/// A tmux server of its own, killed on drop.
pub(crate) struct Tmux {
    pub(crate) socket: String,
}

impl Tmux {
    pub(crate) fn start(command: &str) -> Tmux {
        Tmux::start_sized(command, 120, 30)
    }

    /// A server whose one pane runs `command` in a window of `width`×`height`.
    pub(crate) fn start_sized(command: &str, width: u16, height: u16) -> Tmux {
        let found = Command::new("tmux").arg("-V").output();
        assert!(
            found.is_ok_and(|o| o.status.success()),
            "tmux is needed for the terminal tests: apt-get install tmux (scripts/test installs it)"
        );
        // A server per test: tests of this binary run in parallel.
        static SERVERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SERVERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let socket = format!("benchtop-test-{}-{n}", std::process::id());
        let status = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
            ])
            .arg(command)
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        Tmux { socket }
    }

    pub(crate) fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-t", "t"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) fn keys(&self, keys: &str) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "t", keys])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for `text` on the screen (at most a minute) and returns the screen; the
    /// failure shows the last screen.
    pub(crate) fn wait_for(&self, text: &str) -> String {
        self.wait_for_long(text, Duration::from_secs(60))
    }

    /// [`Tmux::wait_for`] with a longer wait, for screens that take long to come (a
    /// large session loading in a debug build).
    pub(crate) fn wait_for_long(&self, text: &str, timeout: Duration) -> String {
        let start = std::time::Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                start.elapsed() < timeout,
                "timed out waiting for {text:?} on the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

pub(crate) fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

#[test]
fn in_a_terminal_the_progress_line_is_live_and_ctrl_c_stops_the_run_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tty");
    let command = format!(
        "{} run ring --num-nodes 1000 --num-rounds 100000000 --interval 200ms --record {}; \
         echo EXIT=$?; sleep 60",
        shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop"))),
        shell_quote(&dir)
    );
    let tmux = Tmux::start(&command);
    let screen = tmux.wait_for("messages/s");
    assert!(
        screen.contains("lap p50") && screen.contains("RSS"),
        "{screen}"
    );
    // Ctrl-C at the keyboard: SIGINT to the terminal's foreground process group. The
    // worker runs in a group of its own, so only the conductor sees it and stops the
    // worker through the protocol.
    tmux.keys("C-c");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        screen.contains("final_sum_after_ring_messaging:"),
        "{screen}"
    );
    assert!(screen.contains("(stopped)"), "{screen}");
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Stopped);
    assert!(!session.rows.is_empty());
}

impl Tmux {
    /// Types `text` as it is (no key names).
    pub(crate) fn type_text(&self, text: &str) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-l", "-t", "t", text])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for every one of `texts` on the screen at once (at most a minute) and returns
    /// the screen.
    pub(crate) fn wait_for_all(&self, texts: &[&str]) -> String {
        let start = std::time::Instant::now();
        loop {
            let screen = self.screen();
            if texts.iter().all(|t| screen.contains(t)) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "timed out waiting for all of {texts:?} on the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the pane shows the alternate screen (a TUI that did not restore it).
    pub(crate) fn alternate_screen(&self) -> bool {
        let out = Command::new("tmux")
            .args([
                "-L",
                &self.socket,
                "display",
                "-p",
                "-t",
                "t",
                "#{alternate_on}",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }
}

/// `benchtop run ring … --tui --record <dir>` in tmux, then the exit code on the screen.
fn tui_ring(dir: &Path) -> Tmux {
    Tmux::start(&format!(
        "{} run ring --num-nodes 1000 --num-rounds 100000000 --interval 200ms --tui \
         --record {}; echo EXIT=$?; sleep 60",
        shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop"))),
        shell_quote(dir)
    ))
}

#[test]
fn benchtop_opens_the_launcher_runs_the_ring_live_takes_a_baseline_searches_and_quits() {
    let tmp = tempfile::tempdir().unwrap();
    // `benchtop` alone, in a directory of its own: sessions go to ./sessions/.
    let tmux = Tmux::start(&format!(
        "cd {} && {}; echo EXIT=$?; sleep 60",
        shell_quote(tmp.path()),
        shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop")))
    ));
    // A frame is written top to bottom: wait for every part, not the first.
    let screen = tmux.wait_for_all(&["parameters of ring", "▶ ring", "storm"]);
    assert!(
        screen.contains("▶ ring") && screen.contains("storm"),
        "{screen}"
    );
    assert!(
        tmux.alternate_screen(),
        "the TUI runs on the alternate screen"
    );
    // Parameters edited in place: a smaller ring that runs until stopped.
    tmux.keys("Tab");
    tmux.keys("Enter");
    tmux.type_text("1000");
    tmux.keys("Enter");
    tmux.keys("Down");
    tmux.keys("Enter");
    // The launcher's preset (80000) is edited like any value: erase it first.
    for _ in "80000".chars() {
        tmux.keys("BSpace");
    }
    tmux.type_text("100000000");
    tmux.keys("Enter");
    tmux.keys("BTab");
    tmux.keys("Enter");
    let screen = tmux.wait_for("● running");
    assert!(
        screen.contains("num-nodes=1000") && screen.contains("num-rounds=100000000"),
        "{screen}"
    );
    // The histogram pane shows counts, the flame pane the ring worker's frames.
    let screen = tmux.wait_for("count");
    assert!(
        screen.contains("lap, whole run") && screen.contains("p99.9"),
        "{screen}"
    );
    // Short names and hidden plumbing first: the legend shows; `w` brings whole names.
    tmux.wait_for("■ ours");
    tmux.keys("w");
    let screen = tmux.wait_for("benchtop_workloads::");
    assert!(screen.contains("bt-ring"), "{screen}");

    tmux.keys("b");
    tmux.wait_for("baseline taken at");
    tmux.keys("d");
    tmux.wait_for("on-CPU diff");
    tmux.keys("/");
    tmux.type_text("ring::actors");
    tmux.keys("Enter");
    let screen = tmux.wait_for("/ring::actors:");
    assert!(screen.contains("% of"), "{screen}");
    tmux.keys("s");
    tmux.wait_for("snapshot saved: cpu.folded");

    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(screen.contains("(stopped)"), "{screen}");
    assert!(!tmux.alternate_screen(), "the terminal is restored");
    let sessions: Vec<_> = std::fs::read_dir(tmp.path().join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let session = Session::load(&sessions[0]).unwrap();
    assert_eq!(session.meta.status, Status::Stopped);
    assert!(sessions[0].join("cpu.folded").exists());
}

#[test]
fn a_workload_killed_from_outside_is_reported_and_the_tui_stays_up() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("killed");
    let tmux = tui_ring(&dir);
    tmux.wait_for("● running");
    let session = Session::load(&dir).unwrap();
    let pid = session
        .meta
        .worker
        .pid
        .expect("the worker's pid in session.json");
    // SAFETY: kill(2) on the worker this test started through benchtop.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) }, 0);
    let screen = tmux.wait_for("● crashed");
    assert!(screen.contains("the run ended: crashed"), "{screen}");
    // Still up, and still answering keys.
    std::thread::sleep(Duration::from_millis(500));
    tmux.keys("?");
    tmux.wait_for("key closes");
    tmux.keys("Escape");
    // Esc and q read together are Alt-q, which is no key: q only once the help is closed.
    let start = std::time::Instant::now();
    while tmux.screen().contains("key closes") {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the help stayed open"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=1"), "{screen}");
    assert!(screen.contains("(crashed)"), "{screen}");
    assert!(!tmux.alternate_screen());
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Crashed);
}

#[test]
fn benchtop_open_shows_two_sessions_side_by_side_and_one_session_as_it_ended() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("tell"), tmp.path().join("ask"));
    crate::compare::session(&a, "tell", 1.2e6, "AskActor::poll", 10);
    crate::compare::session(&b, "ask", 0.8e6, "AskActor::poll", 60);
    let benchtop = shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop")));
    let tmux = Tmux::start(&format!(
        "{benchtop} open {} {}; echo EXIT=$?; sleep 60",
        shell_quote(&a),
        shell_quote(&b)
    ));
    // A frame is written top to bottom: wait for every part, not the first.
    tmux.wait_for_all(&[
        "diff: B against A",
        "messages/s",
        "undecided — needs",
        "share per bin",
        "d diff/B only",
    ]);
    // Into the flamegraph: search, then B alone.
    tmux.keys("3");
    tmux.type_text("/AskActor");
    tmux.keys("Enter");
    tmux.wait_for("1 match");
    tmux.keys("d");
    tmux.wait_for("on-CPU of B");
    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(!tmux.alternate_screen(), "the terminal was not restored");

    let tmux = Tmux::start(&format!(
        "{benchtop} open {}; echo EXIT=$?; sleep 60",
        shell_quote(&a)
    ));
    tmux.wait_for_all(&[
        "● complete",
        "lap, whole run",
        "mailbox::send",
        "b baseline",
    ]);
    tmux.keys("q");
    assert!(tmux.wait_for("EXIT=").contains("EXIT=0"));

    // A broken session is refused before the terminal changes.
    std::fs::write(b.join("session.json"), "{").unwrap();
    let tmux = Tmux::start(&format!(
        "{benchtop} open {} {}; echo EXIT=$?; sleep 60",
        shell_quote(&a),
        shell_quote(&b)
    ));
    let screen = tmux.wait_for("EXIT=");
    assert!(
        screen.contains("cannot open session B") && screen.contains("session.json: corrupt"),
        "{screen}"
    );
    assert!(screen.contains("EXIT=1"), "{screen}");
}

#[test]
fn the_launcher_opens_a_recent_session_and_two_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let sessions = tmp.path().join("sessions");
    for (name, mode) in [
        ("20261101-100000-ring", "tell"),
        ("20261102-100000-ring", "ask"),
    ] {
        let out = crate::support::run_command(
            &sessions.join(name),
            &[
                "ring",
                "--num-nodes",
                "100",
                "--num-rounds",
                "200",
                "--mode",
                mode,
            ],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let tmux = Tmux::start_sized(
        &format!(
            "cd {} && XDG_CONFIG_HOME=/nonexistent/benchtop-tests {}; echo EXIT=$?; sleep 60",
            shell_quote(tmp.path()),
            shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop")))
        ),
        160,
        48,
    );
    tmux.wait_for_all(&["20261102-100000-ring", "20261101-100000-ring", "▶ ring"]);
    // Shift-Tab from the workloads lands on the recent sessions; the newest is first.
    tmux.keys("BTab");
    tmux.wait_for("Enter open");
    tmux.keys("Enter");
    let screen = tmux.wait_for("● complete");
    assert!(screen.contains("mode=ask"), "{screen}");
    tmux.keys("Escape");
    tmux.wait_for("Enter open");
    // A is the older (tell), B the newer (ask).
    tmux.keys("Down");
    tmux.keys("m");
    tmux.wait_for("A marked");
    tmux.keys("Up");
    tmux.keys("Enter");
    let screen = tmux.wait_for("change verdict");
    let mut lines = screen.lines();
    let (a, b) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
    assert!(
        a.contains("compare A") && a.contains("mode=tell") && b.contains("mode=ask"),
        "{screen}"
    );
    tmux.keys("Escape");
    tmux.wait_for("Enter open");
    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
}

/// The first of README's "first five things", as the README writes it (`benchtop …`).
fn readme_first_command() -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let at = readme.find("# 1. ").expect("README's first thing");
    let line = readme[at..]
        .lines()
        .find(|l| l.starts_with("benchtop "))
        .expect("its command");
    line.split(" #").next().unwrap_or(line).trim().to_owned()
}

/// How many columns of the throughput pane's chart hold a bar.
fn throughput_points(screen: &str) -> usize {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let Some((top, left)) = lines.iter().enumerate().find_map(|(y, l)| {
        let text: String = l.iter().collect();
        let at = text.find("throughput")?;
        let x = text[..at].chars().count();
        l[..x].iter().rposition(|&c| c == '┌').map(|left| (y, left))
    }) else {
        return 0;
    };
    let right = lines[top][left..]
        .iter()
        .position(|&c| c == '┐')
        .map_or(lines[top].len(), |w| left + w);
    let mut columns = BTreeSet::new();
    for line in lines.iter().skip(top + 1) {
        if line.get(left) == Some(&'└') {
            break;
        }
        for (x, c) in line.iter().enumerate().take(right).skip(left + 1) {
            if ('▁'..='█').contains(c) {
                columns.insert(x);
            }
        }
    }
    columns.len()
}

#[test]
fn the_readmes_first_command_draws_a_throughput_chart_of_several_points_at_80x24() {
    let command = readme_first_command();
    let args = command
        .strip_prefix("benchtop ")
        .unwrap_or_else(|| panic!("README's first thing runs benchtop: {command}"));
    assert!(args.contains("--tui"), "{command}");
    // Long enough to watch on any machine: its length is a duration, not a number of
    // rounds that a fast machine gets through in a second.
    let duration = args
        .split_whitespace()
        .skip_while(|a| *a != "--duration")
        .nth(1)
        .and_then(|d| d.strip_suffix('s'))
        .and_then(|s| s.parse::<u64>().ok());
    assert!(
        duration.is_some_and(|s| s >= 10),
        "{command}: --duration of 10s or more"
    );
    let tmp = tempfile::tempdir().unwrap();
    let tmux = Tmux::start_sized(
        &format!(
            "cd {} && {} {args}; echo EXIT=$?; sleep 60",
            shell_quote(tmp.path()),
            shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop"))),
        ),
        80,
        24,
    );
    let start = std::time::Instant::now();
    loop {
        let screen = tmux.screen();
        if throughput_points(&screen) >= 3 {
            assert!(screen.contains("● running"), "still going: {screen}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "`{command}`: no throughput chart of 3 points:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
}
