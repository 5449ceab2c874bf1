"""Deterministic DDP training (gloo, CPU) that snapshots into npu_run's memory and resumes from it.

Every --every steps each rank calls npu_run_checkpoint.save (into its agent's memory, written to
--path in the background); at the start each calls npu_run_checkpoint.load, which after a
failure returns the newest step every rank holds. Training is deterministic: the batch of a
step depends only on the step and the rank, so a run interrupted and resumed ends with the same
weights, bit for bit, as one that was not. Rank 0 writes what it restored and a digest of the
final weights to --out.

    npu_run --nproc-per-node 2 --max-restarts 1 examples/train_snapshots.py \\
        --path /tmp/ckpt/rank{rank}_step{step}.pt --kill-rank 1 --kill-step 37

npu_run's module is on the workers' PYTHONPATH; elsewhere (torchrun) put share/npu_run/python
there, and save/load read and write --path directly.
"""

import argparse
import hashlib
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import npu_run_checkpoint


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--every", type=int, default=5, help="snapshot every N steps")
    parser.add_argument("--path", required=True, help="where snapshots go; {rank} and {step}")
    parser.add_argument("--width", type=int, default=64, help="the model's hidden width")
    parser.add_argument("--kill-rank", type=int, default=-1,
                        help="this rank SIGKILLs itself at --kill-step, in the first attempt")
    parser.add_argument("--kill-step", type=int, default=37)
    parser.add_argument("--kill-in-save", action="store_true",
                        help="die in the middle of the save at --kill-step instead")
    parser.add_argument("--step-seconds", type=float, default=0.0)
    parser.add_argument("--out", default="", help="rank 0 writes its result here (JSON)")
    return parser.parse_args()


def batch(step, rank, width):
    generator = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, width, generator=generator)
    return x, x.sum(dim=1, keepdim=True).tanh()


def die_inside_save(args):
    """torch.save that writes a little of the segment, then the process is SIGKILLed."""
    real_save = torch.save

    def dying_save(obj, f, *a, **k):
        if hasattr(f, "write"):
            f.write(b"half a snapshot")
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return real_save(obj, f, *a, **k)

    torch.save = dying_save


def first_attempt():
    return os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"


def train(args, rank, model, optimizer, start):
    loss_fn = nn.MSELoss()
    for step in range(start, args.steps + 1):
        x, y = batch(step, rank, args.width)
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        if args.step_seconds:
            time.sleep(args.step_seconds)
        doomed = rank == args.kill_rank and step == args.kill_step and first_attempt()
        if doomed and not args.kill_in_save:
            os.kill(os.getpid(), signal.SIGKILL)
        if step % args.every == 0:
            if doomed:
                die_inside_save(args)
            state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                     "step": step}
            npu_run_checkpoint.save(state, step, args.path)


def digest(model):
    h = hashlib.sha256()
    for name, tensor in sorted(model.module.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    args = parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.path)), exist_ok=True)
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(args.width, args.width), nn.Tanh(),
                              nn.Linear(args.width, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 1
    state = npu_run_checkpoint.load(args.path)
    if state is not None:
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"] + 1
    print(f"rank {rank} starts at step {start}: {npu_run_checkpoint.last_loaded()}", flush=True)
    train(args, rank, model, optimizer, start)
    dist.barrier()
    if rank == 0 and args.out:
        with open(args.out, "w") as f:
            json.dump({"start": start, "loaded": npu_run_checkpoint.last_loaded(),
                       "digest": digest(model)}, f)
    sys.stdout.flush()
    # Debian's torch 1.13 can deadlock destroying the last gloo group (examples/train_ddp.py).
    os._exit(0)


if __name__ == "__main__":
    main()
