"""The training of scripts/bench/goodput.py: DDP over gloo with --state-mb of state per rank (a
model and a large buffer, as optimizer state would be), steps of --step-seconds, and a checkpoint
every --every steps: a snapshot in npu_run's memory (--mode snapshot), torch.save to a shared file
system's speed (--mode torch), or none. It resumes from what it saved; rank 0 appends
"attempt step time" to <work>/steps after every step. --measure times one save of each kind.
"""

import argparse
import glob
import json
import os
import re
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from snapshot_cost import Throttled  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", default="none", choices=["none", "snapshot", "torch"])
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--state-mb", type=int, default=200)
    p.add_argument("--step-seconds", type=float, default=0.1)
    p.add_argument("--storage-mbps", type=float, default=200)
    p.add_argument("--work", required=True)
    p.add_argument("--measure", action="store_true")
    return p.parse_args()


def big_buffer(state_mb, rank):
    return torch.randn(state_mb * 250_000, generator=torch.Generator().manual_seed(rank))


def torch_save(state, path, mbps):
    with open(path + ".tmp", "wb") as f:
        torch.save(state, Throttled(f, mbps))
        f.flush()
        os.fsync(f.fileno())
    os.rename(path + ".tmp", path)


def torch_path(args, rank, step):
    return f"{args.work}/torch_rank{rank}_step{step}.pt"


def save_torch(args, rank, step, state):
    """Each rank's own file; the two newest kept, so that a rank killed in a save leaves the step
    before on every rank."""
    torch_save(state, torch_path(args, rank, step), args.storage_mbps)
    for old in sorted(saved_steps(args, rank))[:-2]:
        os.unlink(torch_path(args, rank, old))


def saved_steps(args, rank):
    pattern = re.compile(r"torch_rank%d_step(\d+)\.pt$" % rank)
    return [int(m.group(1)) for m in map(pattern.search, glob.glob(f"{args.work}/torch_rank{rank}_*"))
            if m]


def load_torch(args, rank):
    """The newest step every rank saved, read at the shared file system's speed."""
    newest = torch.tensor([max(saved_steps(args, rank), default=0)])
    dist.all_reduce(newest, op=dist.ReduceOp.MIN)
    if newest.item() == 0:
        return None
    with open(torch_path(args, rank, newest.item()), "rb") as f:
        return torch.load(Throttled(f, args.storage_mbps))


def measure(args):
    import npu_run_checkpoint

    state = {"big": big_buffer(args.state_mb, 0), "step": 0}
    snapshot, saves = [], []
    for step in range(1, 4):
        target = f"{args.work}/measure_{step}.pt"
        began = time.monotonic()
        npu_run_checkpoint.save(state, step, target)
        snapshot.append(time.monotonic() - began)
        while not os.path.exists(target):  # the agent's write, before the next measurement
            time.sleep(0.01)
        began = time.monotonic()
        torch_save(state, f"{args.work}/measure_torch.pt", args.storage_mbps)
        saves.append(time.monotonic() - began)
    print("costs " + json.dumps({"snapshot": statistics.median(snapshot),
                                 "torch.save": statistics.median(saves)}), flush=True)


def main():
    args = parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.measure:
        return measure(args)
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Linear(64, 64))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    big = big_buffer(args.state_mb, rank)
    path = f"{args.work}/snap_rank{rank}.pt"
    state = None
    if args.mode == "snapshot":
        import npu_run_checkpoint  # under npu_run only: torchrun's workers do not have it

        state = npu_run_checkpoint.load(path)
    elif args.mode == "torch":
        state = load_torch(args, rank)
    step = 0
    if state is not None:
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        big, step = state["big"], state["step"]
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    log = open(f"{args.work}/steps", "a") if rank == 0 else None
    while True:
        began = time.monotonic()
        step += 1
        x = torch.randn(16, 64, generator=torch.Generator().manual_seed(step * 10 + rank))
        model(x).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        time.sleep(max(0.0, args.step_seconds - (time.monotonic() - began)))
        if args.mode != "none" and step % args.every == 0:
            snapshot = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                        "big": big, "step": step}
            if args.mode == "snapshot":
                npu_run_checkpoint.save(snapshot, step, path)  # noqa: F821 (imported above)
            else:
                save_torch(args, rank, step, snapshot)
        if log:
            log.write(f"{attempt} {step} {time.time()}\n")
            log.flush()


if __name__ == "__main__":
    main()
