/* A program that speaks benchtop's report protocol (docs/protocol.md) and whose latency
 * spikes while slow_path runs: every operation does some bookkeeping and then fast_path,
 * except in every fourth report interval, where it runs slow_path (25 ms) instead.
 * It reports the latency of each operation (histogram `op`, ns) every interval.
 * Usage: spiky MILLISECONDS [INTERVAL_MS [SETUP_MS]] (BENCHTOP_REPORT_FD names the report
 * descriptor). SETUP_MS is a sleep after `hello` and before the program's clock starts:
 * a program whose `t_ns` begins well after its exec.
 * The fixture of `compare --slow` (tui/tests/integration/timeline.rs). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define COUNTS (1 << 16)
static uint64_t counts[COUNTS];
static volatile uint64_t sink;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline __attribute__((always_inline)) void spin(uint64_t ns) {
    uint64_t end = now_ns() + ns;
    while (now_ns() < end)
        for (int i = 0; i < 100; i++) sink += (uint64_t)i;
}

__attribute__((noinline)) void bookkeeping(void) { spin(20000); }
__attribute__((noinline)) void fast_path(void) { spin(20000); }
__attribute__((noinline)) void slow_path(void) { spin(25000000); }

/* HdrHistogram counts index, 3 significant digits, lowest discernible value 1. */
static int counts_index(uint64_t v) {
    int pow2ceiling = 64 - __builtin_clzll(v | 2047);
    int bucket = pow2ceiling - 11;
    int sub = (int)(v >> bucket);
    return ((bucket + 1) << 10) + (sub - 1024);
}

static size_t put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
    return 4;
}

static size_t put_be64(uint8_t *p, uint64_t v) {
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
    return 8;
}

static size_t put_zigzag(uint8_t *p, int64_t n) {
    uint64_t z = ((uint64_t)n << 1) ^ (uint64_t)(n >> 63);
    size_t len = 0;
    do {
        uint8_t b = z & 0x7f;
        z >>= 7;
        p[len++] = b | (z ? 0x80 : 0);
    } while (z);
    return len;
}

/* The interval's histogram, V2 compressed (zlib with stored blocks), base64. */
static void encode(char *out) {
    static uint8_t raw[COUNTS * 10 + 64], packed[COUNTS * 11 + 128];
    int max = -1;
    for (int i = 0; i < COUNTS; i++) if (counts[i]) max = i;
    size_t n = 40;
    for (int i = 0; i <= max;) {
        if (counts[i]) { n += put_zigzag(raw + n, (int64_t)counts[i]); i++; continue; }
        int z = 0;
        while (i <= max && !counts[i]) { z++; i++; }
        n += put_zigzag(raw + n, -(int64_t)z);
    }
    size_t h = 0;
    h += put_be32(raw + h, 0x1c849313u);
    h += put_be32(raw + h, (uint32_t)(n - 40));
    h += put_be32(raw + h, 0);
    h += put_be32(raw + h, 3);
    h += put_be64(raw + h, 1);
    h += put_be64(raw + h, 3600000000000ull);
    put_be64(raw + h, 0x3FF0000000000000ull); /* 1.0 */
    size_t z = 8;
    packed[z++] = 0x78; packed[z++] = 0x01;
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) { a = (a + raw[i]) % 65521; b = (b + a) % 65521; }
    for (size_t off = 0; off < n || off == 0;) {
        size_t len = n - off > 65535 ? 65535 : n - off;
        packed[z++] = (off + len >= n) ? 1 : 0;
        packed[z++] = (uint8_t)len; packed[z++] = (uint8_t)(len >> 8);
        packed[z++] = (uint8_t)~len; packed[z++] = (uint8_t)(~len >> 8);
        memcpy(packed + z, raw + off, len);
        z += len; off += len;
        if (n == 0) break;
    }
    z += put_be32(packed + z, (b << 16) | a);
    put_be32(packed, 0x1c849314u);
    put_be32(packed + 4, (uint32_t)(z - 8));
    static const char *b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < z; i += 3) {
        uint32_t v = (uint32_t)packed[i] << 16;
        if (i + 1 < z) v |= (uint32_t)packed[i + 1] << 8;
        if (i + 2 < z) v |= packed[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < z ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < z ? b64[v & 63] : '=';
    }
    out[o] = 0;
}

int main(int argc, char **argv) {
    const char *fd_text = getenv("BENCHTOP_REPORT_FD");
    if (!fd_text) { fprintf(stderr, "spiky: BENCHTOP_REPORT_FD is not set\n"); return 2; }
    FILE *report = fdopen(atoi(fd_text), "w");
    if (!report) { perror("spiky: fdopen"); return 2; }
    uint64_t total = (uint64_t)(argc > 1 ? atof(argv[1]) : 4000.0) * 1000000u;
    uint64_t interval = (uint64_t)(argc > 2 ? atof(argv[2]) : 200.0) * 1000000u;
    uint64_t setup = (uint64_t)(argc > 3 ? atof(argv[3]) : 0.0) * 1000000u;
    fprintf(report, "{\"type\":\"hello\",\"protocol\":1,\"workload\":\"spiky\",\"params\":{},"
            "\"metrics\":[{\"name\":\"ops\",\"kind\":\"counter\",\"unit\":\"ops\"},"
            "{\"name\":\"op\",\"kind\":\"histogram\",\"unit\":\"ns\"}]}\n");
    fflush(report);
    struct timespec nap = {(time_t)(setup / 1000000000u), (long)(setup % 1000000000u)};
    while (nanosleep(&nap, &nap) != 0) {}
    static char text[COUNTS * 16];
    uint64_t start = now_ns(), next = start + interval, ops = 0;
    int k = 0;
    while (now_ns() - start < total) {
        uint64_t t0 = now_ns();
        bookkeeping();
        if (k % 4 == 3) slow_path(); else fast_path();
        uint64_t t1 = now_ns();
        uint64_t v = t1 - t0;
        int i = counts_index(v ? v : 1);
        if (i < COUNTS) counts[i]++;
        ops++;
        if (t1 >= next) {
            encode(text);
            fprintf(report, "{\"type\":\"tick\",\"t_ns\":%llu,\"counters\":{\"ops\":%llu},"
                    "\"histograms\":{\"op\":\"%s\"}}\n",
                    (unsigned long long)(t1 - start), (unsigned long long)ops, text);
            fflush(report);
            memset(counts, 0, sizeof counts);
            next += interval;
            k++;
        }
    }
    return 0;
}
