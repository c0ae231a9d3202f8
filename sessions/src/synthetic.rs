//! Long synthetic sessions, written through [`SessionWriter`] as the recorder writes them:
//! for the tests and benchmarks that load an hour of intervals (`show`, `compare` and
//! `open` of a session of 36,000 intervals of 100 ms), and profiles of many distinct
//! stacks ([`SyntheticStacks`]) for those of the views built from a profile.
//!
//! Each interval has a latency histogram of [`SyntheticSession::values_per_interval`]
//! values (a body around `body_ns` and a 1 % tail around ten times it, spread so that
//! most values fall in buckets of their own, as a real workload's do) and a timeseries
//! row with a rate and the resources of the tree. The generator is deterministic in its
//! seed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;

use crate::meta::{Figure, HostInfo, WorkloadInfo};
use crate::{
    Percentiles, Resources, SessionError, SessionMeta, SessionWriter, Status, TimeseriesRow,
};

/// What to write.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SyntheticSession {
    /// Intervals (timeseries rows and latency.hlog lines).
    pub intervals: usize,
    /// Length of an interval, seconds.
    pub interval_s: f64,
    /// Latency values recorded in each interval.
    pub values_per_interval: u64,
    /// Where the latencies' body lies, ns.
    pub body_ns: u64,
    /// Seed of the generator.
    pub seed: u64,
    /// The run's laps/s: its summary figure, and the level its intervals' rates wobble
    /// around (by up to 1 %).
    pub laps_per_s: f64,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// Its labels (session.json's `labels`).
    pub labels: BTreeMap<String, String>,
    /// Its on-CPU stacks (cpu.folded and cpu.svg), if any.
    pub cpu: Option<crate::StackTree>,
}

impl Default for SyntheticSession {
    /// An hour at 100 ms: 36,000 intervals of 1,000 values around 50 µs.
    fn default() -> Self {
        SyntheticSession {
            intervals: 36_000,
            interval_s: 0.1,
            values_per_interval: 1_000,
            body_ns: 50_000,
            seed: 1,
            laps_per_s: 20_000.0,
            started_at: "2026-11-24T12:00:00Z".into(),
            labels: BTreeMap::new(),
            cpu: None,
        }
    }
}

impl SyntheticSession {
    /// Writes the session into `dir` (fresh or empty, as [`SessionWriter::create`] wants),
    /// finished `complete`; returns its directory.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, SessionError> {
        let mut meta = SessionMeta::new(
            dir.file_name().map_or_else(
                || "synthetic".to_owned(),
                |n| n.to_string_lossy().into_owned(),
            ),
            WorkloadInfo::new(
                "ring",
                BTreeMap::from([("num-nodes".to_owned(), serde_json::json!(1000))]),
            ),
            HostInfo::default(),
            self.started_at.clone(),
        );
        meta.summary = vec![Figure::new("laps/s", self.laps_per_s, "/s")];
        meta.labels = self.labels.clone();
        let mut writer = SessionWriter::create(dir, meta)?;
        let mut rng = self.seed.max(1);
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        // Sized to the values (the tail reaches twenty times the body), as the workloads'
        // histograms grow to theirs.
        let mut h =
            Histogram::<u64>::new_with_bounds(1, self.body_ns.max(1) * 20, 3).map_err(|e| {
                SessionError::BadHistogram {
                    reason: e.to_string(),
                }
            })?;
        h.auto(true);
        for i in 0..self.intervals {
            h.reset();
            for v in 0..self.values_per_interval {
                let base = if v % 100 == 0 {
                    self.body_ns * 10
                } else {
                    self.body_ns
                };
                // Up to twice the base, in steps finer than the histogram's buckets.
                let value = base + base * (next() % 1_000_000) / 1_000_000;
                // Within the range by construction; a value past it is left out.
                let _ = h.record(value);
            }
            let t = (i + 1) as f64 * self.interval_s;
            let start = i as f64 * self.interval_s;
            writer.append_latency("lap", start, self.interval_s, &h)?;
            let mut row = TimeseriesRow::default();
            row.t_s = t;
            row.interval_s = self.interval_s;
            let laps = (i as u64 + 1) * 2_000;
            row.counters.insert("laps".into(), laps);
            row.rates.insert(
                "laps".into(),
                self.laps_per_s * (1.0 + (next() % 100) as f64 / 10_000.0),
            );
            row.latency.insert("lap".into(), Percentiles::of(&h));
            let mut resources = Resources::default();
            resources.rss_bytes = 50 << 20;
            resources.peak_rss_bytes = 50 << 20;
            resources.threads = 4;
            resources.cpu_percent = 100.0 + (next() % 100) as f64 / 10.0;
            row.resources = Some(resources);
            writer.append_row(&row)?;
        }
        if let Some(tree) = &self.cpu {
            writer.write_stacks(crate::Kind::Cpu, tree, "synthetic — on-CPU")?;
        }
        let ended_at = "2026-11-24T13:00:00Z".to_owned();
        writer.finish(Status::Complete, ended_at)
    }
}

