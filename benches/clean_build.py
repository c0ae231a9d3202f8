#!/usr/bin/env python3
"""Clean build times of benchtop at two (or more) commits, side by side.

For each commit: a git worktree of it, then, each in an empty target directory of its
own, `cargo build --release --locked` of the whole workspace and `cargo build --release
--locked -p benchtop-protocol` alone (at commits before the protocol had a crate of its own,
the crate that held it, `benchtop-workloads`, in its place: the table says which). The builds of the commits alternate round by round,
so that a machine whose load drifts hits each commit alike. Prints the wall and CPU
(user + system) seconds of every build, and per commit the medians.

Usage: benches/clean_build.py REV [REV ...] [--rounds N] [--jobs J]

Each build starts from nothing but the cargo registry (downloads are not timed: run
`cargo fetch` first). Only meaningful on a quiet machine: say the load beside the figures.
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(tree, target, args, jobs):
    """One cargo build in `tree` into the empty `target`: (wall s, cpu s)."""
    shutil.rmtree(target, ignore_errors=True)
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    cmd = ["cargo", "build", "--release", "--locked", "--quiet", *args]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=env, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    shutil.rmtree(target, ignore_errors=True)
    return wall, cpu


def protocol_package(tree):
    """The crate that holds the report protocol at this commit."""
    with open(os.path.join(tree, "Cargo.toml")) as f:
        members = f.read()
    return "benchtop-protocol" if '"protocol"' in members else "benchtop-workloads"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revs", nargs="+", help="commits to build")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=0, help="cargo --jobs (default: cargo's)")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="benchtop-clean-build-")
    trees = {}
    try:
        for rev in args.revs:
            tree = os.path.join(work, f"tree-{rev}")
            subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", "-q", tree, rev],
                           check=True)
            subprocess.run(["cargo", "fetch", "--locked", "--quiet"], cwd=tree, check=True)
            trees[rev] = tree
        results = {rev: {"workspace": [], "protocol": []} for rev in args.revs}
        print(f"load before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
        for round_ in range(args.rounds):
            for rev in args.revs:
                target = os.path.join(work, "target")
                for what, extra in [("workspace", ["--workspace"]),
                                    ("protocol", ["-p", protocol_package(trees[rev])])]:
                    wall, cpu = build(trees[rev], target, extra, args.jobs)
                    results[rev][what].append((wall, cpu))
                    print(f"round {round_ + 1} {rev} {what}: {wall:.1f} s wall, {cpu:.1f} s CPU"
                          f" (load {os.getloadavg()[0]:.2f})", file=sys.stderr)
        print(f"{'commit':<14} {'workspace wall':>15} {'CPU':>8} {'protocol wall':>14} {'CPU':>7}"
              "  protocol crate")
        for rev in args.revs:
            ws, pr = results[rev]["workspace"], results[rev]["protocol"]
            med = lambda xs, i: statistics.median(x[i] for x in xs)  # noqa: E731
            print(f"{rev[:14]:<14} {med(ws, 0):>13.1f} s {med(ws, 1):>6.0f} s"
                  f" {med(pr, 0):>12.1f} s {med(pr, 1):>5.0f} s  {protocol_package(trees[rev])}")
    finally:
        for tree in trees.values():
            subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", tree],
                           check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
