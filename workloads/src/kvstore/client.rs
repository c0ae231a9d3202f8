//! The clients, shard per thread: `--client-threads` threads (at most one per client), each
//! with a current-thread runtime of its own, run their share of the clients; a client is
//! a connection of its own with `--concurrency` RPCs outstanding, picking operations and
//! keys as the original client did.
//!
//! What an RPC costs here beyond tonic's own work: nothing shared between threads (a
//! thread's clients keep their keys, mix, generator and counts on it, in cells: no locks,
//! no atomics of ours on the RPC path), no allocation or copy of ours for keys and values
//! (both are slices of one pool of random bytes made before the run, reference-counted
//! `Bytes` that prost encodes straight from), and one timer (the RPC's deadline; no
//! `grpc-timeout` header, so neither tonic's client layer nor the server arms another).
//!
//! Each client measures what its RPCs cost beyond the server's simulated work and sends
//! the mean with its requests, so that the server takes it out of the work (the rule in
//! [`super::schedule`]).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::bytes::Bytes;
use tokio::sync::Semaphore;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use super::operation::Operation;
use super::picks::{Mix, Picks, Pool, Rng, longest};
use super::proto::key_value_service_client::KeyValueServiceClient;
use super::proto::{CreateRequest, DeleteRequest, RetrieveRequest, UpdateRequest};
use super::schedule::{self, COST_HEADER, CostEstimate, WORK_HEADER};
use super::{DEFAULT_DURATION, KvMetrics, KvParams, NAME};
use crate::WorkloadError;
use crate::report::StopSignal;

/// How long a client tries to connect before the run fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the clients did.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ClientOutcome {
    /// RPCs completed, any answer.
    pub rpcs: u64,
    /// RPCs completed per operation, in [`Operation::ALL`]'s order.
    pub per_op: [u64; 4],
    /// Retrieves and updates answered NOT_FOUND.
    pub not_found: u64,
    /// Creates answered ALREADY_EXISTS.
    pub already_exists: u64,
    /// Bytes of keys and values the RPCs carried, requests and answers (what a copy of
    /// every message's payload would move).
    pub payload_bytes: u64,
    /// Failed RPCs by status code, e.g. `DeadlineExceeded`.
    pub failures_by_code: BTreeMap<String, u64>,
    /// The mean cost of an RPC beyond the simulated work the server gave it (its time
    /// from start to counted answer less that work), over the RPCs whose answers said
    /// their work; `None` against a server without work. Each client's recent mean of it
    /// was taken out of its next requests' work.
    pub rpc_cost: Option<Duration>,
    /// From the first RPC to the last answer.
    pub elapsed: Duration,
    /// Ended by a stop before the duration.
    pub stopped: bool,
}

impl ClientOutcome {
    /// RPCs completed per second.
    pub fn rpcs_per_second(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 { self.rpcs as f64 / s } else { 0.0 }
    }

    /// Payload bytes (keys and values, both ways) per second.
    pub fn payload_bytes_per_second(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.payload_bytes as f64 / s
        } else {
            0.0
        }
    }

    /// Failed RPCs, all codes.
    pub fn failures(&self) -> u64 {
        self.failures_by_code.values().sum()
    }
}

/// A client: its connection and its picks, on its thread.
#[derive(Debug)]
struct Client {
    stub: KeyValueServiceClient<Channel>,
    picks: RefCell<Picks>,
    /// What its RPCs cost beyond the simulated work, recently.
    cost: Cell<CostEstimate>,
}

/// A thread's counts, kept on it and added up when the run ends.
#[derive(Debug, Default)]
struct Counts {
    rpcs: u64,
    per_op: [u64; 4],
    not_found: u64,
    already_exists: u64,
    payload_bytes: u64,
    failures: BTreeMap<String, u64>,
    /// RPCs whose answers said their work, and their costs beyond it, in all.
    costed: u64,
    cost: Duration,
}

/// What a thread's clients share: the run's parameters, the pool, the metrics and the
/// thread's counts.
#[derive(Debug)]
struct Shard {
    params: KvParams,
    pool: Pool,
    metrics: KvMetrics,
    counts: RefCell<Counts>,
}

/// What a thread did: its counts and when its RPCs began and ended.
#[derive(Debug)]
struct ThreadOutcome {
    counts: Counts,
    began: Instant,
    ended: Instant,
}

