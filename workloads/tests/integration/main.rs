//! Integration tests of benchtop-workloads: the ring end to end, the worker's protocol
//! transcript, stopping a running worker, and the workloads across processes run from
//! the `worker-fixture` binary.

// Tests may unwrap (clippy.toml allows it in #[test] functions; this covers helpers).
#![allow(clippy::unwrap_used)]

mod defs;
mod ecflow;
mod echo;
#[cfg(feature = "dpdk")]
mod echo_dpdk;
mod fixture;
mod ipc;
#[cfg(feature = "kvstore")]
mod kvstore;
mod messenger;
mod ring;
mod stop;
mod support;
mod transcript;
