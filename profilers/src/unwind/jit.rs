//! Walking through generated code: JIT functions and interpreter trampolines in
//! anonymous memory, which no file's unwind tables cover.
//!
//! Runtimes that name their code in a perf map keep a frame chain through it, in one of
//! two shapes, told apart by the instructions at the return address (read from the
//! process once per address):
//!
//! - CPython's perf trampoline (3.12 and 3.13, `-X perf`), one copy per Python
//!   function: `sub $8,%rsp; call *%rcx; add $8,%rsp; ret`. It sets up no frame pointer:
//!   at the return address the caller's return address is at `sp + 8` and the frame
//!   ends at `sp + 16`, `rbp` untouched.
//! - Everything else (V8's JavaScript, interpreted with `--interpreted-frames-native-stack`
//!   too; the JVM with `-XX:+PreserveFramePointer`): a frame pointer chain, `[rbp]` the
//!   caller's `rbp`, `[rbp + 8]` the return address. The vDSO (`clock_gettime`), in no
//!   file either, keeps frame pointers too.
//!
//! An address whose code cannot be read (not mapped, or the process is gone) is not
//! walked: the stack ends there, truncated, as before.

use std::collections::HashMap;

use framehop::x86_64::UnwindRegsX86_64;

/// The instructions at the return address of CPython's perf trampoline:
/// `add $8,%rsp; ret`.
const TRAMPOLINE_RETURN: [u8; 5] = [0x48, 0x83, 0xc4, 0x08, 0xc3];

/// Return addresses whose shape is remembered per process before the memory is emptied:
/// 16 bytes each plus the table's overhead; generated code has far fewer call sites.
const MAX_SHAPES: usize = 1 << 16;

/// How a frame of generated code is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// CPython's trampoline: the return address at `sp + 8`.
    Trampoline,
    /// A frame pointer chain.
    FramePointer,
}

/// The shapes of return addresses into generated code, per process.
#[derive(Debug, Default)]
pub(crate) struct JitCode {
    /// (pid, return address) → its shape, `None` when its code could not be read.
    shapes: HashMap<(u32, u64), Option<Shape>>,
}

impl JitCode {
    /// The shape of the frame that `ra` (a return address of `pid` in no file) returns
    /// into; `None` when no code can be read there.
    pub fn shape(&mut self, pid: u32, ra: u64) -> Option<Shape> {
        if let Some(&s) = self.shapes.get(&(pid, ra)) {
            return s;
        }
        if self.shapes.len() >= MAX_SHAPES {
            self.shapes = HashMap::new();
        }
        let mut code = [0u8; TRAMPOLINE_RETURN.len()];
        let shape = read_code(pid, ra, &mut code).then(|| {
            if code == TRAMPOLINE_RETURN {
                Shape::Trampoline
            } else {
                Shape::FramePointer
            }
        });
        self.shapes.insert((pid, ra), shape);
        shape
    }

    /// `pid` exec'd or exited: its addresses mean nothing any more.
    pub fn forget(&mut self, pid: u32) {
        self.shapes.retain(|&(p, _), _| p != pid);
    }
}

/// Reads `out.len()` bytes of `pid`'s memory at `addr`; whether all were read.
fn read_code(pid: u32, addr: u64, out: &mut [u8]) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: out.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: out.len(),
    };
    // SAFETY: `local` describes `out`, writable for its length; the remote range is
    // only read by the kernel, which checks it against the other process's mappings.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    usize::try_from(n).is_ok_and(|n| n == out.len())
}

