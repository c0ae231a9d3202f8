//! The binary's edge of the conductor (`benchtop-record`): the command line's
//! [`RecordArgs`] become [`RecordOptions`] here, and a headless run gets its progress
//! line ([`progress`]) from the recording's typed events.

pub mod progress;

use anyhow::Result;
use benchtop_profilers::sampler::{SampleEvent, SamplerOptions};
use benchtop_profilers::{SymbolDetail, UnwindMode};
pub use benchtop_record::{
    DEFAULT_SESSIONS_DIR, RecordOptions, RecordOutcome, Target, child, interrupts, live, record,
};
use benchtop_record::{Detail, LiveEvent, LiveLink};

use crate::cli::{PerfEvent, RecordArgs, Symbols, Unwind};
use progress::Progress;

/// Options with how to record taken from the command line (directory, duration,
/// interval, sampling); the caller names what to record (target, workload, program,
/// arguments, parameters).
pub fn options_from(args: &RecordArgs) -> RecordOptions {
    RecordOptions {
        dir: args.record.clone(),
        duration: args.duration,
        interval: args.interval,
        sample_stacks: args.profile.kind().is_some(),
        sampler: sampler_options(args),
        ..RecordOptions::default()
    }
}

/// The sampler's options from the command line's.
fn sampler_options(record: &RecordArgs) -> SamplerOptions {
    let mut opts = SamplerOptions::default();
    opts.kind = record.profile.kind().unwrap_or_default();
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
    // A built-in worker keeps frame pointers and stays on them unless --unwind says
    // otherwise (`workload_options`); anything else is unwound per module.
    opts.unwind = match record.unwind {
        Some(Unwind::Fp) => UnwindMode::FramePointers,
        Some(Unwind::Dwarf) => UnwindMode::Dwarf,
        Some(Unwind::Auto) | None => UnwindMode::Auto,
    };
    opts.stack_size = record.stack_size;
    opts.offcpu_stack_every = record.offcpu_stack_every;
    opts
}

/// Records `opts` headless, with a progress line on stderr unless `quiet`.
pub fn headless(opts: &RecordOptions, quiet: bool) -> Result<RecordOutcome> {
    let progress = std::sync::Arc::new(Progress::new(&opts.workload, quiet));
    let mut opts = opts.clone();
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
    use crate::cli::Profile;

    #[test]
    fn the_command_lines_recording_arguments_become_the_conductors_options() {
        let args = RecordArgs {
            record: Some("/tmp/s".into()),
            duration: Some(std::time::Duration::from_secs(10)),
            frequency: 499,
            profile: Profile::Offcpu,
            per_thread: true,
            event: PerfEvent::CpuClock,
            symbols: Symbols::Names,
            ..RecordArgs::default()
        };
        let opts = options_from(&args);
        assert_eq!(opts.dir.as_deref(), Some(std::path::Path::new("/tmp/s")));
        assert_eq!(opts.duration, args.duration);
        assert_eq!(opts.interval, args.interval);
        assert!(opts.sample_stacks);
        assert_eq!(opts.sampler.frequency_hz, 499);
        assert_eq!(
            opts.sampler.kind,
            benchtop_profilers::sampler::ProfileKind::OffCpu
        );
        assert!(opts.sampler.per_thread);
        assert_eq!(opts.sampler.event, SampleEvent::CpuClock);
        assert_eq!(opts.sampler.symbols, SymbolDetail::NamesOnly);
        let none = options_from(&RecordArgs {
            profile: Profile::None,
            ..RecordArgs::default()
        });
        assert!(!none.sample_stacks);
        // Nothing to record yet: the caller names the target and the worker.
        assert!(none.args.is_empty() && none.live.is_none());
    }
}
