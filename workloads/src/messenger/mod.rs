//! `messenger`: Ceph's crimson messenger against its async messenger, after
//! perf-crimson-msgr and the study that compared them.
//!
//! A server echoes fixed-size messages ([`frame`]: a 16-byte header with length, checksum
//! and sequence number, then `--msg-size` bytes) to clients that keep `--depth` messages
//! outstanding on each of their connections. The server is either shard per core
//! (`--server crimson`: a pinned thread, runtime and SO_REUSEPORT listener per CPU of
//! `--server-cpuset`, nothing shared while serving) or a shared pool (`--server async`:
//! one multi-threaded runtime over the same CPUs). The clients are shard per core, as the
//! originals' ([`client`]).
//!
//! CPU sets take the originals' syntax (`0-3,56-59`, [`cpuset::CpuSet`]); without them
//! `--cpu-alloc balanced|separated` computes them from this machine's topology and says
//! what the machine cannot do. `--instances 2` runs two server/client pairs side by side,
//! each on half the machine (the study's left/right experiment), each recorded under its
//! own tag. Each second a line gives messages, IOPS, MB/s, mean latency and the CPU% of
//! each server core ([`progress`]); the run ends with the originals' `all(depth=…)` block.
//!
//! `--poll-mode`, as seastar's: the crimson shards and the client threads busy-poll their
//! sockets instead of sleeping in `epoll_wait`, and the shards' busy share of their time
//! (the rest is polling that found nothing) is printed beside their CPU% ([`reactor`]).

pub mod client;
pub mod cpuset;
pub mod frame;
pub mod progress;
pub mod reactor;
pub mod server;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use self::client::{ClientOutcome, ClientPlan};
use self::cpuset::{CpuAlloc, CpuSet, Topology};
use self::progress::{Block, CpuTimes, Line};
use self::reactor::ReactorTimes;
use self::server::Server;
use crate::WorkloadError;
use crate::protocol::{Better, Figure, Summary};
use crate::report::{Counter, IntervalHistogram, Metrics, StopSignal};

/// The workload's name on the command line and in `hello`.
pub const NAME: &str = "messenger";

/// The port the server listens on by default (instance `i` listens on the port after
/// `i`).
pub const DEFAULT_PORT: u16 = 9010;

/// How long the clients send when `--msgtime` is not given.
pub const DEFAULT_MSGTIME: u32 = 10;

/// How the server serves its connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerMode {
    /// Shard per core: a pinned thread, runtime and listener per CPU; nothing shared.
    #[default]
    Crimson,
    /// One multi-threaded runtime whose worker pool serves every connection.
    Async,
}

impl ServerMode {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerMode::Crimson => "crimson",
            ServerMode::Async => "async",
        }
    }
}

/// Which threads of this process busy-poll their sockets instead of sleeping in
/// `epoll_wait` ([`reactor`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PollMode {
    /// None: every thread sleeps in `epoll_wait` when it has nothing to do.
    #[default]
    Off,
    /// The crimson server's shards and the clients, as seastar's `--poll-mode` does for
    /// every reactor of a process; with `--server async`, the clients alone (the async
    /// messenger has no poll mode), so a sweep over both servers keeps the same clients.
    All,
    /// The crimson server's shards alone.
    Server,
    /// The clients alone.
    Clients,
}

impl PollMode {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            PollMode::Off => "off",
            PollMode::All => "all",
            PollMode::Server => "server",
            PollMode::Clients => "clients",
        }
    }

    /// Whether the server's shards poll (a crimson server's: the async server has no
    /// poll mode, and `all` leaves it sleeping in epoll, [`PollMode::polls_server`]).
    pub fn server(self) -> bool {
        matches!(self, PollMode::All | PollMode::Server)
    }

    /// Whether a `server` server's threads poll: a crimson server's shards under `all`
    /// or `server`; never the async server's pool.
    pub fn polls_server(self, server: ServerMode) -> bool {
        self.server() && server == ServerMode::Crimson
    }

    /// Whether the clients poll.
    pub fn clients(self) -> bool {
        matches!(self, PollMode::All | PollMode::Clients)
    }
}

pub use crate::role::Role;

/// Parameters of the messenger benchmark, with the originals' names.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct MsgrParams {
    /// Server design: crimson (shard per core) or async (shared worker pool)
    #[arg(long, value_enum, default_value_t = ServerMode::Crimson)]
    pub server: ServerMode,
    /// Busy-poll the sockets instead of sleeping in epoll, as seastar's --poll-mode: all
    /// (the crimson server's shards and the clients; the flag alone; with --server async
    /// the clients alone), server, clients or off
    #[arg(long, value_enum, value_name = "WHO", default_value_t = PollMode::Off,
          num_args = 0..=1, default_missing_value = "all")]
    pub poll_mode: PollMode,
    /// Payload bytes of each message (a 16-byte header comes on top)
    #[arg(long, default_value_t = 4096,
          value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    pub msg_size: u32,
    /// Client threads, each pinned to a CPU of the client set, round robin
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub clients: u32,
    /// Connections per client
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub conns_per_client: u32,
    /// Outstanding messages per connection
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub depth: u32,
    /// Seconds the clients send [default: 10; a server alone runs until stopped]
    #[arg(long, value_name = "SECONDS",
          value_parser = clap::value_parser!(u32).range(1..=86_400))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msgtime: Option<u32>,
    /// The server's CPUs, e.g. 0-3,56-59 [default: from --cpu-alloc]
    #[arg(long, value_name = "CPUS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpuset: Option<CpuSet>,
    /// The clients' CPUs [default: from --cpu-alloc]
    #[arg(long, value_name = "CPUS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cpuset: Option<CpuSet>,
    /// How server and clients share the machine when their CPU sets are not given:
    /// balanced (sibling threads of the same cores) or separated (cores, or NUMA nodes,
    /// of their own)
    #[arg(long, value_enum, default_value_t = CpuAlloc::Separated)]
    pub cpu_alloc: CpuAlloc,
    /// Server/client pairs side by side, each on its share of the CPUs (2: left/right)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub instances: u32,
    /// Run the server, the clients, or both in this process
    #[arg(long, value_enum, default_value_t = Role::Both)]
    pub role: Role,
    /// Where the server listens [default: 127.0.0.1:9010; instance i on the port + i]
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// Where the clients connect [default: 127.0.0.1:9010; with --role both, the server of
    /// this process]
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect: Option<SocketAddr>,
}

