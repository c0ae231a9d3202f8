//! Numbers for people: durations and sizes with three significant digits and a unit, as
//! `benchtop show` and the TUI print them.
//!
//! ```
//! use benchtop_profile::units::{human_bytes, human_count, human_figure, human_ns};
//!
//! assert_eq!(human_count(12_345.0), "12.3 k");
//! assert_eq!(human_ns(1_234.0), "1.23 µs");
//! assert_eq!(human_bytes(14 << 20), "14.0 MiB");
//! assert_eq!(human_figure(18_162_956.07, "messages/s"), "18.16 M messages/s");
//! ```

/// A count or rate for people, in a few characters: `950`, `41.5`, `12.3 k`, `8.20 M`,
/// `1.05 G`. Below 100 a fraction keeps one decimal; whole numbers and larger values none.
pub fn human_count(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2} G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1} k", v / 1e3)
    } else if a == a.trunc() || a >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Nanoseconds for people: three significant digits, a space, and the largest of `ns`, `µs`,
/// `ms` and `s` that keeps the number at 1 or more.
///
/// | `ns` | text |
/// |---|---|
/// | `850.0` | `850 ns` |
/// | `1_234.0` | `1.23 µs` |
/// | `45_600.0` | `45.6 µs` |
/// | `999_999.0` | `1.00 ms` |
/// | `4_500_000.0` | `4.50 ms` |
/// | `2.1e9` | `2.10 s` |
/// | `3.6e12` | `3600 s` |
///
/// Below 1 µs the nanoseconds are rounded to a whole number; past 1000 s the seconds are.
/// A negative duration gets a `-` in front; NaN and infinities print as `NaN ns`, `inf ns`.
pub fn human_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return format!("{ns} ns");
    }
    if ns < 0.0 {
        return format!("-{}", human_ns(-ns));
    }
    // -0.0 + 0.0 is 0.0: no "-0 ns".
    let ns = ns + 0.0;
    if ns < 999.5 {
        return format!("{ns:.0} ns");
    }
    let (value, unit) = if ns < 999.5e3 {
        (ns / 1e3, "µs")
    } else if ns < 999.5e6 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    three_digits(value, unit)
}

/// Bytes for people, in binary units: whole bytes below 1 KiB, else three significant
/// digits of `KiB`, `MiB`, `GiB`, `TiB`, `PiB` or `EiB`.
///
/// | `bytes` | text |
/// |---|---|
/// | `512` | `512 B` |
/// | `1_536` | `1.50 KiB` |
/// | `3 << 20` | `3.00 MiB` |
/// | `14 << 20` | `14.0 MiB` |
/// | `(1 << 30) - 1` | `1.00 GiB` |
/// | `u64::MAX` | `16.0 EiB` |
///
/// From 1000 to 1023 of a unit the number keeps its four digits (`1000 KiB`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    // 1023.5 and up would round to "1024".
    while value >= 1023.5 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    three_digits(value, UNITS[unit])
}

/// A workload's result figure for people, from its raw value and unit: durations (`s`,
/// `ms`, `µs`/`us`, `ns`) as [`human_ns`] writes them, `bytes` as [`human_bytes`],
/// a plain whole number exactly, anything else as [`human_count`] followed by its unit
/// (`18.16 M messages/s`). The raw
/// value stays in session.json and `show --json`.
///
/// | `value`, `unit` | text |
/// |---|---|
/// | `0.000307717`, `s` | `308 µs` |
/// | `18162956.07`, `messages/s` | `18.16 M messages/s` |
/// | `270000.0`, `` | `270000` |
/// | `3221225472.0`, `bytes` | `3.00 GiB` |
pub fn human_figure(value: f64, unit: &str) -> String {
    let scale = match unit {
        "s" => Some(1e9),
        "ms" => Some(1e6),
        "µs" | "us" => Some(1e3),
        "ns" => Some(1.0),
        _ => None,
    };
    if let Some(scale) = scale {
        return human_ns(value * scale);
    }
    if matches!(unit, "bytes" | "B") && value.is_finite() && value >= 0.0 && value.fract() == 0.0 {
        return human_bytes(value as u64);
    }
    // A plain whole number (a count, a checksum) is read exactly.
    if unit.is_empty() && value.is_finite() && value.fract() == 0.0 && value.abs() < 1e15 {
        return format!("{value:.0}");
    }
    let number = if value.is_finite() {
        human_count(value)
    } else {
        value.to_string()
    };
    if unit.is_empty() {
        number
    } else {
        format!("{number} {unit}")
    }
}

/// `value` (at least 1) with three significant digits, or as a whole number from 1000 up.
fn three_digits(value: f64, unit: &str) -> String {
    // The bounds are where rounding would carry into a fourth digit ("10.00").
    let decimals = if value < 9.995 {
        2
    } else if value < 99.95 {
        1
    } else {
        0
    };
    format!("{value:.decimals$} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanoseconds_keep_three_significant_digits_in_the_largest_unit_that_fits() {
        for (ns, text) in [
            (0.0, "0 ns"),
            (-0.0, "0 ns"),
            (12.4, "12 ns"),
            (850.0, "850 ns"),
            (999.4, "999 ns"),
            (999.6, "1.00 µs"),
            (1_234.0, "1.23 µs"),
            (9_996.0, "10.0 µs"),
            (45_600.0, "45.6 µs"),
            (999_999.0, "1.00 ms"),
            (4_500_000.0, "4.50 ms"),
            (2_100_000_000.0, "2.10 s"),
            (3.6e12, "3600 s"),
            (-1_500.0, "-1.50 µs"),
            (f64::NAN, "NaN ns"),
            (f64::INFINITY, "inf ns"),
        ] {
            assert_eq!(human_ns(ns), text, "{ns}");
        }
    }

    #[test]
    fn bytes_keep_three_significant_digits_in_binary_units() {
        for (bytes, text) in [
            (0, "0 B"),
            (512, "512 B"),
            (1_023, "1023 B"),
            (1_024, "1.00 KiB"),
            (1_536, "1.50 KiB"),
            (1_000 << 10, "1000 KiB"),
            ((1 << 20) - 1, "1.00 MiB"),
            (3 << 20, "3.00 MiB"),
            (14 << 20, "14.0 MiB"),
            (32 << 30, "32.0 GiB"),
            (u64::MAX, "16.0 EiB"),
        ] {
            assert_eq!(human_bytes(bytes), text, "{bytes}");
        }
    }

    #[test]
    fn figures_take_the_unit_people_read_and_keep_others_as_counts() {
        for (value, unit, text) in [
            (0.000307717, "s", "308 µs"),
            (1.01369, "s", "1.01 s"),
            (2.85, "ms", "2.85 ms"),
            (45.0, "µs", "45.0 µs"),
            (45.0, "us", "45.0 µs"),
            (18_162_956.068280622, "messages/s", "18.16 M messages/s"),
            (270_000.0, "", "270000"),
            (12_345.6, "", "12.3 k"),
            (5000.0, "", "5000"),
            (3.0 * (1u64 << 30) as f64, "bytes", "3.00 GiB"),
            (1.5, "bytes", "1.5 bytes"),
            (f64::NAN, "messages", "NaN messages"),
            (412.3, "MB/s", "412 MB/s"),
        ] {
            assert_eq!(human_figure(value, unit), text, "{value} {unit}");
        }
    }
}
