//! What goes on the wire, and what a client keeps of the messages it has in flight.
//!
//! Every datagram (UDP) and every frame (TCP) starts with a 16-byte header, little-endian:
//! the message's sequence number (u64), the byte offset of this piece in the message (u32)
//! and the message's length (u32). A UDP message longer than [`FRAGMENT`] bytes travels as
//! several datagrams, each with its offset; a TCP frame is always the whole message
//! (offset 0). The server echoes datagrams and frames as they came; the client
//! reassembles a message from its pieces and checks every byte against the pattern it was
//! sent with, regenerated from the sequence number and offset.

use std::collections::VecDeque;

use hdrhistogram::Histogram;

use crate::protocol::new_latency_histogram;

/// Bytes of the header before each datagram's or frame's payload.
pub(crate) const HEADER: usize = 16;
/// Payload bytes of one datagram: a message longer than this is fragmented.
pub(crate) const FRAGMENT: usize = 63 * 1024;
/// The longest datagram sent or expected (within UDP's 65,507-byte limit).
pub(crate) const MAX_DATAGRAM: usize = HEADER + FRAGMENT;

/// Sequence numbers from here on are the clients' start-up probes: echoed like any
/// message, counted by no one.
pub(crate) const PROBE_SEQ: u64 = 1 << 62;

/// The header of a datagram or frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) seq: u64,
    pub(crate) offset: u32,
    pub(crate) total: u32,
}

impl Header {
    pub(crate) fn encode(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.seq.to_le_bytes());
        out[8..12].copy_from_slice(&self.offset.to_le_bytes());
        out[12..16].copy_from_slice(&self.total.to_le_bytes());
    }

    /// The header at the start of `bytes`, if there are enough of them.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Header> {
        let seq = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
        let offset = u32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?);
        let total = u32::from_le_bytes(bytes.get(12..16)?.try_into().ok()?);
        Some(Header { seq, offset, total })
    }
}

/// Datagrams a message of `total` bytes travels in.
pub(crate) fn fragments(total: usize) -> usize {
    total.div_ceil(FRAGMENT).max(1)
}

/// The first pattern byte of message `seq`.
#[inline]
fn base(seq: u64) -> u8 {
    (seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

/// The pattern byte at `at` of a message whose first byte is `base`: both the low and the
/// next byte of the offset count, so a piece put at the wrong offset does not match.
#[inline]
fn pattern(base: u8, at: usize) -> u8 {
    base.wrapping_add(at as u8).wrapping_add((at >> 8) as u8)
}

/// Fills `out` with the payload bytes of message `seq` from `offset` on.
pub(crate) fn fill(seq: u64, offset: usize, out: &mut [u8]) {
    let b = base(seq);
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = pattern(b, offset + i);
    }
}

/// Whether `data` holds exactly the payload bytes of message `seq` from `offset` on.
pub(crate) fn check(seq: u64, offset: usize, data: &[u8]) -> bool {
    let b = base(seq);
    let mut diff = 0u8;
    for (i, &byte) in data.iter().enumerate() {
        diff |= byte ^ pattern(b, offset + i);
    }
    diff == 0
}

/// Writes datagram `index` of message `seq` (of `total` bytes) into `buf`; returns its
/// length. `buf` holds at least [`MAX_DATAGRAM`] bytes, or `HEADER + total`.
pub(crate) fn datagram(seq: u64, total: usize, index: usize, buf: &mut [u8]) -> usize {
    let offset = index * FRAGMENT;
    let len = (total - offset.min(total)).min(FRAGMENT);
    Header {
        seq,
        offset: offset as u32,
        total: total as u32,
    }
    .encode(buf);
    fill(seq, offset, &mut buf[HEADER..HEADER + len]);
    HEADER + len
}

/// Appends the TCP frame of message `seq` (of `total` bytes) to `out`.
pub(crate) fn frame(seq: u64, total: usize, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + HEADER + total, 0);
    Header {
        seq,
        offset: 0,
        total: total as u32,
    }
    .encode(&mut out[start..]);
    fill(seq, 0, &mut out[start + HEADER..]);
}

/// Where a complete frame lies in a [`StreamBuf`] (header included).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameAt {
    start: usize,
    len: usize,
}