/// Runs `params.clients` clients against `target` until the duration passes or `stop`.
pub fn run(
    params: &KvParams,
    target: SocketAddr,
    metrics: &KvMetrics,
    stop: &StopSignal,
) -> Result<ClientOutcome, WorkloadError> {
    let threads = super::client_threads(params);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let pool = Pool::new(longest(params), &mut Rng::seeded(seed));
    // Set when a thread fails (a connection refused), so that the others stop too.
    let abort = StopSignal::new();
    let results: Vec<Result<ThreadOutcome, WorkloadError>> = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        for t in 0..threads {
            let clients: Vec<u32> = (t as u32..params.clients).step_by(threads).collect();
            let (pool, abort) = (pool.clone(), &abort);
            let spawned = std::thread::Builder::new()
                .name("kv-client".to_owned())
                .spawn_scoped(scope, move || {
                    let outcome =
                        client_thread(params, target, metrics, stop, abort, pool, &clients, seed);
                    if outcome.is_err() {
                        abort.set();
                    }
                    outcome
                });
            match spawned {
                Ok(h) => handles.push(Ok(h)),
                Err(source) => {
                    abort.set();
                    handles.push(Err(WorkloadError::Thread {
                        thread: "kv-client",
                        source,
                    }));
                    break;
                }
            }
        }
        handles
            .into_iter()
            .map(|h| {
                h.and_then(|h| {
                    h.join().unwrap_or_else(|panic| {
                        Err(WorkloadError::Panicked {
                            what: "a kvstore client thread".to_owned(),
                            message: panic
                                .downcast_ref::<&str>()
                                .map(|s| (*s).to_owned())
                                .or_else(|| panic.downcast_ref::<String>().cloned())
                                .unwrap_or_default(),
                        })
                    })
                })
            })
            .collect()
    });
    let mut outcome = ClientOutcome {
        stopped: stop.is_set(),
        ..ClientOutcome::default()
    };
    let mut span: Option<(Instant, Instant)> = None;
    let (mut costed, mut cost) = (0u64, Duration::ZERO);
    for result in results {
        let t = result?;
        outcome.rpcs += t.counts.rpcs;
        for (sum, n) in outcome.per_op.iter_mut().zip(t.counts.per_op) {
            *sum += n;
        }
        outcome.not_found += t.counts.not_found;
        outcome.already_exists += t.counts.already_exists;
        outcome.payload_bytes += t.counts.payload_bytes;
        for (code, n) in t.counts.failures {
            *outcome.failures_by_code.entry(code).or_default() += n;
        }
        costed += t.counts.costed;
        cost += t.counts.cost;
        span = Some(span.map_or((t.began, t.ended), |(b, e)| {
            (b.min(t.began), e.max(t.ended))
        }));
    }
    outcome.elapsed = span.map_or(Duration::ZERO, |(b, e)| e.saturating_duration_since(b));
    outcome.rpc_cost =
        (costed > 0).then(|| Duration::from_secs_f64(cost.as_secs_f64() / costed as f64));
    Ok(outcome)
}

