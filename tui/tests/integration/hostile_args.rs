//! Command lines no user would type on purpose: bytes that are not UTF-8 in a command, a
//! path and a text option, and durations beyond any clock. Each gives a clear message or
//! works; none panics (exit 101).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::Output;

use benchtop_sessions::Status;
use benchtop_sessions::store::Session;

use crate::support::benchtop;

fn no_panic(out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(101), "a panic: {stderr}");
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
}

#[test]
fn a_command_and_a_session_path_that_are_not_utf8_are_run_and_recorded_as_given() {
    let tmp = tempfile::tempdir().unwrap();
    // A directory named with a byte that is not UTF-8, and an argument with one.
    let dir = tmp.path().join(OsStr::from_bytes(b"session-\xff"));
    let out = benchtop()
        .args(["run", "--profile", "none", "--record"])
        .arg(&dir)
        .args(["--", "printf", "%s"])
        .arg(OsStr::from_bytes(b"a\xffb"))
        .output()
        .unwrap();
    no_panic(&out);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The command got the bytes as they were.
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    let log = std::fs::read(dir.join("worker.log")).unwrap();
    assert!(
        log.windows(3).any(|w| w == b"a\xffb"),
        "{}",
        String::from_utf8_lossy(&log)
    );
    // The session's record of the command line shows the byte it could not keep.
    assert!(
        session.meta.command_line.iter().any(|a| a == "a\u{fffd}b"),
        "{:?}",
        session.meta.command_line
    );
}

#[test]
fn a_text_option_that_is_not_utf8_is_a_clap_error_naming_it() {
    let out = benchtop()
        .args(["reap", "--dry-run", "--session"])
        .arg(OsStr::from_bytes(b"x\xffy"))
        .output()
        .unwrap();
    no_panic(&out);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--session"), "{stderr}");
    assert!(stderr.contains("UTF-8"), "{stderr}");
}

#[test]
fn paths_that_are_not_utf8_and_do_not_exist_are_said_plainly() {
    for args in [&["show"][..], &["open"], &["export"]] {
        let out = benchtop()
            .args(args)
            .arg(OsStr::from_bytes(b"/nonexistent/\xfe\xff"))
            .output()
            .unwrap();
        no_panic(&out);
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("/nonexistent/"), "{args:?}: {stderr}");
    }
}

#[test]
fn an_interval_past_what_a_clock_holds_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("never");
    let out = benchtop()
        .args(["run", "ring", "--interval", "584542046090y", "--record"])
        .arg(&dir)
        .output()
        .unwrap();
    no_panic(&out);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--interval"), "{stderr}");
    assert!(stderr.contains("100ms to 1day"), "{stderr}");
    assert!(!dir.exists(), "a session was started");
}

#[test]
fn attach_to_another_users_process_is_refused_naming_the_users_and_the_capability() {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid(2) cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && std::env::var_os("BENCHTOP_TESTS_WITHOUT_ROOT").is_some() {
        return;
    }
    assert!(
        root,
        "this test needs root (to run benchtop as another user); \
         BENCHTOP_TESTS_WITHOUT_ROOT=1 opts out"
    );
    // A process of root's, and benchtop as nobody (65534) trying to attach to it.
    let mut target = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("never");
    let out = benchtop()
        .args(["attach", &target.id().to_string(), "--record"])
        .arg(&dir)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let _ = target.kill();
    let _ = target.wait();
    no_panic(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot attach to pid"), "{stderr}");
    assert!(
        stderr.contains("(uid 0)") && stderr.contains("(uid 65534)"),
        "{stderr}"
    );
    assert!(stderr.contains("CAP_SYS_PTRACE"), "{stderr}");
    assert!(!stderr.contains("perf_event_paranoid"), "{stderr}");
    assert!(!dir.exists(), "a session was started");
}

#[test]
fn a_workers_summary_lines_reach_the_terminal_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("summary");
    // A program speaking the report protocol whose summary line would set the terminal's
    // title and forge a line.
    let script = r#"
printf '%s\n' '{"type":"hello","protocol":1,"workload":"w","params":{},"metrics":[]}' >&3
printf '%s\n' '{"type":"ready"}' >&3
read line
printf '%s\n' '{"type":"summary","figures":[],"lines":["\u001b]0;owned\u0007sum\r\nfake"]}' >&3
"#;
    let out = benchtop()
        .args(["run", "--profile", "none", "--record"])
        .arg(&dir)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    no_panic(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        !stdout.contains('\x1b') && !stdout.contains('\r'),
        "{stdout:?}"
    );
    assert!(stdout.contains(r"\x1b]0;owned\x07sum\r\nfake"), "{stdout}");
}

#[test]
fn a_set_user_id_program_run_by_another_user_is_said_to_record_nothing_before_it_runs() {
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid(2) cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && std::env::var_os("BENCHTOP_TESTS_WITHOUT_ROOT").is_some() {
        return;
    }
    assert!(
        root,
        "this test needs root (to make a set-user-ID program and run benchtop as another \
         user); BENCHTOP_TESTS_WITHOUT_ROOT=1 opts out"
    );
    let tmp = tempfile::tempdir().unwrap();
    // nobody records into it and runs the program from it.
    std::os::unix::fs::chown(tmp.path(), Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let program = tmp.path().join("suid-sleep");
    std::fs::copy("/bin/sleep", &program).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let dir = tmp.path().join("session");
    let out = benchtop()
        .args(["run", "--profile", "cpu", "--record"])
        .arg(&dir)
        .arg("--")
        .arg(&program)
        .arg("0.2")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    no_panic(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is set-user-ID (it runs as uid 0)") && stderr.contains("as root"),
        "{stderr}"
    );
    // Said before the run, and kept in the session.
    let session = Session::load(&dir).unwrap();
    assert!(
        session
            .meta
            .warnings
            .iter()
            .any(|w| w.contains("set-user-ID")),
        "{:?}",
        session.meta.warnings
    );
    // Root is told nothing: it may trace the program.
    let dir = tmp.path().join("as-root");
    let out = benchtop()
        .args(["run", "--profile", "cpu", "--record"])
        .arg(&dir)
        .arg("--")
        .arg(&program)
        .arg("0.1")
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("set-user-ID"),
        "{out:?}"
    );
}

/// `benchtop` with its address space limited to `kib` KiB (`ulimit -v`).
fn limited(kib: u64) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = benchtop();
    // SAFETY: setrlimit is async-signal-safe and reads a live rlimit.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: kib * 1024,
                rlim_max: kib * 1024,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

#[test]
fn a_recording_under_too_small_an_address_space_is_refused_with_the_figure_it_needs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("small");
    let out = limited(110_000)
        .args([
            "run",
            "ring",
            "--duration",
            "1s",
            "--num-nodes",
            "50",
            "--record",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    no_panic(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("ulimit -v 110000"), "{stderr}");
    assert!(!dir.exists(), "a session was started: {stderr}");
    // The figure it names is enough: the same run under it completes.
    let kib: u64 = stderr
        .split("`ulimit -v ")
        .nth(1)
        .and_then(|s| s.split('`').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no figure in: {stderr}"));
    let dir = tmp.path().join("enough");
    let out = limited(kib)
        .args([
            "run",
            "ring",
            "--duration",
            "1s",
            "--num-nodes",
            "50",
            "--record",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    no_panic(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "under ulimit -v {kib}: {stderr}");
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete, "{stderr}");
}
