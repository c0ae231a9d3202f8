//! The whole tree's CPU time, context switches and page faults, counted by the kernel.
//!
//! [`TreeCounters`] opens perf *counting* events (no ring buffer, no samples) with
//! `inherit` on every thread of a process tree: each thread or process created
//! afterwards gets its own copy of the events, and the kernel folds a copy's count into
//! the original as that thread exits (`perf_event_exit_task`, at exit, before the
//! parent reaps it). Reading an original gives its own count, the exited copies' and
//! the live copies' — what `perf stat` reports for a command and its descendants,
//! however short they lived and whatever they did between two polls of /proc.
//!
//! The events are `task-clock` (user and system CPU time, nanoseconds: it ignores
//! `exclude_kernel`, so it is whole even where kernel events are refused),
//! `context-switches`, `minor-faults` and `major-faults`. The last three happen in the
//! kernel: with `exclude_kernel` they count nothing (switches) or only the faults of user
//! code (not those inside system calls), so they are counted only where kernel events
//! are allowed (root, CAP_PERFMON or perf_event_paranoid <= 1) and left out otherwise,
//! [`TreeCounters::not_counted`] saying why.
//!
//! ```no_run
//! use benchtop_profilers::counting::TreeCounters;
//!
//! # fn main() -> Result<(), benchtop_profilers::ProfilerError> {
//! // The threads of a worker waiting for its start message (or, with `on_exec`, a
//! // child held before its exec).
//! let mut counters = TreeCounters::open(&[4242], false)?;
//! // … each interval, and once more after the tree has exited:
//! let counts = counters.read()?;
//! println!("{:.3} s of CPU", counts.cpu_time_s);
//! # Ok(())
//! # }
//! ```

use std::io;

use benchtop_profile::TreeCounts;
use perf_event::events::Software;
use perf_event::{Builder, Counter};

use crate::ProfilerError;
use crate::procfs;

/// The events of one thread the tree had when counting began.
#[derive(Debug)]
struct ThreadCounters {
    cpu: Counter,
    kernel: Option<KernelCounters>,
}

/// The events that happen in the kernel.
#[derive(Debug)]
struct KernelCounters {
    switches: Counter,
    minor: Counter,
    major: Counter,
}

/// Counting events on a process tree; see the [module](self).
#[derive(Debug)]
pub struct TreeCounters {
    threads: Vec<ThreadCounters>,
    not_counted: Option<String>,
}

