//! The messages on the wire: a 16-byte header — payload length, checksum of the payload,
//! sequence number, all little-endian — then the payload. The server echoes each frame
//! unchanged after checking it; the client checks that each answer is the next one it
//! sent, intact.

/// Bytes in a header.
pub const HEADER_LEN: usize = 16;

/// The largest payload a frame may carry (`--msg-size` at most).
pub const MAX_PAYLOAD: usize = 16 << 20;

/// A frame's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Payload bytes after the header.
    pub len: u32,
    /// [`checksum`] of the payload.
    pub checksum: u32,
    /// The message's number on its connection, from 0.
    pub seq: u64,
}

impl Header {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..4].copy_from_slice(&self.len.to_le_bytes());
        out[4..8].copy_from_slice(&self.checksum.to_le_bytes());
        out[8..].copy_from_slice(&self.seq.to_le_bytes());
        out
    }

    /// The header at the start of `bytes`, if there are enough of them.
    pub fn decode(bytes: &[u8]) -> Option<Header> {
        let b: &[u8; HEADER_LEN] = bytes.get(..HEADER_LEN)?.try_into().ok()?;
        let [
            l0,
            l1,
            l2,
            l3,
            c0,
            c1,
            c2,
            c3,
            s0,
            s1,
            s2,
            s3,
            s4,
            s5,
            s6,
            s7,
        ] = *b;
        Some(Header {
            len: u32::from_le_bytes([l0, l1, l2, l3]),
            checksum: u32::from_le_bytes([c0, c1, c2, c3]),
            seq: u64::from_le_bytes([s0, s1, s2, s3, s4, s5, s6, s7]),
        })
    }
}

/// A fast 32-bit checksum of `bytes` (four independent multiply-xor lanes over 8-byte
/// words; not cryptographic): it catches a flipped, lost or reordered byte, which is all
/// an echo test needs, at a few GB/s.
pub fn checksum(bytes: &[u8]) -> u32 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut lanes = [
        0x243F_6A88_85A3_08D3u64,
        0x1319_8A2E_0370_7344,
        0xA409_3822_299F_31D0,
        0x082E_FA98_EC4E_6C89,
    ];
    let mut chunks = bytes.chunks_exact(32);
    for chunk in &mut chunks {
        for (lane, word) in lanes.iter_mut().zip(chunk.chunks_exact(8)) {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            *lane = (*lane ^ u64::from_le_bytes(w))
                .wrapping_mul(K)
                .rotate_left(29);
        }
    }
    let mut tail = [0u8; 32];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    for (i, (lane, word)) in lanes.iter().zip(tail.chunks_exact(8)).enumerate() {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        h = (h ^ lane ^ u64::from_le_bytes(w).rotate_left(i as u32 * 16))
            .wrapping_mul(K)
            .rotate_left(31);
    }
    h ^= h >> 32;
    h as u32
}

/// What is wrong with a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The length is above the limit.
    TooLong {
        /// The header's length.
        len: u32,
        /// The limit.
        max: usize,
    },
    /// The payload does not match the header's checksum.
    Checksum {
        /// The frame's sequence number.
        seq: u64,
        /// The header's checksum.
        expected: u32,
        /// The payload's.
        found: u32,
    },
    /// An answer is not the next message the client sent.
    OutOfOrder {
        /// The sequence number expected.
        expected: u64,
        /// The one found.
        found: u64,
    },
    /// An answer is not the size of the message sent.
    WrongLength {
        /// The sequence number.
        seq: u64,
        /// Bytes sent.
        expected: usize,
        /// Bytes received.
        found: u32,
    },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLong { len, max } => {
                write!(f, "a frame of {len} bytes, above the {max}-byte limit")
            }
            FrameError::Checksum {
                seq,
                expected,
                found,
            } => write!(
                f,
                "message {seq}: checksum {found:#010x}, the header says {expected:#010x}"
            ),
            FrameError::OutOfOrder { expected, found } => write!(
                f,
                "message {found} arrived where {expected} was due (lost, duplicated or reordered)"
            ),
            FrameError::WrongLength {
                seq,
                expected,
                found,
            } => write!(f, "message {seq}: {found} bytes back for {expected} sent"),
        }
    }
}

/// Checks the complete frames at the start of `buf` (each header against its payload's
/// checksum) and returns how many bytes and frames they take; a partial frame at the end
/// is left for the next read.
pub fn scan(buf: &[u8], max_payload: usize) -> Result<(usize, u64), FrameError> {
    let mut at = 0;
    let mut frames = 0;
    while let Some(header) = Header::decode(&buf[at..]) {
        let len = header.len as usize;
        if len > max_payload {
            return Err(FrameError::TooLong {
                len: header.len,
                max: max_payload,
            });
        }
        let Some(payload) = buf.get(at + HEADER_LEN..at + HEADER_LEN + len) else {
            break;
        };
        let found = checksum(payload);
        if found != header.checksum {
            return Err(FrameError::Checksum {
                seq: header.seq,
                expected: header.checksum,
                found,
            });
        }
        at += HEADER_LEN + len;
        frames += 1;
    }
    Ok((at, frames))
}

