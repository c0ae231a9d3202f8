use super::*;
use benchtop_sessions::Kind;

/// `a;b;c weight` lines into a tree.
fn tree(folded: &str) -> StackTree {
    StackTree::read_folded(folded.as_bytes(), "test").unwrap()
}

fn state(folded: &str) -> FlameState {
    let mut s = FlameState::default();
    s.set_tree(tree(folded));
    s
}

fn row_names(s: &FlameState, row: usize) -> Vec<&str> {
    s.rows()[row].iter().map(|b| s.name(b.node)).collect()
}

fn selected_name(s: &FlameState) -> &str {
    s.name(s.selected_box().unwrap().node)
}

/// Selects the box named `name` on `row`.
fn select(s: &mut FlameState, row: usize, name: &str) {
    let i = row_names(s, row).iter().position(|n| *n == name).unwrap();
    s.selected = Some((row, i));
}

fn box_named<'a>(s: &'a FlameState, row: usize, name: &str) -> &'a FlameBox {
    s.rows()[row]
        .iter()
        .find(|b| s.name(b.node) == name)
        .unwrap()
}

const PROFILE: &str = "\
bt-ring;main;run;hop 30
bt-ring;main;run;send 20
bt-ring;main;idle 10
bt-ring;worker;poll 25
bt-sock;main;recv 15
";

#[test]
fn the_top_row_is_the_roots_children_sorted_by_name_and_the_widest_is_selected() {
    let s = state("zeta;a 10\nalpha;b 30\nmid 20\n");
    assert_eq!(row_names(&s, 0), ["alpha", "mid", "zeta"]);
    // alpha calls b alone: the selection goes on down to b, which does the work.
    assert_eq!(selected_name(&s), "b");
    let b = &s.rows()[0];
    assert_eq!((b[0].start, b[0].width), (0.0, 0.5));
    assert!((b[2].start + b[2].width - 1.0).abs() < 1e-12);
}

#[test]
fn zoom_path_survives_set_tree_with_a_new_tree() {
    let mut s = state(PROFILE);
    select(&mut s, 2, "run");
    assert!(s.zoom_in());
    assert_eq!(
        s.zoom_path().collect::<Vec<_>>(),
        ["bt-ring", "main", "run"]
    );
    assert!(s.select_child());
    assert_eq!(selected_name(&s), "hop");

    // A new tree with more samples and new frames, inserted in another order.
    s.set_tree(tree(
        "bt-sock;main;recv 40\nbt-ring;main;run;send 50\nbt-ring;main;run;hop 60\nnew 5\n",
    ));
    assert_eq!(
        s.zoom_path().collect::<Vec<_>>(),
        ["bt-ring", "main", "run"]
    );
    assert_eq!(s.zoom_total(), 110);
    assert_eq!(row_names(&s, 0), ["run"]);
    assert_eq!(row_names(&s, 1), ["hop", "send"]);
    assert_eq!(selected_name(&s), "hop");
}

#[test]
fn zoom_falls_back_to_the_deepest_prefix_when_the_zoomed_frame_vanished() {
    let mut s = state(PROFILE);
    select(&mut s, 2, "run");
    s.zoom_in();
    s.select_child();
    s.set_tree(tree("bt-ring;main;idle 10\nbt-ring;worker;poll 5\n"));
    assert_eq!(s.zoom_path().collect::<Vec<_>>(), ["bt-ring", "main"]);
    assert_eq!(row_names(&s, 0), ["main"]);
    // The selection (hop, under run) fell back to the zoomed node.
    assert_eq!(selected_name(&s), "main");

    s.set_tree(tree("other 1\n"));
    assert!(!s.is_zoomed());
    assert_eq!(selected_name(&s), "other");
}

