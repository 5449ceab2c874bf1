#!/usr/bin/python3
"""Debian 13's torchrun 2.6 with its missing libuv worked around, for the benchmarks.

Debian builds torch 2.6 without libuv, so its own torchrun cannot start a job (every TCPStore it
or its workers create asks for libuv). torch26_without_libuv/sitecustomize.py, put on PYTHONPATH
here for this process and every worker, makes them use the older backend; then torchrun's own
main() runs unchanged. Run it with the torch 2.6 python:
    tests/torch2/python scripts/bench/torchrun26_anchor.py --nproc-per-node 2 train.py
"""

import os
import runpy
import sys

PATCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch26_without_libuv")
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [PATCH, os.environ.get("PYTHONPATH")]))
# This process started before PYTHONPATH named the patch (and Debian's own sitecustomize is
# loaded already under that name): run it by path.
runpy.run_path(os.path.join(PATCH, "sitecustomize.py"))

from torch.distributed.run import main  # noqa: E402

sys.exit(main())
