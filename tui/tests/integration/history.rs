//! `benchtop history DIR…` end to end, on histories of synthetic sessions the tests write
//! (the change-point statistics are unit-tested in benchtop-sessions; here the command:
//! text, JSON, Markdown, exit codes, and hostile histories), and on a real history of a C
//! program recorded in the test.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use benchtop_sessions::synthetic::SyntheticHistory;

use crate::support::{benchtop, succeeded};

/// Writes a history of `points` sessions with `cv` between points and `steps`.
fn write(root: &Path, points: usize, cv: f64, steps: &[(usize, f64)], seed: u64) {
    let mut spec = SyntheticHistory::new(points, cv, seed);
    spec.steps = steps.to_vec();
    spec.write(root).unwrap();
}

fn json(root: &Path, extra: &[&str]) -> serde_json::Value {
    let out = succeeded(
        benchtop()
            .arg("history")
            .arg(root)
            .arg("--json")
            .args(extra),
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The change points of laps/s: (first point after, relative change).
fn laps_changes(report: &serde_json::Value) -> Vec<(u64, f64)> {
    let figures = report["histories"][0]["figures"].as_array().unwrap();
    let laps = figures.iter().find(|f| f["name"] == "laps/s").unwrap();
    laps["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let at = c["at"].as_u64().unwrap();
            let point = laps["points"][at as usize]["point"].as_u64().unwrap();
            (point, c["change"]["change"].as_f64().unwrap())
        })
        .collect()
}

#[test]
fn two_hundred_points_with_two_steps_show_both_change_points_with_their_signs() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), 200, 0.02, &[(80, 0.08), (150, -0.06)], 3);
    let report = json(root.path(), &["--figure", "laps/s"]);
    let changes = laps_changes(&report);
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(
        changes[0].0.abs_diff(80) <= 2 && changes[0].1 > 0.04,
        "{changes:?}"
    );
    assert!(
        changes[1].0.abs_diff(150) <= 2 && changes[1].1 < -0.03,
        "{changes:?}"
    );
    assert_eq!(
        report["histories"][0]["points"].as_array().unwrap().len(),
        200
    );
}

/// The temporary root as the snapshots show it.
fn redacted(text: &str, root: &Path) -> String {
    text.replace(&root.display().to_string(), "[root]")
}

#[test]
fn markdown_json_and_text_of_a_small_history_hold_their_shape() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), 12, 0.01, &[(6, 0.5)], 5);
    let run = |format: &str| {
        let mut command = benchtop();
        command
            .arg("history")
            .arg(root.path())
            .args(["--figure", "laps/s"]);
        if !format.is_empty() {
            command.arg(format);
        }
        redacted(
            &String::from_utf8(succeeded(&mut command).stdout).unwrap(),
            root.path(),
        )
    };
    let markdown = run("--markdown");
    assert!(markdown.contains("from point 6 (c006)"), "{markdown}");
    insta::assert_snapshot!("history_markdown", markdown);
    insta::assert_snapshot!("history_json", run("--json"));
    insta::assert_snapshot!("history_text", run(""));
}