/// The bytes read from a TCP stream and not yet taken as frames: one buffer, compacted
/// or grown (up to two of the largest frames) only when full.
#[derive(Debug)]
pub(crate) struct StreamBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl StreamBuf {
    pub(crate) fn new() -> StreamBuf {
        StreamBuf {
            buf: vec![0; 64 << 10],
            start: 0,
            end: 0,
        }
    }

    /// Room to read into.
    pub(crate) fn spare(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let grown = self.buf.len() * 2;
                self.buf.resize(grown, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were read into [`StreamBuf::spare`].
    pub(crate) fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// The next complete frame, if one is there; an error for a header no frame has.
    pub(crate) fn next_frame(&mut self) -> Option<Result<FrameAt, String>> {
        let avail = &self.buf[self.start..self.end];
        let header = Header::decode(avail)?;
        if header.offset != 0 || u64::from(header.total) > super::MAX_BUFFER_SIZE {
            return Some(Err(format!(
                "not an echo frame (offset {}, length {})",
                header.offset, header.total
            )));
        }
        let len = HEADER + header.total as usize;
        if avail.len() < len {
            return None;
        }
        let at = FrameAt {
            start: self.start,
            len,
        };
        self.start += len;
        Some(Ok(at))
    }

    /// The bytes of a frame just taken (header included).
    pub(crate) fn bytes(&self, frame: FrameAt) -> &[u8] {
        &self.buf[frame.start..frame.start + frame.len]
    }
}

/// What one client (or one point of a sweep, all clients merged) counted.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    /// Messages echoed back whole and exact.
    pub(crate) messages: u64,
    /// Their payload bytes.
    pub(crate) bytes: u64,
    /// Messages not back whole within the timeout (a datagram lost on the way).
    pub(crate) timeouts: u64,
    /// Messages back whole but not byte-exact (or with a header that does not fit).
    pub(crate) payload_errors: u64,
    /// Round-trip times of the messages back, from their intended send time.
    pub(crate) rtt: Histogram<u64>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            messages: 0,
            bytes: 0,
            timeouts: 0,
            payload_errors: 0,
            rtt: new_latency_histogram(),
        }
    }
}

impl Tally {
    pub(crate) fn merge(&mut self, other: &Tally) {
        self.messages += other.messages;
        self.bytes += other.bytes;
        self.timeouts += other.timeouts;
        self.payload_errors += other.payload_errors;
        let _ = self.rtt.add(&other.rtt);
    }
}

/// A message in flight.
#[derive(Debug, Clone, Copy)]
struct Pending {
    seq: u64,
    /// When it was meant to be sent: the start of its round trip (open loop: the
    /// schedule's time, so a late send counts against the latency).
    intended_ns: u64,
    deadline_ns: u64,
    /// Pieces back (bit i: datagram i).
    got: u64,
    received: usize,
    bad: bool,
}

/// What became of a piece that came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// A piece of a message still incomplete.
    Part,
    /// The last piece: the message is back, exact; its round trip in nanoseconds.
    Complete(u64),
    /// The last piece of a message that is not exact.
    Corrupt,
    /// A piece of no message in flight (timed out already, or a duplicate).
    Stray,
}

/// How a client sends: closed loop with a window, or open loop at a rate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pacing {
    /// Most messages in flight at once.
    pub(crate) window: usize,
    /// Open loop: nanoseconds between two intended sends.
    pub(crate) interval_ns: Option<u64>,
}

/// One client's messages in flight, its schedule and its tally. The same for every back
/// end: they only move bytes.
#[derive(Debug)]
pub(crate) struct Flight {
    pub(crate) size: usize,
    pacing: Pacing,
    timeout_ns: u64,
    /// Messages to send in all (`--num-iters`), or none for a run bounded by time.
    limit: Option<u64>,
    next_seq: u64,
    /// The first sequence number: `next_seq - limit_base` messages have been sent.
    limit_base: u64,
    /// The next intended send time (open loop).
    next_due_ns: u64,
    pending: VecDeque<Pending>,
    /// When something last came back (or the run began).
    pub(crate) last_heard_ns: u64,
    pub(crate) answered: bool,
    /// No new sends (time is up or the run is stopping).
    closed: bool,
    pub(crate) tally: Tally,
}