impl Default for MsgrParams {
    fn default() -> Self {
        MsgrParams {
            server: ServerMode::Crimson,
            poll_mode: PollMode::Off,
            msg_size: 4096,
            clients: 1,
            conns_per_client: 2,
            depth: 512,
            msgtime: None,
            server_cpuset: None,
            client_cpuset: None,
            cpu_alloc: CpuAlloc::Separated,
            instances: 1,
            role: Role::Both,
            listen: None,
            connect: None,
        }
    }
}

impl MsgrParams {
    /// The arguments that parse back into these parameters, derived from the clap
    /// definition and the serde form ([`crate::builtin::args_of`]).
    pub fn to_args(&self) -> Vec<String> {
        crate::builtin::args_of(self)
    }

    /// The parameters for `hello`, keyed by their command-line names: the serde form.
    pub fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        crate::builtin::json_of(self)
    }

    /// Checks what clap cannot: combinations, ranges for parameters built in code, and
    /// given CPU sets against this machine's CPUs (so a conductor refuses a CPU the machine
    /// does not have before anything starts).
    pub fn validate(&self) -> Result<(), WorkloadError> {
        self.validate_params()?;
        if self.server_cpuset.is_some() || self.client_cpuset.is_some() {
            plan(self, &Topology::current()?)?;
        }
        Ok(())
    }

    fn validate_params(&self) -> Result<(), WorkloadError> {
        let zero = |name: &'static str, v: u32| {
            (v == 0).then(|| WorkloadError::BadParam {
                name,
                value: "0".to_owned(),
                reason: "must be at least 1",
            })
        };
        for (name, v) in [
            ("msg-size", self.msg_size),
            ("clients", self.clients),
            ("conns-per-client", self.conns_per_client),
            ("depth", self.depth),
            ("instances", self.instances),
            ("msgtime", self.msgtime.unwrap_or(1)),
        ] {
            if let Some(e) = zero(name, v) {
                return Err(e);
            }
        }
        if self.msg_size as usize > frame::MAX_PAYLOAD {
            return Err(WorkloadError::BadParam {
                name: "msg-size",
                value: self.msg_size.to_string(),
                reason: "is above the 16 MiB limit of a frame",
            });
        }
        let given = |name: &'static str, reason: &'static str| WorkloadError::BadParam {
            name,
            value: "(given)".to_owned(),
            reason,
        };
        if self.role == Role::Server && self.connect.is_some() {
            return Err(given(
                "connect",
                "is for clients; --role server only listens",
            ));
        }
        if self.role == Role::Server && self.client_cpuset.is_some() {
            return Err(given(
                "client-cpuset",
                "is for clients; --role server only listens",
            ));
        }
        if self.role == Role::Client && self.listen.is_some() {
            return Err(given(
                "listen",
                "is for the server; --role client only connects (--connect)",
            ));
        }
        if self.role == Role::Client && self.server_cpuset.is_some() {
            return Err(given(
                "server-cpuset",
                "is for the server; --role client only connects (--connect)",
            ));
        }
        let poll = |reason: &'static str| WorkloadError::BadParam {
            name: "poll-mode",
            value: self.poll_mode.as_str().to_owned(),
            reason,
        };
        if self.poll_mode == PollMode::Server
            && self.server == ServerMode::Async
            && self.role.serves()
        {
            return Err(poll(
                "is for --server crimson: the async messenger's shared pool sleeps in epoll \
                 by design (--poll-mode clients, or all, polls the clients alone)",
            ));
        }
        if self.poll_mode == PollMode::All
            && self.server == ServerMode::Async
            && self.role == Role::Server
        {
            return Err(poll(
                "polls nothing: the async server's pool sleeps in epoll by design and \
                 --role server runs no clients",
            ));
        }
        if self.poll_mode == PollMode::Server && !self.role.serves() {
            return Err(poll(
                "polls nothing: --role client runs no server (--poll-mode clients)",
            ));
        }
        if self.poll_mode == PollMode::Clients && !self.role.sends() {
            return Err(poll(
                "polls nothing: --role server runs no clients (--poll-mode server)",
            ));
        }
        if self.role == Role::Both && self.connect.is_some() {
            return Err(given(
                "connect",
                "with --role both the clients use this process's server; use --role client \
                 to reach another",
            ));
        }
        crate::footprint::check(
            &format!(
                "{} connection(s) of {}-byte messages at depth {}",
                self.connections(),
                self.msg_size,
                self.depth
            ),
            self.estimated_bytes(),
        )
    }

    /// Connections of every instance's clients together.
    fn connections(&self) -> u64 {
        u64::from(self.instances) * u64::from(self.clients) * u64::from(self.conns_per_client)
    }

    /// The memory the buffers of every connection hold in this process (the server's side,
    /// the clients' or both, as `--role` says), from the sizes the server and clients use.
    pub fn estimated_bytes(&self) -> u64 {
        let frame_len = frame::HEADER_LEN as u64 + u64::from(self.msg_size);
        let per_connection = match self.role {
            Role::Server => server::connection_bytes(frame_len),
            Role::Client => client::connection_bytes(frame_len, u64::from(self.depth)),
            Role::Both => server::connection_bytes(frame_len)
                .saturating_add(client::connection_bytes(frame_len, u64::from(self.depth))),
        };
        per_connection.saturating_mul(self.connections())
    }

    /// How long the clients send.
    pub fn msgtime(&self) -> Duration {
        Duration::from_secs(u64::from(self.msgtime.unwrap_or(DEFAULT_MSGTIME)))
    }
}

/// The tag of instance `i` of `n`: empty for one, `left`/`right` for two, `i0`, `i1`…
/// beyond.
pub fn instance_tag(i: usize, n: usize) -> String {
    match (n, i) {
        (1, _) => String::new(),
        (2, 0) => "left".to_owned(),
        (2, _) => "right".to_owned(),
        _ => format!("i{i}"),
    }
}

