//! curves.svg: a sweep's result figures across its points, as the original studies drew
//! them — one small chart per figure with the first swept parameter along the x axis and
//! one line per value of the others (the Ceph messenger study's IOPS by clients, a line
//! per CPU allocation), and first the *response curve*: latency against throughput, a
//! line per value of the other parameters, its points in the order of the first.
//!
//! [`series_points`] reads a series into the mean figures of each point;
//! [`curves_svg`] draws them, a pure function of its input: the same points always make
//! the same bytes.
//!
//! ```
//! use std::collections::BTreeMap;
//!
//! use benchtop_sessions::curves::{PointFigures, curves_svg};
//! use benchtop_sessions::meta::{Better, Figure};
//!
//! let point = |nodes: u64, rate: f64| {
//!     let mut f = Figure::new("messages_per_second", rate, "messages/s");
//!     f.better = Some(Better::Higher);
//!     PointFigures::new(BTreeMap::from([("num-nodes".to_owned(), nodes.into())]), 1, vec![f])
//! };
//! let svg = curves_svg("ring", &[], &[point(100, 9e6), point(1000, 7e6)]).unwrap();
//! assert!(svg.contains("num-nodes") && svg.contains("messages_per_second"));
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::escape::escaped;
use crate::meta::{Better, Figure};
use crate::series::{RunRole, Series};
use crate::units::{human_count, human_ns};

/// Charts drawn at most besides the response curve: the first result figures.
pub const MAX_PANELS: usize = 12;
/// Lines drawn at most per chart (the first combinations of the other parameters).
pub const MAX_LINES: usize = 12;
/// Latency percentiles of latency.hlog added to a point's figures, per metric.
const LATENCY_QUANTILES: [(&str, f64); 2] = [("p50", 0.5), ("p99", 0.99)];
/// Line colours, colour-blind safe (Okabe–Ito), then greys.
const COLOURS: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999999",
];
const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 270.0;
const COLUMNS: usize = 2;

/// One point of a sweep: its parameters' values, how many measured runs it has, and the
/// mean of each figure over them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PointFigures {
    /// The swept parameters' values (series.json's `point`).
    pub values: BTreeMap<String, Value>,
    /// Measured, complete runs of the point.
    pub runs: usize,
    /// Each figure's mean over those runs, in first-seen order.
    pub figures: Vec<Figure>,
}

impl PointFigures {
    /// A point with its values, run count and figures.
    pub fn new(values: BTreeMap<String, Value>, runs: usize, figures: Vec<Figure>) -> Self {
        PointFigures {
            values,
            runs,
            figures,
        }
    }

    fn value(&self, name: &str) -> Option<f64> {
        self.figures
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.value)
            .filter(|v| v.is_finite())
    }
}

/// The points of `series` in the order they first ran, each with the mean over its
/// measured, complete runs of every summary figure and of the whole run's latency p50 and
/// p99 per metric (`lap p50`, in ns). A point none of whose runs completed has no figures.
pub fn series_points(series: &Series) -> Vec<PointFigures> {
    let measured = series.measured();
    let mut points: Vec<PointFigures> = Vec::new();
    let mut sums: Vec<Vec<(Figure, f64, usize)>> = Vec::new();
    for run in series.meta.runs.iter().filter(|r| r.role == RunRole::Run) {
        if !points.iter().any(|p| p.values == run.point) {
            points.push(PointFigures::new(run.point.clone(), 0, Vec::new()));
            sums.push(Vec::new());
        }
    }
    for (i, session) in &series.sessions {
        if !measured.iter().any(|m| std::ptr::eq(*m, session)) {
            continue;
        }
        let Some(k) = points
            .iter()
            .position(|p| p.values == series.meta.runs[*i].point)
        else {
            continue;
        };
        points[k].runs += 1;
        let mut figures: Vec<Figure> = session.meta.summary.clone();
        let mut notes = Vec::new();
        session.for_each_merged_latency(&mut notes, |tag, h| {
            let tag = if tag.is_empty() { "latency" } else { tag };
            for (q_name, q) in LATENCY_QUANTILES {
                let mut f = Figure::new(
                    format!("{tag} {q_name}"),
                    h.value_at_quantile(q) as f64,
                    "ns",
                );
                f.better = Some(Better::Lower);
                figures.push(f);
            }
        });
        for f in figures.into_iter().filter(|f| f.value.is_finite()) {
            let sum = &mut sums[k];
            match sum.iter_mut().find(|(g, _, _)| g.name == f.name) {
                Some((_, total, n)) => {
                    *total += f.value;
                    *n += 1;
                }
                None => {
                    let v = f.value;
                    sum.push((f, v, 1));
                }
            }
        }
    }
    for (point, sum) in points.iter_mut().zip(sums) {
        point.figures = sum
            .into_iter()
            .map(|(mut f, total, n)| {
                f.value = total / n as f64;
                f
            })
            .collect();
    }
    points
}

