//! The lifecycle of one recording as a pure state machine: [`step`] takes the
//! [`Conductor`] (its [`Phase`] and what the worker has said so far), one [`Event`] and
//! the current time, and returns the next state and the [`Action`]s to carry out. It does
//! no I/O and reads no clock, so every path (a worker that dies before `hello`, a stop
//! escalated to SIGTERM and SIGKILL, a second Ctrl-C) is tested without a process; the
//! driver ([`crate::record`]) performs the actions and feeds the events in.
//!
//! ```text
//! Starting ──ready──> Ready ──started──> Running ──exit──> Finishing ──drained──> Done(Ending)
//!    │                  │                   │                  ^
//!    └──── stop, refusal, timeout ──────────┴──> Stopping ─────┘   (stop → SIGTERM → SIGKILL)
//! ```

use std::time::{Duration, Instant};

use crate::child::WorkerExit;
pub use crate::ending::{Crash, Ending, Who};
use crate::notice::{Failure, Notice, StopCause, StopHow};

/// How long a worker may take to say hello, and then to say ready.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a worker told to stop may take before it gets SIGTERM.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long a worker sent SIGTERM may take before it gets SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long a worker that sent its summary (or error) may take to exit before it is told
/// to stop.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for the worker's pipes to close after it exited (a grandchild may hold
/// them open).
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// What kind of process is recorded, as far as its lifecycle goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A built-in workload's worker: hello, ready, `start`, ticks, summary.
    Worker,
    /// Any command, released at its exec gate; it may speak the protocol.
    Command,
    /// A running process: watched, never signalled; the recording detaches from it.
    Attach,
}

/// A signal for the worker's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT: how a command that does not speak the protocol is asked to stop.
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGKILL.
    Kill,
}

/// How far stopping the worker has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escalation {
    /// Asked: `stop` sent (SIGINT to a command that does not speak the protocol).
    Asked,
    /// SIGTERM sent: the worker ignored the request, or the conductor gave up on it.
    Terminated,
    /// SIGKILL sent after SIGTERM was ignored too.
    Killed,
    /// SIGKILL sent at once: the user interrupted a second time.
    KilledByUser,
}

/// Why the conductor is stopping the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// A stop was asked for (Ctrl-C, the live view, the duration, a lingering worker).
    Stop(StopCause),
    /// The conductor gave up on the worker; the run ends this way whatever follows.
    Failure(Failure),
}

/// Where a recording is.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// The worker was started; waiting for its `hello` and `ready` (the handshake clock
    /// runs from `since`: the start, then the hello).
    Starting {
        /// When the clock for the next handshake message started.
        since: Instant,
    },
    /// Ready (or a target without a handshake): the driver attaches the profilers and
    /// releases the worker, then says [`Event::Started`].
    Ready,
    /// Measured work runs.
    Running {
        /// When it started.
        since: Instant,
    },
    /// The worker is being stopped.
    Stopping {
        /// When the current escalation step was taken.
        since: Instant,
        /// How far it has gone.
        escalation: Escalation,
        /// Why.
        why: Why,
    },
    /// The worker exited; its streams are drained before the run ends.
    Finishing {
        /// When it exited.
        since: Instant,
        /// How it exited.
        exit: WorkerExit,
        /// How far stopping it had gone, when the conductor stopped it.
        stopped: Option<(Why, Escalation)>,
    },
    /// The run is over.
    Done(Ending),
}

/// What the worker has said so far, and when measured work started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Said {
    /// A valid `hello` arrived.
    pub hello: bool,
    /// A `summary` arrived.
    pub summary: bool,
    /// The worker's `error` message, when it sent one.
    pub error: Option<String>,
    /// When the worker had said all it will (its summary or an error).
    pub all_at: Option<Instant>,
    /// Measured work started.
    pub started: bool,
    /// Interrupts (Ctrl-C, SIGTERM to the conductor) since the run began.
    pub interrupts: u32,
}

/// The whole state of a recording's lifecycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Conductor {
    /// The kind of target.
    pub kind: Kind,
    /// Stop after this long of measured work.
    pub duration: Option<Duration>,
    /// Where the run is.
    pub phase: Phase,
    /// What the worker said.
    pub said: Said,
}

/// What happens to a recording.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Time passed (the driver's loop turns at least every 50 ms).
    Tick,
    /// A valid `hello` of this protocol version.
    Hello,
    /// `ready`.
    Ready,
    /// The worker's summary.
    Summary,
    /// The worker's `error` message.
    WorkerError(String),
    /// A `hello` of a protocol version this conductor does not speak.
    Refused {
        /// The worker's version.
        found: u32,
        /// Ours.
        supported: u32,
    },
    /// The profilers are attached and the worker released.
    Started,
    /// The profilers or the release failed; the run cannot go on.
    StartFailed(Failure),
    /// Ctrl-C (or SIGTERM, SIGHUP, SIGQUIT) reached the conductor.
    Interrupt,
    /// The live view asked the run to stop.
    StopAsked,
    /// Writing the session failed: the worker is stopped as for a stop asked.
    WriteFailed,
    /// The worker exited (or an attached process ended).
    Exited(WorkerExit),
    /// Every stream of the worker reached its end.
    StreamsClosed,
    /// The driver took what was still queued from the worker (after [`Action::Drain`]).
    Drained,
}

