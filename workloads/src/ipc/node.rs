//! The node process: `worker ipc-node --role ring|storm …`, started by a main node.
//!
//! A node says no `hello` and writes no protocol line: it only passes frames on its
//! sockets and exits when told the run is over (`Bye`). When a socket closes under it —
//! the main node ended — it exits quietly, or, with `--linger` (the fault `--crash-after`
//! injects), sleeps until it is killed, holding its sockets, without spinning.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::{Filled, Frame, FrameReader, Kind, monotonic_ns, pollin};
use crate::WorkloadError;

/// The workload a node serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeRole {
    /// A member of `ring --transport ipc`.
    Ring,
    /// A sender of `storm`.
    Storm,
}

impl NodeRole {
    /// The command-line name.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeRole::Ring => "ring",
            NodeRole::Storm => "storm",
        }
    }

    fn workload(self) -> &'static str {
        match self {
            NodeRole::Ring => crate::ring::NAME,
            NodeRole::Storm => crate::storm::NAME,
        }
    }
}

/// Parameters of a node process. The main node passes them; nobody else should.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct NodeParams {
    /// The workload the node serves.
    #[arg(long, value_enum)]
    pub role: NodeRole,
    /// The node's id: its place in the ring after the main node (0), or its storm id.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub node_id: u32,
    /// Ring: the socket from the previous member.
    #[arg(long, value_parser = clap::value_parser!(i32).range(3..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prev_fd: Option<i32>,
    /// Ring: the socket to the next member.
    #[arg(long, value_parser = clap::value_parser!(i32).range(3..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_fd: Option<i32>,
    /// Storm: the socket to the main node.
    #[arg(long, value_parser = clap::value_parser!(i32).range(3..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub main_fd: Option<i32>,
    /// Sleep, rather than exit, when the main node goes (the fault `--crash-after`
    /// injects: the node is left behind).
    #[arg(long)]
    pub linger: bool,
}

impl NodeParams {
    /// The command-line arguments that parse back into these parameters, derived from
    /// the clap definition and the serde form ([`crate::params::args_of`]).
    pub fn to_args(&self) -> Vec<String> {
        crate::params::args_of(self)
    }

    /// The parameters by their command-line names: the serde form.
    pub fn params_json(&self) -> BTreeMap<String, serde_json::Value> {
        crate::params::json_of(self)
    }
}

/// Runs a node process until the run is over.
pub(crate) fn run(params: &NodeParams) -> Result<(), WorkloadError> {
    let workload = params.role.workload();
    match params.role {
        NodeRole::Ring => {
            super::set_process_name("bt-ring-node");
            let (prev, next) = match (params.prev_fd, params.next_fd) {
                (Some(prev), Some(next)) if prev != next => (prev, next),
                _ => {
                    return Err(WorkloadError::BadParam {
                        name: "prev-fd",
                        value: format!("{:?} (--next-fd {:?})", params.prev_fd, params.next_fd),
                        reason: "a ring node needs two different sockets, --prev-fd and \
                                 --next-fd (nodes are started by `ring --transport ipc`)",
                    });
                }
            };
            let prev = take_socket(prev, "prev-fd", workload)?;
            let next = take_socket(next, "next-fd", workload)?;
            RingNode::new(params.node_id, prev, next).run(params.linger)
        }
        NodeRole::Storm => {
            super::set_process_name("bt-storm-node");
            let Some(main) = params.main_fd else {
                return Err(WorkloadError::BadParam {
                    name: "main-fd",
                    value: "none".to_owned(),
                    reason: "a storm node needs its socket to the main node (nodes are \
                             started by `storm`)",
                });
            };
            let main = take_socket(main, "main-fd", workload)?;
            storm_node(params.node_id, main, params.linger)
        }
    }
}

