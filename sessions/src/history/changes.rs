//! Change points in a history of values: E-divisive means (Matteson & James, 2014) with a
//! permutation test on each candidate, as MongoDB runs it on its performance histories
//! (Daly et al., ICPE 2020).
//!
//! The values are the logs of the points' values, so a change is a ratio whatever the
//! figure's scale. Before the search, a point far from the median of its neighbours (five
//! a side, as many as the history has on its nearer side) by more than [`OUTLIER_SPREADS`]
//! of the history's noise is set aside as an outlier and counted at that median: one
//! noisy point never makes a change point, and a step does not look like an outlier
//! (the points beside it have most of their neighbours on their own side).
//!
//! The search splits the history where the energy distance between the two sides, scaled
//! by their sizes, is largest (each side at least [`MIN_SEGMENT`] points), tests that
//! split against [`PERMUTATIONS`] shuffles of the segment (the split stands when at most
//! a fraction α of the shuffles, counting the observed order, split as well; a segment
//! shorter than [`SHORT_SEGMENT`] points gets [`SHORT_PERMUTATIONS`]), and goes on
//! in each side until no segment splits. A segment whose best split does not stand is
//! not split again. With no change in a history, the chance of any change point is α
//! ([`ALPHA`], 1 %); each segment between true changes is tested once more at α.

use super::super::compare::judge::XorShift;

/// The error rate of each test: the chance that a history without a change gets one.
pub const ALPHA: f64 = 0.01;
/// The shuffles each candidate is tested against (p-values in steps of 1/200).
pub const PERMUTATIONS: usize = 199;
/// The shuffles a candidate in a segment shorter than [`SHORT_SEGMENT`] points is tested
/// against (p-values in steps of 1/1000). At α = 1 %, 199 shuffles let a split stand only
/// when at most one shuffle splits as well, and no p-value is below 1/200: a decision
/// hangs on one shuffle more or less. With 999 the resolution is five times finer, a
/// borderline step is found a little more often (12 points, 2 % noise, 200 seeds: a 4 %
/// step 55 times against 49, a 5 % step 89 against 84), and a short segment's shuffles
/// cost little.
pub const SHORT_PERMUTATIONS: usize = 999;
/// Segments shorter than this get [`SHORT_PERMUTATIONS`].
pub const SHORT_SEGMENT: usize = 50;
/// The fewest points on either side of a change point.
pub const MIN_SEGMENT: usize = 4;
/// How many of the history's noise (a standard deviation, from the spread of consecutive
/// differences) a point must be from the median of its neighbours to be an outlier.
pub const OUTLIER_SPREADS: f64 = 5.0;
/// The neighbours a side the outlier rule looks at.
const NEIGHBOURS: usize = 5;

/// How change points are looked for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ChangeOptions {
    /// The error rate of each test ([`ALPHA`]).
    pub alpha: f64,
    /// Shuffles per test ([`PERMUTATIONS`]).
    pub permutations: usize,
    /// Shuffles per test of a segment shorter than [`SHORT_SEGMENT`] points
    /// ([`SHORT_PERMUTATIONS`]).
    pub short_permutations: usize,
    /// The fewest points a side ([`MIN_SEGMENT`]).
    pub min_segment: usize,
    /// Seed of the shuffles (results are deterministic in it).
    pub seed: u64,
}

impl Default for ChangeOptions {
    fn default() -> Self {
        ChangeOptions {
            alpha: ALPHA,
            permutations: PERMUTATIONS,
            short_permutations: SHORT_PERMUTATIONS,
            min_segment: MIN_SEGMENT,
            seed: 0x5eed_cafe,
        }
    }
}

/// What the search found in a history of log values.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Found {
    /// Each change point, as the index of the first point after it, in order.
    pub changes: Vec<usize>,
    /// The points set aside as outliers (counted at their neighbours' median).
    pub outliers: Vec<usize>,
    /// The p-value of each change point's test, in the order of `changes`.
    pub p_values: Vec<f64>,
}

