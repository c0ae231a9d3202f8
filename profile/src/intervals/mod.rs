//! Stacks over time (schema 2): `stacks.jsonl`, one stack table (frames and stacks, each
//! once) and the weights of every report interval per (interval, thread, stack), appended
//! while the run goes on.
//!
//! The file is JSON lines, each an object with one kind of content, in the order the
//! recorder learns things, so that every id a line uses was defined by an earlier line:
//!
//! ```text
//! {"format":1}
//! {"frames":[[0,"ring"],[7,"main"],[9,"ring::hop"]]}
//! {"stacks":[[0,null,0],[1,0,7],[2,1,9]]}
//! {"threads":[[4242,"bt-ring"]]}
//! {"interval":0,"t0_ns":0,"t1_ns":1000000000,"cpu":[[4242,2,917]],"offcpu":[[4242,1,5400]]}
//! ```
//!
//! A session recorded with `--keep-samples` also has lines of single on-CPU samples, each
//! its time (ns from the run's start), thread and stack, in time order within a line:
//!
//! ```text
//! {"samples":[[1000417,4242,2],[2001733,4242,2]]}
//! ```
//!
//! Their counts are also in the intervals' `cpu` weights, which stay the profile every
//! reader uses; the samples only place each one at its own time (see [`KeptSample`]).
//!
//! A session recorded with waits (`--profile waits`) also has lines of its long waits,
//! each blocked interval of at least [`LONG_WAIT_NS`] on its own: its start and end (ns
//! from the run's start), its thread and its waits stack (the blocked stack, `— woken
//! by —`, the waker's process, thread and stack), so that an export can mark each one
//! with the thread that woke it:
//!
//! ```text
//! {"long_waits":[[1000417,31002733,4242,9],[31100000,41200000,4242,12]]}
//! ```
//!
//! A stack is its parent stack (`null` at the root) plus one frame, so a stack of depth
//! *d* costs one entry once its prefix exists. `cpu` weights are samples, `offcpu`
//! weights nanoseconds blocked (a blocked interval spanning report intervals is split in
//! proportion to the time in each), `mem` weights bytes of sampled page faults (memory
//! profiles only). One interval may have several lines (the sampler
//! hands its weights out in batches): their weights add up. Times are nanoseconds from
//! the run's start on `CLOCK_MONOTONIC` (see docs/session-format.md for the clock).
//!
//! ```
//! use benchtop_profile::intervals::{IntervalStacks, IntervalWeights, StackEntry, StacksChunk, Weight};
//! use benchtop_profile::kinds::Kind;
//! use benchtop_profile::limits::LoadOptions;
//!
//! let mut chunk = StacksChunk::default();
//! chunk.frames = vec![(0, "main".into()), (1, "hot".into())];
//! chunk.stacks = vec![StackEntry { id: 0, parent: None, frame: 0 }, StackEntry { id: 1, parent: Some(0), frame: 1 }];
//! chunk.intervals.push(IntervalWeights {
//!     index: 0,
//!     t0_ns: 0,
//!     t1_ns: 1_000_000_000,
//!     weights: [(Kind::Cpu, vec![Weight { tid: 1, stack: 1, weight: 3 }])].into_iter().collect(),
//! });
//! let mut bytes = StacksChunk::header();
//! chunk.write_jsonl(&mut bytes);
//! let stacks = IntervalStacks::parse(&bytes, "stacks.jsonl".as_ref(), &LoadOptions::default())?;
//! let tree = stacks.tree_in(Kind::Cpu, 0, u64::MAX);
//! assert_eq!(tree.total_weight(), 3);
//! # Ok::<(), benchtop_profile::ProfileError>(())
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::ProfileError;
use crate::by_kind::ByKind;
use crate::kinds::Kind;
use crate::limits::{FileKind, LoadOptions, read_bounded};
use crate::lines::FrameLines;
use crate::stacks::StackTree;

mod line;
use line::{Line, push_line};

/// The file of per-interval stacks in a session directory.
pub const STACKS_FILE: &str = "stacks.jsonl";
/// The version of stacks.jsonl's line format this build writes and reads.
pub const STACKS_FORMAT: u32 = 1;

/// The most samples a session keeps with their own times (`--keep-samples`): 20 million,
/// an hour and a half at 999 Hz on two busy CPUs, about 500 MB of stacks.jsonl and 320 MB
/// loaded. The recorder keeps no more (later samples count in their intervals' weights
/// only, and the session says so) and a reader drops any more with a warning.
pub const MAX_KEPT_SAMPLES: u64 = 20_000_000;

/// A blocked interval at least this long (1 ms) is a long wait, kept on its own in a
/// session with waits (see [`LongWait`]).
pub const LONG_WAIT_NS: u64 = 1_000_000;

/// The most long waits a session keeps: a million, 17 minutes of a thousand a second,
/// about 40 MB of stacks.jsonl and 24 MB loaded. The recorder keeps no more (later ones
/// weigh in their intervals only, and the session says so) and a reader drops any more
/// with a warning.
pub const MAX_LONG_WAITS: u64 = 1_000_000;

/// One blocked interval of at least [`LONG_WAIT_NS`], kept with its times and its waits
/// stack (a session with waits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongWait {
    /// When its thread was switched out, ns from the run's start (0 before it).
    pub t0_ns: u64,
    /// When its thread was switched back in, ns from the run's start.
    pub t1_ns: u64,
    /// The thread that waited (its kernel tid).
    pub tid: u32,
    /// Its waits stack's id: the blocked stack, then `— woken by —` and the waker's
    /// process, thread and stack, or `[woken: not seen]` (in a loaded
    /// [`IntervalStacks`], its index in the table).
    pub stack: u32,
}

/// One on-CPU sample kept with its own time (`--keep-samples`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptSample {
    /// When it was taken, ns from the run's start (0 for a sample taken before it).
    pub t_ns: u64,
    /// The thread (its kernel tid).
    pub tid: u32,
    /// The stack's id (in a loaded [`IntervalStacks`], its index in the table).
    pub stack: u32,
}

