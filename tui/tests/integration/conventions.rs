//! The command line's conventions: perf's short flags, help that separates the workload's
//! parameters from the recording options, a suggestion for a mistyped workload.

use benchtop_sessions::store::Session;

use crate::support::benchtop;

#[test]
fn a_mistyped_workload_gets_the_closest_one_and_the_list() {
    let out = benchtop().args(["run", "rng"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown workload 'rng'"), "{stderr}");
    assert!(
        stderr.contains("a similar workload exists: 'ring'"),
        "{stderr}"
    );
    assert!(stderr.contains("workloads: ring, storm"), "{stderr}");
    // Nothing close: the list alone.
    let out = benchtop().args(["run", "frobnicate"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("similar"), "{stderr}");
    assert!(stderr.contains("udp-echo"), "{stderr}");
}

#[test]
fn a_workload_s_help_puts_the_recording_options_under_a_heading_of_their_own() {
    let out = benchtop().args(["run", "ring", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let (workload, recording) = help.split_once("Recording options:").unwrap_or_default();
    assert!(
        workload.contains("--num-nodes") && !workload.contains("--frequency"),
        "{help}"
    );
    assert!(
        recording.contains("-F, --frequency") && recording.contains("-o, --record"),
        "{help}"
    );
}

#[test]
fn perf_s_short_flags_record_where_and_how_often_they_say() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let out = benchtop()
        .args(["run", "ring", "--num-rounds", "50", "-q", "-F", "499", "-o"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.sampling.frequency_hz, 499);
    // attach takes the pid as perf does, with -p, and refuses a pid given twice.
    let out = benchtop()
        .args(["attach", "-p", "2147483646"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && !stderr.contains("required"),
        "{stderr}"
    );
    let out = benchtop()
        .args(["attach", "1", "-p", "1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
