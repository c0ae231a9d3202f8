/* A program with a known call tree, burning CPU until it is stopped (or for the seconds
 * given): main -> calltree_work -> { calltree_hot (about 3/4 of the time),
 * calltree_cold (about 1/4) }. The fixture of the live screen's terminal tests
 * (tui/tests/integration/live.rs) and of benches/tui_cpu.py.
 * Usage: calltree [SECONDS] */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) void calltree_hot(void) {
    for (int i = 0; i < 300000; i++) sink += (unsigned long)i;
}

__attribute__((noinline)) void calltree_cold(void) {
    for (int i = 0; i < 100000; i++) sink ^= (unsigned long)i;
}

__attribute__((noinline)) void calltree_work(void) {
    calltree_hot();
    calltree_cold();
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 3600.0;
    double until = now() + seconds;
    while (now() < until)
        calltree_work();
    return 0;
}
