use benchtop_profile::Kind;
use std::time::{Duration, Instant};

use benchtop_profilers::{ProfilerError, SampleEvent, Sampler, SamplerOptions};

use crate::fixture::{BURN_FN, COMM, Fixture, start_sampler, weight_containing};

#[test]
fn sampling_a_burning_child_finds_its_function_at_the_set_rate() {
    let mut child = Fixture::spawn("burn", 1000, 2);
    let sampler = start_sampler(child.pid(), &SamplerOptions::default());
    child.go();
    let cpu = child.wait_cpu_time();
    let finish_started = Instant::now();
    let profile = sampler.finish().expect("finish");
    let finish_time = finish_started.elapsed();
    let folded = profile.profiles[Kind::Cpu].to_folded();

    assert!(folded.contains(BURN_FN), "no {BURN_FN} frame in:\n{folded}");
    for line in folded.lines() {
        assert!(
            line.starts_with(&format!("{COMM};")),
            "stack not rooted at the process name: {line}"
        );
    }
    let expected = cpu.as_secs_f64() * profile.frequency_hz as f64;
    let ratio = profile.samples as f64 / expected;
    assert!(
        (0.5..=1.5).contains(&ratio),
        "{} samples for {cpu:?} of CPU at {} Hz: ratio {ratio:.2}",
        profile.samples,
        profile.frequency_hz
    );
    assert_eq!(profile.profiles[Kind::Cpu].total_weight(), profile.samples);
    let burning = weight_containing(&folded, BURN_FN);
    assert!(
        burning as f64 >= 0.8 * profile.samples as f64,
        "only {burning} of {} samples in {BURN_FN}:\n{folded}",
        profile.samples
    );
    eprintln!(
        "{} samples ({ratio:.2} of cpu time x frequency), lost {}, finish {finish_time:?}, \
         final batch {:?}, all batches {:?}, warnings {:?}",
        profile.samples,
        profile.lost,
        profile.final_batch_time,
        profile.symbolize_time,
        profile.warnings
    );
}

#[test]
fn a_child_that_exits_before_finish_still_symbolizes() {
    let mut child = Fixture::spawn("burn", 300, 1);
    // No batch runs while the child lives: everything is symbolized after its exit.
    let mut opts = SamplerOptions::default();
    opts.batch_interval = Duration::from_secs(3600);
    let sampler = start_sampler(child.pid(), &opts);
    child.go();
    let cpu = child.wait_cpu_time();
    assert!(
        !std::path::Path::new(&format!("/proc/{}", child.pid())).exists(),
        "the child should be gone"
    );
    assert_eq!(sampler.stats().batches, 0);
    let profile = sampler.finish().expect("finish");
    let folded = profile.profiles[Kind::Cpu].to_folded();
    let burning = weight_containing(&folded, BURN_FN);
    // The burn lasts a wall-clock time: on a loaded machine the child gets less of a CPU,
    // and the samples follow the CPU time it had, not the 300 ms.
    let expected = cpu.as_secs_f64() * opts.frequency_hz as f64;
    assert!(
        profile.samples >= 10
            && profile.samples as f64 >= 0.5 * expected
            && burning as f64 >= 0.8 * profile.samples as f64,
        "{burning} of {} samples ({expected:.0} expected for {cpu:?} of CPU) in {BURN_FN} \
         after the child exited:\n{folded}",
        profile.samples
    );
    let unknown = weight_containing(&folded, "[unknown]");
    assert!(
        (unknown as f64) < 0.05 * profile.samples as f64,
        "{unknown} samples with unknown frames:\n{folded}"
    );
}

#[test]
fn per_thread_stacks_carry_the_thread_name_second() {
    let mut child = Fixture::spawn("burn", 300, 2);
    let mut opts = SamplerOptions::default();
    opts.per_thread = true;
    let sampler = start_sampler(child.pid(), &opts);
    child.go();
    child.wait_cpu_time();
    let folded = sampler.finish().expect("finish").profiles[Kind::Cpu].to_folded();
    for thread in ["burner-0", "burner-1"] {
        let prefix = format!("{COMM};{thread};");
        assert!(
            folded
                .lines()
                .any(|l| l.starts_with(&prefix) && l.contains(BURN_FN)),
            "no stack of {thread} under {prefix}:\n{folded}"
        );
    }
}

#[test]
fn kernel_frames_are_suffixed_when_permitted_and_explained_when_not() {
    let mut child = Fixture::spawn("syscalls", 400, 1);
    let sampler = start_sampler(child.pid(), &SamplerOptions::default());
    let kernel = sampler.kernel_frames();
    let warnings = sampler.warnings().to_vec();
    child.go();
    child.wait_cpu_time();
    let profile = sampler.finish().expect("finish");
    let folded = profile.profiles[Kind::Cpu].to_folded();
    assert!(
        folded.contains("profilers_fixture_syscalls"),
        "no syscall loop frame:\n{folded}"
    );
    if kernel {
        let in_kernel = weight_containing(&folded, "_[k]");
        assert!(
            in_kernel as f64 > 0.3 * profile.samples as f64,
            "{in_kernel} of {} samples with kernel frames:\n{folded}",
            profile.samples
        );
        // Kernel frames sit below (after) the user frames that entered the kernel.
        for line in folded.lines().filter(|l| l.contains("_[k]")) {
            let stack = line.rsplit_once(' ').map_or(line, |(s, _)| s);
            let first_k = stack.find("_[k]").unwrap_or(0);
            assert!(
                !stack[first_k..]
                    .split(';')
                    .skip(1)
                    .any(|f| !f.ends_with("_[k]")),
                "user frame below a kernel frame: {line}"
            );
        }
    } else {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("kernel frames excluded") && w.contains("perf_event_paranoid")),
            "kernel frames off without a reason: {warnings:?}"
        );
        assert!(!folded.contains("_[k]"));
    }
}

