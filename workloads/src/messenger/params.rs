//! The parameters of the messenger benchmark, their checks, and the plan they make on this
//! machine: each instance's CPU sets and addresses.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::cpuset::{CpuAlloc, CpuSet, Topology};
use super::server::ServerMode;
use super::{client, frame, server};
use crate::WorkloadError;
pub use crate::role::Role;

/// The port the server listens on by default (instance `i` listens on the port after
/// `i`).
pub const DEFAULT_PORT: u16 = 9010;

/// How long the clients send when `--msgtime` is not given.
pub const DEFAULT_MSGTIME: u32 = 10;

/// Which threads of this process busy-poll their sockets instead of sleeping in
/// `epoll_wait` ([`reactor`](super::reactor)).
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
    /// definition and the serde form ([`crate::params::args_of`]).
    pub fn to_args(&self) -> Vec<String> {
        crate::params::args_of(self)
    }

    /// The parameters for `hello`, keyed by their command-line names: the serde form.
    pub fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        crate::params::json_of(self)
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

    pub(super) fn validate_params(&self) -> Result<(), WorkloadError> {
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
