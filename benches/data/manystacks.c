/* A program whose profile has about as many distinct stacks as samples, shaped as real
 * ones are: two threads each run call paths of depth 10 to 60 through 64 functions
 * (step_0 to step_63), spinning for a few microseconds at the end of each. A path is one
 * of 16M: sixteen stems (their depth and frames shared by a sixteenth of the paths),
 * then twelve frames that branch four ways each, so paths share all but their last few
 * frames. Sampled at 4,999 Hz it passes 100,000 distinct stacks in about half a minute:
 * the live screen's load with a large profile of real code, for benches/tui_cpu.py.
 * Build with frame pointers:
 *   cc -O1 -g -fno-omit-frame-pointer -pthread -o manystacks manystacks.c
 * Usage: manystacks [SECONDS] */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define MAX_DEPTH 60
#define BRANCHING 12

typedef void (*step_fn)(const uint8_t *path, int level, int depth);

static const step_fn steps[64];
static volatile uint64_t sink;

static uint64_t next(uint64_t *rng) {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    return *rng;
}

/* splitmix64's finalizer: a well-mixed function of its argument. */
static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__attribute__((noinline)) static void spin(const uint8_t *path) {
    for (int i = 0; i < 4000; i++)
        sink += (uint64_t)i ^ path[0];
}

/* Each step calls the path's next step until its end; the addition after the call keeps
 * it from being a tail call, so every step keeps its frame. */
#define STEP(n)                                                                        \
    __attribute__((noinline)) static void step_##n(const uint8_t *path, int level,      \
                                                   int depth) {                         \
        if (level + 1 >= depth)                                                        \
            spin(path);                                                                \
        else                                                                           \
            steps[path[level + 1]](path, level + 1, depth);                            \
        sink += n;                                                                     \
    }
STEP(0)
STEP(1)
STEP(2)
STEP(3)
STEP(4)
STEP(5)
STEP(6)
STEP(7)
STEP(8)
STEP(9)
STEP(10)
STEP(11)
STEP(12)
STEP(13)
STEP(14)
STEP(15)
STEP(16)
STEP(17)
STEP(18)
STEP(19)
STEP(20)
STEP(21)
STEP(22)
STEP(23)
STEP(24)
STEP(25)
STEP(26)
STEP(27)
STEP(28)
STEP(29)
STEP(30)
STEP(31)
STEP(32)
STEP(33)
STEP(34)
STEP(35)
STEP(36)
STEP(37)
STEP(38)
STEP(39)
STEP(40)
STEP(41)
STEP(42)
STEP(43)
STEP(44)
STEP(45)
STEP(46)
STEP(47)
STEP(48)
STEP(49)
STEP(50)
STEP(51)
STEP(52)
STEP(53)
STEP(54)
STEP(55)
STEP(56)
STEP(57)
STEP(58)
STEP(59)
STEP(60)
STEP(61)
STEP(62)
STEP(63)

static const step_fn steps[64] = {
    step_0,
    step_1,
    step_2,
    step_3,
    step_4,
    step_5,
    step_6,
    step_7,
    step_8,
    step_9,
    step_10,
    step_11,
    step_12,
    step_13,
    step_14,
    step_15,
    step_16,
    step_17,
    step_18,
    step_19,
    step_20,
    step_21,
    step_22,
    step_23,
    step_24,
    step_25,
    step_26,
    step_27,
    step_28,
    step_29,
    step_30,
    step_31,
    step_32,
    step_33,
    step_34,
    step_35,
    step_36,
    step_37,
    step_38,
    step_39,
    step_40,
    step_41,
    step_42,
    step_43,
    step_44,
    step_45,
    step_46,
    step_47,
    step_48,
    step_49,
    step_50,
    step_51,
    step_52,
    step_53,
    step_54,
    step_55,
    step_56,
    step_57,
    step_58,
    step_59,
    step_60,
    step_61,
    step_62,
    step_63,
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double until;

/* The path numbered `id` (24 bits): its depth, and its frames into `path`. */
static int path_of(uint64_t id, uint8_t *path) {
    uint64_t stem = id >> 20;
    int depth = 10 + (int)(mix(stem) % (MAX_DEPTH - 10 + 1));
    for (int level = 0; level < depth; level++) {
        int from_end = depth - 1 - level;
        uint64_t key = from_end < BRANCHING ? (id >> (2 * from_end)) : stem;
        path[level] = (uint8_t)(mix(key * 64 + (uint64_t)level) & 63);
    }
    return depth;
}

static void *run(void *seed) {
    uint64_t rng = (uint64_t)(uintptr_t)seed * 0x9e3779b97f4a7c15ull + 1;
    uint8_t path[MAX_DEPTH];
    while (now() < until) {
        for (int i = 0; i < 64; i++) {
            int depth = path_of(next(&rng) & 0xffffff, path);
            steps[path[0]](path, 0, depth);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    until = now() + (argc > 1 ? atof(argv[1]) : 3600.0);
    pthread_t other;
    pthread_create(&other, NULL, run, (void *)2);
    run((void *)1);
    pthread_join(other, NULL);
    return 0;
}
