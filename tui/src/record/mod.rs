//! The binary's edge of the conductor (`benchtop-record`): the command line's
//! [`RecordArgs`] become [`RecordOptions`] here, and a headless run gets its progress
//! line ([`progress`]) from the recording's typed events.

pub mod progress;

use anyhow::Result;
use benchtop_profilers::sampler::{SampleEvent, SamplerOptions};
use benchtop_profilers::{SymbolDetail, UnwindMode};
pub use benchtop_record::{
    DEFAULT_SESSIONS_DIR, Interrupts, RecordOptions, RecordOutcome, Target, child, live, record,
};
use benchtop_record::{Detail, LiveEvent, LiveLink};

use crate::cli::{PerfEvent, RecordArgs, Symbols, Unwind};
use progress::Progress;

/// Options with how to record taken from the command line (directory, duration,
/// interval, sampling); the caller names what to record (target, workload, program,
/// arguments, parameters) and adds the OTLP stream (`args.otlp.stream()`).
pub fn options_from(args: &RecordArgs) -> RecordOptions {
    RecordOptions {
        dir: args.record.clone(),
        duration: args.duration,
        interval: args.interval,
        sample_stacks: !args.profile.is_empty(),
        sampler: sampler_options(args),
        alloc_sample_bytes: Some(args.alloc_sample),
        count_tree: !args.polled_figures,
        labels: args.labels.iter().cloned().collect(),
        git: std::env::current_dir()
            .ok()
            .and_then(|dir| benchtop_record::git::checkout(&dir)),
        ..RecordOptions::default()
    }
}

/// The sampler's options from the command line's.
fn sampler_options(record: &RecordArgs) -> SamplerOptions {
    let mut opts = SamplerOptions::default();
    opts.kind = record.profile;
    opts.per_thread = record.per_thread;
    opts.frequency_hz = record.frequency;
    opts.event = match record.event {
        PerfEvent::Auto => SampleEvent::Auto,
        PerfEvent::CpuClock => SampleEvent::CpuClock,
        PerfEvent::Cycles => SampleEvent::Cycles,
    };
    opts.symbols = match record.symbols {
        Symbols::Inlined => SymbolDetail::Inlined,
        Symbols::Names => SymbolDetail::NamesOnly,
    };
    opts.debug_dirs = record.debug_dirs.clone();
    // A built-in worker keeps frame pointers and stays on them unless --unwind says
    // otherwise (`workload_options`); anything else is unwound per module.
    opts.unwind = match record.unwind {
        Some(Unwind::Fp) => UnwindMode::FramePointers,
        Some(Unwind::Dwarf) => UnwindMode::Dwarf,
        Some(Unwind::Auto) | None => UnwindMode::Auto,
    };
    opts.stack_size = record.stack_size;
    opts.offcpu_stack_every = record.offcpu_stack_every;
    opts.waker_stack_every = record.waker_stack_every;
    opts.mem_period = record.mem_period;
    opts.keep_samples = record.keep_samples;
    opts
}

/// The signals that interrupt a headless recording: Ctrl-C (SIGINT), SIGTERM, SIGHUP and
/// SIGQUIT (Ctrl-\\). Each is heard even when it was inherited ignored, as `cmd &` in a
/// script leaves SIGINT and SIGQUIT: a run stopped by one keeps its session.
pub const INTERRUPT_SIGNALS: [libc::c_int; 4] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// The interrupts of this process's headless recordings, heard from the first call on.
///
/// Each of [`INTERRUPT_SIGNALS`] raises the count (the recording running stops its worker
/// on the first and kills it on the second; a series ends at the run it interrupted); a
/// third takes the signal's default action and ends benchtop at once, whatever it was
/// doing, leaving the session as it was (it loads as crashed). The handlers are
/// installed once and shared by every recording of the process (a series, `ab`).
pub fn interrupts() -> Result<Interrupts> {
    static HEARD: std::sync::Mutex<Option<Interrupts>> = std::sync::Mutex::new(None);
    let mut heard = HEARD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(interrupts) = heard.as_ref() {
        return Ok(interrupts.clone());
    }
    let interrupts = Interrupts::new();
    let escalate = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in INTERRUPT_SIGNALS {
        // Registered first, so it runs first: a signal arriving once two were counted
        // takes the default action.
        signal_hook::flag::register_conditional_default(signal, escalate.clone())
            .map_err(|e| anyhow::anyhow!("cannot watch for signals: {e}"))?;
        let (count, escalate) = (interrupts.clone(), escalate.clone());
        // SAFETY: the action only does atomic operations, which are async-signal-safe.
        unsafe {
            signal_hook::low_level::register(signal, move || {
                if count.raise() >= 2 {
                    escalate.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            })
        }
        .map_err(|e| anyhow::anyhow!("cannot watch for signals: {e}"))?;
    }
    *heard = Some(interrupts.clone());
    Ok(interrupts)
}

/// Records `opts` headless, with a progress line on stderr unless `quiet`; SIGINT,
/// SIGTERM, SIGHUP and SIGQUIT stop it ([`interrupts`]).
pub fn headless(opts: &RecordOptions, quiet: bool) -> Result<RecordOutcome> {
    let progress = std::sync::Arc::new(Progress::new(&opts.workload, quiet));
    let mut opts = opts.clone();
    opts.interrupts = Some(interrupts()?);
    let line = progress.clone();
    opts.live = Some(LiveLink::new(Detail::Progress, move |event| match event {
        LiveEvent::Notice(notice) => line.message(&notice.to_string()),
        LiveEvent::Progress(figures) => line.update(&figures),
        _ => {}
    }));
    let outcome = record(&opts);
    progress.finish();
    Ok(outcome?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchtop_profile::kinds::{Kind, KindSet};

    #[test]
    fn the_command_lines_recording_arguments_become_the_conductors_options() {
        let args = RecordArgs {
            record: Some("/tmp/s".into()),
            duration: Some(std::time::Duration::from_secs(10)),
            frequency: 499,
            profile: KindSet::of(Kind::OffCpu),
            per_thread: true,
            event: PerfEvent::CpuClock,
            symbols: Symbols::Names,
            debug_dirs: vec!["/srv/debug".into()],
            ..RecordArgs::default()
        };
        let opts = options_from(&args);
        assert_eq!(opts.dir.as_deref(), Some(std::path::Path::new("/tmp/s")));
        assert_eq!(opts.duration, args.duration);
        assert_eq!(opts.interval, args.interval);
        assert!(opts.sample_stacks);
        assert_eq!(opts.sampler.frequency_hz, 499);
        assert_eq!(opts.sampler.kind, KindSet::of(Kind::OffCpu));
        assert!(opts.sampler.per_thread);
        assert_eq!(opts.sampler.event, SampleEvent::CpuClock);
        assert_eq!(opts.sampler.symbols, SymbolDetail::NamesOnly);
        assert_eq!(
            opts.sampler.debug_dirs,
            [std::path::PathBuf::from("/srv/debug")]
        );
        let none = options_from(&RecordArgs {
            profile: KindSet::NONE,
            ..RecordArgs::default()
        });
        assert!(!none.sample_stacks);
        // Nothing to record yet: the caller names the target and the worker.
        assert!(none.args.is_empty() && none.live.is_none());
    }
}
