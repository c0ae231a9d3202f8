//! The whole tree's figures counted by the kernel, not polled: a tree of short-lived
//! processes and threads, measured against `perf stat` in the same run, the polls that
//! stand in where the kernel refuses counting, and the program's own peak memory against
//! `/usr/bin/time -v`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use benchtop_sessions::meta::PeakFrom;
use benchtop_sessions::store::Session;
use benchtop_sessions::{Status, ThreadSummary};

use crate::support::{benchtop, deny_perf_events};

/// Spins on its own CPU clock for `argv[1]` milliseconds; with `threads N MS`, starts N
/// threads one after the other that each spin MS milliseconds and end.
const SPIN_C: &str = r#"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void spin(clockid_t clock, long ms) {
    struct timespec t0, t;
    clock_gettime(clock, &t0);
    do {
        clock_gettime(clock, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L < ms);
}

static void *thread_main(void *arg) {
    spin(CLOCK_THREAD_CPUTIME_ID, (long)arg);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "threads") == 0) {
        long n = atol(argv[2]), ms = atol(argv[3]);
        for (long i = 0; i < n; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, thread_main, (void *)ms) != 0) return 1;
            pthread_join(t, NULL);
        }
        return 0;
    }
    if (argc != 2) return 2;
    spin(CLOCK_PROCESS_CPUTIME_ID, atol(argv[1]));
    return 0;
}
"#;

/// 200 children of 5 to 20 ms of CPU each, in 20 waves of 10, then 20 threads of 2 ms
/// each in one more process.
const FIXTURE_SH: &str = r#"
spin="$1"
w=0
while [ $w -lt 20 ]; do
  k=0
  while [ $k -lt 10 ]; do
    "$spin" $(( 5 + (w * 7 + k * 3) % 16 )) &
    k=$((k + 1))
  done
  wait
  w=$((w + 1))
done
"$spin" threads 20 2
"#;

/// Builds the spinner into `dir`.
fn build_spin(dir: &Path) -> PathBuf {
    build_c(dir, "spin", SPIN_C)
}

/// Builds the C program `source` into `dir/name`.
fn build_c(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let status = Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("this test builds a C fixture with `cc`: install gcc");
    assert!(status.success());
    out
}

fn run(dir: &Path, command: &[&str], deny: bool) -> Output {
    let mut benchtop = benchtop();
    benchtop
        .args(["run", "--quiet", "--interval", "100ms", "--record"])
        .arg(dir)
        .arg("--")
        .args(command);
    if deny {
        deny_perf_events(&mut benchtop);
    }
    let output = benchtop.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn show(dir: &Path) -> String {
    let output = benchtop().arg("show").arg(dir).output().unwrap();
    assert!(output.status.success());
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `perf stat -x,`'s task-clock, seconds.
fn perf_task_clock_s(path: &Path) -> f64 {
    let text = std::fs::read_to_string(path).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("task-clock"))
        .unwrap_or_else(|| panic!("no task-clock in perf's output:\n{text}"));
    let ms: f64 = line.split(',').next().unwrap().parse().unwrap();
    ms / 1e3
}

#[test]
fn a_tree_of_short_lived_processes_and_threads_is_counted_as_perf_stat_counts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let spin = build_spin(tmp.path());
    let script = tmp.path().join("fixture.sh");
    std::fs::write(&script, FIXTURE_SH).unwrap();
    let perf_out = tmp.path().join("perf.csv");
    let dir = tmp.path().join("tree");
    run(
        &dir,
        &[
            "perf",
            "stat",
            "-e",
            "task-clock",
            "-x,",
            "-o",
            perf_out.to_str().unwrap(),
            "--",
            "sh",
            script.to_str().unwrap(),
            spin.to_str().unwrap(),
        ],
        false,
    );
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    let perf_s = perf_task_clock_s(&perf_out);
    // 200 children of 12.5 ms on average and 20 threads of 2 ms: about 2.5 s.
    assert!(perf_s > 2.0, "perf counted {perf_s} s");

    let info = session
        .meta
        .resources
        .as_ref()
        .expect("session.json's resources");
    assert!(info.exact, "{info:?}");
    let counted = info.counted.expect("the kernel's counts");
    // benchtop counts perf itself as well as perf's command, and nothing is missed.
    assert!(
        counted.cpu_time_s >= perf_s && counted.cpu_time_s <= perf_s * 1.02 + 0.05,
        "benchtop counted {} s of CPU, perf {perf_s} s",
        counted.cpu_time_s
    );
    // Each child at least started a process and faulted its pages in.
    assert!(counted.context_switches.unwrap() >= 200, "{counted:?}");
    assert!(counted.minor_faults.unwrap() >= 200 * 10, "{counted:?}");

    // The rows' intervals add up to the total, which the last row holds.
    let rows = &session.rows;
    let counted_rows: Vec<_> = rows
        .iter()
        .filter_map(|r| r.resources.and_then(|r| r.counted_interval))
        .collect();
    assert!(counted_rows.len() >= 5, "{} rows", counted_rows.len());
    let sum: f64 = counted_rows.iter().map(|c| c.cpu_time_s).sum();
    assert!(
        (sum - counted.cpu_time_s).abs() < 1e-6,
        "rows sum to {sum} s, total {} s",
        counted.cpu_time_s
    );
    let switches: u64 = counted_rows.iter().filter_map(|c| c.context_switches).sum();
    assert_eq!(Some(switches), counted.context_switches);
    let last = rows.iter().rev().find_map(|r| r.resources).unwrap();
    assert_eq!(last.counted_total, Some(counted));
    assert_eq!(last.cpu_time_s, counted.cpu_time_s);

    // One CPU figure: the command's, the resources' and show's agree.
    let figure = session
        .meta
        .summary
        .iter()
        .find(|f| f.name == "cpu_time_s")
        .unwrap();
    assert_eq!(figure.value, counted.cpu_time_s);
    let text = show(&dir);
    assert!(text.contains("counted by the kernel, whole tree"), "{text}");
    let shown = format!("CPU time     {:.2} s", counted.cpu_time_s);
    let summary = format!("cpu_time_s: {}", human(counted.cpu_time_s));
    assert!(text.contains(&shown), "{shown} in\n{text}");
    assert!(text.contains(&summary), "{summary} in\n{text}");
    assert!(!text.contains("(wait4:"), "{text}");

    every_process_and_thread_is_a_line(&session, &text);
}

