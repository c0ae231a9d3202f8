//! What the live screen shows of a program that names no throughput or latency of its own
//! (a command after `--`, an attached process): its process tree's CPU, its context
//! switches and the samples taken of it, each per second over time.

use std::collections::VecDeque;

use benchtop_sessions::TimeseriesRow;

/// Points kept in each series: an hour at the default 1 s interval.
const MAX_POINTS: usize = 3600;

/// The process tree's activity over time: (seconds since start, value) each.
#[derive(Debug, Clone, Default)]
pub struct Activity {
    /// CPU of the whole tree, percent of one core.
    pub cpu: VecDeque<(f64, f64)>,
    /// Context switches per second, voluntary and involuntary together.
    pub switches: VecDeque<(f64, f64)>,
    /// The last interval's switches per second: (voluntary, involuntary).
    pub last_switches: Option<(f64, f64)>,
    /// On-CPU samples taken per second.
    pub samples: VecDeque<(f64, f64)>,
    /// The time of the last row, which the next stacks are dated with.
    last_row_s: Option<f64>,
    /// The samples counted at the last stacks, and when.
    last_samples: Option<(f64, u64)>,
}

impl Activity {
    /// Adds one interval's row.
    pub fn add_row(&mut self, row: &TimeseriesRow) {
        self.last_row_s = Some(row.t_s);
        let Some(r) = row.resources else { return };
        push(&mut self.cpu, (row.t_s, r.cpu_percent));
        if let Some(ctx) = r.ctx_switches_interval {
            let per_s = |n: u64| {
                if row.interval_s > 0.0 {
                    n as f64 / row.interval_s
                } else {
                    0.0
                }
            };
            let (vol, invol) = (per_s(ctx.voluntary), per_s(ctx.involuntary));
            self.last_switches = Some((vol, invol));
            push(&mut self.switches, (row.t_s, vol + invol));
        }
    }

    /// The stacks so far hold `total` on-CPU samples: the rate since the last stacks,
    /// dated with the last row (stacks come about once an interval, after its row).
    pub fn add_samples(&mut self, total: u64) {
        let Some(t) = self.last_row_s else { return };
        if let Some((t0, n0)) = self.last_samples {
            if t > t0 {
                let rate = total.saturating_sub(n0) as f64 / (t - t0);
                push(&mut self.samples, (t, rate));
            } else {
                // A second copy within the same interval: the count moves on, the date not.
                return;
            }
        }
        self.last_samples = Some((t, total));
    }

    /// The samples per second of a saved session's intervals, from its per-interval
    /// stacks: (end of the interval, seconds from the start; its length, seconds; its
    /// on-CPU samples) each, in order. Replaces what the series held.
    pub fn samples_of_intervals(&mut self, intervals: impl IntoIterator<Item = (f64, f64, u64)>) {
        self.samples.clear();
        for (t1_s, length_s, samples) in intervals {
            if length_s > 0.0 {
                push(&mut self.samples, (t1_s, samples as f64 / length_s));
            }
        }
    }
}

fn push(series: &mut VecDeque<(f64, f64)>, point: (f64, f64)) {
    if series.len() == MAX_POINTS {
        series.pop_front();
    }
    series.push_back(point);
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchtop_sessions::{ContextSwitches, Resources};

    fn row(t_s: f64, cpu: f64, switches: (u64, u64)) -> TimeseriesRow {
        let mut row = TimeseriesRow::default();
        row.t_s = t_s;
        row.interval_s = 0.5;
        let mut r = Resources::default();
        r.cpu_percent = cpu;
        r.ctx_switches_interval = Some(ContextSwitches::new(switches.0, switches.1));
        row.resources = Some(r);
        row
    }

    #[test]
    fn rows_give_cpu_and_switches_per_second() {
        let mut a = Activity::default();
        a.add_row(&row(0.5, 98.0, (10, 5)));
        assert_eq!(a.cpu.back(), Some(&(0.5, 98.0)));
        assert_eq!(a.switches.back(), Some(&(0.5, 30.0)), "15 in half a second");
        assert_eq!(a.last_switches, Some((20.0, 10.0)));
    }

    #[test]
    fn a_saved_sessions_intervals_give_samples_per_second() {
        let mut a = Activity::default();
        a.samples_of_intervals([(1.0, 1.0, 900), (1.5, 0.5, 400), (2.0, 0.0, 7)]);
        assert_eq!(
            a.samples.iter().copied().collect::<Vec<_>>(),
            [(1.0, 900.0), (1.5, 800.0)],
            "an interval of no length gives no rate"
        );
    }

    #[test]
    fn samples_per_second_come_from_the_growth_between_stacks() {
        let mut a = Activity::default();
        a.add_samples(10);
        assert!(a.samples.is_empty(), "no row yet, no date");
        a.add_row(&row(1.0, 0.0, (0, 0)));
        a.add_samples(100);
        assert!(a.samples.is_empty(), "one count is no rate");
        a.add_row(&row(1.5, 0.0, (0, 0)));
        a.add_samples(600);
        a.add_samples(700);
        assert_eq!(
            a.samples.iter().copied().collect::<Vec<_>>(),
            [(1.5, 1000.0)]
        );
        a.add_row(&row(2.0, 0.0, (0, 0)));
        a.add_samples(1100);
        assert_eq!(a.samples.back(), Some(&(2.0, 1000.0)));
    }
}