/// How the x axis places the first parameter's values.
enum Scale {
    /// Numbers, placed by value (log10 when they span a factor of 20 or more).
    Numeric { log: bool, lo: f64, hi: f64 },
    /// Anything else, evenly spaced in first-seen order.
    Categories(Vec<Value>),
}

impl Scale {
    fn of(values: &[&Value]) -> Scale {
        let numbers: Option<Vec<f64>> = values.iter().map(|v| v.as_f64()).collect();
        match numbers {
            Some(n) if !n.is_empty() => {
                let lo = n.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = n.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let log = lo > 0.0 && hi / lo >= 20.0;
                Scale::Numeric { log, lo, hi }
            }
            _ => {
                let mut seen: Vec<Value> = Vec::new();
                for v in values {
                    if !seen.contains(v) {
                        seen.push((*v).clone());
                    }
                }
                Scale::Categories(seen)
            }
        }
    }

    /// Where `v` lies, from 0 to 1.
    fn at(&self, v: &Value) -> f64 {
        match self {
            Scale::Numeric { log, lo, hi } => {
                let x = v.as_f64().unwrap_or(*lo);
                let (x, lo, hi) = if *log {
                    (x.log10(), lo.log10(), hi.log10())
                } else {
                    (x, *lo, *hi)
                };
                if hi > lo { (x - lo) / (hi - lo) } else { 0.5 }
            }
            Scale::Categories(seen) => match seen.len() {
                0 | 1 => 0.5,
                n => seen.iter().position(|s| s == v).unwrap_or(0) as f64 / (n - 1) as f64,
            },
        }
    }

    /// The values labelled under the axis.
    fn ticks(&self, values: &[&Value]) -> Vec<Value> {
        match self {
            Scale::Categories(seen) => seen.clone(),
            Scale::Numeric { .. } => {
                let mut seen: Vec<Value> = Vec::new();
                for v in values {
                    if !seen.contains(v) {
                        seen.push((*v).clone());
                    }
                }
                seen
            }
        }
    }
}

/// `1000`, `balanced`, `true`.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// A figure's value as its unit reads best.
/// Below a thousand in three significant digits (`0.000327`, `12.5`), then with SI
/// prefixes.
fn figure_text(v: f64, unit: &str) -> String {
    if unit == "ns" {
        return human_ns(v);
    }
    if v.abs() >= 1000.0 || v == 0.0 || !v.is_finite() {
        return human_count(v);
    }
    let decimals = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}

/// Text for SVG content and attributes: control characters made visible, then XML's
/// special characters escaped.
fn xml(text: &str) -> String {
    crate::plot::escape(&escaped(text))
}

/// A line: the other parameters' values, and its points (x value, point index) by x.
struct Line {
    label: String,
    points: Vec<(Value, usize)>,
}

/// The lines of the sweep: one per combination of the parameters besides `x`, in the
/// order they first appear.
fn lines(points: &[PointFigures], x: &str, others: &[String]) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    for (k, p) in points.iter().enumerate() {
        let label = others
            .iter()
            .filter_map(|o| p.values.get(o).map(|v| format!("{o}={}", value_text(v))))
            .collect::<Vec<_>>()
            .join(" ");
        let xv = p.values.get(x).cloned().unwrap_or(Value::Null);
        match out.iter_mut().find(|l| l.label == label) {
            Some(line) => line.points.push((xv, k)),
            None => out.push(Line {
                label,
                points: vec![(xv, k)],
            }),
        }
    }
    out.truncate(MAX_LINES);
    out
}

