//! What a run measured, point by point, and the summary it ends on.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::params::{Backend, EchoParams, NAME, Role, value_name};
use super::server::ServerTally;
use super::wire::Tally;
use crate::protocol::{Better, Figure, Summary};

/// One point of a run (the run itself when there is no sweep).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Point {
    /// `buffer-size=1024`, or none for a run without a sweep.
    pub name: Option<String>,
    /// Payload bytes per message.
    pub buffer_size: u64,
    /// Clients.
    pub num_clients: u32,
    /// Messages back whole and exact.
    pub messages: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Messages not back in time.
    pub timeouts: u64,
    /// Messages back but not exact.
    pub payload_errors: u64,
    /// From the first send to the last answer (or the end of `--duration`).
    pub elapsed: Duration,
    /// Round-trip times.
    pub rtt: Histogram<u64>,
}

impl Point {
    /// Messages back per second.
    pub fn messages_per_second(&self) -> f64 {
        per_second(self.messages as f64, self.elapsed)
    }

    /// Payload megabytes (10⁶ bytes) back per second.
    pub fn mb_per_second(&self) -> f64 {
        per_second(self.bytes as f64 / 1e6, self.elapsed)
    }

    fn rtt_us(&self, quantile: f64) -> f64 {
        if self.rtt.is_empty() {
            0.0
        } else {
            self.rtt.value_at_quantile(quantile) as f64 / 1e3
        }
    }

    /// The point's figures (a phase's, and the summary's for a run without a sweep).
    pub fn figures(&self) -> Vec<Figure> {
        let max = if self.rtt.is_empty() {
            0.0
        } else {
            self.rtt.max() as f64 / 1e3
        };
        vec![
            Figure::new("buffer_size", self.buffer_size as f64, "bytes"),
            Figure::new("num_clients", f64::from(self.num_clients), ""),
            Figure::new("messages", self.messages as f64, "messages"),
            Figure::new("timeouts", self.timeouts as f64, "messages").better(Better::Lower),
            Figure::new("payload_errors", self.payload_errors as f64, "messages")
                .better(Better::Lower),
            Figure::new("time_taken", self.elapsed.as_secs_f64(), "s"),
            Figure::new(
                "messages_per_second",
                self.messages_per_second(),
                "messages/s",
            )
            .better(Better::Higher),
            Figure::new("mb_per_second", self.mb_per_second(), "MB/s").better(Better::Higher),
            Figure::new("rtt_mean_us", self.rtt.mean() / 1e3, "µs").better(Better::Lower),
            Figure::new("rtt_p50_us", self.rtt_us(0.5), "µs").better(Better::Lower),
            Figure::new("rtt_p99_us", self.rtt_us(0.99), "µs").better(Better::Lower),
            Figure::new("rtt_p99_9_us", self.rtt_us(0.999), "µs").better(Better::Lower),
            Figure::new("rtt_max_us", max, "µs").better(Better::Lower),
        ]
    }

    pub(super) fn from_tally(
        name: Option<String>,
        p: &EchoParams,
        tally: Tally,
        elapsed: Duration,
    ) -> Point {
        Point {
            name,
            buffer_size: p.buffer_size,
            num_clients: p.num_clients,
            messages: tally.messages,
            bytes: tally.bytes,
            timeouts: tally.timeouts,
            payload_errors: tally.payload_errors,
            elapsed,
            rtt: tally.rtt,
        }
    }
}

fn per_second(amount: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { amount / secs } else { 0.0 }
}

/// What a run did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Outcome {
    /// The parameters run.
    pub params: EchoParams,
    /// The clients' points, in order (empty for `--role server`).
    pub points: Vec<Point>,
    /// What a server echoed (`--role server`).
    pub server: Option<ServerTally>,
    /// Whether the run was stopped before it completed.
    pub stopped: bool,
}

/// The protocol summary of a run.
pub fn summary(outcome: &Outcome) -> Summary {
    Summary {
        figures: figures(outcome),
        lines: summary_lines(outcome),
    }
}

fn figures(outcome: &Outcome) -> Vec<Figure> {
    if let Some(server) = &outcome.server {
        return vec![
            Figure::new("server_messages_echoed", server.messages as f64, "messages"),
            Figure::new("server_bytes_echoed", server.bytes as f64, "bytes"),
            Figure::new("server_time", server.elapsed.as_secs_f64(), "s"),
        ];
    }
    match outcome.points.as_slice() {
        [only] if only.name.is_none() => only.figures(),
        points => points
            .iter()
            .flat_map(|p| {
                let name = p.name.clone().unwrap_or_default();
                p.figures()
                    .into_iter()
                    .filter(|f| {
                        matches!(
                            f.name.as_str(),
                            "messages_per_second"
                                | "mb_per_second"
                                | "rtt_p50_us"
                                | "rtt_p99_us"
                                | "timeouts"
                        )
                    })
                    .map(move |mut f| {
                        f.name = format!("{name}:{}", f.name);
                        f
                    })
            })
            .collect(),
    }
}

