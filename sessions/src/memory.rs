//! The memory profiles of a session for people: the stacks holding the most bytes of
//! each memory kind (page-fault growth, bytes allocated, bytes live at the peak and at
//! the end), as `show` and `compare` print them.
//!
//! ```
//! use benchtop_sessions::StackTree;
//! use benchtop_sessions::memory::top_stacks;
//!
//! let mut live = StackTree::new();
//! live.add_names(["ring", "main", "ask", "Vec::push"], 3 << 20);
//! live.add_names(["ring", "main", "tell"], 1 << 20);
//! let top = top_stacks(&live, 5);
//! assert_eq!(top[0].bytes, 3 << 20);
//! assert_eq!(top[0].percent, 75.0);
//! assert!(top[0].stack.ends_with("ask;Vec::push"));
//! ```

use std::fmt::{self, Write as _};

use serde::Serialize;

use crate::Kind;
use crate::escape::Escaped;
use crate::names::short_name;
use crate::units::human_bytes;
use crate::{Session, StackTree};

/// Frames of a stack kept (innermost) when it is shown on one line.
pub const SHOWN_FRAMES: usize = 4;
/// Stacks listed per memory kind by `show`.
pub const TOP_STACKS: usize = 5;
/// Characters of one frame's name on a `show` line.
const FRAME_WIDTH: usize = 40;

/// One stack and the bytes it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TopStack {
    /// Its innermost [`SHOWN_FRAMES`] frames, `;`-joined, after `…;` when cut; kernel
    /// frames (`_[k]`) left out.
    pub stack: String,
    /// Bytes.
    pub bytes: u64,
    /// Share of the profile's bytes, percent.
    pub percent: f64,
}

/// The top stacks of one memory kind of a session.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct MemoryTop {
    /// The kind's name: `mem`, `alloc`, `live` or `live-end`.
    pub kind: &'static str,
    /// Bytes in the profile.
    pub total_bytes: u64,
    /// The stacks holding the most, largest first.
    pub stacks: Vec<TopStack>,
}

/// The stacks of `tree` as `show` writes them (innermost [`SHOWN_FRAMES`] frames, kernel
/// frames left out), stacks alike once cut counted as one, sorted by that text.
fn collapsed(tree: &StackTree) -> Vec<(String, u64)> {
    let mut all: Vec<(String, u64)> = Vec::new();
    tree.for_each_stack(|frames, weight| {
        let names: Vec<&str> = frames
            .iter()
            .map(|&f| tree.name(f))
            .filter(|name| !name.ends_with("_[k]"))
            .collect();
        let cut = names.len().saturating_sub(SHOWN_FRAMES);
        let mut stack = if cut > 0 {
            "…;".to_owned()
        } else {
            String::new()
        };
        stack.push_str(&names[cut..].join(";"));
        all.push((stack, weight));
    });
    // Stacks that differ only in kernel frames or outer callers are shown as one.
    all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    all.dedup_by(|later, kept| {
        if later.0 == kept.0 {
            kept.1 = kept.1.saturating_add(later.1);
            true
        } else {
            false
        }
    });
    all
}

/// The `n` stacks of `tree` with the most bytes, largest first (ties by name).
pub fn top_stacks(tree: &StackTree, n: usize) -> Vec<TopStack> {
    let total = tree.total_weight().max(1) as f64;
    let mut all = collapsed(tree);
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    all.truncate(n);
    all.into_iter()
        .map(|(stack, bytes)| TopStack {
            stack,
            bytes,
            percent: bytes as f64 * 100.0 / total,
        })
        .collect()
}

/// One stack of a memory profile in two sessions.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct StackPair {
    /// The stack as [`TopStack::stack`] writes it.
    pub stack: String,
    /// Its bytes in A.
    pub a_bytes: u64,
    /// Its bytes in B.
    pub b_bytes: u64,
}

/// The top stacks of one memory kind in two sessions: `compare`'s table.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct MemoryPairs {
    /// The kind's name: `mem`, `alloc`, `live` or `live-end`.
    pub kind: &'static str,
    /// Bytes in A's profile and in B's.
    pub a_total: u64,
    /// Bytes in B's profile.
    pub b_total: u64,
    /// The stacks holding the most in either, largest first.
    pub stacks: Vec<StackPair>,
}

/// The `n` stacks holding the most bytes in `a` or `b` (the larger of the two), largest
/// first, with their bytes in each.
pub fn top_pairs(kind: Kind, a: &StackTree, b: &StackTree, n: usize) -> MemoryPairs {
    let (a_all, b_all) = (collapsed(a), collapsed(b));
    let mut pairs: Vec<StackPair> = Vec::with_capacity(a_all.len() + b_all.len());
    let (mut i, mut j) = (0, 0);
    // Both sorted by stack text: merged as two sorted lists.
    while i < a_all.len() || j < b_all.len() {
        let order = match (a_all.get(i), b_all.get(j)) {
            (Some(x), Some(y)) => x.0.cmp(&y.0),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        let (stack, a_bytes, b_bytes) = match order {
            std::cmp::Ordering::Less => {
                i += 1;
                (a_all[i - 1].0.clone(), a_all[i - 1].1, 0)
            }
            std::cmp::Ordering::Greater => {
                j += 1;
                (b_all[j - 1].0.clone(), 0, b_all[j - 1].1)
            }
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
                (a_all[i - 1].0.clone(), a_all[i - 1].1, b_all[j - 1].1)
            }
        };
        pairs.push(StackPair {
            stack,
            a_bytes,
            b_bytes,
        });
    }
    pairs.sort_by(|x, y| {
        y.a_bytes
            .max(y.b_bytes)
            .cmp(&x.a_bytes.max(x.b_bytes))
            .then_with(|| x.stack.cmp(&y.stack))
    });
    pairs.truncate(n);
    MemoryPairs {
        kind: kind.name(),
        a_total: a.total_weight(),
        b_total: b.total_weight(),
        stacks: pairs,
    }
}

