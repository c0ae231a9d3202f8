//! The messenger workload: every message comes back intact and once, in both server
//! modes, at several sizes and depths; a server that damages, drops or repeats a message
//! is caught; shards run on the CPUs they were pinned to; the per-second lines and the
//! `all(depth=…)` block read back and agree with the figures and the counters.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use benchtop_workloads::messenger::client::{self, ClientPlan};
use benchtop_workloads::messenger::cpuset::{CpuSet, Topology, affinity, last_cpu};
use benchtop_workloads::messenger::frame::{HEADER_LEN, Header};
use benchtop_workloads::messenger::progress::{Block, Line};
use benchtop_workloads::messenger::server::Server;
use benchtop_workloads::messenger::{
    self, MsgrMetrics, MsgrParams, PollMode, Role, ServerMode, Tally,
};
use benchtop_workloads::protocol::WorkerMessage;
use benchtop_workloads::report::{Metrics, StopSignal};
use benchtop_workloads::worker::Workload;

use crate::support::{RunningWorker, figure};

fn any_port() -> Option<std::net::SocketAddr> {
    Some("127.0.0.1:0".parse().unwrap())
}

/// The last CPU alone. Server and clients run flat out; kept to one CPU they leave the
/// others to the tests beside them (some of which time sleeps).
fn last_cpu_only() -> Option<CpuSet> {
    let cpus = Topology::current().unwrap().cpus.cpus();
    Some(CpuSet::of([*cpus.last().unwrap()]))
}

/// Flat-out parameters on the last CPU alone.
fn contained(params: MsgrParams) -> MsgrParams {
    MsgrParams {
        server_cpuset: last_cpu_only(),
        client_cpuset: last_cpu_only(),
        ..params
    }
}

fn run(params: &MsgrParams) -> messenger::Outcome {
    let metrics = MsgrMetrics::register(&mut Metrics::new(), params).unwrap();
    messenger::run(params, &metrics, &StopSignal::new())
        .unwrap_or_else(|e| panic!("{params:?}: {e}"))
}

/// The designs: crimson sleeping in epoll, crimson polling with its clients, async.
const DESIGNS: [(ServerMode, PollMode); 3] = [
    (ServerMode::Crimson, PollMode::Off),
    (ServerMode::Crimson, PollMode::All),
    (ServerMode::Async, PollMode::Off),
];

#[test]
fn every_message_comes_back_intact_and_once_in_every_mode_at_several_sizes_and_depths() {
    for (server, poll_mode) in DESIGNS {
        for (msg_size, depth) in [(1, 1), (100, 16), (4096, 512), (65536, 8), (300_000, 2)] {
            let params = contained(MsgrParams {
                server,
                poll_mode,
                msg_size,
                depth,
                msgtime: Some(1),
                listen: any_port(),
                ..MsgrParams::default()
            });
            let outcome = run(&params);
            let c = outcome.instances[0].client.as_ref().unwrap();
            // The clients check each answer's sequence number, size and checksum and fail
            // the run on a lost, duplicated or damaged one; here, the counts agree too.
            assert!(
                c.received > 0,
                "{server:?} poll {poll_mode:?} {msg_size} B depth {depth}: {c:?}"
            );
            assert_eq!(
                c.sent, c.received,
                "{server:?} poll {poll_mode:?} {msg_size} B depth {depth}"
            );
            assert_eq!(outcome.instances[0].served, Some(c.received));
            assert!(
                outcome.server_errors.is_empty(),
                "{:?}",
                outcome.server_errors
            );
        }
    }
}

