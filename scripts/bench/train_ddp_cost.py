#!/usr/bin/python3
"""What npu_run's defaults for an unmodified script cost a step of examples/train_ddp.py: the
automatic progress beats (--auto-progress) and torch's flight recorder (TORCH_FR_BUFFER_SIZE,
which gloo reads from torch 2.8), each alone and together, against neither.

Two ranks of examples/train_ddp.py under npu_run for --steps steps, each step stamped by rank 0
(--stamps); a run's step time is the median gap between its stamps after the first 50 (start-up
and warm-up out). The four settings alternate within each of --runs rounds, so that the machine's
drift falls on all of them alike; the medians of the runs are compared. For torch 1.13
(/usr/bin/python3) and, where its chroot is made, Debian unstable's 2.14.

    /usr/bin/python3 scripts/bench/train_ddp_cost.py --npu-run build/npu_run [--steps 600] [--runs 5]
        [--only-host]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import ROOT, TORCH214_PYTHON, torchrun214  # noqa: E402

TRAIN = os.path.join(ROOT, "examples", "train_ddp.py")
# name -> (npu_run flags, environment): the recorder is npu_run's unless set to 0.
SETTINGS = {
    "neither": (["--auto-progress", "off"], {"TORCH_FR_BUFFER_SIZE": "0"}),
    "automatic beats": ([], {"TORCH_FR_BUFFER_SIZE": "0"}),
    "flight recorder": (["--auto-progress", "off"], {}),
    "both (npu_run's default)": ([], {}),
}


def one_run(npu_run, python, steps, flags, env):
    """Rank 0's median step time in microseconds."""
    with tempfile.TemporaryDirectory() as work:
        stamps = os.path.join(work, "stamps")
        run_env = dict(os.environ, PYTHON_EXEC=python, OMP_NUM_THREADS="1", **env)
        subprocess.run([npu_run, "--nproc-per-node", "2", *flags, TRAIN, "--steps", str(steps),
                        "--stamps", stamps], env=run_env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        times = []
        with open(stamps) as f:
            for line in f:
                _, _, rank, _, epoch = line.split()
                if rank == "0":
                    times.append(float(epoch))
    gaps = [b - a for a, b in zip(times[50:], times[51:])]
    return statistics.median(gaps) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only-host", action="store_true", help="torch 1.13 only")
    args = parser.parse_args()
    torches = [("1.13 (Debian 12)", "/usr/bin/python3")]
    if torchrun214() and not args.only_host:
        torches.append(("2.14 (Debian unstable)", TORCH214_PYTHON))
    print(f"| torch | setting | step (median of {args.runs} runs) | spread of the runs | "
          "against neither |")
    print("|---|---|---:|---:|---:|")
    for label, python in torches:
        times = {name: [] for name in SETTINGS}
        for _ in range(args.runs):
            for name, (flags, env) in SETTINGS.items():
                times[name].append(one_run(args.npu_run, python, args.steps, flags, env))
        base = statistics.median(times["neither"])
        for name, t in times.items():
            against = "-" if name == "neither" else f"{(statistics.median(t) / base - 1) * 100:+.1f} %"
            print(f"| {label} | {name} | {statistics.median(t):,.0f} us | "
                  f"{min(t):,.0f}-{max(t):,.0f} us | {against} |")


if __name__ == "__main__":
    main()
