//! `--hugepages N`: N more 2 MiB huge pages in the kernel's pool for this process's EAL,
//! given back when it is done. Only root may change the pool; without the option the EAL
//! runs with `--no-huge` and nothing here happens.

use std::path::Path;

use crate::WorkloadError;

/// The kernel's pool of default-size (2 MiB) huge pages.
const POOL: &str = "/proc/sys/vm/nr_hugepages";

fn read_pool() -> Result<u64, WorkloadError> {
    let text = std::fs::read_to_string(POOL).map_err(|e| WorkloadError::Dpdk {
        step: "reading the huge page pool",
        reason: format!("{POOL}: {e}"),
    })?;
    text.trim().parse().map_err(|_| WorkloadError::Dpdk {
        step: "reading the huge page pool",
        reason: format!("{POOL} holds {:?}, not a number", text.trim()),
    })
}

fn write_pool(pages: u64) -> Result<(), WorkloadError> {
    std::fs::write(Path::new(POOL), pages.to_string()).map_err(|e| WorkloadError::Dpdk {
        step: "reserving huge pages",
        reason: format!(
            "{POOL}: {e}{}",
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (reserving huge pages needs root; without --hugepages the echo runs with \
                 --no-huge)"
            } else {
                ""
            }
        ),
    })
}

/// Whether this process may add `pages` to the pool: only root may (the pool is a file
/// of root's, mode 0644), and a user without root is told so before anything starts.
pub(crate) fn permitted(pages: u32) -> Result<(), WorkloadError> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 {
        return Ok(());
    }
    Err(WorkloadError::Dpdk {
        step: "reserving huge pages",
        reason: format!(
            "--hugepages {pages} adds pages to the kernel's pool ({POOL}), which only root \
             may change, and this is uid {euid}: run as root, or without --hugepages (the \
             echo then runs with --no-huge, which needs no root)"
        ),
    })
}

/// Huge pages added to the pool: taken out again when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    pages: u64,
}

impl Reservation {
    /// Adds `pages` to the pool, or says why not (not root; the kernel found fewer).
    pub(crate) fn take(pages: u32) -> Result<Reservation, WorkloadError> {
        permitted(pages)?;
        let pages = u64::from(pages);
        let before = read_pool()?;
        write_pool(before + pages)?;
        let got = read_pool()?.saturating_sub(before);
        let taken = Reservation { pages: got };
        if got < pages {
            return Err(WorkloadError::Dpdk {
                step: "reserving huge pages",
                reason: format!(
                    "the kernel found {got} of the {pages} huge pages asked for (memory too \
                     fragmented, or too little of it)"
                ),
            });
        }
        Ok(taken)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // Relative to the pool as it is now: the other side of the echo may hold a
        // reservation of its own.
        if let Ok(now) = read_pool() {
            let _ = write_pool(now.saturating_sub(self.pages));
        }
    }
}
