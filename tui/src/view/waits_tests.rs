//! The live screen's flame pane on the waits profile: `o` reaches it once the run has
//! waits, and the boxes above `— woken by —` are the wakers, each as wide as the waiting
//! it ended.

use std::time::Instant;

use benchtop_sessions::waits::{NOT_SEEN, WOKEN_BY};
use benchtop_sessions::{Kind, StackTree};

use super::tests::{RING_LAP, at, render, ring_cpu, running, running_with_trees};
use crate::state::{AppEvent, Key, State};

/// The ipc ring's waits as recorded: nodes blocked in `recv`, woken by the previous
/// node's `send`; the worker waiting on its nodes; a sleep ended by the timer.
fn waits() -> StackTree {
    let blocked = "bt-ring-node;main;ring::ipc::node::run;ring::ipc::link::Link::recv;\
                   __libc_recv;schedule_[k]";
    let stacks = [
        (
            format!(
                "{blocked};{WOKEN_BY};bt-ring-node;bt-ring-node;main;ring::ipc::node::run;\
                 ring::ipc::link::Link::send;__GI___send"
            ),
            26_605_000,
        ),
        (
            format!("bt-ring;main;ring::ipc::run;wait;{WOKEN_BY};bt-ring;bt-ring;_Exit"),
            1_626_000,
        ),
        (
            format!(
                "bt-ring;benchtop-ticker;sleep;{WOKEN_BY};[woken by: hard interrupt (timer \
                 or device)]"
            ),
            1_024_000,
        ),
        (format!("bt-ring;main;accept;{NOT_SEEN}"), 20_000),
    ];
    let mut t = StackTree::new();
    for (stack, weight) in &stacks {
        t.add_names(stack.split(';'), *weight);
    }
    t
}

/// `running` with waits, `o` pressed `presses` times.
pub(super) fn waits_screen(base: Instant, presses: usize) -> State {
    let trees = [(Kind::Cpu, &ring_cpu()), (Kind::Waits, &waits())];
    let mut s = running_with_trees(base, &trees, &RING_LAP.map(|v| (v, 100)));
    for _ in 0..presses {
        s.update(AppEvent::Key(Key::Char('o')), at(base, 4));
    }
    s
}

#[test]
fn o_reaches_the_waits_after_off_cpu_and_shows_the_waker_above_the_wait_at_80x24() {
    let base = Instant::now();
    let s = waits_screen(base, 2);
    assert_eq!(s.live.flames.kind, Kind::Waits);
    let screen = render(&s, at(base, 12), 80, 24);
    assert!(screen.contains("waits"), "{screen}");
    assert!(screen.contains("woken by"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn the_waits_pane_names_the_waking_call_at_160x48() {
    let base = Instant::now();
    let s = waits_screen(base, 2);
    let screen = render(&s, at(base, 12), 160, 48);
    assert!(screen.contains("__GI___send"), "{screen}");
    assert!(screen.contains("— woken by —"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn o_skips_the_waits_pane_of_a_run_without_waits() {
    let base = Instant::now();
    let s = running(base);
    let mut s = s;
    for _ in 0..2 {
        s.update(AppEvent::Key(Key::Char('o')), at(base, 4));
    }
    assert_eq!(s.live.flames.kind, Kind::Cpu);
}
