#!/usr/bin/env python3
"""benchtop's defs workload against ecFlow 5.9.2 itself, on the same file in the same run.

The definition is 3199.def's shape at full scale (320,830 nodes, about 60 MB; `--scale`
for another size): benchtop generates it (`benchtop worker defs --formats text` leaves
its text checkpoint) and ecFlow's own API loads and saves it (`Defs(path).save_as_defs`),
so both sides read a file ecFlow wrote. Then, round after round, in an order that
alternates so neither side always runs first:

- benchtop: `benchtop worker defs --input FILE --formats binary` (a release build, as
  `benchtop run defs` runs it): its `parse` phase (the text already in memory) and,
  like for like with ecFlow's `Defs(path)` which reads the file itself, `read` plus
  `parse`; the RSS after the parse (VmRSS, the text freed), and the
  `checkpoint-binary` (encode, write, fsync, rename, fsync the directory) and
  `reload-binary` (read, check, decode) phases;
- ecFlow (Debian's python3-ecflow, run by /usr/bin/python3): `ecflow.Defs(path)`, the
  process's VmRSS after it, then `save_as_checkpt` and `restore_from_checkpt` into a
  new `Defs`, each timed around the call.

Both write their checkpoints into the same directory (`--dir`, default a temporary
directory under /tmp). The table gives medians, minima and maxima over the rounds and the
ratios, against the bars: parse at least 7x faster than ecFlow, checkpoint plus reload
at least 4x faster, RSS after the parse at most half of ecFlow's. The load average is
printed before and after (the machine may be shared: read the ratios, not the seconds).

Usage: benches/defs_ecflow.py [--rounds N] [--scale F] [--dir DIR] [--python PATH]
                              [--settle SECONDS]
Needs: cargo (a release build, made on first use) and python3-ecflow.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHTOP = os.path.join(ROOT, "target", "release", "benchtop")
RESAVE = os.path.join(ROOT, "workloads", "tests", "data", "defs", "ecflow_resave.py")

ECFLOW = r"""
import json, os, sys, time
import ecflow

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0

path, checkpoint = sys.argv[1], sys.argv[2]
c0 = time.process_time()
t0 = time.perf_counter()
defs = ecflow.Defs(path)
t1 = time.perf_counter()
c1 = time.process_time()
rss = status("VmRSS:")
peak = status("VmHWM:")
t2 = time.perf_counter()
defs.save_as_checkpt(checkpoint)
t3 = time.perf_counter()
back = ecflow.Defs()
back.restore_from_checkpt(checkpoint)
t4 = time.perf_counter()
nodes = sum(len(list(s.get_all_nodes())) for s in back.suites)
print(json.dumps({"parse_s": t1 - t0, "read_parse_s": t1 - t0, "rss": rss, "peak_rss": peak,
                  "parse_cpu_s": c1 - c0, "read_parse_cpu_s": c1 - c0,
                  "checkpoint_s": t3 - t2, "reload_s": t4 - t3,
                  "checkpoint_bytes": os.path.getsize(checkpoint), "nodes": nodes}))
