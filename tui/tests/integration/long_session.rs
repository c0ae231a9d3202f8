//! A session of an hour at `--interval 100ms`: 36,000 latency intervals (a latency.hlog of
//! about 20 MB) and as many timeseries rows. `show`, `compare` and `open` hold each
//! interval's histogram sparse, so their peak RSS (of the benchtop process alone) stays
//! far below what 36,000 dense histograms take (about 3.4 GB). benches/session_load.py
//! measures the same loads' time and memory, before and after.

use std::path::{Path, PathBuf};
use std::time::Duration;

use benchtop_sessions::synthetic::SyntheticSession;

use crate::hostile_sessions::{compare, run, show};
use crate::hostile_terminal::{read_pid, shell_after};
use crate::terminal::{Tmux, shell_quote};

/// The most each load may take.
const RSS_LIMIT_BYTES: u64 = 500 << 20;

fn hour_session(dir: &Path, seed: u64, body_ns: u64) -> PathBuf {
    let mut session = SyntheticSession::default();
    session.seed = seed;
    session.body_ns = body_ns;
    assert_eq!(session.intervals, 36_000);
    session.write(dir).unwrap()
}

/// Peak RSS of a running process, bytes (VmHWM).
fn peak_rss(pid: libc::pid_t) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in\n{status}"));
    kib * 1024
}

#[test]
fn show_compare_and_open_of_an_hour_of_100ms_intervals_stay_under_500_mib() {
    let tmp = tempfile::tempdir().unwrap();
    let a = hour_session(&tmp.path().join("a"), 1, 50_000);
    let b = hour_session(&tmp.path().join("b"), 2, 60_000);
    let hlog = std::fs::metadata(a.join("latency.hlog")).unwrap().len();
    assert!(hlog > 10 << 20, "latency.hlog of {hlog} bytes");

    let shown = run(show(&a), Duration::from_secs(600));
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    assert!(shown.stdout.contains("lap"), "{}", shown.stdout);
    assert!(
        shown.max_rss < RSS_LIMIT_BYTES,
        "show: {} MiB",
        shown.max_rss >> 20
    );

    let out = tmp.path().join("out");
    let compared = run(compare(&a, &b, &out, &[]), Duration::from_secs(600));
    assert_eq!(compared.code, Some(0), "{}", compared.stderr);
    // B's latency is 20 % higher throughout: one run a side gets no verdict, and the
    // noise within an hour of intervals says few runs would settle it.
    assert!(
        compared
            .stdout
            .lines()
            .any(|l| l.contains("lap p50") && l.contains("undecided — needs ≥")),
        "{}",
        compared.stdout
    );
    assert!(
        compared.max_rss < RSS_LIMIT_BYTES,
        "compare: {} MiB",
        compared.max_rss >> 20
    );

    // One session's slow intervals against the rest, and two halves of it, and of A
    // against B: each part a session of its own, holding only its intervals.
    let slow_out = tmp.path().join("slow");
    let mut slow = crate::support::benchtop();
    // The synthetic intervals' p99 lie between 99.3 µs and 100 µs: this splits them
    // about one in six against the rest.
    slow.arg("compare")
        .arg(&a)
        .args(["--slow", "--above", "99950ns"])
        .arg("--out")
        .arg(&slow_out);
    let halves_out = tmp.path().join("halves");
    for (name, command) in [
        ("compare A --slow", slow),
        (
            "compare A A by halves",
            compare(
                &a,
                &a,
                &halves_out,
                &["--range-a", "..30m", "--range-b", "30m.."],
            ),
        ),
    ] {
        let compared = run(command, Duration::from_secs(600));
        assert!(
            matches!(compared.code, Some(0 | 1)),
            "{name}: {}",
            compared.stderr
        );
        assert!(compared.stdout.contains("lap p99"), "{}", compared.stdout);
        assert!(
            compared.max_rss < RSS_LIMIT_BYTES,
            "{name}: {} MiB",
            compared.max_rss >> 20
        );
    }
    let out = tmp.path().join("halves-a-b");
    let compared = run(
        compare(&a, &b, &out, &["--range-a", "..30m", "--range-b", "30m.."]),
        Duration::from_secs(600),
    );
    assert!(
        compared.max_rss < RSS_LIMIT_BYTES,
        "compare A B by halves: {} MiB",
        compared.max_rss >> 20
    );

    for (name, args) in [
        ("open A", format!("open {}", shell_quote(&a))),
        (
            "open A B",
            format!("open {} {}", shell_quote(&a), shell_quote(&b)),
        ),
    ] {
        let pid_file = tmp.path().join(format!("{}.pid", name.replace(' ', "-")));
        let tmux = Tmux::start_sized(&shell_after(&pid_file, &args), 160, 48);
        let pid = read_pid(&pid_file);
        // Drawn: every interval is loaded and merged.
        tmux.wait_for_long("q quit", Duration::from_secs(600));
        let peak = peak_rss(pid);
        tmux.keys("q");
        tmux.wait_for("EXIT=0");
        assert!(peak < RSS_LIMIT_BYTES, "{name}: {} MiB", peak >> 20);
    }
}
