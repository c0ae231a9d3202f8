//! The live screen with a built-in worker's allocation profiles: the resources pane's
//! live bytes and allocation rate beside RSS, and the flame pane on `o`'s memory profiles
//! (allocated, live), alone and against a baseline.

use std::time::Instant;

use benchtop_profilers::allocations::AllocTrees;
use benchtop_sessions::{Resources, StackTree, TimeseriesRow};

use super::tests::{at, render, running};
use crate::record::live::LiveEvent;
use crate::state::{AppEvent, Key, State};
use benchtop_sessions::Kind;

fn tree(stacks: &[(&str, u64)]) -> StackTree {
    let mut t = StackTree::new();
    for (stack, weight) in stacks {
        t.add_names(stack.split(';'), *weight);
    }
    t
}

/// The ring in ask mode, four seconds in: an interval with the allocator's counters and
/// the allocation profiles so far (`grown` more slab bytes than `running`'s).
fn with_allocations(s: &mut State, base: Instant, second: u64, grown: u64) {
    let mut row = TimeseriesRow::default();
    row.t_s = second as f64;
    row.interval_s = 1.0;
    row.rates.insert("messages".into(), 8.3e6);
    row.rates.insert("alloc_bytes".into(), 48.0 * 1048576.0);
    row.counters.insert("live_bytes".into(), (21 << 20) + grown);
    row.counters.insert("alloc_bytes".into(), 200 << 20);
    row.counters
        .insert("free_bytes".into(), (179 << 20) - grown);
    let mut r = Resources::default();
    r.rss_bytes = 40 << 20;
    r.peak_rss_bytes = 41 << 20;
    r.threads = 3;
    r.processes = 1;
    r.cpu_percent = 99.0;
    row.resources = Some(r);
    s.update(
        AppEvent::Live(LiveEvent::Row {
            row: Box::new(row),
            histograms: Vec::new(),
        }),
        at(base, second),
    );
    let slab = "bt-ring;tokio::runtime::task::harness::poll;ring::actors::AskActor::handle;\
                ring::actors::Continuations::insert;alloc::vec::Vec::push;\
                alloc::raw_vec::RawVec::grow_one";
    let trees = AllocTrees {
        alloc: tree(&[
            (slab, (32 << 20) + 2 * grown),
            (
                "bt-ring;ring::actors::run;ring::mailbox::Mailbox::new",
                1 << 20,
            ),
            (
                "bt-ring;benchtop-ticker;HistogramEncoder::encode_into",
                160 << 20,
            ),
        ]),
        live: tree(&[
            (slab, (16 << 20) + grown),
            (
                "bt-ring;ring::actors::run;ring::mailbox::Mailbox::new",
                1 << 20,
            ),
        ]),
        live_end: tree(&[
            (slab, (16 << 20) + grown),
            (
                "bt-ring;ring::actors::run;ring::mailbox::Mailbox::new",
                1 << 20,
            ),
        ]),
    };
    s.update(
        AppEvent::Live(LiveEvent::Allocations(Box::new(trees))),
        at(base, second),
    );
}

/// `running` with allocations, `o` pressed `presses` times.
pub(super) fn memory_screen(base: Instant, presses: usize) -> State {
    let mut s = running(base);
    with_allocations(&mut s, base, 4, 0);
    for _ in 0..presses {
        s.update(AppEvent::Key(Key::Char('o')), at(base, 4));
    }
    s
}

#[test]
fn o_reaches_the_allocated_bytes_and_resources_show_live_bytes_at_80x24() {
    let base = Instant::now();
    let s = memory_screen(base, 2);
    assert_eq!(s.live.flames.kind, Kind::Alloc);
    let screen = render(&s, at(base, 12), 80, 24);
    assert!(screen.contains("allocated"), "{screen}");
    assert!(screen.contains("live 21.0 MiB"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn o_reaches_the_live_bytes_at_160x48() {
    let base = Instant::now();
    let s = memory_screen(base, 3);
    assert_eq!(s.live.flames.kind, Kind::Live);
    let screen = render(&s, at(base, 12), 160, 48);
    assert!(screen.contains("AskActor::handle"), "{screen}");
    assert!(screen.contains("17.0 MiB"), "{screen}");
    assert!(screen.contains("alloc 48.0 MiB/s"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn live_bytes_against_a_baseline_show_where_they_grew() {
    let base = Instant::now();
    let mut s = memory_screen(base, 3);
    s.update(AppEvent::Key(Key::Char('b')), at(base, 4));
    with_allocations(&mut s, base, 5, 8 << 20);
    s.update(AppEvent::Key(Key::Char('d')), at(base, 5));
    assert!(s.live.flames.panes[Kind::Live].differential_active());
    for (width, height) in [(80, 24), (160, 48)] {
        let screen = render(&s, at(base, 12), width, height);
        assert!(screen.contains("live diff"), "{screen}");
        insta::assert_snapshot!(format!("diff_{width}x{height}"), screen);
    }
}
