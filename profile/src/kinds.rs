//! The one table of profile kinds ([`KINDS`]): for each kind of stacks benchtop records,
//! its name, what a sample weighs and in which unit each file holds it, how it is
//! collected, its files, and which exports carry it. Every crate reads the table; a new
//! kind is one more [`Kind`] and one more entry, plus its collector and whatever view it
//! needs beyond the generic ones (docs/architecture.md, "Adding a profile kind").
//!
//! ```
//! use benchtop_profile::kinds::{Kind, KindSet, WeightUnit};
//!
//! assert_eq!(Kind::OffCpu.folded_file(), "offcpu.folded");
//! assert_eq!(Kind::OffCpu.spec().folded_unit, WeightUnit::Microseconds);
//! assert_eq!(Kind::OffCpu.spec().interval_unit, Some(WeightUnit::Nanoseconds));
//!
//! let set: KindSet = "cpu,offcpu".parse()?;
//! assert!(set.contains(Kind::Cpu) && set.contains(Kind::OffCpu) && !set.contains(Kind::Mem));
//! assert_eq!("all".parse::<KindSet>()?, KindSet::ALL);
//! # Ok::<(), benchtop_profile::kinds::UnknownKind>(())
//! ```

use std::fmt;
use std::str::FromStr;

/// A kind of profile: the key of [`KINDS`]. Its facts are in its [`KindSpec`]
/// ([`Kind::spec`]), never in a `match` of their own elsewhere.
///
/// Not `#[non_exhaustive]`: a match on kinds anywhere is meant to fail to compile when a
/// kind is added, so that its views and exports are decided, not defaulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// On-CPU samples.
    Cpu,
    /// Off-CPU (blocked) time.
    OffCpu,
    /// Blocked time joined to what ended it: each blocked stack followed by the thread
    /// and stack that woke it (the `sched:sched_waking` tracepoint).
    Waits,
    /// Where resident memory grew: sampled page faults weighted in bytes.
    Mem,
    /// Bytes allocated by a built-in worker, per allocation stack (sampled).
    Alloc,
    /// Bytes still live per allocation stack (sampled), at the run's peak of live bytes.
    Live,
    /// Bytes still live per allocation stack when the worker's run ended.
    LiveEnd,
}

/// What a weight counts, in one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WeightUnit {
    /// Samples taken.
    Samples,
    /// Microseconds.
    Microseconds,
    /// Nanoseconds.
    Nanoseconds,
    /// Bytes.
    Bytes,
}

impl WeightUnit {
    /// The unit as tables and titles print it: `samples`, `µs`, `ns`, `bytes`.
    pub fn label(self) -> &'static str {
        match self {
            WeightUnit::Samples => "samples",
            WeightUnit::Microseconds => "µs",
            WeightUnit::Nanoseconds => "ns",
            WeightUnit::Bytes => "bytes",
        }
    }

    /// How many of this unit make one of `to` (1000 for ns → µs), when the two measure the
    /// same thing; `None` between a count, a time and a size.
    pub fn per(self, to: WeightUnit) -> Option<u64> {
        use WeightUnit::*;
        match (self, to) {
            (a, b) if a == b => Some(1),
            (Nanoseconds, Microseconds) => Some(1_000),
            _ => None,
        }
    }
}

/// Who collects a kind's stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Collector {
    /// The perf-event sampler, on any program; the kind is named by `--profile`.
    Sampler,
    /// A built-in worker's sampling allocator, sent over the report protocol; it follows
    /// `--alloc-sample`, whatever `--profile` says.
    Worker,
}

/// The sample and period types of a kind in pprof and OTLP: (type, unit) pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleTypes {
    /// The sample type, e.g. (`samples`, `count`).
    pub sample: (&'static str, &'static str),
    /// The period type, e.g. (`cpu`, `nanoseconds`).
    pub period: (&'static str, &'static str),
}

/// Which exports carry a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exports {
    /// profile.pb.gz (pprof).
    pub pprof: bool,
    /// The Firefox Profiler's processed format.
    pub firefox: bool,
    /// speedscope's file format, one file per kind (`NAME.speedscope.json`).
    pub speedscope: bool,
    /// OTLP profiles, as a live run streams them and `otlp` replays a session.
    pub otlp: bool,
}

