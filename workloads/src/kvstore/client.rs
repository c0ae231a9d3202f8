//! The clients: each a connection of its own with `--concurrency` RPCs outstanding,
//! picking operations and keys as the original client did.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};

use super::proto::key_value_service_client::KeyValueServiceClient;
use super::proto::{CreateRequest, DeleteRequest, RetrieveRequest, UpdateRequest};
use super::{DEFAULT_DURATION, KvMetrics, KvParams, NAME};
use crate::WorkloadError;
use crate::report::StopSignal;

/// How long a client tries to connect before the run fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Sizes are capped at this multiple of their mean (the exponential tail is unbounded;
/// gRPC's messages are not).
const MAX_SIZE_OVER_MEAN: f64 = 16.0;

/// The four operations of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Store a new key.
    Create,
    /// Read a key.
    Retrieve,
    /// Replace a key's value.
    Update,
    /// Remove a key.
    Delete,
}

impl Operation {
    /// Every operation, in the order of their histograms.
    pub const ALL: [Operation; 4] = [
        Operation::Create,
        Operation::Retrieve,
        Operation::Update,
        Operation::Delete,
    ];

    /// The operation's name, as its latency histogram is named.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Retrieve => "retrieve",
            Operation::Update => "update",
            Operation::Delete => "delete",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

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
    /// Failed RPCs by status code, e.g. `DeadlineExceeded`.
    pub failures_by_code: BTreeMap<String, u64>,
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

    /// Failed RPCs, all codes.
    pub fn failures(&self) -> u64 {
        self.failures_by_code.values().sum()
    }
}

