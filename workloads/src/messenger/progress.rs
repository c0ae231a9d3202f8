//! The lines the originals print, and reading them back: a line each second (elapsed,
//! messages, IOPS, MB/s, mean latency, CPU% of each of the server's cores, from
//! /proc/stat, and in poll mode each shard's busy share after `busy`) and the
//! `all(depth=…)` block at the end.

use std::fmt::Write as _;

use super::cpuset::CpuSet;

/// Busy and total jiffies of each CPU, from /proc/stat.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuTimes(Vec<(usize, u64, u64)>);

impl CpuTimes {
    /// The CPUs of `cpus` now (none when /proc/stat cannot be read).
    pub fn read(cpus: &CpuSet) -> CpuTimes {
        std::fs::read_to_string("/proc/stat")
            .map(|text| CpuTimes::parse(&text, cpus))
            .unwrap_or_default()
    }

    /// The CPUs of `cpus` in /proc/stat's text: busy is everything but idle and iowait.
    pub fn parse(text: &str, cpus: &CpuSet) -> CpuTimes {
        let mut out = Vec::new();
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let Some(cpu) = fields
                .next()
                .and_then(|f| f.strip_prefix("cpu"))
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            if !cpus.contains(cpu) {
                continue;
            }
            let values: Vec<u64> = fields.filter_map(|f| f.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal (guest time is in user).
            let total: u64 = values.iter().take(8).sum();
            let idle = values.get(3).copied().unwrap_or(0) + values.get(4).copied().unwrap_or(0);
            out.push((cpu, total.saturating_sub(idle), total));
        }
        CpuTimes(out)
    }

    /// Each CPU's busy share between `earlier` and this reading, in percent.
    pub fn percent_since(&self, earlier: &CpuTimes) -> Vec<(usize, f64)> {
        self.0
            .iter()
            .filter_map(|&(cpu, busy, total)| {
                let &(_, b0, t0) = earlier.0.iter().find(|(c, _, _)| *c == cpu)?;
                let dt = total.saturating_sub(t0);
                let db = busy.saturating_sub(b0);
                Some((
                    cpu,
                    if dt == 0 {
                        0.0
                    } else {
                        100.0 * db as f64 / dt as f64
                    },
                ))
            })
            .collect()
    }
}

/// One per-second line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The instance's tag (`left`, `right`), empty for a single instance.
    pub tag: String,
    /// Seconds since messaging started.
    pub elapsed_s: f64,
    /// Messages answered in the second.
    pub messages: u64,
    /// Messages answered per second over the second.
    pub iops: f64,
    /// MB/s (10^6 bytes) of answers received over the second.
    pub mb_per_s: f64,
    /// Mean latency of the second's messages, milliseconds.
    pub latency_ms: f64,
    /// Busy percentage of each of the server's CPUs.
    pub cpu: Vec<(usize, f64)>,
    /// Poll mode: each shard's busy share of its reactor's time, by CPU (the rest is
    /// polling that found nothing); empty otherwise.
    pub busy: Vec<(usize, f64)>,
}

/// The heading above the per-second lines (`polled`: with the shards' busy shares).
pub fn heading(tagged: bool, polled: bool) -> String {
    format!(
        "{}{:>8} {:>10} {:>10} {:>9} {:>9}  cpu%(server cores){}",
        if tagged { "instance " } else { "" },
        "sec",
        "messages",
        "IOPS",
        "MB/s",
        "lat(ms)",
        if polled {
            "  busy%(server reactors; the rest polls idle)"
        } else {
            ""
        }
    )
}

impl Line {
    /// The line as printed.
    pub fn format(&self) -> String {
        let mut s = String::new();
        if !self.tag.is_empty() {
            let _ = write!(s, "{:<9}", self.tag);
        }
        let _ = write!(
            s,
            "{:>8.1} {:>10} {:>10.0} {:>9.1} {:>9.3} ",
            self.elapsed_s, self.messages, self.iops, self.mb_per_s, self.latency_ms
        );
        for (cpu, pct) in &self.cpu {
            let _ = write!(s, " {cpu}:{pct:.0}");
        }
        if !self.busy.is_empty() {
            s.push_str("  busy");
            for (cpu, pct) in &self.busy {
                let _ = write!(s, " {cpu}:{pct:.0}");
            }
        }
        s
    }

