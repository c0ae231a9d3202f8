//! `benchtop reap`, and the orphan notice every benchtop start prints.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use benchtop_profilers::reaper::{self, Orphan, ReapOptions, ReapOutcome, ReapSignal};
use benchtop_sessions::units::human_bytes;

use crate::cli::{ReapArgs, ReapSignalArg};

/// Lists the orphans and, unless `--dry-run`, ends them. Fails (exit code 1) when one
/// could not be ended.
pub fn reap(args: &ReapArgs) -> Result<ExitCode> {
    let orphans: Vec<Orphan> = reaper::find_orphans()
        .context("cannot list processes")?
        .into_iter()
        .filter(|o| args.session.is_none() || o.session == args.session)
        .collect();
    let mut out = std::io::stdout().lock();
    if orphans.is_empty() {
        writeln!(
            out,
            "no orphans: nothing left behind by an earlier benchtop run"
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    write_table(&mut out, &orphans)?;
    if args.dry_run {
        writeln!(out, "dry run: nothing signalled")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut opts = ReapOptions::default();
    opts.grace = args.grace;
    opts.signal = match args.signal {
        ReapSignalArg::Term => ReapSignal::Term,
        ReapSignalArg::Kill => ReapSignal::Kill,
    };
    match opts.signal {
        ReapSignal::Term => writeln!(
            out,
            "ending {}: SIGTERM, then SIGKILL after {}",
            processes(orphans.len()),
            humantime::format_duration(opts.grace)
        )?,
        _ => writeln!(out, "ending {}: SIGKILL", processes(orphans.len()))?,
    }
    out.flush()?;
    let outcomes = reaper::reap(&orphans, &opts);
    let mut failed = 0;
    for (orphan, outcome) in orphans.iter().zip(&outcomes) {
        writeln!(out, "{:>7}  {outcome}", orphan.pid)?;
        failed += usize::from(matches!(outcome, ReapOutcome::Failed(_)));
    }
    if failed > 0 {
        writeln!(out, "{} could not be ended", processes(failed))?;
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn write_table(out: &mut impl Write, orphans: &[Orphan]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>7}  {:>8}  {:>9}  {:<24}  {:<28}  COMMAND",
        "PID", "AGE", "RSS", "OWNER", "SESSION"
    )?;
    for o in orphans {
        let owner = format!("{} ({})", o.owner.pid, o.owner_state.describe());
        writeln!(
            out,
            "{:>7}  {:>8}  {:>9}  {:<24}  {:<28}  {}",
            o.pid,
            age(o.age),
            human_bytes(o.rss_bytes),
            owner,
            o.session.as_deref().unwrap_or("-"),
            o.command
        )?;
    }
    Ok(())
}

fn processes(n: usize) -> String {
    match n {
        1 => "1 process".into(),
        n => format!("{n} processes"),
    }
}

/// An age to the second, `3m 12s` style, or to the minute past an hour.
fn age(d: Duration) -> String {
    let secs = d.as_secs();
    let rounded = if secs >= 3600 { secs - secs % 60 } else { secs };
    humantime::format_duration(Duration::from_secs(rounded))
        .to_string()
        .replace(' ', "")
}

/// One line for the start of a run when earlier runs left processes behind; `None`
/// when there are none (or /proc cannot be listed: the run itself will say more).
pub fn orphan_notice() -> Option<String> {
    let orphans = reaper::find_orphans().ok()?;
    if orphans.is_empty() {
        return None;
    }
    let rss: u64 = orphans.iter().map(|o| o.rss_bytes).sum();
    Some(format!(
        "{} left behind by earlier runs ({} resident); `benchtop reap` lists and ends them",
        processes(orphans.len()),
        human_bytes(rss)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_durations() {
        assert_eq!(age(Duration::from_secs(0)), "0s");
        assert_eq!(age(Duration::from_secs(192)), "3m12s");
        assert_eq!(age(Duration::from_secs(2 * 3600 + 61)), "2h1m");
    }

    #[test]
    fn process_counts_are_plural_where_needed() {
        assert_eq!(processes(1), "1 process");
        assert_eq!(processes(3), "3 processes");
    }
}
