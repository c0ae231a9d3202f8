//! The ring's actors, their continuation store and the driver.
//!
//! Tell-mode mailboxes carry a bare `u64` and ask-mode mailboxes a 24-byte [`AskMsg`]:
//! a tokio mpsc channel keeps about two blocks of 32 slots per mailbox, so the message
//! size is most of a mailbox's memory. The driver hears how the run ended on a channel
//! of its own ([`Event`]); in ask mode it is also the first asker, with a mailbox at the
//! end of the address table.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinSet;

use super::{NAME, Outcome, RingMetrics, RingMode, RingParams};
use crate::WorkloadError;
use crate::error::panic_message;
use crate::report::StopSignal;

/// An actor's address: its index in the ask-mode address table. The driver is the last.
type Address = u32;

/// What passes through an ask-mode mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AskMsg {
    /// The ring message, to be answered to `asker` quoting `ask_id`.
    Ask {
        value: u64,
        asker: Address,
        ask_id: u32,
    },
    /// The answer to the ask the recipient numbered `ask_id`.
    Reply { value: u64, ask_id: u32 },
}

const _: () = assert!(std::mem::size_of::<AskMsg>() == 24);

/// What the driver hears on its own channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// Tell mode: the message reached the total.
    Done { value: u64 },
    /// Node 0 saw the stop signal when the message had reached `value`.
    Stopped { value: u64 },
    /// An actor met a message it cannot handle.
    Failed { node: Address, reason: &'static str },
}

/// What every actor shares.
struct Shared {
    driver: UnboundedSender<Event>,
    /// The value that ends the run: `num_nodes × num_rounds`.
    total: u64,
    metrics: RingMetrics,
    stop: StopSignal,
}

impl Shared {
    fn tell_driver(&self, event: Event) {
        // A closed channel means the driver is done: nothing to tell.
        let _ = self.driver.send(event);
    }

    /// The message passes node 0: records the lap and says whether to stop (telling the
    /// driver so). Once per lap.
    #[cold]
    #[inline(never)]
    fn pass(&self, last_pass: &mut Option<Instant>, value: u64) -> bool {
        let now = Instant::now();
        if let Some(last) = last_pass.replace(now) {
            self.metrics.lap.record_duration(now - last);
        }
        if self.stop.is_set() {
            self.tell_driver(Event::Stopped { value });
            return true;
        }
        false
    }
}

struct TellActor {
    address: Address,
    next: UnboundedSender<u64>,
    shared: Arc<Shared>,
    /// Node 0 only: when the message last passed.
    last_pass: Option<Instant>,
}

impl TellActor {
    async fn run(mut self, mut inbox: UnboundedReceiver<u64>) {
        while let Some(value) = inbox.recv().await {
            self.handle(value);
        }
    }

    #[inline]
    fn handle(&mut self, value: u64) {
        let shared = &*self.shared;
        // The value is the number of hops so far, and the mailbox hands the one message
        // over from actor to actor, ordering the writes: one store keeps the count exact.
        shared.metrics.messages.set(value);
        if self.address == 0 && shared.pass(&mut self.last_pass, value) {
            return;
        }
        if value >= shared.total {
            shared.tell_driver(Event::Done { value });
        } else {
            // A closed mailbox means the run is being torn down (or an actor died, which
            // the driver learns from the join set).
            let _ = self.next.send(value + 1);
        }
    }
}

/// One pending ask, kept while the actor waits for the next actor's reply: whom to
/// answer, quoting which id. A free slot has `asker == FREE` and links the next free
/// slot through `ask_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Continuation {
    asker: Address,
    ask_id: u32,
}

const FREE: u32 = u32::MAX;

/// A slab of [`Continuation`]s keyed by the correlation id sent with each ask: 8 bytes
/// per pending ask, freed slots reused first, whatever order replies come back in.
#[derive(Debug)]
struct Continuations {
    slots: Vec<Continuation>,
    /// Head of the free list, or `FREE`.
    free: u32,
}

impl Continuations {
    fn new() -> Self {
        Continuations {
            slots: Vec::new(),
            free: FREE,
        }
    }

    /// Keeps a continuation; returns its correlation id, or `None` when 2³² − 1 are
    /// pending.
    fn insert(&mut self, continuation: Continuation) -> Option<u32> {
        if self.free != FREE {
            let id = self.free;
            let slot = self.slots.get_mut(id as usize)?;
            self.free = slot.ask_id;
            *slot = continuation;
            return Some(id);
        }
        let id = u32::try_from(self.slots.len())
            .ok()
            .filter(|&id| id != FREE)?;
        self.slots.push(continuation);
        Some(id)
    }

    /// Takes back the continuation of `id`, or `None` when none is pending under it.
    fn take(&mut self, id: u32) -> Option<Continuation> {
        let slot = self.slots.get_mut(id as usize)?;
        if slot.asker == FREE {
            return None;
        }
        let continuation = *slot;
        *slot = Continuation {
            asker: FREE,
            ask_id: self.free,
        };
        self.free = id;
        Some(continuation)
    }
}

