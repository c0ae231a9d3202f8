//! benchtop's conductor: one recording of a worker, a command or a running process into a
//! session directory.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use benchtop_record::machine::{step, Action, Conductor, Ending, Event, Kind, Phase};
//! use benchtop_sessions::Status;
//!
//! // The lifecycle alone, without a process: a worker says hello and ready, runs, stops.
//! let t0 = Instant::now();
//! let (c, _) = Conductor::new(Kind::Worker, Some(Duration::from_secs(1)), t0);
//! let (c, _) = step(c, Event::Hello, t0);
//! let (c, actions) = step(c, Event::Ready, t0);
//! assert_eq!(actions, [Action::Start]);
//! let (c, _) = step(c, Event::Started, t0);
//! let (c, actions) = step(c, Event::Tick, t0 + Duration::from_secs(1));
//! assert!(actions.contains(&Action::SendStop));
//! let (c, _) = step(c, Event::Summary, t0 + Duration::from_secs(1));
//! let exit = benchtop_record::child::WorkerExit {
//!     code: Some(0),
//!     signal: None,
//!     cpu_time_s: 1.0,
//!     peak_rss_bytes: 0,
//! };
//! let (c, _) = step(c, Event::Exited(exit), t0 + Duration::from_secs(2));
//! let (c, _) = step(c, Event::StreamsClosed, t0 + Duration::from_secs(2));
//! let (c, _) = step(c, Event::Drained, t0 + Duration::from_secs(2));
//! let Phase::Done(ending) = &c.phase else { unreachable!() };
//! assert!(matches!(ending, Ending::DurationElapsed { .. }));
//! assert_eq!(ending.status(), Status::Complete);
//! ```
//!
//! [`record`] runs one: it creates the session ([`RecordOptions::dir`]), starts the
//! worker ([`child`]), performs the hello / ready / start handshake, attaches the sampler
//! and the monitor between `ready` and `start`, turns each tick into a timeseries row and
//! a latency.hlog interval, and finishes the session however the run ends. The lifecycle
//! is [`machine`]: a pure [`machine::step`] that the driver feeds with what happens and
//! whose actions it carries out; [`Ending`] says why the run ended and gives the session
//! its status. A live consumer (the TUI, a progress line) gets typed [`LiveEvent`]s and
//! [`Notice`]s through a [`LiveLink`]. This crate depends on the protocol, the profilers
//! and the sessions, never on the workloads or a command line: the worker's arguments
//! and parameters come as opaque data.
#![deny(missing_docs)]

mod allocs;
pub mod child;
mod driver;
mod ending;
mod error;
mod finish;
pub mod git;
mod interrupts;
pub mod leftover;
pub mod live;
pub mod machine;
pub mod notice;
mod options;
mod rows;
mod stream;
mod streams;

pub use driver::{RecordOutcome, record};
pub use error::RecordError;
pub use interrupts::Interrupts;
pub use live::{Control, Detail, LiveEvent, LiveLink, ProgressFigures};
pub use machine::Ending;
pub use notice::{Notice, NoticeKind};
pub use options::{DEFAULT_SESSIONS_DIR, RecordOptions, Target};
pub use stream::{IntervalStream, STREAM_NOTICE_EVERY, StreamDrops};
