#!/usr/bin/env python3
"""Chaos runs: random kill -9 and SIGSTOP of agents and workers of real multi-node jobs on
loopback, in bounded loops. Each run starts N agents (2 workers each), waits until every worker
runs, injects one fault, and checks what npu_run promises: every agent ends within a bound (no
hang), with the exit code the fault calls for, naming the right root cause, and no process of
the job survives. With --faults etcd (or all), jobs on the etcd rendezvous (a 3-member etcd on
loopback, the smallest lease npu_run accepts) meet etcd's own faults during the join or the run:
a follower member or etcd's leader member killed (nothing may change: every agent ends 0, no new
rendezvous leader), every member frozen for longer than the lease (every agent ends 0, at most
one re-form). Prints one line per run and a table at the end; exits 1 if any run broke a
promise. scripts/chaos.sh runs it at length; the suite runs a short fixed-seed etcd round.
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from etcd_cluster import EtcdCluster

HEARTBEAT = ["--heartbeat-interval", "0.5", "--heartbeat-timeout", "3"]
TIMEOUT = 3.0          # the heartbeat timeout above
WORKER_SECONDS = 8     # how long a healthy worker runs
HANG_BOUND = 60        # an agent not done after this many seconds has hung
MARKER = "NPU_RUN_CHAOS_MARKER"
AGENT_FAULTS = ["kill -9 agent", "SIGSTOP agent", "kill -9 worker", "SIGSTOP worker"]
ETCD_FAULTS = ["etcd follower killed", "etcd leader killed", "etcd frozen past the lease"]
LEASE = 2              # seconds: the smallest etcd lease npu_run accepts


def marked(marker):
    """Pids whose environment carries the run's marker (zombies have none)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if f"{MARKER}={marker}".encode() in f.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def workers_of(agent):
    """The agent's workers: its children other than the guardian (named npu_run-guard)."""
    found = []
    for child in children_of(agent):
        try:
            with open(f"/proc/{child}/comm") as f:
                if f.read().strip() != "npu_run-guard":
                    found.append(child)
        except OSError:
            pass
    return found


