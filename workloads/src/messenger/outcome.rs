//! What a run did, and the summary it ends on: the originals' `all(depth=…)` block and
//! the same figures, per instance when there are two or more.

use std::net::SocketAddr;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::client::ClientOutcome;
use super::params::{Instance, MsgrParams, PollMode};
use super::progress::Block;
use super::reactor::ReactorTimes;
use crate::protocol::{Better, Figure, Summary};

/// What one instance did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct InstanceOutcome {
    /// Where it ran.
    pub instance: Instance,
    /// Its clients' results, when clients ran.
    pub client: Option<ClientOutcome>,
    /// Messages its server echoed, when the server ran here.
    pub served: Option<u64>,
    /// Its server's address, when it ran here.
    pub listened: Option<SocketAddr>,
    /// Its server's mean CPU% per core over the run (anything that ran there).
    pub server_cpu: Vec<(usize, f64)>,
    /// CPU time its server's own threads used over the run.
    pub server_cpu_time: Option<Duration>,
    /// Voluntary and involuntary context switches of its server's threads over the run.
    pub server_switches: Option<(u64, u64)>,
    /// Each poll-mode shard's CPU and reactor times over the run (empty when its server
    /// does not poll or did not run here).
    pub server_reactor: Vec<(usize, ReactorTimes)>,
}

/// What a run did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Outcome {
    /// The parameters.
    pub params: MsgrParams,
    /// Each instance.
    pub instances: Vec<InstanceOutcome>,
    /// The per-second lines, heading first.
    pub lines: Vec<String>,
    /// Notes on the CPU allocation.
    pub notes: Vec<String>,
    /// Errors the server's connections ended with.
    pub server_errors: Vec<String>,
    /// Ended by a stop before the message time.
    pub stopped: bool,
}

/// The `all(depth=…)` block of `outcomes` together.
fn block(title: &str, depth: u32, outcomes: &[&ClientOutcome]) -> Block {
    let received: u64 = outcomes.iter().map(|o| o.received).sum();
    let sum_ns: u128 = outcomes.iter().map(|o| o.latency_sum_ns).sum();
    let connect = outcomes
        .iter()
        .map(|o| o.connect_time)
        .max()
        .unwrap_or_default();
    let messaging = outcomes
        .iter()
        .map(|o| o.messaging_time)
        .max()
        .unwrap_or_default();
    // Instances side by side: their rates add up.
    let iops: f64 = outcomes.iter().map(|o| o.iops()).sum();
    let out: f64 = outcomes.iter().map(|o| o.out_mb_per_s()).sum();
    Block {
        title: title.to_owned(),
        depth,
        connect_time_s: connect.as_secs_f64(),
        messages: received,
        messaging_time_s: messaging.as_secs_f64(),
        latency_ms: if received == 0 {
            0.0
        } else {
            sum_ns as f64 / received as f64 / 1e6
        },
        iops,
        out_mb_per_s: out,
    }
}

fn block_figures(prefix: &str, b: &Block, latency: Option<&Histogram<u64>>) -> Vec<Figure> {
    let name = |n: &str| format!("{prefix}{n}");
    let mut figures = vec![
        Figure::new(name("connect_time_s"), b.connect_time_s, "s").better(Better::Lower),
        Figure::new(name("messages"), b.messages as f64, "messages").better(Better::Higher),
        Figure::new(name("messaging_time_s"), b.messaging_time_s, "s"),
        Figure::new(name("latency_ms"), b.latency_ms, "ms").better(Better::Lower),
        Figure::new(name("iops"), b.iops, "IOPS").better(Better::Higher),
        Figure::new(name("out_mb_per_s"), b.out_mb_per_s, "MB/s").better(Better::Higher),
    ];
    if let Some(h) = latency.filter(|h| !h.is_empty()) {
        for (p, q) in [("p50", 0.5), ("p99", 0.99)] {
            figures.push(
                Figure::new(
                    name(&format!("latency_{p}_ms")),
                    h.value_at_quantile(q) as f64 / 1e6,
                    "ms",
                )
                .better(Better::Lower),
            );
        }
    }
    figures
}

/// The summary: the allocation notes, the per-second lines, the originals' block (one
/// per instance and `all` when there are two or more) and the same figures, each
/// instance's prefixed with its tag (`left.iops`), plus the server's CPU% per core.
pub fn summary(outcome: &Outcome) -> Summary {
    let mut figures = Vec::new();
    let mut lines = Vec::new();
    let p = &outcome.params;
    lines.push(format!(
        "messenger: server {}{}, {} client(s) x {} connection(s), depth {}, {}-byte messages, \
         {} instance(s)",
        p.server.as_str(),
        match p.poll_mode {
            PollMode::Off => "",
            PollMode::All => " (poll mode: server and clients)",
            PollMode::Server => " (poll mode: server)",
            PollMode::Clients => " (poll mode: clients)",
        },
        p.clients,
        p.conns_per_client,
        p.depth,
        p.msg_size,
        outcome.instances.len()
    ));
    for i in &outcome.instances {
        let tag = if i.instance.tag.is_empty() {
            String::new()
        } else {
            format!("{}: ", i.instance.tag)
        };
        lines.push(format!(
            "{tag}server cpuset {}, client cpuset {}",
            i.instance.server, i.instance.client
        ));
        if let Some(addr) = i.listened {
            lines.push(format!("{tag}server listening on {addr}"));
        }
    }
    for note in &outcome.notes {
        lines.push(format!("note: {note}"));
    }
    lines.extend(outcome.lines.iter().cloned());
    let tagged = outcome.instances.len() > 1;
    let mut all = Vec::new();
    for i in &outcome.instances {
        let prefix = if tagged {
            format!("{}.", i.instance.tag)
        } else {
            String::new()
        };
        if let Some(c) = &i.client {
            all.push(c);
            if tagged {
                let b = block(&i.instance.tag, p.depth, &[c]);
                lines.extend(b.lines());
                figures.extend(block_figures(&prefix, &b, Some(&c.latency)));
            }
        }
        if let Some(served) = i.served.filter(|_| i.client.is_none()) {
            figures.push(Figure::new(
                format!("{prefix}messages_served"),
                served as f64,
                "messages",
            ));
            lines.push(format!("{prefix}messages served: {served}"));
        }
        server_report(i, tagged, &prefix, &mut figures, &mut lines);
    }
    if !all.is_empty() {
        let mut merged = crate::protocol::new_latency_histogram();
        for c in &all {
            let _ = merged.add(&c.latency);
        }
        let b = block("all", p.depth, &all);
        lines.extend(b.lines());
        figures.extend(block_figures("", &b, Some(&merged)));
    }
    for e in &outcome.server_errors {
        lines.push(format!("server connection error: {e}"));
    }
    Summary { figures, lines }
}

