//! timeseries.jsonl read into rows within the loader's limits, and what `show` prints of
//! it ([`RowSummary`]).
//!
//! Rows are counted in what they hold, value by value as they are parsed
//! ([`crate::timeseries::parse_row_within`]), against a budget that the sessions of one
//! command share ([`crate::limits::MAX_ROW_BYTES`]): a crafted row of millions of figures
//! stops at the budget, however long its line, and the rows from there on are counted,
//! not decoded, and dropped with a warning naming them.

use std::path::Path;

use crate::limits::LoadOptions;
use crate::store::json_reason;
use crate::timeseries::{RowWithin, parse_row_within, row_held_bytes};
use crate::{SessionError, TimeseriesRow};

/// The rows of timeseries.jsonl, in file order, and their summary. Blank lines are
/// skipped; an unterminated last line that does not parse is what a killed recorder
/// leaves: dropped with a warning. With `keep` false each row is folded into the summary
/// and dropped (then only a row on its own is held to the budget).
pub(crate) fn parse_rows(
    bytes: &[u8],
    path: &Path,
    opts: &LoadOptions,
    keep: bool,
    warnings: &mut Vec<String>,
) -> Result<(Vec<TimeseriesRow>, RowSummary), SessionError> {
    let mut rows: Vec<TimeseriesRow> = Vec::new();
    let mut summary = RowSummary::default();
    // What the kept rows hold beyond their places in the list; the list's places, spare
    // ones too, are held besides ([`ROW_SLOT`] each).
    let mut values = 0usize;
    let lines = || bytes.split_inclusive(|&b| b == b'\n').enumerate();
    let rest = |from: usize| {
        lines()
            .skip(from)
            .filter(|(_, l)| !l.trim_ascii().is_empty())
            .count()
    };
    for (i, line) in lines() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        if summary.rows >= opts.max_intervals {
            warnings.push(format!(
                "{}: more than {} intervals; {} rows from line {} on were dropped",
                path.display(),
                opts.max_intervals,
                rest(i),
                i + 1
            ));
            break;
        }
        let budget = if keep {
            // A spare place in the list is the new row's, already counted.
            let spare = if rows.len() < rows.capacity() {
                ROW_SLOT
            } else {
                0
            };
            opts.max_row_bytes
                .saturating_sub(values)
                .saturating_sub(rows.capacity().saturating_mul(ROW_SLOT))
                .saturating_add(spare)
        } else {
            opts.max_row_bytes
        };
        match parse_row_within(line, budget) {
            Ok(RowWithin::Row(row, cost)) => {
                summary.add(&row);
                if keep {
                    values = values.saturating_add(cost.saturating_sub(ROW_SLOT));
                    if rows.len() == rows.capacity() {
                        // Grow as a list does, but never past the budget.
                        let room = opts
                            .max_row_bytes
                            .saturating_sub(values)
                            .saturating_sub(rows.capacity().saturating_mul(ROW_SLOT))
                            / ROW_SLOT;
                        rows.reserve_exact(rows.capacity().max(4).min(room).max(1));
                    }
                    rows.push(*row);
                }
            }
            Ok(RowWithin::OverBudget) => {
                warnings.push(format!(
                    "{}: its rows pass the budget of {} (held: {} rows, {} figures); {} rows \
                     from line {} on were dropped",
                    path.display(),
                    budget_words(opts.max_row_bytes),
                    rows.len(),
                    rows.iter().map(figures).sum::<usize>(),
                    rest(i),
                    i + 1
                ));
                break;
            }
            Err(e) if !line.ends_with(b"\n") => warnings.push(format!(
                "{}: line {} is incomplete ({}); the recorder was cut off while writing it, \
                 so it was dropped",
                path.display(),
                i + 1,
                json_reason(&e, 0)
            )),
            Err(e) => {
                return Err(SessionError::Corrupt {
                    path: path.into(),
                    reason: json_reason(&e, i + 1),
                });
            }
        }
    }
    Ok((rows, summary))
}

/// A row's place in the list of kept rows: what [`row_held_bytes`] counts of a row
/// without values.
const ROW_SLOT: usize = std::mem::size_of::<TimeseriesRow>();

