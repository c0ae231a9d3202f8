//! benchtop, the binary's library: the command line, the headless recorder, and the
//! worker entry point. `main` parses the command line and calls [`run`]; tests drive
//! the same functions headless.
#![deny(missing_docs)]

mod ab;
mod address_space;
mod app;
pub mod cli;
mod compare;
pub mod config;
mod export;
mod external;
mod history;
mod jit;
mod manual;
mod open_history;
pub mod otlp;
mod processes;
mod reap;
pub mod record;
pub mod series;
mod show;
pub mod state;
mod term;
pub mod view;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};
use benchtop_sessions::Status;
use benchtop_sessions::escape::Escaped;
use benchtop_workloads::worker::Workload;

pub use cli::Cli;
use cli::{Command, RecordArgs};
use record::{RecordOptions, RecordOutcome, Target};

/// An error of a command whose status 1 says that a figure regressed (`compare`, `ab`):
/// such an error exits with status 2 instead.
#[derive(Debug)]
pub struct JudgingFailed(anyhow::Error);

impl std::fmt::Display for JudgingFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for JudgingFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl JudgingFailed {
    /// The exit status of such an error.
    pub const STATUS: u8 = 2;
}

/// `e` as a [`JudgingFailed`], unless standard output went away (a broken pipe is no
/// failure of the comparison).
fn judging_failed(e: anyhow::Error) -> anyhow::Error {
    let broken_pipe = e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if broken_pipe {
        e
    } else {
        anyhow::Error::new(JudgingFailed(e))
    }
}

/// Runs the command line; the exit code says how the run ended.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        None => {
            warn_of_orphans();
            address_space::check()?;
            if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() {
                app::run_tui(app::Start::Launcher(cli.defaults))
            } else {
                let args = cli.defaults;
                let opts = workload_options(Workload::default(), &args)?;
                say(
                    "standard output is not a terminal: recording the default workload \
                     headless (`benchtop run --help` for more)",
                );
                report(&record::headless(&opts, args.quiet)?)
            }
        }
        Some(Command::Run(args)) if args.series.is_series() => {
            warn_of_orphans();
            address_space::check()?;
            series::run(*args)
        }
        Some(Command::Run(args)) => {
            warn_of_orphans();
            address_space::check()?;
            match (args.workload, args.command.is_empty()) {
                (Some(workload), true) if args.record.tui => {
                    let opts = workload_options(workload, &args.record)?;
                    app::run_tui(app::Start::Run(Box::new(opts), args.record))
                }
                (_, _) if args.record.baseline.is_some() && !args.record.tui => anyhow::bail!(
                    "--baseline compares a run in the TUI with a saved session: add --tui"
                ),
                (Some(workload), true) => record_workload(workload, args.record),
                (None, false) if args.record.tui => {
                    let opts = external::command_options(&args.command, &args.record)?;
                    app::run_tui(app::Start::Run(Box::new(opts), args.record))
                }
                (None, false) => external::record_command(&args.command, args.record),
                (Some(_), false) => anyhow::bail!(
                    "name a workload or a command after `--`, not both (`benchtop run --help`)"
                ),
                (None, true) => anyhow::bail!(
                    "name a workload (`benchtop run ring`) or a command after `--` \
                     (`benchtop run -- ./my-bench`); `benchtop run --help` lists the workloads"
                ),
            }
        }
        Some(Command::Attach(args)) => {
            warn_of_orphans();
            address_space::check()?;
            if args.record.baseline.is_some() {
                anyhow::bail!(
                    "--baseline compares a run with a saved session; attach cannot take one"
                );
            }
            // clap requires one of the two.
            let pid = args.pid.or(args.pid_flag).unwrap_or_default();
            if args.record.tui {
                let opts = external::attach_options(pid, &args.record)?;
                return app::run_tui(app::Start::Run(Box::new(opts), args.record));
            }
            external::attach(pid, args.record)
        }
        Some(Command::Ab(args)) => {
            warn_of_orphans();
            address_space::check()?;
            ab::ab(&args).map_err(judging_failed)
        }
        Some(Command::ExecGate { jit, command }) => Ok(external::exec_gate(jit, &command)),
        Some(Command::Reap(args)) => reap::reap(&args),
        Some(Command::Show {
            dir,
            json,
            range,
            top,
        }) => match range {
            Some(range) => show::show_range(&dir, &range, top),
            None => show::show(&dir, json),
        },
        Some(Command::Compare(args)) => compare::compare(&args).map_err(judging_failed),
        Some(Command::History(args)) => history::history(&args).map_err(judging_failed),
        Some(Command::Open(args)) => app::open(&args),
        Some(Command::Export(args)) => export::export(&args),
        Some(Command::Worker { workload }) => {
            address_space::limit_arenas();
            worker(&workload)
        }
        Some(Command::Completions { shell }) => manual::completions(shell),
        Some(Command::Man { out }) => manual::man(out.as_deref()),
    }
}

