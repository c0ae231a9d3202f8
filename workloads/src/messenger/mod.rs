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

mod metrics;
mod outcome;
mod params;
mod tally;

use std::sync::Arc;
use std::time::{Duration, Instant};

use self::client::{ClientOutcome, ClientPlan};
use self::cpuset::Topology;
pub use self::metrics::MsgrMetrics;
pub use self::outcome::{InstanceOutcome, Outcome, summary};
pub use self::params::{
    DEFAULT_MSGTIME, DEFAULT_PORT, Instance, MsgrParams, Plan, PollMode, Role, instance_tag, plan,
};
use self::progress::{CpuTimes, Line};
use self::reactor::ReactorTimes;
use self::server::Server;
pub use self::server::ServerMode;
pub use self::tally::Tally;
use crate::WorkloadError;
use crate::report::StopSignal;

/// The workload's name on the command line and in `hello`.
pub const NAME: &str = "messenger";

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

    let servers = start_servers(params, &plan)?;
    let at_start: Vec<ServerReadings> = servers.iter().map(ServerReadings::of).collect();
    let clients = match start_clients(params, &plan, &servers, &tallies, stop) {
        Ok(clients) => clients,
        Err(e) => {
            for s in servers.into_iter().flatten() {
                s.shutdown();
            }
            return Err(e);
        }
    };

    let first_cpu: Vec<CpuTimes> = plan
        .instances
        .iter()
        .map(|i| CpuTimes::read(&i.server))
        .collect();
    let watch = Watch {
        params,
        plan: &plan,
        servers: &servers,
        tallies: &tallies,
        clients: &clients,
        stop,
    };
    let lines = watch.lines(&first_cpu, &at_start);

    let (mut client_outcomes, first_error) = join_clients(clients);
    client_outcomes.resize_with(n, || None);
    let mut server_errors = Vec::new();
    let mut instances = Vec::with_capacity(n);
    for (i, (inst, server)) in plan.instances.iter().zip(servers).enumerate() {
        let server_cpu = CpuTimes::read(&inst.server).percent_since(&first_cpu[i]);
        let readings = server.as_ref().map(|s| at_start[i].until(s));
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
        let (server_cpu_time, server_switches, server_reactor) = match readings {
            Some(r) => (r.cpu_time, r.switches, r.reactor),
            None => (None, None, Vec::new()),
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

/// Each instance's server, when this process serves (`None` for each otherwise); the
/// ones started are shut down when one cannot start.
fn start_servers(params: &MsgrParams, plan: &Plan) -> Result<Vec<Option<Server>>, WorkloadError> {
    let mut servers: Vec<Option<Server>> = Vec::with_capacity(plan.instances.len());
    if !params.role.serves() {
        servers.resize_with(plan.instances.len(), || None);
        return Ok(servers);
    }
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
    Ok(servers)
}

/// The clients of one instance, on a thread of their own.
type Clients = std::thread::JoinHandle<Result<ClientOutcome, WorkloadError>>;

/// Each instance's clients, when this process sends: they connect to the instance's
/// server when it runs here. When one cannot start, `stop` is raised and the ones started
/// are joined.
fn start_clients(
    params: &MsgrParams,
    plan: &Plan,
    servers: &[Option<Server>],
    tallies: &[Arc<Tally>],
    stop: &StopSignal,
) -> Result<Vec<Clients>, WorkloadError> {
    let mut clients = Vec::new();
    if !params.role.sends() {
        return Ok(clients);
    }
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
                return Err(e);
            }
        }
    }
    Ok(clients)
}

/// Each instance's clients' outcome (`None` where they failed), and the first failure.
fn join_clients(clients: Vec<Clients>) -> (Vec<Option<ClientOutcome>>, Option<WorkloadError>) {
    let mut client_outcomes = Vec::with_capacity(clients.len());
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
    (client_outcomes, first_error)
}

/// What a server's own threads had used: read at the start, and the difference at the
/// end.
#[derive(Debug, Clone, Default)]
struct ServerReadings {
    /// CPU time of its threads.
    cpu_time: Option<Duration>,
    /// Voluntary and involuntary context switches of its threads.
    switches: Option<(u64, u64)>,
    /// Each poll-mode shard's CPU and reactor times.
    reactor: Vec<(usize, ReactorTimes)>,
}

impl ServerReadings {
    /// The readings of `server` now (none without a server).
    fn of(server: &Option<Server>) -> ServerReadings {
        ServerReadings {
            cpu_time: server.as_ref().map(Server::cpu_time),
            switches: server.as_ref().map(Server::switches),
            reactor: server
                .as_ref()
                .map(Server::reactor_times)
                .unwrap_or_default(),
        }
    }

    /// What `server` used since these readings.
    fn until(&self, server: &Server) -> ServerReadings {
        ServerReadings {
            cpu_time: self
                .cpu_time
                .map(|at_start| server.cpu_time().saturating_sub(at_start)),
            switches: self.switches.map(|at_start| {
                let (v, iv) = server.switches();
                (v.saturating_sub(at_start.0), iv.saturating_sub(at_start.1))
            }),
            reactor: reactor_since(&server.reactor_times(), &self.reactor),
        }
    }
}

/// What the per-second lines watch while the run goes on.
struct Watch<'a> {
    params: &'a MsgrParams,
    plan: &'a Plan,
    servers: &'a [Option<Server>],
    tallies: &'a [Arc<Tally>],
    clients: &'a [Clients],
    stop: &'a StopSignal,
}

impl Watch<'_> {
    /// Each second, a line per instance until the run is done, heading first. A server
    /// alone counts what it echoes.
    fn lines(&self, first_cpu: &[CpuTimes], at_start: &[ServerReadings]) -> Vec<String> {
        let (params, plan, servers, tallies) = (self.params, self.plan, self.servers, self.tallies);
        let n = plan.instances.len();
        let tagged = n > 1;
        let polled = servers.iter().flatten().any(Server::polls);
        let mut lines = vec![progress::heading(tagged, polled)];
        let start = Instant::now();
        let mut last_cpu = first_cpu.to_vec();
        let mut last_reactor: Vec<Vec<(usize, ReactorTimes)>> =
            at_start.iter().map(|r| r.reactor.clone()).collect();
        let mut last: Vec<(u64, u64, u64)> = vec![(0, 0, 0); n];
        let server_until = params.msgtime.map(|_| start + params.msgtime());
        let mut next = start + Duration::from_secs(1);
        let mut served_reported = vec![0u64; n];
        let empty = crate::protocol::new_latency_histogram();
        let mut last_at = start;
        loop {
            let finished = if params.role.sends() {
                self.clients
                    .iter()
                    .all(std::thread::JoinHandle::is_finished)
            } else {
                self.stop.is_set() || server_until.is_some_and(|u| Instant::now() >= u)
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
        lines
    }
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
