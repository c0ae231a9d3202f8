//! One process's DPDK: its EAL (initialised once, with a file prefix of its own, in
//! memory), a small mbuf pool, and one `net_memif` port with a receive and a transmit
//! queue, busy-polled in bursts by one thread.

use std::ffi::{CString, c_char, c_int};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::MemifRole;
pub(crate) use super::ffi::Mbuf;
use super::ffi::{self, Mempool};
use super::hugepages::Reservation;
use crate::WorkloadError;

/// Mbufs in the pool: a few thousand (2 KiB of data each), enough for both queues'
/// descriptors and a window of bursts in flight, small enough for `--no-huge` memory.
const POOL_MBUFS: u32 = 4095;
/// Bytes of data room per mbuf: DPDK's default (2 KiB and the 128-byte headroom).
const DATA_ROOM: u16 = 2048 + 128;
/// Descriptors per queue.
const QUEUE_DESC: u16 = 512;
/// Frames a burst takes or gives.
pub(crate) const BURST: usize = 32;

/// Set once the EAL has been initialised here: it can be only once per process.
static EAL_STARTED: AtomicBool = AtomicBool::new(false);

/// How one side's EAL is started.
#[derive(Debug, Clone)]
pub(crate) struct EalSetup<'a> {
    pub(crate) role: MemifRole,
    pub(crate) socket: &'a Path,
    /// The CPU of the polling thread (EAL's `-l`).
    pub(crate) cpu: usize,
    /// Huge pages to reserve and use; none: `--no-huge`.
    pub(crate) hugepages: Option<u32>,
}

impl EalSetup<'_> {
    /// The EAL's arguments: one lcore, a file prefix of this process's own, no shared
    /// files, no PCI scan, and the memif port.
    pub(crate) fn args(&self) -> Vec<String> {
        let (role, mac) = match self.role {
            MemifRole::Server => ("server", super::SERVER_MAC),
            MemifRole::Client => ("client", super::CLIENT_MAC),
        };
        let mac = mac
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        let mut args = vec![
            format!("benchtop-echo-{role}"),
            "-l".to_owned(),
            self.cpu.to_string(),
            format!("--file-prefix={}", file_prefix()),
            "--no-pci".to_owned(),
            "--no-telemetry".to_owned(),
            // Errors only: the workload says what went wrong in its own words.
            "--log-level=4".to_owned(),
        ];
        // No shared files either way: huge pages in memory only, or no huge pages and no
        // shared configuration (`--in-memory` does not go with `--no-huge`).
        match self.hugepages {
            None => args.extend(["--no-huge".to_owned(), "--no-shconf".to_owned()]),
            Some(n) => args.extend(["--in-memory".to_owned(), format!("-m{}", u64::from(n) * 2)]),
        }
        args.push("--vdev".to_owned());
        args.push(format!(
            "net_memif0,role={role},id=0,socket={},socket-abstract=no,mac={mac}",
            self.socket.display()
        ));
        args
    }
}

/// This process's EAL file prefix.
fn file_prefix() -> String {
    format!("benchtop-{}", std::process::id())
}

/// The EAL's runtime directory for this process (root's; another user's is under
/// `XDG_RUNTIME_DIR` or /tmp), empty once the EAL is done with it.
fn runtime_dir() -> std::path::PathBuf {
    // SAFETY: getuid has no preconditions.
    let base = if unsafe { libc::getuid() } == 0 {
        std::path::PathBuf::from("/var/run")
    } else {
        std::env::var_os("XDG_RUNTIME_DIR").map_or_else(|| "/tmp".into(), Into::into)
    };
    base.join("dpdk").join(file_prefix())
}

