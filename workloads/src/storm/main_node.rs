//! The storm's main node: starts the nodes, schedules the storm, sums and checks what
//! arrives.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::{NAME, NodeStorm, Outcome, StormMetrics, StormParams};
use crate::WorkloadError;
use crate::ipc::{
    Deadlines, Frame, Kind, Link, NodeParams, NodeRole, Nodes, Waited, monotonic_ns, pollin,
    socket_pair, wait_readable,
};
use crate::protocol::new_latency_histogram;
use crate::report::StopSignal;
use crate::ring::RingMode;

/// How often arrival latencies recorded locally are handed to the ticker's histogram
/// (one lock per batch rather than one per message).
const FLUSH_EVERY: Duration = Duration::from_millis(10);

/// Frames a node's reader holds: one read takes up to this many messages off a socket.
const READ_FRAMES: usize = 64;

/// The main node's end of one node.
struct Conn {
    id: u32,
    link: Link,
    hello: bool,
    /// Messages received from the node: the sum the main node has reached for it.
    sum: u64,
    done: bool,
}

/// Descriptors the main node needs beyond its sockets (standard streams, the report
/// channel, the runtime's own, a spawn's exec-error pipe), with room to spare.
const SPARE_FDS: u64 = 64;

/// Makes room for `nodes` sockets under RLIMIT_NOFILE, raising the soft limit towards the
/// hard one if need be.
fn ensure_open_files(nodes: u32) -> Result<(), WorkloadError> {
    let needed = u64::from(nodes) + SPARE_FDS;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } < 0 {
        return Ok(()); // Unknown: let socket creation say so if it fails.
    }
    if limit.rlim_cur >= needed {
        return Ok(());
    }
    if limit.rlim_max >= needed {
        let raised = libc::rlimit {
            rlim_cur: needed,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
    }
    Err(WorkloadError::BadParam {
        name: "num-nodes",
        value: nodes.to_string(),
        reason: "the main node holds a socket per node, and the open-files limit \
                 (ulimit -n) is too low for that many",
    })
}

pub(super) fn run(
    params: &StormParams,
    metrics: &StormMetrics,
    stop: &StopSignal,
) -> Result<Outcome, WorkloadError> {
    let count = params.num_nodes;
    let deadlines = Deadlines::for_nodes(count);
    let ask = params.mode == RingMode::Ask;
    let per_node = u64::from(params.num_msgs);
    ensure_open_files(count)?;

    let linger = params.crash_after.is_some();
    let (mut nodes, mut conns, mut fds, spawn) = start_nodes(count, linger, &deadlines)?;

    let scheduling = Instant::now();
    let go = Frame::new(Kind::Go, 0, per_node, u64::from(ask));
    for conn in &mut conns {
        conn.link.send(go, &mut nodes, NAME)?;
    }
    let schedule = scheduling.elapsed();

    for (fd, conn) in fds.iter_mut().zip(&conns) {
        fd.fd = conn.link.fd();
    }
    let mut arrivals: Histogram<u64> = new_latency_histogram();
    let mut flushed = Instant::now();
    let mut finished: Vec<NodeStorm> = Vec::with_capacity(count as usize);
    let mut received = 0u64;
    let mut storming = count;
    let stopped = 'storm: loop {
        let waited = wait_readable(
            &mut fds,
            deadlines.quiet,
            &|| format!("messages from the {storming} node(s) still storming"),
            &mut nodes,
            Some(stop),
            NAME,
        )?;
        if waited == Waited::Stopped {
            break true;
        }
        for (fd, conn) in fds.iter_mut().zip(conns.iter_mut()) {
            if fd.revents == 0 || fd.fd < 0 {
                continue;
            }
            conn.link.fill(&mut nodes, NAME)?;
            let now_ns = monotonic_ns();
            while let Some(frame) = conn.link.next_frame(NAME)? {
                if frame.node != conn.id || conn.done {
                    return Err(unexpected(conn, &frame, "from this node"));
                }
                match frame.kind {
                    Kind::Storm => {
                        if frame.value != conn.sum {
                            return Err(unexpected(
                                conn,
                                &frame,
                                &format!(
                                    "(a message must carry the {} the main node has \
                                     counted from it: one was lost, repeated or reordered)",
                                    conn.sum
                                ),
                            ));
                        }
                        conn.sum += 1;
                        received += 1;
                        // A send time ahead of the read (clocks are one clock: only by
                        // rounding) counts as zero.
                        let latency = now_ns.saturating_sub(frame.aux);
                        if arrivals.record(latency).is_err() {
                            arrivals.saturating_record(latency);
                        }
                        if ask {
                            conn.link.send(
                                Frame::new(Kind::Reply, 0, conn.sum, 0),
                                &mut nodes,
                                NAME,
                            )?;
                        }
                        nodes.crash_if_due(params.crash_after, received);
                    }
                    Kind::Done => {
                        if frame.value != conn.sum || conn.sum != per_node {
                            return Err(unexpected(
                                conn,
                                &frame,
                                &format!(
                                    "(the node ended with the sum {}; the main node counted \
                                     {} of the {per_node} messages)",
                                    frame.value, conn.sum
                                ),
                            ));
                        }
                        conn.done = true;
                        fd.fd = -1;
                        storming -= 1;
                        finished.push(NodeStorm {
                            node_id: conn.id,
                            storm_time: Duration::from_nanos(frame.aux),
                            final_sum: frame.value,
                        });
                    }
                    _ => return Err(unexpected(conn, &frame, "during the storm")),
                }
            }
        }
        metrics.messages.set(received);
        if flushed.elapsed() >= FLUSH_EVERY {
            metrics.arrival.add(&arrivals);
            arrivals.reset();
            flushed = Instant::now();
        }
        if storming == 0 {
            break 'storm false;
        }
        if stop.is_set() {
            break true;
        }
    };
    let storm = scheduling.elapsed();
    metrics.messages.set(received);
    metrics.arrival.add(&arrivals);

    if !stopped {
        finish(params, received, nodes, conns, &deadlines)?;
    }
    // A stopped run drops `nodes` here: its nodes are killed and reaped.
    Ok(Outcome {
        params: params.clone(),
        spawn,
        schedule,
        nodes: finished,
        storm,
        final_sum: received,
        stopped,
    })
}

