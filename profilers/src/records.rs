//! Perf ring-buffer records, read in place.
//!
//! The sampler asks for a fixed sample layout (IP, TID, TIME, CPU, PERIOD, CALLCHAIN)
//! and `sample_id_all`, so every record is decoded here from its bytes without copying
//! or allocating. Layouts are those of `perf_event_open(2)`.

/// `PERF_RECORD_LOST`.
pub(crate) const RECORD_LOST: u32 = 2;
/// `PERF_RECORD_COMM`.
pub(crate) const RECORD_COMM: u32 = 3;
/// `PERF_RECORD_EXIT`.
pub(crate) const RECORD_EXIT: u32 = 4;
/// `PERF_RECORD_THROTTLE`.
pub(crate) const RECORD_THROTTLE: u32 = 5;
/// `PERF_RECORD_FORK`.
pub(crate) const RECORD_FORK: u32 = 7;
/// `PERF_RECORD_SAMPLE`.
pub(crate) const RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_MMAP2`.
pub(crate) const RECORD_MMAP2: u32 = 10;
/// `PERF_RECORD_LOST_SAMPLES`.
pub(crate) const RECORD_LOST_SAMPLES: u32 = 13;

/// `PERF_RECORD_MISC_COMM_EXEC`: the COMM record comes from an exec.
pub(crate) const MISC_COMM_EXEC: u16 = 1 << 13;
const MISC_CPUMODE_MASK: u16 = 7;
const MISC_KERNEL: u16 = 1;

/// Callchain entries at or above this value are context markers, not addresses.
pub(crate) const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;

/// A little-endian-agnostic (native) reader over a record's bytes.
struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn u32(&mut self) -> Option<u32> {
        let (head, rest) = self.buf.split_first_chunk::<4>()?;
        self.buf = rest;
        Some(u32::from_ne_bytes(*head))
    }

    fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.buf.split_first_chunk::<8>()?;
        self.buf = rest;
        Some(u64::from_ne_bytes(*head))
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.buf = self.buf.get(n..)?;
        Some(())
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.buf.get(..n)?, self.buf.get(n..)?);
        self.buf = rest;
        Some(head)
    }

    /// A NUL-terminated string padded to 8 bytes; the remainder is the sample id.
    fn c_str(&mut self) -> &'a [u8] {
        let end = self
            .buf
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.buf.len());
        &self.buf[..end]
    }
}

/// A `PERF_RECORD_SAMPLE` of the sampler's layout, borrowing the ring buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample<'a> {
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    #[allow(dead_code)] // Kept for off-CPU and timeline work; decoded for free.
    pub time: u64,
    #[allow(dead_code)]
    pub cpu: u32,
    #[allow(dead_code)]
    pub period: u64,
    /// The raw callchain: `nr` native-endian u64s, leaf first, with context markers.
    chain: &'a [u8],
}

impl<'a> Sample<'a> {
    /// Decodes a sample record body (after the 8-byte header).
    pub fn parse(body: &'a [u8]) -> Option<Self> {
        let mut c = Cursor { buf: body };
        let ip = c.u64()?;
        let pid = c.u32()?;
        let tid = c.u32()?;
        let time = c.u64()?;
        let cpu = c.u32()?;
        let _res = c.u32()?;
        let period = c.u64()?;
        let nr = usize::try_from(c.u64()?).ok()?;
        let chain = c.take(nr.checked_mul(8)?)?;
        Some(Sample {
            ip,
            pid,
            tid,
            time,
            cpu,
            period,
            chain,
        })
    }

    /// The callchain entries, leaf first, markers included.
    pub fn callchain(&self) -> impl Iterator<Item = u64> + 'a {
        self.chain
            .chunks_exact(8)
            .map(|c| c.try_into().map(u64::from_ne_bytes).unwrap_or(0))
    }
}

/// `PERF_RECORD_COMM`: a thread's name, set by exec or `prctl(PR_SET_NAME)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Comm<'a> {
    pub pid: u32,
    pub tid: u32,
    pub name: &'a [u8],
}

impl<'a> Comm<'a> {
    pub fn parse(body: &'a [u8]) -> Option<Self> {
        let mut c = Cursor { buf: body };
        Some(Comm {
            pid: c.u32()?,
            tid: c.u32()?,
            name: c.c_str(),
        })
    }
}

/// `PERF_RECORD_FORK` and `PERF_RECORD_EXIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Task {
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub ptid: u32,
}

