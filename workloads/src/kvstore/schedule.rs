//! The RPC's own cost, accounted in the simulated work's schedule.
//!
//! The theoretical maximum (one sequential client: 25 RPC/s, 40 ms of work an RPC) counts
//! the work alone; an RPC also costs its way out and back, the wake-ups of the threads on
//! that way, the encoding and decoding of its messages — 0.4 to 0.7 ms on a 2-core
//! machine, up to 1.6 % of the rate. So a benchtop client tells the server what its RPCs
//! cost beyond the work, and the server ends each request's work that much earlier:
//!
//! - the server answers every request whose work it simulated with the work it
//!   scheduled, from the request's arrival to the work's end ([`WORK_HEADER`], in µs);
//! - the client measures each RPC from its start (picking the operation) to its answer
//!   being counted, less that scheduled work: what the RPC cost beyond it. The mean of
//!   its recent RPCs ([`CostEstimate`]) goes with its next requests ([`COST_HEADER`]);
//! - the server schedules a request's work to end at its arrival plus its delay less
//!   that cost ([`work_for`]); never before its arrival.
//!
//! Only durations cross the wire, each measured on one clock (the client's RPC, the
//! server's delay), so the rule holds with client and server on two hosts: there the
//! network's round trip is part of the RPC's cost, accounted as the rest. A client that
//! sends no cost (ghz, the original's Java client) gets the whole delay from its
//! requests' arrival, as before; a server without work sends no [`WORK_HEADER`], so a
//! client against it sends no cost either.

use std::time::Duration;

use tonic::metadata::{MetadataMap, MetadataValue};

/// Request metadata: the client's estimate of its RPCs' cost beyond the simulated work,
/// in whole microseconds.
pub const COST_HEADER: &str = "benchtop-rpc-cost-us";

/// Response metadata: the simulated work the server scheduled for the request, from its
/// arrival, in whole microseconds.
pub const WORK_HEADER: &str = "benchtop-work-us";

/// How many recent RPCs the estimate averages over (an exponentially weighted mean of
/// this window, the plain mean until that many have been seen).
pub const WINDOW: u32 = 16;

/// The work a request is given: its `delay` less the client's `cost`, none when the cost
/// exceeds it.
pub fn work_for(delay: Duration, cost: Option<Duration>) -> Duration {
    delay.saturating_sub(cost.unwrap_or(Duration::ZERO))
}

/// A duration in whole microseconds, from metadata; `None` when absent or not a number
/// (a client or server that is not benchtop's, or a malformed value: ignored, not an
/// error, as the work model does not depend on it).
pub fn read_us(metadata: &MetadataMap, key: &'static str) -> Option<Duration> {
    let text = metadata.get(key)?.to_str().ok()?;
    text.parse::<u64>().ok().map(Duration::from_micros)
}

/// Writes `value` as whole microseconds under `key`.
pub fn write_us(metadata: &mut MetadataMap, key: &'static str, value: Duration) {
    let us = u64::try_from(value.as_micros()).unwrap_or(u64::MAX);
    metadata.insert(key, MetadataValue::from(us));
}

/// A client's estimate of its RPCs' cost beyond the simulated work: the mean of its
/// first [`WINDOW`] RPCs, then an exponentially weighted mean with weight `1/WINDOW`, so
/// that it follows a machine whose load changes and repays a stall over the RPCs after
/// it (the rate, a mean, comes out right).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CostEstimate {
    /// The mean, in nanoseconds.
    mean_ns: f64,
    /// RPCs seen, up to [`WINDOW`].
    seen: u32,
}

impl CostEstimate {
    /// The estimate, once an RPC has been measured.
    pub fn get(&self) -> Option<Duration> {
        (self.seen > 0).then(|| Duration::from_nanos(self.mean_ns.round() as u64))
    }

    /// Adds one RPC's cost: its time from start to counted answer, less the work the
    /// server scheduled for it.
    pub fn add(&mut self, cost: Duration) {
        self.seen = (self.seen + 1).min(WINDOW);
        let x = cost.as_nanos() as f64;
        self.mean_ns += (x - self.mean_ns) / f64::from(self.seen);
    }

