//! The arithmetic of the charts, apart from drawing: bar lengths on a log scale of count,
//! the labels of histogram bins by their range, where percentiles fall among the bins,
//! the round top of a y axis, and a time series cut into one value per column.

use crate::state::live::LatencyBin;

/// The length, in cells of `room`, of a bar of `count` when the fullest bar holds `most`:
/// proportional to `ln(1 + count)`, so that a bin of one value among millions still shows
/// (one cell at least), and ten times more is a fixed step longer. Zero only for zero.
pub fn log_bar_len(count: u64, most: u64, room: usize) -> usize {
    if count == 0 || room == 0 {
        return 0;
    }
    let most = most.max(count);
    let share = (count as f64).ln_1p() / (most as f64).ln_1p();
    ((share * room as f64).round() as usize).clamp(1, room)
}

/// The label of the bin `[low, high)` ns: both ends in the unit of the upper one, three
/// significant digits each (`31.6–56.2ms`, `316–562µs`, `0.56–1.00ms`), so that a value
/// reads inside the range its bar is labelled with.
pub fn range_label(low: u64, high: u64) -> String {
    let (div, unit) = unit_of(high as f64);
    format!(
        "{}–{}{unit}",
        three_digits(low as f64 / div),
        three_digits(high as f64 / div)
    )
}

/// The widest label [`range_label`] writes (`31.6–56.2ms`), in characters.
pub const RANGE_LABEL_WIDTH: usize = 11;

/// The divisor and unit of a duration of `ns`: the largest of ns, µs, ms and s that keeps
/// it at 1 or more once rounded to three digits.
fn unit_of(ns: f64) -> (f64, &'static str) {
    if ns < 999.5 {
        (1.0, "ns")
    } else if ns < 999.5e3 {
        (1e3, "µs")
    } else if ns < 999.5e6 {
        (1e6, "ms")
    } else {
        (1e9, "s")
    }
}

/// Three significant digits (two decimals below 10, one below 100, none above).
fn three_digits(v: f64) -> String {
    if v >= 99.95 {
        format!("{v:.0}")
    } else if v >= 9.995 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The index among `bins` of the bin holding `value` (`low <= value < high`); a value past
/// the last bin is in the last, one before the first in the first. None without bins.
pub fn bin_of(bins: &[LatencyBin], value: u64) -> Option<usize> {
    if bins.is_empty() {
        return None;
    }
    Some(
        bins.iter()
            .position(|b| value < b.high)
            .unwrap_or(bins.len() - 1),
    )
}

/// The markers of each bin: the names of the percentiles that fall in it, in the order
/// given (`["p50", "p90"]` on the bin of both).
pub fn markers<'a>(bins: &[LatencyBin], percentiles: &[(&'a str, u64)]) -> Vec<Vec<&'a str>> {
    let mut marks = vec![Vec::new(); bins.len()];
    for &(name, value) in percentiles {
        if let Some(i) = bin_of(bins, value) {
            marks[i].push(name);
        }
    }
    marks
}

/// The bins of a histogram to draw in `rows` rows: every bin when they fit; else the
/// bins of `must` (indices, the most important first: the ones that hold the
/// percentiles a reader looks for), as many as fit, and in the rows left the non-empty
/// bins that close gaps of one bin between them, then the fullest. In ascending order; a bin
/// whose predecessor is not drawn is where bins were left out (see [`left_out_before`]).
pub fn bins_to_draw(counts: &[u64], must: &[usize], rows: usize) -> Vec<usize> {
    let n = counts.len();
    if n <= rows {
        return (0..n).collect();
    }
    let mut shown = vec![false; n];
    let mut left = rows;
    for &i in must {
        if left == 0 {
            break;
        }
        if i < n && !shown[i] {
            shown[i] = true;
            left -= 1;
        }
    }
    // Close gaps of one bin first (an elision costs as much to read as the bin), then
    // add the fullest bins; an empty bin is not worth a row.
    while left > 0 {
        let gap = (1..n.saturating_sub(1))
            .find(|&i| !shown[i] && counts[i] > 0 && shown[i - 1] && shown[i + 1]);
        let next = gap.or_else(|| {
            (0..n)
                .filter(|&i| !shown[i] && counts[i] > 0)
                .max_by_key(|&i| (counts[i], std::cmp::Reverse(i)))
        });
        let Some(i) = next else { break };
        shown[i] = true;
        left -= 1;
    }
    (0..n).filter(|&i| shown[i]).collect()
}

