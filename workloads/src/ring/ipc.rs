//! The ring across processes (`--transport ipc`): the main node is member 0 and starts
//! members 1 … num-nodes − 1 as node processes.
//!
//! Member k's socket to member k + 1 is one end of a socket pair, the other end being
//! k + 1's socket from k (the last member's goes back to the main node). The main node
//! creates the pairs one at a time as it starts the nodes, so it holds two sockets however
//! long the ring. Before messaging, a `Ping` goes once round, each node adding one: when
//! it comes back with num-nodes − 1, every node runs and the ring is closed
//! (`time_taken_to_spawn_worker_nodes` ends there).
//!
//! Each member adds one to the message as it passes it on, the main node included when it
//! starts a round, so a full run ends with `num_nodes × num_rounds` (the original's
//! `ring_complete_final_sum`). The main node checks the value at every lap — it must be
//! `laps × num_nodes` — and a wrong value ends the run with an error.
//!
//! - **tell**: each member writes the message to the next and forgets it.
//! - **ask**: each member asks the next and answers its own asker only when its ask has
//!   been answered: the chain of asks grows through all rounds, then unwinds in reverse
//!   (every member keeps its pending asks, 16 bytes each); replies carry the final sum
//!   back, and the main node checks every one.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::{NAME, Outcome, RingMetrics, RingMode, RingParams};
use crate::WorkloadError;
use crate::ipc::{
    Deadlines, Frame, Kind, Link, NodeParams, NodeRole, Nodes, Waited, pollin, socket_pair,
    wait_readable,
};
use crate::report::StopSignal;

/// Which of its two sockets a frame reached the main node on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// From the last member: the message coming round.
    Prev,
    /// From member 1: a reply unwinding.
    Next,
}

/// The main node's two sockets and its nodes.
struct Ring {
    next: Link,
    prev: Link,
    nodes: Nodes,
    deadlines: Deadlines,
}

impl Ring {
    /// Starts the nodes and sends the ping round; returns when it came back.
    fn start(params: &RingParams, deadlines: Deadlines) -> Result<Ring, WorkloadError> {
        let members = params.num_nodes;
        let linger = params.crash_after.is_some();
        let mut nodes = Nodes::new(NAME, linger)?;
        let (to_first, mut carry) = socket_pair(NAME)?;
        for id in 1..members {
            let (to_next, from_this) = socket_pair(NAME)?;
            let node = NodeParams {
                role: NodeRole::Ring,
                node_id: id,
                prev_fd: Some(carry.as_raw_fd()),
                next_fd: Some(to_next.as_raw_fd()),
                main_fd: None,
                linger,
            };
            nodes.spawn(&node, [carry.as_raw_fd(), to_next.as_raw_fd()])?;
            // The node holds its ends now; ours would keep the ring from noticing it went.
            drop(to_next);
            carry = from_this;
        }
        let last = members - 1;
        let mut ring = Ring {
            next: Link::new(to_first, "node 1".to_owned(), 4),
            prev: Link::new(carry, format!("node {last}"), 4),
            nodes,
            deadlines,
        };
        ring.next
            .send(Frame::new(Kind::Ping, 0, 0, 0), &mut ring.nodes, NAME)?;
        let waiting = format!("the {last} node process(es) started and a ping went round the ring");
        match ring.receive(false, deadlines.start, &waiting, None)? {
            Some((Side::Prev, frame))
                if frame.kind == Kind::Ping && frame.value == u64::from(last) =>
            {
                Ok(ring)
            }
            Some((_, frame)) => Err(WorkloadError::BadFrame {
                workload: NAME,
                context: format!("from node {last}"),
                reason: format!(
                    "{frame:?} came back for the ping, which should have reached {last}"
                ),
            }),
            None => Err(WorkloadError::Broken {
                workload: NAME,
                reason: "stopped while starting".to_owned(),
            }),
        }
    }

    /// The next frame, from the last member or (`replies`) from member 1 too; `None` when
    /// `stop` is set while waiting.
    fn receive(
        &mut self,
        replies: bool,
        deadline: Duration,
        waiting_for: &str,
        stop: Option<&StopSignal>,
    ) -> Result<Option<(Side, Frame)>, WorkloadError> {
        loop {
            if let Some(frame) = self.prev.next_frame(NAME)? {
                return Ok(Some((Side::Prev, frame)));
            }
            if let Some(frame) = self.next.next_frame(NAME)? {
                return Ok(Some((Side::Next, frame)));
            }
            let mut fds = [pollin(self.prev.fd()), pollin(self.next.fd())];
            let watched = if replies { &mut fds[..] } else { &mut fds[..1] };
            let waited = wait_readable(
                watched,
                deadline,
                &|| waiting_for.to_owned(),
                &mut self.nodes,
                stop,
                NAME,
            )?;
            if waited == Waited::Stopped {
                return Ok(None);
            }
            if fds[0].revents != 0 {
                self.prev.fill(&mut self.nodes, NAME)?;
            }
            if fds[1].revents != 0 {
                self.next.fill(&mut self.nodes, NAME)?;
            }
        }
    }

    /// The run is over: `Bye` goes round, each node passing it on and exiting.
    fn finish(mut self) -> Result<(), WorkloadError> {
        self.next
            .send(Frame::new(Kind::Bye, 0, 0, 0), &mut self.nodes, NAME)?;
        let Ring {
            next,
            prev,
            nodes,
            deadlines,
        } = self;
        drop((next, prev));
        nodes.finish(deadlines.exit)
    }
}