/// A history of runs, one a point, for the tests and benchmarks of histories: the
/// points' laps/s around 20,000 with a coefficient of variation `cv` between points
/// (log-normal), stepping by a fraction at given points. Deterministic in its seed.
///
/// ```
/// use benchtop_sessions::synthetic::SyntheticHistory;
///
/// let mut history = SyntheticHistory::new(100, 0.02, 1);
/// history.steps = vec![(50, 0.10)];
/// let values = history.values();
/// let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
/// assert!(mean(&values[50..]) > 1.05 * mean(&values[..50]));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SyntheticHistory {
    /// Points.
    pub points: usize,
    /// Coefficient of variation between points.
    pub cv: f64,
    /// Steps: from this point on (an index), the level is multiplied by 1 + the fraction.
    pub steps: Vec<(usize, f64)>,
    /// Seed of the generator.
    pub seed: u64,
    /// With a name, [`SyntheticHistory::write`] gives each point an on-CPU profile:
    /// 400 samples each in `ring::hop` and `ring::send`, and under `ring::hop` this
    /// function with 400 samples times the point's level (the product of the steps so
    /// far): the function the steps moved.
    pub moved_function: Option<String>,
}

impl SyntheticHistory {
    /// A history of `points` points with `cv` between them and no steps.
    pub fn new(points: usize, cv: f64, seed: u64) -> Self {
        SyntheticHistory {
            points,
            cv,
            steps: Vec::new(),
            seed,
            moved_function: None,
        }
    }

    /// The level of point `i`: the product of 1 + each step's fraction up to it.
    fn level(&self, i: usize) -> f64 {
        self.steps
            .iter()
            .filter(|(at, _)| i >= *at)
            .map(|(_, f)| 1.0 + f)
            .product()
    }

    /// Point `i`'s on-CPU profile, when the history has a moved function.
    fn profile(&self, i: usize) -> Option<crate::StackTree> {
        let moved = self.moved_function.as_deref()?;
        let mut tree = crate::StackTree::new();
        tree.add_names(["ring", "ring::hop"], 400);
        tree.add_names(["ring", "ring::send"], 400);
        let weight = (400.0 * self.level(i)).round().max(1.0) as u64;
        tree.add_names(["ring", "ring::hop", moved], weight);
        Some(tree)
    }

