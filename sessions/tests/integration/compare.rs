//! The differential folded text against `inferno-diff-folded`'s own output on the same
//! inputs (tests/data/compare: a.folded and b.folded cut from two ring recordings, tell
//! and ask; diff.folded and diff-normalized.folded written by `inferno-diff-folded a.folded
//! b.folded` and `inferno-diff-folded -n a.folded b.folded`, inferno 0.12).

use std::collections::BTreeSet;
use std::path::Path;

use benchtop_sessions::StackTree;
use benchtop_sessions::compare::diff_folded;

fn data(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/compare")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn tree(name: &str) -> StackTree {
    StackTree::read_folded(data(name).as_bytes(), name).unwrap()
}

/// Lines as a set: the order of inferno's output is not part of the format.
fn lines(text: &str) -> BTreeSet<&str> {
    text.lines().filter(|l| !l.is_empty()).collect()
}

#[test]
fn the_differential_folded_text_is_inferno_diff_foldeds() {
    let (a, b) = (tree("a.folded"), tree("b.folded"));
    let raw = diff_folded(&a, &b, false).unwrap();
    assert_eq!(lines(&raw), lines(&data("diff.folded")));
    let normalized = diff_folded(&a, &b, true).unwrap();
    assert_eq!(lines(&normalized), lines(&data("diff-normalized.folded")));
}
