//! The defs workload recorded end to end: its phases land in session.json and in
//! `benchtop show`.

use crate::support::{benchtop, figure, record_run};

#[test]
fn a_defs_session_keeps_its_phases_and_show_lists_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("defs");
    let (_, session) = record_run(
        &dir,
        &[
            "defs",
            "--scale",
            "0.002",
            "--formats",
            "binary,text",
            "--profile",
            "none",
        ],
    );
    let names: Vec<&str> = session
        .meta
        .phases
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "generate",
            "parse",
            "checkpoint-binary",
            "reload-binary",
            "compare-binary",
            "checkpoint-text",
            "reload-text",
            "compare-text"
        ]
    );
    let parse = &session.meta.phases[1];
    assert!(parse.duration_s > 0.0 && parse.t_s >= 0.0, "{parse:?}");
    assert!(
        parse.figures.iter().any(|f| f.name == "mb_per_s"),
        "{parse:?}"
    );
    assert_eq!(figure(&session, "nodes"), 643.0);

    let show = benchtop().arg("show").arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success(), "{text}");
    assert!(text.contains("\nphases\n"), "{text}");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("checkpoint-binary"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(" s ") && line.contains("MB/s"), "{line}");
}
