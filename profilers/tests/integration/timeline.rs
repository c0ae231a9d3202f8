//! Per-interval stacks: every sample and every blocked interval attributed to a report
//! interval, adding up to the sampler's own counts.

use benchtop_profile::Kind;
use std::time::Duration;

use benchtop_profile::intervals::StacksChunk;
use benchtop_profilers::sampler::monotonic_ns;
use benchtop_profilers::{Sampler, SamplerOptions};

use crate::fixture::{Fixture, require_offcpu_stacks, start_sampler};

/// Marks interval ends every `every` while the fixture runs, taking the sampler's
/// chunks as a recorder does; returns every chunk taken, the profile's last one included.
fn record_intervals(
    child: &mut Fixture,
    sampler: Sampler,
    every: Duration,
) -> (Vec<StacksChunk>, benchtop_profilers::Profile) {
    let start = monotonic_ns();
    sampler.mark_start(start);
    child.go();
    let mut chunks = Vec::new();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            child.wait_cpu_time();
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut k = 1u64;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(every);
            sampler.mark_interval_end(start + k * every.as_nanos() as u64);
            k += 1;
            chunks.push(sampler.take_stacks());
        }
    });
    let mut profile = sampler.finish().expect("finish");
    chunks.push(std::mem::take(&mut profile.stacks));
    (chunks, profile)
}

#[test]
fn per_interval_cpu_weights_add_up_to_the_samples_taken() {
    let mut child = Fixture::spawn("burn", 1500, 2);
    let sampler = start_sampler(child.pid(), &SamplerOptions::default());
    let (chunks, profile) = record_intervals(&mut child, sampler, Duration::from_millis(200));
    let intervals: Vec<_> = chunks.iter().flat_map(|c| &c.intervals).collect();
    let weights: u64 = intervals
        .iter()
        .flat_map(|i| &i.weights[Kind::Cpu])
        .map(|w| w.weight)
        .sum();
    assert!(profile.samples > 100, "{profile:?}");
    assert_eq!(
        weights, profile.samples,
        "per-interval weights against the sampler's count of samples taken"
    );
    let distinct: std::collections::BTreeSet<u32> = intervals.iter().map(|i| i.index).collect();
    assert!(
        distinct.len() >= 3,
        "a 1.5 s run in 200 ms intervals has samples in {} intervals",
        distinct.len()
    );
    for i in &intervals {
        assert!(i.t0_ns <= i.t1_ns, "{i:?}");
    }
    // Every stack and frame an interval uses was handed out in this chunk or before.
    let mut stacks = std::collections::HashSet::new();
    let mut frames = std::collections::HashSet::new();
    for c in &chunks {
        frames.extend(c.frames.iter().map(|f| f.0));
        for s in &c.stacks {
            assert!(frames.contains(&s.frame), "{s:?}");
            assert!(s.parent.is_none_or(|p| stacks.contains(&p)), "{s:?}");
            stacks.insert(s.id);
        }
        for i in &c.intervals {
            for w in i.weights[Kind::Cpu].iter().chain(&i.weights[Kind::OffCpu]) {
                assert!(stacks.contains(&w.stack), "{w:?}");
            }
        }
    }
}

#[test]
fn per_interval_off_cpu_time_adds_up_to_the_time_blocked() {
    let mut child = Fixture::spawn("sleep-loop", 800, 0);
    let sampler = start_sampler(child.pid(), &SamplerOptions::default());
    require_offcpu_stacks(&sampler);
    let (chunks, profile) = record_intervals(&mut child, sampler, Duration::from_millis(150));
    let ns: u64 = chunks
        .iter()
        .flat_map(|c| &c.intervals)
        .flat_map(|i| &i.weights[Kind::OffCpu])
        .map(|w| w.weight)
        .sum();
    assert!(profile.blocked > Duration::from_millis(100), "{profile:?}");
    // The same blocked intervals, split at interval ends without rounding.
    assert_eq!(u128::from(ns), profile.blocked.as_nanos());
}
