//! The cost of the flame pane's other views (top functions, bottom-up, callers and
//! callees, source) for a profile of 100,000 distinct stacks of depth 10 to 60 with a
//! Zipf-like spread of weights (`SyntheticStacks`, the generator the tests use too):
//! building each view from a tree it has not seen and drawing it into a 160x48 buffer, as
//! when the view is opened or a live run hands a new tree while it shows; and drawing
//! alone, as every render tick does. The goal is under 16 ms (one frame at 60 Hz) for the
//! first, far less for the second. The views read the per-function weights the tree keeps
//! as stacks are added; what that costs is measured too, as folding the 100,000 stacks
//! into a new tree (what reading cpu.folded does).
//!
//! `cargo bench -p benchtop --bench views`. The flame pane is set up once per view,
//! outside the timed part; each measured frame builds the view again
//! (`FlamePanes::refresh_views`, what a live run's new tree costs). Then, because the
//! machine may be busy, a table of each view's build and draw in thread CPU time, beside
//! its peer in alternate rounds: the same build preceded by the walk over the whole tree
//! that every build did before the tree kept its functions' weights (`walk`, kept here as
//! it was), with the ratio; and the TUI's share of a core over a second of a live run
//! that hands it this profile anew each second (benches/tui_cpu.py measures the same in
//! a real terminal).

use std::hint::black_box;

use benchtop::state::flame_panes::FlamePanes;
use benchtop::state::profile_views::{ViewKind, ViewsAction};
use benchtop::view::profile_views::render_views;
use benchtop_sessions::lines::FrameLines;
use benchtop_sessions::synthetic::SyntheticStacks;
use benchtop_sessions::{Kind, StackTree};
use criterion::{Criterion, criterion_group, criterion_main};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

const VIEWS: [(ViewKind, &str); 4] = [
    (ViewKind::Top, "top functions"),
    (ViewKind::Inverted, "bottom-up"),
    (ViewKind::Butterfly, "callers-callees"),
    (ViewKind::Source, "source"),
];

/// Flame panes showing `tree`, the function with the most self weight selected, its
/// source file's text held.
fn panes(tree: &StackTree, lines: &FrameLines) -> FlamePanes {
    let mut p = FlamePanes::default();
    drop(p.panes[Kind::Cpu].set_tree(tree.clone()));
    p.views.set_lines(lines.clone());
    let hottest = (0..tree.frame_count())
        .max_by_key(|&f| tree.frame_self(benchtop_sessions::FrameId(f as u32)))
        .unwrap_or(0);
    p.views.function = tree
        .name(benchtop_sessions::FrameId(hottest as u32))
        .to_owned();
    p.act_views(ViewsAction::Show(ViewKind::Source));
    if let (_, Some(file)) = p.views.take_loads() {
        let text: String = (1..=600)
            .map(|i| format!("    let x{i} = work({i});\n"))
            .collect();
        p.views.source.set_text(&file, Ok(text));
    }
    p.act_views(ViewsAction::Show(ViewKind::Flame));
    p
}

fn views(c: &mut Criterion) {
    let spec = SyntheticStacks::default();
    let (tree, lines) = spec.profile();
    eprintln!(
        "profile: {} distinct frames, {} nodes, {} samples, {} source lines",
        tree.frame_count(),
        tree.node_count(),
        tree.total_weight(),
        lines.len()
    );
    let area = Rect::new(0, 0, 160, 48);
    let mut stacks: Vec<(Vec<String>, u64)> = Vec::new();
    tree.for_each_stack(|frames, w| {
        stacks.push((frames.iter().map(|&f| tree.name(f).to_owned()).collect(), w));
    });
    c.bench_function("views/fold 100k stacks into a new tree", |b| {
        b.iter_with_large_drop(|| {
            let mut t = StackTree::new();
            for (frames, w) in black_box(&stacks) {
                t.add_names(frames.iter().map(String::as_str), *w);
            }
            t
        });
    });
    let mut table = Vec::new();
    for (kind, name) in VIEWS {
        let mut shown = panes(&tree, &lines);
        shown.act_views(ViewsAction::Show(kind));
        let mut buf = Buffer::empty(area);
        // What a new tree costs while the view shows (and, but for the layout of the
        // flamegraph's own tree, what opening the view costs): the walk over the tree,
        // the view built from it, and a frame drawn.
        c.bench_function(&format!("views/{name}: build and render a frame"), |b| {
            b.iter(|| {
                shown.refresh_views();
                render_views(black_box(&shown), area, &mut buf, true, true);
            });
        });
        c.bench_function(&format!("views/{name}: render 160x48"), |b| {
            b.iter(|| render_views(black_box(&shown), area, &mut buf, true, true));
        });
        // In alternate rounds: the build as it is, and as it was (the walk over the tree
        // that indexed it for the views first, then the same build).
        let (built, before) = interleaved(|before| {
            if before {
                black_box(walk(&tree));
            }
            shown.refresh_views();
            render_views(&shown, area, &mut buf, true, true);
        });
        let drawn = interleaved(|_| render_views(&shown, area, &mut buf, true, true)).0;
        table.push((name, built, drawn, before));
    }
    let (load, _) = load_average();
    eprintln!("\nthread CPU per frame, median of 20 interleaved rounds, load average {load:.2}:");
    eprintln!(
        "{:<18}{:>16}{:>12}{:>26}{:>8}",
        "view", "build + draw", "draw", "with the walk (before)", "ratio"
    );
    for (name, built, drawn, before) in table {
        eprintln!(
            "{name:<18}{:>13.2} ms{:>9.3} ms{:>23.2} ms{:>7.1}x",
            built * 1e3,
            drawn * 1e3,
            before * 1e3,
            before / built.max(1e-9)
        );
    }
    live_second(&tree);
}

