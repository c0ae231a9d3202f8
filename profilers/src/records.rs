//! Perf ring-buffer records, read in place.
//!
//! The sampler asks for a fixed sample layout (IDENTIFIER, IP, TID, TIME, CPU,
//! CALLCHAIN, and with DWARF unwinding REGS_USER and STACK_USER) and `sample_id_all`, so every record is decoded here from its bytes without
//! copying or allocating. Layouts are those of `perf_event_open(2)`.
//!
//! Several events can write into one ring buffer (the off-CPU `context-switches` event
//! shares the on-CPU event's buffer of its CPU, and with `attach` every thread's events
//! share it): `PERF_SAMPLE_IDENTIFIER` puts the id of the event that wrote a record first
//! in a sample and last in every other record's `sample_id`, so the reader can tell them
//! apart whatever the record type.

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
/// `PERF_RECORD_SWITCH`: the thread of a per-task event was switched in or out. Not
/// parsed by `perf-event-data`; see [`Switch`].
pub(crate) const RECORD_SWITCH: u32 = 14;
/// `PERF_RECORD_SWITCH_CPU_WIDE`: the same for a CPU-wide event, with the other task's
/// pid and tid first. The sampler's events are per task; decoded anyway.
pub(crate) const RECORD_SWITCH_CPU_WIDE: u32 = 15;

/// `PERF_RECORD_MISC_SWITCH_OUT`: a switch record is a switch-out (else a switch-in).
pub(crate) const MISC_SWITCH_OUT: u16 = 1 << 13;
/// `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`: the thread was switched out while still
/// runnable (preempted), not because it blocked.
pub(crate) const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;

/// Bytes of the `sample_id` trailer that `sample_id_all` appends to every non-sample
/// record with the sampler's sample type: pid/tid, time, cpu/res, identifier.
pub(crate) const SAMPLE_ID_LEN: usize = 32;

/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: an MMAP2 record carries a build id where the
/// device and inode would be.
pub(crate) const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

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
    /// The id of the event that took the sample (the parent's for an inherited event).
    pub id: u64,
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    /// The raw callchain: `nr` native-endian u64s, leaf first, with context markers.
    chain: &'a [u8],
    /// A tracepoint's raw record (`PERF_SAMPLE_RAW`), when the layout has it: empty for
    /// the samples of other events, padding included otherwise.
    pub raw: &'a [u8],
    /// The user registers and stack copy, when the layout has them and the sample was
    /// taken with a user context (not in a kernel thread).
    pub user: Option<UserStack<'a>>,
}

/// The registers the sampler asks for with `PERF_SAMPLE_REGS_USER` on x86_64, as the
/// mask of `sample_regs_user`: DI (bit 5: a system call's first argument, the futex word
/// of a thread blocked on one), BP (bit 6), SP (bit 7), IP (bit 8). The kernel writes
/// them in bit order.
pub(crate) const REGS_USER_MASK: u64 = (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8);
/// How many registers [`REGS_USER_MASK`] selects.
const REGS_USER_COUNT: usize = 4;

/// A sample's user registers and the copy of its user stack (`PERF_SAMPLE_REGS_USER`
/// and `PERF_SAMPLE_STACK_USER`), borrowing the record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UserStack<'a> {
    /// DI: in a sample taken inside a system call, its first argument.
    pub di: u64,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// The bytes copied from `sp` upwards: `dyn_size` of them, at most the size asked.
    pub stack: &'a [u8],
    /// The stack copy was as large as asked for: the stack may go on beyond it.
    pub full: bool,
}

impl<'a> Sample<'a> {
    /// Decodes a sample record body (after the 8-byte header); `raw` says the layout has
    /// RAW after the callchain, `user_stack` that it has REGS_USER (with
    /// [`REGS_USER_MASK`]) and STACK_USER after that.
    pub fn parse(body: &'a [u8], user_stack: bool, raw: bool) -> Option<Self> {
        let mut c = Cursor { buf: body };
        let id = c.u64()?;
        let ip = c.u64()?;
        let pid = c.u32()?;
        let tid = c.u32()?;
        let time = c.u64()?;
        let cpu = c.u32()?;
        let _res = c.u32()?;
        let nr = usize::try_from(c.u64()?).ok()?;
        let chain = c.take(nr.checked_mul(8)?)?;
        // Events without raw data write a size of 4 and four zero bytes.
        let raw = if raw {
            let size = c.u32()? as usize;
            c.take(size)?
        } else {
            &[]
        };
        let user = if user_stack {
            parse_user_stack(&mut c)?
        } else {
            None
        };
        Some(Sample {
            id,
            ip,
            pid,
            tid,
            time,
            cpu,
            chain,
            raw,
            user,
        })
    }

