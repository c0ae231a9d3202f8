//! `benchtop show DIR`: a saved session's summary, or a series' table of points.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use benchtop_sessions::escape::Escaped;
use benchtop_sessions::intervals::IntervalStacks;
use benchtop_sessions::limits::LoadOptions;
use benchtop_sessions::range::{RangeSpec, range_text};
use benchtop_sessions::series::{SERIES_FILE, Series};
use benchtop_sessions::store::Session;

/// Prints the summary of the session in `dir`, or the table of a series' points; as JSON
/// when `json`.
pub fn show(dir: &Path, json: bool) -> Result<ExitCode> {
    let what = || format!("cannot open {}", Escaped(&dir.display().to_string()));
    let mut out = std::io::stdout().lock();
    if dir.join(SERIES_FILE).exists() && !dir.join("session.json").exists() {
        let series = Series::load(dir).with_context(what)?;
        if json {
            out.write_all(series_json(&series).as_bytes())?;
        } else {
            out.write_all(crate::series::points_table(&series).as_bytes())?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    // The rows of timeseries.jsonl are folded into their summary as they are read: memory
    // does not grow with them.
    let session = Session::load_summary(dir).with_context(what)?;
    let text = if json {
        session.summary_json()
    } else {
        session.summary_text()
    };
    out.write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// A series for scripts: series.json as it is, each loaded run's figures (session.json's
/// `summary`) by its index in `series.runs`, and the runs left out.
fn series_json(series: &Series) -> String {
    let runs: Vec<serde_json::Value> = series
        .sessions
        .iter()
        .map(|(run, session)| {
            serde_json::json!({
                "run": run,
                "status": session.meta.status,
                "summary": session.meta.summary,
            })
        })
        .collect();
    let json = serde_json::json!({
        "series": series.meta,
        "runs": runs,
        "warnings": series.warnings,
    });
    let mut text = serde_json::to_string_pretty(&json).unwrap_or_default();
    text.push('\n');
    text
}

/// Prints the figures and top functions of a time range of the session in `dir`, from its
/// per-interval stacks (stacks.jsonl); a session without them says so and shows the whole
/// run's functions.
pub fn show_range(dir: &Path, range: &RangeSpec, top: usize) -> Result<ExitCode> {
    let what = || format!("cannot open {}", Escaped(&dir.display().to_string()));
    let session = Session::load(dir).with_context(what)?;
    let stacks = IntervalStacks::load(dir, &LoadOptions::from_env()?).with_context(what)?;
    let text = range_text(&session, stacks.as_ref(), range, top)
        .with_context(|| format!("--range {range}"))?;
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