/// One stack of the table: `parent` plus `frame` (ids of earlier lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackEntry {
    /// The stack's id.
    pub id: u32,
    /// The stack without its last frame; `None` for a one-frame stack.
    pub parent: Option<u32>,
    /// The stack's last (innermost) frame.
    pub frame: u32,
}

/// A weight of one thread and stack in one interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weight {
    /// The thread (its kernel tid).
    pub tid: u32,
    /// The stack's id.
    pub stack: u32,
    /// Samples (on-CPU) or nanoseconds blocked (off-CPU).
    pub weight: u64,
}

/// The weights of one report interval.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IntervalWeights {
    /// The interval's number: 0 for the first report interval of the run.
    pub index: u32,
    /// Where it begins, ns from the run's start.
    pub t0_ns: u64,
    /// Where it ends, ns from the run's start.
    pub t1_ns: u64,
    /// The weights of each kind, in the kind's unit in stacks.jsonl (the table's
    /// `interval_unit`); empty for a kind without weights per interval.
    pub weights: ByKind<Vec<Weight>>,
}

impl IntervalWeights {
    /// Weights held, over every kind.
    pub fn len(&self) -> usize {
        self.weights.values().map(Vec::len).sum()
    }

    /// Whether no kind has a weight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// On-CPU samples on one source line of one frame, added up over the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineEntry {
    /// The frame's id.
    pub frame: u32,
    /// The file's id (a `files` line).
    pub file: u32,
    /// The line, from 1.
    pub line: u32,
    /// Samples.
    pub weight: u64,
}

/// What a sampler learnt since it was last asked, appended to stacks.jsonl as it is:
/// new frames, stacks and threads, then interval weights that use them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StacksChunk {
    /// New frames: (id, name).
    pub frames: Vec<(u32, String)>,
    /// New stacks.
    pub stacks: Vec<StackEntry>,
    /// New threads: (tid, name).
    pub threads: Vec<(u32, String)>,
    /// Interval weights.
    pub intervals: Vec<IntervalWeights>,
    /// New source files: (id, path).
    pub files: Vec<(u32, String)>,
    /// Samples per frame and source line since the last chunk.
    pub lines: Vec<LineEntry>,
    /// Samples kept with their own times (`--keep-samples`), in time order.
    pub samples: Vec<KeptSample>,
    /// Long waits (a session with waits), in the order they ended.
    pub long_waits: Vec<LongWait>,
}

impl StacksChunk {
    /// The first line of the file.
    pub fn header() -> Vec<u8> {
        let mut out = Vec::new();
        push_line(
            &mut out,
            &Line {
                format: Some(STACKS_FORMAT),
                ..Line::default()
            },
        );
        out
    }

    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
            && self.stacks.is_empty()
            && self.threads.is_empty()
            && self.intervals.is_empty()
            && self.files.is_empty()
            && self.lines.is_empty()
            && self.samples.is_empty()
            && self.long_waits.is_empty()
    }

    /// Adds `other`'s content after this chunk's.
    pub fn extend(&mut self, other: StacksChunk) {
        self.frames.extend(other.frames);
        self.stacks.extend(other.stacks);
        self.threads.extend(other.threads);
        self.intervals.extend(other.intervals);
        self.files.extend(other.files);
        self.lines.extend(other.lines);
        self.samples.extend(other.samples);
        self.long_waits.extend(other.long_waits);
    }

    /// Appends the chunk's lines to `out`: frames, stacks, threads, files, one line per
    /// interval, source lines, then the kept samples and the long waits (a line per
    /// 10,000).
    pub fn write_jsonl(&self, out: &mut Vec<u8>) {
        if !self.frames.is_empty() {
            push_line(
                out,
                &Line {
                    frames: Some(self.frames.clone()),
                    ..Line::default()
                },
            );
        }
        if !self.stacks.is_empty() {
            let stacks = self
                .stacks
                .iter()
                .map(|s| (s.id, s.parent, s.frame))
                .collect();
            push_line(
                out,
                &Line {
                    stacks: Some(stacks),
                    ..Line::default()
                },
            );
        }
        if !self.threads.is_empty() {
            push_line(
                out,
                &Line {
                    threads: Some(self.threads.clone()),
                    ..Line::default()
                },
            );
        }
        if !self.files.is_empty() {
            push_line(
                out,
                &Line {
                    files: Some(self.files.clone()),
                    ..Line::default()
                },
            );
        }
        let rows = |w: &[Weight]| {
            (!w.is_empty()).then(|| w.iter().map(|w| (w.tid, w.stack, w.weight)).collect())
        };
        for i in &self.intervals {
            push_line(
                out,
                &Line {
                    interval: Some(i.index),
                    t0_ns: Some(i.t0_ns),
                    t1_ns: Some(i.t1_ns),
                    weights: i.weights.map_ref(|_, w| rows(w.as_slice())),
                    ..Line::default()
                },
            );
        }
        if !self.lines.is_empty() {
            let lines = self
                .lines
                .iter()
                .map(|l| (l.frame, l.file, l.line, l.weight))
                .collect();
            push_line(
                out,
                &Line {
                    lines: Some(lines),
                    ..Line::default()
                },
            );
        }
        for samples in self.samples.chunks(10_000) {
            push_line(
                out,
                &Line {
                    samples: Some(samples.iter().map(|s| (s.t_ns, s.tid, s.stack)).collect()),
                    ..Line::default()
                },
            );
        }
        for waits in self.long_waits.chunks(10_000) {
            let waits = waits.iter().map(|w| (w.t0_ns, w.t1_ns, w.tid, w.stack));
            push_line(
                out,
                &Line {
                    long_waits: Some(waits.collect()),
                    ..Line::default()
                },
            );
        }
    }
}

