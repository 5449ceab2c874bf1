#!/usr/bin/python3
"""The etcd rendezvous at scale, on loopback against a real 3-member etcd started here with
--metrics extensive: the start-up of N agents (1,024 by default) in the etcd mode against
npu_run's static mode, and the steady load N idle agents put on etcd, read from etcd's own
/metrics (requests handled per second by method, the p99 of its request handling and of its
backend commits), beside a probe's own p99 for a one-key read, with and without the agents.

Each agent (--nproc-per-node 1, the default lease TTL of 5 s: renewals every 1.7 s, heartbeats
every 0.5 s) runs one worker that appends "start EPOCH" to a shared file and sleeps; the agents'
output goes to files in a scratch directory. The load is measured over --window seconds once
every worker runs, after --settle seconds.

    /usr/bin/python3 scripts/bench/etcd_scale.py --npu-run build/npu_run [--agents 1024]
"""

import argparse
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

from bench_common import MARKER, ROOT, free_port, kill_leftovers, wait_until
from etcd_failover import Etcd, b64

WORKER = 'echo "start $(date +%s.%N)" >> "$NPU_RUN_BENCH_STARTS"; exec sleep 3600'
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$')


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    parser.add_argument("--agents", type=int, default=1024)
    parser.add_argument("--window", type=float, default=30.0, help="seconds of idle load measured")
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--lease-ttl", type=int, default=0,
                        help="--rdzv-conf lease_ttl= (0: npu_run's default for the job's size)")
    parser.add_argument("--static", default="on", choices=["on", "off"],
                        help="also time the static mode's start-up")
    return parser.parse_args()


def launch(args, mode, etcd, scratch, env):
    """Starts the agents of one job (node 0 first in the static mode); returns their processes
    and the file their workers append to."""
    starts = os.path.join(scratch, f"starts-{mode}")
    env = dict(env, NPU_RUN_BENCH_STARTS=starts)
    port = free_port()
    procs = []
    for rank in range(args.agents):
        if mode == "etcd":
            shape = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
                     "--rdzv-id", f"scale{port}"]
            if args.lease_ttl:
                shape += ["--rdzv-conf", f"lease_ttl={args.lease_ttl}"]
        else:
            shape = ["--node-rank", str(rank), "--master-addr", "127.0.0.1",
                     "--master-port", str(port)]
        cmd = [args.npu_run, "--nnodes", str(args.agents), "--nproc-per-node", "1", *shape,
               "--rdzv-timeout", "600", "--no-python", "/bin/sh", "-c", WORKER]
        with open(os.path.join(scratch, f"{mode}-{rank}.log"), "w") as log:
            procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))
    return procs, starts


def start_times(path):
    try:
        with open(path) as f:
            return [float(line.split()[1]) for line in f if line.startswith("start ")]
    except OSError:
        return []


def stop(procs, marker):
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in procs:
        p.wait()
    kill_leftovers(marker)


def scrape(etcd):
    """Every sample of every member's /metrics, summed over the members."""
    total = {}
    for port in etcd.clients:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as answer:
            for line in answer.read().decode().splitlines():
                m = SAMPLE.match(line)
                if m and not line.startswith("#"):
                    key = (m.group(1), m.group(2) or "")
                    total[key] = total.get(key, 0.0) + float(m.group(3))
    return total


def delta(before, after, name, label_filter=""):
    return sum(v - before.get(k, 0.0) for k, v in after.items()
               if k[0] == name and label_filter in k[1])


def p99_of_histogram(before, after, name, label_filter=""):
    """The 99th percentile of what a histogram saw between two scrapes (its bucket's bound)."""
    buckets = {}
    for (metric, labels), value in after.items():
        if metric != f"{name}_bucket" or label_filter not in labels:
            continue
        bound = float(re.search(r'le="([^"]+)"', labels).group(1))
        buckets[bound] = buckets.get(bound, 0.0) + value - before.get((metric, labels), 0.0)
    if not buckets or buckets[max(buckets)] <= 0:
        return None
    total = buckets[max(buckets)]
    return next(b for b in sorted(buckets) if buckets[b] >= 0.99 * total)


class Probe(threading.Thread):
    """Reads one key from the first member ten times a second; keeps each read's latency."""

    def __init__(self, etcd):
        super().__init__(daemon=True)
        self.etcd, self.latencies, self.running = etcd, [], True

    def run(self):
        while self.running:
            began = time.perf_counter()
            if self.etcd.post("/v3/kv/range", {"key": b64("/probe")}) is not None:
                self.latencies.append(time.perf_counter() - began)
            time.sleep(0.1)


