"""Data-parallel training of a small regression model with PyTorch DDP over gloo (CPU).

Launched by npu_run (or torchrun) with one process per worker; it reads only the standard
environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, DEVICE_ID) through
init_method="env://" (or tcp:// with --init-method tcp). At the end every rank all-gathers a checksum of its weights, and the job
fails unless all ranks hold identical weights and the loss went down: that is what
data-parallel training promises.

    npu_run --nproc-per-node 4 examples/train_ddp.py --steps 30

With --checkpoint PATH it also shows the preemption pattern of scripts/slurm/requeue.sbatch:
SIGUSR1 (Slurm's --signal=USR1@N warning, forwarded by npu_run) or SIGTERM (preemption,
scancel) makes every rank stop at the same step, rank 0 saves the state to PATH and all exit
with REQUEUE_EXIT_CODE; the next run resumes from PATH and removes it when training finishes.
"""

import argparse
import datetime
import os
import signal
import socket
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP

# "Checkpointed, run me again": the batch script requeues the job on this code.
REQUEUE_EXIT_CODE = 85
# What must not be destroyed before the process ends: see exit_without_teardown.
KEEP_UNTIL_EXIT = []


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="optimizer steps")
    parser.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--fail-rank", type=int, default=-1,
                        help="this rank raises at --fail-step (to try failure handling)")
    parser.add_argument("--fail-step", type=int, default=5)
    parser.add_argument("--fail-attempt", type=int, default=-1,
                        help="fail only in this attempt (TORCHELASTIC_RESTART_COUNT), to try restarts")
    parser.add_argument("--init-method", choices=["env", "tcp"], default="env",
                        help="env:// (default) or tcp://MASTER_ADDR:MASTER_PORT")
    parser.add_argument("--checkpoint", default="",
                        help="resume from this file if it exists; save to it and exit "
                             f"{REQUEUE_EXIT_CODE} on SIGUSR1 or SIGTERM")
    parser.add_argument("--step-seconds", type=float, default=0.0,
                        help="sleep this long per step (stands in for real work)")
    parser.add_argument("--stamps", default="",
                        help="append 'HOST RESTART RANK STEP EPOCH' to this file after each step "
                             "(tests that order the steps of different hosts)")
    parser.add_argument("--hang-rank", type=int, default=-1,
                        help="this rank stops calling all_reduce at --hang-step (to try "
                             "npu_run --hang-timeout)")
    parser.add_argument("--hang-step", type=int, default=5)
    return parser.parse_args()


_BEATS = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)


def beat(text):
    """A progress beat for npu_run's hang detection (NPU_RUN_PROGRESS); never blocks or fails."""
    try:
        _BEATS.sendto(text.encode(), socket.MSG_DONTWAIT, os.environ["NPU_RUN_PROGRESS"])
    except (KeyError, OSError):
        pass


def hang_here(step):
    """What a rank stuck outside a collective looks like: it never calls all_reduce again."""
    say(f"rank {os.environ['RANK']} hangs at step {step} as asked by --hang-rank")
    while True:
        time.sleep(3600)


def stamp(path, rank, step):
    """One line per step, appended in one write (O_APPEND): hosts sharing the file never mix."""
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    with open(path, "a") as f:
        f.write(f"{socket.gethostname()} {restart} {rank} {step} {time.time():.6f}\n")


def say(line):
    """Prints one line with a single write, so lines of different workers never mix."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def make_batch(generator, batch, true_w, true_b):
    x = torch.randn(batch, true_w.numel(), generator=generator)
    y = x @ true_w + true_b + 0.01 * torch.randn(batch, generator=generator)
    return x, y.unsqueeze(1)


def must_stop(requested_here):
    """True on every rank once any rank was signalled: the ranks must stop at the same step,
    or the ones that go on would wait forever in their next collective."""
    flag = torch.tensor([1 if requested_here else 0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def save_checkpoint(path, model, optimizer, step, first_loss, rank):
    """Saves the state on rank 0 and returns REQUEUE_EXIT_CODE once every rank knows it is saved."""
    if rank == 0:
        # Written aside and renamed, so a kill during the save never leaves half a checkpoint.
        torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                    "step": step, "first_loss": first_loss}, path + ".tmp")
        os.replace(path + ".tmp", path)
        say(f"checkpoint saved to {path} at step {step}; exiting {REQUEUE_EXIT_CODE} to be requeued")
    dist.barrier()  # nobody exits before the file is complete
    dist.destroy_process_group()
    return REQUEUE_EXIT_CODE


def init_group(method, rank, world):
    """Joins the process group through the workers' store at MASTER_ADDR:MASTER_PORT."""
    if method == "env":
        dist.init_process_group("gloo", init_method="env://")
        return
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    if int(torch.__version__.split(".")[0]) >= 2:
        # torch 2.x's tcp:// asks for a libuv store, which builds without libuv (Debian's)
        # refuse; the client store built here says use_libuv=False and is the same client.
        store = dist.TCPStore(addr, port, world, False, datetime.timedelta(minutes=5),
                              use_libuv=False)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
        return
    host = f"[{addr}]" if ":" in addr else addr
    dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=rank, world_size=world)


