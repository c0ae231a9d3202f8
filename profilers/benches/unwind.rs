//! Unwinding throughput: stacks per second per core that the sampler's thread can walk
//! from stack copies with DWARF CFI (`--unwind dwarf`), the figure that says whether it
//! keeps up with 999 Hz on every CPU. The bar: at least 10 × 999 × CPUs.
//!
//! `cargo bench -p benchtop-profilers --bench unwind` captures real stack copies of this
//! process (registers and 8 KiB from the stack pointer, as the kernel takes them) at
//! the bottom of call chains 8, 24 and 48 frames deep, and unwinds each with the
//! unwinder the sampler uses (modules from /proc/self/maps, tables from the files'
//! `.eh_frame`). After the criterion groups it prints the throughput of the deepest
//! chain against the bar.

use std::arch::asm;
use std::hint::black_box;
use std::time::Instant;

use benchtop_profilers::UnwindMode;
use benchtop_profilers::unwind::Unwinder;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Bytes copied per stack: perf's default and `--stack-size`'s.
const STACK_COPY: usize = 8192;

/// A stack as the kernel gives it with a sample.
struct Copy {
    ip: u64,
    sp: u64,
    bp: u64,
    bytes: Vec<u8>,
}

/// The end of the mapping of this process that holds `addr` (its stack).
fn mapping_end(addr: u64) -> u64 {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    for line in maps.lines() {
        let range = line.split(' ').next().unwrap_or("");
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        if (a..b).contains(&addr) {
            return b;
        }
    }
    panic!("no mapping holds the stack pointer {addr:#x}");
}

/// The registers here and a copy of the stack above them.
#[inline(never)]
fn capture() -> Copy {
    let (ip, sp, bp): (u64, u64, u64);
    // SAFETY: reads three registers into outputs; no memory is touched.
    unsafe {
        asm!(
            "lea {ip}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            ip = out(reg) ip,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags),
        );
    }
    let len = (mapping_end(sp) - sp).min(STACK_COPY as u64) as usize;
    let mut bytes = vec![0u8; len];
    // SAFETY: [sp, sp + len) lies inside this thread's stack mapping (clamped to its
    // end above) and below no live frame of ours: the frames of `capture`'s callers,
    // which stay alive while we copy them. Bytes only, read as the kernel would.
    unsafe {
        std::ptr::copy_nonoverlapping(sp as *const u8, bytes.as_mut_ptr(), len);
    }
    Copy { ip, sp, bp, bytes }
}

/// `depth` nested calls, then a capture.
#[inline(never)]
fn nest(depth: u32) -> Copy {
    if depth == 0 {
        return capture();
    }
    let c = nest(black_box(depth - 1));
    black_box(&c);
    c
}

fn unwind(c: &mut Criterion) {
    let pid = std::process::id();
    let mut group = c.benchmark_group("unwind");
    for depth in [8u32, 24, 48] {
        let copy = nest(depth);
        let mut unwinder = Unwinder::new(UnwindMode::Dwarf);
        unwinder.see_process(pid);
        let mut out = Vec::with_capacity(256);
        let complete = unwinder.unwind_copy(
            pid,
            copy.ip,
            copy.sp,
            copy.bp,
            &copy.bytes,
            copy.bytes.len() == STACK_COPY,
            &mut out,
        );
        assert!(
            out.len() as u32 > depth,
            "only {} frames unwound from {depth} calls deep (complete: {complete})",
            out.len()
        );
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("{depth}-deep"), |b| {
            b.iter(|| {
                unwinder.unwind_copy(
                    pid,
                    copy.ip,
                    copy.sp,
                    copy.bp,
                    black_box(&copy.bytes),
                    false,
                    &mut out,
                )
            })
        });
    }
    group.finish();
}

/// The deepest chain's throughput against the bar, on this machine's CPUs.
fn verdict(_: &mut Criterion) {
    let pid = std::process::id();
    let copy = nest(48);
    let mut unwinder = Unwinder::new(UnwindMode::Dwarf);
    unwinder.see_process(pid);
    let mut out = Vec::with_capacity(256);
    let n = 200_000u32;
    let started = Instant::now();
    for _ in 0..n {
        unwinder.unwind_copy(pid, copy.ip, copy.sp, copy.bp, &copy.bytes, false, &mut out);
    }
    let per_s = f64::from(n) / started.elapsed().as_secs_f64();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let bar = 10.0 * 999.0 * cpus;
    println!(
        "unwind: {} frames per stack, {per_s:.0} stacks/s on one core; bar 10 x 999 Hz x {cpus} CPUs = {bar:.0}/s: {:.1}x the bar",
        out.len(),
        per_s / bar
    );
}

criterion_group!(benches, unwind, verdict);
criterion_main!(benches);
