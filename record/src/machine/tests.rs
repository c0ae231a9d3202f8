//! The lifecycle without processes: each test feeds events at chosen times and checks the
//! actions asked for and how the run ends.

use std::time::{Duration, Instant};

use benchtop_sessions::Status;

use super::*;
use crate::notice::{Failure, Notice, StopCause, StopHow};

fn exit_code(code: i32) -> WorkerExit {
    WorkerExit {
        code: Some(code),
        signal: None,
        cpu_time_s: 0.5,
        peak_rss_bytes: 1 << 20,
    }
}

fn killed_by(signal: i32) -> WorkerExit {
    WorkerExit {
        code: None,
        signal: Some(signal),
        cpu_time_s: 0.5,
        peak_rss_bytes: 1 << 20,
    }
}

/// A conductor and a clock that only moves when told.
struct Sim {
    c: Conductor,
    t0: Instant,
    now: Instant,
}

impl Sim {
    fn new(kind: Kind, duration: Option<Duration>) -> (Sim, Vec<Action>) {
        let t0 = Instant::now();
        let (c, actions) = Conductor::new(kind, duration, t0);
        (Sim { c, t0, now: t0 }, actions)
    }

    /// A worker through hello, ready and start.
    fn running(duration: Option<Duration>) -> Sim {
        let (mut sim, _) = Sim::new(Kind::Worker, duration);
        sim.feed(Event::Hello);
        assert_eq!(sim.feed(Event::Ready), [Action::Start]);
        assert_eq!(sim.feed(Event::Started), [Action::Say(Notice::Running)]);
        sim
    }

    /// Moves the clock to `secs` after the start, one turn of the loop.
    fn at(&mut self, secs: f64) -> Vec<Action> {
        self.now = self.t0 + Duration::from_secs_f64(secs);
        self.feed(Event::Tick)
    }

    fn feed(&mut self, event: Event) -> Vec<Action> {
        let (c, actions) = step(self.c.clone(), event, self.now);
        self.c = c;
        actions
    }

    /// The worker exits and its streams close.
    fn exits(&mut self, exit: WorkerExit) -> &Ending {
        self.feed(Event::Exited(exit));
        assert_eq!(self.feed(Event::StreamsClosed), [Action::Drain]);
        self.feed(Event::Drained);
        self.ending()
    }

    fn ending(&self) -> &Ending {
        match &self.c.phase {
            Phase::Done(ending) => ending,
            phase => panic!("not done: {phase:?}"),
        }
    }
}

fn signals(actions: &[Action]) -> Vec<Signal> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Signal(s) => Some(*s),
            _ => None,
        })
        .collect()
}

#[test]
fn a_worker_that_finishes_with_its_summary_is_complete() {
    let mut sim = Sim::running(None);
    sim.at(3.0);
    sim.feed(Event::Summary);
    let ending = sim.exits(exit_code(0)).clone();
    assert_eq!(ending, Ending::Complete);
    assert_eq!(ending.status(), Status::Complete);
    assert!(ending.warnings().is_empty());
}

#[test]
fn a_stop_ignored_escalates_to_sigterm_then_sigkill() {
    let mut sim = Sim::running(Some(Duration::from_secs(10)));
    assert!(sim.at(9.9).is_empty());
    let stop = sim.at(10.0);
    assert_eq!(
        stop,
        [
            Action::Say(Notice::Stopping {
                cause: StopCause::Duration,
                how: StopHow::Message
            }),
            Action::SendStop
        ]
    );
    // The stop grace passes with nothing but waiting.
    assert!(sim.at(14.9).is_empty());
    let term = sim.at(15.1);
    assert_eq!(
        term,
        [
            Action::Say(Notice::IgnoresStop),
            Action::Signal(Signal::Terminate)
        ]
    );
    assert!(sim.at(17.0).is_empty());
    assert_eq!(signals(&sim.at(17.2)), [Signal::Kill]);
    // Nothing more to send once SIGKILL went.
    assert!(sim.at(30.0).is_empty());
    let ending = sim.exits(killed_by(libc::SIGKILL)).clone();
    assert!(matches!(
        ending,
        Ending::KilledAfterIgnoringStop {
            asked: StopCause::Duration,
            ..
        }
    ));
    assert_eq!(
        ending.status(),
        Status::Killed,
        "it ignored the stop and had to be killed: not a complete run"
    );
    let warnings = ending.warnings().join("\n");
    assert!(
        warnings.contains("ignored stop") && warnings.contains("signal 9"),
        "{warnings}"
    );
    assert!(warnings.contains("no summary"), "{warnings}");
}

