use std::net::UdpSocket;

use super::wire::{HEADER, Header};
use super::*;

fn parse(args: &[&str]) -> Result<EchoParams, String> {
    crate::test_support::parse_params("udp-echo", args)
}

fn metrics() -> EchoMetrics {
    EchoMetrics::register(&mut Metrics::new()).unwrap()
}

const BACKENDS: [Backend; 3] = [Backend::Tokio, Backend::Poll, Backend::Mmsg];

/// Runs `params`' clients against an in-process server of the same back end.
fn echo_in_process(params: &EchoParams) -> Tally {
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap(), params.protocol).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = StopSignal::new();
    let server_metrics = metrics();
    std::thread::scope(|s| {
        let server =
            s.spawn(|| server::serve(listener, params.backend, &server_metrics, &stop, None));
        let setup = params.client_setup(addr, 0);
        let result = client::run(&setup, &metrics(), &StopSignal::new());
        stop.set();
        let served = server.join().unwrap().unwrap();
        let (tally, _) = result.unwrap();
        assert_eq!(served.messages, tally.messages, "{params:?}");
        tally
    })
}

#[test]
fn defaults_are_a_64_byte_closed_loop_on_this_host() {
    let params = parse(&[]).unwrap();
    assert_eq!(params, EchoParams::default());
    assert_eq!(params.buffer_size, 64);
    assert_eq!(params.role, Role::Both);
    assert_eq!(params.pacing().window, 1);
    params.validate().unwrap();
}

#[test]
fn to_args_parse_back_to_the_same_parameters() {
    for params in [
        EchoParams::default(),
        EchoParams {
            role: Role::Client,
            connect: Some("10.0.0.2:7777".parse().unwrap()),
            buffer_size: 9000,
            num_iters: Some(5),
            num_clients: 4,
            mode: Mode::Throughput,
            duration: Some(Duration::from_millis(1500)),
            rate: Some(10_000),
            protocol: Protocol::Tcp,
            backend: Backend::Mmsg,
            timeout: Duration::from_millis(50),
            window: Some(8),
            sweep: Some(parse_sweep("num-clients=1,2,4").unwrap()),
            ..EchoParams::default()
        },
        EchoParams {
            role: Role::Server,
            listen: Some("0.0.0.0:9999".parse().unwrap()),
            listen_fd: Some(5),
            ..EchoParams::default()
        },
    ] {
        let args = params.to_args();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(parse(&args).unwrap(), params);
        let json = params.params_json();
        assert_eq!(json["buffer-size"], params.buffer_size);
        assert!(
            !json.contains_key("listen-fd"),
            "the socket is not recorded"
        );
    }
}

#[test]
fn the_hello_parameters_keep_their_recorded_shape() {
    let params = EchoParams {
        role: Role::Client,
        connect: Some("10.0.0.2:7777".parse().unwrap()),
        duration: Some(Duration::from_millis(1500)),
        rate: Some(10_000),
        backend: Backend::Mmsg,
        sweep: Some(parse_sweep("num-clients=1,2,4").unwrap()),
        ..EchoParams::default()
    };
    assert_eq!(
        serde_json::Value::from_iter(params.params_json()),
        serde_json::json!({
            "role": "client", "connect": "10.0.0.2:7777", "buffer-size": 64,
            "num-clients": 1, "mode": "echo", "duration": "1s 500ms", "rate": 10000,
            "protocol": "udp", "backend": "mmsg", "timeout": "1s",
            "sweep": "num-clients=1,2,4",
        })
    );
}

