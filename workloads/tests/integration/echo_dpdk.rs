//! `udp-echo --backend dpdk`: server and clients as two processes, each with its own EAL,
//! over a net_memif link, and what happens when one side is in the way or goes away.

use std::path::Path;
use std::time::{Duration, Instant};

use benchtop_workloads::protocol::WorkerMessage;

use crate::fixture::{FixtureWorker, Reports, assert_all_gone, marked};
use crate::support::{decode_trusted, figure};

/// Waits until a socket file exists at `path` (a memif server is listening).
fn wait_for_socket(path: &Path, server: &FixtureWorker) {
    let until = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < until,
            "no memif socket at {path:?} after 30 s: {:?}",
            server.messages()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ten_thousand_64_byte_messages_come_back_exact_over_memif_between_two_processes() {
    let worker = FixtureWorker::start(
        &["udp-echo", "--backend", "dpdk", "--num-iters", "10000"],
        Reports::Fd3,
    );
    let session = worker.session.clone();
    let ended = worker.wait(Duration::from_secs(120));
    ended.assert_success();
    let summary = ended.summary();
    // Every reply matched its request: sequence number known, every payload byte as sent.
    // A reply frame is booked only when it parses as UDP/IPv4 from the server with both
    // checksums right (a bad one is a payload error); the server drops a request that does
    // not, so it would time out.
    assert_eq!(figure(summary, "messages"), 10_000.0, "{}", ended.log);
    assert_eq!(figure(summary, "payload_errors"), 0.0, "{}", ended.log);
    assert_eq!(figure(summary, "timeouts"), 0.0, "{}", ended.log);
    let timed: u64 = ended
        .messages
        .iter()
        .filter_map(|m| match m {
            WorkerMessage::Tick(t) => Some(decode_trusted(&t.histograms["rtt"]).len()),
            _ => None,
        })
        .sum();
    assert_eq!(
        timed, 10_000,
        "the ticks' rtt histograms hold every round trip"
    );
    // The server process echoed each, and said so in the worker's log.
    assert!(
        ended.log.contains("server_messages_echoed: 10000"),
        "{}",
        ended.log
    );
    assert!(ended.summary_lines()[0].contains("dpdk back end (memif, --no-huge)"));
    assert_all_gone(&session, Duration::from_secs(5));
}

#[test]
fn a_second_server_on_a_memif_socket_in_use_is_refused_before_its_eal_starts() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let socket_arg = socket.to_str().unwrap();
    let args = [
        "udp-echo",
        "--backend",
        "dpdk",
        "--role",
        "server",
        "--memif",
        socket_arg,
    ];
    let mut first = FixtureWorker::start(&args, Reports::Fd3);
    wait_for_socket(&socket, &first);
    let started = Instant::now();
    let second = FixtureWorker::start(&args, Reports::Fd3).wait(Duration::from_secs(30));
    assert!(!second.status.success());
    assert!(
        second
            .log
            .contains("is in use: another memif server listens there"),
        "{}",
        second.log
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    first.send("{\"type\":\"stop\"}");
    first.wait(Duration::from_secs(10)).assert_success();
    assert!(
        !socket.exists(),
        "the server removes its socket when it ends"
    );
}

#[test]
fn a_server_whose_client_is_killed_ends_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let socket_arg = socket.to_str().unwrap();
    let server = FixtureWorker::start(
        &[
            "udp-echo",
            "--backend",
            "dpdk",
            "--role",
            "server",
            "--memif",
            socket_arg,
        ],
        Reports::Fd3,
    );
    let server_session = server.session.clone();
    wait_for_socket(&socket, &server);
    let client = FixtureWorker::start(
        &[
            "udp-echo",
            "--backend",
            "dpdk",
            "--role",
            "client",
            "--memif",
            socket_arg,
            "--duration",
            "60s",
        ],
        Reports::Fd3,
    );
    let client_session = client.session.clone();
    client.wait_for_progress("messages", Duration::from_secs(30));
    // SAFETY (test): a process this test started.
    assert_eq!(unsafe { libc::kill(client.pid() as i32, libc::SIGKILL) }, 0);
    let killed = client.wait(Duration::from_secs(10));
    assert!(!killed.status.success());
    // The server sees the link go down and ends on its own, with its summary.
    let served = server.wait(Duration::from_secs(20));
    served.assert_success();
    assert!(
        served.log.contains("server_messages_echoed: "),
        "{}",
        served.log
    );
    assert!(
        !socket.exists(),
        "the server removes its socket when it ends"
    );
    // DPDK's heap says so when a region is freed twice: the port's stop beside memif's
    // own disconnect of the killed peer.
    assert!(!served.log.contains("Invalid memory"), "{}", served.log);
    assert_all_gone(&server_session, Duration::from_secs(5));
    assert_all_gone(&client_session, Duration::from_secs(5));
}

