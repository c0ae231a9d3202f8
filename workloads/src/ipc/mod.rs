//! Workloads across processes: the main node (the worker itself) and the node processes
//! it starts, joined by Unix stream sockets.
//!
//! `ring --transport ipc` and `storm` start their nodes as `<this program> worker ipc-node
//! --role ring|storm …` ([`NodeParams`], a hidden [`crate::worker::Workload`]): the same
//! binary, found with [`std::env::current_exe`], so any program that dispatches
//! `worker <workload>` to [`crate::worker::run_worker`] can run them (benchtop does, and so
//! does this crate's test fixture). Each node's sockets are one end of a `socketpair`
//! created by the main node, inherited by number (`--prev-fd`, `--next-fd`, `--main-fd`);
//! every other descriptor of the main node is close-on-exec, and the report descriptor
//! ([`crate::protocol::REPORT_FD_ENV`]) is closed in the child and its variable removed:
//! only the main node reports. Nodes keep the rest of the environment, the marker variables
//! `BENCHTOP_OWNER` and `BENCHTOP_SESSION` included, so the reaper can tell whose they are.
//!
//! A node asks for `PR_SET_PDEATHSIG` (SIGKILL) and stays in the main node's process group:
//! nothing outlives the main node, and a signal to the worker's group reaches its nodes too.
//! The main node owns its nodes through `Nodes`, which ends and reaps them when dropped.
//!
//! **The injected fault, `--crash-after N`**: the main node panics once it has counted N
//! messages, as the originals did when a run went wrong, and leaves its nodes behind. Under
//! this flag, and only under it, nodes are started *without* PDEATHSIG, in a session of
//! their own (`setsid`), with /dev/null for standard error (so they hold none of the
//! conductor's pipes), and with `--linger`: when the main node vanishes they sleep rather
//! than exit. They are orphans carrying the marker, for benchtop's reaper to find.
//!
//! Every wait of the main node has a deadline (`Deadlines`); a node that exits early is
//! noticed within `POLL_SLICE` and named in the error.

mod frame;
mod node;

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) use self::frame::{Filled, Frame, FrameReader, Kind};
pub(crate) use self::node::run as run_node;
pub use self::node::{NodeParams, NodeRole};
use crate::WorkloadError;
use crate::protocol::REPORT_FD_ENV;
use crate::report::StopSignal;

/// The most node processes a workload starts: each is a process, and the storm's main
/// node holds a socket to each.
pub const MAX_NODES: u32 = 1000;

/// How often a waiting main node looks at its stop signal and its nodes' health.
pub(crate) const POLL_SLICE: Duration = Duration::from_millis(100);
/// How long a node's clean exit waits for another node's failure to show, so the error
/// names the cause rather than the neighbour that left because of it.
const CAUSE_GRACE: Duration = Duration::from_millis(200);

/// How long the main node waits for its nodes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadlines {
    /// From the first spawn until every node has answered.
    pub(crate) start: Duration,
    /// Between two frames while messaging.
    pub(crate) quiet: Duration,
    /// For the nodes to exit once told the run is over.
    pub(crate) exit: Duration,
}

