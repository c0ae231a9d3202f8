//! The echo workload's parameters: its modes, protocols, back ends and sweeps, their
//! checks, and each point's setup for the clients.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::client::ClientSetup;
use super::wire::Pacing;
use crate::WorkloadError;
pub use crate::role::Role;

/// The workload's name on the command line and in `hello`.
pub const NAME: &str = "udp-echo";

/// The largest `--buffer-size`: 1 MiB (Demikernel's largest message is 256 KiB).
pub const MAX_BUFFER_SIZE: u64 = 1 << 20;

/// The most clients (`--num-clients`), each a socket of its own.
pub const MAX_CLIENTS: u32 = 256;

/// The most messages a client keeps in flight (`--window`).
pub const MAX_WINDOW: u32 = 4096;

/// Where the server listens when `--listen` is not given with `--role server`.
pub const DEFAULT_SERVER_PORT: u16 = 7777;

/// Timeouts in a row without an answer after which the peer is declared silent.
pub(crate) const SILENT_TIMEOUTS: u32 = 5;

/// What the clients measure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Closed loop, one message in flight per client: round-trip latency.
    #[default]
    Echo,
    /// `--window` messages in flight per client: throughput.
    Throughput,
}

/// The transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Datagrams; messages above 64,512 bytes are fragmented and reassembled.
    #[default]
    Udp,
    /// One connection per client; length-framed messages.
    Tcp,
}

/// How the sockets are driven.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// Async sockets on a current-thread tokio runtime.
    #[default]
    Tokio,
    /// Busy polling on non-blocking sockets, pinned to a core (DPDK's poll-mode shape).
    Poll,
    /// Batched recvmmsg/sendmmsg after a ppoll wait.
    Mmsg,
    /// DPDK: each side its own process and EAL, joined by a net_memif link, busy-polling
    /// rx/tx bursts of Ethernet/IPv4/UDP frames (needs the `dpdk` cargo feature).
    Dpdk,
}

/// The workload's own sweep option: its points run as phases of one run. The recorder's
/// `--sweep` (a series of runs, any parameter) turns a sweep of [`PHASE_PARAMS`] into it.
pub const PHASE_SWEEP: &str = "phase-sweep";
/// The parameters udp-echo sweeps in phases of one run.
pub const PHASE_PARAMS: [&str; 2] = ["buffer-size", "num-clients"];

/// The parameter a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepParam {
    /// `--buffer-size`.
    BufferSize,
    /// `--num-clients`.
    NumClients,
}

impl SweepParam {
    /// The parameter's command-line name.
    pub fn as_str(self) -> &'static str {
        match self {
            SweepParam::BufferSize => "buffer-size",
            SweepParam::NumClients => "num-clients",
        }
    }
}

/// `--sweep PARAM=V1,V2,…`: the points run one after another in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// What varies.
    pub param: SweepParam,
    /// Its values, in order.
    pub values: Vec<u64>,
}

/// As on the command line (`rate=1000,2000`).
impl serde::Serialize for Sweep {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::fmt::Display for Sweep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}=", self.param.as_str())?;
        for (i, v) in self.values.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{v}")?;
        }
        Ok(())
    }
}

fn parse_sweep(text: &str) -> Result<Sweep, String> {
    let (name, values) = text
        .split_once('=')
        .ok_or("expected PARAM=V1,V2,… (buffer-size=64,1024 or num-clients=1,2,4)")?;
    let param = match name.trim() {
        "buffer-size" => SweepParam::BufferSize,
        "num-clients" => SweepParam::NumClients,
        other => {
            return Err(format!(
                "{other:?} cannot be swept: buffer-size or num-clients"
            ));
        }
    };
    let values = values
        .split(',')
        .map(|v| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("{v:?} is not a whole number"))
        })
        .collect::<Result<Vec<u64>, String>>()?;
    if values.is_empty() || values.len() > 64 {
        return Err("a sweep has 1 to 64 points".to_owned());
    }
    Ok(Sweep { param, values })
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("{e} (try 10s, 500ms, 2m)"))?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(d)
}

