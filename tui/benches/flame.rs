//! The cost of the flame pane for 100k distinct frames: laying a new tree out
//! (`FlameState::set_tree`, once a second while a run goes on), drawing it into a 160x48
//! buffer (every render tick), and both, as one "layout and render a frame" figure, also
//! while searching in differential mode. The goal is under 2 ms per frame. Also the cost of
//! freeing a replaced tree, which `set_tree` hands back to its caller (the app frees it
//! off the render path), and of the layout alone. `MIN_BOX_WIDTH` and `MAX_DEPTH` in
//! `state/flame.rs` were chosen with it.
//!
//! Then the pane as a profile of real code needs it: a new profile of 100,000 distinct
//! stacks (depth 10 to 60, Zipf-like weights, under C, std and tokio plumbing) built with
//! its plumbing hidden, its chains folded and its names shortened, and drawn at 160x48 —
//! the goal is under one frame at 60 Hz (16 ms); and the same drawn again alone.
//!
//! `cargo bench -p benchtop --bench flame`. The tree comes from a seeded generator: four
//! processes of four threads, then call trees that branch or run in chains, every function
//! name distinct, a few deep paths hot and a long thin tail. Trees are cloned outside the
//! timed part, and the trees `set_tree` hands back are dropped outside it.

use std::hint::black_box;

use benchtop::state::flame::{FlameState, FlameUnit};
use benchtop::view::flame::render_flame;
use benchtop_sessions::{FrameId, StackTree};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

/// Distinct function names in the generated tree, hence nodes at least.
const NODES: usize = 100_000;

const PROCESSES: [&str; 4] = ["bt-ring", "bt-sock", "bt-kv", "bt-defs"];
const CRATES: [&str; 8] = [
    "tokio",
    "std",
    "core",
    "alloc",
    "hyper",
    "ring",
    "serde_json",
    "benchtop",
];
const MODULES: [&str; 8] = [
    "runtime", "io", "sync", "vec", "proto", "codec", "task", "net",
];

/// xorshift64*: a small seeded generator, so every run benches the same tree.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A tree of [`NODES`] distinct functions (and more nodes) below 16 threads of 4 processes.
fn big_tree() -> StackTree {
    let mut rng = Rng(0x5eed_f1a3_e000_0001);
    let mut tree = StackTree::new();
    // Each stack with its heat, which grows along the first callee of every frame: as in
    // real profiles, a few deep paths are hot and the rest is a long, thin tail.
    let mut stacks: Vec<(Vec<FrameId>, u64)> = Vec::new();
    // Breadth first, so the budget spreads over every process.
    let mut todo = std::collections::VecDeque::new();
    for process in PROCESSES {
        let process = tree.intern(process);
        for t in 0..4 {
            todo.push_back((vec![process, tree.intern(&format!("worker-{t}"))], 1u64));
        }
    }
    let mut next_name = 0u64;
    while let Some((path, heat)) = todo.pop_front() {
        // Half the frames call one function (chains, which make the tree deep), the others
        // two to eight; none once the budget is spent.
        let children = match (next_name as usize >= NODES, rng.below(2)) {
            (true, _) => 0,
            (false, 0) => 1,
            (false, _) => 2 + rng.below(7),
        };
        if children == 0 || path.len() > 60 {
            stacks.push((path, heat));
            continue;
        }
        for callee in 0..children {
            let name = format!(
                "{}::{}::fn_{next_name}",
                CRATES[rng.below(8) as usize],
                MODULES[rng.below(8) as usize]
            );
            next_name += 1;
            let mut child = path.clone();
            child.push(tree.intern(&name));
            let heat = if callee == 0 {
                (heat * 3).min(1 << 40)
            } else {
                heat
            };
            todo.push_back((child, heat));
        }
        // Some frames also run code of their own.
        if rng.below(4) == 0 {
            stacks.push((path, heat));
        }
    }
    for (stack, heat) in &stacks {
        tree.add(stack, heat * (1 + rng.below(10)));
    }
    assert!(tree.node_count() > NODES, "{} nodes", tree.node_count());
    assert!(tree.frame_count() >= NODES, "{} frames", tree.frame_count());
    tree
}

