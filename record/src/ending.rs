//! Why a run ended, and what that makes the session: its status and the warnings that
//! say how it ended. [`Ending::status`] is the one place endings meet statuses.

use std::path::PathBuf;

use benchtop_sessions::{EndedBy, Status};

use crate::child::WorkerExit;
use crate::notice::{Failure, StopCause};

/// Why a run ended. [`Ending::status`] is the session's final status.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Ending {
    /// The workload finished with its summary and exited cleanly; a command exited 0; an
    /// attached process ended.
    Complete,
    /// The duration elapsed and the worker stopped when asked.
    DurationElapsed {
        /// How it exited (`None` for an attached process, which is left running).
        exit: Option<WorkerExit>,
        /// Who ran.
        who: Who,
        /// It sent no summary after measured work started.
        no_summary: bool,
    },
    /// The user stopped it (Ctrl-C, a signal to the conductor, the live view's stop).
    Stopped {
        /// How it was asked.
        by: StopCause,
        /// How it exited (`None` for an attached process).
        exit: Option<WorkerExit>,
        /// Who ran.
        who: Who,
        /// It sent no summary after measured work started.
        no_summary: bool,
    },
    /// The worker did not exit after its summary (or error) and was stopped.
    Lingered {
        /// How it exited.
        exit: WorkerExit,
        /// Who ran.
        who: Who,
    },
    /// The user interrupted a second time: the worker was killed at once.
    KilledOnSecondInterrupt {
        /// What the first request was.
        asked: StopCause,
        /// How it exited.
        exit: WorkerExit,
        /// Who ran.
        who: Who,
        /// It sent no summary after measured work started.
        no_summary: bool,
    },
    /// The worker ignored `stop` (or SIGINT) and was ended with SIGTERM or SIGKILL.
    KilledAfterIgnoringStop {
        /// What the request was.
        asked: StopCause,
        /// How it exited.
        exit: WorkerExit,
        /// Who ran.
        who: Who,
        /// It sent no summary after measured work started.
        no_summary: bool,
    },
    /// The worker failed or died on its own.
    WorkerCrashed(Crash),
    /// The worker does not speak this conductor's protocol (another version, or silence).
    ProtocolRefused(Failure),
    /// The conductor failed: the profilers could not attach, the exec gate did not open,
    /// or the recording loop failed (its reason is the session's first warning).
    RecorderFailure(Failure),
    /// Writing the session failed.
    WriteFailed {
        /// The file.
        path: PathBuf,
        /// What the system said.
        kind: std::io::ErrorKind,
    },
}

/// Who was recorded, for the words of a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// A worker (or a command that speaks the protocol).
    Worker,
    /// A command that does not speak the protocol.
    Command,
}

/// How a worker failed on its own.
#[derive(Debug, Clone, PartialEq)]
pub enum Crash {
    /// It sent an `error`.
    Failed {
        /// Its message.
        error: String,
        /// How it exited.
        exit: WorkerExit,
    },
    /// It exited 0 without a summary.
    NoSummary,
    /// It ended (non-zero, or a signal) before its summary.
    EndedEarly {
        /// How it exited.
        exit: WorkerExit,
    },
    /// A command that does not speak the protocol failed.
    CommandFailed {
        /// What it said on the report channel (the exec gate's reason), if anything.
        error: Option<String>,
        /// How it exited.
        exit: WorkerExit,
    },
}

impl Ending {
    /// The session's final status. The one place endings meet statuses.
    pub fn status(&self) -> Status {
        match self {
            Ending::Complete | Ending::DurationElapsed { .. } | Ending::Lingered { .. } => {
                Status::Complete
            }
            Ending::Stopped { by, .. } => by.status(),
            // The user chose to kill it: the stop they asked for.
            Ending::KilledOnSecondInterrupt { asked, .. } => asked.status(),
            // A write failure is the run's ending whatever the worker did after.
            Ending::KilledAfterIgnoringStop {
                asked: StopCause::WriteFailed,
                ..
            }
            | Ending::WriteFailed { .. } => Status::Failed,
            // It ignored the stop and had to be killed: not a complete run.
            Ending::KilledAfterIgnoringStop { .. } => Status::Killed,
            Ending::WorkerCrashed(_) | Ending::ProtocolRefused(_) | Ending::RecorderFailure(_) => {
                Status::Crashed
            }
        }
    }

    /// What ended a complete run that the workload did not end itself.
    pub fn ended_by(&self) -> Option<EndedBy> {
        match self {
            Ending::DurationElapsed { .. } => Some(EndedBy::Duration),
            _ => None,
        }
    }

    /// The session's warnings that say how the run ended, in order (none when it ended
    /// well).
    pub fn warnings(&self) -> Vec<String> {
        let no_summary = |missing: bool| missing.then(|| "the worker sent no summary".to_owned());
        match self {
            Ending::Complete => Vec::new(),
            Ending::DurationElapsed { no_summary: n, .. }
            | Ending::Stopped { no_summary: n, .. } => no_summary(*n).into_iter().collect(),
            Ending::Lingered { exit, who } => match who {
                Who::Worker => vec![format!(
                    "the worker did not exit after its summary and was stopped ({exit})"
                )],
                Who::Command => Vec::new(),
            },
            Ending::KilledOnSecondInterrupt {
                exit,
                who,
                no_summary: n,
                ..
            } => {
                let what = match who {
                    Who::Worker => "worker",
                    Who::Command => "command",
                };
                std::iter::once(format!(
                    "the {what} was killed on a second interrupt ({exit})"
                ))
                .chain(no_summary(*n))
                .collect()
            }
            Ending::KilledAfterIgnoringStop {
                exit,
                who,
                no_summary: n,
                ..
            } => match who {
                Who::Worker => {
                    std::iter::once(format!("the worker ignored stop and was ended ({exit})"))
                        .chain(no_summary(*n))
                        .collect()
                }
                Who::Command => Vec::new(),
            },
            Ending::WorkerCrashed(crash) => vec![match crash {
                Crash::Failed { error, exit } => format!("the worker failed: {error} ({exit})"),
                Crash::NoSummary => "the worker exited without a summary".to_owned(),
                Crash::EndedEarly { exit } => {
                    format!("the worker ended before its summary ({exit})")
                }
                Crash::CommandFailed {
                    error: Some(error),
                    exit,
                } => format!("{error} ({exit})"),
                Crash::CommandFailed { error: None, exit } => {
                    format!("the command failed ({exit})")
                }
            }],
            Ending::ProtocolRefused(failure) => vec![failure.to_string()],
            // A loop failure is the session's first warning, written when it happened.
            Ending::RecorderFailure(Failure::Recording(_)) | Ending::WriteFailed { .. } => {
                Vec::new()
            }
            Ending::RecorderFailure(failure) => vec![failure.to_string()],
        }
    }
}