/// Parameters of the echo experiments, with Demikernel's names where it has them.
/// Its serde form is the `hello` parameters sessions record ([`crate::params::json_of`]);
/// the conductor's listening socket (`--listen-fd`) is passed on the command line only.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct EchoParams {
    /// Which side(s) to run: both = a server process and the clients on this host
    #[arg(long, value_enum, default_value_t = Role::Both)]
    pub role: Role,
    /// Address the server listens on [default: 0.0.0.0:7777 with --role server,
    /// 127.0.0.1 on any free port with --role both]
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// The server's address (--role client)
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect: Option<SocketAddr>,
    /// Bytes of payload per message (fragmented into datagrams above 64,512 over UDP; at
    /// most 1456, one frame, with --backend dpdk)
    #[arg(long, visible_alias = "msg-size", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub buffer_size: u64,
    /// Messages each client sends [default: 100000, or as many as fit in --duration]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_iters: Option<u64>,
    /// Clients, each with a socket (a connection over TCP) of its own
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub num_clients: u32,
    /// echo: one message in flight per client (latency); throughput: --window of them
    #[arg(long, value_enum, default_value_t = Mode::Echo)]
    pub mode: Mode,
    /// Run the clients this long instead of --num-iters messages (a sweep shares it
    /// evenly among its points); a server serves this long [default: until stopped]
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    #[serde(
        serialize_with = "crate::params::as_humantime_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration: Option<Duration>,
    /// Open loop: messages per second from all clients together, sent on schedule
    /// whatever comes back; latency counts from the intended send time
    #[arg(long, value_name = "MSGS_PER_S", value_parser = clap::value_parser!(u64).range(1..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<u64>,
    /// The transport
    #[arg(long, value_enum, default_value_t = Protocol::Udp)]
    pub protocol: Protocol,
    /// How sockets are driven: tokio (async), poll (busy polling, pinned), mmsg (batched
    /// recvmmsg/sendmmsg); dpdk (DPDK poll-mode drivers over a memif link, no sockets)
    #[arg(long, value_enum, default_value_t = Backend::Tokio)]
    pub backend: Backend,
    /// --backend dpdk: the memif socket where the server listens and the clients connect
    /// (needed with --role server or client) [default with --role both: memif.sock in a
    /// directory of the run's own]
    #[arg(long, value_name = "PATH")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memif: Option<PathBuf>,
    /// --backend dpdk: reserve N more 2 MiB huge pages (root) for each side's EAL, given
    /// back at the end [default: none, the EAL runs with --no-huge]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<u32>,
    /// How long a message may take to come back before it counts as a timeout; a peer
    /// silent for five timeouts in a row is an error
    #[arg(long, value_name = "D", default_value = "1s", value_parser = parse_duration)]
    #[serde(serialize_with = "crate::params::as_humantime")]
    pub timeout: Duration,
    /// Messages in flight per client in throughput mode (and the cap with --rate)
    /// [default: 1 MiB / --buffer-size, between 1 and 32; 1024 with --rate]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_WINDOW)))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    /// Run several points in one run, as phases that keep the server and sockets between
    /// points: buffer-size=64,1024,… or num-clients=1,2,4,…. `benchtop run udp-echo
    /// --sweep` (the recorder's option) becomes this for one sweep of these parameters.
    #[arg(long = PHASE_SWEEP, hide = true, value_name = "PARAM=V1,V2,…", value_parser = parse_sweep)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Sweep>,
    /// The server's socket, inherited by number (set by --role both for its server)
    #[arg(long, hide = true, value_name = "FD")]
    #[serde(skip)]
    pub listen_fd: Option<i32>,
}