/// What every generated stack starts with: a process, a thread, and the C, std and tokio
/// plumbing down to a task's poll (all of it hidden by default but the thread).
const PLUMBING: &[&str] = &[
    "_start",
    "__libc_start_main",
    "std::rt::lang_start_internal",
    "std::rt::lang_start::{{closure}}",
    "std::sys::backtrace::__rust_begin_short_backtrace",
    "core::ops::function::FnOnce::call_once",
    "tokio::runtime::runtime::Runtime::block_on",
    "tokio::runtime::scheduler::multi_thread::worker::run",
    "tokio::runtime::scheduler::multi_thread::worker::Context::run_task",
    "tokio::runtime::task::raw::poll",
    "tokio::runtime::task::harness::Harness<T,S>::poll",
];

/// Crates and modules of the generated functions: some of them hidden by default.
const PATHS: [&str; 10] = [
    "tokio::runtime::task",
    "tokio::sync::mpsc",
    "std::io",
    "core::iter",
    "alloc::vec::Vec<T>",
    "hyper::proto::h1",
    "serde_json::de::Deserializer<R>",
    "myapp::handler",
    "myapp::store::Store<K,V>",
    "std::rt",
];

/// 100,000 distinct stacks of depth 10 to 60 with Zipf-like weights: each extends a
/// prefix of an earlier one (real stacks share their callers) with new frames drawn from
/// 30,000 functions.
fn stacks_tree() -> StackTree {
    const STACKS: usize = 100_000;
    let mut rng = Rng(0x5eed_5ac5_0000_0002);
    let mut tree = StackTree::new();
    let names: Vec<FrameId> = (0..30_000)
        .map(|i| {
            let path = PATHS[i % PATHS.len()];
            tree.intern(&format!("{path}::fn_{i}"))
        })
        .collect();
    let mut stacks: Vec<Vec<FrameId>> = Vec::with_capacity(STACKS);
    for t in 0..4 {
        let mut stack = vec![tree.intern("bt-app"), tree.intern(&format!("worker-{t}"))];
        stack.extend(PLUMBING.iter().map(|p| tree.intern(p)));
        stacks.push(stack);
    }
    while stacks.len() < STACKS {
        // A caller's stack (9 frames or more of an earlier one) and one to three new
        // callees: distinct stacks differ in their last few frames, as in real profiles.
        let from = &stacks[rng.below(stacks.len() as u64) as usize];
        let keep = (9 + rng.below(from.len().saturating_sub(8) as u64) as usize).min(from.len());
        let mut stack = from[..keep].to_vec();
        let grow = 1 + rng.below(3) as usize;
        while stack.len() < (keep + grow).min(60) {
            stack.push(names[rng.below(names.len() as u64) as usize]);
        }
        if stack.len() == keep || stack.len() < 10 {
            continue;
        }
        stacks.push(stack);
    }
    for (rank, stack) in stacks.iter().enumerate() {
        // Zipf-like, s = 1.1: the first stacks hot, a long tail of one or two samples.
        let weight = 1 + (1e6 / ((rank + 1) as f64).powf(1.1)) as u64;
        tree.add(stack, weight);
    }
    eprintln!("generated: {} nodes", tree.node_count());
    let leaves = (0..tree.node_count())
        .filter(|&i| tree.node(benchtop_sessions::NodeId(i as u32)).self_weight > 0)
        .count();
    assert!(leaves >= 99_000, "{leaves} distinct stacks");
    tree
}

