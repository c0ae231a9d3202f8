//! The latency percentile plot (`latency.svg`): latency against percentile, the
//! percentile axis stretched towards 100 % as hdr-plot and HistogramLogAnalyzer draw it
//! (x = log10(1 / (1 − p)): 0 %, 90 %, 99 %, 99.9 % … one decade apart), one line per
//! histogram, so the tail is as visible as the median. `benchtop compare` overlays two
//! sessions on one plot.
//!
//! ```
//! use benchtop_sessions::plot::percentile_svg;
//! use hdrhistogram::Histogram;
//!
//! let mut h = Histogram::<u64>::new(3).unwrap();
//! h.record_n(1_000, 990).unwrap();
//! h.record_n(50_000, 10).unwrap();
//! let svg = percentile_svg("ring: latency", &[("lap", &h)]);
//! assert!(svg.starts_with("<svg") && svg.contains("99.9%"));
//! ```

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use crate::units::human_ns;

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 500.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
/// Percentile points per half distance to 100 %, as HdrHistogram's tools print.
const TICKS_PER_HALF_DISTANCE: u32 = 5;
/// The plot ends at 99.9999 % however many values there are.
const MAX_DECADES: u32 = 6;
/// Line colours, colour-blind safe (Okabe–Ito).
const COLOURS: [&str; 6] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
];