/// One server/client pair: where each runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Empty for a single instance, else `left`, `right`, `i2`…
    pub tag: String,
    /// The server's CPUs.
    pub server: CpuSet,
    /// The clients' CPUs.
    pub client: CpuSet,
    /// Where its server listens.
    pub listen: SocketAddr,
    /// Where its clients connect.
    pub connect: SocketAddr,
}

/// Where everything runs, and what the machine could not do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The instances, left first.
    pub instances: Vec<Instance>,
    /// Notes on the allocation (no SMT, one NUMA node, shared cores…).
    pub notes: Vec<String>,
}

fn with_port_offset(addr: SocketAddr, i: usize) -> SocketAddr {
    let mut a = addr;
    if a.port() != 0 {
        a.set_port(a.port().saturating_add(i as u16));
    }
    a
}

/// The CPU sets and addresses of every instance on `topology`: given sets are checked
/// (CPUs the machine does not have are refused) and split between instances; missing
/// ones come from `--cpu-alloc` over each instance's share of the machine.
pub fn plan(params: &MsgrParams, topology: &Topology) -> Result<Plan, WorkloadError> {
    let n = params.instances as usize;
    for (param, set) in [
        ("server-cpuset", &params.server_cpuset),
        ("client-cpuset", &params.client_cpuset),
    ] {
        if let Some(set) = set {
            topology.check(param, set)?;
        }
    }
    let split = |param: &'static str, set: &CpuSet| {
        set.split(n).ok_or_else(|| WorkloadError::CpuSet {
            param,
            value: set.to_string(),
            reason: format!("{} CPU(s) cannot be split between {n} instances", set.len()),
        })
    };
    let shares = topology
        .cpus
        .split(n)
        .ok_or_else(|| WorkloadError::CpuSet {
            param: "instances",
            value: n.to_string(),
            reason: format!(
                "this machine has {} CPU(s) ({}): fewer than the instances",
                topology.cpus.len(),
                topology.cpus
            ),
        })?;
    let servers = params
        .server_cpuset
        .as_ref()
        .map(|s| split("server-cpuset", s))
        .transpose()?;
    let clients = params
        .client_cpuset
        .as_ref()
        .map(|s| split("client-cpuset", s))
        .transpose()?;
    let listen = params
        .listen
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)));
    let connect = params
        .connect
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)));
    let mut notes = Vec::new();
    let mut instances = Vec::with_capacity(n);
    for (i, share) in shares.iter().enumerate() {
        let tag = instance_tag(i, n);
        let alloc = topology.allocate(params.cpu_alloc, share);
        let server = servers
            .as_ref()
            .map_or(alloc.server.clone(), |s| s[i].clone());
        let client = clients
            .as_ref()
            .map_or(alloc.client.clone(), |s| s[i].clone());
        if servers.is_none() || clients.is_none() {
            for note in alloc.notes {
                let note = if tag.is_empty() {
                    format!("cpu-alloc {}: {note}", params.cpu_alloc.as_str())
                } else {
                    format!("cpu-alloc {} ({tag}): {note}", params.cpu_alloc.as_str())
                };
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
        }
        instances.push(Instance {
            tag,
            server,
            client,
            listen: with_port_offset(listen, i),
            connect: with_port_offset(connect, i),
        });
    }
    if params.role == Role::Both {
        for inst in &instances {
            let shared = CpuSet::of(
                inst.server
                    .cpus()
                    .into_iter()
                    .filter(|c| inst.client.contains(*c)),
            );
            if !shared.is_empty() {
                let note = format!(
                    "{}server and clients share CPU {shared}: they compete for it",
                    if inst.tag.is_empty() {
                        String::new()
                    } else {
                        format!("{}: ", inst.tag)
                    }
                );
                notes.push(note);
            }
        }
    }
    if params.poll_mode == PollMode::All && params.server == ServerMode::Async {
        notes.push(
            "poll-mode all: the clients poll; the async server's pool sleeps in epoll (the \
             async messenger has no poll mode)"
                .to_owned(),
        );
    }
    Ok(Plan { instances, notes })
}

/// Counts of one instance, for its per-second lines, and the metrics they feed.
#[derive(Debug)]
pub struct Tally {
    received: Counter,
    bytes: Counter,
    latency_sum_ns: Counter,
    messages_metrics: Vec<Arc<Counter>>,
    bytes_metrics: Vec<Arc<Counter>>,
    latency_metrics: Vec<Arc<IntervalHistogram>>,
}

impl Tally {
    /// A tally feeding nothing but itself.
    pub fn new() -> Tally {
        Tally {
            received: Counter::default(),
            bytes: Counter::default(),
            latency_sum_ns: Counter::default(),
            messages_metrics: Vec::new(),
            bytes_metrics: Vec::new(),
            latency_metrics: Vec::new(),
        }
    }

    /// Adds `messages` answers of `bytes` bytes, their latencies summing to `sum_ns` and
    /// recorded in `latency`.
    pub fn add(&self, messages: u64, bytes: u64, sum_ns: u64, latency: &Histogram<u64>) {
        if messages == 0 {
            return;
        }
        self.received.add(messages);
        self.bytes.add(bytes);
        self.latency_sum_ns.add(sum_ns);
        for c in &self.messages_metrics {
            c.add(messages);
        }
        for c in &self.bytes_metrics {
            c.add(bytes);
        }
        for h in &self.latency_metrics {
            h.add(latency);
        }
    }

    /// Answers, bytes and latency sum so far.
    pub fn totals(&self) -> (u64, u64, u64) {
        (
            self.received.get(),
            self.bytes.get(),
            self.latency_sum_ns.get(),
        )
    }
}

impl Default for Tally {
    fn default() -> Self {
        Tally::new()
    }
}

