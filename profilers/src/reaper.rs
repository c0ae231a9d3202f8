//! The reaper: finds processes that earlier benchtop runs left behind, and ends them.
//!
//! Every process benchtop starts, directly or through a workload, carries the marker
//! environment [`OWNER_ENV`]` = <conductor pid>:<conductor start time>` and
//! [`SESSION_ENV`]` = <session id>`. A process is an orphan only when it carries the
//! marker *and* its owner is gone: no process with that pid, or one whose start time
//! differs (the pid was reused). Nothing without the marker is ever signalled, whatever
//! its command line says, and neither is a marked process whose owner still runs.
//!
//! Signals go through a pidfd opened while the process is verified to be the one that
//! was found (same pid, same start time), so a pid reused between listing and signalling
//! cannot be hit.
//!
//! ```no_run
//! use std::time::Duration;
//! use benchtop_profilers::reaper::{self, ReapOptions};
//!
//! # fn main() -> Result<(), benchtop_profilers::ProfilerError> {
//! let orphans = reaper::find_orphans()?;
//! for orphan in &orphans {
//!     println!("{} {} {}", orphan.pid, orphan.command, orphan.owner);
//! }
//! let outcomes = reaper::reap(&orphans, &ReapOptions::default());
//! # let _ = outcomes;
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::ProfilerError;
use crate::procfs::{self, process_start_ticks};

/// Marker variable: `<conductor pid>:<conductor start time in clock ticks after boot>`.
pub const OWNER_ENV: &str = "BENCHTOP_OWNER";
/// Marker variable: the id of the session the process belongs to.
pub const SESSION_ENV: &str = "BENCHTOP_SESSION";

/// The conductor that started a marked process: its pid and start time, which together
/// name one process for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The owner's pid.
    pub pid: u32,
    /// The owner's start time, clock ticks after boot (field 22 of `/proc/<pid>/stat`).
    pub start_ticks: u64,
}

impl Owner {
    /// This process as an owner; `None` when /proc cannot tell its start time (a marker
    /// without it would make every child look orphaned).
    pub fn current() -> Option<Owner> {
        let pid = std::process::id();
        Some(Owner {
            pid,
            start_ticks: process_start_ticks(pid)?,
        })
    }

    /// Parses a marker value `<pid>:<start ticks>`.
    pub fn parse(value: &str) -> Option<Owner> {
        let (pid, start) = value.trim().split_once(':')?;
        let pid: u32 = pid.parse().ok()?;
        (pid != 0).then_some(())?;
        Some(Owner {
            pid,
            start_ticks: start.parse().ok()?,
        })
    }

    /// What the owner's pid names now.
    pub fn state(&self) -> OwnerState {
        match process_start_ticks(self.pid) {
            Some(start) if start == self.start_ticks => OwnerState::Alive,
            Some(_) => OwnerState::PidReused,
            None => OwnerState::Gone,
        }
    }
}

/// The marker value: `<pid>:<start ticks>`.
impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.pid, self.start_ticks)
    }
}

/// Whether an owner still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerState {
    /// The owner runs: its processes are not orphans.
    Alive,
    /// No process has the owner's pid.
    Gone,
    /// Another process has the owner's pid (its start time differs): the owner is gone.
    PidReused,
}

impl OwnerState {
    /// How a listing says it.
    pub fn describe(self) -> &'static str {
        match self {
            OwnerState::Alive => "alive",
            OwnerState::Gone => "gone",
            OwnerState::PidReused => "gone, pid reused",
        }
    }
}