impl Task {
    pub fn parse(body: &[u8]) -> Option<Self> {
        let mut c = Cursor { buf: body };
        Some(Task {
            pid: c.u32()?,
            ppid: c.u32()?,
            tid: c.u32()?,
            ptid: c.u32()?,
        })
    }
}

/// `PERF_RECORD_LOST`: how many records the kernel dropped (ring buffer full).
pub(crate) fn parse_lost(body: &[u8]) -> Option<u64> {
    let mut c = Cursor { buf: body };
    let _id = c.u64()?;
    c.u64()
}

/// `PERF_RECORD_LOST_SAMPLES`.
pub(crate) fn parse_lost_samples(body: &[u8]) -> Option<u64> {
    Cursor { buf: body }.u64()
}

/// `PERF_RECORD_MMAP2`: an executable mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mmap2<'a> {
    pub pid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    pub prot: u32,
    pub filename: &'a [u8],
}

impl<'a> Mmap2<'a> {
    pub fn parse(body: &'a [u8]) -> Option<Self> {
        let mut c = Cursor { buf: body };
        let pid = c.u32()?;
        let _tid = c.u32()?;
        let addr = c.u64()?;
        let len = c.u64()?;
        let pgoff = c.u64()?;
        // maj, min, ino, ino_generation — or build-id size, padding and 20 bytes.
        c.skip(24)?;
        let prot = c.u32()?;
        let _flags = c.u32()?;
        Some(Mmap2 {
            pid,
            addr,
            len,
            pgoff,
            prot,
            filename: c.c_str(),
        })
    }
}

/// The TIME of a side-band record's trailing `sample_id` (`sample_id_all` with our
/// sample type puts pid/tid, time, cpu/res in its last 24 bytes).
pub(crate) fn sample_id_time(body: &[u8]) -> Option<u64> {
    let start = body.len().checked_sub(16)?;
    Cursor {
        buf: &body[start..],
    }
    .u64()
}

/// A callchain split into kernel and user parts, both leaf first, markers dropped.
///
/// The first address of each part is where the CPU was (the sampled instruction, or
/// the user instruction that entered the kernel); every later one is a return address,
/// adjusted by -1 so that it looks up the call instruction and its inlining context
/// rather than whatever follows the call.
#[derive(Debug, Default)]
pub(crate) struct SplitChain {
    pub kernel: Vec<u64>,
    pub user: Vec<u64>,
}

