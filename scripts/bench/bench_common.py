"""What the benchmark scripts share: the torchrun anchors, free ports, leftover cleanup."""

import os
import socket

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "anchors", "torchrun_py311.py"))
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH2_PYTHON = os.path.join(ROOT, "tests", "torch2", "python")
MARKER = "NPU_RUN_BENCH_MARKER"  # in every launched process's environment, to find leftovers


def torchrun_anchor():
    """The shared anchor next to the checkout if there is one, else this repository's own copy of
    the same fix (scripts/bench/torchrun_anchor.py)."""
    return SHARED if os.path.exists(SHARED) else os.path.join(HERE, "torchrun_anchor.py")


def torchrun26():
    """The command that starts Debian 13's torchrun 2.6 (torchrun26_anchor.py under the torch 2.6
    python of tests/torch2/python), or None when its chroot has not been made: run
    tests/torch2/chroot.sh first (as root; scripts/bench/run_all.sh does). Its workers run inside
    that chroot, so PYTHON_EXEC=/usr/bin/python3 there means torch 2.6's python."""
    cache = os.environ.get("NPU_RUN_CACHE_DIR", "/var/cache/npu_run")
    if not os.path.exists(os.path.join(cache, "chroot-trixie", ".npu_run-torch-complete")):
        return None
    return [TORCH2_PYTHON, os.path.join(HERE, "torchrun26_anchor.py")]


def free_port():
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_leftovers(marker):
    """SIGKILLs every process whose environment carries MARKER=marker."""
    needle = f"{MARKER}={marker}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle + b"\0" in f.read() + b"\0":
                    os.kill(int(pid), 9)
        except (OSError, ProcessLookupError):
            pass
