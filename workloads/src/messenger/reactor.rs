//! Poll mode (`--poll-mode`), after seastar's reactor under its `--poll-mode`: a shard's
//! thread never sleeps waiting for its sockets; it turns round and round, checking them
//! without blocking, and counts how much of its time went to work and how much to polling
//! that found nothing.
//!
//! How it never blocks: each shard (a crimson server shard, or a client thread) runs a
//! tokio current-thread runtime, and [`polling`] is the future that runtime's `block_on`
//! drives. Every turn it polls the shard's own future once, then yields with
//! [`tokio::task::yield_now`], which defers its wake-up until the scheduler has looked at
//! its I/O driver. A current-thread scheduler that holds deferred work does not park:
//! instead of `epoll_wait` with the time to the next timer (sleeping), it calls it with a
//! zero timeout, takes whatever sockets are ready, runs their tasks, and wakes the poller
//! for the next turn. The shard's sockets are the runtime's, non-blocking as always; the
//! thread leaves the CPU only when the kernel preempts it or when the idle rule below
//! yields it, never to wait, so its voluntary context switches stay near zero (the test
//! holds them below 1 % of the async server's over the same run).
//!
//! The accounting: a turn's wall time counts as busy when the shard moved bytes (a read or
//! write of a socket, an accepted connection: [`note_work`]) since the turn before, and
//! as idle polling otherwise, as seastar's reactor splits its time into work and idle
//! (its `reactor_utilization`). Wall time, as seastar's: a turn preempted by another
//! thread on the CPU counts for the turn it interrupted. The time a yield (below) gives
//! to other threads is neither: it is counted apart, as yielded.
//!
//! The idle rule: seastar's reactor outside poll mode spins for `--idle-poll-time-us`
//! (200 µs) and then sleeps in the kernel until an event; under `--poll-mode` it spins
//! forever. Sleeping is what poll mode is not, so here an idle spell of [`YIELD_AFTER`]
//! makes each further idle turn call `sched_yield`: the thread stays runnable (the kernel
//! counts a yield as an involuntary switch, not a voluntary one) and comes straight back
//! when nothing else wants its CPU, but a client sharing the core runs at once instead of
//! at the end of the shard's time slice. Seastar's reactor does not yield; it assumes a
//! core of its own.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

/// How long a reactor polls without finding work before each idle turn yields its CPU.
/// Chosen with `benches/messenger.py` (poll mode against async, both CPUs shared by the
/// server shards and the clients).
pub const YIELD_AFTER: Duration = Duration::from_micros(50);

thread_local! {
    /// Work done on this thread so far, in units of [`note_work`] calls.
    static WORK: Cell<u64> = const { Cell::new(0) };
}

/// Notes that the calling thread's reactor did work (moved bytes on a socket, accepted a
/// connection): the turn it happens in counts as busy.
pub fn note_work() {
    WORK.with(|w| w.set(w.get().wrapping_add(1)));
}

fn work() -> u64 {
    WORK.with(Cell::get)
}

/// A reactor's time so far, written by its thread and read by whoever reports it; on a
/// cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ReactorClock {
    busy_ns: AtomicU64,
    idle_ns: AtomicU64,
    yielded_ns: AtomicU64,
    turns: AtomicU64,
    idle_turns: AtomicU64,
    yields: AtomicU64,
}

/// A reading of a [`ReactorClock`], or the difference of two.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReactorTimes {
    /// Wall time of turns that did work.
    pub busy: Duration,
    /// Wall time of turns that polled and found nothing.
    pub idle: Duration,
    /// Wall time given to other threads by the idle rule's yields.
    pub yielded: Duration,
    /// Turns: one poll of the sockets each.
    pub turns: u64,
    /// Turns that found nothing.
    pub idle_turns: u64,
    /// Idle turns that yielded the CPU (the idle rule).
    pub yields: u64,
}