#[test]
fn zoom_in_and_out_step_one_level_and_report_the_top() {
    let mut s = state(PROFILE);
    select(&mut s, 1, "main");
    assert!(s.zoom_in());
    assert!(!s.zoom_in(), "the zoomed node is already the top");
    assert_eq!(s.zoom_total(), 60);
    assert_eq!(s.rows()[0].len(), 1);
    assert_eq!(s.rows()[0][0].width, 1.0);
    assert_eq!(row_names(&s, 1), ["idle", "run"]);
    assert_eq!(s.rows()[1][1].width, 50.0 / 60.0);

    assert!(s.zoom_out());
    assert_eq!(s.zoom_path().collect::<Vec<_>>(), ["bt-ring"]);
    assert_eq!(
        selected_name(&s),
        "main",
        "the node zoomed out of stays selected"
    );
    assert!(s.zoom_out());
    assert!(!s.is_zoomed());
    assert!(!s.zoom_out(), "Esc backs out further");
    assert_eq!(row_names(&s, 0), ["bt-ring", "bt-sock"]);

    select(&mut s, 3, "hop");
    s.zoom_in();
    assert!(s.reset_zoom());
    assert!(!s.reset_zoom());
    assert_eq!(selected_name(&s), "hop");
}

#[test]
fn arrows_move_to_parent_widest_child_and_row_neighbours() {
    let mut s = state(PROFILE);
    assert_eq!(selected_name(&s), "bt-ring");
    assert!(!s.select_parent());
    assert!(s.select_child());
    assert_eq!(selected_name(&s), "main");
    assert!(s.select_child());
    assert_eq!(selected_name(&s), "run", "the widest child");
    assert!(s.select_prev());
    assert_eq!(selected_name(&s), "idle");
    assert!(!s.select_prev());
    assert!(s.select_next() && s.select_next());
    assert_eq!(selected_name(&s), "poll");
    assert!(s.select_next());
    assert_eq!(selected_name(&s), "recv", "neighbours cross parents");
    assert!(!s.select_next());
    assert!(s.select_parent());
    assert_eq!(selected_name(&s), "main");
    assert_eq!(s.selected_position(), Some((1, 2)));
    assert!(s.select_parent());
    assert_eq!(selected_name(&s), "bt-sock");
    s.select_child();
    s.select_child();
    assert!(!s.select_child(), "recv is a leaf");
}

#[test]
fn search_counts_matches_and_share_without_double_counting_nested_matches() {
    // "run" matches run, run_inner (nested in run) and rerun (elsewhere).
    let mut s = state("p;run;run_inner 30\np;run 10\np;rerun 20\np;idle 40\n");
    s.set_substring(true);
    s.search("RUN");
    assert_eq!(s.query(), "RUN");
    assert_eq!(s.matches(), 3);
    assert_eq!(s.matched_weight(), 60);
    assert_eq!(s.match_share(), 0.6);
    assert!(box_named(&s, 2, "run_inner").matched);
    assert!(!box_named(&s, 1, "idle").matched);

    // Under a zoom, only the zoomed subtree counts.
    select(&mut s, 1, "run");
    s.zoom_in();
    assert_eq!(s.matches(), 2);
    assert_eq!(s.match_share(), 1.0);

    s.search("");
    assert_eq!((s.matches(), s.match_share()), (0, 0.0));
    assert!(s.rows().iter().flatten().all(|b| !b.matched));
}

#[test]
fn next_and_previous_match_cycle_in_layout_order() {
    let mut s = state("a;x;leaf 10\na;y 10\nb;x 10\n");
    s.search("x");
    let at = |s: &FlameState| (s.selected_position().unwrap(), selected_name(s).to_owned());
    // Selected: a (the widest of the top row). Matches: x under a, x under b (row 1).
    assert!(s.next_match());
    assert_eq!(at(&s), ((1, 0), "x".into()));
    assert!(s.next_match());
    assert_eq!(at(&s), ((1, 2), "x".into()));
    assert!(s.next_match(), "wraps around");
    assert_eq!(at(&s), ((1, 0), "x".into()));
    assert!(s.prev_match(), "wraps backwards");
    assert_eq!(at(&s), ((1, 2), "x".into()));
    assert!(s.prev_match());
    assert_eq!(at(&s), ((1, 0), "x".into()));

    s.search("nothing");
    assert!(!s.next_match() && !s.prev_match());
    assert_eq!(at(&s), ((1, 0), "x".into()));
}

