//! Flamegraph SVGs.

use benchtop_sessions::StackTree;
use benchtop_sessions::flame::write_flamegraph_svg;

fn render(tree: &StackTree) -> Vec<u8> {
    let mut out = Vec::new();
    write_flamegraph_svg(tree, "ring: on-CPU", "samples", &mut out).unwrap();
    out
}

#[test]
fn svg_output_for_a_small_tree_names_its_frames_and_is_the_same_every_time() {
    let mut t = StackTree::new();
    t.add_names(["main", "tokio::runtime::park", "epoll_wait"], 40);
    t.add_names(["main", "ring::hop", "<[u8; 4] as Debug>::fmt"], 20);
    t.add_names(["main", "ring::hop"], 10);
    let first = render(&t);
    let text = String::from_utf8(first.clone()).unwrap();
    for name in [
        "main",
        "tokio::runtime::park",
        "epoll_wait",
        "ring::hop",
        "&lt;[u8: 4] as Debug&gt;::fmt",
        "ring: on-CPU",
    ] {
        assert!(text.contains(name), "{name} missing");
    }
    assert_eq!(first, render(&t), "two renders differ");

    // The same stacks added in another order render the same bytes.
    let mut u = StackTree::new();
    u.add_names(["main", "ring::hop"], 10);
    u.add_names(["main", "ring::hop", "<[u8; 4] as Debug>::fmt"], 20);
    u.add_names(["main", "tokio::runtime::park", "epoll_wait"], 40);
    assert_eq!(first, render(&u));
}
