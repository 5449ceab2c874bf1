#!/usr/bin/python3
"""What the health gate adds to the start of a job, side by side in one run.

N agents on 127.0.0.1 (N = --sizes, default 1,4,16), 8 workers each on devices 0-7, with the
fake npu-smi and hccn_tool of tests/tools/fake_tools answering every call after --delays
seconds (default 0.05 and 0.5, as a healthy node's tools do and a slow one's): the time from
starting the agents to the first worker started, with --health-check off against gate. The
gate's calls per node: npu-smi's map and its table (a chip the table does not show OK is
asked about on its own), and hccn_tool's six per device, one at a time per device (a device
refuses a second call). The fakes are the compiled ones of tests/tools/fast_fake_tools.cpp
(build/tests/fast_fake_tools, beside --npu-run's build) where built: the bash fakes of
tests/tools/fake_tools cost a few milliseconds of CPU per call, and 16 nodes' ~60 calls each on
this machine's two cores would time those. With --before OTHER_NPU_RUN, that binary's gate is
timed in the same interleaved runs, against the same fake tools.

    /usr/bin/python3 scripts/bench/health_gate.py --npu-run build/npu_run [--runs 3]
        [--before /tmp/old/build/npu_run]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import MARKER, free_port, kill_leftovers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAKE_TOOLS = os.path.join(ROOT, "tests", "tools", "fake_tools")


def children_cpu():
    """CPU seconds of every waited-for descendant so far (the agents, and through them the tools)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def first_worker(npu_run, n, mode, delay, tmp, fakes, cpu=None):
    """Seconds from starting n agents to the first worker's start; checks that all succeeded.
    `cpu`, a list, gets the CPU seconds the whole run took (agents, tools and workers)."""
    scenario = os.path.join(tmp, "scenario")
    with open(scenario, "w") as f:
        f.write(f"delay {delay}\n")
    starts = os.path.join(tmp, "starts")
    open(starts, "w").close()
    env = dict(os.environ, PATH=f"{fakes}:{os.environ['PATH']}",
               NPU_RUN_DEV_ROOT=os.path.join(tmp, "dev"), NPU_RUN_FAKE_SCENARIO=scenario,
               STARTS=starts, **{MARKER: f"health{os.getpid()}"})
    port = free_port()
    worker = ["/bin/sh", "-c", 'date +%s.%N >> "$STARTS"']
    commands = [[npu_run, "--nnodes", str(n), "--node-rank", str(i), "--master-addr",
                 "127.0.0.1", "--master-port", str(port), "--nproc-per-node", "8",
                 "--health-check", mode, "--no-python", *worker] for i in range(n)]
    cpu_before = children_cpu()
    begin = time.time()
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for c in commands]
    codes = [p.wait(timeout=300) for p in procs]
    if cpu is not None:
        cpu.append(children_cpu() - cpu_before)
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
    parser.add_argument("--before", help="another npu_run whose gate is timed beside")
    parser.add_argument("--fake-tools", help="a folder with npu-smi and hccn_tool")
    args = parser.parse_args()
    fast = os.path.join(os.path.dirname(os.path.abspath(args.npu_run)), "tests", "fast_fake_tools")
    fakes = args.fake_tools or (fast if os.path.exists(os.path.join(fast, "hccn_tool")) else FAKE_TOOLS)
    print(f"fake tools: {fakes}\n")
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "dev"))
        for i in range(8):
            open(os.path.join(tmp, "dev", f"davinci{i}"), "w").close()
        before = " before: added | after: added | before / after |" if args.before else " added |"
        print("| tool delay | nodes | off: first worker | gate: first worker |" + before +
              " CPU, all nodes: off | gate |")
        print("|---|---|---|---|---|" + ("---|---|" if args.before else "") + "---|---|")
        for delay in [float(d) for d in args.delays.split(",")]:
            for n in [int(s) for s in args.sizes.split(",")]:
                off, gate, old, off_cpu, gate_cpu = [], [], [], [], []
                for _ in range(args.runs):  # interleaved, so drift hits both alike
                    off.append(first_worker(args.npu_run, n, "off", delay, tmp, fakes, off_cpu))
                    gate.append(first_worker(args.npu_run, n, "gate", delay, tmp, fakes, gate_cpu))
                    if args.before:
                        old.append(first_worker(args.before, n, "gate", delay, tmp, fakes))
                base = statistics.median(off)
                added = statistics.median(gate) - base
                row = f"| {delay * 1000:.0f} ms | {n} | {base:.2f} s | {statistics.median(gate):.2f} s |"
                if args.before:
                    was = statistics.median(old) - base
                    row += f" {was:.2f} s | {added:.2f} s | {was / max(added, 0.001):.1f}x |"
                else:
                    row += f" {added:.2f} s |"
                row += f" {statistics.median(off_cpu):.2f} s | {statistics.median(gate_cpu):.2f} s |"
                print(row, flush=True)

if __name__ == "__main__":
    main()