/// Starts `count` node processes, each with a socket pair to the main node, and waits
/// for every one's hello: the nodes, their connections, the poll set over them (each
/// closed until the storm) and the time it took.
fn start_nodes(
    count: u32,
    linger: bool,
    deadlines: &Deadlines,
) -> Result<(Nodes, Vec<Conn>, Vec<libc::pollfd>, Duration), WorkloadError> {
    let mut nodes = Nodes::new(NAME, linger)?;
    let mut conns = Vec::with_capacity(count as usize);
    let spawning = Instant::now();
    for id in 1..=count {
        let (ours, theirs) = socket_pair(NAME)?;
        let node = NodeParams {
            role: NodeRole::Storm,
            node_id: id,
            prev_fd: None,
            next_fd: None,
            main_fd: Some(theirs.as_raw_fd()),
            linger,
        };
        nodes.spawn(&node, [theirs.as_raw_fd(), -1])?;
        drop(theirs);
        conns.push(Conn {
            id,
            link: Link::new(ours, format!("node {id}"), READ_FRAMES),
            hello: false,
            sum: 0,
            done: false,
        });
    }

    // Every node says hello: it runs and its socket works.
    let mut fds: Vec<libc::pollfd> = conns.iter().map(|c| pollin(c.link.fd())).collect();
    let until = spawning + deadlines.start;
    let mut starting = count;
    while starting > 0 {
        wait_readable(
            &mut fds,
            until.saturating_duration_since(Instant::now()),
            &|| format!("{starting} of {count} node process(es) to start and say hello"),
            &mut nodes,
            None,
            NAME,
        )?;
        for (fd, conn) in fds.iter_mut().zip(conns.iter_mut()) {
            if fd.revents == 0 {
                continue;
            }
            conn.link.fill(&mut nodes, NAME)?;
            while let Some(frame) = conn.link.next_frame(NAME)? {
                if frame.kind != Kind::Hello || frame.node != conn.id || conn.hello {
                    return Err(unexpected(conn, &frame, "instead of its hello"));
                }
                conn.hello = true;
                starting -= 1;
                // Nothing more is expected from it until it is told to begin.
                fd.fd = -1;
            }
        }
    }
    let spawn = spawning.elapsed();
    Ok((nodes, conns, fds, spawn))
}

/// A storm that was not stopped: every message counted, then each node told `bye` and
/// waited for (its connections closed before the nodes are).
fn finish(
    params: &StormParams,
    received: u64,
    mut nodes: Nodes,
    mut conns: Vec<Conn>,
    deadlines: &Deadlines,
) -> Result<(), WorkloadError> {
    let expected = params.total_messages();
    if received != expected {
        return Err(WorkloadError::Broken {
            workload: NAME,
            reason: format!("the storm ended with {received} messages, not {expected}"),
        });
    }
    let bye = Frame::new(Kind::Bye, 0, 0, 0);
    for conn in &mut conns {
        conn.link.send(bye, &mut nodes, NAME)?;
    }
    drop(conns);
    nodes.finish(deadlines.exit)?;
    Ok(())
}

fn unexpected(conn: &Conn, frame: &Frame, state: &str) -> WorkloadError {
    WorkloadError::BadFrame {
        workload: NAME,
        context: format!("from node {}", conn.id),
        reason: format!("{frame:?} is not expected {state}"),
    }
}