impl SplitChain {
    /// Splits `chain` (leaf first). Entries before any marker count as user frames
    /// unless `misc` says the sample was taken in the kernel; guest and hypervisor
    /// frames are dropped. An empty chain falls back to the sample's `ip`.
    pub fn split(&mut self, chain: impl Iterator<Item = u64>, ip: u64, misc: u16) {
        #[derive(PartialEq)]
        enum Part {
            Kernel,
            User,
            Other,
        }
        self.kernel.clear();
        self.user.clear();
        let mut part = if misc & MISC_CPUMODE_MASK == MISC_KERNEL {
            Part::Kernel
        } else {
            Part::User
        };
        let mut first = true;
        let mut any = false;
        for entry in chain {
            if entry >= PERF_CONTEXT_MAX {
                part = match entry {
                    PERF_CONTEXT_KERNEL => Part::Kernel,
                    PERF_CONTEXT_USER => Part::User,
                    _ => Part::Other,
                };
                first = true;
                continue;
            }
            any = true;
            let addr = if first {
                entry
            } else {
                entry.saturating_sub(1)
            };
            first = false;
            match part {
                Part::Kernel => self.kernel.push(addr),
                Part::User => self.user.push(addr),
                Part::Other => {}
            }
        }
        if !any {
            match misc & MISC_CPUMODE_MASK {
                MISC_KERNEL => self.kernel.push(ip),
                _ => self.user.push(ip),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    #[test]
    fn markers_are_dropped_and_frames_sorted_into_kernel_and_user() {
        let chain = [
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0010,
            0xffff_ffff_8100_0200,
            PERF_CONTEXT_USER,
            0x5555_0000_1000,
            0x5555_0000_2001,
            0x5555_0000_3001,
        ];
        let mut s = SplitChain::default();
        s.split(chain.into_iter(), 0, MISC_KERNEL);
        // The first address of each part is exact; return addresses are moved back by one.
        assert_eq!(s.kernel, [0xffff_ffff_8100_0010, 0xffff_ffff_8100_01ff]);
        assert_eq!(
            s.user,
            [0x5555_0000_1000, 0x5555_0000_2000, 0x5555_0000_3000]
        );
    }

    #[test]
    fn guest_and_hypervisor_frames_are_dropped() {
        let hv = -32i64 as u64;
        let guest = -2048i64 as u64;
        let chain = [hv, 0x10, guest, 0x20, PERF_CONTEXT_USER, 0x30, 0x41];
        let mut s = SplitChain::default();
        s.split(chain.into_iter(), 0, 2);
        assert!(s.kernel.is_empty());
        assert_eq!(s.user, [0x30, 0x40]);
    }

    #[test]
    fn an_empty_callchain_falls_back_to_the_sampled_ip() {
        let mut s = SplitChain::default();
        s.split([PERF_CONTEXT_USER].into_iter(), 0x1234, 2);
        assert_eq!(s.user, [0x1234]);
        s.split(std::iter::empty(), 0xffff_ffff_8100_0000, MISC_KERNEL);
        assert_eq!(s.kernel, [0xffff_ffff_8100_0000]);
        assert!(s.user.is_empty());
    }

    #[test]
    fn a_sample_record_is_read_in_place() {
        let mut body = bytes(&[0x4000]);
        body.extend(42u32.to_ne_bytes());
        body.extend(43u32.to_ne_bytes());
        body.extend(bytes(&[1_000_000]));
        body.extend(1u32.to_ne_bytes());
        body.extend(0u32.to_ne_bytes());
        body.extend(bytes(&[1_001_001, 3, PERF_CONTEXT_USER, 0x4000, 0x5001]));
        let s = Sample::parse(&body).unwrap();
        assert_eq!(
            (s.ip, s.pid, s.tid, s.cpu, s.period),
            (0x4000, 42, 43, 1, 1_001_001)
        );
        assert_eq!(
            s.callchain().collect::<Vec<_>>(),
            [PERF_CONTEXT_USER, 0x4000, 0x5001]
        );
        // A callchain longer than the record is rejected, not read past the end.
        let mut short = body.clone();
        short.truncate(body.len() - 8);
        assert!(Sample::parse(&short).is_none());
    }

    #[test]
    fn side_band_records_decode() {
        let mut comm = Vec::new();
        comm.extend(7u32.to_ne_bytes());
        comm.extend(8u32.to_ne_bytes());
        comm.extend(b"worker-1\0\0\0\0\0\0\0\0");
        comm.extend(bytes(&[8, 99])); // sample_id: pid/tid, time
        assert_eq!(
            Comm::parse(&comm),
            Some(Comm {
                pid: 7,
                tid: 8,
                name: b"worker-1"
            })
        );

        let mut mmap = Vec::new();
        mmap.extend(7u32.to_ne_bytes());
        mmap.extend(7u32.to_ne_bytes());
        mmap.extend(bytes(&[0x7f00_0000_0000, 0x2000, 0x1000, 0, 0, 0]));
        mmap.extend(5u32.to_ne_bytes());
        mmap.extend(2u32.to_ne_bytes());
        mmap.extend(b"/usr/lib/libc.so.6\0\0\0\0\0\0");
        let m = Mmap2::parse(&mmap).unwrap();
        assert_eq!(
            (m.pid, m.addr, m.len, m.pgoff, m.prot, m.filename),
            (
                7,
                0x7f00_0000_0000,
                0x2000,
                0x1000,
                5,
                &b"/usr/lib/libc.so.6"[..]
            )
        );

        let mut task = Vec::new();
        for v in [10u32, 1, 11, 1] {
            task.extend(v.to_ne_bytes());
        }
        task.extend(bytes(&[5]));
        assert_eq!(
            Task::parse(&task),
            Some(Task {
                pid: 10,
                ppid: 1,
                tid: 11,
                ptid: 1
            })
        );
        assert_eq!(parse_lost(&bytes(&[1, 17])), Some(17));
        // The time of the trailing sample_id: pid/tid, time, cpu/res.
        let mut with_id = task.clone();
        with_id.extend(7u32.to_ne_bytes());
        with_id.extend(7u32.to_ne_bytes());
        with_id.extend(bytes(&[123_456_789]));
        with_id.extend(1u32.to_ne_bytes());
        with_id.extend(0u32.to_ne_bytes());
        assert_eq!(sample_id_time(&with_id), Some(123_456_789));
        assert_eq!(sample_id_time(&[0; 8]), None);
        assert_eq!(parse_lost_samples(&bytes(&[3])), Some(3));
    }
}
