#!/usr/bin/env python3
"""messenger: the crimson (shard per core) server, sleeping in epoll and in poll mode
(`--poll-mode server`: the shards busy-poll, as seastar's reactor under its --poll-mode;
`--poll-mode all`: the clients too, as perf-crimson-msgr under it),
against the async (shared pool) one at 4 KiB messages, depth 512, measured side by side in
two settings:

- one core each: `--server-cpuset 0 --client-cpuset 1`, one client with two connections
  (the originals' default) — the cost per message of the two designs on one server core;
- both CPUs shared: `--server-cpuset 0-1 --client-cpuset 0-1`, two clients — two crimson
  shards against a two-worker pool, with the clients on the same cores (skipped with
  --one-core-only).

Each round runs every configuration back to back (interleaved, the order alternating from
round to round) on a release build, recorded without profiling (`--profiled`: with the
default profiling on, as `benchtop run messenger` records it, so the recorder's threads
share the two CPUs with the server and the clients). The tables give medians
over the rounds of IOPS, mean and p99 latency, the server's CPU% (its cores, anything that
ran there) and its threads' own CPU time per message, and the crimson/async
ratio of each to async (goal: crimson ahead, as in the published study), with the range
of IOPS over the rounds and the load average before and after: the two CPUs are the whole
machine here, so anything else running shows as spread. In poll mode the server's CPU% is
100 by design; its busy share (the rest is polling idle), busy µs per message and its
threads' voluntary context switches (waits; near zero when it polls) say what it did.

Usage: benches/messenger.py [--rounds N] [--seconds S] [--one-core-only] [--profiled]
                            [--designs crimson,crimson-poll,crimson-poll-all,async]
                            [--settle SECONDS]

The last lines give each design's IOPS against async's with its margin over the bar
(crimson ahead by at least 5 %).
Needs: cargo; a machine with at least two CPUs.
"""

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BENCHTOP = os.path.join(TARGET, "release", "benchtop")
# Each design: its name in the tables and its arguments.
DESIGNS = {
    "crimson": ["--server", "crimson"],
    # The server's shards poll; the clients sleep in epoll as async's do.
    "crimson-poll": ["--server", "crimson", "--poll-mode", "server"],
    # Shards and clients poll, as seastar's --poll-mode in perf-crimson-msgr.
    "crimson-poll-all": ["--server", "crimson", "--poll-mode", "all"],
    "async": ["--server", "async"],
}
BASELINE = "async"
# The bar: a crimson design's median IOPS over async's.
BAR = 1.05
FIGURES = (
    ("iops", "IOPS", "{:.0f}"),
    ("latency_ms", "mean latency (ms)", "{:.2f}"),
    ("latency_p99_ms", "p99 latency (ms)", "{:.2f}"),
    ("server_cpu_percent", "server CPU%", "{:.0f}"),
    ("server_busy_percent", "server busy%", "{:.0f}"),
    ("server_cpu_us_per_message", "server µs/message", "{:.3f}"),
    ("server_busy_us_per_message", "busy µs/message", "{:.3f}"),
    ("server_voluntary_switches", "voluntary switches", "{:.0f}"),
)


SETTINGS = (
    ("one core each: server on CPU 0, 1 client x 2 connections on CPU 1",
     ["--server-cpuset", "0", "--client-cpuset", "1", "--clients", "1"]),
    ("both CPUs shared: server on 0-1, 2 clients x 2 connections on 0-1",
     ["--server-cpuset", "0-1", "--client-cpuset", "0-1", "--clients", "2"]),
)


