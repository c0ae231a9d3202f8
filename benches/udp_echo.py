#!/usr/bin/env python3
"""udp-echo on loopback, each back end against sockperf, measured side by side.

Latency: 64-byte UDP closed loop, one client (Demikernel's Table 2): round-trip p50 and
p99 for each back end (tokio, poll, mmsg), and `sockperf ping-pong -m 64 --full-rtt`
against `sockperf server` in the same rounds, as the reference for kernel UDP sockets.
Throughput: 1 KiB UDP messages, `--mode throughput`, with 1, 4 and 16 clients per back
end (one run per back end, `--sweep num-clients=1,4,16`; the figures of each point).

DPDK mode (`--dpdk`): `--backend dpdk` (two processes over DPDK's net_memif, each side
busy-polling its own core) joins the back ends, sockperf's server and client are pinned to
the last and first CPU as the poll and dpdk sides are, and the tables end with dpdk's p50
and 1-client messages/s against poll's (the goal: a lower p50 and more messages/s).

Each round runs every configuration back to back (interleaved); the table gives medians
over rounds, each beside its spread (the lowest and highest round, `[min–max]`): where two
rows' spreads overlap, their medians' order is not a finding. Each latency row also gives the CPU its run cost, in cores (user + system
time of the whole process tree over the run's wall time: a busy-polling side is a core). The machine is shared and noisy: compare within a run, not across runs.
Every benchtop run is `benchtop run udp-echo … --profile none` (no sampling): the
workload's own figures, as session.json records them.

Usage: benches/udp_echo.py [--rounds N] [--seconds S] [--dpdk] [--benchtop PATH]
Needs: a release build (built on first use; `--benchtop PATH` runs that binary instead and
builds nothing, for a smoke run of the script, not for figures) and sockperf (installed with apt-get when
missing, which needs root); with --dpdk, a build with DPDK (the default `dpdk` feature:
libdpdk-dev and pkg-config, as scripts/test installs them).
"""

import argparse
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BENCHTOP = os.path.join(TARGET, "release", "benchtop")
BACKENDS = ["tokio", "poll", "mmsg"]
CLIENTS = [1, 4, 16]