#[test]
fn a_frame_whose_share_doubled_is_hotter_and_one_absent_from_the_baseline_is_new() {
    let mut s = state("p;hot 50\np;cold 25\np;new 25\n");
    s.set_baseline(Some(tree("p;hot 25\np;cold 75\n")));
    assert!(s.rows().iter().flatten().all(|b| b.delta.is_none()));
    s.set_differential(true);
    assert!(s.differential() && s.differential_active());
    let hot = box_named(&s, 1, "hot");
    assert!((hot.delta.unwrap() - 0.25).abs() < 1e-12, "{hot:?}");
    assert!(!hot.new_frame);
    let cold = box_named(&s, 1, "cold");
    assert!((cold.delta.unwrap() + 0.5).abs() < 1e-12, "{cold:?}");
    let new = box_named(&s, 1, "new");
    assert!(new.new_frame);
    assert!((new.delta.unwrap() - 0.25).abs() < 1e-12, "{new:?}");
    assert_eq!(box_named(&s, 0, "p").delta, Some(0.0));
    assert!((s.max_abs_delta() - 0.5).abs() < 1e-12);

    // Deltas are shares of the whole trees, also under a zoom; widths stay current.
    select(&mut s, 1, "hot");
    s.zoom_in();
    assert!((s.rows()[0][0].delta.unwrap() - 0.25).abs() < 1e-12);
    assert_eq!(s.rows()[0][0].width, 1.0);

    s.set_differential(false);
    assert!(s.rows().iter().flatten().all(|b| b.delta.is_none()));
    assert_eq!(s.max_abs_delta(), 0.0);
    s.set_differential(true);
    s.set_baseline(None);
    assert!(s.differential() && !s.differential_active());
    assert!(s.rows().iter().flatten().all(|b| b.delta.is_none()));
}

#[test]
fn layout_widths_of_children_sum_to_at_most_the_parents() {
    let mut folded = String::new();
    for i in 0..50 {
        folded.push_str(&format!("p;f{};g{} {}\n", i % 7, i, 3 + i * 13 % 17));
        folded.push_str(&format!("p;f{} {}\n", i % 7, 1 + i % 3));
    }
    // Saturated weights claim more than their parent has.
    folded.push_str("q;a 18446744073709551615\nq;b 18446744073709551615\n");
    let s = state(&folded);
    for pair in s.rows().windows(2) {
        for parent in &pair[0] {
            let sum: f64 = pair[1]
                .iter()
                .filter(|c| s.parent(c.node) == parent.node)
                .map(|c| {
                    assert!(c.start >= parent.start);
                    assert!(c.start + c.width <= parent.start + parent.width + 1e-12);
                    c.width
                })
                .sum();
            assert!(sum <= parent.width + 1e-12, "{sum} > {}", parent.width);
        }
        for w in pair[1].windows(2) {
            assert!(w[0].start + w[0].width <= w[1].start + 1e-12, "overlap");
        }
    }
}

#[test]
fn nodes_below_the_threshold_are_skipped() {
    let mut t = StackTree::new();
    // p weighs 10_000, so the threshold is 5.
    t.add_names(["p", "wide"], 9_991);
    t.add_names(["p", "narrow"], 4);
    t.add_names(["p", "edge"], 5);
    let s = {
        let mut s = FlameState::default();
        s.set_tree(t);
        s
    };
    assert_eq!(row_names(&s, 1), ["edge", "wide"]);
    assert_eq!(s.rows().len(), 2);
}

#[test]
fn layout_stops_at_the_maximum_depth() {
    let names: Vec<String> = (0..MAX_DEPTH + 10).map(|i| format!("f{i}")).collect();
    let mut t = StackTree::new();
    t.add_names(names.iter().map(String::as_str), 1);
    let mut s = FlameState::default();
    s.set_folding(false);
    s.set_tree(t);
    assert_eq!(s.rows().len(), MAX_DEPTH);
    // Zooming in reaches deeper frames.
    s.selected = Some((MAX_DEPTH - 1, 0));
    s.zoom_in();
    assert_eq!(s.rows().len(), 11);
    assert_eq!(s.name(s.rows()[10][0].node), names[MAX_DEPTH + 9]);
}