/// Latency (nanoseconds) against percentile for each `(label, histogram)`, as a
/// standalone SVG document. Empty histograms are listed in the legend as empty.
pub fn percentile_svg(title: &str, series: &[(&str, &Histogram<u64>)]) -> String {
    let count = series.iter().map(|(_, h)| h.len()).max().unwrap_or(0);
    // As many decades as the values can fill: 1000 values reach 99.9 %.
    let decades = (count.max(10) as f64)
        .log10()
        .ceil()
        .clamp(1.0, f64::from(MAX_DECADES));
    let max_ns = series.iter().map(|(_, h)| h.max()).max().unwrap_or(0);
    let (y_max, y_step) = nice_axis(max_ns as f64);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |q: f64| {
        let d = if q >= 1.0 {
            decades
        } else {
            (1.0 / (1.0 - q)).log10().min(decades)
        };
        LEFT + d / decades * plot_w
    };
    let y = |ns: f64| TOP + plot_h - ns / y_max * plot_h;

    let mut out = prologue(WIDTH, HEIGHT, 12, &escape(title));
    // Grid and axes.
    for decade in 0..=decades as u32 {
        let q = 1.0 - 10f64.powi(-(decade as i32));
        let gx = x(q);
        let _ = writeln!(
            out,
            r##"<line x1="{gx:.1}" y1="{TOP}" x2="{gx:.1}" y2="{:.1}" stroke="#ddd"/><text x="{gx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 18.0,
            percentile_label(decade)
        );
    }
    let mut v = 0.0;
    while v <= y_max + y_step / 2.0 {
        let gy = y(v);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{gy:.1}" x2="{:.1}" y2="{gy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            gy + 4.0,
            escape(&human_ns(v))
        );
        v += y_step;
    }
    let _ = writeln!(
        out,
        r#"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/><text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text><text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">latency</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 16.0,
        TOP + plot_h / 2.0
    );
    // One line per histogram, and its legend entry.
    for (i, (label, h)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let legend_y = TOP + 18.0 + 18.0 * i as f64;
        let text = if h.is_empty() {
            format!("{label}: no values")
        } else {
            format!(
                "{label}: p50 {}, p99 {}, max {} ({} values)",
                human_ns(h.value_at_quantile(0.5) as f64),
                human_ns(h.value_at_quantile(0.99) as f64),
                human_ns(h.max() as f64),
                crate::units::human_count(h.len() as f64)
            )
        };
        let _ = writeln!(
            out,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{colour}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            LEFT + 10.0,
            legend_y - 4.0,
            LEFT + 34.0,
            legend_y - 4.0,
            LEFT + 40.0,
            legend_y,
            escape(&text)
        );
        if h.is_empty() {
            continue;
        }
        let mut points = String::new();
        for step in h.iter_quantiles(TICKS_PER_HALF_DISTANCE) {
            let _ = write!(
                points,
                "{:.1},{:.1} ",
                x(step.quantile_iterated_to()),
                y(step.value_iterated_to() as f64)
            );
        }
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"><title>{}</title></polyline>"#,
            points.trim_end(),
            escape(label)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// Panels of the phase plot at most: the first figures that change from phase to phase.
const MAX_PHASE_PANELS: usize = 6;

/// The figures of a workload's phases (a sweep's points: `buffer-size=64`,
/// `buffer-size=1024`, …) as one small chart per figure, phases along the x axis in their
/// order — the curves the original papers drew. Only figures with a better direction (the
/// results, not the settings) that differ between phases are drawn, at most six; `None`
/// with fewer than two phases or nothing to draw.
pub fn phases_svg(title: &str, phases: &[crate::meta::PhaseInfo]) -> Option<String> {
    if phases.len() < 2 {
        return None;
    }
    // Figure names in first-seen order, with their unit.
    let mut names: Vec<(&str, &str)> = Vec::new();
    for f in phases.iter().flat_map(|p| &p.figures) {
        if f.better.is_some() && !names.iter().any(|(n, _)| *n == f.name) {
            names.push((&f.name, &f.unit));
        }
    }
    let value = |p: &crate::meta::PhaseInfo, name: &str| {
        p.figures
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.value)
            .filter(|v| v.is_finite())
    };
    names.retain(|(name, _)| {
        let values: Vec<f64> = phases.iter().filter_map(|p| value(p, name)).collect();
        values.len() >= 2 && values.iter().any(|v| *v != values[0])
    });
    names.truncate(MAX_PHASE_PANELS);
    if names.is_empty() {
        return None;
    }
    let (cols, panel_w, panel_h) = (2usize, 440.0, 230.0);
    let rows = names.len().div_ceil(cols);
    let (width, height) = (cols as f64 * panel_w + 20.0, rows as f64 * panel_h + 50.0);
    let mut out = prologue(width, height, 11, &escape(title));
    for (i, (name, unit)) in names.iter().enumerate() {
        let (ox, oy) = (
            10.0 + (i % cols) as f64 * panel_w,
            40.0 + (i / cols) as f64 * panel_h,
        );
        let (left, top, w, h) = (ox + 70.0, oy + 24.0, panel_w - 90.0, panel_h - 80.0);
        let points: Vec<(usize, f64)> = phases
            .iter()
            .enumerate()
            .filter_map(|(k, p)| Some((k, value(p, name)?)))
            .collect();
        let max = points.iter().map(|p| p.1).fold(0.0, f64::max);
        let (y_max, y_step) = nice_axis(max);
        let x = |k: usize| left + w * k as f64 / (phases.len() - 1) as f64;
        let y = |v: f64| top + h - v.max(0.0) / y_max * h;
        let label = if unit.is_empty() {
            (*name).to_owned()
        } else {
            format!("{name} ({unit})")
        };
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{}</text><rect x="{left:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}" fill="none" stroke="black"/>"#,
            left + w / 2.0,
            oy + 16.0,
            escape(&label)
        );
        let mut v = 0.0;
        while v <= y_max + y_step / 2.0 {
            let _ = writeln!(
                out,
                r##"<line x1="{left:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                y(v),
                left + w,
                y(v),
                left - 4.0,
                y(v) + 4.0,
                escape(&crate::units::human_count(v))
            );
            v += y_step;
        }
        for (k, phase) in phases.iter().enumerate() {
            let _ = writeln!(
                out,
                r#"<text transform="translate({:.1} {:.1}) rotate(30)" font-size="10">{}</text>"#,
                x(k) - 4.0,
                top + h + 12.0,
                escape(&phase.name)
            );
        }
        let line: Vec<String> = points
            .iter()
            .map(|&(k, v)| format!("{:.1},{:.1}", x(k), y(v)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"><title>{}</title></polyline>"#,
            COLOURS[0],
            line.join(" "),
            escape(name)
        );
        for &(k, v) in &points {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"><title>{}: {}</title></circle>"#,
                x(k),
                y(v),
                COLOURS[0],
                escape(&phases[k].name),
                escape(&crate::units::human_count(v))
            );
        }
    }
    out.push_str("</svg>\n");
    Some(out)
}

/// The plot's title for a session of `workload`.
pub fn title(workload: &str) -> String {
    format!("{workload} — latency by percentile")
}

/// `0%`, `90%`, `99%`, `99.9%` … for decade 0, 1, 2, 3 ….
fn percentile_label(decade: u32) -> String {
    match decade {
        0 => "0%".into(),
        1 => "90%".into(),
        d => format!("99.{}%", "9".repeat(d as usize - 2)).replace("99.%", "99%"),
    }
}

