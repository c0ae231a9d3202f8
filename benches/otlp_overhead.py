#!/usr/bin/env python3
"""What streaming a run to an OpenTelemetry Collector (--otlp) costs, measured side by side.

1. Throughput: the ring (tell) recorded without --otlp and with --otlp to a local
   collector (the one scripts/otelcol builds, its debug exporter at basic verbosity),
   interleaved round by round; the table gives messages/s medians and the change, also
   paired within a round (the machine is shared and noisy: compare within a round), and
   the CPU the recorder's sending thread (bt-otlp) and the collector spent per second of
   run: where a cost would come from.
   With `--before BINARY` (another build of benchtop, e.g. the one before a change) both
   builds run in every round, so the table is a before/after of the cost.
2. Bytes per interval: session.json's `otlp` (requests and their protobuf bytes) over
   the rows, for the ring and for kvstore, each with the default `--profile both` and with `--profile all`
   (on-CPU, off-CPU and page-fault stacks), and with the worker's allocation profiles on
   (the default) and off (`--alloc-sample 0`).
3. The collector away: ring runs side by side for `--down` seconds, one without --otlp,
   one streaming to a port nobody listens on (every connection refused) and one to a
   listener that accepts and never answers (every request times out, so the queue fills);
   the recorder's resident memory (VmRSS of the benchtop process, not the worker)
   sampled every second, printed at ten points. Bounded means flat once the queue is full.

Usage: benches/otlp_overhead.py [--rounds N] [--duration 10s] [--down 600]
       [--profile release|debug] [--before BINARY] [--only throughput|bytes|down]
Needs: scripts/otelcol's collector (built on first use) and a build of benchtop. Prints
the load average before and after each part.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
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


def load():
    return os.getloadavg()[0]


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


def hung_listener():
    """A port that accepts connections and never answers: every request times out."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held = []

    def accept():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            held.append(conn)
            if len(held) > 1000:
                held.pop(0).close()

    threading.Thread(target=accept, daemon=True).start()
    return sock, sock.getsockname()[1]


TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(stat_path):
    """utime + stime of a /proc stat file, seconds (None once it is gone)."""
    try:
        with open(stat_path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return None


def sender_cpu_s(pid):
    """CPU seconds of the recorder's OTLP threads (bt-otlp, bt-otlp-names) so far, to the
    nanosecond (schedstat's time on a CPU; stat's ticks are 10 ms)."""
    total = 0.0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                # bt-otlp, and bt-otlp-names that builds the allocation profiles.
                if not f.read().strip().startswith("bt-otlp"):
                    continue
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return total


def record(benchtop, workload, extra, tmp, label, otlp=None, collector=None):
    """Records a run; returns session.json, its rows, and the CPU seconds its OTLP thread
    and the collector spent on it (0 without --otlp)."""
    d = os.path.join(tmp, label)
    cmd = [benchtop, "run", workload, *extra, "--quiet", "--record", d]
    if otlp:
        cmd += ["--otlp", otlp]
    col_before = cpu_s(f"/proc/{collector}/stat") if collector else None
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sender = 0.0
    while proc.poll() is None:
        s = sender_cpu_s(proc.pid)
        if s is not None:
            sender = max(sender, s)
        time.sleep(0.2)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}")
    col_after = cpu_s(f"/proc/{collector}/stat") if collector else None
    with open(os.path.join(d, "session.json")) as f:
        meta = json.load(f)
    with open(os.path.join(d, "timeseries.jsonl")) as f:
        rows = sum(1 for _ in f)
    subprocess.run(["rm", "-rf", d], check=True)
    collector_s = (col_after - col_before) if col_before is not None and col_after is not None else 0.0
    return meta, rows, sender, collector_s


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def throughput(builds, args, tmp, endpoint, collector):
    configs = []
    for name, binary in builds:
        configs.append((f"{name} no --otlp", binary, None))
        configs.append((f"{name} --otlp", binary, endpoint))
    results = {label: [] for label, _, _ in configs}
    cpu = {label: [] for label, _, _ in configs}
    # Rounds enough that the ring runs for the whole duration, every interval streamed.
    ring = ["--num-rounds", "1000000000", "--duration", args.duration]
    before = load()
    for r in range(args.rounds):
        order = configs if r % 2 == 0 else list(reversed(configs))
        for label, binary, otlp in order:
            meta, _, sender, collector_s = record(binary, "ring", ring, tmp, f"ring-{r}", otlp,
                                                   collector.pid)
            figures = {f["name"]: f["value"] for f in meta["summary"]}
            results[label].append(figures["messages_per_second"])
            cpu[label].append((sender, collector_s))
    after = load()
    print(f"ring (tell), {args.duration} runs, {args.rounds} rounds interleaved "
          f"(load average {before:.2f} before, {after:.2f} after)")
    seconds = float(args.duration.rstrip("s"))
    print(f"{'configuration':<28}{'median msg/s':>16}{'vs its build without':>22}"
          f"{'bt-otlp ms/s':>14}{'collector ms/s':>16}")
    for name, _ in builds:
        plain = results[f"{name} no --otlp"]
        streamed = results[f"{name} --otlp"]
        base = statistics.median(plain)
        for label, xs in [(f"{name} no --otlp", plain), (f"{name} --otlp", streamed)]:
            m = statistics.median(xs)
            sender = statistics.median(c[0] for c in cpu[label]) / seconds * 1000
            col = statistics.median(c[1] for c in cpu[label]) / seconds * 1000
            print(f"{label:<28}{m:>16,.0f}{(m / base - 1) * 100:>+21.1f}%{sender:>14.1f}{col:>16.1f}")
        paired = [s / p - 1 for s, p in zip(streamed, plain)]
        print(f"  {name}: paired change per round: median {statistics.median(paired) * 100:+.1f}% "
              f"(min {min(paired) * 100:+.1f}%, max {max(paired) * 100:+.1f}%)")
    print()


