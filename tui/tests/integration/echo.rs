//! `udp-echo` recorded end to end: a sweep is one session with a line per point; the
//! DPDK back end headless and live in a real terminal (tmux).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use benchtop_sessions::store::{Session, load_meta};
use benchtop_sessions::{Kind, StackTree, Status};

use crate::reap::marked_by_recording;
use crate::support::{
    as_nobody, figure, output_within, record_run, root_to, run_command, wait_until,
};
use crate::terminal::{Tmux, shell_quote};

#[test]
fn a_udp_echo_sweep_session_logs_one_phase_line_per_point_and_the_table() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sweep");
    let (output, session) = record_run(
        &dir,
        &[
            "udp-echo",
            "--sweep",
            "buffer-size=64,1024,9000",
            "--num-iters",
            "300",
            "--interval",
            "200ms",
        ],
    );
    assert_eq!(session.meta.status, Status::Complete);
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    let phases: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("phase "))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        phases,
        [
            "phase buffer-size=64",
            "phase buffer-size=1024",
            "phase buffer-size=9000"
        ],
        "{log}"
    );
    // The table at the end, a row per point, in the log and on standard output.
    let stdout = String::from_utf8_lossy(&output.stdout);
    for text in [&log[..], &stdout[..]] {
        let rows = text
            .lines()
            .filter(|l| l.starts_with("buffer-size="))
            .count();
        assert!(rows >= 3, "{text}");
    }
    assert_eq!(figure(&session, "buffer-size=9000:timeouts"), 0.0);
    assert!(figure(&session, "buffer-size=1024:messages_per_second") > 0.0);
    // The server ran as a process of its own and said what it echoed.
    assert!(log.contains("server_messages_echoed: 900"), "{log}");
    // One result per point in session.json, and the curves in phases.svg.
    let points: Vec<&str> = session
        .meta
        .phases
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        points,
        ["buffer-size=64", "buffer-size=1024", "buffer-size=9000"]
    );
    let plot = std::fs::read_to_string(dir.join("phases.svg")).unwrap();
    assert!(
        plot.contains("messages_per_second") && plot.matches("<circle").count() >= 3,
        "{plot}"
    );
}

#[test]
fn an_oversized_buffer_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let output = crate::support::run_command(
        &tmp.path().join("refused"),
        &["udp-echo", "--buffer-size", "2000000"],
    )
    .output()
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--buffer-size 2000000: larger than the 1 MiB"),
        "{stderr}"
    );
}

#[test]
fn a_timed_sweep_shares_the_recordings_duration_among_its_points() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("timed");
    let (_, session) = record_run(
        &dir,
        &[
            "udp-echo",
            "--sweep",
            "num-clients=1,2",
            "--duration",
            "1s",
            "--backend",
            "mmsg",
        ],
    );
    assert_eq!(session.meta.status, Status::Complete);
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    let phases = log.lines().filter(|l| l.starts_with("phase ")).count();
    assert_eq!(phases, 2, "{log}");
    assert!(!log.contains("stopped early"), "{log}");
    for point in ["num-clients=1", "num-clients=2"] {
        let took = figure(&session, &format!("{point}:messages_per_second"));
        assert!(took > 0.0, "{point}");
    }
}

#[test]
fn a_dpdk_echo_records_every_round_trip_between_two_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dpdk");
    let (_, session) = record_run(
        &dir,
        &[
            "udp-echo",
            "--backend",
            "dpdk",
            "--num-iters",
            "10000",
            "--interval",
            "200ms",
        ],
    );
    assert_eq!(session.meta.status, Status::Complete);
    assert_eq!(figure(&session, "messages"), 10_000.0);
    assert_eq!(figure(&session, "payload_errors"), 0.0);
    assert_eq!(figure(&session, "timeouts"), 0.0);
    // Every round trip is in the latency log, interval by interval.
    let timed: u64 = session
        .latency
        .iter()
        .filter(|i| i.tag == "rtt")
        .map(|i| i.histogram.len())
        .sum();
    assert_eq!(timed, 10_000);
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    assert!(log.contains("dpdk back end (memif, --no-huge)"), "{log}");
    assert!(log.contains("server_messages_echoed: 10000"), "{log}");
}