#[test]
fn bad_parameters_are_refused_with_what_to_do() {
    let err = parse(&["--buffer-size", "2000000"])
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "--buffer-size 2000000: larger than the 1 MiB (1048576-byte) limit of a message"
    );
    let err = parse(&["--role", "client"])
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("--connect ADDR"), "{err}");
    let err = parse(&["--connect", "127.0.0.1:1"])
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("--role client"), "{err}");
    let err = parse(&["--phase-sweep", "buffer-size=64,4000000"])
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("--buffer-size 4000000"), "{err}");
    let err = parse(&["--phase-sweep", "num-clients=1,1000"])
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("--num-clients 1000"), "{err}");
    for (args, says) in [
        (&["--phase-sweep", "rate=1,2"][..], "cannot be swept"),
        (&["--phase-sweep", "buffer-size"][..], "PARAM=V1,V2"),
        (
            &["--phase-sweep", "buffer-size=1,x"][..],
            "not a whole number",
        ),
        (&["--buffer-size", "0"][..], "--buffer-size"),
        (&["--num-clients", "0"][..], "--num-clients"),
        (&["--timeout", "0s"][..], "longer than zero"),
        (&["--backend", "dpdk"][..], "possible values"),
        (&["--listen", "nowhere"][..], "--listen"),
    ] {
        let err = parse(args).unwrap_err();
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn a_sweep_is_its_points_in_order() {
    let params = parse(&[
        "--phase-sweep",
        "buffer-size=64,1024,262144",
        "--num-iters",
        "3",
    ])
    .unwrap();
    let points = params.points();
    let names: Vec<_> = points.iter().map(|(n, _)| n.clone().unwrap()).collect();
    assert_eq!(
        names,
        ["buffer-size=64", "buffer-size=1024", "buffer-size=262144"]
    );
    assert_eq!(points[2].1.buffer_size, 262_144);
    assert!(points.iter().all(|(_, p)| p.sweep.is_none()));
    // A duration is the whole sweep's, shared among its points.
    let timed = parse(&["--phase-sweep", "num-clients=1,2,4,8", "--duration", "2s"]).unwrap();
    assert!(
        timed
            .points()
            .iter()
            .all(|(_, p)| p.duration == Some(Duration::from_millis(500)))
    );
    assert_eq!(
        params.to_args().last().unwrap(),
        "buffer-size=64,1024,262144"
    );
}

fn every_backend_echoes_exact_payloads(protocol: Protocol) {
    for backend in BACKENDS {
        for size in [64u64, 1024, 9000, 262_144] {
            let params = EchoParams {
                role: Role::Client,
                buffer_size: size,
                num_iters: Some(if size > 10_000 { 10 } else { 200 }),
                protocol,
                backend,
                timeout: Duration::from_secs(5),
                ..EchoParams::default()
            };
            let tally = echo_in_process(&params);
            let iters = params.num_iters.unwrap();
            assert_eq!(
                (tally.messages, tally.timeouts, tally.payload_errors),
                (iters, 0, 0),
                "{backend:?} {protocol:?} {size} B"
            );
            assert_eq!(tally.bytes, iters * size);
            assert_eq!(tally.rtt.len(), iters);
        }
    }
}

#[test]
fn every_backend_echoes_exact_payloads_over_udp() {
    every_backend_echoes_exact_payloads(Protocol::Udp);
}

#[test]
fn every_backend_echoes_exact_payloads_over_tcp() {
    every_backend_echoes_exact_payloads(Protocol::Tcp);
}

#[test]
fn throughput_mode_and_several_clients_keep_every_message() {
    for protocol in [Protocol::Udp, Protocol::Tcp] {
        for backend in BACKENDS {
            let params = EchoParams {
                role: Role::Client,
                buffer_size: 1024,
                num_iters: Some(500),
                num_clients: 3,
                mode: Mode::Throughput,
                protocol,
                backend,
                timeout: Duration::from_secs(5),
                ..EchoParams::default()
            };
            let tally = echo_in_process(&params);
            assert_eq!(
                (tally.messages, tally.payload_errors),
                (1500, 0),
                "{backend:?} {protocol:?}"
            );
        }
    }
}

#[test]
fn open_loop_sends_on_schedule() {
    let params = EchoParams {
        role: Role::Client,
        rate: Some(2_000),
        duration: Some(Duration::from_millis(300)),
        backend: Backend::Mmsg,
        ..EchoParams::default()
    };
    let tally = echo_in_process(&params);
    // 2000/s for 0.3 s: 600 sends due, never more (the last few may still be in flight
    // at the end). A machine loaded by several builds holds the sender off (484 at load
    // 10), so the floor only says it kept sending on the schedule it had.
    assert!((240..=601).contains(&tally.messages), "{}", tally.messages);
}

/// A UDP server that echoes every datagram but each `drop_every`-th.
fn lossy_server(drop_every: u64) -> (SocketAddr, StopSignal, std::thread::JoinHandle<u64>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let addr = sock.local_addr().unwrap();
    let stop = StopSignal::new();
    let stopping = stop.clone();
    let thread = std::thread::spawn(move || {
        let mut buf = vec![0u8; 70_000];
        let mut seen = 0u64;
        let mut dropped = 0u64;
        while !stopping.is_set() {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            seen += 1;
            if seen.is_multiple_of(drop_every) {
                dropped += 1;
                continue;
            }
            sock.send_to(&buf[..n], from).unwrap();
        }
        dropped
    });
    (addr, stop, thread)
}

/// How long the lossy tests wait for a silent test server before giving up on it.
const PATIENT: Duration = Duration::from_secs(10);

#[test]
fn lost_datagrams_are_counted_as_timeouts_not_waited_for() {
    for backend in BACKENDS {
        let (addr, stop, server) = lossy_server(5);
        let params = EchoParams {
            role: Role::Client,
            connect: Some(addr),
            num_iters: Some(50),
            backend,
            timeout: Duration::from_millis(50),
            ..EchoParams::default()
        };
        // Losses count at 50 ms, but the server is a test thread that a busy machine
        // may hold off for longer than five of them: give up on it only after seconds.
        let mut setup = params.client_setup(addr, 0);
        setup.silence = PATIENT;
        let started = Instant::now();
        let (tally, _) = client::run(&setup, &metrics(), &StopSignal::new()).unwrap();
        stop.set();
        let dropped = server.join().unwrap();
        assert_eq!(dropped, 10, "{backend:?}");
        // Every dropped datagram is a timeout; on a loaded machine an echo that comes
        // back later than 50 ms is one too, never a wait or a payload error.
        assert!(
            tally.timeouts >= 10
                && tally.messages + tally.timeouts == 50
                && tally.payload_errors == 0,
            "{backend:?} {tally:?}"
        );
        // Ten timeouts of 50 ms and forty quick round trips: nowhere near a hang.
        assert!(started.elapsed() < Duration::from_secs(5), "{backend:?}");
    }
}

#[test]
fn a_lost_fragment_loses_its_message_only() {
    // 3 datagrams a message; every 4th datagram dropped.
    let (addr, stop, server) = lossy_server(4);
    let params = EchoParams {
        role: Role::Client,
        buffer_size: 2 * 64_512 + 10,
        num_iters: Some(8),
        backend: Backend::Mmsg,
        timeout: Duration::from_millis(50),
        ..EchoParams::default()
    };
    let mut setup = params.client_setup(addr, 0);
    setup.silence = PATIENT;
    let (tally, _) = client::run(&setup, &metrics(), &StopSignal::new()).unwrap();
    stop.set();
    assert_eq!(server.join().unwrap(), 6);
    assert_eq!(tally.messages + tally.timeouts, 8);
    assert_eq!(tally.timeouts, 6);
}

#[test]
fn a_server_that_never_answers_is_an_error_after_five_timeouts() {
    for backend in BACKENDS {
        // Bound, so no ICMP refusal: datagrams arrive and nobody answers.
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = silent.local_addr().unwrap();
        let params = EchoParams {
            role: Role::Client,
            connect: Some(addr),
            backend,
            timeout: Duration::from_millis(40),
            ..EchoParams::default()
        };
        let started = Instant::now();
        let err = client::run(
            &params.client_setup(addr, 0),
            &metrics(),
            &StopSignal::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(&format!("no answer from {addr}")) && err.contains("listening there"),
            "{backend:?}: {err}"
        );
        assert!(started.elapsed() < Duration::from_secs(3), "{backend:?}");
    }
}

#[test]
fn nobody_listening_is_a_clear_error() {
    for protocol in [Protocol::Udp, Protocol::Tcp] {
        for backend in BACKENDS {
            // A port just freed: nothing listens there.
            let addr = UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap();
            let params = EchoParams {
                role: Role::Client,
                protocol,
                backend,
                timeout: Duration::from_millis(200),
                ..EchoParams::default()
            };
            let err = client::run(
                &params.client_setup(addr, 0),
                &metrics(),
                &StopSignal::new(),
            )
            .unwrap_err()
            .to_string();
            assert!(
                err.contains("nothing listens there") || err.contains("no answer"),
                "{protocol:?} {backend:?}: {err}"
            );
        }
    }
}

#[test]
fn a_stray_header_is_ignored() {
    // A datagram too short for a header, then one for a message never sent.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let mut flight = wire::Flight::new(
        64,
        wire::Pacing {
            window: 1,
            interval_ns: None,
        },
        1_000,
        None,
        0,
        0,
    );
    let mut piece = vec![0u8; HEADER + 64];
    Header {
        seq: 99,
        offset: 0,
        total: 64,
    }
    .encode(&mut piece);
    assert_eq!(
        flight.arrive(Header::decode(&piece).unwrap(), &piece[HEADER..], 1),
        wire::Arrival::Stray
    );
    drop((silent, addr));
}

