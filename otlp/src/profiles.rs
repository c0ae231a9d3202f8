//! Per-interval stacks as one OTLP profiles request: its own dictionary (strings,
//! functions, locations, stacks, thread attributes) holding exactly what its profiles
//! reference, so that a collector that has just restarted resolves all it receives.
//!
//! One profile per kind of [`KINDS`] (on-CPU samples, off-CPU nanoseconds, bytes of
//! resident growth; a worker's bytes allocated and live); one sample per (thread, stack)
//! carrying a value and a timestamp (the middle of its interval, or its end for a level
//! such as live bytes) per interval the request covers.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use benchtop_sessions::intervals::{IntervalStacks, StacksChunk};
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value::Value};
use opentelemetry_proto::tonic::profiles::v1development::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary,
    ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use crate::kinds::{BatchInterval, KINDS, Sampling};
use crate::resource::scope;

/// Frames past this depth are not walked (a stack table that loops cannot hang the walk).
const MAX_DEPTH: usize = 4096;

/// Where stacks' frames and threads' names are looked up.
pub trait StackSource {
    /// Pushes stack `id`'s frame names onto `out`, innermost first.
    fn frames<'a>(&'a self, id: u32, out: &mut Vec<&'a str>);
    /// Thread `tid`'s name, when known.
    fn thread(&self, tid: u32) -> Option<&str>;
}

/// The frames, stacks and threads a live run has defined so far, as its
/// [`StacksChunk`]s hand them out (each chunk's ids may use any earlier chunk's).
#[derive(Debug, Default)]
pub struct StackTable {
    frames: HashMap<u32, String>,
    stacks: HashMap<u32, (Option<u32>, u32)>,
    threads: HashMap<u32, String>,
}

impl StackTable {
    /// Learns a chunk's new frames, stacks and threads.
    pub fn add(&mut self, chunk: &StacksChunk) {
        for (id, name) in &chunk.frames {
            self.frames.insert(*id, name.clone());
        }
        for s in &chunk.stacks {
            self.stacks.insert(s.id, (s.parent, s.frame));
        }
        for (tid, name) in &chunk.threads {
            self.threads.insert(*tid, name.clone());
        }
    }

    /// Takes in everything `other` defines (what the recorder's side learnt since the
    /// last take).
    pub fn absorb(&mut self, other: StackTable) {
        self.frames.extend(other.frames);
        self.stacks.extend(other.stacks);
        self.threads.extend(other.threads);
    }

    /// How many stacks it holds.
    pub fn len(&self) -> usize {
        self.stacks.len()
    }

    /// Whether it holds no stack.
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }
}

impl StackSource for StackTable {
    fn frames<'a>(&'a self, id: u32, out: &mut Vec<&'a str>) {
        let mut at = Some(id);
        while let Some(stack) = at {
            let Some(&(parent, frame)) = self.stacks.get(&stack) else {
                break;
            };
            out.push(self.frames.get(&frame).map_or("[?]", String::as_str));
            if out.len() >= MAX_DEPTH {
                break;
            }
            at = parent;
        }
    }

    fn thread(&self, tid: u32) -> Option<&str> {
        self.threads.get(&tid).map(String::as_str)
    }
}

impl StackSource for IntervalStacks {
    fn frames<'a>(&'a self, id: u32, out: &mut Vec<&'a str>) {
        let mut frames = self.stack_frames(id);
        frames.reverse();
        out.extend(frames);
    }

    fn thread(&self, tid: u32) -> Option<&str> {
        self.threads.get(&tid).map(String::as_str)
    }
}

/// The dictionary of one request, interning as the profiles reference.
#[derive(Default)]
struct Dictionary {
    out: ProfilesDictionary,
    strings: HashMap<String, i32>,
    functions: HashMap<i32, i32>,
    stacks: HashMap<u32, i32>,
    threads: HashMap<u32, [i32; 2]>,
    scratch: Vec<i32>,
}

