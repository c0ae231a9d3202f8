#!/usr/bin/env python3
"""Power of `benchtop ab --until-decided` against hyperfine, side by side in one run.

A C program whose work is a parameter (a loop of N multiply-adds over a small array) is
built once; B runs it with N scaled by each factor (+3 %, +10 %, +50 %, x2.6, and A/A),
quiet and with a CPU hog beside it (one busy process per core, `--hog`). For each case
the script runs, in turn:

- `benchtop ab --until-decided --max-runs M --figure cpu_time_s -- -- ./work N -- -- ./work N*f`
  and reads how many pairs it took and its decision (regressed, same, or undecided);
- `hyperfine -N --runs 10 --export-json ...` on the same two commands, and Welch's test
  on its exported times (hyperfine "separates" them when p < 0.01).

The goal: ab decides every change hyperfine separates, with no more runs than hyperfine
used, and never with the wrong sign. Figures must be taken on a quiet machine (the hog
is the only load); the script refuses to start when the 1-minute load average is above
the core count unless `--force`.

Usage: benches/ab_power.py [--benchtop target/release/benchtop] [--max-runs 20]
                           [--base 200000000] [--hog] [--force]
Needs: a C compiler (cc), hyperfine, a release build of benchtop.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

WORK_C = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 100000000UL;
    volatile double acc[8] = {0};
    for (unsigned long i = 0; i < n; i++) acc[i & 7] = acc[i & 7] * 0.999999 + 1.0;
    printf("%f\n", acc[0]);
    return 0;
}
"""

FACTORS = [("A/A", 1.0), ("+3 %", 1.03), ("+10 %", 1.10), ("+50 %", 1.5), ("x2.6", 2.6)]


def welch_p(a, b):
    """Two-sided p of Welch's t test (normal tail past 30 degrees of freedom)."""
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1)
    se2 = va / len(a) + vb / len(b)
    if se2 == 0:
        return 0.0 if ma != mb else 1.0
    t = abs(mb - ma) / math.sqrt(se2)
    df = se2**2 / ((va / len(a)) ** 2 / (len(a) - 1) + (vb / len(b)) ** 2 / (len(b) - 1))
    # Student's t tail by the regularized incomplete beta, via a continued fraction.
    x = df / (df + t * t)
    return incomplete_beta(df / 2, 0.5, x)


def incomplete_beta(a, b, x):
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - incomplete_beta(b, a, 1 - x)
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(math.log(x) * a + math.log(1 - x) * b + lbeta) / a
    f, c, d = 1.0, 1.0, 0.0
    for i in range(200):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = (m * (b - m) * x) / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -((a + m) * (a + b + m) * x) / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1 + num * d
        d = 1 / d if abs(d) > 1e-30 else 1e30
        c = 1 + num / c if abs(c) > 1e-30 else 1e30
        f *= c * d
        if abs(1 - c * d) < 1e-12:
            break
    return front * (f - 1)


def ab(benchtop, work, n_a, n_b, max_runs, record):
    out = subprocess.run(
        [benchtop, "ab", "--until-decided", "--max-runs", str(max_runs), "-q",
         "--figure", "cpu_time_s", "--record", record,
         "--", "--profile", "none", "--", work, str(n_a),
         "--", "--profile", "none", "--", work, str(n_b)],
        capture_output=True, text=True)
    decision = "?"
    for line in out.stdout.splitlines():
        if line.startswith("decided: cpu_time_s:"):
            decision = line.split(":", 2)[2].strip()
    pairs = sum(1 for name in os.listdir(os.path.join(record, "a")) if name.startswith("run-"))
    return decision, pairs, out.returncode


def hyperfine(work, n_a, n_b, export):
    subprocess.run(
        ["hyperfine", "-N", "--runs", "10", "--export-json", export,
         f"{work} {n_a}", f"{work} {n_b}"],
        check=True, capture_output=True)
    with open(export) as f:
        results = json.load(f)["results"]
    return results[0]["times"], results[1]["times"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--benchtop", default="target/release/benchtop")
    p.add_argument("--max-runs", type=int, default=20)
    p.add_argument("--base", type=int, default=200_000_000)
    p.add_argument("--hog", action="store_true", help="one busy process per core beside")
    p.add_argument("--force", action="store_true")
    args = p.parse_args()
    if os.getloadavg()[0] > os.cpu_count() and not args.force:
        sys.exit("the machine is busy (load average above the core count): --force to run anyway")
    tmp = tempfile.mkdtemp(prefix="ab-power-")
    src, work = os.path.join(tmp, "work.c"), os.path.join(tmp, "work")
    with open(src, "w") as f:
        f.write(WORK_C)
    subprocess.run(["cc", "-O2", "-o", work, src], check=True)
    hogs = []
    if args.hog:
        hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count())]
    try:
        print(f"{'case':8} {'ab pairs':>8} {'ab says':>12} {'hf mean A':>10} {'hf mean B':>10} "
              f"{'hf p':>8} {'hf separates':>12}")
        for i, (name, factor) in enumerate(FACTORS):
            n_b = int(args.base * factor)
            decision, pairs, _ = ab(args.benchtop, work, args.base, n_b, args.max_runs,
                                    os.path.join(tmp, f"ab-{i}"))
            ta, tb = hyperfine(work, args.base, n_b, os.path.join(tmp, f"hf-{i}.json"))
            pv = welch_p(ta, tb)
            ma, mb = sum(ta) / len(ta), sum(tb) / len(tb)
            print(f"{name:8} {pairs:>8} {decision:>12} {ma:>10.3f} {mb:>10.3f} {pv:>8.1e} "
                  f"{'yes' if pv < 0.01 else 'no':>12}")
    finally:
        for h in hogs:
            h.kill()


if __name__ == "__main__":
    main()