fn wrong(context: &str, reason: String) -> WorkloadError {
    WorkloadError::BadFrame {
        workload: NAME,
        context: context.to_owned(),
        reason,
    }
}

pub(super) fn run(
    params: &RingParams,
    metrics: &RingMetrics,
    stop: &StopSignal,
) -> Result<Outcome, WorkloadError> {
    // Over 150 lines by design: the main node's state machine, one match on side, kind, mode.
    let members = u64::from(params.num_nodes);
    let rounds = params.num_rounds;
    let total = members * u64::from(rounds);
    let deadlines = Deadlines::for_nodes(params.num_nodes);
    let ask = params.mode == RingMode::Ask;
    let last = params.num_nodes - 1;

    let spawning = Instant::now();
    let mut ring = Ring::start(params, deadlines)?;
    let node_creation = spawning.elapsed();

    // Ask mode's pending asks at the main node: its own (by ask id) and those it received
    // from the last member (by that member's ask id), both unwinding last in, first out.
    let mut mine: Vec<u64> = Vec::new();
    let mut askers: Vec<u64> = Vec::new();
    let mut next_ask_id = 0u64;
    let mut laps = 1u32;
    let mut replies = 0u64;
    let mut final_sum = None;
    let mut value = 1;

    let started = Instant::now();
    let mut last_pass = started;
    let first = if ask {
        mine.push(next_ask_id);
        next_ask_id += 1;
        Frame::new(Kind::Ask, 0, value, 0)
    } else {
        Frame::new(Kind::Tell, 0, value, 0)
    };
    ring.next.send(first, &mut ring.nodes, NAME)?;
    let waiting = "the message to come round the ring";
    let stopped = loop {
        let Some((side, frame)) =
            ring.receive(!mine.is_empty(), deadlines.quiet, waiting, Some(stop))?
        else {
            break true;
        };
        // A lap is the message's full round forward: ask mode's replies, unwinding, are
        // not timed.
        if side == Side::Prev {
            let now = Instant::now();
            metrics.lap.record_duration(now - last_pass);
            last_pass = now;
        }
        let from = match side {
            Side::Prev => format!("from node {last}"),
            Side::Next => "from node 1".to_owned(),
        };
        let messages = match (side, frame.kind, ask) {
            (Side::Prev, Kind::Tell, false) | (Side::Prev, Kind::Ask, true)
                if final_sum.is_none() =>
            {
                if frame.value != u64::from(laps) * members {
                    return Err(wrong(
                        &from,
                        format!(
                            "the message came round with {} after {laps} lap(s) of {members} \
                             members, not {}",
                            frame.value,
                            u64::from(laps) * members
                        ),
                    ));
                }
                value = frame.value;
                if ask {
                    askers.push(frame.aux);
                }
                value
            }
            (Side::Next, Kind::Reply, true) => {
                if mine.pop() != Some(frame.aux) {
                    return Err(wrong(
                        &from,
                        format!("{frame:?} answers no pending ask of the main node"),
                    ));
                }
                if Some(frame.value) != final_sum {
                    return Err(wrong(
                        &from,
                        format!(
                            "a reply carries {}, the final sum was {final_sum:?}",
                            frame.value
                        ),
                    ));
                }
                replies += 1;
                total + replies * members
            }
            _ => {
                return Err(wrong(
                    &from,
                    format!("{frame:?} is not expected in a {} ring", params.mode),
                ));
            }
        };
        metrics.messages.set(messages);
        ring.nodes.crash_if_due(params.crash_after, messages);
        if stop.is_set() {
            break true;
        }
        match side {
            Side::Prev if laps < rounds => {
                laps += 1;
                let frame = if ask {
                    let id = next_ask_id;
                    next_ask_id += 1;
                    mine.push(id);
                    Frame::new(Kind::Ask, 0, value + 1, id)
                } else {
                    Frame::new(Kind::Tell, 0, value + 1, 0)
                };
                ring.next.send(frame, &mut ring.nodes, NAME)?;
            }
            Side::Prev if !ask => break false,
            // Ask mode, the last lap: the chain unwinds from here.
            Side::Prev => {
                final_sum = Some(value);
                let asker = askers.pop().unwrap_or_default();
                ring.prev.send(
                    Frame::new(Kind::Reply, 0, value, asker),
                    &mut ring.nodes,
                    NAME,
                )?;
            }
            Side::Next => match askers.pop() {
                Some(asker) => ring.prev.send(
                    Frame::new(Kind::Reply, 0, value, asker),
                    &mut ring.nodes,
                    NAME,
                )?,
                // The answer to the main node's first ask: the chain is complete.
                None => break false,
            },
        }
    };
    let ring_messaging = started.elapsed();

    if stopped {
        // Dropping the ring ends the nodes (SIGKILL) and reaps them.
        drop(ring);
    } else {
        if value != total {
            return Err(WorkloadError::Broken {
                workload: NAME,
                reason: format!("the ring completed with {value}, not {total}"),
            });
        }
        ring.finish()?;
    }
    Ok(Outcome {
        params: params.clone(),
        node_creation,
        ring_messaging,
        final_sum: value,
        messages: metrics.messages.get(),
        stopped,
        bytes_per_pending_ask: None,
    })
}