#[test]
fn at_depth_512_nothing_is_lost_or_duplicated_over_many_connections() {
    let params = contained(MsgrParams {
        clients: 2,
        conns_per_client: 4,
        msgtime: Some(2),
        listen: any_port(),
        ..MsgrParams::default()
    });
    let outcome = run(&params);
    let c = outcome.instances[0].client.as_ref().unwrap();
    assert!(c.received > 8 * 512, "{c:?}");
    assert_eq!(c.sent, c.received);
    assert_eq!(c.latency.len(), c.received);
    // Each client thread ran where it was pinned, round robin over the client set.
    let client_cpus = outcome.instances[0].instance.client.cpus();
    assert_eq!(c.threads.len(), 2);
    for (i, t) in c.threads.iter().enumerate() {
        assert_eq!(t.cpu, client_cpus[i % client_cpus.len()]);
        assert_eq!(t.allowed, Some(CpuSet::of([t.cpu])), "{t:?}");
        assert_eq!(t.last_cpu, Some(t.cpu), "{t:?}");
    }
}

/// A server that echoes through `mangle` (frame in, bytes to send back out).
fn rogue_server(mangle: fn(Vec<u8>, u64) -> Vec<u8>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut n = 0u64;
        loop {
            let mut header = [0u8; HEADER_LEN];
            if s.read_exact(&mut header).is_err() {
                return;
            }
            let h = Header::decode(&header).unwrap();
            let mut frame = header.to_vec();
            frame.resize(HEADER_LEN + h.len as usize, 0);
            if s.read_exact(&mut frame[HEADER_LEN..]).is_err() {
                return;
            }
            if s.write_all(&mangle(frame, n)).is_err() {
                return;
            }
            n += 1;
        }
    });
    addr
}

fn against(addr: std::net::SocketAddr) -> String {
    let plan = ClientPlan {
        clients: 1,
        conns_per_client: 1,
        depth: 4,
        msg_size: 64,
        msgtime: Duration::from_millis(500),
        cpus: Topology::current().unwrap().cpus,
        target: addr,
        poll_mode: false,
    };
    client::run(&plan, &Arc::new(Tally::new()), &StopSignal::new())
        .unwrap_err()
        .to_string()
}

#[test]
fn a_damaged_a_repeated_and_a_dropped_message_are_each_caught() {
    let damaged = against(rogue_server(|mut f, n| {
        if n == 10 {
            f[HEADER_LEN + 30] ^= 0x40;
        }
        f
    }));
    assert!(damaged.contains("message 10: checksum"), "{damaged}");
    let repeated = against(rogue_server(|f, n| {
        if n == 5 { [f.clone(), f].concat() } else { f }
    }));
    assert!(
        repeated.contains("message 5 arrived where 6 was due"),
        "{repeated}"
    );
    let dropped = against(rogue_server(|f, n| if n == 3 { Vec::new() } else { f }));
    assert!(
        dropped.contains("message 4 arrived where 3 was due"),
        "{dropped}"
    );
}

#[test]
fn crimson_shards_run_on_their_own_cpu_and_the_async_pool_on_the_set() {
    let cpus = Topology::current().unwrap().cpus;
    let server = Server::start(ServerMode::Crimson, any_port().unwrap(), &cpus).unwrap();
    assert_eq!(server.threads().len(), cpus.len());
    for (t, cpu) in server.threads().iter().zip(cpus.cpus()) {
        assert_eq!(t.cpus, CpuSet::of([cpu]));
        assert_eq!(affinity(t.tid).unwrap(), t.cpus, "shard thread {}", t.tid);
        // Field 39 of /proc/<tid>/stat: the CPU it last ran on.
        assert_eq!(last_cpu(t.tid), Some(cpu), "shard thread {}", t.tid);
    }
    server.shutdown();
    let one = CpuSet::of([*cpus.cpus().last().unwrap()]);
    let server = Server::start(ServerMode::Async, any_port().unwrap(), &cpus).unwrap();
    assert!(!server.threads().is_empty());
    for t in server.threads() {
        assert_eq!(affinity(t.tid).unwrap(), cpus);
        assert!(cpus.contains(last_cpu(t.tid).unwrap()));
    }
    server.shutdown();
    let server = Server::start(ServerMode::Async, any_port().unwrap(), &one).unwrap();
    for t in server.threads() {
        assert_eq!(last_cpu(t.tid), one.cpus().first().copied());
    }
    server.shutdown();
}

