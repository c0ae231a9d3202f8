//! `benchtop show DIR`: a saved session's summary.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use benchtop_sessions::store::Session;

/// Prints the summary of the session in `dir`.
pub fn show(dir: &Path) -> Result<ExitCode> {
    // The rows of timeseries.jsonl are folded into their summary as they are read: memory
    // does not grow with them.
    let session = Session::load_summary(dir).with_context(|| {
        format!(
            "cannot open the session {}",
            benchtop_sessions::escape::Escaped(&dir.display().to_string())
        )
    })?;
    let mut out = std::io::stdout().lock();
    out.write_all(session.summary_text().as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
