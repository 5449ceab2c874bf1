#!/usr/bin/python3
"""Goodput under failures: the share of a run's time that ends up as training, when a worker is
SIGKILLed every --fault-every seconds. npu_run with a snapshot in memory every N steps
(npu_run_checkpoint) against torchrun with torch.save every M steps to a shared file system's
speed and torch.load after each restart (what a torchrun job does), N and M each the fewest steps
between checkpoints that keep saving under 5 % of the time, from a measurement of each save.

Both run the same DDP script (goodput_train.py: two ranks, --state-mb of state per rank, steps
of --step-seconds), one after the other, for --duration seconds each from their first step.
Goodput is the step the run ends at (the steps it kept, redone ones counted once) against the
steps an undisturbed run without checkpoints makes in that time (measured first, under npu_run).
The shared file system is the pacing file object of snapshot_cost.py (--storage-mbps).

    /usr/bin/python3 scripts/bench/goodput.py [--npu-run build/npu_run] [--torch 2.14]
        [--duration 600] [--fault-every 120] [--state-mb 200] [--step-seconds 0.1]
"""

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (MARKER, ROOT, TORCH214_PYTHON, free_port, kill_leftovers,  # noqa: E402
                          torchrun214, torchrun_anchor)

TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goodput_train.py")


def launchers(args):
    """(python for the workers, torchrun's command) for the torch asked for."""
    if args.torch == "2.14":
        torchrun = torchrun214()
        if torchrun is None:
            sys.exit("goodput: torch 2.14's chroot is not made (tests/torch2/chroot.sh sid)")
        return TORCH214_PYTHON, torchrun
    return "/usr/bin/python3", ["/usr/bin/python3", torchrun_anchor()]


def start(args, work, name, mode, every, python, torchrun):
    """One run in a session of its own; its rank 0 logs each step to <work>/<name>.steps."""
    # torchrun starts its workers with PYTHON_EXEC too: inside the 2.14 chroot, its own python.
    env = dict(os.environ, **{MARKER: name + str(os.getpid()), "OMP_NUM_THREADS": "1",
                              "PYTHON_EXEC": python if torchrun is None else "/usr/bin/python3"})
    script = [TRAIN, "--mode", mode, "--every", str(every), "--state-mb", str(args.state_mb),
              "--step-seconds", str(args.step_seconds), "--storage-mbps", str(args.storage_mbps),
              "--work", f"{work}/{name}"]
    os.makedirs(f"{work}/{name}", exist_ok=True)
    port = str(free_port())
    if torchrun is None:
        cmd = [args.npu_run, "--nproc-per-node", "2", "--max-restarts", "100", "--master-port",
               port] + script
    else:
        # Underscores: torchrun 1.13 knows no other spelling.
        cmd = torchrun + ["--nproc_per_node", "2", "--max_restarts", "100", "--master_port", port,
                          "--monitor_interval", "0.1"] + script
    log = open(f"{work}/{name}.log", "w")
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True), env[MARKER]


def steps(work, name):
    """[(attempt, step, time)] rank 0 logged."""
    try:
        with open(f"{work}/{name}/steps") as f:
            return [(int(a), int(s), float(t)) for a, s, t in (line.split() for line in f)
                    if True]
    except (OSError, ValueError):
        return []


def rank1_worker(marker):
    """The pid of the worker with RANK=1 in the run's environment, or None."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if f"{MARKER}={marker}".encode() in env and b"RANK=1" in env and b"goodput_train" in cmdline:
            return int(pid)
    return None


def run(args, work, name, mode, every, python, torchrun, faults):
    """Runs for --duration from its first step, a fault every --fault-every; the run's figures."""
    proc, marker = start(args, work, name, mode, every, python, torchrun)
    try:
        while not steps(work, name):
            if proc.poll() is not None:
                with open(f"{work}/{name}.log") as f:
                    sys.exit(f"goodput: {name} ended before its first step:\n{f.read()[-3000:]}")
            time.sleep(0.05)
        began = steps(work, name)[0][2]
        killed = 0
        while time.time() < began + args.duration:
            if faults and time.time() >= began + (killed + 1) * args.fault_every:
                pid = rank1_worker(marker)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
            time.sleep(0.05)
        ended = time.time()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        kill_leftovers(marker)
    logged = [s for s in steps(work, name) if s[2] <= ended]
    return {"final step": max(s[1] for s in logged), "seconds": ended - began, "faults": killed,
            "restarts": max(s[0] for s in logged)}


def save_costs(args, work, python):
    """Seconds one save blocks a step, for the snapshot and for torch.save to the shared FS."""
    out = subprocess.run([args.npu_run, "--nproc-per-node", "1", "--master-port", str(free_port()),
                          TRAIN, "--measure", "--state-mb", str(args.state_mb),
                          "--storage-mbps", str(args.storage_mbps), "--work", f"{work}/measure"],
                         env=dict(os.environ, PYTHON_EXEC=python), capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("costs "):
            return json.loads(line[len("costs "):])
    sys.exit(f"goodput: the save measurement failed:\n{out.stdout}\n{out.stderr}")


def every_for(cost, step_seconds):
    """The fewest steps between checkpoints that keep saving under 5 % of the time."""
    return max(1, math.ceil(cost / (0.05 * step_seconds)))


def table(args, ideal_rate, rows):
    print(f"Goodput over {args.duration:.0f} s from the first step, a worker SIGKILLed every "
          f"{args.fault_every:.0f} s; torch {args.torch}, 2 ranks, {args.state_mb} MB of state per "
          f"rank, steps of {args.step_seconds} s, shared FS at {args.storage_mbps} MB/s; an "
          f"undisturbed run makes {ideal_rate:.2f} steps/s")
    print()
    print("| launcher, checkpoint | every | save blocks | faults | final step | goodput |")
    print("|---|---|---|---|---|---|")
    for name, every, cost, r in rows:
        goodput = r["final step"] / (ideal_rate * r["seconds"])
        print(f"| {name} | {every} steps | {cost:.3f} s | {r['faults']} | {r['final step']} | "
              f"{100 * goodput:.1f} % |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    p.add_argument("--torch", default="2.14", choices=["1.13", "2.14"])
    p.add_argument("--duration", type=float, default=600)
    p.add_argument("--fault-every", type=float, default=120)
    p.add_argument("--state-mb", type=int, default=200)
    p.add_argument("--step-seconds", type=float, default=0.1)
    p.add_argument("--storage-mbps", type=float, default=200)
    p.add_argument("--ideal-seconds", type=float, default=60)
    args = p.parse_args()
    python, torchrun = launchers(args)
    with tempfile.TemporaryDirectory(prefix="npu_run_goodput_") as work:
        costs = save_costs(args, work, python)
        n = every_for(costs["snapshot"], args.step_seconds)
        m = every_for(costs["torch.save"], args.step_seconds)
        duration = args.duration
        args.duration = args.ideal_seconds
        ideal = run(args, work, "ideal", "none", 1, python, None, False)
        args.duration = duration
        ideal_rate = ideal["final step"] / ideal["seconds"]
        rows = [("npu_run, npu_run_checkpoint in memory", n, costs["snapshot"],
                 run(args, work, "npu_run", "snapshot", n, python, None, True)),
                (f"torchrun {args.torch}, torch.save to the shared FS", m, costs["torch.save"],
                 run(args, work, "torchrun", "torch", m, python, torchrun, True))]
        table(args, ideal_rate, rows)


if __name__ == "__main__":
    main()