"""


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def settle(most):
    """Waits up to `most` seconds for the 1-minute load average to fall below 0.5 (the
    definition's generation raises it), then returns the load averages."""
    waited = 0
    while waited < most and float(load().split()[0]) >= 0.5:
        time.sleep(5)
        waited += 5
    now = load()
    if float(now.split()[0]) >= 0.5:
        print(f"warning: the load average is {now} after {most} s: something else runs",
              file=sys.stderr)
    return now


def worker(args):
    """Runs `benchtop worker ARGS` to the end; returns (summary figures, phases)."""
    env = dict(os.environ)
    env.pop("BENCHTOP_REPORT_FD", None)
    proc = subprocess.Popen([BENCHTOP, "worker", *args], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(b'{"type":"start"}\n')
    proc.stdin.flush()
    out = proc.stdout.read()
    err = proc.stderr.read()
    if proc.wait() != 0:
        sys.exit(f"benchtop worker {' '.join(args)} failed:\n{err.decode()}")
    proc.stdin.close()
    summary, phases = {}, {}
    for line in out.decode().splitlines():
        message = json.loads(line)
        if message["type"] == "summary":
            summary = {f["name"]: f["value"] for f in message["figures"]}
        elif message["type"] == "phase":
            phases[message["name"]] = {f["name"]: f["value"] for f in message["figures"]}
    return summary, phases


def run_benchtop(definition, directory):
    _, phases = worker(["defs", "--input", definition, "--formats", "binary",
                        "--dir", directory])
    return {
        "read_parse_s": phases["read"]["seconds"] + phases["parse"]["seconds"],
        "parse_s": phases["parse"]["seconds"],
        "parse_cpu_s": phases["parse"]["cpu_s"],
        "read_parse_cpu_s": phases["read"]["cpu_s"] + phases["parse"]["cpu_s"],
        "rss": phases["parse"]["rss_bytes"],
        "peak_rss": phases["parse"]["peak_rss_bytes"],
        "checkpoint_s": phases["checkpoint-binary"]["seconds"],
        "reload_s": phases["reload-binary"]["seconds"],
        "checkpoint_bytes": phases["checkpoint-binary"]["bytes"],
        "nodes": phases["parse"]["nodes"],
    }


def run_ecflow(python, definition, directory):
    out = subprocess.run([python, "-c", ECFLOW, definition,
                          os.path.join(directory, "ecflow.check")],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ecFlow failed:\n{out.stderr}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", default="1.0")
    ap.add_argument("--settle", type=int, default=180,
                    help="seconds to wait at most for the load average to fall below 0.5 "
                         "before the rounds (0: start at once)")
    ap.add_argument("--dir", help="where the definition and the checkpoints go")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="a Python with ecFlow's module (Debian's python3-ecflow)")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT,
                   check=True)
    directory = args.dir or tempfile.mkdtemp(prefix="benchtop-defs-ecflow-")
    os.makedirs(directory, exist_ok=True)
    try:
        made = os.path.join(directory, "made")
        os.makedirs(made, exist_ok=True)
        worker(["defs", "--scale", args.scale, "--formats", "text", "--dir", made])
        definition = os.path.join(directory, "definition.def")
        subprocess.run([args.python, RESAVE, os.path.join(made, "checkpoint.def"), definition],
                       check=True)
        shutil.rmtree(made)
        size = os.path.getsize(definition)

        before = settle(args.settle)
        results = {"benchtop": [], "ecflow": []}
        for r in range(args.rounds):
            order = ("benchtop", "ecflow") if r % 2 == 0 else ("ecflow", "benchtop")
            for side in order:
                if side == "benchtop":
                    results[side].append(run_benchtop(definition, directory))
                else:
                    results[side].append(run_ecflow(args.python, definition, directory))
        after = load()
    finally:
        if not args.dir:
            shutil.rmtree(directory, ignore_errors=True)

    b, e = results["benchtop"], results["ecflow"]
    print(f"definition: {size / 1e6:.1f} MB, {int(b[0]['nodes'])} nodes (ecFlow restored "
          f"{e[0]['nodes']}); {args.rounds} rounds, interleaved; load average before: "
          f"{before}, after: {after}")
    print(f"checkpoints: benchtop binary {b[0]['checkpoint_bytes'] / 1e6:.1f} MB, "
          f"ecFlow {e[0]['checkpoint_bytes'] / 1e6:.1f} MB")
    print(f"{'measure':<26} {'benchtop med':>12} {'min':>8} {'max':>8} "
          f"{'ecFlow med':>11} {'min':>8} {'max':>8} {'ratio':>7} {'bar':>7}  ok")

    margins = []

    def row(name, key, scale, unit, bar, lower_better=True):
        """One line of the table; `bar` None for a figure shown without a bar."""
        bv = [x[key] * scale for x in b]
        ev = [x[key] * scale for x in e]
        mb, me = statistics.median(bv), statistics.median(ev)
        if bar is None:
            ratio, ok = me / mb, None
            shown, want = f"{ratio:.2f}x", "-"
        elif lower_better and bar >= 1:
            ratio, ok = me / mb, me / mb >= bar
            shown = f"{ratio:.2f}x"
            want = f">={bar:g}x"
            margins.append((name, ratio / bar - 1, shown, want))
        else:
            ratio, ok = mb / me, mb / me <= bar
            shown = f"{ratio:.2f}"
            want = f"<={bar:g}"
            margins.append((name, bar / ratio - 1, shown, want))
        verdict = "" if ok is None else ("yes" if ok else "NO")
        print(f"{name:<26} {mb:>10.3f}{unit:>2} {min(bv):>8.3f} {max(bv):>8.3f} "
              f"{me:>9.3f}{unit:>2} {min(ev):>8.3f} {max(ev):>8.3f} {shown:>7} {want:>7}  "
              f"{verdict}")

    for x in b + e:
        x["both_s"] = x["checkpoint_s"] + x["reload_s"]
    row("parse (s)", "parse_s", 1, "s", 7)
    row("read + parse (s)", "read_parse_s", 1, "s", 7)
    row("parse CPU (s)", "parse_cpu_s", 1, "s", None)
    row("read + parse CPU (s)", "read_parse_cpu_s", 1, "s", None)
    row("checkpoint (s)", "checkpoint_s", 1, "s", 1)
    row("reload (s)", "reload_s", 1, "s", 1)
    row("checkpoint + reload (s)", "both_s", 1, "s", 4)
    row("RSS after parse (MiB)", "rss", 1 / 1048576, "M", 0.5, lower_better=False)
    row("peak RSS at parse (MiB)", "peak_rss", 1 / 1048576, "M", 1, lower_better=False)
    print("ratio: ecFlow / benchtop for times (higher is better), benchtop / ecFlow for "
          "memory (lower is better)")
    for name, margin, shown, want in margins:
        print(f"margin: {name} {shown} against {want}: {margin * 100:+.0f} %")


if __name__ == "__main__":
    main()