class Run:
    def __init__(self, npu_run, nodes, port, scratch, etcd=None):
        self.marker = uuid.uuid4().hex
        self.agents = []
        self.outputs = []
        script = f"echo ready; sleep {WORKER_SECONDS}; echo done"
        for rank in range(nodes):
            err = open(os.path.join(scratch, f"node{rank}.err"), "w+")
            env = dict(os.environ, **{MARKER: self.marker})
            if etcd is None:
                where = ["--nnodes", str(nodes), "--node-rank", str(rank), "--master-port", str(port)]
            else:
                where = ["--nnodes", "2" if nodes == 2 else f"2:{nodes}", "--rdzv-backend", "etcd",
                         "--rdzv-endpoint", etcd.endpoints(), "--rdzv-id", self.marker,
                         "--rdzv-conf", f"lease_ttl={LEASE}"]
            self.agents.append(subprocess.Popen(
                [npu_run, *where, "--nproc-per-node", "2", "--rdzv-timeout", "20", *HEARTBEAT,
                 "--no-python", "/bin/sh", "-c", script],
                stdout=subprocess.DEVNULL, stderr=err, env=env))
            self.outputs.append(err)

    def wait_running(self, seconds=20):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if all(len(workers_of(a.pid)) == 2 for a in self.agents):
                return True
            time.sleep(0.05)
        return False

    def wait_all(self):
        """Exit codes (None: hung, then killed) and the agents' logs."""
        deadline = time.monotonic() + HANG_BOUND
        codes = []
        for agent in self.agents:
            try:
                codes.append(agent.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        logs = []
        for out in self.outputs:
            out.seek(0)
            logs.append(out.read())
            out.close()
        return codes, logs

    def strays(self, seconds=10):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            left = marked(self.marker)
            if not left:
                return []
            time.sleep(0.1)
        return marked(self.marker)

    def kill_everything(self):
        for agent in self.agents:
            if agent.poll() is None:
                agent.kill()
        for pid in marked(self.marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def expectations(fault, victim_node, stop_seconds):
    """(exit code of each agent that was not the victim, the victim's code, root-cause text)."""
    if fault == "kill -9 worker":
        return 137, 137, f"signal SIGKILL (9)"
    if fault == "SIGSTOP worker":
        return 0, 0, None
    if fault == "kill -9 agent":
        return 125, -9, ("agent lost" if victim_node != 0 else "rendezvous server")
    # SIGSTOP agent
    if stop_seconds < TIMEOUT - 1:
        return 0, 0, None
    return 125, 125, ("agent lost" if victim_node != 0 else "rendezvous server")


def etcd_fault(etcd, fault):
    """Injects it; returns what puts etcd back afterwards."""
    leader = etcd.leader()
    if fault == "etcd frozen past the lease":
        for i in range(3):
            etcd.freeze(i)
        time.sleep(LEASE + 3)
        for i in range(3):
            etcd.thaw(i)
        return lambda: None
    victim = leader if fault == "etcd leader killed" else (leader + 1) % 3
    etcd.kill(victim)

    def restore():
        etcd.start(victim)
        etcd.wait_ready(30)
    return restore


def etcd_problems(fault, codes, logs):
    """What the etcd fault may not cost: any agent's exit, a needless new leader, a second one."""
    problems = [f"node {n} exited {c}, expected 0" for n, c in enumerate(codes)
                if c is not None and c != 0]
    elected = sum(log.count("lead the rendezvous after") for log in logs)
    if fault != "etcd frozen past the lease" and elected:
        problems.append("etcd elected a new rendezvous leader")
    if elected > 1:
        problems.append(f"the job re-formed {elected} times")
    return problems


def one_etcd_run(npu_run, rng, index, etcd, fault):
    nodes = rng.choice([2, 3])
    moment = rng.choice(["join", "run"])
    with tempfile.TemporaryDirectory(prefix="npu_run_chaos_") as scratch:
        run = Run(npu_run, nodes, 0, scratch, etcd)
        problems = []
        logs = []
        restore = lambda: None
        try:
            if moment == "join":
                time.sleep(rng.uniform(0.1, 0.6))
            elif not run.wait_running():
                problems.append("the job never ran")
            else:
                time.sleep(rng.uniform(0.2, 2.0))
            restore = etcd_fault(etcd, fault)
            codes, logs = run.wait_all()
            problems += [f"node {n} hung" for n, c in enumerate(codes) if c is None]
            problems += etcd_problems(fault, codes, logs)
            left = run.strays()
            if left:
                problems.append(f"{len(left)} process(es) outlived the job")
        finally:
            run.kill_everything()
            restore()
    print(f"run {index:3d}: {nodes} nodes, {fault:27s} during the {moment:4s}: "
          f"{'ok' if not problems else '; '.join(problems)}", flush=True)
    if problems and os.environ.get("NPU_RUN_CHAOS_LOGS"):
        for node, log in enumerate(logs):
            print(f"--- node {node}:\n" + "\n".join(log.splitlines()[-25:]), flush=True)
    return fault, problems


def one_run(npu_run, rng, index, port):
    nodes = rng.choice([2, 3])
    fault = rng.choice(AGENT_FAULTS)
    victim_node = rng.randrange(nodes)
    # SIGSTOPs either well within the heartbeat timeout or well beyond it.
    stop_seconds = rng.choice([0.5, 1.0, 1.5, 5.0, 6.0])
    with tempfile.TemporaryDirectory(prefix="npu_run_chaos_") as scratch:
        run = Run(npu_run, nodes, port, scratch)
        problems = []
        try:
            if not run.wait_running():
                problems.append("the job never ran")
            else:
                time.sleep(rng.uniform(0.2, 2.0))
                agent = run.agents[victim_node]
                if fault.endswith("worker"):
                    target = rng.choice(workers_of(agent.pid) or [agent.pid])
                else:
                    target = agent.pid
                if fault.startswith("kill -9"):
                    os.kill(target, signal.SIGKILL)
                else:
                    os.kill(target, signal.SIGSTOP)
                    time.sleep(stop_seconds)
                    os.kill(target, signal.SIGCONT)
            codes, logs = run.wait_all()
            others, victim, cause = expectations(fault, victim_node, stop_seconds)
            for node, code in enumerate(codes):
                if code is None:
                    problems.append(f"node {node} hung")
                    continue
                expected = victim if node == victim_node else others
                if code != expected:
                    problems.append(f"node {node} exited {code}, expected {expected}")
                if cause and node != victim_node and code not in (None, 0) and cause not in logs[node]:
                    problems.append(f"node {node} did not name '{cause}'")
            left = run.strays()
            if left:
                problems.append(f"{len(left)} process(es) outlived the job")
        finally:
            run.kill_everything()
    what = fault if fault.startswith("kill") else f"{fault} {stop_seconds:g} s"
    print(f"run {index:3d}: {nodes} nodes, {what:22s} on node {victim_node}: "
          f"{'ok' if not problems else '; '.join(problems)}", flush=True)
    return fault, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npu-run", required=True)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=900, help="stop starting runs after this")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--faults", choices=["agents", "etcd", "all"], default="all")
    parser.add_argument("--each-in-turn", action="store_true",
                        help="etcd's faults in turn rather than drawn (every one in a short round)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"chaos: seed {seed}, {args.faults} faults, up to {args.runs} runs or "
          f"{args.seconds:g} s", flush=True)
    started = time.monotonic()
    table = {}
    scratch = tempfile.TemporaryDirectory(prefix="npu_run_chaos_etcd_")
    etcd = EtcdCluster(scratch.name) if args.faults != "agents" else None
    try:
        run_all(args, rng, etcd, started, table)
    finally:
        if etcd:
            etcd.stop()
        scratch.cleanup()
    return report(table, started, seed)


def run_all(args, rng, etcd, started, table):
    etcd_turn = 0
    for index in range(args.runs):
        if time.monotonic() - started > args.seconds:
            break
        if etcd and (args.faults == "etcd" or rng.random() < 0.5):
            fault = ETCD_FAULTS[etcd_turn % 3] if args.each_in_turn else rng.choice(ETCD_FAULTS)
            etcd_turn += 1
            fault, problems = one_etcd_run(args.npu_run, rng, index, etcd, fault)
        else:
            fault, problems = one_run(args.npu_run, rng, index, 31000 + index % 500)
        row = table.setdefault(fault, {"runs": 0, "hangs": 0, "strays": 0, "wrong": 0})
        row["runs"] += 1
        row["hangs"] += any("hung" in p for p in problems)
        row["strays"] += any("outlived" in p for p in problems)
        row["wrong"] += any("exited" in p or "did not name" in p or "never ran" in p or
                            "leader" in p or "re-formed" in p for p in problems)


def report(table, started, seed):
    print(f"\n| fault | runs | hangs | strays | wrong exit code or root cause |")
    print("|---|---|---|---|---|")
    for fault, row in sorted(table.items()):
        print(f"| {fault} | {row['runs']} | {row['hangs']} | {row['strays']} | {row['wrong']} |")
    total = sum(r["runs"] for r in table.values())
    bad = sum(r["hangs"] + r["strays"] + r["wrong"] for r in table.values())
    print(f"\nchaos: {total} runs in {time.monotonic() - started:.0f} s, seed {seed}, "
          f"{'no broken promise' if bad == 0 else f'{bad} broken promise(s)'}")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
