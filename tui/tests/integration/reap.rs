//! `benchtop reap` end to end, and the orphan notice at the start of a run.

use std::os::unix::process::{CommandExt, ExitStatusExt};
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

/// Pids of the live processes whose environment names `session` (zombies excluded).
pub(crate) fn marked_with(session: &str) -> Vec<u32> {
    marked(|_, s| s == Some(session))
}

/// Pids of the live processes of the recording into `dir`, whose session is `session`:
/// marked with it, and owned by a recorder whose command line names `dir` (sessions
/// started in the same second share an id) or by one that is gone (left behind).
pub(crate) fn marked_by_recording(dir: &std::path::Path, session: &str) -> Vec<u32> {
    let dir = dir.as_os_str().as_encoded_bytes();
    marked(|owner, s| {
        let gone = benchtop_profilers::process_start_ticks(owner.pid) != Some(owner.start_ticks);
        let recording_dir = || {
            std::fs::read(format!("/proc/{}/cmdline", owner.pid))
                .is_ok_and(|cmdline| cmdline.split(|&b| b == 0).any(|arg| arg == dir))
        };
        s == Some(session) && (gone || recording_dir())
    })
}

/// Pids of the live processes whose owner marker `ours` accepts (zombies excluded).
fn marked(ours: impl Fn(&benchtop_profilers::reaper::Owner, Option<&str>) -> bool) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let live = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z'))
        });
        // The reaper's own reading of the marker.
        let marked = benchtop_profilers::reaper::parse_marker(&environ)
            .is_some_and(|(owner, s)| ours(&owner, s.as_deref()));
        if live && marked {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Ends the processes when dropped, so a failing assertion leaks nothing.
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: kill(2) with a pid this test started or found under its own session.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
    }
}

