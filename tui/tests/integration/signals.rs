//! The headless recorder's signals, sent to a real benchtop: SIGINT, SIGTERM, SIGHUP and
//! SIGQUIT each stop the run and keep its session; in a series the signal reaches whichever
//! recording of the process is running (the second here), and ends the series there; a
//! second signal kills the worker at once, a third ends benchtop.

use std::process::Stdio;
use std::time::Duration;

use benchtop_sessions::Status;
use benchtop_sessions::series::Series;
use benchtop_sessions::store::Session;

use crate::record::{start_endless_ring, start_endless_ring_with};
use crate::support::{benchtop, complete_lines, wait_until};

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) of the benchtop this test started.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0);
}

/// Whether `signal` waits for delivery to the process `pid` (ShdPnd of its status).
fn pending(pid: u32, signal: libc::c_int) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("ShdPnd:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
}

#[test]
fn sigterm_and_sighup_stop_a_headless_run_and_keep_a_stopped_session() {
    let tmp = tempfile::tempdir().unwrap();
    for (number, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGHUP, "SIGHUP")] {
        let dir = tmp.path().join(name);
        let conductor = start_endless_ring(&dir, 2);
        signal(conductor.id(), number);
        assert_stopped(conductor, &dir, name);
    }
}

#[test]
fn sigquit_stops_a_headless_run_as_sigint_does_even_when_inherited_ignored() {
    use std::os::unix::process::CommandExt as _;
    let tmp = tempfile::tempdir().unwrap();
    for ignored in [false, true] {
        let name = if ignored {
            "SIGQUIT, inherited ignored"
        } else {
            "SIGQUIT"
        };
        let dir = tmp.path().join(if ignored { "ignored" } else { "default" });
        let conductor = start_endless_ring_with(&dir, 2, |command| {
            if ignored {
                // As `cmd &` in a script leaves it: SIGQUIT ignored before exec.
                // SAFETY: signal(2) is async-signal-safe, as a pre_exec hook requires.
                unsafe {
                    command.pre_exec(|| {
                        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
                        Ok(())
                    });
                }
            }
        });
        signal(conductor.id(), libc::SIGQUIT);
        assert_stopped(conductor, &dir, name);
    }
}

/// The run of `conductor` ended with success after a signal and left a stopped session
/// holding its ticks and its summary.
fn assert_stopped(conductor: std::process::Child, dir: &std::path::Path, name: &str) {
    let output = conductor.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{name}: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let session = Session::load(dir).unwrap();
    assert_eq!(session.meta.status, Status::Stopped, "{name}");
    assert!(session.rows.len() >= 2, "{name}: the ticks so far are kept");
    assert!(
        !session.meta.summary.is_empty(),
        "{name}: the summary is kept"
    );
}

#[test]
fn sighup_during_the_second_run_of_a_series_stops_that_run_and_the_series() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    // Three runs: the first of a second, the second endless until the signal.
    let conductor = benchtop()
        .args([
            "run",
            "ring",
            "--num-nodes",
            "1000",
            "--num-rounds",
            "100000000",
            "--interval",
            "100ms",
            "--duration",
            "1s",
            "--profile=none",
            "--runs",
            "3",
            "--quiet",
            "--record",
        ])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rows = dir.join("run-2").join("timeseries.jsonl");
    wait_until("run-2's ticks", Duration::from_secs(120), || {
        complete_lines(&rows) >= 1
    });
    signal(conductor.id(), libc::SIGHUP);
    let output = conductor.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let series = Series::load(&dir).unwrap();
    assert_eq!(series.meta.runs.len(), 2, "no run began after the signal");
    let statuses: Vec<Status> = series.sessions.iter().map(|(_, s)| s.meta.status).collect();
    assert_eq!(statuses, [Status::Complete, Status::Stopped]);
}

#[test]
fn a_third_signal_ends_benchtop_at_once_and_the_session_still_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("insistent");
    // Sampling on: finishing (symbolizing, the flamegraphs) outlasts the signals.
    let conductor = benchtop()
        .args([
            "run",
            "ring",
            "--num-nodes",
            "1000",
            "--num-rounds",
            "100000000",
            "--interval",
            "100ms",
            "--quiet",
            "--record",
        ])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rows = dir.join("timeseries.jsonl");
    wait_until("ticks", Duration::from_secs(60), || {
        complete_lines(&rows) >= 2
    });
    // Three signals, each sent once the last was delivered (pending signals of one
    // number merge): stop, kill the worker, then the default action.
    for _ in 0..3 {
        signal(conductor.id(), libc::SIGTERM);
        wait_until("SIGTERM delivered", Duration::from_secs(30), || {
            !pending(conductor.id(), libc::SIGTERM)
        });
    }
    let output = conductor.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(
        output.status.signal(),
        Some(libc::SIGTERM),
        "{:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    // Cut off while finishing: what was written loads.
    let session = Session::load(&dir).unwrap();
    assert!(session.rows.len() >= 2);
}
