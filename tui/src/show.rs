//! `benchtop show DIR`: a saved session's summary.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use benchtop_sessions::store::Session;

/// Prints the summary of the session in `dir`.
pub fn show(dir: &Path) -> Result<ExitCode> {
    let session =
        Session::load(dir).with_context(|| format!("cannot open the session {}", dir.display()))?;
    let mut out = std::io::stdout().lock();
    out.write_all(session.summary_text().as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