/// What `rows` (kept in a list of `capacity`) hold, as their budget counts it
/// ([`crate::limits::MAX_ROW_BYTES`]).
pub(crate) fn rows_held_bytes(rows: &[TimeseriesRow], capacity: usize) -> usize {
    rows.iter()
        .map(row_held_bytes)
        .fold(0usize, usize::saturating_add)
        .saturating_add(capacity.saturating_sub(rows.len()).saturating_mul(ROW_SLOT))
}

/// The values of a row: its per-core figures, counters, rates, latency metrics and top
/// threads.
fn figures(row: &TimeseriesRow) -> usize {
    row.cpu_percent_per_core.len()
        + row.counters.len()
        + row.rates.len()
        + row.latency.len()
        + row.top_threads.len()
}

/// A budget as the warnings say it: whole MiB, else bytes.
pub(crate) fn budget_words(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// What `show` prints of timeseries.jsonl: the peaks over its rows and the totals of the
/// last row that has them ([`crate::Session::row_summary`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct RowSummary {
    /// Rows read.
    pub rows: usize,
    /// The largest `peak_rss_bytes` of any row (the largest one process reached); in rows
    /// recorded before the tree's peak was a figure of its own, their `rss_bytes` too.
    pub peak_rss_bytes: Option<u64>,
    /// The largest `tree_peak_rss_bytes` of any row (the largest the tree's sum was at an
    /// interval); `None` for rows recorded before it.
    pub tree_peak_rss_bytes: Option<u64>,
    /// The most threads of any row.
    pub max_threads: Option<u32>,
    /// The most processes of any row.
    pub max_processes: Option<u32>,
    /// The context switches of the last row that has them.
    pub ctx_switches_total: Option<crate::ContextSwitches>,
    /// The I/O of the last row that has it.
    pub io_total: Option<crate::IoCounters>,
    /// The CPU time of the last row that has a finite one, seconds.
    pub cpu_time_s: Option<f64>,
    /// The kernel's counts of the tree at the last row that has them.
    pub counted_total: Option<crate::TreeCounts>,
    /// `t_s` of the last row.
    pub last_t_s: Option<f64>,
    /// The largest `live_bytes` counter of any row (a built-in worker's counting
    /// allocator; docs/protocol.md, "Allocation counters").
    pub peak_live_bytes: Option<u64>,
    /// The allocation counters of the last row that has them.
    pub alloc_total: Option<AllocTotals>,
}

/// A built-in worker's allocation counters at one row: cumulative since it began
/// counting, and its live bytes then.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct AllocTotals {
    /// Bytes allocated.
    pub alloc_bytes: u64,
    /// Allocation calls.
    pub allocs: u64,
    /// Bytes live at that row.
    pub live_bytes: u64,
    /// `t_s` of that row.
    pub t_s: f64,
}

impl RowSummary {
    /// The summary of `rows`, in file order.
    pub fn of(rows: &[TimeseriesRow]) -> Self {
        let mut summary = RowSummary::default();
        for row in rows {
            summary.add(row);
        }
        summary
    }

