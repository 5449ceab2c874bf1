#!/usr/bin/python3
"""What a checkpoint costs the training loop: npu_run_checkpoint.save (a snapshot into the agent's
memory, written to storage in the background) against torch.save to local disk and to a shared
file system's speed, with and without fsync; and the restore after a worker crash against
torch.load from that storage.

Each size runs under npu_run as one worker with --max-restarts 1. Attempt 0 takes --repeats saves
of each kind (npu_run's waits until the agent has written the file before the next, so that no
background write overlaps another measurement), then exits 1; attempt 1 loads: npu_run_checkpoint
.load (the step every rank holds in memory), torch.load from local disk with the page cache
dropped (root), and torch.load at the shared file system's speed. Each figure is the median.

The shared file system is modelled by a file object that lets --storage-mbps through (MB/s, both
ways): cgroup v1's blkio, which is what this machine has, cannot throttle buffered writes, and
there is no cgroup v2 io controller here. Local disk is the machine's own (virtio).

    /usr/bin/python3 scripts/bench/snapshot_cost.py [--npu-run build/npu_run] [--sizes 100,1000,4000]
        [--repeats 3] [--storage-mbps 200]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import ROOT  # noqa: E402


class Throttled:
    """A file object at a shared file system's speed: every byte costs 1/rate seconds."""

    def __init__(self, f, mbps):
        self._f, self._rate, self._began, self._moved = f, mbps * 1e6, time.monotonic(), 0

    def _pace(self, n):
        self._moved += n
        late = self._moved / self._rate - (time.monotonic() - self._began)
        if late > 0:
            time.sleep(late)

    def write(self, data):
        n = self._f.write(data)
        self._pace(len(data))
        return n

    def read(self, size=-1):
        data = self._f.read(size)
        self._pace(len(data))
        return data

    def readinto(self, buffer):
        n = self._f.readinto(buffer)
        self._pace(n)
        return n

    def readline(self, size=-1):
        data = self._f.readline(size)
        self._pace(len(data))
        return data

    def seek(self, *args):
        return self._f.seek(*args)

    def tell(self):
        return self._f.tell()

    def flush(self):
        self._f.flush()


def timed(fn):
    began = time.monotonic()
    fn()
    return time.monotonic() - began


def torch_save(state, path, fsync, mbps=0):
    import torch

    with open(path, "wb") as f:
        torch.save(state, Throttled(f, mbps) if mbps else f)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def drop_page_cache():
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def first_attempt(args, work, state):
    """The saves; the result goes to a file the second attempt adds to."""
    import npu_run_checkpoint

    kinds = {"local disk": (False, 0), "local disk + fsync": (True, 0),
             "shared FS": (False, args.storage_mbps), "shared FS + fsync": (True, args.storage_mbps)}
    times = {kind: [] for kind in kinds}
    times["npu_run_checkpoint.save"] = []
    for step in range(1, args.repeats + 1):
        for kind, (fsync, mbps) in kinds.items():
            times[kind].append(timed(lambda: torch_save(state, f"{work}/torch.pt", fsync, mbps)))
            os.unlink(f"{work}/torch.pt")
        target = f"{work}/snap_{step}.pt"
        times["npu_run_checkpoint.save"].append(
            timed(lambda: npu_run_checkpoint.save(state, step, target)))
        while not os.path.exists(target):  # the agent's write, before the next measurement
            time.sleep(0.01)
    torch_save(state, f"{work}/local.pt", True)
    with open(f"{work}/saves.json", "w") as f:
        json.dump({k: statistics.median(v) for k, v in times.items()}, f)
    os._exit(1)  # a crash: the second attempt restores


def second_attempt(args, work):
    import torch
    import npu_run_checkpoint

    with open(f"{work}/saves.json") as f:
        result = {"save": json.load(f)}
    loads = {}
    began = time.monotonic()
    state = npu_run_checkpoint.load(f"{work}/snap_{{step}}.pt")
    loads["npu_run_checkpoint.load"] = time.monotonic() - began
    loads["loaded from"] = npu_run_checkpoint.last_loaded()
    del state
    cold = drop_page_cache()
    loads["torch.load, local disk" + ("" if cold else " (page cache warm)")] = timed(
        lambda: torch.load(f"{work}/local.pt"))
    with open(f"{work}/local.pt", "rb") as f:
        loads["torch.load, shared FS"] = timed(lambda: torch.load(Throttled(f, args.storage_mbps)))
    result["load"] = loads
    with open(args.out, "w") as f:
        json.dump(result, f)
    os._exit(0)


def worker(args):
    import torch

    work = args.work
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        second_attempt(args, work)
    torch.manual_seed(0)
    state = {"weights": torch.rand(args.size_mb * 250_000), "step": 0}
    first_attempt(args, work, state)


def run_size(args, size_mb):
    with tempfile.TemporaryDirectory(dir="/var/tmp") as work:
        out = os.path.join(work, "result.json")
        command = [args.npu_run, "--nproc-per-node", "1", "--max-restarts", "1",
                   "--checkpoint-memory", f"{3 * size_mb + 100}M", os.path.abspath(__file__),
                   "--worker", "--work", work, "--size-mb", str(size_mb), "--out", out,
                   "--repeats", str(args.repeats), "--storage-mbps", str(args.storage_mbps)]
        # A chroot's python (tests/torch2/python2.14) sees the work directory too.
        env = dict(os.environ, PYTHON_EXEC=args.python, NPU_RUN_TORCH2_BINDS=work)
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)


def table(args, results):
    sizes = list(results)
    rows = [f"| | {' | '.join(f'{s} MB' for s in sizes)} |", "|---|" + "---|" * len(sizes)]
    save_kinds = list(results[sizes[0]]["save"])
    for kind in save_kinds:
        rows.append(f"| save: {kind} | " + " | ".join(
            f"{results[s]['save'][kind]:.3f} s" for s in sizes) + " |")
    ours = "npu_run_checkpoint.save"
    rows.append(f"| **{args.storage_mbps} MB/s shared FS + fsync / npu_run** | " + " | ".join(
        f"**{results[s]['save']['shared FS + fsync'] / results[s]['save'][ours]:.1f}x**"
        for s in sizes) + " |")
    for kind in results[sizes[0]]["load"]:
        if kind == "loaded from":
            continue
        rows.append(f"| restore: {kind} | " + " | ".join(
            f"{results[s]['load'][kind]:.3f} s" for s in sizes) + " |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--sizes", default="100,1000,4000", help="MB of state per rank")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--storage-mbps", type=int, default=200)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--size-mb", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    results = {}
    for size in (int(s) for s in args.sizes.split(",")):
        results[size] = run_size(args, size)
        loaded = results[size]["load"]["loaded from"]
        if not loaded or loaded.get("source") != "memory":
            sys.exit(f"{size} MB: the restore was not from memory: {loaded}")
    print(table(args, results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
