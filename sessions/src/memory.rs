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

use crate::escape::Escaped;
use crate::names::short_name;
use crate::store::StackKind;
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

/// The `n` stacks of `tree` with the most bytes, largest first (ties by name).
pub fn top_stacks(tree: &StackTree, n: usize) -> Vec<TopStack> {
    let total = tree.total_weight().max(1) as f64;
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

/// The top stacks of every memory profile `session` has, in [`StackKind::MEMORY`] order.
pub fn memory_tops(session: &Session, n: usize) -> Vec<MemoryTop> {
    StackKind::MEMORY
        .into_iter()
        .filter_map(|kind| {
            let tree = session.memory.get(kind).filter(|t| !t.is_empty())?;
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
        let kind = StackKind::MEMORY
            .into_iter()
            .find(|k| k.name() == top.kind)
            .unwrap_or(StackKind::Mem);
        writeln!(
            out,
            "\nmemory: {} ({}, {} in all)",
            kind.title(),
            kind.folded_file(),
            human_bytes(top.total_bytes)
        )?;
        for s in &top.stacks {
            let shown: Vec<String> = s
                .stack
                .split(';')
                .map(|f| short_name(f, FRAME_WIDTH))
                .collect();
            writeln!(
                out,
                "  {:5.1}%  {:>10}  {}",
                s.percent,
                human_bytes(s.bytes),
                Escaped(&shown.join(";"))
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
    fn stacks_alike_once_cut_are_counted_as_one() {
        let mut t = StackTree::new();
        t.add_names(["p", "x", "a", "b", "c", "d"], 5);
        t.add_names(["p", "y", "a", "b", "c", "d"], 7);
        let top = top_stacks(&t, 5);
        assert_eq!(top.len(), 1);
        assert_eq!(top[0].bytes, 12);
    }
}
