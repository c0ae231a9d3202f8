//! `--backend dpdk`: the echo on DPDK's own poll-mode drivers, between two processes.
//!
//! The server and the clients are separate processes, each with an EAL of its own (a file
//! prefix of its own, everything in memory, `--no-huge` unless `--hugepages N`), joined by
//! a `net_memif` pair: the server is the memif server, its socket under the run's
//! directory (`--role both`) or at `--memif PATH`. Each side busy-polls receive bursts on
//! one pinned thread; messages travel as real Ethernet II / IPv4 / UDP frames with both
//! checksums, which each side checks on receipt ([`frame`]). The server turns a frame
//! around in place and sends the same mbuf back; the clients keep their messages in the
//! same flights as the socket back ends, so the figures, histograms and report rows are
//! theirs.
//!
//! The C side is small: DPDK's exported functions are declared by hand (`ffi`), and its
//! static-inline fast path (rx/tx bursts, mbuf alloc/free/data) goes through a shim
//! compiled against `pkg-config libdpdk` (csrc/dpdk_shim.c). Without the `dpdk` cargo
//! feature, the back end is refused before the run, naming the feature.

#[cfg(feature = "dpdk")]
mod engine;
#[cfg(feature = "dpdk")]
mod ffi;
// Pure byte work, built and tested in every build; only the DPDK back end sends frames.
#[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
pub(crate) mod frame;
#[cfg(feature = "dpdk")]
mod hugepages;
#[cfg(feature = "dpdk")]
mod port;
#[cfg(feature = "dpdk")]
mod socket;

use super::Backend;
use super::params::{EchoParams, Protocol, Role, SweepParam};
use super::wire::HEADER;
use crate::WorkloadError;
#[cfg(feature = "dpdk")]
pub(super) use engine::{run_both, run_client, run_clients, serve};

/// The most payload bytes of a message over DPDK: one frame of a 1,500-byte MTU, less
/// the message header.
pub const MAX_MESSAGE: u64 = (frame::MAX_UDP_PAYLOAD - HEADER) as u64;

#[cfg(feature = "dpdk")]
/// The server's end of the memif link (locally administered MAC addresses).
pub(crate) const SERVER_MAC: [u8; 6] = [0x02, 0xbe, 0x4c, 0x00, 0x00, 0x01];
#[cfg(feature = "dpdk")]
/// The clients' end.
pub(crate) const CLIENT_MAC: [u8; 6] = [0x02, 0xbe, 0x4c, 0x00, 0x00, 0x02];
#[cfg(feature = "dpdk")]
/// The server's IPv4 address on the link.
pub(crate) const SERVER_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 77, 0, 1);
#[cfg(feature = "dpdk")]
/// The clients' IPv4 address; client `i` sends from UDP port [`CLIENT_PORT_BASE`] + `i`.
pub(crate) const CLIENT_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 77, 0, 2);
#[cfg(feature = "dpdk")]
/// The first client's UDP port.
pub(crate) const CLIENT_PORT_BASE: u16 = 49152;

#[cfg(feature = "dpdk")]
/// Which end of the memif link a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemifRole {
    /// Listens on the socket; the echo server.
    Server,
    /// Connects to it; the clients.
    Client,
}

/// The refusal of `--backend dpdk` by a build without DPDK, naming the feature.
pub(super) fn refused() -> WorkloadError {
    WorkloadError::BadParam {
        name: "backend",
        value: "dpdk".to_owned(),
        reason: "this build has no DPDK: build benchtop with the `dpdk` cargo feature (on by \
                 default; it needs DPDK 22.11 or later: apt-get install libdpdk-dev \
                 pkg-config)",
    }
}

/// Refuses `--backend dpdk` in a build without DPDK (`built` false).
pub(super) fn check_built(backend: Backend, built: bool) -> Result<(), WorkloadError> {
    if backend == Backend::Dpdk && !built {
        return Err(refused());
    }
    Ok(())
}

