//! The binary checkpoint's layout: its magic numbers, section tags and fixed sizes, the
//! depth limit both sides keep, and the error a reader gives.

pub(super) const MAGIC: [u8; 8] = *b"BTDEFS\x00\x01";
pub(super) const FOOTER_MAGIC: [u8; 8] = *b"BTDEFEND";
pub(super) const FOOTER_LEN: usize = 8 + 4 + 4 + 8;
pub(super) const ENTRY_LEN: usize = 4 + 8 + 8 + 4;
/// The sections, in the order they are written and must be read.
pub(super) const SECTIONS: [(u32, &str); 5] = [
    (1, "META"),
    (2, "STRINGS"),
    (3, "PATHS"),
    (4, "EXPRS"),
    (5, "NODES"),
];
/// A node's fixed record: kind, note flag, name, attribute count, child count.
pub(super) const NODE_LEN: usize = 1 + 1 + 4 + 4 + 4;

/// Expressions nested deeper than this (operators within operators) are neither written
/// nor read: the reader recurses, and a hostile file must not exhaust its stack. The
/// text reader's own limit on parentheses and `not` keeps real expressions far below.
pub const MAX_EXPR_DEPTH: u32 = 1000;

/// Why a checkpoint was refused: where (the byte offset in the file) and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte offset {offset}: {reason}")]
#[non_exhaustive]
pub struct Corrupt {
    /// Byte offset in the file.
    pub offset: u64,
    /// What is wrong there.
    pub reason: String,
}

pub(super) fn corrupt(offset: usize, reason: impl Into<String>) -> Corrupt {
    Corrupt {
        offset: offset as u64,
        reason: reason.into(),
    }
}