#[test]
fn layout_is_stable_across_set_tree_of_an_equal_tree() {
    let mut s = state(PROFILE);
    let names = |s: &FlameState| -> Vec<Vec<(String, f64, f64)>> {
        s.rows()
            .iter()
            .map(|r| {
                r.iter()
                    .map(|b| (s.name(b.node).to_owned(), b.start, b.width))
                    .collect()
            })
            .collect()
    };
    let before = names(&s);
    // The same stacks inserted in reverse order.
    let reversed: String = PROFILE.lines().rev().map(|l| format!("{l}\n")).collect();
    s.set_tree(tree(&reversed));
    assert_eq!(names(&s), before);
}

#[test]
fn an_empty_tree_lays_out_nothing_and_navigation_does_nothing() {
    let mut s = FlameState::default();
    s.set_tree(StackTree::new());
    assert!(s.is_empty() && s.rows().is_empty() && s.selected_box().is_none());
    assert!(!s.select_parent() && !s.select_child() && !s.select_prev());
    assert!(!s.select_next() && !s.zoom_in() && !s.zoom_out() && !s.next_match());
    s.search("x");
    s.set_differential(true);
    s.set_baseline(Some(StackTree::new()));
    assert_eq!((s.matches(), s.match_share(), s.zoom_total()), (0, 0.0, 0));
    assert_eq!(s.name(NodeId(1234)), "");
}

#[test]
fn big_trees_replaced_one_after_another_keep_the_zoom() {
    const BIG: usize = 10_000;
    let big = |extra: &str| {
        let mut t = StackTree::new();
        for i in 0..BIG {
            let leaf = format!("f{i}");
            t.add_names(["p", "hot", leaf.as_str()], 1);
        }
        t.add_names(["p", extra], 1);
        t
    };
    let mut s = FlameState::default();
    s.set_tree(big("a"));
    s.select_child();
    assert_eq!(selected_name(&s), "hot");
    s.zoom_in();
    // Each replaced tree comes back to the caller.
    for extra in ["b", "c", "d"] {
        let old = s.set_tree(big(extra));
        assert_eq!(old.total_weight(), BIG as u64 + 1);
        assert_eq!(s.zoom_path().collect::<Vec<_>>(), ["p", "hot"]);
        assert_eq!(s.zoom_total(), BIG as u64);
    }
}

#[test]
fn matches_ignore_case_in_names_and_queries() {
    let mut s = state("Mpsc::Recv;x 1\nother 1\nrecv_From 1\n");
    s.set_substring(true);
    s.search("RECV");
    assert_eq!(s.matches(), 2);
    s.search("recv_f");
    assert_eq!(s.matches(), 1);
    s.search("v\nr");
    assert_eq!(s.matches(), 0, "no match spans two names");
    s.search("::");
    assert_eq!(s.matches(), 1);
}

#[test]
fn a_search_matches_whole_path_segments_unless_substrings_are_asked_for() {
    let names = [
        "std::sync::Mutex<T>::lock",
        "lock@plt",
        "tokio::runtime::block_on",
        "clock_gettime",
        "futex::Mutex::lock_contended",
        "pthread_mutex_lock",
        "<Lock as Drop>::drop",
        "ring::unlock",
    ];
    let folded: String = names.iter().map(|n| format!("{n} 1\n")).collect();
    let mut s = state(&folded);
    fn matched(s: &FlameState) -> String {
        let mut names: Vec<&str> = s.rows()[0]
            .iter()
            .filter(|b| b.matched)
            .map(|b| s.name(b.node))
            .collect();
        names.sort_unstable();
        names.join(", ")
    }
    s.search("LOCK");
    assert_eq!(
        matched(&s),
        "<Lock as Drop>::drop, lock@plt, std::sync::Mutex<T>::lock"
    );
    assert_eq!(s.matches(), 3);
    // A query may span segments; one that begins or ends with punctuation is not held to
    // a word's edge there.
    s.search("mutex");
    assert_eq!(
        matched(&s),
        "futex::Mutex::lock_contended, std::sync::Mutex<T>::lock"
    );
    s.search("mutex::lock_contended");
    assert_eq!(matched(&s), "futex::Mutex::lock_contended");
    s.search("::lock");
    assert_eq!(matched(&s), "std::sync::Mutex<T>::lock");
    // One key away: anywhere in a name.
    s.set_substring(true);
    assert!(s.substring());
    assert_eq!(s.matches(), 2, "searched again: lock_contended matches too");
    s.search("lock");
    assert_eq!(s.matches(), names.len());
    s.set_substring(false);
    assert_eq!(s.matches(), 3);
}