#[test]
fn a_worker_that_stops_on_sigterm_is_stopped_without_a_complaint() {
    let mut sim = Sim::running(None);
    sim.feed(Event::Interrupt);
    sim.at(5.1);
    sim.feed(Event::Summary);
    let ending = sim.exits(exit_code(0)).clone();
    assert!(matches!(
        ending,
        Ending::Stopped {
            by: StopCause::Interrupt,
            ..
        }
    ));
    assert_eq!(ending.status(), Status::Stopped);
    assert!(ending.warnings().is_empty());
}

#[test]
fn a_worker_that_dies_before_hello_is_crashed_with_its_exit() {
    let (mut sim, first) = Sim::new(Kind::Worker, None);
    assert!(first.is_empty(), "a worker starts with the handshake");
    sim.at(0.2);
    let ending = sim.exits(exit_code(3)).clone();
    assert_eq!(ending.status(), Status::Crashed);
    assert_eq!(
        ending.warnings(),
        ["the worker ended before its summary (exit code 3)"]
    );
}

#[test]
fn a_worker_that_dies_after_ready_before_its_start_is_crashed() {
    let (mut sim, _) = Sim::new(Kind::Worker, None);
    sim.feed(Event::Hello);
    assert_eq!(sim.feed(Event::Ready), [Action::Start]);
    assert_eq!(sim.c.phase, Phase::Ready);
    let ending = sim.exits(killed_by(libc::SIGSEGV)).clone();
    assert_eq!(ending.status(), Status::Crashed);
    assert_eq!(
        ending.warnings(),
        ["the worker ended before its summary (killed by signal 11 (SIGSEGV))"]
    );
}

#[test]
fn a_worker_killed_mid_run_is_crashed() {
    let mut sim = Sim::running(None);
    sim.at(2.0);
    let ending = sim.exits(killed_by(libc::SIGKILL)).clone();
    assert!(matches!(
        ending,
        Ending::WorkerCrashed(Crash::EndedEarly { .. })
    ));
    assert_eq!(ending.status(), Status::Crashed);
}

#[test]
fn a_worker_that_exits_cleanly_without_a_summary_is_crashed() {
    let mut sim = Sim::running(None);
    let ending = sim.exits(exit_code(0)).clone();
    assert_eq!(ending, Ending::WorkerCrashed(Crash::NoSummary));
    assert_eq!(ending.warnings(), ["the worker exited without a summary"]);
}

#[test]
fn a_summary_still_queued_when_the_worker_exits_counts() {
    let mut sim = Sim::running(None);
    sim.feed(Event::Exited(exit_code(0)));
    assert_eq!(sim.feed(Event::StreamsClosed), [Action::Drain]);
    // The driver drains the queue: the summary was in it.
    sim.feed(Event::Summary);
    sim.feed(Event::Drained);
    assert_eq!(sim.ending(), &Ending::Complete);
}

#[test]
fn streams_held_open_by_a_grandchild_are_given_up_after_the_drain_grace() {
    let mut sim = Sim::running(None);
    sim.feed(Event::Summary);
    sim.at(1.0);
    sim.feed(Event::Exited(exit_code(0)));
    assert!(sim.at(2.9).is_empty());
    assert_eq!(sim.at(3.1), [Action::Drain]);
    sim.feed(Event::Drained);
    assert_eq!(sim.ending(), &Ending::Complete);
}

#[test]
fn a_worker_error_makes_the_run_crashed_even_when_stopped() {
    let mut sim = Sim::running(None);
    sim.feed(Event::StopAsked);
    sim.feed(Event::WorkerError("disk full".into()));
    let ending = sim.exits(exit_code(1)).clone();
    assert_eq!(ending.status(), Status::Crashed);
    assert_eq!(
        ending.warnings(),
        ["the worker failed: disk full (exit code 1)"]
    );
}

