//! The cost of the flame pane's other views (top functions, bottom-up, callers and
//! callees, source) for a profile of 100,000 distinct stacks of depth 10 to 60 with a
//! Zipf-like spread of weights (`SyntheticStacks`, the generator the tests use too):
//! building each view from a tree it has not seen (its one walk over the tree included)
//! and drawing it into a 160x48 buffer, as when the view is opened or a live run hands
//! a new tree while it shows; and drawing alone, as every render tick does. The goal is
//! under 16 ms (one frame at 60 Hz) for the first, far less for the second.
//!
//! `cargo bench -p benchtop --bench views`. The flame pane is set up once per view,
//! outside the timed part; each measured frame drops the view's walk over the tree and
//! builds it again (`FlamePanes::refresh_views`, what a live run's new tree costs).

use std::hint::black_box;

use benchtop::state::flame_panes::FlamePanes;
use benchtop::state::profile_views::index::ProfileIndex;
use benchtop::state::profile_views::{ViewKind, ViewsAction};
use benchtop::view::profile_views::render_views;
use benchtop_sessions::StackTree;
use benchtop_sessions::lines::FrameLines;
use benchtop_sessions::synthetic::SyntheticStacks;
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
    drop(p.cpu.set_tree(tree.clone()));
    p.views.set_lines(lines.clone());
    let index = ProfileIndex::new(tree);
    let hottest = (0..tree.frame_count())
        .max_by_key(|&f| index.self_weight[f])
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
    c.bench_function("views/index the tree (one walk)", |b| {
        b.iter_with_large_drop(|| ProfileIndex::new(black_box(&tree)));
    });
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
