//! Programs that are not built in: `benchtop run -- <command>`, `benchtop attach <pid>`,
//! and the exec gate that holds a command until the sampler is attached.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use benchtop_profilers::process_start_ticks;
use benchtop_protocol::{self as protocol, WorkerMessage};

use crate::cli::RecordArgs;
use crate::record::child::{GATE_FD, GATE_PASS_FD, REPORT_FD};
use crate::record::{self, RecordOptions, Target};
use crate::{benchtop_exe, report};

/// Exit code of the gate when the conductor went away before opening it.
const GATE_CLOSED: u8 = 125;
/// Exit code when the command cannot be executed (as a shell says it).
const EXEC_FAILED: u8 = 127;

/// `benchtop run -- <command> [args]`: the command starts behind the exec gate, so the
/// sampler is attached before its first instruction.
pub fn record_command(command: &[OsString], record: RecordArgs) -> Result<ExitCode> {
    let opts = command_options(command, &record)?;
    report(&record::headless(&opts, record.quiet)?)
}

/// What recording `command` behind the exec gate takes.
pub(crate) fn command_options(command: &[OsString], record: &RecordArgs) -> Result<RecordOptions> {
    let Some(first) = command.first() else {
        anyhow::bail!("no command after `--`");
    };
    let path = runnable(first)?;
    let warnings: Vec<String> = setuid_warning(&path).into_iter().collect();
    for w in &warnings {
        // Said before recording starts; a closed stderr is no reason to stop.
        let _ = writeln!(std::io::stderr(), "benchtop: {w}");
    }
    let name = Path::new(first)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| first.to_string_lossy().into_owned());
    let mut params = std::collections::BTreeMap::new();
    params.insert(
        "command".to_owned(),
        serde_json::json!(command_text(command)),
    );
    let mut args: Vec<OsString> = vec!["exec-gate".into()];
    if record.jit {
        params.insert("jit".to_owned(), serde_json::json!(true));
        args.push("--jit".into());
    }
    args.push("--".into());
    args.extend(command.iter().cloned());
    let opts = RecordOptions {
        target: Target::Command,
        workload: name,
        params,
        program: benchtop_exe()?.into_os_string(),
        args,
        command_line: crate::command_line(),
        stream: record.otlp.stream()?,
        warnings,
        ..record::options_from(record)
    };
    Ok(opts)
}

/// What to say of a set-user-ID or set-group-ID program run by a user other than root:
/// its exec changes the process's credentials, and the kernel then stops reporting its
/// samples and events to a recorder that may not trace the new owner.
fn setuid_warning(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    // SAFETY: geteuid and getegid have no arguments and cannot fail.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if euid == 0 {
        return None;
    }
    let mode = meta.mode();
    let changes = if mode & libc::S_ISUID != 0 && meta.uid() != euid {
        format!("set-user-ID (it runs as uid {})", meta.uid())
    } else if mode & libc::S_ISGID != 0 && meta.gid() != egid {
        format!("set-group-ID (it runs as gid {})", meta.gid())
    } else {
        return None;
    };
    Some(format!(
        "{} is {changes}: its exec changes the process's credentials, and the kernel \
         stops giving its samples to a recorder that may not trace it, so its stacks will be \
         empty and its CPU time uncounted; record it as root (or with CAP_SYS_PTRACE and \
         CAP_PERFMON), or a copy without the set-ID bit",
        benchtop_sessions::escape::EscapedPath(path)
    ))
}

