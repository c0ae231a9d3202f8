//! Interned names and values: every distinct string of a definition held once.
//!
//! A [`Strings`] table is one text buffer and the end offset of each string in it, so a
//! whole table is two allocations, however many strings it holds, and it is laid out in
//! memory as the binary checkpoint stores it (reloading it is one copy, no allocation
//! per string). A [`Sym`] names a string of the table. The [`StringInterner`] builds a
//! table while a definition is read, giving equal strings the same [`Sym`]; ids are
//! given in order of first occurrence, so reading the same text gives the same table.

use std::hash::Hasher;
use std::num::NonZeroU32;

use serde::{Deserialize, Serialize};

/// The multiply-rotate hash of rustc's FxHasher: several times faster than the standard
/// SipHash on the short keys interning sees (paths, small trees), and the input is the
/// user's own definition, not an adversary's (the `defs` bench, parse, chose it: SipHash
/// was 6 % of parsing).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FxHasher(u64);

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(FX_SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// An interned string: an index into a definition's [`Strings`]. Four bytes, and
/// `Option<Sym>` too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Sym(NonZeroU32);

impl Sym {
    /// The symbol of the string at `index` in its table (`None` past `u32::MAX - 1`).
    pub fn from_index(index: usize) -> Option<Sym> {
        u32::try_from(index)
            .ok()
            .and_then(|i| i.checked_add(1))
            .and_then(NonZeroU32::new)
            .map(Sym)
    }

    /// The string's position in its table.
    pub fn index(self) -> usize {
        (self.0.get() - 1) as usize
    }
}

/// Every distinct string of a definition: `text[ends[i - 1]..ends[i]]` is string `i`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Strings {
    text: String,
    ends: Vec<u32>,
}

/// Why a table cannot be built from given parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadTable {
    /// The first string that is wrong.
    pub(crate) index: usize,
    pub(crate) reason: &'static str,
}

impl Strings {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many strings the table holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The string `sym` names (`None` for a symbol of another table).
    pub fn get(&self, sym: Sym) -> Option<&str> {
        let i = sym.index();
        let end = *self.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.text.get(start..end)
    }

    /// The text of all strings, one after the other.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The end offset of each string in [`Strings::text`].
    pub fn ends(&self) -> &[u32] {
        &self.ends
    }

    /// A table from its parts, checked: the ends rise, stay within the text and fall on
    /// character boundaries.
    pub(crate) fn from_parts(text: String, ends: Vec<u32>) -> Result<Self, BadTable> {
        let mut last = 0u32;
        for (index, &end) in ends.iter().enumerate() {
            if end < last {
                return Err(BadTable {
                    index,
                    reason: "ends before the string before it",
                });
            }
            if !text.is_char_boundary(end as usize) || end as usize > text.len() {
                return Err(BadTable {
                    index,
                    reason: "ends outside the text or inside a character",
                });
            }
            last = end;
        }
        if last as usize != text.len() {
            return Err(BadTable {
                index: ends.len(),
                reason: "the text runs past the last string",
            });
        }
        Ok(Strings { text, ends })
    }

    fn push(&mut self, s: &str) -> Option<Sym> {
        let sym = Sym::from_index(self.ends.len())?;
        let end = u32::try_from(self.text.len() + s.len()).ok()?;
        self.text.push_str(s);
        self.ends.push(end);
        Some(sym)
    }
}

/// A string's 32-bit hash, kept beside its symbol in the interner's index so that a probe
/// compares text only when the hashes match and growing the index reads no text.
fn hash32(s: &str) -> u32 {
    let mut h = FxHasher::default();
    h.write(s.as_bytes());
    h.write_usize(s.len());
    (h.finish() >> 32) as u32
}

/// The index's 64-bit hash of a 32-bit one: an odd multiplier spreads it over the high
/// bits (the index's tag) and the low ones (its bucket).
fn spread(h: u32) -> u64 {
    u64::from(h).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Builds a [`Strings`] table, one entry per distinct string.
#[derive(Debug, Default)]
pub(crate) struct StringInterner {
    strings: Strings,
    /// Symbols and their strings' hashes, by hash.
    index: hashbrown::HashTable<(Sym, u32)>,
}

/// The table is full: its text would pass 4 GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableFull;

impl StringInterner {
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// An interner with room for the strings of about `text_len` bytes of definition, so
    /// that its index seldom grows while reading (the `defs` bench, parse: growing it
    /// from empty was a third of the interning).
    pub(crate) fn for_text(text_len: usize) -> Self {
        let strings = text_len / 128;
        StringInterner {
            strings: Strings {
                text: String::with_capacity(text_len / 8),
                ends: Vec::with_capacity(strings),
            },
            index: hashbrown::HashTable::with_capacity(strings),
        }
    }

    /// The symbol of `s`, added to the table when new.
    pub(crate) fn intern(&mut self, s: &str) -> Result<Sym, TableFull> {
        let h = hash32(s);
        let strings = &self.strings;
        if let Some(&(sym, _)) = self.index.find(spread(h), |&(sym, sh)| {
            sh == h && strings.get(sym).is_some_and(|t| t == s)
        }) {
            return Ok(sym);
        }
        let sym = self.strings.push(s).ok_or(TableFull)?;
        self.index
            .insert_unique(spread(h), (sym, h), |&(_, sh)| spread(sh));
        Ok(sym)
    }

    /// The string of `sym`.
    pub(crate) fn get(&self, sym: Sym) -> Option<&str> {
        self.strings.get(sym)
    }

    /// The table built.
    pub(crate) fn into_strings(self) -> Strings {
        self.strings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_one_symbol_in_order_of_first_occurrence() {
        let mut i = StringInterner::new();
        let a = i.intern("ECF_HOME").unwrap();
        let b = i.intern("").unwrap();
        let c = i.intern("ECF_HOME").unwrap();
        let d = i.intern("é").unwrap();
        assert_eq!(a, c);
        assert_eq!((a.index(), b.index(), d.index()), (0, 1, 2));
        let table = i.into_strings();
        assert_eq!(table.len(), 3);
        assert_eq!(table.get(a), Some("ECF_HOME"));
        assert_eq!(table.get(b), Some(""));
        assert_eq!(table.get(d), Some("é"));
        assert_eq!(table.get(Sym::from_index(3).unwrap()), None);
        assert_eq!(
            Strings::from_parts(table.text().to_owned(), table.ends().to_vec()),
            Ok(table)
        );
    }

    #[test]
    fn tables_from_parts_are_checked() {
        let bad = |text: &str, ends: &[u32]| {
            Strings::from_parts(text.to_owned(), ends.to_vec())
                .unwrap_err()
                .index
        };
        assert_eq!(bad("abc", &[2, 1]), 1);
        assert_eq!(bad("abc", &[4]), 0);
        assert_eq!(bad("é", &[1, 2]), 0);
        assert_eq!(bad("abc", &[2]), 1);
        assert!(Strings::from_parts(String::new(), vec![0, 0]).is_ok());
    }
}
