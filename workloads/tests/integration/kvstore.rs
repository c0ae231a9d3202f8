//! The kvstore workload: every RPC answers as the map says, concurrently; the work model
//! reaches its theoretical maximum, the RPC's own cost taken out of the work; a missing
//! server, a taken port and a client that outruns its deadlines give clear errors or
//! counted failures.

use std::time::{Duration, Instant};

use benchtop_workloads::kvstore::proto::{
    CreateRequest, DeleteRequest, RetrieveRequest, UpdateRequest,
};
use benchtop_workloads::kvstore::schedule::{COST_HEADER, WORK_HEADER};
use benchtop_workloads::kvstore::{self, KvMetrics, KvParams, KvServer, Role, connect};
use benchtop_workloads::report::{Metrics, StopSignal};
use prost::bytes::Bytes;
use tonic::Code;

fn metrics() -> KvMetrics {
    KvMetrics::register(&mut Metrics::new()).unwrap()
}

fn any_port(params: KvParams) -> KvParams {
    KvParams {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        ..params
    }
}

#[test]
fn every_rpc_answers_as_the_map_says_under_concurrent_clients() {
    let params = any_port(KvParams {
        disable_work_simulation: true,
        ..KvParams::default()
    });
    let server = KvServer::start(&params, metrics()).unwrap();
    let addr = server.addr();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for t in 0..16u32 {
            tasks.spawn(async move {
                let mut stub = connect(addr).await.unwrap();
                for i in 0..25u32 {
                    let key = Bytes::from(format!("key-{t}-{i}"));
                    // Below and above the size the server copies out of its request
                    // buffer (4 KiB), so both ways of storing are checked.
                    let value = Bytes::from(vec![t as u8; (i as usize + 1) * 400]);
                    let create = |value: Bytes| CreateRequest {
                        key: key.clone(),
                        value,
                    };
                    stub.create(create(value.clone())).await.unwrap();
                    let again = stub
                        .create(create(Bytes::from_static(&[1])))
                        .await
                        .unwrap_err();
                    assert_eq!(again.code(), Code::AlreadyExists);
                    let got = stub
                        .retrieve(RetrieveRequest { key: key.clone() })
                        .await
                        .unwrap()
                        .into_inner()
                        .value;
                    assert_eq!(got, value, "create then retrieve returns the value");
                    let newer = Bytes::from(vec![0xAB; 7]);
                    stub.update(UpdateRequest {
                        key: key.clone(),
                        value: newer.clone(),
                    })
                    .await
                    .unwrap();
                    let got = stub
                        .retrieve(RetrieveRequest { key: key.clone() })
                        .await
                        .unwrap()
                        .into_inner()
                        .value;
                    assert_eq!(got, newer);
                    stub.delete(DeleteRequest { key: key.clone() })
                        .await
                        .unwrap();
                    let gone = stub
                        .retrieve(RetrieveRequest { key: key.clone() })
                        .await
                        .unwrap_err();
                    assert_eq!(gone.code(), Code::NotFound, "delete then retrieve");
                    let gone = stub
                        .update(UpdateRequest {
                            key: key.clone(),
                            value: Bytes::from_static(&[1]),
                        })
                        .await
                        .unwrap_err();
                    assert_eq!(gone.code(), Code::NotFound);
                }
            });
        }
        while let Some(t) = tasks.join_next().await {
            t.unwrap();
        }
    });
    server.shutdown().unwrap();
}

#[test]
fn one_sequential_client_reaches_the_theoretical_maximum_within_three_percent() {
    // The work model, not the machine: the original's 50 ms and 10 ms, eight times over
    // (320 ms of simulated work per RPC on average), so that an RPC's own cost in a debug
    // build on a machine busy with other builds (up to 5 ms measured) stays well inside the
    // 3 %; small values keep it small too. The default delays give 25 RPC/s (unit-tested).
    let params = any_port(KvParams {
        duration: Some(Duration::from_secs(16)),
        write_delay: Duration::from_millis(400),
        read_delay: Duration::from_millis(80),
        mean_value_size: 256,
        ..KvParams::default()
    });
    let outcome = kvstore::run(&params, &metrics(), &StopSignal::new()).unwrap();
    let client = outcome.client.as_ref().unwrap();
    let max = params.theoretical_max().unwrap();
    assert!((max - 3.125).abs() < 1e-9);
    let measured = client.rpcs_per_second();
    assert!(
        (measured / max - 1.0).abs() <= 0.03,
        "{measured:.2} RPC/s against a maximum of {max}: {client:?}"
    );
    assert_eq!(client.failures(), 0, "{client:?}");
    // A quarter reads, to the operation.
    let reads = client.per_op[1] as f64;
    assert!(
        (reads - client.rpcs as f64 * 0.25).abs() <= 1.0,
        "{client:?}"
    );
    let summary = kvstore::summary(&outcome);
    assert!(
        summary
            .lines
            .iter()
            .any(|l| l.starts_with("theoretical_max_rpcs_per_second: 3.12")),
        "{:?}",
        summary.lines
    );
    // Every answer said its work, so the client measured its RPCs' own cost.
    let cost = client.rpc_cost.expect("the RPC's cost beyond the work");
    assert!(
        cost > Duration::ZERO && cost < params.read_delay,
        "{cost:?}"
    );
    assert!(
        summary.lines.iter().any(|l| l.starts_with("rpc_cost_ms: ")),
        "{:?}",
        summary.lines
    );
}