#[test]
fn summary_lines_name_every_figure() {
    let mut rtt = crate::protocol::new_latency_histogram();
    rtt.record(20_000).unwrap();
    rtt.record(40_000).unwrap();
    let point = Point {
        name: None,
        buffer_size: 64,
        num_clients: 1,
        messages: 2,
        bytes: 128,
        timeouts: 1,
        payload_errors: 0,
        elapsed: Duration::from_millis(1),
        rtt,
    };
    let outcome = Outcome {
        params: EchoParams::default(),
        points: vec![point.clone()],
        server: None,
        stopped: false,
    };
    let lines = summary_lines(&outcome);
    assert_eq!(
        lines[0],
        "udp-echo: server and clients over udp, tokio back end"
    );
    assert!(
        lines.contains(&"messages_per_second: 2000".to_owned()),
        "{lines:?}"
    );
    assert!(lines.contains(&"rtt_p50: 20.015µs".to_owned()), "{lines:?}");
    let sweep = Outcome {
        points: vec![
            Point {
                name: Some("buffer-size=64".to_owned()),
                ..point.clone()
            },
            Point {
                name: Some("buffer-size=1024".to_owned()),
                ..point
            },
        ],
        ..outcome
    };
    let lines = summary_lines(&sweep);
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[1].starts_with("point") && lines[3].starts_with("buffer-size=1024"));
    let names: Vec<String> = summary(&sweep)
        .figures
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert!(
        names.contains(&"buffer-size=1024:rtt_p99_us".to_owned()),
        "{names:?}"
    );
}