#[test]
fn a_refused_protocol_version_ends_the_worker_once() {
    let (mut sim, _) = Sim::new(Kind::Worker, None);
    let refused = sim.feed(Event::Refused {
        found: 99,
        supported: 1,
    });
    let failure = Failure::Version {
        found: 99,
        supported: 1,
    };
    assert_eq!(
        refused,
        [
            Action::Say(Notice::GaveUp(failure.clone())),
            Action::Signal(Signal::Terminate)
        ]
    );
    // The same hello again (a worker repeating itself): said once, ended once.
    for _ in 0..5 {
        assert!(
            sim.feed(Event::Refused {
                found: 99,
                supported: 1
            })
            .is_empty()
        );
    }
    // It ignores SIGTERM too.
    assert_eq!(signals(&sim.at(2.1)), [Signal::Kill]);
    let ending = sim.exits(killed_by(libc::SIGKILL)).clone();
    assert_eq!(ending, Ending::ProtocolRefused(failure));
    assert_eq!(ending.status(), Status::Crashed);
    let warnings = ending.warnings().join("\n");
    assert_eq!(warnings.matches("version 99").count(), 1, "{warnings}");
    assert!(warnings.contains("refused"), "{warnings}");
}

#[test]
fn a_silent_worker_is_given_up_on_after_the_handshake_timeout() {
    let (mut sim, _) = Sim::new(Kind::Worker, None);
    assert!(sim.at(29.0).is_empty());
    sim.feed(Event::Hello);
    // The clock for ready starts at hello.
    assert!(sim.at(58.0).is_empty());
    let gave_up = sim.at(59.5);
    assert_eq!(signals(&gave_up), [Signal::Terminate]);
    let ending = sim.exits(killed_by(libc::SIGTERM)).clone();
    assert_eq!(
        ending.warnings(),
        ["the worker did not say ready within 30s"]
    );
    assert_eq!(ending.status(), Status::Crashed);
}

#[test]
fn a_second_ctrl_c_kills_the_worker_at_once() {
    let mut sim = Sim::running(None);
    let first = sim.feed(Event::Interrupt);
    assert!(first.contains(&Action::SendStop));
    sim.at(1.0);
    let second = sim.feed(Event::Interrupt);
    assert_eq!(
        second,
        [
            Action::Say(Notice::KillingOnSecondInterrupt),
            Action::Signal(Signal::Kill)
        ]
    );
    // No escalation follows a kill, and a third Ctrl-C changes nothing.
    assert!(sim.at(20.0).is_empty());
    assert!(sim.feed(Event::Interrupt).is_empty());
    let ending = sim.exits(killed_by(libc::SIGKILL)).clone();
    assert!(matches!(
        ending,
        Ending::KilledOnSecondInterrupt {
            asked: StopCause::Interrupt,
            ..
        }
    ));
    assert_eq!(ending.status(), Status::Stopped);
    assert_eq!(
        ending.warnings(),
        [
            "the worker was killed on a second interrupt (killed by signal 9 (SIGKILL))",
            "the worker sent no summary"
        ]
    );
}

#[test]
fn two_ctrl_c_before_the_handshake_ask_then_kill() {
    let (mut sim, _) = Sim::new(Kind::Worker, None);
    let first = sim.feed(Event::Interrupt);
    assert!(
        first.contains(&Action::SendStop),
        "a worker told to stop before start exits quietly"
    );
    let second = sim.feed(Event::Interrupt);
    assert_eq!(signals(&second), [Signal::Kill]);
    let ending = sim.exits(killed_by(libc::SIGKILL)).clone();
    assert_eq!(ending.status(), Status::Stopped);
    // Measured work never started: no summary was due.
    assert_eq!(ending.warnings().len(), 1);
}

