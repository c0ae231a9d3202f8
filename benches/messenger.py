#!/usr/bin/env python3
"""messenger: the crimson (shard per core) server against the async (shared pool) one at
4 KiB messages, depth 512, one core for the server and one for the client, measured side
by side.

Each round runs both servers back to back (interleaved, the order alternating from round
to round) on a release build: `benchtop run messenger --server crimson|async
--server-cpuset 0 --client-cpuset 1 --msg-size 4096 --depth 512` (one client, two
connections, as the originals' default), recorded without profiling. The table gives
medians over the rounds of IOPS, mean and p99 latency, the server core's CPU%, and the
crimson/async ratio of each (goal: crimson ahead, as in the published study), with the
range of IOPS over the rounds and the load average before and after: the two CPUs are the
whole machine here, so anything else running shows as spread.

Usage: benches/messenger.py [--rounds N] [--seconds S] [--server-cpu C] [--client-cpu C]
Needs: cargo; a machine with at least two CPUs.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BENCHTOP = os.path.join(TARGET, "release", "benchtop")
MODES = ("crimson", "async")
FIGURES = (
    ("iops", "IOPS", "{:.0f}"),
    ("latency_ms", "mean latency (ms)", "{:.2f}"),
    ("latency_p99_ms", "p99 latency (ms)", "{:.2f}"),
    ("server_cpu_percent", "server CPU%", "{:.0f}"),
)


def once(mode, args, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    cmd = [BENCHTOP, "run", "messenger", "--server", mode, "--msg-size", "4096",
           "--depth", "512", "--clients", "1", "--conns-per-client", "2",
           "--server-cpuset", str(args.server_cpu), "--client-cpuset", str(args.client_cpu),
           "--msgtime", str(args.seconds), "--listen", "127.0.0.1:0",
           "--profile", "none", "--quiet", "--record", os.path.join(d, "s")]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(d, "s", "session.json")) as f:
        figures = {fig["name"]: fig["value"] for fig in json.load(f)["summary"]}
    shutil.rmtree(d, ignore_errors=True)
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    results = {mode: {name: [] for name, _, _ in FIGURES} for mode in MODES}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = MODES if r % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                figures = once(mode, args, tmp)
                for name, _, _ in FIGURES:
                    results[mode][name].append(figures[name])
                print(f"round {r + 1}: {mode}: {figures['iops']:.0f} IOPS, "
                      f"{figures['latency_ms']:.2f} ms mean", file=sys.stderr)
    load_after = os.getloadavg()[0]
    print(f"\n4 KiB, depth 512, 1 client x 2 connections, server on CPU {args.server_cpu}, "
          f"client on CPU {args.client_cpu}; medians of {args.rounds} rounds of "
          f"{args.seconds} s; load average {load_before:.1f} before, {load_after:.1f} after\n")
    print(f"{'figure':<20} {'crimson':>12} {'async':>12} {'crimson/async':>14}")
    for name, label, fmt in FIGURES:
        c = statistics.median(results["crimson"][name])
        a = statistics.median(results["async"][name])
        ratio = c / a if a else float("nan")
        print(f"{label:<20} {fmt.format(c):>12} {fmt.format(a):>12} {ratio:>13.2f}x")
    for mode in MODES:
        iops = results[mode]["iops"]
        print(f"IOPS range, {mode}: {min(iops):.0f} .. {max(iops):.0f}")
    wins = sum(c > a for c, a in zip(results["crimson"]["iops"], results["async"]["iops"]))
    print(f"rounds where crimson had more IOPS: {wins} of {args.rounds}")


if __name__ == "__main__":
    main()
