#!/usr/bin/python3
"""What the pre-flight probe (--preflight) adds to the start of a job, side by side in one run.

N agents on 127.0.0.1 (N = --sizes, default 4,16), one worker each, all on this machine's cores:
the time from starting the agents to the first worker started with --preflight off, quick and
full, and the probe's own time as node 0 logs it ("pre-flight probe (quick, 4 nodes, 2.9 s)").
Each agent's probe imports torch (Debian's 1.13 under /usr/bin/python3) and runs gloo on the
CPU, so on a 2-core machine N probes share two cores: the figures are an upper bound of what
N hosts would take, each with its own cores.

    /usr/bin/python3 scripts/bench/preflight_time.py --npu-run build/npu_run [--runs 3]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import MARKER, free_port, kill_leftovers

PROBE_LINE = re.compile(r"pre-flight probe \((\w+), (\d+) nodes, ([0-9.]+) s\)")


def first_worker(args, n, mode, tmp):
    """(seconds from starting n agents to the first worker's start, the probe's own seconds
    from node 0's log or None with off), node 0's log and the exit codes; the figures are None
    unless every agent succeeded."""
    starts = os.path.join(tmp, "starts")
    open(starts, "w").close()
    env = dict(os.environ, STARTS=starts, PYTHON_EXEC="/usr/bin/python3",
               **{MARKER: f"preflight{os.getpid()}"})
    port = free_port()
    worker = ["/bin/sh", "-c", 'date +%s.%N >> "$STARTS"']
    commands = [[args.npu_run, "--nnodes", str(n), "--node-rank", str(i), "--master-addr",
                 "127.0.0.1", "--master-port", str(port), "--nproc-per-node", "1",
                 "--preflight", mode, "--no-python", *worker] for i in range(n)]
    begin = time.time()
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE if i == 0 else subprocess.DEVNULL, text=True)
             for i, c in enumerate(commands)]
    log = procs[0].communicate(timeout=600)[1]
    codes = [p.wait(timeout=600) for p in procs]
    kill_leftovers(f"preflight{os.getpid()}")
    if any(codes):
        return None, log, codes
    with open(starts) as f:
        times = [float(line) for line in f if line.strip()]
    probe = PROBE_LINE.search(log)
    return (min(times) - begin, float(probe.group(3)) if probe else None), log, codes


# The probe's own verdict on this machine's load: N agents' matmuls share two cores, and one
# that a test beside it slowed is "over twice the median" (exit 122). Not a figure of the
# probe's cost, so such a run is run again, at most twice, and said so.
SLOW_VERDICT = re.compile(r"preflight: matmul [0-9.]+ s, [0-9.]+x the median")


def timed_run(args, n, mode, tmp):
    for attempt in range(3):
        figures, log, codes = first_worker(args, n, mode, tmp)
        if figures is not None:
            return figures
        if set(codes) != {122} or not SLOW_VERDICT.search(log) or attempt == 2:
            sys.exit(f"preflight bench: {mode}, {n} nodes: exit codes {codes}\n{log}")
        print(f"preflight bench: {mode}, {n} nodes: the probe called a node slow under this "
              "machine's load; running it again", file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npu-run", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="4,16")
    parser.add_argument("--modes", default="off,quick,full",
                        help="the --preflight modes to time (the suite's smoke: off,quick)")
    args = parser.parse_args()
    modes = args.modes.split(",")
    print("| nodes | off: first worker | quick: first worker | quick's probe | "
          "full: first worker | full's probe |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(s) for s in args.sizes.split(",")]:
            runs = {mode: [] for mode in modes}
            probes = {mode: [] for mode in modes if mode != "off"}
            for _ in range(args.runs):  # interleaved, so drift hits all alike
                for mode in runs:
                    took, probe = timed_run(args, n, mode, tmp)
                    runs[mode].append(took)
                    if mode in probes and probe is not None:
                        probes[mode].append(probe)
            def cell(figures):
                return f"{statistics.median(figures):.2f} s" if figures else "-"
            cells = [cell(runs.get("off"))]
            for mode in ("quick", "full"):
                cells += [cell(runs.get(mode)), cell(probes.get(mode))]
            print(f"| {n} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
