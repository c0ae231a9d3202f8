//! A run that leaves processes behind says so, naming them: a command's background job,
//! and one that left the process group.

use benchtop_sessions::store::Session;

use crate::support::benchtop;

/// Ends the process `pid` (the test's own leftovers).
fn end(pid: u32) {
    // SAFETY: a signal to a pid the test's run just named as its own leftover.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

#[test]
fn processes_that_outlive_the_run_are_named_in_the_session() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let out = benchtop()
        .args(["run", "--quiet", "--profile", "none", "--record"])
        .arg(&dir)
        .args([
            "--",
            "sh",
            "-c",
            "sleep 60 & setsid sleep 61 & sleep 0.2; exit 0",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let session = Session::load(&dir).unwrap();
    let warning = session
        .meta
        .warnings
        .iter()
        .find(|w| w.contains("still run after it ended"))
        .cloned()
        .unwrap_or_default();
    // Whatever the assertions say, the sleeps do not outlive the test.
    let named = warning
        .split_once("ended:")
        .map_or("", |(_, rest)| rest)
        .split("`benchtop reap`")
        .next()
        .unwrap_or("");
    let pids: Vec<u32> = named
        .split(';')
        .filter_map(|part| part.split_whitespace().next()?.parse().ok())
        .filter(|&pid| pid > 1)
        .collect();
    for &pid in &pids {
        end(pid);
    }
    assert!(out.status.success(), "{stderr}");
    assert!(
        warning.starts_with("2 process(es) the run started"),
        "{warning}"
    );
    assert_eq!(pids.len(), 2, "{warning}");
    assert_eq!(warning.matches(" sleep").count(), 2, "{warning}");
    assert_eq!(
        warning.matches("(left the process group)").count(),
        1,
        "{warning}"
    );
    assert!(stderr.contains("still run after it ended"), "{stderr}");
}

/// `sessions/NAME` under `cwd` recorded by a ring of `rounds` rounds, to its end.
fn ring_under(cwd: &std::path::Path, name: &str, rounds: &str) {
    let out = benchtop()
        .current_dir(cwd)
        .args(["run", "ring", "--num-rounds", rounds, "--profile", "none"])
        .args(["--quiet", "--record"])
        .arg(format!("sessions/{name}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Makes `path`'s modification time a minute old: older than a recorder between
/// creating its reserve and locking it ever is.
fn age(path: &std::path::Path) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
        .unwrap();
}

#[test]
fn the_disk_a_killed_recorder_held_is_freed_by_the_next_recorder_and_by_reap() {
    use benchtop_sessions::store::{RESERVE_FILE, SESSION_FILE};
    use std::time::Duration;

    let tmp = tempfile::tempdir().unwrap();
    let sessions = tmp.path().join("sessions");
    let a = sessions.join("a");
    let mut recorder = benchtop()
        .current_dir(tmp.path())
        .args([
            "run",
            "ring",
            "--num-rounds",
            "100000000",
            "--duration",
            "60s",
        ])
        .args([
            "--profile",
            "none",
            "--interval",
            "100ms",
            "--quiet",
            "--record",
        ])
        .arg("sessions/a")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    crate::support::wait_until("a recording under way", Duration::from_secs(60), || {
        crate::support::complete_lines(&a.join("timeseries.jsonl")) >= 1
    });
    let reserve = a.join(RESERVE_FILE);
    assert!(reserve.is_file());
    age(&reserve);
    // While it records, its reserve is its own: another run under the same root keeps it.
    ring_under(tmp.path(), "b", "1000");
    assert!(reserve.is_file(), "a recording's reserve was taken from it");
    // Cut off: nothing frees it but the next recorder.
    recorder.kill().unwrap();
    recorder.wait().unwrap();
    assert!(reserve.is_file());
    let id = Session::load(&a).unwrap().meta.id;
    ring_under(tmp.path(), "c", "1000");
    assert!(
        !reserve.exists(),
        "the next recorder left a crashed one's reserve"
    );
    let session = Session::load(&a).unwrap();
    assert!(
        !session.warnings.iter().any(|w| w.contains(RESERVE_FILE)),
        "{:?}",
        session.warnings
    );

    // `reap` frees one as well (here planted as a crashed recorder leaves it), and ends
    // what the killed recorder left running (its session's processes only).
    let planted = sessions.join("z");
    std::fs::create_dir(&planted).unwrap();
    std::fs::copy(a.join(SESSION_FILE), planted.join(SESSION_FILE)).unwrap();
    std::fs::write(planted.join(RESERVE_FILE), vec![0u8; 4096]).unwrap();
    age(&planted.join(RESERVE_FILE));
    let out = benchtop()
        .current_dir(tmp.path())
        .args(["reap", "--grace", "1s", "--session", &id])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("freed 4.00 KiB left in 1 session of recorders that were cut off"),
        "{stdout}"
    );
    assert!(!planted.join(RESERVE_FILE).exists(), "{stdout}");
    assert!(planted.join(SESSION_FILE).is_file() && a.join(SESSION_FILE).is_file());
}
