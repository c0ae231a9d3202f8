#!/usr/bin/env python3
"""Time and peak memory of loading a long session: `show`, `compare` and `open`.

Writes two synthetic sessions of an hour at --interval 100ms (36,000 latency intervals
and timeseries rows each; sessions/examples/synthetic_session.rs, the generator the
tests use), then runs `benchtop show A`, `benchtop compare A B` and `benchtop open A`
and `open A B` (in a tmux pane; timed until the first screen is drawn, when every
interval is loaded) and prints, per command, the wall time and the peak RSS of the
benchtop process (wait4's ru_maxrss; VmHWM for open), with its CPU time (user + system:
the wall time depends on the machine's load, the CPU time much less). It also runs
`compare A --slow --above 99950ns` (the synthetic intervals' p99 lie between 99.3 and
100 µs: about one in six is "slow") and `compare A A --range-a ..30m --range-b 30m..`.
The goal is at most 5 s and 500 MB for each.

Figures of earlier builds on this machine, for reference: show 15 s / 3.46 GB and
compare 45 s before interval histograms were held sparse; then show 2.08 s / 42 MB,
compare A B 24.3 s / 389 MB, open A 2.46 s / 177 MB, open A B 20.8 s / 389 MB (load
4.7–7.3) before the block bootstrap and the sparse decoding.

Usage: benches/session_load.py [--benchtop PATH] [--intervals N] [--keep DIR]
  --benchtop  the binary to measure (default: a release build of this tree, built on
              first use); give an older build to compare before and after
  --intervals intervals a session (default 36000)
  --keep      write the sessions into DIR (kept, and reused when already there)
Needs: tmux, python3.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = os.path.join(ROOT, "target", "release", "examples", "synthetic_session")


def measured(argv):
    """(seconds, CPU seconds, peak RSS bytes, exit code) of argv run to its end."""
    start = time.monotonic()
    pid = os.posix_spawn(argv[0], argv, os.environ,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                                       (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
    _, status, usage = os.wait4(pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    return (time.monotonic() - start, cpu, usage.ru_maxrss * 1024,
            os.waitstatus_to_exitcode(status))


def measured_open(benchtop, args, tmp):
    """(seconds to the first screen, peak RSS bytes) of `benchtop open …` in tmux."""
    # A server per call: the last one's kill-server may still be ending.
    socket = f"benchtop-load-bench-{os.getpid()}-{time.monotonic_ns()}"
    pid_file = os.path.join(tmp, "open.pid")
    if os.path.exists(pid_file):
        os.unlink(pid_file)
    command = f"sh -c 'echo $$ > {pid_file}; exec {benchtop} open {' '.join(args)}'"
    start = time.monotonic()
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-s", "b", "-x", "160", "-y", "48",
                    command], check=True)
    try:
        while not os.path.exists(pid_file) or not open(pid_file).read().strip():
            time.sleep(0.01)
        pid = int(open(pid_file).read())
        while True:
            screen = subprocess.run(["tmux", "-L", socket, "capture-pane", "-p", "-t", "b"],
                                    capture_output=True, text=True).stdout
            if "q quit" in screen:
                break
            if time.monotonic() - start > 900:
                raise SystemExit(f"open {args}: no screen after 900 s")
            time.sleep(0.02)
        took = time.monotonic() - start
        with open(f"/proc/{pid}/status") as f:
            hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) * 1024
        return took, hwm
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchtop")
    ap.add_argument("--intervals", type=int, default=36000)
    ap.add_argument("--keep")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("tmux is missing: apt-get install tmux")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop-sessions",
                    "--example", "synthetic_session"], cwd=ROOT, check=True)
    benchtop = args.benchtop
    if benchtop is None:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
        benchtop = os.path.join(ROOT, "target", "release", "benchtop")
    tmp = args.keep or tempfile.mkdtemp(prefix="benchtop-load-bench-")
    try:
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        for path, seed, body in [(a, 1, 50000), (b, 2, 60000)]:
            if not os.path.exists(os.path.join(path, "session.json")):
                subprocess.run([GENERATOR, path, str(args.intervals), str(body), str(seed)],
                               check=True, stdout=subprocess.DEVNULL)
        hlog_mb = os.path.getsize(os.path.join(a, "latency.hlog")) / 1e6
        print(f"{benchtop}")
        print(f"sessions of {args.intervals} intervals, latency.hlog {hlog_mb:.1f} MB each; "
              f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        print(f"{'command':<22} {'seconds':>8} {'CPU s':>7} {'peak RSS MB':>12}")
        out = os.path.join(tmp, "compare-out")
        for name, argv in [("show A", [benchtop, "show", a]),
                           ("compare A B", [benchtop, "compare", a, b, "--out", out]),
                           ("compare A --slow", [benchtop, "compare", a, "--slow", "--above",
                                                 "99950ns", "--out", out]),
                           ("compare A A halves", [benchtop, "compare", a, a, "--range-a", "..30m",
                                                   "--range-b", "30m..", "--out", out])]:
            shutil.rmtree(out, ignore_errors=True)
            took, cpu, rss, code = measured(argv)
            print(f"{name:<22} {took:>8.2f} {cpu:>7.2f} {rss / 1e6:>12.0f}"
                  + ("" if code in (0, 1) else f"  exit {code}"))
        for name, open_args in [("open A", [a]), ("open A B", [a, b])]:
            took, rss = measured_open(benchtop, open_args, tmp)
            print(f"{name:<22} {took:>8.2f} {'':>7} {rss / 1e6:>12.0f}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