#[test]
fn with_short_work_one_sequential_client_still_reaches_the_maximum_as_its_cost_is_accounted() {
    // 12 ms of work an RPC: an RPC's own cost (0.6 ms in a release build on a quiet
    // machine, several in a debug build on a busy one) would leave the client 5 % to 40 %
    // short of the maximum were it not taken out of the work; with it taken out, the
    // client keeps the schedule as long as the cost stays below the work, whatever the
    // machine's load (a stall is repaid by the RPCs after it).
    let params = any_port(KvParams {
        duration: Some(Duration::from_secs(6)),
        write_delay: Duration::from_millis(12),
        read_delay: Duration::from_millis(12),
        mean_value_size: 64,
        ..KvParams::default()
    });
    let outcome = kvstore::run(&params, &metrics(), &StopSignal::new()).unwrap();
    let client = outcome.client.as_ref().unwrap();
    let max = params.theoretical_max().unwrap();
    let measured = client.rpcs_per_second();
    assert!(
        (measured / max - 1.0).abs() <= 0.03,
        "{measured:.2} RPC/s against a maximum of {max:.2}, the RPC's own cost {:?}: {client:?}",
        client.rpc_cost
    );
    assert_eq!(client.failures(), 0, "{client:?}");
}

/// `message` as a request that says its client's RPCs cost `cost` beyond the work (the
/// header's text, in µs), or says nothing.
fn costed<T>(message: T, cost: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(cost) = cost {
        request
            .metadata_mut()
            .insert(COST_HEADER, cost.parse().unwrap());
    }
    request
}

/// The work an answer says its request was given, in µs.
fn work_said(metadata: &tonic::metadata::MetadataMap) -> Option<u64> {
    metadata.get(WORK_HEADER)?.to_str().ok()?.parse().ok()
}

#[test]
fn the_server_takes_the_clients_cost_out_of_the_work_and_says_what_it_gave() {
    let params = any_port(KvParams {
        write_delay: Duration::from_millis(500),
        read_delay: Duration::from_millis(300),
        ..KvParams::default()
    });
    let server = KvServer::start(&params, metrics()).unwrap();
    let addr = server.addr();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut stub = connect(addr).await.unwrap();
        let create = |key: &'static [u8]| CreateRequest {
            key: Bytes::from_static(key),
            value: Bytes::from_static(b"value"),
        };
        // No cost said (another client than benchtop's): the whole delay, from arrival.
        let t = Instant::now();
        let answer = stub.create(costed(create(b"a"), None)).await.unwrap();
        let whole = t.elapsed();
        assert_eq!(work_said(answer.metadata()), Some(500_000));
        assert!(whole >= params.write_delay, "{whole:?}");
        // A cost of 200 ms: 300 ms of work.
        let t = Instant::now();
        let answer = stub
            .create(costed(create(b"b"), Some("200000")))
            .await
            .unwrap();
        assert_eq!(work_said(answer.metadata()), Some(300_000));
        assert!(
            t.elapsed() >= Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
        // A cost beyond the delay: no work at all, so it answers before the RPC that had
        // the whole delay did.
        let t = Instant::now();
        let answer = stub
            .update(costed(
                UpdateRequest {
                    key: Bytes::from_static(b"a"),
                    value: Bytes::from_static(b"newer"),
                },
                Some("9000000"),
            ))
            .await
            .unwrap();
        assert_eq!(work_said(answer.metadata()), Some(0));
        assert!(t.elapsed() < whole, "{:?} against {whole:?}", t.elapsed());
        // A cost that is no number is ignored: the whole delay.
        let answer = stub
            .delete(costed(
                DeleteRequest {
                    key: Bytes::from_static(b"b"),
                },
                Some("soon"),
            ))
            .await
            .unwrap();
        assert_eq!(work_said(answer.metadata()), Some(500_000));
        // An answer that is a status says its work too (a retrieve's delay, less 100 ms).
        let status = stub
            .retrieve(costed(
                RetrieveRequest {
                    key: Bytes::from_static(b"b"),
                },
                Some("100000"),
            ))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(work_said(status.metadata()), Some(200_000));
    });
    server.shutdown().unwrap();
    // Without work, answers say nothing, so a client sends no cost.
    let params = any_port(KvParams {
        disable_work_simulation: true,
        ..KvParams::default()
    });
    let server = KvServer::start(&params, metrics()).unwrap();
    let addr = server.addr();
    runtime.block_on(async {
        let mut stub = connect(addr).await.unwrap();
        let answer = stub
            .delete(costed(
                DeleteRequest {
                    key: Bytes::from_static(b"x"),
                },
                Some("100"),
            ))
            .await
            .unwrap();
        assert_eq!(work_said(answer.metadata()), None);
    });
    server.shutdown().unwrap();
}

