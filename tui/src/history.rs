//! `benchtop history DIR…`: each figure across the recordings under some directories,
//! its change points, and an exit status for CI.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use benchtop_sessions::Kind;
use benchtop_sessions::compare::Verdict;
use benchtop_sessions::dir::DirHandle;
use benchtop_sessions::escape::Escaped;
use benchtop_sessions::history::{self, Histories, HistoryOptions};

use crate::cli::HistoryArgs;

/// Reads the histories of `args` and prints them; the exit code is 1 when a `--fail-on`
/// figure's newest point regressed.
pub fn history(args: &HistoryArgs) -> Result<ExitCode> {
    let mut opts = HistoryOptions::default();
    opts.order_by.clone_from(&args.order_by);
    if !args.figure.is_empty() {
        let mut figures = args.figure.clone();
        figures.extend(args.fail_on.iter().cloned());
        opts.figures = Some(figures);
    }
    opts.compare.threshold = args.threshold;
    opts.profiles = !args.no_profiles;
    let mut found = history::load(&args.dirs, &opts).context("cannot read the history")?;
    let out_path = args
        .out
        .clone()
        .unwrap_or_else(|| default_out(args.dirs.first().map_or(Path::new("."), |d| d.as_path())));
    write_moved(&mut found, &out_path)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &found)?;
        writeln!(out)?;
    } else if args.markdown {
        out.write_all(found.to_markdown().as_bytes())?;
    } else {
        out.write_all(found.to_text().as_bytes())?;
    }
    out.flush()?;
    let regressed = regressions(&found, &args.fail_on);
    for line in &regressed {
        crate::say(line);
    }
    let missing: Vec<&String> = args
        .fail_on
        .iter()
        .filter(|name| {
            !found
                .histories
                .iter()
                .any(|h| h.figure(name.as_str()).is_some())
        })
        .collect();
    if let Some(name) = missing.first() {
        anyhow::bail!(
            "--fail-on {}: no history has this figure",
            Escaped(name.as_str())
        );
    }
    Ok(if regressed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `./history-<DIR>`, from the first directory's name.
fn default_out(dir: &Path) -> PathBuf {
    match dir.file_name() {
        Some(name) => PathBuf::from(format!("history-{}", name.to_string_lossy())),
        None => PathBuf::from("history"),
    }
}

/// Writes the differential stacks of every change point's profiles into `out_path` (made
/// when the first is written), as `compare` writes its own, and names the files in the
/// histories; a profile that cannot be drawn is a warning.
fn write_moved(found: &mut Histories, out_path: &Path) -> Result<()> {
    let mut out_dir: Option<DirHandle> = None;
    let many = found.histories.len() > 1;
    let mut notes = Vec::new();
    for (i, h) in found.histories.iter_mut().enumerate() {
        for m in &mut h.moved {
            let (before, after) = m.profiled_spans();
            let stems: Vec<String> = m
                .profiles
                .iter()
                .map(|p| {
                    let stem = m.diff_stem(p.profile);
                    if many { format!("h{i}-{stem}") } else { stem }
                })
                .collect();
            for (p, stem) in m.profiles.iter_mut().zip(stems) {
                let Some(kind) = Kind::from_name(p.profile) else {
                    continue;
                };
                if p.diff_folded.is_empty() {
                    continue;
                }
                let dir = crate::compare::open_out(&mut out_dir, out_path)?;
                let (files, note) = crate::compare::write_diff_files(
                    dir,
                    kind,
                    &stem,
                    &p.diff_folded,
                    (before.as_str(), after.as_str()),
                )?;
                p.files = files.iter().map(|f| f.display().to_string()).collect();
                notes.extend(note);
            }
        }
    }
    found.warnings.extend(notes);
    Ok(())
}

/// A line for each `--fail-on` figure whose newest point regressed.
fn regressions(found: &Histories, fail_on: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for h in &found.histories {
        for name in fail_on {
            let Some(f) = h.figure(name) else { continue };
            let Some(change) = f.newest.as_ref() else {
                continue;
            };
            if change.verdict == Verdict::Regressed {
                out.push(format!(
                    "{} regressed in {}: {:+.1}% at the newest point",
                    Escaped(name),
                    h.key,
                    change.change * 100.0
                ));
            }
        }
    }
    out
}