/// One interval as loaded: its span and its weights, (tid, stack, weight) with stacks as
/// indices of [`IntervalStacks`]' table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedInterval {
    /// Where it begins, ns from the run's start.
    pub t0_ns: u64,
    /// Where it ends, ns from the run's start.
    pub t1_ns: u64,
    /// The (tid, stack, weight) rows of each kind, in the kind's unit in stacks.jsonl;
    /// empty for a kind without weights per interval.
    pub weights: ByKind<Vec<(u32, u32, u64)>>,
}

impl LoadedInterval {
    /// Rows held, over every kind.
    pub fn len(&self) -> usize {
        self.weights.values().map(Vec::len).sum()
    }

    /// Whether no kind has a row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The middle of the interval, which decides whether a range holds it.
    pub fn mid_ns(&self) -> u64 {
        self.t0_ns + (self.t1_ns.saturating_sub(self.t0_ns)) / 2
    }
}

/// stacks.jsonl, loaded and checked: the stack table and the weights of each interval.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct IntervalStacks {
    /// Frame names, by dense index.
    frames: Vec<String>,
    /// Stacks by dense index: (parent index or `u32::MAX`, frame index).
    stacks: Vec<(u32, u32)>,
    /// Thread names by tid.
    pub threads: BTreeMap<u32, String>,
    /// The intervals by number.
    pub intervals: BTreeMap<u32, LoadedInterval>,
    /// Source lines of the on-CPU samples per frame name, the whole run's; empty for a
    /// session recorded without them.
    pub lines: FrameLines,
    /// The samples kept with their own times (`--keep-samples`; empty otherwise), in
    /// time order, stacks as indices of the table.
    pub samples: Vec<KeptSample>,
    /// The long waits (a session with waits; empty otherwise), in the order they began,
    /// stacks as indices of the table.
    pub long_waits: Vec<LongWait>,
    /// What loading read past: an incomplete last line, counts past their limits.
    pub warnings: Vec<String>,
}

impl IntervalStacks {
    /// Loads `dir`'s stacks.jsonl within `opts`' limits; `None` when the session has none
    /// (recorded before schema 2, or without sampling).
    pub fn load(dir: &Path, opts: &LoadOptions) -> Result<Option<Self>, ProfileError> {
        let path = dir.join(STACKS_FILE);
        let Some(bytes) = read_bounded(
            &path,
            FileKind::IntervalStacks,
            opts.file_limit(FileKind::IntervalStacks),
        )?
        else {
            return Ok(None);
        };
        Self::parse(&bytes, &path, opts).map(Some)
    }

