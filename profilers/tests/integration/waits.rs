//! Waits: blocked time joined to the wake-up that ended it, on C fixtures without frame
//! pointers whose waits have known wakers.

use std::collections::BTreeMap;

use benchtop_profile::kinds::{Kind, KindSet};
use benchtop_profilers::{Profile, Sampler, SamplerOptions};

use crate::fixture::expect_sampler;
use crate::unwind::{Held, NO_FP, build_c, one_at_a_time};

/// The frame between a blocked stack and its waker's.
const WOKEN_BY: &str = "— woken by —";

/// A consumer (the main thread, in `consume`) waits on a condition variable that
/// `producer_a` releases after 30 ms and `producer_b` after 10 ms, in turn, each on a
/// thread of its own. The consumer measures how long it waited for each and writes
/// `a=NS b=NS` to the file `argv[2]`: the split to expect, whatever the machine's load
/// adds to each wait.
const CONDVAR_C: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t turn_cv = PTHREAD_COND_INITIALIZER;
/* turn: 0 producer_a, 1 producer_b, -1 the consumer's. */
static int ready, turn, done;
static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}
static void sleep_ms(long ms) {
    struct timespec t = {0, ms * 1000000L};
    while (nanosleep(&t, &t) != 0) {}
}
__attribute__((noinline)) void release(void) {
    pthread_mutex_lock(&m);
    ready = 1;
    turn = -1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
}
__attribute__((noinline)) void producer_a(void) { sleep_ms(30); release(); }
__attribute__((noinline)) void producer_b(void) { sleep_ms(10); release(); }
static void *run(void *arg) {
    int me = (int)(long)arg;
    for (;;) {
        pthread_mutex_lock(&m);
        while (turn != me && !done) pthread_cond_wait(&turn_cv, &m);
        int stop = done;
        pthread_mutex_unlock(&m);
        if (stop) return 0;
        if (me == 0) producer_a(); else producer_b();
    }
}
/* Waits for the producer whose turn it is, then hands the turn to the other. */
__attribute__((noinline)) int consume(int next) {
    pthread_mutex_lock(&m);
    while (!ready) pthread_cond_wait(&cv, &m);
    ready = 0;
    turn = next;
    pthread_cond_broadcast(&turn_cv);
    pthread_mutex_unlock(&m);
    return next;
}
int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 40;
    long waited[2] = {0, 0};
    pthread_t a, b;
    pthread_create(&a, 0, run, (void *)0L);
    pthread_create(&b, 0, run, (void *)1L);
    int who = 0;
    for (int i = 0; i < rounds; i++) {
        long t0 = now_ns();
        who = 1 - consume(1 - who);
        waited[who] += now_ns() - t0;
        who = 1 - who;
    }
    pthread_mutex_lock(&m);
    done = 1;
    pthread_cond_broadcast(&turn_cv);
    pthread_mutex_unlock(&m);
    pthread_join(a, 0);
    pthread_join(b, 0);
    FILE *f = fopen(argv[2], "w");
    if (!f) return 2;
    fprintf(f, "a=%ld b=%ld\n", waited[0], waited[1]);
    return fclose(f) != 0;
}
"#;

/// Records `program args` with waits, from its exec to its end.
fn record_waits(program: &std::path::Path, args: &[&str]) -> Profile {
    let held = Held::spawn_unniced(program, args);
    let mut opts = SamplerOptions::default();
    opts.kind = KindSet::of(Kind::Waits);
    let sampler = expect_sampler(
        Sampler::start_on_exec(held.pid(), &opts),
        "Sampler::start_on_exec",
    );
    assert!(
        sampler.kind().contains(Kind::Waits),
        "this test records waits, which need the sched:sched_waking tracepoint (root or \
         CAP_PERFMON, and tracefs); the sampler says: {:?}",
        sampler.warnings()
    );
    held.run();
    sampler.finish().expect("finish")
}

/// The blocked time of the stacks with `blocked` before the waker separator, by the
/// function after it that each names first among `wakers`.
fn by_waker(folded: &str, blocked: &str, wakers: &[&str]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in folded.lines() {
        let Some((stack, weight)) = line.rsplit_once(' ') else {
            continue;
        };
        let weight: u64 = weight.parse().expect("a weight");
        let (before, after) = match stack.split_once(WOKEN_BY) {
            Some((b, a)) => (b, a),
            None => (stack, "[none]"),
        };
        if !before.contains(blocked) {
            continue;
        }
        let waker = wakers
            .iter()
            .find(|w| after.split(';').any(|f| f == **w))
            .map_or_else(|| after.to_owned(), |w| (*w).to_owned());
        *out.entry(waker).or_insert(0) += weight;
    }
    out
}

#[test]
fn a_condvar_consumers_wait_splits_between_its_producers_stacks_as_they_held_it() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = build_c(dir.path(), "condvar", CONDVAR_C, NO_FP);
    let out = dir.path().join("waited");
    let profile = record_waits(&prog, &["40", out.to_str().expect("a UTF-8 path")]);
    let told = std::fs::read_to_string(&out).expect("the fixture's own measure");
    let field = |k: &str| -> f64 {
        told.split_whitespace()
            .find_map(|f| f.strip_prefix(k)?.parse().ok())
            .unwrap_or_else(|| panic!("{k} in {told:?}"))
    };
    let (a_ns, b_ns) = (field("a="), field("b="));
    let expected_a = a_ns / (a_ns + b_ns);
    assert!(
        (0.6..0.9).contains(&expected_a),
        "the fixture waited {a_ns} ns for producer_a and {b_ns} ns for producer_b"
    );

    let folded = profile.profiles[Kind::Waits].to_folded();
    let split = by_waker(&folded, "consume", &["producer_a", "producer_b"]);
    let a = split.get("producer_a").copied().unwrap_or(0) as f64;
    let b = split.get("producer_b").copied().unwrap_or(0) as f64;
    let all: u64 = split.values().sum();
    // Most of the consumer's blocked time was ended by one of the two producers' stacks.
    assert!(
        a + b >= 0.9 * all as f64 && a + b >= 0.5 * (a_ns + b_ns) / 1000.0,
        "{a} + {b} µs of {all} µs woken by the producers (the fixture waited {a_ns} + {b_ns} \
         ns): {split:?}\n{folded}"
    );
    let share = a / (a + b);
    assert!(
        (share - expected_a).abs() <= 0.03,
        "producer_a woke {:.1} % of the consumer's wait; it held {:.1} %: {split:?}\n{folded}",
        100.0 * share,
        100.0 * expected_a
    );
    // The waker stacks are the producers' own: their thread, then `run`, the producer,
    // and the release that signalled.
    for line in folded.lines().filter(|l| l.contains("consume")) {
        if let Some((_, after)) = line.split_once(WOKEN_BY)
            && (after.contains("producer_a") || after.contains("producer_b"))
        {
            assert!(
                after.contains(";run;") && after.contains("release"),
                "a waker stack without its callers: {line}"
            );
        }
    }
    // Blocked time is the same with and without its wakers.
    let off = profile.profiles[Kind::OffCpu].total_weight();
    let waits = profile.profiles[Kind::Waits].total_weight();
    assert!(
        waits.abs_diff(off) <= 1 + off / 100,
        "waits {waits} µs against off-CPU {off} µs"
    );
}
