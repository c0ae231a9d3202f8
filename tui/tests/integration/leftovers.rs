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