/// What the driver is to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Attach the profilers and release the worker (`start`, or open the exec gate), then
    /// say [`Event::Started`] or [`Event::StartFailed`].
    Start,
    /// Send `start` to a command that spoke the protocol after it was released.
    SendStart,
    /// Send `stop` on the worker's standard input.
    SendStop,
    /// Signal the worker's process group.
    Signal(Signal),
    /// Tell the user (progress line, live view).
    Say(Notice),
    /// Take what is still queued from the worker, then say [`Event::Drained`].
    Drain,
}

impl Conductor {
    /// A recording of `kind` whose worker was started at `now`, and what to do first.
    pub fn new(kind: Kind, duration: Option<Duration>, now: Instant) -> (Conductor, Vec<Action>) {
        let (phase, actions) = match kind {
            Kind::Worker => (Phase::Starting { since: now }, Vec::new()),
            // No handshake: profilers attach at once.
            Kind::Command | Kind::Attach => (Phase::Ready, vec![Action::Start]),
        };
        let conductor = Conductor {
            kind,
            duration,
            phase,
            said: Said::default(),
        };
        (conductor, actions)
    }

    /// Whether the run is over.
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done(_))
    }

    /// Who is recorded, for the words of notices and warnings.
    fn who(&self) -> Who {
        if self.kind == Kind::Command && !self.said.hello {
            Who::Command
        } else {
            Who::Worker
        }
    }

    /// It sent no summary after measured work started.
    fn no_summary(&self) -> bool {
        self.said.started && !self.said.summary
    }
}

/// The next state of `conductor` after `event` at `now`, and what to do.
pub fn step(mut c: Conductor, event: Event, now: Instant) -> (Conductor, Vec<Action>) {
    let mut actions = Vec::new();
    if matches!(c.phase, Phase::Done(_)) {
        return (c, actions);
    }
    match event {
        Event::Tick => {}
        Event::Hello => {
            c.said.hello = true;
            if let Phase::Starting { since } = &mut c.phase {
                // The clock for `ready` starts at hello.
                *since = now;
            }
        }
        Event::Ready => match c.phase {
            Phase::Starting { .. } => {
                c.phase = Phase::Ready;
                actions.push(Action::Start);
            }
            // A command that speaks the protocol: sampling has run since its exec.
            Phase::Running { .. } if c.kind == Kind::Command => actions.push(Action::SendStart),
            _ => {}
        },
        Event::Summary => {
            c.said.summary = true;
            c.said.all_at.get_or_insert(now);
        }
        Event::WorkerError(message) => {
            c.said.error = Some(message);
            c.said.all_at.get_or_insert(now);
        }
        Event::Refused { found, supported } => {
            fail(
                &mut c,
                Failure::Version { found, supported },
                now,
                &mut actions,
            );
        }
        Event::Started => {
            if c.phase == Phase::Ready {
                c.phase = Phase::Running { since: now };
                c.said.started = true;
                actions.push(Action::Say(Notice::Running));
            }
        }
        Event::StartFailed(failure) => fail(&mut c, failure, now, &mut actions),
        Event::Interrupt => {
            c.said.interrupts += 1;
            if c.said.interrupts >= 2 {
                kill_on_second_interrupt(&mut c, now, &mut actions);
            } else {
                request_stop(&mut c, StopCause::Interrupt, now, &mut actions);
            }
        }
        Event::StopAsked => request_stop(&mut c, StopCause::User, now, &mut actions),
        Event::WriteFailed => request_stop(&mut c, StopCause::WriteFailed, now, &mut actions),
        Event::Exited(exit) => {
            let stopped = match &c.phase {
                Phase::Stopping {
                    why, escalation, ..
                } => Some((why.clone(), *escalation)),
                Phase::Finishing { .. } => return (c, actions),
                _ => None,
            };
            c.phase = Phase::Finishing {
                since: now,
                exit,
                stopped,
            };
            if c.kind == Kind::Attach {
                // Nothing of an attached process's streams to wait for.
                let ending = ending(&c);
                c.phase = Phase::Done(ending);
                return (c, actions);
            }
        }
        Event::StreamsClosed => {
            if matches!(c.phase, Phase::Finishing { .. }) {
                actions.push(Action::Drain);
                return (c, actions);
            }
        }
        Event::Drained => {
            if matches!(c.phase, Phase::Finishing { .. }) {
                // What was queued (the summary may be among it) has been taken.
                let ending = ending(&c);
                c.phase = Phase::Done(ending);
                return (c, actions);
            }
        }
    }
    on_time(&mut c, now, &mut actions);
    (c, actions)
}

