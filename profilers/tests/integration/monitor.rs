use std::time::Duration;

use benchtop_profilers::{ProfilerError, TreeMonitor};

use crate::fixture::Fixture;

#[test]
fn monitoring_this_process_reports_memory_and_threads() {
    let mut m = TreeMonitor::new(std::process::id());
    let r = m.sample().expect("sample this process").resources;
    assert!(r.rss_bytes > 0, "{r:?}");
    // The tree (this process and the children other tests start) at its largest, and
    // the largest one process reached.
    assert!(r.tree_peak_rss_bytes >= Some(r.rss_bytes), "{r:?}");
    assert!(r.peak_rss_bytes > 0, "{r:?}");
    assert!(r.threads >= 1, "{r:?}");
    assert!(r.cpu_time_s >= 0.0 && r.cpu_percent >= 0.0, "{r:?}");
}

#[test]
fn a_burning_child_shows_cpu_use_and_then_is_gone() {
    let mut child = Fixture::spawn("burn", 700, 1);
    let mut m = TreeMonitor::new(child.pid());
    child.go();
    std::thread::sleep(Duration::from_millis(400));
    let r = m.sample().expect("sample the child").resources;
    // One burning thread: up to 100 % of a core, however little of it a loaded machine
    // gives (18.7 % at load 13), never more than the machine has.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    assert!(
        r.cpu_time_s > 0.0 && r.cpu_percent > 0.0 && r.cpu_percent <= 100.0 * cores + 1.0,
        "{r:?}"
    );
    assert!(r.threads >= 2, "main + burner thread: {r:?}");
    child.wait_cpu_time();
    let err = m.sample().unwrap_err();
    assert!(
        matches!(err, ProfilerError::ProcessGone { pid } if pid == child.pid()),
        "{err:?}"
    );
}

#[test]
fn an_unreaped_zombie_counts_as_gone() {
    let mut zombie = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let pid = zombie.id();
    // Not reaped yet: a zombie once it has exited.
    std::thread::sleep(Duration::from_millis(200));
    let err = TreeMonitor::new(pid).sample().unwrap_err();
    assert!(matches!(err, ProfilerError::ProcessGone { .. }), "{err:?}");
    zombie.wait().expect("reap");
}