    /// Parses and checks the bytes of a stacks.jsonl; `path` names it in errors. A line
    /// that does not parse is [`ProfileError::Corrupt`], unless it is an incomplete last
    /// line (a recorder killed while appending), which is dropped with a warning; so is a
    /// reference to a frame or stack no earlier line defined, an id defined twice, or a
    /// newer format. Frames and stacks past `opts.max_stacks`, intervals past
    /// `opts.max_intervals`, are dropped with a warning.
    pub fn parse(bytes: &[u8], path: &Path, opts: &LoadOptions) -> Result<Self, ProfileError> {
        let corrupt = |line: usize, reason: String| ProfileError::Corrupt {
            path: path.into(),
            reason: format!("line {line}: {reason}"),
        };
        let mut out = IntervalStacks::default();
        let mut frame_ids: HashMap<u32, u32> = HashMap::new();
        let mut stack_ids: HashMap<u32, u32> = HashMap::new();
        let mut file_ids: HashMap<u32, u32> = HashMap::new();
        let mut dropped_lines = 0u64;
        let mut dropped_frames = 0u64;
        let mut dropped_stacks = 0u64;
        let mut dropped_intervals = 0u64;
        let mut unknown_refs = 0u64;
        let mut dropped_samples = 0u64;
        let mut dropped_waits = 0u64;
        let ends_whole = bytes.last().is_none_or(|&b| b == b'\n');
        let mut lines = bytes.split(|&b| b == b'\n').peekable();
        let mut number = 0usize;
        while let Some(raw) = lines.next() {
            number += 1;
            let last = lines
                .peek()
                .is_none_or(|next| next.is_empty() && ends_whole);
            if raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let mut line: Line = match serde_json::from_slice(raw) {
                Ok(line) => line,
                Err(_) if last && !ends_whole => {
                    out.warnings.push(format!(
                        "{}: the incomplete last line {number} was dropped (the recorder was \
                         cut off while writing it)",
                        path.display()
                    ));
                    break;
                }
                Err(e) => return Err(corrupt(number, e.to_string())),
            };
            if let Some(format) = line.format
                && format > STACKS_FORMAT
            {
                return Err(corrupt(
                    number,
                    format!("format {format} is newer than this build reads ({STACKS_FORMAT})"),
                ));
            }
            for (id, name) in line.frames.unwrap_or_default() {
                if out.frames.len() >= opts.max_stacks {
                    dropped_frames += 1;
                    continue;
                }
                if frame_ids.insert(id, out.frames.len() as u32).is_some() {
                    return Err(corrupt(number, format!("frame {id} is defined twice")));
                }
                out.frames.push(name);
            }
            for (id, parent, frame) in line.stacks.unwrap_or_default() {
                if out.stacks.len() >= opts.max_stacks {
                    dropped_stacks += 1;
                    continue;
                }
                let parent = match parent {
                    None => Some(u32::MAX),
                    Some(p) => stack_ids.get(&p).copied(),
                };
                let (Some(parent), Some(&frame)) = (parent, frame_ids.get(&frame)) else {
                    // Past a limit its parent or frame was dropped: so is it.
                    if dropped_frames + dropped_stacks > 0 {
                        dropped_stacks += 1;
                        continue;
                    }
                    return Err(corrupt(
                        number,
                        format!("stack {id} uses a frame or parent stack not defined before it"),
                    ));
                };
                if stack_ids.insert(id, out.stacks.len() as u32).is_some() {
                    return Err(corrupt(number, format!("stack {id} is defined twice")));
                }
                out.stacks.push((parent, frame));
            }
            for (tid, name) in line.threads.unwrap_or_default() {
                if out.threads.len() < opts.max_stacks {
                    out.threads.insert(tid, name);
                }
            }
            for (id, path) in line.files.unwrap_or_default() {
                if file_ids.len() >= opts.max_stacks {
                    continue;
                }
                let interned = out.lines.intern_file(&path);
                if file_ids.insert(id, interned).is_some() {
                    return Err(corrupt(number, format!("file {id} is defined twice")));
                }
            }
            for (frame, file, l, weight) in line.lines.unwrap_or_default() {
                let (Some(&frame), Some(&file)) = (frame_ids.get(&frame), file_ids.get(&file))
                else {
                    dropped_lines += 1;
                    continue;
                };
                let name = out.frames.get(frame as usize).map_or("[?]", String::as_str);
                if !out.lines.add_id(name, file, l, weight) {
                    dropped_lines += 1;
                }
            }
            for (t_ns, tid, stack) in line.samples.unwrap_or_default() {
                if out.samples.len() as u64 >= MAX_KEPT_SAMPLES {
                    dropped_samples += 1;
                    continue;
                }
                match stack_ids.get(&stack) {
                    Some(&stack) => out.samples.push(KeptSample { t_ns, tid, stack }),
                    None if dropped_stacks > 0 => unknown_refs += 1,
                    None => {
                        return Err(corrupt(
                            number,
                            format!("a sample uses stack {stack}, not defined before it"),
                        ));
                    }
                }
            }
            for (t0_ns, t1_ns, tid, stack) in line.long_waits.unwrap_or_default() {
                if t1_ns < t0_ns {
                    return Err(corrupt(
                        number,
                        format!("a long wait ends ({t1_ns} ns) before it begins ({t0_ns} ns)"),
                    ));
                }
                if out.long_waits.len() as u64 >= MAX_LONG_WAITS {
                    dropped_waits += 1;
                    continue;
                }
                match stack_ids.get(&stack) {
                    Some(&stack) => out.long_waits.push(LongWait {
                        t0_ns,
                        t1_ns,
                        tid,
                        stack,
                    }),
                    None if dropped_stacks > 0 => unknown_refs += 1,
                    None => {
                        return Err(corrupt(
                            number,
                            format!("a long wait uses stack {stack}, not defined before it"),
                        ));
                    }
                }
            }
            let Some(index) = line.interval else {
                continue;
            };
            let (Some(t0_ns), Some(t1_ns)) = (line.t0_ns, line.t1_ns) else {
                return Err(corrupt(
                    number,
                    format!("interval {index} has no t0_ns/t1_ns"),
                ));
            };
            if t1_ns < t0_ns {
                return Err(corrupt(
                    number,
                    format!("interval {index} ends ({t1_ns} ns) before it begins ({t0_ns} ns)"),
                ));
            }
            if !out.intervals.contains_key(&index) && out.intervals.len() >= opts.max_intervals {
                dropped_intervals += 1;
                continue;
            }
            let entry = out
                .intervals
                .entry(index)
                .or_insert_with(|| LoadedInterval {
                    t0_ns,
                    t1_ns,
                    ..LoadedInterval::default()
                });
            entry.t0_ns = entry.t0_ns.min(t0_ns);
            entry.t1_ns = entry.t1_ns.max(t1_ns);
            for (kind, rows) in line.weights.iter_mut() {
                let into = &mut entry.weights[kind];
                for (tid, stack, weight) in rows.take().unwrap_or_default() {
                    match stack_ids.get(&stack) {
                        Some(&s) => into.push((tid, s, weight)),
                        None if dropped_stacks > 0 => unknown_refs += 1,
                        None => {
                            return Err(corrupt(
                                number,
                                format!(
                                    "interval {index} uses stack {stack}, not defined before it"
                                ),
                            ));
                        }
                    }
                }
            }
        }
        let name = path.display();
        if dropped_frames + dropped_stacks > 0 {
            out.warnings.push(format!(
                "{name}: {dropped_frames} frames and {dropped_stacks} stacks past the limit of \
                 {} were dropped, with {unknown_refs} weights that used them",
                opts.max_stacks
            ));
        }
        if dropped_lines > 0 {
            out.warnings.push(format!(
                "{name}: {dropped_lines} source-line weights were dropped (past the limit of \
                 {} lines, or of a frame or file not defined before them)",
                FrameLines::MAX_ENTRIES
            ));
        }
        if dropped_intervals > 0 {
            out.warnings.push(format!(
                "{name}: {dropped_intervals} intervals past the limit of {} were dropped",
                opts.max_intervals
            ));
        }
        if dropped_samples > 0 {
            out.warnings.push(format!(
                "{name}: {dropped_samples} kept samples past the limit of {MAX_KEPT_SAMPLES} \
                 were dropped (the intervals' weights still count them)"
            ));
        }
        if dropped_waits > 0 {
            out.warnings.push(format!(
                "{name}: {dropped_waits} long waits past the limit of {MAX_LONG_WAITS} were \
                 dropped (the intervals' weights still count them)"
            ));
        }
        // Lines are in time order each; the file's batches nearly so.
        out.samples.sort_by_key(|s| s.t_ns);
        out.long_waits.sort_by_key(|w| (w.t0_ns, w.tid));
        Ok(out)
    }

    /// The span the intervals cover, ns from the run's start: (first t0, last t1).
    pub fn span_ns(&self) -> Option<(u64, u64)> {
        let t0 = self.intervals.values().map(|i| i.t0_ns).min()?;
        let t1 = self.intervals.values().map(|i| i.t1_ns).max()?;
        Some((t0, t1))
    }

    /// Whether interval `i` belongs to the range `[from_ns, to_ns)`: its middle does.
    pub fn in_range(i: &LoadedInterval, from_ns: u64, to_ns: u64) -> bool {
        (from_ns..to_ns).contains(&i.mid_ns())
    }

    /// Stack `index`'s parent stack (`None` at a root) and its own frame's name; `None`
    /// for an index past the table.
    pub fn stack(&self, index: u32) -> Option<(Option<u32>, &str)> {
        let &(parent, frame) = self.stacks.get(index as usize)?;
        let name = self
            .frames
            .get(frame as usize)
            .map_or("[?]", String::as_str);
        // A parent at or past its child cannot be (parse checks it); a root either way.
        let parent = (parent != u32::MAX && parent < index).then_some(parent);
        Some((parent, name))
    }