/// Writes `benchtop: {what}` on standard error. A standard error that is gone (the
/// terminal hung up) is no reason to fail, let alone to panic as `eprintln!` would.
pub(crate) fn say(what: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "benchtop: {what}");
}

/// Says when earlier runs left processes behind (every start but the worker's and reap's).
fn warn_of_orphans() {
    if let Some(notice) = reap::orphan_notice() {
        say(notice);
    }
}

/// This executable, which starts workers and exec gates.
fn benchtop_exe() -> Result<std::path::PathBuf> {
    std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find the benchtop executable to start a worker: {e}"))
}

fn record_workload(workload: Workload, record: RecordArgs) -> Result<ExitCode> {
    let opts = workload_options(workload, &record)?;
    report(&record::headless(&opts, record.quiet)?)
}

/// What recording `workload` takes, its parameters checked.
pub(crate) fn workload_options(workload: Workload, record: &RecordArgs) -> Result<RecordOptions> {
    if record.jit {
        anyhow::bail!(
            "--jit sets the environment of a command run after `--` \
             (`benchtop run --jit -- node app.js`), not of a built-in workload"
        );
    }
    if workload.is_node() {
        anyhow::bail!(
            "`{}` is a node process that a workload's main node starts, not a workload to run",
            workload.name()
        );
    }
    // Combinations clap cannot see (e.g. --crash-after without --transport ipc), before a
    // session or a worker exists.
    workload
        .validate()
        .with_context(|| format!("bad parameters for `{}`", workload.name()))?;
    let frame_pointers = workload.keeps_frame_pointers();
    let program = benchtop_exe()?;
    let mut args: Vec<std::ffi::OsString> = vec!["worker".into()];
    args.extend(workload.to_args().into_iter().map(Into::into));
    let mut opts = RecordOptions {
        target: Target::Worker,
        workload: workload.name().to_owned(),
        params: workload.params_json(),
        program: program.into_os_string(),
        args,
        command_line: command_line(),
        stream: record.otlp.stream()?,
        ..record::options_from(record)
    };
    // Our own workers keep frame pointers (.cargo/config.toml): the cheapest recording,
    // unless --unwind asks for another. Not for memory profiles: page faults are mostly
    // taken inside the C library (malloc, memset, memcpy), which keeps none, so its
    // callers would be lost; `auto` unwinds the library with its CFI. Nor for a workload
    // that runs a library built without them (udp-echo over the system's DPDK): `auto`
    // walks those frames with their CFI and the rest with frame pointers.
    if record.unwind.is_none()
        && frame_pointers
        && !opts.sampler.kind.contains(benchtop_sessions::Kind::Mem)
    {
        opts.sampler.unwind = benchtop_profilers::UnwindMode::FramePointers;
    }
    Ok(opts)
}

/// benchtop's own command line as the session records it: text, with any byte that is not
/// UTF-8 shown as U+FFFD (`std::env::args` would panic on it; the command itself is run
/// from the `OsString`s clap parsed, exactly as given).
pub(crate) fn command_line() -> Vec<String> {
    otlp::redact_command_line(
        std::env::args_os()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect(),
    )
}

/// Prints how a recording ended; the exit code says whether it ended well.
pub(crate) fn report(outcome: &RecordOutcome) -> Result<ExitCode> {
    // The warnings quote what the worker said and the summary is its own output: both
    // escaped, so that a worker cannot write to the terminal through them.
    for warning in &outcome.warnings {
        say(format_args!("warning: {}", Escaped(warning)));
    }
    let mut out = std::io::stdout().lock();
    for line in &outcome.summary {
        writeln!(out, "{}", Escaped(line))?;
    }
    writeln!(
        out,
        "session: {} ({}{})",
        Escaped(&outcome.dir.to_string_lossy()),
        outcome.status,
        // `(complete, duration reached)`
        benchtop_sessions::ended_words(outcome.status, outcome.ended_by)
            .map_or(String::new(), |words| format!(", {words}"))
    )?;
    Ok(match outcome.status {
        Status::Complete | Status::Stopped => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// The hidden `worker` subcommand: the workload speaks the report protocol.
fn worker(workload: &Workload) -> Result<ExitCode> {
    benchtop_workloads::worker::set_process_name(&format!("bt-{}", workload.name()));
    let stdin = std::io::stdin();
    let mut log = std::io::stderr();
    match benchtop_workloads::worker::run_worker(workload, std::io::BufReader::new(stdin), &mut log)
    {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            let _ = writeln!(log, "benchtop worker {}: {e}", workload.name());
            Ok(ExitCode::FAILURE)
        }
    }
}
