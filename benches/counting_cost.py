#!/usr/bin/env python3
"""What counting the tree's figures at exit costs a workload, judged by `benchtop ab`.

benchtop counts a recorded tree's CPU time, context switches and page faults with perf
counting events inherited by every thread, and follows every thread's life by the
kernel's records (fork, exit, its CPU time at exit). `run --polled-figures` (hidden)
turns both off and leaves the polls alone, as sessions were before counting existed, so
one build gives both sides. For each case the script runs

    benchtop ab --until-decided --max-runs M --threshold T --figure F \\
        -- --polled-figures <side> -- <side>

(A polled, B counted) and prints the decision, the pairs it took and the interval of B
against A. The goal: *same* (the interval inside ±T) on the ring's messages/s and on a
fork-heavy command's wall time.

The cases:
- ring: `ring --num-nodes 1000 --num-rounds 100000000 --duration 3s --profile none`,
  its messages/s;
- forks: `sh -c 'find /usr/share -type f -print0 | head -z -n 4000 | xargs -0 -n 20
  md5sum'` (about 200 processes a run) with `--profile none`, its wall_time_s.

Figures must be taken on a quiet machine: the script refuses to start when the 1-minute
load average is above the core count unless `--force`.

Usage: benches/counting_cost.py [--benchtop target/release/benchtop] [--max-runs 20]
                                [--threshold 2%] [--case ring|forks] [--force]
"""

import argparse
import os
import subprocess
import sys
import tempfile

FORKS = ("find /usr/share -type f -print0 | head -z -n 4000 | "
         "xargs -0 -n 20 md5sum >/dev/null")

CASES = {
    "ring": ("messages/s",
             ["ring", "--num-nodes", "1000", "--num-rounds", "100000000",
              "--duration", "3s", "--profile", "none"]),
    "forks": ("wall_time_s",
              ["--profile", "none", "--", "sh", "-c", FORKS]),
}


def ab(benchtop, case, max_runs, threshold, record):
    figure, side = CASES[case]
    # A command side's recording options come before its `--`; a workload's after it.
    if side[0] == "--profile":
        polled = ["--polled-figures"] + side
    else:
        polled = side + ["--polled-figures"]
    out = subprocess.run(
        [benchtop, "ab", "--until-decided", "--max-runs", str(max_runs), "-q",
         "--threshold", threshold, "--figure", figure, "--record", record,
         "--separator", "::", "--"] + polled + ["::"] + side,
        capture_output=True, text=True)
    decision = "?"
    change = ""
    for line in out.stdout.splitlines():
        if line.startswith(f"decided: {figure}:"):
            decision = line.split(":", 2)[2].strip()
        elif line.strip().startswith(figure) and "[" in line:
            change = " ".join(line.split())
    if decision == "?":
        sys.stderr.write(out.stdout + out.stderr)
    pairs = sum(1 for name in os.listdir(os.path.join(record, "a"))
                if name.startswith("run-"))
    return decision, pairs, change, out.returncode


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--benchtop", default="target/release/benchtop")
    p.add_argument("--max-runs", type=int, default=20)
    p.add_argument("--threshold", default="2%")
    p.add_argument("--case", action="append", choices=sorted(CASES))
    p.add_argument("--force", action="store_true")
    args = p.parse_args()
    load = os.getloadavg()[0]
    if load > os.cpu_count() and not args.force:
        sys.exit(f"load average {load:.1f} is above {os.cpu_count()} cores: "
                 "measure on a quiet machine (or --force)")
    print(f"load {load:.2f}; threshold {args.threshold}; at most {args.max_runs} runs a side")
    print(f"{'case':6} {'figure':12} {'pairs':>5} {'decision':>10}  B (counted) against A (polled)")
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(args.case or list(CASES)):
            decision, pairs, change, rc = ab(args.benchtop, case, args.max_runs,
                                             args.threshold, os.path.join(tmp, f"ab-{i}"))
            print(f"{case:6} {CASES[case][0]:12} {pairs:>5} {decision:>10}  {change}"
                  + (f"  (exit {rc})" if rc > 1 else ""))


if __name__ == "__main__":
    main()