/// Everything benchtop knows about one kind of profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindSpec {
    /// The key.
    pub kind: Kind,
    /// The kind's name in files, `--profile` and OTLP profile ids: `cpu`, `offcpu`, ….
    pub name: &'static str,
    /// A short name for tables and titles: `on-CPU`, `off-CPU`, ….
    pub title: &'static str,
    /// Who collects it.
    pub collector: Collector,
    /// The unit of the weights in its folded file (`NAME.folded`).
    pub folded_unit: WeightUnit,
    /// The TUI has a flamegraph pane for it (`o` cycles through them).
    pub pane: bool,
    /// The title of its pane in the TUI, short: `on-CPU`, `resident growth`, `live`.
    pub pane_title: &'static str,
    /// What its flamegraph shows, after the workload's name in the SVG's title.
    pub flame_title: &'static str,
    /// What a weight of its folded file counts, as a heading says it: `samples`,
    /// `µs blocked`, `bytes`.
    pub weight_label: &'static str,
    /// The unit of its weights in stacks.jsonl's intervals, when it has weights there.
    pub interval_unit: Option<WeightUnit>,
    /// Its field in a stacks.jsonl interval line, when it has one.
    pub interval_field: Option<&'static str>,
    /// A memory profile: `show` and `compare` list it under memory.
    pub memory: bool,
    /// Its sample and period types in pprof and OTLP.
    pub sample_types: SampleTypes,
    /// Which exports carry it today.
    pub exports: Exports,
    /// The folded file in a session directory.
    pub folded_file: &'static str,
    /// The flamegraph SVG in a session directory.
    pub svg_file: &'static str,
}

/// The profile kinds, in the order `show`, `compare` and the TUI list them.
pub const KINDS: [KindSpec; 7] = [
    KindSpec {
        kind: Kind::Cpu,
        name: "cpu",
        title: "on-CPU",
        collector: Collector::Sampler,
        folded_unit: WeightUnit::Samples,
        pane: true,
        pane_title: "on-CPU",
        flame_title: "on-CPU",
        weight_label: "samples",
        interval_unit: Some(WeightUnit::Samples),
        interval_field: Some("cpu"),
        memory: false,
        sample_types: SampleTypes {
            sample: ("samples", "count"),
            period: ("cpu", "nanoseconds"),
        },
        exports: Exports {
            pprof: true,
            firefox: true,
            speedscope: true,
            otlp: true,
        },
        folded_file: "cpu.folded",
        svg_file: "cpu.svg",
    },
    KindSpec {
        kind: Kind::OffCpu,
        name: "offcpu",
        title: "off-CPU",
        collector: Collector::Sampler,
        folded_unit: WeightUnit::Microseconds,
        pane: true,
        pane_title: "off-CPU",
        flame_title: "off-CPU (time blocked)",
        weight_label: "µs blocked",
        interval_unit: Some(WeightUnit::Nanoseconds),
        interval_field: Some("offcpu"),
        memory: false,
        sample_types: SampleTypes {
            sample: ("off_cpu", "nanoseconds"),
            period: ("off_cpu", "nanoseconds"),
        },
        exports: Exports {
            pprof: true,
            firefox: true,
            speedscope: true,
            otlp: true,
        },
        folded_file: "offcpu.folded",
        svg_file: "offcpu.svg",
    },
    // Blocked time again, each stack continued by `— woken by —` and its waker's stack.
    // Not in `all`: it needs tracepoints (root, CAP_PERFMON or paranoid -1).
    KindSpec {
        kind: Kind::Waits,
        name: "waits",
        title: "waits (blocked, by waker)",
        collector: Collector::Sampler,
        folded_unit: WeightUnit::Microseconds,
        pane: true,
        pane_title: "waits",
        flame_title: "waits (time blocked, then what woke it)",
        weight_label: "µs blocked",
        interval_unit: Some(WeightUnit::Nanoseconds),
        interval_field: Some("waits"),
        memory: false,
        sample_types: SampleTypes {
            sample: ("wait", "nanoseconds"),
            period: ("wait", "nanoseconds"),
        },
        exports: Exports {
            pprof: true,
            firefox: false,
            speedscope: true,
            otlp: true,
        },
        folded_file: "waits.folded",
        svg_file: "waits.svg",
    },
    KindSpec {
        kind: Kind::Mem,
        name: "mem",
        title: "resident growth (page faults)",
        collector: Collector::Sampler,
        folded_unit: WeightUnit::Bytes,
        pane: true,
        pane_title: "resident growth",
        flame_title: "where resident memory grew (page faults)",
        weight_label: "bytes",
        interval_unit: Some(WeightUnit::Bytes),
        interval_field: Some("mem"),
        memory: true,
        sample_types: SampleTypes {
            sample: ("resident_growth", "bytes"),
            period: ("page_faults", "count"),
        },
        exports: Exports {
            pprof: false,
            firefox: false,
            speedscope: false,
            otlp: true,
        },
        folded_file: "mem.folded",
        svg_file: "mem.svg",
    },
    // A built-in worker's sampled allocations, as pprof's heap profiles name them.
    KindSpec {
        kind: Kind::Alloc,
        name: "alloc",
        title: "allocated",
        collector: Collector::Worker,
        folded_unit: WeightUnit::Bytes,
        pane: true,
        pane_title: "allocated",
        flame_title: "bytes allocated (sampled)",
        weight_label: "bytes",
        interval_unit: None,
        interval_field: None,
        memory: true,
        sample_types: SampleTypes {
            sample: ("alloc_space", "bytes"),
            period: ("space", "bytes"),
        },
        exports: Exports {
            pprof: false,
            firefox: false,
            speedscope: false,
            otlp: true,
        },
        folded_file: "alloc.folded",
        svg_file: "alloc.svg",
    },
    KindSpec {
        kind: Kind::Live,
        name: "live",
        title: "live at peak",
        collector: Collector::Worker,
        folded_unit: WeightUnit::Bytes,
        pane: true,
        pane_title: "live",
        flame_title: "bytes live at the peak (sampled)",
        weight_label: "bytes",
        interval_unit: None,
        interval_field: None,
        memory: true,
        sample_types: SampleTypes {
            sample: ("inuse_space", "bytes"),
            period: ("space", "bytes"),
        },
        exports: Exports {
            pprof: false,
            firefox: false,
            speedscope: false,
            otlp: true,
        },
        folded_file: "live.folded",
        svg_file: "live.svg",
    },
    // The end of the run's live bytes: a file of its own, streamed as `live`'s last
    // interval rather than as a kind of its own.
    KindSpec {
        kind: Kind::LiveEnd,
        name: "live-end",
        title: "live at end",
        collector: Collector::Worker,
        folded_unit: WeightUnit::Bytes,
        pane: false,
        pane_title: "live at end",
        flame_title: "bytes live at the end (sampled)",
        weight_label: "bytes",
        interval_unit: None,
        interval_field: None,
        memory: true,
        sample_types: SampleTypes {
            sample: ("inuse_space", "bytes"),
            period: ("space", "bytes"),
        },
        exports: Exports {
            pprof: false,
            firefox: false,
            speedscope: false,
            otlp: false,
        },
        folded_file: "live-end.folded",
        svg_file: "live-end.svg",
    },
];

