//! A session's stacks as a pprof profile (`profile.pb.gz`): gzip-compressed protocol
//! buffers in the format of
//! <https://github.com/google/pprof/blob/main/proto/profile.proto>, which `go tool pprof`,
//! Pyroscope and Parca read. This is how a session reaches fleet-scale tools.
//!
//! One profile holds every stack file the kind table marks as carried by pprof, each as
//! its sample types: today `samples/count` and `cpu/nanoseconds` (from cpu.folded; the
//! default type) and `off_cpu/nanoseconds` (from offcpu.folded). The leading process frame of every stack — and the thread frame, when
//! the session was recorded with `--per-thread` or the stack is a `[blocked: …]` one —
//! becomes the sample's `process` and `thread` labels rather than a frame, as profilers
//! that label samples do; `go tool pprof -tagroot=process,thread` puts them back on top.
//! Every sample also carries `workload`, `host`, `session` and one `param_<name>` label per
//! workload parameter.
//!
//! ```
//! use benchtop_sessions::pprof::{Profile, decode};
//! # use benchtop_sessions::{ByKind, Kind, StackTree, meta::{HostInfo, WorkloadInfo}, SessionMeta};
//! # let meta = SessionMeta::new("s", WorkloadInfo::new("ring", Default::default()),
//! #     HostInfo::default(), "2026-11-01T10:00:00Z");
//! let mut cpu = StackTree::new();
//! cpu.add_names(["bt-ring", "main", "ring::hop"], 30);
//! let profiles: ByKind<Option<&StackTree>> = [(Kind::Cpu, Some(&cpu))].into_iter().collect();
//! let bytes = benchtop_sessions::pprof::encode(&meta, &profiles, 1.5);
//! let profile: Profile = decode(&bytes)?;
//! assert_eq!(profile.sample.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use prost::Message;

use crate::kinds::{KINDS, Kind, KindSet, KindSpec, WeightUnit};
use crate::{ByKind, SessionMeta, StackTree};

/// The frame that stands for off-CPU time without a sampled stack starts with this.
const BLOCKED_PREFIX: &str = "[blocked:";

/// pprof's `Profile` message (the fields benchtop writes and reads).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// What each value of a sample measures.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// Binaries mapped into the process (none: frames are symbolized already).
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// Code locations.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// Functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string of the profile; index 0 is the empty string.
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// When the profile was taken, nanoseconds since the Unix epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long it was taken for.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What one sampling period is.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// The sampling period, in `period_type`'s unit.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-text comments (string table indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type a viewer shows first (string table index).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// A type and unit, as string table indices.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    /// e.g. `cpu`.
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// e.g. `nanoseconds`.
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// One stack with its values and labels.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Locations, innermost (leaf) first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A label: key and string value (string table indices).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    /// Key.
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String value.
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// Numeric value (unused by benchtop).
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// Unit of the numeric value.
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// A mapped binary (benchtop writes none; kept so foreign profiles decode).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    /// Id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// File name (string table index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
}

/// A code location: one frame.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    /// Id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Mapping (0: none).
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// Address (0: unknown, frames are symbolized already).
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// The function(s) at this location.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// A function at a location.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    /// Function id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Source line (0: unknown).
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// A function.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    /// Id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Name (string table index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Name as the system knows it (string table index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Source file (string table index).
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

impl Profile {
    /// The string at `index` of the string table (empty when out of range).
    pub fn string(&self, index: i64) -> &str {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.string_table.get(i))
            .map_or("", String::as_str)
    }

    /// The value of label `key` on `sample`, if it has one.
    pub fn label<'a>(&'a self, sample: &Sample, key: &str) -> Option<&'a str> {
        sample
            .label
            .iter()
            .find(|l| self.string(l.key) == key)
            .map(|l| self.string(l.str))
    }

    /// The frames of `sample`, outermost first, by function name.
    pub fn frames(&self, sample: &Sample) -> Vec<&str> {
        let names: HashMap<u64, &str> = self
            .function
            .iter()
            .map(|f| (f.id, self.string(f.name)))
            .collect();
        let locations: HashMap<u64, &Location> = self.location.iter().map(|l| (l.id, l)).collect();
        sample
            .location_id
            .iter()
            .rev()
            .filter_map(|id| locations.get(id))
            .flat_map(|l| l.line.iter().rev())
            .map(|line| names.get(&line.function_id).copied().unwrap_or(""))
            .collect()
    }
}

