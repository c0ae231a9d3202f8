//! The sampler's background thread: poll the ring buffers, read records in place,
//! aggregate callchains into pending raw stacks, and fold them into the stack tree in
//! symbolized batches.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use benchtop_sessions::{FrameId, StackTree};

use crate::ProfilerError;
use crate::records::{self, Comm, Mmap2, Sample, SplitChain, Task};
use crate::sampler::{Ring, SamplerOptions, Shared};
use crate::symbolize::Resolver;

/// Longest wait in poll: stop requests also arrive through the eventfd, so this only
/// bounds how stale the live counters get.
const POLL_MAX: Duration = Duration::from_millis(100);
/// Distinct pending stacks (or unresolved addresses) that trigger a batch before its
/// time, bounding the memory held in raw form.
const MAX_PENDING: usize = 20_000;
/// No thread-name frame: the key slot holds this.
const NO_THREAD: u64 = u64::MAX;
/// Key layout: [process name, thread name, pid, kernel frame count, kernel.., user..].
const KEY_HEADER: usize = 4;

/// What the thread hands back to [`crate::Sampler::finish`].
#[derive(Debug)]
pub(crate) struct Collected {
    pub tree: StackTree,
    pub warnings: Vec<String>,
    pub final_batch_time: Duration,
    pub stopped_at: Instant,
    pub unresolved: u64,
}

#[derive(Debug)]
pub(crate) struct Collector {
    shared: Arc<Shared>,
    per_thread: bool,
    kernel_frames: bool,
    batch_interval: Duration,
    tree: StackTree,
    /// Thread id → interned name; the process name is the name of its main thread.
    names: HashMap<u32, FrameId>,
    /// Raw stacks (see KEY_HEADER) not folded into the tree yet, with their counts.
    pending: HashMap<Box<[u64]>, u64>,
    /// Pending stacks of a batch with addresses to resolve first (reused).
    deferred: Vec<(Box<[u64]>, u64)>,
    /// The process of the previous sample: the resolver has its mappings.
    last_pid: Option<u32>,
    /// The process the events were opened on.
    target: u32,
    resolver: Resolver,
    batches: u64,
    /// Threads and processes that exited, with the batch number when seen.
    exited_threads: Vec<(u32, u64)>,
    malformed: u64,
    // Buffers reused for every record.
    key: Vec<u64>,
    split: SplitChain,
    copy: Vec<u8>,
    frames: Vec<FrameId>,
    want_user: Vec<(u32, u64)>,
    want_kernel: Vec<u64>,
    name_buf: String,
}

impl Collector {
    /// A collector for events on `pid`. Runs on the sampler thread before the events are
    /// enabled: it reads the target's name and mappings now, while it surely lives.
    pub fn new(shared: Arc<Shared>, pid: u32, opts: &SamplerOptions, kernel_frames: bool) -> Self {
        let mut c = Collector {
            shared,
            per_thread: opts.per_thread,
            kernel_frames,
            batch_interval: opts.batch_interval.max(Duration::from_millis(1)),
            tree: StackTree::new(),
            names: HashMap::new(),
            pending: HashMap::new(),
            deferred: Vec::new(),
            last_pid: Some(pid),
            target: pid,
            resolver: Resolver::new(opts.symbols),
            batches: 0,
            exited_threads: Vec::new(),
            malformed: 0,
            key: Vec::with_capacity(256),
            split: SplitChain::default(),
            copy: Vec::new(),
            frames: Vec::with_capacity(256),
            want_user: Vec::new(),
            want_kernel: Vec::new(),
            name_buf: String::new(),
        };
        c.name_of(pid, pid);
        c.resolver.see_process(pid);
        c
    }