    /// The cost of an RPC that took `took` from its start to its counted answer, of which
    /// `work` was the simulated work the server scheduled.
    pub fn cost_of(took: Duration, work: Duration) -> Duration {
        took.saturating_sub(work)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_work_ends_early_by_the_cost_and_never_before_the_arrival() {
        assert_eq!(work_for(50 * MS, None), 50 * MS, "no cost: the whole delay");
        assert_eq!(
            work_for(50 * MS, Some(Duration::from_micros(650))),
            Duration::from_micros(49_350)
        );
        assert_eq!(work_for(10 * MS, Some(12 * MS)), Duration::ZERO);
        assert_eq!(work_for(Duration::ZERO, Some(MS)), Duration::ZERO);
    }

    #[test]
    fn an_rpc_of_constant_cost_takes_its_delay_once_the_estimate_has_it() {
        // A closed loop against a server that schedules the delay less the estimate:
        // each RPC takes the work it was given plus its cost. From the second RPC on,
        // the estimate is the cost, and each RPC takes exactly its delay.
        let (delay, cost) = (40 * MS, Duration::from_micros(650));
        let mut estimate = CostEstimate::default();
        let mut took = Vec::new();
        for _ in 0..50 {
            let work = work_for(delay, estimate.get());
            let rpc = work + cost;
            estimate.add(CostEstimate::cost_of(rpc, work));
            took.push(rpc);
        }
        assert_eq!(took[0], delay + cost, "the first RPC has nothing to go on");
        assert!(took[1..].iter().all(|&t| t == delay), "{took:?}");
    }

    #[test]
    fn the_estimate_is_the_mean_of_the_first_rpcs_then_follows_a_change() {
        let mut e = CostEstimate::default();
        assert_eq!(e.get(), None, "nothing measured, nothing sent");
        e.add(Duration::from_micros(600));
        assert_eq!(e.get(), Some(Duration::from_micros(600)));
        e.add(Duration::from_micros(800));
        e.add(Duration::from_micros(700));
        assert_eq!(e.get(), Some(Duration::from_micros(700)), "the plain mean");
        // The load changes: the cost doubles. The estimate moves towards it by 1/16 of
        // the gap an RPC, and is within 1 % of it after 100 RPCs.
        for _ in 0..100 {
            e.add(Duration::from_micros(1400));
        }
        let now = e.get().unwrap().as_secs_f64();
        assert!((now / 1400e-6 - 1.0).abs() < 0.01, "{now}");
    }

    #[test]
    fn a_stall_is_repaid_over_the_rpcs_after_it() {
        // The rate is a mean: a 20 ms stall in one RPC is taken out of the work of the
        // RPCs after it, so 200 RPCs take 200 delays within the cost of one RPC.
        let (delay, cost) = (40 * MS, Duration::from_micros(600));
        let mut estimate = CostEstimate::default();
        let mut total = Duration::ZERO;
        for i in 0..200 {
            let work = work_for(delay, estimate.get());
            let rpc = work + cost + if i == 50 { 20 * MS } else { Duration::ZERO };
            estimate.add(CostEstimate::cost_of(rpc, work));
            total += rpc;
        }
        let excess = total.as_secs_f64() - 200.0 * delay.as_secs_f64();
        assert!(
            excess.abs() < cost.as_secs_f64() * 1.5,
            "{excess} s beyond 200 delays"
        );
    }

    #[test]
    fn costs_cross_as_whole_microseconds_and_garbage_is_ignored() {
        let mut m = MetadataMap::new();
        assert_eq!(read_us(&m, COST_HEADER), None);
        write_us(&mut m, COST_HEADER, Duration::from_nanos(612_345));
        assert_eq!(m.get(COST_HEADER).unwrap().to_str().unwrap(), "612");
        assert_eq!(read_us(&m, COST_HEADER), Some(Duration::from_micros(612)));
        for bad in ["-5", "1e3", "", "12 ms", "99999999999999999999999"] {
            m.insert(COST_HEADER, bad.parse().unwrap());
            assert_eq!(read_us(&m, COST_HEADER), None, "{bad:?}");
        }
        // The largest cost a header can carry leaves no work, and does not overflow.
        m.insert(COST_HEADER, MetadataValue::from(u64::MAX));
        assert_eq!(work_for(50 * MS, read_us(&m, COST_HEADER)), Duration::ZERO);
    }
}
