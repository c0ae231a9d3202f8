//! Exports of a session into formats other tools read: the percentile distribution
//! (`.hgrm`, what HdrHistogram's `outputPercentileDistribution` prints and hdr-plot
//! reads), speedscope's JSON profile, and the summary as Markdown or CSV.
//!
//! ```
//! use benchtop_sessions::export::hgrm;
//! use hdrhistogram::Histogram;
//!
//! let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
//! h.record_n(1_000_000, 99).unwrap(); // 1 ms
//! h.record(5_000_000).unwrap(); // 5 ms
//! let text = hgrm(&h, 1e6); // nanoseconds printed as milliseconds
//! assert!(text.contains("Total count    =          100"));
//! ```

use std::fmt::Write as _;
use std::io::{self, Write};

use hdrhistogram::Histogram;

use crate::escape::markdown_cell;
use crate::units::human_ns;
use crate::{Session, StackTree};

/// Percentile ticks per half distance to 100 %, as HdrHistogram's tools print.
const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// The percentile distribution of `h` in HdrHistogram's text format, values divided by
/// `scale` (1e6 prints nanoseconds as milliseconds, as HistogramLogProcessor does).
pub fn hgrm(h: &Histogram<u64>, scale: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    for v in h.iter_quantiles(TICKS_PER_HALF_DISTANCE) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let value = v.value_iterated_to() as f64 / scale;
        if q < 1.0 {
            let _ = writeln!(
                out,
                "{value:12.3} {q:2.12} {total:10} {:14.2}",
                1.0 / (1.0 - q)
            );
        } else {
            let _ = writeln!(out, "{value:12.3} {q:2.12} {total:10}");
        }
    }
    let sub_buckets = (2.0 * 10f64.powi(i32::from(h.sigfig())))
        .log2()
        .ceil()
        .exp2() as u64;
    let _ = writeln!(
        out,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        h.mean() / scale,
        h.stdev() / scale
    );
    let _ = writeln!(
        out,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        h.max() as f64 / scale,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        sub_buckets
    );
    out
}

/// `tree` as a speedscope profile (<https://www.speedscope.app>, its file format): one
/// sampled profile whose samples are the tree's stacks and weights its weights, in `unit`
/// (`none` for samples, `microseconds` for off-CPU time). Built in memory: see
/// [`write_speedscope`] for large trees.
pub fn speedscope(tree: &StackTree, name: &str, unit: &str) -> serde_json::Value {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, and what is written is JSON.
    let _ = write_speedscope(tree, name, unit, &mut out);
    serde_json::from_slice(&out).unwrap_or_default()
}

/// Writes [`speedscope`]'s profile to `out` as it goes: memory holds one stack at a time,
/// whatever the number of stacks. The frames are the tree's frame names, in the order of
/// their ids; the samples index them.
pub fn write_speedscope(
    tree: &StackTree,
    name: &str,
    unit: &str,
    mut out: impl Write,
) -> io::Result<()> {
    let string = |out: &mut dyn Write, s: &str| -> io::Result<()> {
        serde_json::to_writer(out, s).map_err(io::Error::other)
    };
    out.write_all(b"{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",")?;
    write!(
        out,
        "\"exporter\":\"benchtop {}\",\"name\":",
        env!("CARGO_PKG_VERSION")
    )?;
    string(&mut out, name)?;
    out.write_all(b",\"activeProfileIndex\":0,\"shared\":{\"frames\":[")?;
    for id in 0..tree.frame_count() {
        if id > 0 {
            out.write_all(b",")?;
        }
        out.write_all(b"{\"name\":")?;
        string(&mut out, tree.name(crate::FrameId(id as u32)))?;
        out.write_all(b"}")?;
    }
    out.write_all(b"]},\"profiles\":[{\"type\":\"sampled\",\"name\":")?;
    string(&mut out, name)?;
    out.write_all(b",\"unit\":")?;
    string(&mut out, unit)?;
    write!(
        out,
        ",\"startValue\":0,\"endValue\":{},\"samples\":[",
        tree.total_weight()
    )?;
    let mut result = Ok(());
    let mut first = true;
    tree.for_each_stack(|stack, _| {
        if result.is_err() {
            return;
        }
        result = (|| {
            out.write_all(if first { b"[" } else { b",[" })?;
            first = false;
            for (i, f) in stack.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write!(out, "{}", f.0)?;
            }
            out.write_all(b"]")
        })();
    });
    result?;
    out.write_all(b"],\"weights\":[")?;
    let mut first = true;
    let mut result = Ok(());
    tree.for_each_stack(|_, weight| {
        if result.is_ok() {
            result = write!(out, "{}{weight}", if first { "" } else { "," });
            first = false;
        }
    });
    result?;
    out.write_all(b"]}]}")?;
    out.flush()
}