    /// The callchain entries, leaf first, markers included.
    pub fn callchain(&self) -> impl Iterator<Item = u64> + 'a {
        self.chain
            .chunks_exact(8)
            .map(|c| c.try_into().map(u64::from_ne_bytes).unwrap_or(0))
    }
}

/// Reads REGS_USER and STACK_USER: `None` for a record too short for them, `Some(None)`
/// for a sample without a user context (ABI 0) or without stack bytes.
fn parse_user_stack<'a>(c: &mut Cursor<'a>) -> Option<Option<UserStack<'a>>> {
    let abi = c.u64()?;
    let mut regs = [0u64; REGS_USER_COUNT];
    if abi != 0 {
        for r in &mut regs {
            *r = c.u64()?;
        }
    }
    let size = usize::try_from(c.u64()?).ok()?;
    if size == 0 {
        return Some(None);
    }
    let data = c.take(size)?;
    let dyn_size = usize::try_from(c.u64()?).ok()?;
    if abi == 0 {
        return Some(None);
    }
    let [di, bp, sp, ip] = regs;
    Some(Some(UserStack {
        di,
        ip,
        sp,
        bp,
        stack: data.get(..dyn_size.min(size))?,
        full: dyn_size >= size,
    }))
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
    /// The inode of the file mapped (unless [`MISC_MMAP_BUILD_ID`]).
    pub ino: u64,
    pub prot: u32,
    pub filename: &'a [u8],
}

impl<'a> Mmap2<'a> {
    /// The mapping is of a file: its name is a path. The kernel names anonymous memory
    /// `//anon` (generated code, named by perf maps instead), and other memory in
    /// brackets (`[vdso]`).
    pub fn is_file(&self) -> bool {
        self.filename.starts_with(b"/") && !self.filename.starts_with(b"//")
    }

    pub fn parse(body: &'a [u8]) -> Option<Self> {
        let mut c = Cursor { buf: body };
        let pid = c.u32()?;
        let _tid = c.u32()?;
        let addr = c.u64()?;
        let len = c.u64()?;
        let pgoff = c.u64()?;
        // maj, min, ino, ino_generation — or build-id size, padding and 20 bytes.
        c.skip(8)?;
        let ino = c.u64()?;
        c.skip(8)?;
        let prot = c.u32()?;
        let _flags = c.u32()?;
        Some(Mmap2 {
            pid,
            addr,
            len,
            pgoff,
            ino,
            prot,
            filename: c.c_str(),
        })
    }
}

/// The trailing `sample_id` of a non-sample record (`sample_id_all` with the sampler's
/// sample type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SampleId {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    /// The id of the event that wrote the record.
    pub id: u64,
}

impl SampleId {
    /// Decodes the last [`SAMPLE_ID_LEN`] bytes of `body`.
    pub fn parse_trailer(body: &[u8]) -> Option<Self> {
        let start = body.len().checked_sub(SAMPLE_ID_LEN)?;
        let mut c = Cursor {
            buf: body.get(start..)?,
        };
        let pid = c.u32()?;
        let tid = c.u32()?;
        let time = c.u64()?;
        let cpu = c.u32()?;
        let _res = c.u32()?;
        let id = c.u64()?;
        Some(SampleId {
            pid,
            tid,
            time,
            cpu,
            id,
        })
    }
}

/// The TIME of a side-band record's trailing `sample_id`.
pub(crate) fn sample_id_time(body: &[u8]) -> Option<u64> {
    SampleId::parse_trailer(body).map(|id| id.time)
}

/// `PERF_RECORD_SWITCH` (or `_CPU_WIDE`): a thread of the sampled tree was switched out
/// or in. The record is only a header and the `sample_id` (the cpu-wide form puts the
/// other task's pid and tid first), so the thread and the time come from the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Switch {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    /// A switch-out; else a switch-in.
    pub out: bool,
    /// A switch-out of a thread that was still runnable (preempted, not blocked).
    pub preempt: bool,
}

impl Switch {
    /// Decodes a switch record of type `ty` with header `misc` from its body (after the
    /// 8-byte header). `None` for another type or a body too short for its layout.
    pub fn parse(ty: u32, misc: u16, body: &[u8]) -> Option<Self> {
        let min = match ty {
            RECORD_SWITCH => SAMPLE_ID_LEN,
            RECORD_SWITCH_CPU_WIDE => 8 + SAMPLE_ID_LEN,
            _ => return None,
        };
        if body.len() < min {
            return None;
        }
        let id = SampleId::parse_trailer(body)?;
        let out = misc & MISC_SWITCH_OUT != 0;
        Some(Switch {
            pid: id.pid,
            tid: id.tid,
            time: id.time,
            cpu: id.cpu,
            out,
            preempt: out && misc & MISC_SWITCH_OUT_PREEMPT != 0,
        })
    }
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