def cpu_seconds(pids):
    """User and system CPU seconds the processes have used so far."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def window(args, etcd, agents=()):
    """etcd's request rate and latencies over one window, and the CPU share of etcd and of the
    agents, as a dict of figures."""
    probe = Probe(etcd)
    before = scrape(etcd)
    etcd_pids, agent_pids = [p.pid for p in etcd.procs], [p.pid for p in agents]
    cpu_before = (cpu_seconds(etcd_pids), cpu_seconds(agent_pids))
    probe.start()
    time.sleep(args.window)
    probe.running = False
    probe.join()
    cpu_after = (cpu_seconds(etcd_pids), cpu_seconds(agent_pids))
    after = scrape(etcd)
    lat = sorted(probe.latencies)
    methods = {}
    for (metric, labels), value in after.items():
        if metric == "grpc_server_handled_total":
            method = re.search(r'grpc_method="([^"]+)"', labels).group(1)
            methods[method] = methods.get(method, 0.0) + (value - before.get((metric, labels), 0.0))
    return {
        "methods": {m: n / args.window for m, n in methods.items() if n > 0},
        "etcd_cpu": (cpu_after[0] - cpu_before[0]) / args.window,
        "agents_cpu": (cpu_after[1] - cpu_before[1]) / args.window,
        "handled": delta(before, after, "grpc_server_handled_total") / args.window,
        "keepalive": delta(before, after, "grpc_server_handled_total",
                           'grpc_method="LeaseKeepAlive"') / args.window,
        "handling_p99": p99_of_histogram(before, after, "grpc_server_handling_seconds",
                                         'grpc_type="unary"'),
        "commit_p99": p99_of_histogram(before, after, "etcd_disk_backend_commit_duration_seconds"),
        "probe_p99": lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None,
    }


def rss_mb(procs):
    """The median resident size of the agents, in MB."""
    sizes = []
    for p in procs:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                sizes += [int(l.split()[1]) / 1024 for l in f if l.startswith("VmRSS:")]
        except OSError:
            pass
    return statistics.median(sizes) if sizes else None


def ms(seconds):
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def timed_start(args, mode, etcd, scratch, env, marker, keep=False):
    """Seconds from the first agent's start to the last worker's; the agents when `keep`."""
    began = time.time()
    procs, starts = launch(args, mode, etcd, scratch, env)
    try:
        if not wait_until(lambda: len(start_times(starts)) >= args.agents, 180):
            raise RuntimeError(f"{mode}: {len(start_times(starts))} of {args.agents} workers "
                               f"started; see {scratch}")
        return max(start_times(starts)) - began, procs
    finally:
        if not keep:
            stop(procs, marker)


def main():
    args = parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # node 0 holds a socket per agent
    marker = f"etcd-scale-{os.getpid()}"
    env = dict(os.environ, **{MARKER: marker})
    scratch = tempfile.mkdtemp(prefix="etcd-scale-")
    etcd = Etcd(extra=("--metrics", "extensive"))
    procs = []
    try:
        quiet = window(args, etcd)
        static = None
        if args.static == "on":
            static, _ = timed_start(args, "static", etcd, scratch, env, marker)
        elected, procs = timed_start(args, "etcd", etcd, scratch, env, marker, keep=True)
        rss = rss_mb(procs)
        time.sleep(args.settle)
        idle = window(args, etcd, procs)
    finally:
        stop(procs, marker)
        etcd.close()
    n = args.agents
    print(f"| agents | static (node 0 first) | etcd |\n|---|---|---|")
    print(f"| {n} | {'-' if static is None else f'{static:.2f} s'} | {elected:.2f} s |\n")
    print(f"| etcd, {args.window:.0f} s windows, 3 members | no agents | {n} idle agents |")
    print("|---|---|---|")
    print(f"| requests handled per second (all methods) | {quiet['handled']:.1f} | "
          f"{idle['handled']:.1f} |")
    print(f"| of which lease renewals (LeaseKeepAlive) | {quiet['keepalive']:.1f} | "
          f"{idle['keepalive']:.1f} |")
    print(f"| CPU cores busy: etcd's 3 members | {quiet['etcd_cpu']:.2f} | {idle['etcd_cpu']:.2f} |")
    print(f"| CPU cores busy: the agents | - | {idle['agents_cpu']:.2f} |")
    for key, what in (("handling_p99", "p99 of etcd's handling of unary requests"),
                      ("commit_p99", "p99 of etcd's backend commits"),
                      ("probe_p99", "p99 of a probe's one-key read (client side)")):
        print(f"| {what} | {ms(quiet[key])} | {ms(idle[key])} |")
    print(f"\nrequests per second by method with the agents: "
          + ", ".join(f"{m} {r:.1f}" for m, r in sorted(idle["methods"].items(),
                                                          key=lambda i: -i[1])))
    print(f"\nagent resident size: {rss:.1f} MB median" if rss else "")
    print(f"machine: {os.cpu_count()} cores, {os.uname().release}; npu_run: {args.npu_run}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
