//! The thread that owns the ring buffers and copies their records out as they come.

use std::collections::HashSet;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, SyncSender};
use std::time::{Duration, Instant};

use perf_event::Counter;

use super::events::{self, EventPlan, Ring};
use super::shared::Shared;
use crate::ProfilerError;
use crate::records::{self, Task};

/// Longest wait in the drainer's poll: stop requests also arrive through the eventfd,
/// so this only bounds how stale the live counters get (and how often a buffer whose
/// event hung up is read).
const POLL_MAX: Duration = Duration::from_millis(100);
/// How long a thread may be listed in /proc before its creator's fork record arrives
/// (the kernel lists it a moment before it writes the record).
const FORK_RECORD_GRACE: Duration = Duration::from_millis(5);

/// Attach's second look at the threads of the process.
#[derive(Debug)]
pub(crate) struct Follow {
    pub pid: u32,
    /// Threads with events of their own.
    pub opened: HashSet<u32>,
    pub plan: EventPlan,
    /// The CPUs of the ring buffers, in order.
    pub cpus: Vec<usize>,
    /// Looks at most.
    pub rounds: usize,
}

/// Bytes of the header [`Drainer::copy`] puts before each record: type (u32), misc
/// (u16), padding (u16), body length (u32).
pub(super) const RECORD_HEAD: usize = 12;
/// Bytes of copied records waiting for the collector before the drainer drops rounds
/// (and counts their records lost) rather than grow further: some seconds of the
/// heaviest switch storm measured here (~25 MB/s per CPU) while a batch or the warm-up
/// holds the collector.
const MAX_QUEUED_BYTES: u64 = 256 << 20;

/// What the drainer thread sends the collector, in order.
#[derive(Debug)]
pub(super) enum Drained {
    /// One pass over every ring buffer: records framed as [`Drainer::copy`] writes them.
    Round(Vec<u8>),
    /// Ids of off-CPU and memory events opened after start (threads found after an
    /// attach); sent before any round with their samples.
    Ids(events::EventIds),
    /// Something the user should know.
    Warning(String),
    /// The events were disabled at this time; the last round follows.
    Stopped(Instant),
}

/// The name of the drainer thread of `pid` (the kernel keeps 15 bytes).
pub(super) fn drainer_thread_name(pid: u32) -> String {
    format!("drain-{pid}")
}

/// The thread that owns the ring buffers: it polls them and copies every record out as
/// soon as it is written, so that symbolization (the warm-up's 40–90 ms of kallsyms, a
/// batch meeting a large binary's debug info) never stalls reading. Measured on a
/// switch storm of ~120 000 switches/s (off-CPU samples with callchains and switch
/// records, ~25 MB/s per CPU): reading in place on the symbolizing thread lost 5–40 % of
/// the records to the warm-up alone with 2 MiB buffers; copied out here, none.
pub(super) struct Drainer {
    pub(super) shared: Arc<Shared>,
    pub(super) rings: Vec<Ring>,
    pub(super) counters: Vec<Counter>,
    pub(super) enable: bool,
    pub(super) follow: Option<Follow>,
    /// Events opened on threads found by attach's second look.
    pub(super) follow_counters: Vec<Counter>,
    /// Threads announced by fork records while attaching.
    pub(super) forked: HashSet<u32>,
    pub(super) tracking_forks: bool,
    pub(super) tx: mpsc::Sender<Drained>,
    /// Buffers the collector is done with.
    pub(super) recycle: mpsc::Receiver<Vec<u8>>,
    /// A round was dropped (the collector is far behind): the next one starts with a
    /// loss record, so that open off-CPU intervals are not stretched over it.
    pub(super) dropped: bool,
}

