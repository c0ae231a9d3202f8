//! `benchtop export DIR`: a session, or a series, in formats other tools read.
//!
//! A series exports what its measured runs say together. Its summary is the table of its
//! points (summary.md, as `benchtop show` prints it) and every run's figures
//! (summary.csv, a line per run and figure); a sweep's curves go to curves.svg. The
//! latency and stack formats add the runs of a point together — their latency
//! histograms per metric, their stacks, as `compare` adds a side's runs — since one
//! run's tail or profile is a sample of the same thing: with one point the files are
//! named as a session's, and a sweep of several points writes each point's files into
//! `point-1/`, `point-2/` … (in the order the points first ran; summary.md says which is
//! which), as adding different points together would mean nothing.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use benchtop_sessions::dir::DirHandle;
use benchtop_sessions::escape::{Escaped, markdown_cell};
use benchtop_sessions::export::{
    hgrm, series_summary_csv, summary_csv, summary_markdown, write_speedscope,
};
use benchtop_sessions::histogram::Total;
use benchtop_sessions::intervals::IntervalStacks;
use benchtop_sessions::kinds::WeightUnit;
use benchtop_sessions::limits::LoadOptions;
use benchtop_sessions::plot::{self, percentile_svg};
use benchtop_sessions::pprof::{encode_session_to, encode_to};
use benchtop_sessions::range::{Between, RangeSpec, restrict, run_length_ns};
use benchtop_sessions::series::{RunRole, SERIES_FILE, Series};
use benchtop_sessions::store::{SESSION_FILE, Session};
use benchtop_sessions::{ByKind, Kind, SessionMeta, StackTree};
use hdrhistogram::Histogram;

use crate::cli::{ExportArgs, ExportFormat};
use crate::series::{point_text, points_rows, write_curves};

/// Nanoseconds per millisecond: `.hgrm` files print milliseconds, as HdrHistogram's
/// HistogramLogProcessor does.
const NS_PER_MS: f64 = 1e6;

