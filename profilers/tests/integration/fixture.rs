//! The `profile-fixture` child process, gated on stdin.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use benchtop_profilers::{ProfilerError, Sampler, SamplerOptions};

/// The fixture's process name (its comm: the binary name, at most 15 bytes).
pub const COMM: &str = "profile-fixture";
/// The function the fixture burns CPU in.
pub const BURN_FN: &str = "profilers_fixture_burn_cpu";
/// The function the fixture sleeps in, 1 ms at a time.
pub const SLEEP_FN: &str = "profilers_fixture_sleep_loop";

/// A running fixture; killed and reaped on drop.
pub struct Fixture {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    reaped: bool,
}

impl Fixture {
    /// Spawns `profile-fixture <mode> <ms> <threads>` and waits until it is ready (it has
    /// exec'd and waits for its start line).
    pub fn spawn(mode: &str, ms: u64, threads: usize) -> Fixture {
        Self::spawn_args(&[mode, &ms.to_string(), &threads.to_string()], "ready")
    }

    /// Spawns `profile-fixture <args…>` and waits for its first line, `first`.
    pub fn spawn_args(args: &[&str], first: &str) -> Fixture {
        let mut child = Command::new(env!("CARGO_BIN_EXE_profile-fixture"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn profile-fixture");
        let stdout = child.stdout.take().expect("fixture stdout");
        let stdin = child.stdin.take();
        let mut fixture = Fixture {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            reaped: false,
        };
        let line = fixture.read_line();
        assert_eq!(line, first, "fixture {args:?} did not say {first}");
        fixture
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line the fixture prints, without its line break.
    pub fn read_line(&mut self) -> String {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("read a line of the fixture");
        line.trim_end().to_owned()
    }

    /// Writes a line to the fixture's stdin.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("the fixture's stdin is open");
        writeln!(stdin, "{line}").expect("write to the fixture");
    }

    /// Lets the fixture start its threads.
    pub fn go(&mut self) {
        self.send_line("go");
        self.stdin = None;
    }

    /// It has not exited: its process is there and not a zombie (it is not reaped here).
    pub fn is_running(&self) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()));
        // The state follows the name, which is in parentheses and may hold spaces.
        stat.ok()
            .and_then(|s| Some(s.rsplit_once(") ")?.1.chars().next()? != 'Z'))
            .unwrap_or(false)
    }

    /// After the exit: the value of the fixture's `key\tvalue` line.
    pub fn output_value(&mut self, key: &str) -> Option<String> {
        let mut rest = String::new();
        self.stdout
            .read_to_string(&mut rest)
            .expect("read the fixture's output");
        rest.lines()
            .find_map(|l| Some(l.strip_prefix(key)?.strip_prefix('\t')?.to_owned()))
    }

    /// Waits for the exit and returns the CPU time (user + system) of the fixture and
    /// all its threads, from wait4's rusage.
    pub fn wait_cpu_time(&mut self) -> Duration {
        self.wait_usage().cpu
    }

    /// Waits for the exit and returns what wait4's rusage says of the fixture and all
    /// its threads.
    pub fn wait_usage(&mut self) -> Usage {
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
        Usage {
            cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
            voluntary_switches: usage.ru_nvcsw as u64,
            involuntary_switches: usage.ru_nivcsw as u64,
        }
    }
}

/// Resource use of an exited fixture.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// User + system CPU time.
    pub cpu: Duration,
    /// Context switches because a thread blocked.
    pub voluntary_switches: u64,
    /// Context switches because a thread was preempted.
    pub involuntary_switches: u64,
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
    expect_sampler(Sampler::start(pid, opts), "Sampler::start")
}

/// The sampler of `result`, or a failure saying what is missing.
pub fn expect_sampler(result: Result<Sampler, ProfilerError>, what: &str) -> Sampler {
    match result {
        Ok(s) => s,
        Err(e @ ProfilerError::PermissionDenied { .. }) => panic!(
            "this test samples a child process with perf events, which this machine does not \
             allow: {e}"
        ),
        Err(e) => panic!("{what} failed: {e}"),
    }
}

/// Fails, saying what to allow, unless off-CPU stacks are being sampled.
pub fn require_offcpu_stacks(sampler: &Sampler) {
    assert!(
        sampler.offcpu_stacks(),
        "this test needs off-CPU stacks, i.e. kernel sampling (run the tests as root, with \
         CAP_PERFMON, or with kernel.perf_event_paranoid <= 1); the sampler says: {:?}",
        sampler.warnings()
    );
}

/// Total weight of folded lines whose stack contains `needle`.
pub fn weight_containing(folded: &str, needle: &str) -> u64 {
    folded
        .lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}

/// Total weight of folded lines starting with `prefix`.
pub fn weight_under(folded: &str, prefix: &str) -> u64 {
    folded
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}