    /// Each point's laps/s.
    pub fn values(&self) -> Vec<f64> {
        let mut rng = self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut uniform = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            ((rng >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        (0..self.points)
            .map(|i| {
                let level = self.level(i);
                // Box–Muller: one standard normal from two uniforms.
                let (u, v) = (uniform(), uniform());
                let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
                20_000.0 * level * (self.cv * z).exp()
            })
            .collect()
    }

    /// Writes each point as a short session (three intervals of 100 ms) in `root`:
    /// `point-000`, `point-001` …, a minute apart, each labelled `commit=c000` … and
    /// holding its laps/s (and its profile, with a moved function); returns their
    /// directories.
    pub fn write(&self, root: &Path) -> Result<Vec<PathBuf>, SessionError> {
        self.values()
            .into_iter()
            .enumerate()
            .map(|(i, laps)| {
                let minutes = i as u64;
                let session = SyntheticSession {
                    intervals: 3,
                    values_per_interval: 100,
                    seed: self.seed.wrapping_add(i as u64),
                    laps_per_s: laps,
                    started_at: format!(
                        "2026-11-{:02}T{:02}:{:02}:00Z",
                        1 + minutes / 1440,
                        minutes / 60 % 24,
                        minutes % 60
                    ),
                    labels: BTreeMap::from([("commit".to_owned(), format!("c{i:03}"))]),
                    cpu: self.profile(i),
                    ..SyntheticSession::default()
                };
                session.write(&root.join(format!("point-{i:03}")))
            })
            .collect()
    }
}

/// A profile of many distinct stacks, for the tests and benchmarks of the views that are
/// built from one (top functions, bottom-up, callers and callees, source lines): by
/// default 100,000 distinct stacks of depth 10 to 60 over 5,000 functions, with a
/// Zipf-like spread of weights (the stack of rank *r* weighs about `1e6 / r^1.1`
/// samples), each function with a few source lines. Most stacks share all but their last
/// one to four frames with an earlier stack, one in eight branches off at any depth: some
/// 1.2 million nodes in all. Deterministic in its seed.
///
/// ```
/// use benchtop_sessions::synthetic::SyntheticStacks;
///
/// let mut spec = SyntheticStacks::default();
/// spec.stacks = 1_000;
/// let (tree, lines) = spec.profile();
/// let mut distinct = 0;
/// tree.for_each_stack(|frames, _| {
///     assert!((10..=60).contains(&(frames.len() - 1)));
///     distinct += 1;
/// });
/// assert_eq!(distinct, 1_000);
/// assert!(!lines.is_empty());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SyntheticStacks {
    /// Distinct stacks.
    pub stacks: usize,
    /// Depth of the shallowest and deepest stacks, below the process frame.
    pub depth: (usize, usize),
    /// Distinct functions.
    pub functions: usize,
    /// Seed of the generator.
    pub seed: u64,
}

impl Default for SyntheticStacks {
    fn default() -> Self {
        SyntheticStacks {
            stacks: 100_000,
            depth: (10, 60),
            functions: 5_000,
            seed: 1,
        }
    }
}

const CRATES: [&str; 8] = [
    "tokio",
    "std",
    "core",
    "alloc",
    "hyper",
    "ring",
    "serde_json",
    "app",
];
const MODULES: [&str; 8] = [
    "runtime", "io", "sync", "vec", "proto", "codec", "task", "net",
];

impl SyntheticStacks {
    /// The name of function `i`.
    pub fn function(i: usize) -> String {
        format!(
            "{}::{}::f{i}",
            CRATES[i % CRATES.len()],
            MODULES[(i / CRATES.len()) % MODULES.len()]
        )
    }

