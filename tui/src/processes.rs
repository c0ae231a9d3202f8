//! The running processes the launcher's picker lists (`attach` from the TUI): pid, name,
//! user, command line and CPU, read from /proc in two passes a moment apart (CPU is the
//! growth of each process's user and system time between them), as `top` and btm do.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use crate::state::picker::ProcessRow;

/// The time between the two passes: long enough for a busy process to gather a few clock
/// ticks (10 ms each), short enough that the list comes at once.
const CPU_WINDOW: Duration = Duration::from_millis(250);
/// The most processes listed: a machine with more shows the busiest of the first ones.
const MAX_PROCESSES: usize = 20_000;
/// The longest command line kept per process, in bytes.
const MAX_COMMAND: usize = 512;

/// The processes of this machine that can be told apart from kernel threads, busiest
/// first; benchtop itself is left out.
pub fn list() -> Result<Vec<ProcessRow>, String> {
    list_over(CPU_WINDOW)
}

/// [`list`] with the CPU measured over `window`.
fn list_over(window: Duration) -> Result<Vec<ProcessRow>, String> {
    let first = cpu_times().map_err(|e| format!("cannot read /proc: {e}"))?;
    let started = Instant::now();
    std::thread::sleep(window);
    let second = cpu_times().map_err(|e| format!("cannot read /proc: {e}"))?;
    let elapsed = started.elapsed().as_secs_f64().max(1e-3);
    // SAFETY: sysconf reads a constant of the system and has no memory arguments.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let me = std::process::id();
    let mut users: HashMap<u32, String> = HashMap::new();
    let mut rows = Vec::new();
    for (pid, stat) in second {
        if pid == me || stat.kernel {
            continue;
        }
        let Ok(meta) = std::fs::metadata(format!("/proc/{pid}")) else {
            continue;
        };
        let uid = meta.uid();
        let user = users
            .entry(uid)
            .or_insert_with(|| benchtop_profilers::reaper::user_name(uid))
            .clone();
        let before = first
            .binary_search_by_key(&pid, |(p, _)| *p)
            .ok()
            .map(|i| &first[i].1)
            .filter(|s| s.start == stat.start)
            .map_or(stat.cpu, |s| s.cpu);
        let cpu_percent = stat.cpu.saturating_sub(before) as f64 / ticks / elapsed * 100.0;
        rows.push(ProcessRow {
            pid,
            name: stat.name,
            user,
            command: command_line(pid),
            cpu_percent,
        });
    }
    rows.sort_by(|a, b| {
        b.cpu_percent
            .total_cmp(&a.cpu_percent)
            .then(a.pid.cmp(&b.pid))
    });
    Ok(rows)
}

/// What one pass reads of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stat {
    name: String,
    /// User and system time, clock ticks.
    cpu: u64,
    /// Start time, clock ticks after boot (tells a reused pid apart).
    start: u64,
    /// A kernel thread (a child of kthreadd, or kthreadd itself).
    kernel: bool,
}

/// Every process's CPU time now, by pid (sorted).
fn cpu_times() -> std::io::Result<Vec<(u32, Stat)>> {
    let mut out = Vec::new();
    for pid in benchtop_profilers::procfs::pids()? {
        // A process that ended between the listing and the read is skipped.
        let Ok(bytes) = std::fs::read(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(stat) = parse_stat(pid, &bytes) {
            out.push((pid, stat));
        }
        if out.len() == MAX_PROCESSES {
            break;
        }
    }
    out.sort_unstable_by_key(|(pid, _)| *pid);
    Ok(out)
}

/// `/proc/<pid>/stat`, read by the profilers' one parser of it.
fn parse_stat(pid: u32, bytes: &[u8]) -> Option<Stat> {
    let st = benchtop_profilers::procfs::parse_task_stat(bytes)?;
    Some(Stat {
        name: String::from_utf8_lossy(st.comm).into_owned(),
        cpu: st.utime.saturating_add(st.stime),
        start: st.start_ticks,
        kernel: pid == 2 || st.ppid == 2,
    })
}

/// The command line of `pid`, arguments separated by spaces, cut at [`MAX_COMMAND`] bytes;
/// empty when it cannot be read.
fn command_line(pid: u32) -> String {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(format!("/proc/{pid}/cmdline")) else {
        return String::new();
    };
    let mut bytes = Vec::new();
    let _ = file.take(MAX_COMMAND as u64).read_to_end(&mut bytes);
    let text: Vec<String> = bytes
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    text.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_spaces_and_parentheses_in_the_name_is_read() {
        let line = b"4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                     250 50 0 0 20 0 3 0 987654 1000000 300 18446744073709551615";
        let stat = parse_stat(4242, line).unwrap();
        assert_eq!(stat.name, "my (odd) prog");
        assert_eq!(stat.cpu, 300);
        assert_eq!(stat.start, 987654);
        assert!(!stat.kernel);
        let kthread = b"77 (kworker/0:1) I 2 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0";
        assert!(parse_stat(77, kthread).unwrap().kernel);
        assert!(parse_stat(1, b"1 (init").is_none());
        assert!(parse_stat(1, b"1 (init) S x").is_none());
    }

    #[test]
    fn the_list_holds_a_busy_child_with_its_user_and_command_above_an_idle_one() {
        let mut busy = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let mut idle = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // A second: on a loaded machine the loop gets a slice of a core, not none.
        let rows = list_over(Duration::from_secs(1)).unwrap();
        for child in [&mut busy, &mut idle] {
            let _ = child.kill();
            let _ = child.wait();
        }
        let row = |pid: u32| rows.iter().find(|r| r.pid == pid).expect("the child");
        let (b, i) = (row(busy.id()), row(idle.id()));
        assert_eq!(b.name, "sh");
        assert!(b.command.contains("while :"), "{b:?}");
        assert!(!b.user.is_empty());
        assert!(b.cpu_percent > i.cpu_percent, "{b:?} {i:?}");
        let at = |pid: u32| rows.iter().position(|r| r.pid == pid);
        assert!(at(busy.id()) < at(idle.id()), "busiest first");
        assert!(!rows.iter().any(|r| r.pid == std::process::id()));
    }
}