/// One client thread: its runtime, its clients' connections, their RPCs until the end.
#[allow(clippy::too_many_arguments)]
fn client_thread(
    params: &KvParams,
    target: SocketAddr,
    metrics: &KvMetrics,
    stop: &StopSignal,
    abort: &StopSignal,
    pool: Pool,
    clients: &[u32],
    seed: u64,
) -> Result<ThreadOutcome, WorkloadError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|source| WorkloadError::Runtime { threads: 1, source })?;
    let shard = Rc::new(Shard {
        params: params.clone(),
        pool,
        metrics: metrics.clone(),
        counts: RefCell::default(),
    });
    let local = tokio::task::LocalSet::new();
    let outcome = local.block_on(&runtime, async {
        let mut connected = Vec::with_capacity(clients.len());
        for &i in clients {
            connected.push(Rc::new(Client {
                stub: connect(target).await?,
                picks: RefCell::new(Picks::new(
                    Mix::new(params.read_fraction.0),
                    Rng::seeded(seed ^ u64::from(i).wrapping_mul(0x9e37_79b9)),
                )),
                cost: Cell::default(),
            }));
        }
        let began = Instant::now();
        let end = began + params.duration.unwrap_or(DEFAULT_DURATION);
        let mut tasks = tokio::task::JoinSet::new();
        for client in connected {
            match params.rate {
                None => {
                    for _ in 0..params.concurrency {
                        let (client, shard) = (client.clone(), shard.clone());
                        let (stop, abort) = (stop.clone(), abort.clone());
                        tasks.spawn_local(async move {
                            let mut stub = client.stub.clone();
                            loop {
                                let now = Instant::now();
                                if now >= end || stop.is_set() || abort.is_set() {
                                    break;
                                }
                                one_rpc(&client, &mut stub, &shard, now).await;
                            }
                        });
                    }
                }
                Some(rate) => {
                    let per_client = rate.0 / f64::from(params.clients);
                    tasks.spawn_local(open_loop(
                        client,
                        shard.clone(),
                        (stop.clone(), abort.clone()),
                        (began, end),
                        per_client,
                    ));
                }
            }
        }
        while let Some(joined) = tasks.join_next().await {
            if let Err(e) = joined {
                return Err(WorkloadError::Panicked {
                    what: "a kvstore client task".to_owned(),
                    message: e.to_string(),
                });
            }
        }
        Ok((began, Instant::now()))
    });
    drop(local);
    runtime.shutdown_timeout(Duration::from_secs(1));
    let (began, ended) = outcome?;
    let counts = Rc::try_unwrap(shard)
        .map(|s| s.counts.into_inner())
        .map_err(|_| WorkloadError::Broken {
            workload: NAME,
            reason: "a client task outlived its thread's run".to_owned(),
        })?;
    Ok(ThreadOutcome {
        counts,
        began,
        ended,
    })
}

/// Opens one connection to `target`, or says why not.
pub async fn connect(target: SocketAddr) -> Result<KeyValueServiceClient<Channel>, WorkloadError> {
    let refused = |reason: String| WorkloadError::Broken {
        workload: NAME,
        reason: format!(
            "cannot reach the server at {target}: {reason}; is a kvstore server running \
             there (--role server --listen {target})?"
        ),
    };
    let endpoint = Endpoint::from_shared(format!("http://{target}"))
        .map_err(|e| refused(e.to_string()))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true);
    let channel = tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect())
        .await
        .map_err(|_| refused(format!("no connection within {CONNECT_TIMEOUT:?}")))?
        .map_err(|e| {
            let mut reason = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                reason.push_str(": ");
                reason.push_str(&s.to_string());
                source = s.source();
            }
            refused(reason)
        })?;
    Ok(KeyValueServiceClient::new(channel)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX))
}

/// Starts RPCs at `per_second` on schedule, at most `concurrency` outstanding; each
/// RPC's latency counts from its intended start, so a server that falls behind shows in
/// the latencies rather than in a slower schedule (coordinated omission corrected).
async fn open_loop(
    client: Rc<Client>,
    shard: Rc<Shard>,
    (stop, abort): (StopSignal, StopSignal),
    (start, end): (Instant, Instant),
    per_second: f64,
) {
    let permits = Arc::new(Semaphore::new(shard.params.concurrency as usize));
    let mut inflight = tokio::task::JoinSet::new();
    for i in 0u64.. {
        let intended = start + Duration::from_secs_f64(i as f64 / per_second);
        if intended >= end || stop.is_set() || abort.is_set() {
            break;
        }
        tokio::time::sleep_until(intended.into()).await;
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let (client, shard) = (client.clone(), shard.clone());
        inflight.spawn_local(async move {
            let mut stub = client.stub.clone();
            one_rpc(&client, &mut stub, &shard, intended).await;
            drop(permit);
        });
        // Reap what finished, so the set does not grow with the run.
        while inflight.try_join_next().is_some() {}
    }
    while inflight.join_next().await.is_some() {}
}

/// `message` as a request that says what the client's RPCs cost beyond their work, once
/// it knows.
fn ask<T>(message: T, cost: Option<Duration>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(cost) = cost {
        schedule::write_us(request.metadata_mut(), COST_HEADER, cost);
    }
    request
}

/// The work the server gave an answered request, when it said.
fn work_of<T>(response: &tonic::Response<T>) -> Option<Duration> {
    schedule::read_us(response.metadata(), WORK_HEADER)
}