/// The whole run's count of round trips in the latency pane's table (`count  12.3 k
/// 1.2 k`: the run's, then the last interval's), as a number.
fn round_trips(screen: &str) -> Option<f64> {
    let (_, rest) = screen.lines().find_map(|l| l.split_once("count "))?;
    let mut words = rest.split_whitespace();
    let number: f64 = words.next()?.parse().ok()?;
    let scale = match words.next() {
        Some("k") => 1e3,
        Some("M") => 1e6,
        Some("G") => 1e9,
        _ => 1.0,
    };
    Some(number * scale)
}

#[test]
fn round_trips_read_from_the_latency_table() {
    assert_eq!(round_trips("rtt ▏ count   12.3 k    1.2 k"), Some(12_300.0));
    assert_eq!(round_trips("count     5000      800"), Some(5000.0));
    assert_eq!(round_trips("count  1.25 M  40.0 k"), Some(1_250_000.0));
    assert_eq!(round_trips("nothing here"), None);
}

#[test]
fn a_dpdk_echo_runs_live_in_a_terminal_and_quits_leaving_no_dpdk_process() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live");
    let tmux = Tmux::start_sized(
        &format!(
            "{} run udp-echo --backend dpdk --duration 300s --interval 200ms --tui --record \
             {}; echo EXIT=$?; sleep 60",
            shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop"))),
            shell_quote(&dir)
        ),
        160,
        48,
    );
    // A frame is written top to bottom: wait for every part of it.
    let screen = tmux.wait_for_all(&["● running", "rtt, whole run", "count ", "p99.9"]);
    assert!(tmux.alternate_screen(), "{screen}");
    assert!(screen.contains("backend=dpdk"), "{screen}");
    // Both DPDK processes (the clients' worker and its server) run under the session.
    let session = Session::load(&dir).unwrap();
    let id = session.meta.id.clone();
    let processes = marked_by_recording(&dir, &id);
    assert_eq!(processes.len(), 2, "{processes:?}");
    // Round trips keep counting on the live screen.
    let first = round_trips(&screen).unwrap_or(0.0);
    let start = Instant::now();
    let later = loop {
        let screen = tmux.screen();
        if let Some(n) = round_trips(&screen).filter(|&n| n > first) {
            break n;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the round trips stayed at {first}:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(later > first);

    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(screen.contains("(stopped)"), "{screen}");
    assert!(!tmux.alternate_screen(), "the terminal is restored");
    // Neither DPDK process outlives the run.
    wait_until("the DPDK processes to end", Duration::from_secs(10), || {
        marked_by_recording(&dir, &id).is_empty()
    });
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Stopped);
    assert!(
        figure(&session, "messages") >= later,
        "{:?}",
        session.meta.summary
    );
    assert_eq!(figure(&session, "payload_errors"), 0.0);
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    assert!(log.contains("server_messages_echoed: "), "{log}");
}

/// The share of `tree`'s weight in stacks whose frames' names are `wanted`.
fn share_of(tree: &StackTree, wanted: impl Fn(&[&str]) -> bool) -> f64 {
    let mut through = 0;
    tree.for_each_stack(|frames, weight| {
        let names: Vec<&str> = frames.iter().map(|&f| tree.name(f)).collect();
        if wanted(&names) {
            through += weight;
        }
    });
    through as f64 / tree.total_weight().max(1) as f64
}

/// The share of `tree`'s weight in stacks through a frame that `matches`.
fn share_through(tree: &StackTree, matches: impl Fn(&str) -> bool) -> f64 {
    share_of(tree, |names| names.iter().any(|&n| matches(n)))
}

