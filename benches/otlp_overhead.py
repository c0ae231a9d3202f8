#!/usr/bin/env python3
"""What streaming a run to an OpenTelemetry Collector (--otlp) costs, measured side by side.

1. Throughput: the ring (tell) recorded without --otlp and with --otlp to a local
   collector (the one scripts/otelcol builds, its debug exporter at basic verbosity),
   interleaved round by round; the table gives messages/s medians and the change, also
   paired within a round (the machine is shared and noisy: compare within a round).
2. Bytes per interval: session.json's `otlp` (requests and their protobuf bytes) over
   the rows, for the ring and for kvstore.
3. The collector away: a run streaming to a port nobody listens on, the recorder's
   resident memory (VmRSS of the benchtop process, not the worker) sampled every second;
   bounded means flat once the queue is full.

Usage: benches/otlp_overhead.py [--rounds N] [--duration 10s] [--down 600]
       [--profile release|debug]
Needs: scripts/otelcol's collector (built on first use) and a build of benchtop.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))

CONFIG = """receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{port}
exporters:
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [debug]
    metrics:
      receivers: [otlp]
      exporters: [debug]
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_collector(tmp):
    binary = subprocess.run([os.path.join(ROOT, "scripts", "otelcol")], check=True,
                            capture_output=True, text=True).stdout.strip()
    port = free_port()
    config = os.path.join(tmp, "otelcol.yaml")
    with open(config, "w") as f:
        f.write(CONFIG.format(port=port))
    log = open(os.path.join(tmp, "otelcol.log"), "w")
    proc = subprocess.Popen([binary, "--config", config, "--feature-gates=+service.profilesSupport"],
                            stdout=log, stderr=log)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("the collector did not start: see " + log.name)


def record(benchtop, workload, extra, tmp, label, otlp=None):
    d = os.path.join(tmp, label)
    cmd = [benchtop, "run", workload, *extra, "--quiet", "--record", d]
    if otlp:
        cmd += ["--otlp", otlp]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(d, "session.json")) as f:
        meta = json.load(f)
    with open(os.path.join(d, "timeseries.jsonl")) as f:
        rows = sum(1 for _ in f)
    subprocess.run(["rm", "-rf", d], check=True)
    return meta, rows


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--down", type=int, default=600, help="seconds of the collector-away run")
    ap.add_argument("--profile", default="release", choices=["release", "debug"])
    ap.add_argument("--only-down", action="store_true", help="measure the collector-away run only")
    args = ap.parse_args()
    build = ["cargo", "build", "-q", "-p", "benchtop"] + (["--release"] if args.profile == "release" else [])
    subprocess.run(build, cwd=ROOT, check=True)
    benchtop = os.path.join(TARGET, args.profile, "benchtop")
    with tempfile.TemporaryDirectory() as tmp:
        collector, port = start_collector(tmp)
        endpoint = f"http://127.0.0.1:{port}"
        if args.only_down:
            collector.kill()
        try:
            if args.only_down:
                raise StopIteration
            # Rounds enough that the ring runs for the whole duration, every interval streamed.
            ring = ["--num-rounds", "1000000000", "--duration", args.duration]
            plain, streamed = [], []
            for r in range(args.rounds):
                order = [(False, plain), (True, streamed)] if r % 2 == 0 else [(True, streamed), (False, plain)]
                for with_otlp, out in order:
                    meta, _ = record(benchtop, "ring", ring, tmp, f"ring-{r}-{with_otlp}",
                                     endpoint if with_otlp else None)
                    figures = {f["name"]: f["value"] for f in meta["summary"]}
                    out.append(figures["messages_per_second"])
            print(f"ring (tell), {args.duration} runs, {args.rounds} rounds interleaved")
            print(f"{'configuration':<16}{'median msg/s':>16}{'change':>10}")
            base = statistics.median(plain)
            for name, xs in [("no --otlp", plain), ("--otlp", streamed)]:
                m = statistics.median(xs)
                print(f"{name:<16}{m:>16,.0f}{(m / base - 1) * 100:>+9.1f}%")
            paired = [s / p - 1 for s, p in zip(streamed, plain)]
            print(f"paired change per round: median {statistics.median(paired) * 100:+.1f}% "
                  f"(min {min(paired) * 100:+.1f}%, max {max(paired) * 100:+.1f}%)")
            print()
            print(f"{'workload':<10}{'rows':>6}{'requests':>10}{'bytes':>12}{'bytes/interval':>16}{'dropped':>9}")
            for workload, extra in [("ring", ring),
                                    ("kvstore", ["--duration", args.duration])]:
                meta, rows = record(benchtop, workload, extra, tmp, f"bytes-{workload}", endpoint)
                o = meta["otlp"]
                print(f"{workload:<10}{rows:>6}{o['requests']:>10}{o['bytes']:>12,}"
                      f"{o['bytes'] / max(rows, 1):>16,.0f}{o['dropped']:>9}")
        except StopIteration:
            pass
        finally:
            collector.kill()
            collector.wait()
        print()
        # The collector away (nobody listens on the port) against no --otlp, one after the
        # other: the recorder's own RSS grows with the stacks it learns either way.
        print(f"ring for {args.down} s: recorder RSS (MiB) by time")
        runs = {}
        for label, otlp in [("no --otlp", None), ("collector away", f"http://127.0.0.1:{free_port()}")]:
            d = os.path.join(tmp, "down-" + str(len(runs)))
            cmd = [benchtop, "run", "ring", "--num-rounds", "1000000000", "--duration", f"{args.down}s",
                   "--quiet", "--record", d]
            if otlp:
                cmd += ["--otlp", otlp]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            samples = []
            start = time.time()
            while proc.poll() is None:
                kb = rss_kb(proc.pid)
                if kb is not None:
                    samples.append((time.time() - start, kb))
                time.sleep(1)
            with open(os.path.join(d, "session.json")) as f:
                runs[label] = (samples, json.load(f))
        fracs = [0.1, 0.25, 0.5, 0.75, 1.0]
        print(f"{'t (s)':>8}" + "".join(f"{label:>18}" for label in runs))
        for frac in fracs:
            cells = []
            for samples, _ in runs.values():
                t, kb = samples[min(len(samples) - 1, int(frac * (len(samples) - 1)))]
                cells.append(f"{kb / 1024:>18.1f}")
            print(f"{frac * args.down:>8.0f}" + "".join(cells))
        meta = runs["collector away"][1]
        print(f"dropped batches: {meta['otlp']['dropped']}; status {meta['status']}")
        for w in meta["warnings"]:
            if w.startswith("OTLP"):
                print(w[:220])


if __name__ == "__main__":
    main()
