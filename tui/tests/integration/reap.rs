//! `benchtop reap` end to end, and the orphan notice at the start of a run.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::{benchtop, wait_until};

/// A marked `sleep` whose owner is gone: pid 1 with a start time it never had.
fn spawn_orphan(session: &str) -> Child {
    let init_start = benchtop_profilers::process_start_ticks(1).unwrap();
    Command::new("sleep")
        .arg("1000")
        .env("BENCHTOP_OWNER", format!("1:{}", init_start + 1))
        .env("BENCHTOP_SESSION", session)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

fn stdout_of(command: &mut Command) -> (bool, String, String) {
    let output = command.output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn reap_lists_in_a_dry_run_then_ends_the_sessions_orphans() {
    let session = format!("reap-e2e-{}", std::process::id());
    let mut orphan = spawn_orphan(&session);
    let pid = orphan.id().to_string();
    std::thread::sleep(Duration::from_millis(100));

    let (ok, out, err) = stdout_of(benchtop().args(["reap", "--dry-run", "--session", &session]));
    assert!(ok, "{out}\n{err}");
    let line = out.lines().find(|l| l.contains(&pid)).expect(&out);
    assert!(
        line.contains("sleep 1000") && line.contains(&session),
        "{line}"
    );
    assert!(line.contains("1 (gone, pid reused)"), "{line}");
    assert!(out.contains("dry run: nothing signalled"), "{out}");
    assert!(orphan.try_wait().unwrap().is_none(), "a dry run signalled");

    // A run started now says that something was left behind.
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, err) = stdout_of(
        benchtop()
            .args([
                "run",
                "ring",
                "--num-nodes",
                "10",
                "--num-rounds",
                "1",
                "--quiet",
            ])
            .args(["--profile", "none", "--record"])
            .arg(dir.path().join("s")),
    );
    assert!(ok, "{out}\n{err}");
    assert!(err.contains("left behind by earlier runs"), "{err}");
    assert!(err.contains("benchtop reap"), "{err}");

    let (ok, out, err) = stdout_of(benchtop().args(["reap", "--session", &session]));
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("ending 1 process: SIGTERM"), "{out}");
    assert!(out.contains(&format!("{pid}  ended")), "{out}");
    let mut status = None;
    wait_until("the orphan to end", Duration::from_secs(5), || {
        status = orphan.try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.and_then(|s| s.signal()), Some(libc::SIGTERM));

    let (ok, out, _) = stdout_of(benchtop().args(["reap", "--session", &session]));
    assert!(ok && out.contains("no orphans"), "{out}");
}