#[test]
fn a_client_without_a_server_says_where_it_looked() {
    // A port nothing listens on: bind one, then let it go.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let params = KvParams {
        role: Role::Client,
        connect: Some(free),
        duration: Some(Duration::from_secs(1)),
        ..KvParams::default()
    };
    let err = kvstore::run(&params, &metrics(), &StopSignal::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("cannot reach the server at {free}"))
            && err.contains("--role server"),
        "{err}"
    );
}

#[test]
fn a_taken_port_is_refused_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let params = KvParams {
        listen: Some(addr),
        ..KvParams::default()
    };
    let err = KvServer::start(&params, metrics()).unwrap_err().to_string();
    assert!(
        err.contains(&format!("listening on {addr}")) && err.contains("another server"),
        "{err}"
    );
}

#[test]
fn a_client_that_outruns_its_deadlines_counts_them_as_failures_and_finishes() {
    let params = any_port(KvParams {
        write_delay: Duration::from_millis(300),
        read_delay: Duration::from_millis(300),
        rpc_timeout: Duration::from_millis(50),
        concurrency: 4,
        mean_value_size: 64,
        duration: Some(Duration::from_secs(1)),
        ..KvParams::default()
    });
    let started = std::time::Instant::now();
    let outcome = kvstore::run(&params, &metrics(), &StopSignal::new()).unwrap();
    let client = outcome.client.unwrap();
    assert!(client.rpcs > 0, "{client:?}");
    let late = client
        .failures_by_code
        .get("DeadlineExceeded")
        .copied()
        .unwrap_or(0)
        + client
            .failures_by_code
            .get("Cancelled")
            .copied()
            .unwrap_or(0);
    assert_eq!(
        late, client.rpcs,
        "every RPC missed its deadline: {client:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "no wait past the deadlines"
    );
}

#[test]
fn an_open_loop_that_outruns_the_server_counts_latency_from_the_intended_start() {
    // 20 RPC/s against one outstanding RPC of 100 ms: the server keeps up with 10 a
    // second, so RPCs fall further and further behind their schedule, and the latencies,
    // counted from each RPC's intended start, say so (the service time alone is 100 ms).
    let params = any_port(KvParams {
        write_delay: Duration::from_millis(100),
        read_delay: Duration::from_millis(100),
        rate: Some(kvstore::Rate(20.0)),
        duration: Some(Duration::from_secs(2)),
        mean_value_size: 64,
        ..KvParams::default()
    });
    let m = metrics();
    let outcome = kvstore::run(&params, &m, &StopSignal::new()).unwrap();
    let client = outcome.client.unwrap();
    assert_eq!(client.rpcs, 40, "every scheduled RPC ran: {client:?}");
    let mut latency = benchtop_workloads::protocol::new_latency_histogram();
    m.rpc.swap(&mut latency);
    assert_eq!(latency.len(), 40);
    let (p50, max) = (latency.value_at_quantile(0.5), latency.max());
    assert!(
        p50 > 700_000_000 && max > 1_500_000_000,
        "p50 {p50} ns, max {max} ns: latency from the send, not the schedule"
    );
}
