//! One line of stacks.jsonl, read and written by hand rather than derived, so that each
//! kind's interval weights sit under the field the kind table names
//! ([`KindSpec::interval_field`](crate::kinds::KindSpec::interval_field)) and a kind
//! added to the table is read and written without a line changed here.

use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::by_kind::ByKind;
use crate::kinds::{KINDS, Kind};

/// (tid, stack, weight) rows of one kind in one interval line.
pub(super) type Rows = Vec<(u32, u32, u64)>;

/// One line of stacks.jsonl; exactly one group of fields is set.
#[derive(Debug, Default)]
pub(super) struct Line {
    pub(super) format: Option<u32>,
    pub(super) frames: Option<Vec<(u32, String)>>,
    pub(super) stacks: Option<Vec<(u32, Option<u32>, u32)>>,
    pub(super) threads: Option<Vec<(u32, String)>>,
    pub(super) interval: Option<u32>,
    pub(super) t0_ns: Option<u64>,
    pub(super) t1_ns: Option<u64>,
    /// Each kind's rows, under its `interval_field`.
    pub(super) weights: ByKind<Option<Rows>>,
    pub(super) files: Option<Vec<(u32, String)>>,
    pub(super) lines: Option<Vec<(u32, u32, u32, u64)>>,
    pub(super) samples: Option<Vec<(u64, u32, u32)>>,
    pub(super) long_waits: Option<Vec<(u64, u64, u32, u32)>>,
}

/// Appends `line` and its newline to `out`.
pub(super) fn push_line(out: &mut Vec<u8>, line: &Line) {
    // Serializing plain numbers and strings into a Vec cannot fail.
    if serde_json::to_writer(&mut *out, line).is_ok() {
        out.push(b'\n');
    }
}

impl Serialize for Line {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        fn entry<M: SerializeMap, T: Serialize>(
            m: &mut M,
            key: &str,
            value: &Option<T>,
        ) -> Result<(), M::Error> {
            match value {
                Some(v) => m.serialize_entry(key, v),
                None => Ok(()),
            }
        }
        let mut m = s.serialize_map(None)?;
        entry(&mut m, "format", &self.format)?;
        entry(&mut m, "frames", &self.frames)?;
        entry(&mut m, "stacks", &self.stacks)?;
        entry(&mut m, "threads", &self.threads)?;
        entry(&mut m, "interval", &self.interval)?;
        entry(&mut m, "t0_ns", &self.t0_ns)?;
        entry(&mut m, "t1_ns", &self.t1_ns)?;
        for (kind, rows) in self.weights.iter() {
            if let Some(field) = kind.spec().interval_field {
                entry(&mut m, field, rows)?;
            }
        }
        entry(&mut m, "files", &self.files)?;
        entry(&mut m, "lines", &self.lines)?;
        entry(&mut m, "samples", &self.samples)?;
        entry(&mut m, "long_waits", &self.long_waits)?;
        m.end()
    }
}

/// A field of a line.
enum Key {
    Format,
    Frames,
    Stacks,
    Threads,
    Interval,
    T0,
    T1,
    Weights(Kind),
    Files,
    Lines,
    Samples,
    LongWaits,
    /// A field this build does not know: skipped, as a newer recorder may add fields.
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(match v {
                    "format" => Key::Format,
                    "frames" => Key::Frames,
                    "stacks" => Key::Stacks,
                    "threads" => Key::Threads,
                    "interval" => Key::Interval,
                    "t0_ns" => Key::T0,
                    "t1_ns" => Key::T1,
                    "files" => Key::Files,
                    "lines" => Key::Lines,
                    "samples" => Key::Samples,
                    "long_waits" => Key::LongWaits,
                    other => KINDS
                        .iter()
                        .find(|k| k.interval_field == Some(other))
                        .map_or(Key::Other, |k| Key::Weights(k.kind)),
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Line {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Line, D::Error> {
        struct LineVisitor;
        impl<'de> Visitor<'de> for LineVisitor {
            type Value = Line;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a stacks.jsonl line (a JSON object)")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Line, A::Error> {
                /// Sets a field once: a field given twice is refused, as a derived
                /// reader refuses it.
                fn once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
                    map: &mut A,
                    slot: &mut Option<T>,
                    name: &'static str,
                ) -> Result<(), A::Error> {
                    if slot.is_some() {
                        return Err(de::Error::duplicate_field(name));
                    }
                    *slot = map.next_value()?;
                    Ok(())
                }
                let mut l = Line::default();
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Format => once(&mut map, &mut l.format, "format")?,
                        Key::Frames => once(&mut map, &mut l.frames, "frames")?,
                        Key::Stacks => once(&mut map, &mut l.stacks, "stacks")?,
                        Key::Threads => once(&mut map, &mut l.threads, "threads")?,
                        Key::Interval => once(&mut map, &mut l.interval, "interval")?,
                        Key::T0 => once(&mut map, &mut l.t0_ns, "t0_ns")?,
                        Key::T1 => once(&mut map, &mut l.t1_ns, "t1_ns")?,
                        Key::Weights(kind) => {
                            let name = kind.spec().interval_field.unwrap_or("weights");
                            once(&mut map, &mut l.weights[kind], name)?;
                        }
                        Key::Files => once(&mut map, &mut l.files, "files")?,
                        Key::Lines => once(&mut map, &mut l.lines, "lines")?,
                        Key::Samples => once(&mut map, &mut l.samples, "samples")?,
                        Key::LongWaits => once(&mut map, &mut l.long_waits, "long_waits")?,
                        Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(l)
            }
        }
        d.deserialize_map(LineVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Line, serde_json::Error> {
        serde_json::from_str(s)
    }

    #[test]
    fn each_kinds_rows_are_read_from_and_written_to_its_own_field() {
        let text = r#"{"interval":3,"t0_ns":0,"t1_ns":10,"cpu":[[1,2,3]],"offcpu":[[1,2,4000]],"mem":[[5,6,4096]]}"#;
        let line = parse(text).expect("a line");
        assert_eq!(line.interval, Some(3));
        assert_eq!(line.weights[Kind::Cpu], Some(vec![(1, 2, 3)]));
        assert_eq!(line.weights[Kind::OffCpu], Some(vec![(1, 2, 4000)]));
        assert_eq!(line.weights[Kind::Mem], Some(vec![(5, 6, 4096)]));
        assert_eq!(line.weights[Kind::Alloc], None);
        let mut out = Vec::new();
        push_line(&mut out, &line);
        assert_eq!(String::from_utf8(out).expect("utf-8"), format!("{text}\n"));
    }

    #[test]
    fn unknown_fields_are_skipped_and_a_field_given_twice_is_refused() {
        let line = parse(r#"{"format":1,"from_a_newer_build":{"x":[1,2]}}"#).expect("a line");
        assert_eq!(line.format, Some(1));
        let err = parse(r#"{"cpu":[],"cpu":[[1,1,1]]}"#).expect_err("cpu twice");
        assert!(err.to_string().contains("duplicate field `cpu`"), "{err}");
        assert!(parse(r#"{"cpu":"many"}"#).is_err(), "rows are arrays");
        assert!(parse("[1,2]").is_err(), "a line is an object");
    }

    #[test]
    fn a_header_line_has_no_empty_fields() {
        let mut out = Vec::new();
        push_line(
            &mut out,
            &Line {
                format: Some(1),
                ..Line::default()
            },
        );
        assert_eq!(out, b"{\"format\":1}\n");
    }
}
