#!/usr/bin/python3
"""Real training start: from launch to the first DDP step of examples/train_ddp.py, 4 workers.

What a user waits for before training begins: the launcher's start-up plus Python and torch
imports, process-group set-up over gloo and the first all-reduce. The example prints
"step   0" on rank 0 right after the first optimizer step; the clock stops when that line
appears on the launcher's stdout. npu_run against torchrun 1.13 (monitor interval 0.1 s: it only
matters at exit, which is not measured here), and, when its chroot is made, against Debian 13's
torchrun 2.6 with npu_run also starting torch 2.6 workers.

    /usr/bin/python3 scripts/bench/training_start.py --npu-run build/npu_run [--runs 3]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

from bench_common import TORCH2_PYTHON, TORCH214_PYTHON, free_port, torchrun26, torchrun214, torchrun_anchor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_ANCHOR = torchrun_anchor()
TRAIN = os.path.join(ROOT, "examples", "train_ddp.py")



def time_to_first_step(cmd, env):
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    first = None
    for line in proc.stdout:
        if first is None and line.startswith("step   0"):
            first = time.perf_counter() - start
    proc.wait(timeout=300)
    if first is None or proc.returncode != 0:
        sys.exit(f"{cmd[0]}: no first step (exit {proc.returncode})")
    return first


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    parser.add_argument("--anchor", default=DEFAULT_ANCHOR)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--anchors", choices=["all", "host"], default="all",
                        help="torch 1.13, 2.6 and 2.14, or 1.13's alone (the smoke run)")
    args = parser.parse_args()
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3", OMP_NUM_THREADS="1")
    train = [TRAIN, "--steps", "2"]
    launchers = {
        "npu_run": lambda port: [args.npu_run, "--nproc-per-node", str(args.nproc), "--master-port", str(port), *train],
        "torchrun (monitor 0.1 s)": lambda port: ["/usr/bin/python3", args.anchor, "--nproc_per_node", str(args.nproc),
                                                  "--master_port", str(port), "--monitor_interval", "0.1",
                                                  *train],
    }
    envs = {name: env for name in launchers}
    t26 = torchrun26() if args.anchors == "all" else None
    t214 = torchrun214() if args.anchors == "all" else None
    for version, command, python in (("2.6", t26, TORCH2_PYTHON), ("2.14", t214, TORCH214_PYTHON)):
        if not command:
            continue
        # torch 2.x workers: npu_run starts them through the chroot's python; torchrun 2.x runs
        # inside the chroot already, where /usr/bin/python3 is that python.
        launchers[f"npu_run (torch {version} workers)"] = launchers["npu_run"]
        envs[f"npu_run (torch {version} workers)"] = dict(env, PYTHON_EXEC=python)
        launchers[f"torchrun {version}"] = lambda port, command=command: [
            *command, "--nproc_per_node", str(args.nproc), "--master_port", str(port), *train]
        envs[f"torchrun {version}"] = env
    results = {name: [time_to_first_step(make(free_port()), envs[name]) for _ in range(args.runs)]
               for name, make in launchers.items()}
    print(f"## Real training start: launch to the first DDP step, {args.nproc} workers of examples/train_ddp.py "
          f"(gloo, CPU; median, min-max of {args.runs} runs)\n")
    print("| launcher | time to first step | vs npu_run |")
    print("|---|---|---|")
    for name, times in results.items():
        # Each torchrun against npu_run with the same torch in its workers.
        version = next((word.strip("()") for word in name.split() if word.startswith("2.")), "")
        ours = statistics.median(results[f"npu_run (torch {version} workers)" if version else "npu_run"])
        print(f"| {name} | {statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f}) | "
              f"{statistics.median(times) / ours:.2f}x |")
    if args.anchors == "host":
        print("\ntorch 2.6 and 2.14 left out (--anchors host)")
    elif not t26:
        print("\ntorchrun 2.6 left out: its chroot is not made (run tests/torch2/chroot.sh as root)")
    print("\nMost of this is Python and torch start-up in each worker, the same under any launcher; "
          "the difference is the launcher's own share.")


if __name__ == "__main__":
    main()
