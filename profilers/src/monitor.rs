//! Resource monitors read from /proc: memory, threads and CPU time of a process.
//!
//! A [`ProcessMonitor`] reads two small files per sample into one reused buffer. The
//! per-process reading is a function of its own (`ProcReading`) so that whole-tree
//! monitoring can sum the readings of the descendants.

use std::path::PathBuf;
use std::time::Instant;

use benchtop_sessions::Resources;

use crate::ProfilerError;
use crate::procfs;

/// One reading of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct ProcReading {
    rss_kb: u64,
    hwm_kb: u64,
    threads: u32,
    cpu_ticks: u64,
}

/// Samples the resources of one process.
#[derive(Debug)]
pub struct ProcessMonitor {
    pid: u32,
    status_path: PathBuf,
    stat_path: PathBuf,
    buf: String,
    clock_ticks_per_s: f64,
    /// CPU ticks and time of the previous reading.
    last: Option<(u64, Instant)>,
}

impl ProcessMonitor {
    /// A monitor of `pid`. It takes a first reading now (if the process exists), so the
    /// first [`ProcessMonitor::sample`] reports CPU use since this call.
    pub fn new(pid: u32) -> Self {
        // SAFETY: sysconf has no memory arguments.
        let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let mut m = ProcessMonitor {
            pid,
            status_path: PathBuf::from(format!("/proc/{pid}/status")),
            stat_path: PathBuf::from(format!("/proc/{pid}/stat")),
            buf: String::with_capacity(2048),
            clock_ticks_per_s: if tck > 0 { tck as f64 } else { 100.0 },
            last: None,
        };
        if let Ok(r) = m.read() {
            m.last = Some((r.cpu_ticks, Instant::now()));
        }
        m
    }

    /// The monitored process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// RSS, peak RSS, threads, CPU time so far, and CPU use since the previous sample
    /// (percent of one core). [`ProfilerError::ProcessGone`] once the process has exited
    /// (a zombie counts as exited).
    pub fn sample(&mut self) -> Result<Resources, ProfilerError> {
        let r = self.read()?;
        let now = Instant::now();
        let cpu_percent = match self.last {
            Some((ticks, at)) => {
                let wall = now.saturating_duration_since(at).as_secs_f64();
                let cpu = r.cpu_ticks.saturating_sub(ticks) as f64 / self.clock_ticks_per_s;
                if wall > 0.0 { 100.0 * cpu / wall } else { 0.0 }
            }
            None => 0.0,
        };
        self.last = Some((r.cpu_ticks, now));
        let mut res = Resources::default();
        res.rss_bytes = r.rss_kb * 1024;
        res.peak_rss_bytes = r.hwm_kb.max(r.rss_kb) * 1024;
        res.threads = r.threads;
        res.cpu_percent = cpu_percent;
        res.cpu_time_s = r.cpu_ticks as f64 / self.clock_ticks_per_s;
        Ok(res)
    }

    fn read(&mut self) -> Result<ProcReading, ProfilerError> {
        read_process(self.pid, &self.status_path, &self.stat_path, &mut self.buf)
    }
}

fn read_process(
    pid: u32,
    status_path: &std::path::Path,
    stat_path: &std::path::Path,
    buf: &mut String,
) -> Result<ProcReading, ProfilerError> {
    let gone = |e: &std::io::Error| {
        e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
    };
    if let Err(e) = procfs::read_into(status_path, buf) {
        return Err(if gone(&e) {
            ProfilerError::ProcessGone { pid }
        } else {
            ProfilerError::io(status_path, e)
        });
    }
    let st = procfs::parse_status(buf);
    if st.state == b'Z' || st.state == b'X' {
        return Err(ProfilerError::ProcessGone { pid });
    }
    if st.threads == 0 {
        return Err(ProfilerError::Parse {
            path: status_path.to_owned(),
            reason: "no Threads: line".into(),
        });
    }
    if let Err(e) = procfs::read_into(stat_path, buf) {
        return Err(if gone(&e) {
            ProfilerError::ProcessGone { pid }
        } else {
            ProfilerError::io(stat_path, e)
        });
    }
    let cpu_ticks = procfs::parse_stat_cpu_ticks(buf).ok_or_else(|| ProfilerError::Parse {
        path: stat_path.to_owned(),
        reason: "no utime/stime fields".into(),
    })?;
    Ok(ProcReading {
        rss_kb: st.rss_kb,
        hwm_kb: st.hwm_kb,
        threads: st.threads,
        cpu_ticks,
    })
}