/// One RPC on `stub`: picks the operation and key, calls, records the latency from
/// `since` and counts the answer; then adds what it cost beyond the work the server
/// gave it (from its start here to now) to the client's estimate.
async fn one_rpc(
    client: &Client,
    stub: &mut KeyValueServiceClient<Channel>,
    shard: &Shard,
    since: Instant,
) {
    let began = Instant::now();
    let cost = client.cost.get().get();
    let params = &shard.params;
    let (op, key, value) = {
        let mut picks = client.picks.borrow_mut();
        let Picks { keys, mix, rng } = &mut *picks;
        let mut op = mix.next(rng);
        let known = keys.pick(rng);
        if known.is_none() && op != Operation::Create {
            // Nothing to read, update or delete: create, and keep a read owed for later,
            // so that the share of reads stays what was asked.
            if op == Operation::Retrieve {
                mix.owe_read();
            }
            op = Operation::Create;
        }
        let key = match (op, known) {
            (Operation::Create, _) | (_, None) => {
                let size = rng.size(params.mean_key_size);
                shard.pool.cut(size, rng)
            }
            (_, Some(key)) => key,
        };
        if op == Operation::Delete {
            // As the original: forgotten before the call, whatever it answers.
            keys.remove(&key);
        }
        let value = if matches!(op, Operation::Create | Operation::Update) {
            let size = rng.size(params.mean_value_size);
            shard.pool.cut(size, rng)
        } else {
            Bytes::new()
        };
        (op, key, value)
    };
    let sent = key.len() + value.len();
    // Each call's answer: the bytes of the value it carried back, and the work the
    // server gave it.
    let call = async {
        match op {
            Operation::Create => stub
                .create(ask(
                    CreateRequest {
                        key: key.clone(),
                        value,
                    },
                    cost,
                ))
                .await
                .map(|r| (0, work_of(&r))),
            Operation::Retrieve => stub
                .retrieve(ask(RetrieveRequest { key: key.clone() }, cost))
                .await
                .map(|r| {
                    let work = work_of(&r);
                    (r.into_inner().value.len(), work)
                }),
            Operation::Update => stub
                .update(ask(
                    UpdateRequest {
                        key: key.clone(),
                        value,
                    },
                    cost,
                ))
                .await
                .map(|r| (0, work_of(&r))),
            Operation::Delete => stub
                .delete(ask(DeleteRequest { key: key.clone() }, cost))
                .await
                .map(|r| (0, work_of(&r))),
        }
    };
    // The RPC's deadline, its one timer: nothing waits past it, whatever the transport.
    let answer = match tokio::time::timeout(params.rpc_timeout, call).await {
        Ok(answer) => answer,
        Err(_) => Err(Status::deadline_exceeded("no answer within --rpc-timeout")),
    };
    let latency = since.elapsed();
    let metrics = &shard.metrics;
    metrics.rpc.record_duration(latency);
    metrics.per_op[op.index()].record_duration(latency);
    metrics.rpcs.increment();
    let mut counts = shard.counts.borrow_mut();
    counts.rpcs += 1;
    counts.per_op[op.index()] += 1;
    counts.payload_bytes += sent as u64;
    let work = match &answer {
        Ok((_, work)) => *work,
        Err(status) => schedule::read_us(status.metadata(), WORK_HEADER),
    };
    match answer {
        Ok((received, _)) => {
            counts.payload_bytes += received as u64;
            if op == Operation::Create {
                client.picks.borrow_mut().keys.add(key);
            }
        }
        Err(status) => match (op, status.code()) {
            (Operation::Create, Code::AlreadyExists) => {
                counts.already_exists += 1;
                metrics.already_exists.increment();
            }
            (Operation::Retrieve | Operation::Update, Code::NotFound) => {
                client.picks.borrow_mut().keys.remove(&key);
                counts.not_found += 1;
                metrics.not_found.increment();
            }
            (_, code) => {
                metrics.failures.increment();
                *counts.failures.entry(format!("{code:?}")).or_default() += 1;
            }
        },
    }
    if let Some(work) = work {
        let beyond = CostEstimate::cost_of(began.elapsed(), work);
        counts.costed += 1;
        counts.cost += beyond;
        let mut estimate = client.cost.get();
        estimate.add(beyond);
        client.cost.set(estimate);
    }
}