/// The median thread CPU times of 20 runs each of `f(false)` and `f(true)`, in alternate
/// rounds, seconds.
fn interleaved(mut f: impl FnMut(bool)) -> (f64, f64) {
    let mut spent = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let start = thread_cpu();
        f(false);
        let mid = thread_cpu();
        f(true);
        spent.0.push(mid - start);
        spent.1.push(thread_cpu() - mid);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(spent.0), median(spent.1))
}

/// What every view's build began with before the tree kept its functions' weights: one
/// walk over the whole tree for each function's self and total weight (recursion counted
/// once), the nodes where it occurs and which are outermost. The peer of the figures
/// above, kept here as it was.
fn walk(tree: &StackTree) -> (Vec<u64>, Vec<u64>, Vec<bool>) {
    use benchtop_sessions::NodeId;
    let frames = tree.frame_count();
    let n = tree.node_count();
    let mut self_weight = vec![0u64; frames];
    let mut total_weight = vec![0u64; frames];
    let mut outer = vec![false; n];
    let mut starts = vec![0u32; frames + 1];
    let mut nodes = vec![NodeId::ROOT; n.saturating_sub(1)];
    let mut frame_of: Vec<u32> = vec![u32::MAX; n];
    let mut totals: Vec<u64> = vec![0; n];
    let mut kids_start: Vec<u32> = vec![0; n + 1];
    for i in 1..n {
        let node = tree.node(NodeId(i as u32));
        let f = node.frame.0 as usize;
        if f >= frames {
            continue;
        }
        frame_of[i] = f as u32;
        totals[i] = node.total_weight;
        self_weight[f] = self_weight[f].saturating_add(node.self_weight);
        starts[f + 1] += 1;
        kids_start[node.parent.0 as usize + 1] += 1;
    }
    for f in 0..frames {
        starts[f + 1] += starts[f];
    }
    for i in 0..n {
        kids_start[i + 1] += kids_start[i];
    }
    let mut at: Vec<u32> = starts[..frames].to_vec();
    let mut kid_at: Vec<u32> = kids_start[..n].to_vec();
    let mut kids: Vec<u32> = vec![0; n.saturating_sub(1)];
    for (i, &f) in frame_of.iter().enumerate().skip(1) {
        if f == u32::MAX {
            continue;
        }
        let slot = &mut at[f as usize];
        nodes[*slot as usize] = NodeId(i as u32);
        *slot += 1;
        let parent = tree.node(NodeId(i as u32)).parent.0 as usize;
        kids[kid_at[parent] as usize] = i as u32;
        kid_at[parent] += 1;
    }
    let mut on_path = vec![0u32; frames];
    let mut todo: Vec<(u32, bool)> = Vec::with_capacity(256);
    todo.extend(
        kids[kids_start[0] as usize..kids_start[1] as usize]
            .iter()
            .rev()
            .map(|&c| (c, true)),
    );
    while let Some((id, enter)) = todo.pop() {
        let f = frame_of[id as usize] as usize;
        if f >= frames {
            continue;
        }
        if !enter {
            on_path[f] -= 1;
            continue;
        }
        if on_path[f] == 0 {
            outer[id as usize] = true;
            total_weight[f] = total_weight[f].saturating_add(totals[id as usize]);
        }
        on_path[f] += 1;
        todo.push((id, false));
        let (a, b) = (kids_start[id as usize], kids_start[id as usize + 1]);
        todo.extend(kids[a as usize..b as usize].iter().map(|&c| (c, true)));
    }
    black_box(nodes);
    (self_weight, total_weight, outer)
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

/// The 1- and 5-minute load averages, from /proc/loadavg (zeros when unreadable).
fn load_average() -> (f64, f64) {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text.split_whitespace().map(|v| v.parse().unwrap_or(0.0));
    (it.next().unwrap_or(0.0), it.next().unwrap_or(0.0))
}

/// A second of the live screen with this profile, at 1 s intervals and 10 redraws a
/// second, as the TUI's threads spend it: a row and the interval's chunk of stacks
/// applied (`State::update`: the whole run's profile grown by the interval, the
/// flamegraph laid out again, the view shown built again), ten frames drawn at 160x48,
/// and whatever tree was replaced freed (on `bt-free`). The profile starts as `tree`
/// (100,000 distinct stacks); each second adds an interval of 10,000 samples, as a
/// program sampled at 4,999 Hz on two threads gives: half on stacks the profile has,
/// half on stacks new to it (a frame more under one it has), so it keeps growing. The
/// chunks are the sampler's work, made outside the timing. Thread CPU over 20 such
/// seconds, as a share of one core; the goal is at most 3 %.
#[allow(clippy::field_reassign_with_default)]
fn live_second(tree: &StackTree) {
    use benchtop::record::live::LiveEvent;
    use benchtop::state::{AppEvent, Key, State};
    use benchtop_sessions::synthetic::TreeChunks;
    use benchtop_sessions::{Resources, TimeseriesRow};
    let area = Rect::new(0, 0, 160, 48);
    let mut buf = Buffer::empty(area);
    let mut rows = Vec::new();
    let mut stacks: Vec<Vec<String>> = Vec::new();
    tree.for_each_stack(|frames, _| {
        stacks.push(frames.iter().map(|&f| tree.name(f).to_owned()).collect());
    });
    let per_second = 10_000;
    for (name, keys) in [
        ("flamegraph", ""),
        ("top functions", "t"),
        ("bottom-up", "i"),
    ] {
        let start = std::time::Instant::now();
        let mut state = State::new("synthetic", "", true);
        state.live.run.program = true;
        state.update(
            AppEvent::Live(LiveEvent::Started {
                throughput: None,
                latency: None,
                sampling: "cpu-clock 999 Hz".into(),
            }),
            start,
        );
        let mut chunks = TreeChunks::default();
        let first = chunks.chunk((0, 1_000_000_000), &[(Kind::Cpu, tree)]);
        state.update(
            AppEvent::Live(LiveEvent::IntervalStacks(Box::new(first))),
            start,
        );
        for c in keys.chars() {
            state.update(AppEvent::Key(Key::Char(c)), start);
        }
        drop(state.take_retired());
        // The whole, and its parts: the row and the new stacks applied, the ten frames,
        // the replaced trees freed.
        let mut spent = [0.0; 4];
        let seconds = 20;
        let mut pick = 0x9e37_79b9_7f4a_7c15u64;
        for second in 1..=seconds {
            let now = start + std::time::Duration::from_secs(second);
            let mut interval = StackTree::new();
            for i in 0..per_second {
                pick ^= pick << 13;
                pick ^= pick >> 7;
                pick ^= pick << 17;
                let stack = &stacks[(pick % stacks.len() as u64) as usize];
                let frames = stack.iter().map(String::as_str);
                if i % 2 == 0 {
                    interval.add_names(frames, 1);
                } else {
                    let leaf = format!("new_{second}_{i}");
                    interval.add_names(frames.chain([leaf.as_str()]), 1);
                }
            }
            let t0_ns = second * 1_000_000_000;
            let chunk = chunks.chunk((t0_ns, t0_ns + 1_000_000_000), &[(Kind::Cpu, &interval)]);
            let mut row = TimeseriesRow::default();
            row.t_s = second as f64;
            row.interval_s = 1.0;
            let mut r = Resources::default();
            r.cpu_percent = 99.0;
            r.threads = 4;
            row.resources = Some(r);
            let t0 = thread_cpu();
            state.update(
                AppEvent::Live(LiveEvent::Row {
                    row: Box::new(row),
                    histograms: Vec::new(),
                }),
                now,
            );
            state.update(
                AppEvent::Live(LiveEvent::IntervalStacks(Box::new(chunk))),
                now,
            );
            let t1 = thread_cpu();
            for tick in 0..10 {
                let at = now + std::time::Duration::from_millis(100 * tick);
                benchtop::view::draw(&state, at, area, &mut buf);
            }
            let t2 = thread_cpu();
            drop(state.take_retired());
            let t3 = thread_cpu();
            for (s, d) in spent.iter_mut().zip([t3 - t0, t1 - t0, t2 - t1, t3 - t2]) {
                *s += d;
            }
        }
        rows.push((name, spent.map(|s| s / seconds as f64)));
    }
    let (load, _) = load_average();
    eprintln!(
        "\nthe live screen, a 100k-stack profile growing by 10,000 samples (half of them \
         new stacks) each second, 10 frames a second at 160x48, load average {load:.2}:"
    );
    eprintln!(
        "{:<18}{:>22}{:>16}{:>14}{:>12}",
        "pane shows", "TUI CPU, % of a core", "interval", "10 frames", "free"
    );
    for (name, [all, stacks, frames, free]) in rows {
        eprintln!(
            "{name:<18}{:>21.2}%{:>13.1} ms{:>11.1} ms{:>9.1} ms",
            all * 100.0,
            stacks * 1e3,
            frames * 1e3,
            free * 1e3
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = views
}
criterion_main!(benches);