/// The weight of `tree` in each thread (with `--per-thread`, a stack's second frame is its
/// thread's name), by name.
fn weight_by_thread(tree: &StackTree) -> BTreeMap<String, u64> {
    let mut threads = BTreeMap::new();
    tree.for_each_stack(|frames, weight| {
        if let Some(&thread) = frames.get(1) {
            *threads.entry(tree.name(thread).to_owned()).or_default() += weight;
        }
    });
    threads
}

/// The time each thread lived, µs, by name (threads.csv's start and end, or when it was
/// first and last seen).
fn lifetimes(session: &Session) -> BTreeMap<String, f64> {
    let mut lived = BTreeMap::new();
    for t in &session.threads {
        let span = match (t.start_s, t.end_s) {
            (Some(start), Some(end)) => end - start,
            _ => t.last_seen_s - t.first_seen_s,
        };
        *lived.entry(t.thread.clone()).or_default() += span * 1e6;
    }
    lived
}

/// A 3 s udp-echo over `backend`, recorded with stacks per thread: the session, and each
/// thread's blocked time as a share of its life, by name.
fn blocked_by_thread(dir: &Path, backend: &str, more: &[&str]) -> (Session, BTreeMap<String, f64>) {
    let mut args = vec![
        "udp-echo",
        "--backend",
        backend,
        "--duration",
        "3s",
        "--interval",
        "200ms",
        "--per-thread",
    ];
    args.extend(more);
    let (_, session) = record_run(dir, &args);
    assert_eq!(session.meta.status, Status::Complete);
    assert!(
        session.meta.sampling.offcpu_stacks,
        "{:?}",
        session.meta.sampling
    );
    let blocked = weight_by_thread(session.profile(Kind::OffCpu).expect("an off-CPU profile"));
    let lived = lifetimes(&session);
    let shares = lived
        .iter()
        .map(|(name, &us)| {
            let share = blocked.get(name).copied().unwrap_or(0) as f64 / us.max(1.0);
            (name.clone(), share)
        })
        .collect();
    (session, shares)
}

#[test]
fn the_off_cpu_profile_of_a_dpdk_echo_shows_its_pollers_never_block() {
    let tmp = tempfile::tempdir().unwrap();
    // Frame pointers, as asked: the user's choice of unwinding is kept.
    let fp = ["--unwind", "fp"];
    let (session, blocked) = blocked_by_thread(&tmp.path().join("dpdk"), "dpdk", &fp);
    assert_eq!(session.meta.sampling.unwind, "frame-pointers");
    // The pollers ran: most on-CPU samples are theirs.
    let on_cpu = weight_by_thread(session.profile(Kind::Cpu).expect("an on-CPU profile"));
    let samples: u64 = on_cpu.values().sum();
    let pollers = ["bt-echo-server", "bt-echo-client"];
    for poller in pollers {
        let share = on_cpu.get(poller).copied().unwrap_or(0) as f64 / samples.max(1) as f64;
        assert!(
            share > 0.2,
            "{poller}: {share} of the on-CPU samples: {on_cpu:?}"
        );
    }
    // The off-CPU profile sees these processes block: their tickers sleep for most of
    // their lives ...
    let ticker = blocked.get("benchtop-ticker").copied().unwrap_or(0.0);
    assert!(
        ticker > 0.5,
        "blocked shares of each thread's life: {blocked:?}"
    );
    // ... and their pollers not: no more than their set-up's moments (pinning), whatever
    // the machine's load (preempted time is runnable, not blocked).
    for poller in pollers {
        let share = blocked.get(poller).copied().unwrap_or(1.0);
        assert!(share < 0.05, "{poller}: {blocked:?}");
    }
    // The same measure sees a server that blocks between messages: tokio's, in
    // epoll_wait.
    let (session, blocked) = blocked_by_thread(&tmp.path().join("tokio"), "tokio", &[]);
    // A back end all of whose code keeps frame pointers is walked by them alone.
    assert_eq!(session.meta.sampling.unwind, "frame-pointers");
    let share = blocked.get("bt-echo-server").copied().unwrap_or(0.0);
    assert!(share > 0.2, "tokio's server: {blocked:?}");
}

