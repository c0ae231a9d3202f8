//! What the weights of a flamegraph count, and how they print.

use benchtop_sessions::Kind;
use benchtop_sessions::kinds::WeightUnit;
use benchtop_sessions::units::{human_bytes, human_ns};

/// What the weights of the tree count.
///
/// New units add a variant here and an arm to each `match` below; nothing else in the
/// pane depends on which unit it shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FlameUnit {
    /// On-CPU samples.
    #[default]
    Samples,
    /// Microseconds blocked (off-CPU stacks).
    Micros,
    /// Bytes (memory profiles: resident growth, allocated, live).
    Bytes,
}

impl FlameUnit {
    /// The unit's name as a count is followed by it: `samples` or `µs`.
    pub fn label(self) -> &'static str {
        match self {
            FlameUnit::Samples => "samples",
            FlameUnit::Micros => "µs",
            FlameUnit::Bytes => "bytes",
        }
    }

    /// A weight for people: `12,345 samples`, a duration with three significant digits
    /// (`1.23 ms`) for microseconds, a size (`1.5 MiB`) for bytes.
    pub fn format(self, weight: u64) -> String {
        match self {
            FlameUnit::Samples => format!("{} samples", thousands(weight)),
            FlameUnit::Micros => human_ns(weight as f64 * 1e3),
            FlameUnit::Bytes => human_bytes(weight),
        }
    }
}

impl From<Kind> for FlameUnit {
    fn from(kind: Kind) -> Self {
        // The unit of the kind's folded file, as the kind table gives it.
        match kind.spec().folded_unit {
            WeightUnit::Samples => FlameUnit::Samples,
            WeightUnit::Bytes => FlameUnit::Bytes,
            _ => FlameUnit::Micros,
        }
    }
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
