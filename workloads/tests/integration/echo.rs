//! `udp-echo` across processes: `--role both` (its server a process of its own), and the
//! two-host set-up on one machine — the server in one network namespace, the clients in
//! another, joined by a veth pair.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use benchtop_workloads::protocol::WorkerMessage;

use crate::fixture::{FixtureWorker, Reports, assert_all_gone};
use crate::support::figure;

#[test]
fn both_roles_run_the_server_as_a_process_and_report_a_phase_per_sweep_point() {
    let worker = FixtureWorker::start(
        &[
            "udp-echo",
            "--phase-sweep",
            "num-clients=1,3",
            "--num-iters",
            "200",
            "--backend",
            "mmsg",
        ],
        Reports::Fd3,
    );
    let session = worker.session.clone();
    let ended = worker.wait(Duration::from_secs(60));
    ended.assert_success();
    let phases: Vec<_> = ended
        .messages
        .iter()
        .filter_map(|m| match m {
            WorkerMessage::Phase(p) => Some(p),
            _ => None,
        })
        .collect();
    let names: Vec<&str> = phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["num-clients=1", "num-clients=3"]);
    let messages = |i: usize| {
        phases[i]
            .figures
            .iter()
            .find(|f| f.name == "messages")
            .unwrap()
            .value
    };
    assert_eq!((messages(0), messages(1)), (200.0, 600.0));
    let lines = ended.summary_lines();
    assert!(
        lines[1].starts_with("point") && lines[3].starts_with("num-clients=3"),
        "{lines:?}"
    );
    assert_eq!(figure(ended.summary(), "num-clients=3:timeouts"), 0.0);
    // The server process's own summary, in the worker's log.
    assert!(
        ended.log.contains("server_messages_echoed: 800"),
        "{}",
        ended.log
    );
    assert_all_gone(&session, Duration::from_secs(5));
}

#[test]
fn a_client_with_nothing_to_talk_to_fails_clearly_and_soon() {
    let started = Instant::now();
    let worker = FixtureWorker::start(
        &[
            "udp-echo",
            "--role",
            "client",
            "--connect",
            "127.0.0.1:9",
            "--protocol",
            "tcp",
            "--timeout",
            "200ms",
        ],
        Reports::Stdout,
    );
    let ended = worker.wait(Duration::from_secs(30));
    assert!(!ended.status.success());
    assert!(
        ended
            .log
            .contains("connecting to 127.0.0.1:9 (nothing listens there)"),
        "{}",
        ended.log
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_client_whose_server_never_answers_fails_clearly_and_soon() {
    // Bound, so no ICMP refusal: datagrams arrive and nobody answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let started = Instant::now();
    let worker = FixtureWorker::start(
        &[
            "udp-echo",
            "--role",
            "client",
            "--connect",
            &addr,
            "--timeout",
            "100ms",
        ],
        Reports::Stdout,
    );
    let ended = worker.wait(Duration::from_secs(30));
    assert!(!ended.status.success());
    assert!(
        ended
            .log
            .contains(&format!("no answer from {addr} within 2s"))
            && ended.log.contains("listening there"),
        "{}",
        ended.log
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(matches!(
        ended.messages.last(),
        Some(WorkerMessage::Error { .. })
    ));
}

/// Two network namespaces joined by a veth pair, deleted (with the pair) when dropped.
struct TwoHosts {
    names: [String; 2],
    addrs: [String; 2],
}

fn ip(args: &[&str]) {
    let output = Command::new("ip").args(args).output().unwrap_or_else(|e| {
        panic!(
            "running `ip {}`: {e}. The two-host test needs iproute2 (apt-get install \
             iproute2)",
            args.join(" ")
        )
    });
    assert!(
        output.status.success(),
        "`ip {}` failed: {}. The two-host test creates network namespaces and a veth pair, \
         which needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    );
}

impl TwoHosts {
    fn create() -> TwoHosts {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{n}", std::process::id() % 100_000);
        let subnet = 100 + (std::process::id() % 100) as usize + n;
        let hosts = TwoHosts {
            names: [format!("bt-echo-{tag}-a"), format!("bt-echo-{tag}-b")],
            addrs: [
                format!("10.{}.{}.1", 77, subnet % 250),
                format!("10.{}.{}.2", 77, subnet % 250),
            ],
        };
        let veth = [format!("bte{tag}a"), format!("bte{tag}b")];
        for name in &hosts.names {
            ip(&["netns", "add", name]);
        }
        // Both ends are made inside their namespaces: deleting the namespaces deletes them.
        ip(&[
            "link",
            "add",
            &veth[0],
            "netns",
            &hosts.names[0],
            "type",
            "veth",
            "peer",
            "name",
            &veth[1],
            "netns",
            &hosts.names[1],
        ]);
        for ((ns, addr), dev) in hosts.names.iter().zip(&hosts.addrs).zip(&veth) {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        hosts
    }

    /// The wrapper that runs a command on `host`.
    fn exec(&self, host: usize) -> Vec<&str> {
        vec!["ip", "netns", "exec", &self.names[host]]
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

/// Runs a server in the first namespace and a client in the second, and checks that every
/// message came back exact and that the server echoed each.
fn echo_between_hosts(hosts: &TwoHosts, common: &[&str], iters: u64, clients: u64) {
    let listen = format!("{}:7777", hosts.addrs[0]);
    let wrapper_a = hosts.exec(0);
    let wrapper_b = hosts.exec(1);

    let mut server_args = vec!["udp-echo", "--role", "server", "--listen", &listen];
    server_args.extend_from_slice(common);
    let mut server = FixtureWorker::start_wrapped(&wrapper_a, &server_args, Reports::Fd3);
    // The first tick comes after the socket is bound.
    let until = Instant::now() + Duration::from_secs(10);
    while !server
        .messages()
        .iter()
        .any(|m| matches!(m, WorkerMessage::Tick(_)))
    {
        assert!(Instant::now() < until, "the server never ticked");
        std::thread::sleep(Duration::from_millis(10));
    }

    let iters_text = iters.to_string();
    let mut client_args = vec![
        "udp-echo",
        "--role",
        "client",
        "--connect",
        &listen,
        "--num-iters",
        &iters_text,
    ];
    client_args.extend_from_slice(common);
    let client = FixtureWorker::start_wrapped(&wrapper_b, &client_args, Reports::Fd3);
    let ended = client.wait(Duration::from_secs(60));
    ended.assert_success();
    let summary = ended.summary();
    let total = iters * clients;
    assert_eq!(figure(summary, "messages"), total as f64, "{}", ended.log);
    assert_eq!(figure(summary, "payload_errors"), 0.0);

    server.send("{\"type\":\"stop\"}");
    let served = server.wait(Duration::from_secs(10));
    served.assert_success();
    assert!(
        served
            .log
            .contains(&format!("server_messages_echoed: {total}")),
        "{}",
        served.log
    );
}

#[test]
fn server_and_client_in_two_network_namespaces_echo_over_a_veth_pair() {
    let hosts = TwoHosts::create();
    // 9000-byte datagrams cross a 1500-byte MTU link: the kernel fragments them.
    echo_between_hosts(&hosts, &["--buffer-size", "9000"], 300, 1);
    echo_between_hosts(
        &hosts,
        &[
            "--protocol",
            "tcp",
            "--backend",
            "mmsg",
            "--buffer-size",
            "262144",
            "--mode",
            "throughput",
        ],
        50,
        1,
    );
    echo_between_hosts(&hosts, &["--backend", "poll", "--num-clients", "2"], 300, 2);
}