fn fmt_us(us: f64) -> String {
    format!("{:?}", Duration::from_nanos((us * 1e3).round() as u64))
}

/// The summary lines: what was run, then the counts, throughput and latency percentiles
/// (a sweep: one table row per point).
pub fn summary_lines(outcome: &Outcome) -> Vec<String> {
    let p = &outcome.params;
    let what = format!(
        "{}: {} over {}, {} back end{}",
        NAME,
        match p.role {
            Role::Server => "server",
            Role::Client => "clients",
            Role::Both => "server and clients",
        },
        value_name(p.protocol),
        value_name(p.backend),
        match (p.backend, p.hugepages) {
            (Backend::Dpdk, None) => " (memif, --no-huge)".to_owned(),
            (Backend::Dpdk, Some(n)) => format!(" (memif, {n} huge pages reserved)"),
            _ => String::new(),
        }
    );
    if let Some(server) = &outcome.server {
        return vec![
            what,
            format!("server_messages_echoed: {}", server.messages),
            format!("server_bytes_echoed: {}", server.bytes),
            format!("server_time: {:?}", server.elapsed),
        ];
    }
    let mut lines = vec![what];
    match outcome.points.as_slice() {
        [only] if only.name.is_none() => {
            lines.extend([
                format!(
                    "mode: {}{}",
                    value_name(p.mode),
                    p.rate
                        .map(|r| format!(" (open loop, {r} messages/s)"))
                        .unwrap_or_default()
                ),
                format!("buffer_size: {}", only.buffer_size),
                format!("num_clients: {}", only.num_clients),
                format!("messages: {}", only.messages),
                format!("timeouts: {}", only.timeouts),
                format!("payload_errors: {}", only.payload_errors),
                format!("time_taken: {:?}", only.elapsed),
                format!("messages_per_second: {:.0}", only.messages_per_second()),
                format!("mb_per_second: {:.2}", only.mb_per_second()),
                format!("rtt_mean: {}", fmt_us(only.rtt.mean() / 1e3)),
                format!("rtt_p50: {}", fmt_us(only.rtt_us(0.5))),
                format!("rtt_p99: {}", fmt_us(only.rtt_us(0.99))),
                format!("rtt_p99_9: {}", fmt_us(only.rtt_us(0.999))),
                format!(
                    "rtt_max: {}",
                    fmt_us(if only.rtt.is_empty() {
                        0.0
                    } else {
                        only.rtt.max() as f64 / 1e3
                    })
                ),
            ]);
        }
        points => {
            lines.push(format!(
                "{:<20} {:>12} {:>10} {:>10} {:>10} {:>9}",
                "point", "messages/s", "MB/s", "rtt_p50", "rtt_p99", "timeouts"
            ));
            for point in points {
                lines.push(point_row(point));
            }
        }
    }
    lines
}

fn point_row(point: &Point) -> String {
    format!(
        "{:<20} {:>12.0} {:>10.2} {:>10} {:>10} {:>9}",
        point.name.as_deref().unwrap_or("run"),
        point.messages_per_second(),
        point.mb_per_second(),
        fmt_us(point.rtt_us(0.5)),
        fmt_us(point.rtt_us(0.99)),
        point.timeouts
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lines_name_every_figure() {
        let mut rtt = crate::protocol::new_latency_histogram();
        rtt.record(20_000).unwrap();
        rtt.record(40_000).unwrap();
        let point = Point {
            name: None,
            buffer_size: 64,
            num_clients: 1,
            messages: 2,
            bytes: 128,
            timeouts: 1,
            payload_errors: 0,
            elapsed: Duration::from_millis(1),
            rtt,
        };
        let outcome = Outcome {
            params: EchoParams::default(),
            points: vec![point.clone()],
            server: None,
            stopped: false,
        };
        let lines = summary_lines(&outcome);
        assert_eq!(
            lines[0],
            "udp-echo: server and clients over udp, tokio back end"
        );
        assert!(
            lines.contains(&"messages_per_second: 2000".to_owned()),
            "{lines:?}"
        );
        assert!(lines.contains(&"rtt_p50: 20.015µs".to_owned()), "{lines:?}");
        let sweep = Outcome {
            points: vec![
                Point {
                    name: Some("buffer-size=64".to_owned()),
                    ..point.clone()
                },
                Point {
                    name: Some("buffer-size=1024".to_owned()),
                    ..point
                },
            ],
            ..outcome
        };
        let lines = summary_lines(&sweep);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[1].starts_with("point") && lines[3].starts_with("buffer-size=1024"));
        let names: Vec<String> = summary(&sweep)
            .figures
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert!(
            names.contains(&"buffer-size=1024:rtt_p99_us".to_owned()),
            "{names:?}"
        );
    }
}