/// Removes the empty runtime directories that EALs of ended processes left (a process
/// killed before its clean-up leaves one): `benchtop-<pid>` with no such process. A
/// directory that is not empty is kept.
fn sweep_runtime_dirs() {
    let Some(base) = runtime_dir().parent().map(std::path::Path::to_owned) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(&base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let gone = name
            .to_str()
            .and_then(|n| n.strip_prefix("benchtop-"))
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
        if gone {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// The started port and what it needs: dropped, it stops the port and releases the EAL
/// (and any huge pages it reserved).
pub(crate) struct Port {
    id: u16,
    pool: *mut Mempool,
    pub(crate) mac: [u8; 6],
    /// A burst faulted: the peer went away with the rings' memory (see the shim); the
    /// queues are not touched again.
    lost: AtomicBool,
    /// The server's listening socket, which memif removes as the port closes.
    listening: Option<PathBuf>,
    _hugepages: Option<Reservation>,
}

// SAFETY: the port and its pool are used by one thread at a time (the polling thread,
// after the one that opened it): DPDK's queues need no more than that.
unsafe impl Send for Port {}
// SAFETY: as above; shared references only read `id` and `mac`, and the bursts that use
// the queues run on one thread at a time (the clients of a point, then the next point's).
unsafe impl Sync for Port {}

impl Port {
    /// Initialises the EAL and starts the memif port.
    pub(crate) fn open(setup: &EalSetup<'_>) -> Result<Port, WorkloadError> {
        if EAL_STARTED.swap(true, Ordering::SeqCst) {
            return Err(WorkloadError::Dpdk {
                step: "starting DPDK's EAL",
                reason: "DPDK's EAL was started in this process already".to_owned(),
            });
        }
        sweep_runtime_dirs();
        super::hugepages::give_back_left_behind();
        let hugepages = setup.hugepages.map(Reservation::take).transpose()?;
        let args: Vec<CString> = setup
            .args()
            .into_iter()
            .map(|a| {
                CString::new(a).map_err(|_| WorkloadError::Dpdk {
                    step: "starting DPDK's EAL",
                    reason: format!("a NUL byte in the memif socket path {:?}", setup.socket),
                })
            })
            .collect::<Result<_, _>>()?;
        let mut argv: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr().cast_mut()).collect();
        argv.push(std::ptr::null_mut());
        // SAFETY: argv holds argc pointers to NUL-terminated strings that outlive the call
        // (`args`), then a null; the EAL may reorder the pointers but writes no string.
        let rc = unsafe { ffi::rte_eal_init(args.len() as c_int, argv.as_mut_ptr()) };
        if rc < 0 {
            // SAFETY: reads the calling thread's rte_errno.
            let errno = unsafe { ffi::bt_errno() };
            let _ = std::fs::remove_dir_all(runtime_dir());
            return Err(WorkloadError::Dpdk {
                step: "starting DPDK's EAL",
                reason: format!(
                    "{} (EAL arguments: {})",
                    ffi::strerror(errno),
                    setup.args().join(" ")
                ),
            });
        }
        // SAFETY: installs the process's SIGSEGV handler of the shim, which leaves only
        // a guarded burst (by a jump out of it) and hands every other fault to the
        // handler that was installed before it; the EAL is started once per process.
        if unsafe { ffi::bt_guard_bursts() } != 0 {
            return Err(WorkloadError::Dpdk {
                step: "guarding the memif bursts",
                reason: std::io::Error::last_os_error().to_string(),
            });
        }
        let mut port = Port {
            id: 0,
            pool: std::ptr::null_mut(),
            mac: [0; 6],
            lost: AtomicBool::new(false),
            listening: (setup.role == MemifRole::Server).then(|| setup.socket.to_owned()),
            _hugepages: hugepages,
        };
        let name = c"benchtop_echo_pool";
        // SAFETY: the EAL is initialised; the name is a NUL-terminated literal; -1 is
        // SOCKET_ID_ANY.
        port.pool =
            unsafe { ffi::rte_pktmbuf_pool_create(name.as_ptr(), POOL_MBUFS, 0, 0, DATA_ROOM, -1) };
        if port.pool.is_null() {
            // SAFETY: as above.
            let errno = unsafe { ffi::bt_errno() };
            return Err(WorkloadError::Dpdk {
                step: "starting DPDK's EAL",
                reason: format!(
                    "no memory for {POOL_MBUFS} mbufs: {}{}",
                    ffi::strerror(errno),
                    if setup.hugepages.is_some() {
                        " (give more --hugepages)"
                    } else {
                        ""
                    }
                ),
            });
        }
        // SAFETY: a NUL-terminated literal and a place for the id.
        let rc = unsafe { ffi::rte_eth_dev_get_port_by_name(c"net_memif0".as_ptr(), &mut port.id) };
        if rc != 0 {
            return Err(WorkloadError::Dpdk {
                step: "finding the memif port (is DPDK's net_memif driver installed?)",
                reason: ffi::strerror(rc),
            });
        }
        let mut step: c_int = 0;
        // SAFETY: the port exists and is stopped; the pool is live; step is written.
        let rc = unsafe { ffi::bt_port_start(port.id, port.pool, QUEUE_DESC, &mut step) };
        if rc < 0 {
            return Err(WorkloadError::Dpdk {
                step: match step {
                    1 => "configuring the memif port",
                    2 => "setting up its receive queue",
                    3 => "setting up its transmit queue",
                    _ => "starting it",
                },
                reason: ffi::strerror(rc),
            });
        }
        // SAFETY: `mac` has the 6 bytes the shim writes.
        let rc = unsafe { ffi::bt_mac(port.id, port.mac.as_mut_ptr()) };
        if rc != 0 {
            return Err(WorkloadError::Dpdk {
                step: "reading the port's MAC address",
                reason: ffi::strerror(rc),
            });
        }
        Ok(port)
    }

    /// Whether the memif link is up (a peer is connected, and no burst found it gone).
    pub(crate) fn link_up(&self) -> bool {
        // SAFETY: the port is started.
        !self.lost.load(Ordering::Relaxed) && unsafe { ffi::bt_link_up(self.id) == 1 }
    }

    /// Waits until the link is up, checking `abort` every millisecond (an error from it
    /// ends the wait); gives up at `deadline`.
    pub(crate) fn wait_link(
        &self,
        deadline: Duration,
        mut abort: impl FnMut() -> Result<bool, crate::WorkloadError>,
    ) -> Result<bool, crate::WorkloadError> {
        let until = Instant::now() + deadline;
        while !self.link_up() {
            if abort()? || Instant::now() >= until {
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(true)
    }

    /// Lets the calling thread use the pool's per-lcore cache (best effort: a thread that
    /// cannot register still works, through the pool's ring).
    pub(crate) fn register_thread(&self) {
        // SAFETY: the EAL is initialised; registering has no other precondition.
        unsafe { ffi::rte_thread_register() };
    }

    /// Receives up to a burst into `frames`; returns how many came (none once the link
    /// is lost).
    pub(crate) fn rx(&self, frames: &mut [*mut Mbuf; BURST]) -> usize {
        if self.lost.load(Ordering::Relaxed) {
            return 0;
        }
        // SAFETY: the port is started and `frames` has room for BURST pointers; only this
        // thread polls the queue; the burst is guarded (installed at open).
        let n = unsafe { ffi::bt_rx_burst(self.id, frames.as_mut_ptr(), BURST as u16) };
        self.landed(n)
    }

    /// A burst's count, or 0 and the link marked lost when it faulted.
    fn landed(&self, n: c_int) -> usize {
        usize::try_from(n).unwrap_or_else(|_| {
            if !self.lost.swap(true, Ordering::Relaxed) {
                // Into worker.log: why the link went down without the peer's word.
                eprintln!(
                    "udp-echo: the memif peer went away during a burst (its rings' memory \
                     was unmapped under it); the link is taken as down"
                );
            }
            0
        })
    }

    /// Sends `frames`, retrying while the queue is full until `give_up`; frees the ones
    /// that could not go (their messages will time out). Returns how many went.
    pub(crate) fn tx_all(&self, frames: &mut [*mut Mbuf], give_up: Instant) -> usize {
        let mut sent = 0;
        while sent < frames.len() {
            if self.lost.load(Ordering::Relaxed) {
                // Which frames a faulted burst took is not known: none is freed twice.
                return sent;
            }
            let rest = &mut frames[sent..];
            // SAFETY: `rest` holds valid mbufs owned by this thread; tx takes ownership of
            // the first `n` of them; the burst is guarded (installed at open).
            let n = unsafe { ffi::bt_tx_burst(self.id, rest.as_mut_ptr(), rest.len() as u16) };
            let n = self.landed(n);
            sent += n;
            if n == 0 && Instant::now() >= give_up {
                break;
            }
        }
        for &m in &frames[sent..] {
            free(m);
        }
        sent
    }

    /// A fresh mbuf holding `len` bytes of data (to be written through [`data`]), or none
    /// when the pool is empty.
    pub(crate) fn alloc(&self, len: u16) -> Option<*mut Mbuf> {
        // SAFETY: the pool is live.
        let m = unsafe { ffi::bt_mbuf_alloc(self.pool) };
        if m.is_null() {
            return None;
        }
        // SAFETY: `m` is a fresh mbuf of DATA_ROOM bytes; append takes `len` bytes of it,
        // or returns null when they do not fit.
        if unsafe { ffi::bt_mbuf_append(m, len) }.is_null() {
            free(m);
            return None;
        }
        Some(m)
    }
}

/// The first segment's bytes of a received mbuf, and whether it is the only one.
pub(crate) fn data<'a>(m: *mut Mbuf) -> (&'a mut [u8], bool) {
    // SAFETY: `m` is a received mbuf owned by this thread until sent or freed; the slice
    // covers its first segment's data and is not used past that.
    unsafe {
        let len = usize::from(ffi::bt_mbuf_data_len(m));
        let whole = ffi::bt_mbuf_segs(m) == 1;
        (
            std::slice::from_raw_parts_mut(ffi::bt_mbuf_data(m), len),
            whole,
        )
    }
}

/// Gives an mbuf back to its pool.
pub(crate) fn free(m: *mut Mbuf) {
    // SAFETY: `m` is an mbuf owned by this thread, not used after this.
    unsafe { ffi::bt_mbuf_free(m) }
}

impl Drop for Port {
    fn drop(&mut self) {
        // The pool and the EAL's memory are left to the process's end, which follows:
        // `rte_eal_cleanup` unmaps that memory while the EAL's interrupt thread may still
        // run memif's handler of the peer's disconnect (a client killed), which then
        // faults in librte_net_memif (a SIGSEGV of the server about one run in eight,
        // seen in a core dump: the interrupt thread in memif, the main thread in
        // `rte_mem_unmap` under `rte_eal_cleanup`). `--in-memory` and `--no-huge` leave
        // no files behind, so the kernel frees everything at exit.
        //
        // A peer that went away (the link down, or a burst that found its memory gone)
        // is being disconnected, or was, by memif's handler on the EAL's interrupt
        // thread: `memif_disconnect` marks the link down first and frees the shared
        // regions last, outside its lock, so the port's stop, which disconnects too,
        // would free them a second time beside it (DPDK 22.11: "EAL: Error: Invalid
        // memory" twice in worker.log, then a server that did not end in about one run
        // of 20 with its client killed). Then the port is left to the process's end, and
        // the listening socket that its close would remove is removed here.
        if self.link_up() {
            // SAFETY: the port was started here and nothing polls it any more; nothing
            // of DPDK is used after this in this process.
            unsafe {
                ffi::rte_eth_dev_stop(self.id);
                ffi::rte_eth_dev_close(self.id);
            }
        } else if let Some(path) = &self.listening
            && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
        {
            let _ = std::fs::remove_file(path);
        }
        let _ = std::fs::remove_dir_all(runtime_dir());
        // The other side of the echo, killed, could not give its pages back.
        super::hugepages::give_back_left_behind();
    }
}
