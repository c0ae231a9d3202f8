//! Every screen, in the states users meet it, at 80×24, 100×30 and 160×48: a snapshot at
//! 100×30 of each (each view's own tests keep theirs at 80×24 and 160×48, or
//! [`ALL_SIZES`] here), and one check
//! over all three sizes that what each screen meant to draw is on it whole or given way
//! by the rule (`fit`): no label cut at a pane's edge without an ellipsis, no two labels
//! run together, and the footer holding keys.

use std::time::Instant;

use super::tests::{at, comparing, dropping, launcher, long_tail, render, running, running_with};
use crate::state::{AppEvent, Key, Pane, Screen, State};

/// A label of more words than this is prose, which wraps: each word is checked.
const PROSE_WORDS: usize = 3;

/// The screens whose snapshots at 80×24 and 160×48 are taken here too (the others have
/// theirs beside their views' own tests).
const ALL_SIZES: [&str; 3] = ["process_tree", "range", "slow_intervals"];

/// The sizes every screen is checked at.
const SIZES: [(u16, u16); 3] = [(80, 24), (100, 30), (160, 48)];

/// The fewest characters a label must have to be checked, and a cut start to be read as
/// one (a key's single letter is everywhere in words).
const CUT_AT_LEAST: usize = 3;

fn press(s: &mut State, keys: &str, now: Instant) {
    for c in keys.chars() {
        let key = match c {
            '\n' => Key::Enter,
            '\t' => Key::Tab,
            c => Key::Char(c),
        };
        s.update(AppEvent::Key(key), now);
    }
}

/// `sh -c 'find /usr -type f | xargs md5sum'`, twelve seconds in: a process tree whose
/// processes sit side by side on the flamegraph's first row.
fn process_tree(base: Instant) -> State {
    super::program::tests::program_with(
        base,
        "sh",
        "command=sh -c 'find /usr -type f | xargs md5sum'",
        &[
            ("find;main;fts_read;__getdents64", 300),
            ("md5sum;main;digest_file;md5_process_block", 520),
            ("md5sum;main;digest_file;__GI___read", 130),
            ("xargs;main;__GI___wait4", 50),
        ],
    )
}