/// The figure a response curve takes as throughput: the first result figure to be
/// maximised that is a rate (`/s` in its unit, or IOPS).
fn throughput(names: &[(String, String, Better)]) -> Option<&(String, String, Better)> {
    names.iter().find(|(_, unit, better)| {
        *better == Better::Higher && (unit.ends_with("/s") || unit.eq_ignore_ascii_case("iops"))
    })
}

/// The figure a response curve takes as latency: the first result figure to be minimised
/// that is a time and names a latency (`latency_ms`, or a metric's `lap p50`).
fn latency(names: &[(String, String, Better)]) -> Option<&(String, String, Better)> {
    names.iter().find(|(name, unit, better)| {
        *better == Better::Lower
            && matches!(unit.as_str(), "ns" | "us" | "µs" | "ms" | "s")
            && (name.contains("latency") || name.ends_with(" p50"))
    })
}

/// The curves of a sweep's `points` as a standalone SVG document titled `title`:
/// the response curve (latency against throughput) when the points have both, then one
/// chart per result figure (a figure with a better direction, with values at two points
/// or more; at most [`MAX_PANELS`]) with the first swept parameter along the x axis.
/// `sweep` names the swept parameters in the order given (the first is the x axis, the
/// others make the lines); parameters of the points it leaves out follow in name order.
/// `None` with fewer than two points, no swept parameter or nothing to draw.
pub fn curves_svg(title: &str, sweep: &[String], points: &[PointFigures]) -> Option<String> {
    if points.len() < 2 {
        return None;
    }
    let mut params: Vec<String> = sweep
        .iter()
        .filter(|p| points.iter().any(|pt| pt.values.contains_key(*p)))
        .cloned()
        .collect();
    for p in points.iter().flat_map(|pt| pt.values.keys()) {
        if !params.contains(p) {
            params.push(p.clone());
        }
    }
    let (x_param, others) = params.split_first()?;
    let lines = lines(points, x_param, others);

    // Result figures in first-seen order, with a value at two points or more.
    let mut names: Vec<(String, String, Better)> = Vec::new();
    for f in points.iter().flat_map(|p| &p.figures) {
        if let Some(better) = f.better
            && !names.iter().any(|(n, _, _)| *n == f.name)
        {
            names.push((f.name.clone(), f.unit.clone(), better));
        }
    }
    names.retain(|(name, _, _)| points.iter().filter(|p| p.value(name).is_some()).count() >= 2);
    let response = throughput(&names)
        .zip(latency(&names))
        .map(|(t, l)| (t.clone(), l.clone()));
    names.truncate(MAX_PANELS);
    let panels = names.len() + usize::from(response.is_some());
    if panels == 0 {
        return None;
    }

    let legend_rows = lines.len().div_ceil(3);
    let legend_h = 20.0 * legend_rows as f64;
    let top = 44.0 + legend_h;
    let rows = panels.div_ceil(COLUMNS);
    let width = COLUMNS as f64 * PANEL_W + 20.0;
    let height = top + rows as f64 * PANEL_H + 10.0;
    let mut out = crate::plot::prologue(width, height, 11, &xml(title));
    // The legend: a colour per line.
    for (i, line) in lines.iter().enumerate() {
        let (lx, ly) = (
            20.0 + (i % 3) as f64 * (width - 40.0) / 3.0,
            46.0 + (i / 3) as f64 * 20.0,
        );
        let label = if line.label.is_empty() {
            x_param.clone()
        } else {
            line.label.clone()
        };
        let _ = writeln!(
            out,
            r#"<g class="legend"><line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="2"/><text x="{:.1}" y="{ly:.1}">{}</text></g>"#,
            ly - 4.0,
            lx + 24.0,
            ly - 4.0,
            COLOURS[i % COLOURS.len()],
            lx + 30.0,
            xml(&label)
        );
    }
    let x_values: Vec<&Value> = points
        .iter()
        .filter_map(|p| p.values.get(x_param))
        .collect();
    let scale = Scale::of(&x_values);
    let mut slot = 0;
    let mut origin = || {
        let o = (
            10.0 + (slot % COLUMNS) as f64 * PANEL_W,
            top + (slot / COLUMNS) as f64 * PANEL_H,
        );
        slot += 1;
        o
    };
    if let Some(((t_name, t_unit, _), (l_name, l_unit, _))) = &response {
        let (ox, oy) = origin();
        response_panel(
            &mut out,
            (ox, oy),
            points,
            &lines,
            x_param,
            (t_name, t_unit),
            (l_name, l_unit),
        );
    }
    for (name, unit, _) in &names {
        let (ox, oy) = origin();
        let frame = Frame::new(ox, oy);
        let max = points
            .iter()
            .filter_map(|p| p.value(name))
            .fold(0.0, f64::max);
        let (y_max, y_step) = crate::plot::nice_axis(max);
        frame.open(&mut out, &labelled(name, unit), "figure");
        frame.y_axis(&mut out, y_max, y_step, unit);
        for v in scale.ticks(&x_values) {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                frame.left + frame.w * scale.at(&v),
                frame.top + frame.h + 14.0,
                xml(&value_text(&v))
            );
        }
        frame.x_label(&mut out, x_param);
        for (i, line) in lines.iter().enumerate() {
            let mut coords: Vec<(f64, f64, String)> = line
                .points
                .iter()
                .filter_map(|(xv, k)| {
                    let v = points[*k].value(name)?;
                    let tip = format!("{x_param}={} {}: {}", value_text(xv), line.label, {
                        figure_text(v, unit)
                    });
                    Some((scale.at(xv), v, tip))
                })
                .collect();
            coords.sort_by(|a, b| a.0.total_cmp(&b.0));
            let placed: Vec<(f64, f64, String)> = coords
                .into_iter()
                .map(|(x, v, tip)| {
                    (
                        frame.left + frame.w * x,
                        frame.top + frame.h - v.max(0.0) / y_max * frame.h,
                        tip,
                    )
                })
                .collect();
            curve(&mut out, &placed, i, &line.label);
        }
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
    Some(out)
}