/// The change points of `logs` (see the module docs). Values that are not finite are
/// counted as outliers.
pub fn change_points(logs: &[f64], opts: &ChangeOptions) -> Found {
    let (tamed, outliers) = tame(logs);
    let min = opts.min_segment.max(1);
    let mut open: Vec<(usize, usize)> = vec![(0, tamed.len())];
    let mut found: Vec<(usize, f64)> = Vec::new();
    while !open.is_empty() {
        // The segment whose best split is largest goes first.
        let mut best: Option<(usize, usize, f64)> = None;
        for (i, &(s, e)) in open.iter().enumerate() {
            if let Some((tau, q)) = best_split(&tamed[s..e], min)
                && best.is_none_or(|(_, _, bq)| q > bq)
            {
                best = Some((i, tau, q));
            }
        }
        let Some((i, tau, q)) = best else { break };
        let (s, e) = open.swap_remove(i);
        let seed = opts.seed ^ ((s as u64) << 32) ^ e as u64;
        if let Some(p) = significant(&tamed[s..e], q, min, opts, seed) {
            found.push((s + tau, p));
            open.push((s, s + tau));
            open.push((s + tau, e));
        }
    }
    found.sort_by_key(|(i, _)| *i);
    Found {
        changes: found.iter().map(|(i, _)| *i).collect(),
        p_values: found.iter().map(|(_, p)| *p).collect(),
        outliers,
    }
}

/// The median of `v` (sorted in place); NaN when empty.
fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The history's noise: the spread of consecutive differences (1.4826 × their median
/// absolute deviation, over √2), which a few steps hardly move.
fn noise(logs: &[f64]) -> f64 {
    let mut diffs: Vec<f64> = logs
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|d| d.is_finite())
        .collect();
    let centre = median(&mut diffs);
    let mut deviations: Vec<f64> = diffs.iter().map(|d| (d - centre).abs()).collect();
    1.4826 * median(&mut deviations) / std::f64::consts::SQRT_2
}

/// `logs` with each outlier (and each value that is not finite) replaced by the median of
/// its neighbours, and the outliers' indices.
fn tame(logs: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let sigma = noise(logs);
    let n = logs.len();
    let mut out = logs.to_vec();
    let mut outliers = Vec::new();
    let mut window = Vec::with_capacity(2 * NEIGHBOURS + 1);
    for i in 0..n {
        // As many neighbours on each side, so that a step's own side is the majority.
        let h = NEIGHBOURS.min(i).min(n - 1 - i);
        window.clear();
        window.extend(logs[i - h..=i + h].iter().filter(|x| x.is_finite()));
        let centre = median(&mut window);
        let far = if logs[i].is_finite() {
            h >= 2 && sigma.is_finite() && (logs[i] - centre).abs() > OUTLIER_SPREADS * sigma
        } else {
            true
        };
        if far {
            outliers.push(i);
            out[i] = if centre.is_finite() { centre } else { 0.0 };
        }
    }
    (out, outliers)
}

/// Counts and sums of values by rank: the left or the right side of a split.
struct Fenwick {
    count: Vec<f64>,
    sum: Vec<f64>,
}

impl Fenwick {
    fn new(n: usize) -> Self {
        Fenwick {
            count: vec![0.0; n + 1],
            sum: vec![0.0; n + 1],
        }
    }

    fn add(&mut self, rank: usize, value: f64, sign: f64) {
        let mut i = rank + 1;
        while i < self.count.len() {
            self.count[i] += sign;
            self.sum[i] += sign * value;
            i += i & i.wrapping_neg();
        }
    }

    /// Count and sum of the values of rank at most `rank`.
    fn up_to(&self, rank: usize) -> (f64, f64) {
        let (mut c, mut s) = (0.0, 0.0);
        let mut i = rank + 1;
        while i > 0 {
            c += self.count[i];
            s += self.sum[i];
            i -= i & i.wrapping_neg();
        }
        (c, s)
    }

    /// Σ |value − x| over the values held, of which there are `count` summing to `total`.
    fn distance(&self, rank: usize, value: f64, count: f64, total: f64) -> f64 {
        let (c, s) = self.up_to(rank);
        value * c - s + (total - s) - value * (count - c)
    }
}

/// The ranks of `v` (ties broken by position).
fn ranks(v: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut out = vec![0; v.len()];
    for (r, i) in order.into_iter().enumerate() {
        out[i] = r;
    }
    out
}

/// The best split of `v` by E-divisive means (exponent 1): the size of the left side and
/// the split's statistic, both sides at least `min` long; `None` when `v` is too short.
fn best_split(v: &[f64], min: usize) -> Option<(usize, f64)> {
    let ranked: Vec<(f64, usize)> = v.iter().copied().zip(ranks(v)).collect();
    best_split_ranked(&ranked, min)
}