    #[test]
    fn only_mappings_named_by_a_path_are_files() {
        let m = |filename: &'static [u8]| Mmap2 {
            pid: 1,
            addr: 0,
            len: 1,
            pgoff: 0,
            ino: 0,
            prot: 0,
            filename,
        };
        assert!(m(b"/usr/lib/libc.so.6").is_file());
        assert!(m(b"/tmp/jit-42.dump").is_file());
        assert!(!m(b"//anon").is_file());
        assert!(!m(b"[vdso]").is_file());
        assert!(!m(b"").is_file());
    }

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
        let mut body = bytes(&[77, 0x4000]);
        body.extend(42u32.to_ne_bytes());
        body.extend(43u32.to_ne_bytes());
        body.extend(bytes(&[1_000_000]));
        body.extend(1u32.to_ne_bytes());
        body.extend(0u32.to_ne_bytes());
        body.extend(bytes(&[3, PERF_CONTEXT_USER, 0x4000, 0x5001]));
        let s = Sample::parse(&body, false, false).unwrap();
        assert_eq!(
            (s.id, s.ip, s.pid, s.tid, s.time, s.cpu),
            (77, 0x4000, 42, 43, 1_000_000, 1)
        );
        assert_eq!(
            s.callchain().collect::<Vec<_>>(),
            [PERF_CONTEXT_USER, 0x4000, 0x5001]
        );
        // A callchain longer than the record is rejected, not read past the end.
        let mut short = body.clone();
        short.truncate(body.len() - 8);
        assert!(Sample::parse(&short, false, false).is_none());
    }

    #[test]
    fn a_tracepoints_raw_record_sits_between_the_callchain_and_the_user_stack() {
        let head = |body: &mut Vec<u8>| {
            body.extend(bytes(&[9, 0x4000]));
            body.extend(42u32.to_ne_bytes());
            body.extend(43u32.to_ne_bytes());
            body.extend(bytes(&[1_000]));
            body.extend(0u32.to_ne_bytes());
            body.extend(0u32.to_ne_bytes());
            body.extend(bytes(&[0]));
        };
        let mut body = Vec::new();
        head(&mut body);
        // 12 bytes of record: with its u32 size, 16 bytes, 8-aligned.
        body.extend(12u32.to_ne_bytes());
        body.extend([1u8; 12]);
        // ABI 0: no user context.
        body.extend(bytes(&[0, 0]));
        let s = Sample::parse(&body, true, true).unwrap();
        assert_eq!(s.raw, [1u8; 12]);
        assert!(s.user.is_none());
        // Another event of that layout: size 4, four zero bytes.
        let mut other = Vec::new();
        head(&mut other);
        other.extend(4u32.to_ne_bytes());
        other.extend(0u32.to_ne_bytes());
        assert_eq!(Sample::parse(&other, false, true).unwrap().raw, [0u8; 4]);
        // A size past the record is refused.
        let mut bad = Vec::new();
        head(&mut bad);
        bad.extend(4_000u32.to_ne_bytes());
        assert!(Sample::parse(&bad, false, true).is_none());
    }

    #[test]
    fn a_sample_with_registers_and_a_stack_copy_is_read_in_place() {
        let mut body = bytes(&[5, 0x4000]);
        body.extend(42u32.to_ne_bytes());
        body.extend(43u32.to_ne_bytes());
        body.extend(bytes(&[1_000]));
        body.extend(0u32.to_ne_bytes());
        body.extend(0u32.to_ne_bytes());
        // An empty callchain, ABI 64 with di, bp, sp, ip, a 32-byte copy of which 24
        // bytes were filled.
        body.extend(bytes(&[0, 2, 0xd1, 0x7ff0, 0x7fe0, 0x4000, 32]));
        body.extend(bytes(&[11, 22, 33, 0]));
        body.extend(bytes(&[24]));
        let s = Sample::parse(&body, true, false).unwrap();
        let u = s.user.unwrap();
        assert_eq!((u.di, u.bp, u.sp, u.ip), (0xd1, 0x7ff0, 0x7fe0, 0x4000));
        assert_eq!(u.stack, &bytes(&[11, 22, 33])[..]);
        assert!(!u.full);
        // The same layout read without the user part ignores it; cut short, it is
        // rejected rather than read past the end.
        assert!(Sample::parse(&body, false, false).unwrap().user.is_none());
        for len in [body.len() - 1, body.len() - 8, body.len() - 40] {
            assert!(Sample::parse(&body[..len], true, false).is_none(), "{len}");
        }
        // A kernel thread's sample: ABI 0, no registers, no stack bytes.
        let mut kernel = body[..48].to_vec();
        kernel.extend(bytes(&[0, 0]));
        assert!(Sample::parse(&kernel, true, false).unwrap().user.is_none());
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
        // The time of the trailing sample_id: pid/tid, time, cpu/res, identifier.
        let mut with_id = task.clone();
        with_id.extend(sample_id(7, 7, 123_456_789, 1, 99));
        assert_eq!(sample_id_time(&with_id), Some(123_456_789));
        assert_eq!(
            SampleId::parse_trailer(&with_id),
            Some(SampleId {
                pid: 7,
                tid: 7,
                time: 123_456_789,
                cpu: 1,
                id: 99
            })
        );
        assert_eq!(sample_id_time(&[0; 24]), None);
        assert_eq!(parse_lost_samples(&bytes(&[3])), Some(3));
    }

    /// A `sample_id` trailer as the kernel writes it for the sampler's sample type.
    fn sample_id(pid: u32, tid: u32, time: u64, cpu: u32, id: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(pid.to_ne_bytes());
        b.extend(tid.to_ne_bytes());
        b.extend(time.to_ne_bytes());
        b.extend(cpu.to_ne_bytes());
        b.extend(0u32.to_ne_bytes());
        b.extend(id.to_ne_bytes());
        b
    }

    #[test]
    fn a_switch_record_is_its_sample_id_and_the_direction_in_misc() {
        let body = sample_id(100, 101, 5_000_000_123, 1, 42);
        // A switch-in: misc without the out bit.
        assert_eq!(
            Switch::parse(RECORD_SWITCH, 0, &body),
            Some(Switch {
                pid: 100,
                tid: 101,
                time: 5_000_000_123,
                cpu: 1,
                out: false,
                preempt: false
            })
        );
        // A voluntary switch-out (the thread blocked); the cpumode bits do not matter.
        let out = Switch::parse(RECORD_SWITCH, MISC_SWITCH_OUT | 1, &body).unwrap();
        assert!(out.out && !out.preempt, "{out:?}");
        // A preempted switch-out: still runnable.
        let pre = Switch::parse(
            RECORD_SWITCH,
            MISC_SWITCH_OUT | MISC_SWITCH_OUT_PREEMPT,
            &body,
        )
        .unwrap();
        assert!(pre.out && pre.preempt, "{pre:?}");
        // The preempt bit alone on a switch-in means nothing.
        let odd = Switch::parse(RECORD_SWITCH, MISC_SWITCH_OUT_PREEMPT, &body).unwrap();
        assert!(!odd.out && !odd.preempt, "{odd:?}");
    }

    #[test]
    fn a_cpu_wide_switch_record_skips_the_other_tasks_ids() {
        let mut body = Vec::new();
        body.extend(555u32.to_ne_bytes()); // next_prev_pid
        body.extend(556u32.to_ne_bytes()); // next_prev_tid
        body.extend(sample_id(100, 101, 77, 0, 42));
        let s = Switch::parse(RECORD_SWITCH_CPU_WIDE, MISC_SWITCH_OUT, &body).unwrap();
        assert_eq!((s.pid, s.tid, s.time, s.out), (100, 101, 77, true));
        // Without the leading ids it is too short for its type.
        let short = sample_id(100, 101, 77, 0, 42);
        assert_eq!(Switch::parse(RECORD_SWITCH_CPU_WIDE, 0, &short), None);
    }

    #[test]
    fn truncated_or_foreign_switch_records_are_rejected() {
        let body = sample_id(1, 2, 3, 4, 5);
        for len in 0..body.len() {
            assert_eq!(Switch::parse(RECORD_SWITCH, 0, &body[..len]), None, "{len}");
        }
        assert_eq!(Switch::parse(RECORD_SAMPLE, 0, &body), None);
        assert_eq!(Switch::parse(RECORD_COMM, MISC_SWITCH_OUT, &body), None);
        // A longer body (a future kernel adding fields before the trailer) still reads
        // the trailer from the end.
        let mut longer = bytes(&[0xdead]);
        longer.extend(&body);
        assert_eq!(
            Switch::parse(RECORD_SWITCH, MISC_SWITCH_OUT, &longer).map(|s| (s.tid, s.time)),
            Some((2, 3))
        );
    }
}