/// `name (unit)`, or `name`.
fn labelled(name: &str, unit: &str) -> String {
    if unit.is_empty() {
        name.to_owned()
    } else {
        format!("{name} ({unit})")
    }
}

/// One chart's plotting area.
struct Frame {
    oy: f64,
    left: f64,
    top: f64,
    w: f64,
    h: f64,
}

impl Frame {
    fn new(ox: f64, oy: f64) -> Frame {
        Frame {
            oy,
            left: ox + 72.0,
            top: oy + 26.0,
            w: PANEL_W - 100.0,
            h: PANEL_H - 80.0,
        }
    }

    /// Opens the chart's group (closed by the caller) with its title and frame.
    fn open(&self, out: &mut String, title: &str, class: &str) {
        let _ = writeln!(
            out,
            r#"<g class="{class}"><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{}</text><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="black"/>"#,
            self.left + self.w / 2.0,
            self.oy + 16.0,
            xml(title),
            self.left,
            self.top,
            self.w,
            self.h
        );
    }

    /// Grid lines and labels of the y axis, 0 to `max` by `step`.
    fn y_axis(&self, out: &mut String, max: f64, step: f64, unit: &str) {
        let mut v = 0.0;
        while v <= max + step / 2.0 {
            let y = self.top + self.h - v / max * self.h;
            let _ = writeln!(
                out,
                r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                self.left,
                self.left + self.w,
                self.left - 4.0,
                y + 4.0,
                xml(&figure_text(v, unit))
            );
            v += step;
        }
    }

    /// The x axis's name under the tick labels.
    fn x_label(&self, out: &mut String, label: &str) {
        let _ = writeln!(
            out,
            r#"<text class="x-axis" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            self.left + self.w / 2.0,
            self.top + self.h + 32.0,
            xml(label)
        );
    }
}