/// The workload's metrics: `messages` and `bytes` (answers received, or echoed by a
/// server alone) and the `latency` histogram; with two or more instances, each
/// instance's as well (`messages.left`, `latency.right`…).
#[derive(Debug, Clone)]
pub struct MsgrMetrics {
    /// `messages`, all instances.
    pub messages: Arc<Counter>,
    /// `bytes`, all instances.
    pub bytes: Arc<Counter>,
    /// `latency`, all instances.
    pub latency: Arc<IntervalHistogram>,
    /// Each instance's messages, bytes and latency (empty with one instance).
    pub per_instance: Vec<(Arc<Counter>, Arc<Counter>, Arc<IntervalHistogram>)>,
}

impl MsgrMetrics {
    /// Registers the metrics for `params` (`messages` first: the throughput; `latency`
    /// first: the latency).
    pub fn register(metrics: &mut Metrics, params: &MsgrParams) -> Result<Self, WorkloadError> {
        let messages = metrics.counter(
            "messages",
            "messages",
            "messages answered (a server alone: echoed)",
        )?;
        let bytes = metrics.counter("bytes", "bytes", "bytes of the messages, headers included")?;
        let latency = metrics.histogram("latency", "round trip of every message")?;
        let mut per_instance = Vec::new();
        let n = params.instances as usize;
        if n > 1 {
            for i in 0..n {
                let tag = instance_tag(i, n);
                per_instance.push((
                    metrics.counter(
                        &format!("messages.{tag}"),
                        "messages",
                        &format!("messages answered, instance {tag}"),
                    )?,
                    metrics.counter(
                        &format!("bytes.{tag}"),
                        "bytes",
                        &format!("bytes of the messages, instance {tag}"),
                    )?,
                    metrics.histogram(
                        &format!("latency.{tag}"),
                        &format!("round trip of every message, instance {tag}"),
                    )?,
                ));
            }
        }
        Ok(MsgrMetrics {
            messages,
            bytes,
            latency,
            per_instance,
        })
    }

    fn tally(&self, instance: usize) -> Tally {
        let mut t = Tally::new();
        t.messages_metrics.push(self.messages.clone());
        t.bytes_metrics.push(self.bytes.clone());
        t.latency_metrics.push(self.latency.clone());
        if let Some((m, b, l)) = self.per_instance.get(instance) {
            t.messages_metrics.push(m.clone());
            t.bytes_metrics.push(b.clone());
            t.latency_metrics.push(l.clone());
        }
        t
    }
}

/// What one instance did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct InstanceOutcome {
    /// Where it ran.
    pub instance: Instance,
    /// Its clients' results, when clients ran.
    pub client: Option<ClientOutcome>,
    /// Messages its server echoed, when the server ran here.
    pub served: Option<u64>,
    /// Its server's address, when it ran here.
    pub listened: Option<SocketAddr>,
    /// Its server's mean CPU% per core over the run (anything that ran there).
    pub server_cpu: Vec<(usize, f64)>,
    /// CPU time its server's own threads used over the run.
    pub server_cpu_time: Option<Duration>,
    /// Voluntary and involuntary context switches of its server's threads over the run.
    pub server_switches: Option<(u64, u64)>,
    /// Each poll-mode shard's CPU and reactor times over the run (empty when its server
    /// does not poll or did not run here).
    pub server_reactor: Vec<(usize, ReactorTimes)>,
}

/// What a run did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Outcome {
    /// The parameters.
    pub params: MsgrParams,
    /// Each instance.
    pub instances: Vec<InstanceOutcome>,
    /// The per-second lines, heading first.
    pub lines: Vec<String>,
    /// Notes on the CPU allocation.
    pub notes: Vec<String>,
    /// Errors the server's connections ended with.
    pub server_errors: Vec<String>,
    /// Ended by a stop before the message time.
    pub stopped: bool,
}

