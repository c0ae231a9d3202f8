#!/usr/bin/env python3
"""The TUI's own CPU while a workload or a program runs and the screen redraws at 10 Hz.

Runs `benchtop run ring … --tui`, then `benchtop run --tui -- calltree` (the C fixture
tui/tests/data/live/calltree.c, built with cc: the live screen of any program, with its
process CPU, switches and samples charts), then `benchtop run --tui --frequency 4999 --
manystacks` (benches/data/manystacks.c: two threads on call paths of depth 10 to 60 that
share all but their last few frames, nearly every sample a distinct stack: past 100,000
distinct stacks before the measurement starts, and growing), each in a tmux pane (a real terminal) for a while,
and reads the CPU time of each thread of the conductor from /proc: the TUI's threads
(the main thread, which draws, and bt-input, bt-free, bt-load, which feed it) apart from
the recorder and the sampler, which a headless recording has too. Prints, per thread
group, the CPU time and its share of one core over the run, with the load average; the
goal is at most 5 % of one core for the TUI (3 % for the live screen of a program, with
a profile of 100,000 distinct stacks too). Each runs for --seconds (default 20) with
--interval 1s; the many-stacks run first waits --warmup seconds (default 40) for its
profile to grow, and prints how many distinct stacks it had when the measurement started
(`s` writes the stacks so far) and at the end (from the session's cpu.folded).

Usage: benches/tui_cpu.py [--seconds N] [--warmup N] [--size 160x48]
                          [--target ring|command|stacks|all] [--benchtop PATH]
Needs: tmux, cc, a release build (built on first use).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHTOP = os.path.join(ROOT, "target", "release", "benchtop")
TUI_THREADS = {"benchtop", "bt-input", "bt-live", "bt-free", "bt-load"}
TICKS = os.sysconf("SC_CLK_TCK")


def thread_times(pid):
    """{thread name: CPU seconds} of every thread of `pid` (threads of one name summed)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / TICKS
    return out


def count_lines(path):
    """Lines of `path` (distinct stacks of a folded file); None when it cannot be read."""
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--size", default="160x48")
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--target", choices=["ring", "command", "stacks", "all", "both"], default="all")
    ap.add_argument("--benchtop", metavar="PATH",
                    help="measure this build (say, an older one copied aside) instead of building "
                         "target/release/benchtop; the file must be named benchtop, the name of "
                         "the TUI's main thread")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("tmux is missing: apt-get install tmux")
    global BENCHTOP
    if args.benchtop:
        BENCHTOP = os.path.abspath(args.benchtop)
        if os.path.basename(BENCHTOP) != "benchtop":
            sys.exit(f"{BENCHTOP}: name the copy benchtop (in a directory of its own): its main "
                     "thread, which draws, is named after the file")
    else:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    targets = {"all": ["ring", "command", "stacks"], "both": ["ring", "command"]}
    for target in targets.get(args.target, [args.target]):
        measure(args, target)


def measure(args, target):
    """Runs `target` in the TUI in tmux and prints the CPU of each group of threads."""
    width, height = args.size.split("x")
    tmp = tempfile.mkdtemp(prefix="benchtop-tui-bench-")
    socket = f"benchtop-tui-bench-{os.getpid()}-{target}"
    session_dir = os.path.join(tmp, "s")
    if target == "ring":
        what = "benchtop run ring --tui"
        command = (f"{BENCHTOP} run ring --num-nodes 1000 --num-rounds 4000000000 "
                   f"--duration {args.seconds + 30}s --tui --record {session_dir}")
    elif target == "stacks":
        what = "benchtop run --tui --frequency 4999 -- manystacks"
        fixture = os.path.join(tmp, "manystacks")
        subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-pthread", "-o", fixture,
                        os.path.join(ROOT, "benches", "data", "manystacks.c")], check=True)
        command = (f"{BENCHTOP} run --duration {args.seconds + args.warmup + 30}s --tui "
                   f"--frequency 4999 --record {session_dir} -- {fixture} 3600")
    else:
        what = "benchtop run --tui -- calltree"
        fixture = os.path.join(tmp, "calltree")
        subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", fixture,
                        os.path.join(ROOT, "tui", "tests", "data", "live", "calltree.c")], check=True)
        command = (f"{BENCHTOP} run --duration {args.seconds + 30}s --tui --record {session_dir} "
                   f"-- {fixture} 3600")
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-s", "b", "-x", width, "-y", height, command],
                   check=True)
    try:
        pid = None
        for _ in range(100):
            out = subprocess.run(["tmux", "-L", socket, "list-panes", "-F", "#{pane_pid}"],
                                 capture_output=True, text=True).stdout.strip()
            if out:
                pid = int(out)
                break
            time.sleep(0.1)
        if pid is None:
            sys.exit("tmux did not start benchtop")
        # The worker starts, the first intervals and stacks arrive (the many stacks: the
        # profile grows past 100,000 of them).
        time.sleep(args.warmup if target == "stacks" else 3)
        at_start = None
        if target == "stacks":
            # `s` writes the stacks so far: how many distinct ones the measurement starts
            # with.
            subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "b", "s"])
            time.sleep(5)
            at_start = count_lines(os.path.join(session_dir, "cpu.folded"))
        before, t0 = thread_times(pid), time.monotonic()
        time.sleep(args.seconds)
        after, t1 = thread_times(pid), time.monotonic()
        screen = subprocess.run(["tmux", "-L", socket, "capture-pane", "-p", "-t", "b"],
                                capture_output=True, text=True).stdout
        wall = t1 - t0
        groups = {}
        for name, secs in after.items():
            used = secs - before.get(name, 0.0)
            group = "TUI (draw + input + live)" if name in TUI_THREADS else (
                "sampler" if name.startswith("sampler") else name)
            groups[group] = groups.get(group, 0.0) + used
        print(f"\n{what} at {args.size}, {wall:.1f} s measured, redraws at 10 Hz, "
              f"load average {os.getloadavg()[0]:.2f}\n")
        print(f"{'threads':<32}{'CPU s':>8}{'% of a core':>14}")
        for group, used in sorted(groups.items(), key=lambda g: -g[1]):
            print(f"{group:<32}{used:>8.3f}{used / wall * 100:>13.2f}%")
        if target == "stacks":
            print(f"\ndistinct stacks when the measurement started: {at_start}")
            title = next((l for l in screen.splitlines() if "flamegraph" in l), "")
            print(f"the flame pane's title at the end: {title.strip()[:150]}")
    finally:
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "b", "q"])
        # Writing the session of a large profile takes a while.
        for _ in range(60):
            time.sleep(1)
            if os.path.exists(os.path.join(session_dir, "cpu.folded")) and subprocess.run(
                    ["tmux", "-L", socket, "has-session"], stderr=subprocess.DEVNULL).returncode:
                break
        if target == "stacks":
            print("distinct stacks at the end (the session's cpu.folded): "
                  f"{count_lines(os.path.join(session_dir, 'cpu.folded'))}")
        subprocess.run(["tmux", "-L", socket, "kill-server"], stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