#[test]
fn non_ascii_queries_ignore_case_too() {
    let s = {
        let mut s = state("Ärger;x 1\nother 1\n");
        s.set_substring(true);
        s.search("äR");
        s
    };
    assert_eq!(s.matches(), 1);
}

#[test]
fn weights_print_in_their_unit() {
    assert_eq!(FlameUnit::Samples.format(1_234_567), "1,234,567 samples");
    assert_eq!(FlameUnit::Samples.format(999), "999 samples");
    assert_eq!(FlameUnit::Micros.format(1_500), "1.50 ms");
    assert_eq!(FlameUnit::from(Kind::OffCpu), FlameUnit::Micros);
    assert_eq!(FlameUnit::Micros.label(), "µs");
}

/// `proc;f0;…;f{n-1};work;a 10` and `…;work;b 5`: a chain of `n` single-child frames
/// between the process and the first fork.
fn chain(n: usize) -> FlameState {
    let links: Vec<String> = (0..n).map(|i| format!("f{i}")).collect();
    let stack = links.join(";");
    state(&format!("proc;{stack};work;a 10\nproc;{stack};work;b 5\n"))
}

#[test]
fn a_chain_of_40_single_child_frames_folds_to_one_row_and_enter_unfolds_it() {
    let mut s = chain(40);
    assert_eq!(s.rows().len(), 4, "proc, the fold, work, a and b");
    let fold = s.rows()[1][0];
    assert!(fold.is_fold());
    assert_eq!(fold.frames, 40);
    assert_eq!(s.name(fold.node), "f0");
    assert_eq!(s.name(fold.last), "f39");
    assert_eq!(s.label(&fold), "… 40 frames: f0 → f39");
    assert_eq!(fold.width, 1.0);
    assert_eq!(row_names(&s, 2), ["work"]);
    assert_eq!(row_names(&s, 3), ["a", "b"]);

    // It opens on the first fork; up is the fold, and Enter unfolds it.
    assert_eq!(selected_name(&s), "work");
    assert!(s.select_parent());
    assert!(s.selected_box().unwrap().is_fold());
    assert!(s.zoom_in());
    assert!(!s.is_zoomed(), "a fold unfolds rather than zooms");
    assert_eq!(s.rows().len(), 43);
    assert_eq!(selected_name(&s), "f0");
    assert!(s.rows().iter().flatten().all(|b| !b.is_fold()));

    // Unfolded it stays, through a new profile; `f` twice folds it again.
    s.set_tree(chain(40).tree().clone());
    assert_eq!(s.rows().len(), 43);
    s.set_folding(false);
    s.set_folding(true);
    assert_eq!(s.rows().len(), 4);
}

#[test]
fn short_chains_and_the_top_row_do_not_fold() {
    let s = chain(usize::try_from(MIN_FOLD).unwrap() - 1);
    assert!(s.rows().iter().flatten().all(|b| !b.is_fold()));
    assert_eq!(row_names(&s, 0), ["proc"]);
    let s = chain(usize::try_from(MIN_FOLD).unwrap());
    assert_eq!(s.rows()[1][0].frames, MIN_FOLD);
}

