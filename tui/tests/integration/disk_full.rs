//! A disk that fills while a run is recorded: the worker is stopped (not killed), what is
//! on disk stays valid, and the session ends `failed` naming the file and the error.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use benchtop_sessions::Status;
use benchtop_sessions::meta::FailureKind;
use benchtop_sessions::store::Session;

use crate::hostile_sessions::Tmpfs;
use crate::support::benchtop;

#[test]
fn a_disk_that_fills_mid_run_stops_the_worker_and_fails_the_session_saying_where() {
    let disk = Tmpfs::new("2m");
    let dir = disk.mount.join("s");
    let run = benchtop()
        .args([
            "run",
            "ring",
            "--num-nodes",
            "100",
            "--num-rounds",
            "4000000000",
        ])
        .args([
            "--quiet",
            "--profile",
            "none",
            "--interval",
            "100ms",
            "--record",
        ])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first rows, then fill the disk to its last block.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(dir.join("timeseries.jsonl")).map_or(0, |m| m.len()) == 0 {
        assert!(Instant::now() < deadline, "no row within a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut filler = std::fs::File::create(disk.mount.join("filler")).unwrap();
    let block = vec![0u8; 64 << 10];
    while filler.write_all(&block).is_ok() {}
    let _ = filler.write_all(&[0u8; 512]);
    drop(filler);
    let output = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("could not be written") && stderr.contains("No space left on device"),
        "{stderr}"
    );

    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Failed, "{:?}", session.meta);
    let failure = session.meta.failure.clone().unwrap();
    assert_eq!(failure.kind, FailureKind::NoSpace, "{failure:?}");
    assert!(
        failure
            .path
            .as_deref()
            .is_some_and(|p| p.starts_with(dir.to_str().unwrap())),
        "{failure:?}"
    );
    assert!(!session.rows.is_empty(), "the rows written before stay");
    // The worker was stopped, not killed: it exited on its own, with its summary.
    assert_eq!(
        session.meta.worker.exit.as_deref(),
        Some("exit code 0"),
        "{:?}",
        session.meta.worker
    );
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.contains(".tmp") || n.ends_with(".reserve")),
        "{names:?}"
    );
}

#[test]
fn a_data_file_that_cannot_be_written_at_the_end_fails_the_session_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let run = benchtop()
        .args(["run", "ring", "--num-nodes", "100", "--duration", "2s"])
        .args(["--quiet", "--profile", "cpu", "--record"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the session exists, a directory where its cpu.folded will go: the recorder
    // cannot put the file there at the end.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("session.json").exists() {
        assert!(Instant::now() < deadline, "no session after 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::create_dir_all(dir.join("cpu.folded").join("in-the-way")).unwrap();
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // Not complete: failed, naming the file.
    let text = std::fs::read_to_string(dir.join("session.json")).unwrap();
    let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(meta["status"], "failed", "{text}");
    assert_eq!(meta["failure"]["kind"], "write_error", "{text}");
    let path = meta["failure"]["path"].as_str().unwrap_or_default();
    assert!(path.ends_with("cpu.folded"), "{text}");
    assert!(stderr.contains("cpu.folded"), "{stderr}");
}
