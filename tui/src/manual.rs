//! `benchtop completions SHELL` and `benchtop man`: shell completions and man pages,
//! generated from the command line's own definition so they cannot drift from it.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::Cli;

/// Writes the completion script for `shell` to standard output.
pub fn completions(shell: Shell) -> Result<ExitCode> {
    let mut command = Cli::command();
    // Into memory first: clap_complete panics when its writer fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "benchtop", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)
        .and_then(|()| out.flush())
        .context("cannot write the completion script")?;
    Ok(ExitCode::SUCCESS)
}

/// Writes benchtop(1) to standard output, or with `out` one page per command into that
/// directory (created; an existing one must be empty): benchtop.1, benchtop-run.1, …
pub fn man(out: Option<&Path>) -> Result<ExitCode> {
    let command = Cli::command();
    let Some(dir) = out else {
        let mut stdout = std::io::stdout().lock();
        clap_mangen::Man::new(command)
            .render(&mut stdout)
            .context("cannot write the man page")?;
        stdout.flush().context("cannot write the man page")?;
        return Ok(ExitCode::SUCCESS);
    };
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let empty = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir())
                && std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none());
            if !empty {
                anyhow::bail!(
                    "{} exists and is not an empty directory: name a new one",
                    dir.display()
                );
            }
        }
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
    }
    let mut written = 0;
    for (name, page) in pages(command) {
        let path = dir.join(format!("{name}.1"));
        // A page is a new file: never written through a name someone else placed there.
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        page.render(&mut file)
            .and_then(|()| file.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
        written += 1;
    }
    eprintln!("benchtop: {written} man pages in {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

/// A page for benchtop and one for each visible subcommand, named as `man` looks them up
/// (`benchtop-run`).
fn pages(command: clap::Command) -> Vec<(String, clap_mangen::Man)> {
    let command = command.name("benchtop");
    let mut out = Vec::new();
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("benchtop-{}", sub.get_name());
        let sub = sub
            .clone()
            .display_name(name.clone())
            .bin_name(format!("benchtop {}", sub.get_name()));
        out.push((name, clap_mangen::Man::new(sub)));
    }
    out.insert(0, ("benchtop".to_owned(), clap_mangen::Man::new(command)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_is_a_page_for_every_visible_command_and_none_for_hidden_ones() {
        let names: Vec<String> = pages(Cli::command()).into_iter().map(|(n, _)| n).collect();
        for expected in [
            "benchtop",
            "benchtop-run",
            "benchtop-compare",
            "benchtop-reap",
        ] {
            assert!(names.iter().any(|n| n == expected), "{names:?}");
        }
        assert!(
            !names
                .iter()
                .any(|n| n.contains("worker") || n.contains("exec-gate"))
        );
    }
}