/// Takes ownership of an inherited socket descriptor, after checking it is one.
fn take_socket(
    fd: RawFd,
    name: &'static str,
    workload: &'static str,
) -> Result<UnixStream, WorkloadError> {
    // SAFETY: fstat writes one `stat`; an fd that is not open makes it fail with EBADF.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return Err(WorkloadError::Ipc {
            workload,
            context: format!("--{name} {fd}"),
            source: io::Error::last_os_error(),
        });
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(WorkloadError::BadParam {
            name,
            value: fd.to_string(),
            reason: "not a socket (nodes are started by the ring and storm workloads, which \
                     pass them their sockets)",
        });
    }
    // SAFETY: the descriptor is open, a socket, and named once on this process's command
    // line (the ring's two are checked to differ): nothing else in the process owns it.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    // Close-on-exec again, as every descriptor of ours is.
    // SAFETY: fcntl on a descriptor this process owns.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    Ok(stream)
}

/// The main node went (a socket closed under the node, or a write found no reader).
fn main_gone(linger: bool) -> Result<(), WorkloadError> {
    if linger {
        // Left behind on purpose: stay, holding the sockets, until killed.
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    Ok(())
}

/// What a read found.
enum Got {
    Frame(Frame),
    /// The peer is gone (end of stream or a reset).
    Gone,
}

fn read_frame(
    stream: &mut UnixStream,
    reader: &mut FrameReader,
    workload: &'static str,
    peer: &str,
) -> Result<Got, WorkloadError> {
    loop {
        match reader.next_frame() {
            Some(Ok(frame)) => return Ok(Got::Frame(frame)),
            Some(Err(reason)) => {
                return Err(WorkloadError::BadFrame {
                    workload,
                    context: format!("from {peer}"),
                    reason,
                });
            }
            None => {}
        }
        match reader.fill(stream) {
            Ok(Filled::Bytes) => {}
            Ok(Filled::End { .. }) => return Ok(Got::Gone),
            Err(_) => return Ok(Got::Gone),
        }
    }
}

fn unexpected(workload: &'static str, peer: &str, frame: &Frame, state: &str) -> WorkloadError {
    WorkloadError::BadFrame {
        workload,
        context: format!("from {peer}"),
        reason: format!("{frame:?} is not expected {state}"),
    }
}

/// A ring member other than the main node.
struct RingNode {
    id: u32,
    prev: UnixStream,
    next: UnixStream,
    from_prev: FrameReader,
    from_next: FrameReader,
    /// Pending asks received: the asker's ask id, answered last in, first out (one message
    /// goes round the ring, so the chain of asks unwinds in reverse).
    askers: Vec<u64>,
    /// Pending asks sent, by this node's ask id.
    mine: Vec<u64>,
    next_ask_id: u64,
}

/// Which socket a frame came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Prev,
    Next,
}

impl RingNode {
    fn new(id: u32, prev: UnixStream, next: UnixStream) -> RingNode {
        RingNode {
            id,
            prev,
            next,
            from_prev: FrameReader::new(4),
            from_next: FrameReader::new(4),
            askers: Vec::new(),
            mine: Vec::new(),
            next_ask_id: 0,
        }
    }