/// Writes the formats asked for and prints each file written.
///
/// The output directory is created with one `mkdir`, or is an existing directory of this
/// user that is not a symbolic link; each file is written to a temporary file created with
/// `O_EXCL` in it and renamed into place ([`DirHandle::write_atomically_with`]), so an
/// error (a full disk) leaves no partial, empty or temporary file where a file was
/// promised. Large outputs (speedscope, pprof) are written as they are made.
pub fn export(args: &ExportArgs) -> Result<ExitCode> {
    if args.otlp.otlp.is_some() {
        return crate::otlp::export(&args.dir, &args.otlp);
    }
    if let Some(range) = &args.range {
        return export_range(args, range);
    }
    let shown = || Escaped(&args.dir.display().to_string()).to_string();
    let is_series = std::fs::symlink_metadata(args.dir.join(SERIES_FILE)).is_ok()
        && std::fs::symlink_metadata(args.dir.join(SESSION_FILE)).is_err();
    let out_path = args.out.clone().unwrap_or_else(|| args.dir.clone());
    let mut written = Vec::new();
    if is_series {
        let series = Series::load(&args.dir)
            .with_context(|| format!("cannot open the series {}", shown()))?;
        for w in &series.warnings {
            eprintln!("benchtop: warning: {}", Escaped(w));
        }
        export_series(&series, &out_path, &formats(args, true), &mut written)?;
    } else {
        // Every format reads the rows' summary and the merged latency, never single
        // intervals: the summary load keeps memory independent of the number of intervals.
        let session = Session::load_summary(&args.dir)
            .with_context(|| format!("cannot open the session {}", shown()))?;
        // What the load cut or could read past, as show and compare say it.
        for w in &session.warnings {
            eprintln!("benchtop: warning: {}", Escaped(w));
        }
        let out = DirHandle::create_or_open(&out_path)?;
        let formats = formats(args, false);
        if formats.contains(&ExportFormat::Curves) {
            eprintln!("benchtop: curves are a series' (a sweep's): no curves.svg written");
        }
        if formats.contains(&ExportFormat::Firefox) {
            written.push(write_firefox(&args.dir, &out)?);
        }
        let material = Material::of_session(&session);
        write_material(&material, &out, &formats, &mut written)?;
        for format in &formats {
            match format {
                ExportFormat::SummaryMd => written.push(write(
                    &out,
                    "summary.md",
                    summary_markdown(&session).as_bytes(),
                )?),
                ExportFormat::SummaryCsv => written.push(write(
                    &out,
                    "summary.csv",
                    summary_csv(&session).as_bytes(),
                )?),
                _ => {}
            }
        }
    }
    let mut stdout = std::io::stdout().lock();
    for path in written {
        writeln!(stdout, "{}", Escaped(&path.display().to_string()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The formats asked for, or all of them (curves for a series only).
fn formats(args: &ExportArgs, series: bool) -> Vec<ExportFormat> {
    if !args.format.is_empty() {
        return args.format.clone();
    }
    let mut all = vec![
        ExportFormat::Hgrm,
        ExportFormat::Speedscope,
        ExportFormat::SummaryMd,
        ExportFormat::SummaryCsv,
        ExportFormat::Pprof,
        ExportFormat::LatencySvg,
    ];
    if series {
        all.push(ExportFormat::Curves);
    }
    all
}

/// The unit speedscope names for `kind`'s weights, when the kind table marks it as
/// carried by speedscope files.
fn speedscope_unit(kind: Kind) -> Option<&'static str> {
    let spec = kind.spec();
    if !spec.exports.speedscope {
        return None;
    }
    Some(match spec.folded_unit {
        WeightUnit::Microseconds => "microseconds",
        WeightUnit::Nanoseconds => "nanoseconds",
        WeightUnit::Bytes => "bytes",
        _ => "none",
    })
}

/// What the latency and stack formats are made from: one session, or the runs of a
/// series' point added together.
struct Material<'a> {
    /// What the files are named after (the workload).
    name: &'a str,
    /// The metadata pprof labels the profile with (a point's first run).
    meta: &'a SessionMeta,
    /// The whole-run latency per metric (`""` for an untagged log).
    latency: BTreeMap<String, Histogram<u64>>,
    /// The whole-run stacks of each kind.
    profiles: ByKind<Option<Cow<'a, StackTree>>>,
    /// Seconds the runs took together.
    duration_s: f64,
    /// `session` or `point`, for the notes on what was not written.
    what: &'static str,
}

impl<'a> Material<'a> {
    fn of_session(session: &'a Session) -> Self {
        let mut notes = Vec::new();
        let latency = session
            .merged_latency(&mut notes)
            .into_iter()
            .map(|(tag, h)| (tag.to_owned(), h))
            .collect();
        for note in notes {
            eprintln!("benchtop: warning: {}", Escaped(&note));
        }
        Material {
            name: &session.meta.workload.name,
            meta: &session.meta,
            latency,
            profiles: session
                .profiles
                .map_ref(|_, t| t.as_ref().map(Cow::Borrowed)),
            duration_s: session.duration().map_or(0.0, |d| d.as_secs_f64()),
            what: "session",
        }
    }

    /// `runs` (at least one) added together: histograms per metric, stacks, durations.
    fn of_runs(runs: &[&'a Session]) -> Option<Self> {
        let first = runs.first()?;
        let mut totals: BTreeMap<String, Total> = BTreeMap::new();
        let mut notes = Vec::new();
        let mut left_out = Vec::new();
        for run in runs {
            run.for_each_merged_latency(&mut notes, |tag, h| {
                if let Err(e) = totals.entry(tag.to_owned()).or_default().add(&h) {
                    left_out.push(format!(
                        "{}: latency {tag:?} left out of the total: {e}",
                        run.meta.id
                    ));
                }
            });
        }
        for note in notes.iter().chain(&left_out) {
            eprintln!("benchtop: warning: {}", Escaped(note));
        }
        let add = |kind: Kind| {
            runs.iter()
                .filter_map(|s| s.profile(kind))
                .fold(None, |sum: Option<StackTree>, tree| {
                    let mut sum = sum.unwrap_or_default();
                    sum.merge(tree);
                    Some(sum)
                })
                .map(Cow::Owned)
        };
        Some(Material {
            name: &first.meta.workload.name,
            meta: &first.meta,
            latency: totals
                .into_iter()
                .filter_map(|(tag, t)| Some((tag, t.into_histogram()?)))
                .collect(),
            profiles: ByKind::from_fn(add),
            duration_s: runs
                .iter()
                .filter_map(|s| s.duration())
                .map(|d| d.as_secs_f64())
                .sum(),
            what: "point",
        })
    }
}

/// Writes the latency and stack formats of `m` into `out`.
fn write_material(
    m: &Material,
    out: &DirHandle,
    formats: &[ExportFormat],
    written: &mut Vec<PathBuf>,
) -> Result<()> {
    let what = m.what;
    for format in formats {
        match format {
            ExportFormat::Hgrm => {
                if m.latency.is_empty() {
                    eprintln!("benchtop: no latency in this {what}: no .hgrm written");
                }
                let several = m.latency.len() > 1;
                for (tag, h) in &m.latency {
                    let name = match (several, tag.is_empty()) {
                        (true, false) => format!("latency-{tag}.hgrm"),
                        _ => "latency.hgrm".to_owned(),
                    };
                    written.push(write(out, &name, hgrm(h, NS_PER_MS).as_bytes())?);
                }
            }
            ExportFormat::Speedscope => {
                for (kind, tree) in m.profiles.iter() {
                    let Some(unit) = speedscope_unit(kind) else {
                        continue;
                    };
                    if let Some(tree) = tree.as_ref().filter(|t| !t.is_empty()) {
                        let file = format!("{}.speedscope.json", kind.name());
                        written.push(write_with(out, &file, |w| {
                            write_speedscope(tree, m.name, unit, w)
                        })?);
                    }
                }
            }
            ExportFormat::LatencySvg => {
                if m.latency.is_empty() {
                    eprintln!("benchtop: no latency in this {what}: no latency.svg written");
                } else {
                    let series: Vec<(&str, &Histogram<u64>)> = m
                        .latency
                        .iter()
                        .map(|(tag, h)| (if tag.is_empty() { "latency" } else { tag }, h))
                        .collect();
                    written.push(write(
                        out,
                        "latency.svg",
                        percentile_svg(&plot::title(m.name), &series).as_bytes(),
                    )?);
                }
            }
            ExportFormat::Pprof => {
                let exported = m.profiles.map_ref(|kind, t| {
                    t.as_deref()
                        .filter(|t| kind.spec().exports.pprof && !t.is_empty())
                });
                if exported.values().all(Option::is_none) {
                    eprintln!("benchtop: no stacks in this {what}: no profile.pb.gz written");
                } else {
                    written.push(write_with(out, "profile.pb.gz", |w| {
                        encode_to(m.meta, &exported, m.duration_s, w)
                    })?);
                }
            }
            ExportFormat::SummaryMd
            | ExportFormat::SummaryCsv
            | ExportFormat::Curves
            | ExportFormat::Firefox => {}
        }
    }
    Ok(())
}

/// A series' export (see the module's documentation).
fn export_series(
    series: &Series,
    out_path: &Path,
    formats: &[ExportFormat],
    written: &mut Vec<PathBuf>,
) -> Result<()> {
    if series.measured().is_empty() {
        anyhow::bail!(
            "the series {} has no complete measured run to export",
            Escaped(&series.dir.display().to_string())
        );
    }
    let out = DirHandle::create_or_open(out_path)?;
    let points = point_runs(series);
    let several = points.len() > 1;
    for (n, (_, runs)) in points.iter().enumerate() {
        let Some(material) = Material::of_runs(runs) else {
            continue;
        };
        if several {
            let dir = DirHandle::create_or_open(&out_path.join(point_dir(n)))?;
            write_material(&material, &dir, formats, written)?;
        } else {
            write_material(&material, &out, formats, written)?;
        }
    }
    for format in formats {
        match format {
            ExportFormat::SummaryMd => written.push(write(
                &out,
                "summary.md",
                series_markdown(series, &points).as_bytes(),
            )?),
            ExportFormat::SummaryCsv => written.push(write(
                &out,
                "summary.csv",
                series_summary_csv(series).as_bytes(),
            )?),
            ExportFormat::Firefox => eprintln!(
                "benchtop: a Firefox profile is a session's: export one run of the series \
                 (SERIES/run-1); no profile.json.gz written"
            ),
            ExportFormat::Curves => match write_curves(series, out_path)? {
                Some(path) => written.push(path),
                None => eprintln!(
                    "benchtop: not a sweep of two points or more with result figures: no \
                     curves.svg written"
                ),
            },
            _ => {}
        }
    }
    Ok(())
}

/// profile.json.gz of the session in `dir`: its rows (for the counters) and its
/// per-interval stacks are read here, as only this format needs them.
fn write_firefox(dir: &Path, out: &DirHandle) -> Result<PathBuf> {
    use benchtop_sessions::firefox::{firefox_profile, write_gz};
    use benchtop_sessions::intervals::IntervalStacks;
    use benchtop_sessions::limits::LoadOptions;
    let shown = || Escaped(&dir.display().to_string()).to_string();
    let session =
        Session::load(dir).with_context(|| format!("cannot open the session {}", shown()))?;
    let stacks = IntervalStacks::load(dir, &LoadOptions::from_env()?)
        .with_context(|| format!("cannot read the stacks of {}", shown()))?;
    let (profile, warnings) = firefox_profile(&session, stacks.as_ref());
    for w in warnings {
        eprintln!("benchtop: warning: {}", Escaped(&w));
    }
    write_with(out, "profile.json.gz", |w| write_gz(&profile, w))
}

/// `point-1`, `point-2` … for the point at index `n`.
fn point_dir(n: usize) -> String {
    format!("point-{}", n + 1)
}

/// The points of `series` in the order they first ran, each with its measured, complete
/// runs (points none of whose runs completed are left out).
fn point_runs(series: &Series) -> Vec<(String, Vec<&Session>)> {
    let measured = series.measured();
    let mut points: Vec<(&BTreeMap<String, serde_json::Value>, Vec<&Session>)> = Vec::new();
    for run in series.meta.runs.iter().filter(|r| r.role == RunRole::Run) {
        if !points.iter().any(|(p, _)| **p == run.point) {
            points.push((&run.point, Vec::new()));
        }
    }
    for (i, session) in &series.sessions {
        if let Some((_, runs)) = points
            .iter_mut()
            .find(|(p, _)| **p == series.meta.runs[*i].point)
            && measured.iter().any(|m| std::ptr::eq(*m, session))
        {
            runs.push(session);
        }
    }
    points
        .into_iter()
        .filter(|(_, runs)| !runs.is_empty())
        .map(|(p, runs)| (point_text(p), runs))
        .collect()
}

/// A series' summary.md: what it is, the table of its points, and with several points
/// which `point-N/` directory holds which point's files.
fn series_markdown(series: &Series, points: &[(String, Vec<&Session>)]) -> String {
    use std::fmt::Write as _;
    let c = |s: &str| markdown_cell(s).into_owned();
    let m = &series.meta;
    let mut out = format!(
        "# {} — series {}\n\n",
        c(&m.workload),
        c(&series
            .dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()))
    );
    let _ = writeln!(
        out,
        "- started: {}\n- measured runs: {} complete of {} named\n",
        c(&m.started_at),
        series.measured().len(),
        m.runs.iter().filter(|r| r.role == RunRole::Run).count()
    );
    if !m.sweep.is_empty() {
        let _ = writeln!(out, "- swept: {}\n", c(&m.sweep.join(", ")));
    }
    let rows = points_rows(series);
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row.iter().map(|cell| c(cell)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
        if i == 0 {
            let rule: Vec<&str> = (0..row.len())
                .map(|k| if k == 0 { "---" } else { "---:" })
                .collect();
            let _ = writeln!(out, "|{}|", rule.join("|"));
        }
    }
    if points.len() > 1 {
        out.push_str("\nEach point's latency and stacks, its runs added together:\n\n");
        for (n, (text, _)) in points.iter().enumerate() {
            let _ = writeln!(out, "- `{}/`: {}", point_dir(n), c(text));
        }
    }
    for w in &series.warnings {
        let _ = writeln!(out, "\n> warning: {}", c(w));
    }
    out
}

/// `export --range`: the stack formats of one time range of the run, from stacks.jsonl.
/// A session without per-interval stacks is refused (its whole run is not the range).
fn export_range(args: &ExportArgs, range: &RangeSpec) -> Result<ExitCode> {
    let what = || {
        format!(
            "cannot open the session {}",
            Escaped(&args.dir.display().to_string())
        )
    };
    let session = Session::load(&args.dir).with_context(what)?;
    let Some(stacks) =
        IntervalStacks::load(&args.dir, &LoadOptions::from_env()?).with_context(what)?
    else {
        anyhow::bail!(
            "{} has no per-interval stacks (recorded before schema 2, or without sampling): \
             a range cannot be exported; export without --range for the whole run",
            Escaped(&args.dir.display().to_string())
        );
    };
    let (from, to) = range
        .resolve(run_length_ns(&session, Some(&stacks)))
        .with_context(|| format!("--range {range}"))?;
    let secs = |ns: u64| format!("{}s", ns as f64 / 1e9);
    let label = format!("{}-{}", secs(from), secs(to));
    let part = restrict(&session, Some(&stacks), &Between(from, to), &label);
    let formats = if args.format.is_empty() {
        vec![ExportFormat::Speedscope, ExportFormat::Pprof]
    } else {
        args.format.clone()
    };
    if let Some(other) = formats
        .iter()
        .find(|f| !matches!(f, ExportFormat::Speedscope | ExportFormat::Pprof))
    {
        anyhow::bail!(
            "--range exports the stack formats (speedscope, pprof), not {other:?}; \
             `benchtop show DIR --range` prints the range's figures"
        );
    }
    let out_path = args.out.clone().unwrap_or_else(|| args.dir.clone());
    let out = DirHandle::create_or_open(&out_path)?;
    let mut written = Vec::new();
    for format in formats {
        match format {
            ExportFormat::Speedscope => {
                let name = format!("{} {label}", session.meta.workload.name);
                for (kind, tree) in part.profiles.iter() {
                    let Some(unit) = speedscope_unit(kind) else {
                        continue;
                    };
                    if let Some(tree) = tree.as_ref().filter(|t| !t.is_empty()) {
                        let file = format!("{kind}.{label}.speedscope.json");
                        written.push(write_with(&out, &file, |w| {
                            write_speedscope(tree, &name, unit, w)
                        })?);
                    }
                }
            }
            _ => {
                let exported = |(kind, t): (Kind, &Option<StackTree>)| {
                    kind.spec().exports.pprof && t.as_ref().is_some_and(|t| !t.is_empty())
                };
                if !part.profiles.iter().any(exported) {
                    eprintln!("benchtop: no stacks in this range: no pprof profile written");
                } else {
                    let file = format!("profile.{label}.pb.gz");
                    written.push(write_with(&out, &file, |w| encode_session_to(&part, w))?);
                }
            }
        }
    }
    let mut stdout = std::io::stdout().lock();
    for path in written {
        writeln!(stdout, "{}", Escaped(&path.display().to_string()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `name` in `dir` atomically with `bytes`; returns its path.
fn write(dir: &DirHandle, name: &str, bytes: &[u8]) -> Result<PathBuf> {
    write_with(dir, name, |w| w.write_all(bytes))
}

/// Writes `name` in `dir` atomically with what `f` writes; returns its path.
fn write_with(
    dir: &DirHandle,
    name: &str,
    f: impl FnOnce(&mut std::io::BufWriter<&std::fs::File>) -> std::io::Result<()>,
) -> Result<PathBuf> {
    dir.write_atomically_with(name, f)?;
    Ok(dir.join(name))
}