    /// The frames of stack `index`, root first.
    pub fn stack_frames(&self, index: u32) -> Vec<&str> {
        let mut frames = Vec::new();
        let mut at = index;
        // A stack's parent was defined before it, so indices fall: the walk ends.
        while let Some(&(parent, frame)) = self.stacks.get(at as usize) {
            frames.push(
                self.frames
                    .get(frame as usize)
                    .map_or("[?]", String::as_str),
            );
            if parent == u32::MAX || parent >= at {
                break;
            }
            at = parent;
        }
        frames.reverse();
        frames
    }

    /// The stacks of `kind` in the intervals in `[from_ns, to_ns)`, in the unit of the
    /// kind's folded file (see [`IntervalStacks::tree`]).
    pub fn tree_in(&self, kind: Kind, from_ns: u64, to_ns: u64) -> StackTree {
        self.tree(kind, |i| Self::in_range(i, from_ns, to_ns))
    }

    /// The stacks of `kind` in the intervals `keep` selects, each stack's summed weight in
    /// the unit of the kind's folded file (the kind table says both units: off-CPU
    /// nanoseconds here become microseconds). Empty for a kind without weights per
    /// interval.
    pub fn tree(&self, kind: Kind, keep: impl Fn(&LoadedInterval) -> bool) -> StackTree {
        let spec = kind.spec();
        let divisor = spec
            .interval_unit
            .and_then(|u| u.per(spec.folded_unit))
            .unwrap_or(1);
        let mut by_stack: HashMap<u32, u64> = HashMap::new();
        for i in self.intervals.values().filter(|i| keep(i)) {
            for &(_, stack, w) in &i.weights[kind] {
                let e = by_stack.entry(stack).or_insert(0);
                *e = e.saturating_add(w);
            }
        }
        let mut stacks: Vec<(u32, u64)> = by_stack.into_iter().collect();
        stacks.sort_unstable();
        let mut tree = StackTree::new();
        for (stack, w) in stacks {
            let w = w / divisor;
            if w > 0 {
                tree.add_names(self.stack_frames(stack), w);
            }
        }
        tree
    }

    /// The sum of every interval's on-CPU samples.
    pub fn cpu_samples(&self) -> u64 {
        self.intervals
            .values()
            .flat_map(|i| &i.weights[Kind::Cpu])
            .fold(0u64, |a, &(_, _, w)| a.saturating_add(w))
    }

    /// Adds a chunk as a recorder hands it out while its run goes on (a live view's copy
    /// of what it appends to stacks.jsonl): new frames, stacks and threads, then interval
    /// weights, which add to those of an interval already held. `ids` maps the
    /// recorder's ids to the table's indices from one chunk to the next. What the limits
    /// of `opts` leave out (frames and stacks past `max_stacks`, intervals past
    /// `max_intervals`), an id defined twice, a weight of a stack never defined, an
    /// interval that ends before it begins: dropped, and counted in `ids`. Source lines
    /// and kept samples are not held (see [`IntervalStacks::append_lines`]).
    pub fn append(&mut self, chunk: &StacksChunk, ids: &mut ChunkIds, opts: &LoadOptions) {
        for (id, name) in &chunk.frames {
            if self.frames.len() >= opts.max_stacks || ids.frames.contains_key(id) {
                ids.dropped += 1;
                continue;
            }
            ids.frames.insert(*id, self.frames.len() as u32);
            self.frames.push(name.clone());
        }
        for s in &chunk.stacks {
            let parent = match s.parent {
                None => Some(u32::MAX),
                Some(p) => ids.stacks.get(&p).copied(),
            };
            let (Some(parent), Some(&frame)) = (parent, ids.frames.get(&s.frame)) else {
                ids.dropped += 1;
                continue;
            };
            if self.stacks.len() >= opts.max_stacks || ids.stacks.contains_key(&s.id) {
                ids.dropped += 1;
                continue;
            }
            ids.stacks.insert(s.id, self.stacks.len() as u32);
            self.stacks.push((parent, frame));
        }
        for (tid, name) in &chunk.threads {
            if self.threads.len() < opts.max_stacks || self.threads.contains_key(tid) {
                self.threads.insert(*tid, name.clone());
            }
        }
        for i in &chunk.intervals {
            if i.t1_ns < i.t0_ns
                || (!self.intervals.contains_key(&i.index)
                    && self.intervals.len() >= opts.max_intervals)
            {
                ids.dropped += 1;
                continue;
            }
            let entry = self
                .intervals
                .entry(i.index)
                .or_insert_with(|| LoadedInterval {
                    t0_ns: i.t0_ns,
                    t1_ns: i.t1_ns,
                    ..LoadedInterval::default()
                });
            entry.t0_ns = entry.t0_ns.min(i.t0_ns);
            entry.t1_ns = entry.t1_ns.max(i.t1_ns);
            for (kind, rows) in i.weights.iter() {
                let into = &mut entry.weights[kind];
                for w in rows {
                    match ids.stacks.get(&w.stack) {
                        Some(&stack) => into.push((w.tid, stack, w.weight)),
                        None => ids.dropped += 1,
                    }
                }
            }
        }
    }

    /// Adds a chunk's source lines to `into` (a live view's copy of the run's lines),
    /// after [`IntervalStacks::append`] took in its frames: the chunk's files are mapped
    /// through `ids` to `into`'s. Lines of a frame or file never defined, and files past
    /// `opts.max_stacks`, are dropped and counted in `ids`.
    pub fn append_lines(
        &self,
        chunk: &StacksChunk,
        ids: &mut ChunkIds,
        into: &mut FrameLines,
        opts: &LoadOptions,
    ) {
        for (id, path) in &chunk.files {
            if ids.files.len() >= opts.max_stacks || ids.files.contains_key(id) {
                ids.dropped += 1;
                continue;
            }
            ids.files.insert(*id, into.intern_file(path));
        }
        for l in &chunk.lines {
            let (Some(&frame), Some(&file)) = (ids.frames.get(&l.frame), ids.files.get(&l.file))
            else {
                ids.dropped += 1;
                continue;
            };
            let name = self
                .frames
                .get(frame as usize)
                .map_or("[?]", String::as_str);
            if !into.add_id(name, file, l.line, l.weight) {
                ids.dropped += 1;
            }
        }
    }