#[test]
fn starting_on_a_pid_that_does_not_exist_is_a_clear_error() {
    let mut gone = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let pid = gone.id();
    gone.wait().expect("wait for true");
    let err = Sampler::start(pid, &SamplerOptions::default()).unwrap_err();
    assert!(
        matches!(err, ProfilerError::ProcessNotFound { pid: p } if p == pid),
        "{err:?}"
    );
    assert!(err.to_string().contains(&pid.to_string()), "{err}");
}

/// Threads of this process named `name` (the kernel keeps 15 bytes of a name).
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("read /proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim_end() == name)
        .count()
}

#[test]
fn dropping_a_sampler_without_finish_stops_its_thread() {
    // A child that outlives the test: the drop must not wait for it.
    let mut child = Fixture::spawn("sleep-loop", 600_000, 1);
    // The sampler thread is named after its target, so other tests' samplers, running
    // in parallel in this process, do not count.
    let name = format!("sampler-{}", child.pid());
    assert_eq!(threads_named(&name), 0);
    let sampler = start_sampler(child.pid(), &SamplerOptions::default());
    child.go();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        threads_named(&name),
        1,
        "the sampler thread should be running"
    );
    // An ordering, not a time: the drop returns while its target still runs (a batch
    // under way may take seconds on a busy machine, and the drop waits for it).
    drop(sampler);
    assert!(child.is_running(), "the drop waited for its target to end");
    // Joined: the kernel drops the task right after the join returns.
    let deadline = Instant::now() + Duration::from_secs(2);
    while threads_named(&name) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        threads_named(&name),
        0,
        "the sampler thread outlived its drop"
    );
}

#[test]
fn live_stats_count_samples_and_batches_while_running() {
    let mut child = Fixture::spawn("burn", 5000, 1);
    let sampler = start_sampler(child.pid(), &SamplerOptions::default());
    child.go();
    // The first batch loads the binary's debug info: slow in an unoptimized test build,
    // and slower still on a loaded machine (the loop ends at the first batch).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut mid = sampler.stats();
    while mid.batches == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        mid = sampler.stats();
    }
    let profile = sampler.finish().expect("finish");
    drop(child);
    assert!(mid.samples > 0, "no samples counted while running: {mid:?}");
    assert!(mid.batches >= 1, "no batch ran while running: {mid:?}");
    assert!(mid.samples <= profile.samples);
    assert!(profile.profiles[Kind::Cpu].to_folded().contains(BURN_FN));
}

#[test]
fn auto_samples_cycles_where_the_machine_has_them_and_cpu_clock_elsewhere() {
    let mut child = Fixture::spawn("burn", 300, 1);
    let mut cycles_opts = SamplerOptions::default();
    cycles_opts.event = SampleEvent::Cycles;
    let has_cycles = match Sampler::start(child.pid(), &cycles_opts) {
        Ok(sampler) => {
            assert_eq!(sampler.event(), "cycles");
            true
        }
        Err(ProfilerError::EventUnavailable { event, .. }) => {
            assert_eq!(event, "cycles");
            false
        }
        Err(other) => panic!("cycles: unexpected error {other}"),
    };
    let auto = start_sampler(child.pid(), &SamplerOptions::default());
    assert_eq!(
        auto.event(),
        if has_cycles { "cycles" } else { "cpu-clock" }
    );
    child.go();
    let profile = auto.finish().expect("finish");
    assert_eq!(profile.event, auto_event_name(has_cycles));
    child.wait_cpu_time();
}

fn auto_event_name(has_cycles: bool) -> &'static str {
    if has_cycles { "cycles" } else { "cpu-clock" }
}

#[test]
fn a_snapshot_taken_during_the_run_holds_the_stacks_folded_so_far() {
    let mut child = Fixture::spawn("burn", 1500, 1);
    let sampler = start_sampler(child.pid(), &SamplerOptions::default());
    child.go();
    assert!(
        sampler.take_snapshot().is_none(),
        "none before one is asked for"
    );
    std::thread::sleep(Duration::from_millis(500));
    sampler.request_snapshot();
    // The batch under way when it was asked for, or the next one, takes it: once the
    // batch count has moved on from there it is there. No wall-clock bound: a batch
    // that meets the fixture's debug info takes seconds on a busy machine (5.8 s
    // measured with a CPU hog beside the suite).
    let asked = sampler.stats().batches;
    let snapshot = loop {
        let batches = sampler.stats().batches;
        if let Some(s) = sampler.take_snapshot() {
            break s;
        }
        assert!(
            batches <= asked + 1,
            "no snapshot after {} batches since asking",
            batches - asked
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(snapshot.batches > 0);
    let live = snapshot.profiles[Kind::Cpu].total_weight();
    assert!(
        weight_containing(&snapshot.profiles[Kind::Cpu].to_folded(), BURN_FN) > 0,
        "{}",
        snapshot.profiles[Kind::Cpu].to_folded()
    );
    assert!(sampler.take_snapshot().is_none(), "taken once");
    child.wait_cpu_time();
    let profile = sampler.finish().expect("finish");
    // A copy of part of the run: the whole profile holds at least as much.
    assert!(
        profile.profiles[Kind::Cpu].total_weight() >= live,
        "{live} > {}",
        profile.samples
    );
}
