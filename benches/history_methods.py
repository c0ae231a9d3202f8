#!/usr/bin/env python3
"""Where `benchtop history`, asv and Apache Otava find change points on the same series.

Writes synthetic histories with the sessions crate's `synthetic_history` example (one
short session a point, laps/s log-normal with a coefficient of variation between points),
reads each with `benchtop history DIR --json --no-profiles --figure laps/s`, and hands
the very values benchtop judged (each point's laps/s) to

  - asv's step detection (`asv.step_detect.detect_steps`, its defaults: the penalty
    asv chooses from the series' noise), as `asv publish` draws steps and `asv compare`
    and the regression pages use them;
  - Apache Otava's (formerly Hunter; `otava.analysis.compute_change_points`, E-divisive
    candidates kept by a t-test, with its command line's defaults: window 50,
    max p-value 0.001, no minimum magnitude).

Two sets of histories:

  - stepped: 200 points, 2 % CV, +8 % at point 80 and -6 % at point 150 (the history
    issue's test), one per seed: each method's change points, a hit being one within 2
    points of a step, anything else a false alarm;
  - flat: 200 points, 2 % CV, no step: how many histories get any change point at all
    (benchtop states alpha = 1 % per history).

Positions, not timings: it may run on a loaded machine. Debug builds do (the default
paths); release builds are faster.

Usage: benches/history_methods.py [--benchtop target/debug/benchtop]
                                  [--example target/debug/examples/synthetic_history]
                                  [--seeds 10] [--flat-seeds 20] [--points 200]
Needs: cargo build -p benchtop -p benchtop-sessions --examples;
       pip install asv apache-otava
"""

import argparse
import json
import subprocess
import sys
import tempfile

STEPS = [(0.4, 0.08), (0.75, -0.06)]
NEAR = 2


def benchtop_history(args, points, seed, steps):
    """The laps/s of each point and the points benchtop puts change points at."""
    with tempfile.TemporaryDirectory() as root:
        written = [f"{at}:{size}" for at, size in steps]
        subprocess.run([args.example, root, str(points), "0.02", str(seed), *written],
                       check=True, stdout=subprocess.DEVNULL)
        out = subprocess.run([args.benchtop, "history", root, "--json", "--no-profiles",
                              "--figure", "laps/s"],
                             check=True, capture_output=True, text=True)
    report = json.loads(out.stdout)
    laps = next(f for f in report["histories"][0]["figures"] if f["name"] == "laps/s")
    values = [p["value"] for p in laps["points"]]
    found = [laps["points"][c["at"]]["point"] for c in laps["changes"]]
    return values, found


def asv_steps(values):
    """Where asv's step detection starts a new level."""
    from asv import step_detect
    steps = step_detect.detect_steps(values)
    # Each step is (first index, one past the last, level, min, error): a new step after
    # the first is a change point at its first index.
    return [s[0] for s in steps[1:]]


def otava_changes(values):
    """Where Apache Otava's E-divisive with a t-test puts change points."""
    from otava.analysis import compute_change_points
    # A list, as its command line hands it series (a numpy array trips its splitting).
    points, _weak = compute_change_points([float(v) for v in values], window_len=50,
                                          max_pvalue=0.001, min_magnitude=0.0)
    return sorted(int(p.index) for p in points)


METHODS = [("benchtop", None), ("asv", asv_steps), ("otava", otava_changes)]


def score(found, truth):
    hits = sum(1 for t in truth if any(abs(f - t) <= NEAR for f in found))
    false = sum(1 for f in found if all(abs(f - t) > NEAR for t in truth))
    return hits, false


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--benchtop", default="target/debug/benchtop")
    p.add_argument("--example", default="target/debug/examples/synthetic_history")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--flat-seeds", type=int, default=20)
    p.add_argument("--points", type=int, default=200)
    args = p.parse_args()
    try:
        import asv.step_detect  # noqa: F401
        import otava.analysis  # noqa: F401
    except ImportError as e:
        sys.exit(f"{e}: pip install asv apache-otava")

    n = args.points
    steps = [(int(n * at), size) for at, size in STEPS]
    truth = [at for at, _ in steps]
    print(f"stepped: {n} points, 2 % CV, steps {steps}; a hit is within {NEAR} points")
    totals = {name: [0, 0] for name, _ in METHODS}
    for seed in range(1, args.seeds + 1):
        values, ours = benchtop_history(args, n, seed, steps)
        row = []
        for name, method in METHODS:
            found = ours if method is None else method(values)
            hits, false = score(found, truth)
            totals[name][0] += hits
            totals[name][1] += false
            row.append(f"{name} {found}")
        print(f"  seed {seed:3}: " + " | ".join(row))
    for name, (hits, false) in totals.items():
        print(f"  {name:9} found {hits} of {len(truth) * args.seeds} steps, "
              f"{false} false alarms in {args.seeds} histories")

    print(f"flat: {n} points, 2 % CV, no step")
    alarms = {name: 0 for name, _ in METHODS}
    for seed in range(1, args.flat_seeds + 1):
        values, ours = benchtop_history(args, n, 1000 + seed, [])
        row = []
        for name, method in METHODS:
            found = ours if method is None else method(values)
            alarms[name] += bool(found)
            row.append(f"{name} {found}")
        print(f"  seed {1000 + seed}: " + " | ".join(row))
    for name, count in alarms.items():
        print(f"  {name:9} any change point in {count} of {args.flat_seeds} flat histories")


if __name__ == "__main__":
    main()