    /// Stacks in the table (a stack is a parent stack and a frame).
    pub fn stack_count(&self) -> usize {
        self.stacks.len()
    }

    /// Weights held over every interval (each 16 bytes).
    pub fn weights(&self) -> usize {
        self.intervals.values().map(LoadedInterval::len).sum()
    }

    /// Drops the oldest intervals until at most `max_intervals` and `max_weights` weights
    /// are held (the stack table stays); returns how many intervals went.
    pub fn drop_oldest(&mut self, max_intervals: usize, max_weights: usize) -> usize {
        let mut held = self.weights();
        let mut dropped = 0;
        while held > max_weights || self.intervals.len() > max_intervals {
            let Some((_, i)) = self.intervals.pop_first() else {
                break;
            };
            held -= i.len();
            dropped += 1;
        }
        dropped
    }
}

/// The ids of a recorder's chunks, mapped to the indices of the [`IntervalStacks`] they
/// are appended to ([`IntervalStacks::append`]).
#[derive(Debug, Clone, Default)]
pub struct ChunkIds {
    frames: IdMap,
    stacks: IdMap,
    files: IdMap,
    /// What was dropped: definitions past the limits or given twice, weights of stacks
    /// never defined, intervals past the limit or ending before they begin.
    pub dropped: u64,
}

impl ChunkIds {
    /// The table index of the recorder's stack `id`, once a chunk defined it.
    pub fn stack_index(&self, id: u32) -> Option<u32> {
        self.stacks.get(&id).copied()
    }
}

/// Ids to indices. A recorder hands its ids out in order from 0, so those are held in a
/// vector, looked up without hashing (a live screen maps thousands of new stacks a
/// second); ids out of that order (a file's, which may be hostile) go to a map. Either
/// way only ids inserted take room.
#[derive(Debug, Clone, Default)]
struct IdMap {
    /// The index of id `i`, for ids 0, 1, … inserted in that order.
    dense: Vec<u32>,
    other: HashMap<u32, u32>,
}

impl IdMap {
    fn get(&self, id: &u32) -> Option<&u32> {
        self.dense.get(*id as usize).or_else(|| self.other.get(id))
    }

    fn contains_key(&self, id: &u32) -> bool {
        self.get(id).is_some()
    }

    /// Maps `id` to `index`; an id already mapped keeps its index.
    fn insert(&mut self, id: u32, index: u32) {
        if self.contains_key(&id) {
            return;
        }
        if id as usize == self.dense.len() && self.other.is_empty() {
            self.dense.push(index);
        } else {
            self.other.insert(id, index);
        }
    }