/// The checks of the DPDK parameters: which go with `--backend dpdk`, and what it can
/// carry.
pub(super) fn check(params: &EchoParams) -> Result<(), WorkloadError> {
    let bad = |name: &'static str, value: String, reason: &'static str| {
        Err(WorkloadError::BadParam {
            name,
            value,
            reason,
        })
    };
    if params.backend != Backend::Dpdk {
        if let Some(path) = &params.memif {
            return bad(
                "memif",
                format!("{path:?}"),
                "--memif goes with --backend dpdk",
            );
        }
        if let Some(n) = params.hugepages {
            return bad(
                "hugepages",
                n.to_string(),
                "--hugepages goes with --backend dpdk",
            );
        }
        return Ok(());
    }
    check_built(params.backend, cfg!(feature = "dpdk"))?;
    if params.protocol != Protocol::Udp {
        return bad(
            "protocol",
            "tcp".to_owned(),
            "--backend dpdk echoes UDP datagrams in Ethernet frames: --protocol udp",
        );
    }
    let too_big = |v: u64| v > MAX_MESSAGE;
    let swept_too_big = params
        .sweep
        .as_ref()
        .filter(|s| s.param == SweepParam::BufferSize)
        .and_then(|s| s.values.iter().copied().find(|&v| too_big(v)));
    if let Some(v) = swept_too_big.or(too_big(params.buffer_size).then_some(params.buffer_size)) {
        return bad(
            "buffer-size",
            v.to_string(),
            "--backend dpdk sends a message in one frame of a 1,500-byte MTU: at most 1456 \
             bytes",
        );
    }
    if let Some(addr) = params.listen.or(params.connect) {
        return bad(
            if params.listen.is_some() {
                "listen"
            } else {
                "connect"
            },
            addr.to_string(),
            "--backend dpdk meets at a memif socket, not an address: --memif PATH",
        );
    }
    if params.memif.is_none() && params.role != Role::Both {
        return bad(
            "memif",
            "(none)".to_owned(),
            "--role server and --role client with --backend dpdk meet at a memif socket: \
             --memif PATH, the same on both sides",
        );
    }
    if let Some(path) = &params.memif
        && path.as_os_str().len() > socket::MAX_PATH
    {
        return bad(
            "memif",
            format!("{path:?}"),
            "longer than the 107 bytes a Unix socket's path may have",
        );
    }
    #[cfg(feature = "dpdk")]
    obstacles(params)?;
    Ok(())
}

/// What stands in the way, said before the run rather than by a process that ends during
/// it: huge pages without root (only root may reserve them), a `--memif` socket where
/// this user may not create it, or one another server listens on. The `--no-huge` echo
/// over a socket in the run's own directory needs no privilege.
#[cfg(feature = "dpdk")]
fn obstacles(params: &EchoParams) -> Result<(), WorkloadError> {
    if let Some(pages) = params.hugepages {
        hugepages::permitted(pages)?;
    }
    if let Some(path) = &params.memif
        && params.role != Role::Client
    {
        socket::may_claim(path)?;
    }
    Ok(())
}

#[cfg(not(feature = "dpdk"))]
mod socket {
    /// The longest path of a Unix socket.
    pub(crate) const MAX_PATH: usize = 107;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_without_dpdk_refuses_the_back_end_naming_the_feature() {
        let err = check_built(Backend::Dpdk, false).unwrap_err().to_string();
        assert!(err.contains("`dpdk` cargo feature"), "{err}");
        assert!(err.contains("libdpdk-dev"), "{err}");
        check_built(Backend::Dpdk, true).unwrap();
        check_built(Backend::Poll, false).unwrap();
    }

    fn dpdk() -> EchoParams {
        EchoParams {
            backend: Backend::Dpdk,
            ..EchoParams::default()
        }
    }

    #[test]
    fn dpdk_takes_a_message_of_one_frame_and_no_more() {
        let fits = EchoParams {
            buffer_size: MAX_MESSAGE,
            ..dpdk()
        };
        if cfg!(feature = "dpdk") {
            check(&fits).unwrap();
        }
        let err = check(&EchoParams {
            buffer_size: MAX_MESSAGE + 1,
            ..dpdk()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("1456") || err.contains("feature"), "{err}");
    }

    #[test]
    fn split_roles_need_the_memif_socket_and_other_back_ends_refuse_it() {
        if cfg!(feature = "dpdk") {
            let err = check(&EchoParams {
                role: Role::Server,
                ..dpdk()
            })
            .unwrap_err()
            .to_string();
            assert!(err.contains("--memif PATH"), "{err}");
            let tcp = check(&EchoParams {
                protocol: Protocol::Tcp,
                ..dpdk()
            });
            assert!(tcp.unwrap_err().to_string().contains("--protocol udp"));
        }
        let err = check(&EchoParams {
            backend: Backend::Poll,
            memif: Some("/tmp/x.sock".into()),
            ..EchoParams::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("--backend dpdk"), "{err}");
    }
}