impl TreeCounters {
    /// Counting events on each of `tids` (every live thread of the tree: a thread
    /// inherits the events only into what it creates itself), inherited by every thread
    /// and process they create from now on. With `on_exec` they are enabled when each
    /// thread execs (a child held at an exec gate: the gate itself is not counted), else
    /// at once. A thread that exits before its events are open is passed over.
    ///
    /// [`ProfilerError::PermissionDenied`] when the kernel refuses even `task-clock`
    /// (another user's process, perf_event_paranoid 3 …): the caller polls instead.
    pub fn open(tids: &[u32], on_exec: bool) -> Result<TreeCounters, ProfilerError> {
        let mut kernel = true;
        let mut not_counted = None;
        let mut threads: Vec<ThreadCounters> = Vec::with_capacity(tids.len());
        for &tid in tids {
            let cpu = match open_one(Software::TASK_CLOCK, tid, on_exec, kernel) {
                Err(e) if is_denied(&e) && kernel => {
                    // Kernel events refused (the first thread tells): task-clock without
                    // them is still whole, the others are left to the polls.
                    kernel = false;
                    not_counted = Some(format!(
                        "context switches and page faults are polled, not counted: counting \
                         them needs kernel events, and perf_event_open refused them ({e}; {}). \
                         Fix: `sudo sysctl kernel.perf_event_paranoid=1` or `sudo setcap \
                         cap_perfmon=ep <path to benchtop>`",
                        paranoid_text()
                    ));
                    for t in &mut threads {
                        t.kernel = None;
                    }
                    open_one(Software::TASK_CLOCK, tid, on_exec, false)
                }
                other => other,
            };
            let cpu = match cpu {
                Ok(c) => c,
                // Exited before its events were open: nothing of it to count.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
                Err(e) => return Err(open_error(tid, "task-clock", e)),
            };
            let kernel_counters = if kernel {
                let open = |event| open_one(event, tid, on_exec, true);
                match (
                    open(Software::CONTEXT_SWITCHES),
                    open(Software::PAGE_FAULTS_MIN),
                    open(Software::PAGE_FAULTS_MAJ),
                ) {
                    (Ok(switches), Ok(minor), Ok(major)) => Some(KernelCounters {
                        switches,
                        minor,
                        major,
                    }),
                    // The thread exited in the microseconds since its task-clock was
                    // opened: nothing of it to count.
                    (Err(e), ..) | (_, Err(e), _) | (.., Err(e))
                        if e.raw_os_error() == Some(libc::ESRCH) =>
                    {
                        continue;
                    }
                    (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => {
                        return Err(open_error(
                            tid,
                            "context-switches, minor-faults, major-faults",
                            e,
                        ));
                    }
                }
            } else {
                None
            };
            threads.push(ThreadCounters {
                cpu,
                kernel: kernel_counters,
            });
        }
        if threads.is_empty() {
            return Err(ProfilerError::ProcessNotFound {
                pid: tids.first().copied().unwrap_or(0),
            });
        }
        Ok(TreeCounters {
            threads,
            not_counted,
        })
    }

    /// The tree's counts so far: every thread and process it has had since the events
    /// were opened, live or exited.
    pub fn read(&mut self) -> Result<TreeCounts, ProfilerError> {
        let mut cpu_ns = 0u64;
        let mut kernel = self.not_counted.is_none().then_some((0u64, 0u64, 0u64));
        for t in &mut self.threads {
            cpu_ns = cpu_ns.saturating_add(read(&mut t.cpu)?);
            if let (Some((switches, minor, major)), Some(k)) = (&mut kernel, &mut t.kernel) {
                *switches = switches.saturating_add(read(&mut k.switches)?);
                *minor = minor.saturating_add(read(&mut k.minor)?);
                *major = major.saturating_add(read(&mut k.major)?);
            }
        }
        let mut counts = TreeCounts::default();
        counts.cpu_time_s = cpu_ns as f64 / 1e9;
        if let Some((switches, minor, major)) = kernel {
            counts.context_switches = Some(switches);
            counts.minor_faults = Some(minor);
            counts.major_faults = Some(major);
        }
        Ok(counts)
    }

    /// Why context switches and page faults are not counted (kernel events refused);
    /// `None` when they are.
    pub fn not_counted(&self) -> Option<&str> {
        self.not_counted.as_deref()
    }

    /// Threads the events were opened on.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }
}

/// A counting event on `tid` and everything it creates from now on, on any CPU.
fn open_one(event: Software, tid: u32, on_exec: bool, kernel: bool) -> io::Result<Counter> {
    let pid = libc::pid_t::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    Builder::new(event)
        .observe_pid(pid)
        .any_cpu()
        .inherit(true)
        .exclude_kernel(!kernel)
        .exclude_hv(true)
        .enable_on_exec(on_exec)
        .enabled(!on_exec)
        .build()
}

/// A refused open as the error the caller falls back on, any other as itself.
fn open_error(tid: u32, event: &'static str, e: io::Error) -> ProfilerError {
    if is_denied(&e) {
        return ProfilerError::PermissionDenied {
            reason: format!(
                "perf_event_open of a `{event}` counter on thread {tid} returned {e} ({})",
                paranoid_text()
            ),
        };
    }
    ProfilerError::CountOpen {
        tid,
        event,
        source: e,
    }
}

fn read(counter: &mut Counter) -> Result<u64, ProfilerError> {
    counter.read().map_err(|source| ProfilerError::PerfControl {
        action: "read",
        source,
    })
}

fn is_denied(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM))
}