/// threads.csv holds every process and thread of the fixture, each with its parent,
/// start, end and CPU time, though most lived between two polls.
fn every_process_and_thread_is_a_line(session: &Session, show: &str) {
    let threads = &session.threads;
    assert!(
        threads.iter().all(|t| t.aggregated.is_none()),
        "no line aggregates: {threads:?}"
    );
    let spin: Vec<_> = threads.iter().filter(|t| t.process == "spin").collect();
    let (mains, others): (Vec<&ThreadSummary>, Vec<&ThreadSummary>) =
        spin.iter().copied().partition(|t| t.tid == t.pid);
    // 200 children and the process of the 20 threads. A miss prints the other lines too
    // (a child with its fork alone would be named after its parent) and the warnings.
    let rest = || {
        let rest: Vec<_> = threads.iter().filter(|t| t.process != "spin").collect();
        format!("not spin: {rest:#?}\nwarnings: {:?}", session.meta.warnings)
    };
    assert_eq!(mains.len(), 201, "{spin:#?}\n{}", rest());
    assert_eq!(others.len(), 20, "{spin:#?}\n{}", rest());
    let threads_pid = others[0].pid;
    assert!(others.iter().all(|t| t.pid == threads_pid), "{others:#?}");
    for t in &spin {
        let (Some(start), Some(end)) = (t.start_s, t.end_s) else {
            panic!("no start or end: {t:?}");
        };
        assert!(start <= end, "{t:?}");
        assert!(t.counted_cpu_s.is_some(), "not counted: {t:?}");
        assert_eq!(t.thread, "spin", "{t:?}");
    }
    // The children's CPU time, held against what they spun: in all, about their spins
    // or more (each spun on its CPU clock, which the kernel's task-clock follows) and
    // not far above. Thread by thread the kernel's figures can be off by a few
    // milliseconds (inherited contexts swapped at a switch), so the sum is judged.
    let spun: f64 = (0..20)
        .flat_map(|w| (0..10).map(move |k| f64::from(5 + (w * 7 + k * 3) % 16) / 1e3))
        .sum();
    let children: Vec<f64> = mains
        .iter()
        .filter(|t| t.pid != threads_pid)
        .map(|t| t.cpu_s())
        .collect();
    assert_eq!(children.len(), 200);
    let counted: f64 = children.iter().sum();
    assert!(
        counted >= spun * 0.97 && counted <= spun * 1.1 + 0.2,
        "counted {counted} s for {spun} s of spins: {children:?}"
    );
    assert!(children.iter().all(|&c| c > 0.0), "{children:?}");
    let threads_s: f64 = others.iter().map(|t| t.cpu_s()).sum();
    assert!(threads_s >= 20.0 * 0.002 * 0.97, "{others:#?}");
    // Their parent is the fixture's shell, whose parent is perf, the command.
    let sh = mains[0].ppid.expect("a parent");
    assert!(mains.iter().all(|t| t.ppid == Some(sh)), "{mains:#?}");
    let sh_line = threads
        .iter()
        .find(|t| t.tid == sh)
        .unwrap_or_else(|| panic!("no line of the shell {sh}: {threads:#?}"));
    assert_eq!(sh_line.thread, "sh", "{sh_line:?}");
    let perf = sh_line.ppid.expect("the shell's parent");
    let perf_line = threads.iter().find(|t| t.tid == perf).unwrap();
    assert!(perf_line.thread.starts_with("perf"), "{perf_line:?}");
    // perf, its shell and the 201 spinners at least; every thread of them.
    let processes: u64 = threads.iter().map(|t| t.processes()).sum();
    let all: u64 = threads.iter().map(|t| t.threads()).sum();
    assert!(
        processes >= 203 && all >= processes + 20,
        "{processes} {all}"
    );
    assert!(
        show.contains(&format!("{all} threads of {processes} processes seen")),
        "{show}"
    );
    assert!(
        !session
            .meta
            .warnings
            .iter()
            .any(|w| w.contains("threads.csv")),
        "{:?}",
        session.meta.warnings
    );
}

