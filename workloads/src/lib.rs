//! benchtop's built-in workloads and the worker side of the report protocol.
//!
//! Each workload mirrors a published benchmark. A worker process speaks
//! [`protocol`] to its conductor; this crate depends on no other benchtop crate.
#![deny(missing_docs)]

pub mod protocol;
