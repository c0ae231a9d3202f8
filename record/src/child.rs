//! Starting a worker process and owning it until it is reaped.
//!
//! Every worker carries the marker environment (`BENCHTOP_OWNER`, `BENCHTOP_SESSION`),
//! asks the kernel for SIGKILL when the conductor dies (PR_SET_PDEATHSIG), and runs in a
//! process group of its own, so a Ctrl-C in the terminal reaches the conductor only and
//! the conductor decides how the worker stops. The report channel is a pipe whose write
//! end becomes the worker's fd [`REPORT_FD`].

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use benchtop_profilers::process_start_ticks;
use benchtop_profilers::reaper::Owner;
use benchtop_protocol::{INTERVAL_MS_ENV, REPORT_FD_ENV};

/// The file descriptor number of the report channel inside the worker.
pub const REPORT_FD: i32 = 3;
/// The file descriptor number of the exec gate inside a gated child: one byte on it lets
/// `benchtop exec-gate` exec the command; end of file makes it exit.
pub const GATE_FD: i32 = 4;
/// The file descriptor number of the gate's answer inside a gated child: `benchtop
/// exec-gate` writes on it the peak resident set size of the child so far (`ru_maxrss`
/// in kB, a decimal line) just before it execs the command, and makes it close-on-exec,
/// so its end of file tells the conductor the command has replaced the gate.
pub const GATE_PASS_FD: i32 = 5;

use benchtop_profilers::reaper::{OWNER_ENV, SESSION_ENV};

/// What to start.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// Program to run.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Session id for the marker.
    pub session_id: String,
    /// Report interval passed to the worker.
    pub interval: Duration,
    /// Hold the child at a gate on [`GATE_FD`] until [`WorkerProcess::open_gate`] (the
    /// program is then `benchtop exec-gate -- <command>`).
    pub gate: bool,
    /// More environment for the worker (e.g. its allocation sampling rate).
    pub env: Vec<(OsString, OsString)>,
}

/// A running worker and the conductor's ends of its pipes.
#[derive(Debug)]
pub struct WorkerProcess {
    child: Child,
    reaped: bool,
    /// The conductor's end of the exec gate, until it is opened.
    gate: Option<OwnedFd>,
    /// The conductor's end of the gate's answer ([`GATE_PASS_FD`]), until it ends.
    pass: Option<GateAnswer>,
    /// When a watcher thread saw the child exit (set once the gate is opened).
    exit_seen: Option<Arc<OnceLock<Instant>>>,
}

/// The conductor's ends of a worker's channels, handed to reader threads.
#[derive(Debug)]
pub struct WorkerPipes {
    /// Conductor → worker messages.
    pub stdin: ChildStdin,
    /// Worker reports.
    pub reports: File,
    /// What the worker prints.
    pub stdout: ChildStdout,
    /// What the worker logs.
    pub stderr: ChildStderr,
}

/// The conductor's end of a gate's answer and what it has read of it.
#[derive(Debug)]
struct GateAnswer {
    file: File,
    read: Vec<u8>,
}

/// What the exec gate said as the command replaced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatePass {
    /// The largest peak resident set size of the child's images before the command's
    /// (the conductor's copy at fork, then the gate), bytes: the `ru_maxrss` the gate read
    /// of itself just before the exec. `None` when it said none (the gate ended without
    /// a word, or the program held at the gate was not benchtop's).
    pub before_exec_peak_bytes: Option<u64>,
}

/// How a worker ended, from wait4.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerExit {
    /// Exit code when it exited.
    pub code: Option<i32>,
    /// Signal when it was killed.
    pub signal: Option<i32>,
    /// User + system CPU time of the worker and its reaped threads, seconds.
    pub cpu_time_s: f64,
    /// Peak resident set size of the worker, bytes (`ru_maxrss`).
    pub peak_rss_bytes: u64,
}

impl WorkerExit {
    /// True for exit code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl std::fmt::Display for WorkerExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(sig)) => write!(f, "killed by signal {sig} ({})", signal_name(sig)),
            (None, None) => f.write_str("ended"),
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGPIPE => "SIGPIPE",
        _ => "signal",
    }
}

/// `<pid>:<start time>` of this process, the owner half of the marker. Without a start
/// time the marker would tell a reaper the owner is gone: that is an error, not `0`.
pub fn owner_marker() -> io::Result<String> {
    Owner::current()
        .map(|owner| owner.to_string())
        .ok_or_else(|| {
            io::Error::other(format!(
                "cannot read this process's start time from /proc/{}/stat",
                std::process::id()
            ))
        })
}