/// Runs the benchmark until the clients' message time passes (a server alone: until
/// `stop`, or `--msgtime` when given) or `stop` is set.
pub fn run(
    params: &MsgrParams,
    metrics: &MsgrMetrics,
    stop: &StopSignal,
) -> Result<Outcome, WorkloadError> {
    params.validate_params()?;
    let topology = Topology::current()?;
    let plan = plan(params, &topology)?;
    let n = plan.instances.len();
    let tallies: Vec<Arc<Tally>> = (0..n).map(|i| Arc::new(metrics.tally(i))).collect();

    let mut servers: Vec<Option<Server>> = Vec::with_capacity(n);
    if params.role.serves() {
        for inst in &plan.instances {
            let started = if params.poll_mode.polls_server(params.server) {
                Server::start_poll_mode(inst.listen, &inst.server)
            } else {
                Server::start(params.server, inst.listen, &inst.server)
            };
            match started {
                Ok(s) => servers.push(Some(s)),
                Err(e) => {
                    for s in servers.into_iter().flatten() {
                        s.shutdown();
                    }
                    return Err(e);
                }
            }
        }
    } else {
        servers.resize_with(n, || None);
    }

    let server_cpu_start: Vec<Option<Duration>> = servers
        .iter()
        .map(|s| s.as_ref().map(Server::cpu_time))
        .collect();
    let server_switches_start: Vec<Option<(u64, u64)>> = servers
        .iter()
        .map(|s| s.as_ref().map(Server::switches))
        .collect();
    let reactor_start: Vec<Vec<(usize, ReactorTimes)>> = servers
        .iter()
        .map(|s| s.as_ref().map(Server::reactor_times).unwrap_or_default())
        .collect();
    let mut clients = Vec::new();
    if params.role.sends() {
        for (i, inst) in plan.instances.iter().enumerate() {
            let target = servers[i].as_ref().map_or(inst.connect, Server::addr);
            let cplan = ClientPlan {
                clients: params.clients,
                conns_per_client: params.conns_per_client,
                depth: params.depth,
                msg_size: params.msg_size as usize,
                msgtime: params.msgtime(),
                cpus: inst.client.clone(),
                target,
                poll_mode: params.poll_mode.clients(),
            };
            let (tally, client_stop) = (tallies[i].clone(), stop.clone());
            let handle = std::thread::Builder::new()
                .name(format!("msgr-clients-{i}"))
                .spawn(move || client::run(&cplan, &tally, &client_stop))
                .map_err(|source| WorkloadError::Thread {
                    thread: "msgr-clients",
                    source,
                });
            match handle {
                Ok(h) => clients.push(h),
                Err(e) => {
                    stop.set();
                    for h in clients {
                        let _ = h.join();
                    }
                    for s in servers.into_iter().flatten() {
                        s.shutdown();
                    }
                    return Err(e);
                }
            }
        }
    }

    // Each second: a line per instance. A server alone counts what it echoes.
    let tagged = n > 1;
    let polled = servers.iter().flatten().any(Server::polls);
    let mut lines = vec![progress::heading(tagged, polled)];
    let start = Instant::now();
    let first_cpu: Vec<CpuTimes> = plan
        .instances
        .iter()
        .map(|i| CpuTimes::read(&i.server))
        .collect();
    let mut last_cpu = first_cpu.clone();
    let mut last_reactor = reactor_start.clone();
    let mut last: Vec<(u64, u64, u64)> = vec![(0, 0, 0); n];
    let server_until = params.msgtime.map(|_| start + params.msgtime());
    let mut next = start + Duration::from_secs(1);
    let mut served_reported = vec![0u64; n];
    let empty = crate::protocol::new_latency_histogram();
    let mut last_at = start;
    loop {
        let finished = if params.role.sends() {
            clients.iter().all(std::thread::JoinHandle::is_finished)
        } else {
            stop.is_set() || server_until.is_some_and(|u| Instant::now() >= u)
        };
        if finished {
            break;
        }
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
            continue;
        }
        for (i, inst) in plan.instances.iter().enumerate() {
            if let Some(server) = servers[i].as_ref().filter(|_| !params.role.sends()) {
                let (frames, bytes) = server.served();
                let new = frames - served_reported[i];
                tallies[i].add(new, bytes - tallies[i].totals().1, 0, &empty);
                served_reported[i] = frames;
            }
            let totals = tallies[i].totals();
            let cpu = CpuTimes::read(&inst.server);
            let reactor = servers[i]
                .as_ref()
                .map(Server::reactor_times)
                .unwrap_or_default();
            let elapsed = now - start;
            let dt = (now - last_at).as_secs_f64().max(1e-9);
            let messages = totals.0 - last[i].0;
            let line = Line {
                tag: inst.tag.clone(),
                elapsed_s: elapsed.as_secs_f64(),
                messages,
                iops: messages as f64 / dt,
                mb_per_s: (totals.1 - last[i].1) as f64 / dt / 1e6,
                latency_ms: if messages == 0 {
                    0.0
                } else {
                    (totals.2 - last[i].2) as f64 / messages as f64 / 1e6
                },
                cpu: cpu.percent_since(&last_cpu[i]),
                busy: busy_since(&reactor, &last_reactor[i]),
            };
            lines.push(line.format());
            last[i] = totals;
            last_cpu[i] = cpu;
            last_reactor[i] = reactor;
        }
        last_at = now;
        next += Duration::from_secs(1);
    }

    let mut client_outcomes = Vec::with_capacity(n);
    let mut first_error = None;
    for (i, h) in clients.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(o)) => client_outcomes.push(Some(o)),
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
                client_outcomes.push(None);
            }
            Err(payload) => {
                first_error.get_or_insert(WorkloadError::Panicked {
                    what: format!("messenger clients of instance {i}"),
                    message: crate::error::panic_message(&*payload),
                });
                client_outcomes.push(None);
            }
        }
    }
    client_outcomes.resize_with(n, || None);
    let mut server_errors = Vec::new();
    let mut instances = Vec::with_capacity(n);
    for (i, (inst, server)) in plan.instances.iter().zip(servers).enumerate() {
        let server_cpu = CpuTimes::read(&inst.server).percent_since(&first_cpu[i]);
        let server_cpu_time = server
            .as_ref()
            .zip(server_cpu_start[i])
            .map(|(s, at_start)| s.cpu_time().saturating_sub(at_start));
        let server_switches = server
            .as_ref()
            .zip(server_switches_start[i])
            .map(|(s, at_start)| {
                let (v, iv) = s.switches();
                (v.saturating_sub(at_start.0), iv.saturating_sub(at_start.1))
            });
        let server_reactor = server
            .as_ref()
            .map(|s| reactor_since(&s.reactor_times(), &reactor_start[i]))
            .unwrap_or_default();
        let (served, listened) = match server {
            Some(s) => {
                let served = s.served().0;
                let addr = s.addr();
                server_errors.extend(s.errors());
                s.shutdown();
                (Some(served), Some(addr))
            }
            None => (None, None),
        };
        instances.push(InstanceOutcome {
            instance: inst.clone(),
            client: client_outcomes[i].take(),
            served,
            listened,
            server_cpu,
            server_cpu_time,
            server_switches,
            server_reactor,
        });
    }
    if let Some(e) = first_error {
        let detail = if server_errors.is_empty() {
            String::new()
        } else {
            format!(" (server: {})", server_errors.join("; "))
        };
        return Err(match e {
            WorkloadError::Broken { workload, reason } => WorkloadError::Broken {
                workload,
                reason: format!("{reason}{detail}"),
            },
            other => other,
        });
    }
    Ok(Outcome {
        params: params.clone(),
        instances,
        lines,
        notes: plan.notes,
        server_errors,
        stopped: stop.is_set(),
    })
}

/// Each shard's reactor times between `earlier` and `now` (matched by CPU).
fn reactor_since(
    now: &[(usize, ReactorTimes)],
    earlier: &[(usize, ReactorTimes)],
) -> Vec<(usize, ReactorTimes)> {
    now.iter()
        .map(|(cpu, t)| {
            let before = earlier
                .iter()
                .find(|(c, _)| c == cpu)
                .map(|(_, e)| *e)
                .unwrap_or_default();
            (*cpu, t.since(&before))
        })
        .collect()
}

/// Each shard's busy percentage between `earlier` and `now`.
fn busy_since(
    now: &[(usize, ReactorTimes)],
    earlier: &[(usize, ReactorTimes)],
) -> Vec<(usize, f64)> {
    reactor_since(now, earlier)
        .into_iter()
        .map(|(cpu, t)| (cpu, t.busy_percent()))
        .collect()
}

