//! `benchtop history DIR…` end to end, on histories of synthetic sessions the tests write
//! (the change-point statistics are unit-tested in benchtop-sessions; here the command:
//! text, JSON, Markdown, exit codes, and hostile histories).

use std::fs;
use std::path::Path;

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