/// An axis from 0 to at least `max` in 4 to 10 steps of 1, 2 or 5 × 10^n: (end, step).
pub(crate) fn nice_axis(max: f64) -> (f64, f64) {
    if max <= 0.0 || !max.is_finite() {
        return (1.0, 1.0);
    }
    let rough = max / 8.0;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= rough)
        .unwrap_or(10.0 * magnitude);
    ((max / step).ceil() * step, step)
}

/// Text made safe inside SVG elements and attributes.
/// The opening of every chart benchtop draws (latency percentiles, phases, a sweep's
/// curves): the `<svg>` element of that size and base font size, a white ground, and the
/// title (already escaped) centred at the top. The caller closes it with `</svg>`.
pub(crate) fn prologue(width: f64, height: f64, font_size: u32, title_xml: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="{font_size}">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="{width}" height="{height}" fill="white"/><text x="{:.1}" y="24" text-anchor="middle" font-size="16">{title_xml}</text>"#,
        width / 2.0,
    );
    out
}

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn phases_plot_the_results_that_change_and_leave_out_settings() {
        use crate::meta::{Better, Figure, PhaseInfo};
        let better = |name: &str, v: f64, unit: &str, b: Better| {
            let mut f = Figure::new(name, v, unit);
            f.better = Some(b);
            f
        };
        let phase = |name: &str, size: f64, rate: f64| {
            PhaseInfo::new(
                name,
                0.0,
                1.0,
                vec![
                    Figure::new("buffer_size", size, "bytes"),
                    better("messages_per_second", rate, "messages/s", Better::Higher),
                    better("payload_errors", 0.0, "messages", Better::Lower),
                ],
            )
        };
        let phases = [
            phase("buffer-size=64", 64.0, 90_000.0),
            phase("buffer-size=1024", 1024.0, 80_000.0),
            phase("buffer-size=65536", 65536.0, 9_000.0),
        ];
        let svg = phases_svg("udp-echo sweep", &phases).unwrap();
        // One panel: the rate changes; the size is a setting, the errors never change.
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("messages_per_second (messages/s)"));
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("buffer-size=65536"));
        assert!(phases_svg("one", &phases[..1]).is_none());
    }

    #[test]
    fn percentile_labels_go_one_nine_per_decade() {
        let labels: Vec<String> = (0..5).map(percentile_label).collect();
        assert_eq!(labels, ["0%", "90%", "99%", "99.9%", "99.99%"]);
    }

    #[test]
    fn axes_end_on_round_numbers_above_the_maximum() {
        assert_eq!(nice_axis(0.0), (1.0, 1.0));
        assert_eq!(nice_axis(9.0), (10.0, 2.0));
        assert_eq!(nice_axis(1_234_000.0), (1_400_000.0, 200_000.0));
        assert_eq!(nice_axis(50_000.0), (50_000.0, 10_000.0));
    }

    #[test]
    fn each_histogram_is_a_line_that_rises_to_its_tail_and_text_is_escaped() {
        let mut fast = Histogram::<u64>::new(3).unwrap();
        fast.record_n(1_000, 980).unwrap();
        fast.record_n(20_000, 20).unwrap();
        let mut slow = Histogram::<u64>::new(3).unwrap();
        slow.record_n(2_000, 1000).unwrap();
        let empty = Histogram::<u64>::new(3).unwrap();
        let svg = percentile_svg("a <b> & c", &[("A", &fast), ("B", &slow), ("C", &empty)]);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt;b&gt; &amp; c"));
        assert!(svg.contains("C: no values"));
        assert!(svg.contains("A: p50 1.00 µs, p99 20.0 µs"), "{svg}");
        // 1000 values: the axis reaches 99.9 %, not further.
        assert!(svg.contains(">99.9%<") && !svg.contains(">99.99%<"));
        // A's line ends at its tail: the last point is the highest (smallest y).
        let line = svg.lines().find(|l| l.contains("<title>A<")).unwrap();
        let points: Vec<(f64, f64)> = line
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .split(' ')
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect();
        let last = points.last().unwrap();
        assert!(points.iter().all(|p| p.1 >= last.1 && p.0 <= last.0));
        assert!(last.0 <= WIDTH - RIGHT + 0.01);
    }
}
