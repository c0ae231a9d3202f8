//! The benchtop binary: parse, run, exit code.

use std::io::Write;
use std::process::ExitCode;

/// Counts allocations in worker mode only (`benchtop worker …`): off, in the TUI and the
/// conductor, it costs one relaxed atomic load per call.
#[global_allocator]
static ALLOCATOR: benchtop_workloads::alloc::CountingAlloc =
    benchtop_workloads::alloc::CountingAlloc;

fn main() -> ExitCode {
    // Before the command line is parsed, so that nearly every block a worker frees was
    // counted when it was allocated.
    if benchtop_workloads::alloc::wanted() {
        benchtop_workloads::alloc::enable();
    }
    let cli = match benchtop::Cli::parse_from_os(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match benchtop::run(cli) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Not eprintln!: a standard error that is gone must not turn into a panic.
            let _ = writeln!(std::io::stderr().lock(), "benchtop: {}", message(&e));
            if e.downcast_ref::<benchtop::JudgingFailed>().is_some() {
                ExitCode::from(benchtop::JudgingFailed::STATUS)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The error and its causes, `: `-separated, skipping a cause whose text its parent
/// already includes (library errors carry their source in their own message). Each
/// cause is escaped as it is added: a path or a line read from a file, printed raw by a
/// cause that did not escape it, must not reach the terminal as an escape sequence.
fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = benchtop_sessions::escape::escaped(&cause.to_string()).into_owned();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