    /// Folds `row` in, as the next row of the file.
    pub fn add(&mut self, row: &TimeseriesRow) {
        self.rows += 1;
        self.last_t_s = Some(row.t_s);
        let counter = |name: &str| row.counters.get(name).copied();
        if let (Some(alloc_bytes), Some(allocs), Some(live_bytes)) = (
            counter("alloc_bytes"),
            counter("allocs"),
            counter("live_bytes"),
        ) {
            self.peak_live_bytes = Some(self.peak_live_bytes.unwrap_or(0).max(live_bytes));
            self.alloc_total = Some(AllocTotals {
                alloc_bytes,
                allocs,
                live_bytes,
                t_s: row.t_s,
            });
        }
        let Some(r) = &row.resources else {
            return;
        };
        // Older rows mixed the tree's sum into their peak.
        let peak = match r.tree_peak_rss_bytes {
            Some(tree) => {
                self.tree_peak_rss_bytes =
                    Some(self.tree_peak_rss_bytes.map_or(tree, |p| p.max(tree)));
                r.peak_rss_bytes
            }
            None => r.peak_rss_bytes.max(r.rss_bytes),
        };
        self.peak_rss_bytes = Some(self.peak_rss_bytes.map_or(peak, |p| p.max(peak)));
        self.max_threads = Some(self.max_threads.map_or(r.threads, |t| t.max(r.threads)));
        self.max_processes = Some(
            self.max_processes
                .map_or(r.processes, |p| p.max(r.processes)),
        );
        if r.ctx_switches_total.is_some() {
            self.ctx_switches_total = r.ctx_switches_total;
        }
        if r.io_total.is_some() {
            self.io_total = r.io_total;
        }
        if r.cpu_time_s.is_finite() {
            self.cpu_time_s = Some(r.cpu_time_s);
        }
        if r.counted_total.is_some() {
            self.counted_total = r.counted_total;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_process_and_the_tree_s_sum_peak_apart_and_older_rows_mix_them() {
        let bytes = b"{\"t_s\":1,\"interval_s\":1,\"resources\":{\"rss_bytes\":300,\"peak_rss_bytes\":200,\"tree_peak_rss_bytes\":300,\"threads\":3,\"cpu_percent\":0,\"cpu_time_s\":0,\"processes\":3}}
{\"t_s\":2,\"interval_s\":1,\"resources\":{\"rss_bytes\":100,\"peak_rss_bytes\":250,\"tree_peak_rss_bytes\":300,\"threads\":1,\"cpu_percent\":0,\"cpu_time_s\":0,\"processes\":1}}
";
        let parse = |bytes: &[u8]| {
            parse_rows(
                bytes,
                Path::new("ts"),
                &LoadOptions::default(),
                false,
                &mut Vec::new(),
            )
            .unwrap()
            .1
        };
        let summary = parse(bytes);
        assert_eq!(summary.peak_rss_bytes, Some(250));
        assert_eq!(summary.tree_peak_rss_bytes, Some(300));
        // A row of before: its peak was the larger of the two.
        let old = b"{\"t_s\":1,\"interval_s\":1,\"resources\":{\"rss_bytes\":300,\"peak_rss_bytes\":200,\"threads\":3,\"cpu_percent\":0,\"cpu_time_s\":0}}
";
        let summary = parse(old);
        assert_eq!(summary.peak_rss_bytes, Some(300));
        assert_eq!(summary.tree_peak_rss_bytes, None);
    }

    #[test]
    fn json_errors_name_the_line_of_the_file() {
        let mut warnings = Vec::new();
        let err = parse_rows(
            b"{\"t_s\":1,\"interval_s\":1}\n{oops}\n",
            Path::new("ts"),
            &LoadOptions::default(),
            true,
            &mut warnings,
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("ts: corrupt: line 2, column 2: "), "{err}");
    }

    #[test]
    fn kept_rows_and_their_spare_places_never_pass_the_budget() {
        let line = b"{\"t_s\":1,\"interval_s\":1,\"cpu_percent_per_core\":[1,2,3]}\n";
        let bytes = line.repeat(100);
        for budget in [0, ROW_SLOT, 3 * ROW_SLOT + 24, 10_000, 30_000] {
            let mut opts = LoadOptions::default();
            opts.max_row_bytes = budget;
            let mut warnings = Vec::new();
            let (rows, summary) =
                parse_rows(&bytes, Path::new("ts"), &opts, true, &mut warnings).unwrap();
            let held = rows_held_bytes(&rows, rows.capacity());
            assert!(held <= budget, "{held} > {budget}");
            // Nothing is lost that the budget could hold: one more row would pass it.
            assert!(
                budget - held < ROW_SLOT + 24,
                "{held} of {budget}: {} rows in {}, slot {ROW_SLOT}",
                rows.len(),
                rows.capacity()
            );
            assert_eq!(summary.rows, rows.len());
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert!(
                warnings[0].contains(&format!("{} rows from line", 100 - rows.len())),
                "{warnings:?}"
            );
        }
    }
}
