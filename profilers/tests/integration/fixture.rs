//! The `profile-fixture` child process, gated on stdin.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use benchtop_profilers::{ProfilerError, Sampler, SamplerOptions};

/// The fixture's process name (its comm: the binary name, at most 15 bytes).
pub const COMM: &str = "profile-fixture";
/// The function the fixture burns CPU in.
pub const BURN_FN: &str = "profilers_fixture_burn_cpu";

/// A running fixture; killed and reaped on drop.
pub struct Fixture {
    child: Child,
    stdin: Option<ChildStdin>,
    reaped: bool,
}

impl Fixture {
    /// Spawns `profile-fixture <mode> <ms> <threads>` and waits until it is ready (it has
    /// exec'd and waits for its start line).
    pub fn spawn(mode: &str, ms: u64, threads: usize) -> Fixture {
        let mut child = Command::new(env!("CARGO_BIN_EXE_profile-fixture"))
            .args([mode, &ms.to_string(), &threads.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn profile-fixture");
        let stdout = child.stdout.take().expect("fixture stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the fixture's ready line");
        assert_eq!(line.trim(), "ready", "fixture did not say ready");
        let stdin = child.stdin.take();
        Fixture {
            child,
            stdin,
            reaped: false,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets the fixture start its threads.
    pub fn go(&mut self) {
        let mut stdin = self.stdin.take().expect("go is called once");
        stdin.write_all(b"go\n").expect("write the start line");
    }

    /// Waits for the exit and returns the CPU time (user + system) of the fixture and
    /// all its threads, from wait4's rusage.
    pub fn wait_cpu_time(&mut self) -> Duration {
        let mut status = 0;
        // SAFETY: rusage is plain data; wait4 fills it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: live pointers to status and usage; the pid is our unreaped child.
        let rc = unsafe { libc::wait4(self.pid() as libc::pid_t, &mut status, 0, &mut usage) };
        assert_eq!(rc, self.pid() as libc::pid_t, "wait4 failed");
        self.reaped = true;
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "fixture failed: status {status:#x}"
        );
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        tv(usage.ru_utime) + tv(usage.ru_stime)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts a sampler, failing with what is missing when perf events are not allowed.
pub fn start_sampler(pid: u32, opts: &SamplerOptions) -> Sampler {
    match Sampler::start(pid, opts) {
        Ok(s) => s,
        Err(e @ ProfilerError::PermissionDenied { .. }) => panic!(
            "this test samples a child process with perf events, which this machine does not \
             allow: {e}"
        ),
        Err(e) => panic!("Sampler::start failed: {e}"),
    }
}

/// Total weight of folded lines whose stack contains `needle`.
pub fn weight_containing(folded: &str, needle: &str) -> u64 {
    folded
        .lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}