/// How `show` prints a figure in seconds.
fn human(s: f64) -> String {
    benchtop_sessions::units::human_figure(s, "s")
}

#[test]
fn where_perf_events_are_refused_the_figures_are_polled_and_said_to_be() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("polled");
    run(
        &dir,
        &[
            "sh",
            "-c",
            "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
        ],
        true,
    );
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    let info = session.meta.resources.as_ref().unwrap();
    assert!(!info.exact && info.counted.is_none(), "{info:?}");
    let reason = info.reason.as_deref().unwrap();
    assert!(
        reason.contains("polled") && reason.contains("perf"),
        "{reason}"
    );
    assert!(
        session
            .rows
            .iter()
            .all(|r| r.resources.is_none_or(|r| r.counted_total.is_none()))
    );
    // threads.csv holds what the polls saw, and says so.
    assert!(
        session
            .meta
            .warnings
            .iter()
            .any(|w| w.contains("threads.csv lists the threads the polls saw")),
        "{:?}",
        session.meta.warnings
    );
    assert!(!session.threads.is_empty());
    let text = show(&dir);
    assert!(text.contains("resources (polled"), "{text}");
    assert!(
        text.contains("cpu_time_s: ") && text.contains("(wait4: the command"),
        "{text}"
    );
}

/// Touches `argv[1]` MiB (writes every page) and holds it `argv[2]` milliseconds.
const HOLD_C: &str = r#"
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    size_t bytes = (size_t)atol(argv[1]) << 20;
    long ms = atol(argv[2]);
    volatile char *p = malloc(bytes);
    if (!p) return 1;
    memset((char *)p, 1, bytes);
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&t, NULL);
    return p[bytes - 1] == 1 ? 0 : 3;
}
"#;

/// `/usr/bin/time -v`'s maximum resident set size of `command`, bytes.
fn time_max_rss(command: &[&str]) -> u64 {
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .args(command)
        .output()
        .expect("this test compares with `/usr/bin/time -v`: install the `time` package");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let kb: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
        .unwrap_or_else(|| panic!("no maximum resident set size in time's output:\n{text}"))
        .trim()
        .parse()
        .unwrap();
    kb * 1024
}

