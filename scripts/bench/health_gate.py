#!/usr/bin/python3
"""What the health gate adds to the start of a job, side by side in one run.

N agents on 127.0.0.1 (N = --sizes, default 1,4,16), 8 workers each on devices 0-7, with the
fake npu-smi and hccn_tool of tests/tools/fake_tools answering every call after --delays
seconds (default 0.05 and 0.5, as a healthy node's tools do and a slow one's): the time from
starting the agents to the first worker started, with --health-check off against gate. The
gate's calls per node: npu-smi's map, its table and one health query per chip (10), and
hccn_tool's six per device (48), hccn_tool's one at a time (it refuses concurrent calls).

    /usr/bin/python3 scripts/bench/health_gate.py --npu-run build/npu_run [--runs 3]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import MARKER, free_port, kill_leftovers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAKE_TOOLS = os.path.join(ROOT, "tests", "tools", "fake_tools")


def first_worker(args, n, mode, delay, tmp):
    """Seconds from starting n agents to the first worker's start; checks that all succeeded."""
    scenario = os.path.join(tmp, "scenario")
    with open(scenario, "w") as f:
        f.write(f"delay {delay}\n")
    starts = os.path.join(tmp, "starts")
    open(starts, "w").close()
    env = dict(os.environ, PATH=f"{FAKE_TOOLS}:{os.environ['PATH']}",
               NPU_RUN_DEV_ROOT=os.path.join(tmp, "dev"), NPU_RUN_FAKE_SCENARIO=scenario,
               STARTS=starts, **{MARKER: f"health{os.getpid()}"})
    port = free_port()
    worker = ["/bin/sh", "-c", 'date +%s.%N >> "$STARTS"']
    commands = [[args.npu_run, "--nnodes", str(n), "--node-rank", str(i), "--master-addr",
                 "127.0.0.1", "--master-port", str(port), "--nproc-per-node", "8",
                 "--health-check", mode, "--no-python", *worker] for i in range(n)]
    begin = time.time()
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for c in commands]
    codes = [p.wait(timeout=300) for p in procs]
    kill_leftovers(f"health{os.getpid()}")
    if any(codes):
        sys.exit(f"health gate bench: {mode}, {n} nodes, {delay} s: exit codes {codes}")
    with open(starts) as f:
        times = [float(line) for line in f if line.strip()]
    return min(times) - begin


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npu-run", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="1,4,16")
    parser.add_argument("--delays", default="0.05,0.5")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "dev"))
        for i in range(8):
            open(os.path.join(tmp, "dev", f"davinci{i}"), "w").close()
        print("| tool delay | nodes | off: first worker | gate: first worker | added |")
        print("|---|---|---|---|---|")
        for delay in [float(d) for d in args.delays.split(",")]:
            for n in [int(s) for s in args.sizes.split(",")]:
                off, gate = [], []
                for _ in range(args.runs):  # interleaved, so drift hits both alike
                    off.append(first_worker(args, n, "off", delay, tmp))
                    gate.append(first_worker(args, n, "gate", delay, tmp))
                added = statistics.median(gate) - statistics.median(off)
                print(f"| {delay * 1000:.0f} ms | {n} | {statistics.median(off):.2f} s | "
                      f"{statistics.median(gate):.2f} s | {added:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