def once(design, setting, args, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    cmd = [BENCHTOP, "run", "messenger", *DESIGNS[design], "--msg-size", "4096",
           "--depth", "512", "--conns-per-client", "2", *setting,
           "--msgtime", str(args.seconds), "--listen", "127.0.0.1:0",
           "--quiet", "--record", os.path.join(d, "s")]
    if not args.profiled:
        cmd[-3:-3] = ["--profile", "none"]
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
    ap.add_argument("--profiled", action="store_true",
                    help="record with benchtop's default profiling on (as users run it)")
    ap.add_argument("--settle", type=int, default=180,
                    help="seconds to wait at most for the load average to fall below 0.5 "
                         "before the rounds (0: start at once)")
    ap.add_argument("--designs", default="crimson,crimson-poll,crimson-poll-all,async",
                    help="comma-separated, from " + ", ".join(DESIGNS))
    args = ap.parse_args()
    designs = [d for d in args.designs.split(",") if d]
    unknown = [d for d in designs if d not in DESIGNS]
    if unknown or BASELINE not in designs or len(designs) < 2:
        ap.error(f"--designs: {args.designs!r}: names from {', '.join(DESIGNS)}, "
                 f"{BASELINE} and at least one other")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    settings = SETTINGS[:1] if args.one_core_only else SETTINGS
    runs = [(label, setting, design) for label, setting in settings for design in designs]
    results = {(label, d): {name: [] for name, _, _ in FIGURES} for label, _, d in runs}
    waited = 0
    while waited < args.settle and os.getloadavg()[0] >= 0.5:
        time.sleep(5)
        waited += 5
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for label, setting, design in (runs if r % 2 == 0 else list(reversed(runs))):
                figures = once(design, setting, args, tmp)
                for name, _, _ in FIGURES:
                    results[(label, design)][name].append(figures.get(name, float("nan")))
                print(f"round {r + 1}: {label.split(':')[0]}: {design}: "
                      f"{figures['iops']:.0f} IOPS, {figures['latency_ms']:.2f} ms mean",
                      file=sys.stderr)
    load_after = os.getloadavg()[0]
    print(f"\n4 KiB, depth 512; medians of {args.rounds} rounds of {args.seconds} s, "
          f"{'profiled (default --profile)' if args.profiled else '--profile none'}; "
          f"load average {load_before:.2f} before, {load_after:.2f} after")
    others = [d for d in designs if d != BASELINE]
    for label, _ in settings:
        base = results[(label, BASELINE)]
        print(f"\n{label}\n")
        print(f"{'figure':<20}" + "".join(f" {d:>13}" for d in designs)
              + "".join(f" {d + '/' + BASELINE:>19}" for d in others))
        for name, title, fmt in FIGURES:
            med = {d: median(results[(label, d)][name]) for d in designs}
            if all(math.isnan(v) for v in med.values()):
                continue
            ratios = [med[d] / med[BASELINE] if med[BASELINE] else float("nan") for d in others]
            # A figure a design does not report (busy time of a server that sleeps) is a dash.
            cell = lambda v, f: "—" if math.isnan(v) else f.format(v)
            print(f"{title:<20}" + "".join(f" {cell(med[d], fmt):>13}" for d in designs)
                  + "".join(f" {cell(r, '{:.2f}x'):>19}" for r in ratios))
        for d in designs:
            res = results[(label, d)]
            print(f"IOPS range, {d}: {min(res['iops']):.0f} .. {max(res['iops']):.0f}")
        for d in others:
            wins = sum(c > a for c, a in zip(results[(label, d)]["iops"], base["iops"]))
            print(f"rounds where {d} had more IOPS than {BASELINE}: {wins} of {args.rounds}")
    print()
    for label, _ in settings:
        base = median(results[(label, BASELINE)]["iops"])
        for d in others:
            ratio = median(results[(label, d)]["iops"]) / base
            print(f"margin: {label.split(':')[0]}: {d}/{BASELINE} IOPS {ratio:.2f}x against "
                  f">={BAR:g}x: {(ratio / BAR - 1) * 100:+.0f} % "
                  f"({'met' if ratio >= BAR else 'NOT met'})")


def median(values):
    """The median of the values a design reported (NaN when it reports none)."""
    present = [v for v in values if not math.isnan(v)]
    return statistics.median(present) if present else float("nan")


if __name__ == "__main__":
    main()