#[test]
fn the_view_opens_at_the_first_frame_that_forks_or_does_work_of_its_own() {
    // y has a child and self time of its own: the hot path stops there.
    let s = state("p;x;y;z 10\np;x;y 5\nq 1\n");
    assert_eq!(selected_name(&s), "y");
    // Noise too narrow to draw (under a 2000th) neither forks nor stops it.
    let s = state("p;x;y 100000\np;x;tiny 1\n");
    assert_eq!(selected_name(&s), "y");
}

#[test]
fn hiding_a_pattern_merges_weights_into_parents() {
    let folded = "p;hide1;a 10\np;hide1;b 5\np;a 7\np;hide1 3\np;hide2;hide1;a 1\np;c 4\n";
    let mut s = FlameState::default();
    s.set_folding(false);
    s.set_tree(tree(folded));
    assert_eq!(row_names(&s, 1), ["a", "c", "hide1", "hide2"]);
    let total = s.zoom_total();
    select(&mut s, 1, "c");

    let options = FlameOptions {
        hidden: vec!["hide*".into()],
        fold: false,
        ..FlameOptions::default()
    };
    s.set_options(&options);
    assert_eq!(s.zoom_total(), total, "the total is unchanged");
    assert_eq!(row_names(&s, 1), ["a", "b", "c"]);
    let a = box_named(&s, 1, "a").node;
    assert_eq!(
        s.total(a),
        10 + 7 + 1,
        "a weighs all that was merged into it"
    );
    let p = s.rows()[0][0].node;
    assert_eq!(s.self_weight(p), 3, "hide1's own time is its caller's");
    assert_eq!(s.total(p), total);
    assert!(s.hidden_nodes() >= 3);
    assert_eq!(selected_name(&s), "c", "the selection stays on its frame");
    let widths: f64 = s.rows()[1].iter().map(|b| b.width).sum();
    assert!((widths - (total - 3) as f64 / total as f64).abs() < 1e-12);

    // And back: every frame again, the selection still on c.
    s.set_hiding(false);
    assert_eq!(row_names(&s, 1), ["a", "c", "hide1", "hide2"]);
    assert_eq!(selected_name(&s), "c");
    assert_eq!(s.hidden_nodes(), 0);
}

#[test]
fn hidden_frames_merge_alike_in_the_baseline() {
    let mut s = FlameState::default();
    let options = FlameOptions {
        hidden: vec!["glue".into()],
        ..FlameOptions::default()
    };
    s.set_options(&options);
    s.set_tree(tree("p;glue;work 50\np;idle 50\n"));
    s.set_baseline(Some(tree("p;glue;work 25\np;idle 75\n")));
    s.set_differential(true);
    let work = box_named(&s, 1, "work");
    assert!(
        !work.new_frame,
        "found in the baseline through the hidden frame"
    );
    assert!((work.delta.unwrap() - 0.25).abs() < 1e-12);
}

#[test]
fn names_shorten_and_come_back_whole() {
    let mut s = state(
        "p;std::collections::hash::map::HashMap<K,V>::insert 1\np;tokio::runtime::park::Inner::park::{{closure}}::{{closure}} 1\n",
    );
    let insert = s.rows()[1][0].node;
    let park = s.rows()[1][1].node;
    assert!(s.short_names());
    assert_eq!(s.display_name(insert), "HashMap<…>::insert");
    assert_eq!(s.display_name(park), "Inner::park::{…}");
    s.set_short_names(false);
    assert_eq!(
        s.display_name(insert),
        "std::collections::hash::map::HashMap<K,V>::insert"
    );
    assert_eq!(s.name(insert), s.display_name(insert));
}