/// The `all(depth=…)` block of `outcomes` together.
fn block(title: &str, depth: u32, outcomes: &[&ClientOutcome]) -> Block {
    let received: u64 = outcomes.iter().map(|o| o.received).sum();
    let sum_ns: u128 = outcomes.iter().map(|o| o.latency_sum_ns).sum();
    let connect = outcomes
        .iter()
        .map(|o| o.connect_time)
        .max()
        .unwrap_or_default();
    let messaging = outcomes
        .iter()
        .map(|o| o.messaging_time)
        .max()
        .unwrap_or_default();
    // Instances side by side: their rates add up.
    let iops: f64 = outcomes.iter().map(|o| o.iops()).sum();
    let out: f64 = outcomes.iter().map(|o| o.out_mb_per_s()).sum();
    Block {
        title: title.to_owned(),
        depth,
        connect_time_s: connect.as_secs_f64(),
        messages: received,
        messaging_time_s: messaging.as_secs_f64(),
        latency_ms: if received == 0 {
            0.0
        } else {
            sum_ns as f64 / received as f64 / 1e6
        },
        iops,
        out_mb_per_s: out,
    }
}

fn block_figures(prefix: &str, b: &Block, latency: Option<&Histogram<u64>>) -> Vec<Figure> {
    let name = |n: &str| format!("{prefix}{n}");
    let mut figures = vec![
        Figure::new(name("connect_time_s"), b.connect_time_s, "s").better(Better::Lower),
        Figure::new(name("messages"), b.messages as f64, "messages").better(Better::Higher),
        Figure::new(name("messaging_time_s"), b.messaging_time_s, "s"),
        Figure::new(name("latency_ms"), b.latency_ms, "ms").better(Better::Lower),
        Figure::new(name("iops"), b.iops, "IOPS").better(Better::Higher),
        Figure::new(name("out_mb_per_s"), b.out_mb_per_s, "MB/s").better(Better::Higher),
    ];
    if let Some(h) = latency.filter(|h| !h.is_empty()) {
        for (p, q) in [("p50", 0.5), ("p99", 0.99)] {
            figures.push(
                Figure::new(
                    name(&format!("latency_{p}_ms")),
                    h.value_at_quantile(q) as f64 / 1e6,
                    "ms",
                )
                .better(Better::Lower),
            );
        }
    }
    figures
}