/// Refuses a command that cannot be started before a session exists for it: a path that
/// is not an executable file, or a name found in no directory of `PATH`. The program's
/// path when it can.
fn runnable(program: &std::ffi::OsStr) -> Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let shown = Path::new(program).display().to_string();
    if program.as_encoded_bytes().contains(&b'/') {
        let path = Path::new(program);
        return match std::fs::metadata(path) {
            Err(e) => Err(anyhow::anyhow!("cannot run `{shown}`: {e}")),
            Ok(_) if !executable(path) => Err(anyhow::anyhow!(
                "cannot run `{shown}`: not an executable file"
            )),
            Ok(_) => Ok(path.to_path_buf()),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(found) = std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
    {
        return Ok(found);
    }
    anyhow::bail!("cannot run `{shown}`: no such command in PATH")
}

/// `benchtop attach <pid>`: profiles and watches a running process until it exits, the
/// duration elapses or the user presses Ctrl-C. The process is never signalled.
pub fn attach(pid: u32, record: RecordArgs) -> Result<ExitCode> {
    let opts = attach_options(pid, &record)?;
    if let Some(advice) = crate::jit::advice_for(pid) {
        // Said before recording starts; a closed stderr is no reason to stop.
        let _ = writeln!(std::io::stderr(), "benchtop: {advice}");
    }
    report(&record::headless(&opts, record.quiet)?)
}

/// What attaching to `pid` takes, checked (the process exists, has not exited, is not
/// benchtop itself, and may be profiled by this user) before a session exists.
pub(crate) fn attach_options(pid: u32, record: &RecordArgs) -> Result<RecordOptions> {
    if pid == std::process::id() {
        anyhow::bail!("benchtop cannot attach to itself (pid {pid})");
    }
    if record.jit {
        anyhow::bail!(
            "--jit sets the environment of a command benchtop starts (`run --jit -- CMD`); \
             a running process keeps the one it was started with"
        );
    }
    let start_ticks = process_start_ticks(pid)
        .with_context(|| format!("no process with pid {pid} (or /proc/{pid} is unreadable)"))?;
    if let Some(parent) = benchtop_profilers::process_exited_unreaped(pid) {
        anyhow::bail!(
            "pid {pid} is a zombie: it has exited and only waits for its parent (pid \
             {parent}) to collect its exit status; there is nothing left to profile"
        );
    }
    may_trace(pid)?;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim_end().to_owned())
        .unwrap_or_else(|_| format!("pid-{pid}"));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv: Vec<OsString> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| OsString::from(String::from_utf8_lossy(a).into_owned()))
        .collect();
    let mut params = std::collections::BTreeMap::new();
    params.insert("pid".to_owned(), serde_json::json!(pid));
    params.insert("command".to_owned(), serde_json::json!(command_text(&argv)));
    let opts = RecordOptions {
        target: Target::Attach { pid, start_ticks },
        workload: comm,
        params,
        program: OsString::new(),
        args: Vec::new(),
        command_line: crate::command_line(),
        stream: record.otlp.stream()?,
        ..record::options_from(record)
    };
    Ok(opts)
}

/// Refuses a process this user may not profile, naming why, before a session exists.
///
/// Sampling another process and reading its maps and stacks pass the kernel's ptrace
/// access check (PTRACE_MODE_READ_REALCREDS): the process's real, effective and saved
/// uids must all be this user's real uid, or this user needs CAP_SYS_PTRACE. Without the
/// check the kernel refuses every perf event and the session would hold monitors only,
/// blaming perf_event_paranoid.
fn may_trace(pid: u32) -> Result<()> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    let Some(uids) = status_ids(&status, "Uid:") else {
        anyhow::bail!("/proc/{pid}/status has no Uid line");
    };
    // SAFETY: getuid(2) takes nothing and cannot fail.
    let me = unsafe { libc::getuid() };
    if uids.iter().take(3).all(|&uid| uid == me) || has_cap_sys_ptrace() {
        return Ok(());
    }
    let theirs = uids[1];
    let name = |uid: u32| benchtop_profilers::reaper::user_name(uid);
    anyhow::bail!(
        "cannot attach to pid {pid}: it runs as user {} (uid {theirs}) and benchtop as {} \
         (uid {me}); profiling another user's process needs CAP_SYS_PTRACE (run benchtop \
         as root or as that user)",
        benchtop_sessions::escape::Escaped(&name(theirs)),
        benchtop_sessions::escape::Escaped(&name(me)),
    )
}

/// The ids of a `/proc/<pid>/status` line such as `Uid:\treal\teffective\tsaved\tfs`.
fn status_ids(status: &str, key: &str) -> Option<Vec<u32>> {
    let line = status.lines().find_map(|l| l.strip_prefix(key))?;
    let ids: Vec<u32> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    (ids.len() >= 3).then_some(ids)
}