#[test]
fn g_jumps_to_the_hottest_leaf_under_the_selection() {
    let mut s = state("p;a;x 5\np;a;y;deep 20\np;a;y 2\np;b 30\n");
    select(&mut s, 1, "a");
    assert!(s.select_hottest_leaf());
    assert_eq!(selected_name(&s), "deep");
    assert!(!s.select_hottest_leaf(), "already there");
    select(&mut s, 0, "p");
    assert!(s.select_hottest_leaf());
    assert_eq!(selected_name(&s), "b");

    // A leaf past the deepest row laid out: zoomed into, then selected.
    let names: Vec<String> = (0..MAX_DEPTH + 5).map(|i| format!("f{i}")).collect();
    let mut t = StackTree::new();
    t.add_names(names.iter().map(String::as_str), 10);
    t.add_names(["f0", "side"], 1);
    let mut s = FlameState::default();
    s.set_folding(false);
    s.set_tree(t);
    s.selected = Some((0, 0));
    assert!(s.select_hottest_leaf());
    assert_eq!(selected_name(&s), names[MAX_DEPTH + 4]);
    assert!(s.is_zoomed());
}

#[test]
fn pages_and_ends_move_along_the_widest_path() {
    let names: Vec<String> = (0..30).map(|i| format!("f{i}")).collect();
    let mut t = StackTree::new();
    t.add_names(names.iter().map(String::as_str), 10);
    t.add_names(["f0", "side"], 1);
    let mut s = FlameState::default();
    s.set_folding(false);
    s.set_tree(t);
    s.selected = Some((0, 0));
    assert!(s.page_down(8));
    assert_eq!(selected_name(&s), "f8");
    assert!(s.page_up(3));
    assert_eq!(selected_name(&s), "f5");
    assert!(s.select_bottom());
    assert_eq!(selected_name(&s), "f29");
    assert!(!s.page_down(8), "nothing below");
    assert!(s.select_top());
    assert_eq!(selected_name(&s), "f0");
    assert!(!s.page_up(1));
}

#[test]
fn a_ring_profile_forks_within_a_few_rows() {
    // The ring's plumbing as recorded: 37 frames of one child each before the fork.
    let plumbing: Vec<String> = (0..37)
        .map(|i| format!("tokio::runtime::layer{i}::run"))
        .collect();
    let stack = plumbing.join(";");
    let s = state(&format!(
        "bt-ring;{stack};ring::hop;mailbox::send 60\nbt-ring;{stack};ring::hop;mailbox::recv 25\nbt-ring;{stack};ring::park 15\n"
    ));
    let fork = s
        .rows()
        .iter()
        .position(|row| row.len() > 1)
        .expect("a fork");
    assert!(fork <= 3, "the first fork on row {fork}");
}

#[test]
fn select_frame_finds_the_heaviest_node_of_a_name_and_unfolds_its_chain() {
    let mut s = chain(40);
    assert!(s.select_frame("f20"));
    assert_eq!(selected_name(&s), "f20");
    assert!(!s.select_frame("nothing"));
    let mut s = state("p;a;x 5\np;b;x 20\n");
    assert!(s.select_frame("x"));
    assert_eq!(s.name(s.parent(s.selected_box().unwrap().node)), "b");
}

/// The laid-out tree as sorted `path weight` lines of self weights and `path =total`
/// lines of totals: two panes showing one profile agree on it whatever their node ids.
fn view_lines(s: &FlameState) -> Vec<String> {
    let mut lines = Vec::new();
    for i in 1..s.view.node_count() {
        let n = NodeId(i as u32);
        let path: Vec<&str> = tree::path_to(&s.view, n)
            .iter()
            .map(|&p| s.name(p))
            .collect();
        let node = s.view.node(n);
        lines.push(format!("{} ={}", path.join(";"), node.total_weight));
        if node.self_weight > 0 {
            lines.push(format!("{} {}", path.join(";"), node.self_weight));
        }
    }
    lines.sort();
    lines
}

/// The rows as (label, start, width) per box.
fn laid_out(s: &FlameState) -> Vec<Vec<(String, f64, f64)>> {
    s.rows()
        .iter()
        .map(|row| {
            row.iter()
                .map(|b| (s.label(b).into_owned(), b.start, b.width))
                .collect()
        })
        .collect()
}