impl ReactorClock {
    /// The times so far.
    pub fn read(&self) -> ReactorTimes {
        ReactorTimes {
            busy: Duration::from_nanos(self.busy_ns.load(Ordering::Relaxed)),
            idle: Duration::from_nanos(self.idle_ns.load(Ordering::Relaxed)),
            yielded: Duration::from_nanos(self.yielded_ns.load(Ordering::Relaxed)),
            turns: self.turns.load(Ordering::Relaxed),
            idle_turns: self.idle_turns.load(Ordering::Relaxed),
            yields: self.yields.load(Ordering::Relaxed),
        }
    }
}

impl ReactorTimes {
    /// What happened between `earlier` and this reading.
    pub fn since(&self, earlier: &ReactorTimes) -> ReactorTimes {
        ReactorTimes {
            busy: self.busy.saturating_sub(earlier.busy),
            idle: self.idle.saturating_sub(earlier.idle),
            yielded: self.yielded.saturating_sub(earlier.yielded),
            turns: self.turns.saturating_sub(earlier.turns),
            idle_turns: self.idle_turns.saturating_sub(earlier.idle_turns),
            yields: self.yields.saturating_sub(earlier.yields),
        }
    }

    /// The busy share of the reactor's own time (busy and idle polling, not what it
    /// yielded), in percent (0 with no time at all).
    pub fn busy_percent(&self) -> f64 {
        let total = (self.busy + self.idle).as_secs_f64();
        if total > 0.0 {
            100.0 * self.busy.as_secs_f64() / total
        } else {
            0.0
        }
    }
}

/// Where a turn's time goes: the pure step of the accounting and the idle rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Turns {
    busy_ns: u64,
    idle_ns: u64,
    yielded_ns: u64,
    turns: u64,
    idle_turns: u64,
    yields: u64,
    /// Nanoseconds of the idle spell so far (0 after a busy turn).
    idle_spell_ns: u64,
}

impl Turns {
    const fn new() -> Turns {
        Turns {
            busy_ns: 0,
            idle_ns: 0,
            yielded_ns: 0,
            turns: 0,
            idle_turns: 0,
            yields: 0,
            idle_spell_ns: 0,
        }
    }

    /// Counts a turn of `ns` nanoseconds that did work or not; returns whether the next
    /// idle turn yields the CPU.
    fn turn(&mut self, ns: u64, worked: bool, yield_after: Duration) -> bool {
        self.turns += 1;
        if worked {
            self.busy_ns += ns;
            self.idle_spell_ns = 0;
            false
        } else {
            self.idle_ns += ns;
            self.idle_turns += 1;
            self.idle_spell_ns = self.idle_spell_ns.saturating_add(ns);
            u128::from(self.idle_spell_ns) >= yield_after.as_nanos()
        }
    }

    fn publish(&self, clock: &ReactorClock) {
        clock.busy_ns.store(self.busy_ns, Ordering::Relaxed);
        clock.idle_ns.store(self.idle_ns, Ordering::Relaxed);
        clock.yielded_ns.store(self.yielded_ns, Ordering::Relaxed);
        clock.turns.store(self.turns, Ordering::Relaxed);
        clock.idle_turns.store(self.idle_turns, Ordering::Relaxed);
        clock.yields.store(self.yields, Ordering::Relaxed);
    }
}

