//! `benchtop reap`, and the orphan notice every benchtop start prints.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use benchtop_profilers::reaper::{self, Orphan, ReapOptions, ReapOutcome, ReapSignal};
use benchtop_sessions::escape::Escaped;
use benchtop_sessions::units::human_bytes;

use crate::cli::{ReapArgs, ReapSignalArg};

/// Lists the orphans and, unless `--dry-run`, ends them. Fails (exit code 1) when one
/// could not be ended.
pub fn reap(args: &ReapArgs) -> Result<ExitCode> {
    if !args.dry_run {
        free_reserves(&mut std::io::stdout().lock())?;
    }
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
    // Another user's processes are ended only when asked for by name (root can signal
    // them; nobody else even sees them).
    let (orphans, others): (Vec<Orphan>, Vec<Orphan>) = orphans
        .into_iter()
        .partition(|o| args.all_users || !o.belongs_to_another_user());
    if !others.is_empty() {
        let mut users: Vec<&str> = others.iter().map(|o| o.user.as_str()).collect();
        users.sort_unstable();
        users.dedup();
        let users: Vec<String> = users.iter().map(|u| Escaped(u).to_string()).collect();
        writeln!(
            out,
            "left alone: {} of other users ({}); `benchtop reap --all-users` ends them too",
            processes(others.len()),
            users.join(", ")
        )?;
    }
    if orphans.is_empty() {
        return Ok(ExitCode::FAILURE);
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
    // Processes left alone are processes still there.
    Ok(if others.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Deletes the room recorders that were cut off still hold for their last write in the
/// sessions under the default directory, and says how much it freed.
fn free_reserves(out: &mut impl Write) -> std::io::Result<()> {
    let root = std::path::Path::new(crate::record::DEFAULT_SESSIONS_DIR);
    let freed = benchtop_sessions::store::remove_left_behind(root);
    if !freed.is_empty() {
        writeln!(
            out,
            "freed {} left in {} session{} of recorders that were cut off ({}/*/{})",
            human_bytes(freed.iter().map(|(_, bytes)| bytes).sum()),
            freed.len(),
            if freed.len() == 1 { "" } else { "s" },
            Escaped(&root.to_string_lossy()),
            benchtop_sessions::store::RESERVE_FILE,
        )?;
    }
    Ok(())
}

/// The orphans, one a line. Every text a process supplies (its command line, the
/// session named in its environment, its user's name) is escaped: a process may carry
/// escape sequences or line breaks meant to forge rows or rewrite the terminal.
fn write_table(out: &mut impl Write, orphans: &[Orphan]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>7}  {:<10}  {:>8}  {:>9}  {:<24}  {:<28}  COMMAND",
        "PID", "USER", "AGE", "RSS", "OWNER", "SESSION"
    )?;
    for o in orphans {
        let owner = format!("{} ({})", o.owner.pid, o.owner_state.describe());
        writeln!(
            out,
            "{:>7}  {:<10}  {:>8}  {:>9}  {:<24}  {:<28}  {}",
            o.pid,
            Escaped(&o.user).to_string(),
            age(o.age),
            human_bytes(o.rss_bytes),
            owner,
            Escaped(o.session.as_deref().unwrap_or("-")).to_string(),
            Escaped(&o.command)
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
    let rss = orphans
        .iter()
        .fold(0u64, |sum, o| sum.saturating_add(o.rss_bytes));
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
    fn the_table_names_the_user_and_escapes_what_processes_supply() {
        let orphan = Orphan {
            pid: 77,
            start_ticks: 1,
            command: "bt-ring\r\n     1  evil  \x1b]0;owned\x07".into(),
            owner: benchtop_profilers::reaper::Owner {
                pid: 5,
                start_ticks: 2,
            },
            owner_state: benchtop_profilers::reaper::OwnerState::Gone,
            session: Some("s\x1b[2J".into()),
            age: Duration::from_secs(3),
            rss_bytes: 0,
            uid: 1001,
            user: "alice".into(),
        };
        let mut out = Vec::new();
        write_table(&mut out, &[orphan]).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(!text.contains('\x1b') && !text.contains('\r'), "{text}");
        assert!(text.contains("alice"), "{text}");
        assert!(text.contains("s\\x1b[2J"), "{text}");
        assert!(text.contains("bt-ring\\r\\n"), "{text}");
    }

    #[test]
    fn process_counts_are_plural_where_needed() {
        assert_eq!(processes(1), "1 process");
        assert_eq!(processes(3), "3 processes");
    }
}
