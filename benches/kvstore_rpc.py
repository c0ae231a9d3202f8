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
RPC/s (goal: at least 10×).

Usage: benches/kvstore_rpc.py [--rounds N] [--seconds S] [--no-ghz]
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
BENCHTOP = os.path.join(ROOT, "target", "release", "benchtop")
TOOLS = os.path.join(ROOT, "target", "tools")
GHZ = os.path.join(TOOLS, "gopath", "bin", "ghz")
PROTO = os.path.join(ROOT, "workloads", "proto")
JAVA_REFERENCE = 4700.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ours(concurrency, value_size, seconds, tmp, threads=None):
    d = tempfile.mkdtemp(dir=tmp)
    cmd = [BENCHTOP, "run", "kvstore", "--disable-work-simulation", "--listen", "127.0.0.1:0",
           "--concurrency", str(concurrency), "--duration", f"{seconds}s",
           "--mean-value-size", str(value_size), "--profile", "none", "--quiet",
           "--record", os.path.join(d, "s")]
    if threads is not None:
        cmd += ["--server-threads", str(threads[0]), "--client-threads", str(threads[1])]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(d, "s", "session.json")) as f:
        figures = {fig["name"]: fig["value"] for fig in json.load(f)["summary"]}
    shutil.rmtree(d, ignore_errors=True)
    return figures["rpcs_per_second"]


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
        return json.loads(out)["rps"]
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
    ap.add_argument("--no-ghz", action="store_true")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "benchtop"], cwd=ROOT, check=True)
    os.makedirs(TOOLS, exist_ok=True)
    ghz = not args.no_ghz and ensure_ghz()
    configs = []
    for c in (1, 8, 64):
        configs.append((f"benchtop client, 64 KiB values, c={c}", lambda t, c=c: ours(c, 65536, args.seconds, t)))
        configs.append((f"benchtop client, 64 B values, c={c}", lambda t, c=c: ours(c, 64, args.seconds, t)))
        if c > 1:
            configs.append((f"benchtop client, 64 B values, c={c}, 1+1 threads",
                            lambda t, c=c: ours(c, 64, args.seconds, t, (1, 1))))
        if ghz:
            configs.append((f"ghz Delete, c={c}", lambda t, c=c: with_ghz(c, args.seconds, t)))
    results = {name: [] for name, _ in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, fn in configs:
                results[name].append(fn(tmp))
                print(f"round {r + 1}: {name}: {results[name][-1]:.0f} RPC/s", file=sys.stderr)
    print(f"\n{'configuration':<48} {'RPC/s (median)':>15} {'× Java 4,700':>13}")
    for name, _ in configs:
        m = statistics.median(results[name])
        print(f"{name:<48} {m:>15.0f} {m / JAVA_REFERENCE:>12.1f}×")


if __name__ == "__main__":
    main()
