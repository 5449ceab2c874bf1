#!/usr/bin/python3
"""etcd rendezvous benchmark on loopback, against a real 3-member etcd (Debian's etcd-server)
started here: the time from the death of the agent etcd elected (it serves the rendezvous and
the workers' store) to the first worker of the next attempt, and the start-up cost of the etcd
mode against npu_run's static one.

Failover, npu_run: N agents of an elastic job (--nnodes N-1:N, --rdzv-conf lease_ttl=2,
last_call_timeout=0), one worker each (/bin/sh printing its start time, then sleeping in
attempt 0). Once every worker runs, the leader's agent (its pid from etcd's leader key) is
SIGKILLed with its worker; the clock stops when a survivor's next worker prints its
start. Its floor is the lease's TTL: etcd must expire the lease before anyone else may lead.

Failover, torchrun 2.6 (c10d): the same job with the agent that hosts the c10d store killed
(the first started); it has no successor, so the clock stops when every other agent has exited,
or at --patience seconds with "none".

Start-up: from starting N agents to every worker of attempt 0 running, etcd mode against the
static mode (--master-addr 127.0.0.1, node 0 started first).

    /usr/bin/python3 scripts/bench/etcd_failover.py --npu-run build/npu_run [--sizes 4,64]
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from bench_common import (MARKER, WORKER, Agent, free_port, loss_bench_parser, median_text,
                          stop_agents, torchrun26, wait_until)



class Etcd:
    """Three members on loopback, each with ports and a data directory of its own; `extra`
    options go to every member (etcd_scale.py: --metrics extensive)."""

    def __init__(self, extra=()):
        # In memory, as the tests' clusters are: a stalled fsync changes etcd's leader, which
        # renews every lease and delays the failover being measured.
        self.dir = tempfile.mkdtemp(prefix="etcd-bench-",
                                    dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        clients = [free_port() for _ in range(3)]
        peers = [free_port() for _ in range(3)]
        cluster = ",".join(f"e{i}=http://127.0.0.1:{peers[i]}" for i in range(3))
        self.procs = [subprocess.Popen(
            ["etcd", "--name", f"e{i}", "--data-dir", os.path.join(self.dir, f"e{i}"),
             "--listen-client-urls", f"http://127.0.0.1:{clients[i]}",
             "--advertise-client-urls", f"http://127.0.0.1:{clients[i]}",
             "--listen-peer-urls", f"http://127.0.0.1:{peers[i]}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peers[i]}",
             "--initial-cluster", cluster, *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for i in range(3)]
        self.clients = clients
        self.endpoints = ",".join(f"127.0.0.1:{p}" for p in clients)
        self.first = clients[0]
        if not wait_until(lambda: self.post("/v3/kv/put", {"key": b64("/probe"),
                                                           "value": b64("x")}), 30):
            raise RuntimeError("etcd did not start")

    def post(self, path, body):
        try:
            request = urllib.request.Request(f"http://127.0.0.1:{self.first}{path}",
                                             json.dumps(body).encode(), method="POST")
            with urllib.request.urlopen(request, timeout=2) as answer:
                return json.loads(answer.read())
        except OSError:
            return None

    def value(self, key):
        answer = self.post("/v3/kv/range", {"key": b64(key)}) or {}
        kvs = answer.get("kvs", [])
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def b64(text):
    return base64.b64encode(text.encode()).decode()


def npu_run_cmd(args, nnodes, etcd, run_id):
    return [args.npu_run, "--nnodes", nnodes, "--nproc-per-node", "1",
            "--max-restarts", "1", "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints,
            "--rdzv-id", run_id, "--rdzv-conf", "lease_ttl=2,last_call_timeout=0",
            "--rdzv-timeout", "120", "--no-python", "/bin/sh", "-c", WORKER]


def failover_npu_run(args, n, etcd, env, marker):
    run_id = f"fail{time.time_ns()}"
    agents = [Agent(npu_run_cmd(args, f"{n - 1}:{n}", etcd, run_id), env) for _ in range(n)]
    try:
        # Every agent in the full world first: an agent that formed a one-node round alone
        # re-forms when the other joins, and a kill in between would time that re-forming.
        formed = f"of {n}, attempt"
        if not wait_until(lambda: all(a.said(formed) and a.started(0) is not None
                                      for a in agents), 300):
            raise RuntimeError(f"npu_run: the workers of a {n}-node round did not all start")
        leader = json.loads(etcd.value(f"/torchelastic/p2p/{run_id}/leader"))
        victim = next(a for a in agents if a.proc.pid == leader["pid"])
        killed_at = time.time()
        os.killpg(victim.proc.pid, signal.SIGKILL)
        survivors = [a for a in agents if a is not victim]
        # Any worker started after the kill: a leader lost re-forms the job without counting a
        # restart when the survivors' workers were not failed by it, so the attempt may stay 0.
        wait_until(lambda: any(a.started_since(killed_at) for a in survivors), args.patience)
        firsts = [a.started_since(killed_at) for a in survivors if a.started_since(killed_at)]
        if not firsts:  # say why, so a failed smoke run can be read without rerunning it
            for a in survivors:
                tail = "".join(line for _, line in list(a.err)[-15:])
                print(f"a survivor (pid {a.proc.pid}) started no worker after the kill; "
                      f"its last lines:\n{tail}", file=sys.stderr, flush=True)
        return min(firsts) - killed_at if firsts else None
    finally:
        stop_agents(agents, marker)


def failover_torchrun(args, n, env, marker):
    port = free_port()
    cmd = [*torchrun26(), "--nnodes", f"{n - 1}:{n}", "--rdzv_backend", "c10d",
           "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", f"fail{port}",
           "--nproc_per_node", "1", "--monitor_interval", "0.1", "--max_restarts", "1",
           "--no_python", "/bin/sh", "-c", WORKER]
    agents = [Agent(cmd, env)]
    time.sleep(2)  # the first agent binds the c10d store: it is the one lost
    agents += [Agent(cmd, env) for _ in range(n - 1)]
    try:
        if not wait_until(lambda: all(a.started(0) is not None for a in agents), 300):
            raise RuntimeError("torchrun: the workers of attempt 0 did not all start")
        killed_at = time.time()
        os.killpg(agents[0].proc.pid, signal.SIGKILL)
        others = agents[1:]
        if not wait_until(lambda: all(a.proc.poll() is not None for a in others), args.patience):
            return None
        return time.time() - killed_at
    finally:
        stop_agents(agents, marker)


def startup(args, n, etcd, env, marker, mode):
    """Seconds from starting n agents to every worker of attempt 0 running."""
    port = free_port()
    cmds = []
    for rank in range(n):
        if mode == "etcd":
            cmds.append(npu_run_cmd(args, str(n), etcd, f"start{port}"))
        else:
            cmds.append([args.npu_run, "--nnodes", str(n), "--node-rank", str(rank),
                         "--master-addr", "127.0.0.1", "--master-port", str(port),
                         "--nproc-per-node", "1", "--no-python", "/bin/sh", "-c", WORKER])
    began = time.time()
    agents = [Agent(cmd, env) for cmd in cmds]
    try:
        if not wait_until(lambda: all(a.started(0) is not None for a in agents), 300):
            raise RuntimeError(f"{mode}: the workers did not all start")
        return max(a.started(0) for a in agents) - began
    finally:
        stop_agents(agents, marker)


def main():
    args = loss_bench_parser(__doc__, "agents", 60.0).parse_args()
    marker = f"etcd-bench-{os.getpid()}"
    env = dict(os.environ, **{MARKER: marker, "PYTHON_EXEC": "/usr/bin/python3"})
    etcd = Etcd()
    try:
        print("| agents | launcher | leader's death -> first worker of the next attempt |")
        print("|---|---|---|")
        for n in [int(s) for s in args.sizes.split(",")]:
            times = [failover_npu_run(args, n, etcd, env, marker) for _ in range(args.runs)]
            print(f"| {n} | npu_run etcd (lease TTL 2 s) | {median_text(times, args.patience)} |",
                  flush=True)
            if torchrun26() and str(n) in args.torchrun_sizes.split(","):
                times = [failover_torchrun(args, n, env, marker) for _ in range(args.runs)]
                print(f"| {n} | torchrun 2.6 c10d: every other agent exited after | "
                      f"{median_text(times, args.patience)} |", flush=True)
        print("\n| agents | static (node 0 first) | etcd |")
        print("|---|---|---|")
        for n in [int(s) for s in args.sizes.split(",")]:
            static = [startup(args, n, etcd, env, marker, "static") for _ in range(args.runs)]
            elected = [startup(args, n, etcd, env, marker, "etcd") for _ in range(args.runs)]
            print(f"| {n} | {median_text(static, 0)} | {median_text(elected, 0)} |", flush=True)
    finally:
        etcd.close()
    print(f"\nmachine: {os.cpu_count()} cores, {os.uname().release}; npu_run: {args.npu_run}")


if __name__ == "__main__":
    main()
