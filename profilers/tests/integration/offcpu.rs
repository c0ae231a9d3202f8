//! Off-CPU profiles: where threads block, weighted by the time blocked.

use std::time::Instant;

use benchtop_profile::kinds::{Kind, KindSet};
use benchtop_profilers::SamplerOptions;

use crate::fixture::{
    BURN_FN, COMM, Fixture, SLEEP_FN, Usage, require_offcpu_stacks, start_sampler,
    weight_containing, weight_under,
};

#[test]
fn off_cpu_time_of_a_sleep_loop_lands_on_the_sleeping_function() {
    // No worker threads: the main thread sleeps, 1 ms at a time.
    let mut child = Fixture::spawn("sleep-loop", 600, 0);
    let sampler = start_sampler(child.pid(), &SamplerOptions::default());
    require_offcpu_stacks(&sampler);
    child.go();
    child.wait_cpu_time();
    let profile = sampler.finish().expect("finish");
    let folded = profile.profiles[Kind::OffCpu].to_folded();
    let total = profile.profiles[Kind::OffCpu].total_weight();
    let sleeping = weight_containing(&folded, SLEEP_FN);
    assert!(
        total > 0 && sleeping as f64 >= 0.9 * total as f64,
        "only {sleeping} of {total} µs off-CPU in {SLEEP_FN}:\n{folded}"
    );
    for line in folded.lines() {
        assert!(line.starts_with(&format!("{COMM};")), "{line}");
    }
    // Stacks taken at the switch: the scheduler below the syscall that blocked.
    let in_scheduler = weight_containing(&folded, "schedule");
    assert!(
        in_scheduler as f64 >= 0.9 * total as f64,
        "{in_scheduler} of {total} µs with a scheduler frame:\n{folded}"
    );
    assert!(
        profile.offcpu_stacks && profile.offcpu_samples > 100,
        "{profile:?}"
    );
    // The tree is weighed in whole microseconds per stack; the sub-microsecond remainder
    // of each stack is all that may be missing from it.
    let missing = profile.blocked.as_micros().abs_diff(u128::from(total));
    assert!(
        missing <= 1 + u128::from(total) / 1000,
        "the profile's blocked time {:?} is its tree's weight {total} µs",
        profile.blocked
    );
}

#[test]
fn off_cpu_weights_add_up_to_the_time_each_thread_blocked() {
    let mut child = Fixture::spawn("sleep-loop", 800, 2);
    let mut opts = SamplerOptions::default();
    opts.per_thread = true;
    let sampler = start_sampler(child.pid(), &opts);
    require_offcpu_stacks(&sampler);
    let started = Instant::now();
    child.go();
    let cpu = child.wait_cpu_time();
    let wall = started.elapsed();
    let profile = sampler.finish().expect("finish");
    let folded = profile.profiles[Kind::OffCpu].to_folded();
    // Each sleeper blocks for most of its 800 ms (less its CPU time and wake-up
    // latency) and never longer than the run.
    for thread in ["sleeper-0", "sleeper-1"] {
        let blocked_us = weight_under(&folded, &format!("{COMM};{thread};"));
        let ratio = blocked_us as f64 / wall.as_micros() as f64;
        assert!(
            (0.5..=1.02).contains(&ratio),
            "{thread} blocked {blocked_us} µs in a run of {wall:?} (ratio {ratio:.3}):\n{folded}"
        );
    }
    // And the whole: at most every thread (the main one waits in join) for the wall time.
    let total = profile.profiles[Kind::OffCpu].total_weight() as f64;
    assert!(
        total <= 3.0 * wall.as_micros() as f64,
        "{total} µs blocked over 3 threads in {wall:?}"
    );
    eprintln!(
        "{total} µs off-CPU in {wall:?} for 3 threads, {} switches, {:?} preempted, {cpu:?} CPU",
        profile.switches, profile.preempted
    );
}

#[test]
fn on_cpu_samples_of_a_busy_loop_land_on_the_loop_with_off_cpu_on_too() {
    let mut child = Fixture::spawn("burn", 600, 0);
    let opts = SamplerOptions::default();
    let sampler = start_sampler(child.pid(), &opts);
    assert_eq!(sampler.kind(), KindSet::BOTH);
    child.go();
    // The burn lasts a wall-clock time: the samples follow the CPU time the child had.
    let cpu = child.wait_cpu_time();
    let expected = cpu.as_secs_f64() * opts.frequency_hz as f64;
    let profile = sampler.finish().expect("finish");
    let folded = profile.profiles[Kind::Cpu].to_folded();
    let burning = weight_containing(&folded, BURN_FN);
    assert!(
        profile.samples >= 10
            && profile.samples as f64 >= 0.5 * expected
            && burning as f64 >= 0.9 * profile.samples as f64,
        "only {burning} of {} samples ({expected:.0} expected for {cpu:?} of CPU) in \
         {BURN_FN}:\n{folded}",
        profile.samples
    );
    // Off-CPU samples are kept apart from on-CPU ones.
    assert_eq!(profile.profiles[Kind::Cpu].total_weight(), profile.samples);
    assert!(!profile.profiles[Kind::Cpu].to_folded().contains("[blocked"));
}

