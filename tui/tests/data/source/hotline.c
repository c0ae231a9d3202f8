/* A program whose time goes into one line: the loop of hot_loop, marked HOT (the
 * whole loop sits on that line, so every instruction of it maps there). The source
 * view test finds the line by its marker. Runs for argv[1] milliseconds. */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

__attribute__((noinline)) static unsigned long hot_loop(unsigned long n)
{
    unsigned long x = 1;
    for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + (x >> 7) + i; /* HOT */
    return x;
}

int main(int argc, char **argv)
{
    double ms = argc > 1 ? atof(argv[1]) : 2000;
    double start = now_ms();
    while (now_ms() - start < ms)
        sink += hot_loop(2000000);
    return 0;
}