/// A marked process whose owner is gone.
#[derive(Debug, Clone, PartialEq)]
pub struct Orphan {
    /// Its pid.
    pub pid: u32,
    /// Its start time, clock ticks after boot: with the pid, names it for good.
    pub start_ticks: u64,
    /// Its command line (arguments joined by spaces), or `[comm]` when empty.
    pub command: String,
    /// The conductor that started it.
    pub owner: Owner,
    /// Why the owner counts as gone.
    pub owner_state: OwnerState,
    /// The session it belongs to, when the marker names one.
    pub session: Option<String>,
    /// How long it has run.
    pub age: Duration,
    /// Resident set size, bytes.
    pub rss_bytes: u64,
    /// The user it runs as (its effective uid).
    pub uid: u32,
    /// That user's name, or the uid as a number when it has none.
    pub user: String,
}

impl Orphan {
    /// Whether it runs as another user than this process (which, as root, may signal it
    /// all the same: `reap` asks for `--all-users` first).
    pub fn belongs_to_another_user(&self) -> bool {
        self.uid != current_uid()
    }
}

/// This process's effective uid.
pub fn current_uid() -> u32 {
    // SAFETY: geteuid(2) takes nothing, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

/// The name of user `uid` (from the password database), or the uid as a number.
pub fn user_name(uid: u32) -> String {
    let mut buf = vec![0u8; 4096];
    // SAFETY: all-zero bytes are a valid `passwd` (null pointers, zero ids); it is only
    // read after getpwuid_r filled it.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: `entry`, `buf` (with its true length) and `found` are valid for writes for
    // the call; the strings getpwuid_r stores point into `buf`, which outlives their use.
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut entry,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() || entry.pw_name.is_null() {
        return uid.to_string();
    }
    // SAFETY: on success pw_name is a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(entry.pw_name) };
    String::from_utf8_lossy(name.to_bytes()).into_owned()
}

/// Lists the orphans on this machine that this user may inspect: processes carrying the
/// marker whose owner is gone. Processes whose environment cannot be read (other users'
/// processes, without privilege) are skipped: without the marker they are not ours.
pub fn find_orphans() -> Result<Vec<Orphan>, ProfilerError> {
    let pids = crate::procfs::pids().map_err(|e| ProfilerError::io("/proc", e))?;
    let me = std::process::id();
    let uptime = uptime()?;
    let ticks = clock_ticks();
    let mut orphans = Vec::new();
    for pid in pids {
        if pid == me {
            continue;
        }
        if let Some(orphan) = inspect(pid, uptime, ticks) {
            orphans.push(orphan);
        }
    }
    orphans.sort_by_key(|o| o.pid);
    Ok(orphans)
}

/// The orphan at `pid`, if that process is one.
fn inspect(pid: u32, uptime: Duration, ticks: u64) -> Option<Orphan> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let (owner, session) = parse_marker(&environ)?;
    let owner_state = owner.state();
    if owner_state == OwnerState::Alive {
        return None;
    }
    let start_ticks = process_start_ticks(pid)?;
    let started = Duration::from_secs_f64(start_ticks as f64 / ticks as f64);
    let rss_bytes = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|text| procfs::parse_status(&text).rss_kb * 1024)
        .unwrap_or(0);
    // /proc/<pid> belongs to the process's effective uid.
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(format!("/proc/{pid}")).ok()?);
    Some(Orphan {
        pid,
        start_ticks,
        command: command_line(pid),
        owner,
        owner_state,
        session,
        age: uptime.saturating_sub(started),
        rss_bytes,
        uid,
        user: user_name(uid),
    })
}

/// The owner and session of a process environment (`/proc/<pid>/environ`: NUL-separated
/// `NAME=value`); `None` without a well-formed owner marker.
pub fn parse_marker(environ: &[u8]) -> Option<(Owner, Option<String>)> {
    let mut owner = None;
    let mut session = None;
    for var in environ.split(|&b| b == 0) {
        if let Some(value) = strip_var(var, OWNER_ENV) {
            owner = Some(Owner::parse(std::str::from_utf8(value).ok()?)?);
        } else if let Some(value) = strip_var(var, SESSION_ENV) {
            session = Some(String::from_utf8_lossy(value).into_owned());
        }
    }
    Some((owner?, session))
}