/// What the clock alone decides: handshake timeouts, the duration, a lingering worker,
/// escalating a stop, giving up on the worker's streams.
fn on_time(c: &mut Conductor, now: Instant, actions: &mut Vec<Action>) {
    // A worker that has said all it will but does not exit is told to stop.
    if let (Some(at), Phase::Starting { .. } | Phase::Ready | Phase::Running { .. }) =
        (c.said.all_at, &c.phase)
        && now.saturating_duration_since(at) > EXIT_GRACE
    {
        request_stop(c, StopCause::Lingering, now, actions);
    }
    match c.phase.clone() {
        Phase::Starting { since } if now.saturating_duration_since(since) > HANDSHAKE_TIMEOUT => {
            let waiting_for = if c.said.hello { "ready" } else { "hello" };
            fail(
                c,
                Failure::Silent {
                    waiting_for,
                    seconds: HANDSHAKE_TIMEOUT.as_secs(),
                },
                now,
                actions,
            );
        }
        Phase::Running { since } => {
            if let Some(duration) = c.duration
                && now.saturating_duration_since(since) >= duration
            {
                request_stop(c, StopCause::Duration, now, actions);
            }
        }
        Phase::Stopping {
            since,
            escalation,
            why,
        } => {
            let waited = now.saturating_duration_since(since);
            match escalation {
                Escalation::Asked if waited > STOP_GRACE => {
                    actions.push(Action::Say(Notice::IgnoresStop));
                    actions.push(Action::Signal(Signal::Terminate));
                    c.phase = Phase::Stopping {
                        since: now,
                        escalation: Escalation::Terminated,
                        why,
                    };
                }
                Escalation::Terminated if waited > KILL_GRACE => {
                    actions.push(Action::Signal(Signal::Kill));
                    c.phase = Phase::Stopping {
                        since: now,
                        escalation: Escalation::Killed,
                        why,
                    };
                }
                _ => {}
            }
        }
        Phase::Finishing { since, .. } if now.saturating_duration_since(since) > DRAIN_GRACE => {
            actions.push(Action::Drain);
        }
        _ => {}
    }
}

/// Asks the worker to stop, once: a stop already under way, or a failure, stands.
fn request_stop(c: &mut Conductor, cause: StopCause, now: Instant, actions: &mut Vec<Action>) {
    if !matches!(
        c.phase,
        Phase::Starting { .. } | Phase::Ready | Phase::Running { .. }
    ) {
        return;
    }
    let how = match (c.kind, c.who()) {
        (Kind::Attach, _) => StopHow::Detach,
        (_, Who::Command) => StopHow::Interrupt,
        (_, Who::Worker) => StopHow::Message,
    };
    actions.push(Action::Say(Notice::Stopping { cause, how }));
    match how {
        StopHow::Detach => {
            // The process goes on; the recording ends.
            c.phase = Phase::Done(stop_ending(c, cause, Escalation::Asked, None));
            return;
        }
        StopHow::Interrupt => actions.push(Action::Signal(Signal::Interrupt)),
        // Before `start` too: a worker told to stop before it started exits quietly.
        StopHow::Message => actions.push(Action::SendStop),
    }
    c.phase = Phase::Stopping {
        since: now,
        escalation: Escalation::Asked,
        why: Why::Stop(cause),
    };
}

/// A second interrupt kills the worker's group at once.
fn kill_on_second_interrupt(c: &mut Conductor, now: Instant, actions: &mut Vec<Action>) {
    let why = match &c.phase {
        Phase::Stopping {
            escalation: Escalation::Killed | Escalation::KilledByUser,
            ..
        } => return,
        Phase::Stopping { why, .. } => why.clone(),
        Phase::Starting { .. } | Phase::Ready | Phase::Running { .. } => {
            // Both interrupts came at once: the first asks, the second kills.
            request_stop(c, StopCause::Interrupt, now, actions);
            match &c.phase {
                Phase::Stopping { why, .. } => why.clone(),
                _ => return,
            }
        }
        Phase::Finishing { .. } | Phase::Done(_) => return,
    };
    actions.push(Action::Say(Notice::KillingOnSecondInterrupt));
    actions.push(Action::Signal(Signal::Kill));
    c.phase = Phase::Stopping {
        since: now,
        escalation: Escalation::KilledByUser,
        why,
    };
}