impl Kind {
    /// Every kind, in the table's order.
    pub const ALL: [Kind; KINDS.len()] = {
        let mut all = [Kind::Cpu; KINDS.len()];
        let mut i = 0;
        while i < KINDS.len() {
            all[i] = KINDS[i].kind;
            i += 1;
        }
        all
    };

    /// The memory kinds, in the order `show` and `compare` list them.
    pub const MEMORY: [Kind; 4] = [Kind::Mem, Kind::Alloc, Kind::Live, Kind::LiveEnd];

    /// The kind's entry in [`KINDS`].
    pub fn spec(self) -> &'static KindSpec {
        &KINDS[self as usize]
    }

    /// The kind named `name` (`cpu`, `offcpu`, …).
    pub fn from_name(name: &str) -> Option<Kind> {
        KINDS.iter().find(|k| k.name == name).map(|k| k.kind)
    }

    /// The name of the kind in file names: `cpu`, `offcpu`, `mem`, `alloc`, `live`,
    /// `live-end`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The folded file in the session directory.
    pub fn folded_file(self) -> &'static str {
        self.spec().folded_file
    }

    /// The flamegraph SVG in the session directory.
    pub fn svg_file(self) -> &'static str {
        self.spec().svg_file
    }

    /// What the weights of its folded file count: `samples`, `µs` or `bytes`.
    pub fn count_name(self) -> &'static str {
        self.spec().folded_unit.label()
    }

    /// A short name for tables and titles: `on-CPU`, `off-CPU`, `resident growth (page
    /// faults)`, `allocated`, `live at peak`, `live at end`.
    pub fn title(self) -> &'static str {
        self.spec().title
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of kinds: what `--profile` asks the sampler for (`cpu,offcpu,mem`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct KindSet(u32);

impl KindSet {
    /// No kind.
    pub const NONE: KindSet = KindSet(0);
    /// `all`: the sampled kinds that need nothing beyond what on- and off-CPU need
    /// (cpu, offcpu, mem).
    pub const ALL: KindSet = KindSet::NONE
        .with(Kind::Cpu)
        .with(Kind::OffCpu)
        .with(Kind::Mem);
    /// `both`, the default: on- and off-CPU.
    pub const BOTH: KindSet = KindSet::NONE.with(Kind::Cpu).with(Kind::OffCpu);

    /// The set of one kind.
    pub const fn of(kind: Kind) -> KindSet {
        KindSet::NONE.with(kind)
    }

    /// This set with `kind` in it.
    pub const fn with(self, kind: Kind) -> KindSet {
        KindSet(self.0 | 1 << kind as u32)
    }

    /// This set without `kind`.
    pub const fn without(self, kind: Kind) -> KindSet {
        KindSet(self.0 & !(1 << kind as u32))
    }

    /// Whether `kind` is in the set.
    pub const fn contains(self, kind: Kind) -> bool {
        self.0 & (1 << kind as u32) != 0
    }

    /// How many kinds the set holds.
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set is empty (`--profile none`).
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The kinds in the set, in the table's order.
    pub fn iter(self) -> impl Iterator<Item = Kind> {
        Kind::ALL.into_iter().filter(move |&k| self.contains(k))
    }

    /// The set as `--profile` spells it: an alias where one fits (`both`, `all`,
    /// `none`), else the kinds' names joined by commas.
    pub fn name(self) -> String {
        match self {
            s if s == KindSet::BOTH => "both".into(),
            s if s == KindSet::ALL => "all".into(),
            s if s.is_empty() => "none".into(),
            s => s.iter().map(Kind::name).collect::<Vec<_>>().join(","),
        }
    }
}

/// A word of `--profile` that names no sampled kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{word:?} is not a profile kind; use a comma-separated set of {}, or both, all, none",
    sampled_names()
)]
pub struct UnknownKind {
    /// The word.
    pub word: String,
}