/// How many bins were left out just before each of `drawn` (ascending indices), so a row
/// can say so.
pub fn left_out_before(drawn: &[usize]) -> Vec<usize> {
    let mut prev = None;
    drawn
        .iter()
        .map(|&i| {
            let gap = match prev {
                Some(p) => i - p - 1,
                None => i,
            };
            prev = Some(i);
            gap
        })
        .collect()
}

/// The top of a y axis from zero that holds `max`: 1, 2, 2.5 or 5 times a power of ten, the
/// smallest at or above it (1 for nothing to show).
pub fn nice_ceiling(max: f64) -> f64 {
    if !max.is_finite() || max <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&top| top >= max * (1.0 - 1e-9))
        .unwrap_or(10.0 * power)
}

/// One value per column of a chart `columns` wide showing the `window_s` seconds up to
/// `end_s`: the mean of the points `(t, value)` in each column's slice of time. A column
/// between two points whose slice holds none keeps the value before it (points further
/// apart than a column are steps, not gaps); before the first point there is None. The
/// last column ends at `end_s`, the first starts `window_s` before.
pub fn time_columns(
    points: impl Iterator<Item = (f64, f64)>,
    end_s: f64,
    window_s: f64,
    columns: usize,
) -> Vec<Option<f64>> {
    let mut sums = vec![(0.0f64, 0u32); columns];
    if columns == 0 || window_s <= 0.0 {
        return Vec::new();
    }
    let start = end_s - window_s;
    let per = window_s / columns as f64;
    for (t, v) in points {
        if t <= start || t > end_s || !v.is_finite() {
            continue;
        }
        // A point at the end of a slice belongs to it: (start, start + per] is column 0.
        let i = (((t - start) / per).ceil() as usize).clamp(1, columns) - 1;
        sums[i].0 += v;
        sums[i].1 += 1;
    }
    let mut last = None;
    sums.into_iter()
        .map(|(sum, n)| {
            if n > 0 {
                last = Some(sum / f64::from(n));
            }
            last
        })
        .collect()
}

/// The labels of a time axis `width` cells wide over the last `window_s` seconds: the
/// start (`-60s`) at the left, the middle, and `now` at the right, as (column, text).
pub fn time_ticks(width: usize, window_s: f64) -> Vec<(usize, String)> {
    let mut ticks = Vec::new();
    let start = format!("-{}", seconds(window_s));
    let middle = format!("-{}", seconds(window_s / 2.0));
    if width >= start.len() + 4 {
        ticks.push((0, start));
    }
    if width >= 24 {
        ticks.push((width / 2 - middle.len() / 2, middle));
    }
    if width >= 3 {
        ticks.push((width - 3, "now".to_owned()));
    }
    ticks
}

/// The labels of a time axis `width` cells wide from `start_s` to `end_s` seconds since
/// a recorded run's start: the start at the left, the middle, the end at the right
/// (`0s`, `21s`, `42s`), as (column, text).
pub fn since_start_ticks(width: usize, start_s: f64, end_s: f64) -> Vec<(usize, String)> {
    let mut ticks = Vec::new();
    let start = seconds(start_s);
    let middle = seconds((start_s + end_s) / 2.0);
    let end = seconds(end_s);
    if width >= start.len() + end.len() + 4 {
        ticks.push((0, start));
    }
    if width >= 24 {
        ticks.push((width / 2 - middle.len() / 2, middle));
    }
    if width > end.len() {
        ticks.push((width - end.len(), end));
    }
    ticks
}

