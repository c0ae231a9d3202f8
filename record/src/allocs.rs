//! A worker's sampled allocations (`alloc_samples`, report protocol version 2) as the run
//! goes on: symbolized as they arrive, live bytes per stack kept at the peak of the
//! worker's live bytes, and alloc.folded, live.folded and live-end.folded (with their
//! flamegraphs) written at the end.

use benchtop_profilers::allocations::{AllocProfile, AllocTrees};
use benchtop_protocol::{AllocSamples, LIVE_BYTES, Tick};
use benchtop_sessions::Kind;

use crate::RecordError;
use crate::driver::Run;
use crate::live::{Detail, LiveEvent};
use crate::notice::ReportIssue;

impl Run<'_> {
    /// One `alloc_samples` message, from report line `line`.
    pub(crate) fn on_alloc_samples(
        &mut self,
        message: AllocSamples,
        line: u64,
    ) -> Result<(), RecordError> {
        if let Err(why) = message.check() {
            return self.report_issue(ReportIssue::Line(format!("report line {line}: {why}")));
        }
        let pid = self.worker.pid();
        let (symbols, dirs) = (self.opts.sampler.symbols, &self.opts.sampler.debug_dirs);
        let streamed = self.opts.stream.is_some();
        let profile = self.allocs.get_or_insert_with(|| {
            // With the sampler's options: its symbolizer is shared.
            let mut profile = AllocProfile::with_debug_dirs(pid, symbols, dirs);
            if streamed {
                // The stream names the stacks on its own thread.
                profile.share_stacks();
            }
            profile
        });
        profile.set_rate(message.rate, message.dropped);
        let stacks = profile.add_stacks(message.stacks.iter().map(|s| (s.id, s.frames.as_slice())));
        for s in &message.samples {
            profile.sample(s.id, s.stack, s.bytes, s.freed);
        }
        for &id in &message.freed {
            profile.freed(id);
        }
        match stacks {
            Ok(()) => Ok(()),
            Err(why) => self.report_issue(ReportIssue::Line(format!("report line {line}: {why}"))),
        }
    }

    /// A tick: the sampled live bytes per stack are kept if its live bytes are the most
    /// so far.
    pub(crate) fn alloc_tick(&mut self, tick: &Tick) {
        if let Some(profile) = &mut self.allocs {
            profile.on_tick(tick.counters.get(LIVE_BYTES).copied(), tick.t_ns);
        }
    }

    /// A row ended the interval from `t0_ns` to `t1_ns`: the bytes allocated in it per
    /// stack (the samples that arrived since the last row) and the live bytes per stack
    /// now go to the stream.
    pub(crate) fn stream_allocs(&mut self, t0_ns: u64, t1_ns: u64) {
        let (Some(stream), Some(profile)) = (&self.opts.stream, &mut self.allocs) else {
            return;
        };
        if let Some(interval) = profile.take_interval(t0_ns, t1_ns) {
            stream.allocs(&interval);
        }
    }

    /// The allocation profiles so far, to the live view (with every row).
    pub(crate) fn publish_allocs(&mut self) {
        let (Some(live), Some(profile)) = (&self.opts.live, &mut self.allocs) else {
            return;
        };
        if live.detail() == Detail::Full {
            // While a stream names the stacks (it reads the program's symbols), this row
            // publishes nothing: a later one will, and the loop does not wait.
            if let Some(trees) = profile.trees_unless_busy() {
                live.send(LiveEvent::Allocations(Box::new(trees)));
            }
        }
    }

    /// alloc.folded, live.folded and live-end.folded with their flamegraphs, and
    /// `sampling.alloc`, when the worker sampled anything.
    pub(crate) fn write_allocs(&mut self, warnings: &mut Vec<String>) {
        if self.allocs.as_ref().is_none_or(AllocProfile::is_empty) {
            return;
        }
        // What came after the last row, and the live bytes at the end (live-end.folded),
        // to the stream.
        let end_ns = self.data.started_at.map_or(0, |s| {
            u64::try_from(s.elapsed().as_nanos()).unwrap_or(u64::MAX)
        });
        let last = self.data.last_t_ns;
        self.stream_allocs(last, end_ns.max(last + 1));
        let Some(mut profile) = self.allocs.take() else {
            return;
        };
        let AllocTrees {
            alloc,
            live,
            live_end,
        } = profile.trees();
        let workload = &self.opts.workload;
        for (kind, tree) in [
            (Kind::Alloc, &alloc),
            (Kind::Live, &live),
            (Kind::LiveEnd, &live_end),
        ] {
            let title = format!("{workload} — {}", kind.spec().flame_title);
            if let Err(e) = self.writer.write_stacks(kind, tree, &title) {
                warnings.push(format!("{}: {e}", kind.folded_file()));
            }
        }
        let info = profile.info();
        if info.dropped > 0 {
            warnings.push(format!(
                "the worker's allocator could not take {} allocation samples (its tables \
                 were full): the allocation profiles miss them",
                info.dropped
            ));
        }
        if info.unattributed > 0 {
            warnings.push(format!(
                "{} allocation samples named a stack the recorder did not keep: they are in \
                 no allocation profile",
                info.unattributed
            ));
        }
        self.writer.set_meta(|m| m.sampling.alloc = Some(info));
    }
}
