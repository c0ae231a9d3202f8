//! What a recording tells the user as it goes: typed notices with a [`NoticeKind`] and a
//! `Display`, so a consumer decides what to do with one by its kind, never by its words.

use std::fmt;

use benchtop_protocol::ProtocolError;
use benchtop_sessions::Status;

impl From<ProtocolError> for ReportIssue {
    fn from(e: ProtocolError) -> Self {
        ReportIssue::Line(e.to_string())
    }
}

impl ReportIssue {
    /// A tick's histogram of `metric` that the bounded decoder refused.
    pub fn histogram(metric: &str, error: &dyn std::fmt::Display) -> Self {
        ReportIssue::Histogram {
            metric: metric.to_owned(),
            error: error.to_string(),
        }
    }
}

/// Why the conductor asked the worker to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// Ctrl-C, or SIGTERM, SIGHUP or SIGQUIT, reached the conductor.
    Interrupt,
    /// The live view asked.
    User,
    /// The `--duration` elapsed.
    Duration,
    /// The worker said all it will but did not exit.
    Lingering,
    /// Writing the session failed (a full disk, most likely): the worker is stopped as
    /// for Ctrl-C, what is on disk stays, and the session ends `failed`.
    WriteFailed,
}

impl StopCause {
    /// The session status of a run that stopped this way and exited when asked.
    pub fn status(self) -> Status {
        match self {
            StopCause::Interrupt | StopCause::User => Status::Stopped,
            StopCause::Duration | StopCause::Lingering => Status::Complete,
            StopCause::WriteFailed => Status::Failed,
        }
    }
}

/// How the worker is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopHow {
    /// `stop` on its standard input.
    Message,
    /// SIGINT, as at a terminal (a command that does not speak the protocol).
    Interrupt,
    /// Not at all: the recording detaches from an attached process.
    Detach,
}

/// Why the conductor gave up on a run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The worker speaks another protocol version.
    Version {
        /// Its version.
        found: u32,
        /// Ours.
        supported: u32,
    },
    /// The worker did not say `hello` (or `ready`) in time.
    Silent {
        /// `hello` or `ready`.
        waiting_for: &'static str,
        /// How long it had.
        seconds: u64,
    },
    /// The profilers could not attach (anything but a refused permission).
    Sampler(String),
    /// The exec gate did not open.
    Gate(String),
    /// The recording loop failed (the disk, most likely).
    Recording(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Version { found, supported } => write!(
                f,
                "the worker speaks report protocol version {found}; this benchtop speaks \
                 versions 1 to {supported}: refused"
            ),
            Failure::Silent {
                waiting_for,
                seconds,
            } => write!(f, "the worker did not say {waiting_for} within {seconds}s"),
            Failure::Sampler(e) => write!(f, "cannot sample the worker: {e}"),
            Failure::Gate(e) => write!(f, "cannot release the command at its exec gate: {e}"),
            Failure::Recording(e) => write!(f, "recording failed: {e}"),
        }
    }
}

/// Something wrong with what the worker reported; the run goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReportIssue {
    /// A line that is not a message (malformed, too long, truncated, not UTF-8): the
    /// reader's error, in words.
    Line(String),
    /// A second `hello`.
    SecondHello,
    /// `ready` before `hello`.
    ReadyBeforeHello,
    /// A tick before `start`.
    TickBeforeStart,
    /// A tick, phase or summary before `hello`, on this line of the report stream.
    BeforeHello {
        /// The message's type.
        kind: &'static str,
        /// Its line.
        line: u64,
    },
    /// A tick whose `t_ns` is before the previous tick's: ignored.
    TimeWentBack {
        /// Its line.
        line: u64,
        /// The previous tick's time, ns.
        from_ns: u64,
        /// This tick's, ns.
        to_ns: u64,
    },
    /// A second summary, which replaced the first.
    SecondSummary,
    /// A message of a kind newer than this conductor.
    NewerKind,
    /// A tick's histogram that does not decode.
    Histogram {
        /// Its metric.
        metric: String,
        /// Why, in the decoder's words.
        error: String,
    },
}

impl fmt::Display for ReportIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportIssue::Line(e) => write!(f, "{e}"),
            ReportIssue::SecondHello => f.write_str("a second hello was ignored"),
            ReportIssue::ReadyBeforeHello => f.write_str("ready before hello"),
            ReportIssue::TickBeforeStart => f.write_str("a tick before start was ignored"),
            ReportIssue::BeforeHello { kind, line } => {
                write!(f, "line {line}: a {kind} before hello was ignored")
            }
            ReportIssue::TimeWentBack {
                line,
                from_ns,
                to_ns,
            } => write!(
                f,
                "line {line}: a tick at t_ns {to_ns}, before the previous one's {from_ns}, \
                 was ignored (t_ns never decreases)"
            ),
            ReportIssue::SecondSummary => f.write_str("a second summary replaced the first"),
            ReportIssue::NewerKind => f.write_str("a message of a newer kind was ignored"),
            ReportIssue::Histogram { metric, error } => {
                write!(f, "tick histogram {metric:?}: {error}")
            }
        }
    }
}

/// What kind of notice, for a consumer deciding how to show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    /// Where the run is: starting, running, stopping, writing the session.
    Progress,
    /// Something the user should see: a bad report line, no stack sampling.
    Warning,
    /// Something asked for was done: a snapshot was saved.
    Done,
}