fn paranoid_text() -> String {
    match procfs::read_trimmed("/proc/sys/kernel/perf_event_paranoid") {
        Some(p) => format!("kernel.perf_event_paranoid is {p}"),
        None => "kernel.perf_event_paranoid is unreadable".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// `sh -c script`, held until a line comes on its stdin and then exec'ed: the
    /// counters opened with `on_exec` start at that exec. (A gate in `pre_exec` would
    /// deadlock: `spawn` waits for the exec.)
    fn gated(script: &str) -> (std::process::Child, std::process::ChildStdin) {
        let mut child = Command::new("/bin/sh")
            .args(["-c", "read line; exec /bin/sh -c \"$0\"", script])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        (child, stdin)
    }

    /// wait4's user + system time of `pid` and the children it waited for.
    fn reap(pid: u32) -> f64 {
        let mut status = 0;
        // SAFETY: plain data for the kernel to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to locals; the pid is our child.
        let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) };
        assert_eq!(r, pid as i32);
        let s = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        s(usage.ru_utime) + s(usage.ru_stime)
    }

    #[test]
    fn short_lived_children_are_counted_whole_as_wait4_counts_them() {
        use std::io::Write;
        // Forty children of a few milliseconds each, every one shorter than a poll.
        let script = "i=0; while [ $i -lt 40 ]; do \
                      /bin/sh -c 'j=0; while [ $j -lt 3000 ]; do j=$((j+1)); done'; \
                      i=$((i+1)); done";
        let (child, mut gate) = gated(script);
        let mut counters = TreeCounters::open(&[child.id()], true).unwrap();
        let before = counters.read().unwrap();
        assert_eq!(before.cpu_time_s, 0.0, "counted before the exec");
        gate.write_all(b"go\n").unwrap();
        drop(gate);
        // The exited process's counts are final before it is reaped.
        // SAFETY: siginfo_t is plain data the kernel fills in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer; WNOWAIT leaves the child to be reaped below.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                child.id(),
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        assert_eq!(r, 0);
        let at_exit = counters.read().unwrap();
        let rusage_s = reap(child.id());
        let after = counters.read().unwrap();
        assert_eq!(
            at_exit.cpu_time_s, after.cpu_time_s,
            "reaping added CPU time"
        );
        // Both are the scheduler's nanoseconds (wait4 splits them into user and system
        // by ticks, but keeps their sum): the same figure, give or take rounding.
        assert!(
            (after.cpu_time_s - rusage_s).abs() <= 0.05 * rusage_s + 0.02,
            "counted {} s, wait4 {rusage_s} s",
            after.cpu_time_s
        );
        assert!(after.cpu_time_s > 0.0);
        // Root here: switches and faults are counted too.
        if counters.not_counted().is_none() {
            assert!(after.context_switches.unwrap() >= 40, "{after:?}");
            assert!(after.minor_faults.unwrap() > 40 * 10, "{after:?}");
        }
    }

    #[test]
    fn growth_is_never_negative_and_keeps_missing_figures_missing() {
        let mut a = TreeCounts::default();
        a.cpu_time_s = 2.0;
        a.context_switches = Some(10);
        let mut b = TreeCounts::default();
        b.cpu_time_s = 1.5;
        b.context_switches = Some(4);
        b.minor_faults = Some(3);
        let d = a.since(&b);
        assert_eq!(d.cpu_time_s, 0.5);
        assert_eq!(d.context_switches, Some(6));
        assert_eq!(d.minor_faults, None);
        assert_eq!(b.since(&a).cpu_time_s, 0.0);
    }

    #[test]
    fn a_thread_that_does_not_exist_is_not_found() {
        // Pid numbers stop well below this.
        let e = TreeCounters::open(&[u32::MAX / 2], false).unwrap_err();
        assert!(matches!(e, ProfilerError::ProcessNotFound { .. }), "{e}");
    }
}
