use std::net::UdpSocket;

use super::wire::{HEADER, Header};
use super::*;

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
        if params.duration.is_some() {
            // A timed run ends with messages in flight: the server may have echoed some
            // whose replies came after the client stopped counting.
            assert!(served.messages >= tally.messages, "{params:?}");
        } else {
            assert_eq!(served.messages, tally.messages, "{params:?}");
        }
        tally
    })
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