/// Builds the profile as it is written: strings, functions and locations go out as they are
/// made (each batch a profile of its own: profiles concatenated are one profile whose
/// repeated fields are appended, the protocol buffer rule), then each sample; the fixed
/// fields come last. Memory holds the strings of labels, a location id per frame of the
/// trees and one sample, whatever the number of stacks.
struct Builder {
    /// The fixed fields (sample types, period, times, comment), written at the end.
    profile: Profile,
    /// Label and type strings, interned once; frame names are interned through
    /// `frames`.
    strings: HashMap<String, i64>,
    next_string: i64,
    next_location: u64,
    /// Strings, functions and locations made and not yet written.
    pending: Profile,
    /// Labels every sample carries: (key, value) indices.
    common: Vec<Label>,
}

impl Builder {
    fn new() -> Self {
        let mut b = Builder {
            profile: Profile::default(),
            strings: HashMap::new(),
            next_string: 0,
            next_location: 1,
            pending: Profile::default(),
            common: Vec::new(),
        };
        b.string("");
        b
    }

    /// A new string table entry.
    fn push_string(&mut self, s: &str) -> i64 {
        let i = self.next_string;
        self.next_string += 1;
        self.pending.string_table.push(s.to_owned());
        i
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.push_string(s);
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn value_type(&mut self, kind: &str, unit: &str) -> ValueType {
        ValueType {
            r#type: self.string(kind),
            unit: self.string(unit),
        }
    }

    fn label(&mut self, key: &str, value: &str) -> Label {
        Label {
            key: self.string(key),
            str: self.string(value),
            ..Label::default()
        }
    }

    /// A new function and location named `frame`.
    fn new_location(&mut self, frame: &str) -> u64 {
        let id = self.next_location;
        self.next_location += 1;
        let name = self.push_string(frame);
        self.pending.function.push(Function {
            id,
            name,
            system_name: name,
            filename: 0,
        });
        self.pending.location.push(Location {
            id,
            mapping_id: 0,
            address: 0,
            line: vec![Line {
                function_id: id,
                line: 0,
            }],
        });
        id
    }

    /// Writes what was made and not written yet.
    fn flush_pending(&mut self, out: &mut impl Write, buf: &mut Vec<u8>) -> std::io::Result<()> {
        if self.pending == Profile::default() {
            return Ok(());
        }
        buf.clear();
        // Encoding into a Vec cannot fail.
        let _ = self.pending.encode(buf);
        self.pending = Profile::default();
        out.write_all(buf)
    }

    /// Writes `tree`'s stacks to `out` as samples whose three values `values(weight)`
    /// gives, one at a time. `locations` holds the location of each of the tree's frames
    /// made so far (0: none), `other` the tree written before and its locations, whose
    /// frames of the same name are reused: one location per distinct name.
    fn add_tree(
        &mut self,
        tree: &StackTree,
        per_thread: bool,
        values: impl Fn(u64) -> Vec<i64>,
        other: Option<(&StackTree, &[u64])>,
        out: &mut impl Write,
    ) -> std::io::Result<Vec<u64>> {
        let mut locations = vec![0u64; tree.frame_count()];
        let mut result = Ok(());
        let mut one = Profile::default();
        let mut buf = Vec::new();
        let mut names: Vec<crate::FrameId> = Vec::new();
        tree.for_each_stack(|stack, weight| {
            if result.is_err() {
                return;
            }
            names.clear();
            names.extend_from_slice(stack);
            let (process, rest) = match names.split_first() {
                Some((process, rest)) => (Some(*process), rest),
                None => (None, &names[..]),
            };
            let thread_frame = per_thread
                || rest
                    .get(1)
                    .is_some_and(|&frame| tree.name(frame).starts_with(BLOCKED_PREFIX));
            let (thread, code) = match rest.split_first() {
                Some((thread, code)) if thread_frame => (Some(*thread), code),
                _ => (None, rest),
            };
            let mut label = self.common.clone();
            if let Some(process) = process {
                label.push(self.label("process", tree.name(process)));
            }
            if let Some(thread) = thread {
                label.push(self.label("thread", tree.name(thread)));
            }
            let mut location_id = Vec::with_capacity(code.len());
            for &frame in code.iter().rev() {
                let slot = frame.0 as usize;
                let known = locations.get(slot).copied().unwrap_or(0);
                let id = if known != 0 {
                    known
                } else {
                    let name = tree.name(frame);
                    let shared = other
                        .and_then(|(t, l)| l.get(t.find(name)?.0 as usize).copied())
                        .filter(|&id| id != 0);
                    let id = shared.unwrap_or_else(|| self.new_location(name));
                    if let Some(l) = locations.get_mut(slot) {
                        *l = id;
                    }
                    id
                };
                location_id.push(id);
            }
            result = self.flush_pending(out, &mut buf);
            if result.is_err() {
                return;
            }
            one.sample.clear();
            one.sample.push(Sample {
                location_id,
                value: values(weight),
                label,
            });
            buf.clear();
            // Encoding into a Vec cannot fail.
            let _ = one.encode(&mut buf);
            result = out.write_all(&buf);
        });
        result.map(|()| locations)
    }
}

/// The session's stacks as a gzip-compressed pprof profile: each kind the table marks as
/// carried by pprof ([`Exports::pprof`](crate::kinds::Exports::pprof)) with its sample
/// type, weights converted from its folded file's unit (samples taken at
/// `meta.sampling.frequency_hz` also as CPU time); `duration_s` is how long the run lasted.
pub fn encode(
    meta: &SessionMeta,
    profiles: &ByKind<Option<&StackTree>>,
    duration_s: f64,
) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = encode_to(meta, profiles, duration_s, &mut out);
    out
}

