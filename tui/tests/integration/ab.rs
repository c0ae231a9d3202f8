//! `benchtop ab`: A and B alternately, judged from their runs, stopping when decided.

use std::path::Path;
use std::time::Duration;

use benchtop_sessions::series::Series;

use crate::support::benchtop;
use crate::terminal::{Tmux, shell_quote};

fn ring(nodes: &str) -> [&str; 8] {
    [
        "ring",
        "--num-nodes",
        nodes,
        "--num-rounds",
        "100",
        "--interval",
        "100ms",
        "--profile=none",
    ]
}

fn ab(dir: &Path, options: &[&str], a: &[&str], b: &[&str]) -> std::process::Output {
    benchtop()
        .arg("ab")
        .args(options)
        .args(["--quiet", "--record"])
        .arg(dir)
        .arg("--")
        .args(a)
        .arg("--")
        .args(b)
        .output()
        .unwrap()
}

/// The start times of a series' runs, in the order series.json names them.
fn starts(dir: &Path) -> Vec<String> {
    let series = Series::load(dir).unwrap();
    assert!(series.warnings.is_empty(), "{:?}", series.warnings);
    series
        .sessions
        .iter()
        .map(|(_, s)| s.meta.started_at.clone())
        .collect()
}

/// A, B, B, A, A, B …: in odd pairs A starts first, in even ones B, and each pair
/// before the next.
fn assert_alternated(dir: &Path) {
    let (a, b) = (starts(&dir.join("a")), starts(&dir.join("b")));
    assert_eq!(a.len(), b.len(), "{a:?} {b:?}");
    for i in 0..a.len() {
        let (first, second) = if i % 2 == 0 {
            (&a[i], &b[i])
        } else {
            (&b[i], &a[i])
        };
        assert!(first < second, "pair {i}: A {} B {}", a[i], b[i]);
        if let (Some(next_a), Some(next_b)) = (a.get(i + 1), b.get(i + 1)) {
            assert!(
                second < next_a && second < next_b,
                "pair {i} ends at {second}, the next starts at A {next_a} B {next_b}"
            );
        }
    }
}

