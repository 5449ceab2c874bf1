#!/usr/bin/python3
"""What the automatic progress beats (--auto-progress) cost a training step: a small training
loop (a 256x256 linear layer, batch 32, SGD) timed per optimizer step in blocks that alternate,
in one process, between no hook and npu_run's own hook (python/npu_run_auto_progress.py: torch's
global step hook on 2.x, the wrapped step on 1.13), beating to a socket a thread here drains as
the agent does (every 5 ms); and one beat alone, the hook's counter and send timed over 20,000
calls. One process, because two processes of the same loop differ by more than a beat costs. For
torch 1.13 (/usr/bin/python3) and, where their chroots are made, Debian 13's 2.6 and Debian
unstable's 2.14.

    /usr/bin/python3 scripts/bench/auto_progress_cost.py [--steps 3000] [--runs 3] [--only-host]
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import ROOT, TORCH2_PYTHON  # noqa: E402

LOOP = """
import importlib.util, os, statistics, sys, time, weakref, torch
torch.set_num_threads(1)
model = torch.nn.Linear(256, 256)
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
data = torch.randn(32, 256)
steps, blocks, module_file, alone = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
spec = importlib.util.spec_from_file_location("auto_progress", module_file)
hooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hooks)
hooks._steps = weakref.WeakKeyDictionary()
import torch.optim.optimizer as optimizer_module
register = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
original_step = type(optimizer).step


def hook():
    if register is not None:
        return register(lambda o, args, kwargs: hooks._stepped(o))
    hooks._wrap_step(type(optimizer))  # torch 1.13: as the module does it


def unhook(handle):
    if handle is not None:
        handle.remove()
    type(optimizer).step = original_step


def block():
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad(); model(data).sum().backward(); optimizer.step()
    return (time.perf_counter() - start) / steps * 1e6


block()  # warm
plain, beating = [], []
for i in range(blocks):
    hooked = i % 2 == 1
    handle = hook() if hooked else None
    (beating if hooked else plain).append(block())
    if hooked:
        unhook(handle)
# One beat alone, to another socket (the training's beats are the ones counted).
os.environ["NPU_RUN_PROGRESS"] = alone
start = time.perf_counter()
for _ in range(20000):
    hooks._stepped(optimizer)
per_beat = (time.perf_counter() - start) / 20000 * 1e6
print(statistics.median(plain), statistics.median(beating), per_beat)
"""


def drain(sock, counts):
    """Reads as the agent does: everything queued, then nothing for 5 ms (a reader woken by each
    datagram would cost the training its own context switches, which the agent's does not)."""
    sock.setblocking(False)
    while True:
        try:
            while True:
                sock.recv(512)
                counts[0] += 1
        except BlockingIOError:
            time.sleep(0.005)
        except OSError:
            return


def drained_socket(path, counts):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    threading.Thread(target=drain, args=(sock, counts), daemon=True).start()
    return sock


def measure(name, python, args, scratch):
    module_file = os.path.join(ROOT, "python", "npu_run_auto_progress.py")
    progress = os.path.join(scratch, "progress")
    counts = [0]
    sock = drained_socket(progress, counts)
    alone = drained_socket(os.path.join(scratch, "beats_alone"), [0])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["NPU_RUN_PROGRESS"] = progress
    out = subprocess.run([python, "-c", LOOP, str(args.steps), str(2 * args.runs), module_file,
                          os.path.join(scratch, "beats_alone")],
                         env=env, cwd=scratch, check=True, capture_output=True, text=True).stdout
    time.sleep(0.05)  # the last beats read
    sock.close()
    alone.close()
    a, b, c = (float(x) for x in out.split()[-3:])
    print(f"| {name} | {a:.1f} us | {b:.1f} us | {b - a:+.1f} us ({(b / a - 1) * 100:+.1f} %) | "
          f"{c:.1f} us ({c / a * 100:.2f} %) | {counts[0]} of {args.runs * args.steps} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only-host", action="store_true", help="torch 1.13 only")
    args = parser.parse_args()
    print(f"blocks of {args.steps} steps, median of {args.runs} blocks each, alternating in one "
          "process")
    print("| torch | per step, no beats | per step, automatic beats | difference | one beat alone "
          "| beats received |")
    print("|---|---|---|---|---|---|")
    pythons = [("1.13 (Debian 12)", "/usr/bin/python3")]
    cache = os.environ.get("NPU_RUN_CACHE_DIR", "/var/cache/npu_run")
    for suite, name, python in (("trixie", "2.6 (Debian 13)", TORCH2_PYTHON),
                                ("sid", "2.14 (Debian unstable)", TORCH2_PYTHON + "2.14")):
        made = os.path.join(cache, "chroot-" + suite, ".npu_run-torch-complete")
        if not args.only_host and os.path.exists(made):
            pythons.append((name, python))
    for name, python in pythons:
        with tempfile.TemporaryDirectory(prefix="npu_run_auto_progress_") as scratch:
            measure(name, python, args, scratch)


if __name__ == "__main__":
    main()
