//! benchtop's built-in workloads and the worker side of the report protocol.
//!
//! Each workload mirrors a published benchmark, keeps its parameter names and prints
//! its figures. A worker process speaks [`protocol`] to its conductor: [`report`] is the
//! worker's half (reporter, start handshake, stop signal, metrics, ticker), and
//! [`worker::run_worker`] runs a whole worker in one call. Workloads across processes
//! (`ring --transport ipc`, `storm`) start their node processes from the same program
//! ([`ipc`]). Of benchtop's crates this one depends on `benchtop-protocol` alone, whose
//! messages [`protocol`] re-exports. The gRPC workload (`kvstore`, with tonic, prost and
//! protoc) is the cargo feature `kvstore`, on by default.
//!
//! ```
//! use std::io::{BufReader, Write};
//! use std::sync::Arc;
//! use std::time::Duration;
//! use benchtop_workloads::report::Reporter;
//! use benchtop_workloads::ring::{RingMode, RingParams};
//! use benchtop_workloads::worker::{run_worker_with, Workload};
//!
//! let workload = Workload::Ring(RingParams {
//!     num_nodes: 100,
//!     num_rounds: 10,
//!     mode: RingMode::Tell,
//!     ..RingParams::default()
//! });
//! // The conductor's end: `start`, then silence (end of input would mean "stop").
//! let (conductor, mut to_worker) = std::io::pipe()?;
//! to_worker.write_all(b"{\"type\":\"start\"}\n")?;
//! let reports = Arc::new(Reporter::new(std::io::sink()));
//! let mut log = Vec::new();
//! run_worker_with(&workload, reports, Duration::from_secs(1), BufReader::new(conductor), &mut log)?;
//! assert!(String::from_utf8_lossy(&log).contains("final_sum_after_ring_messaging: 1000"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod alloc;
pub mod builtin;
pub mod defs;
pub mod echo;
mod error;
pub mod footprint;
pub mod ipc;
#[cfg(feature = "kvstore")]
pub mod kvstore;
pub mod messenger;
pub mod params;
pub mod protocol;
pub mod report;
pub mod ring;
pub mod role;
pub mod storm;
pub mod worker;

pub use error::WorkloadError;

#[cfg(test)]
pub(crate) mod test_support {
    /// Parses `args` as the parameters `T` of the workload `name` would be on a command
    /// line, or says why clap refused them.
    pub(crate) fn parse_params<T: clap::Args>(
        name: &'static str,
        args: &[&str],
    ) -> Result<T, String> {
        let command = T::augment_args(clap::Command::new(name));
        let matches = command
            .try_get_matches_from(std::iter::once(name).chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        T::from_arg_matches(&matches).map_err(|e| e.to_string())
    }

    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A `Write` whose bytes a test reads while or after a worker writes them.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct SharedBuf(pub(crate) Arc<Mutex<Vec<u8>>>);

    impl SharedBuf {
        pub(crate) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    impl Write for SharedBuf {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