#[test]
fn ab_until_decided_stops_before_max_runs_on_a_large_difference_and_fails_on_the_regression() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ab");
    let out = ab(
        &dir,
        &["--until-decided", "--max-runs", "8", "--figure", "lap p50"],
        &ring("100"),
        &ring("20000"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // B's laps are far slower: a regression, and the exit status says so.
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("decided: lap p50: regressed"), "{stdout}");
    // A progress line per pair, each with the figure's interval once there is one.
    assert!(stderr.contains("ab 2/8: lap p50"), "{stderr}");
    let runs = Series::load(&dir.join("a")).unwrap().measured().len();
    assert!((2..8).contains(&runs), "stopped after {runs} runs a side");
    assert_alternated(&dir);
    let json = std::fs::read_to_string(dir.join("comparison.json")).unwrap();
    let comparison: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(comparison["runs"], serde_json::json!([runs, runs]));
    assert_eq!(comparison["noise"], "runs");
    let lap = comparison["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "lap p50")
        .unwrap();
    assert!(lap["change"].as_f64().unwrap() > 1.0, "{lap}");
}

#[test]
fn ab_of_the_same_ring_is_the_same_or_undecided_after_max_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("aa");
    let out = ab(
        &dir,
        &[
            "--until-decided",
            "--max-runs",
            "4",
            "--threshold",
            "25%",
            "--figure",
            "lap p50",
        ],
        &ring("100"),
        &ring("100"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // -q: no line of the runs themselves, only the line per pair.
    assert!(!stderr.lines().any(|l| l.contains("/8 run-")), "{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("decided: lap p50"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.ends_with("undecided") || line.ends_with("same"),
        "{line}"
    );
    assert!(!stdout.contains("within noise"), "{stdout}");
    // Only the chosen figure is judged; the others are shown.
    let rate = stdout
        .lines()
        .find(|l| l.starts_with("messages/s "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(rate.contains("not judged"), "{rate}");
    // It runs to --max-runs and says so, or stops sooner only as the same within the
    // threshold. The threshold is wide because a machine whose load swings between pairs
    // (another build starting) moves a short ring's lap p50 by more than a few percent, a
    // real change between the runs that no A/A test should count on not happening.
    let runs = Series::load(&dir.join("b")).unwrap().measured().len();
    assert!(
        runs == 4 && (line.ends_with("same") || stdout.contains("undecided after 4 pairs"))
            || (2..4).contains(&runs) && line.ends_with("same"),
        "{runs} runs: {line}\n{stdout}\n{stderr}"
    );
    assert_alternated(&dir);
}

#[test]
fn ab_refuses_sides_it_cannot_run_before_running_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bad");
    for (a, b, says) in [
        (
            &["ring"][..],
            &["ring", "--num-nodez", "3"][..],
            "B's run arguments",
        ),
        (
            &["ring", "--runs", "3"][..],
            &["ring"][..],
            "leave out --runs",
        ),
    ] {
        let out = ab(&dir, &[], a, b);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{says}: {stderr}");
        assert!(!dir.exists());
    }
    let out = benchtop()
        .args(["ab", "--", "ring", "--num-nodes", "3"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("separated by `--`"));
}

#[test]
fn ab_of_two_commands_that_sleep_known_times_finds_the_longer_regressed_by_its_sleep() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sleeps");
    // Each side as `benchtop run` takes a command: options, then `--` and the command.
    let out = ab(
        &dir,
        &[
            "--until-decided",
            "--max-runs",
            "6",
            "--figure",
            "wall_time_s",
        ],
        &["--profile=none", "--", "sleep", "0.1"],
        &["--profile=none", "--", "sleep", "0.3"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("decided: wall_time_s: regressed"),
        "{stdout}"
    );
    let runs = Series::load(&dir.join("a")).unwrap().measured().len();
    assert!((2..6).contains(&runs), "stopped after {runs} runs a side");
    assert_alternated(&dir);
    let a = Series::load(&dir.join("a")).unwrap();
    assert_eq!(a.meta.workload, "sleep");
    assert_eq!(a.measured()[0].meta.workload.params["command"], "sleep 0.1");
    // B sleeps 0.2 s longer. Every run's wall time holds its sleep, plus the start and
    // end of a process, which a loaded machine stretches by tens of milliseconds.
    let walls = |side: &str| -> Vec<f64> {
        Series::load(&dir.join(side))
            .unwrap()
            .measured()
            .iter()
            .map(|s| crate::support::figure(s, "wall_time_s"))
            .collect()
    };
    let (a_walls, b_walls) = (walls("a"), walls("b"));
    assert!(a_walls.iter().all(|w| *w >= 0.1), "{a_walls:?}");
    assert!(b_walls.iter().all(|w| *w >= 0.3), "{b_walls:?}");
    let json = std::fs::read_to_string(dir.join("comparison.json")).unwrap();
    let comparison: serde_json::Value = serde_json::from_str(&json).unwrap();
    let wall = comparison["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "wall_time_s")
        .unwrap();
    let a_wall = wall["a"].as_f64().unwrap();
    assert!((0.1..1.0).contains(&a_wall), "{wall}");
    // The interval of the change holds 0.2 s over A's wall time, give or take what the
    // runs themselves vary by: a 95 % interval misses the truth one time in twenty by
    // design, and the overheads beside the sleeps are what moves it.
    let spread = |w: &[f64]| {
        w.iter().copied().fold(f64::MIN, f64::max) - w.iter().copied().fold(f64::MAX, f64::min)
    };
    let slack = (spread(&a_walls) + spread(&b_walls)) / a_wall;
    let known = 0.2 / a_wall;
    let (lo, hi) = (
        wall["ci"][0].as_f64().unwrap(),
        wall["ci"][1].as_f64().unwrap(),
    );
    assert!(
        lo > 0.0 && lo - slack <= known && known <= hi + slack,
        "{lo} … {hi} (± {slack} the runs' spread) must hold {known}: {wall}; \
         A {a_walls:?} B {b_walls:?}"
    );
}

#[test]
fn a_command_of_a_needs_a_separator_before_b() {
    let out = benchtop()
        .args(["ab", "--", "--", "sleep", "0.1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--separator"), "{stderr}");
    let out = benchtop()
        .args([
            "ab",
            "--",
            "--",
            "no-such-command-here",
            "--",
            "--",
            "sleep",
            "0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("A: cannot run `no-such-command-here`"),
        "{stderr}"
    );
}

/// `benchtop ab --tui … -- A -- B` in tmux at `width`×`height`, then its exit code.
fn ab_on_screen(dir: &Path, options: &str, a: &[&str], b: &[&str], size: (u16, u16)) -> Tmux {
    Tmux::start_sized(
        &format!(
            "{} ab --tui {options} --record {} -- {} -- {}; echo EXIT=$?; sleep 60",
            shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop"))),
            shell_quote(dir),
            a.join(" "),
            b.join(" ")
        ),
        size.0,
        size.1,
    )
}

#[test]
fn ab_on_a_screen_draws_each_look_and_prints_the_comparison_once_left() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ab");
    let tmux = ab_on_screen(
        &dir,
        "--until-decided --max-runs 8 --figure 'lap p50'",
        &ring("100"),
        &ring("20000"),
        (80, 24),
    );
    let screen = tmux.wait_for_long("done: ", Duration::from_secs(300));
    assert!(tmux.alternate_screen(), "{screen}");
    assert!(screen.contains("lap p50 by look"), "{screen}");
    // A look after every pair, each a line with its interval on the axis.
    let runs = Series::load(&dir.join("a")).unwrap().measured().len();
    assert!((2..8).contains(&runs), "stopped after {runs} runs a side");
    let looks = screen.lines().filter(|l| l.contains('●')).count();
    assert_eq!(looks, runs, "{screen}");
    assert!(screen.contains("regressed"), "{screen}");
    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(!tmux.alternate_screen(), "the terminal is restored");
    // As headless `ab` prints it, with its exit code: B's laps are far slower.
    assert!(screen.contains("decided: lap p50: regressed"), "{screen}");
    assert!(screen.contains("EXIT=1"), "{screen}");
    assert_alternated(&dir);
}

#[test]
fn q_on_the_ab_screen_stops_the_experiment_and_judges_the_runs_so_far() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ab");
    let tmux = ab_on_screen(
        &dir,
        "--runs 200 --figure wall_time_s",
        &["--", "sleep", "0.2"],
        &["--", "sleep", "0.2"],
        (160, 48),
    );
    tmux.wait_for_long("wall_time_s by look", Duration::from_secs(120));
    tmux.keys("q");
    tmux.wait_for_long("stopped:", Duration::from_secs(60));
    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("stopped)"), "{screen}");
    assert!(screen.contains("decided: wall_time_s"), "{screen}");
    let runs = Series::load(&dir.join("a")).unwrap().measured().len();
    assert!(runs < 200, "stopped after {runs} runs a side");
}
