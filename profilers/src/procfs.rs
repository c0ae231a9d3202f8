//! Small, allocation-light readers and parsers for /proc and /sys files.
//!
//! The parsers take the file's text so unit tests can feed them fixtures; the readers
//! fill a caller's reused `String`.

use std::io::Read;
use std::path::Path;

use crate::ProfilerError;

/// Reads the whole file at `path` into `buf` (cleared first).
pub(crate) fn read_into(path: &Path, buf: &mut String) -> std::io::Result<()> {
    buf.clear();
    std::fs::File::open(path)?.read_to_string(buf)?;
    Ok(())
}

/// Reads a small file and trims it; `None` when it cannot be read.
pub(crate) fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim_end().to_owned())
}

/// Fields of /proc/<pid>/status the monitors use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Status {
    /// `State:` letter (`R`, `S`, `Z`…).
    pub state: u8,
    /// VmRSS in kB (absent for kernel threads and zombies: 0).
    pub rss_kb: u64,
    /// VmHWM in kB.
    pub hwm_kb: u64,
    /// Threads.
    pub threads: u32,
}

/// Parses /proc/<pid>/status text.
pub(crate) fn parse_status(text: &str) -> Status {
    let mut st = Status::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "State" => st.state = value.bytes().next().unwrap_or(b'?'),
            "VmRSS" => st.rss_kb = leading_number(value),
            "VmHWM" => st.hwm_kb = leading_number(value),
            "Threads" => st.threads = leading_number(value) as u32,
            _ => {}
        }
    }
    st
}

fn leading_number(s: &str) -> u64 {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().unwrap_or(0)
}

/// The fields of /proc/<pid>/stat text from field 3 (state) on. The command name
/// (field 2) may hold spaces and parentheses, so fields are counted after its last `)`.
fn stat_fields(text: &str) -> Option<std::str::SplitAsciiWhitespace<'_>> {
    Some(text[text.rfind(')')? + 1..].split_ascii_whitespace())
}

/// Field `n` (1-based, as in proc(5)) of /proc/<pid>/stat text, from field 3 on.
fn stat_field(text: &str, n: usize) -> Option<u64> {
    stat_fields(text)?.nth(n.checked_sub(3)?)?.parse().ok()
}

/// utime + stime (fields 14 and 15) in clock ticks, from /proc/<pid>/stat text.
pub(crate) fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    // Field 3 (state) is index 0, so utime (14) is 11, stime (15) 12.
    let mut fields = stat_fields(text)?.skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// starttime (field 22), in clock ticks after boot, from /proc/<pid>/stat text.
pub(crate) fn parse_stat_start_ticks(text: &str) -> Option<u64> {
    stat_field(text, 22)
}

/// When process `pid` started, in clock ticks (`sysconf(_SC_CLK_TCK)`, usually 100 per
/// second) after boot: field 22 of `/proc/<pid>/stat`. With the pid it names one process
/// for good, pids being reused: a marker that records both tells a live owner from a
/// new process that got its pid. `None` when there is no such process (or /proc is
/// unreadable).
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    if pid == 0 {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_start_ticks(&text)
}

/// CPU numbers from a /sys/devices/system/cpu/online list such as `0-3,6,8-9`.
pub(crate) fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// The online CPUs of this machine.
pub(crate) fn online_cpus() -> Result<Vec<usize>, ProfilerError> {
    const PATH: &str = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(PATH).map_err(|e| ProfilerError::io(PATH, e))?;
    parse_cpu_list(&text).ok_or_else(|| ProfilerError::Parse {
        path: PATH.into(),
        reason: format!("not a CPU list: {:?}", text.trim()),
    })
}

/// One executable, file-backed line of /proc/<pid>/maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MapsLine<'a> {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: &'a str,
}

/// Parses one /proc/<pid>/maps line; `None` unless it is executable and backed by a
/// file (a path starting with `/`).
pub(crate) fn parse_maps_line(line: &str) -> Option<MapsLine<'_>> {
    let mut it = line.splitn(6, ' ');
    let range = it.next()?;
    let perms = it.next()?;
    let offset = it.next()?;
    let _dev = it.next()?;
    let _inode = it.next()?;
    let path = it.next()?.trim_start();
    if perms.as_bytes().get(2) != Some(&b'x') || !path.starts_with('/') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    Some(MapsLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        path: path.strip_suffix(" (deleted)").unwrap_or(path),
    })
}

/// The effective capability mask from /proc/self/status text (`CapEff:` in hex).
pub(crate) fn parse_cap_eff(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// A field of /proc/meminfo in bytes (`MemTotal`, …).
pub(crate) fn parse_meminfo_bytes(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        let kb = leading_number(rest.trim());
        Some(kb * 1024)
    })
}

