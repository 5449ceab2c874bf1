#!/usr/bin/python3
"""Rendezvous scale benchmark: N simulated agents joining one npu_run rendezvous server.

For each N, `npu_run rdzv-server --nnodes N` runs under GNU time (for its peak RSS) and
ceil(N / 4096) load-generator processes (build/npu_run_rdzv_loadgen, the real client code)
connect N agents at once; every agent joins, reports success and waits for the job's decision.
Reported per N (median and min-max over --runs runs):
  - time to full assignment: from starting the load generators to the last agent's assignment;
  - server peak RSS;
  - failed joins (must be 0, also with a listen backlog far below N: refused or dropped
    connections are retried with backoff).

    /usr/bin/python3 scripts/bench/rendezvous_scale.py [--sizes 1024,4096,16384] [--runs 5]
"""

import argparse
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AGENTS_PER_PROCESS = 4096  # well under the open-files limit of one load-generator process



def wait_listening(port, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.01)
    sys.exit(f"the rendezvous server did not listen on port {port}")


def one_run(args, n, backlog):
    port = free_port()
    with tempfile.NamedTemporaryFile("r") as rss_file:
        server_cmd = ["/usr/bin/time", "-f", "%M", "-o", rss_file.name, args.npu_run, "rdzv-server",
                      "--port", str(port), "--nnodes", str(n), "--host", "127.0.0.1", "--log-level", "error",
                      "--heartbeat-interval", "5", "--heartbeat-timeout", "120"]
        if backlog:
            server_cmd += ["--rdzv-backlog", str(backlog)]
        server = subprocess.Popen(server_cmd)
        # The server answers a plain connect; that probe joins nobody and closes at once.
        wait_listening(port)
        start_ms = time.time() * 1000
        generators = []
        for i in range(math.ceil(n / AGENTS_PER_PROCESS)):
            agents = min(AGENTS_PER_PROCESS, n - i * AGENTS_PER_PROCESS)
            generators.append(subprocess.Popen(
                [args.loadgen, "--port", str(port), "--nnodes", str(n), "--agents", str(agents),
                 "--first", str(i * AGENTS_PER_PROCESS), "--rdzv-timeout", "120"],
                stdout=subprocess.PIPE, text=True))
        results = [json.loads(g.communicate()[0]) for g in generators]
        server.wait(timeout=60)
        rss_mb = int(rss_file.read().split()[-1]) / 1024
    failed = sum(r["failed"] for r in results) + sum(r["agents"] - r["decided"] for r in results)
    if server.returncode != 0:
        failed += 1
    seconds = (max(r["last_assigned_ms"] for r in results) - start_ms) / 1000
    first_failure = next((r["first_failure"] for r in results if r["first_failure"]), "")
    return seconds, rss_mb, failed, first_failure


def fmt(values, unit, digits=2):
    return f"{statistics.median(values):.{digits}f} {unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    parser.add_argument("--loadgen", default=os.path.join(ROOT, "build", "npu_run_rdzv_loadgen"))
    parser.add_argument("--sizes", default="1024,4096,16384")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--small-backlog", type=int, default=128,
                        help="also run the largest size with this listen backlog (0: skip)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    somaxconn = open("/proc/sys/net/core/somaxconn").read().strip()
    syn_backlog = open("/proc/sys/net/ipv4/tcp_max_syn_backlog").read().strip()

    cases = [(n, 0) for n in sizes]
    if args.small_backlog:
        cases.append((sizes[-1], args.small_backlog))
    print(f"## Rendezvous: N agents joining one server ({args.runs} runs each; median, min-max)\n")
    print(f"machine: {os.cpu_count()} cores; net.core.somaxconn={somaxconn}, "
          f"net.ipv4.tcp_max_syn_backlog={syn_backlog}; {AGENTS_PER_PROCESS} agents per load-generator process\n")
    print("| agents | listen backlog | time to full assignment | server peak RSS | failed joins |")
    print("|---|---|---|---|---|")
    status = 0
    for n, backlog in cases:
        runs = [one_run(args, n, backlog) for _ in range(args.runs)]
        failed = sum(r[2] for r in runs)
        print(f"| {n} | {backlog or 'somaxconn'} | {fmt([r[0] for r in runs], 's')} | "
              f"{fmt([r[1] for r in runs], 'MB', 1)} | {failed} |", flush=True)
        if failed:
            status = 1
            print(f"first failure: {next(r[3] for r in runs if r[3]) if any(r[3] for r in runs) else 'unknown'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
