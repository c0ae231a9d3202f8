//! benchtop's OTLP exporter: a recording's per-interval stacks as OTLP profiles and its
//! figures as OTLP metrics, sent to an OpenTelemetry Collector over gRPC or HTTP/protobuf.
//!
//! The protobuf types are `opentelemetry-proto` 0.33.1, which carries OTLP 1.10.0: the
//! profiles signal `v1development` as the OpenTelemetry Collector v0.165.0 (pdata 1.71)
//! accepts it behind its `service.profilesSupport` feature gate.
//!
//! A live run hands an [`Exporter`] each interval's stacks ([`Exporter::stacks`]) and row
//! ([`Exporter::row`]), and a built-in worker's allocations ([`Exporter::allocs`]); the
//! exporter copies them into a bounded queue and returns, and its
//! own thread builds and sends the requests. A saved session is sent with [`replay()`].
//!
//! ```
//! use benchtop_otlp::{OtlpOptions, Protocol};
//!
//! let mut opts = OtlpOptions::new("127.0.0.1:4317", Protocol::Grpc)?;
//! opts.add_headers("authorization=Bearer%20token")?;
//! assert_eq!(opts.endpoint, "http://127.0.0.1:4317");
//! assert_eq!(opts.header_names(), ["authorization"]);
//! // The token is never shown.
//! assert!(!format!("{opts:?}").contains("token"));
//! # Ok::<(), benchtop_otlp::OtlpError>(())
//! ```

#![deny(missing_docs)]

pub mod exporter;
pub mod kinds;
pub mod metrics;
pub mod options;
pub mod profiles;
pub mod replay;
pub mod resource;
pub mod transport;

pub use exporter::{Exporter, RunContext, StackNamer};
pub use kinds::{BatchInterval, KINDS, OtlpKind, Sampling};
pub use options::{
    OtlpOptions, Protocol, QUEUE_BYTES, TABLE_BYTES, parse_headers, protocol_for_endpoint,
    redact_headers,
};
pub use profiles::StackSource;
pub use replay::{replay, unix_now_ns};
pub use resource::resource;

/// A bound in bytes as the warnings say it: `64 KiB`, `8 MiB`, `1.5 MiB`.
fn size(bytes: u64) -> String {
    if bytes < 1 << 20 {
        return format!("{} KiB", bytes.div_ceil(1 << 10));
    }
    let mib = bytes as f64 / f64::from(1u32 << 20);
    if mib.fract() == 0.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{mib:.1} MiB")
    }
}

/// The OTLP version of the protobuf types sent.
pub const OTLP_VERSION: &str = "1.10.0";

/// Why the exporter could not start or a session could not be sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// An option is wrong: the endpoint, a header, the CA file.
    #[error("{0}")]
    Options(String),
    /// The session to send could not be read.
    #[error("{0}")]
    Session(String),
}

/// What an exporter sent and dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// Where it sent.
    pub endpoint: String,
    /// How.
    pub protocol: Protocol,
    /// Requests the collector took.
    pub requests: u64,
    /// Their bytes (protobuf bodies).
    pub bytes: u64,
    /// Of them, profiles requests.
    pub profile_requests: u64,
    /// Of them, metrics requests.
    pub metric_requests: u64,
    /// Batches dropped because the queue was full, in batches or in bytes (the
    /// collector slow or away).
    pub dropped_queue_full: u64,
    /// Stack batches not sent because the run's stack definitions passed their bound
    /// ([`OtlpOptions::table_bytes`]).
    pub dropped_table_full: u64,
    /// Batches dropped after every attempt failed.
    pub dropped_failed: u64,
    /// Batches still queued when the run ended and the wait for them ran out.
    pub dropped_at_end: u64,
    /// Profiles or data points the collector refused (partial successes).
    pub rejected: u64,
    /// The last error a request met.
    pub last_error: Option<String>,
    /// The collector's last message refusing part of a request.
    pub last_rejection: Option<String>,
    /// The queue's bound in batches ([`OtlpOptions::queue`]).
    pub queue: u64,
    /// The queue's bound in bytes ([`OtlpOptions::queue_bytes`]).
    pub queue_bytes: u64,
    /// The most bytes the queued batches held at once (never above `queue_bytes`).
    pub queue_peak_bytes: u64,
    /// The stack definitions' bound ([`OtlpOptions::table_bytes`]).
    pub table_bytes: u64,
}

impl Report {
    /// Batches that did not arrive.
    pub fn dropped(&self) -> u64 {
        self.dropped_queue_full
            + self.dropped_table_full
            + self.dropped_failed
            + self.dropped_at_end
    }

    /// What the session's warnings say of the export: nothing when all arrived.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let dropped = self.dropped();
        if dropped > 0 {
            let mut why = Vec::new();
            if self.dropped_failed > 0 {
                why.push(format!(
                    "{} failed every attempt{}",
                    self.dropped_failed,
                    self.last_error
                        .as_ref()
                        .map(|e| format!(" (last error: {e})"))
                        .unwrap_or_default()
                ));
            }
            if self.dropped_queue_full > 0 {
                why.push(format!(
                    "{} found the queue full (its bound: {} batches or {}) while the \
                     collector did not take batches",
                    self.dropped_queue_full,
                    self.queue,
                    size(self.queue_bytes)
                ));
            }
            if self.dropped_table_full > 0 {
                why.push(format!(
                    "{} batches of stacks were not sent once the run's stack definitions \
                     passed their bound of {}",
                    self.dropped_table_full,
                    size(self.table_bytes)
                ));
            }
            if self.dropped_at_end > 0 {
                why.push(format!(
                    "{} were still queued when the run ended",
                    self.dropped_at_end
                ));
            }
            out.push(format!(
                "OTLP export to {}: {dropped} batches dropped ({}); {} requests arrived",
                self.endpoint,
                why.join("; "),
                self.requests
            ));
        }
        if self.rejected > 0 {
            out.push(format!(
                "OTLP export to {}: the collector refused {} profiles or data points{}",
                self.endpoint,
                self.rejected,
                self.last_rejection
                    .as_ref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ));
        }
        out
    }
}