impl Drainer {
    pub(super) fn run(
        mut self,
        ready: SyncSender<Result<(), ProfilerError>>,
    ) -> Result<(), ProfilerError> {
        if self.enable {
            let enabled = self
                .rings
                .iter_mut()
                .map(|r| r.enable())
                .chain(self.counters.iter_mut().map(|c| c.enable()))
                .collect::<io::Result<()>>();
            if let Err(source) = enabled {
                let reason = format!("enabling the events failed: {source}");
                let _ = ready.send(Err(ProfilerError::PerfControl {
                    action: "enable",
                    source,
                }));
                return Err(ProfilerError::Thread { reason });
            }
        }
        self.follow_threads();
        if ready.send(Ok(())).is_err() {
            return Err(ProfilerError::Thread {
                reason: "Sampler::start stopped waiting for its thread".into(),
            });
        }
        drop(ready);
        let mut fds: Vec<libc::pollfd> = self
            .rings
            .iter()
            .map(|r| libc::pollfd {
                fd: r.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .chain(std::iter::once(libc::pollfd {
                fd: self.shared.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }))
            .collect();
        let wake = fds.len() - 1;
        let timeout = POLL_MAX.as_millis() as libc::c_int;
        loop {
            // SAFETY: fds is a live, correctly sized array of pollfd.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(ProfilerError::PerfControl {
                    action: "poll",
                    source: e,
                });
            }
            if fds[wake].revents & libc::POLLIN != 0 {
                let mut buf = [0u8; 8];
                // SAFETY: reads at most 8 bytes into a live 8-byte buffer.
                let _ = unsafe { libc::read(fds[wake].fd, buf.as_mut_ptr().cast(), 8) };
            }
            // The sampled tree is gone: stop polling its fd (negative fds are ignored
            // by poll), or it would report POLLHUP forever. Its buffer is still read
            // every round.
            for fd in &mut fds[..wake] {
                if fd.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                    fd.fd = -1;
                }
            }
            self.round();
            if self.shared.stop.load(Ordering::SeqCst) {
                break;
            }
        }
        // Disabling the parent event disables the inherited ones too. A failure only
        // means more samples arrive before the buffers are unmapped.
        for ring in &mut self.rings {
            let _ = ring.disable();
        }
        for c in self.counters.iter_mut().chain(&mut self.follow_counters) {
            let _ = c.disable();
        }
        let _ = self.tx.send(Drained::Stopped(Instant::now()));
        self.round();
        Ok(())
    }

    /// Copies every record of every buffer and sends them as one round.
    fn round(&mut self) {
        let mut buf = self.recycle.try_recv().unwrap_or_default();
        buf.clear();
        if self.dropped {
            // A PERF_RECORD_LOST of nothing more (already counted) at an unknown time.
            let body = [0u8; 16 + records::SAMPLE_ID_LEN];
            push_record(&mut buf, records::RECORD_LOST, 0, &[&body]);
        }
        let mut copied = 0u64;
        for i in 0..self.rings.len() {
            copied += self.copy(i, &mut buf);
        }
        let queued = self.shared.queued_bytes.load(Ordering::Relaxed);
        if queued.saturating_add(buf.len() as u64) > MAX_QUEUED_BYTES {
            self.shared.lost.fetch_add(copied, Ordering::Relaxed);
            self.dropped = true;
            return;
        }
        self.dropped = false;
        self.shared
            .queued_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        let _ = self.tx.send(Drained::Round(buf));
    }

    /// Appends the records of ring `i` to `buf`, each as a [`RECORD_HEAD`] header and
    /// its body; returns how many.
    fn copy(&mut self, i: usize, buf: &mut Vec<u8>) -> u64 {
        let mut n = 0;
        let Drainer {
            rings,
            forked,
            tracking_forks,
            ..
        } = self;
        let Some(ring) = rings.get_mut(i) else {
            return 0;
        };
        while let Some(record) = ring.next_record() {
            let (ty, misc) = (record.ty(), record.misc());
            let start = buf.len();
            push_record(buf, ty, misc, record.data());
            if *tracking_forks
                && ty == records::RECORD_FORK
                && let Some(t) = buf.get(start + RECORD_HEAD..).and_then(Task::parse)
            {
                forked.insert(t.tid);
            }
            n += 1;
        }
        n
    }

    /// After an attach: threads listed in /proc that have no events of their own and
    /// were not announced by a fork record of a followed thread (they were created by a
    /// thread before its events were opened) get events of their own. Each look reads
    /// the buffers first, so that the fork records written so far are known, and waits
    /// [`FORK_RECORD_GRACE`] before trusting a thread's absence from them.
    fn follow_threads(&mut self) {
        let Some(mut follow) = self.follow.take() else {
            return;
        };
        self.tracking_forks = true;
        for _ in 0..follow.rounds {
            self.round();
            if self.unfollowed(&follow).is_empty() {
                break;
            }
            std::thread::sleep(FORK_RECORD_GRACE);
            self.round();
            let mut new_ids = events::EventIds::default();
            for tid in self.unfollowed(&follow) {
                match events::open_thread_events(tid, &follow.cpus, &self.rings, &follow.plan) {
                    Ok((counters, ids)) => {
                        self.follow_counters.extend(counters);
                        new_ids.extend(ids);
                    }
                    // Gone already.
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) => {
                        let _ = self.tx.send(Drained::Warning(format!(
                            "thread {tid} of process {}, created while attaching, is not \
                             sampled: opening its events failed: {e}",
                            follow.pid
                        )));
                    }
                }
                follow.opened.insert(tid);
            }
            if !new_ids.is_empty() {
                let _ = self.tx.send(Drained::Ids(new_ids));
            }
        }
        self.tracking_forks = false;
        self.forked = HashSet::new();
    }

    /// Threads of the followed process with neither events nor a fork record.
    fn unfollowed(&self, follow: &Follow) -> Vec<u32> {
        let mut tids = events::list_threads(follow.pid).unwrap_or_default();
        tids.retain(|t| !follow.opened.contains(t) && !self.forked.contains(t));
        tids
    }
}

/// Appends a record (its body in `parts`) to `buf` with a [`RECORD_HEAD`] header.
fn push_record(buf: &mut Vec<u8>, ty: u32, misc: u16, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(&misc.to_ne_bytes());
    buf.extend_from_slice(&0u16.to_ne_bytes());
    buf.extend_from_slice(&(len as u32).to_ne_bytes());
    for p in parts {
        buf.extend_from_slice(p);
    }
}