    /// A printed line read back (`tagged`: it starts with the instance's tag).
    pub fn parse(text: &str, tagged: bool) -> Option<Line> {
        let mut fields = text.split_whitespace();
        let tag = if tagged {
            fields.next()?.to_owned()
        } else {
            String::new()
        };
        let elapsed_s = fields.next()?.parse().ok()?;
        let messages = fields.next()?.parse().ok()?;
        let iops = fields.next()?.parse().ok()?;
        let mb_per_s = fields.next()?.parse().ok()?;
        let latency_ms = fields.next()?.parse().ok()?;
        let share = |f: &str| {
            let (c, p) = f.split_once(':')?;
            Some((c.parse().ok()?, p.parse().ok()?))
        };
        let mut cpu = Vec::new();
        let mut busy = Vec::new();
        let mut into = &mut cpu;
        for f in fields {
            if f == "busy" {
                into = &mut busy;
            } else {
                into.push(share(f)?);
            }
        }
        Some(Line {
            tag,
            elapsed_s,
            messages,
            iops,
            mb_per_s,
            latency_ms,
            cpu,
            busy,
        })
    }
}

/// The end-of-run block, as the originals print it: `all(depth=512):` then one figure a
/// line.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// `all`, or an instance's tag.
    pub title: String,
    /// Outstanding messages per connection.
    pub depth: u32,
    /// Seconds from the clients' start to every connection open.
    pub connect_time_s: f64,
    /// Messages answered.
    pub messages: u64,
    /// Seconds from every connection open to the last answer.
    pub messaging_time_s: f64,
    /// Mean latency, milliseconds.
    pub latency_ms: f64,
    /// Messages answered per second.
    pub iops: f64,
    /// Bytes sent per second, MB/s (10^6 bytes).
    pub out_mb_per_s: f64,
}

impl Block {
    /// The block's lines.
    pub fn lines(&self) -> Vec<String> {
        vec![
            format!("{}(depth={}):", self.title, self.depth),
            format!("  connect time: {:.6}s", self.connect_time_s),
            format!("  messages received: {}", self.messages),
            format!("  messaging time: {:.6}s", self.messaging_time_s),
            format!("  latency: {:.6}ms", self.latency_ms),
            format!("  IOPS: {:.3}", self.iops),
            format!("  out throughput: {:.3}MB/s", self.out_mb_per_s),
        ]
    }

    /// The block starting at `lines[0]`, read back.
    pub fn parse(lines: &[&str]) -> Option<Block> {
        let (title, depth) = lines
            .first()?
            .trim()
            .strip_suffix("):")?
            .split_once("(depth=")?;
        let value = |i: usize, key: &str, unit: &str| -> Option<f64> {
            lines
                .get(i)?
                .trim()
                .strip_prefix(key)?
                .trim()
                .strip_suffix(unit)?
                .parse()
                .ok()
        };
        Some(Block {
            title: title.to_owned(),
            depth: depth.parse().ok()?,
            connect_time_s: value(1, "connect time:", "s")?,
            messages: value(2, "messages received:", "")? as u64,
            messaging_time_s: value(3, "messaging time:", "s")?,
            latency_ms: value(4, "latency:", "ms")?,
            iops: value(5, "IOPS:", "")?,
            out_mb_per_s: value(6, "out throughput:", "MB/s")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_gives_busy_shares_of_the_cpus_asked_for() {
        let a = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0\n";
        let b = "cpu  60 0 10 130 0 0 0 0 0 0\ncpu0 55 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 90 0 0 0 0\n";
        let set = CpuSet::of([0, 1]);
        let pct = CpuTimes::parse(b, &set).percent_since(&CpuTimes::parse(a, &set));
        assert_eq!(pct, vec![(0, 100.0), (1, 0.0)]);
        assert_eq!(CpuTimes::parse(a, &CpuSet::of([1])).0.len(), 1);
    }

    #[test]
    fn lines_and_blocks_read_back_as_printed() {
        let line = Line {
            tag: "left".to_owned(),
            elapsed_s: 3.0,
            messages: 12345,
            iops: 12345.0,
            mb_per_s: 50.6,
            latency_ms: 41.5,
            cpu: vec![(0, 99.0), (1, 12.0)],
            busy: Vec::new(),
        };
        assert_eq!(Line::parse(&line.format(), true), Some(line.clone()));
        let plain = Line {
            tag: String::new(),
            ..line
        };
        assert_eq!(Line::parse(&plain.format(), false), Some(plain.clone()));
        let polled = Line {
            cpu: vec![(0, 100.0), (1, 100.0)],
            busy: vec![(0, 37.0), (1, 41.0)],
            ..plain
        };
        assert!(polled.format().ends_with(" 0:100 1:100  busy 0:37 1:41"));
        assert_eq!(Line::parse(&polled.format(), false), Some(polled));
        assert_eq!(Line::parse(&heading(false, false), false), None);
        assert_eq!(Line::parse(&heading(false, true), false), None);
        let block = Block {
            title: "all".to_owned(),
            depth: 512,
            connect_time_s: 0.001234,
            messages: 1_000_000,
            messaging_time_s: 10.0,
            latency_ms: 5.25,
            iops: 100_000.0,
            out_mb_per_s: 409.6,
        };
        let lines = block.lines();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        assert_eq!(refs[0], "all(depth=512):");
        assert_eq!(Block::parse(&refs), Some(block));
    }
}