/// `compare`'s memory sections: per kind, both totals and the top stacks A → B.
pub fn write_memory_pairs(all: &[MemoryPairs], out: &mut String) -> fmt::Result {
    for pairs in all {
        let kind = memory_kind(pairs.kind);
        writeln!(
            out,
            "
memory: {} ({}; A → B: {} → {})",
            kind.title(),
            kind.folded_file(),
            human_bytes(pairs.a_total),
            human_bytes(pairs.b_total)
        )?;
        for p in &pairs.stacks {
            writeln!(
                out,
                "  {:>10} → {:>10}  {}",
                human_bytes(p.a_bytes),
                human_bytes(p.b_bytes),
                Escaped(&shown(&p.stack))
            )?;
        }
    }
    Ok(())
}

/// The memory profile named `name` (`mem`, `alloc`, `live`…); resident growth for a
/// name it does not know.
fn memory_kind(name: &str) -> Kind {
    Kind::MEMORY
        .into_iter()
        .find(|k| k.name() == name)
        .unwrap_or(Kind::Mem)
}

/// A stack as the text sections show it: each frame's name shortened.
fn shown(stack: &str) -> String {
    let frames: Vec<String> = stack
        .split(';')
        .map(|f| short_name(f, FRAME_WIDTH))
        .collect();
    frames.join(";")
}

/// The top stacks of every memory profile `session` has, in [`Kind::MEMORY`] order.
pub fn memory_tops(session: &Session, n: usize) -> Vec<MemoryTop> {
    Kind::MEMORY
        .into_iter()
        .filter_map(|kind| {
            let tree = session.profile(kind).filter(|t| !t.is_empty())?;
            Some(MemoryTop {
                kind: kind.name(),
                total_bytes: tree.total_weight(),
                stacks: top_stacks(tree, n),
            })
        })
        .collect()
}

/// `show`'s memory sections: per kind, its total and top stacks.
pub fn write_memory_tops(tops: &[MemoryTop], out: &mut String) -> fmt::Result {
    for top in tops {
        let kind = memory_kind(top.kind);
        writeln!(
            out,
            "\nmemory: {} ({}, {} in all)",
            kind.title(),
            kind.folded_file(),
            human_bytes(top.total_bytes)
        )?;
        for s in &top.stacks {
            writeln!(
                out,
                "  {:5.1}%  {:>10}  {}",
                s.percent,
                human_bytes(s.bytes),
                Escaped(&shown(&s.stack))
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_ranked_by_bytes_and_cut_to_their_innermost_frames() {
        let mut t = StackTree::new();
        t.add_names(["p", "main", "a", "b", "c", "d", "memset"], 300);
        t.add_names(
            ["p", "main", "big_b", "memset", "asm_exc_page_fault_[k]"],
            100,
        );
        let top = top_stacks(&t, 5);
        assert_eq!(top.len(), 2);
        assert_eq!(top[0].stack, "…;b;c;d;memset");
        assert_eq!((top[0].bytes, top[0].percent), (300, 75.0));
        assert_eq!(
            top[1].stack, "p;main;big_b;memset",
            "kernel frames left out"
        );
        assert_eq!(top_stacks(&t, 1).len(), 1);
    }

    #[test]
    fn pairs_rank_stacks_by_their_larger_side_and_keep_both() {
        let mut a = StackTree::new();
        a.add_names(["p", "grow"], 100);
        a.add_names(["p", "gone"], 400);
        let mut b = StackTree::new();
        b.add_names(["p", "grow"], 900);
        b.add_names(["p", "new"], 50);
        let pairs = top_pairs(Kind::Live, &a, &b, 2);
        assert_eq!(
            (pairs.kind, pairs.a_total, pairs.b_total),
            ("live", 500, 950)
        );
        let rows: Vec<_> = pairs
            .stacks
            .iter()
            .map(|p| (p.stack.as_str(), p.a_bytes, p.b_bytes))
            .collect();
        assert_eq!(rows, [("p;grow", 100, 900), ("p;gone", 400, 0)]);
        let mut out = String::new();
        write_memory_pairs(&[pairs], &mut out).unwrap();
        assert!(
            out.contains("memory: live at peak (live.folded; A → B: 500 B → 950 B)"),
            "{out}"
        );
        assert!(out.contains("100 B →      900 B  p;grow"), "{out}");
    }

    #[test]
    fn stacks_alike_once_cut_are_counted_as_one() {
        let mut t = StackTree::new();
        t.add_names(["p", "x", "a", "b", "c", "d"], 5);
        t.add_names(["p", "y", "a", "b", "c", "d"], 7);
        let top = top_stacks(&t, 5);
        assert_eq!(top.len(), 1);
        assert_eq!(top[0].bytes, 12);
    }
}
