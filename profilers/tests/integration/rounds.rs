//! Split fixtures against a sampling clock that ticks in step with their rounds.
//!
//! A `cpu-clock` event samples a thread every period of its own CPU time, exactly: the
//! kernel keeps what is left of the period when the thread is switched out. A fixture
//! that repeats rounds of one fixed length (`leaf_a` 5 units, `leaf_b` 3, `leaf_c` 2)
//! is sampled at the same few phases of its round for as long as the clock stays in step
//! with it, and its samples split as those phases fall, not as its work does. Rounds of
//! 11.5 to 12 ms against the 1.001 ms period of 999 Hz do that: a run recorded here
//! kept the pattern `aaaaaabbbccc` (50/25/25) for some 30 rounds in a row, and a run
//! whose clock stayed in step throughout split 50/24/26 where the work is 50/30/20.
//! The split fixtures therefore draw each round's unit (xorshift64, between half and
//! one and a half units), so that the sampled phases spread over the round.

use crate::unwind::{NO_FP, assert_split, build_c, one_at_a_time, record, user_stacks};
use benchtop_profile::Kind;
use benchtop_profilers::{SamplerOptions, UnwindMode};

/// Units of successive rounds as the split fixtures' `next_unit` draws them, `unit`
/// being their `UNIT`.
fn drawn_units(unit: u64) -> impl Iterator<Item = u64> {
    let mut x: u64 = 88172645463325252;
    std::iter::from_fn(move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        Some(unit / 2 + x % unit)
    })
}

/// Shares of the parts (fractions of a round, in order) of `rounds` rounds of
/// `lengths` (CPU time), sampled every `period` from `phase` (a fraction of a period):
/// what a cpu-clock event sees.
fn sampled_split(lengths: &[f64], parts: &[f64], period: f64, phase: f64) -> Vec<f64> {
    let mut counts = vec![0u64; parts.len()];
    let mut next = phase * period;
    let mut start = 0.0;
    for &len in lengths {
        let mut end = start;
        for (count, part) in counts.iter_mut().zip(parts) {
            end += part * len;
            while next < end {
                *count += 1;
                next += period;
            }
        }
        start = end;
    }
    let n: u64 = counts.iter().sum();
    counts.iter().map(|&c| c as f64 / n.max(1) as f64).collect()
}

const PARTS: [f64; 3] = [0.5, 0.3, 0.2];

/// The largest distance (percentage points) of a sampled split from [`PARTS`] over
/// `phases` phases of the clock.
fn worst_error(lengths: &[f64], period: f64, phases: usize) -> f64 {
    (0..phases)
        .flat_map(|i| sampled_split(lengths, &PARTS, period, i as f64 / phases as f64))
        .zip(PARTS.iter().cycle())
        .map(|(got, want)| (got - want).abs() * 100.0)
        .fold(0.0, f64::max)
}

#[test]
fn a_sampling_clock_in_step_with_rounds_of_one_length_splits_them_by_its_phase() {
    // Rounds of twelve periods, some 2,000 samples: every sample falls at the same
    // twelve phases of every round. Late in the period, three of them land in leaf_b's
    // 3.6 periods and three in leaf_c's 2.4: 50/25/25, the split of the failing run;
    // early in it, four and two: 50/33/17.
    let lengths = vec![12.0; 170];
    let near =
        |got: Vec<f64>, want: [f64; 3]| got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9);
    let late = sampled_split(&lengths, &PARTS, 1.0, 0.8);
    assert!(near(late.clone(), [0.5, 0.25, 0.25]), "{late:?}");
    let early = sampled_split(&lengths, &PARTS, 1.0, 0.2);
    assert!(
        near(early.clone(), [0.5, 4.0 / 12.0, 2.0 / 12.0]),
        "{early:?}"
    );
}

#[test]
fn rounds_of_drawn_units_split_as_their_work_at_any_period_and_phase() {
    // Whatever the clock's period against the mean round (4 to 20 periods a round) and
    // phase, about 2,000 samples of rounds of drawn units split within a point and a
    // half of the work (the worst of these 2,576 cases: 1.27, at 100 rounds of 20
    // periods, where each round's boundaries are off by up to a sample); rounds of one
    // length miss by five points or more at some of them.
    let mut worst: f64 = 0.0;
    for tenths in 40..=200 {
        let per_round = f64::from(tenths) / 10.0;
        let rounds = (2000.0 / per_round) as usize;
        let lengths: Vec<f64> = drawn_units(1_000_000)
            .take(rounds)
            .map(|u| u as f64 / 1e6 * per_round)
            .collect();
        worst = worst.max(worst_error(&lengths, 1.0, 16));
    }
    assert!(worst <= 1.5, "{worst:.2} points");
    let fixed: f64 = (40..=200)
        .map(|tenths| {
            let per_round = f64::from(tenths) / 10.0;
            let lengths = vec![per_round; (2000.0 / per_round) as usize];
            worst_error(&lengths, 1.0, 16)
        })
        .fold(0.0, f64::max);
    assert!(fixed >= 5.0, "{fixed:.2} points");
}

/// [`crate::unwind`]'s call tree timed by the thread's CPU clock instead of counted in
/// iterations: each round's parts last exactly 50/30/20 % of argv[2] seconds times its
/// drawn unit, for argv[1] seconds in all.
const TIMED_C: &str = r#"
#include <stdlib.h>
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
static volatile unsigned long sink;
static double round_s, t;
__attribute__((noinline)) void spin(double until) {
    while (now() < until)
        for (int i = 0; i < 100; i++) sink += i ^ (sink >> 3);
}
__attribute__((noinline)) void leaf_a(double u) { t += 0.5 * u * round_s; spin(t); }
__attribute__((noinline)) void leaf_b(double u) { t += 0.3 * u * round_s; spin(t); }
__attribute__((noinline)) void leaf_c(double u) { t += 0.2 * u * round_s; spin(t); }
__attribute__((noinline)) void mid_x(double u) { leaf_a(u); leaf_b(u); }
__attribute__((noinline)) void mid_y(double u) { leaf_c(u); }
#define UNIT 1000000UL
static unsigned long next_unit(void) {
    static unsigned long x = 88172645463325252UL;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return UNIT / 2 + x % UNIT;
}
int main(int argc, char **argv) {
    double end = (argc > 1 ? atof(argv[1]) : 2.0);
    round_s = argc > 2 ? atof(argv[2]) : 0.012;
    t = now();
    end += t;
    while (t < end) {
        double u = (double)next_unit() / UNIT;
        mid_x(u);
        mid_y(u);
    }
    return 0;
}
"#;

#[test]
fn a_fixture_whose_rounds_last_twelve_sampling_periods_keeps_its_split() {
    // The worst case of the model above, on this machine: rounds of twelve periods of
    // the sampler's own clock on average.
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "timed", TIMED_C, NO_FP);
    let hz = SamplerOptions::default().frequency_hz;
    let round = format!("{:.9}", 12.0 / hz as f64);
    let profile = record(&prog, &["2", &round], UnwindMode::Dwarf);
    let stacks = user_stacks(&profile.profiles[Kind::Cpu].to_folded());
    assert!(profile.samples > 1000, "{} samples", profile.samples);
    let split = [
        ("main;mid_x;leaf_a;spin", 0.5),
        ("main;mid_x;leaf_b;spin", 0.3),
        ("main;mid_y;leaf_c;spin", 0.2),
    ];
    assert_split(&stacks, &split, 2.0, "rounds of twelve sampling periods");
}