#[test]
fn a_profile_grown_interval_by_interval_lays_out_as_the_same_profile_set_whole() {
    // Frames the default patterns hide among those they do not, so that hidden frames
    // appear under nodes already laid out (their callers adopt new callees) and the
    // children of two merged sources meet.
    const FRAMES: [&str; 8] = [
        "main",
        "std::rt::lang_start",
        "run",
        "clone3",
        "poll",
        "start_thread",
        "send",
        "recv",
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut grown = FlameState::default();
    let mut whole = StackTree::new();
    let mut by_intervals = 0;
    for interval in 0..40 {
        let mut adds = Vec::new();
        for _ in 0..1 + next(30) {
            let depth = 1 + next(7);
            let mut node = NodeId::ROOT;
            let mut names = vec!["bt-ring"];
            names.extend((0..depth).map(|_| FRAMES[next(FRAMES.len() as u64) as usize]));
            for name in &names {
                let frame = grown.intern(name);
                node = grown.node_under(node, frame);
            }
            let weight = 1 + next(9);
            adds.push((node, weight));
            whole.add_names(names.iter().copied(), weight);
        }
        // A selection is held by node id: it stays on its frame as the profile grows.
        let selected = (interval >= 20).then(|| {
            grown.selected = Some((0, grown.rows()[0].len() - 1));
            grown.selected_box().unwrap().node
        });
        let generation = grown.generation();
        grown.add_stacks(&adds);
        assert_eq!(
            grown.generation(),
            generation,
            "the profile is not replaced"
        );
        if let Some(node) = selected {
            assert_eq!(grown.selected_box().map(|b| b.node), Some(node));
        }
        if grown.view.mapped() > 1 {
            by_intervals += 1;
        }
        let mut set = FlameState::default();
        set.set_tree(whole.clone());
        assert_eq!(view_lines(&grown), view_lines(&set), "interval {interval}");
        assert_eq!(grown.tree().to_folded(), whole.to_folded());
        assert_eq!(
            grown.hidden_nodes(),
            set.hidden_nodes(),
            "interval {interval}"
        );
        assert_eq!(laid_out(&grown), laid_out(&set), "interval {interval}");
    }
    assert!(
        by_intervals > 30,
        "most intervals extended the tree: {by_intervals}"
    );
}

/// A waits profile: the consumer woken by two producers, and the producers' own waits
/// (their sleeps, ended by the timer).
const WAITS: &str = "\
cv;main;consume;cond_wait;— woken by —;cv;prod-a;run;producer_a;release;cond_signal 75
cv;main;consume;cond_wait;— woken by —;cv;prod-b;run;producer_b;release;cond_signal 25
cv;run;producer_a;sleep_ms;nanosleep;— woken by —;[woken by: hard interrupt (timer or device)] 70
cv;run;producer_b;sleep_ms;nanosleep;— woken by —;[woken by: hard interrupt (timer or device)] 22
cv;run;wait_turn;cond_wait;— woken by —;cv;main;consume;cond_broadcast 8
";

#[test]
fn w_walks_from_a_waker_to_what_it_was_waiting_for_itself() {
    let mut s = state(WAITS);
    s.set_folding(false);
    let row = (0..s.rows().len())
        .find(|&r| row_names(&s, r).contains(&"producer_a"))
        .expect("producer_a laid out");
    // The first producer_a row is the blocked side's (cv;run;producer_a); the waker's is
    // deeper, above the separator.
    let waker_row = (row + 1..s.rows().len())
        .find(|&r| row_names(&s, r).contains(&"producer_a"))
        .expect("producer_a as a waker");
    select(&mut s, waker_row, "producer_a");
    assert!(s.follow_waker());
    assert_eq!(
        s.zoom_path().collect::<Vec<_>>(),
        ["cv", "run", "producer_a"]
    );
    // From there the timer that ended producer_a's own sleep is on screen.
    let names: Vec<&str> = (0..s.rows().len()).flat_map(|r| row_names(&s, r)).collect();
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("[woken by: hard interrupt")),
        "{names:?}"
    );
    // A box of a blocked stack, or an interrupt waker, leads nowhere.
    select(&mut s, 0, "producer_a");
    assert!(!s.follow_waker());
}
