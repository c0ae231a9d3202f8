//! The workload's metrics, whole and per instance.

use std::sync::Arc;

use super::params::{MsgrParams, instance_tag};
use super::tally::Tally;
use crate::WorkloadError;
use crate::report::{Counter, IntervalHistogram, Metrics};

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

    pub(super) fn tally(&self, instance: usize) -> Tally {
        let mut messages = vec![self.messages.clone()];
        let mut bytes = vec![self.bytes.clone()];
        let mut latency = vec![self.latency.clone()];
        if let Some((m, b, l)) = self.per_instance.get(instance) {
            messages.push(m.clone());
            bytes.push(b.clone());
            latency.push(l.clone());
        }
        Tally::feeding(messages, bytes, latency)
    }
}