struct AskActor {
    address: Address,
    next: UnboundedSender<AskMsg>,
    /// Every actor's mailbox, then the driver's: where replies go.
    addresses: Arc<[UnboundedSender<AskMsg>]>,
    shared: Arc<Shared>,
    pending: Continuations,
    /// Node 0 only: when the message last passed.
    last_pass: Option<Instant>,
}

impl AskActor {
    async fn run(mut self, mut inbox: UnboundedReceiver<AskMsg>) {
        while let Some(msg) = inbox.recv().await {
            self.handle(msg);
        }
    }

    #[inline]
    fn handle(&mut self, msg: AskMsg) {
        let shared = &*self.shared;
        match msg {
            AskMsg::Ask {
                value,
                asker,
                ask_id,
            } => {
                shared.metrics.messages.set(value);
                if self.address == 0 && shared.pass(&mut self.last_pass, value) {
                    return;
                }
                if value >= shared.total {
                    self.reply(asker, value, ask_id);
                    return;
                }
                match self.pending.insert(Continuation { asker, ask_id }) {
                    Some(id) => {
                        let _ = self.next.send(AskMsg::Ask {
                            value: value + 1,
                            asker: self.address,
                            ask_id: id,
                        });
                    }
                    None => self.fail("more than 2^32 - 1 asks pending at one actor"),
                }
            }
            AskMsg::Reply { value, ask_id } => {
                // Replies hop too; ordered by the mailboxes like the asks.
                let messages = &shared.metrics.messages;
                messages.set(messages.get() + 1);
                if self.address == 0 && shared.pass(&mut self.last_pass, value) {
                    return;
                }
                match self.pending.take(ask_id) {
                    Some(Continuation { asker, ask_id }) => self.reply(asker, value, ask_id),
                    None => self.fail("a reply to no pending ask"),
                }
            }
        }
    }

    #[inline]
    fn reply(&self, to: Address, value: u64, ask_id: u32) {
        match self.addresses.get(to as usize) {
            Some(mailbox) => {
                let _ = mailbox.send(AskMsg::Reply { value, ask_id });
            }
            None => self.fail("an ask from an address outside the ring"),
        }
    }

    #[cold]
    fn fail(&self, reason: &'static str) {
        self.shared.tell_driver(Event::Failed {
            node: self.address,
            reason,
        });
    }
}

pub(super) fn run(
    params: &RingParams,
    metrics: &RingMetrics,
    stop: &StopSignal,
) -> Result<Outcome, WorkloadError> {
    let threads = params.runtime_threads;
    let runtime = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread().build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(usize::from(threads))
            .thread_name("benchtop-ring")
            .build()
    }
    .map_err(|source| WorkloadError::Runtime { threads, source })?;
    let result = runtime.block_on(drive(params, metrics.clone(), stop.clone()));
    // Ends the actors and the runtime's threads, freeing what they held.
    drop(runtime);
    result
}

async fn drive(
    params: &RingParams,
    metrics: RingMetrics,
    stop: StopSignal,
) -> Result<Outcome, WorkloadError> {
    let nodes = params.num_nodes;
    let (driver, mut events) = unbounded_channel();
    let shared = Arc::new(Shared {
        driver,
        total: params.total_hops(),
        metrics: metrics.clone(),
        stop,
    });
    let mut actors = JoinSet::new();

    let created = Instant::now();
    let mut replies = None;
    let (node_creation, started) = match params.mode {
        RingMode::Tell => {
            let (mailboxes, inboxes) = mailboxes::<u64>(nodes as usize);
            for (address, inbox) in (0..nodes).zip(inboxes) {
                let actor = TellActor {
                    address,
                    next: mailboxes[((address + 1) % nodes) as usize].clone(),
                    shared: shared.clone(),
                    last_pass: None,
                };
                actors.spawn(actor.run(inbox));
            }
            let timing = (created.elapsed(), Instant::now());
            let _ = mailboxes[0].send(0);
            timing
        }
        RingMode::Ask => {
            let (mailboxes, mut inboxes) = mailboxes::<AskMsg>(nodes as usize + 1);
            replies = inboxes.pop();
            let addresses: Arc<[UnboundedSender<AskMsg>]> = mailboxes.into();
            for (address, inbox) in (0..nodes).zip(inboxes) {
                let actor = AskActor {
                    address,
                    next: addresses[((address + 1) % nodes) as usize].clone(),
                    addresses: addresses.clone(),
                    shared: shared.clone(),
                    pending: Continuations::new(),
                    last_pass: None,
                };
                actors.spawn(actor.run(inbox));
            }
            let timing = (created.elapsed(), Instant::now());
            let _ = addresses[0].send(AskMsg::Ask {
                value: 0,
                asker: nodes,
                ask_id: 0,
            });
            timing
        }
    };
    drop(shared);

    let end = poll_fn(|cx| {
        if let Some(replies) = &mut replies
            && let Poll::Ready(reply) = replies.poll_recv(cx)
        {
            return Poll::Ready(match reply {
                Some(AskMsg::Reply { value, .. }) => Ok(Event::Done { value }),
                Some(other) => Err(broken(&format!("the driver was sent {other:?}"))),
                None => Err(broken("every actor is gone")),
            });
        }
        if let Poll::Ready(event) = events.poll_recv(cx) {
            return Poll::Ready(event.ok_or_else(|| broken("every actor is gone")));
        }
        match actors.poll_join_next(cx) {
            Poll::Ready(Some(Err(e))) if e.is_panic() => {
                Poll::Ready(Err(WorkloadError::Panicked {
                    what: "a ring actor".to_owned(),
                    message: panic_message(&*e.into_panic()),
                }))
            }
            Poll::Ready(_) => Poll::Ready(Err(broken("an actor ended before the run did"))),
            Poll::Pending => Poll::Pending,
        }
    })
    .await?;
    let ring_messaging = started.elapsed();
    actors.abort_all();

    let (final_sum, stopped) = match end {
        Event::Done { value } => (value, false),
        Event::Stopped { value } => (value, true),
        Event::Failed { node, reason } => return Err(broken(&format!("node {node}: {reason}"))),
    };
    Ok(Outcome {
        params: params.clone(),
        node_creation,
        ring_messaging,
        final_sum,
        messages: metrics.messages.get(),
        stopped,
    })
}