#[test]
fn the_on_cpu_profile_of_a_dpdk_echo_names_its_receive_and_transmit_bursts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("profiled");
    // Five times the default frequency: a transmit burst is a sliver of the time beside
    // the polling (about 1 sample in 1,000 at 999 Hz on a loaded machine).
    let (_, session) = record_run(
        &dir,
        &[
            "udp-echo",
            "--backend",
            "dpdk",
            "--num-iters",
            "10000",
            "--interval",
            "200ms",
            "-F",
            "4999",
        ],
    );
    assert_eq!(session.meta.status, Status::Complete);
    // DPDK's libraries keep no frame pointers: without --unwind, the DPDK back end is
    // recorded with `auto` (the other back ends with frame pointers only).
    assert_eq!(session.meta.sampling.unwind, "auto");
    let cpu = session.profile(Kind::Cpu).expect("an on-CPU profile");
    let names = |wanted: &'static [&'static str]| move |name: &str| wanted.contains(&name);
    // The shim's bursts and DPDK's inline functions under them, by name. Both sides
    // busy-poll receive bursts between messages: a large part of their time (10 % of the
    // samples when measured beside a loaded suite).
    let rx = share_through(cpu, names(&["bt_rx_burst", "rte_eth_rx_burst"]));
    let tx = share_through(cpu, names(&["bt_tx_burst", "rte_eth_tx_burst"]));
    assert!(rx > 0.03, "receive bursts: {rx}");
    assert!(tx > 0.0 && tx < rx, "transmit {tx}, receive {rx}");
    // Both processes' loops: the server's echo and the clients'.
    let server = share_through(cpu, |n| n.ends_with("echo::dpdk::engine::echo"));
    let clients = share_through(cpu, |n| n.ends_with("echo::dpdk::engine::run_clients"));
    assert!(
        server > 0.05 && clients > 0.05,
        "server {server}, clients {clients}"
    );
    // The memif driver (no frame pointers, no symbols: `librte_net_memif.so.23.0+0x…`)
    // is walked with its CFI: its samples hang under the bursts that called it and the
    // loops that called them, all but the few of the driver's set-up and its interrupt
    // thread (with frame-pointer unwinding, 5 % of them did).
    let in_driver = |n: &str| n.starts_with("librte_net_memif.so");
    let driver = share_through(cpu, in_driver);
    let burst = names(&["rte_eth_rx_burst", "rte_eth_tx_burst"]);
    let in_loop = |n: &str| {
        n.ends_with("echo::dpdk::engine::echo") || n.ends_with("echo::dpdk::engine::run_clients")
    };
    let reached = share_of(cpu, |stack| {
        let at = |f: &dyn Fn(&str) -> bool| stack.iter().position(|&n| f(n));
        // Outermost first: a loop, then a burst, then the driver.
        matches!(
            (at(&in_loop), at(&burst), at(&in_driver)),
            (Some(l), Some(b), Some(d)) if l < b && b < d
        )
    });
    assert!(driver > 0.01, "the memif driver: {driver}");
    assert!(
        reached > 0.75 * driver,
        "of the memif driver's {driver}, {reached} under a burst in a loop"
    );
}

#[test]
fn a_dpdk_echo_stopped_while_it_starts_ends_stopped_not_crashed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("early");
    let child = run_command(
        &dir,
        &["udp-echo", "--backend", "dpdk", "--duration", "300s"],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // The server process is up and the EALs are starting (hundreds of ms at least): stop
    // now, as Ctrl-C does.
    let mut id = String::new();
    wait_until("the DPDK server process", Duration::from_secs(60), || {
        if id.is_empty() {
            id = load_meta(&dir).map(|m| m.id).unwrap_or_default();
        }
        !id.is_empty() && marked_by_recording(&dir, &id).len() >= 2
    });
    // SAFETY: a signal to the benchtop process this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Stopped, "{stderr}");
    let failed = session.meta.warnings.iter().find(|w| w.contains("failed"));
    assert!(failed.is_none(), "{failed:?}");
    wait_until("the DPDK processes to end", Duration::from_secs(10), || {
        marked_by_recording(&dir, &id).is_empty()
    });
}

