#!/usr/bin/env python3
"""messenger: the crimson (shard per core) server against the async (shared pool) one at
4 KiB messages, depth 512, measured side by side in two settings:

- one core each: `--server-cpuset 0 --client-cpuset 1`, one client with two connections
  (the originals' default) — the cost per message of the two designs on one server core;
- both CPUs shared: `--server-cpuset 0-1 --client-cpuset 0-1`, two clients — two crimson
  shards against a two-worker pool, with the clients on the same cores (skipped with
  --one-core-only).

Each round runs every configuration back to back (interleaved, the order alternating from
round to round) on a release build, recorded without profiling. The tables give medians
over the rounds of IOPS, mean and p99 latency, the server's CPU% (its cores, anything that
ran there) and its threads' own CPU time per message, and the crimson/async
ratio of each (goal: crimson ahead, as in the published study), with the range of IOPS
over the rounds and the load average before and after: the two CPUs are the whole machine
here, so anything else running shows as spread.

Usage: benches/messenger.py [--rounds N] [--seconds S] [--one-core-only]
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
    ("server_cpu_us_per_message", "server µs/message", "{:.3f}"),
)


SETTINGS = (
    ("one core each: server on CPU 0, 1 client x 2 connections on CPU 1",
     ["--server-cpuset", "0", "--client-cpuset", "1", "--clients", "1"]),
    ("both CPUs shared: server on 0-1, 2 clients x 2 connections on 0-1",
     ["--server-cpuset", "0-1", "--client-cpuset", "0-1", "--clients", "2"]),
)


def once(mode, setting, args, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    cmd = [BENCHTOP, "run", "messenger", "--server", mode, "--msg-size", "4096",
           "--depth", "512", "--conns-per-client", "2", *setting,
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
    ap.add_argument("--one-core-only", action="store_true")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    settings = SETTINGS[:1] if args.one_core_only else SETTINGS
    runs = [(label, setting, mode) for label, setting in settings for mode in MODES]
    results = {(label, mode): {name: [] for name, _, _ in FIGURES} for label, _, mode in runs}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for label, setting, mode in (runs if r % 2 == 0 else list(reversed(runs))):
                figures = once(mode, setting, args, tmp)
                for name, _, _ in FIGURES:
                    results[(label, mode)][name].append(figures[name])
                print(f"round {r + 1}: {label.split(':')[0]}: {mode}: {figures['iops']:.0f} IOPS, "
                      f"{figures['latency_ms']:.2f} ms mean", file=sys.stderr)
    load_after = os.getloadavg()[0]
    print(f"\n4 KiB, depth 512; medians of {args.rounds} rounds of {args.seconds} s; "
          f"load average {load_before:.1f} before, {load_after:.1f} after")
    for label, _ in settings:
        crimson, asynch = results[(label, "crimson")], results[(label, "async")]
        print(f"\n{label}\n")
        print(f"{'figure':<20} {'crimson':>12} {'async':>12} {'crimson/async':>14}")
        for name, title, fmt in FIGURES:
            c = statistics.median(crimson[name])
            a = statistics.median(asynch[name])
            ratio = c / a if a else float("nan")
            print(f"{title:<20} {fmt.format(c):>12} {fmt.format(a):>12} {ratio:>13.2f}x")
        for mode, res in (("crimson", crimson), ("async", asynch)):
            print(f"IOPS range, {mode}: {min(res['iops']):.0f} .. {max(res['iops']):.0f}")
        wins = sum(c > a for c, a in zip(crimson["iops"], asynch["iops"]))
        print(f"rounds where crimson had more IOPS: {wins} of {args.rounds}")


if __name__ == "__main__":
    main()
