//! `benchtop history DIR…`: each figure across the recordings under some directories,
//! its change points, and an exit status for CI.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use benchtop_sessions::compare::Verdict;
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
    let found = history::load(&args.dirs, &opts).context("cannot read the history")?;
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