#[test]
fn cpus_the_machine_does_not_have_are_refused_before_anything_runs() {
    let params = MsgrParams {
        server_cpuset: Some("0,4095".parse().unwrap()),
        listen: any_port(),
        ..MsgrParams::default()
    };
    let metrics = MsgrMetrics::register(&mut Metrics::new(), &params).unwrap();
    let err = messenger::run(&params, &metrics, &StopSignal::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--server-cpuset 0,4095") && err.contains("no CPU 4095"),
        "{err}"
    );
}

/// The summary message and the final cumulative counters of a worker run.
fn worker_run(
    params: MsgrParams,
) -> (
    WorkerMessage,
    std::collections::BTreeMap<String, u64>,
    Vec<String>,
) {
    let worker = RunningWorker::start(Workload::Messenger(params), Duration::from_millis(500));
    let reports = worker.reports.clone();
    let (result, _log) = worker.wait(Duration::from_secs(60));
    result.unwrap();
    let messages = reports.messages();
    let WorkerMessage::Hello(hello) = &messages[0] else {
        panic!("{:?}", messages[0]);
    };
    let metric_names = hello.metrics.iter().map(|m| m.name.clone()).collect();
    let counters = messages
        .iter()
        .rev()
        .find_map(|m| match m {
            WorkerMessage::Tick(t) => Some(t.counters.clone()),
            _ => None,
        })
        .unwrap();
    let summary = messages.last().unwrap().clone();
    (summary, counters, metric_names)
}

#[test]
fn the_per_second_lines_and_the_block_agree_with_the_figures_and_counters() {
    let (summary, counters, _) = worker_run(contained(MsgrParams {
        msgtime: Some(3),
        depth: 64,
        listen: any_port(),
        ..MsgrParams::default()
    }));
    let WorkerMessage::Summary(s) = &summary else {
        panic!("{summary:?}")
    };
    let lines: Vec<&str> = s.lines.iter().map(String::as_str).collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("all(depth=64):"))
        .unwrap_or_else(|| panic!("{lines:#?}"));
    let block = Block::parse(&lines[at..]).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-3 * a.abs().max(b.abs()).max(1.0);
    assert_eq!(block.messages as f64, figure(&summary, "messages"));
    assert_eq!(counters["messages"], block.messages);
    assert!(close(block.iops, figure(&summary, "iops")), "{block:?}");
    assert!(close(block.latency_ms, figure(&summary, "latency_ms")));
    assert!(close(block.out_mb_per_s, figure(&summary, "out_mb_per_s")));
    assert!(close(
        block.messaging_time_s,
        figure(&summary, "messaging_time_s")
    ));
    assert!(
        block.messaging_time_s >= 3.0 && block.messaging_time_s < 5.0,
        "{block:?}"
    );
    assert!(close(
        block.iops,
        block.messages as f64 / block.messaging_time_s
    ));
    // Three seconds of messaging: two or three whole seconds printed, which add up to
    // most of the messages, each line with the server's CPUs.
    let per_second: Vec<Line> = lines.iter().filter_map(|l| Line::parse(l, false)).collect();
    assert!((2..=4).contains(&per_second.len()), "{lines:#?}");
    let sum: u64 = per_second.iter().map(|l| l.messages).sum();
    assert!(
        sum <= block.messages && sum as f64 >= 0.5 * block.messages as f64,
        "{lines:#?}"
    );
    for l in &per_second {
        assert!(!l.cpu.is_empty() && l.latency_ms > 0.0, "{l:?}");
        // MB/s is printed to a tenth.
        let mb = l.iops * (4096.0 + 16.0) / 1e6;
        assert!((l.mb_per_s - mb).abs() <= 0.05 + 0.01 * mb, "{l:?}");
    }
    assert!(figure(&summary, "server_cpu_percent") > 0.0);
    // The server's own threads' CPU time, per message: some, and below the wall time.
    let per = figure(&summary, "server_cpu_us_per_message");
    assert!(per > 0.0 && per * block.messages as f64 / 1e6 <= block.messaging_time_s * 1.5);
}