impl Flight {
    pub(crate) fn new(
        size: usize,
        pacing: Pacing,
        timeout_ns: u64,
        limit: Option<u64>,
        first_seq: u64,
        now_ns: u64,
    ) -> Flight {
        Flight {
            size,
            pacing,
            timeout_ns,
            limit,
            next_seq: first_seq,
            next_due_ns: now_ns,
            pending: VecDeque::with_capacity(pacing.window.min(4096)),
            last_heard_ns: now_ns,
            answered: false,
            closed: false,
            limit_base: first_seq,
            tally: Tally::default(),
        }
    }

    /// The next message to send now, if one is due: its sequence number.
    pub(crate) fn next_send(&mut self, now_ns: u64) -> Option<u64> {
        if self.closed || self.pending.len() >= self.pacing.window {
            return None;
        }
        if let Some(limit) = self.limit
            && self.next_seq - self.limit_base >= limit
        {
            return None;
        }
        let intended_ns = match self.pacing.interval_ns {
            Some(interval) => {
                if now_ns < self.next_due_ns {
                    return None;
                }
                let due = self.next_due_ns;
                self.next_due_ns += interval;
                due
            }
            None => now_ns,
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pending.push_back(Pending {
            seq,
            intended_ns,
            deadline_ns: now_ns + self.timeout_ns,
            got: 0,
            received: 0,
            bad: false,
        });
        Some(seq)
    }

    /// A piece came back: `header` and its payload.
    pub(crate) fn arrive(&mut self, header: Header, payload: &[u8], now_ns: u64) -> Arrival {
        self.last_heard_ns = now_ns;
        self.answered = true;
        let Ok(at) = self.pending.binary_search_by_key(&header.seq, |p| p.seq) else {
            return Arrival::Stray;
        };
        let size = self.size;
        let p = &mut self.pending[at];
        let offset = header.offset as usize;
        let index = offset / FRAGMENT;
        let fits = header.total as usize == size
            && offset.is_multiple_of(FRAGMENT)
            && index < 64
            && offset + payload.len() <= size
            && (payload.len() == FRAGMENT || offset + payload.len() == size);
        if !fits {
            // Whatever came is not a piece of this message: the message is not exact.
            p.bad = true;
            p.received = size;
        } else {
            if p.got & (1 << index) != 0 {
                return Arrival::Stray;
            }
            p.got |= 1 << index;
            p.received += payload.len();
            if !check(header.seq, offset, payload) {
                p.bad = true;
            }
        }
        if p.received < size {
            return Arrival::Part;
        }
        let Some(done) = self.pending.remove(at) else {
            return Arrival::Stray;
        };
        if done.bad {
            self.tally.payload_errors += 1;
            Arrival::Corrupt
        } else {
            let rtt = now_ns.saturating_sub(done.intended_ns);
            self.tally.messages += 1;
            self.tally.bytes += size as u64;
            if self.tally.rtt.record(rtt).is_err() {
                self.tally.rtt.saturating_record(rtt);
            }
            Arrival::Complete(rtt)
        }
    }

    /// Counts and forgets the messages whose deadline has passed; returns how many.
    pub(crate) fn expire(&mut self, now_ns: u64) -> u64 {
        let mut expired = 0;
        // Deadlines follow send order: the oldest is first.
        while self
            .pending
            .front()
            .is_some_and(|p| p.deadline_ns <= now_ns)
        {
            self.pending.pop_front();
            expired += 1;
        }
        self.tally.timeouts += expired;
        expired
    }

    /// The earliest time something is due: a deadline, or the next open-loop send.
    pub(crate) fn next_wake(&self) -> u64 {
        let deadline = self.pending.front().map_or(u64::MAX, |p| p.deadline_ns);
        match self.pacing.interval_ns {
            Some(_) if !self.closed && self.pending.len() < self.pacing.window => {
                deadline.min(self.next_due_ns)
            }
            _ => deadline,
        }
    }

    /// Whether nothing has come back for `silence_ns` while messages are in flight.
    pub(crate) fn silent(&self, now_ns: u64, silence_ns: u64) -> bool {
        !self.pending.is_empty() && now_ns.saturating_sub(self.last_heard_ns) > silence_ns
    }

    /// Whether every message has been sent and is back or timed out.
    pub(crate) fn done(&self) -> bool {
        let all_sent = self.closed
            || self
                .limit
                .is_some_and(|limit| self.next_seq - self.limit_base >= limit);
        all_sent && self.pending.is_empty()
    }

    /// Drops what is in flight at the end of a run bounded by time (neither back nor
    /// timed out: not counted).
    pub(crate) fn abandon(&mut self) {
        self.closed = true;
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed_loop() -> Pacing {
        Pacing {
            window: 1,
            interval_ns: None,
        }
    }

    #[test]
    fn a_fragmented_message_is_checked_and_reassembled_in_any_order() {
        let size = 2 * FRAGMENT + 100;
        assert_eq!(fragments(size), 3);
        let mut flight = Flight::new(size, closed_loop(), 1_000, Some(1), 7, 0);
        let seq = flight.next_send(10).unwrap();
        assert_eq!(seq, 7);
        assert_eq!(flight.next_send(10), None, "window of one");
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut arrivals = Vec::new();
        for index in [2, 0, 1] {
            let len = datagram(seq, size, index, &mut buf);
            let header = Header::decode(&buf).unwrap();
            arrivals.push(flight.arrive(header, &buf[HEADER..len], 110));
        }
        assert_eq!(
            arrivals,
            [Arrival::Part, Arrival::Part, Arrival::Complete(100)]
        );
        assert!(flight.done());
        assert_eq!(
            (flight.tally.messages, flight.tally.bytes),
            (1, size as u64)
        );
    }

    #[test]
    fn a_changed_byte_is_a_payload_error() {
        let mut flight = Flight::new(64, closed_loop(), 1_000, None, 0, 0);
        let seq = flight.next_send(0).unwrap();
        let mut out = Vec::new();
        frame(seq, 64, &mut out);
        out[HEADER + 30] ^= 1;
        let header = Header::decode(&out).unwrap();
        assert_eq!(flight.arrive(header, &out[HEADER..], 5), Arrival::Corrupt);
        assert_eq!(flight.tally.payload_errors, 1);
        assert_eq!(flight.tally.messages, 0);
    }

    #[test]
    fn a_message_not_back_by_its_deadline_is_a_timeout_and_its_late_pieces_are_strays() {
        let mut flight = Flight::new(64, closed_loop(), 1_000, Some(2), 0, 0);
        let first = flight.next_send(0).unwrap();
        assert_eq!(flight.next_wake(), 1_000);
        assert_eq!(flight.expire(999), 0);
        assert_eq!(flight.expire(1_000), 1);
        let mut out = Vec::new();
        frame(first, 64, &mut out);
        let header = Header::decode(&out).unwrap();
        assert_eq!(flight.arrive(header, &out[HEADER..], 1_001), Arrival::Stray);
        assert_eq!(flight.next_send(1_001), Some(1));
        assert!(!flight.done());
        assert!(flight.silent(3_000, 1_500));
        assert_eq!(flight.tally.timeouts, 1);
    }

    #[test]
    fn open_loop_latency_starts_at_the_intended_send_time() {
        let pacing = Pacing {
            window: 100,
            interval_ns: Some(1_000),
        };
        let mut flight = Flight::new(64, pacing, 1_000_000, None, 0, 0);
        assert_eq!(flight.next_send(0), Some(0));
        assert_eq!(flight.next_send(500), None, "not due yet");
        assert_eq!(flight.next_wake(), 1_000);
        // Late by 4 µs: the sends due at 1, 2, 3 and 4 µs all go now.
        let late: Vec<u64> = std::iter::from_fn(|| flight.next_send(4_500)).collect();
        assert_eq!(late, [1, 2, 3, 4]);
        let mut out = Vec::new();
        frame(1, 64, &mut out);
        let header = Header::decode(&out).unwrap();
        // Sent at 4.5 µs, back at 5 µs: 4 µs of round trip, measured from 1 µs.
        assert_eq!(
            flight.arrive(header, &out[HEADER..], 5_000),
            Arrival::Complete(4_000)
        );
    }

    #[test]
    fn patterns_differ_by_message_and_by_offset() {
        let mut a = [0u8; 600];
        fill(1, 0, &mut a);
        assert!(check(1, 0, &a));
        assert!(!check(2, 0, &a));
        assert!(!check(1, 256, &a[..300]));
        assert!(check(1, 256, &a[256..]));
    }
}