    fn run(mut self, linger: bool) -> Result<(), WorkloadError> {
        let workload = crate::ring::NAME;
        loop {
            let (side, frame) = match self.receive(workload)? {
                Some(got) => got,
                None => return main_gone(linger),
            };
            let id = self.id;
            let sent = match (side, frame.kind) {
                (Side::Prev, Kind::Ping) => send(
                    &mut self.next,
                    Frame::new(Kind::Ping, id, frame.value.wrapping_add(1), 0),
                ),
                (Side::Prev, Kind::Tell) => send(
                    &mut self.next,
                    Frame::new(Kind::Tell, id, frame.value.wrapping_add(1), 0),
                ),
                (Side::Prev, Kind::Ask) => {
                    self.askers.push(frame.aux);
                    let ask_id = self.next_ask_id;
                    self.next_ask_id += 1;
                    self.mine.push(ask_id);
                    send(
                        &mut self.next,
                        Frame::new(Kind::Ask, id, frame.value.wrapping_add(1), ask_id),
                    )
                }
                (Side::Next, Kind::Reply) => {
                    if self.mine.pop() != Some(frame.aux) {
                        return Err(unexpected(
                            workload,
                            "the next node",
                            &frame,
                            "(no pending ask of this node has that id, or not the latest)",
                        ));
                    }
                    let Some(asker) = self.askers.pop() else {
                        return Err(unexpected(
                            workload,
                            "the next node",
                            &frame,
                            "(no ask is pending)",
                        ));
                    };
                    send(
                        &mut self.prev,
                        Frame::new(Kind::Reply, id, frame.value, asker),
                    )
                }
                (Side::Prev, Kind::Bye) => {
                    // Pass it on; the next one may be gone already.
                    let _ = send(&mut self.next, Frame::new(Kind::Bye, id, 0, 0));
                    return Ok(());
                }
                (Side::Prev, _) => {
                    return Err(unexpected(
                        workload,
                        "the previous member",
                        &frame,
                        "in a ring",
                    ));
                }
                (Side::Next, _) => {
                    return Err(unexpected(workload, "the next member", &frame, "in a ring"));
                }
            };
            if sent.is_err() {
                return main_gone(linger);
            }
        }
    }

    /// The next frame: from the previous member, or — while an ask of this node is
    /// pending — from either side. `None` when a neighbour is gone.
    fn receive(&mut self, workload: &'static str) -> Result<Option<(Side, Frame)>, WorkloadError> {
        if self.mine.is_empty() {
            return Ok(
                match read_frame(
                    &mut self.prev,
                    &mut self.from_prev,
                    workload,
                    "the previous member",
                )? {
                    Got::Frame(frame) => Some((Side::Prev, frame)),
                    Got::Gone => None,
                },
            );
        }
        loop {
            for (side, reader) in [
                (Side::Next, &mut self.from_next),
                (Side::Prev, &mut self.from_prev),
            ] {
                match reader.next_frame() {
                    Some(Ok(frame)) => return Ok(Some((side, frame))),
                    Some(Err(reason)) => {
                        return Err(WorkloadError::BadFrame {
                            workload,
                            context: format!("from the {side:?} member"),
                            reason,
                        });
                    }
                    None => {}
                }
            }
            use std::os::fd::AsRawFd;
            let mut fds = [pollin(self.prev.as_raw_fd()), pollin(self.next.as_raw_fd())];
            // SAFETY: `fds` is a valid array of two pollfd.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if ready < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(WorkloadError::Ipc {
                    workload,
                    context: "waiting on the ring sockets".to_owned(),
                    source: err,
                });
            }
            for (fd, (stream, reader)) in fds.iter().zip([
                (&mut self.prev, &mut self.from_prev),
                (&mut self.next, &mut self.from_next),
            ]) {
                if fd.revents != 0 {
                    match reader.fill(stream) {
                        Ok(Filled::Bytes) => {}
                        Ok(Filled::End { .. }) | Err(_) => return Ok(None),
                    }
                }
            }
        }
    }
}

fn send(stream: &mut UnixStream, frame: Frame) -> io::Result<()> {
    stream.write_all(&frame.encode())
}