/// The summary: the allocation notes, the per-second lines, the originals' block (one
/// per instance and `all` when there are two or more) and the same figures, each
/// instance's prefixed with its tag (`left.iops`), plus the server's CPU% per core.
pub fn summary(outcome: &Outcome) -> Summary {
    let mut figures = Vec::new();
    let mut lines = Vec::new();
    let p = &outcome.params;
    lines.push(format!(
        "messenger: server {}{}, {} client(s) x {} connection(s), depth {}, {}-byte messages, \
         {} instance(s)",
        p.server.as_str(),
        match p.poll_mode {
            PollMode::Off => "",
            PollMode::All => " (poll mode: server and clients)",
            PollMode::Server => " (poll mode: server)",
            PollMode::Clients => " (poll mode: clients)",
        },
        p.clients,
        p.conns_per_client,
        p.depth,
        p.msg_size,
        outcome.instances.len()
    ));
    for i in &outcome.instances {
        let tag = if i.instance.tag.is_empty() {
            String::new()
        } else {
            format!("{}: ", i.instance.tag)
        };
        lines.push(format!(
            "{tag}server cpuset {}, client cpuset {}",
            i.instance.server, i.instance.client
        ));
        if let Some(addr) = i.listened {
            lines.push(format!("{tag}server listening on {addr}"));
        }
    }
    for note in &outcome.notes {
        lines.push(format!("note: {note}"));
    }
    lines.extend(outcome.lines.iter().cloned());
    let tagged = outcome.instances.len() > 1;
    let mut all = Vec::new();
    for i in &outcome.instances {
        let prefix = if tagged {
            format!("{}.", i.instance.tag)
        } else {
            String::new()
        };
        if let Some(c) = &i.client {
            all.push(c);
            if tagged {
                let b = block(&i.instance.tag, p.depth, &[c]);
                lines.extend(b.lines());
                figures.extend(block_figures(&prefix, &b, Some(&c.latency)));
            }
        }
        if let Some(served) = i.served.filter(|_| i.client.is_none()) {
            figures.push(Figure::new(
                format!("{prefix}messages_served"),
                served as f64,
                "messages",
            ));
            lines.push(format!("{prefix}messages served: {served}"));
        }
        let handled = i
            .client
            .as_ref()
            .map(|c| c.received)
            .or(i.served)
            .unwrap_or(0);
        if let Some(t) = i.server_cpu_time.filter(|_| handled > 0) {
            let per = t.as_secs_f64() * 1e6 / handled as f64;
            figures.push(
                Figure::new(format!("{prefix}server_cpu_us_per_message"), per, "us")
                    .better(Better::Lower),
            );
            lines.push(format!(
                "{}server threads' CPU time: {:.3}s, {per:.3}us per message",
                if tagged {
                    format!("{}: ", i.instance.tag)
                } else {
                    String::new()
                },
                t.as_secs_f64()
            ));
        }
        if !i.server_cpu.is_empty() {
            let mean = i.server_cpu.iter().map(|(_, p)| p).sum::<f64>() / i.server_cpu.len() as f64;
            figures.push(Figure::new(
                format!("{prefix}server_cpu_percent"),
                mean,
                "%",
            ));
            let per_core: Vec<String> = i
                .server_cpu
                .iter()
                .map(|(c, p)| format!("{c}:{p:.0}"))
                .collect();
            lines.push(format!(
                "{}server cpu% (mean over the run): {}",
                if tagged {
                    format!("{}: ", i.instance.tag)
                } else {
                    String::new()
                },
                per_core.join(" ")
            ));
        }
        let label = if tagged {
            format!("{}: ", i.instance.tag)
        } else {
            String::new()
        };
        if let Some((voluntary, involuntary)) = i.server_switches {
            figures.push(
                Figure::new(
                    format!("{prefix}server_voluntary_switches"),
                    voluntary as f64,
                    "switches",
                )
                .better(Better::Lower),
            );
            figures.push(Figure::new(
                format!("{prefix}server_involuntary_switches"),
                involuntary as f64,
                "switches",
            ));
            lines.push(format!(
                "{label}server threads' context switches: {voluntary} voluntary (waits), \
                 {involuntary} involuntary (preempted or yielded)"
            ));
        }
        if !i.server_reactor.is_empty() {
            let total = i
                .server_reactor
                .iter()
                .fold(ReactorTimes::default(), |a, (_, t)| ReactorTimes {
                    busy: a.busy + t.busy,
                    idle: a.idle + t.idle,
                    yielded: a.yielded + t.yielded,
                    turns: a.turns + t.turns,
                    idle_turns: a.idle_turns + t.idle_turns,
                    yields: a.yields + t.yields,
                });
            figures.push(Figure::new(
                format!("{prefix}server_busy_percent"),
                total.busy_percent(),
                "%",
            ));
            if handled > 0 {
                let per = total.busy.as_secs_f64() * 1e6 / handled as f64;
                figures.push(
                    Figure::new(format!("{prefix}server_busy_us_per_message"), per, "us")
                        .better(Better::Lower),
                );
                lines.push(format!(
                    "{label}server reactors' busy time: {:.3}s, {per:.3}us per message",
                    total.busy.as_secs_f64()
                ));
            }
            let per_core: Vec<String> = i
                .server_reactor
                .iter()
                .map(|(c, t)| format!("{c}:{:.0}", t.busy_percent()))
                .collect();
            lines.push(format!(
                "{label}server reactors busy% (the rest polling idle): {}; {} turns, {} idle, \
                 {} yielded the CPU for {:.3}s",
                per_core.join(" "),
                total.turns,
                total.idle_turns,
                total.yields,
                total.yielded.as_secs_f64()
            ));
        }
        if let Some(c) = &i.client {
            let reactors: Vec<String> = c
                .threads
                .iter()
                .filter_map(|t| {
                    t.reactor
                        .map(|r| format!("{}:{:.0}", t.cpu, r.busy_percent()))
                })
                .collect();
            if !reactors.is_empty() {
                lines.push(format!(
                    "{label}client reactors busy% (the rest polling idle): {}",
                    reactors.join(" ")
                ));
            }
        }
    }
    if !all.is_empty() {
        let mut merged = crate::protocol::new_latency_histogram();
        for c in &all {
            let _ = merged.add(&c.latency);
        }
        let b = block("all", p.depth, &all);
        lines.extend(b.lines());
        figures.extend(block_figures("", &b, Some(&merged)));
    }
    for e in &outcome.server_errors {
        lines.push(format!("server connection error: {e}"));
    }
    Summary { figures, lines }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn parse(args: &[&str]) -> Result<MsgrParams, String> {
        crate::test_support::parse_params("messenger", args)
    }

    #[test]
    fn the_memory_estimate_grows_with_connections_and_message_size() {
        let default = MsgrParams::default();
        assert!(
            default.estimated_bytes() < 8 << 20,
            "{}",
            default.estimated_bytes()
        );
        let huge = parse(&[
            "--msg-size",
            "16777216",
            "--depth",
            "65536",
            "--clients",
            "1024",
        ])
        .unwrap();
        // 2048 connections, each with a 32 MiB server buffer and a client's 16 MiB batch
        // and frame: beyond 64 GiB.
        assert!(
            huge.estimated_bytes() > 64 << 30,
            "{}",
            huge.estimated_bytes()
        );
        let server = MsgrParams {
            role: Role::Server,
            ..huge.clone()
        };
        assert!(server.estimated_bytes() < huge.estimated_bytes());
    }

    #[test]
    fn parameters_beyond_the_machine_s_memory_are_refused_with_the_estimate() {
        let huge = parse(&[
            "--msg-size",
            "16777216",
            "--depth",
            "65536",
            "--clients",
            "1024",
            "--conns-per-client",
            "1024",
        ])
        .unwrap();
        let err = huge.validate().unwrap_err().to_string();
        assert!(
            err.contains("1048576 connection(s) of 16777216-byte messages at depth 65536"),
            "{err}"
        );
        assert!(
            err.contains("TiB of memory") && err.contains("available"),
            "{err}"
        );
        assert!(MsgrParams::default().validate().is_ok());
    }

    #[test]
    fn defaults_are_the_originals() {
        let p = parse(&[]).unwrap();
        assert_eq!(p, MsgrParams::default());
        assert_eq!((p.msg_size, p.depth, p.conns_per_client), (4096, 512, 2));
        assert_eq!(p.msgtime(), Duration::from_secs(10));
    }

    #[test]
    fn arguments_round_trip() {
        let p = parse(&[
            "--server",
            "async",
            "--msg-size",
            "65536",
            "--clients",
            "4",
            "--conns-per-client",
            "3",
            "--depth",
            "64",
            "--msgtime",
            "3",
            "--server-cpuset",
            "0-3,56-59",
            "--client-cpuset",
            "4",
            "--cpu-alloc",
            "balanced",
            "--instances",
            "2",
            "--role",
            "client",
            "--connect",
            "10.0.0.1:7000",
            "--poll-mode",
        ])
        .unwrap();
        assert_eq!(
            p.poll_mode,
            PollMode::All,
            "the flag alone polls everything"
        );
        let args = p.to_args();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(parse(&refs).unwrap(), p);
        assert_eq!(p.params_json()["server-cpuset"], "0-3,56-59");
        assert_eq!(p.params_json()["poll-mode"], "all");
        assert_eq!(MsgrParams::default().params_json()["poll-mode"], "off");
        // The shape sessions have always recorded: keys as on the command line, sets and
        // addresses as text, absent options left out.
        assert_eq!(
            serde_json::Value::from_iter(p.params_json()),
            serde_json::json!({
                "server": "async", "poll-mode": "all", "msg-size": 65536, "clients": 4,
                "conns-per-client": 3, "depth": 64, "msgtime": 3,
                "server-cpuset": "0-3,56-59", "client-cpuset": "4",
                "cpu-alloc": "balanced", "instances": 2, "role": "client",
                "connect": "10.0.0.1:7000",
            })
        );
        for (args, mode) in [
            (&["--poll-mode", "--depth", "4"][..], PollMode::All),
            (&["--poll-mode", "server"], PollMode::Server),
            (&["--poll-mode=clients"], PollMode::Clients),
            (&[], PollMode::Off),
        ] {
            let p = parse(args).unwrap();
            assert_eq!(p.poll_mode, mode, "{args:?}");
            let back = p.to_args();
            let refs: Vec<&str> = back.iter().map(String::as_str).collect();
            assert_eq!(parse(&refs).unwrap(), p);
        }
    }

    #[test]
    fn poll_mode_is_refused_for_an_async_server_s_pool_and_where_it_would_poll_nothing() {
        let p = |server, poll_mode, role| MsgrParams {
            server,
            poll_mode,
            role,
            ..MsgrParams::default()
        };
        for (params, needle) in [
            (
                p(ServerMode::Async, PollMode::All, Role::Server),
                "--poll-mode all: polls nothing: the async server's pool sleeps",
            ),
            (
                p(ServerMode::Async, PollMode::Server, Role::Server),
                "--poll-mode server: is for --server crimson",
            ),
            (
                p(ServerMode::Async, PollMode::Server, Role::Both),
                "--poll-mode server: is for --server crimson",
            ),
            (
                p(ServerMode::Crimson, PollMode::Server, Role::Client),
                "--poll-mode server: polls nothing: --role client runs no server",
            ),
            (
                p(ServerMode::Crimson, PollMode::Clients, Role::Server),
                "--poll-mode clients: polls nothing: --role server runs no clients",
            ),
        ] {
            let err = params.validate().unwrap_err().to_string();
            assert!(err.starts_with(needle), "{params:?}: {err}");
        }
        // All against the async server polls its clients, so that one sweep over both
        // servers runs the same clients against each; the plan says so.
        let async_all = p(ServerMode::Async, PollMode::All, Role::Both);
        assert!(async_all.poll_mode.clients());
        assert!(!async_all.poll_mode.polls_server(ServerMode::Async));
        assert!(async_all.poll_mode.polls_server(ServerMode::Crimson));
        let notes = plan(&async_all, &two_cpus()).unwrap().notes;
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("poll-mode all: the clients poll; the async server")),
            "{notes:?}"
        );
        for params in [
            async_all.clone(),
            p(ServerMode::Async, PollMode::Clients, Role::Both),
            p(ServerMode::Async, PollMode::All, Role::Client),
            p(ServerMode::Crimson, PollMode::All, Role::Both),
            p(ServerMode::Crimson, PollMode::All, Role::Server),
        ] {
            assert!(params.validate().is_ok(), "{params:?}");
        }
    }

    #[test]
    fn bad_values_and_combinations_are_refused_with_their_names() {
        for (args, needle) in [
            (&["--server-cpuset", "3-1"][..], "backwards"),
            (&["--depth", "0"], "depth"),
            (&["--server", "seastar"], "crimson"),
            (&["--cpu-alloc", "numa"], "balanced"),
        ] {
            let err = parse(args).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
        for (params, needle) in [
            (
                MsgrParams {
                    role: Role::Server,
                    connect: Some("127.0.0.1:1".parse().unwrap()),
                    ..MsgrParams::default()
                },
                "--connect",
            ),
            (
                MsgrParams {
                    role: Role::Client,
                    listen: Some("127.0.0.1:1".parse().unwrap()),
                    ..MsgrParams::default()
                },
                "--listen",
            ),
            (
                MsgrParams {
                    connect: Some("127.0.0.1:1".parse().unwrap()),
                    ..MsgrParams::default()
                },
                "--role client",
            ),
        ] {
            let err = params.validate().unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }

    fn two_cpus() -> Topology {
        Topology {
            cpus: CpuSet::of([0, 1]),
            cores: vec![CpuSet::of([0]), CpuSet::of([1])],
            nodes: vec![CpuSet::of([0, 1])],
        }
    }

    #[test]
    fn two_instances_on_two_cpus_get_one_each_with_their_own_ports() {
        let p = MsgrParams {
            instances: 2,
            ..MsgrParams::default()
        };
        let plan = plan(&p, &two_cpus()).unwrap();
        let [left, right] = &plan.instances[..] else {
            panic!("{plan:?}")
        };
        assert_eq!((left.tag.as_str(), right.tag.as_str()), ("left", "right"));
        assert_eq!(
            (&left.server, &left.client),
            (&CpuSet::of([0]), &CpuSet::of([0]))
        );
        assert_eq!(
            (&right.server, &right.client),
            (&CpuSet::of([1]), &CpuSet::of([1]))
        );
        assert_eq!((left.listen.port(), right.listen.port()), (9010, 9011));
        assert!(
            plan.notes.iter().any(|n| n.contains("share")),
            "{:?}",
            plan.notes
        );
    }

    #[test]
    fn given_cpusets_are_checked_and_split() {
        let p = MsgrParams {
            server_cpuset: Some("0-3".parse().unwrap()),
            ..MsgrParams::default()
        };
        let err = plan(&p, &two_cpus()).unwrap_err().to_string();
        assert!(
            err.contains("--server-cpuset") && err.contains("no CPU 2-3"),
            "{err}"
        );
        let p = MsgrParams {
            server_cpuset: Some("0".parse().unwrap()),
            client_cpuset: Some("1".parse().unwrap()),
            ..MsgrParams::default()
        };
        let one = plan(&p, &two_cpus()).unwrap();
        assert_eq!(one.instances[0].server, CpuSet::of([0]));
        assert_eq!(one.instances[0].client, CpuSet::of([1]));
        assert!(one.notes.is_empty(), "{:?}", one.notes);
        let p = MsgrParams { instances: 2, ..p };
        let err = plan(&p, &two_cpus()).unwrap_err().to_string();
        assert!(err.contains("cannot be split between 2 instances"), "{err}");
        let p = MsgrParams {
            instances: 3,
            ..MsgrParams::default()
        };
        let err = plan(&p, &two_cpus()).unwrap_err().to_string();
        assert_eq!(
            err,
            "--instances 3: this machine has 2 CPU(s) (0-1): fewer than the instances"
        );
    }
}
