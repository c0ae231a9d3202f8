#!/usr/bin/env python3
"""Off-CPU recording overhead on a context-switch-heavy workload, measured side by side.

The ipc ring (tell) passes one message round a ring of processes joined by Unix sockets:
every hop is a blocking read, so every hop is two context switches. Each round runs
every configuration back to back (interleaved), and the table gives the workload's own
messages/s: medians, the change against no sampling and against on-CPU sampling alone,
and the same changes paired round by round (the machine is shared and noisy: compare
within a round, not across runs).

Configurations: benchtop with --profile none, cpu, offcpu and both; perf record with the
same events for reference (`-e cpu-clock -F 999 -g`, and that plus `-e
context-switches/period=1/ --switch-events`, perf's own way of taking off-CPU stacks).

Usage: benches/offcpu_overhead.py [--rounds N] [--ring "--num-nodes 5 --num-rounds 20000"]
       [--no-perf]
Needs: a release build (built on first use) and perf (linux-perf) unless --no-perf.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHTOP = os.path.join(ROOT, "target", "release", "benchtop")

PERF_CPU = ["-e", "cpu-clock", "-F", "999", "-g"]
PERF_BOTH = ["-e", "cpu-clock/freq=999/", "-e", "context-switches/period=1/", "-g", "--switch-events"]


def run(label, ring, profile, perf, tmp, r):
    d = os.path.join(tmp, f"{label}-{r}")
    cmd = [BENCHTOP, "run", "ring", "--transport", "ipc", *ring, "--profile", profile, "--quiet", "--record", d]
    if perf is not None:
        cmd = ["perf", "record", "-q", "-o", os.path.join(tmp, "perf.data"), *perf, "--", *cmd]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(d, "session.json")) as f:
        meta = json.load(f)
    shutil.rmtree(d, ignore_errors=True)
    figures = {fig["name"]: fig["value"] for fig in meta["summary"]}
    return figures["messages_per_second"], meta["sampling"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ring", default="--num-nodes 5 --num-rounds 20000")
    ap.add_argument("--no-perf", action="store_true", help="leave out the perf record configurations")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    if not args.no_perf and shutil.which("perf") is None:
        sys.exit("perf is missing: apt-get install linux-perf (or pass --no-perf)")
    ring = shlex.split(args.ring)
    configs = [
        ("none", "benchtop --profile none", "none", None),
        ("cpu", "benchtop --profile cpu", "cpu", None),
        ("offcpu", "benchtop --profile offcpu", "offcpu", None),
        ("both", "benchtop --profile both", "both", None),
    ]
    if not args.no_perf:
        configs += [
            ("perf-cpu", "perf record cpu-clock -g", "none", PERF_CPU),
            ("perf-both", "perf record + switches", "none", PERF_BOTH),
        ]
    tmp = tempfile.mkdtemp(prefix="benchtop-offcpu-bench-")
    rate = {c[0]: [] for c in configs}
    switches, lost = [], []
    for r in range(args.rounds):
        for key, _, profile, perf in configs:
            mps, sampling = run(key, ring, profile, perf, tmp, r)
            rate[key].append(mps)
            if key == "both":
                switches.append(sampling.get("switches", 0))
                lost.append(sampling.get("lost", 0))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in rate.items()}

    def paired(k, base):
        return statistics.median(a / b - 1 for a, b in zip(rate[k], rate[base])) * 100

    print(f"\nring --transport ipc {' '.join(ring)} (tell), {args.rounds} interleaved rounds\n")
    print(f"{'configuration':<28}{'messages/s':>12}{'vs none':>10}{'vs cpu':>10}"
          f"{'paired vs none':>16}{'paired vs cpu':>15}")
    for key, label, _, _ in configs:
        base_cpu = "perf-cpu" if key.startswith("perf") else "cpu"
        print(f"{label:<28}{med[key]:>12,.0f}{(med[key] / med['none'] - 1) * 100:>+9.1f}%"
              f"{(med[key] / med[base_cpu] - 1) * 100:>+9.1f}%"
              f"{paired(key, 'none'):>+15.1f}%{paired(key, base_cpu):>+14.1f}%")
    print(f"\nbenchtop --profile both: {statistics.median(switches):,.0f} context switches recorded, "
          f"{statistics.median(lost):,.0f} records lost (medians)")


if __name__ == "__main__":
    main()