/// A storm sender: hello, then on `Go` its messages (each answered, when asked), then
/// `Done` with its sum and time, then wait for `Bye`.
fn storm_node(id: u32, mut main: UnixStream, linger: bool) -> Result<(), WorkloadError> {
    let workload = crate::storm::NAME;
    let peer = "the main node";
    let mut reader = FrameReader::new(4);
    if send(&mut main, Frame::new(Kind::Hello, id, 0, 0)).is_err() {
        return main_gone(linger);
    }
    let go = match read_frame(&mut main, &mut reader, workload, peer)? {
        Got::Frame(frame) if frame.kind == Kind::Go => frame,
        Got::Frame(frame) if frame.kind == Kind::Bye => return Ok(()),
        Got::Frame(frame) => return Err(unexpected(workload, peer, &frame, "before Go")),
        Got::Gone => return main_gone(linger),
    };
    let (count, ask) = (go.value, go.aux == 1);
    let started = Instant::now();
    let mut sum = 0u64;
    for _ in 0..count {
        if send(&mut main, Frame::new(Kind::Storm, id, sum, monotonic_ns())).is_err() {
            return main_gone(linger);
        }
        if ask {
            match read_frame(&mut main, &mut reader, workload, peer)? {
                Got::Frame(frame) if frame.kind == Kind::Reply && frame.value == sum + 1 => {
                    sum = frame.value;
                }
                Got::Frame(frame) if frame.kind == Kind::Bye => return Ok(()),
                Got::Frame(frame) => {
                    return Err(unexpected(
                        workload,
                        peer,
                        &frame,
                        &format!("as the reply to a message sent with sum {sum}"),
                    ));
                }
                Got::Gone => return main_gone(linger),
            }
        } else {
            sum += 1;
        }
    }
    let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    if send(&mut main, Frame::new(Kind::Done, id, sum, took)).is_err() {
        return main_gone(linger);
    }
    match read_frame(&mut main, &mut reader, workload, peer)? {
        Got::Frame(frame) if frame.kind == Kind::Bye => Ok(()),
        Got::Frame(frame) => Err(unexpected(workload, peer, &frame, "after Done")),
        Got::Gone => main_gone(linger),
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn parse(args: &[&str]) -> Result<NodeParams, String> {
        crate::test_support::parse_params("ipc-node", args)
    }

    #[test]
    fn node_params_round_trip_through_their_arguments() {
        for params in [
            NodeParams {
                role: NodeRole::Ring,
                node_id: 3,
                prev_fd: Some(5),
                next_fd: Some(6),
                main_fd: None,
                linger: false,
            },
            NodeParams {
                role: NodeRole::Storm,
                node_id: 1000,
                prev_fd: None,
                next_fd: None,
                main_fd: Some(9),
                linger: true,
            },
        ] {
            let args = params.to_args();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(parse(&args).unwrap(), params);
        }
    }

    #[test]
    fn the_hello_parameters_keep_their_recorded_shape() {
        let params = NodeParams {
            role: NodeRole::Storm,
            node_id: 7,
            prev_fd: None,
            next_fd: None,
            main_fd: Some(9),
            linger: false,
        };
        assert_eq!(
            serde_json::Value::from_iter(params.params_json()),
            serde_json::json!({"role": "storm", "node-id": 7, "main-fd": 9, "linger": false})
        );
    }

    #[test]
    fn standard_streams_and_node_zero_are_refused() {
        let err = parse(&["--role", "ring", "--node-id", "1", "--prev-fd", "0"]).unwrap_err();
        assert!(err.contains("--prev-fd") && err.contains("3.."), "{err}");
        let err = parse(&["--role", "storm", "--node-id", "0"]).unwrap_err();
        assert!(err.contains("--node-id"), "{err}");
    }

    #[test]
    fn a_node_without_its_sockets_says_who_starts_nodes() {
        let params = parse(&["--role", "ring", "--node-id", "1", "--prev-fd", "5"]).unwrap();
        let err = run(&params).unwrap_err().to_string();
        assert!(err.contains("ring --transport ipc"), "{err}");

        // A descriptor that is open but not a socket.
        let file = tempfile::tempfile().unwrap();
        use std::os::fd::AsRawFd;
        let err = take_socket(file.as_raw_fd(), "main-fd", "storm")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a socket"), "{err}");
    }

    #[test]
    fn a_ring_node_adds_one_and_unwinds_asks_in_reverse() {
        let (mut prev, prev_theirs) = UnixStream::pair().unwrap();
        let (next_theirs, mut next) = UnixStream::pair().unwrap();
        let node =
            std::thread::spawn(move || RingNode::new(4, prev_theirs, next_theirs).run(false));
        let mut from_next = FrameReader::new(4);
        let mut from_prev = FrameReader::new(4);
        let expect = |stream: &mut UnixStream, reader: &mut FrameReader| match read_frame(
            stream, reader, "ring", "test",
        )
        .unwrap()
        {
            Got::Frame(frame) => frame,
            Got::Gone => panic!("the node went"),
        };

        send(&mut prev, Frame::new(Kind::Ping, 0, 10, 0)).unwrap();
        assert_eq!(expect(&mut next, &mut from_next).value, 11);
        send(&mut prev, Frame::new(Kind::Tell, 0, 20, 0)).unwrap();
        assert_eq!(expect(&mut next, &mut from_next).value, 21);
        // Two asks pass; their replies come back in reverse and go to the right askers.
        send(&mut prev, Frame::new(Kind::Ask, 0, 1, 100)).unwrap();
        let first = expect(&mut next, &mut from_next);
        send(&mut prev, Frame::new(Kind::Ask, 0, 5, 101)).unwrap();
        let second = expect(&mut next, &mut from_next);
        assert_eq!((first.value, second.value), (2, 6));
        send(&mut next, Frame::new(Kind::Reply, 5, 9, second.aux)).unwrap();
        let reply = expect(&mut prev, &mut from_prev);
        assert_eq!((reply.kind, reply.value, reply.aux), (Kind::Reply, 9, 101));
        send(&mut next, Frame::new(Kind::Reply, 5, 9, first.aux)).unwrap();
        assert_eq!(expect(&mut prev, &mut from_prev).aux, 100);
        send(&mut prev, Frame::new(Kind::Bye, 0, 0, 0)).unwrap();
        assert_eq!(expect(&mut next, &mut from_next).kind, Kind::Bye);
        node.join().unwrap().unwrap();
    }

    #[test]
    fn a_ring_node_refuses_a_reply_it_did_not_ask_for() {
        let (mut prev, prev_theirs) = UnixStream::pair().unwrap();
        let (next_theirs, mut next) = UnixStream::pair().unwrap();
        let node =
            std::thread::spawn(move || RingNode::new(2, prev_theirs, next_theirs).run(false));
        send(&mut prev, Frame::new(Kind::Ask, 0, 1, 7)).unwrap();
        send(&mut next, Frame::new(Kind::Reply, 3, 2, 999)).unwrap();
        let err = node.join().unwrap().unwrap_err().to_string();
        assert!(err.contains("no pending ask"), "{err}");
    }

    #[test]
    fn a_storm_node_counts_on_the_replies_and_reports_its_sum() {
        let (mut main, theirs) = UnixStream::pair().unwrap();
        let node = std::thread::spawn(move || storm_node(7, theirs, false));
        let mut reader = FrameReader::new(4);
        let mut expect =
            |main: &mut UnixStream| match read_frame(main, &mut reader, "storm", "test").unwrap() {
                Got::Frame(frame) => frame,
                Got::Gone => panic!("the node went"),
            };
        assert_eq!(expect(&mut main).kind, Kind::Hello);
        send(&mut main, Frame::new(Kind::Go, 0, 3, 1)).unwrap();
        for k in 0..3 {
            let msg = expect(&mut main);
            assert_eq!((msg.kind, msg.node, msg.value), (Kind::Storm, 7, k));
            assert!(msg.aux > 0, "a send time");
            send(&mut main, Frame::new(Kind::Reply, 0, k + 1, 0)).unwrap();
        }
        let done = expect(&mut main);
        assert_eq!((done.kind, done.value), (Kind::Done, 3));
        send(&mut main, Frame::new(Kind::Bye, 0, 0, 0)).unwrap();
        node.join().unwrap().unwrap();
    }

    #[test]
    fn a_node_whose_main_node_goes_exits_quietly_unless_it_lingers() {
        let (main, theirs) = UnixStream::pair().unwrap();
        drop(main);
        storm_node(1, theirs, false).unwrap();
    }
}
