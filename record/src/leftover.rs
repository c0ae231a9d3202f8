//! Processes a run leaves behind: everything benchtop starts carries its marker
//! (`BENCHTOP_OWNER`, `BENCHTOP_SESSION`), so once the worker has exited and been reaped,
//! any process still marked with this conductor and this session was started by the run
//! and outlived it — a command's background job, a child that left the process group with
//! `setsid`. The session names them; `benchtop reap` ends them once this conductor exits.

use std::fmt;

use benchtop_profilers::reaper::{Owner, parse_marker};

/// At most this many processes are named; the rest are counted.
const MAX_NAMED: usize = 10;

/// A process the run left running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// Its pid.
    pub pid: u32,
    /// Its name (`/proc/<pid>/comm`).
    pub name: String,
    /// Whether it left the worker's process group, which the conductor signals as one.
    pub own_group: bool,
}

/// The processes marked with this conductor and `session` that still run (zombies, which
/// are only waiting to be reaped, aside). `group` is the worker's process group.
pub fn find(session: &str, group: Option<u32>) -> Vec<Leftover> {
    let Some(me) = Owner::current() else {
        return Vec::new();
    };
    let Ok(pids) = benchtop_profilers::procfs::pids() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for pid in pids {
        if pid == me.pid {
            continue;
        }
        // A process that started before this conductor cannot carry its marker: its
        // start time (/proc/<pid>/stat) is cheap to read, its environment is not (the
        // kernel reads it from the process's memory, and waits for busy processes: up to
        // 100 ms over a busy machine's processes, measured at the end of a run).
        if start_ticks(pid).is_some_and(|t| t < me.start_ticks) {
            continue;
        }
        // Other users' processes cannot be read, and are not ours.
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let Some((owner, marked)) = parse_marker(&environ) else {
            continue;
        };
        if owner != me || marked.as_deref() != Some(session) {
            continue;
        }
        let Some((state, pgrp, name)) = stat(pid) else {
            continue;
        };
        if state == 'Z' || state == 'X' {
            continue;
        }
        found.push(Leftover {
            pid,
            name,
            own_group: group.is_some_and(|g| g != pgrp),
        });
    }
    found.sort_by_key(|l| l.pid);
    found
}

/// The start time of `pid` (clock ticks after boot), from `/proc/<pid>/stat` read with one
/// call into a buffer on the stack: this runs over every process of the machine at the end
/// of a run, where each system call is a chance to be preempted on a busy machine.
fn start_ticks(pid: u32) -> Option<u64> {
    use std::io::Read as _;
    let mut buf = [0u8; 1024];
    let n = std::fs::File::open(format!("/proc/{pid}/stat"))
        .ok()?
        .read(&mut buf)
        .ok()?;
    let text = std::str::from_utf8(buf.get(..n)?).ok()?;
    // Field 22, counted after the name (which may hold spaces and parentheses).
    let rest = text.get(text.rfind(')')? + 1..)?;
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// State, process group and name from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(char, u32, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_owned();
    let mut rest = text.get(close + 1..)?.split_ascii_whitespace();
    let state = rest.next()?.chars().next()?;
    let _ppid = rest.next()?;
    let pgrp = rest.next()?.parse().ok()?;
    Some((state, pgrp, name))
}

/// The warning a session gets for `leftovers` (not empty).
#[derive(Debug)]
pub struct Warning<'a>(pub &'a [Leftover]);

impl fmt::Display for Warning<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all = self.0;
        write!(
            f,
            "{} process(es) the run started still run after it ended:",
            all.len()
        )?;
        for l in all.iter().take(MAX_NAMED) {
            write!(
                f,
                " {} {}{};",
                l.pid,
                benchtop_sessions::escape::Escaped(&l.name),
                if l.own_group {
                    " (left the process group)"
                } else {
                    ""
                }
            )?;
        }
        if all.len() > MAX_NAMED {
            write!(f, " and {} more;", all.len() - MAX_NAMED)?;
        }
        f.write_str(" `benchtop reap` ends them once this benchtop has exited")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_read_in_one_call_is_the_one_proc_gives() {
        let me = std::process::id();
        assert_eq!(start_ticks(me), benchtop_profilers::process_start_ticks(me));
        assert!(start_ticks(me).is_some());
        assert_eq!(start_ticks(u32::MAX - 7), None);
    }

    #[test]
    fn the_warning_names_each_process_and_the_ones_that_left_the_group() {
        let all = vec![
            Leftover {
                pid: 10,
                name: "sleep".into(),
                own_group: false,
            },
            Leftover {
                pid: 11,
                name: "dae\x1bmon".into(),
                own_group: true,
            },
        ];
        let text = Warning(&all).to_string();
        assert_eq!(
            text,
            "2 process(es) the run started still run after it ended: 10 sleep; 11 dae\\x1bmon \
             (left the process group); `benchtop reap` ends them once this benchtop has exited"
        );
        let many: Vec<Leftover> = (0..15)
            .map(|pid| Leftover {
                pid,
                name: "x".into(),
                own_group: false,
            })
            .collect();
        assert!(Warning(&many).to_string().contains("and 5 more;"));
    }

    #[test]
    fn this_process_own_stat_reads() {
        let (state, pgrp, name) = stat(std::process::id()).unwrap();
        assert!(state == 'R' || state == 'S', "{state}");
        assert!(pgrp > 0 && !name.is_empty());
    }
}