impl Default for EchoParams {
    fn default() -> Self {
        EchoParams {
            role: Role::Both,
            listen: None,
            connect: None,
            buffer_size: 64,
            num_iters: None,
            num_clients: 1,
            mode: Mode::Echo,
            duration: None,
            rate: None,
            protocol: Protocol::Udp,
            backend: Backend::Tokio,
            memif: None,
            hugepages: None,
            timeout: Duration::from_secs(1),
            window: None,
            sweep: None,
            listen_fd: None,
        }
    }
}

pub(super) fn value_name<T: clap::ValueEnum>(value: T) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

impl EchoParams {
    /// Messages per client when neither `--num-iters` nor `--duration` is given.
    pub const DEFAULT_NUM_ITERS: u64 = 100_000;

    /// The command-line arguments that parse back into these parameters, derived from
    /// the clap definition and the serde form ([`crate::params::args_of`]), and the
    /// conductor's listening socket, which sessions do not record.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = crate::params::args_of(self);
        if let Some(fd) = self.listen_fd {
            args.extend(["--listen-fd".to_owned(), fd.to_string()]);
        }
        args
    }

    /// The parameters for `hello`, keyed by their command-line names (the phase sweep
    /// as `sweep`): the serde form.
    pub fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        crate::params::json_of(self)
    }

    /// Checks what clap cannot: sizes and counts against their limits, and which
    /// parameters go with which role.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |name: &'static str, value: String, reason: &'static str| {
            Err(WorkloadError::BadParam {
                name,
                value,
                reason,
            })
        };
        check_buffer_size(self.buffer_size)?;
        check_num_clients(u64::from(self.num_clients))?;
        if self.num_iters == Some(0) {
            return bad("num-iters", "0".to_owned(), "must be at least 1");
        }
        if self.rate == Some(0) {
            return bad("rate", "0".to_owned(), "must be at least 1 message/s");
        }
        if let Some(w) = self.window
            && !(1..=MAX_WINDOW).contains(&w)
        {
            return bad("window", w.to_string(), "must be 1 to 4096 messages");
        }
        if self.timeout.is_zero() || self.timeout > Duration::from_secs(3600) {
            return bad(
                "timeout",
                format!("{:?}", self.timeout),
                "must be longer than zero and at most an hour",
            );
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return bad("duration", "0s".to_owned(), "must be longer than zero");
        }
        super::dpdk::check(self)?;
        match self.role {
            Role::Client if self.connect.is_none() && self.backend != Backend::Dpdk => {
                return bad(
                    "connect",
                    "(none)".to_owned(),
                    "--role client needs the server's address: --connect ADDR",
                );
            }
            Role::Client if self.listen.is_some() || self.listen_fd.is_some() => {
                return bad(
                    "listen",
                    self.listen.map(|a| a.to_string()).unwrap_or_default(),
                    "a client does not listen: --listen goes with --role server or both",
                );
            }
            Role::Server | Role::Both if self.connect.is_some() => {
                return bad(
                    "connect",
                    self.connect.map(|a| a.to_string()).unwrap_or_default(),
                    "--connect goes with --role client (--role both starts its own server)",
                );
            }
            Role::Server if self.sweep.is_some() => {
                return bad(
                    "sweep",
                    self.sweep
                        .as_ref()
                        .map(Sweep::to_string)
                        .unwrap_or_default(),
                    "a sweep is run by the clients: --role client or both",
                );
            }
            Role::Both | Role::Client if self.listen_fd.is_some() => {
                return bad(
                    "listen-fd",
                    self.listen_fd.map(|f| f.to_string()).unwrap_or_default(),
                    "only a server inherits its socket",
                );
            }
            _ => {}
        }
        if let Some(sweep) = &self.sweep {
            for &v in &sweep.values {
                match sweep.param {
                    SweepParam::BufferSize => check_buffer_size(v)?,
                    SweepParam::NumClients => check_num_clients(v)?,
                }
            }
        }
        Ok(())
    }

    /// The sweep's points as parameters (one point, these parameters, without a sweep).
    pub(super) fn points(&self) -> Vec<(Option<String>, EchoParams)> {
        let Some(sweep) = &self.sweep else {
            return vec![(None, self.clone())];
        };
        let share = self.duration.map(|d| d / sweep.values.len().max(1) as u32);
        sweep
            .values
            .iter()
            .map(|&v| {
                let mut p = self.clone();
                p.sweep = None;
                p.duration = share;
                match sweep.param {
                    SweepParam::BufferSize => p.buffer_size = v,
                    SweepParam::NumClients => p.num_clients = v as u32,
                }
                (Some(format!("{}={v}", sweep.param.as_str())), p)
            })
            .collect()
    }

    /// What the clients of one point (these parameters, no sweep) do.
    pub(super) fn client_setup(&self, server: SocketAddr, first_seq: u64) -> ClientSetup {
        ClientSetup {
            protocol: self.protocol,
            backend: self.backend,
            server,
            size: self.buffer_size as usize,
            pacing: self.pacing(),
            timeout: self.timeout,
            silence: self.timeout * SILENT_TIMEOUTS,
            limit: match (self.num_iters, self.duration) {
                (Some(n), _) => Some(n),
                (None, Some(_)) => None,
                (None, None) => Some(EchoParams::DEFAULT_NUM_ITERS),
            },
            duration: self.duration,
            num_clients: self.num_clients,
            first_seq,
        }
    }

    fn pacing(&self) -> Pacing {
        let auto = ((1u64 << 20) / self.buffer_size.max(1)).clamp(1, 32) as usize;
        match (self.rate, self.mode) {
            (Some(rate), _) => Pacing {
                window: self.window.map_or(1024, |w| w as usize),
                interval_ns: Some(
                    (1_000_000_000u64 * u64::from(self.num_clients) / rate.max(1)).max(1),
                ),
            },
            (None, Mode::Echo) => Pacing {
                window: 1,
                interval_ns: None,
            },
            (None, Mode::Throughput) => Pacing {
                window: self.window.map_or(auto, |w| w as usize),
                interval_ns: None,
            },
        }
    }
}

