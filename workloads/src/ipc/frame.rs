//! The frames the main node and its node processes exchange, and reading them off a
//! byte stream.
//!
//! Every frame is [`FRAME_LEN`] bytes, little-endian: a kind tag (one byte), three zero
//! bytes, the sender's node id (`u32`), a value (`u64`) and an auxiliary word (`u64`). A
//! fixed length keeps the framing a matter of counting bytes: a [`FrameReader`] takes
//! whatever a `read` returned — half a frame, forty frames and a bit — and hands out
//! whole frames.

use std::io::{self, Read};

/// Bytes in one frame on the wire.
pub(crate) const FRAME_LEN: usize = 24;

/// What a frame says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// Storm: a node is up (`node` is its id).
    Hello = 1,
    /// Ring: goes once round the ring before messaging, each node adding one to `value`.
    Ping = 2,
    /// Ring, tell: the ring message; each member adds one to `value` as it passes it on.
    Tell = 3,
    /// Ring, ask: the ring message, to be answered quoting `aux` (the asker's ask id).
    Ask = 4,
    /// An answer: ring, to the ask numbered `aux` (`value` is the final sum); storm, to a
    /// node's message (`value` is the node's sum so far).
    Reply = 5,
    /// Storm: main node to node, begin: `value` messages, `aux` 1 to ask, 0 to tell.
    Go = 6,
    /// Storm: one message; `value` is the sender's sum before it, `aux` its send time
    /// (CLOCK_MONOTONIC nanoseconds, the same clock in every process).
    Storm = 7,
    /// Storm: a node has sent everything; `value` is its final sum, `aux` its storm time
    /// in nanoseconds.
    Done = 8,
    /// The run is over: pass it on (ring) and exit.
    Bye = 9,
}

impl Kind {
    fn from_tag(tag: u8) -> Option<Kind> {
        Some(match tag {
            1 => Kind::Hello,
            2 => Kind::Ping,
            3 => Kind::Tell,
            4 => Kind::Ask,
            5 => Kind::Reply,
            6 => Kind::Go,
            7 => Kind::Storm,
            8 => Kind::Done,
            9 => Kind::Bye,
            _ => return None,
        })
    }
}

/// One frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) kind: Kind,
    pub(crate) node: u32,
    pub(crate) value: u64,
    pub(crate) aux: u64,
}

impl Frame {
    pub(crate) fn new(kind: Kind, node: u32, value: u64, aux: u64) -> Frame {
        Frame {
            kind,
            node,
            value,
            aux,
        }
    }

    pub(crate) fn encode(&self) -> [u8; FRAME_LEN] {
        let mut bytes = [0u8; FRAME_LEN];
        bytes[0] = self.kind as u8;
        bytes[4..8].copy_from_slice(&self.node.to_le_bytes());
        bytes[8..16].copy_from_slice(&self.value.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.aux.to_le_bytes());
        bytes
    }

    /// Decodes one frame; an unknown kind or non-zero padding is refused (the stream is
    /// then out of step, or not ours).
    pub(crate) fn decode(bytes: &[u8; FRAME_LEN]) -> Result<Frame, String> {
        let kind = Kind::from_tag(bytes[0])
            .ok_or_else(|| format!("unknown frame kind {} ({:02x?})", bytes[0], &bytes[..8]))?;
        if bytes[1..4] != [0, 0, 0] {
            return Err(format!("frame padding is not zero ({:02x?})", &bytes[..8]));
        }
        let word = |range: std::ops::Range<usize>| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[range]);
            u64::from_le_bytes(b)
        };
        let mut node = [0u8; 4];
        node.copy_from_slice(&bytes[4..8]);
        Ok(Frame {
            kind,
            node: u32::from_le_bytes(node),
            value: word(8..16),
            aux: word(16..24),
        })
    }
}

/// Whole frames out of a byte stream: a fixed buffer, filled by one `read` at a time,
/// from which complete frames are taken and the remainder kept for the next read.
#[derive(Debug)]
pub(crate) struct FrameReader {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

/// What a [`FrameReader::fill`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filled {
    /// Some bytes arrived.
    Bytes,
    /// The other end closed its side; `partial` bytes of an unfinished frame are left.
    End { partial: usize },
}