@record  # writes the exception to TORCHELASTIC_ERROR_FILE, which npu_run's summary shows
def main():
    args = parse_args()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    init_group(args.init_method, rank, world)
    assert dist.get_rank() == rank and dist.get_world_size() == world

    # Same model init everywhere (DDP also broadcasts rank 0's weights); different data per rank.
    torch.manual_seed(0)
    model = DDP(nn.Linear(8, 1))
    KEEP_UNTIL_EXIT.append(model)  # its Reducer holds the process group
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    true_w = torch.arange(1.0, 9.0)
    data = torch.Generator().manual_seed(1000 + rank)

    first_loss = last_loss = None
    start_step = 0
    stop_requested = [False]
    if args.checkpoint:
        def request_stop(signum, _frame):
            stop_requested[0] = True
        signal.signal(signal.SIGUSR1, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        if os.path.exists(args.checkpoint):
            state = torch.load(args.checkpoint)
            model.module.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            start_step, first_loss = state["step"], state["first_loss"]
            if rank == 0:
                say(f"resumed from {args.checkpoint} at step {start_step}")

    for step in range(start_step, args.steps):
        if args.checkpoint and must_stop(stop_requested[0]):
            return save_checkpoint(args.checkpoint, model, optimizer, step, first_loss, rank)
        attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        if (rank == args.fail_rank and step == args.fail_step
                and args.fail_attempt in (-1, attempt)):
            raise RuntimeError(f"rank {rank} fails at step {step} as asked by --fail-rank")
        if rank == args.hang_rank and step == args.hang_step:
            hang_here(step)
        x, y = make_batch(data, args.batch, true_w, 0.5)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        # The mean loss over all ranks, so every rank reports the same number.
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss)
        global_loss = global_loss.item() / world
        first_loss = global_loss if first_loss is None else first_loss
        last_loss = global_loss
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            say(f"step {step:3d}  loss {global_loss:.4f}")
        beat(f"step {step}")
        if args.stamps:
            stamp(args.stamps, rank, step)
        time.sleep(args.step_seconds)

    checksum = torch.tensor([sum(p.detach().double().sum().item() for p in model.parameters())],
                            dtype=torch.float64)
    gathered = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(gathered, checksum)
    agree = all(torch.equal(g, gathered[0]) for g in gathered)
    improved = last_loss < first_loss
    say(f"rank {rank}/{world} (local {local_rank}, device {os.environ.get('DEVICE_ID', '?')}): "
        f"weights checksum {checksum.item():.6f}")
    dist.barrier()
    if rank == 0:
        say(f"ranks agree: {agree}; loss {first_loss:.4f} -> {last_loss:.4f}")
        if args.checkpoint and os.path.exists(args.checkpoint):
            os.remove(args.checkpoint)  # finished: a later run starts afresh
    dist.destroy_process_group()
    return 0 if agree and improved else 1


def exit_without_teardown(code):
    """Ends the process without running destructors. Debian's torch 1.13 can deadlock when the
    DDP model, the last holder of a gloo process group, is destroyed: the main thread joins gloo's
    worker threads while holding the GIL, and a worker needs the GIL to free a tensor (seen here
    about 1 run in 100; pytorch/pytorch#56297, fixed in later releases). So the model stays in
    KEEP_UNTIL_EXIT, and the process ends here with its work done and on disk."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    try:
        exit_code = main()
    except Exception:  # @record has written the error file; print what Python would print
        traceback.print_exc()
        exit_code = 1
    exit_without_teardown(exit_code)
