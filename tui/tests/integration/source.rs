//! Source lines, end to end: a C program whose time goes into one known line is
//! recorded for real; the session's line histogram puts the most samples on that line,
//! and the source view opened on the session shows it with the largest share.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use benchtop::state::{AppEvent, Effect, Key, State};
use benchtop_sessions::intervals::IntervalStacks;
use benchtop_sessions::limits::LoadOptions;
use benchtop_sessions::store::Session;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use crate::support::{benchtop, succeeded};

/// tests/data/source/hotline.c, and the number of its line marked HOT.
fn fixture() -> (PathBuf, u32) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/source/hotline.c");
    let text = std::fs::read_to_string(&source).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("/* HOT */"))
        .expect("the fixture marks its hot line") as u32
        + 1;
    (source, line)
}

fn build(dir: &Path, source: &Path) -> PathBuf {
    let exe = dir.join("hotline");
    let out = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(source)
        .output()
        .expect("cc (gcc) is needed: scripts/test installs it");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn text(buf: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// The share drawn on each source row of the view: (line number, percent).
fn drawn_shares(screen: &str) -> Vec<(u32, f64)> {
    screen
        .lines()
        .filter_map(|l| {
            let l = l.trim_start_matches(['│', ' ']);
            let (number, rest) = l.split_once(' ')?;
            let line: u32 = number.parse().ok()?;
            let share = rest.trim_start().split_once('%')?.0.trim().parse().ok()?;
            Some((line, share))
        })
        .collect()
}

#[test]
fn the_hot_line_of_a_recorded_c_program_has_the_largest_share() {
    let (source, hot) = fixture();
    let tmp = tempfile::tempdir().unwrap();
    let exe = build(tmp.path(), &source);
    let dir = tmp.path().join("session");
    succeeded(
        benchtop()
            .args(["run", "--quiet", "--profile", "cpu", "--record"])
            .arg(&dir)
            .arg("--")
            .arg(&exe)
            .arg("1500"),
    );

    // The session's histogram: hot_loop's lines, the marked one heaviest by far.
    let stacks = IntervalStacks::load(&dir, &LoadOptions::default())
        .unwrap()
        .expect("stacks.jsonl");
    let lines = &stacks.lines;
    let own = lines.lines("hot_loop");
    assert!(!own.is_empty(), "no lines for hot_loop: {:?}", lines);
    let total: u64 = own.iter().map(|l| l.weight).sum();
    let top = own.iter().max_by_key(|l| l.weight).unwrap();
    assert!(
        lines.file(top.file).ends_with("hotline.c"),
        "{}",
        lines.file(top.file)
    );
    assert_eq!(top.line, hot, "{own:?}");
    assert!(top.weight * 2 > total, "the hot line holds most: {own:?}");
    // main's line is the call to hot_loop, in the same file.
    assert!(!lines.lines("main").is_empty(), "{lines:?}");

    // The source view of the opened session, as the TUI loop would drive it.
    let now = Instant::now();
    let session = Session::load(&dir).unwrap();
    let mut state = State::with_session(session, now, false);
    // Select hot_loop in the top functions (by self it leads), then the source view,
    // maximized.
    let todo = [
        AppEvent::Key(Key::Char('t')),
        AppEvent::Key(Key::Enter),
        AppEvent::Key(Key::Char('a')),
        AppEvent::Key(Key::Char('e')),
    ];
    let mut events = std::collections::VecDeque::from(todo);
    while let Some(event) = events.pop_front() {
        for effect in state.update(event, now) {
            match effect {
                Effect::LoadLines(d) => {
                    let stacks = IntervalStacks::load(&d, &LoadOptions::default()).unwrap();
                    events.push_back(AppEvent::Lines {
                        dir: d,
                        lines: Ok(stacks.unwrap().lines),
                    });
                }
                Effect::ReadSource(path) => {
                    let text = benchtop_sessions::lines::read_source(
                        Path::new(&path),
                        &LoadOptions::default(),
                    )
                    .map_err(|e| e.to_string());
                    events.push_back(AppEvent::Source { path, text });
                }
                _ => {}
            }
        }
    }
    assert_eq!(state.flames().views.function, "hot_loop");
    let area = Rect::new(0, 0, 160, 48);
    let mut buf = Buffer::empty(area);
    benchtop::view::draw(&state, now, area, &mut buf);
    let screen = text(&buf);
    assert!(screen.contains("hotline.c"), "{screen}");
    assert!(screen.contains("/* HOT */"), "{screen}");
    let shares = drawn_shares(&screen);
    let best = shares
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or_else(|| panic!("no source rows drawn:\n{screen}"));
    assert_eq!(best.0, hot, "{shares:?}\n{screen}");
    assert!(best.1 > 50.0, "{shares:?}");
}