/// The kernel's count of huge pages in its pool (`HugePages_Total`).
fn huge_pages_total() -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("HugePages_Total:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no HugePages_Total in /proc/meminfo:\n{info}"))
}

#[test]
fn without_root_a_dpdk_echo_runs_without_huge_pages_and_what_needs_root_is_refused_first() {
    use std::os::unix::fs::PermissionsExt as _;
    if !root_to("to run benchtop as nobody") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // nobody creates its sessions inside.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let limit = Duration::from_secs(120);
    let said = |out: &std::process::Output| {
        format!(
            "{}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };

    // The echo with --no-huge, its memif socket in the run's own directory, needs no root.
    let dir = tmp.path().join("no-huge");
    let args = ["udp-echo", "--backend", "dpdk", "--num-iters", "2000"];
    let out = output_within(as_nobody(&mut run_command(&dir, &args), tmp.path()), limit);
    assert!(out.status.success(), "{}", said(&out));
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);
    assert_eq!(figure(&session, "messages"), 2000.0);
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    assert!(log.contains("dpdk back end (memif, --no-huge)"), "{log}");

    // Huge pages need root: refused before a session or a DPDK process exists, naming
    // what is missing and the way that works, and the pool left as it was.
    let pool = huge_pages_total();
    let dir = tmp.path().join("huge");
    let args = ["udp-echo", "--backend", "dpdk", "--hugepages", "8"];
    let out = output_within(as_nobody(&mut run_command(&dir, &args), tmp.path()), limit);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    for words in [
        "--hugepages 8",
        "nr_hugepages",
        "only root",
        "uid 65534",
        "--no-huge",
    ] {
        assert!(stderr.contains(words), "{words}: {}", said(&out));
    }
    assert!(!dir.exists(), "a session was started: {}", said(&out));
    assert_eq!(huge_pages_total(), pool);

    // A memif socket in a directory nobody may not write: refused the same way.
    let locked = tempfile::tempdir().unwrap();
    std::fs::set_permissions(locked.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = locked.path().join("memif.sock");
    let dir = tmp.path().join("socket");
    let mut command = run_command(
        &dir,
        &[
            "udp-echo",
            "--backend",
            "dpdk",
            "--memif",
            socket.to_str().unwrap(),
        ],
    );
    let out = output_within(as_nobody(&mut command, tmp.path()), limit);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        stderr.contains("no permission to create the socket in")
            && stderr.contains(locked.path().to_str().unwrap()),
        "{}",
        said(&out)
    );
    assert!(!dir.exists(), "a session was started: {}", said(&out));
}

#[test]
fn a_dpdk_echo_on_a_memif_socket_another_server_listens_on_is_refused_before_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("memif.sock");
    // A listener as a memif server makes one: SOCK_SEQPACKET.
    let listener = {
        use std::os::fd::FromRawFd as _;
        let path = socket.to_str().unwrap().as_bytes();
        // SAFETY (test): a socket bound to a path shorter than sun_path, owned by the
        // OwnedFd below.
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0);
            assert!(fd >= 0);
            let mut addr: libc::sockaddr_un = std::mem::zeroed();
            addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (i, b) in path.iter().enumerate() {
                addr.sun_path[i] = *b as libc::c_char;
            }
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            assert_eq!(libc::bind(fd, (&raw const addr).cast(), len), 0);
            assert_eq!(libc::listen(fd, 1), 0);
            std::os::fd::OwnedFd::from_raw_fd(fd)
        }
    };
    let dir = tmp.path().join("refused");
    let args = [
        "udp-echo",
        "--backend",
        "dpdk",
        "--memif",
        socket.to_str().unwrap(),
    ];
    let out = output_within(&mut run_command(&dir, &args), Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is in use: another memif server listens there"),
        "{stderr}"
    );
    assert!(!dir.exists(), "a session was started: {stderr}");
    drop(listener);
}
