//! What a workload's parameters will cost in memory, checked against what the machine has
//! before anything starts: a ring of billions of pending asks or a messenger with
//! gigabytes in flight is refused with its estimate, instead of a worker that swaps the
//! machine to a halt or is killed by the kernel halfway.
//!
//! The estimates are the workloads' own measured costs (see each workload's module docs),
//! rounded up: they refuse what cannot fit, not what might be tight.

use crate::WorkloadError;

/// Where the machine says how much memory it can give.
const MEMINFO: &str = "/proc/meminfo";

/// Checks that `estimate_bytes`, what `what` needs, fits in the memory this machine has
/// available now (`MemAvailable`, or `MemTotal` on kernels without it). When the machine
/// does not say, nothing is refused.
pub fn check(what: &str, estimate_bytes: u64) -> Result<(), WorkloadError> {
    match std::fs::read_to_string(MEMINFO)
        .ok()
        .and_then(|text| available_bytes(&text))
    {
        Some(available) => check_against(what, estimate_bytes, available),
        None => Ok(()),
    }
}

/// [`check`] against `available_bytes`.
pub fn check_against(
    what: &str,
    estimate_bytes: u64,
    available_bytes: u64,
) -> Result<(), WorkloadError> {
    if estimate_bytes <= available_bytes {
        return Ok(());
    }
    Err(WorkloadError::TooMuchMemory {
        what: what.to_owned(),
        estimate_bytes,
        available_bytes,
    })
}

/// `MemAvailable` of /proc/meminfo in bytes, else `MemTotal`.
fn available_bytes(meminfo: &str) -> Option<u64> {
    let field = |name: &str| {
        meminfo.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let kib: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
            kib.checked_mul(1024)
        })
    };
    field("MemAvailable").or_else(|| field("MemTotal"))
}

/// `bytes` for people: `3.9 GiB`.
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_read_from_meminfo() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(available_bytes(text), Some(20_000_000 * 1024));
        assert_eq!(
            available_bytes("MemTotal: 1000 kB\n"),
            Some(1000 * 1024),
            "an old kernel without MemAvailable"
        );
        assert_eq!(available_bytes("garbage"), None);
        assert_eq!(
            available_bytes("MemAvailable: 99999999999999999999 kB"),
            None
        );
    }

    #[test]
    fn an_estimate_beyond_the_machine_is_refused_naming_both_figures() {
        assert!(check_against("x", 10, 10).is_ok());
        let err = check_against("12 pending asks", 11 << 30, 10 << 30).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("12 pending asks"), "{text}");
        assert!(
            text.contains("11.0 GiB") && text.contains("10.0 GiB"),
            "{text}"
        );
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(3 << 29), "1.5 GiB");
        assert_eq!(human(u64::MAX), "16384.0 PiB");
    }
}