    /// The stacks and their source lines (each stack's frames on a line of their own
    /// function's file).
    pub fn profile(&self) -> (crate::StackTree, crate::lines::FrameLines) {
        let mut rng = self.seed.max(1);
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let functions = self.functions.max(2);
        let (lo, hi) = (self.depth.0.max(1), self.depth.1.max(self.depth.0.max(1)));
        let mut tree = crate::StackTree::new();
        let process = tree.intern("bt-synth");
        let ids: Vec<crate::FrameId> = (0..functions)
            .map(|i| tree.intern(&Self::function(i)))
            .collect();
        let mut seen: std::collections::HashSet<Vec<u32>> = std::collections::HashSet::new();
        let mut stacks: Vec<Vec<u32>> = Vec::with_capacity(self.stacks);
        // Ranks in a shuffled order, so that heavy stacks are anywhere in the tree.
        let mut ranks: Vec<usize> = (1..=self.stacks).collect();
        for i in (1..ranks.len()).rev() {
            ranks.swap(i, next() as usize % (i + 1));
        }
        let mut lines = crate::lines::FrameLines::default();
        let mut frames = Vec::new();
        while stacks.len() < self.stacks {
            let depth = lo + next() as usize % (hi - lo + 1);
            // As in real call trees, a stack mostly shares all but its last few frames with
            // an earlier one (its callers differ near the leaves); one in eight branches
            // off anywhere.
            let mut stack: Vec<u32> = match stacks.len() {
                0 => Vec::new(),
                n => {
                    let base = &stacks[next() as usize % n];
                    let most = base.len().min(depth);
                    let keep = if next() % 8 == 0 {
                        next() as usize % most.max(1)
                    } else {
                        most.saturating_sub(1 + (next() % 4) as usize)
                    };
                    base[..keep].to_vec()
                }
            };
            while stack.len() < depth {
                // Callers come from fewer functions than callees: a runtime at the top.
                let range = (functions * (stack.len() + 1) / hi).clamp(2, functions);
                stack.push((next() as usize % range) as u32);
            }
            if !seen.insert(stack.clone()) {
                continue;
            }
            let rank = ranks[stacks.len()];
            let weight = (1e6 / (rank as f64).powf(1.1)).ceil().max(1.0) as u64;
            frames.clear();
            frames.push(process);
            frames.extend(stack.iter().map(|&f| ids[f as usize]));
            tree.add(&frames, weight);
            for &f in &stack {
                let f = f as usize;
                let file = format!("/src/{}/{}.rs", CRATES[f % 8], MODULES[(f / 8) % 8]);
                let line = 10 + (f as u32 % 500) + (next() % 4) as u32;
                lines.add(&Self::function(f), &file, line, weight);
            }
            stacks.push(stack);
        }
        (tree, lines)
    }

    /// Writes a session of these stacks into `dir` (fresh or empty): cpu.folded and its
    /// flamegraph, and stacks.jsonl with one interval and the source lines. Returns its
    /// directory.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, SessionError> {
        use crate::intervals::{IntervalWeights, LineEntry, StackEntry, StacksChunk, Weight};
        let (tree, lines) = self.profile();
        let meta = SessionMeta::new(
            "synthetic-stacks",
            WorkloadInfo::new("synthetic", BTreeMap::new()),
            HostInfo::default(),
            "2026-11-24T12:00:00Z",
        );
        let mut writer = SessionWriter::create(dir, meta)?;
        writer.write_stacks(crate::Kind::Cpu, &tree, "synthetic — on-CPU")?;
        let mut chunk = StacksChunk::default();
        chunk.frames = (0..tree.frame_count())
            .map(|i| (i as u32, tree.name(crate::FrameId(i as u32)).to_owned()))
            .collect();
        let mut interval = IntervalWeights {
            index: 0,
            t0_ns: 0,
            t1_ns: 1_000_000_000,
            ..IntervalWeights::default()
        };
        // Stack ids are node ids: a node's parent was made before it.
        for i in 1..tree.node_count() {
            let node = tree.node(crate::NodeId(i as u32));
            chunk.stacks.push(StackEntry {
                id: i as u32,
                parent: (node.parent != crate::NodeId::ROOT).then_some(node.parent.0),
                frame: node.frame.0,
            });
            if node.self_weight > 0 {
                interval.weights[crate::Kind::Cpu].push(Weight {
                    tid: 1,
                    stack: i as u32,
                    weight: node.self_weight,
                });
            }
        }
        chunk.threads = vec![(1, "bt-synth".into())];
        chunk.intervals.push(interval);
        let mut files: BTreeMap<String, u32> = BTreeMap::new();
        for f in 0..tree.frame_count() {
            let name = tree.name(crate::FrameId(f as u32));
            for l in lines.lines(name) {
                let path = lines.file(l.file).to_owned();
                let next_id = files.len() as u32;
                let file = *files.entry(path).or_insert(next_id);
                chunk.lines.push(LineEntry {
                    frame: f as u32,
                    file,
                    line: l.line,
                    weight: l.weight,
                });
            }
        }
        chunk.files = files.into_iter().map(|(p, id)| (id, p)).collect();
        writer.append_stacks(&chunk)?;
        writer.finish(Status::Complete, "2026-11-24T12:00:01Z".to_owned())
    }
}

