//! The ring's actors, their continuation store and the driver.
//!
//! Each actor is a tokio task of its own whose future is the actor itself: a
//! hand-written `Future` that takes the oldest message from its [`Mailbox`], handles it,
//! and so on until the mailbox is empty, where it leaves its waker and returns `Pending`.
//! Written out rather than as an `async fn` loop, the future is just the actor's fields
//! (an `async fn` keeps its arguments and each await's locals besides): a tell actor is
//! three pointers, 24 bytes, which keeps tokio's task cell to its 128-byte minimum (on
//! x86-64 a cell is a multiple of 128 bytes: header, trailer and 24 bytes of future or
//! output make 128). Node 0, the one that times laps and checks the stop signal, is a
//! type of its own, `TellActor<true>`, so the others carry no address.
//!
//! Ask-mode mailboxes carry a 24-byte [`AskMsg`], tell-mode ones a bare `u64`. The driver
//! hears how the run ended on a tokio channel of its own ([`Event`]), panics included: an
//! actor catches its own and reports them, as there is no join set to watch (it would cost
//! each actor another allocation). In ask mode the driver is also the first asker, with a
//! mailbox at the end of the address table.

use std::any::Any;
use std::future::{Future, poll_fn};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use super::mailbox::Mailbox;
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
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    /// Tell mode: the message reached the total.
    Done { value: u64 },
    /// Node 0 saw the stop signal when the message had reached `value`.
    Stopped { value: u64 },
    /// An actor met a message it cannot handle.
    Failed { node: Address, reason: &'static str },
    /// An actor panicked (and its task ended).
    Panicked { message: String },
}

/// What every actor shares.
#[derive(Debug)]
struct Shared {
    driver: UnboundedSender<Event>,
    /// The value that ends the run: `num_nodes × num_rounds`.
    total: u64,
    metrics: RingMetrics,
    stop: StopSignal,
    /// When the message last passed node 0 (only node 0 touches it, once a lap: kept
    /// here rather than in every actor).
    last_pass: Mutex<Option<Instant>>,
    /// Ask mode: the worker's live bytes when the last ask arrived, every other ask still
    /// pending (`u64::MAX` until then, or without the counting allocator).
    deepest_live: Arc<AtomicU64>,
}

impl Shared {
    fn tell_driver(&self, event: Event) {
        // A closed channel means the driver is done: nothing to tell.
        let _ = self.driver.send(event);
    }

    /// The message passes node 0: records the lap when `lap` (the forward pass: a tell,
    /// an ask) and says whether to stop (telling the driver so). Once per lap, and in ask
    /// mode once more per lap as the replies unwind, which is not timed: a lap is one
    /// full round of the message forward, in every mode.
    #[cold]
    #[inline(never)]
    fn pass(&self, value: u64, lap: bool) -> bool {
        if lap {
            let now = Instant::now();
            let last = self
                .last_pass
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .replace(now);
            if let Some(last) = last {
                self.metrics.lap.record_duration(now - last);
            }
        }
        if self.stop.is_set() {
            self.tell_driver(Event::Stopped { value });
            return true;
        }
        false
    }

    /// An actor's poll panicked: tells the driver, and ends the actor's task.
    #[cold]
    fn panicked(&self, payload: Box<dyn Any + Send>) -> Poll<()> {
        self.tell_driver(Event::Panicked {
            message: panic_message(&*payload),
        });
        Poll::Ready(())
    }
}

/// Runs one poll of an actor, catching a panic for [`Shared::panicked`]: the runtime
/// would catch it too, but only a join handle would hear of it.
#[inline]
fn supervised(poll: impl FnOnce() -> Poll<()>) -> Result<Poll<()>, Box<dyn Any + Send>> {
    std::panic::catch_unwind(AssertUnwindSafe(poll))
}

/// A tell-mode actor; `NODE_0` for the first, which times the laps and checks the stop
/// signal.
#[derive(Debug)]
struct TellActor<const NODE_0: bool> {
    inbox: Arc<Mailbox<u64>>,
    next: Arc<Mailbox<u64>>,
    shared: Arc<Shared>,
}

impl<const NODE_0: bool> TellActor<NODE_0> {
    fn new(inbox: Arc<Mailbox<u64>>, next: Arc<Mailbox<u64>>, shared: Arc<Shared>) -> Self {
        TellActor {
            inbox,
            next,
            shared,
        }
    }

