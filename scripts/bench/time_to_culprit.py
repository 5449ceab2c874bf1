#!/usr/bin/python3
"""How long a hang inside the collectives takes to be pinned on the right rank, and how often it
is: npu_run against torch 2.14's own path, side by side, on Debian unstable's torch 2.14 with
gloo (tests/torch2/chroot.sh sid).

One training loop that never beats (all_reduce of a 4,096-float gradient, then the optimizer's
step); at step 5 one rank, drawn at random for each run, stalls in its data loader and writes the
wall time it did. Both sides get the same 3 s patience:
 - npu_run --hang-timeout 3: the time from the stall to the failure summary naming its root
   cause (the automatic beats find the hang; the flight records collected through the worker
   servers name the rank);
 - torchrun 2.14 (its libuv-less store patched as for the 2.6 anchor) with the process group's
   timeout at 3 s and the flight recorder on (TORCH_FR_BUFFER_SIZE, TORCH_FR_DUMP_TEMP_FILE):
   the time from the stall to torchrun's own "Root Cause" report, and whether that names the
   stalled rank. Whether the recorder dumped anything for torch's fr_trace is counted too.

    /usr/bin/python3 scripts/bench/time_to_culprit.py [--sizes 4,16] [--runs 20]
"""

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import HERE, ROOT  # noqa: E402

PYTHON = os.path.join(ROOT, "tests", "torch2", "python2.14")
PATIENCE = 3
SCRIPT = """
import datetime, os, time, torch, torch.distributed as dist
rank, culprit = int(os.environ["RANK"]), int(os.environ["CULPRIT"])
timeout = float(os.environ.get("PG_TIMEOUT", "1800"))
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
w = torch.nn.Parameter(torch.ones(4096))
opt = torch.optim.SGD([w], lr=0.1)
def load_batch(step):
    if rank == culprit and step == 5:
        with open(os.path.join(os.environ["STALL_DIR"], "stall"), "w") as f:
            f.write(repr(time.time()))
        time.sleep(3600)
    return torch.ones(4096)
for step in range(1000):
    w.grad = load_batch(step).clone()
    dist.all_reduce(w.grad)
    opt.step()
"""


def stamp_of(line):
    """'2026-11-28 16:00:26.173 [npu_run ...' -> epoch seconds (local time, as npu_run logs)."""
    return time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + float(line[19:23])


def stalled_at(work):
    with open(os.path.join(work, "stall")) as f:
        return float(f.read())


def run_npu_run(npu_run, work, size, culprit):
    env = dict(os.environ, CULPRIT=str(culprit), STALL_DIR=work, PYTHON_EXEC=PYTHON)
    out = subprocess.run([npu_run, "--nproc-per-node", str(size), "--hang-timeout",
                          str(PATIENCE), os.path.join(work, "train.py")],
                         env=env, capture_output=True, text=True, timeout=300).stderr
    named = next((l for l in out.splitlines() if "root cause first" in l), None)
    row = re.search(r"^  \*  \S+\s+\S+\s+\d+\s+(\d+)\s", out, re.M)
    if named is None or row is None:
        return None, False
    return stamp_of(named) - stalled_at(work), int(row.group(1)) == culprit


def run_torchrun(work, size, culprit):
    dumps = os.path.join(work, "fr")
    os.makedirs(dumps, exist_ok=True)
    env = dict(os.environ, CULPRIT=str(culprit), STALL_DIR=work, PG_TIMEOUT=str(PATIENCE),
               TORCH_FR_BUFFER_SIZE="2000", TORCH_FR_DUMP_TEMP_FILE=os.path.join(dumps, "fr_"))
    out = subprocess.run([PYTHON, os.path.join(HERE, "torchrun26_anchor.py"), "--nproc-per-node",
                          str(size), os.path.join(work, "train.py")],
                         env=env, capture_output=True, text=True, timeout=300).stderr
    ended = time.time()
    root = re.search(r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+)", out, re.S)
    named = root is not None and int(root.group(1)) == culprit
    return ended - stalled_at(work), named, len(os.listdir(dumps))


def table(rows):
    print("| launcher | ranks | runs | time from the stall to a culprit named (median, max) "
          "| the stalled rank named | recorder dumps for fr_trace |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| {} | {} | {} | {:.1f} s, {:.1f} s | {} of {} | {} |".format(*r))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="4,16")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=46)
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    args = parser.parse_args()
    if not os.path.exists(os.path.join(os.environ.get("NPU_RUN_CACHE_DIR", "/var/cache/npu_run"),
                                       "chroot-sid", ".npu_run-torch-complete")):
        print("skipped: no torch 2.14; run tests/torch2/chroot.sh sid first")
        return
    draw = random.Random(args.seed)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        ours, theirs, right, their_right, dumps = [], [], 0, 0, 0
        for _ in range(args.runs):
            culprit = draw.randrange(size)
            with tempfile.TemporaryDirectory() as work:
                with open(os.path.join(work, "train.py"), "w") as f:
                    f.write(SCRIPT)
                seconds, named = run_npu_run(args.npu_run, work, size, culprit)
                if seconds is not None:
                    ours.append(seconds)
                right += named
                seconds, named, dumped = run_torchrun(work, size, culprit)
                theirs.append(seconds)
                their_right += named
                dumps += dumped
        if ours:
            rows.append(("npu_run", size, args.runs, statistics.median(ours), max(ours), right,
                         args.runs, "-"))
        rows.append(("torchrun 2.14", size, args.runs, statistics.median(theirs), max(theirs),
                     their_right, args.runs, dumps))
    table(rows)


if __name__ == "__main__":
    main()