/// [`best_split`] of values given with their ranks (a shuffle keeps them).
fn best_split_ranked(v: &[(f64, usize)], min: usize) -> Option<(usize, f64)> {
    let m = v.len();
    if m < 2 * min {
        return None;
    }
    let mut sorted: Vec<f64> = v.iter().map(|(x, _)| *x).collect();
    sorted.sort_by(f64::total_cmp);
    // Σ over pairs of |x − y|, from the sorted values.
    let mut within_r: f64 = sorted
        .iter()
        .enumerate()
        .map(|(k, x)| x * (2.0 * k as f64 - (m as f64 - 1.0)))
        .sum();
    let (mut within_l, mut between) = (0.0, 0.0);
    let (mut left, mut right) = (Fenwick::new(m), Fenwick::new(m));
    let (mut count_l, mut sum_l) = (0.0, 0.0);
    let (mut count_r, mut sum_r) = (m as f64, sorted.iter().sum::<f64>());
    for &(x, r) in v {
        right.add(r, x, 1.0);
    }
    let mut best: Option<(usize, f64)> = None;
    for (t, &(x, r)) in v.iter().enumerate().take(m - min) {
        right.add(r, x, -1.0);
        count_r -= 1.0;
        sum_r -= x;
        let to_right = right.distance(r, x, count_r, sum_r);
        let to_left = left.distance(r, x, count_l, sum_l);
        within_r -= to_right;
        within_l += to_left;
        between += to_right - to_left;
        left.add(r, x, 1.0);
        count_l += 1.0;
        sum_l += x;
        let tau = t + 1;
        if tau < min {
            continue;
        }
        let (nl, nr) = (tau as f64, (m - tau) as f64);
        let pairs = |n: f64| if n >= 2.0 { n * (n - 1.0) / 2.0 } else { 1.0 };
        let e = 2.0 * between / (nl * nr) - within_l / pairs(nl) - within_r.max(0.0) / pairs(nr);
        let q = nl * nr / m as f64 * e;
        if best.is_none_or(|(_, bq)| q > bq) {
            best = Some((tau, q));
        }
    }
    best
}