def bytes_per_interval(benchtop, args, tmp, endpoint):
    before = load()
    lines = []
    for workload in ["ring", "kvstore"]:
        # The worker's allocation profiles (alloc, live) on at the default rate, and off.
        for profile, alloc in [("both", "on"), ("both", "off"), ("all", "on")]:
            rounds = ["--num-rounds", "1000000000"] if workload == "ring" else []
            sample = [] if alloc == "on" else ["--alloc-sample", "0"]
            meta, rows, _, _ = record(benchtop, workload,
                                      rounds + sample + ["--duration", args.duration,
                                                         "--profile", profile],
                                      tmp, f"bytes-{workload}", endpoint)
            o = meta["otlp"]
            lines.append(f"{workload:<10}{profile:<9}{alloc:<7}{rows:>6}{o['requests']:>10}"
                         f"{o['bytes']:>12,}{o['bytes'] / max(rows, 1):>16,.0f}{o['dropped']:>9}")
    print(f"bytes sent, {args.duration} runs at 1 s intervals "
          f"(load average {before:.2f} before, {load():.2f} after)")
    print(f"{'workload':<10}{'profile':<9}{'alloc':<7}{'rows':>6}{'requests':>10}{'bytes':>12}"
          f"{'bytes/interval':>16}{'dropped':>9}")
    for line in lines:
        print(line)
    print()


def down(benchtop, args, tmp):
    hung, hung_port = hung_listener()
    configs = [("no --otlp", None),
               ("collector away", f"http://127.0.0.1:{free_port()}"),
               ("collector hung", f"http://127.0.0.1:{hung_port}")]
    before = load()
    procs = []
    for i, (label, otlp) in enumerate(configs):
        d = os.path.join(tmp, f"down-{i}")
        cmd = [benchtop, "run", "ring", "--num-rounds", "1000000000", "--duration", f"{args.down}s",
               "--quiet", "--record", d]
        if otlp:
            cmd += ["--otlp", otlp]
        procs.append((label, d, subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.DEVNULL), []))
    start = time.time()
    while any(p.poll() is None for _, _, p, _ in procs):
        for _, _, p, samples in procs:
            kb = rss_kb(p.pid) if p.poll() is None else None
            if kb is not None:
                samples.append((time.time() - start, kb))
        time.sleep(1)
    hung.close()
    print(f"ring for {args.down} s, the three side by side: recorder RSS (MiB) by time "
          f"(load average {before:.2f} before, {load():.2f} after)")
    print(f"{'t (s)':>8}" + "".join(f"{label:>18}" for label, _, _, _ in procs))
    for tenth in range(1, 11):
        cells = []
        for _, _, _, samples in procs:
            at = [kb for t, kb in samples if t <= tenth * args.down / 10 + 0.5]
            cells.append(f"{at[-1] / 1024:>18.1f}" if at else f"{'-':>18}")
        print(f"{tenth * args.down / 10:>8.0f}" + "".join(cells))
    print(f"{'peak':>8}" + "".join(f"{max(kb for _, kb in s) / 1024:>18.1f}" if s else f"{'-':>18}"
                                   for _, _, _, s in procs))
    for label, d, _, _ in procs:
        with open(os.path.join(d, "session.json")) as f:
            meta = json.load(f)
        o = meta.get("otlp")
        if o:
            print(f"{label}: status {meta['status']}, {o['requests']} requests arrived, "
                  f"{o['dropped']} batches dropped")
            for w in meta["warnings"]:
                if w.startswith("OTLP"):
                    print("  " + w[:240])
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--down", type=int, default=600, help="seconds of the collector-away runs")
    ap.add_argument("--profile", default="release", choices=["release", "debug"])
    ap.add_argument("--before", help="another benchtop binary, measured beside this build")
    ap.add_argument("--only", choices=["throughput", "bytes", "down"])
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    if not args.no_build:
        build = ["cargo", "build", "-q", "-p", "benchtop"] + (["--release"] if args.profile == "release" else [])
        subprocess.run(build, cwd=ROOT, check=True)
    benchtop = os.path.join(TARGET, args.profile, "benchtop")
    builds = ([("before", args.before)] if args.before else []) + [("this", benchtop)]
    print(f"{os.cpu_count()} CPUs; load average {load():.2f}\n")
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "throughput", "bytes"):
            collector, port = start_collector(tmp)
            endpoint = f"http://127.0.0.1:{port}"
            try:
                if args.only in (None, "throughput"):
                    throughput(builds, args, tmp, endpoint, collector)
                if args.only in (None, "bytes"):
                    bytes_per_interval(benchtop, args, tmp, endpoint)
            finally:
                collector.kill()
                collector.wait()
        if args.only in (None, "down"):
            down(benchtop, args, tmp)


if __name__ == "__main__":
    main()