fn strip_var<'a>(var: &'a [u8], name: &str) -> Option<&'a [u8]> {
    var.strip_prefix(name.as_bytes())?.strip_prefix(b"=")
}

fn command_line(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if args.is_empty() {
        let comm = procfs::read_trimmed(&format!("/proc/{pid}/comm")).unwrap_or_default();
        format!("[{comm}]")
    } else {
        args.join(" ")
    }
}

fn uptime() -> Result<Duration, ProfilerError> {
    const PATH: &str = "/proc/uptime";
    let text = std::fs::read_to_string(PATH).map_err(|e| ProfilerError::io(PATH, e))?;
    text.split_whitespace()
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| ProfilerError::Parse {
            path: PATH.into(),
            reason: format!("not an uptime: {:?}", text.trim()),
        })
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
}

/// The signal that ends an orphan first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReapSignal {
    /// SIGTERM, then SIGKILL after the grace period (default).
    #[default]
    Term,
    /// SIGKILL at once.
    Kill,
}

impl ReapSignal {
    fn number(self) -> i32 {
        match self {
            ReapSignal::Term => libc::SIGTERM,
            ReapSignal::Kill => libc::SIGKILL,
        }
    }
}

/// How to end orphans.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReapOptions {
    /// The first signal (default SIGTERM).
    pub signal: ReapSignal,
    /// How long a process gets to exit after SIGTERM before SIGKILL (default 5 s).
    pub grace: Duration,
}

impl Default for ReapOptions {
    fn default() -> Self {
        ReapOptions {
            signal: ReapSignal::Term,
            grace: Duration::from_secs(5),
        }
    }
}

/// What became of one orphan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReapOutcome {
    /// It exited after the first signal.
    Ended,
    /// It outlived the grace period and was killed.
    Killed,
    /// It had already exited (or its pid now names another process) when its turn came.
    AlreadyGone,
    /// It could not be signalled, or still runs after SIGKILL.
    Failed(String),
}

impl ReapOutcome {
    /// The process could not be ended.
    pub fn is_failure(&self) -> bool {
        matches!(self, ReapOutcome::Failed(_))
    }
}

impl fmt::Display for ReapOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReapOutcome::Ended => f.write_str("ended"),
            ReapOutcome::Killed => f.write_str("killed (SIGKILL after the grace period)"),
            ReapOutcome::AlreadyGone => f.write_str("already gone"),
            ReapOutcome::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// How long to wait for the kernel to finish a process after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How often to look whether signalled processes have exited.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// Ends `orphans`: the first signal to all of them at once, then SIGKILL to those still
/// running after the grace period. One outcome per orphan, in order.
///
/// Each process is re-identified (pid and start time, marker still present) through a
/// pidfd before it is signalled, so a process that exited and whose pid was reused in
/// the meantime is never touched.
pub fn reap(orphans: &[Orphan], opts: &ReapOptions) -> Vec<ReapOutcome> {
    let handles: Vec<Result<Handle, ReapOutcome>> = orphans
        .iter()
        .map(|o| {
            let handle = Handle::open(o)?;
            handle.signal(opts.signal.number())?;
            Ok(handle)
        })
        .collect();
    let first_wait = match opts.signal {
        ReapSignal::Term => opts.grace,
        ReapSignal::Kill => KILL_WAIT,
    };
    wait_all(&handles, Instant::now() + first_wait);
    let mut outcomes: Vec<Option<ReapOutcome>> = handles
        .iter()
        .map(|handle| match handle {
            Err(outcome) => Some(outcome.clone()),
            Ok(h) if h.exited() => Some(ReapOutcome::Ended),
            Ok(_) if opts.signal == ReapSignal::Kill => Some(still_running()),
            Ok(h) => h.signal(libc::SIGKILL).err(),
        })
        .collect();
    wait_all(&handles, Instant::now() + KILL_WAIT);
    for (outcome, handle) in outcomes.iter_mut().zip(&handles) {
        if outcome.is_none() {
            let killed = matches!(handle, Ok(h) if h.exited());
            *outcome = Some(if killed {
                ReapOutcome::Killed
            } else {
                still_running()
            });
        }
    }
    outcomes.into_iter().flatten().collect()
}

