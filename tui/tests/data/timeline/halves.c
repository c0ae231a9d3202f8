/* Spends the first half of its run in first_half and the second half in second_half,
 * both burning CPU: the fixture of per-interval stacks (tui/tests/integration/timeline.rs).
 * Usage: halves MILLISECONDS */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) void first_half(double until) {
    while (now() < until)
        for (int i = 0; i < 200000; i++) sink += (unsigned long)i;
}

__attribute__((noinline)) void second_half(double until) {
    while (now() < until)
        for (int i = 0; i < 200000; i++) sink ^= (unsigned long)i;
}

int main(int argc, char **argv) {
    double ms = argc > 1 ? atof(argv[1]) : 3000.0;
    double t0 = now();
    first_half(t0 + ms / 2000.0);
    second_half(t0 + ms / 1000.0);
    return 0;
}