#[test]
fn after_an_ipc_ring_crash_reap_ends_exactly_the_nodes_left_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crash");
    let output = benchtop()
        .args([
            "run",
            "ring",
            "--transport",
            "ipc",
            "--num-nodes",
            "4",
            "--num-rounds",
            "100000000",
            "--crash-after",
            "5000",
            "--profile",
            "none",
            "--quiet",
            "--record",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!output.status.success(), "a crashed run exits with failure");
    let session = benchtop_sessions::store::Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, benchtop_sessions::Status::Crashed);
    let id = session.meta.id.clone();

    // The main node panicked; its three node processes are left, as the original's were.
    let mut nodes = Vec::new();
    wait_until("the nodes left behind", Duration::from_secs(10), || {
        nodes = marked_with(&id);
        nodes.len() == 3
    });
    let _cleanup = KillOnDrop(nodes.clone());
    for &pid in &nodes {
        assert_eq!(comm(pid), "bt-ring-node", "pid {pid}");
    }

    // Decoys, none of which may be signalled:
    // 1. no marker, but a command line like a node's (what `pgrep -f` would match);
    let mut lookalike = Command::new("sleep")
        .arg0("benchtop worker ipc-node --role ring --node-id 1")
        .arg("1000")
        .env_remove("BENCHTOP_OWNER")
        .env_remove("BENCHTOP_SESSION")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // 2. the same session's marker, but an owner that is alive (this test);
    let alive_owner = benchtop_profilers::reaper::Owner::current().unwrap();
    let mut owned = Command::new("sleep")
        .arg("1000")
        .env("BENCHTOP_OWNER", alive_owner.to_string())
        .env("BENCHTOP_SESSION", &id)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // 3. a process that took a dead owner's pid: the marked process naming that pid with
    //    another start time is an orphan, the process now at the pid is not.
    let mut reuser = Command::new("sleep")
        .arg("1000")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let reuser_start = benchtop_profilers::process_start_ticks(reuser.id()).unwrap();
    let mut stale = Command::new("sleep")
        .arg("1000")
        .env(
            "BENCHTOP_OWNER",
            format!("{}:{}", reuser.id(), reuser_start + 1),
        )
        .env("BENCHTOP_SESSION", &id)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));

    let (ok, out, err) = stdout_of(benchtop().args(["reap", "--dry-run", "--session", &id]));
    assert!(ok, "{out}\n{err}");
    for &pid in nodes.iter().chain([&stale.id()]) {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(&format!("{pid} "))),
            "{pid} not listed:\n{out}"
        );
    }
    for pid in [lookalike.id(), owned.id(), reuser.id()] {
        assert!(
            !out.lines()
                .any(|l| l.trim_start().starts_with(&format!("{pid} "))),
            "{pid} listed:\n{out}"
        );
    }
    assert!(out.contains("gone, pid reused"), "{out}");

    let (ok, out, err) = stdout_of(benchtop().args(["reap", "--session", &id, "--grace", "2s"]));
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("ending 4 processes"), "{out}");
    wait_until("the orphans to end", Duration::from_secs(10), || {
        marked_with(&id) == [owned.id()]
    });
    assert_eq!(stale.wait().unwrap().signal(), Some(libc::SIGTERM));
    for (name, child) in [
        ("the look-alike", &mut lookalike),
        ("the process with a live owner", &mut owned),
        ("the process at a reused pid", &mut reuser),
    ] {
        assert!(child.try_wait().unwrap().is_none(), "{name} was signalled");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// A child killed when the test ends, passed or failed: an orphan left running would
/// hold the test's output open.
struct EndOnDrop(Child);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A marked `sleep` running as `uid`, with escape sequences and a forged row in its
/// argv and its session marker.
fn spawn_hostile_orphan(session: &str, uid: u32) -> Child {
    let init_start = benchtop_profilers::process_start_ticks(1).unwrap();
    // bash's `exec -a` makes the hostile text sleep's argv[0].
    Command::new("bash")
        .args([
            "-c",
            "exec -a \"$0\" sleep 1000",
            "sleep\x1b]0;owned\x07\r\n 999  root  fake row",
        ])
        .env("BENCHTOP_OWNER", format!("1:{}", init_start + 1))
        .env("BENCHTOP_SESSION", format!("{session}\x1b[2J"))
        .uid(uid)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn as_root_reap_names_another_users_orphan_leaves_it_until_all_users_and_escapes_its_text() {
    // SAFETY: geteuid(2) cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && std::env::var_os("BENCHTOP_TESTS_WITHOUT_ROOT").is_some() {
        return;
    }
    assert!(
        root,
        "this test needs root (to start a process as another user); \
         BENCHTOP_TESTS_WITHOUT_ROOT=1 opts out"
    );
    let session = format!("reap-other-{}", std::process::id());
    // nobody's uid: a user that exists everywhere.
    let nobody = 65534;
    let mut orphan = EndOnDrop(spawn_hostile_orphan(&session, nobody));
    let orphan = &mut orphan.0;
    let pid = orphan.id().to_string();
    wait_until("the orphan to exec sleep", Duration::from_secs(5), || {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
    });
    let escaped_session = format!("{session}\\x1b[2J");

    let output = benchtop()
        .args(["reap", "--dry-run", "--session"])
        .arg(format!("{session}\x1b[2J"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{out}");
    assert!(!out.contains('\x1b') && !out.contains('\r'), "{out:?}");
    let line = out.lines().find(|l| l.contains(&pid)).expect(&out);
    assert!(line.contains("nobody") || line.contains("65534"), "{line}");
    assert!(line.contains(&escaped_session), "{line}");
    assert_eq!(
        out.lines().filter(|l| l.contains("fake row")).count(),
        1,
        "{out}"
    );

    // Without --all-users: listed, left alone, said how to end it, exit 1.
    let output = benchtop()
        .args(["reap", "--session"])
        .arg(format!("{session}\x1b[2J"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(
        out.contains("left alone: 1 process of other users"),
        "{out}"
    );
    assert!(out.contains("--all-users"), "{out}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        orphan.try_wait().unwrap().is_none(),
        "another user's process was signalled"
    );

    let output = benchtop()
        .args(["reap", "--all-users", "--session"])
        .arg(format!("{session}\x1b[2J"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{out}");
    assert!(out.contains(&format!("{pid}  ended")), "{out}");
    let mut status = None;
    wait_until("the orphan to end", Duration::from_secs(5), || {
        status = orphan.try_wait().unwrap();
        status.is_some()
    });
}
