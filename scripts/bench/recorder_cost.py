#!/usr/bin/python3
"""What torch's flight recorder costs a training step, as npu_run turns it on
(TORCH_FR_BUFFER_SIZE, agent/rooms/recorder_room.cpp), on Debian unstable's torch 2.14 with gloo, the
first torch whose gloo records (tests/torch2/chroot.sh sid).

Two ranks on loopback run a small training step (a 256x256 linear layer, batch 32, its gradients
all_reduced, SGD) for --steps steps; the runs alternate between the recorder off and on with
each buffer size, --runs times, and the per-step medians are compared. The recorder is set when
the process group is made, so the two sides cannot share a process; alternating runs is the
fairest this machine allows (its noise between runs is a few per cent: read the spread).

    /usr/bin/python3 scripts/bench/recorder_cost.py [--steps 2000] [--runs 3] [--sizes 200,2000,20000]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import ROOT, free_port  # noqa: E402

PYTHON = os.path.join(ROOT, "tests", "torch2", "python2.14")
STEP = """
import os, sys, time, torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo", rank=int(sys.argv[1]), world_size=2)
model = torch.nn.Linear(256, 256)
opt = torch.optim.SGD(model.parameters(), lr=0.001)
data = torch.randn(32, 256)
def step():
    opt.zero_grad()
    model(data).sum().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
for _ in range(100):
    step()
dist.barrier()
start = time.perf_counter()
for _ in range(int(sys.argv[2])):
    step()
elapsed = time.perf_counter() - start
dist.barrier()
if sys.argv[1] == "0":
    print("per step", elapsed / int(sys.argv[2]) * 1e6)
"""


def one_run(script, steps, buffer_size):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               OMP_NUM_THREADS="1")
    env.pop("TORCH_FR_BUFFER_SIZE", None)
    env.pop("TORCH_NCCL_TRACE_BUFFER_SIZE", None)
    if buffer_size:
        env["TORCH_FR_BUFFER_SIZE"] = str(buffer_size)
    ranks = [subprocess.Popen([PYTHON, script, str(r), str(steps)], env=env,
                              stdout=subprocess.PIPE, text=True) for r in (0, 1)]
    out = ranks[0].communicate(timeout=600)[0]
    ranks[1].wait(timeout=60)
    return float(out.split("per step")[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="200,2000,20000")
    args = parser.parse_args()
    if not os.path.exists(os.path.join(os.environ.get("NPU_RUN_CACHE_DIR", "/var/cache/npu_run"),
                                       "chroot-sid", ".npu_run-torch-complete")):
        print("skipped: no torch 2.14; run tests/torch2/chroot.sh sid first")
        return
    sizes = [0] + [int(s) for s in args.sizes.split(",")]
    times = {size: [] for size in sizes}
    with tempfile.TemporaryDirectory() as work:
        script = os.path.join(work, "step.py")
        with open(script, "w") as f:
            f.write(STEP)
        for _ in range(args.runs):
            for size in sizes:
                times[size].append(one_run(script, args.steps, size))
    off = statistics.median(times[0])
    print("| TORCH_FR_BUFFER_SIZE | per step (median of {} runs) | spread | against off |".format(
        args.runs))
    print("|---|---|---|---|")
    for size in sizes:
        t = times[size]
        print("| {} | {:.1f} us | {:.1f}-{:.1f} us | {:+.2f} % |".format(
            size or "off", statistics.median(t), min(t), max(t),
            (statistics.median(t) / off - 1) * 100))


if __name__ == "__main__":
    main()