fn still_running() -> ReapOutcome {
    ReapOutcome::Failed(format!(
        "still running {}s after SIGKILL",
        KILL_WAIT.as_secs()
    ))
}

fn wait_all(handles: &[Result<Handle, ReapOutcome>], deadline: Instant) {
    while handles.iter().flatten().any(|h| !h.exited()) && Instant::now() < deadline {
        std::thread::sleep(POLL_EVERY);
    }
}

/// A pidfd on one verified orphan.
struct Handle {
    pidfd: OwnedFd,
}

impl Handle {
    /// Opens a pidfd on the orphan's pid and checks, after opening, that the pid still
    /// names the same process with the marker: the pidfd then refers to it for good.
    fn open(orphan: &Orphan) -> Result<Handle, ReapOutcome> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, orphan.pid as libc::pid_t, 0) };
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::ESRCH) => ReapOutcome::AlreadyGone,
                _ => ReapOutcome::Failed(format!("pidfd_open: {err}")),
            });
        }
        // SAFETY: the syscall returned a new descriptor that nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        if process_start_ticks(orphan.pid) != Some(orphan.start_ticks) {
            return Err(ReapOutcome::AlreadyGone);
        }
        let environ = std::fs::read(format!("/proc/{}/environ", orphan.pid))
            .map_err(|_| ReapOutcome::AlreadyGone)?;
        if parse_marker(&environ).map(|(owner, _)| owner) != Some(orphan.owner) {
            return Err(ReapOutcome::AlreadyGone);
        }
        Ok(Handle { pidfd })
    }

    fn signal(&self, signal: i32) -> Result<(), ReapOutcome> {
        // SAFETY: pidfd_send_signal with a valid pidfd, a signal number, no siginfo and no
        // flags.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        Err(match err.raw_os_error() {
            Some(libc::ESRCH) => ReapOutcome::AlreadyGone,
            _ => ReapOutcome::Failed(format!("signal {signal}: {err}")),
        })
    }

    /// True once the process has exited (a pidfd polls readable then).
    fn exited(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
        rc > 0 && pfd.revents & (libc::POLLIN | libc::POLLHUP) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_marker_round_trips_and_rejects_garbage() {
        let owner = Owner {
            pid: 4242,
            start_ticks: 987_654,
        };
        assert_eq!(Owner::parse(&owner.to_string()), Some(owner));
        for bad in ["", "4242", ":5", "0:5", "x:5", "5:x", "-1:5", "5:-1"] {
            assert_eq!(Owner::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn marker_is_found_among_other_variables() {
        let environ = b"PATH=/bin\0BENCHTOP_SESSION=s-1\0BENCHTOP_OWNER=12:34\0HOME=/\0";
        let (owner, session) = parse_marker(environ).unwrap();
        assert_eq!(
            owner,
            Owner {
                pid: 12,
                start_ticks: 34
            }
        );
        assert_eq!(session.as_deref(), Some("s-1"));
    }

    #[test]
    fn an_environment_without_a_valid_owner_is_not_marked() {
        assert_eq!(parse_marker(b"PATH=/bin\0BENCHTOP_SESSION=s\0"), None);
        assert_eq!(parse_marker(b"BENCHTOP_OWNER=garbage\0"), None);
        // A variable whose name merely starts with the marker's name is not the marker.
        assert_eq!(parse_marker(b"BENCHTOP_OWNERX=1:2\0"), None);
        assert_eq!(parse_marker(b""), None);
    }

    #[test]
    fn this_process_is_a_live_owner() {
        let me = Owner::current().unwrap();
        assert_eq!(me.state(), OwnerState::Alive);
        let reused = Owner {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert_eq!(reused.state(), OwnerState::PidReused);
    }
}
