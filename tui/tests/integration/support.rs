//! Shared pieces of the end-to-end tests.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use benchtop_sessions::store::Session;

/// The benchtop binary under test.
pub fn benchtop() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_benchtop"));
    // The tests' defaults are the built-in ones, whatever config the machine's user keeps.
    command
        .env_remove("BENCHTOP_CONFIG")
        .env("XDG_CONFIG_HOME", "/nonexistent/benchtop-tests");
    command
}

/// `benchtop run <args> --quiet --record <dir>`, ready to run.
pub fn run_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = benchtop();
    command
        .arg("run")
        .args(args)
        .args(["--quiet", "--record"])
        .arg(dir);
    command
}

/// Runs [`run_command`], requires success, and loads the session.
pub fn record_run(dir: &Path, args: &[&str]) -> (Output, Session) {
    let output = succeeded(&mut run_command(dir, args));
    (output, Session::load(dir).unwrap())
}

/// Runs `command` to its end and requires success, printing its output otherwise.
pub fn succeeded(command: &mut Command) -> Output {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The value of the session's summary figure `name`.
pub fn figure(session: &Session, name: &str) -> f64 {
    session
        .meta
        .summary
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no summary figure {name}: {:?}", session.meta.summary))
        .value
}

/// Makes the kernel refuse perf_event_open with EACCES in the child (and everything it
/// starts), exactly as a user without perf permission sees it: a seccomp filter.
pub fn deny_perf_events(command: &mut Command) {
    // SAFETY: runs between fork and exec; prctl is async-signal-safe and the filter
    // program lives on this stack frame until the call returns.
    unsafe {
        command.pre_exec(|| {
            let filter = [
                // A = seccomp_data.nr
                bpf_stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
                bpf_jump(
                    libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
                    libc::SYS_perf_event_open as u32,
                    0,
                    1,
                ),
                bpf_stmt(
                    libc::BPF_RET | libc::BPF_K,
                    libc::SECCOMP_RET_ERRNO | libc::EACCES as u32,
                ),
                bpf_stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
            ];
            let program = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &program as *const libc::sock_fprog as libc::c_ulong,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn bpf_stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn bpf_jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// Waits until `ready` holds, failing the test after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Complete lines in a file so far (0 when it does not exist yet).
pub fn complete_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|text| text.matches('\n').count())
        .unwrap_or(0)
}

/// The unprivileged user the tests run benchtop as (uid and gid 65534, on every system).
pub const NOBODY: u32 = 65534;

/// Whether a test that runs benchtop as another user can run: it needs root to switch.
/// Without root the test fails naming what it needs, unless `BENCHTOP_TESTS_WITHOUT_ROOT`
/// opts out (then false: the caller returns).
pub fn root_to(purpose: &str) -> bool {
    // SAFETY: geteuid(2) cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && std::env::var_os("BENCHTOP_TESTS_WITHOUT_ROOT").is_some() {
        return false;
    }
    assert!(
        root,
        "this test needs root ({purpose}); BENCHTOP_TESTS_WITHOUT_ROOT=1 opts out"
    );
    true
}

/// Makes `command` run as [`NOBODY`], with no supplementary groups, `HOME` at `home`, and
/// no `XDG_RUNTIME_DIR` of root's (nobody could not write to it).
pub fn as_nobody<'a>(command: &'a mut Command, home: &Path) -> &'a mut Command {
    command
        .uid(NOBODY)
        .gid(NOBODY)
        .env("HOME", home)
        .env_remove("XDG_RUNTIME_DIR")
}

/// Runs `command` to its end and returns its output, failing the test (after killing it
/// and what it started in its process group) when it is still running after `limit`.
pub fn output_within(command: &mut Command, limit: Duration) -> Output {
    let out = tempfile::tempfile().unwrap();
    let err = tempfile::tempfile().unwrap();
    let mut child = command
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(err.try_clone().unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            // SAFETY: kill(2) of the process group this function made for the child.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            panic!("{command:?} still running after {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |mut file: std::fs::File| {
        use std::io::{Read, Seek};
        let mut bytes = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut bytes).unwrap();
        bytes
    };
    Output {
        status,
        stdout: read(out),
        stderr: read(err),
    }
}

/// `benchtop attach PID OPTIONS… --duration 1s --quiet --record DIR` on a shell running
/// `script`: benchtop's output, and whether the shell still ran when benchtop ended (it
/// is killed then).
pub fn attach_to_shell(script: &str, options: &[&str], dir: &Path) -> (Output, bool) {
    let mut shell = Command::new("sh")
        .args(["-c", script])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let output = benchtop()
        .args(["attach", &shell.id().to_string()])
        .args(options)
        .args(["--duration", "1s", "--quiet", "--record"])
        .arg(dir)
        .output()
        .unwrap();
    let still_running = shell.try_wait().unwrap().is_none();
    let _ = shell.kill();
    let _ = shell.wait();
    (output, still_running)
}