/// Whether this process holds CAP_SYS_PTRACE (in its effective set).
fn has_cap_sys_ptrace() -> bool {
    const CAP_SYS_PTRACE: u32 = 19;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_PTRACE) != 0)
}

fn command_text(command: &[OsString]) -> String {
    command
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The hidden `exec-gate` subcommand: waits for the conductor's byte on [`GATE_FD`], then
/// replaces itself with the command. Sampling events opened on this process with
/// enable-on-exec begin at that exec. Just before it, says its own peak on
/// [`GATE_PASS_FD`], which closes at the exec ([`say_passing`]). When the exec fails, says
/// why on the report channel (the conductor shows it) and on standard error.
pub fn exec_gate(jit: bool, command: &[OsString]) -> ExitCode {
    if !wait_at_gate() {
        return ExitCode::from(GATE_CLOSED);
    }
    let Some((program, args)) = command.split_first() else {
        return ExitCode::from(EXEC_FAILED);
    };
    let mut cmd = std::process::Command::new(program);
    if jit {
        cmd.envs(crate::jit::environment_here());
    }
    cmd.args(args);
    say_passing();
    let err = cmd.exec();
    let message = format!("cannot run `{}`: {err}", program.to_string_lossy());
    if fd_is_open(REPORT_FD) {
        // SAFETY: the conductor opened REPORT_FD for this process; nothing else owns it.
        let mut reports = unsafe { std::fs::File::from_raw_fd(REPORT_FD) };
        let mut buf = Vec::new();
        let _ = protocol::write_message(
            &mut reports,
            &mut buf,
            &WorkerMessage::Error {
                message: message.clone(),
            },
        );
    }
    let _ = writeln!(std::io::stderr(), "benchtop: {message}");
    ExitCode::from(EXEC_FAILED)
}

/// Tells the conductor on [`GATE_PASS_FD`] the peak resident set size of this process
/// so far (`ru_maxrss`, kB: the conductor's copy at fork, then the gate), and makes the
/// descriptor close-on-exec: its end of file says the command has replaced the gate, and
/// the command's own peak is the part of wait4's figure above this one. Nothing when the
/// descriptor is not there.
fn say_passing() {
    if !fd_is_open(GATE_PASS_FD) {
        return;
    }
    // SAFETY: F_SETFD only sets the flags of a descriptor the conductor opened for this
    // process.
    unsafe { libc::fcntl(GATE_PASS_FD, libc::F_SETFD, libc::FD_CLOEXEC) };
    // SAFETY: rusage is plain data the kernel fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a local.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return;
    }
    // SAFETY: the conductor opened GATE_PASS_FD for this process and nothing else owns
    // it; ManuallyDrop leaves it open for the exec to close.
    let mut pass = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(GATE_PASS_FD) });
    let _ = writeln!(pass, "{}", usage.ru_maxrss);
}

/// Blocks until the gate opens (true); false when it was closed unopened or is not
/// there at all.
fn wait_at_gate() -> bool {
    if !fd_is_open(GATE_FD) {
        return false;
    }
    // SAFETY: the conductor opened GATE_FD for this process; nothing else owns it. The
    // file is dropped (closed) before the exec.
    let mut gate = unsafe { std::fs::File::from_raw_fd(GATE_FD) };
    let mut byte = [0u8; 1];
    loop {
        match gate.read(&mut byte) {
            Ok(1) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            _ => return false,
        }
    }
}

fn fd_is_open(fd: i32) -> bool {
    // SAFETY: F_GETFD only reads the descriptor's flags.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_ids_read_real_effective_and_saved() {
        let status = "Name:\tsleep\nUid:\t1000\t0\t1000\t0\nGid:\t5\t5\t5\t5\n";
        assert_eq!(status_ids(status, "Uid:"), Some(vec![1000, 0, 1000, 0]));
        assert_eq!(status_ids("Uid:\t1\tx\t1\t1\n", "Uid:"), None);
        assert_eq!(status_ids("Uid:\t1\n", "Uid:"), None);
    }

    #[test]
    fn this_process_may_trace_itself_by_uid() {
        // Its own children (and itself) pass whatever its capabilities.
        assert!(may_trace(std::process::id()).is_ok());
    }
}