#[test]
fn the_duration_and_a_stop_racing_stop_the_worker_once_for_the_first() {
    let mut sim = Sim::running(Some(Duration::from_secs(5)));
    sim.now = sim.t0 + Duration::from_secs(5);
    let stop = sim.feed(Event::StopAsked);
    assert_eq!(
        stop.iter().filter(|a| **a == Action::SendStop).count(),
        1,
        "{stop:?}"
    );
    // The duration is reached in the same turn: the stop under way stands.
    assert!(sim.at(5.0).is_empty());
    sim.feed(Event::Summary);
    let ending = sim.exits(exit_code(0)).clone();
    assert_eq!(ending.status(), Status::Stopped);

    let mut sim = Sim::running(Some(Duration::from_secs(5)));
    assert!(sim.at(5.0).contains(&Action::SendStop));
    assert!(sim.feed(Event::StopAsked).is_empty());
    sim.feed(Event::Summary);
    let ending = sim.exits(exit_code(0)).clone();
    assert!(matches!(ending, Ending::DurationElapsed { .. }));
    assert_eq!(ending.status(), Status::Complete);
    assert_eq!(
        ending.ended_by(),
        Some(benchtop_sessions::EndedBy::Duration)
    );
    assert_eq!(Ending::Complete.ended_by(), None);
}

#[test]
fn a_worker_lingering_after_its_summary_is_stopped() {
    let mut sim = Sim::running(None);
    sim.at(1.0);
    sim.feed(Event::Summary);
    assert!(sim.at(6.0).is_empty());
    let stop = sim.at(6.1);
    assert_eq!(
        stop,
        [
            Action::Say(Notice::Stopping {
                cause: StopCause::Lingering,
                how: StopHow::Message
            }),
            Action::SendStop
        ]
    );
    assert_eq!(
        Notice::Stopping {
            cause: StopCause::Lingering,
            how: StopHow::Message
        }
        .to_string(),
        "the worker does not exit: stopping it"
    );
    let ending = sim.exits(exit_code(0)).clone();
    assert_eq!(ending.status(), Status::Complete);
    assert_eq!(
        ending.warnings(),
        ["the worker did not exit after its summary and was stopped (exit code 0)"]
    );
}

#[test]
fn profilers_that_cannot_attach_end_the_run_as_a_recorder_failure() {
    let (mut sim, _) = Sim::new(Kind::Worker, None);
    sim.feed(Event::Hello);
    sim.feed(Event::Ready);
    let failed = sim.feed(Event::StartFailed(Failure::Sampler(
        "no such process".into(),
    )));
    assert_eq!(signals(&failed), [Signal::Terminate]);
    let ending = sim.exits(killed_by(libc::SIGTERM)).clone();
    assert!(matches!(ending, Ending::RecorderFailure(_)));
    assert_eq!(ending.status(), Status::Crashed);
    assert_eq!(
        ending.warnings(),
        ["cannot sample the worker: no such process"]
    );
}

#[test]
fn a_command_that_does_not_speak_the_protocol_is_stopped_with_sigint() {
    let (mut sim, first) = Sim::new(Kind::Command, None);
    assert_eq!(first, [Action::Start], "no handshake to wait for");
    sim.feed(Event::Started);
    let stop = sim.feed(Event::Interrupt);
    assert_eq!(
        stop,
        [
            Action::Say(Notice::Stopping {
                cause: StopCause::Interrupt,
                how: StopHow::Interrupt
            }),
            Action::Signal(Signal::Interrupt)
        ]
    );
    let ending = sim.exits(killed_by(libc::SIGINT)).clone();
    assert_eq!(ending.status(), Status::Stopped);
    assert!(ending.warnings().is_empty());
}

#[test]
fn a_command_that_fails_is_crashed_saying_how() {
    let (mut sim, _) = Sim::new(Kind::Command, None);
    sim.feed(Event::Started);
    sim.feed(Event::WorkerError("cannot run `nope`: No such file".into()));
    let ending = sim.exits(exit_code(127)).clone();
    assert_eq!(ending.status(), Status::Crashed);
    assert_eq!(
        ending.warnings(),
        ["cannot run `nope`: No such file (exit code 127)"]
    );
    let (mut sim, _) = Sim::new(Kind::Command, None);
    sim.feed(Event::Started);
    assert_eq!(
        sim.exits(exit_code(2)).warnings(),
        ["the command failed (exit code 2)"]
    );
}

