"""What the benchmark scripts share: the torchrun anchors, free ports, leftover cleanup, agents
whose output is read as it comes."""

import argparse
import os
import signal
import statistics
import socket
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "anchors", "torchrun_py311.py"))
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH2_PYTHON = os.path.join(ROOT, "tests", "torch2", "python")
TORCH214_PYTHON = os.path.join(ROOT, "tests", "torch2", "python2.14")
MARKER = "NPU_RUN_BENCH_MARKER"  # in every launched process's environment, to find leftovers
# A worker that prints "start ATTEMPT EPOCH_SECONDS", then sleeps in attempt 0 and ends after.
WORKER = ('echo "start $TORCHELASTIC_RESTART_COUNT $(date +%s.%N)"; '
          '[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exec sleep 600; exit 0')


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


def torchrun214():
    """The command that starts Debian unstable's torchrun 2.14 (the same libuv-less patch as 2.6's,
    under tests/torch2/python2.14), or None when its chroot has not been made (tests/torch2/chroot.sh
    sid, as root; scripts/bench/run_all.sh does)."""
    cache = os.environ.get("NPU_RUN_CACHE_DIR", "/var/cache/npu_run")
    if not os.path.exists(os.path.join(cache, "chroot-sid", ".npu_run-torch-complete")):
        return None
    return [TORCH214_PYTHON, os.path.join(HERE, "torchrun26_anchor.py")]


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


class Agent:
    """One launcher agent in a session of its own, its stdout and stderr read into (time, line)
    pairs by threads. Workers print "start ATTEMPT EPOCH_SECONDS" (the benchmarks' WORKER)."""

    def __init__(self, cmd, env):
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.out, self.err = [], []
        for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, lines), daemon=True).start()

    @staticmethod
    def _read(stream, lines):
        for line in stream:
            lines.append((time.time(), line))

    def started(self, attempt):
        """The start time a worker of `attempt` printed, or None."""
        for _, line in list(self.out):
            parts = line.split()
            if len(parts) == 3 and parts[0] == "start" and parts[1] == str(attempt):
                return float(parts[2])
        return None

    def started_since(self, moment):
        """The start time of the first worker, of any attempt, that started after `moment`."""
        for _, line in list(self.out):
            parts = line.split()
            if len(parts) == 3 and parts[0] == "start" and float(parts[2]) > moment:
                return float(parts[2])
        return None

    def said(self, text):
        return any(text in line for _, line in list(self.err))


def wait_until(condition, timeout):
    """True once condition() is, checked every 20 ms; False after `timeout` seconds."""
    end = time.time() + timeout
    while time.time() < end:
        if condition():
            return True
        time.sleep(0.02)
    return False


def stop_agents(agents, marker):
    """SIGKILLs every agent's session, reaps them, and kills what still carries the marker."""
    for a in agents:
        try:
            os.killpg(a.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        a.proc.wait()
    kill_leftovers(marker)


def loss_bench_parser(doc, sizes_help, patience):
    """The options of the benchmarks that kill a node and time what follows."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    parser.add_argument("--sizes", default="4,64", help=sizes_help)
    parser.add_argument("--torchrun-sizes", default="4", help="sizes torchrun 2.6 runs at")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--patience", type=float, default=patience)
    return parser


def median_text(times, patience):
    """'0.123 s (min-max)' of the runs that ended (None: none within `patience` seconds)."""
    done = [t for t in times if t is not None]
    if not done:
        return f"none within {patience:.0f} s"
    text = f"{statistics.median(done):.3f} s ({min(done):.3f}-{max(done):.3f})"
    if len(done) < len(times):
        text += f"; none in {len(times) - len(done)} of {len(times)} runs"
    return text