    #[inline]
    fn handle(&self, value: u64) {
        let shared = &*self.shared;
        // The value is the number of hops so far, and the mailbox hands the one message
        // over from actor to actor, ordering the writes: one store keeps the count exact.
        shared.metrics.messages.set(value);
        if NODE_0 && shared.pass(value, true) {
            return;
        }
        if value >= shared.total {
            shared.tell_driver(Event::Done { value });
        } else {
            self.next.send(value + 1);
        }
    }
}

impl<const NODE_0: bool> Future for TellActor<NODE_0> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let actor = &*self;
        supervised(|| {
            while let Poll::Ready(value) = actor.inbox.poll_recv(cx) {
                actor.handle(value);
            }
            Poll::Pending
        })
        .unwrap_or_else(|payload| actor.shared.panicked(payload))
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

/// An ask-mode actor.
#[derive(Debug)]
struct AskActor {
    inbox: Arc<Mailbox<AskMsg>>,
    next: Arc<Mailbox<AskMsg>>,
    /// Every actor's mailbox, then the driver's: where replies go.
    addresses: Arc<[Arc<Mailbox<AskMsg>>]>,
    shared: Arc<Shared>,
    pending: Continuations,
    address: Address,
}

impl AskActor {
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
                if self.address == 0 && shared.pass(value, true) {
                    return;
                }
                if value >= shared.total {
                    // The deepest point: every ask of the run is pending.
                    if let Some(counts) = crate::alloc::snapshot() {
                        shared
                            .deepest_live
                            .store(counts.live_bytes(), Ordering::Relaxed);
                    }
                    self.reply(asker, value, ask_id);
                    return;
                }
                match self.pending.insert(Continuation { asker, ask_id }) {
                    Some(id) => self.next.send(AskMsg::Ask {
                        value: value + 1,
                        asker: self.address,
                        ask_id: id,
                    }),
                    None => self.fail("more than 2^32 - 1 asks pending at one actor"),
                }
            }
            AskMsg::Reply { value, ask_id } => {
                // Replies hop too; ordered by the mailboxes like the asks.
                let messages = &shared.metrics.messages;
                messages.set(messages.get() + 1);
                if self.address == 0 && shared.pass(value, false) {
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
            Some(mailbox) => mailbox.send(AskMsg::Reply { value, ask_id }),
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

impl Future for AskActor {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let actor = self.get_mut();
        supervised(|| {
            while let Poll::Ready(msg) = actor.inbox.poll_recv(cx) {
                actor.handle(msg);
            }
            Poll::Pending
        })
        .unwrap_or_else(|payload| actor.shared.panicked(payload))
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
    // Ends the actors (their tasks are the runtime's) and the runtime's threads, freeing
    // what they held.
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
    // Not in `shared`, which the driver drops so that its channel closes when every
    // actor is gone.
    let deepest_live = Arc::new(AtomicU64::new(u64::MAX));
    let shared = Arc::new(Shared {
        driver,
        total: params.total_hops(),
        metrics: metrics.clone(),
        stop,
        last_pass: Mutex::new(None),
        deepest_live: Arc::clone(&deepest_live),
    });

    // The actors run until the runtime is dropped (in `run`): the driver keeps no handles
    // to their tasks, and hears of their panics from `supervise`.
    let created = Instant::now();
    let mut replies = None;
    let mut baseline_live = None;
    let (node_creation, started) = match params.mode {
        RingMode::Tell => {
            // Each actor's mailbox is allocated next to its task: glibc's aligned
            // allocation of a task leaves gaps that the mailbox then fills (~330 bytes an
            // actor, against ~430 with all the mailboxes allocated first).
            let first: Arc<Mailbox<u64>> = Arc::new(Mailbox::new());
            let mut inbox = first.clone();
            for address in 0..nodes {
                let next = if address + 1 == nodes {
                    first.clone()
                } else {
                    Arc::new(Mailbox::new())
                };
                let (actor_next, shared) = (next.clone(), shared.clone());
                if address == 0 {
                    drop(tokio::spawn(TellActor::<true>::new(
                        inbox, actor_next, shared,
                    )));
                } else {
                    drop(tokio::spawn(TellActor::<false>::new(
                        inbox, actor_next, shared,
                    )));
                }
                inbox = next;
            }
            let timing = (created.elapsed(), Instant::now());
            first.send(0);
            timing
        }
        RingMode::Ask => {
            let addresses: Arc<[Arc<Mailbox<AskMsg>>]> =
                mailboxes::<AskMsg>(nodes as usize + 1).into();
            replies = addresses.last().cloned();
            for (address, inbox) in (0..nodes).zip(addresses.iter()) {
                drop(tokio::spawn(AskActor {
                    inbox: inbox.clone(),
                    next: addresses[((address + 1) % nodes) as usize].clone(),
                    addresses: addresses.clone(),
                    shared: shared.clone(),
                    pending: Continuations::new(),
                    address,
                }));
            }
            let timing = (created.elapsed(), Instant::now());
            baseline_live = crate::alloc::snapshot().map(|c| c.live_bytes());
            addresses[0].send(AskMsg::Ask {
                value: 0,
                asker: nodes,
                ask_id: 0,
            });
            timing
        }
    };
    drop(shared);

    let end = poll_fn(|cx| {
        if let Some(replies) = &replies
            && let Poll::Ready(reply) = replies.poll_recv(cx)
        {
            return Poll::Ready(match reply {
                AskMsg::Reply { value, .. } => Ok(Event::Done { value }),
                other => Err(broken(&format!("the driver was sent {other:?}"))),
            });
        }
        events
            .poll_recv(cx)
            .map(|event| event.ok_or_else(|| broken("every actor is gone")))
    })
    .await?;
    let ring_messaging = started.elapsed();

    let (final_sum, stopped) = match end {
        Event::Done { value } => (value, false),
        Event::Stopped { value } => (value, true),
        Event::Failed { node, reason } => return Err(broken(&format!("node {node}: {reason}"))),
        Event::Panicked { message } => {
            return Err(WorkloadError::Panicked {
                what: "a ring actor".to_owned(),
                message,
            });
        }
    };
    // Bytes the pending asks added over what the ring held once built, per ask.
    let deepest = deepest_live.load(Ordering::Relaxed);
    let bytes_per_pending_ask = match baseline_live {
        Some(baseline) if deepest != u64::MAX && !stopped => {
            Some(deepest.saturating_sub(baseline) as f64 / params.total_hops().max(1) as f64)
        }
        _ => None,
    };
    Ok(Outcome {
        params: params.clone(),
        node_creation,
        ring_messaging,
        final_sum,
        messages: metrics.messages.get(),
        stopped,
        bytes_per_pending_ask,
    })
}

/// `count` empty mailboxes.
fn mailboxes<M>(count: usize) -> Vec<Arc<Mailbox<M>>> {
    (0..count).map(|_| Arc::new(Mailbox::new())).collect()
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
            ..RingParams::default()
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
        // One lap a round in both modes: ask mode's replies pass node 0 untimed.
        for (mode, hops, laps) in [(RingMode::Tell, 60, 3), (RingMode::Ask, 120, 3)] {
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

    /// Per-actor memory, without timing: what each actor costs besides its messages and
    /// pending asks is its task (tokio's cell: header and trailer, then the future or its
    /// output, rounded up to a cache line, 128 bytes on x86-64), its mailbox and the
    /// allocator's rounding. ~330 bytes an actor in tell mode, measured with
    /// `--num-nodes 1000000 --num-rounds 1`; tokio channels took ~1,440.
    #[test]
    fn actors_and_mailboxes_stay_small() {
        use std::mem::size_of;
        // A cell is 104 bytes + max(future, 24-byte output): a tell actor of 24 bytes (three
        // pointers) keeps its cell to one 128-byte line, 8 more would make it two.
        assert_eq!(size_of::<TellActor<false>>(), 24);
        assert_eq!(size_of::<TellActor<true>>(), 24);
        // The slab's `Vec` and three more pointers: within a 256-byte cell (at most 152).
        assert!(size_of::<AskActor>() <= 88, "{}", size_of::<AskActor>());
        // The lock, the inline message, an empty `VecDeque` and the waker; 16 more for the
        // `Arc`'s counts.
        assert!(
            size_of::<Mailbox<u64>>() <= 72,
            "{}",
            size_of::<Mailbox<u64>>()
        );
        assert!(
            size_of::<Mailbox<AskMsg>>() <= 80,
            "{}",
            size_of::<Mailbox<AskMsg>>()
        );
    }

    #[test]
    fn a_panicking_actor_is_reported_to_the_driver() {
        let (driver, mut events) = unbounded_channel();
        let shared = Shared {
            driver,
            total: 1,
            metrics: RingMetrics::register(&mut Metrics::new()).unwrap(),
            stop: StopSignal::new(),
            last_pass: Mutex::new(None),
            deepest_live: Arc::new(AtomicU64::new(u64::MAX)),
        };
        assert_eq!(supervised(|| Poll::Pending).unwrap(), Poll::Pending);
        let payload = supervised(|| panic!("boom")).unwrap_err();
        assert_eq!(shared.panicked(payload), Poll::Ready(()));
        assert_eq!(
            events.try_recv().unwrap(),
            Event::Panicked {
                message: "boom".to_owned()
            }
        );
    }
}