/// Bytes still needed for the frame at the start of `buf` to be complete (0 when it is).
pub fn missing(buf: &[u8]) -> usize {
    match Header::decode(buf) {
        None => HEADER_LEN - buf.len(),
        Some(h) => (HEADER_LEN + h.len as usize).saturating_sub(buf.len()),
    }
}

/// The messages a connection sends: a payload of `size` pseudo-random bytes whose first
/// eight carry the sequence number, so that every message differs.
#[derive(Debug, Clone)]
pub struct Messages {
    payload: Vec<u8>,
    next: u64,
}

impl Messages {
    /// Messages of `size` bytes, the filler seeded by `seed`.
    pub fn new(size: usize, seed: u64) -> Self {
        let mut state = seed | 1;
        let mut payload = Vec::with_capacity(size + 8);
        while payload.len() < size {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            payload.extend_from_slice(&state.to_le_bytes());
        }
        payload.truncate(size);
        Messages { payload, next: 0 }
    }

    /// The payload size.
    pub fn size(&self) -> usize {
        self.payload.len()
    }

    /// Appends the next message's frame to `out`; returns its header.
    pub fn append_next(&mut self, out: &mut Vec<u8>) -> Header {
        let seq = self.next;
        self.next += 1;
        let n = self.payload.len().min(8);
        self.payload[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
        let header = Header {
            len: self.payload.len() as u32,
            checksum: checksum(&self.payload),
            seq,
        };
        out.extend_from_slice(&header.encode());
        out.extend_from_slice(&self.payload);
        header
    }
}

/// Checks an answer: the next sequence number, the size sent, the checksum sent, and a
/// payload that matches it.
pub fn check_answer(frame: &[u8], sent: &Header) -> Result<(), FrameError> {
    let Some(header) = Header::decode(frame) else {
        return Err(FrameError::WrongLength {
            seq: sent.seq,
            expected: sent.len as usize,
            found: 0,
        });
    };
    if header.seq != sent.seq {
        return Err(FrameError::OutOfOrder {
            expected: sent.seq,
            found: header.seq,
        });
    }
    let payload = &frame[HEADER_LEN..];
    if header.len != sent.len || payload.len() != sent.len as usize {
        return Err(FrameError::WrongLength {
            seq: sent.seq,
            expected: sent.len as usize,
            found: header.len,
        });
    }
    let found = checksum(payload);
    if found != sent.checksum || header.checksum != sent.checksum {
        return Err(FrameError::Checksum {
            seq: sent.seq,
            expected: sent.checksum,
            found,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = Header {
            len: 4096,
            checksum: 0xDEAD_BEEF,
            seq: u64::MAX - 3,
        };
        assert_eq!(Header::decode(&h.encode()), Some(h));
        assert_eq!(Header::decode(&h.encode()[..15]), None);
    }

    #[test]
    fn the_checksum_sees_a_flipped_bit_anywhere_and_the_length() {
        let data: Vec<u8> = (0..4099u32).map(|i| (i * 7) as u8).collect();
        let sum = checksum(&data);
        for i in [0, 7, 8, 31, 32, 2048, 4095, 4096, 4098] {
            let mut d = data.clone();
            d[i] ^= 0x10;
            assert_ne!(checksum(&d), sum, "byte {i}");
        }
        assert_ne!(checksum(&data[..4098]), sum);
        assert_ne!(checksum(&[]), checksum(&[0]));
    }

    #[test]
    fn scanning_takes_whole_frames_and_leaves_a_partial_one() {
        let mut m = Messages::new(100, 1);
        let mut buf = Vec::new();
        m.append_next(&mut buf);
        m.append_next(&mut buf);
        let whole = buf.len();
        m.append_next(&mut buf);
        buf.truncate(whole + 50);
        assert_eq!(scan(&buf, 1000), Ok((whole, 2)));
        assert_eq!(missing(&buf[whole..]), HEADER_LEN + 100 - 50);
        buf[HEADER_LEN + 3] ^= 1;
        assert!(matches!(
            scan(&buf, 1000),
            Err(FrameError::Checksum { seq: 0, .. })
        ));
        assert!(matches!(
            scan(&buf, 10),
            Err(FrameError::TooLong { len: 100, .. })
        ));
    }

    #[test]
    fn answers_are_checked_for_order_size_and_content() {
        let mut m = Messages::new(64, 2);
        let mut a = Vec::new();
        let ha = m.append_next(&mut a);
        let mut b = Vec::new();
        let hb = m.append_next(&mut b);
        assert_ne!(ha.checksum, hb.checksum, "every message differs");
        check_answer(&a, &ha).unwrap();
        assert!(matches!(
            check_answer(&b, &ha),
            Err(FrameError::OutOfOrder {
                expected: 0,
                found: 1
            })
        ));
        let mut bad = b.clone();
        bad[HEADER_LEN + 20] ^= 4;
        assert!(matches!(
            check_answer(&bad, &hb),
            Err(FrameError::Checksum { .. })
        ));
        // Tiny messages: the sequence number takes what room there is.
        let mut tiny = Messages::new(1, 3);
        let mut t = Vec::new();
        let h0 = tiny.append_next(&mut t);
        check_answer(&t, &h0).unwrap();
        assert_eq!(t.len(), HEADER_LEN + 1);
    }
}
