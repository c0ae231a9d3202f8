//! The key-value server: a concurrent map behind the gRPC service, simulated work as a
//! blocking sleep on the runtime's blocking pool, and a runtime of its own.
//!
//! Keys and values arrive as `Bytes` slices of the request's buffer (prost decodes byte
//! fields without a copy). A large one is stored as it came; a small one is copied out
//! (below [`OWN_BELOW`]), so that a 64-byte value does not keep its request's whole
//! buffer alive in the map. A retrieve answers with the stored `Bytes` (a reference
//! count; the one copy is the encoding's).
//!
//! A request's simulated work ends at its arrival plus its delay, less the RPC's own cost
//! when a benchtop client says what that is (the rule in [`super::schedule`]); every
//! answer to a request with work says the work it was given.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use prost::bytes::Bytes;
use tokio::sync::oneshot;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

use super::operation::Operation;
use super::proto::key_value_service_server::{KeyValueService, KeyValueServiceServer};
use super::proto::{
    CreateRequest, CreateResponse, DeleteRequest, DeleteResponse, RetrieveRequest,
    RetrieveResponse, UpdateRequest, UpdateResponse,
};
use super::schedule::{self, COST_HEADER, WORK_HEADER};
use super::{KvMetrics, KvParams, NAME};
use crate::WorkloadError;

/// How long a shutdown waits for RPCs in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Keys and values shorter than this are copied out of their request's buffer before
/// they are stored; longer ones are stored as slices of it (they are most of it).
const OWN_BELOW: usize = 4096;

/// `bytes` to keep in the map: small ones copied out of the request buffer they point
/// into, large ones as they are.
fn owned(bytes: Bytes) -> Bytes {
    if bytes.len() < OWN_BELOW {
        Bytes::copy_from_slice(&bytes)
    } else {
        bytes
    }
}

/// When a request's headers reached the service, before its message was read and
/// decoded (a request extension, set by [`stamp_arrival`]).
#[derive(Debug, Clone, Copy)]
struct Arrived(Instant);

/// The interceptor that stamps each request with its arrival, so that its simulated work
/// ends a fixed time after the server received it: the request's own reading, decoding
/// and dispatch count within the work, as in a server whose work starts on receipt.
#[allow(clippy::result_large_err)]
fn stamp_arrival(mut request: Request<()>) -> Result<Request<()>, Status> {
    request.extensions_mut().insert(Arrived(Instant::now()));
    Ok(request)
}

/// The service: the map and the work each operation simulates.
#[derive(Debug, Clone)]
pub struct KvService {
    store: Arc<DashMap<Bytes, Bytes>>,
    write_delay: Duration,
    read_delay: Duration,
    /// RPCs answered, when the server reports its own (`--role server`).
    served: Option<KvMetrics>,
    /// Nanoseconds the blocking pool's threads spent in the simulated work's sleeps.
    slept: Arc<AtomicU64>,
}

