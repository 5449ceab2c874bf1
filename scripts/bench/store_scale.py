#!/usr/bin/python3
"""The workers' store at scale: the store traffic of a job's start (init_process_group, the
communicator bootstrap and a store barrier; bench/store_loadgen.cpp says what and why) for N
ranks, 8 per simulated node, against four stores side by side:

  torch 1.13   torch's TCPStore hosted by a Python process, as global rank 0 hosts it
  torch 2.6    the same with Debian 13's torch 2.6 (its non-libuv server; Debian has no libuv)
  agent        npu_run's store as node 0's agent serves it (store::StoreServer), every rank
               connected to it
  tiered       the same store, every simulated node's ranks connected to their node's proxy
               (the agent's NodeStoreProxy, the product's code, many per load-generator
               process), one connection per node to node 0
  floor        no store: where each node's proxy would be, a responder that answers every
               request at once with a fixed answer of the right shape. What the simulated
               ranks' own traffic costs on this machine's two cores; no store measured here
               can be faster (on a cluster each node carries its own ranks' share)

Reported per N: seconds from the start until the last rank is through, node 0's peak
connections (descriptors of the serving process), its peak RSS and the CPU time it used (on a
2-core machine the simulated ranks and proxies share the cores with node 0, so node 0's own
CPU is the measure of its load that does not depend on where the rest runs). One process may hold 20,000
descriptors on this machine (a hard limit root cannot raise here), so a store that takes one
connection per rank is measured up to 16,384 ranks; tiered takes one per node, so it goes on.

    /usr/bin/python3 scripts/bench/store_scale.py --sizes 1024,4096,16384,131072 [--runs 1]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import MARKER, TORCH2_PYTHON, free_port, kill_leftovers  # noqa: E402

RANKS_PER_PROCESS = 8000  # simulated ranks per load-generator process (2 descriptors each, tiered)
DIRECT_LIMIT = 16384      # one connection per rank: the serving process's open-files limit
TORCH_SERVER = """
import datetime, sys, time, torch, torch.distributed as dist
kwargs = {"use_libuv": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
store = dist.TCPStore("0.0.0.0", int(sys.argv[1]), None, True, datetime.timedelta(seconds=900),
                      wait_for_workers=False, **kwargs)
print("up", flush=True)
sys.stdin.read()
"""


class Sampler(threading.Thread):
    """Peak descriptors, peak RSS (VmHWM) and CPU seconds of one process, sampled every 50 ms."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak_fds, self.peak_rss_kib, self.cpu, self.stop = pid, 0, 0, 0.0, False

    def run(self):
        while not self.stop:
            try:
                with open(f"/proc/{self.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                self.cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
                self.peak_fds = max(self.peak_fds, len(os.listdir(f"/proc/{self.pid}/fd")))
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.peak_rss_kib = max(self.peak_rss_kib, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.05)


def start_server(kind, port, loadgen, env):
    if kind == "torch 1.13":
        cmd = ["/usr/bin/python3", "-c", TORCH_SERVER, str(port)]
    elif kind == "torch 2.6":
        cmd = [TORCH2_PYTHON, "-c", TORCH_SERVER, str(port)]
    else:
        cmd = [loadgen, "root", "--port", str(port)]
    server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    if server.stdout.readline().strip() != "up":
        raise SystemExit(f"{kind}: the store did not start")
    return server


def one_run(kind, n, loadgen, timeout, env):
    port = free_port()
    server = start_server(kind, port, loadgen, env)
    sampler = Sampler(server.pid)
    sampler.start()
    start_at = int(time.time() * 1000) + 500 + 20 * (n // RANKS_PER_PROCESS)
    clients = []
    for first in range(0, n, RANKS_PER_PROCESS):
        count = min(RANKS_PER_PROCESS, n - first)
        cmd = [loadgen, "ranks", "--port", str(port), "--world", str(n), "--first-rank", str(first),
               "--ranks", str(count), "--start-at", str(start_at),
               "--generation", "1" if kind == "torch 1.13" else "2"]
        if kind == "tiered":
            cmd.append("--tiered")
        elif kind == "floor":
            cmd.append("--canned")
        clients.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env))
    # A process whose rank failed ends at once (its JSON names why); the other processes' ranks
    # would then wait at the barrier forever, so the first failure stops them all.
    results, timed_out, deadline = [], False, start_at / 1000 + timeout
    pending = list(clients)
    while pending and time.time() < deadline:
        for c in [c for c in pending if c.poll() is not None]:
            pending.remove(c)
            try:
                results.append(json.loads(c.stdout.read().strip().splitlines()[-1]))
            except (ValueError, IndexError):
                results.append({"done": 0, "failed": 1, "first_failure": "no report"})
        if any(r["failed"] for r in results):
            break
        time.sleep(0.05)
    timed_out = bool(pending) and not any(r["failed"] for r in results)
    for c in pending:
        c.kill()
        c.wait()
    sampler.stop = True
    sampler.join()
    server.stdin.close()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    failed = sum(r["failed"] for r in results)
    if timed_out or failed:
        first = next((r["first_failure"] for r in results if r["first_failure"]), "")
        return {"seconds": None, "why": "timed out" if timed_out else f"{failed} failed: {first}",
                "fds": sampler.peak_fds, "rss_mib": sampler.peak_rss_kib / 1024, "cpu": sampler.cpu}
    seconds = (max(r["last_done_ms"] for r in results) - start_at) / 1000
    upstream = sum(r.get("upstream_requests", 0) for r in results)
    requests = sum(r.get("client_requests", 0) for r in results)
    return {"seconds": seconds, "fds": sampler.peak_fds, "rss_mib": sampler.peak_rss_kib / 1024,
            "cpu": sampler.cpu, "forwarded": f"{upstream}/{requests}" if requests else ""}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loadgen", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "npu_run_store_loadgen"))
    parser.add_argument("--sizes", default="1024,4096,16384,131072")
    parser.add_argument("--kinds", default="torch 1.13,torch 2.6,agent,tiered,floor")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600, help="seconds one run may take")
    args = parser.parse_args()
    marker = f"store-scale-{os.getpid()}"
    env = dict(os.environ, **{MARKER: marker})
    kinds = [k.strip() for k in args.kinds.split(",")]
    if "torch 2.6" in kinds and not os.path.exists(TORCH2_PYTHON):
        kinds.remove("torch 2.6")
    sizes = [int(s) for s in args.sizes.split(",")]
    rows, gave_up = {}, set()
    try:
        for n in sizes:
            for kind in kinds:
                if kind not in ("tiered", "floor") and n > DIRECT_LIMIT:
                    rows[(kind, n)] = "beyond one process's 20,000 descriptors here"
                    continue
                if kind in gave_up:
                    rows[(kind, n)] = "not run: no run of a smaller size finished"
                    continue
                runs = [one_run(kind, n, args.loadgen, args.timeout, env) for _ in range(args.runs)]
                ok = [r for r in runs if r["seconds"] is not None]
                if not ok:
                    gave_up.add(kind)
                    rows[(kind, n)] = runs[0]["why"]
                    continue
                r = ok[0]
                # Near its limit a store may finish one run and not the next: both are reported.
                failures = [x["why"] for x in runs if x["seconds"] is None]
                note = ""
                if len(runs) > 1:
                    times = ", ".join(f"{x['seconds']:.1f}" if x["seconds"] is not None else "failed"
                                      for x in runs)
                    note = f" (median; runs: {times})"
                if failures:
                    note += f" ({len(failures)} of {len(runs)} runs: {failures[0]})"
                rows[(kind, n)] = dict(r, seconds=statistics.median(x["seconds"] for x in ok), note=note)
                print(f"{kind:10} N={n:6}: {rows[(kind, n)]['seconds']:.2f} s{note}, "
                      f"{r['fds']} descriptors, {r['rss_mib']:.0f} MiB, {r['cpu']:.2f} s CPU",
                      file=sys.stderr, flush=True)
    finally:
        kill_leftovers(marker)
    print("| ranks | store | time to the last rank through | node 0's peak descriptors | node 0's peak RSS "
          "| node 0's CPU | requests forwarded by the proxies |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in sizes:
        for kind in kinds:
            r = rows[(kind, n)]
            if isinstance(r, str):
                print(f"| {n} | {kind} | {r} | | | | |")
            elif kind == "floor":
                print(f"| {n} | {kind} | {r['seconds']:.2f} s | no store | | | |")
            else:
                print(f"| {n} | {kind} | {r['seconds']:.2f} s{r['note']} | {r['fds']} | {r['rss_mib']:.0f} MiB "
                      f"| {r['cpu']:.2f} s | {r.get('forwarded', '')} |")
    for n in sizes:
        tiered, floor = rows.get(("tiered", n)), rows.get(("floor", n))
        if isinstance(tiered, dict) and isinstance(floor, dict):
            print(f"\nN={n}: tiered takes {tiered['seconds'] / floor['seconds']:.1f}x the floor "
                  f"(the simulated ranks' own traffic, {floor['seconds']:.2f} s)")
        for kind in ("torch 1.13", "torch 2.6"):
            base = rows.get((kind, n))
            if isinstance(tiered, dict) and isinstance(base, dict):
                print(f"\nN={n}: tiered is {base['seconds'] / tiered['seconds']:.1f}x faster than {kind}")


if __name__ == "__main__":
    main()
