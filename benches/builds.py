#!/usr/bin/env python3
"""Two builds of benchtop side by side: did a change cost throughput or start-up?

Runs the ring under each build's recorder (on-CPU sampling at 999 Hz), the builds
alternating round by round so that drift on a shared machine hits both, and prints per
build the medians of the ring's messages/s and of what the recording cost beyond the
workload's own run (start-up, then cpu.folded and cpu.svg written), with the change of
the second build against the first, and the median of the per-round paired changes.

Usage: benches/builds.py BEFORE AFTER [--rounds N] [--ring "--num-nodes 5000 --num-rounds 2000"]
BEFORE and AFTER are benchtop binaries (build each with `cargo build --release`, e.g. the
earlier one in a `git worktree` of the commit before the change).
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def ring_figures(session_dir):
    with open(os.path.join(session_dir, "session.json")) as f:
        meta = json.load(f)
    figures = {fig["name"]: fig["value"] for fig in meta["summary"]}
    run_s = figures["time_taken_for_node_creation"] + figures["time_taken_for_ring_messaging"]
    return figures["messages_per_second"], run_s


def one_run(binary, ring, session_dir):
    start = time.perf_counter()
    subprocess.run([binary, "run", "ring", *ring, "--profile", "cpu", "--event", "cpu-clock",
                    "--frequency", "999", "--quiet", "--record", session_dir],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    rate, run_s = ring_figures(session_dir)
    return rate, wall - run_s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--ring", default="--num-nodes 5000 --num-rounds 2000")
    args = ap.parse_args()
    for b in (args.before, args.after):
        if not os.access(b, os.X_OK):
            sys.exit(f"{b}: not an executable benchtop binary")
    ring = shlex.split(args.ring)
    tmp = tempfile.mkdtemp(prefix="benchtop-builds-")
    builds = {"before": args.before, "after": args.after}
    rate = {k: [] for k in builds}
    cost = {k: [] for k in builds}
    for r in range(args.rounds):
        # Alternate which build goes first, so neither always runs on a warmer machine.
        order = list(builds) if r % 2 == 0 else list(reversed(builds))
        for k in order:
            m, c = one_run(builds[k], ring, os.path.join(tmp, f"{k}-{r}"))
            rate[k].append(m)
            cost[k].append(c)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    print(f"\nring {' '.join(ring)} (tell), cpu-clock 999 Hz, {args.rounds} interleaved rounds, medians\n")
    print(f"{'build':<10}{'messages/s':>14}{'min':>14}{'max':>14}{'cost beyond run (s)':>22}")
    for k in builds:
        print(f"{k:<10}{statistics.median(rate[k]):>14,.0f}{min(rate[k]):>14,.0f}{max(rate[k]):>14,.0f}"
              f"{statistics.median(cost[k]):>22.3f}")
    m_before, m_after = statistics.median(rate["before"]), statistics.median(rate["after"])
    c_before, c_after = statistics.median(cost["before"]), statistics.median(cost["after"])
    paired = [a / b - 1 for a, b in zip(rate["after"], rate["before"])]
    paired_cost = [a - b for a, b in zip(cost["after"], cost["before"])]
    print(f"\nafter vs before: messages/s {(m_after / m_before - 1) * 100:+.1f}% "
          f"(paired median {statistics.median(paired) * 100:+.1f}%), "
          f"cost beyond the run {(c_after / c_before - 1) * 100:+.1f}% "
          f"(paired median {statistics.median(paired_cost) * 1000:+.1f} ms)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