/// Records `hold MIB MS` at one row every `interval`; the session's peak, how it was had,
/// and wait4's figure of the worker (the exec gate's image in it).
fn recorded_peak(
    dir: &Path,
    hold: &str,
    mib: u32,
    ms: u32,
    interval: &str,
) -> (u64, PeakFrom, u64) {
    let out = benchtop()
        .args(["run", "--quiet", "--interval", interval, "--record"])
        .arg(dir)
        .args(["--", hold, &mib.to_string(), &ms.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = Session::load(dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    let info = session
        .meta
        .resources
        .clone()
        .expect("resources in session.json");
    let peak = info.peak_rss_bytes.expect("the program's peak RSS");
    assert_eq!(
        session.peak_rss_bytes(),
        Some(peak),
        "show's figure is the program's"
    );
    let wait4 = session.meta.worker.peak_rss_bytes.expect("wait4's peak");
    (
        peak,
        info.peak_rss_from.expect("how the peak was had"),
        wait4,
    )
}

#[test]
fn the_peak_rss_of_a_command_is_its_own_as_time_v_measures_it() {
    let tmp = tempfile::tempdir().unwrap();
    let hold = build_c(tmp.path(), "hold", HOLD_C);
    let hold = hold.to_str().unwrap();

    // Smaller than benchtop: the program's own VmHWM as the monitor read it after the
    // exec, not the images before it (the conductor's copy at fork, the exec gate),
    // which wait4's figure holds.
    let dir = tmp.path().join("hold-1");
    let (peak, from, before_exec) = recorded_peak(&dir, hold, 1, 1500, "100ms");
    // time -v's figure also holds time's own image before its exec, and for so small a
    // program which pages of libc are resident moves it by a tenth: a band over runs.
    let times: Vec<u64> = (0..3).map(|_| time_max_rss(&[hold, "1", "0"])).collect();
    let (low, high) = (times.iter().min().unwrap(), times.iter().max().unwrap());
    eprintln!("1 MiB: benchtop {peak} bytes ({from:?}), time -v {times:?}, wait4 {before_exec}");
    assert_eq!(from, PeakFrom::Polled);
    assert!(peak >= 1 << 20, "{peak} bytes");
    assert!(
        peak < before_exec,
        "benchtop {peak} bytes is benchtop's own: wait4 says {before_exec} bytes"
    );
    assert!(
        peak as f64 >= *low as f64 * 0.8 && peak as f64 <= *high as f64 * 1.25,
        "benchtop {peak} bytes, time -v {times:?} bytes"
    );
    let shown = show(&dir);
    assert!(shown.contains("(largest process, polled)"), "{shown}");

    // Larger than benchtop: the kernel's account at exit, within 5 % of time -v's. Held
    // past a few polls, and gone before the first (one-second rows): a peak no poll
    // sees is counted all the same.
    assert!(
        before_exec < 56 << 20,
        "benchtop's images before the exec ({before_exec} bytes) leave no room to test"
    );
    for (mib, ms, interval) in [(64, 1000, "100ms"), (96, 300, "100ms"), (64, 0, "1s")] {
        let dir = tmp.path().join(format!("hold-{mib}-{ms}"));
        let (peak, from, _) = recorded_peak(&dir, hold, mib, ms, interval);
        let time = time_max_rss(&[hold, &mib.to_string(), "0"]);
        eprintln!("{mib} MiB for {ms} ms: benchtop {peak} bytes ({from:?}), time -v {time}");
        assert!(time > u64::from(mib) << 20, "time -v says {time} bytes");
        assert_eq!(from, PeakFrom::Exit, "{mib} MiB for {ms} ms");
        let off = peak.abs_diff(time) as f64 / time as f64;
        assert!(
            off <= 0.05,
            "{mib} MiB: benchtop {peak} bytes, time -v {time} bytes"
        );
        if ms == 0 {
            let shown = show(&dir);
            assert!(
                shown.contains("(largest process, counted at exit)"),
                "{shown}"
            );
        }
    }
}

#[test]
fn the_peak_rss_of_an_attached_process_is_its_vmhwm() {
    let tmp = tempfile::tempdir().unwrap();
    let hold = build_c(tmp.path(), "hold", HOLD_C);
    let mut held = Command::new(&hold).args(["64", "30000"]).spawn().unwrap();
    let pid = held.id();
    let hwm = || -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("VmHWM")
            * 1024
    };
    // Touched: its peak is there before benchtop looks.
    for _ in 0..2000 {
        if hwm() >= 64 << 20 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let dir = tmp.path().join("attach");
    let out = benchtop()
        .args(["attach", &pid.to_string(), "--duration", "1s", "--quiet"])
        .args(["--interval", "200ms", "--record"])
        .arg(&dir)
        .output()
        .unwrap();
    let vm_hwm = hwm();
    let _ = held.kill();
    let _ = held.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = Session::load(&dir).unwrap();
    let info = session
        .meta
        .resources
        .clone()
        .expect("resources in session.json");
    let peak = info.peak_rss_bytes.expect("a peak RSS");
    eprintln!("attached to 64 MiB: benchtop {peak} bytes, VmHWM {vm_hwm}");
    assert_eq!(info.peak_rss_from, Some(PeakFrom::Polled));
    let off = peak.abs_diff(vm_hwm) as f64 / vm_hwm as f64;
    assert!(off <= 0.05, "benchtop {peak} bytes, VmHWM {vm_hwm} bytes");
}

#[test]
fn a_tree_that_ends_before_its_first_poll_has_its_processes_counted_and_no_peak_made_up() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("short");
    // A shell and three sleeps at once, all over before the first poll at 30 s.
    let output = benchtop()
        .args(["run", "--quiet", "--profile", "none", "--interval", "30s"])
        .arg("--record")
        .arg(&dir)
        .args(["--", "sh", "-c", "sleep 0.4 & sleep 0.4 & sleep 0.4 & wait"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let session = Session::load(&dir).unwrap();
    let exact = session.meta.resources.as_ref().is_some_and(|r| r.exact);
    assert!(exact, "{:?}", session.meta.resources);
    let text = show(&dir);
    // The threads' lives say four at once, where no poll saw any.
    assert!(text.contains("max procs    4\n"), "{text}");
    assert!(text.contains("max threads  4\n"), "{text}");
    // No process was read while it ran: no peak, rather than one of 0 B.
    assert!(
        text.contains("peak RSS     not seen (the tree ended before a poll read it)"),
        "{text}"
    );
    assert_eq!(session.peak_rss_bytes(), None);
}
