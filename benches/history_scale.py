#!/usr/bin/env python3
"""How long `benchtop history` takes, and how much memory, over many sessions.

Writes synthetic histories (one short session a point, laps/s with 2 % CV between points,
+8 % at 40 % of the way and -6 % at 75 %) of 100 and 1,000 sessions with the sessions
crate's `synthetic_history` example, then times `benchtop history DIR --json` on each
(wall time and peak RSS from /usr/bin/time): first as recorded, each session with the
digest.json its recorder wrote, then with every digest.json removed (sessions recorded
before digests, digested in memory on each read). It checks that both reads print the
same history and that its change points fall where the steps were written (within 2
points). Goals: 1,000 sessions within 10 s and 500 MB, 100 within 1 s.

Figures must be taken on a quiet machine: the script refuses to start when the 1-minute
load average is above the core count unless `--force`.

Usage: benches/history_scale.py [--benchtop target/release/benchtop]
                                [--example target/release/examples/synthetic_history]
                                [--sizes 100,1000] [--force]
Needs: cargo build --release -p benchtop -p benchtop-sessions --examples; GNU time.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--benchtop", default="target/release/benchtop")
    p.add_argument("--example", default="target/release/examples/synthetic_history")
    p.add_argument("--sizes", default="100,1000")
    p.add_argument("--force", action="store_true")
    args = p.parse_args()
    if os.getloadavg()[0] > os.cpu_count() and not args.force:
        sys.exit("the machine is busy (load above the core count); --force to run anyway")
    failed = False
    for n in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as root:
            at = [int(n * 0.4), int(n * 0.75)]
            steps = [f"{at[0]}:0.08", f"{at[1]}:-0.06"]
            subprocess.run([args.example, root, str(n), "0.02", "1", *steps], check=True,
                           stdout=subprocess.DEVNULL)
            reports = []
            for label in ["with digests", "without digests"]:
                if label == "without digests":
                    for d, _, files in os.walk(root):
                        if "digest.json" in files:
                            os.remove(os.path.join(d, "digest.json"))
                wall, rss_mb, report = timed(args.benchtop, root)
                laps = next(f for f in report["histories"][0]["figures"]
                            if f["name"] == "laps/s")
                found = [laps["points"][c["at"]]["point"] for c in laps["changes"]]
                ok = len(found) == 2 and all(abs(f - a) <= 2 for f, a in zip(found, at))
                failed |= not ok
                print(f"{n} sessions {label}: {wall:.2f} s, peak RSS {rss_mb:.0f} MB, "
                      f"laps/s change points at {found} (written at {at})"
                      f"{'' if ok else ' -- NOT WHERE WRITTEN'}")
                reports.append([h["figures"] for h in report["histories"]])
            if reports[0] != reports[1]:
                failed = True
                print(f"{n} sessions: the history read from digests differs from the one "
                      "read from the sessions")
    sys.exit(1 if failed else 0)


def timed(benchtop, root):
    """Wall time (s), peak RSS (MB) and the JSON report of `benchtop history ROOT --json`."""
    with tempfile.TemporaryDirectory() as out:
        start = time.monotonic()
        run = subprocess.run(
            ["/usr/bin/time", "-f", "%M", benchtop, "history", root, "--json", "--out", out],
            check=True, capture_output=True, text=True)
        wall = time.monotonic() - start
    rss_mb = int(run.stderr.strip().splitlines()[-1]) / 1024
    return wall, rss_mb, json.loads(run.stdout)


if __name__ == "__main__":
    main()