/// Every screen in the states the issue of readability names: a ring profile, a C
/// program's, a process tree's, a long latency tail, `open A B`, ranges, the help, the
/// launcher; and the other screens and views beside them.
fn screens() -> Vec<(&'static str, State, Instant)> {
    let base = Instant::now();
    let now = at(base, 12);
    let mut out: Vec<(&'static str, State, Instant)> = Vec::new();
    out.push(("live_ring", running(base), now));
    let recorded = running_with(base, &super::tests::recorded_ring(), &[(500_000, 100)]);
    out.push(("live_recorded_ring", recorded, now));
    out.push(("live_long_tail", long_tail(base), now));
    out.push(("live_otlp_dropping", dropping(base), now));
    let mut help = running(base);
    press(&mut help, "?", now);
    out.push(("live_help", help, now));
    let mut search = running(base);
    press(&mut search, "/hop", now);
    out.push(("live_searching", search, now));
    let mut ended = running(base);
    ended.live.run.status =
        crate::state::live::RunStatus::Finished(benchtop_sessions::Status::Complete);
    ended.live.run.ended_at = Some(now);
    ended.live.run.status_line = "the run ended: complete".into();
    out.push(("live_run_over", ended, now));
    out.push(("program", super::program::tests::program(base), now));
    out.push(("process_tree", process_tree(base), now));
    out.push(("kvstore", super::program::tests::kvstore(base), now));
    out.push(("memory", super::memory_tests::memory_screen(base, 2), now));
    out.push(("waits", super::waits_tests::waits_screen(base, 2), now));
    for (name, keys) in [
        ("top_functions", "t"),
        ("bottom_up", "i"),
        ("callers", "c"),
        ("source", "tj\na"),
    ] {
        let s = super::profile_views::tests::screen(keys);
        out.push((name, s, Instant::now()));
    }
    let mut range = crate::state::timeline::example_state();
    press(&mut range, ",,,,,,r.r", at(base, 1));
    out.push(("range", range, at(base, 1)));
    let mut slow = crate::state::timeline::example_state();
    press(&mut slow, "S", at(base, 1));
    out.push(("slow_intervals", slow, at(base, 1)));
    out.push(("open_a_b", comparing(), Instant::now()));
    out.push(("launcher", launcher(), Instant::now()));
    let mut warned = launcher();
    warned.update(
        AppEvent::Orphans(Ok(vec![super::tests::orphan(101)])),
        Instant::now(),
    );
    out.push(("launcher_orphan_warning", warned, Instant::now()));
    let mut params = launcher();
    press(&mut params, "\t", Instant::now());
    out.push(("launcher_params", params, Instant::now()));
    let mut launcher_help = launcher();
    press(&mut launcher_help, "?", Instant::now());
    out.push(("launcher_help", launcher_help, Instant::now()));
    let now = Instant::now();
    out.push(("command_entry", super::picker::tests::at_entry(0, now), now));
    out.push((
        "ab_running",
        super::ab::tests::experiment(false),
        Instant::now(),
    ));
    out.push((
        "ab_over",
        super::ab::tests::experiment(true),
        Instant::now(),
    ));
    out.push((
        "history",
        super::history::tests::history_state(true),
        Instant::now(),
    ));
    let base = Instant::now();
    out.push((
        "orphans",
        super::keys::tests::orphans_screen(base),
        at(base, 1),
    ));
    out
}

/// The labels `state`'s screen meant to draw, each whole: the header's, the footer's
/// keys, the panes' titles and names, the flamegraph's widest frames, the figures'.
fn meant(state: &State) -> Meant {
    let mut labels: Vec<String> = Vec::new();
    if state.help {
        // The box covers the screen: its own lines, and the footer's keys.
        for line in super::keys::help_lines(state.screen) {
            labels.push(line.keys.to_owned());
            labels.push(line.heading.to_owned());
            labels.push(line.what.to_owned());
        }
        labels.extend(hints(state).into_iter().map(str::to_owned));
        return split(labels);
    }
    let run = &state.live.run;
    let live = state.screen == Screen::Live;
    if live {
        labels.push(run.workload.clone());
        labels.push(format!("● {}", run.status_label()));
        labels.push(run.sampling.clone());
        labels.extend(run.params.split_whitespace().map(str::to_owned));
        labels.extend(run.dir.iter().map(|d| d.display().to_string()));
        labels.extend(run.pid.map(|p| format!("pid {p}")));
        if !run.status_line.is_empty() {
            labels.push(run.status_line.clone());
        }
        for pane in Pane::ALL {
            if pane != Pane::Flame {
                labels.push(super::program::title(state, pane).to_owned());
            }
        }
        labels.extend(
            [
                "RSS",
                "peak",
                "threads",
                "procs",
                "CPU",
                "switches",
                "/interval",
                "samples",
                // What a pane says before its first figure.
                "waiting for the first interval",
                "none recorded",
                "no latency metric yet",
            ]
            .map(str::to_owned),
        );
    }
    if matches!(state.screen, Screen::Live | Screen::Compare) && !state.help {
        let flame = state.flame();
        for row in flame.rows().iter().take(12) {
            for b in row.iter().filter(|b| b.width >= 0.15) {
                for node in [b.node, b.last] {
                    let name = flame.name(node);
                    labels.push(if flame.short_names() {
                        benchtop_sessions::names::short_name(name, 0)
                    } else {
                        name.to_owned()
                    });
                }
            }
        }
    }
    let source = &state.flames().views.source;
    if !source.function.is_empty() {
        labels.push(source.function.clone());
        labels.extend(source.file.clone());
    }
    if state.screen == Screen::Compare {
        labels.extend(state.compare.figures.iter().flat_map(|f| f.cells()));
        labels.extend(benchtop_sessions::compare::TABLE_HEAD.map(str::to_owned));
    }
    if state.screen == Screen::Launcher {
        for w in &state.launcher.workloads {
            labels.push(w.name.clone());
            labels.push(w.about.clone());
            labels.extend(w.params.iter().map(|p| p.name.clone()));
        }
        labels.extend(state.launcher.recent.iter().map(|r| r.name.clone()));
        labels.extend(
            crate::state::launcher::PROGRAM_ENTRIES
                .iter()
                .flat_map(|e| [e.1.to_owned(), e.2.to_owned()]),
        );
    }
    if state.screen == Screen::Ab {
        let plan = &state.ab.plan;
        labels.extend([plan.a.clone(), plan.b.clone()]);
        labels.push(format!("threshold ±{:.1}%", plan.threshold * 100.0));
    }
    labels.extend(state.flash.iter().map(|f| f.text.clone()));
    labels.extend(hints(state).into_iter().map(str::to_owned));
    split(labels)
}

/// What a screen meant to draw: labels, and the words of its prose (which wraps, and
/// whose words run into nothing).
struct Meant {
    labels: Vec<String>,
    words: Vec<String>,
}

fn split(all: Vec<String>) -> Meant {
    let (prose, labels): (Vec<String>, Vec<String>) = all
        .into_iter()
        .partition(|l| l.split_whitespace().count() > PROSE_WORDS);
    let words = prose
        .iter()
        .flat_map(|p| p.split_whitespace())
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_owned());
    let keep = |mut v: Vec<String>| {
        v.retain(|l| l.trim().chars().count() >= CUT_AT_LEAST);
        v.sort();
        v.dedup();
        v
    };
    Meant {
        labels: keep(labels),
        words: keep(words.collect()),
    }
}