#[test]
fn two_instances_are_recorded_under_their_own_tags() {
    // Both CPUs (one an instance) for a second: the one test not kept to one CPU.
    let (summary, counters, metrics) = worker_run(MsgrParams {
        msgtime: Some(1),
        depth: 64,
        instances: 2,
        listen: any_port(),
        ..MsgrParams::default()
    });
    for m in [
        "latency.left",
        "latency.right",
        "messages.left",
        "messages.right",
        "latency",
    ] {
        assert!(metrics.iter().any(|n| n == m), "{metrics:?}");
    }
    let (left, right) = (
        figure(&summary, "left.messages"),
        figure(&summary, "right.messages"),
    );
    assert!(left > 0.0 && right > 0.0);
    assert_eq!(left + right, figure(&summary, "messages"));
    assert_eq!(counters["messages.left"] as f64, left);
    assert!(figure(&summary, "left.iops") + figure(&summary, "right.iops") > 0.0);
    let WorkerMessage::Summary(s) = &summary else {
        panic!()
    };
    assert!(
        s.lines.iter().any(|l| l == "left(depth=64):"),
        "{:#?}",
        s.lines
    );
    assert!(
        s.lines
            .iter()
            .any(|l| Line::parse(l, true).is_some_and(|l| l.tag == "right"))
    );
}

#[test]
fn a_server_and_its_clients_in_two_roles_meet_over_listen_and_connect() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let stop = StopSignal::new();
    let server_params = MsgrParams {
        role: Role::Server,
        listen: Some(addr),
        server_cpuset: last_cpu_only(),
        ..MsgrParams::default()
    };
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let metrics = MsgrMetrics::register(&mut Metrics::new(), &server_params).unwrap();
            messenger::run(&server_params, &metrics, &stop).unwrap()
        })
    };
    let client = run(&MsgrParams {
        role: Role::Client,
        connect: Some(addr),
        msgtime: Some(1),
        client_cpuset: last_cpu_only(),
        ..MsgrParams::default()
    });
    stop.set();
    let served = server.join().unwrap();
    let received = client.instances[0].client.as_ref().unwrap().received;
    assert!(received > 0);
    assert_eq!(served.instances[0].served, Some(received));
    let lines = messenger::summary(&served).lines;
    assert!(
        lines
            .iter()
            .any(|l| l == &format!("messages served: {received}")),
        "{lines:#?}"
    );
}

#[test]
fn a_stop_mid_run_drains_every_connection_and_ends_with_a_whole_block() {
    for (server, poll_mode) in DESIGNS {
        let mut worker = RunningWorker::start(
            Workload::Messenger(contained(MsgrParams {
                server,
                poll_mode,
                msgtime: Some(600),
                listen: any_port(),
                ..MsgrParams::default()
            })),
            Duration::from_millis(100),
        );
        worker.wait_for_progress("messages", Duration::from_secs(60));
        let asked = std::time::Instant::now();
        worker.send("{\"type\":\"stop\"}");
        let reports = worker.reports.clone();
        let (result, log) = worker.wait(Duration::from_secs(60));
        result.unwrap();
        assert!(asked.elapsed() < Duration::from_secs(10), "{server:?}");
        assert!(log.contains("stopped before the message time"), "{log}");
        let messages = reports.messages();
        let summary = messages.last().unwrap();
        let WorkerMessage::Tick(last_tick) = &messages[messages.len() - 2] else {
            panic!("no final tick");
        };
        // Every message sent before the stop came back and is counted, once.
        let received = figure(summary, "messages");
        assert!(received > 0.0);
        assert_eq!(last_tick.counters["messages"] as f64, received);
        assert!(log.contains("all(depth=512):"), "{log}");
    }
}