/// The permutation test of a split of statistic `q` in `v`: its p-value when it stands
/// (at most α), `None` when it does not. Stops as soon as the shuffles that split as well
/// are too many for the split to stand.
fn significant(v: &[f64], q: f64, min: usize, opts: &ChangeOptions, seed: u64) -> Option<f64> {
    let mut shuffled: Vec<(f64, usize)> = v.iter().copied().zip(ranks(v)).collect();
    let mut rng = XorShift(seed | 1);
    let runs = if v.len() < SHORT_SEGMENT {
        opts.short_permutations
    } else {
        opts.permutations
    }
    .max(1);
    let allowed = (opts.alpha * (runs + 1) as f64 - 1.0).floor();
    let mut as_large = 0.0;
    for _ in 0..runs {
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, rng.below(i + 1));
        }
        if best_split_ranked(&shuffled, min).is_some_and(|(_, sq)| sq >= q) {
            as_large += 1.0;
            if as_large > allowed {
                return None;
            }
        }
    }
    Some((1.0 + as_large) / (runs + 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::SyntheticHistory;

    fn logs(values: &[f64]) -> Vec<f64> {
        values.iter().map(|v| v.ln()).collect()
    }

    /// The statistic computed from its definition, pair by pair.
    fn naive_best(v: &[f64], min: usize) -> Option<(usize, f64)> {
        let m = v.len();
        let mut best: Option<(usize, f64)> = None;
        for tau in min..=m.checked_sub(min)? {
            let (l, r) = v.split_at(tau);
            let (nl, nr) = (l.len() as f64, r.len() as f64);
            let mut between = 0.0;
            for x in l {
                for y in r {
                    between += (x - y).abs();
                }
            }
            let within = |s: &[f64]| {
                let mut w = 0.0;
                for i in 0..s.len() {
                    for j in i + 1..s.len() {
                        w += (s[i] - s[j]).abs();
                    }
                }
                let n = s.len() as f64;
                if n >= 2.0 {
                    w / (n * (n - 1.0) / 2.0)
                } else {
                    0.0
                }
            };
            let e = 2.0 * between / (nl * nr) - within(l) - within(r);
            let q = nl * nr / m as f64 * e;
            if best.is_none_or(|(_, bq)| q > bq) {
                best = Some((tau, q));
            }
        }
        best
    }

    #[test]
    fn the_split_statistic_matches_its_definition() {
        let mut rng = XorShift(7);
        let v: Vec<f64> = (0..40)
            .map(|i| (rng.below(1000) as f64) / 100.0 + if i > 25 { 3.0 } else { 0.0 })
            .collect();
        let (tau, q) = best_split(&v, 3).unwrap();
        let (ntau, nq) = naive_best(&v, 3).unwrap();
        assert_eq!(tau, ntau);
        assert!((q - nq).abs() < 1e-9 * nq.abs().max(1.0), "{q} vs {nq}");
    }

    #[test]
    fn two_steps_are_found_at_their_points_with_their_signs() {
        for seed in 1..=5 {
            let mut history = SyntheticHistory::new(200, 0.02, seed);
            history.steps = vec![(80, 0.08), (150, -0.06)];
            let values = history.values();
            let found = change_points(&logs(&values), &ChangeOptions::default());
            assert_eq!(found.changes.len(), 2, "seed {seed}: {found:?}");
            for (&at, (want, step)) in found.changes.iter().zip([(80usize, 0.08f64), (150, -0.06)])
            {
                assert!(at.abs_diff(want) <= 2, "seed {seed}: {at} for {want}");
                let before: f64 = values[at - 10..at].iter().sum::<f64>() / 10.0;
                let after: f64 = values[at..at + 10].iter().sum::<f64>() / 10.0;
                assert_eq!((after > before), step > 0.0, "seed {seed} at {at}");
            }
        }
    }

    #[test]
    fn a_history_without_steps_has_no_change_point_in_nineteen_seeds_of_twenty() {
        let alarms = (1..=20)
            .filter(|&seed| {
                let values = SyntheticHistory::new(200, 0.02, seed).values();
                !change_points(&logs(&values), &ChangeOptions::default())
                    .changes
                    .is_empty()
            })
            .count();
        assert!(
            alarms <= 1,
            "{alarms} of 20 flat histories got change points"
        );
    }

    #[test]
    fn one_outlier_point_makes_no_change_point() {
        for seed in 1..=5 {
            for at in [1, 3, 60, 197, 198] {
                let mut values = SyntheticHistory::new(200, 0.02, seed).values();
                values[at] *= 1.6;
                let found = change_points(&logs(&values), &ChangeOptions::default());
                assert!(
                    found.changes.is_empty(),
                    "seed {seed}, outlier at {at}: {found:?}"
                );
            }
        }
    }

    #[test]
    fn an_outlier_is_set_aside_but_a_step_is_not() {
        let mut values = SyntheticHistory::new(60, 0.01, 3).values();
        values[20] *= 2.0;
        for v in &mut values[40..] {
            *v *= 1.5;
        }
        let found = change_points(&logs(&values), &ChangeOptions::default());
        assert_eq!(found.outliers, vec![20]);
        assert_eq!(found.changes, vec![40]);
        assert!(found.p_values[0] <= ALPHA);
    }

    #[test]
    fn short_and_degenerate_histories_have_no_change_point() {
        let opts = ChangeOptions::default();
        assert!(change_points(&[], &opts).changes.is_empty());
        assert!(change_points(&[1.0; 7], &opts).changes.is_empty());
        assert!(change_points(&[0.0; 100], &opts).changes.is_empty());
        let mut odd = vec![0.0; 30];
        odd[4] = f64::NAN;
        odd[9] = f64::INFINITY;
        let found = change_points(&odd, &opts);
        assert!(found.changes.is_empty());
        assert_eq!(found.outliers, vec![4, 9]);
    }

    #[test]
    fn short_segments_get_p_values_in_thousandths_and_find_small_steps_as_often() {
        let stepped = |seed: u64, step: f64| {
            let mut values = SyntheticHistory::new(12, 0.02, seed).values();
            for v in &mut values[6..] {
                *v *= 1.0 + step;
            }
            logs(&values)
        };
        let found = change_points(&stepped(9, 0.5), &ChangeOptions::default());
        assert_eq!(found.changes, vec![6]);
        // Below the least p-value 199 shuffles can give (1/200), in thousandths.
        let p = found.p_values[0];
        assert!(p < 1.0 / 200.0, "{p}");
        assert!(((p * 1000.0).round() - p * 1000.0).abs() < 1e-9, "{p}");
        // A 5 % step in 12 points with 2 % noise, the data and the shuffles' seed varied
        // together: found at least as often with 999 shuffles as with 199.
        let hits = |short_permutations: usize| {
            (1..=200u64)
                .filter(|&seed| {
                    let opts = ChangeOptions {
                        short_permutations,
                        seed,
                        ..ChangeOptions::default()
                    };
                    change_points(&stepped(seed, 0.05), &opts).changes == vec![6]
                })
                .count()
        };
        let (with_999, with_199) = (hits(SHORT_PERMUTATIONS), hits(PERMUTATIONS));
        assert!(with_999 >= with_199, "999: {with_999}, 199: {with_199}");
    }

    #[test]
    fn twelve_points_stepping_by_half_at_the_sixth_split_there() {
        let mut values = SyntheticHistory::new(12, 0.02, 9).values();
        for v in &mut values[6..] {
            *v *= 1.5;
        }
        assert_eq!(
            change_points(&logs(&values), &ChangeOptions::default()).changes,
            vec![6]
        );
    }
}