/// Per-interval chunks of stacks made from whole trees, as a recorder hands them to a
/// live view ([`StacksChunk`](crate::intervals::StacksChunk)): each
/// [`TreeChunks::chunk`] defines the frames and stacks not defined before and gives one
/// new interval the trees' weights. [`TreeChunks::stack`] defines a stack by its path
/// and hands its id out for weights made by hand; [`TreeChunks::definitions`] takes
/// what was defined so far. For the tests and benchmarks that feed a live screen or a
/// session known profiles.
#[derive(Debug, Default)]
pub struct TreeChunks {
    frames: std::collections::HashMap<String, u32>,
    stacks: std::collections::HashMap<(Option<u32>, u32), u32>,
    intervals: u32,
    /// Frames and stacks defined and not handed out yet.
    pending: crate::intervals::StacksChunk,
    /// The thread was defined.
    thread: bool,
}

impl TreeChunks {
    /// The id of the stack of `frames`, root first, defining what it needs.
    fn define<'a>(&mut self, frames: impl IntoIterator<Item = &'a str>) -> Option<u32> {
        use crate::intervals::StackEntry;
        let mut parent = None;
        for name in frames {
            let next = self.frames.len() as u32;
            let pending = &mut self.pending;
            let frame = *self.frames.entry(name.to_owned()).or_insert_with(|| {
                pending.frames.push((next, name.to_owned()));
                next
            });
            let next = self.stacks.len() as u32;
            let id = *self.stacks.entry((parent, frame)).or_insert_with(|| {
                pending.stacks.push(StackEntry {
                    id: next,
                    parent,
                    frame,
                });
                next
            });
            parent = Some(id);
        }
        parent
    }

    /// The id of the stack `path` (`;`-separated frames, root first), defined in the
    /// next chunk handed out when it is new.
    pub fn stack(&mut self, path: &str) -> u32 {
        // `split` yields at least one frame, so a stack is always defined.
        self.define(path.split(';')).unwrap_or_default()
    }

    /// The frames and stacks defined since the last chunk handed out, as a chunk without
    /// intervals (the thread `1`, `main`, with the first).
    pub fn definitions(&mut self) -> crate::intervals::StacksChunk {
        if !std::mem::replace(&mut self.thread, true) {
            self.pending.threads.push((1, "main".into()));
        }
        std::mem::take(&mut self.pending)
    }

    /// The next interval, `[t0_ns, t1_ns)`, with the weights of each `(kind, tree)`, all
    /// of thread `1`; each tree weighs in its kind's folded unit (off-CPU µs, as
    /// offcpu.folded counts them: the chunk carries nanoseconds, as the table says).
    pub fn chunk(
        &mut self,
        (t0_ns, t1_ns): (u64, u64),
        trees: &[(crate::Kind, &crate::StackTree)],
    ) -> crate::intervals::StacksChunk {
        use crate::intervals::{IntervalWeights, Weight};
        let mut weights = crate::ByKind::<Vec<Weight>>::default();
        for &(kind, tree) in trees {
            let spec = kind.spec();
            let scale = spec
                .interval_unit
                .and_then(|u| u.per(spec.folded_unit))
                .unwrap_or(1);
            let out = &mut weights[kind];
            tree.for_each_stack(|frames, weight| {
                if let Some(stack) = self.define(frames.iter().map(|&f| tree.name(f))) {
                    out.push(Weight {
                        tid: 1,
                        stack,
                        weight: weight.saturating_mul(scale),
                    });
                }
            });
        }
        let mut chunk = self.definitions();
        chunk.intervals.push(IntervalWeights {
            index: self.intervals,
            t0_ns,
            t1_ns,
            weights,
        });
        self.intervals += 1;
        chunk
    }

    /// The next interval, one second long, with the on-CPU weights of `cpu` alone.
    pub fn cpu(&mut self, cpu: &crate::StackTree) -> crate::intervals::StacksChunk {
        let t0 = u64::from(self.intervals) * 1_000_000_000;
        self.chunk((t0, t0 + 1_000_000_000), &[(crate::Kind::Cpu, cpu)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intervals::{IntervalStacks, StacksChunk};
    use crate::limits::LoadOptions;
    use crate::lines::FrameLines;
    use crate::{Kind, StackTree};

    fn tree(stacks: &[(&str, u64)]) -> StackTree {
        let mut t = StackTree::new();
        for (s, w) in stacks {
            t.add_names(s.split(';'), *w);
        }
        t
    }

    #[test]
    fn chunks_of_trees_read_back_as_the_trees_interval_by_interval() {
        let mut chunks = TreeChunks::default();
        let first = tree(&[("main;a", 3), ("main;b;c", 2)]);
        let off = tree(&[("main;wait", 7)]);
        let second = tree(&[("main;b;c", 4), ("main;d", 1)]);
        let mut bytes = StacksChunk::header();
        chunks
            .chunk((0, 10), &[(Kind::Cpu, &first), (Kind::OffCpu, &off)])
            .write_jsonl(&mut bytes);
        let again = chunks.cpu(&second);
        // Only what the first did not define.
        assert_eq!(again.frames.len(), 1, "{:?}", again.frames);
        again.write_jsonl(&mut bytes);
        let loaded =
            IntervalStacks::parse(&bytes, Path::new("stacks.jsonl"), &LoadOptions::default())
                .unwrap();
        assert_eq!(
            loaded.tree_in(Kind::Cpu, 0, 10).to_folded(),
            first.to_folded()
        );
        assert_eq!(
            loaded.tree_in(Kind::OffCpu, 0, 10).to_folded(),
            off.to_folded()
        );
        let mut both = first.clone();
        both.merge(&second);
        assert_eq!(
            loaded.tree_in(Kind::Cpu, 0, u64::MAX).to_folded(),
            both.to_folded()
        );
    }

    #[test]
    fn stacks_defined_by_path_get_ids_their_weights_resolve_through() {
        use crate::intervals::{IntervalWeights, Weight};
        let mut chunks = TreeChunks::default();
        let (fast, slow) = (chunks.stack("fixture;fast"), chunks.stack("fixture;slow"));
        assert_eq!(chunks.stack("fixture;fast"), fast, "defined once");
        let mut chunk = chunks.definitions();
        assert_eq!((chunk.frames.len(), chunk.stacks.len()), (3, 3));
        assert!(chunks.definitions().frames.is_empty(), "handed out once");
        chunk.intervals.push(IntervalWeights {
            index: 0,
            t0_ns: 0,
            t1_ns: 10,
            weights: [(
                Kind::Cpu,
                vec![
                    Weight {
                        tid: 1,
                        stack: fast,
                        weight: 3,
                    },
                    Weight {
                        tid: 1,
                        stack: slow,
                        weight: 1,
                    },
                ],
            )]
            .into_iter()
            .collect(),
        });
        let mut bytes = StacksChunk::header();
        chunk.write_jsonl(&mut bytes);
        let loaded =
            IntervalStacks::parse(&bytes, Path::new("stacks.jsonl"), &LoadOptions::default())
                .unwrap();
        assert_eq!(
            loaded.tree_in(Kind::Cpu, 0, 10).to_folded(),
            "fixture;fast 3\nfixture;slow 1\n"
        );
    }

    #[test]
    fn a_synthetic_profile_written_as_a_session_loads_with_its_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = SyntheticStacks {
            stacks: 500,
            ..Default::default()
        };
        let (tree, lines) = spec.profile();
        let dir = spec.write(&tmp.path().join("s")).unwrap();
        let s = IntervalStacks::load(&dir, &LoadOptions::default())
            .unwrap()
            .unwrap();
        assert_eq!(
            s.tree_in(Kind::Cpu, 0, u64::MAX).to_folded(),
            tree.to_folded()
        );
        assert_eq!(s.lines.len(), lines.len());
        let f = SyntheticStacks::function(3);
        let total = |l: &FrameLines| l.lines(&f).iter().map(|l| l.weight).sum::<u64>();
        assert_eq!(total(&s.lines), total(&lines));
    }
}
