//! `benchtop completions SHELL` and `benchtop man`: shell completions and man pages,
//! generated from the command line's own definition so they cannot drift from it.
//!
//! Both leave out the hidden commands (`exec-gate`, `worker`, the `ipc-node` workload)
//! and `help`. Man pages go down to the workloads (`benchtop-run-ring`, with their
//! parameters); each page names the pages of its subcommands. Bash completes the session
//! directories that `open`, `show`, `compare` and `export` take: clap_complete's bash
//! script completes only options' values by their hints, so a small function in front of
//! it completes directories where those commands take one.

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
    let script = completion_script(shell);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)
        .and_then(|()| out.flush())
        .context("cannot write the completion script")?;
    Ok(ExitCode::SUCCESS)
}

/// The completion script for `shell`.
fn completion_script(shell: Shell) -> Vec<u8> {
    let full = Cli::command();
    let mut command = visible(&full);
    // Into memory first: clap_complete panics when its writer fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "benchtop", &mut script);
    if shell == Shell::Bash {
        script.extend_from_slice(bash_sessions(&full).as_bytes());
    }
    script
}

/// `command` without its hidden subcommands, at every depth: clap_complete offers every
/// subcommand it is given.
fn visible(command: &clap::Command) -> clap::Command {
    let mut out = clap::Command::new(command.get_name().to_owned())
        .args(command.get_arguments().cloned())
        .groups(command.get_groups().cloned())
        .args_conflicts_with_subcommands(command.is_args_conflicts_with_subcommands_set())
        .subcommand_negates_reqs(command.is_subcommand_negates_reqs_set())
        .subcommand_required(command.is_subcommand_required_set())
        .allow_external_subcommands(command.is_allow_external_subcommands_set());
    if let Some(about) = command.get_about() {
        out = out.about(about.clone());
    }
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        out = out.subcommand(visible(sub));
    }
    out
}

/// The commands whose operands are session (or series) directories.
const SESSION_COMMANDS: [&str; 4] = ["open", "show", "compare", "export"];

/// The bash function that completes directories for [`SESSION_COMMANDS`]' operands and
/// hands every other word to clap's `_benchtop`; it replaces `_benchtop` for `benchtop`.
fn bash_sessions(command: &clap::Command) -> String {
    let mut cases = String::new();
    for name in SESSION_COMMANDS {
        let Some(sub) = command.find_subcommand(name) else {
            continue;
        };
        // The options that take a value: the word after one is its value, not a session.
        let valued: Vec<String> = sub
            .get_arguments()
            .filter(|a| !a.is_positional() && a.get_action().takes_values())
            .flat_map(|a| {
                let long = a.get_long().map(|l| format!("--{l}"));
                let short = a.get_short().map(|c| format!("-{c}"));
                long.into_iter().chain(short)
            })
            .collect();
        cases.push_str(&format!(
            "        {name}) valued=\"{}\" ;;\n",
            valued.join(" ")
        ));
    }
    format!(
        r#"
# Session directories for the operands of {commands}.
_benchtop_sessions() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="" sub="" valued="" i
    if (( COMP_CWORD > 0 )); then
        prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    fi
    for (( i = 1; i < COMP_CWORD; i++ )); do
        case "${{COMP_WORDS[i]}}" in
            -*) ;;
            *) sub="${{COMP_WORDS[i]}}"; break ;;
        esac
    done
    case "$sub" in
{cases}        *) _benchtop "$@"; return ;;
    esac
    if [[ "$cur" == -* || " $valued " == *" $prev "* ]]; then
        _benchtop "$@"
        return
    fi
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -d -- "$cur")
}}
complete -F _benchtop_sessions -o bashdefault -o default benchtop
"#,
        commands = SESSION_COMMANDS.join(", "),
    )
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

/// A page for benchtop and one for each visible subcommand at every depth (the workloads
/// of `run` too), named as `man` looks them up (`benchtop-run`, `benchtop-run-ring`) and
/// as each page names its subcommands' pages. No `help` command: it would be named by
/// every page and have none.
fn pages(command: clap::Command) -> Vec<(String, clap_mangen::Man)> {
    let mut command = command
        .name("benchtop")
        .bin_name("benchtop")
        .disable_help_subcommand(true);
    // Built, every subcommand has its display name (`benchtop-run-ring`) and its usage.
    command.build();
    fn walk(command: &clap::Command, out: &mut Vec<(String, clap_mangen::Man)>) {
        let name = command
            .get_display_name()
            .unwrap_or_else(|| command.get_name())
            .to_owned();
        out.push((name, clap_mangen::Man::new(command.clone())));
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, out);
        }
    }
    let mut out = Vec::new();
    walk(&command, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_is_a_page_for_every_visible_command_and_workload_and_none_for_hidden_ones() {
        let names: Vec<String> = pages(Cli::command()).into_iter().map(|(n, _)| n).collect();
        let mut expected = vec![
            "benchtop".to_owned(),
            "benchtop-run".to_owned(),
            "benchtop-compare".to_owned(),
            "benchtop-reap".to_owned(),
        ];
        expected.extend(
            crate::cli::workload_names()
                .into_iter()
                .map(|w| format!("benchtop-run-{w}")),
        );
        for expected in expected {
            assert!(names.contains(&expected), "{expected}: {names:?}");
        }
        for hidden in ["worker", "exec-gate", "ipc-node", "help"] {
            assert!(!names.iter().any(|n| n.contains(hidden)), "{names:?}");
        }
    }

    #[test]
    fn completions_never_offer_the_hidden_commands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script = String::from_utf8(completion_script(shell)).unwrap();
            for hidden in ["exec-gate", "ipc-node"] {
                assert!(!script.contains(hidden), "{shell}: {hidden}");
            }
            // `worker` is also a word of the options' help (worker.log): as a command,
            // bash would name a function and a case for it, zsh and fish quote it.
            for command in ["__worker", ",worker)", "'worker:", "\"worker\""] {
                assert!(!script.contains(command), "{shell}: {command}");
            }
            assert!(script.contains("compare") && script.contains("num-nodes"));
        }
        // zsh and fish take the operands' hints: directories for the session commands.
        let zsh = String::from_utf8(completion_script(Shell::Zsh)).unwrap();
        assert!(zsh.contains("_files -/"), "zsh completes directories");
    }
}