/// The unit a pprof value type names, as the kind table's units.
fn unit_of(name: &str) -> Option<WeightUnit> {
    match name {
        "count" => Some(WeightUnit::Samples),
        "nanoseconds" => Some(WeightUnit::Nanoseconds),
        "microseconds" => Some(WeightUnit::Microseconds),
        "bytes" => Some(WeightUnit::Bytes),
        _ => None,
    }
}

/// [`encode`], written to `out` as it is made: memory holds the string, function and
/// location tables (one entry per distinct name) and one sample at a time, whatever the
/// number of stacks.
pub fn encode_to(
    meta: &SessionMeta,
    profiles: &ByKind<Option<&StackTree>>,
    duration_s: f64,
    out: impl Write,
) -> std::io::Result<()> {
    let mut gz = GzEncoder::new(out, Compression::default());
    let mut b = Builder::new();
    let period_ns = match meta.sampling.frequency_hz {
        0 => 0,
        hz => 1_000_000_000 / hz as i64,
    };
    // The value columns: each exported kind's sample type, weighed from its folded unit;
    // a kind counted in samples also as its period type (samples × the period). On- and
    // off-CPU always have theirs; a kind named on its own (waits) only when present.
    let mut columns: Vec<(Kind, i64)> = Vec::new();
    let mut period_type = None;
    let wanted = |k: &&KindSpec| {
        k.exports.pprof && (KindSet::BOTH.contains(k.kind) || profiles[k.kind].is_some())
    };
    for spec in KINDS.iter().filter(wanted) {
        let (name, unit) = spec.sample_types.sample;
        let scale = unit_of(unit)
            .and_then(|u| u.per(spec.folded_unit))
            .map_or(1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let sample = b.value_type(name, unit);
        b.profile.sample_type.push(sample);
        columns.push((spec.kind, scale));
        if spec.folded_unit == WeightUnit::Samples {
            let (name, unit) = spec.sample_types.period;
            let period = b.value_type(name, unit);
            if period_type.is_none() {
                period_type = Some(period.clone());
            }
            b.profile.sample_type.push(period);
            columns.push((spec.kind, period_ns));
        }
    }
    let default = period_type
        .as_ref()
        .or(b.profile.sample_type.first())
        .map_or(0, |t| t.r#type);
    b.profile.default_sample_type = default;
    b.profile.period_type = period_type;
    b.profile.period = period_ns;
    b.profile.time_nanos = humantime::parse_rfc3339_weak(&meta.started_at)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64);
    b.profile.duration_nanos = (duration_s.max(0.0) * 1e9) as i64;
    let comment = format!(
        "benchtop {} session {}: {}",
        meta.benchtop_version,
        meta.id,
        meta.command_line.join(" ")
    );
    let comment = b.string(&comment);
    b.profile.comment.push(comment);

    let mut common = vec![
        b.label("workload", &meta.workload.name),
        b.label("host", &meta.host.hostname),
        b.label("session", &meta.id),
    ];
    for (name, value) in &meta.workload.params {
        let key = format!(
            "param_{}",
            name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        );
        let value = match value {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        common.push(b.label(&key, &value));
    }
    b.common = common;

    let per_thread = meta.sampling.per_thread;
    // Weights past i64::MAX (hostile files) saturate rather than wrap.
    let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    // Later kinds' frames share the first tree's locations where their names match.
    let mut first: Option<(&StackTree, Vec<u64>)> = None;
    for (kind, tree) in profiles.iter() {
        let Some(tree) = *tree else { continue };
        if !kind.spec().exports.pprof {
            continue;
        }
        let values = |n: u64| {
            columns
                .iter()
                .map(|&(k, scale)| match k == kind {
                    true => signed(n).saturating_mul(scale),
                    false => 0,
                })
                .collect()
        };
        let shared = first.as_ref().map(|(t, l)| (*t, &l[..]));
        let locations = b.add_tree(tree, per_thread, values, shared, &mut gz)?;
        first.get_or_insert((tree, locations));
    }
    // What is left of the tables, then the fixed fields.
    let mut buf = Vec::new();
    b.flush_pending(&mut gz, &mut buf)?;
    gz.write_all(&b.profile.encode_to_vec())?;
    gz.finish()?.flush()
}

/// [`encode`] for a loaded session: its stacks over its duration.
pub fn encode_session(session: &crate::Session) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = encode_session_to(session, &mut out);
    out
}

/// [`encode_session`], written to `out` as it is made (see [`encode_to`]).
pub fn encode_session_to(session: &crate::Session, out: impl Write) -> std::io::Result<()> {
    encode_to(
        &session.meta,
        &session.profiles.map_ref(|_, p| p.as_ref()),
        session.duration().map_or(0.0, |d| d.as_secs_f64()),
        out,
    )
}

/// Why a profile does not decode.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The gzip layer is broken.
    #[error("not gzip-compressed: {0}")]
    Gzip(#[from] std::io::Error),
    /// The protocol buffer inside is not a profile.
    #[error("not a pprof profile: {0}")]
    Protobuf(#[from] prost::DecodeError),
}

/// Decodes a pprof profile, gzip-compressed as `profile.pb.gz` is (or not).
pub fn decode(bytes: &[u8]) -> Result<Profile, DecodeError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut raw = Vec::new();
        GzDecoder::new(bytes).read_to_end(&mut raw)?;
        Ok(Profile::decode(&raw[..])?)
    } else {
        Ok(Profile::decode(bytes)?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn both<'a>(
        cpu: Option<&'a StackTree>,
        off: Option<&'a StackTree>,
    ) -> ByKind<Option<&'a StackTree>> {
        [(Kind::Cpu, cpu), (Kind::OffCpu, off)]
            .into_iter()
            .collect()
    }
    use crate::meta::{HostInfo, WorkloadInfo};

    fn meta(per_thread: bool) -> SessionMeta {
        let mut params = std::collections::BTreeMap::new();
        params.insert("num-nodes".to_owned(), serde_json::json!(100));
        params.insert("mode".to_owned(), serde_json::json!("tell"));
        let mut host = HostInfo::default();
        host.hostname = "bench-1".into();
        let mut meta = SessionMeta::new(
            "20261101-100000-ring",
            WorkloadInfo::new("ring", params),
            host,
            "2026-11-01T10:00:00Z",
        );
        meta.sampling.frequency_hz = 1000;
        meta.sampling.per_thread = per_thread;
        meta
    }

    #[test]
    fn stacks_become_samples_with_the_process_as_a_label_and_values_per_type() {
        let mut cpu = StackTree::new();
        cpu.add_names(["bt-ring", "main", "ring::hop"], 30);
        cpu.add_names(["bt-ring", "main"], 10);
        let mut off = StackTree::new();
        off.add_names(["bt-ring", "main", "futex_wait_[k]"], 2_000);
        let p = decode(&encode(&meta(false), &both(Some(&cpu), Some(&off)), 2.0)).unwrap();

        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (p.string(t.r#type), p.string(t.unit)))
            .collect();
        assert_eq!(
            types,
            [
                ("samples", "count"),
                ("cpu", "nanoseconds"),
                ("off_cpu", "nanoseconds")
            ]
        );
        assert_eq!(p.string(p.default_sample_type), "cpu");
        assert_eq!(p.period, 1_000_000);
        assert_eq!(p.duration_nanos, 2_000_000_000);
        assert_eq!(p.time_nanos, 1_793_527_200_000_000_000);

        let mut found: Vec<(Vec<&str>, Vec<i64>)> = p
            .sample
            .iter()
            .map(|s| (p.frames(s), s.value.clone()))
            .collect();
        found.sort();
        assert_eq!(
            found,
            [
                (vec!["main"], vec![10, 10_000_000, 0]),
                (vec!["main", "futex_wait_[k]"], vec![0, 0, 2_000_000]),
                (vec!["main", "ring::hop"], vec![30, 30_000_000, 0]),
            ]
        );
        let s = &p.sample[0];
        assert_eq!(p.label(s, "process"), Some("bt-ring"));
        assert_eq!(p.label(s, "thread"), None);
        assert_eq!(p.label(s, "workload"), Some("ring"));
        assert_eq!(p.label(s, "host"), Some("bench-1"));
        assert_eq!(p.label(s, "session"), Some("20261101-100000-ring"));
        assert_eq!(p.label(s, "param_num_nodes"), Some("100"));
        assert_eq!(p.label(s, "param_mode"), Some("tell"));
        // One function per distinct frame.
        assert_eq!(p.function.len(), 3);
    }

    #[test]
    fn the_thread_frame_is_a_label_per_thread_and_for_blocked_time_without_stacks() {
        let mut cpu = StackTree::new();
        cpu.add_names(["bt-ring", "worker-1", "ring::hop"], 5);
        let p = decode(&encode(&meta(true), &both(Some(&cpu), None), 1.0)).unwrap();
        assert_eq!(p.label(&p.sample[0], "thread"), Some("worker-1"));
        assert_eq!(p.frames(&p.sample[0]), ["ring::hop"]);

        let mut off = StackTree::new();
        let blocked = "[blocked: no stack — kernel sampling not permitted]";
        off.add_names(["bt-ring", "worker-2", blocked], 7);
        let p = decode(&encode(&meta(false), &both(None, Some(&off)), 1.0)).unwrap();
        assert_eq!(p.label(&p.sample[0], "thread"), Some("worker-2"));
        assert_eq!(p.frames(&p.sample[0]), [blocked]);
    }

    #[test]
    fn garbage_is_a_decode_error_not_a_panic() {
        assert!(matches!(
            decode(&[0x1f, 0x8b, 1, 2, 3]),
            Err(DecodeError::Gzip(_))
        ));
        assert!(matches!(
            decode(&[0xff, 0xff, 0xff]),
            Err(DecodeError::Protobuf(_))
        ));
    }
}
