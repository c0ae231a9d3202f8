#!/usr/bin/env python3
"""What `--unwind dwarf` costs against perf's DWARF call graphs, side by side in one run.

A CPU-bound C program built without frame pointers (`-O2 -fomit-frame-pointer`; the
call tree of the unwinding tests, main → mid_x → leaf_a/leaf_b → spin, main → mid_y →
leaf_c → spin) does a fixed amount of work and writes its own rounds per second and run
time to a file. Configurations are interleaved round by round:

1. no profiling;
2. `benchtop run --profile cpu --event cpu-clock --frequency 999 --unwind dwarf
   --stack-size 8192 -- prog`;
3. `perf record -e cpu-clock -F 999 --call-graph dwarf,8192 -- prog`, then
   `perf script | inferno-collapse-perf | inferno-flamegraph`.

Prints two tables:

1. Throughput cost: the program's rounds/s under each configuration against none
   (the issue's bar: benchtop's cost at most perf's).
2. Recording cost beyond the program's own run: benchtop's start-up plus everything until
   cpu.folded and cpu.svg are written; perf's record start/stop plus the script |
   collapse | flamegraph pipeline (the bar: benchtop at least 20x less).

Usage: benches/dwarf_overhead.py [--rounds N] [--seconds S]
Needs: cc, perf (linux-perf), inferno's binaries (installed into target/bench-tools on
first use with `cargo install inferno`), a release build (built on first use). Run it on
a quiet machine: it prints the load average before and after, and says when it was
above 1.5.
"""

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHTOP = os.path.join(ROOT, "target", "release", "benchtop")
TOOLS = os.path.join(ROOT, "target", "bench-tools")

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) void spin(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i ^ (sink >> 3);
}
#define UNIT 230000UL
__attribute__((noinline)) void leaf_a(void) { spin(5 * UNIT); }
__attribute__((noinline)) void leaf_b(void) { spin(3 * UNIT); }
__attribute__((noinline)) void leaf_c(void) { spin(2 * UNIT); }
__attribute__((noinline)) void mid_x(void) { leaf_a(); leaf_b(); }
__attribute__((noinline)) void mid_y(void) { leaf_c(); }
int main(int argc, char **argv) {
    long rounds = atol(argv[1]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < rounds; i++) { mid_x(); mid_y(); }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    FILE *f = fopen(argv[2], "w");
    if (!f) return 1;
    fprintf(f, "%f %f\n", rounds / s, s);
    return fclose(f) != 0;
}
"""


def need_tools():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    for tool, package in [("perf", "linux-perf"), ("cc", "gcc")]:
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing: apt-get install {package}")
    if not os.path.exists(os.path.join(TOOLS, "bin", "inferno-flamegraph")):
        print("installing inferno into target/bench-tools …", file=sys.stderr)
        subprocess.run(["cargo", "install", "-q", "--locked", "--root", TOOLS, "inferno"], check=True)


def timed(cmd, **kw):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - start


def result(path):
    with open(path) as f:
        rate, seconds = f.read().split()
    return float(rate), float(seconds)


def load():
    return os.getloadavg()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0, help="the program's run time without profiling")
    args = ap.parse_args()
    need_tools()
    tmp = tempfile.mkdtemp(prefix="benchtop-dwarf-")
    src = os.path.join(tmp, "split.c")
    prog = os.path.join(tmp, "split")
    with open(src, "w") as f:
        f.write(PROGRAM)
    subprocess.run(["cc", "-O2", "-g", "-fomit-frame-pointer", "-fno-optimize-sibling-calls", "-fno-inline",
                    "-o", prog, src], check=True)
    # Calibrate the work to --seconds.
    out = os.path.join(tmp, "calibrate")
    subprocess.run([prog, "20", out], check=True)
    rounds = str(max(20, int(args.seconds * result(out)[0])))
    load_before = load()

    rate = {"none": [], "benchtop": [], "perf": []}
    cost = {"benchtop": [], "perf record": [], "perf script+inferno": [], "perf total": []}
    samples = {"benchtop": [], "perf": []}
    for r in range(args.rounds):
        out = os.path.join(tmp, f"none-{r}")
        subprocess.run([prog, rounds, out], check=True)
        rate["none"].append(result(out)[0])

        out = os.path.join(tmp, f"bt-{r}")
        d = os.path.join(tmp, f"bt-{r}.session")
        wall = timed([BENCHTOP, "run", "--profile", "cpu", "--event", "cpu-clock", "--frequency", "999",
                      "--unwind", "dwarf", "--stack-size", "8192", "--quiet", "--record", d,
                      "--", prog, rounds, out])
        mps, run_s = result(out)
        rate["benchtop"].append(mps)
        cost["benchtop"].append(wall - run_s)
        with open(os.path.join(d, "cpu.folded")) as f:
            samples["benchtop"].append(sum(int(l.rsplit(" ", 1)[1]) for l in f if l.strip()))

        out = os.path.join(tmp, f"perf-{r}")
        data = os.path.join(tmp, f"perf-{r}.data")
        wall = timed(["perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "--call-graph", "dwarf,8192",
                      "-o", data, "--", prog, rounds, out])
        mps, run_s = result(out)
        rate["perf"].append(mps)
        cost["perf record"].append(wall - run_s)
        svg = os.path.join(tmp, f"perf-{r}.svg")
        bin_dir = os.path.join(TOOLS, "bin")
        pipeline = (f"perf script -i {shlex.quote(data)} 2>/dev/null | {bin_dir}/inferno-collapse-perf"
                    f" | {bin_dir}/inferno-flamegraph > {shlex.quote(svg)}")
        cost["perf script+inferno"].append(timed(["bash", "-o", "pipefail", "-c", pipeline]))
        cost["perf total"].append(cost["perf record"][-1] + cost["perf script+inferno"][-1])
        count = subprocess.run(["bash", "-c", f"perf script -i {shlex.quote(data)} -F tid 2>/dev/null | wc -l"],
                               capture_output=True, text=True).stdout.strip()
        samples["perf"].append(int(count or 0))
        os.remove(data)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    load_after = load()

    med = {k: statistics.median(v) for k, v in rate.items()}
    print(f"\nno-frame-pointer C program, {rounds} rounds (~{args.seconds:.0f} s), "
          f"{args.rounds} interleaved rounds, medians\n")
    print(f"{'configuration':<36}{'rounds/s':>12}{'vs none':>10}")
    for k, label in [("none", "no profiling"), ("benchtop", "benchtop --unwind dwarf 999 Hz"),
                     ("perf", "perf record --call-graph dwarf")]:
        print(f"{label:<36}{med[k]:>12,.1f}{(med[k] / med['none'] - 1) * 100:>+9.1f}%")
    for k in ("benchtop", "perf"):
        ratios = [b / n - 1 for b, n in zip(rate[k], rate["none"])]
        print(f"paired {k:<9} vs none, median of rounds: {statistics.median(ratios) * 100:+.1f}%")
    print(f"\nsamples (median): benchtop {statistics.median(samples['benchtop']):.0f}, "
          f"perf {statistics.median(samples['perf']):.0f}")
    cm = {k: statistics.median(v) for k, v in cost.items()}
    print(f"\n{'recording cost beyond the program':<40}{'seconds':>10}")
    print(f"{'benchtop (start-up + folded + svg)':<40}{cm['benchtop']:>10.3f}")
    print(f"{'perf record start/stop':<40}{cm['perf record']:>10.3f}")
    print(f"{'perf script | collapse | flamegraph':<40}{cm['perf script+inferno']:>10.3f}")
    print(f"{'perf total':<40}{cm['perf total']:>10.3f}")
    print(f"\nperf pipeline / benchtop: {cm['perf total'] / max(cm['benchtop'], 1e-9):.1f}x")
    print(f"\nload average (1 min): {load_before:.2f} before, {load_after:.2f} after")
    if max(load_before, load_after) > 1.5:
        print("the machine was busy (load above 1.5): these figures are not clean; run again when quiet")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