impl FrameReader {
    /// A reader holding up to `frames` whole frames between two calls of
    /// [`FrameReader::next_frame`].
    pub(crate) fn new(frames: usize) -> FrameReader {
        FrameReader {
            buf: vec![0u8; frames.max(1) * FRAME_LEN].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Reads once from `from` (which should be readable: this blocks otherwise). Call it
    /// only once [`FrameReader::next_frame`] has returned `None`: then less than a frame is
    /// kept and there is room to read into.
    pub(crate) fn fill(&mut self, from: &mut impl Read) -> io::Result<Filled> {
        if self.start > 0 {
            // Keep the partial frame at the front, so there is room for the rest.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        loop {
            match from.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    return Ok(Filled::End {
                        partial: self.end - self.start,
                    });
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(Filled::Bytes);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The next whole frame already read, if there is one.
    pub(crate) fn next_frame(&mut self) -> Option<Result<Frame, String>> {
        if self.end - self.start < FRAME_LEN {
            return None;
        }
        let mut bytes = [0u8; FRAME_LEN];
        bytes.copy_from_slice(&self.buf[self.start..self.start + FRAME_LEN]);
        self.start += FRAME_LEN;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Some(Frame::decode(&bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out its bytes in the chunk sizes given, then end of stream.
    struct Chunks<'a> {
        bytes: &'a [u8],
        sizes: std::vec::IntoIter<usize>,
    }

    impl Read for Chunks<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let want = self.sizes.next().unwrap_or(usize::MAX);
            let n = want.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    fn frames() -> Vec<Frame> {
        vec![
            Frame::new(Kind::Hello, 7, 0, 0),
            Frame::new(Kind::Tell, 0, u64::MAX, 1),
            Frame::new(Kind::Ask, u32::MAX, 12, 34),
            Frame::new(Kind::Reply, 3, 5_000, u64::MAX),
            Frame::new(Kind::Storm, 100, 9, 123_456_789),
            Frame::new(Kind::Bye, 0, 0, 0),
        ]
    }

    #[test]
    fn frames_round_trip_through_their_encoding() {
        for frame in frames() {
            let bytes = frame.encode();
            assert_eq!(bytes.len(), FRAME_LEN);
            assert_eq!(Frame::decode(&bytes).unwrap(), frame);
        }
        let bytes = Frame::new(Kind::Done, 1, 2, 3).encode();
        assert_eq!(bytes[..8], [8, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(bytes[8], 2);
        assert_eq!(bytes[16], 3);
    }

    #[test]
    fn unknown_kinds_and_dirty_padding_are_refused() {
        let mut bytes = Frame::new(Kind::Tell, 0, 1, 0).encode();
        bytes[0] = 0;
        assert!(
            Frame::decode(&bytes)
                .unwrap_err()
                .contains("unknown frame kind 0")
        );
        bytes[0] = 200;
        assert!(Frame::decode(&bytes).unwrap_err().contains("kind 200"));
        let mut bytes = Frame::new(Kind::Tell, 0, 1, 0).encode();
        bytes[2] = 1;
        assert!(Frame::decode(&bytes).unwrap_err().contains("padding"));
    }

    #[test]
    fn frames_split_anyhow_across_reads_come_out_whole() {
        let stream: Vec<u8> = frames().iter().flat_map(|f| f.encode()).collect();
        for sizes in [
            vec![1; stream.len()],
            vec![5, 30, 2, 23, 1000],
            vec![24, 24, 24, 24, 24, 24],
            vec![23, 1, 47, 1, 100],
        ] {
            let mut from = Chunks {
                bytes: &stream,
                sizes: sizes.clone().into_iter(),
            };
            // Room for two frames only: the reader must keep the partial one and go on.
            let mut reader = FrameReader::new(2);
            let mut got = Vec::new();
            loop {
                while let Some(frame) = reader.next_frame() {
                    got.push(frame.unwrap());
                }
                match reader.fill(&mut from).unwrap() {
                    Filled::Bytes => {}
                    Filled::End { partial } => {
                        assert_eq!(partial, 0, "{sizes:?}");
                        break;
                    }
                }
            }
            assert_eq!(got, frames(), "{sizes:?}");
        }
    }

    #[test]
    fn a_stream_ending_inside_a_frame_says_how_much_was_left() {
        let bytes = Frame::new(Kind::Tell, 0, 1, 0).encode();
        let mut from = Chunks {
            bytes: &bytes[..10],
            sizes: vec![4, 6].into_iter(),
        };
        let mut reader = FrameReader::new(1);
        assert_eq!(reader.fill(&mut from).unwrap(), Filled::Bytes);
        assert_eq!(reader.fill(&mut from).unwrap(), Filled::Bytes);
        assert!(reader.next_frame().is_none());
        assert_eq!(reader.fill(&mut from).unwrap(), Filled::End { partial: 10 });
    }
}
