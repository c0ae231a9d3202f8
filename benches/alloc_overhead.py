#!/usr/bin/env python3
"""What the worker's counting allocator costs, measured side by side in one run.

The same release worker (`benchtop worker …`, started by this script, which says `start`
on its standard input) runs with its allocation counting on (the default in worker mode)
and switched off (`BENCHTOP_ALLOC=off`), the two interleaved round by round, in an order
that alternates so neither always runs first. Two workloads:

- ring tell (`--ring`, default 5000 × 2000): the workload's own messages_per_second; it
  allocates little per message, so it shows the cost of the allocator's fast path on a
  busy runtime;
- the defs parse (`--defs`, default a generated 3199.def): the parse phase's seconds; it
  allocates heavily (every node, name and attribute), so it shows the cost per call.

Prints a table: median, min and max of each side, and the change of the medians (counting
on against off; negative is slower). Also the machine's load average before and after.

Usage: benches/alloc_overhead.py [--rounds N] [--ring ARGS] [--defs ARGS]
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


def run_worker(args, counting):
    """Runs `benchtop worker ARGS` to the end; returns its summary and phase figures."""
    env = dict(os.environ)
    env.pop("BENCHTOP_REPORT_FD", None)
    if counting:
        env.pop("BENCHTOP_ALLOC", None)
    else:
        env["BENCHTOP_ALLOC"] = "off"
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
    figures, ticks = {}, 0
    for line in out.decode().splitlines():
        message = json.loads(line)
        if message["type"] == "summary":
            figures.update({f["name"]: f["value"] for f in message["figures"]})
        elif message["type"] == "tick":
            ticks += 1
            has = "alloc_bytes" in message.get("counters", {})
            if has != counting:
                raise SystemExit(f"counting {'on' if counting else 'off'}, but ticks say otherwise")
    return figures


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def row(name, unit, on, off, higher_is_better):
    m_on, m_off = statistics.median(on), statistics.median(off)
    change = (m_on / m_off - 1) * 100 if higher_is_better else (m_off / m_on - 1) * 100
    print(f"{name:<22} {unit:<10} {m_off:>14.4g} {min(off):>12.4g} {max(off):>12.4g} "
          f"{m_on:>14.4g} {min(on):>12.4g} {max(on):>12.4g} {change:>+8.2f} %")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ring", default="--mode tell --num-nodes 5000 --num-rounds 2000")
    ap.add_argument("--defs", default="--formats text")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    ring = ["ring", *shlex.split(args.ring)]
    defs = ["defs", *shlex.split(args.defs)]
    before = load()
    results = {("ring", c): [] for c in (True, False)} | {("defs", c): [] for c in (True, False)}
    for r in range(args.rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        for counting in order:
            results[("ring", counting)].append(run_worker(ring, counting)["messages_per_second"])
        for counting in order:
            results[("defs", counting)].append(run_worker(defs, counting)["parse_s"])
    print(f"load average before: {before}; after: {load()}; {args.rounds} rounds, interleaved")
    print(f"{'workload':<22} {'unit':<10} {'off median':>14} {'off min':>12} {'off max':>12} "
          f"{'on median':>14} {'on min':>12} {'on max':>12} {'on vs off':>10}")
    row(f"ring {args.ring.replace('--num-', '').replace('--mode ', '')}"[:22], "msgs/s",
        results[("ring", True)], results[("ring", False)], True)
    row("defs parse", "s", results[("defs", True)], results[("defs", False)], False)


if __name__ == "__main__":
    main()