    fn len(&self) -> usize {
        self.dense.len() + self.other.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_a_recorders_order_and_out_of_it_map_alike_and_keep_their_first_index() {
        let mut ids = IdMap::default();
        for id in 0..5 {
            ids.insert(id, 10 + id);
        }
        assert_eq!((ids.dense.len(), ids.other.len()), (5, 0));
        // A file's ids, out of order, and one given twice.
        ids.insert(9, 99);
        ids.insert(5, 55);
        ids.insert(2, 77);
        assert_eq!(ids.len(), 7);
        assert_eq!(ids.get(&2), Some(&12));
        assert_eq!(ids.get(&9), Some(&99));
        assert_eq!(ids.get(&5), Some(&55));
        assert_eq!(ids.get(&6), None);
        assert!(!ids.contains_key(&u32::MAX));
    }

    #[test]
    #[allow(clippy::field_reassign_with_default)]
    fn chunks_appended_as_a_run_goes_give_the_trees_of_the_file() {
        let mut first = StacksChunk::default();
        first.frames = vec![(3, "main".into()), (5, "first".into())];
        first.stacks = vec![
            StackEntry {
                id: 10,
                parent: None,
                frame: 3,
            },
            StackEntry {
                id: 11,
                parent: Some(10),
                frame: 5,
            },
        ];
        let interval = |index: u32, stack: u32, weight: u64| IntervalWeights {
            index,
            t0_ns: u64::from(index) * 1_000_000_000,
            t1_ns: u64::from(index + 1) * 1_000_000_000,
            weights: [(
                Kind::Cpu,
                vec![Weight {
                    tid: 7,
                    stack,
                    weight,
                }],
            )]
            .into_iter()
            .collect(),
        };
        first.intervals = vec![interval(0, 11, 4)];
        first.files = vec![(1, "/src/first.c".into())];
        let line = |weight| LineEntry {
            frame: 5,
            file: 1,
            line: 7,
            weight,
        };
        first.lines = vec![line(4)];
        let mut second = StacksChunk::default();
        second.lines = vec![line(1)];
        second.frames = vec![(6, "second".into())];
        second.stacks = vec![StackEntry {
            id: 12,
            parent: Some(10),
            frame: 6,
        }];
        // Interval 0 again (a later batch of it), interval 1, and a stack never defined.
        second.intervals = vec![interval(0, 11, 1), interval(1, 12, 9), interval(1, 99, 3)];
        let mut live = IntervalStacks::default();
        let mut ids = ChunkIds::default();
        let opts = LoadOptions::default();
        let mut live_lines = FrameLines::default();
        for chunk in [&first, &second] {
            live.append(chunk, &mut ids, &opts);
            live.append_lines(chunk, &mut ids, &mut live_lines, &opts);
        }
        assert_eq!(ids.dropped, 1, "the weight of stack 99");
        let mut bytes = StacksChunk::header();
        first.write_jsonl(&mut bytes);
        second.write_jsonl(&mut bytes);
        let file = IntervalStacks::parse(&bytes, Path::new("stacks.jsonl"), &opts);
        // The file refuses the undefined stack; without it, it agrees with the chunks.
        assert!(file.is_err());
        second.intervals.pop();
        let mut bytes = StacksChunk::header();
        first.write_jsonl(&mut bytes);
        second.write_jsonl(&mut bytes);
        let file = IntervalStacks::parse(&bytes, Path::new("stacks.jsonl"), &opts).unwrap();
        for (from, to) in [(0, u64::MAX), (0, 1_000_000_000), (1_000_000_000, u64::MAX)] {
            assert_eq!(
                live.tree_in(Kind::Cpu, from, to).to_folded(),
                file.tree_in(Kind::Cpu, from, to).to_folded()
            );
        }
        assert_eq!(
            live.tree_in(Kind::Cpu, 0, 1_000_000_000).to_folded(),
            "main;first 5\n"
        );
        // Source lines add up over chunks, as the file's do.
        let lines = |lines: &FrameLines| -> Vec<(String, u32, u64)> {
            lines
                .lines("first")
                .iter()
                .map(|l| (lines.file(l.file).to_owned(), l.line, l.weight))
                .collect()
        };
        assert_eq!(lines(&live_lines), [("/src/first.c".to_owned(), 7, 5)]);
        assert_eq!(lines(&live_lines), lines(&file.lines));
        assert_eq!(live.weights(), 3);
        assert_eq!(live.drop_oldest(2, 1), 1, "interval 0 goes");
        assert_eq!(live.drop_oldest(1, 1), 0);
        assert_eq!(
            live.tree_in(Kind::Cpu, 0, u64::MAX).to_folded(),
            "main;second 9\n"
        );
        // Defined twice: the second definition is dropped, the first stays.
        let mut again = StacksChunk::default();
        again.frames = vec![(3, "other".into())];
        // And a line of a file never defined.
        again.lines = vec![LineEntry { file: 2, ..line(1) }];
        live.append(&again, &mut ids, &opts);
        live.append_lines(&again, &mut ids, &mut live_lines, &opts);
        assert_eq!(ids.dropped, 3);
        assert_eq!(lines(&live_lines), [("/src/first.c".to_owned(), 7, 5)]);
        assert_eq!(live.stack_frames(0), ["main"]);
    }

    #[allow(clippy::field_reassign_with_default)]
    fn chunk() -> Vec<u8> {
        let mut c = StacksChunk::default();
        c.frames = vec![
            (3, "main".into()),
            (5, "first".into()),
            (6, "second".into()),
        ];
        c.stacks = vec![
            StackEntry {
                id: 10,
                parent: None,
                frame: 3,
            },
            StackEntry {
                id: 11,
                parent: Some(10),
                frame: 5,
            },
            StackEntry {
                id: 12,
                parent: Some(10),
                frame: 6,
            },
        ];
        c.threads = vec![(7, "t".into())];
        for (index, stack) in [(0, 11), (1, 11), (2, 12), (3, 12)] {
            c.intervals.push(IntervalWeights {
                index,
                t0_ns: u64::from(index) * 1_000_000_000,
                t1_ns: u64::from(index + 1) * 1_000_000_000,
                weights: [
                    (
                        Kind::Cpu,
                        vec![Weight {
                            tid: 7,
                            stack,
                            weight: 10,
                        }],
                    ),
                    (
                        Kind::OffCpu,
                        vec![Weight {
                            tid: 7,
                            stack: 10,
                            weight: 2_500,
                        }],
                    ),
                    (
                        Kind::Mem,
                        vec![Weight {
                            tid: 7,
                            stack,
                            weight: 65_536,
                        }],
                    ),
                ]
                .into_iter()
                .collect(),
            });
        }
        let mut bytes = StacksChunk::header();
        c.write_jsonl(&mut bytes);
        bytes
    }

    fn parse(bytes: &[u8]) -> Result<IntervalStacks, ProfileError> {
        IntervalStacks::parse(bytes, Path::new("stacks.jsonl"), &LoadOptions::default())
    }

    #[test]
    fn kept_samples_read_back_in_time_order_with_their_stacks() {
        let mut bytes = chunk();
        let c = StacksChunk {
            samples: vec![
                KeptSample {
                    t_ns: 2_500_000_000,
                    tid: 7,
                    stack: 12,
                },
                KeptSample {
                    t_ns: 500_000_000,
                    tid: 7,
                    stack: 11,
                },
            ],
            ..StacksChunk::default()
        };
        c.write_jsonl(&mut bytes);
        let s = parse(&bytes).unwrap();
        let read: Vec<(u64, Vec<&str>)> = s
            .samples
            .iter()
            .map(|k| (k.t_ns, s.stack_frames(k.stack)))
            .collect();
        assert_eq!(
            read,
            [
                (500_000_000, vec!["main", "first"]),
                (2_500_000_000, vec!["main", "second"])
            ]
        );
        assert!(parse(&chunk()).unwrap().samples.is_empty());
    }

    #[test]
    fn a_kept_sample_of_an_undefined_stack_is_corrupt() {
        let mut bytes = chunk();
        bytes.extend_from_slice(b"{\"samples\":[[5,7,99]]}\n");
        let e = parse(&bytes).unwrap_err().to_string();
        assert!(e.contains("stack 99"), "{e}");
    }

    #[test]
    fn long_waits_read_back_in_time_order_and_a_hostile_one_is_refused() {
        let mut bytes = chunk();
        let wait = |t0_ns, t1_ns, stack| LongWait {
            t0_ns,
            t1_ns,
            tid: 7,
            stack,
        };
        let c = StacksChunk {
            long_waits: vec![wait(3_000_000, 40_000_000, 12), wait(1_000, 2_001_000, 11)],
            ..StacksChunk::default()
        };
        c.write_jsonl(&mut bytes);
        assert!(String::from_utf8_lossy(&bytes).contains("\"long_waits\":[[3000000,"));
        let s = parse(&bytes).unwrap();
        let read: Vec<(u64, u64, Vec<&str>)> = s
            .long_waits
            .iter()
            .map(|w| (w.t0_ns, w.t1_ns, s.stack_frames(w.stack)))
            .collect();
        assert_eq!(
            read,
            [
                (1_000, 2_001_000, vec!["main", "first"]),
                (3_000_000, 40_000_000, vec!["main", "second"])
            ]
        );
        assert!(parse(&chunk()).unwrap().long_waits.is_empty());
        for (line, says) in [
            ("{\"long_waits\":[[5,9,7,99]]}\n", "stack 99"),
            (
                "{\"long_waits\":[[9,5,7,11]]}\n",
                "ends (5 ns) before it begins",
            ),
            ("{\"long_waits\":[[9,5]]}\n", "line"),
        ] {
            let mut bytes = chunk();
            bytes.extend_from_slice(line.as_bytes());
            let e = parse(&bytes).unwrap_err().to_string();
            assert!(e.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn a_range_holds_only_the_intervals_whose_middle_is_inside() {
        let s = parse(&chunk()).unwrap();
        assert_eq!(s.span_ns(), Some((0, 4_000_000_000)));
        let first = s.tree_in(Kind::Cpu, 0, 2_000_000_000).to_folded();
        assert_eq!(first, "main;first 20\n");
        let second = s.tree_in(Kind::Cpu, 2_000_000_000, u64::MAX).to_folded();
        assert_eq!(second, "main;second 20\n");
        assert_eq!(s.cpu_samples(), 40);
        assert_eq!(
            s.tree_in(Kind::OffCpu, 0, u64::MAX).to_folded(),
            "main 10\n"
        );
        assert_eq!(
            s.tree_in(Kind::Mem, 0, u64::MAX).to_folded(),
            "main;first 131072\nmain;second 131072\n"
        );
    }

    #[test]
    fn lines_of_one_interval_add_up() {
        let mut bytes = chunk();
        let mut more = StacksChunk::default();
        more.intervals.push(IntervalWeights {
            index: 0,
            t0_ns: 0,
            t1_ns: 1_000_000_000,
            weights: [(
                Kind::Cpu,
                vec![Weight {
                    tid: 7,
                    stack: 12,
                    weight: 1,
                }],
            )]
            .into_iter()
            .collect(),
        });
        more.write_jsonl(&mut bytes);
        let s = parse(&bytes).unwrap();
        assert_eq!(
            s.tree_in(Kind::Cpu, 0, 1_000_000_000).to_folded(),
            "main;first 10\nmain;second 1\n"
        );
    }

    #[test]
    fn an_incomplete_last_line_is_dropped_and_said() {
        let mut bytes = chunk();
        bytes.extend_from_slice(b"{\"interval\":4,\"t0_ns\":4");
        let s = parse(&bytes).unwrap();
        assert_eq!(s.intervals.len(), 4);
        assert!(
            s.warnings[0].contains("incomplete last line"),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn hostile_files_are_corrupt_with_their_line_named() {
        let cases: [(&[u8], &str); 5] = [
            (b"{\"format\":1}\nnot json\n{\"format\":1}\n", "line 2"),
            (b"{\"stacks\":[[1,null,9]]}\n", "not defined before it"),
            (b"{\"frames\":[[1,\"a\"],[1,\"b\"]]}\n", "defined twice"),
            (
                b"{\"interval\":0,\"t0_ns\":5,\"t1_ns\":1,\"cpu\":[]}\n",
                "ends",
            ),
            (b"{\"format\":99}\n", "newer"),
        ];
        for (bytes, want) in cases {
            let e = parse(bytes).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        let e = parse(b"{\"interval\":0,\"t0_ns\":0,\"t1_ns\":1,\"cpu\":[[1,99,1]]}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("stack 99"), "{e}");
    }

    #[test]
    fn a_cyclic_or_forward_parent_cannot_be_built() {
        // Parents must be defined first, so a stack cannot be its own ancestor.
        let e = parse(b"{\"frames\":[[0,\"a\"]]}\n{\"stacks\":[[1,1,0]]}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not defined before it"), "{e}");
    }

    #[test]
    #[allow(clippy::field_reassign_with_default)]
    fn source_lines_add_up_per_frame_name_and_unknown_ids_are_dropped_with_a_warning() {
        let mut bytes = chunk();
        let mut more = StacksChunk::default();
        more.files = vec![(0, "/src/main.c".into())];
        let entry = |frame, line, weight| LineEntry {
            frame,
            file: 0,
            line,
            weight,
        };
        more.lines = vec![entry(5, 12, 7), entry(3, 40, 9)];
        more.write_jsonl(&mut bytes);
        let mut again = StacksChunk::default();
        again.lines = vec![entry(5, 12, 3)];
        again.write_jsonl(&mut bytes);
        let s = parse(&bytes).unwrap();
        let first = s.lines.lines("first");
        assert_eq!(first.len(), 1);
        assert_eq!(
            (s.lines.file(first[0].file), first[0].line),
            ("/src/main.c", 12)
        );
        assert_eq!(first[0].weight, 10);
        assert_eq!(s.lines.lines("main")[0].weight, 9);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);

        bytes.extend_from_slice(b"{\"lines\":[[99,0,1,1],[5,42,1,1]]}\n");
        let s = parse(&bytes).unwrap();
        assert!(
            s.warnings[0].contains("2 source-line weights"),
            "{:?}",
            s.warnings
        );
        let e = parse(b"{\"files\":[[1,\"a\"],[1,\"b\"]]}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("file 1 is defined twice"), "{e}");
    }

    #[test]
    fn counts_past_the_limits_are_dropped_with_a_warning() {
        let opts = LoadOptions {
            max_stacks: 2,
            max_intervals: 1,
            ..LoadOptions::default()
        };
        let s = IntervalStacks::parse(&chunk(), Path::new("s"), &opts).unwrap();
        assert_eq!(s.intervals.len(), 1);
        assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
    }
}