fn flame(c: &mut Criterion) {
    let tree = big_tree();
    let area = Rect::new(0, 0, 160, 48);
    let mut buf = Buffer::empty(area);
    let mut state = FlameState::new(FlameUnit::Samples);

    // What set_tree hands back for the app to free elsewhere. First, while no
    // thread has freed trees yet: glibc's heap, once trees are freed on another thread
    // than the one that cloned them, makes every figure below noisier.
    c.bench_function("flame/free a replaced tree", |b| {
        b.iter_batched(|| tree.clone(), drop, BatchSize::LargeInput)
    });

    state.set_tree(tree.clone());
    c.bench_function("flame/set_tree 100k frames", |b| {
        b.iter_batched(
            || tree.clone(),
            |t| state.set_tree(black_box(t)),
            BatchSize::LargeInput,
        )
    });

    // The layout alone, with no tree to free: without a baseline, turning differential mode
    // on or off lays the same tree out again.
    c.bench_function("flame/lay the same tree out again", |b| {
        b.iter(|| state.set_differential(!state.differential()))
    });

    c.bench_function("flame/render 160x48", |b| {
        b.iter(|| render_flame(black_box(&state), area, &mut buf, true, true))
    });

    c.bench_function("flame/layout and render a frame", |b| {
        b.iter_batched(
            || tree.clone(),
            |t| {
                // The replaced tree is returned, to be freed outside the timing, as the
                // app frees it off the render path.
                let old = state.set_tree(black_box(t));
                render_flame(&state, area, &mut buf, true, true);
                old
            },
            BatchSize::LargeInput,
        )
    });

    // The heaviest case: a search and a differential view against a baseline (the same
    // profile with other weights).
    let mut baseline = StackTree::new();
    let mut rng = Rng(7);
    tree.for_each_stack(|frames, weight| {
        let names: Vec<&str> = frames.iter().map(|&f| tree.name(f)).collect();
        baseline.add_names(names, weight * (1 + rng.below(3)));
    });
    state.set_baseline(Some(baseline));
    state.set_differential(true);
    state.search("tokio::sync");
    c.bench_function(
        "flame/layout and render a frame, searching, differential",
        |b| {
            b.iter_batched(
                || tree.clone(),
                |t| {
                    let old = state.set_tree(black_box(t));
                    render_flame(&state, area, &mut buf, true, true);
                    old
                },
                BatchSize::LargeInput,
            )
        },
    );
}

/// The pane as users get it by default (plumbing hidden, chains folded, short names) on a
/// profile of 100,000 distinct stacks.
fn stacks(c: &mut Criterion) {
    let tree = stacks_tree();
    let area = Rect::new(0, 0, 160, 48);
    let mut buf = Buffer::empty(area);
    let mut state = FlameState::new(FlameUnit::Samples);
    assert!(state.hiding() && state.folding() && state.short_names());
    state.set_tree(tree.clone());
    assert!(state.hidden_nodes() > 0);
    assert!(state.rows().iter().flatten().any(|b| b.is_fold()));

    c.bench_function(
        "flame/100k stacks: build (hide, fold, short names) and draw",
        |b| {
            b.iter_batched(
                || tree.clone(),
                |t| {
                    let old = state.set_tree(black_box(t));
                    render_flame(&state, area, &mut buf, true, true);
                    old
                },
                BatchSize::LargeInput,
            )
        },
    );

    // The machine may be busy: thread CPU time per iteration says what the pane costs
    // whatever else runs (criterion's times above are wall-clock).
    let mut spent = Vec::new();
    for _ in 0..20 {
        let t = tree.clone();
        let start = thread_cpu();
        let old = state.set_tree(t);
        render_flame(&state, area, &mut buf, true, true);
        spent.push(thread_cpu() - start);
        drop(old);
    }
    spent.sort_by(f64::total_cmp);
    eprintln!(
        "flame/100k stacks: build and draw, thread CPU: median {:.2} ms, min {:.2} ms, max {:.2} ms",
        spent[spent.len() / 2] * 1e3,
        spent[0] * 1e3,
        spent[spent.len() - 1] * 1e3
    );

    c.bench_function("flame/100k stacks: draw 160x48", |b| {
        b.iter(|| render_flame(black_box(&state), area, &mut buf, true, true))
    });

    c.bench_function("flame/100k stacks: hide on, off", |b| {
        b.iter(|| state.set_hiding(!state.hiding()))
    });
}

/// This thread's CPU time, in seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is always there
    // on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

criterion_group!(benches, flame, stacks);
criterion_main!(benches);