/// `count` mailboxes and their inboxes.
fn mailboxes<M>(count: usize) -> (Vec<UnboundedSender<M>>, Vec<UnboundedReceiver<M>>) {
    (0..count).map(|_| unbounded_channel()).unzip()
}

fn broken(reason: &str) -> WorkloadError {
    WorkloadError::Broken {
        workload: NAME,
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Metrics;

    fn params(nodes: u32, rounds: u32, mode: RingMode, threads: u16) -> RingParams {
        RingParams {
            num_nodes: nodes,
            num_rounds: rounds,
            mode,
            runtime_threads: threads,
        }
    }

    #[test]
    fn continuations_reuse_freed_slots_in_any_order() {
        let mut store = Continuations::new();
        let c = |asker| Continuation { asker, ask_id: 9 };
        let a = store.insert(c(1)).unwrap();
        let b = store.insert(c(2)).unwrap();
        let d = store.insert(c(3)).unwrap();
        assert_eq!((a, b, d), (0, 1, 2));
        assert_eq!(store.take(b), Some(c(2)));
        assert_eq!(store.take(b), None);
        assert_eq!(store.take(a), Some(c(1)));
        assert_eq!(store.insert(c(4)), Some(a));
        assert_eq!(store.insert(c(5)), Some(b));
        assert_eq!(store.insert(c(6)), Some(3));
        assert_eq!(store.take(7), None);
        assert_eq!(store.slots.len(), 4);
        assert_eq!(std::mem::size_of::<Continuation>(), 8);
    }

    #[test]
    fn a_one_node_ring_passes_the_message_to_itself() {
        for mode in [RingMode::Tell, RingMode::Ask] {
            let metrics = RingMetrics::register(&mut Metrics::new()).unwrap();
            let outcome = run(&params(1, 10, mode, 1), &metrics, &StopSignal::new()).unwrap();
            assert_eq!(outcome.final_sum, 10, "{mode}");
        }
    }

    #[test]
    fn messages_count_hops_and_laps_are_recorded_at_node_0() {
        for (mode, hops, laps) in [(RingMode::Tell, 60, 3), (RingMode::Ask, 120, 6)] {
            let metrics = RingMetrics::register(&mut Metrics::new()).unwrap();
            let outcome = run(&params(20, 3, mode, 2), &metrics, &StopSignal::new()).unwrap();
            assert_eq!(outcome.final_sum, 60, "{mode}");
            assert_eq!(outcome.messages, hops, "{mode}");
            assert!(!outcome.stopped);
            let mut lap = crate::protocol::new_latency_histogram();
            metrics.lap.swap(&mut lap);
            assert_eq!(lap.len(), laps, "{mode}");
        }
    }

    #[test]
    fn a_stop_set_before_the_run_ends_it_at_the_first_pass() {
        for mode in [RingMode::Tell, RingMode::Ask] {
            let metrics = RingMetrics::register(&mut Metrics::new()).unwrap();
            let stop = StopSignal::new();
            stop.set();
            let outcome = run(&params(10, 1_000_000, mode, 1), &metrics, &stop).unwrap();
            assert!(outcome.stopped);
            assert_eq!(outcome.final_sum, 0);
        }
    }
}