fn sampled_names() -> String {
    KINDS
        .iter()
        .filter(|k| k.collector == Collector::Sampler)
        .map(|k| k.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for KindSet {
    type Err = UnknownKind;

    /// A comma-separated set of sampled kinds' names, with `both` (cpu, offcpu), `all`
    /// (cpu, offcpu, mem) and `none` as aliases.
    fn from_str(s: &str) -> Result<KindSet, UnknownKind> {
        let mut set = KindSet::NONE;
        for word in s.split(',').map(str::trim) {
            set = match word {
                "both" => KindSet(set.0 | KindSet::BOTH.0),
                "all" => KindSet(set.0 | KindSet::ALL.0),
                "none" => set,
                w => match Kind::from_name(w) {
                    Some(k) if k.spec().collector == Collector::Sampler => set.with(k),
                    _ => return Err(UnknownKind { word: w.into() }),
                },
            };
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_its_own_entry_of_the_table() {
        for (i, spec) in KINDS.iter().enumerate() {
            assert_eq!(spec.kind as usize, i, "{} out of place", spec.name);
            assert_eq!(spec.kind.spec(), spec);
            assert_eq!(Kind::from_name(spec.name), Some(spec.kind));
            assert_eq!(spec.folded_file, format!("{}.folded", spec.name));
            assert_eq!(spec.svg_file, format!("{}.svg", spec.name));
        }
        assert_eq!(Kind::ALL.len(), KINDS.len());
    }

    #[test]
    fn off_cpu_files_say_their_own_units() {
        let spec = Kind::OffCpu.spec();
        assert_eq!(spec.folded_unit, WeightUnit::Microseconds);
        assert_eq!(spec.interval_unit, Some(WeightUnit::Nanoseconds));
        assert_eq!(
            spec.interval_unit.and_then(|u| u.per(spec.folded_unit)),
            Some(1_000)
        );
        assert_eq!(Kind::OffCpu.count_name(), "µs");
        assert_eq!(WeightUnit::Samples.per(WeightUnit::Bytes), None);
    }

    #[test]
    fn profile_sets_parse_from_names_and_aliases() {
        let p = |s: &str| s.parse::<KindSet>();
        assert_eq!(p("cpu"), Ok(KindSet::of(Kind::Cpu)));
        assert_eq!(p("both"), Ok(KindSet::BOTH));
        assert_eq!(p("cpu,offcpu"), Ok(KindSet::BOTH));
        assert_eq!(p("all"), Ok(KindSet::ALL));
        assert_eq!(p("offcpu, mem,cpu"), Ok(KindSet::ALL));
        assert_eq!(p("none"), Ok(KindSet::NONE));
        assert!(p("alloc").is_err(), "worker kinds are not sampled");
        // Waits need tracepoints: named, never part of an alias.
        let waits = p("cpu,waits").expect("waits is sampled");
        assert!(waits.contains(Kind::Waits) && !KindSet::ALL.contains(Kind::Waits));
        assert_eq!(waits.without(Kind::Waits), KindSet::of(Kind::Cpu));
        assert_eq!(waits.name(), "cpu,waits");
        let err = p("cpu,gpu").expect_err("gpu is no kind");
        assert!(err.to_string().contains("\"gpu\""), "{err}");
        assert!(err.to_string().contains("cpu, offcpu, waits, mem"), "{err}");
    }

    #[test]
    fn profile_sets_name_themselves_as_the_command_line_does() {
        for s in ["cpu", "offcpu", "both", "mem", "all", "none", "cpu,mem"] {
            let set: KindSet = s.parse().expect("a set");
            assert_eq!(set.name(), s);
            assert_eq!(set.name().parse::<KindSet>(), Ok(set));
        }
        assert_eq!(
            KindSet::ALL.iter().collect::<Vec<_>>(),
            [Kind::Cpu, Kind::OffCpu, Kind::Mem]
        );
    }
}