/// The first `model name` of /proc/cpuinfo (or `Model`/`cpu model` on other
/// architectures).
pub(crate) fn parse_cpu_model(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (key, value) = l.split_once(':')?;
        matches!(key.trim(), "model name" | "Model" | "cpu model")
            .then(|| value.trim().to_owned())
            .filter(|v| !v.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tcat\nUmask:\t0022\nState:\tR (running)\nTgid:\t4242\n\
        VmPeak:\t    8632 kB\nVmHWM:\t    1024 kB\nVmRSS:\t     996 kB\nThreads:\t3\n\
        SigQ:\t0/7823\nCapEff:\t000001ffffffffff\n";

    #[test]
    fn status_fields_are_read_from_fixture_text() {
        let st = parse_status(STATUS);
        assert_eq!(
            st,
            Status {
                state: b'R',
                rss_kb: 996,
                hwm_kb: 1024,
                threads: 3
            }
        );
    }

    #[test]
    fn a_zombie_status_has_no_memory_fields() {
        let st = parse_status("Name:\tx\nState:\tZ (zombie)\nThreads:\t1\n");
        assert_eq!((st.state, st.rss_kb, st.threads), (b'Z', 0, 1));
    }

    /// A stat line whose command name holds spaces and parentheses: utime 250, stime 31,
    /// start time 12345.
    const ODD_STAT: &str = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                            250 31 0 0 20 0 3 0 12345 1000000 200 18446744073709551615";

    #[test]
    fn stat_cpu_ticks_survive_names_with_spaces_and_parens() {
        assert_eq!(parse_stat_cpu_ticks(ODD_STAT), Some(281));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn the_start_time_is_field_22_of_stat_whatever_the_name() {
        assert_eq!(parse_stat_start_ticks(ODD_STAT), Some(12345));
        assert_eq!(parse_stat_start_ticks("4242 (x) S 1 2 3"), None);
        assert_eq!(parse_stat_start_ticks("garbage"), None);
    }

    #[test]
    fn start_ticks_put_a_child_after_its_parent_and_none_once_reaped() {
        let own = process_start_ticks(std::process::id()).expect("own start time");
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawn sleep");
        let started = process_start_ticks(child.id());
        child.kill().expect("kill sleep");
        child.wait().expect("reap sleep");
        let started = started.expect("the child's start time");
        assert!(started >= own, "child {started} before parent {own}");
        // Clock ticks since boot: no later than now.
        let uptime: f64 = read_trimmed("/proc/uptime")
            .and_then(|u| u.split_whitespace().next()?.parse().ok())
            .expect("/proc/uptime");
        // SAFETY: sysconf has no memory arguments.
        let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        assert!(
            started as f64 <= (uptime + 1.0) * tck,
            "{started} ticks, up {uptime} s"
        );
        // Reaped: gone, or the pid already reused by a process started later.
        assert!(process_start_ticks(child.id()).is_none_or(|t| t >= started));
        assert_eq!(process_start_ticks(0), None);
    }

    #[test]
    fn cpu_lists_expand_ranges() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0,2-4,7"), Some(vec![0, 2, 3, 4, 7]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
    }

    #[test]
    fn maps_lines_keep_only_executable_files() {
        let exe = "55d0c0a00000-55d0c0a42000 r-xp 00002000 08:01 1234   /usr/bin/some prog";
        assert_eq!(
            parse_maps_line(exe),
            Some(MapsLine {
                start: 0x55d0c0a00000,
                end: 0x55d0c0a42000,
                offset: 0x2000,
                path: "/usr/bin/some prog"
            })
        );
        assert_eq!(
            parse_maps_line("7ffe1000-7ffe3000 r-xp 00000000 00:00 0      [vdso]"),
            None
        );
        assert_eq!(
            parse_maps_line("55d0c0a00000-55d0c0a42000 rw-p 00002000 08:01 1234 /usr/bin/x"),
            None
        );
        assert_eq!(
            parse_maps_line("1000-2000 r-xp 00000000 08:01 1 /tmp/x (deleted)").map(|m| m.path),
            Some("/tmp/x")
        );
    }

    #[test]
    fn host_files_parse_from_fixture_text() {
        assert_eq!(parse_cap_eff(STATUS), Some(0x1ff_ffff_ffff));
        let meminfo = "MemTotal:        8040000 kB\nMemFree:  100 kB\n";
        assert_eq!(
            parse_meminfo_bytes(meminfo, "MemTotal"),
            Some(8_040_000 * 1024)
        );
        assert_eq!(parse_meminfo_bytes(meminfo, "Mem"), None);
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n";
        assert_eq!(
            parse_cpu_model(cpuinfo).as_deref(),
            Some("Intel(R) Xeon(R) CPU @ 2.20GHz")
        );
    }
}
