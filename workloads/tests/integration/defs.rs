//! The defs reader and writer: a fixed point on fixtures covering every attribute and on
//! generated definitions.

use std::path::PathBuf;

use benchtop_workloads::defs::generate::{generate, shape};
use benchtop_workloads::defs::{parse, write};

pub fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/defs")
        .join(name)
}

/// Parse → write → parse gives the same tree, and writing that tree the same text.
fn assert_fixed_point(text: &str, what: &str) {
    let first = parse(text).unwrap_or_else(|e| panic!("{what}: {e}"));
    let written = write(&first);
    let second = parse(&written).unwrap_or_else(|e| panic!("{what} as written: {e}\n{written}"));
    assert_eq!(first, second, "{what}");
    assert_eq!(write(&second), written, "{what}");
}

#[test]
fn every_fixture_is_a_fixed_point_of_parse_and_write() {
    for name in ["every-attribute.def", "ecflow-written.def"] {
        let text = std::fs::read_to_string(data(name)).unwrap();
        assert_fixed_point(&text, name);
    }
}

#[test]
fn the_every_attribute_fixture_has_every_attribute() {
    let text = std::fs::read_to_string(data("every-attribute.def")).unwrap();
    let defs = parse(&text).unwrap();
    let c = defs.counts();
    assert_eq!((c.suites, c.families, c.tasks), (2, 3, 6));
    assert_eq!(c.variables, 5);
    assert_eq!((c.triggers, c.completes), (6, 2));
    assert_eq!((c.events, c.meters, c.labels), (4, 2, 2));
    assert_eq!((c.limits, c.inlimits), (2, 4));
    assert_eq!((c.lates, c.times, c.repeats, c.defstatus), (3, 4, 6, 3));
    assert_eq!(c.others, 6);
    assert_eq!(defs.externs.len(), 2);
    // Eleven trigger and complete lines; two of them share one expression.
    assert_eq!(defs.exprs.len(), 10);
}

#[test]
fn ecflow_output_is_read_whole() {
    let text = std::fs::read_to_string(data("ecflow-written.def")).unwrap();
    let defs = parse(&text).unwrap();
    let c = defs.counts();
    assert_eq!((c.suites, c.families, c.tasks), (1, 2, 4));
    assert_eq!(
        (c.events, c.meters, c.labels, c.times, c.repeats),
        (3, 1, 1, 3, 5)
    );
    assert_eq!(defs.version.as_deref(), Some("5.9.2"));
    assert_eq!(defs.comments, [(1, " enddef".to_owned())]);
    assert_eq!(write(&defs), text);
}

#[test]
fn generated_definitions_are_a_fixed_point_and_keep_their_counts() {
    for (scale, seed) in [(0.0001, 1), (0.003, 2), (0.02, 3)] {
        let defs = generate(scale, seed);
        let text = write(&defs);
        let parsed = parse(&text).unwrap();
        assert_eq!(parsed.counts(), shape(scale), "scale {scale}");
        assert_eq!(parsed.counts(), defs.counts(), "scale {scale}");
        assert_fixed_point(&text, &format!("scale {scale}"));
    }
}