def run_timed(cmd, **kw):
    """Runs cmd to its end; returns its output and the cores its process tree kept busy
    (CPU seconds of it and its reaped descendants over wall seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    out = subprocess.run(cmd, check=True, **kw)
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, cpu / wall


def benchtop(args, tmp, tag):
    d = os.path.join(tmp, tag)
    cmd = [BENCHTOP, "run", "udp-echo", *args, "--profile", "none", "--quiet", "--record", d]
    _, cores = run_timed(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(d, "session.json")) as f:
        meta = json.load(f)
    shutil.rmtree(d, ignore_errors=True)
    figures = {fig["name"]: fig["value"] for fig in meta["summary"]}
    figures["cores"] = cores
    return figures


def spread(values, digits):
    """The lowest and highest of `values`: `[min–max]`, with `digits` decimals and thousands
    separated."""
    return f"[{min(values):,.{digits}f}–{max(values):,.{digits}f}]"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned(cpu, cmd, pin):
    return ["taskset", "-c", str(cpu), *cmd] if pin else cmd


def sockperf(seconds, pin):
    """p50 and p99 round trip (µs) of sockperf ping-pong, 64 B UDP on loopback, and the
    cores the client and server kept busy; with `pin`, the server on the last CPU and the
    client on the first."""
    port = str(free_port())
    cpus = sorted(os.sched_getaffinity(0))
    server = subprocess.Popen(pinned(cpus[-1], ["sockperf", "server", "-i", "127.0.0.1", "-p", port], pin),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    try:
        time.sleep(0.3)
        out = subprocess.run(
            pinned(cpus[0], ["sockperf", "ping-pong", "-i", "127.0.0.1", "-p", port, "-m", "64",
                             "-t", str(seconds), "--full-rtt"], pin),
            check=True, capture_output=True, text=True).stdout
    finally:
        server.terminate()
        server.wait()
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cores = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) / wall
    pct = {float(p): float(v) for p, v in
           re.findall(r"percentile\s+([\d.]+)\s+=\s+([\d.]+)", out)}
    return pct[50.0], pct[99.0], cores


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=3, help="length of each latency run and each throughput point")
    ap.add_argument("--dpdk", action="store_true",
                    help="add --backend dpdk (net_memif between two processes) and pin sockperf's sides")
    ap.add_argument("--benchtop", metavar="PATH",
                    help="run this benchtop binary and build nothing (a smoke run of the script)")
    args = ap.parse_args()
    backends = BACKENDS + (["dpdk"] if args.dpdk else [])
    global BENCHTOP
    if args.benchtop:
        BENCHTOP = os.path.abspath(args.benchtop)
    else:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    if shutil.which("sockperf") is None:
        print("sockperf is missing: installing it (apt-get install -y sockperf)", file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-qq", "sockperf"], check=True,
                       stdout=subprocess.DEVNULL)
    s = f"{args.seconds}s"
    tmp = tempfile.mkdtemp(prefix="benchtop-udp-echo-bench-")
    p50 = {k: [] for k in backends + ["sockperf"]}
    p99 = {k: [] for k in backends + ["sockperf"]}
    cores = {k: [] for k in backends + ["sockperf"]}
    mps = {(b, n): [] for b in backends for n in CLIENTS}
    mbs = {(b, n): [] for b in backends for n in CLIENTS}
    for r in range(args.rounds):
        for backend in backends:
            fig = benchtop(["--backend", backend, "--duration", s], tmp, f"lat-{backend}-{r}")
            p50[backend].append(fig["rtt_p50_us"])
            p99[backend].append(fig["rtt_p99_us"])
            cores[backend].append(fig["cores"])
        a, b, c = sockperf(args.seconds, args.dpdk)
        p50["sockperf"].append(a)
        p99["sockperf"].append(b)
        cores["sockperf"].append(c)
        for backend in backends:
            fig = benchtop(["--backend", backend, "--mode", "throughput", "--buffer-size", "1024",
                            "--sweep", "num-clients=" + ",".join(map(str, CLIENTS)),
                            "--duration", f"{args.seconds * len(CLIENTS)}s"],
                           tmp, f"tput-{backend}-{r}")
            for n in CLIENTS:
                mps[(backend, n)].append(fig[f"num-clients={n}:messages_per_second"])
                mbs[(backend, n)].append(fig[f"num-clients={n}:mb_per_second"])
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)

    med = statistics.median
    ref = med(p50["sockperf"])
    print(f"\n64 B UDP closed loop on loopback, one client: round trip in µs "
          f"(medians of {args.rounds} interleaved rounds of {s}, [lowest–highest round])\n")
    print(f"{'configuration':<28}{'p50':>26}{'p99':>30}{'p50 / sockperf':>16}{'CPU (cores)':>20}")
    for key in backends + ["sockperf"]:
        label = "sockperf ping-pong" if key == "sockperf" else f"udp-echo --backend {key}"
        lat = [f"{med(v[key]):,.1f} {spread(v[key], 1)}" for v in (p50, p99)]
        cpu = f"{med(cores[key]):.2f} {spread(cores[key], 2)}"
        print(f"{label:<28}{lat[0]:>26}{lat[1]:>30}{med(p50[key]) / ref:>15.2f}x{cpu:>20}")
    best = min(backends, key=lambda k: med(p50[k]))
    print(f"\nbest back end: {best}, p50 {med(p50[best]) / ref:.2f}x sockperf's (goal: at most 1.2x)")

    print(f"\n1 KiB UDP, --mode throughput: messages/s [lowest–highest round] (MB/s), medians of "
          f"{args.rounds} rounds\n")
    print(f"{'back end':<12}" + "".join(f"{f'{n} client' + ('s' if n > 1 else ''):>40}" for n in CLIENTS))
    for backend in backends:
        cells = "".join(
            f"{f'{med(mps[(backend, n)]):,.0f} {spread(mps[(backend, n)], 0)} ({med(mbs[(backend, n)]):.1f})':>40}"
            for n in CLIENTS)
        print(f"{backend:<12}{cells}")
    if args.dpdk:
        lat = med(p50["dpdk"]) / med(p50["poll"])
        rate = med(mps[("dpdk", 1)]) / med(mps[("poll", 1)])
        print(f"\ndpdk against poll: p50 {lat:.2f}x (goal: below 1), 1-client messages/s {rate:.2f}x "
              f"(goal: above 1)")


if __name__ == "__main__":
    main()
