//! The command line's refusals made to say what went wrong: a workload's name after
//! `run`'s options, a misspelt workload, another command's option, a config file's
//! refusal.

use super::{Cli, workload_names};

/// A config file's refusal as the command line's errors are shown (exit status 2).
pub(super) fn config_error(error: crate::config::ConfigError) -> clap::Error {
    clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{error}\n"))
}

/// `error` for an option `sub` does not have, naming the subcommands that do have it
/// (`run ring --threshold 5%` is a compare option, not a misspelt `--record`).
fn other_command_s_option(error: clap::Error, sub: &std::ffi::OsStr, word: &str) -> clap::Error {
    use clap::CommandFactory as _;
    use clap::error::ErrorKind;
    let long = word.trim_start_matches('-');
    let long = long.split_once('=').map_or(long, |(name, _)| name);
    let command = Cli::command();
    let owners: Vec<&str> = command
        .get_subcommands()
        .filter(|c| c.get_name() != sub && !c.is_hide_set())
        .filter(|c| c.get_arguments().any(|a| a.get_long() == Some(long)))
        .map(|c| c.get_name())
        .collect();
    if owners.is_empty() || !word.starts_with("--") {
        return error;
    }
    let mut owners: Vec<String> = owners.iter().map(|o| format!("`benchtop {o}`")).collect();
    let last = owners.pop().unwrap_or_default();
    let owners = match owners.is_empty() {
        true => last,
        false => format!("{} and {last}", owners.join(", ")),
    };
    let message = format!(
        "unexpected argument '{word}' found: it is an option of {owners}, not of `benchtop {}`",
        sub.to_string_lossy()
    );
    let mut command = Cli::command();
    command.build();
    command.error(ErrorKind::UnknownArgument, message)
}

/// `args` with the workload's name moved to right after `run`, when `error` is clap's
/// refusal of a workload's name that came after `run`'s options (which clap then takes
/// as a stray argument, never an option's value); `None` otherwise.
pub(super) fn workload_first(
    error: &clap::Error,
    args: &[std::ffi::OsString],
) -> Option<Vec<std::ffi::OsString>> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument || args.get(1)? != "run" {
        return None;
    }
    let Some(ContextValue::String(word)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    if !workload_names().contains(word) {
        return None;
    }
    let at = args[2..]
        .iter()
        .take_while(|a| *a != "--")
        .position(|a| a == word.as_str())?
        + 2;
    let mut reordered = args.to_vec();
    let name = reordered.remove(at);
    reordered.insert(2, name);
    Some(reordered)
}

/// `error` with a suggestion when it is a word after `run` that names no workload.
pub(super) fn workload_hint(error: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::CommandFactory as _;
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return error;
    }
    let Some(ContextValue::String(word)) = error.get(ContextKind::InvalidArg) else {
        return error;
    };
    let word = word.clone();
    let Some(sub) = args.get(1) else {
        return error;
    };
    if sub != "run" || word.starts_with('-') {
        return other_command_s_option(error, sub, &word);
    }
    let names = workload_names();
    let closest = names
        .iter()
        .map(|n| (strsim::levenshtein(n, &word), n))
        .filter(|(distance, n)| *distance <= (n.len() / 3).max(2))
        .min();
    let mut message = format!("unknown workload '{word}'");
    if let Some((_, name)) = closest {
        message.push_str(&format!("\n\n  tip: a similar workload exists: '{name}'"));
    }
    message.push_str(&format!(
        "\n\nworkloads: {}; a program of your own goes after `--` (benchtop run -- ./prog)",
        names.join(", ")
    ));
    let mut command = Cli::command();
    command.build();
    match command.find_subcommand_mut("run") {
        Some(run) => run.error(ErrorKind::InvalidSubcommand, message),
        None => command.error(ErrorKind::InvalidSubcommand, message),
    }
}
