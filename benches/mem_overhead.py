#!/usr/bin/env python3
"""What page-fault sampling (`--profile mem`) costs a program against
`perf record -e page-faults -g` on the same program, side by side in one run.

A C program built with frame pointers touches 4 GiB in all: 256 MiB blocks, each
malloc'd, written with memset (every page faults once) and freed, 12 from `big_a` and 4
from `big_b`. It writes its own touch rate (GiB/s) and run time to a file.
Configurations are interleaved round by round:

1. no profiling;
2. `benchtop run --profile mem --unwind fp` (the kernel's frame-pointer callchains, as
   perf's `-g`);
3. `benchtop run --profile mem` (the default unwinding, `auto`: the C library's memset,
   which keeps no frame pointer, is unwound from stack copies with its CFI, so big_a and
   big_b keep their bytes);
4. `perf record -e page-faults -g` (perf's default: 4000 samples a second).

Prints each configuration's touch rate against none (the bar: benchtop's cost no more
than perf's), the samples each took, and the share of the bytes that benchtop's profile
gives big_a (should be 75 %).

Usage: benches/mem_overhead.py [--rounds N] [--no-build]
Needs: cc, perf (linux-perf), a release build (built on first use). It prints the load
average before and after, and says when it was above 1.5.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHTOP = os.path.join(ROOT, "target", "release", "benchtop")

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define BLOCK (256UL << 20)
static volatile char sink;
__attribute__((noinline)) void big_a(void) {
    char *p = malloc(BLOCK);
    memset(p, 1, BLOCK);
    __asm__ volatile("" : : "r"(p) : "memory"); /* keeps the block and its writes */
    sink = p[BLOCK / 2];
    free(p);
}
__attribute__((noinline)) void big_b(void) {
    char *p = malloc(BLOCK);
    memset(p, 2, BLOCK);
    __asm__ volatile("" : : "r"(p) : "memory");
    sink = p[BLOCK / 3];
    free(p);
}
int main(int argc, char **argv) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 4; i++) { big_a(); big_a(); big_a(); big_b(); }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    FILE *f = fopen(argv[1], "w");
    if (!f) return 1;
    fprintf(f, "%f %f\n", 4.0 / s, s);
    return fclose(f) != 0;
}
"""


def need_tools():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    for tool, package in [("perf", "linux-perf"), ("cc", "gcc")]:
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing: apt-get install {package}")


def result(path):
    with open(path) as f:
        rate, seconds = f.read().split()
    return float(rate), float(seconds)


def folded(path):
    stacks = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                stack, n = line.rsplit(" ", 1)
                stacks[stack] = stacks.get(stack, 0) + int(n)
    return stacks


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-build", action="store_true", help="use target/release/benchtop as it is")
    args = ap.parse_args()
    if args.no_build:
        for tool in ("perf", "cc", BENCHTOP):
            if shutil.which(tool) is None:
                sys.exit(f"{tool} is missing")
    else:
        need_tools()
    tmp = tempfile.mkdtemp(prefix="benchtop-mem-")
    src = os.path.join(tmp, "touch.c")
    prog = os.path.join(tmp, "touch")
    with open(src, "w") as f:
        f.write(PROGRAM)
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls",
                    "-fno-inline", "-o", prog, src], check=True)
    load_before = os.getloadavg()[0]
    configs = ["none", "benchtop fp", "benchtop auto", "perf"]
    rate = {k: [] for k in configs}
    samples = {k: [] for k in configs[1:]}
    big_a = {"benchtop fp": [], "benchtop auto": []}
    for r in range(args.rounds):
        for k in configs:
            out = os.path.join(tmp, f"{k.replace(' ', '-')}-{r}")
            if k == "none":
                run([prog, out])
            elif k.startswith("benchtop"):
                d = out + ".session"
                unwind = ["--unwind", "fp"] if k.endswith("fp") else []
                run([BENCHTOP, "run", "--profile", "mem", *unwind, "--quiet", "--record", d, "--", prog, out])
                stacks = folded(os.path.join(d, "mem.folded"))
                total = sum(stacks.values())
                a = sum(n for s, n in stacks.items() if ";big_a;" in s + ";")
                big_a[k].append(a / max(total, 1))
                with open(os.path.join(d, "session.json")) as f:
                    import json
                    samples[k].append(json.load(f)["sampling"]["mem"]["samples"])
                shutil.rmtree(d, ignore_errors=True)
            else:
                data = out + ".data"
                run(["perf", "record", "-q", "-e", "page-faults", "-g", "-o", data, "--", prog, out])
                count = subprocess.run(["bash", "-c", f"perf script -i {data} -F tid 2>/dev/null | wc -l"],
                                       capture_output=True, text=True).stdout.strip()
                samples[k].append(int(count or 0))
                os.remove(data)
            rate[k].append(result(out)[0])
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    load_after = os.getloadavg()[0]

    med = {k: statistics.median(v) for k, v in rate.items()}
    print(f"\nC program touching 4 GiB (16 blocks of 256 MiB), {args.rounds} interleaved rounds, medians\n")
    print(f"{'configuration':<40}{'GiB/s':>8}{'vs none':>10}{'samples':>10}")
    labels = {"none": "no profiling", "benchtop fp": "benchtop --profile mem --unwind fp",
              "benchtop auto": "benchtop --profile mem (auto)", "perf": "perf record -e page-faults -g"}
    for k in configs:
        s = f"{statistics.median(samples[k]):>10.0f}" if k in samples else ""
        print(f"{labels[k]:<40}{med[k]:>8.2f}{(med[k] / med['none'] - 1) * 100:>+9.1f}%{s}")
    for k in configs[1:]:
        ratios = [b / n - 1 for b, n in zip(rate[k], rate["none"])]
        print(f"paired {k:<14} vs none, median of rounds: {statistics.median(ratios) * 100:+.1f}%")
    for k, v in big_a.items():
        print(f"{k}: big_a holds {statistics.median(v) * 100:.1f} % of mem.folded's bytes (75 % touched)")
    print(f"\nload average (1 min): {load_before:.2f} before, {load_after:.2f} after")
    if max(load_before, load_after) > 1.5:
        print("the machine was busy (load above 1.5): these figures are not clean; run again when quiet")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