/// The footer's hints in `state`, when the footer holds keys (no flash, no error).
fn hints(state: &State) -> Vec<&'static str> {
    super::keys::footer_table(state)
        .hints(state)
        .into_iter()
        .map(|h| h.text)
        .collect()
}

/// A character that sets a label apart from the next: anything but a letter or a digit.
fn apart(c: Option<char>) -> bool {
    c.is_none_or(|c| !c.is_alphanumeric())
}

/// The edge of what a label is drawn in: the line's end or a box's border.
fn edge(c: Option<char>) -> bool {
    c.is_none_or(|c| "│┐┘┤┌└├─".contains(c))
}

/// What is wrong with `screen` against the labels it meant to draw: a label whose start
/// runs up to a pane's edge without its end and without a `…` (cut by the edge), and a
/// label run into the start of another (no separator between).
fn problems(screen: &str, meant: &Meant) -> Vec<String> {
    let all: Vec<String> = meant.labels.iter().chain(&meant.words).cloned().collect();
    let mut found = Vec::new();
    for line in screen.lines() {
        for label in &all {
            if let Some(head) = cut_head(line, label, &all) {
                found.push(format!(
                    "{label:?} cut at an edge without an ellipsis ({head:?}): {line:?}"
                ));
            }
        }
        for label in &meant.labels {
            if let Some(other) = run_into(line, label, &meant.labels) {
                found.push(format!("{label:?} runs into {other:?}: {line:?}"));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// The longest start of `label` in `line` that ends at an edge (blanks between allowed)
/// where the label goes on: a start set apart before it, of at least [`CUT_AT_LEAST`]
/// characters, ending in a letter or a digit.
/// A start inside another label drawn whole there (`run` in the frame `run`, `list` at
/// the end of a description) is that label's, not a cut.
fn cut_head<'a>(line: &str, label: &'a str, labels: &[String]) -> Option<&'a str> {
    let whole: Vec<(usize, usize)> = labels
        .iter()
        .filter(|m| *m != label)
        .flat_map(|m| {
            line.match_indices(m.as_str())
                .map(|(j, m)| (j, j + m.len()))
        })
        .collect();
    let ends: Vec<usize> = label
        .char_indices()
        .map(|(i, _)| i)
        .skip(CUT_AT_LEAST)
        .collect();
    ends.into_iter()
        .rev()
        .map(|end| &label[..end])
        .find(|head| {
            head.ends_with(char::is_alphanumeric)
                && line.match_indices(head).any(|(i, _)| {
                    let starts_apart = !head.starts_with(char::is_alphanumeric)
                        || apart(line[..i].chars().next_back());
                    let after = line[i + head.len()..].trim_start_matches(' ');
                    let another = whole.iter().any(|&(j, k)| j <= i && i + head.len() <= k);
                    starts_apart && edge(after.chars().next()) && !another
                })
        })
}

/// The label `label` runs into in `line`: `label` whole, then without a separator the
/// start of another label.
fn run_into<'a>(line: &str, label: &str, labels: &'a [String]) -> Option<&'a String> {
    if !label.ends_with(char::is_alphanumeric) {
        return None;
    }
    line.match_indices(label).find_map(|(i, _)| {
        let next = &line[i + label.len()..];
        if apart(next.chars().next()) {
            return None;
        }
        labels.iter().find(|m| {
            let start: String = m.chars().take(CUT_AT_LEAST).collect();
            *m != label && m.starts_with(char::is_alphanumeric) && next.starts_with(&start)
        })
    })
}

