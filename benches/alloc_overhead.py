#!/usr/bin/env python3
"""What the worker's counting allocator costs, measured side by side in one run.

The same release worker (`benchtop worker …`, started by this script, which says `start`
on its standard input) runs three ways, interleaved round by round in an order that
rotates so none always runs first:

- `off`: counting switched off (`BENCHTOP_ALLOC=off`): the system allocator and one
  relaxed load per call;
- `count`: counting on, stack sampling off (`BENCHTOP_ALLOC_SAMPLE=0`);
- `sample`: counting on and allocation stacks sampled at the default rate (512 KiB), the
  default in worker mode (`--sample-rate` sets another).

Two workloads:

- ring tell (`--ring`, default 5000 × 2000): the workload's own messages_per_second; it
  allocates little per message, so it shows the cost of the allocator's fast path on a
  busy runtime;
- the defs parse (`--defs`, default a generated 3199.def): the parse phase's seconds; it
  allocates heavily (every node, name and attribute), so it shows the cost per call.

Prints a table: median, min and max of each way, and the change of the medians against
`off` (negative is slower). Also the machine's load average before and after, and how
many allocation samples the `sample` runs sent.

Usage: benches/alloc_overhead.py [--rounds N] [--ring ARGS] [--defs ARGS] [--sample-rate BYTES]
Needs: a release build (built on first use).
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHTOP = os.path.join(ROOT, "target", "release", "benchtop")


WAYS = ("off", "count", "sample")


def run_worker(args, way, rate):
    """Runs `benchtop worker ARGS` to the end one `way`; returns its summary and phase
    figures, and the allocation samples it sent."""
    env = dict(os.environ)
    env.pop("BENCHTOP_REPORT_FD", None)
    env.pop("BENCHTOP_ALLOC", None)
    env.pop("BENCHTOP_ALLOC_SAMPLE", None)
    if way == "off":
        env["BENCHTOP_ALLOC"] = "off"
    elif way == "count":
        env["BENCHTOP_ALLOC_SAMPLE"] = "0"
    elif rate is not None:
        env["BENCHTOP_ALLOC_SAMPLE"] = str(rate)
    # Reports go to standard output (no BENCHTOP_REPORT_FD); `start` on standard input,
    # which stays open until the worker ends (its end means `stop`).
    worker = subprocess.Popen([BENCHTOP, "worker", *args], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    worker.stdin.write(b'{"type":"start"}\n')
    worker.stdin.flush()
    out = worker.stdout.read()
    if worker.wait() != 0:
        raise SystemExit(f"benchtop worker {' '.join(args)} failed")
    worker.stdin.close()
    figures, samples = {}, 0
    for line in out.decode().splitlines():
        message = json.loads(line)
        if message["type"] == "summary":
            figures.update({f["name"]: f["value"] for f in message["figures"]})
        elif message["type"] == "tick":
            has = "alloc_bytes" in message.get("counters", {})
            if has != (way != "off"):
                raise SystemExit(f"counting {way}, but ticks say otherwise")
        elif message["type"] == "alloc_samples":
            samples += len(message.get("samples", []))
    if way != "sample" and samples > 0:
        raise SystemExit(f"{way}: {samples} allocation samples sent")
    return figures, samples


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def row(name, unit, results, higher_is_better):
    off = results["off"]
    m_off = statistics.median(off)
    cells = [f"{name:<22} {unit:<8}"]
    changes = []
    for way in WAYS:
        values = results[way]
        m = statistics.median(values)
        cells.append(f"{m:>11.4g} [{min(values):.4g}–{max(values):.4g}]")
        if way != "off":
            change = (m / m_off - 1) * 100 if higher_is_better else (m_off / m - 1) * 100
            changes.append(f"{change:>+7.2f} %")
    print("  ".join(cells + changes))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ring", default="--mode tell --num-nodes 5000 --num-rounds 2000")
    ap.add_argument("--defs", default="--formats text")
    ap.add_argument("--sample-rate", type=int, default=None,
                    help="bytes between allocation samples for `sample` (default: the worker's, 512 KiB)")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    ring = ["ring", *shlex.split(args.ring)]
    defs = ["defs", *shlex.split(args.defs)]
    before = load()
    results = {(w, way): [] for w in ("ring", "defs") for way in WAYS}
    samples = {"ring": 0, "defs": 0}
    for r in range(args.rounds):
        order = WAYS[r % 3:] + WAYS[:r % 3]
        for way in order:
            figures, n = run_worker(ring, way, args.sample_rate)
            results[("ring", way)].append(figures["messages_per_second"])
            samples["ring"] += n
        for way in order:
            figures, n = run_worker(defs, way, args.sample_rate)
            results[("defs", way)].append(figures["parse_s"])
            samples["defs"] += n
    print(f"load average before: {before}; after: {load()}; {args.rounds} rounds, interleaved")
    print(f"{'workload':<22} {'unit':<8}  " + "  ".join(f"{w + ' median [min–max]':>30}" for w in WAYS)
          + "  count vs off  sample vs off")
    for w, unit, label, higher in (
        ("ring", "msgs/s", f"ring {args.ring.replace('--num-', '').replace('--mode ', '')}"[:22], True),
        ("defs", "s", "defs parse", False),
    ):
        row(label, unit, {way: results[(w, way)] for way in WAYS}, higher)
    print(f"allocation samples sent per `sample` run: ring {samples['ring'] / args.rounds:.0f}, "
          f"defs {samples['defs'] / args.rounds:.0f}")


if __name__ == "__main__":
    main()
