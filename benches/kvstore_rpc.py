#!/usr/bin/env python3
"""kvstore without simulated work: RPC/s at 1, 8 and 64 concurrent RPCs, and ghz against
the same server, measured side by side.

Each round runs every configuration back to back (interleaved) on a release build:

- benchtop's own client and server in one worker (`benchtop run kvstore
  --disable-work-simulation --concurrency N`), with the original's mix and sizes (keys of
  64 bytes, values of 64 KiB on average) and with small values (64 bytes), so that the
  RPC's cost shows apart from copying; and with one runtime thread each for server and
  client (`--server-threads 1 --client-threads 1`), which on a small machine keeps the
  two sides from preempting each other;
- ghz (the Go gRPC load tool, installed from the Go module proxy into target/tools on
  first use) against `benchtop run kvstore --role server`, calling Delete with a 3-byte
  key (an empty answer; ghz sends the same request every time), with N concurrent
  workers on one connection.

The table gives medians over the rounds and the ratio to the Java reference's 4,700
RPC/s (goal: at least 10×), and each configuration's payload (keys and values carried,
requests and answers, MB/s) beside a memcpy benchmark of this machine: 64 KiB blocks
copied in cache, as a value is, and 64 MiB blocks through memory (Python's memoryview
assignment, which is libc's memmove; one core). A value crosses four copies on its way
(prost's encoding, the kernel's send and receive, tonic's decode buffer), so the copies
alone would cap the payload near a quarter of the in-cache figure per core.

With work (`--work-seconds`, 0 to leave it out; `--work-only` for nothing else), one
sequential client with the original's delays and sizes against the theoretical 25 RPC/s
(40 ms of simulated work per RPC): how far short each round fell, in percent (goal:
within 0.5 %), and the RPC's own cost beyond the work (`rpc_cost_ms`), which the client
has the server take out of the work.

Usage: benches/kvstore_rpc.py [--rounds N] [--seconds S] [--work-seconds S] [--work-only]
                              [--no-ghz]
Needs: cargo; go (for ghz) unless --no-ghz.
"""

import argparse
import json
import os
import re
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
TOOLS = os.path.join(TARGET, "tools")
GHZ = os.path.join(TOOLS, "gopath", "bin", "ghz")
PROTO = os.path.join(ROOT, "workloads", "proto")
JAVA_REFERENCE = 4700.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


THEORETICAL_WITH_WORK = 25.0


def ours(concurrency, value_size, seconds, tmp, threads=None, work=False):
    """RPC/s, payload MB/s and the RPC's own cost beyond the work (ms, NaN without work)
    of one run of benchtop's client and server."""
    d = tempfile.mkdtemp(dir=tmp)
    cmd = [BENCHTOP, "run", "kvstore", "--listen", "127.0.0.1:0",
           "--concurrency", str(concurrency), "--duration", f"{seconds}s",
           "--mean-value-size", str(value_size), "--profile", "none", "--quiet",
           "--record", os.path.join(d, "s")]
    if not work:
        cmd.append("--disable-work-simulation")
    if threads is not None:
        cmd += ["--server-threads", str(threads[0]), "--client-threads", str(threads[1])]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(d, "s", "session.json")) as f:
        figures = {fig["name"]: fig["value"] for fig in json.load(f)["summary"]}
    shutil.rmtree(d, ignore_errors=True)
    return (figures["rpcs_per_second"], figures.get("payload_mb_per_s", float("nan")),
            figures.get("rpc_cost_ms", float("nan")))


def memcpy_mb_per_s(block, total=1 << 30):
    """MB/s of copying `block`-byte buffers (memmove through memoryview), best of 3."""
    src = memoryview(bytearray(os.urandom(min(block, 1 << 20)) * max(1, block >> 20)))[:block]
    dst = memoryview(bytearray(block))
    reps = max(1, total // block)
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps):
            dst[:] = src
        best = max(best, reps * block / (time.perf_counter() - t) / 1e6)
    return best