impl Dictionary {
    fn new() -> Self {
        let mut d = Dictionary::default();
        // Index 0 of every table is its zero value, as the format asks.
        d.out.string_table.push(String::new());
        d.strings.insert(String::new(), 0);
        d.out.mapping_table.push(Mapping::default());
        d.out.location_table.push(Location::default());
        d.out.function_table.push(Function::default());
        d.out.link_table.push(Link::default());
        d.out.stack_table.push(Stack::default());
        d.out.attribute_table.push(KeyValueAndUnit::default());
        d
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = index(self.out.string_table.len());
        self.out.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    /// The location of a frame named `name` (one function, one location per name).
    fn location(&mut self, name: &str) -> i32 {
        let name = self.string(name);
        if let Some(&i) = self.functions.get(&name) {
            return i;
        }
        let function = index(self.out.function_table.len());
        self.out.function_table.push(Function {
            name_strindex: name,
            system_name_strindex: name,
            ..Function::default()
        });
        let location = index(self.out.location_table.len());
        self.out.location_table.push(Location {
            lines: vec![Line {
                function_index: function,
                ..Line::default()
            }],
            ..Location::default()
        });
        self.functions.insert(name, location);
        location
    }

    fn stack(&mut self, source: &dyn StackSource, id: u32) -> i32 {
        if let Some(&i) = self.stacks.get(&id) {
            return i;
        }
        let mut names = Vec::new();
        source.frames(id, &mut names);
        let mut locations = std::mem::take(&mut self.scratch);
        locations.clear();
        for name in names {
            locations.push(self.location(name));
        }
        let i = index(self.out.stack_table.len());
        self.out.stack_table.push(Stack {
            location_indices: locations.clone(),
        });
        self.scratch = locations;
        self.stacks.insert(id, i);
        i
    }

    fn attribute(&mut self, key: &str, value: Value) -> i32 {
        let key_strindex = self.string(key);
        let i = index(self.out.attribute_table.len());
        self.out.attribute_table.push(KeyValueAndUnit {
            key_strindex,
            value: Some(AnyValue { value: Some(value) }),
            unit_strindex: 0,
        });
        i
    }

    /// The attributes naming thread `tid`: `thread.id` and `thread.name`.
    fn thread(&mut self, source: &dyn StackSource, tid: u32) -> [i32; 2] {
        if let Some(&a) = self.threads.get(&tid) {
            return a;
        }
        let id = self.attribute("thread.id", Value::IntValue(i64::from(tid)));
        let name = source.thread(tid).unwrap_or("").to_owned();
        let name = self.attribute("thread.name", Value::StringValue(name));
        self.threads.insert(tid, [id, name]);
        [id, name]
    }

    fn value_type(&mut self, kind: &str, unit: &str) -> ValueType {
        ValueType {
            type_strindex: self.string(kind),
            unit_strindex: self.string(unit),
        }
    }
}

/// A table index as the format's `int32` (tables past 2^31 entries cannot be sent;
/// requests are a batch of intervals, far below).
fn index(len: usize) -> i32 {
    i32::try_from(len).unwrap_or(i32::MAX)
}

/// The profiles of `intervals` as one self-contained request, or `None` when they carry
/// no weight. `start_unix_ns` is the run's start on the wall clock.
pub fn profiles_request(
    resource: &Resource,
    source: &dyn StackSource,
    intervals: &[BatchInterval],
    start_unix_ns: u64,
    sampling: Sampling,
) -> Option<ExportProfilesServiceRequest> {
    let mut dict = Dictionary::new();
    let mut profiles = Vec::new();
    for (k, kind) in KINDS.iter().enumerate() {
        let mut samples: Vec<Sample> = Vec::new();
        let mut by_key: HashMap<(u32, u32), usize> = HashMap::new();
        let (mut first, mut last) = (u64::MAX, 0u64);
        for interval in intervals {
            let stamp = if kind.snapshot {
                start_unix_ns.saturating_add(interval.t1_ns)
            } else {
                start_unix_ns.saturating_add(interval.t0_ns / 2 + interval.t1_ns / 2)
            };
            for &(tid, stack, weight) in &interval.weights[k] {
                if weight == 0 {
                    continue;
                }
                first = first.min(start_unix_ns.saturating_add(interval.t0_ns));
                last = last.max(start_unix_ns.saturating_add(interval.t1_ns));
                let at = match by_key.get(&(tid, stack)) {
                    Some(&at) => at,
                    None => {
                        let stack_index = dict.stack(source, stack);
                        let attribute_indices = if kind.threads {
                            dict.thread(source, tid).to_vec()
                        } else {
                            Vec::new()
                        };
                        samples.push(Sample {
                            stack_index,
                            attribute_indices,
                            ..Sample::default()
                        });
                        by_key.insert((tid, stack), samples.len() - 1);
                        samples.len() - 1
                    }
                };
                let sample = &mut samples[at];
                sample
                    .values
                    .push(i64::try_from(weight).unwrap_or(i64::MAX));
                sample.timestamps_unix_nano.push(stamp);
            }
        }
        if samples.is_empty() {
            continue;
        }
        let types = kind.spec().sample_types;
        let sample_type = dict.value_type(types.sample.0, types.sample.1);
        let period_type = dict.value_type(types.period.0, types.period.1);
        profiles.push(Profile {
            sample_type: Some(sample_type),
            samples,
            time_unix_nano: first,
            // Timestamps fall in [time, time + duration): the middles of the intervals do,
            // and their ends with one nanosecond more.
            duration_nano: last.saturating_sub(first).max(1) + u64::from(kind.snapshot),
            period_type: Some(period_type),
            period: (kind.period)(&sampling),
            profile_id: profile_id(resource, kind.spec().name, first),
            ..Profile::default()
        });
    }
    if profiles.is_empty() {
        return None;
    }
    Some(ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(resource.clone()),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(scope()),
                profiles,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(dict.out),
    })
}