/// One line of the summary: section, name, value, unit.
type SummaryLine = (&'static str, String, f64, String);

/// What the summary holds: the workload's figures, the whole run's latency percentiles,
/// peaks of the resources.
fn summary_lines(s: &Session) -> Vec<SummaryLine> {
    let mut lines: Vec<SummaryLine> = s
        .meta
        .summary
        .iter()
        .map(|f| ("workload", f.name.clone(), f.value, f.unit.clone()))
        .collect();
    let mut notes = Vec::new();
    let mut merged = Vec::new();
    // One metric at a time: only the figures are kept.
    s.for_each_merged_latency(&mut notes, |tag, h| {
        let q = [0.5, 0.9, 0.99, 0.999].map(|q| h.value_at_quantile(q) as f64);
        merged.push((tag, q, h.max() as f64, h.len() as f64));
    });
    for (tag, q, max, count) in merged {
        let tag = if tag.is_empty() { "latency" } else { tag };
        for (name, value) in ["p50", "p90", "p99", "p99.9"].into_iter().zip(q) {
            lines.push(("latency", format!("{tag} {name}"), value, "ns".into()));
        }
        lines.push(("latency", format!("{tag} max"), max, "ns".into()));
        lines.push(("latency", format!("{tag} count"), count, String::new()));
    }
    if let Some(peak) = s.peak_rss_bytes() {
        lines.push(("resources", "peak RSS".into(), peak as f64, "bytes".into()));
    }
    if let Some(threads) = s.row_summary.max_threads {
        lines.push((
            "resources",
            "max threads".into(),
            f64::from(threads),
            String::new(),
        ));
    }
    lines
}

/// The summary as Markdown: the run, then a table of its figures.
pub fn summary_markdown(s: &Session) -> String {
    let m = &s.meta;
    // Recorded strings, escaped: control characters made visible, `|` kept out of cells.
    let c = |s: &str| markdown_cell(s).into_owned();
    let mut out = format!("# {} — {}\n\n", c(&m.workload.name), c(&m.id));
    let _ = writeln!(
        out,
        "- status: {}\n- started: {}\n- host: {} ({} cores, Linux {})\n- benchtop {}\n",
        m.status,
        c(&m.started_at),
        c(&m.host.hostname),
        m.host.cores,
        c(&m.host.kernel),
        c(&m.benchtop_version)
    );
    out.push_str("| section | figure | value | unit |\n|---|---|---:|---|\n");
    for (section, name, value, unit) in summary_lines(s) {
        let shown = match unit.as_str() {
            "ns" => human_ns(value),
            _ => format!("{value}"),
        };
        let _ = writeln!(
            out,
            "| {section} | {} | {} | {} |",
            c(&name),
            c(&shown),
            c(&unit)
        );
    }
    out
}

/// The summary as CSV: `section,figure,value,unit`, values in their unit (no rounding).
pub fn summary_csv(s: &Session) -> String {
    let mut out = String::from("section,figure,value,unit\n");
    let quote = |v: &str| {
        if v.contains([',', '"', '\n']) {
            format!("\"{}\"", v.replace('"', "\"\""))
        } else {
            v.to_owned()
        }
    };
    for (section, name, value, unit) in summary_lines(s) {
        let _ = writeln!(out, "{section},{},{value},{}", quote(&name), quote(&unit));
    }
    out
}

/// A series' summary as CSV: `run,point,section,figure,value,unit`, a line per figure
/// of each measured, complete run (as [`summary_csv`] has them) in the order the runs
/// ran, `point` the run's swept values (`clients=2 cpu-alloc=balanced`, empty outside
/// sweeps): the raw figures to plot or test with other tools.
pub fn series_summary_csv(series: &crate::series::Series) -> String {
    let mut out = String::from("run,point,section,figure,value,unit\n");
    let measured = series.measured();
    for (i, session) in &series.sessions {
        if !measured.iter().any(|m| std::ptr::eq(*m, session)) {
            continue;
        }
        let run = &series.meta.runs[*i];
        let point: Vec<String> = run
            .point
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}={s}"),
                v => format!("{k}={v}"),
            })
            .collect();
        let (run_name, point) = (csv_field(&run.dir), csv_field(&point.join(" ")));
        for (section, name, value, unit) in summary_lines(session) {
            let _ = writeln!(
                out,
                "{run_name},{point},{section},{},{value},{}",
                csv_field(&name),
                csv_field(&unit)
            );
        }
    }
    out
}

/// A CSV field: quoted when it holds a comma, quote or line break, control characters
/// made visible.
fn csv_field(v: &str) -> String {
    let v = crate::escape::escaped(v);
    if v.contains([',', '"', '\n']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram() -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 1_000).unwrap();
        }
        h
    }

    #[test]
    fn the_hgrm_text_has_hdrhistograms_header_rows_and_footer() {
        let text = hgrm(&histogram(), 1e6);
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("       Value     Percentile TotalCount 1/(1-Percentile)")
        );
        assert_eq!(lines.next(), Some(""));
        let rows: Vec<Vec<&str>> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        // Percentiles rise to 1, counts to the total, values to the max (1 ms).
        let last = rows.last().unwrap();
        assert_eq!(last[1], "1.000000000000");
        assert_eq!(last[2], "1000");
        assert!(last[0].starts_with("1.00"), "{last:?}");
        assert!(
            rows.windows(2)
                .all(|w| w[0][2].parse::<u64>().unwrap() <= w[1][2].parse::<u64>().unwrap())
        );
        assert!(
            text.contains("#[Max     =        1.000, Total count    =         1000]"),
            "{text}"
        );
        assert!(text.contains("SubBuckets     =         2048"), "{text}");
    }

    #[test]
    fn speedscope_profiles_share_frames_and_keep_weights() {
        let mut t = StackTree::new();
        t.add_names(["p", "main", "work"], 3);
        t.add_names(["p", "main", "idle"], 1);
        let v = speedscope(&t, "ring", "none");
        let frames = v["shared"]["frames"].as_array().unwrap();
        assert_eq!(frames.len(), 4, "p, main, work, idle once each");
        let profile = &v["profiles"][0];
        assert_eq!(profile["type"], "sampled");
        assert_eq!(profile["endValue"], 4);
        let weights: Vec<u64> = profile["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_u64().unwrap())
            .collect();
        assert_eq!(weights.iter().sum::<u64>(), 4);
        let first = profile["samples"][0].as_array().unwrap();
        assert_eq!(frames[first[0].as_u64().unwrap() as usize]["name"], "p");
    }
}