def with_ghz(concurrency, seconds, tmp):
    port = free_port()
    d = tempfile.mkdtemp(dir=tmp)
    server = subprocess.Popen(
        [BENCHTOP, "run", "kvstore", "--role", "server", "--disable-work-simulation",
         "--listen", f"127.0.0.1:{port}", "--duration", f"{seconds + 5}s", "--profile", "none",
         "--quiet", "--record", os.path.join(d, "s")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        out = subprocess.run(
            [GHZ, "--insecure", "--import-paths", PROTO, "--proto", "kvstore.proto",
             "--call", "benchtop.kvstore.KeyValueService.Delete",
             "-d", '{"key":"a2V5"}', "-c", str(concurrency), "-z", f"{seconds}s",
             "--connections", "1", "-O", "json", f"127.0.0.1:{port}"],
            check=True, capture_output=True, text=True).stdout
        return json.loads(out)["rps"], float("nan"), float("nan")
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(d, ignore_errors=True)


def ensure_ghz():
    if os.path.exists(GHZ):
        return True
    if shutil.which("go") is None:
        print("go is missing: no ghz column (apt-get install golang-go)", file=sys.stderr)
        return False
    env = dict(os.environ, GOPATH=os.path.join(TOOLS, "gopath"), GOFLAGS="-mod=mod")
    r = subprocess.run(["go", "install", "github.com/bojand/ghz/cmd/ghz@latest"], env=env,
                       cwd=TOOLS, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"ghz could not be installed: {r.stderr.strip()[-500:]}", file=sys.stderr)
        return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--work-seconds", type=int, default=20)
    ap.add_argument("--no-ghz", action="store_true")
    ap.add_argument("--work-only", action="store_true",
                    help="only the with-work configuration (as --concurrency '' --no-ghz)")
    ap.add_argument("--concurrency", default="1,8,64",
                    help="comma-separated concurrency levels (default 1,8,64)")
    args = ap.parse_args()
    if args.work_only:
        args.concurrency, args.no_ghz = "", True
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    os.makedirs(TOOLS, exist_ok=True)
    ghz = not args.no_ghz and ensure_ghz()
    configs = []
    for c in [int(c) for c in args.concurrency.split(",") if c]:
        configs.append((f"benchtop client, 64 KiB values, c={c}", lambda t, c=c: ours(c, 65536, args.seconds, t)))
        configs.append((f"benchtop client, 64 B values, c={c}", lambda t, c=c: ours(c, 64, args.seconds, t)))
        if c > 1:
            configs.append((f"benchtop client, 64 B values, c={c}, 1+1 threads",
                            lambda t, c=c: ours(c, 64, args.seconds, t, (1, 1))))
        if ghz:
            configs.append((f"ghz Delete, c={c}", lambda t, c=c: with_ghz(c, args.seconds, t)))
    work_name = "with work: 1 sequential client, 64 KiB values"
    if args.work_seconds > 0:
        configs.append((work_name,
                        lambda t: ours(1, 65536, args.work_seconds, t, work=True)))
    results = {name: [] for name, _ in configs}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, fn in (configs if r % 2 == 0 else list(reversed(configs))):
                results[name].append(fn(tmp))
                rate, payload, _ = results[name][-1]
                print(f"round {r + 1}: {name}: {rate:.2f} RPC/s, {payload:.1f} MB/s payload",
                      file=sys.stderr)
    load_after = os.getloadavg()
    seconds = args.seconds if any(n != work_name for n, _ in configs) else args.work_seconds
    print(f"\nmedians of {args.rounds} rounds of {seconds} s; load average "
          f"{load_before[0]:.2f} {load_before[1]:.2f} before, "
          f"{load_after[0]:.2f} {load_after[1]:.2f} after")
    no_work = [name for name, _ in configs if name != work_name]
    if no_work:
        in_cache = memcpy_mb_per_s(64 << 10)
        in_memory = memcpy_mb_per_s(64 << 20)
        print(f"memcpy, one core: {in_cache:.0f} MB/s in 64 KiB blocks (in cache), "
              f"{in_memory:.0f} MB/s in 64 MiB blocks")
        print(f"\n{'configuration':<48} {'RPC/s (median)':>15} {'× Java 4,700':>13} "
              f"{'payload MB/s':>13} {'÷ memcpy 64K':>13}")
    for name in no_work:
        m = statistics.median(r for r, _, _ in results[name])
        payload = statistics.median(p for _, p, _ in results[name])
        print(f"{name:<48} {m:>15.0f} {m / JAVA_REFERENCE:>12.1f}× {payload:>13.1f} "
              f"{payload / in_cache:>13.4f}")
    if args.work_seconds > 0:
        rates = [r for r, _, _ in results[work_name]]
        work_costs = [c for _, _, c in results[work_name]]
        short = [100 * (1 - r / THEORETICAL_WITH_WORK) for r in rates]
        print(f"\n{work_name}, {args.work_seconds} s a round: median "
              f"{statistics.median(rates):.3f} RPC/s of the theoretical "
              f"{THEORETICAL_WITH_WORK:.0f}, {statistics.median(short):.2f} % short "
              f"(rounds: {', '.join(f'{x:.2f} %' for x in short)}); the RPC's own cost "
              f"beyond the work, taken out of it: median {statistics.median(work_costs):.3f} ms")


if __name__ == "__main__":
    main()