impl WorkerProcess {
    /// Starts the worker. Its stdin, stdout and stderr are pipes; fd 3 is the report pipe.
    ///
    /// PR_SET_PDEATHSIG fires when the *thread* that spawned the worker ends, not the
    /// process: call this from a thread that lives as long as the recording (the main
    /// thread, or a dedicated one), never from a short-lived pool thread.
    pub fn spawn(spec: &WorkerSpec) -> io::Result<(WorkerProcess, WorkerPipes)> {
        let (read_end, write_end) = pipe_cloexec()?;
        let write_fd = write_end.as_raw_fd();
        let gate = if spec.gate {
            Some(pipe_cloexec()?)
        } else {
            None
        };
        let gate_fd = gate.as_ref().map(|(read, _)| read.as_raw_fd());
        let pass = if spec.gate {
            Some(pipe_cloexec()?)
        } else {
            None
        };
        let pass_fd = pass.as_ref().map(|(_, write)| write.as_raw_fd());
        let conductor = std::process::id() as libc::pid_t;
        let mut command = Command::new(&spec.program);
        command
            .args(&spec.args)
            .env(REPORT_FD_ENV, REPORT_FD.to_string())
            .env(INTERVAL_MS_ENV, spec.interval.as_millis().to_string())
            .env(OWNER_ENV, owner_marker()?)
            .env(SESSION_ENV, &spec.session_id)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls (fcntl, dup2, setpgid, prctl, getppid, _exit); it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                // Copies above every target first (closed at exec), so no dup2 below can
                // overwrite another's source; dup2 clears close-on-exec on the target.
                let copy = |fd: i32| {
                    let copy = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
                    if copy < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(copy)
                    }
                };
                let report = copy(write_fd)?;
                let gate = gate_fd.map(copy).transpose()?;
                let pass = pass_fd.map(copy).transpose()?;
                for (from, to) in [
                    (Some(report), REPORT_FD),
                    (gate, GATE_FD),
                    (pass, GATE_PASS_FD),
                ] {
                    if let Some(from) = from
                        && libc::dup2(from, to) < 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                }
                if libc::setpgid(0, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) < 0 {
                    return Err(io::Error::last_os_error());
                }
                // The conductor may have died before prctl took effect.
                if libc::getppid() != conductor {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        drop(write_end);
        let gate = gate.map(|(_, write)| write);
        let pass = match pass {
            Some((read, write)) => {
                drop(write);
                set_nonblocking(&read)?;
                Some(GateAnswer {
                    file: File::from(read),
                    read: Vec::new(),
                })
            }
            None => None,
        };
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other("worker pipes were not set up"));
        };
        let pipes = WorkerPipes {
            stdin,
            reports: File::from(read_end),
            stdout,
            stderr,
        };
        Ok((
            WorkerProcess {
                child,
                reaped: false,
                gate,
                pass,
                exit_seen: None,
            },
            pipes,
        ))
    }

    /// Lets a gated child exec its command. Does nothing for an ungated child, or a gate
    /// already opened.
    ///
    /// A gated command is timed by its exit: a watcher thread waits for it (without
    /// reaping it) and notes the moment, [`WorkerProcess::exit_seen`], so the time does
    /// not depend on when the conductor's loop next reaps.
    pub fn open_gate(&mut self) -> io::Result<()> {
        match self.gate.take() {
            Some(gate) => {
                self.exit_seen = self.watch_exit();
                File::from(gate).write_all(b"x")
            }
            None => Ok(()),
        }
    }

    /// Whether the command has replaced the gate (its exec is done, or the gate ended),
    /// and what the gate said of the images before it; `None` while the gate holds, for
    /// an ungated child, and after it has been said once. Never blocks.
    pub fn gate_pass(&mut self) -> Option<GatePass> {
        let answer = self.pass.as_mut()?;
        let mut buf = [0u8; 64];
        loop {
            match answer.file.read(&mut buf) {
                Ok(0) => break,
                // A line of a few digits: more is not the gate speaking.
                Ok(n) => {
                    let room = 64usize.saturating_sub(answer.read.len());
                    answer.read.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                // Not seen to happen: the gate's word is lost, not the run.
                Err(_) => break,
            }
        }
        let said = std::str::from_utf8(&answer.read)
            .ok()
            .and_then(|line| line.trim().parse::<u64>().ok());
        self.pass = None;
        Some(GatePass {
            before_exec_peak_bytes: said.map(|kb| kb.saturating_mul(1024)),
        })
    }

    /// When the child was seen to exit, if a watcher saw it.
    pub fn exit_seen(&self) -> Option<Instant> {
        self.exit_seen.as_ref().and_then(|s| s.get().copied())
    }

    /// Starts a thread that waits on a pidfd of the child for its exit, leaving it to be
    /// reaped by [`WorkerProcess::try_reap`] (`WNOWAIT`), and notes when. `None` when the
    /// pidfd or the thread cannot be had: the exit is then timed when it is reaped.
    fn watch_exit(&self) -> Option<Arc<OnceLock<Instant>>> {
        if self.reaped {
            return None;
        }
        let pidfd = self.pidfd()?;
        let seen = Arc::new(OnceLock::new());
        let slot = Arc::clone(&seen);
        std::thread::Builder::new()
            .name("benchtop-exit".into())
            .spawn(move || {
                loop {
                    // SAFETY: siginfo_t is plain data the kernel fills in.
                    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                    // SAFETY: the pidfd is open for the call's length; info is a valid
                    // pointer; WNOWAIT leaves the child waitable, so this never reaps it.
                    let r = unsafe {
                        libc::waitid(
                            libc::P_PIDFD,
                            pidfd.as_raw_fd() as libc::id_t,
                            &mut info,
                            libc::WEXITED | libc::WNOWAIT,
                        )
                    };
                    if r == 0 {
                        let _ = slot.set(Instant::now());
                        return;
                    }
                    if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                        // Reaped already (ECHILD): the reap times it.
                        return;
                    }
                }
            })
            .ok()?;
        Some(seen)
    }

    /// A pidfd of the worker (pidfd_open(2)); `None` once it is reaped or on kernels
    /// without pidfds.
    fn pidfd(&self) -> Option<OwnedFd> {
        if self.reaped {
            return None;
        }
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1;
        // the child is not reaped yet, so the pid names it and no other process.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let fd = i32::try_from(fd).ok().filter(|&fd| fd >= 0)?;
        // SAFETY: pidfd_open succeeded: fd is open and owned by nobody else.
        Some(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Process id of the worker.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the worker has exited (without reaping it) or `timeout` has passed,
    /// whichever comes first: a pidfd polled for the exit, or a plain sleep on kernels
    /// without pidfds.
    pub fn wait_exit(&self, timeout: Duration) {
        if self.reaped {
            return;
        }
        let Some(fd) = self.pidfd() else {
            std::thread::sleep(timeout);
            return;
        };
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one live pollfd. An error or EINTR only ends the wait early.
        unsafe { libc::poll(&mut p, 1, ms) };
    }

    /// Reaps the worker if it has exited, without blocking.
    pub fn try_reap(&mut self) -> io::Result<Option<WorkerExit>> {
        if self.reaped {
            return Ok(None);
        }
        let mut status = 0;
        // SAFETY: rusage is plain data the kernel fills in; the pid is our own child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: valid pointers to locals; WNOHANG never blocks.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if r == 0 {
            return Ok(None);
        }
        self.reaped = true;
        let seconds = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        Ok(Some(WorkerExit {
            code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
            signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
            cpu_time_s: seconds(usage.ru_utime) + seconds(usage.ru_stime),
            // Linux reports ru_maxrss in kilobytes.
            peak_rss_bytes: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        }))
    }

    /// Sends a signal to the worker's process group (the worker and what it started).
    pub fn signal_group(&self, signal: i32) {
        if self.reaped {
            return;
        }
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a negative pid signals the group we created in pre_exec.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

impl Drop for WorkerProcess {
    /// Kills the worker's group and reaps it, waiting at most two seconds: a process in
    /// uninterruptible sleep must not hang the conductor on its way out.
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        self.signal_group(libc::SIGKILL);
        for _ in 0..200 {
            if !matches!(self.try_reap(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: F_GETFL and F_SETFL only read and set the open descriptor's flags.
    let ok = unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
    };
    if ok {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The process being recorded: a child of the conductor, or one it attached to.
pub(crate) enum Process {
    Child(WorkerProcess),
    Attached { pid: u32, start_ticks: u64 },
}

impl Process {
    pub(crate) fn pid(&self) -> u32 {
        match self {
            Process::Child(child) => child.pid(),
            Process::Attached { pid, .. } => *pid,
        }
    }

    /// When a child was seen to exit, if it was watched ([`WorkerProcess::open_gate`]).
    pub(crate) fn exit_seen(&self) -> Option<Instant> {
        match self {
            Process::Child(child) => child.exit_seen(),
            Process::Attached { .. } => None,
        }
    }

    /// Signals a child's process group; an attached process is never signalled.
    pub(crate) fn signal_group(&self, signal: i32) {
        if let Process::Child(child) = self {
            child.signal_group(signal);
        }
    }

    /// Waits up to `timeout` for a child to exit; an attached process is not ours to
    /// wait for, so this just sleeps.
    pub(crate) fn wait_exit(&self, timeout: Duration) {
        match self {
            Process::Child(child) => child.wait_exit(timeout),
            Process::Attached { .. } => std::thread::sleep(timeout),
        }
    }

    /// How the process ended, once it has. An attached process is not ours to wait
    /// for: it has ended when its pid no longer names it.
    pub(crate) fn try_reap(&mut self) -> std::io::Result<Option<WorkerExit>> {
        match self {
            Process::Child(child) => child.try_reap(),
            Process::Attached { pid, start_ticks } => Ok((process_start_ticks(*pid)
                != Some(*start_ticks))
            .then_some(WorkerExit {
                code: None,
                signal: None,
                cpu_time_s: f64::NAN,
                peak_rss_bytes: 0,
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn the_owner_marker_is_this_process_and_its_start_time() {
        let marker = owner_marker().unwrap();
        let (pid, start) = marker.split_once(':').unwrap();
        assert_eq!(pid, std::process::id().to_string());
        assert!(start.parse::<u64>().unwrap() > 0);
    }

    #[test]
    fn a_worker_writes_reports_to_fd_3_and_carries_the_marker() {
        let spec = WorkerSpec {
            program: "/bin/sh".into(),
            args: vec![
                "-c".into(),
                "echo \"$BENCHTOP_REPORT_FD $BENCHTOP_SESSION ${BENCHTOP_OWNER%%:*}\" >&3".into(),
            ],
            session_id: "s1".into(),
            interval: Duration::from_millis(250),
            gate: false,
            env: Vec::new(),
        };
        let (mut worker, mut pipes) = WorkerProcess::spawn(&spec).unwrap();
        let mut out = String::new();
        pipes.reports.read_to_string(&mut out).unwrap();
        assert_eq!(out.trim(), format!("3 s1 {}", std::process::id()));
        let exit = loop {
            if let Some(exit) = worker.try_reap().unwrap() {
                break exit;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(exit.success(), "{exit}");
    }

    #[test]
    fn a_gated_child_waits_on_fd_4_until_the_gate_opens() {
        let spec = WorkerSpec {
            program: "/bin/sh".into(),
            // Both descriptors arrive, whatever numbers the conductor's pipes had.
            args: vec!["-c".into(), "head -c 1 <&4 >&3; echo ' passed' >&3".into()],
            session_id: "s3".into(),
            interval: Duration::from_secs(1),
            gate: true,
            env: Vec::new(),
        };
        let (mut worker, mut pipes) = WorkerProcess::spawn(&spec).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(worker.try_reap().unwrap(), None, "passed a closed gate");
        worker.open_gate().unwrap();
        let mut out = String::new();
        pipes.reports.read_to_string(&mut out).unwrap();
        assert_eq!(out.trim(), "x passed");
    }

    fn gated_sh(script: &str) -> WorkerProcess {
        let spec = WorkerSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            session_id: "s4".into(),
            interval: Duration::from_secs(1),
            gate: true,
            env: Vec::new(),
        };
        WorkerProcess::spawn(&spec).unwrap().0
    }

    /// Polls [`WorkerProcess::gate_pass`] for up to ten seconds.
    fn wait_for_pass(worker: &mut WorkerProcess) -> GatePass {
        for _ in 0..1000 {
            if let Some(pass) = worker.gate_pass() {
                return pass;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the gate never passed");
    }

    #[test]
    fn the_gate_passes_when_fd_5_ends_and_says_the_peak_before_the_exec() {
        // The gate's words, then its end (as close-on-exec ends it at the exec); the
        // command goes on.
        let mut worker = gated_sh("head -c 1 <&4 >/dev/null; echo 1234 >&5; exec 5>&-; sleep 30");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(worker.gate_pass(), None, "passed a closed gate");
        worker.open_gate().unwrap();
        let pass = wait_for_pass(&mut worker);
        assert_eq!(pass.before_exec_peak_bytes, Some(1234 * 1024));
        assert_eq!(worker.gate_pass(), None, "said twice");
        assert_eq!(worker.try_reap().unwrap(), None, "the command goes on");

        // Ended without a word, or with words that are not a number: passed, peak unknown.
        for script in [
            "head -c 1 <&4 >/dev/null",
            "head -c 1 <&4 >/dev/null; echo x >&5",
        ] {
            let mut worker = gated_sh(script);
            worker.open_gate().unwrap();
            assert_eq!(wait_for_pass(&mut worker).before_exec_peak_bytes, None);
        }
    }

    #[test]
    fn dropping_the_guard_kills_the_worker() {
        let spec = WorkerSpec {
            program: "/bin/sleep".into(),
            args: vec!["30".into()],
            session_id: "s2".into(),
            interval: Duration::from_secs(1),
            gate: false,
            env: Vec::new(),
        };
        let (worker, _pipes) = WorkerProcess::spawn(&spec).unwrap();
        let pid = worker.pid();
        drop(worker);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }
}