impl Deadlines {
    /// Ten seconds, and 20 ms more per node to start (each is an exec of this program).
    pub(crate) fn for_nodes(nodes: u32) -> Deadlines {
        Deadlines {
            start: Duration::from_secs(10) + Duration::from_millis(20) * nodes,
            quiet: Duration::from_secs(10),
            exit: Duration::from_secs(5),
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine, so a
/// node's send time and the main node's receive time can be subtracted.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// A Unix stream socket pair, both ends close-on-exec.
pub(crate) fn socket_pair(
    workload: &'static str,
) -> Result<(UnixStream, UnixStream), WorkloadError> {
    UnixStream::pair().map_err(|source| WorkloadError::Ipc {
        workload,
        context: "creating a socket pair".to_owned(),
        source,
    })
}

/// Marks every descriptor above the standard streams close-on-exec — those this process
/// inherited (the report channel, whatever its own parent leaked to it) as well as its
/// own — so a node inherits only the sockets it is given. Nothing here execs but nodes, so
/// the flag changes nothing else; a descriptor closed and reused meanwhile gets a flag it
/// should have anyway. Best effort: without /proc, the report descriptor is still closed
/// in each node.
fn close_on_exec_everything() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<RawFd>().ok())
        else {
            continue;
        };
        if fd <= 2 {
            continue;
        }
        // SAFETY: fcntl on a descriptor number; one that is not open (the directory's
        // own, already closed) fails with EBADF and is left alone.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// The node processes of one run, ended and reaped when dropped — unless
/// [`Nodes::abandon`]ed for the injected crash.
#[derive(Debug)]
pub(crate) struct Nodes {
    workload: &'static str,
    program: PathBuf,
    /// `--crash-after`: nodes are started to be left behind.
    leave_behind: bool,
    /// The report descriptor, closed in each child.
    report_fd: Option<RawFd>,
    children: Vec<(u32, Child)>,
    abandoned: bool,
}

impl Nodes {
    /// No nodes yet; they will run this program. `leave_behind` starts them as the
    /// injected fault wants them (see the module docs).
    pub(crate) fn new(workload: &'static str, leave_behind: bool) -> Result<Nodes, WorkloadError> {
        let program = std::env::current_exe().map_err(|source| WorkloadError::Ipc {
            workload,
            context: "finding this program, to start node processes from it".to_owned(),
            source,
        })?;
        let report_fd = std::env::var(REPORT_FD_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<RawFd>().ok())
            .filter(|&fd| fd > 2);
        close_on_exec_everything();
        Ok(Nodes {
            workload,
            program,
            leave_behind,
            report_fd,
            children: Vec::new(),
            abandoned: false,
        })
    }

    /// Starts one node: `<program> worker ipc-node <params>`, inheriting the descriptors in
    /// `keep` (-1 for none) and no other of ours.
    pub(crate) fn spawn(
        &mut self,
        params: &NodeParams,
        keep: [RawFd; 2],
    ) -> Result<(), WorkloadError> {
        let mut args: Vec<OsString> = vec!["worker".into(), "ipc-node".into()];
        args.extend(params.to_args().into_iter().map(OsString::from));
        self.spawn_args(params.node_id, &args, keep, Stdio::null())?;
        Ok(())
    }

    /// Starts `<program> <args>` as node `node`, as [`Nodes::spawn`] starts a node: the
    /// marker environment, PDEATHSIG, no report descriptor, only the descriptors in `keep`
    /// inherited. Standard input is `stdin` (a pipe when the child is a worker that this
    /// process conducts, e.g. the echo server); the child is returned for its pipes.
    pub(crate) fn spawn_args(
        &mut self,
        node: u32,
        args: &[OsString],
        keep: [RawFd; 2],
        stdin: Stdio,
    ) -> Result<&mut Child, WorkloadError> {
        let keep_fds = keep;
        let report_fd = self
            .report_fd
            .filter(|fd| !keep_fds.contains(fd))
            .unwrap_or(-1);
        let leave_behind = self.leave_behind;
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };

        let mut command = Command::new(&self.program);
        command
            .args(args)
            .env_remove(REPORT_FD_ENV)
            .stdin(stdin)
            .stdout(Stdio::null())
            .stderr(if leave_behind {
                Stdio::null()
            } else {
                Stdio::inherit()
            });
        // SAFETY: the closure runs between fork and exec and makes only async-signal-safe
        // system calls (fcntl, close, setsid, prctl, getppid, _exit); it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                for fd in keep_fds {
                    if fd >= 0 && libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                if report_fd >= 0 {
                    libc::close(report_fd);
                }
                if leave_behind {
                    if libc::setsid() < 0 {
                        return Err(io::Error::last_os_error());
                    }
                } else {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    // The main node may have died before prctl took effect.
                    if libc::getppid() != parent {
                        libc::_exit(1);
                    }
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|source| WorkloadError::NodeSpawn {
            workload: self.workload,
            node,
            source,
        })?;
        self.children.push((node, child));
        let (_, child) = self
            .children
            .last_mut()
            .ok_or_else(|| WorkloadError::Broken {
                workload: self.workload,
                reason: "a node just started is missing from the list".to_owned(),
            })?;
        Ok(child)
    }

    /// An error for a node that has exited, if one has: while the run goes on, no node
    /// may. One that failed is named before one that exited cleanly (a node exits
    /// quietly when a neighbour's going breaks its socket: the one that failed is the
    /// cause).
    pub(crate) fn check(&mut self) -> Result<(), WorkloadError> {
        let Some(mut found) = self.exited() else {
            return Ok(());
        };
        // A clean exit follows a neighbour's going, whose sockets close before it can be
        // reaped: give the cause a moment to show.
        let until = Instant::now() + CAUSE_GRACE;
        while found.2.success() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
            found = self.exited().unwrap_or(found);
        }
        let (node, pid, status) = found;
        Err(WorkloadError::NodeFailed {
            workload: self.workload,
            node,
            pid,
            reason: format!("ended ({status}) before the run was over"),
        })
    }