/// Drives `fut` to its end in poll mode: polls it once a turn and keeps the current-thread
/// runtime this runs on from ever sleeping in `epoll_wait` (see the module's docs), with
/// the turns' time counted in `clock`. `fut` is polled every turn whether or not it was
/// woken, so a future that only checks a flag needs no waker.
pub async fn polling<F: Future>(fut: F, clock: &ReactorClock) -> F::Output {
    let mut fut = pin!(fut);
    let mut turns = Turns::new();
    let mut last = Instant::now();
    let mut last_work = work();
    loop {
        if let Poll::Ready(out) =
            std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
        {
            turns.publish(clock);
            return out;
        }
        let now = Instant::now();
        let done = work();
        let ns = u64::try_from((now - last).as_nanos()).unwrap_or(u64::MAX);
        let give_way = turns.turn(ns, done != last_work, YIELD_AFTER);
        (last, last_work) = (now, done);
        if give_way {
            turns.yields += 1;
            // sched_yield: runnable throughout, so never a sleep.
            std::thread::yield_now();
            last = Instant::now();
            turns.yielded_ns += u64::try_from((last - now).as_nanos()).unwrap_or(u64::MAX);
        } else {
            std::hint::spin_loop();
        }
        turns.publish(clock);
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_and_idle_turns_are_counted_apart_and_a_long_idle_spell_yields() {
        let mut t = Turns::new();
        let after = Duration::from_micros(50);
        assert!(!t.turn(10_000, true, after));
        assert!(!t.turn(20_000, false, after));
        assert!(!t.turn(20_000, false, after));
        // 50 µs idle in a row: from here each idle turn yields.
        assert!(t.turn(10_000, false, after));
        assert!(t.turn(1_000, false, after));
        // Work ends the spell.
        assert!(!t.turn(5_000, true, after));
        assert!(!t.turn(1_000, false, after));
        assert_eq!((t.busy_ns, t.idle_ns), (15_000, 52_000));
        assert_eq!((t.turns, t.idle_turns), (7, 5));
    }

    #[test]
    fn the_busy_share_is_of_the_reactor_s_own_time() {
        let a = ReactorTimes {
            busy: Duration::from_millis(100),
            idle: Duration::from_millis(300),
            yielded: Duration::from_millis(50),
            turns: 10,
            idle_turns: 5,
            yields: 1,
        };
        let b = ReactorTimes {
            busy: Duration::from_millis(400),
            idle: Duration::from_millis(400),
            yielded: Duration::from_millis(500),
            turns: 30,
            idle_turns: 6,
            yields: 1,
        };
        assert_eq!(a.busy_percent(), 25.0);
        let d = b.since(&a);
        assert_eq!(d.busy_percent(), 75.0);
        assert_eq!((d.turns, d.idle_turns, d.yields), (20, 1, 0));
        assert_eq!(d.yielded, Duration::from_millis(450));
        assert_eq!(ReactorTimes::default().busy_percent(), 0.0);
    }

    /// Ten 2 ms sleeps beside a task that works now and then, on a current-thread
    /// runtime, polled or not: its result and the thread's voluntary switches.
    fn sleepy(polled: Option<&ReactorClock>) -> (u32, u64) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .unwrap();
        let job = async {
            let task = tokio::spawn(async {
                let mut n = 0;
                for _ in 0..100 {
                    note_work();
                    n += 1;
                    tokio::task::yield_now().await;
                }
                n
            });
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            task.await.unwrap()
        };
        let tid = super::super::cpuset::current_tid();
        let (before, _) = super::super::cpuset::thread_switches(tid).unwrap();
        let out = match polled {
            Some(clock) => rt.block_on(polling(job, clock)),
            None => rt.block_on(job),
        };
        let (after, _) = super::super::cpuset::thread_switches(tid).unwrap();
        (out, after - before)
    }

    #[test]
    fn a_polling_runtime_runs_its_tasks_and_never_sleeps_to_wait() {
        let (out, sleeping) = sleepy(None);
        assert_eq!(out, 100);
        assert!(sleeping >= 10, "ten sleeps, {sleeping} voluntary switches");
        let clock = ReactorClock::default();
        let (out, polled) = sleepy(Some(&clock));
        assert_eq!(out, 100);
        // The sleeps were spent polling (and yielding, which is not a voluntary switch).
        assert!(polled < sleeping / 5, "{polled} against {sleeping}");
        let t = clock.read();
        assert!(t.turns > 100 && t.idle_turns > 0 && t.yields > 0, "{t:?}");
        assert!(t.busy > Duration::ZERO, "{t:?}");
        assert!(
            t.busy + t.idle + t.yielded >= Duration::from_millis(20),
            "{t:?}"
        );
    }
}