/// A small, fast generator for keys, values and choices (not for anything secret).
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn seeded(seed: u64) -> Rng {
        // SplitMix64 of the seed, so near seeds give unrelated streams.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// Random bytes, their count drawn from an exponential distribution of mean `mean`
    /// (as the original's sizes), at least 1.
    fn bytes(&mut self, mean: u32) -> Vec<u8> {
        let mean = f64::from(mean);
        let size = (-(1.0 - self.unit()).ln() * mean)
            .round()
            .clamp(1.0, mean * MAX_SIZE_OVER_MEAN) as usize;
        let mut out = Vec::with_capacity(size + 8);
        while out.len() < size {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(size);
        out
    }
}

/// The keys a client knows to exist, with O(1) random pick and removal.
#[derive(Debug, Default)]
struct Keys {
    list: Vec<Vec<u8>>,
    index: HashMap<Vec<u8>, usize>,
}

impl Keys {
    fn add(&mut self, key: Vec<u8>) {
        if !self.index.contains_key(&key) {
            self.index.insert(key.clone(), self.list.len());
            self.list.push(key);
        }
    }

    fn remove(&mut self, key: &[u8]) {
        if let Some(i) = self.index.remove(key) {
            self.list.swap_remove(i);
            if let Some(moved) = self.list.get(i) {
                self.index.insert(moved.clone(), i);
            }
        }
    }

    fn pick(&self, rng: &mut Rng) -> Option<Vec<u8>> {
        (!self.list.is_empty()).then(|| self.list[rng.below(self.list.len())].clone())
    }
}

/// The operation mix: reads are kept at exactly `read_fraction` of the operations (a
/// deficit counter, so a short run does not wander with the draw), the rest split evenly
/// and at random between create, update and delete, as the original's client picked them.
#[derive(Debug)]
struct Mix {
    read_fraction: f64,
    reads_due: f64,
}

impl Mix {
    fn next(&mut self, rng: &mut Rng) -> Operation {
        self.reads_due += self.read_fraction;
        if self.reads_due >= 1.0 - 1e-9 {
            self.reads_due -= 1.0;
            return Operation::Retrieve;
        }
        match rng.below(3) {
            0 => Operation::Create,
            1 => Operation::Update,
            _ => Operation::Delete,
        }
    }
}

/// A client's shared state: its connection, keys, mix and generator.
#[derive(Debug)]
struct Client {
    stub: KeyValueServiceClient<Channel>,
    state: Mutex<(Keys, Mix, Rng)>,
}

/// Counts shared by every client.
#[derive(Debug, Default)]
struct Tally {
    rpcs: AtomicU64,
    per_op: [AtomicU64; 4],
    not_found: AtomicU64,
    already_exists: AtomicU64,
    failures: Mutex<BTreeMap<String, u64>>,
}

/// Runs `params.clients` clients against `target` until the duration passes or `stop`.
pub fn run(
    params: &KvParams,
    target: SocketAddr,
    metrics: &KvMetrics,
    stop: &StopSignal,
) -> Result<ClientOutcome, WorkloadError> {
    let threads = super::runtime_threads(params.client_threads);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("kv-client")
        .enable_io()
        .enable_time()
        .build()
        .map_err(|source| WorkloadError::Runtime {
            threads: threads as u16,
            source,
        })?;
    let outcome = runtime.block_on(drive(params, target, metrics, stop));
    runtime.shutdown_timeout(Duration::from_secs(1));
    outcome
}

/// Opens one connection to `target`, or says why not.
pub async fn connect(
    target: SocketAddr,
    rpc_timeout: Duration,
) -> Result<KeyValueServiceClient<Channel>, WorkloadError> {
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
        .timeout(rpc_timeout)
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

async fn drive(
    params: &KvParams,
    target: SocketAddr,
    metrics: &KvMetrics,
    stop: &StopSignal,
) -> Result<ClientOutcome, WorkloadError> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut clients = Vec::new();
    for i in 0..params.clients {
        clients.push(Arc::new(Client {
            stub: connect(target, params.rpc_timeout).await?,
            state: Mutex::new((
                Keys::default(),
                Mix {
                    read_fraction: params.read_fraction.0,
                    reads_due: 0.0,
                },
                Rng::seeded(seed ^ u64::from(i).wrapping_mul(0x9e37_79b9)),
            )),
        }));
    }
    let tally = Arc::new(Tally::default());
    let start = Instant::now();
    let end = start + params.duration.unwrap_or(DEFAULT_DURATION);
    let mut tasks = tokio::task::JoinSet::new();
    for client in &clients {
        match params.rate {
            None => {
                for _ in 0..params.concurrency {
                    let (client, tally, metrics, stop, params) = (
                        client.clone(),
                        tally.clone(),
                        metrics.clone(),
                        stop.clone(),
                        params.clone(),
                    );
                    tasks.spawn(async move {
                        while !stop.is_set() && Instant::now() < end {
                            let began = Instant::now();
                            one_rpc(&client, &params, &tally, &metrics, began).await;
                        }
                    });
                }
            }
            Some(rate) => {
                let per_client = rate.0 / f64::from(params.clients);
                let (client, tally, metrics, stop, params) = (
                    client.clone(),
                    tally.clone(),
                    metrics.clone(),
                    stop.clone(),
                    params.clone(),
                );
                tasks.spawn(open_loop(
                    client, params, tally, metrics, stop, start, end, per_client,
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
    let elapsed = start.elapsed();
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    Ok(ClientOutcome {
        rpcs: load(&tally.rpcs),
        per_op: [0, 1, 2, 3].map(|i| load(&tally.per_op[i])),
        not_found: load(&tally.not_found),
        already_exists: load(&tally.already_exists),
        failures_by_code: tally
            .failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone(),
        elapsed,
        stopped: stop.is_set(),
    })
}

/// Starts RPCs at `per_second` on schedule, at most `concurrency` outstanding; each
/// RPC's latency counts from its intended start, so a server that falls behind shows in
/// the latencies rather than in a slower schedule (coordinated omission corrected).
#[allow(clippy::too_many_arguments)]
async fn open_loop(
    client: Arc<Client>,
    params: KvParams,
    tally: Arc<Tally>,
    metrics: KvMetrics,
    stop: StopSignal,
    start: Instant,
    end: Instant,
    per_second: f64,
) {
    let permits = Arc::new(Semaphore::new(params.concurrency as usize));
    let params = Arc::new(params);
    let mut inflight = tokio::task::JoinSet::new();
    for i in 0u64.. {
        let intended = start + Duration::from_secs_f64(i as f64 / per_second);
        if intended >= end || stop.is_set() {
            break;
        }
        tokio::time::sleep_until(intended.into()).await;
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let (client, params, tally, metrics) = (
            client.clone(),
            params.clone(),
            tally.clone(),
            metrics.clone(),
        );
        inflight.spawn(async move {
            one_rpc(&client, &params, &tally, &metrics, intended).await;
            drop(permit);
        });
        // Reap what finished, so the set does not grow with the run.
        while inflight.try_join_next().is_some() {}
    }
    while inflight.join_next().await.is_some() {}
}

/// One RPC: picks the operation and key, calls, records the latency from `since` and
/// counts the answer.
async fn one_rpc(
    client: &Client,
    params: &KvParams,
    tally: &Tally,
    metrics: &KvMetrics,
    since: Instant,
) {
    let (op, key, value) = {
        let mut state = client.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (keys, mix, rng) = &mut *state;
        let mut op = mix.next(rng);
        let known = keys.pick(rng);
        if known.is_none() && op != Operation::Create {
            // Nothing to read, update or delete: create, and keep a read owed for later,
            // so that the share of reads stays what was asked.
            if op == Operation::Retrieve {
                mix.reads_due += 1.0;
            }
            op = Operation::Create;
        }
        let key = match (op, known) {
            (Operation::Create, _) | (_, None) => rng.bytes(params.mean_key_size),
            (_, Some(key)) => key,
        };
        if op == Operation::Delete {
            // As the original: forgotten before the call, whatever it answers.
            keys.remove(&key);
        }
        let value = matches!(op, Operation::Create | Operation::Update)
            .then(|| rng.bytes(params.mean_value_size));
        (op, key, value)
    };
    let mut stub = client.stub.clone();
    let deadline = params.rpc_timeout;
    let call = async {
        match op {
            Operation::Create => stub
                .create(with_deadline(
                    CreateRequest {
                        key: key.clone(),
                        value: value.unwrap_or_default(),
                    },
                    deadline,
                ))
                .await
                .map(drop),
            Operation::Retrieve => stub
                .retrieve(with_deadline(
                    RetrieveRequest { key: key.clone() },
                    deadline,
                ))
                .await
                .map(drop),
            Operation::Update => stub
                .update(with_deadline(
                    UpdateRequest {
                        key: key.clone(),
                        value: value.unwrap_or_default(),
                    },
                    deadline,
                ))
                .await
                .map(drop),
            Operation::Delete => stub
                .delete(with_deadline(DeleteRequest { key: key.clone() }, deadline))
                .await
                .map(drop),
        }
    };
    // The channel's timeout cancels a late call too; this one makes sure nothing waits
    // past the deadline, whatever the transport does.
    let answer = match tokio::time::timeout(deadline + Duration::from_millis(100), call).await {
        Ok(answer) => answer,
        Err(_) => Err(Status::deadline_exceeded("no answer within --rpc-timeout")),
    };
    let latency = since.elapsed();
    metrics.rpc.record_duration(latency);
    metrics.per_op[op.index()].record_duration(latency);
    metrics.rpcs.increment();
    tally.rpcs.fetch_add(1, Ordering::Relaxed);
    tally.per_op[op.index()].fetch_add(1, Ordering::Relaxed);
    match answer {
        Ok(()) => {
            if op == Operation::Create {
                lock(&client.state).0.add(key);
            }
        }
        Err(status) => match (op, status.code()) {
            (Operation::Create, Code::AlreadyExists) => {
                tally.already_exists.fetch_add(1, Ordering::Relaxed);
                metrics.already_exists.increment();
            }
            (Operation::Retrieve | Operation::Update, Code::NotFound) => {
                lock(&client.state).0.remove(&key);
                tally.not_found.fetch_add(1, Ordering::Relaxed);
                metrics.not_found.increment();
            }
            (_, code) => {
                metrics.failures.increment();
                *tally
                    .failures
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(format!("{code:?}"))
                    .or_default() += 1;
            }
        },
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `message` as a request the server sees the deadline of (`grpc-timeout`).
fn with_deadline<T>(message: T, deadline: Duration) -> Request<T> {
    let mut request = Request::new(message);
    request.set_timeout(deadline);
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_keeps_reads_at_their_fraction_and_writes_split_three_ways() {
        let mut mix = Mix {
            read_fraction: 0.25,
            reads_due: 0.0,
        };
        let mut rng = Rng::seeded(7);
        let mut counts = HashMap::new();
        for _ in 0..4000 {
            *counts.entry(mix.next(&mut rng)).or_insert(0) += 1;
        }
        assert_eq!(counts[&Operation::Retrieve], 1000);
        for op in [Operation::Create, Operation::Update, Operation::Delete] {
            assert!(
                (900..1100).contains(&counts[&op]),
                "{op:?}: {}",
                counts[&op]
            );
        }
    }

    #[test]
    fn sizes_are_exponential_around_their_mean_and_capped() {
        let mut rng = Rng::seeded(3);
        let sizes: Vec<usize> = (0..20_000).map(|_| rng.bytes(64).len()).collect();
        let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
        assert!((58.0..70.0).contains(&mean), "{mean}");
        assert!(sizes.iter().all(|&s| (1..=64 * 16).contains(&s)));
    }

    #[test]
    fn known_keys_add_pick_and_remove_in_constant_time() {
        let mut keys = Keys::default();
        let mut rng = Rng::seeded(1);
        for k in [b"a", b"b", b"c"] {
            keys.add(k.to_vec());
        }
        keys.add(b"b".to_vec());
        assert_eq!(keys.list.len(), 3);
        keys.remove(b"a");
        keys.remove(b"zz");
        assert_eq!(keys.list.len(), 2);
        for _ in 0..10 {
            let k = keys.pick(&mut rng).unwrap();
            assert!(k == b"b" || k == b"c");
        }
        keys.remove(b"b");
        keys.remove(b"c");
        assert!(keys.pick(&mut rng).is_none());
    }
}
