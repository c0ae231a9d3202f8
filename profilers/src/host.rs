//! Facts about the machine a session runs on.

use benchtop_profile::sampling::HostInfo;

use crate::procfs;
use crate::sampler::probe_access;

/// Host name, CPU model, online cores, kernel release, memory and perf permissions.
/// Fields that cannot be read stay empty or zero.
pub fn host_info() -> HostInfo {
    let mut info = HostInfo::default();
    // SAFETY: uname fills the struct it is given; it is zeroed and live.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::uname(&mut uts) } == 0 {
        info.hostname = c_chars(&uts.nodename);
        info.kernel = c_chars(&uts.release);
    }
    if info.hostname.is_empty() {
        info.hostname = procfs::read_trimmed("/proc/sys/kernel/hostname").unwrap_or_default();
    }
    info.cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| procfs::parse_cpu_model(&t))
        .unwrap_or_default();
    info.cores = procfs::online_cpus().map_or_else(
        |_| {
            // SAFETY: sysconf has no memory arguments.
            let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
            n.max(0) as u32
        },
        |cpus| cpus.len() as u32,
    );
    info.memory_bytes = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| procfs::parse_meminfo_bytes(&t, "MemTotal"))
        .unwrap_or(0);
    info.perf = probe_access();
    info
}

fn c_chars(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