/// What `state` draws of `screen` (`width` columns): all of it, or with the help open
/// its box (as `keys::draw_help` centres it, at most `HELP_WIDTH` wide) and the footer; what the box
/// covers is not drawn, and what it leaves of a line is no label's end.
fn drawn(state: &State, screen: &str, width: u16) -> String {
    if !state.help {
        return screen.to_owned();
    }
    let box_width = usize::from(width.min(super::keys::HELP_WIDTH));
    let x0 = (usize::from(width) - box_width) / 2;
    let lines: Vec<&str> = screen.lines().collect();
    let (footer, above) = lines.split_last().unwrap_or((&"", &[]));
    let mut out: Vec<String> = above
        .iter()
        .map(|l| l.chars().skip(x0).take(box_width).collect())
        .collect();
    out.push((*footer).to_owned());
    out.join("\n")
}

/// The header's lines and the footer's (the first two and the last, text without a box
/// around it) that run on to the screen's last column in a letter or a digit: text the
/// edge cut, whatever label it was, unless a label ends there whole (a line it fills).
fn off_the_edge(screen: &str, width: u16, meant: &Meant) -> Vec<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let last = lines.len().saturating_sub(1);
    std::collections::BTreeSet::from([0, 1, last])
        .into_iter()
        .filter_map(|y| lines.get(y))
        .filter(|line| {
            let chars: Vec<char> = line.chars().collect();
            chars.len() >= usize::from(width)
                && chars[usize::from(width) - 1].is_alphanumeric()
                && chars[usize::from(width) - 2].is_alphanumeric()
                && !meant
                    .labels
                    .iter()
                    .chain(&meant.words)
                    .any(|l| line.ends_with(l.as_str()))
        })
        .map(|line| format!("text runs off the edge: {line:?}"))
        .collect()
}

/// Whether the last line holds at least one of `state`'s hints whole.
fn footer_has_keys(screen: &str, state: &State) -> bool {
    let footer = screen.lines().last().unwrap_or_default();
    hints(state).iter().any(|h| footer.contains(h))
}

#[test]
fn every_screen_at_every_size_draws_its_labels_whole_or_given_way_and_keeps_its_keys() {
    let mut failures = Vec::new();
    for (name, state, now) in screens() {
        let labels = meant(&state);
        for (w, h) in SIZES {
            let screen = render(&state, now, w, h);
            for p in problems(&drawn(&state, &screen, w), &labels) {
                failures.push(format!("{name} {w}x{h}: {p}"));
            }
            for p in off_the_edge(&screen, w, &labels) {
                failures.push(format!("{name} {w}x{h}: {p}"));
            }
            let flash = state.flash.is_some() || state.launcher.error.is_some();
            if !flash && !footer_has_keys(&screen, &state) {
                failures.push(format!("{name} {w}x{h}: no key in the footer:\n{screen}"));
            }
            if (w, h) == (100, 30) || ALL_SIZES.contains(&name) {
                insta::assert_snapshot!(format!("{name}_{w}x{h}"), screen);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_check_finds_a_cut_label_and_two_labels_run_together() {
    let labels = split(
        [
            "b baseline",
            "find",
            "md5sum",
            "/interval",
            "cpu-clock 999 Hz",
        ]
        .map(str::to_owned)
        .into(),
    );
    // The footer as it was cut at 80 columns, a process tree's two boxes, resources'
    // unit at a pane's edge, and the sampling losing its unit.
    let bad = " o on/off  b bas\n│findmd5sum          │\n│4 invol /interva│\n│cpu-clock 999 │";
    let found = problems(bad, &labels);
    for label in ["b baseline", "find", "/interval", "cpu-clock 999 Hz"] {
        assert!(
            found.iter().any(|p| p.starts_with(&format!("{label:?}"))),
            "{label}: {found:#?}"
        );
    }
    // Given way by the rule: whole, elided with `…`, or left out.
    let good = " o on/off  b baseline\n│find md5sum         │\n│4 invol     /int…al│\n│cpu-clock 999 Hz│\n│ q quit │";
    assert_eq!(problems(good, &labels), Vec::<String>::new());
    // A header cut by the screen's edge, whatever it said.
    let cut = " benchtop ab done · α 0.6% at the fir";
    assert_eq!(off_the_edge(cut, 37, &labels).len(), 1);
    assert!(off_the_edge(" benchtop ab done · α 0.6% at th…", 37, &labels).is_empty());
    assert!(off_the_edge("   sampled at cpu-clock 999 Hz", 30, &labels).is_empty());
}