#[test]
fn a_command_that_speaks_the_protocol_gets_start_after_ready_and_stop_as_a_message() {
    let (mut sim, _) = Sim::new(Kind::Command, None);
    sim.feed(Event::Started);
    sim.feed(Event::Hello);
    assert_eq!(sim.feed(Event::Ready), [Action::SendStart]);
    assert!(sim.feed(Event::StopAsked).contains(&Action::SendStop));
}

#[test]
fn a_command_that_speaks_the_protocol_and_exits_0_without_a_summary_is_complete() {
    // The summary is optional for a command (docs/protocol.md), not for a built-in worker.
    let (mut sim, _) = Sim::new(Kind::Command, None);
    sim.feed(Event::Started);
    sim.feed(Event::Hello);
    sim.at(1.0);
    let ending = sim.exits(exit_code(0)).clone();
    assert_eq!(ending, Ending::Complete);
    assert!(ending.warnings().is_empty());
}

#[test]
fn a_write_failure_stops_the_worker_as_asked_and_fails_the_session() {
    let mut sim = Sim::running(None);
    sim.at(1.0);
    let stop = sim.feed(Event::WriteFailed);
    assert!(stop.contains(&Action::SendStop), "{stop:?}");
    assert!(signals(&stop).is_empty(), "asked, not signalled: {stop:?}");
    // A second failure changes nothing.
    assert!(sim.feed(Event::WriteFailed).is_empty());
    sim.feed(Event::Summary);
    let ending = sim.exits(exit_code(0)).clone();
    assert_eq!(ending.status(), Status::Failed, "{ending:?}");
}

#[test]
fn an_attached_process_is_detached_from_never_signalled() {
    let (mut sim, first) = Sim::new(Kind::Attach, Some(Duration::from_secs(2)));
    assert_eq!(first, [Action::Start]);
    sim.feed(Event::Started);
    let detach = sim.at(2.0);
    assert_eq!(
        detach,
        [Action::Say(Notice::Stopping {
            cause: StopCause::Duration,
            how: StopHow::Detach
        })]
    );
    assert_eq!(sim.ending().status(), Status::Complete);

    let (mut sim, _) = Sim::new(Kind::Attach, None);
    sim.feed(Event::Started);
    assert!(signals(&sim.feed(Event::Interrupt)).is_empty());
    assert_eq!(sim.ending().status(), Status::Stopped);

    let (mut sim, _) = Sim::new(Kind::Attach, None);
    sim.feed(Event::Started);
    sim.feed(Event::Exited(WorkerExit {
        code: None,
        signal: None,
        cpu_time_s: f64::NAN,
        peak_rss_bytes: 0,
    }));
    assert_eq!(sim.ending(), &Ending::Complete);
}

#[test]
fn endings_map_to_statuses_in_one_place() {
    let exit = exit_code(0);
    let cases = [
        (Ending::Complete, Status::Complete),
        (
            Ending::KilledAfterIgnoringStop {
                asked: StopCause::User,
                exit,
                who: Who::Worker,
                no_summary: false,
            },
            Status::Killed,
        ),
        (
            Ending::KilledAfterIgnoringStop {
                asked: StopCause::WriteFailed,
                exit,
                who: Who::Worker,
                no_summary: false,
            },
            Status::Failed,
        ),
        (
            Ending::Stopped {
                by: StopCause::WriteFailed,
                exit: Some(exit),
                who: Who::Worker,
                no_summary: false,
            },
            Status::Failed,
        ),
        (
            Ending::KilledAfterIgnoringStop {
                asked: StopCause::Duration,
                exit,
                who: Who::Worker,
                no_summary: false,
            },
            Status::Killed,
        ),
        (
            Ending::WriteFailed {
                path: "timeseries.jsonl".into(),
                kind: std::io::ErrorKind::StorageFull,
            },
            Status::Failed,
        ),
        (
            Ending::RecorderFailure(Failure::Recording("boom".into())),
            Status::Crashed,
        ),
    ];
    for (ending, status) in cases {
        assert_eq!(ending.status(), status, "{ending:?}");
    }
    // A loop failure was said as the session's first warning; the ending adds nothing.
    assert!(
        Ending::RecorderFailure(Failure::Recording("boom".into()))
            .warnings()
            .is_empty()
    );
}