#[test]
fn both_dpdk_processes_carry_the_owner_marker_and_end_with_a_killed_worker() {
    let worker = FixtureWorker::start(
        &["udp-echo", "--backend", "dpdk", "--duration", "60s"],
        Reports::Fd3,
    );
    let session = worker.session.clone();
    worker.wait_for_progress("messages", Duration::from_secs(30));
    // The worker (the clients' EAL) and its server process (the server's EAL).
    let processes = marked(&session);
    assert_eq!(processes.len(), 2, "{processes:?}");
    // The run's directory under the temporary directory, with its memif socket.
    let prefix = format!("benchtop-udp-echo-{}-", worker.pid());
    let run_dirs = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect()
    };
    let left = run_dirs();
    assert_eq!(left.len(), 1, "{left:?}");
    // SAFETY (test): a process this test started.
    assert_eq!(unsafe { libc::kill(worker.pid() as i32, libc::SIGKILL) }, 0);
    assert!(!worker.wait(Duration::from_secs(10)).status.success());
    assert_all_gone(&session, Duration::from_secs(5));
    // Killed, the worker could not remove its directory (its server, which sees the
    // link go down, may have removed the socket in it); the next DPDK echo does.
    assert!(left[0].is_dir(), "{left:?}");
    let next = FixtureWorker::start(
        &["udp-echo", "--backend", "dpdk", "--num-iters", "100"],
        Reports::Fd3,
    );
    next.wait(Duration::from_secs(120)).assert_success();
    assert!(run_dirs().is_empty(), "{:?}", run_dirs());
}

/// A field of /proc/meminfo (`HugePages_Free` …), in pages.
fn meminfo(field: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/meminfo"))
}

#[test]
fn huge_pages_a_killed_client_reserved_return_to_the_pool_when_its_server_ends() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test reserves huge pages, which needs root: run the tests as root (CI does)"
    );
    let pool = || std::fs::read_to_string("/proc/sys/vm/nr_hugepages").unwrap();
    let (pool_before, free_before) = (pool(), meminfo("HugePages_Free"));
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let socket_arg = socket.to_str().unwrap();
    let side = |role: &str, more: &[&str]| {
        let args = [
            &["udp-echo", "--backend", "dpdk", "--hugepages", "8"],
            &["--role", role, "--memif", socket_arg][..],
            more,
        ]
        .concat();
        FixtureWorker::start(&args, Reports::Fd3)
    };
    let server = side("server", &[]);
    let server_session = server.session.clone();
    wait_for_socket(&socket, &server);
    let client = side("client", &["--duration", "60s"]);
    let client_session = client.session.clone();
    client.wait_for_progress("messages", Duration::from_secs(30));
    // Both sides hold their pages: 16 more in the pool.
    let grown: u64 = pool().trim().parse().unwrap();
    assert!(
        grown >= pool_before.trim().parse::<u64>().unwrap() + 16,
        "{pool_before} → {grown}"
    );
    // SAFETY (test): a process this test started.
    assert_eq!(unsafe { libc::kill(client.pid() as i32, libc::SIGKILL) }, 0);
    assert!(!client.wait(Duration::from_secs(10)).status.success());
    server.wait(Duration::from_secs(20)).assert_success();
    assert_all_gone(&server_session, Duration::from_secs(5));
    assert_all_gone(&client_session, Duration::from_secs(5));
    // The killed client could not give its 8 pages back; its server did, as it ended.
    assert_eq!(pool(), pool_before);
    assert_eq!(meminfo("HugePages_Free"), free_before);
}
