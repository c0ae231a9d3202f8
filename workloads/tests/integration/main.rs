//! Integration tests of benchtop-workloads: the ring end to end, the worker's protocol
//! transcript, and stopping a running worker.

// Tests may unwrap (clippy.toml allows it in #[test] functions; this covers helpers).
#![allow(clippy::unwrap_used)]

mod ring;
mod stop;
mod support;
mod transcript;