/// A status line from the conductor.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// The worker is being started.
    Starting,
    /// Measured work started.
    Running,
    /// The worker is asked to stop.
    Stopping {
        /// Why.
        cause: StopCause,
        /// How.
        how: StopHow,
    },
    /// The worker ignored `stop`: SIGTERM follows.
    IgnoresStop,
    /// A second interrupt: SIGKILL at once.
    KillingOnSecondInterrupt,
    /// The conductor gave up on the worker, and ends it.
    GaveUp(Failure),
    /// A report line or message was wrong; the run goes on.
    Report(ReportIssue),
    /// Stack sampling was refused (perf permissions); the run goes on without stacks.
    NoSampling(String),
    /// Writing the session failed (the error, naming the file): the run is stopped.
    WriteFailed(String),
    /// The stacks so far and threads.csv were written into the session, as asked.
    SnapshotSaved {
        /// The files written.
        files: Vec<&'static str>,
    },
    /// A snapshot was asked for without sampling: threads.csv only.
    ThreadsSaved,
    /// The run is over; the session's last files are being written.
    WritingSession,
    /// The interval stream (`--otlp`) dropped batches: how many so far, and why. Said
    /// when the count rises, at most every [`crate::STREAM_NOTICE_EVERY`].
    StreamDropped(crate::StreamDrops),
}

impl Notice {
    /// What kind of notice this is.
    pub fn kind(&self) -> NoticeKind {
        match self {
            Notice::Report(_)
            | Notice::NoSampling(_)
            | Notice::WriteFailed(_)
            | Notice::StreamDropped(_) => NoticeKind::Warning,
            Notice::SnapshotSaved { .. } | Notice::ThreadsSaved => NoticeKind::Done,
            Notice::Starting
            | Notice::Running
            | Notice::Stopping { .. }
            | Notice::IgnoresStop
            | Notice::KillingOnSecondInterrupt
            | Notice::GaveUp(_)
            | Notice::WritingSession => NoticeKind::Progress,
        }
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::Starting => f.write_str("starting"),
            Notice::Running => f.write_str("running"),
            Notice::Stopping {
                cause: StopCause::Lingering,
                ..
            } => f.write_str("the worker does not exit: stopping it"),
            Notice::Stopping { cause, how } => {
                let why = match cause {
                    StopCause::Interrupt => "interrupted",
                    StopCause::User => "stop asked",
                    StopCause::Duration | StopCause::Lingering => "duration reached",
                    StopCause::WriteFailed => "the session cannot be written",
                };
                let what = match how {
                    StopHow::Message => "stopping the worker",
                    StopHow::Interrupt => "sending SIGINT",
                    StopHow::Detach => "detaching",
                };
                write!(f, "{why}: {what}")
            }
            Notice::IgnoresStop => f.write_str("the worker ignores stop: sending SIGTERM"),
            Notice::KillingOnSecondInterrupt => {
                f.write_str("interrupted twice: killing the worker")
            }
            Notice::GaveUp(failure) => write!(f, "{failure}"),
            Notice::Report(issue) => write!(f, "worker report: {issue}"),
            Notice::NoSampling(why) => write!(f, "no stack sampling: {why}"),
            Notice::WriteFailed(error) => {
                write!(
                    f,
                    "the session cannot be written ({error}): stopping the run"
                )
            }
            Notice::SnapshotSaved { files } => write!(f, "snapshot saved: {}", files.join(", ")),
            Notice::ThreadsSaved => {
                f.write_str("snapshot saved: threads.csv (no stacks: sampling is off)")
            }
            Notice::WritingSession => f.write_str("writing the session"),
            Notice::StreamDropped(drops) => write!(f, "{drops}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopping_says_why_and_how_as_the_recorder_always_did() {
        let say = |cause, how| Notice::Stopping { cause, how }.to_string();
        assert_eq!(
            say(StopCause::Interrupt, StopHow::Message),
            "interrupted: stopping the worker"
        );
        assert_eq!(
            say(StopCause::Interrupt, StopHow::Interrupt),
            "interrupted: sending SIGINT"
        );
        assert_eq!(
            say(StopCause::User, StopHow::Detach),
            "stop asked: detaching"
        );
        assert_eq!(
            say(StopCause::Duration, StopHow::Message),
            "duration reached: stopping the worker"
        );
        assert_eq!(
            say(StopCause::Lingering, StopHow::Interrupt),
            "the worker does not exit: stopping it"
        );
    }

    #[test]
    fn warnings_and_saves_are_told_apart_by_kind() {
        assert_eq!(
            Notice::Report(ReportIssue::SecondHello).kind(),
            NoticeKind::Warning
        );
        assert_eq!(
            Notice::Report(ReportIssue::SecondHello).to_string(),
            "worker report: a second hello was ignored"
        );
        assert_eq!(
            Notice::SnapshotSaved {
                files: vec!["cpu.folded", "threads.csv"]
            }
            .to_string(),
            "snapshot saved: cpu.folded, threads.csv"
        );
        assert_eq!(Notice::ThreadsSaved.kind(), NoticeKind::Done);
        assert_eq!(Notice::Running.kind(), NoticeKind::Progress);
    }
}