/// A line through `placed` points (x, y, tooltip), and a dot at each.
fn curve(out: &mut String, placed: &[(f64, f64, String)], i: usize, label: &str) {
    if placed.is_empty() {
        return;
    }
    let colour = COLOURS[i % COLOURS.len()];
    let coords: Vec<String> = placed
        .iter()
        .map(|(x, y, _)| format!("{x:.1},{y:.1}"))
        .collect();
    let _ = writeln!(
        out,
        r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"><title>{}</title></polyline>"#,
        coords.join(" "),
        xml(label)
    );
    for (x, y, tip) in placed {
        let _ = writeln!(
            out,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{colour}"><title>{}</title></circle>"#,
            xml(tip)
        );
    }
}

/// The response curve: latency (y) against throughput (x), each line's points in the
/// order of the first parameter.
fn response_panel(
    out: &mut String,
    (ox, oy): (f64, f64),
    points: &[PointFigures],
    lines: &[Line],
    x_param: &str,
    (t_name, t_unit): (&str, &str),
    (l_name, l_unit): (&str, &str),
) {
    let frame = Frame::new(ox, oy);
    let max_of = |name: &str| {
        points
            .iter()
            .filter_map(|p| p.value(name))
            .fold(0.0, f64::max)
    };
    let (t_max, t_step) = crate::plot::nice_axis(max_of(t_name));
    let (l_max, l_step) = crate::plot::nice_axis(max_of(l_name));
    frame.open(
        out,
        &format!("response: {l_name} against {t_name}"),
        "response",
    );
    frame.y_axis(out, l_max, l_step, l_unit);
    let mut v = 0.0;
    while v <= t_max + t_step / 2.0 {
        let x = frame.left + v / t_max * frame.w;
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"##,
            frame.top,
            frame.top + frame.h,
            frame.top + frame.h + 14.0,
            xml(&figure_text(v, t_unit))
        );
        v += t_step;
    }
    frame.x_label(out, &labelled(t_name, t_unit));
    let scale = Scale::of(
        &points
            .iter()
            .filter_map(|p| p.values.get(x_param))
            .collect::<Vec<_>>(),
    );
    for (i, line) in lines.iter().enumerate() {
        let mut coords: Vec<(f64, f64, f64, String)> = line
            .points
            .iter()
            .filter_map(|(xv, k)| {
                let (t, l) = (points[*k].value(t_name)?, points[*k].value(l_name)?);
                let tip = format!(
                    "{x_param}={} {}: {} at {}",
                    value_text(xv),
                    line.label,
                    figure_text(l, l_unit),
                    figure_text(t, t_unit)
                );
                Some((scale.at(xv), t, l, tip))
            })
            .collect();
        coords.sort_by(|a, b| a.0.total_cmp(&b.0));
        let placed: Vec<(f64, f64, String)> = coords
            .into_iter()
            .map(|(_, t, l, tip)| {
                (
                    frame.left + t.max(0.0) / t_max * frame.w,
                    frame.top + frame.h - l.max(0.0) / l_max * frame.h,
                    tip,
                )
            })
            .collect();
        curve(out, &placed, i, &line.label);
    }
    out.push_str("</g>\n");
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn figure(name: &str, v: f64, unit: &str, better: Option<Better>) -> Figure {
        let mut f = Figure::new(name, v, unit);
        f.better = better;
        f
    }

    /// The Ceph study's matrix in small: clients 1, 2, 4 × balanced/separated, IOPS
    /// growing with clients and latency with it.
    fn messenger_points() -> Vec<PointFigures> {
        let mut out = Vec::new();
        for clients in [1u64, 2, 4] {
            for (alloc, factor) in [("balanced", 1.0), ("separated", 0.8)] {
                let iops = 10_000.0 * clients as f64 * factor;
                out.push(PointFigures::new(
                    BTreeMap::from([
                        ("clients".to_owned(), Value::from(clients)),
                        ("cpu-alloc".to_owned(), Value::from(alloc)),
                    ]),
                    3,
                    vec![
                        figure("iops", iops, "IOPS", Some(Better::Higher)),
                        figure(
                            "latency_ms",
                            0.1 * clients as f64 / factor,
                            "ms",
                            Some(Better::Lower),
                        ),
                        figure("messaging_time_s", 1.0, "s", None),
                    ],
                ));
            }
        }
        out
    }

    fn groups<'a>(svg: &'a str, class: &str) -> Vec<&'a str> {
        svg.split(&format!("<g class=\"{class}\">"))
            .skip(1)
            .map(|g| g.split("</g>").next().unwrap())
            .collect()
    }

    #[test]
    fn a_two_parameter_sweep_draws_a_line_per_value_of_the_second_in_every_chart() {
        let sweep = ["clients".to_owned(), "cpu-alloc".to_owned()];
        let svg = curves_svg("messenger <sweep>", &sweep, &messenger_points()).unwrap();
        // The response curve and one chart per result figure (not the setting).
        let response = groups(&svg, "response");
        let figures = groups(&svg, "figure");
        assert_eq!(response.len(), 1);
        assert_eq!(figures.len(), 2, "iops and latency_ms");
        for g in response.iter().chain(&figures) {
            assert_eq!(g.matches("<polyline").count(), 2, "{g}");
            assert_eq!(g.matches("<circle").count(), 6, "{g}");
        }
        assert!(figures[0].contains("iops (IOPS)") && figures[0].contains(">clients<"));
        assert!(response[0].contains("response: latency_ms against iops"));
        assert!(response[0].contains(">iops (IOPS)<"));
        assert!(svg.contains("<title>cpu-alloc=balanced</title>"));
        assert!(svg.contains("<title>cpu-alloc=separated</title>"));
        assert!(!svg.contains("messaging_time_s"));
        assert_eq!(groups(&svg, "legend").len(), 2);
        assert!(svg.contains("messenger &lt;sweep&gt;"));
        // Clients along x: the three ticks, and each line rises left to right.
        for c in [">1<", ">2<", ">4<"] {
            assert!(figures[0].contains(c), "{c}");
        }
        let line = figures[0]
            .lines()
            .find(|l| l.contains("<polyline"))
            .unwrap();
        let xs: Vec<f64> = line
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .split(' ')
            .map(|p| p.split_once(',').unwrap().0.parse().unwrap())
            .collect();
        assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
        // The same points make the same bytes.
        assert_eq!(
            svg,
            curves_svg("messenger <sweep>", &sweep, &messenger_points()).unwrap()
        );
    }

    #[test]
    fn the_sweeps_order_chooses_the_x_axis() {
        let sweep = ["cpu-alloc".to_owned(), "clients".to_owned()];
        let svg = curves_svg("m", &sweep, &messenger_points()).unwrap();
        let figures = groups(&svg, "figure");
        // Three lines now, one per client count, two points each (the allocations).
        assert_eq!(figures[0].matches("<polyline").count(), 3);
        assert!(figures[0].contains(">cpu-alloc<") && figures[0].contains(">separated<"));
        assert!(svg.contains("<title>clients=4</title>"));
    }

    #[test]
    fn one_parameter_draws_one_line_on_a_log_axis_when_it_spans_decades() {
        let points: Vec<PointFigures> = [100u64, 1000, 5000]
            .iter()
            .map(|&n| {
                PointFigures::new(
                    BTreeMap::from([("num-nodes".to_owned(), Value::from(n))]),
                    1,
                    vec![figure(
                        "messages_per_second",
                        1e7 / (n as f64).sqrt(),
                        "messages/s",
                        Some(Better::Higher),
                    )],
                )
            })
            .collect();
        let svg = curves_svg("ring", &["num-nodes".to_owned()], &points).unwrap();
        assert!(
            groups(&svg, "response").is_empty(),
            "no latency: no response curve"
        );
        let figures = groups(&svg, "figure");
        assert_eq!(figures.len(), 1);
        assert_eq!(figures[0].matches("<polyline").count(), 1);
        assert_eq!(figures[0].matches("<circle").count(), 3);
        // log10: 1000 sits 0.59 of the way from 100 to 5000, not 0.18.
        let frame = Frame::new(10.0, 0.0);
        let scale = Scale::of(&[&Value::from(100), &Value::from(5000)]);
        let at = scale.at(&Value::from(1000));
        assert!((at - 1.0 / (5000f64.log10() - 2.0)).abs() < 1e-9, "{at}");
        assert!(figures[0].contains(&format!("{:.1},", frame.left + frame.w * at)));
    }

    #[test]
    fn nothing_is_drawn_without_two_points_or_a_result_figure() {
        let points = messenger_points();
        assert!(curves_svg("m", &[], &points[..1]).is_none());
        let settings: Vec<PointFigures> = points
            .iter()
            .map(|p| {
                PointFigures::new(
                    p.values.clone(),
                    1,
                    vec![figure("messaging_time_s", 1.0, "s", None)],
                )
            })
            .collect();
        assert!(curves_svg("m", &[], &settings).is_none());
        let unswept: Vec<PointFigures> = points
            .iter()
            .map(|p| PointFigures::new(BTreeMap::new(), 1, p.figures.clone()))
            .collect();
        assert!(curves_svg("m", &[], &unswept).is_none());
    }

    #[test]
    fn a_series_reads_as_the_mean_of_each_points_complete_runs_with_its_latency() {
        use crate::meta::{HostInfo, WorkloadInfo};
        use crate::series::{SeriesMeta, SeriesWriter};
        use crate::{SessionMeta, SessionWriter, Status};
        let root = tempfile::tempdir().unwrap();
        let meta = SeriesMeta::new("ring", "t").with_sweep(vec!["num-nodes".into()]);
        let mut w = SeriesWriter::create(&root.path().join("s"), meta).unwrap();
        for (nodes, rate, lap_ns, status) in [
            (100, 1000.0, 2_000, Status::Complete),
            (1000, 500.0, 8_000, Status::Complete),
            (100, 3000.0, 4_000, Status::Complete),
            (1000, 1.0, 1, Status::Crashed),
        ] {
            let point = BTreeMap::from([("num-nodes".to_owned(), Value::from(nodes))]);
            let dir = w.next_run_dir(RunRole::Run, point).unwrap();
            let meta = SessionMeta::new(
                "x",
                WorkloadInfo::new("ring", BTreeMap::new()),
                HostInfo::default(),
                "2026-11-24T12:00:00Z",
            );
            let mut s = SessionWriter::create(&dir, meta).unwrap();
            s.update_meta(|m| {
                m.summary = vec![figure(
                    "messages_per_second",
                    rate,
                    "messages/s",
                    Some(Better::Higher),
                )];
            })
            .unwrap();
            let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
            h.record_n(lap_ns, 100).unwrap();
            s.append_latency("lap", 0.0, 1.0, &h).unwrap();
            s.finish(status, "2026-11-24T12:00:01Z".into()).unwrap();
        }
        let series = Series::load(w.dir()).unwrap();
        let points = series_points(&series);
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].values["num-nodes"], 100);
        assert_eq!(
            (points[0].runs, points[1].runs),
            (2, 1),
            "the crashed run is out"
        );
        assert_eq!(points[0].value("messages_per_second"), Some(2000.0));
        let p50 = points[0].value("lap p50").unwrap();
        assert!((2_990.0..=3_010.0).contains(&p50), "{p50}");
        assert_eq!(points[1].value("messages_per_second"), Some(500.0));
        // Rate and lap p50 make the response curve: one line of two points.
        let svg = curves_svg("ring", &series.meta.sweep, &points).unwrap();
        let response = groups(&svg, "response");
        assert_eq!(response.len(), 1);
        assert!(response[0].contains("lap p50 against messages_per_second"));
        assert_eq!(response[0].matches("<circle").count(), 2);
    }

    #[test]
    fn small_values_keep_three_significant_digits() {
        assert_eq!(figure_text(0.000327, "s"), "0.000327");
        assert_eq!(figure_text(12.54, "ms"), "12.5");
        assert_eq!(figure_text(0.0, "s"), "0");
        assert_eq!(figure_text(2_000.0, "ns"), human_ns(2_000.0));
    }

    #[test]
    fn recorded_strings_cannot_break_out_of_the_svg() {
        let mut points = messenger_points();
        for p in &mut points {
            if let Some(v) = p.values.get_mut("cpu-alloc") {
                *v = Value::from(format!("{}\"/><script>\x1b", value_text(v)));
            }
        }
        let svg = curves_svg("t", &[], &points).unwrap();
        assert!(!svg.contains("<script>") && !svg.contains('\x1b'));
        assert!(svg.contains("&lt;script&gt;\\x1b"));
    }
}