    /// The node that has exited, one that failed before one that exited cleanly.
    fn exited(&mut self) -> Option<(u32, u32, std::process::ExitStatus)> {
        let mut first: Option<(u32, u32, std::process::ExitStatus)> = None;
        for (node, child) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                let worse = first.is_none_or(|(_, _, s)| s.success() && !status.success());
                if worse {
                    first = Some((*node, child.id(), status));
                }
            }
        }
        first
    }

    /// After a socket closed under the main node: waits a moment for the node that went,
    /// so the error names it; `otherwise` when none has exited.
    pub(crate) fn blame(&mut self, otherwise: WorkloadError) -> WorkloadError {
        let until = Instant::now() + Duration::from_secs(1);
        loop {
            if let Err(e) = self.check() {
                return e;
            }
            if Instant::now() >= until {
                return otherwise;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for every node to exit (each has been told the run is over): an error for
    /// one that fails or outstays `deadline` (it is then killed, and so are the rest).
    pub(crate) fn finish(mut self, deadline: Duration) -> Result<(), WorkloadError> {
        let until = Instant::now() + deadline;
        let workload = self.workload;
        for (node, child) in &mut self.children {
            let status = loop {
                match child.try_wait() {
                    Ok(Some(status)) => break status,
                    Ok(None) if Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Ok(None) => {
                        return Err(WorkloadError::NodeFailed {
                            workload,
                            node: *node,
                            pid: child.id(),
                            reason: format!(
                                "did not exit within {deadline:?} of the end of the run; \
                                 the nodes were killed"
                            ),
                        });
                    }
                    Err(source) => {
                        return Err(WorkloadError::Ipc {
                            workload,
                            context: format!("waiting for node {node} (pid {})", child.id()),
                            source,
                        });
                    }
                }
            };
            if !status.success() {
                return Err(WorkloadError::NodeFailed {
                    workload,
                    node: *node,
                    pid: child.id(),
                    reason: format!("ended with {status} at the end of the run"),
                });
            }
        }
        // All reaped: nothing left for Drop.
        self.children.clear();
        Ok(())
    }

    /// The injected crash: the nodes are left running (Drop neither kills nor reaps them).
    /// Returns how many there are.
    pub(crate) fn abandon(&mut self) -> usize {
        self.abandoned = true;
        self.children.len()
    }

    /// Panics on purpose, leaving the nodes behind, once `messages` reaches
    /// `crash_after` (`--crash-after`).
    pub(crate) fn crash_if_due(&mut self, crash_after: Option<u64>, messages: u64) {
        if let Some(limit) = crash_after
            && messages >= limit
        {
            let left = self.abandon();
            panic!(
                "{}: --crash-after {limit}: the main node crashes on purpose after \
                 {messages} messages, leaving {left} node processes behind",
                self.workload
            );
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        if self.abandoned {
            return;
        }
        for (_, child) in &mut self.children {
            // Already gone is fine: kill fails, wait reaps.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One socket of the main node, with its reader.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) stream: UnixStream,
    pub(crate) reader: FrameReader,
    /// Who is at the other end, for messages: `node 3`.
    pub(crate) peer: String,
}

impl Link {
    pub(crate) fn new(stream: UnixStream, peer: String, frames: usize) -> Link {
        Link {
            stream,
            reader: FrameReader::new(frames),
            peer,
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Writes one frame; a failure names the peer (and the node that went, if one did).
    pub(crate) fn send(
        &mut self,
        frame: Frame,
        nodes: &mut Nodes,
        workload: &'static str,
    ) -> Result<(), WorkloadError> {
        self.stream.write_all(&frame.encode()).map_err(|source| {
            nodes.blame(WorkloadError::Ipc {
                workload,
                context: format!("writing to {}", self.peer),
                source,
            })
        })
    }

    /// Reads what is there (the socket polled readable) into the reader; the end of the
    /// stream is an error naming the node that went.
    pub(crate) fn fill(
        &mut self,
        nodes: &mut Nodes,
        workload: &'static str,
    ) -> Result<(), WorkloadError> {
        match self.reader.fill(&mut self.stream) {
            Ok(Filled::Bytes) => Ok(()),
            Ok(Filled::End { .. }) => Err(nodes.blame(WorkloadError::Broken {
                workload,
                reason: format!("{} closed its socket before the run was over", self.peer),
            })),
            Err(source) => Err(nodes.blame(WorkloadError::Ipc {
                workload,
                context: format!("reading from {}", self.peer),
                source,
            })),
        }
    }

    /// The next frame already read, if any; a malformed one is an error.
    pub(crate) fn next_frame(
        &mut self,
        workload: &'static str,
    ) -> Result<Option<Frame>, WorkloadError> {
        match self.reader.next_frame() {
            None => Ok(None),
            Some(Ok(frame)) => Ok(Some(frame)),
            Some(Err(reason)) => Err(WorkloadError::BadFrame {
                workload,
                context: format!("from {}", self.peer),
                reason,
            }),
        }
    }
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// Some descriptor is readable (see the `revents`).
    Ready,
    /// The stop signal was set.
    Stopped,
}

/// Waits until one of `fds` is readable (or closed), at most `deadline`. Every
/// [`POLL_SLICE`] it looks at `stop` (when given) and at the nodes, so a node that exited
/// is an error at once rather than at the deadline.
pub(crate) fn wait_readable(
    fds: &mut [libc::pollfd],
    deadline: Duration,
    waiting_for: &dyn Fn() -> String,
    nodes: &mut Nodes,
    stop: Option<&StopSignal>,
    workload: &'static str,
) -> Result<Waited, WorkloadError> {
    let until = Instant::now() + deadline;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let slice = left.min(POLL_SLICE);
        let ms = libc::c_int::try_from(slice.as_millis()).unwrap_or(libc::c_int::MAX);
        for fd in fds.iter_mut() {
            fd.revents = 0;
        }
        // SAFETY: `fds` is a valid, exclusively borrowed slice of pollfd of that length.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if ready > 0 {
            return Ok(Waited::Ready);
        }
        if ready < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(WorkloadError::Ipc {
                    workload,
                    context: "waiting on the node sockets".to_owned(),
                    source: err,
                });
            }
        }
        if stop.is_some_and(StopSignal::is_set) {
            return Ok(Waited::Stopped);
        }
        nodes.check()?;
        if left.is_zero() {
            return Err(WorkloadError::NodeTimeout {
                workload,
                waiting_for: waiting_for(),
                after: deadline,
            });
        }
    }
}

/// A pollfd waiting for input on `fd`.
pub(crate) fn pollin(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Names the calling thread — the process, when called from its main thread — as `ps`,
/// `top` and perf's comm show it (at most 15 bytes are kept): `bt-ring`, `bt-ring-node`.
pub fn set_process_name(name: &str) {
    let mut bytes: Vec<u8> = name.bytes().filter(|&b| b != 0).take(15).collect();
    bytes.push(0);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, bytes.as_ptr() as libc::c_ulong);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_peer_is_a_timeout_naming_what_was_awaited() {
        let (_quiet, ours) = socket_pair("test").unwrap();
        let mut nodes = Nodes::new("test", false).unwrap();
        let mut fds = [pollin(ours.as_raw_fd())];
        let started = Instant::now();
        let err = wait_readable(
            &mut fds,
            Duration::from_millis(250),
            &|| "the ring to answer".to_owned(),
            &mut nodes,
            None,
            "test",
        )
        .unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(250));
        let text = err.to_string();
        assert!(
            text.contains("within 250ms") && text.contains("the ring to answer"),
            "{text}"
        );
    }

    #[test]
    fn a_stop_ends_the_wait_and_data_or_a_close_wakes_it() {
        let (mut theirs, ours) = socket_pair("test").unwrap();
        let mut nodes = Nodes::new("test", false).unwrap();
        let stop = StopSignal::new();
        stop.set();
        let mut fds = [pollin(ours.as_raw_fd())];
        let waited = wait_readable(
            &mut fds,
            Duration::from_secs(10),
            &String::new,
            &mut nodes,
            Some(&stop),
            "test",
        )
        .unwrap();
        assert_eq!(waited, Waited::Stopped);

        theirs
            .write_all(&Frame::new(Kind::Bye, 0, 0, 0).encode())
            .unwrap();
        let waited = wait_readable(
            &mut fds,
            Duration::from_secs(10),
            &String::new,
            &mut nodes,
            None,
            "test",
        )
        .unwrap();
        assert_eq!(waited, Waited::Ready);
        assert_ne!(fds[0].revents & libc::POLLIN, 0);

        let mut link = Link::new(ours, "node 1".to_owned(), 4);
        link.fill(&mut nodes, "test").unwrap();
        assert_eq!(link.next_frame("test").unwrap().unwrap().kind, Kind::Bye);
        drop(theirs);
        let err = link.fill(&mut nodes, "test").unwrap_err().to_string();
        assert!(err.contains("node 1 closed its socket"), "{err}");
    }

    #[test]
    fn monotonic_time_moves_forward() {
        let a = monotonic_ns();
        std::thread::sleep(Duration::from_millis(2));
        assert!(monotonic_ns() >= a + 2_000_000);
    }
}
