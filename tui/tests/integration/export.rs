//! `benchtop export DIR`: the files other tools read, from a session written with known
//! content.

use crate::compare::session;
use crate::support::benchtop;

#[test]
fn export_writes_hgrm_speedscope_and_the_summary_into_the_session() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    session(&dir, "tell", 1e6, "AskActor::poll", 10);
    let output = benchtop().arg("export").arg(&dir).output().unwrap();
    let listed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{listed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for file in [
        "latency.hgrm",
        "cpu.speedscope.json",
        "summary.md",
        "summary.csv",
    ] {
        assert!(listed.contains(file), "{file} not listed:\n{listed}");
    }
    assert!(
        !dir.join("offcpu.speedscope.json").exists(),
        "no off-CPU stacks to export"
    );

    // 20 intervals of 100 laps: the distribution ends at 100 % of 2000 values.
    let hgrm = std::fs::read_to_string(dir.join("latency.hgrm")).unwrap();
    let last = hgrm
        .lines()
        .rfind(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap();
    let cols: Vec<&str> = last.split_whitespace().collect();
    assert_eq!((cols[1], cols[2]), ("1.000000000000", "2000"), "{hgrm}");
    assert!(hgrm.contains("Total count    =         2000"), "{hgrm}");

    let speedscope: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("cpu.speedscope.json")).unwrap()).unwrap();
    let weights = speedscope["profiles"][0]["weights"].as_array().unwrap();
    let total: u64 = weights.iter().map(|w| w.as_u64().unwrap()).sum();
    assert_eq!(total, 100);
    assert_eq!(speedscope["profiles"][0]["type"], "sampled");

    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert!(csv.starts_with("section,figure,value,unit\n"), "{csv}");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("latency,lap p99,") && l.ends_with(",ns")),
        "{csv}"
    );
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("| latency | lap p99 |"), "{md}");
}

#[test]
fn one_format_goes_where_it_is_told() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, out) = (tmp.path().join("s"), tmp.path().join("out"));
    session(&dir, "tell", 1e6, "AskActor::poll", 10);
    let output = benchtop()
        .arg("export")
        .arg(&dir)
        .args(["--format", "hgrm", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success());
    let files: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(files, ["latency.hgrm"]);
    let unknown = benchtop()
        .arg("export")
        .arg(&dir)
        .args(["--format", "pdf"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        !unknown.status.success() && stderr.contains("speedscope"),
        "{stderr}"
    );
}