#[test]
fn fail_on_exits_one_when_the_newest_point_regressed_and_two_for_an_unknown_figure() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), 30, 0.02, &[(29, -0.3)], 7);
    let status = |args: &[&str]| {
        benchtop()
            .arg("history")
            .arg(root.path())
            .args(args)
            .output()
            .unwrap()
    };
    let regressed = status(&["--fail-on", "laps/s", "--figure", "laps/s"]);
    assert_eq!(regressed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&regressed.stderr);
    assert!(stderr.contains("laps/s regressed"), "{stderr}");
    assert_eq!(status(&["--figure", "laps/s"]).status.code(), Some(0));
    let unknown = status(&["--fail-on", "no such figure"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no history has this figure"));

    let flat = tempfile::tempdir().unwrap();
    write(flat.path(), 30, 0.02, &[], 7);
    let out = benchtop()
        .arg("history")
        .arg(flat.path())
        .args(["--fail-on", "laps/s"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_thousand_empty_directories_a_broken_session_and_escapes_are_read_past() {
    let root = tempfile::tempdir().unwrap();
    for i in 0..1000 {
        fs::create_dir_all(root.path().join(format!("empty/{i:04}/x"))).unwrap();
    }
    let dirs = SyntheticHistory::new(8, 0.01, 2)
        .write(root.path())
        .unwrap();
    fs::create_dir(root.path().join("broken")).unwrap();
    fs::write(
        root.path().join("broken/session.json"),
        "{\"schema_version\": 1,",
    )
    .unwrap();
    // A label with terminal escapes, ordered by.
    let path = dirs[3].join("session.json");
    let text = fs::read_to_string(&path)
        .unwrap()
        .replace("\"c003\"", "\"c003\\u001b]0;pwned\\u0007|\"");
    fs::write(&path, text).unwrap();
    for format in ["", "--markdown"] {
        let mut command = benchtop();
        command.arg("history").arg(root.path()).args([
            "--order-by",
            "commit",
            "--figure",
            "laps/s",
        ]);
        if !format.is_empty() {
            command.arg(format);
        }
        let out = succeeded(&mut command);
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(
            !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
            "{stdout}"
        );
        assert!(
            stdout.contains("broken"),
            "the broken session is named: {stdout}"
        );
        assert!(stdout.contains("8 points"), "{stdout}");
    }
    let report = json(root.path(), &["--order-by", "commit"]);
    assert_eq!(
        report["histories"][0]["points"].as_array().unwrap().len(),
        8
    );
}

#[test]
fn a_missing_directory_is_an_error_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let out = benchtop()
        .arg("history")
        .arg(root.path().join("nowhere"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nowhere"));
}

/// A program whose work is read from a file (its first argument): `steady_a` and
/// `steady_b` each spin one unit of the second argument's iterations, `grown_work` as many
/// units as the file says.
const STEPPED_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

#define SPIN(n)                                                                        \
    do {                                                                               \
        unsigned long x = sink;                                                        \
        for (unsigned long i = 0; i < (n); i++)                                        \
            x = x * 6364136223846793005UL + i;                                         \
        sink = x;                                                                      \
    } while (0)

__attribute__((noinline)) void steady_a(unsigned long n) { SPIN(n); }
__attribute__((noinline)) void steady_b(unsigned long n) { SPIN(n); }
__attribute__((noinline)) void grown_work(unsigned long n) { SPIN(n); }

int main(int argc, char **argv) {
    double units = 0;
    FILE *f = argc > 2 ? fopen(argv[1], "r") : NULL;
    if (!f || fscanf(f, "%lf", &units) != 1)
        return 2;
    fclose(f);
    unsigned long unit = strtoul(argv[2], NULL, 10);
    steady_a(unit);
    steady_b(unit);
    grown_work((unsigned long)(units * (double)unit));
    return 0;
}
"#;

/// Iterations of a unit of work: about 0.1 s of CPU.
const UNIT: &str = "60000000";

/// Builds the stepped program into `dir`.
fn build_stepped(dir: &Path) -> PathBuf {
    let src = dir.join("stepped.c");
    fs::write(&src, STEPPED_C).unwrap();
    let exe = dir.join("stepped");
    let out = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("this test builds a C fixture with `cc`: scripts/test installs gcc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

#[test]
fn a_recorded_history_of_a_c_program_finds_its_step_and_the_function_that_grew() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_stepped(tmp.path());
    // The step is in the file the program reads: the command line stays the same.
    let work = tmp.path().join("work.txt");
    let root = tmp.path().join("results");
    for point in 0..12 {
        // Three units before, 4.5 after: the work steps by 1.5× at point 6, all of it in
        // grown_work.
        fs::write(&work, if point < 6 { "1" } else { "2.5" }).unwrap();
        succeeded(
            benchtop()
                .args(["run", "--quiet", "--label"])
                .arg(format!("point={point}"))
                .arg("--record")
                .arg(root.join(format!("p{point:02}")))
                .arg("--")
                .arg(&exe)
                .arg(&work)
                .arg(UNIT),
        );
    }
    // The recorder wrote each run's digest, and the history reads it, not the session.
    for point in 0..12 {
        let dir = root.join(format!("p{point:02}"));
        let read = benchtop_sessions::digest::Digested::load(&dir).unwrap();
        assert_eq!(read.source, benchtop_sessions::digest::Source::File);
        let figures = read.digest.unwrap().figures;
        assert!(figures["cpu_time_s"].value > 0.1, "{figures:?}");
    }
    let out = tmp.path().join("moved");
    let report = json(
        &root,
        &[
            "--order-by",
            "point",
            "--figure",
            "cpu_time_s",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let h = &report["histories"][0];
    assert_eq!(h["points"].as_array().unwrap().len(), 12, "{report:#}");
    let figures = h["figures"].as_array().unwrap();
    let cpu_time = figures.iter().find(|f| f["name"] == "cpu_time_s").unwrap();
    let changes = cpu_time["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{cpu_time:#}");
    let at = changes[0]["at"].as_u64().unwrap() as usize;
    let point = cpu_time["points"][at]["point"].as_u64().unwrap();
    assert!(point.abs_diff(6) <= 1, "{cpu_time:#}");
    // 1.5× the CPU time, within what a loaded machine does to CPU time.
    let change = changes[0]["change"]["change"].as_f64().unwrap();
    assert!((0.25..0.8).contains(&change), "{cpu_time:#}");

    // What moved: cpu_time_s itself, and grown_work first in the on-CPU profile.
    let moved = &h["moved"][0];
    assert_eq!(moved["at"].as_u64(), Some(point), "{moved:#}");
    assert_eq!(moved["figures"][0]["name"], "cpu_time_s", "{moved:#}");
    let profiles = moved["profiles"].as_array().unwrap();
    let cpu = profiles.iter().find(|p| p["profile"] == "cpu").unwrap();
    let first = &cpu["movers"][0];
    assert!(
        first["name"].as_str().unwrap().contains("grown_work"),
        "{cpu:#}"
    );
    let (before, after) = (
        first["total_a"].as_f64().unwrap(),
        first["total_b"].as_f64().unwrap(),
    );
    // A third of the samples before, 5/9 after (less what start-up and exit take).
    assert!(after > before + 0.1, "{cpu:#}");
    // The differential flamegraph, written under --out.
    let svg = cpu["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .find(|f| f.ends_with("-diff-cpu.svg"))
        .unwrap_or_else(|| panic!("no differential flamegraph: {cpu:#}"));
    assert!(Path::new(svg).starts_with(&out), "{svg}");
    let drawn = fs::read_to_string(svg).unwrap();
    assert!(drawn.contains("grown_work") && drawn.contains("steady_a"));
    // The text says the same, and names the file.
    let text = succeeded(
        benchtop()
            .arg("history")
            .arg(&root)
            .args(["--order-by", "point", "--figure", "cpu_time_s", "--out"])
            .arg(&out),
    );
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("what moved from point"), "{text}");
    assert!(text.contains("grown_work") && text.contains(svg), "{text}");
}

#[test]
fn open_on_a_directory_of_sessions_shows_its_history_and_opens_a_change_point() {
    use crate::terminal::{Tmux, shell_quote};
    let root = tempfile::tempdir().unwrap();
    let mut spec = SyntheticHistory::new(30, 0.005, 3);
    spec.steps = vec![(15, 0.4)];
    spec.moved_function = Some("ring::grown".into());
    spec.write(root.path()).unwrap();
    let benchtop = shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop")));
    let tmux = Tmux::start(&format!(
        "{benchtop} open {}; echo EXIT=$?; sleep 60",
        shell_quote(root.path())
    ));
    tmux.wait_for_all(&[
        "benchtop history",
        "▶laps/s",
        "change point 1 of 1",
        "point 15",
    ]);
    // Enter: the points before against the points after, as `open A B` shows them.
    tmux.keys("Enter");
    tmux.wait_for_all(&["diff: B against A", "laps/s", "improved"]);
    tmux.keys("Escape");
    tmux.wait_for("change point 1 of 1");
    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
}