    /// Loads the kernel symbols (with kernel frames) and the symbols and debug info of
    /// the files the target has mapped (its executable, the C library…), one at a time,
    /// draining the ring buffers between steps: this runs while the workload starts, so
    /// start-up costs the recording nothing, no sample is lost to it, and the first
    /// batch does not pay for it (measured: 44–95 ms of a first batch before, 11–16 ms
    /// after).
    fn warm_up(&mut self, pid: u32, rings: &mut [Ring]) {
        if self.kernel_frames {
            self.resolver.load_kernel_symbols();
            for ring in rings.iter_mut() {
                self.drain(ring);
            }
        }
        for (file, offset) in self.resolver.files_to_preload(pid) {
            if self.shared.stop.load(Ordering::SeqCst) {
                return;
            }
            self.resolver.preload_file(file, offset);
            for ring in rings.iter_mut() {
                self.drain(ring);
            }
        }
    }

    /// The thread body: enables the events, tells [`crate::Sampler::start`] through
    /// `ready`, runs until [`Shared::stop`], then disables the events, drains the buffers
    /// and runs the last batch (unless abandoned).
    pub fn run(
        mut self,
        mut rings: Vec<Ring>,
        ready: SyncSender<Result<(), ProfilerError>>,
    ) -> Result<Collected, ProfilerError> {
        for ring in &mut rings {
            if let Err(source) = ring.enable() {
                let reason = format!("enabling the events failed: {source}");
                let _ = ready.send(Err(ProfilerError::PerfControl {
                    action: "enable",
                    source,
                }));
                return Err(ProfilerError::Thread { reason });
            }
        }
        if ready.send(Ok(())).is_err() {
            return Err(ProfilerError::Thread {
                reason: "Sampler::start stopped waiting for its thread".into(),
            });
        }
        drop(ready);
        self.warm_up(self.target, &mut rings);
        let mut fds: Vec<libc::pollfd> = rings
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
        let mut next_batch = Instant::now() + self.batch_interval;
        loop {
            let timeout = poll_timeout_ms(next_batch.saturating_duration_since(Instant::now()));
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
            for (ring, fd) in rings.iter_mut().zip(&mut fds) {
                self.drain(ring);
                // The sampled tree is gone: stop polling this fd (negative fds are
                // ignored by poll), or it would report POLLHUP forever.
                if fd.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                    fd.fd = -1;
                }
            }
            if self.shared.stop.load(Ordering::SeqCst) {
                break;
            }
            if Instant::now() >= next_batch || self.pending.len() >= MAX_PENDING {
                self.batch();
                next_batch = Instant::now() + self.batch_interval;
            }
        }
        for ring in &mut rings {
            // Disabling the parent event disables the inherited ones too. A failure
            // only means more samples arrive before the buffers are unmapped.
            let _ = ring.disable();
        }
        let stopped_at = Instant::now();
        for ring in &mut rings {
            self.drain(ring);
        }
        drop(rings);
        let mut final_batch_time = Duration::ZERO;
        if !self.shared.abandon.load(Ordering::SeqCst) {
            let t = Instant::now();
            self.batch();
            final_batch_time = t.elapsed();
        }
        let mut warnings = std::mem::take(&mut self.resolver.warnings);
        if self.malformed > 0 {
            warnings.push(format!(
                "{} perf records were malformed and skipped",
                self.malformed
            ));
        }
        Ok(Collected {
            tree: self.tree,
            warnings,
            final_batch_time,
            stopped_at,
            unresolved: self.resolver.counts.unresolved,
        })
    }

    /// Reads every record in `ring`, in place; a record wrapping around the end of the
    /// buffer is copied into a reused buffer.
    fn drain(&mut self, ring: &mut Ring) {
        let mut samples = 0u64;
        let mut copy = std::mem::take(&mut self.copy);
        while let Some(record) = ring.next_record() {
            let (ty, misc) = (record.ty(), record.misc());
            let body: &[u8] = match record.data() {
                [one] => one,
                parts => {
                    copy.clear();
                    for p in parts {
                        copy.extend_from_slice(p);
                    }
                    &copy
                }
            };
            if ty == records::RECORD_SAMPLE {
                samples += 1;
            }
            self.on_record(ty, misc, body);
        }
        self.copy = copy;
        if samples > 0 {
            self.shared.samples.fetch_add(samples, Ordering::Relaxed);
            self.shared
                .pending
                .store(self.pending.len() as u64, Ordering::Relaxed);
        }
    }

    fn on_record(&mut self, ty: u32, misc: u16, body: &[u8]) {
        match ty {
            records::RECORD_SAMPLE => match Sample::parse(body) {
                Some(s) => self.on_sample(misc, &s),
                None => self.malformed += 1,
            },
            records::RECORD_COMM => match Comm::parse(body) {
                Some(c) => self.on_comm(misc, &c),
                None => self.malformed += 1,
            },
            records::RECORD_MMAP2 => match Mmap2::parse(body) {
                Some(m) if m.prot & libc::PROT_EXEC as u32 != 0 => {
                    let time = records::sample_id_time(body).unwrap_or(0);
                    self.resolver.on_mmap(m.pid, &m, time);
                }
                Some(_) => {}
                None => self.malformed += 1,
            },
            records::RECORD_FORK => match Task::parse(body) {
                Some(t) => {
                    if let Some(&name) = self.names.get(&t.ptid) {
                        self.names.entry(t.tid).or_insert(name);
                    }
                    if t.pid != t.ppid {
                        self.resolver.on_fork(t.ppid, t.pid);
                    }
                }
                None => self.malformed += 1,
            },
            records::RECORD_EXIT => match Task::parse(body) {
                Some(t) => {
                    self.exited_threads.push((t.tid, self.batches));
                    if t.pid == t.tid {
                        self.resolver.on_exit(t.pid, self.batches);
                    }
                }
                None => self.malformed += 1,
            },
            records::RECORD_LOST => {
                let lost = records::parse_lost(body).unwrap_or(0);
                self.shared.lost.fetch_add(lost, Ordering::Relaxed);
            }
            records::RECORD_LOST_SAMPLES => {
                let lost = records::parse_lost_samples(body).unwrap_or(0);
                self.shared.lost.fetch_add(lost, Ordering::Relaxed);
            }
            records::RECORD_THROTTLE => {
                self.shared.throttled.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    fn on_sample(&mut self, misc: u16, s: &Sample<'_>) {
        self.split.split(s.callchain(), s.ip, misc);
        if !self.kernel_frames {
            self.split.kernel.clear();
        }
        let process = self.name_of(s.pid, s.pid);
        let thread = if self.per_thread {
            u64::from(self.name_of(s.pid, s.tid).0)
        } else {
            NO_THREAD
        };
        // Samples come in runs of one process: only a change of process can mean one
        // not seen yet, whose mappings the resolver then reads (once).
        if self.last_pid != Some(s.pid) {
            self.resolver.see_process(s.pid);
            self.last_pid = Some(s.pid);
        }
        self.key.clear();
        self.key.extend([
            u64::from(process.0),
            thread,
            u64::from(s.pid),
            self.split.kernel.len() as u64,
        ]);
        self.key.extend_from_slice(&self.split.kernel);
        self.key.extend_from_slice(&self.split.user);
        match self.pending.get_mut(self.key.as_slice()) {
            Some(count) => *count += 1,
            None => {
                self.pending.insert(self.key.as_slice().into(), 1);
            }
        }
    }

    fn on_comm(&mut self, misc: u16, c: &Comm<'_>) {
        if misc & records::MISC_COMM_EXEC != 0 && c.pid == c.tid {
            self.resolver.on_exec(c.pid);
        }
        let name = String::from_utf8_lossy(c.name);
        let id = self.tree.intern(&name);
        self.names.insert(c.tid, id);
    }

    /// The interned name of thread `tid` of process `pid`, read from /proc the first
    /// time it is seen without a COMM record.
    fn name_of(&mut self, pid: u32, tid: u32) -> FrameId {
        if let Some(&id) = self.names.get(&tid) {
            return id;
        }
        let path = if pid == tid {
            format!("/proc/{pid}/comm")
        } else {
            format!("/proc/{pid}/task/{tid}/comm")
        };
        let read = crate::procfs::read_into(path.as_ref(), &mut self.name_buf).is_ok();
        let id = if read && !self.name_buf.trim_end().is_empty() {
            self.tree.intern(self.name_buf.trim_end())
        } else {
            self.tree.intern(&format!("[{tid}]"))
        };
        self.names.insert(tid, id);
        id
    }

    /// Symbolizes what the pending stacks need and folds them into the tree. Each
    /// address is looked up once: stacks whose frames are all cached are folded at
    /// once; the others wait until their missing addresses are resolved.
    fn batch(&mut self) {
        let started = Instant::now();
        let Collector {
            pending,
            deferred,
            resolver,
            tree,
            frames,
            want_user,
            want_kernel,
            ..
        } = self;
        let unknown = tree.intern("[unknown]");
        for (key, count) in pending.drain() {
            let pid = key[2] as u32;
            let nk = key[3] as usize;
            let (kernel, user) = key[KEY_HEADER..].split_at(nk);
            let missing_before = want_user.len() + want_kernel.len();
            stack_names(frames, &key);
            // Callchains are leaf first; the tree wants the root first.
            for &a in user.iter().rev() {
                match resolver.user(pid, a) {
                    Some(f) => frames.extend_from_slice(f),
                    None => want_user.push((pid, a)),
                }
            }
            for &a in kernel.iter().rev() {
                match resolver.kernel(a) {
                    Some(f) => frames.extend_from_slice(f),
                    None => want_kernel.push(a),
                }
            }
            if want_user.len() + want_kernel.len() == missing_before {
                tree.add(frames, count);
            } else {
                deferred.push((key, count));
            }
        }
        if !want_user.is_empty() || !want_kernel.is_empty() {
            resolver.resolve(tree, want_user, want_kernel);
        }
        for (key, count) in deferred.drain(..) {
            let pid = key[2] as u32;
            let nk = key[3] as usize;
            let (kernel, user) = key[KEY_HEADER..].split_at(nk);
            stack_names(frames, &key);
            for &a in user.iter().rev() {
                frames.extend_from_slice(resolver.user(pid, a).unwrap_or(&[unknown]));
            }
            for &a in kernel.iter().rev() {
                frames.extend_from_slice(resolver.kernel(a).unwrap_or(&[unknown]));
            }
            tree.add(frames, count);
        }
        self.batches += 1;
        // Two batches after an exit every buffer has been read past its last sample.
        let before = self.batches.saturating_sub(1);
        self.resolver.end_batch(before);
        let names = &mut self.names;
        self.exited_threads.retain(|&(tid, at)| {
            let keep = at >= before;
            if !keep {
                names.remove(&tid);
            }
            keep
        });

        let ns = started.elapsed().as_nanos() as u64;
        let s = &self.shared;
        s.batches.store(self.batches, Ordering::Relaxed);
        s.pending.store(0, Ordering::Relaxed);
        s.symbolize_ns.fetch_add(ns, Ordering::Relaxed);
        s.last_batch_ns.store(ns, Ordering::Relaxed);
        s.max_batch_ns.fetch_max(ns, Ordering::Relaxed);
    }
}

/// Starts `frames` with the process and thread name frames of a pending stack's key.
fn stack_names(frames: &mut Vec<FrameId>, key: &[u64]) {
    frames.clear();
    frames.push(FrameId(key[0] as u32));
    if key[1] != NO_THREAD {
        frames.push(FrameId(key[1] as u32));
    }
}

/// The poll timeout for `left` until the next batch, capped at [`POLL_MAX`] and rounded
/// *up* to whole milliseconds: rounded down, the last fraction of a millisecond before a
/// batch would be polls with timeout 0, spinning.
fn poll_timeout_ms(left: Duration) -> libc::c_int {
    let ms = left.min(POLL_MAX).as_nanos().div_ceil(1_000_000);
    ms.min(libc::c_int::MAX as u128) as libc::c_int
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn collect_test_root_fn() -> usize {
        std::hint::black_box(collect_test_root_fn as *const () as usize)
    }

    #[inline(never)]
    fn collect_test_leaf_fn() -> usize {
        std::hint::black_box(collect_test_leaf_fn as *const () as usize)
    }

    fn sample_record(pid: u32, chain: &[u64]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(chain.get(1).copied().unwrap_or(0).to_ne_bytes()); // ip
        body.extend(pid.to_ne_bytes());
        body.extend(pid.to_ne_bytes());
        body.extend(0u64.to_ne_bytes()); // time
        body.extend(0u32.to_ne_bytes()); // cpu
        body.extend(0u32.to_ne_bytes());
        body.extend(1_001_001u64.to_ne_bytes()); // period
        body.extend((chain.len() as u64).to_ne_bytes());
        for &a in chain {
            body.extend(a.to_ne_bytes());
        }
        body
    }

    /// A user-frames-only, names-only collector on this process, with the addresses of
    /// the two test functions.
    fn names_only_collector() -> (u32, Arc<Shared>, Collector, u64, u64) {
        let pid = std::process::id();
        let shared = Arc::new(Shared::new().unwrap());
        let opts = SamplerOptions {
            symbols: crate::SymbolDetail::NamesOnly,
            ..SamplerOptions::default()
        };
        let c = Collector::new(Arc::clone(&shared), pid, &opts, false);
        let root = collect_test_root_fn() as u64;
        let leaf = collect_test_leaf_fn() as u64;
        (pid, shared, c, root, leaf)
    }

    #[test]
    fn leaf_first_callchains_become_root_first_stacks_under_the_process_name() {
        let (pid, shared, mut c, root, leaf) = names_only_collector();
        // Leaf first; the caller entry is a return address just past the call (+1 here,
        // moved back by one before lookup, so it stays inside the root function).
        let user = -512i64 as u64;
        let body = sample_record(pid, &[user, leaf + 4, root + 1]);
        for _ in 0..3 {
            c.on_record(records::RECORD_SAMPLE, 2, &body);
        }
        assert_eq!(c.pending.len(), 1);
        c.batch();
        assert!(c.pending.is_empty());
        let folded = c.tree.to_folded();
        let line = folded.lines().next().unwrap();
        let (stack, weight) = line.rsplit_once(' ').unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert_eq!(weight, "3");
        assert_eq!(frames.len(), 3, "{line}");
        assert_eq!(frames[0], comm.trim_end());
        assert!(frames[1].ends_with("collect_test_root_fn"), "{line}");
        assert!(frames[2].ends_with("collect_test_leaf_fn"), "{line}");
        assert_eq!(shared.batches.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn stacks_with_cached_and_new_frames_fold_alike_across_batches() {
        let (pid, _shared, mut c, root, leaf) = names_only_collector();
        let user = -512i64 as u64;
        let known = sample_record(pid, &[user, leaf + 4, root + 1]);
        c.on_record(records::RECORD_SAMPLE, 2, &known);
        c.batch();
        // Second batch: the same stack, all cached, and one with a new leaf address.
        let new_leaf = sample_record(pid, &[user, leaf + 8, root + 1]);
        c.on_record(records::RECORD_SAMPLE, 2, &known);
        c.on_record(records::RECORD_SAMPLE, 2, &new_leaf);
        c.on_record(records::RECORD_SAMPLE, 2, &new_leaf);
        c.batch();
        assert!(c.pending.is_empty() && c.deferred.is_empty());
        let folded = c.tree.to_folded();
        let lines: Vec<&str> = folded.lines().collect();
        assert_eq!(lines.len(), 1, "{folded}");
        assert!(lines[0].ends_with("collect_test_leaf_fn 4"), "{folded}");
    }

    #[test]
    fn the_poll_timeout_rounds_up_to_whole_milliseconds() {
        assert_eq!(poll_timeout_ms(Duration::ZERO), 0);
        assert_eq!(poll_timeout_ms(Duration::from_nanos(1)), 1);
        assert_eq!(poll_timeout_ms(Duration::from_micros(300)), 1);
        assert_eq!(poll_timeout_ms(Duration::from_micros(1_000)), 1);
        assert_eq!(poll_timeout_ms(Duration::from_micros(1_001)), 2);
        assert_eq!(poll_timeout_ms(Duration::from_secs(3600)), 100);
    }
}
