#!/usr/bin/python3
"""Spare take-over benchmark on loopback: the time from a node's death to the first worker of
the next attempt running on a spare.

npu_run: N nodes and one spare (--spares 1, the spare named by --node-rank N), one worker each
(/bin/sh printing its start time, then sleeping in attempt 0). Once every worker runs and the
spare stands by, node 1's agent is SIGKILLed (its worker dies with it); the clock stops when
the spare's worker of attempt 1 prints its start. The loss is seen by the closed connection;
a node whose machine dies silently adds the heartbeat timeout (--heartbeat-timeout).

torchrun 2.6 (c10d) has no spares; its nearest is an elastic job with one agent more than it
needs (--nnodes N:N+1). The same kill, and the clock stops when any worker of a new attempt
starts, or at --patience seconds with "none".

    /usr/bin/python3 scripts/bench/spare_takeover.py --npu-run build/npu_run [--sizes 4,64]
"""

import os
import signal
import time

from bench_common import (MARKER, WORKER, Agent, free_port, loss_bench_parser, median_text,
                          stop_agents, torchrun26, wait_until)



def npu_run_agents(args, n, port, env):
    agents = []
    for rank in range(n + 1):
        agents.append(Agent([args.npu_run, "--nnodes", str(n), "--spares", "1", "--node-rank", str(rank),
                             "--master-port", str(port), "--nproc-per-node", "1", "--max-restarts", "0",
                             "--rdzv-timeout", "120", "--no-python", "/bin/sh", "-c", WORKER], env))
        if rank == 0:
            wait_until(lambda: agents[0].said("rendezvous server on"), 20)
    return agents, agents[n]


def torchrun_agents(n, port, env):
    cmd = [*torchrun26(), "--nnodes", f"{n}:{n + 1}", "--rdzv_backend", "c10d", "--rdzv_endpoint",
           f"127.0.0.1:{port}", "--rdzv_id", f"spare{port}", "--nproc_per_node", "1",
           "--monitor_interval", "0.1", "--max_restarts", "3", "--no_python", "/bin/sh", "-c", WORKER]
    return [Agent(cmd, env) for _ in range(n + 1)], None


def one_run(args, launcher, n):
    """Seconds from the kill to the first worker of attempt 1 (None: none within --patience)."""
    marker = f"spare-{os.getpid()}-{time.time_ns()}"
    env = dict(os.environ, **{MARKER: marker, "PYTHON_EXEC": "/usr/bin/python3"})
    port = free_port()
    agents, spare = (npu_run_agents(args, n, port, env) if launcher == "npu_run"
                     else torchrun_agents(n, port, env))
    try:
        running = n if spare is not None else n + 1
        if not wait_until(lambda: sum(a.started(0) is not None for a in agents) >= running, 300):
            raise RuntimeError(f"{launcher}: the workers of attempt 0 did not all start")
        if spare is not None and not wait_until(lambda: spare.said("standing by as a spare"), 30):
            raise RuntimeError("npu_run: the spare did not stand by")
        victim = agents[1]
        killed_at = time.time()
        os.killpg(victim.proc.pid, signal.SIGKILL)
        survivors = [a for a in agents if a is not victim]
        firsts = []
        wait_until(lambda: any(a.started(1) is not None for a in survivors), args.patience)
        firsts = [a.started(1) for a in survivors if a.started(1) is not None]
        return min(firsts) - killed_at if firsts else None
    finally:
        stop_agents(agents, marker)


def main():
    args = loss_bench_parser(__doc__, "nodes (each job has one agent more)", 30.0).parse_args()
    print("| nodes + spare | launcher | node death -> first worker of the next attempt |")
    print("|---|---|---|")
    for n in [int(s) for s in args.sizes.split(",")]:
        launchers = ["npu_run"]
        if torchrun26() and str(n) in args.torchrun_sizes.split(","):
            launchers.append("torchrun 2.6 c10d")
        for launcher in launchers:
            times = [one_run(args, launcher, n) for _ in range(args.runs)]
            text = median_text(times, args.patience)
            print(f"| {n} + 1 | {launcher} | {text} |", flush=True)
    if not torchrun26():
        print("\ntorchrun 2.6 left out: its chroot is not made (run tests/torch2/chroot.sh as root)")
    print(f"\nmachine: {os.cpu_count()} cores, {os.uname().release}; npu_run: {args.npu_run}")


if __name__ == "__main__":
    main()
