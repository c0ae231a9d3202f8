//! The binary checkpoint: the tree's own tables, laid out as they are in memory, each
//! section checksummed.
//!
//! ```text
//! header     8 bytes   magic "BTDEFS" 0x00 and the format version (1)
//! sections   META, STRINGS, PATHS, EXPRS, NODES, one after the other
//! directory  per section: tag u32, offset u64, length u64, CRC-32 u32
//! footer     directory offset u64, section count u32, CRC-32 u32 of the directory
//!            and these two fields, magic "BTDEFEND"
//! ```
//!
//! Integers are little-endian and fixed-width. `META` holds the version line, externs and
//! top-level comments; `STRINGS` the string table as [`Strings`](super::Strings) holds it: the count,
//! each string's end offset (u32) and then all the text, so it loads with one copy and
//! one UTF-8 check, whatever the number of strings; `PATHS` each path's string; `EXPRS`
//! each expression in prefix order (a tag byte, then its operands); `NODES` the suites'
//! count and every node in preorder: kind, note flag, name, attribute count, child
//! count (14 bytes), its note when it has one, then its attributes (a tag byte and
//! fixed-width fields, names as string indices). Reading is one pass that allocates
//! per node only the node and its two lists, of their exact size: no text is parsed and
//! nothing is interned again. Writing streams the same from the tree through a buffer:
//! no copy of the tree is built.
//!
//! **Checks on load**: the magic and version, the footer's magic, the directory's
//! checksum, that the sections come in order and tile the file with no gap, each
//! section's CRC-32 (so a flipped bit or a truncated file is refused before anything is
//! decoded), then while decoding every length against the bytes left, every index
//! against its table, every tag and flag against its values, nesting against
//! [`MAX_NESTING`](super::MAX_NESTING) and [`MAX_EXPR_DEPTH`], and that each section is used up exactly. An
//! error names the byte offset in the file where the check failed; decoding never
//! panics and never allocates more than the bytes it was given justify.

mod format;
mod read;
mod write;

pub use self::format::{Corrupt, MAX_EXPR_DEPTH};
pub use self::read::read;
pub use self::write::write;

#[cfg(test)]
mod tests {
    use super::format::{ENTRY_LEN, FOOTER_LEN, SECTIONS};
    use super::read::sections;
    use super::*;
    use crate::defs::Defs;
    use crate::defs::generate::generate;
    use crate::defs::parse;

    fn encoded(defs: &Defs) -> Vec<u8> {
        let mut out = Vec::new();
        write(defs, &mut out).unwrap();
        out
    }

    fn sample() -> Defs {
        let mut text = crate::defs::write(&generate(0.0004, 3));
        text.push_str(
            "# enddef\nsuite x # a note\n  edit Q \"it's\"\n  repeat date YMD 20200101 20201231 1\n  \
             repeat integer I 1 10 2\n  repeat enumerated E \"a\" \"b\"\n  repeat string S \"x\"\n  \
             repeat day 1\n  repeat datelist D 20200101\n  limit l 3\n  family f\n    cron 10:00\n    \
             # inside\n    inlimit -n /x:l 2\n    task t # state:complete\n      event 1 set\n      \
             event 2 e clear\n      meter m -1 9\n      label l \"\"\n      late -s +00:15 -a 20:00\n      \
             time 00:00 23:00 01:00\n      trigger (a:m + 1) * 2 >= 10 or not /x/f:e == set\n      \
             trigger -o ./t == active\n      complete -a 1 % 2 != 0\n      defstatus suspended\n  \
             endfamily\nendsuite\n",
        );
        let mut defs = parse(&text).unwrap();
        defs.externs.push("/ext/s:lim".to_owned());
        defs
    }

    #[test]
    fn every_attribute_round_trips() {
        let defs = sample();
        let bytes = encoded(&defs);
        assert_eq!(read(&bytes).unwrap(), defs);
        let empty = Defs::new();
        assert_eq!(read(&encoded(&empty)).unwrap(), empty);
    }

    #[test]
    fn every_truncation_is_refused_with_an_offset() {
        let bytes = encoded(&sample());
        for len in 0..bytes.len() {
            let err = read(&bytes[..len]).unwrap_err();
            assert!(err.offset <= len as u64, "{len}: {err}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(read(&longer).is_err());
    }

    #[test]
    fn every_flipped_bit_is_refused_with_an_offset() {
        let bytes = encoded(&sample());
        for i in 0..bytes.len() {
            let bit = i % 8;
            let mut bad = bytes.clone();
            bad[i] ^= 1 << bit;
            let err = read(&bad).unwrap_err();
            assert!(err.offset < bytes.len() as u64, "byte {i} bit {bit}: {err}");
        }
    }

    /// What a fuzzer would find past the checksums: any byte of a section changed, and
    /// its checksum made to match, decodes or is refused, and never panics.
    #[test]
    fn decoding_corrupted_sections_never_panics() {
        let bytes = encoded(&sample());
        let ranges = sections(&bytes).unwrap();
        let footer = bytes.len() - FOOTER_LEN;
        let dir_start = footer - SECTIONS.len() * ENTRY_LEN;
        let mut refused = 0;
        for (s, range) in ranges.iter().enumerate() {
            for i in range.clone() {
                let v = [0x00, 0xff, bytes[i].wrapping_add(1)][i % 3];
                {
                    let mut bad = bytes.clone();
                    bad[i] = v;
                    let sum = crc32fast::hash(&bad[range.clone()]);
                    let e = dir_start + s * ENTRY_LEN + 20;
                    bad[e..e + 4].copy_from_slice(&sum.to_le_bytes());
                    let dir_sum = crc32fast::hash(&bad[dir_start..footer + 12]);
                    bad[footer + 12..footer + 16].copy_from_slice(&dir_sum.to_le_bytes());
                    refused += usize::from(read(&bad).is_err());
                }
            }
        }
        assert!(refused > 0);
    }

    #[test]
    fn errors_name_the_offset() {
        let bytes = encoded(&sample());
        let err = read(b"suite s\nendsuite\n").unwrap_err();
        assert_eq!(err.offset, 17);
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert_eq!(read(&bad).unwrap_err().offset, 0);
        let ranges = sections(&bytes).unwrap();
        let mut bad = bytes.clone();
        let i = ranges[4].start + 3;
        bad[i] ^= 0x10;
        let err = read(&bad).unwrap_err();
        assert_eq!(err.offset, ranges[4].start as u64, "{err}");
        assert!(err.to_string().contains("section NODES"), "{err}");
        assert!(
            err.to_string()
                .starts_with(&format!("at byte offset {}", ranges[4].start)),
            "{err}"
        );
    }
}