fn check_buffer_size(v: u64) -> Result<(), WorkloadError> {
    if v == 0 {
        return Err(WorkloadError::BadParam {
            name: "buffer-size",
            value: "0".to_owned(),
            reason: "a message needs at least 1 byte",
        });
    }
    if v > MAX_BUFFER_SIZE {
        return Err(WorkloadError::BadParam {
            name: "buffer-size",
            value: v.to_string(),
            reason: "larger than the 1 MiB (1048576-byte) limit of a message",
        });
    }
    Ok(())
}

fn check_num_clients(v: u64) -> Result<(), WorkloadError> {
    if !(1..=u64::from(MAX_CLIENTS)).contains(&v) {
        return Err(WorkloadError::BadParam {
            name: "num-clients",
            value: v.to_string(),
            reason: "must be 1 to 256 clients",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<EchoParams, String> {
        crate::test_support::parse_params("udp-echo", args)
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
            (&["--backend", "xdp"][..], "possible values"),
            (&["--listen", "nowhere"][..], "--listen"),
        ] {
            let err = parse(args).unwrap_err();
            assert!(err.contains(says), "{args:?}: {err}");
        }
    }

    #[test]
    fn dpdk_parameters_parse_and_go_back_to_the_same_arguments() {
        let params = parse(&[
            "--backend",
            "dpdk",
            "--role",
            "server",
            "--memif",
            "/tmp/run/memif.sock",
            "--hugepages",
            "8",
            "--msg-size",
            "128",
        ])
        .unwrap();
        assert_eq!(params.buffer_size, 128);
        assert_eq!(params.hugepages, Some(8));
        let again = parse(
            &params
                .to_args()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert_eq!(again, params);
        let err = parse(&[
            "--backend",
            "dpdk",
            "--role",
            "client",
            "--connect",
            "10.0.0.1:7",
        ])
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--memif PATH") || err.contains("feature"),
            "{err}"
        );
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
}
