//! Recording under a limit on address space (`ulimit -v`, RLIMIT_AS): refused at start
//! with the figure it needs when the limit is too low, and run with fewer malloc arenas
//! when there is one.
//!
//! What a recording maps is mostly reservations, not memory used: this executable's file
//! (its debug information included), a malloc arena of 64 MiB per thread that allocates
//! (glibc's default on 64-bit), thread stacks, the perf ring buffers. A limit cuts into
//! those long before the recorder uses much memory, and a failed allocation then aborts
//! the process. Measured on a release build of 129 MiB (ring, 1 s): with glibc's default
//! arenas it aborted at 300 MB and ran at 350 MB; with two arenas it ran at 150 MB.

use anyhow::Result;

/// Address space a recording needs beyond this executable's file: the worker's and the
/// recorder's heaps, thread stacks and ring buffers, with room to spare.
const HEADROOM: u64 = 256 << 20;
/// malloc arenas when the address space is limited: each reserves 64 MiB of it.
const LIMITED_ARENAS: libc::c_int = 2;

/// The address space a recording by this executable needs, bytes.
pub(crate) fn needed() -> u64 {
    let exe = std::fs::metadata("/proc/self/exe").map_or(0, |m| m.len());
    exe.saturating_add(HEADROOM)
}

/// Refuses to record under an address-space limit below [`needed`], naming the figure;
/// under one above it, limits malloc's arenas so that the limit holds what the recorder
/// uses rather than what it reserves. No limit: nothing changes.
pub(crate) fn check() -> Result<()> {
    let Some(limit) = limit() else {
        return Ok(());
    };
    let needed = needed();
    if limit < needed {
        let kib = needed.div_ceil(1024);
        anyhow::bail!(
            "the address space is limited to {} MiB (ulimit -v {}), and a recording needs \
             about {} MiB: this executable maps {} MiB, and the recorder and the worker \
             need room for their heaps, threads and ring buffers. Raise the limit (`ulimit \
             -v {kib}` or more) or remove it (`ulimit -v unlimited`)",
            limit >> 20,
            limit / 1024,
            needed >> 20,
            needed.saturating_sub(HEADROOM) >> 20,
        );
    }
    limit_arenas();
    Ok(())
}

/// The address-space limit (RLIMIT_AS), bytes; `None` without one.
fn limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: getrlimit writes into a live rlimit.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0;
    (ok && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

/// Under an address-space limit, at most [`LIMITED_ARENAS`] malloc arenas: for the
/// recorder, and for a built-in worker, which inherits the limit. (A command the user
/// runs keeps its own malloc settings.)
pub(crate) fn limit_arenas() {
    if limit().is_some() {
        // SAFETY: mallopt changes a malloc tunable; it takes two integers and is called
        // before this process starts any thread.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, LIMITED_ARENAS) };
    }
}