impl KvService {
    /// A service with an empty map; `served` counts answered RPCs into its `rpcs`.
    pub fn new(params: &KvParams, served: Option<KvMetrics>) -> Self {
        KvService {
            store: Arc::new(DashMap::new()),
            write_delay: params.work(Operation::Create),
            read_delay: params.work(Operation::Retrieve),
            served,
            slept: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The time the simulated work's sleeps took so far, each from its start to the
    /// moment its thread ran again.
    pub fn work_slept(&self) -> Duration {
        Duration::from_nanos(self.slept.load(Ordering::Relaxed))
    }

    /// Keys in the map.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// Whether it simulates work (so its requests need their arrival stamped).
    fn works(&self) -> bool {
        !(self.write_delay.is_zero() && self.read_delay.is_zero())
    }

    fn answered(&self) {
        if let Some(m) = &self.served {
            m.rpcs.increment();
        }
    }
}

/// The work `request` is given: `delay` less the cost its client says its RPCs take
/// beyond the work ([`schedule::work_for`]).
fn work_of<T>(delay: Duration, request: &Request<T>) -> Duration {
    if delay.is_zero() {
        return delay;
    }
    schedule::work_for(delay, schedule::read_us(request.metadata(), COST_HEADER))
}

/// `answer`, saying the `work` its request was given when its operation simulates work
/// (`delay` above zero), so that the client can tell the RPC's own cost from it.
fn with_work<T>(
    mut answer: Result<Response<T>, Status>,
    delay: Duration,
    work: Duration,
) -> Result<Response<T>, Status> {
    if !delay.is_zero() {
        let metadata = match &mut answer {
            Ok(response) => response.metadata_mut(),
            Err(status) => status.metadata_mut(),
        };
        schedule::write_us(metadata, WORK_HEADER, work);
    }
    answer
}

/// When `request` arrived: its stamp, or now when it has none.
fn arrival<T>(request: &Request<T>) -> Instant {
    request
        .extensions()
        .get::<Arrived>()
        .map_or_else(Instant::now, |a| a.0)
}

/// The server's simulated work: the calling task waits while a thread of the blocking
/// pool sleeps until `work` after the request arrived (`since`), as the original's
/// executor thread did. The sleeping thread is off-CPU with this function on its stack,
/// which is what an off-CPU profile shows.
#[inline(never)]
async fn simulate_work(
    work: Duration,
    since: Instant,
    slept: &Arc<AtomicU64>,
) -> Result<(), Status> {
    if work.is_zero() {
        return Ok(());
    }
    let until = since + work;
    let slept = Arc::clone(slept);
    tokio::task::spawn_blocking(move || {
        let took = sleep_for_work(until);
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        slept.fetch_add(ns, Ordering::Relaxed);
    })
    .await
    .map_err(|e| Status::internal(format!("simulated work failed: {e}")))
}

/// The sleep itself, named so that off-CPU stacks say what the time went to; returns
/// how long it took, to the moment the thread ran again. A request that waited past
/// its work's end (a loaded machine) sleeps less, or not at all.
#[inline(never)]
fn sleep_for_work(until: Instant) -> Duration {
    let start = Instant::now();
    let rest = until.saturating_duration_since(start);
    if rest.is_zero() {
        return rest;
    }
    std::thread::sleep(rest);
    start.elapsed()
}

/// Makes the calling thread's timed sleeps end when asked: Linux lets a sleep overrun by
/// the thread's timer slack (50 µs by default), which simulated work of 40 ms an RPC
/// would show as a 0.1 % shortfall of its own.
fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long and changes only the calling
    // thread's timer slack; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

#[tonic::async_trait]
impl KeyValueService for KvService {
    async fn create(
        &self,
        request: Request<CreateRequest>,
    ) -> Result<Response<CreateResponse>, Status> {
        let work = work_of(self.write_delay, &request);
        simulate_work(work, arrival(&request), &self.slept).await?;
        let CreateRequest { key, value } = request.into_inner();
        let answer = match self.store.entry(owned(key)) {
            Entry::Occupied(_) => Err(Status::already_exists("key already exists")),
            Entry::Vacant(slot) => {
                slot.insert(owned(value));
                Ok(Response::new(CreateResponse {}))
            }
        };
        self.answered();
        with_work(answer, self.write_delay, work)
    }

    async fn retrieve(
        &self,
        request: Request<RetrieveRequest>,
    ) -> Result<Response<RetrieveResponse>, Status> {
        let work = work_of(self.read_delay, &request);
        simulate_work(work, arrival(&request), &self.slept).await?;
        let key = request.into_inner().key;
        let answer = match self.store.get(&key[..]) {
            Some(value) => Ok(Response::new(RetrieveResponse {
                value: value.clone(),
            })),
            None => Err(Status::not_found("key not found")),
        };
        self.answered();
        with_work(answer, self.read_delay, work)
    }

    async fn update(
        &self,
        request: Request<UpdateRequest>,
    ) -> Result<Response<UpdateResponse>, Status> {
        let work = work_of(self.write_delay, &request);
        simulate_work(work, arrival(&request), &self.slept).await?;
        let UpdateRequest { key, value } = request.into_inner();
        let answer = match self.store.get_mut(&key[..]) {
            Some(mut slot) => {
                *slot = owned(value);
                Ok(Response::new(UpdateResponse {}))
            }
            None => Err(Status::not_found("key not found")),
        };
        self.answered();
        with_work(answer, self.write_delay, work)
    }

    async fn delete(
        &self,
        request: Request<DeleteRequest>,
    ) -> Result<Response<DeleteResponse>, Status> {
        let work = work_of(self.write_delay, &request);
        simulate_work(work, arrival(&request), &self.slept).await?;
        self.store.remove(&request.into_inner().key[..]);
        self.answered();
        with_work(Ok(Response::new(DeleteResponse {})), self.write_delay, work)
    }
}

/// Serves `service` on `listener` until `shutdown` resolves; a service that simulates
/// work has its requests' arrival stamped first.
pub async fn serve(
    service: KvService,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let works = service.works();
    let service = KeyValueServiceServer::new(service).max_decoding_message_size(usize::MAX);
    if works {
        Server::builder()
            .serve_with_incoming_shutdown(
                tonic::service::interceptor::InterceptedService::new(service, stamp_arrival),
                incoming,
                shutdown,
            )
            .await
    } else {
        Server::builder()
            .serve_with_incoming_shutdown(service, incoming, shutdown)
            .await
    }
}

/// A server running on a runtime of its own (threads `kv-server`).
#[derive(Debug)]
pub struct KvServer {
    runtime: tokio::runtime::Runtime,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    served: Arc<crate::report::Counter>,
    count_served: bool,
    slept: Arc<AtomicU64>,
}

/// What a server did, read when it shut down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Served {
    /// RPCs it answered (counted only for a server alone; 0 otherwise).
    pub rpcs: u64,
    /// The time its simulated work's sleeps took ([`KvService::work_slept`]).
    pub work_slept: Duration,
}

impl KvServer {
    /// Binds `params.listen_addr()` (port 0 picks one) and starts serving.
    pub fn start(params: &KvParams, metrics: KvMetrics) -> Result<KvServer, WorkloadError> {
        let addr = params.listen_addr();
        // The work is sleeping, not computing: the blocking pool holds the sleepers.
        let threads = super::server_threads(params);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("kv-server")
            .on_thread_start(tight_timer_slack)
            .enable_io()
            .enable_time()
            .build()
            .map_err(|source| WorkloadError::Runtime {
                threads: threads as u16,
                source,
            })?;
        let std_listener =
            std::net::TcpListener::bind(addr).map_err(|source| WorkloadError::Ipc {
                workload: NAME,
                context: format!(
                    "listening on {addr}{}",
                    if source.kind() == std::io::ErrorKind::AddrInUse {
                        " (another server holds the port: --listen another, or port 0 for any)"
                    } else {
                        ""
                    }
                ),
                source,
            })?;
        let bound = std_listener
            .local_addr()
            .map_err(|source| WorkloadError::Ipc {
                workload: NAME,
                context: format!("reading the address bound for {addr}"),
                source,
            })?;
        std_listener
            .set_nonblocking(true)
            .map_err(|source| WorkloadError::Ipc {
                workload: NAME,
                context: "making the listener non-blocking".to_owned(),
                source,
            })?;
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(std_listener).map_err(|source| {
                WorkloadError::Ipc {
                    workload: NAME,
                    context: "registering the listener".to_owned(),
                    source,
                }
            })?
        };
        // A server alone counts what it serves; with clients here, they count.
        let count_served = params.role == super::Role::Server;
        let served = metrics.rpcs.clone();
        let service = KvService::new(params, count_served.then_some(metrics));
        let slept = Arc::clone(&service.slept);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = runtime.spawn(serve(service, listener, async move {
            let _ = stopped.await;
        }));
        Ok(KvServer {
            runtime,
            addr: bound,
            stop: Some(stop),
            task,
            served,
            count_served,
            slept,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets RPCs in flight finish (for a few seconds at most), and returns
    /// what it did.
    pub fn shutdown(mut self) -> Result<Served, WorkloadError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task;
        let result = self
            .runtime
            .block_on(async { tokio::time::timeout(SHUTDOWN_GRACE, task).await });
        self.runtime.shutdown_timeout(Duration::from_secs(1));
        match result {
            Ok(Ok(Ok(()))) | Err(_) => {}
            Ok(Ok(Err(e))) => {
                return Err(WorkloadError::Broken {
                    workload: NAME,
                    reason: format!("the server failed: {e}"),
                });
            }
            Ok(Err(e)) => {
                return Err(WorkloadError::Panicked {
                    what: "the kvstore server".to_owned(),
                    message: e.to_string(),
                });
            }
        }
        Ok(Served {
            rpcs: if self.count_served {
                self.served.get()
            } else {
                0
            },
            work_slept: Duration::from_nanos(self.slept.load(Ordering::Relaxed)),
        })
    }
}