/// Leaves a frame of generated code of `shape` (`regs` as the frame has them; `read`
/// reads a word of the stack copy): sets `regs` to the caller's and returns the return
/// address, or `None` when the frame does not lead anywhere a stack can be: a frame
/// pointer below the stack pointer or misaligned, a word outside the copy, a null
/// return address. The stack pointer rises with every frame, so a walk ends.
pub(crate) fn step(
    shape: Shape,
    regs: &mut UnwindRegsX86_64,
    read: &mut impl FnMut(u64) -> Result<u64, ()>,
) -> Option<u64> {
    let sp = regs.sp();
    let (ra, caller_sp, caller_bp) = match shape {
        Shape::Trampoline => {
            let ra = read(sp.checked_add(8)?).ok()?;
            (ra, sp.checked_add(16)?, regs.bp())
        }
        Shape::FramePointer => {
            let bp = regs.bp();
            if bp < sp || !bp.is_multiple_of(8) {
                return None;
            }
            // The caller's rbp is not checked: code built without frame pointers (the
            // runtime's own, or the vDSO's caller) holds anything in it.
            let caller_bp = read(bp).ok()?;
            let ra = read(bp.checked_add(8)?).ok()?;
            (ra, bp.checked_add(16)?, caller_bp)
        }
    };
    if ra == 0 {
        return None;
    }
    regs.set_ip(ra);
    regs.set_sp(caller_sp);
    regs.set_bp(caller_bp);
    Some(ra)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of CPython's trampoline, in this process's memory.
    static TRAMPOLINE: [u8; 11] = [
        0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3,
    ];
    /// Code that returns through a frame pointer: `pop %rbp; ret`.
    static FRAME_POINTER_CODE: [u8; 8] = [0xff, 0xd0, 0x5d, 0xc3, 0, 0, 0, 0];

    fn me() -> u32 {
        std::process::id()
    }

    #[test]
    fn the_trampoline_is_told_apart_from_frame_pointer_code_by_its_instructions() {
        let mut jit = JitCode::default();
        let tramp_ra = TRAMPOLINE.as_ptr() as u64 + 6;
        let fp_ra = FRAME_POINTER_CODE.as_ptr() as u64 + 2;
        assert_eq!(jit.shape(me(), tramp_ra), Some(Shape::Trampoline));
        assert_eq!(jit.shape(me(), fp_ra), Some(Shape::FramePointer));
        // Not mapped, and a process that is not there.
        assert_eq!(jit.shape(me(), 8), None);
        assert_eq!(jit.shape(u32::MAX - 7, tramp_ra), None);
        jit.forget(me());
        assert!(jit.shapes.keys().all(|&(p, _)| p != me()));
    }

    fn reader(base: u64, words: &[u64]) -> impl FnMut(u64) -> Result<u64, ()> + '_ {
        move |addr| {
            let i = addr.checked_sub(base).ok_or(())? / 8;
            words
                .get(usize::try_from(i).map_err(|_| ())?)
                .copied()
                .ok_or(())
        }
    }

    #[test]
    fn a_trampoline_frame_returns_through_sp_plus_8_and_keeps_rbp() {
        let words = [0xdead, 0x4000_1234, 0x99];
        let mut regs = UnwindRegsX86_64::new(0x7f00_0006, 0x1000, 0x5000);
        let ra = step(Shape::Trampoline, &mut regs, &mut reader(0x1000, &words));
        assert_eq!(ra, Some(0x4000_1234));
        assert_eq!((regs.sp(), regs.bp()), (0x1010, 0x5000));
    }

    #[test]
    fn a_frame_pointer_frame_follows_the_chain_and_refuses_a_bad_one() {
        // [bp] = caller's bp, [bp + 8] = return address.
        let words = [0, 0, 0x1040, 0x4000_0042, 0, 0, 0, 0, 0x1008, 7];
        let mut regs = UnwindRegsX86_64::new(0x7f00_0000, 0x1000, 0x1010);
        let mut read = reader(0x1000, &words);
        assert_eq!(
            step(Shape::FramePointer, &mut regs, &mut read),
            Some(0x4000_0042)
        );
        assert_eq!((regs.sp(), regs.bp()), (0x1020, 0x1040));
        // The next frame's rbp points back down, below its stack pointer: refused.
        assert_eq!(step(Shape::FramePointer, &mut regs, &mut read), Some(7));
        assert_eq!((regs.sp(), regs.bp()), (0x1050, 0x1008));
        assert_eq!(step(Shape::FramePointer, &mut regs, &mut read), None);
        // rbp below sp, misaligned, outside the copy.
        for bp in [0x0ff8, 0x1011, 0x9000] {
            let mut regs = UnwindRegsX86_64::new(0, 0x1000, bp);
            assert_eq!(step(Shape::FramePointer, &mut regs, &mut read), None);
        }
        // A null return address.
        let words = [0x2000, 0];
        let mut regs = UnwindRegsX86_64::new(0, 0x1000, 0x1000);
        assert_eq!(
            step(Shape::FramePointer, &mut regs, &mut reader(0x1000, &words)),
            None
        );
    }
}