/// 16 bytes, never all zero, the same for the same resource, kind and start: a replay of
/// a session sends the ids its live run sent.
fn profile_id(resource: &Resource, kind: &str, first: u64) -> Vec<u8> {
    let mut id = Vec::with_capacity(16);
    for salt in [0u8, 1] {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut h);
        for a in &resource.attributes {
            if a.key == "benchtop.session.id" {
                format!("{:?}", a.value).hash(&mut h);
            }
        }
        kind.hash(&mut h);
        first.hash(&mut h);
        id.extend_from_slice(&(h.finish() | 1).to_le_bytes());
    }
    id
}

/// The stack `stack_index` of `dict` as a folded stack (frames root first, `;`-joined):
/// how a reader of the requests benchtop sends names a sample's stack (its tests, a
/// receiver being debugged). Locations hold one line each, whose function names the
/// frame; `None` for an index, a location or a function the dictionary does not have.
pub fn folded_stack(dict: &ProfilesDictionary, stack_index: i32) -> Option<String> {
    let at = |i: i32| usize::try_from(i).ok();
    let stack = dict.stack_table.get(at(stack_index)?)?;
    let mut names = Vec::with_capacity(stack.location_indices.len());
    for &l in stack.location_indices.iter().rev() {
        let line = dict.location_table.get(at(l)?)?.lines.first()?;
        let function = dict.function_table.get(at(line.function_index)?)?;
        names.push(dict.string_table.get(at(function.name_strindex)?)?.as_str());
    }
    Some(names.join(";"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchtop_sessions::intervals::StackEntry;

    /// Stacks 1 (main;hot) and 2 (main;cold) of thread 7, `worker`.
    fn table() -> StackTable {
        let mut stacks = benchtop_sessions::synthetic::TreeChunks::default();
        assert_eq!(
            (stacks.stack("main;hot"), stacks.stack("main;cold")),
            (1, 2)
        );
        let mut chunk = stacks.definitions();
        chunk.threads = vec![(7, "worker".into())];
        let mut t = StackTable::default();
        t.add(&chunk);
        t
    }

    /// The folded stacks and weights a request carries, resolved through its dictionary.
    fn folded(req: &ExportProfilesServiceRequest, kind: &str) -> Vec<(String, i64)> {
        let dict = req.dictionary.as_ref().expect("dictionary");
        let s = |i: i32| dict.string_table[i as usize].clone();
        let mut out = Vec::new();
        for p in &req.resource_profiles[0].scope_profiles[0].profiles {
            if s(p.sample_type.expect("type").type_strindex) != kind {
                continue;
            }
            for sample in &p.samples {
                let stack = folded_stack(dict, sample.stack_index).expect("a stack");
                assert_eq!(sample.values.len(), sample.timestamps_unix_nano.len());
                for &t in &sample.timestamps_unix_nano {
                    assert!(t >= p.time_unix_nano && t < p.time_unix_nano + p.duration_nano);
                }
                out.push((stack, sample.values.iter().sum()));
            }
        }
        out.sort();
        out
    }

    /// An interval's weights: on-CPU, off-CPU and memory, in the order of [`KINDS`].
    fn interval(
        t0_s: u64,
        cpu: Vec<(u32, u32, u64)>,
        offcpu: Vec<(u32, u32, u64)>,
        mem: Vec<(u32, u32, u64)>,
    ) -> BatchInterval {
        BatchInterval {
            t0_ns: t0_s * 1_000_000_000,
            t1_ns: (t0_s + 1) * 1_000_000_000,
            weights: [cpu, offcpu, vec![], mem, vec![], vec![]],
        }
    }

    #[test]
    fn a_request_resolves_every_stack_through_its_own_dictionary() {
        let t = table();
        let intervals = vec![
            interval(0, vec![(7, 1, 3), (7, 2, 1)], vec![(7, 2, 5_000)], vec![]),
            interval(1, vec![(7, 1, 4)], vec![], vec![]),
        ];
        let req = profiles_request(
            &Resource::default(),
            &t,
            &intervals,
            1_700_000_000_000_000_000,
            Sampling {
                frequency_hz: 999,
                ..Sampling::default()
            },
        )
        .expect("weights");
        assert_eq!(
            folded(&req, "samples"),
            vec![("main;cold".into(), 1), ("main;hot".into(), 7)]
        );
        assert_eq!(folded(&req, "off_cpu"), vec![("main;cold".into(), 5_000)]);
        let dict = req.dictionary.expect("dictionary");
        // Only what is referenced: three frames, two stacks (and the zero entries).
        assert_eq!(dict.function_table.len(), 4);
        assert_eq!(dict.stack_table.len(), 3);
    }

    #[test]
    fn memory_weights_go_out_as_a_profile_of_bytes_with_its_period() {
        let t = table();
        let intervals = vec![
            interval(
                0,
                vec![(7, 1, 2)],
                vec![],
                vec![(7, 2, 65_536), (7, 1, 4_096)],
            ),
            interval(1, vec![], vec![], vec![(7, 2, 8_192)]),
        ];
        let sampling = Sampling {
            frequency_hz: 999,
            mem_period: 16,
            ..Sampling::default()
        };
        let req =
            profiles_request(&Resource::default(), &t, &intervals, 0, sampling).expect("weights");
        assert_eq!(
            folded(&req, "resident_growth"),
            vec![("main;cold".into(), 73_728), ("main;hot".into(), 4_096)]
        );
        let dict = req.dictionary.as_ref().expect("dictionary");
        let s = |i: i32| dict.string_table[i as usize].as_str();
        let profiles = &req.resource_profiles[0].scope_profiles[0].profiles;
        let mem = profiles
            .iter()
            .find(|p| s(p.sample_type.expect("type").type_strindex) == "resident_growth")
            .expect("a memory profile");
        assert_eq!(s(mem.sample_type.expect("type").unit_strindex), "bytes");
        let period = mem.period_type.expect("period type");
        assert_eq!(
            (s(period.type_strindex), s(period.unit_strindex)),
            ("page_faults", "count")
        );
        assert_eq!(mem.period, 16);
        // One profile per kind that has weight, each with its own id.
        assert_eq!(profiles.len(), 2);
        assert_ne!(profiles[0].profile_id, profiles[1].profile_id);
    }

    #[test]
    fn allocations_go_out_as_bytes_allocated_over_and_live_at_the_end_of_intervals() {
        let t = table();
        let s = |t0_s: u64, alloc: &[(u32, u64)], live: &[(u32, u64)]| {
            BatchInterval::from_allocs(t0_s * 1_000, (t0_s + 1) * 1_000, alloc, live)
        };
        let intervals = vec![
            s(0, &[(1, 4_096), (2, 512)], &[(1, 4_096)]),
            s(1, &[(1, 1_024)], &[(1, 3_072), (2, 256)]),
        ];
        let sampling = Sampling {
            alloc_rate: 524_288,
            ..Sampling::default()
        };
        let req = profiles_request(&Resource::default(), &t, &intervals, 10_000, sampling)
            .expect("weights");
        assert_eq!(
            folded(&req, "alloc_space"),
            vec![("main;cold".into(), 512), ("main;hot".into(), 5_120)]
        );
        let dict = req.dictionary.as_ref().expect("dictionary");
        let name = |i: i32| dict.string_table[i as usize].as_str();
        let profiles = &req.resource_profiles[0].scope_profiles[0].profiles;
        assert_eq!(
            profiles.len(),
            2,
            "no sampler kind: only the allocation kinds"
        );
        for p in profiles {
            let kind = name(p.sample_type.expect("type").type_strindex);
            let period = p.period_type.expect("period type");
            assert_eq!(
                (name(period.type_strindex), name(period.unit_strindex)),
                ("space", "bytes")
            );
            assert_eq!(p.period, 524_288);
            for sample in &p.samples {
                assert!(sample.attribute_indices.is_empty(), "no thread");
                let times: Vec<u64> = sample.timestamps_unix_nano.clone();
                match kind {
                    // Allocated over each interval: its middle.
                    "alloc_space" => assert!(times.iter().all(|t| t % 1_000 == 500)),
                    // Live at each interval's end.
                    "inuse_space" => assert!(times.iter().all(|t| t % 1_000 == 0)),
                    other => panic!("{other}"),
                }
            }
        }
        // Live bytes per stack at each end, at its time: the last is what the run ended with.
        let live = profiles
            .iter()
            .find(|p| name(p.sample_type.expect("type").type_strindex) == "inuse_space")
            .expect("a live profile");
        let mut at_end: Vec<(u64, i64)> = live
            .samples
            .iter()
            .flat_map(|s| {
                s.timestamps_unix_nano
                    .iter()
                    .copied()
                    .zip(s.values.iter().copied())
            })
            .filter(|&(t, _)| t == 12_000)
            .collect();
        at_end.sort_unstable();
        assert_eq!(at_end, [(12_000, 256), (12_000, 3_072)]);
    }

    #[test]
    fn intervals_without_weight_make_no_request() {
        let t = table();
        let empty = vec![BatchInterval::default()];
        assert!(
            profiles_request(&Resource::default(), &t, &empty, 0, Sampling::default()).is_none()
        );
    }

    #[test]
    fn a_stack_table_that_loops_ends_the_walk() {
        let mut chunk = StacksChunk::default();
        chunk.frames = vec![(0, "a".into())];
        chunk.stacks = vec![StackEntry {
            id: 0,
            parent: Some(0),
            frame: 0,
        }];
        let mut t = StackTable::default();
        t.add(&chunk);
        let mut out = Vec::new();
        t.frames(0, &mut out);
        assert_eq!(out.len(), MAX_DEPTH);
    }
}