/// Whole seconds, or minutes once they are whole (`30s`, `2m`, `1h`).
fn seconds(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 && s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s >= 120 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_bins_are_drawn_when_they_fit() {
        assert_eq!(bins_to_draw(&[1, 2, 3], &[2], 3), [0, 1, 2]);
        // Short of rows, an empty bin is left out rather than drawn.
        assert_eq!(bins_to_draw(&[5, 0, 3, 1], &[0, 3], 3), [0, 2, 3]);
        assert_eq!(bins_to_draw(&[5, 0, 0, 1], &[0, 3], 3), [0, 3]);
        assert_eq!(left_out_before(&[0, 1, 2]), [0, 0, 0]);
    }

    #[test]
    fn a_long_tail_keeps_the_bins_of_its_percentiles_and_says_what_it_left_out() {
        // p50 in bin 1, p99 in 5, p99.9 in 8, max in 9; four rows.
        let counts = [10, 500, 300, 90, 20, 8, 3, 1, 1, 1];
        let drawn = bins_to_draw(&counts, &[1, 9, 8, 5], 4);
        assert_eq!(drawn, [1, 5, 8, 9]);
        assert_eq!(left_out_before(&drawn), [1, 3, 2, 0]);
        // Six rows: no gap of one bin to close; the fullest bins next.
        let drawn = bins_to_draw(&counts, &[1, 9, 8, 5], 6);
        assert_eq!(drawn, [1, 2, 3, 5, 8, 9]);
        // A gap of one bin closes first.
        let drawn = bins_to_draw(&counts, &[1, 9, 8, 6], 5);
        assert_eq!(drawn, [1, 6, 7, 8, 9]);
        let drawn = bins_to_draw(&counts, &[1, 9, 7, 5], 5);
        assert_eq!(drawn, [1, 5, 6, 7, 9]);
    }

    #[test]
    fn fewer_rows_than_percentiles_keep_the_most_important_first() {
        let counts = [10, 500, 300, 90, 20, 8, 3, 1, 1, 1];
        assert_eq!(bins_to_draw(&counts, &[1, 9, 8, 5], 2), [1, 9]);
        assert_eq!(bins_to_draw(&counts, &[1, 9, 8, 5], 0), Vec::<usize>::new());
        // The same bin named twice takes one row.
        assert_eq!(bins_to_draw(&counts, &[9, 9, 8], 2), [8, 9]);
    }

    fn bin(low: u64, high: u64, count: u64) -> LatencyBin {
        LatencyBin { low, high, count }
    }

    #[test]
    fn a_log_scale_shows_a_single_value_beside_a_million() {
        let room = 30;
        assert_eq!(log_bar_len(0, 1_000_000, room), 0);
        assert_eq!(log_bar_len(1_000_000, 1_000_000, room), room);
        let one = log_bar_len(1, 1_000_000, room);
        let hundred = log_bar_len(100, 1_000_000, room);
        let ten_k = log_bar_len(10_000, 1_000_000, room);
        assert!(one >= 1, "the tail stays visible");
        assert!(one < hundred && hundred < ten_k && ten_k < room);
        // Ten times more is a step of the same size, not ten times longer.
        let step = |a: u64| log_bar_len(a * 10, 1_000_000, room) - log_bar_len(a, 1_000_000, room);
        assert!(step(1_000).abs_diff(step(10_000)) <= 1);
        // A linear scale would give the hundred a bar of nothing at all.
        assert!((100.0 / 1e6 * room as f64) < 1.0);
    }

    #[test]
    fn bar_lengths_stay_within_the_room() {
        assert_eq!(
            log_bar_len(5, 3, 10),
            10,
            "more than the most is a full bar"
        );
        assert_eq!(log_bar_len(1, 1, 0), 0);
        assert_eq!(log_bar_len(1, 1, 1), 1);
    }

    #[test]
    fn bins_are_labelled_by_their_range_so_50ms_is_inside_its_label() {
        // kvstore's writes take 50 ms: the bin of 31.6 to 56.2 ms.
        assert_eq!(range_label(31_622_777, 56_234_133), "31.6–56.2ms");
        assert_eq!(range_label(316_228, 562_341), "316–562µs");
        assert_eq!(range_label(562_341, 1_000_000), "0.56–1.00ms");
        assert_eq!(range_label(100, 178), "100–178ns");
        assert_eq!(range_label(1_778_279_410, 3_162_277_660), "1.78–3.16s");
        for (low, high) in [(31_622_777, 56_234_133), (562_341, 1_000_000), (1, 2)] {
            assert!(range_label(low, high).chars().count() <= RANGE_LABEL_WIDTH);
        }
    }

    #[test]
    fn percentiles_mark_the_bins_that_hold_them() {
        let bins = [bin(100, 178, 5), bin(178, 316, 0), bin(316, 562, 2)];
        let marks = markers(
            &bins,
            &[("p50", 120), ("p90", 400), ("p99", 560), ("max", 900)],
        );
        assert_eq!(marks[0], ["p50"]);
        assert!(marks[1].is_empty());
        assert_eq!(marks[2], ["p90", "p99", "max"]);
        assert_eq!(
            bin_of(&bins, 178),
            Some(1),
            "the upper edge is the next bin's"
        );
        assert_eq!(bin_of(&bins, 5), Some(0));
        assert_eq!(bin_of(&[], 5), None);
    }

    #[test]
    fn the_y_axis_tops_at_a_round_number_at_or_above_the_largest() {
        assert_eq!(nice_ceiling(8.3e6), 1e7);
        assert_eq!(nice_ceiling(99.0), 100.0);
        assert_eq!(nice_ceiling(100.0), 100.0);
        assert_eq!(nice_ceiling(130.0), 200.0);
        assert_eq!(nice_ceiling(2.2), 2.5);
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(f64::NAN), 1.0);
    }

    #[test]
    fn points_land_in_the_column_of_their_time_and_steps_fill_between_them() {
        // 10 s in 5 columns of 2 s, ending at t = 20.
        let points = [
            (11.0, 1.0),
            (12.0, 3.0),
            (19.0, 5.0),
            (20.0, 7.0),
            (9.0, 100.0),
        ];
        let cols = time_columns(points.into_iter(), 20.0, 10.0, 5);
        assert_eq!(
            cols,
            [Some(2.0), Some(2.0), Some(2.0), Some(2.0), Some(6.0)]
        );
        let late = [(17.0, 4.0), (20.0, 8.0)];
        let cols = time_columns(late.into_iter(), 20.0, 10.0, 5);
        assert_eq!(
            cols,
            [None, None, None, Some(4.0), Some(8.0)],
            "nothing before the first"
        );
        assert!(time_columns(points.into_iter(), 20.0, 10.0, 0).is_empty());
    }

    #[test]
    fn the_time_axis_names_the_window_and_now() {
        let ticks = time_ticks(40, 60.0);
        assert_eq!(ticks[0], (0, "-60s".to_owned()));
        assert_eq!(ticks.last(), Some(&(37, "now".to_owned())));
        assert!(ticks.iter().any(|(_, t)| t == "-30s"));
        assert_eq!(time_ticks(40, 7200.0)[0].1, "-2h");
        assert_eq!(time_ticks(40, 240.0)[0].1, "-4m");
        assert!(time_ticks(2, 60.0).is_empty());
    }

    #[test]
    fn a_recorded_run_s_axis_reads_seconds_since_its_start() {
        assert_eq!(
            since_start_ticks(40, 0.0, 42.0),
            [
                (0, "0s".to_owned()),
                (19, "21s".to_owned()),
                (37, "42s".to_owned())
            ]
        );
        // A window on the end of a long run: where it starts, in whole minutes once whole.
        assert_eq!(since_start_ticks(40, 3540.0, 3600.0)[2].1, "1h");
        assert_eq!(since_start_ticks(40, 3540.0, 3600.0)[0].1, "59m");
        assert!(since_start_ticks(2, 0.0, 42.0).is_empty());
    }
}