#[test]
fn an_off_cpu_only_profile_takes_no_on_cpu_samples() {
    let mut child = Fixture::spawn("sleep-loop", 300, 0);
    let mut opts = SamplerOptions::default();
    opts.kind = KindSet::of(Kind::OffCpu);
    let sampler = start_sampler(child.pid(), &opts);
    require_offcpu_stacks(&sampler);
    assert_eq!(sampler.event(), "context-switches");
    child.go();
    child.wait_cpu_time();
    let profile = sampler.finish().expect("finish");
    assert!(
        profile.profiles[Kind::Cpu].is_empty(),
        "{}",
        profile.profiles[Kind::Cpu].to_folded()
    );
    assert_eq!(profile.samples, 0);
    let folded = profile.profiles[Kind::OffCpu].to_folded();
    let sleeping = weight_containing(&folded, SLEEP_FN);
    assert!(
        sleeping as f64 >= 0.9 * profile.profiles[Kind::OffCpu].total_weight() as f64
            && sleeping > 100_000,
        "{folded}"
    );
    assert_eq!(profile.sampling_info().event, "context-switches");
}

#[test]
fn an_on_cpu_only_profile_records_no_switches() {
    let mut child = Fixture::spawn("sleep-loop", 200, 1);
    let mut opts = SamplerOptions::default();
    opts.kind = KindSet::of(Kind::Cpu);
    let sampler = start_sampler(child.pid(), &opts);
    assert!(!sampler.offcpu_stacks());
    child.go();
    child.wait_cpu_time();
    let profile = sampler.finish().expect("finish");
    assert!(
        profile.profiles[Kind::OffCpu].is_empty(),
        "{}",
        profile.profiles[Kind::OffCpu].to_folded()
    );
    assert_eq!((profile.switches, profile.offcpu_samples), (0, 0));
}

/// Runs a switch storm of `ms` with `kind` and returns its round trips, the kernel's
/// count of its context switches and the profile.
fn storm(kind: KindSet, ms: u64) -> (u64, Usage, benchtop_profilers::Profile) {
    let mut child = Fixture::spawn("switch-storm", ms, 1);
    let mut opts = SamplerOptions::default();
    opts.kind = kind;
    opts.buffer_pages = std::env::var("BT_PAGES").ok().and_then(|v| v.parse().ok()); // TMP
    let sampler = start_sampler(child.pid(), &opts);
    child.go();
    let usage = child.wait_usage();
    let rounds: u64 = child
        .output_value("rounds")
        .and_then(|r| r.parse().ok())
        .expect("the storm's round trips");
    (rounds, usage, sampler.finish().expect("finish"))
}

#[test]
fn a_switch_storm_is_followed_switch_by_switch_and_losses_are_counted() {
    let (rounds, usage, profile) = storm(
        KindSet::BOTH,
        std::env::var("STORM_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(600),
    );
    // The kernel's own count, over the fixture's whole life (a handful of switches
    // happen before sampling starts).
    let switches = usage.voluntary_switches + usage.involuntary_switches;
    eprintln!(
        "{rounds} round trips, {switches} switches by rusage: {} switch-outs recorded, {} \
         off-CPU samples, {} lost, {} µs blocked, {:?} preempted; warnings {:?}",
        profile.switches,
        profile.offcpu_samples,
        profile.lost,
        profile.profiles[Kind::OffCpu].total_weight(),
        profile.preempted,
        profile.warnings,
    );
    let seen = profile.switches + profile.lost;
    assert!(
        seen as f64 >= 0.95 * switches as f64 && profile.switches <= switches,
        "{} switch-outs and {} lost records for {switches} switches",
        profile.switches,
        profile.lost
    );
    if profile.lost > 0 {
        assert!(
            profile.warnings.iter().any(|w| w.contains("lost")),
            "{:?}",
            profile.warnings
        );
    }
    assert!(
        weight_containing(
            &profile.profiles[Kind::OffCpu].to_folded(),
            "profilers_fixture_switch_storm"
        ) > 0,
        "{}",
        profile.profiles[Kind::OffCpu].to_folded()
    );
}
