//! The binary in a real terminal (tmux): the live progress line, and Ctrl-C typed at the
//! keyboard, which the terminal sends to the whole foreground process group.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use benchtop_sessions::Status;
use benchtop_sessions::store::Session;

use crate::support::wait_until;

/// A tmux server of its own, killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(command: &str) -> Tmux {
        let found = Command::new("tmux").arg("-V").output();
        assert!(
            found.is_ok_and(|o| o.status.success()),
            "tmux is needed for the terminal tests: apt-get install tmux (.ci/run installs it)"
        );
        let socket = format!("benchtop-test-{}", std::process::id());
        let status = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                "120",
                "-y",
                "30",
            ])
            .arg(command)
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        Tmux { socket }
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-t", "t"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "t", keys])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn wait_for(&self, text: &str) -> String {
        let mut screen = String::new();
        wait_until(
            &format!("{text:?} on the screen"),
            Duration::from_secs(60),
            || {
                screen = self.screen();
                screen.contains(text)
            },
        );
        screen
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

fn shell_quote(path: &Path) -> String {
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
