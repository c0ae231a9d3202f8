#!/usr/bin/env python3
"""What `--profile waits` costs, measured side by side with perf taking the same events.

Two programs, each run in every configuration back to back (interleaved, the order
turning from round to round), on a release build:

- the messenger (crimson server, depth 512: the workload with the most wake-ups),
  recorded by benchtop; its IOPS;
- a C ping-pong at about 10,000 wake-ups a second (two threads hand a byte back and forth
  over pipes, five round trips each millisecond, then a 1 ms sleep), run as a command:
  its own CPU time (user + system, getrusage at its end), which is where the kernel
  charges the samples of its threads' events, and the time from its end to the session
  being written.

Configurations: benchtop `--profile none`, `offcpu` and `waits`; `perf record -e
sched:sched_switch -e sched:sched_waking --call-graph dwarf,8192` (the same stack size as
benchtop's default) around the program, and for the ping-pong also `perf script` after
it, which a user needs before joining by hand. The tables give medians and the range over
rounds, and the change against no profiling, paired round by round.

Usage: benches/waits_overhead.py [--rounds N] [--seconds S]
Needs: a release build (built on first use), perf (linux-perf), root (tracepoints).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHTOP = os.path.join(ROOT, "target", "release", "benchtop")
PERF = ["-e", "sched:sched_switch", "-e", "sched:sched_waking", "--call-graph", "dwarf,8192"]

PINGPONG_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
static int ab[2], ba[2];
__attribute__((noinline)) void pong(void) {
    char c;
    while (read(ab[0], &c, 1) == 1 && c) write(ba[1], &c, 1);
}
static void *run(void *x) { pong(); return 0; }
__attribute__((noinline)) void ping(int ms) {
    char c = 1;
    struct timespec t = {0, 1000000L};
    for (int m = 0; m < ms; m++) {
        for (int i = 0; i < 5; i++) { write(ab[1], &c, 1); read(ba[0], &c, 1); }
        nanosleep(&t, 0);
    }
    c = 0;
    write(ab[1], &c, 1);
}
int main(int argc, char **argv) {
    int ms = argc > 1 ? atoi(argv[1]) : 2000;
    if (pipe(ab) || pipe(ba)) return 2;
    pthread_t p;
    pthread_create(&p, 0, run, 0);
    ping(ms);
    pthread_join(p, 0);
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    FILE *f = fopen(argv[2], "w");
    if (!f) return 3;
    fprintf(f, "%f %f\n", u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec
            + u.ru_stime.tv_usec / 1e6, end.tv_sec + end.tv_nsec / 1e9);
    return fclose(f) != 0;
}
"""


def messenger(config, seconds, tmp, r):
    d = os.path.join(tmp, f"msg-{config}-{r}")
    profile = "none" if config.startswith("perf") else config
    cmd = [BENCHTOP, "run", "messenger", "--duration", f"{seconds}s", "--profile", profile,
           "--quiet", "--record", d]
    if config == "perf":
        cmd = ["perf", "record", "-q", "-o", os.path.join(tmp, "perf.data"), *PERF, "--", *cmd]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(d, "session.json")) as f:
        meta = json.load(f)
    shutil.rmtree(d, ignore_errors=True)
    return {fig["name"]: fig["value"] for fig in meta["summary"]}["iops"], meta["sampling"]


def pingpong(config, prog, seconds, tmp, r):
    out = os.path.join(tmp, "told")
    args = [prog, str(int(seconds * 1000)), out]
    d = os.path.join(tmp, f"pp-{config}-{r}")
    if config == "perf":
        data = os.path.join(tmp, "perf.data")
        subprocess.run(["perf", "record", "-q", "-o", data, *PERF, "--", *args], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["perf", "script", "-i", data], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    else:
        subprocess.run([BENCHTOP, "run", "--profile", config, "--quiet", "--record", d, "--",
                        *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ready = time.time()
    with open(out) as f:
        cpu, ended = map(float, f.read().split())
    lost = 0
    if config != "perf":
        with open(os.path.join(d, "session.json")) as f:
            lost = json.load(f)["sampling"].get("lost", 0)
        shutil.rmtree(d, ignore_errors=True)
    return cpu, ready - ended, lost


def table(title, unit, results, configs, higher_better):
    print(f"\n{title}")
    print(f"| configuration | {unit} (median) | range | vs none (paired median) |")
    print("|---|---|---|---|")
    base = results["none"]
    for c in configs:
        v = results[c]
        paired = statistics.median((a / b - 1) * 100 for a, b in zip(v, base))
        sign = "" if c == "none" else f"{paired:+.1f} %"
        print(f"| {c} | {statistics.median(v):.4g} | {min(v):.4g}–{max(v):.4g} | {sign} |")
    better = "higher" if higher_better else "lower"
    print(f"({better} is better)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("tracepoints need root: run as root")
    if shutil.which("perf") is None:
        sys.exit("perf is missing: apt-get install linux-perf")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    tmp = tempfile.mkdtemp(prefix="benchtop-waits-bench-")
    prog = os.path.join(tmp, "pingpong")
    with open(prog + ".c", "w") as f:
        f.write(PINGPONG_C)
    subprocess.run(["cc", "-O2", "-g", "-fomit-frame-pointer", "-o", prog, prog + ".c",
                    "-lpthread"], check=True)
    configs = ["none", "offcpu", "waits", "perf"]
    iops = {c: [] for c in configs}
    cpu = {c: [] for c in configs}
    ready = {c: [] for c in configs}
    lost = {c: [] for c in configs}
    with open("/proc/loadavg") as f:
        print("load before:", f.read().split()[:3])
    for r in range(args.rounds):
        order = configs if r % 2 == 0 else configs[::-1]
        for c in order:
            v, _ = messenger(c, args.seconds, tmp, r)
            iops[c].append(v)
            t, w, l = pingpong(c, prog, args.seconds, tmp, r)
            cpu[c].append(t)
            ready[c].append(w)
            lost[c].append(l)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    with open("/proc/loadavg") as f:
        print("load after:", f.read().split()[:3])
    table("messenger (crimson, depth 512): IOPS", "IOPS", iops, configs, True)
    table("ping-pong at ~10k wake-ups/s: the program's own CPU time", "s", cpu, configs, False)
    print("\nping-pong: from the program's end to the session (perf: to `perf script`'s end)")
    for c in configs:
        print(f"  {c:7} median {statistics.median(ready[c]):.3f} s, range "
              f"{min(ready[c]):.3f}–{max(ready[c]):.3f} s; records lost {max(lost[c])} at most")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