#[test]
fn poll_mode_shards_never_wait_in_epoll_where_the_async_server_waits_for_every_message() {
    // One connection at depth 1: every message leaves the server with nothing to do until
    // the next, so the async pool goes to sleep in epoll once a message; poll-mode shards
    // poll on. Same parameters, same CPU.
    let params = |server, poll_mode| {
        contained(MsgrParams {
            server,
            poll_mode,
            depth: 1,
            conns_per_client: 1,
            msgtime: Some(2),
            listen: any_port(),
            ..MsgrParams::default()
        })
    };
    let sleeping = run(&params(ServerMode::Async, PollMode::Off));
    let polling = run(&params(ServerMode::Crimson, PollMode::Server));
    let switches = |o: &messenger::Outcome| o.instances[0].server_switches.unwrap();
    let (asleep, _) = switches(&sleeping);
    let (polled, preempted) = switches(&polling);
    assert!(asleep >= 100, "the async server waited {asleep} times");
    assert!(
        polled * 100 < asleep,
        "poll mode: {polled} voluntary switches ({preempted} involuntary) against async's {asleep}"
    );
    // Answers are checked as in every run: all back, once.
    let c = polling.instances[0].client.as_ref().unwrap();
    assert!(c.received > 0 && c.sent == c.received, "{c:?}");
    assert_eq!(polling.instances[0].served, Some(c.received));
    // The shard's time is split into busy and polling idle, and both are reported.
    let reactor = &polling.instances[0].server_reactor;
    assert_eq!(reactor.len(), 1, "{reactor:?}");
    let (cpu, times) = reactor[0];
    assert_eq!(Some(cpu), last_cpu_only().unwrap().cpus().first().copied());
    assert!(
        times.busy > Duration::ZERO && times.idle > Duration::ZERO,
        "{times:?}"
    );
    assert!(
        times.idle_turns > 0 && times.turns > times.idle_turns,
        "{times:?}"
    );
    assert!(sleeping.instances[0].server_reactor.is_empty());
    let lines = messenger::summary(&polling).lines;
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("server reactors busy% (the rest polling idle): ")),
        "{lines:#?}"
    );
    let per_second: Vec<Line> = lines.iter().filter_map(|l| Line::parse(l, false)).collect();
    assert!(!per_second.is_empty(), "{lines:#?}");
    for l in &per_second {
        assert_eq!(l.busy.len(), 1, "{l:?}");
        assert!((0.0..=100.0).contains(&l.busy[0].1), "{l:?}");
    }
    let figures = messenger::summary(&polling).figures;
    let figure = |name: &str| {
        figures
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no {name}: {figures:?}"))
            .value
    };
    assert_eq!(figure("server_voluntary_switches"), polled as f64);
    let busy = figure("server_busy_percent");
    assert!(busy > 0.0 && busy < 100.0, "{busy}");
    assert!(figure("server_busy_us_per_message") > 0.0);
}

#[test]
fn poll_mode_clients_poll_and_report_their_reactors_against_either_server() {
    let outcome = run(&contained(MsgrParams {
        server: ServerMode::Async,
        poll_mode: PollMode::Clients,
        clients: 2,
        msgtime: Some(1),
        depth: 16,
        listen: any_port(),
        ..MsgrParams::default()
    }));
    assert!(outcome.instances[0].server_reactor.is_empty());
    let c = outcome.instances[0].client.as_ref().unwrap();
    assert_eq!(c.sent, c.received);
    assert_eq!(c.threads.len(), 2);
    for t in &c.threads {
        let r = t.reactor.unwrap_or_else(|| panic!("{t:?}"));
        assert!(r.turns > 0 && r.busy > Duration::ZERO, "{t:?}");
    }
    let lines = messenger::summary(&outcome).lines;
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("client reactors busy% (the rest polling idle): ")),
        "{lines:#?}"
    );
}