/// The conductor gives up on the worker: it says why and ends it. The first reason stands.
fn fail(c: &mut Conductor, failure: Failure, now: Instant, actions: &mut Vec<Action>) {
    let escalation = match &c.phase {
        Phase::Stopping {
            why: Why::Failure(_),
            ..
        }
        | Phase::Done(_) => return,
        Phase::Finishing { exit, stopped, .. } => {
            if !matches!(stopped, Some((Why::Failure(_), _))) {
                actions.push(Action::Say(Notice::GaveUp(failure.clone())));
                let (exit, escalation) = (*exit, stopped.as_ref().map(|(_, e)| *e));
                c.phase = Phase::Finishing {
                    since: match c.phase {
                        Phase::Finishing { since, .. } => since,
                        _ => now,
                    },
                    exit,
                    stopped: Some((
                        Why::Failure(failure),
                        escalation.unwrap_or(Escalation::Terminated),
                    )),
                };
            }
            return;
        }
        Phase::Stopping { escalation, .. } => *escalation,
        Phase::Starting { .. } | Phase::Ready | Phase::Running { .. } => Escalation::Terminated,
    };
    actions.push(Action::Say(Notice::GaveUp(failure.clone())));
    if c.kind == Kind::Attach {
        // An attached process is never signalled: the recording ends.
        c.phase = Phase::Done(failure_ending(failure));
        return;
    }
    actions.push(Action::Signal(Signal::Terminate));
    c.phase = Phase::Stopping {
        since: now,
        escalation: match escalation {
            Escalation::Killed | Escalation::KilledByUser => escalation,
            _ => Escalation::Terminated,
        },
        why: Why::Failure(failure),
    };
}

fn failure_ending(failure: Failure) -> Ending {
    match failure {
        Failure::Version { .. } | Failure::Silent { .. } => Ending::ProtocolRefused(failure),
        _ => Ending::RecorderFailure(failure),
    }
}

/// The ending of a run stopped on purpose, `exit` being how it exited (`None` when the
/// recording detached).
fn stop_ending(
    c: &Conductor,
    cause: StopCause,
    escalation: Escalation,
    exit: Option<WorkerExit>,
) -> Ending {
    let who = c.who();
    let no_summary = who == Who::Worker && c.kind != Kind::Attach && c.no_summary();
    match (exit, escalation, cause) {
        (Some(exit), Escalation::KilledByUser, _) => Ending::KilledOnSecondInterrupt {
            asked: cause,
            exit,
            who,
            no_summary,
        },
        (Some(exit), _, StopCause::Lingering) => Ending::Lingered { exit, who },
        (Some(exit), Escalation::Terminated | Escalation::Killed, _) if !exit.success() => {
            Ending::KilledAfterIgnoringStop {
                asked: cause,
                exit,
                who,
                no_summary,
            }
        }
        (exit, _, StopCause::Duration) => Ending::DurationElapsed {
            exit,
            who,
            no_summary,
        },
        (exit, _, by) => Ending::Stopped {
            by,
            exit,
            who,
            no_summary,
        },
    }
}

/// How the run ended, from the phase it is in once the worker is gone.
fn ending(c: &Conductor) -> Ending {
    let Phase::Finishing { exit, stopped, .. } = &c.phase else {
        return Ending::Complete;
    };
    let exit = *exit;
    if let Some((Why::Failure(failure), _)) = stopped {
        return failure_ending(failure.clone());
    }
    if c.kind == Kind::Attach {
        // The process ended (how is not ours to know).
        return Ending::Complete;
    }
    let stop = match stopped {
        Some((Why::Stop(cause), escalation)) => Some((*cause, *escalation)),
        _ => None,
    };
    if c.who() == Who::Command {
        return match stop {
            Some((cause, escalation)) => stop_ending(c, cause, escalation, Some(exit)),
            None if exit.success() => Ending::Complete,
            None => Ending::WorkerCrashed(Crash::CommandFailed {
                error: c.said.error.clone(),
                exit,
            }),
        };
    }
    if let Some(error) = &c.said.error {
        return Ending::WorkerCrashed(Crash::Failed {
            error: error.clone(),
            exit,
        });
    }
    match stop {
        // Ended by us (SIGTERM or SIGKILL), or it exited cleanly when asked.
        Some((cause, escalation)) if exit.success() || escalation != Escalation::Asked => {
            stop_ending(c, cause, escalation, Some(exit))
        }
        // A summary is a built-in worker's duty; for a command it is optional
        // (docs/protocol.md), so one that speaks the protocol and exits 0 is complete.
        None if exit.success() && (c.said.summary || c.kind == Kind::Command) => Ending::Complete,
        None if exit.success() => Ending::WorkerCrashed(Crash::NoSummary),
        _ => Ending::WorkerCrashed(Crash::EndedEarly { exit }),
    }
}

#[cfg(test)]
mod tests;