/// The lines and figures of instance `i`'s server: its threads' CPU time and switches,
/// its cores' CPU%, its reactors' busy time, and its clients' reactors.
fn server_report(
    i: &InstanceOutcome,
    tagged: bool,
    prefix: &str,
    figures: &mut Vec<Figure>,
    lines: &mut Vec<String>,
) {
    let handled = i
        .client
        .as_ref()
        .map(|c| c.received)
        .or(i.served)
        .unwrap_or(0);
    if let Some(t) = i.server_cpu_time.filter(|_| handled > 0) {
        let per = t.as_secs_f64() * 1e6 / handled as f64;
        figures.push(
            Figure::new(format!("{prefix}server_cpu_us_per_message"), per, "us")
                .better(Better::Lower),
        );
        lines.push(format!(
            "{}server threads' CPU time: {:.3}s, {per:.3}us per message",
            if tagged {
                format!("{}: ", i.instance.tag)
            } else {
                String::new()
            },
            t.as_secs_f64()
        ));
    }
    if !i.server_cpu.is_empty() {
        let mean = i.server_cpu.iter().map(|(_, p)| p).sum::<f64>() / i.server_cpu.len() as f64;
        figures.push(Figure::new(
            format!("{prefix}server_cpu_percent"),
            mean,
            "%",
        ));
        let per_core: Vec<String> = i
            .server_cpu
            .iter()
            .map(|(c, p)| format!("{c}:{p:.0}"))
            .collect();
        lines.push(format!(
            "{}server cpu% (mean over the run): {}",
            if tagged {
                format!("{}: ", i.instance.tag)
            } else {
                String::new()
            },
            per_core.join(" ")
        ));
    }
    let label = if tagged {
        format!("{}: ", i.instance.tag)
    } else {
        String::new()
    };
    if let Some((voluntary, involuntary)) = i.server_switches {
        figures.push(
            Figure::new(
                format!("{prefix}server_voluntary_switches"),
                voluntary as f64,
                "switches",
            )
            .better(Better::Lower),
        );
        figures.push(Figure::new(
            format!("{prefix}server_involuntary_switches"),
            involuntary as f64,
            "switches",
        ));
        lines.push(format!(
            "{label}server threads' context switches: {voluntary} voluntary (waits), \
             {involuntary} involuntary (preempted or yielded)"
        ));
    }
    if !i.server_reactor.is_empty() {
        let total = i
            .server_reactor
            .iter()
            .fold(ReactorTimes::default(), |a, (_, t)| ReactorTimes {
                busy: a.busy + t.busy,
                idle: a.idle + t.idle,
                yielded: a.yielded + t.yielded,
                turns: a.turns + t.turns,
                idle_turns: a.idle_turns + t.idle_turns,
                yields: a.yields + t.yields,
            });
        figures.push(Figure::new(
            format!("{prefix}server_busy_percent"),
            total.busy_percent(),
            "%",
        ));
        if handled > 0 {
            let per = total.busy.as_secs_f64() * 1e6 / handled as f64;
            figures.push(
                Figure::new(format!("{prefix}server_busy_us_per_message"), per, "us")
                    .better(Better::Lower),
            );
            lines.push(format!(
                "{label}server reactors' busy time: {:.3}s, {per:.3}us per message",
                total.busy.as_secs_f64()
            ));
        }
        let per_core: Vec<String> = i
            .server_reactor
            .iter()
            .map(|(c, t)| format!("{c}:{:.0}", t.busy_percent()))
            .collect();
        lines.push(format!(
            "{label}server reactors busy% (the rest polling idle): {}; {} turns, {} idle, \
             {} yielded the CPU for {:.3}s",
            per_core.join(" "),
            total.turns,
            total.idle_turns,
            total.yields,
            total.yielded.as_secs_f64()
        ));
    }
    if let Some(c) = &i.client {
        let reactors: Vec<String> = c
            .threads
            .iter()
            .filter_map(|t| {
                t.reactor
                    .map(|r| format!("{}:{:.0}", t.cpu, r.busy_percent()))
            })
            .collect();
        if !reactors.is_empty() {
            lines.push(format!(
                "{label}client reactors busy% (the rest polling idle): {}",
                reactors.join(" ")
            ));
        }
    }
}
