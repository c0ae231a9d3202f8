//! `benchtop export DIR`: a session in formats other tools read.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use benchtop_sessions::StackTree;
use benchtop_sessions::dir::DirHandle;
use benchtop_sessions::escape::Escaped;
use benchtop_sessions::export::{hgrm, summary_csv, summary_markdown, write_speedscope};
use benchtop_sessions::intervals::IntervalStacks;
use benchtop_sessions::limits::LoadOptions;
use benchtop_sessions::plot::{self, percentile_svg};
use benchtop_sessions::pprof::encode_session_to;
use benchtop_sessions::range::{Between, RangeSpec, restrict, run_length_ns};
use benchtop_sessions::store::Session;
use hdrhistogram::Histogram;

use crate::cli::{ExportArgs, ExportFormat};

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
    if let Some(range) = &args.range {
        return export_range(args, range);
    }
    // Every format reads the rows' summary and the merged latency, never single
    // intervals: the summary load keeps memory independent of the number of intervals.
    let session = Session::load_summary(&args.dir).with_context(|| {
        format!(
            "cannot open the session {}",
            Escaped(&args.dir.display().to_string())
        )
    })?;
    let out_path = args.out.clone().unwrap_or_else(|| args.dir.clone());
    let out = DirHandle::create_or_open(&out_path)?;
    let formats = if args.format.is_empty() {
        vec![
            ExportFormat::Hgrm,
            ExportFormat::Speedscope,
            ExportFormat::SummaryMd,
            ExportFormat::SummaryCsv,
            ExportFormat::Pprof,
            ExportFormat::LatencySvg,
        ]
    } else {
        args.format.clone()
    };
    let mut written = Vec::new();
    for format in formats {
        match format {
            ExportFormat::Hgrm => {
                let mut notes = Vec::new();
                let merged = session.merged_latency(&mut notes);
                for note in notes {
                    eprintln!("benchtop: warning: {}", Escaped(&note));
                }
                if merged.is_empty() {
                    eprintln!("benchtop: no latency in this session: no .hgrm written");
                }
                let several = merged.len() > 1;
                for (tag, h) in &merged {
                    let name = match (several, tag.is_empty()) {
                        (true, false) => format!("latency-{tag}.hgrm"),
                        _ => "latency.hgrm".to_owned(),
                    };
                    written.push(write(&out, &name, hgrm(h, NS_PER_MS).as_bytes())?);
                }
            }
            ExportFormat::Speedscope => {
                let name = &session.meta.workload.name;
                for (file, tree, unit) in [
                    ("cpu.speedscope.json", &session.cpu, "none"),
                    ("offcpu.speedscope.json", &session.offcpu, "microseconds"),
                ] {
                    if let Some(tree) = tree.as_ref().filter(|t| !t.is_empty()) {
                        written.push(write_with(&out, file, |w| {
                            write_speedscope(tree, name, unit, w)
                        })?);
                    }
                }
            }
            ExportFormat::SummaryMd => {
                written.push(write(
                    &out,
                    "summary.md",
                    summary_markdown(&session).as_bytes(),
                )?);
            }
            ExportFormat::LatencySvg => {
                let mut notes = Vec::new();
                let merged = session.merged_latency(&mut notes);
                if merged.is_empty() {
                    eprintln!("benchtop: no latency in this session: no latency.svg written");
                } else {
                    let series: Vec<(&str, &Histogram<u64>)> = merged
                        .iter()
                        .map(|(tag, h)| (if tag.is_empty() { "latency" } else { *tag }, h))
                        .collect();
                    let title = plot::title(&session.meta.workload.name);
                    written.push(write(
                        &out,
                        "latency.svg",
                        percentile_svg(&title, &series).as_bytes(),
                    )?);
                }
            }
            ExportFormat::Pprof => {
                let empty = |t: &Option<StackTree>| t.as_ref().is_none_or(StackTree::is_empty);
                if empty(&session.cpu) && empty(&session.offcpu) {
                    eprintln!("benchtop: no stacks in this session: no profile.pb.gz written");
                } else {
                    written.push(write_with(&out, "profile.pb.gz", |w| {
                        encode_session_to(&session, w)
                    })?);
                }
            }
            ExportFormat::SummaryCsv => {
                written.push(write(
                    &out,
                    "summary.csv",
                    summary_csv(&session).as_bytes(),
                )?);
            }
        }
    }
    let mut stdout = std::io::stdout().lock();
    for path in written {
        writeln!(stdout, "{}", Escaped(&path.display().to_string()))?;
    }
    Ok(ExitCode::SUCCESS)
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
                for (kind, tree, unit) in [
                    ("cpu", &part.cpu, "none"),
                    ("offcpu", &part.offcpu, "microseconds"),
                ] {
                    if let Some(tree) = tree.as_ref().filter(|t| !t.is_empty()) {
                        let file = format!("{kind}.{label}.speedscope.json");
                        written.push(write_with(&out, &file, |w| {
                            write_speedscope(tree, &name, unit, w)
                        })?);
                    }
                }
            }
            _ => {
                let empty = |t: &Option<StackTree>| t.as_ref().is_none_or(StackTree::is_empty);
                if empty(&part.cpu) && empty(&part.offcpu) {
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
