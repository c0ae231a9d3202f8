//! Result figures: the named values a run reports (the time it took, its throughput, its
//! peak memory) and which direction of change is better. One type serves the wire (a
//! worker's `summary` and `phase` messages, through `benchtop-protocol`) and the session
//! (session.json), so that nothing converts between two copies of it.

use serde::{Deserialize, Serialize};

/// One named result figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// The original benchmark's name for it, e.g. `time_taken_for_ring_messaging`.
    pub name: String,
    /// The value, in `unit`. JSON has no NaN: a figure without a value is written `null`
    /// and read back as NaN (the protocol's reader refuses it from a worker).
    #[serde(deserialize_with = "crate::timeseries::f64_or_nan")]
    pub value: f64,
    /// Unit, e.g. `s`, `bytes`, `messages/s`; empty for plain numbers.
    #[serde(default)]
    pub unit: String,
    /// Which direction is better, when one is (used by comparisons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub better: Option<Better>,
}

/// Which direction of change is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Better {
    /// Higher is better (throughput).
    Higher,
    /// Lower is better (time, memory).
    Lower,
}

impl Figure {
    /// A figure with no preferred direction.
    pub fn new(name: impl Into<String>, value: f64, unit: impl Into<String>) -> Self {
        Figure {
            name: name.into(),
            value,
            unit: unit.into(),
            better: None,
        }
    }

    /// The same figure, saying which direction is better.
    #[must_use]
    pub fn better(mut self, better: Better) -> Self {
        self.better = Some(better);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_without_a_value_round_trips_as_null_and_nan() {
        let f = Figure::new("peak", f64::NAN, "bytes").better(Better::Lower);
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(
            json,
            r#"{"name":"peak","value":null,"unit":"bytes","better":"lower"}"#
        );
        let back: Figure = serde_json::from_str(&json).unwrap();
        assert!(back.value.is_nan());
        assert_eq!(back.better, Some(Better::Lower));
        let plain: Figure = serde_json::from_str(r#"{"name":"n","value":2.5}"#).unwrap();
        assert_eq!(plain, Figure::new("n", 2.5, ""));
    }
}
