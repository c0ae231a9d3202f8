#!/usr/bin/env python3
"""Recording overhead of benchtop against perf, measured side by side in one run.

Prints two tables:

1. Sampling overhead: ring throughput (messages/s, the workload's own figure) with no
   sampling, with benchtop's sampler at 999 Hz, and under
   `perf record -e cpu-clock -F 999 -g`, configurations interleaved round by round.
2. Profile pipeline: what a recording costs beyond the workload's own run time —
   benchtop: start-up plus everything until cpu.folded and cpu.svg are written;
   perf: `perf record` start/stop plus `perf script | inferno-collapse-perf |
   inferno-flamegraph`.

Usage: benches/record_overhead.py [--rounds N] [--ring "--num-nodes 5000 --num-rounds 2000"]
                                  [--baseline PATH/TO/OTHER/benchtop]
With --baseline, another build of benchtop (an earlier commit's release binary) samples
the same ring in every round too, so two versions of the sampler are measured side by
side (for example whole-run stacks only against per-interval stacks).
Needs: perf (linux-perf), inferno's binaries (installed into target/bench-tools on first
use with `cargo install inferno`), a release build (built on first use).
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHTOP = os.path.join(ROOT, "target", "release", "benchtop")
TOOLS = os.path.join(ROOT, "target", "bench-tools")


def need_tools():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    if shutil.which("perf") is None:
        sys.exit("perf is missing: apt-get install linux-perf")
    if not os.path.exists(os.path.join(TOOLS, "bin", "inferno-flamegraph")):
        print("installing inferno into target/bench-tools …", file=sys.stderr)
        subprocess.run(["cargo", "install", "-q", "--locked", "--root", TOOLS, "inferno"], check=True)


def workload_seconds(session_dir):
    with open(os.path.join(session_dir, "session.json")) as f:
        meta = json.load(f)
    figures = {fig["name"]: fig["value"] for fig in meta["summary"]}
    run_s = figures["time_taken_for_node_creation"] + figures["time_taken_for_ring_messaging"]
    return figures["messages_per_second"], run_s, meta


def timed(cmd, **kw):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ring", default="--num-nodes 5000 --num-rounds 2000")
    ap.add_argument("--baseline", help="another benchtop binary to sample with, side by side")
    args = ap.parse_args()
    need_tools()
    ring = shlex.split(args.ring)
    tmp = tempfile.mkdtemp(prefix="benchtop-bench-")
    rate = {"none": [], "benchtop": [], "perf": [], "baseline": []}
    cost = {"benchtop": [], "perf record": [], "perf script+inferno": [], "perf total": []}
    samples = {"benchtop": [], "perf": [], "baseline": []}
    for r in range(args.rounds):
        # no sampling
        d = os.path.join(tmp, f"none-{r}")
        timed([BENCHTOP, "run", "ring", *ring, "--profile", "none", "--quiet", "--record", d])
        rate["none"].append(workload_seconds(d)[0])
        # benchtop's sampler
        d = os.path.join(tmp, f"bt-{r}")
        wall = timed([BENCHTOP, "run", "ring", *ring, "--profile", "cpu", "--event", "cpu-clock", "--frequency", "999",
                      "--quiet", "--record", d])
        mps, run_s, meta = workload_seconds(d)
        rate["benchtop"].append(mps)
        cost["benchtop"].append(wall - run_s)
        samples["benchtop"].append(meta["sampling"]["samples"])
        if args.baseline:
            d = os.path.join(tmp, f"base-{r}")
            timed([args.baseline, "run", "ring", *ring, "--profile", "cpu", "--event", "cpu-clock",
                   "--frequency", "999", "--quiet", "--record", d])
            mps, _, meta = workload_seconds(d)
            rate["baseline"].append(mps)
            samples["baseline"].append(meta["sampling"]["samples"])
        # perf record, then the perf script | inferno pipeline
        d = os.path.join(tmp, f"perf-{r}")
        data = os.path.join(tmp, f"perf-{r}.data")
        wall = timed(["perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "-g", "-o", data, "--",
                      BENCHTOP, "run", "ring", *ring, "--profile", "none", "--quiet", "--record", d])
        mps, run_s, _ = workload_seconds(d)
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
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    med = {k: statistics.median(v) for k, v in rate.items() if v}
    print(f"\nring {' '.join(ring)} (tell), {args.rounds} interleaved rounds, medians\n")
    print(f"{'configuration':<28}{'messages/s':>14}{'vs none':>10}{'min':>14}{'max':>14}")
    configs = [("none", "no sampling"), ("benchtop", "benchtop sampler 999 Hz"),
               ("perf", "perf record -F 999 -g")]
    if args.baseline:
        configs.insert(2, ("baseline", "baseline sampler 999 Hz"))
    for k, label in configs:
        print(f"{label:<28}{med[k]:>14,.0f}{(med[k] / med['none'] - 1) * 100:>+9.1f}%"
              f"{min(rate[k]):>14,.0f}{max(rate[k]):>14,.0f}")
    # Paired by round: each round runs the three configurations back to back.
    for k in ("benchtop", "baseline", "perf") if args.baseline else ("benchtop", "perf"):
        ratios = [b / n - 1 for b, n in zip(rate[k], rate["none"])]
        print(f"paired {k:<9} vs none, median of rounds: {statistics.median(ratios) * 100:+.1f}%")
    if args.baseline:
        ratios = [b / a - 1 for b, a in zip(rate["benchtop"], rate["baseline"])]
        print(f"paired benchtop  vs baseline, median of rounds: {statistics.median(ratios) * 100:+.1f}%")
    print(f"\nsamples taken (median): benchtop {statistics.median(samples['benchtop']):.0f}, "
          f"perf {statistics.median(samples['perf']):.0f}"
          + (f", baseline {statistics.median(samples['baseline']):.0f}" if args.baseline else ""))
    cm = {k: statistics.median(v) for k, v in cost.items()}
    print(f"\n{'recording cost beyond the workload':<40}{'seconds':>10}")
    print(f"{'benchtop (start-up + folded + svg)':<40}{cm['benchtop']:>10.3f}")
    print(f"{'perf record start/stop':<40}{cm['perf record']:>10.3f}")
    print(f"{'perf script | collapse | flamegraph':<40}{cm['perf script+inferno']:>10.3f}")
    print(f"{'perf total':<40}{cm['perf total']:>10.3f}")
    print(f"\nperf pipeline / benchtop: {cm['perf total'] / max(cm['benchtop'], 1e-9):.1f}x")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
