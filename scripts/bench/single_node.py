#!/usr/bin/python3
"""Single-node launcher benchmark: npu_run side by side with torchrun and the shell for-loop.

Everything runs in one invocation on this machine, so the ratios compare like with like:
  - launch-to-exit of N workers running /bin/true (N = --nproc, default 8);
  - time from a worker failing to the launcher exiting (the other workers are sleeping and
    die on SIGTERM, so no grace period is needed);
  - peak RSS of the launcher process, from GNU time's %M. Measured through /usr/bin/time, not
    this script's own wait4: Linux carries a parent's RSS high-water mark into a child across
    fork+exec, so every child of this Python process would report at least its ~12 MB. The
    workers are /bin/true, far smaller than any launcher, so the maximum is the launcher's own.

Anchors: Debian's torchrun 1.13 through ../shared/anchors/torchrun_py311.py (default monitor
interval 5 s, and 0.1 s), Debian 13's torchrun 2.6 (monitor 0.1 s, its default) when its chroot
is made (tests/torch2/chroot.sh), and the Ascend docs' shell for-loop as the zero-overhead floor.
Launch overhead = median wall time - the for-loop's median wall time.

    /usr/bin/python3 scripts/bench/single_node.py --npu-run build/npu_run [--runs 10]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import MARKER, kill_leftovers, torchrun26, torchrun214, torchrun_anchor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_ANCHOR = torchrun_anchor()


def run_once(cmd, env, cpu=False):
    """Runs cmd under GNU time to completion; returns (wall seconds, peak RSS in MB, exit code),
    plus the CPU seconds (user + system, the launcher's and its children's) when `cpu`.

    Every launcher, the floor included, pays the same small cost of /usr/bin/time, so it cancels
    out of the overheads computed against the floor.
    """
    with tempfile.NamedTemporaryFile("r") as rss_file:
        start = time.perf_counter()
        code = subprocess.call(["/usr/bin/time", "-f", "%M %U %S", "-o", rss_file.name, *cmd], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        fields = rss_file.read().split()
    peak, user, system = int(fields[-3]) / 1024.0, float(fields[-2]), float(fields[-1])
    return (wall, peak, code, user + system) if cpu else (wall, peak, code)



def summary(values):
    return statistics.median(values), min(values), max(values)


def fmt(values, unit="ms", scale=1000.0):
    med, lo, hi = summary(values)
    return f"{med * scale:.1f} {unit} ({lo * scale:.1f}-{hi * scale:.1f})"


def launchers(args):
    """name -> function(nproc, worker argv) -> launcher command line."""
    py = "/usr/bin/python3"

    def loop(nproc, worker):
        body = " ".join(worker) if worker == ["/bin/true"] else " ".join(f"'{w}'" for w in worker)
        return ["/bin/sh", "-c", f"for i in $(seq 0 {nproc - 1}); do DEVICE_ID=$i RANK_ID=$i RANK_SIZE={nproc} "
                                 f"{body} & done; wait"]

    named = {
        "shell for-loop (floor)": loop,
        "npu_run": lambda nproc, worker: [args.npu_run, "--nproc-per-node", str(nproc), "--no-python", *worker],
        "torchrun (monitor 5 s)": lambda nproc, worker: [py, args.anchor, "--nproc_per_node", str(nproc),
                                                         "--no_python", *worker],
        "torchrun (monitor 0.1 s)": lambda nproc, worker: [py, args.anchor, "--nproc_per_node", str(nproc),
                                                           "--monitor_interval", "0.1", "--no_python", *worker],
    }
    for name, command in (("torchrun 2.6", torchrun26()), ("torchrun 2.14", torchrun214())):
        if command:
            named[name] = lambda nproc, worker, command=command: [
                *command, "--nproc_per_node", str(nproc), "--no_python", *worker]
    if args.anchors == "one":  # the smoke run: every code path once, one torchrun
        named = {k: v for k, v in named.items() if not k.startswith("torchrun") or "0.1 s" in k}
    return named


def bench_launch(args, env, nproc):
    rows = {}
    for name, make in launchers(args).items():
        runs = args.runs if name.startswith("torchrun") else args.runs * 3
        walls, rss = [], []
        for i in range(runs):
            marker = f"launch-{name}-{nproc}-{i}"
            run_env = dict(env, **{MARKER: marker})
            wall, peak, code = run_once(make(nproc, ["/bin/true"]), run_env)
            kill_leftovers(marker)
            if code != 0:
                sys.exit(f"{name}: launch run exited {code}")
            walls.append(wall)
            rss.append(peak)
        rows[name] = (walls, rss)
    return rows


def bench_idle_cpu(args, env):
    """CPU seconds a launcher spends while 8 workers sleep --idle-seconds: its supervision cost."""
    rows = {}
    for name, make in launchers(args).items():
        if name.startswith("shell"):
            continue
        shares, peaks, cpus = [], [], []
        for i in range(args.idle_runs):
            marker = f"idle-{name}-{i}"
            wall, peak, code, cpu = run_once(make(8, ["/bin/sleep", str(args.idle_seconds)]),
                                             dict(env, **{MARKER: marker}), cpu=True)
            kill_leftovers(marker)
            if code != 0:
                sys.exit(f"{name}: idle run exited {code}")
            shares.append(cpu / wall)
            cpus.append(cpu)
            peaks.append(peak)
        rows[name] = (cpus, shares, peaks)
    return rows


def bench_failure(args, env):
    """Rank 0 records the time and exits 1 while the others sleep; measures until the launcher exits."""
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        stamp = os.path.join(tmp, "failed_at")
        worker = ["/bin/sh", "-c",
                  f"if [ \"$LOCAL_RANK\" = 0 ]; then sleep 0.3; date +%s.%N > {stamp}; exit 1; fi; exec sleep 60"]
        for name, make in launchers(args).items():
            if name.startswith("shell"):
                continue  # a for-loop has no failure handling: it would wait 60 s
            delays = []
            for i in range(args.runs):
                marker = f"fail-{name}-{i}"
                run_env = dict(env, **{MARKER: marker})
                proc = subprocess.Popen(make(4, worker), env=run_env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
                proc.wait(timeout=120)
                exited = time.time()
                kill_leftovers(marker)
                with open(stamp) as f:
                    failed = float(f.read())
                if proc.returncode == 0:
                    sys.exit(f"{name}: a failing worker did not fail the job")
                delays.append(exited - failed)
            rows[name] = delays
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    parser.add_argument("--anchor", default=DEFAULT_ANCHOR)
    parser.add_argument("--nproc", default="1,8,32", help="worker counts to launch")
    parser.add_argument("--idle-seconds", type=float, default=10.0,
                        help="length of the job whose supervision CPU time is measured")
    parser.add_argument("--idle-runs", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5, help="runs per torchrun variant (npu_run and the loop: 3x)")
    parser.add_argument("--anchors", choices=["all", "one"], default="all",
                        help="every torchrun, or only 1.13's at a 0.1 s monitor (the smoke run)")
    args = parser.parse_args()
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3")

    sizes = [int(n) for n in args.nproc.split(",")]
    launches = {n: bench_launch(args, env, n) for n in sizes}
    idle = bench_idle_cpu(args, env)
    failure = bench_failure(args, env)

    for nproc, launch in launches.items():
        floor = statistics.median(launch["shell for-loop (floor)"][0])
        npu_overhead = statistics.median(launch["npu_run"][0]) - floor
        print(f"## Launch of {nproc} x /bin/true (median, min-max; {args.runs} runs per torchrun "
              f"variant, {3 * args.runs} otherwise)\n")
        print("| launcher | wall time | overhead over the for-loop | overhead vs npu_run | peak RSS |")
        print("|---|---|---|---|---|")
        for name, (walls, rss) in launch.items():
            overhead = statistics.median(walls) - floor
            ratio = "-" if name.startswith("shell") else f"{overhead / max(npu_overhead, 1e-6):.0f}x"
            print(f"| {name} | {fmt(walls)} | {overhead * 1000:.1f} ms | {ratio} | "
                  f"{statistics.median(rss):.1f} MB ({min(rss):.1f}-{max(rss):.1f}) |")
        print()
    print(f"## Supervision cost: 8 workers sleeping {args.idle_seconds:.0f} s (median, min-max of "
          f"{args.idle_runs} runs)\n")
    print("| launcher | CPU time (user + system) | share of one core | peak RSS |")
    print("|---|---|---|---|")
    for name, (cpus, shares, peaks) in idle.items():
        print(f"| {name} | {fmt(cpus, 'ms', 1000.0)} | {fmt(shares, '%', 100.0)} | "
              f"{fmt(peaks, 'MB', 1.0)} |")
    print("\n## Worker failure to launcher exit (4 workers; the other 3 die on SIGTERM)\n")
    print("| launcher | failure-to-exit | vs npu_run |")
    print("|---|---|---|")
    npu_fail = statistics.median(failure["npu_run"])
    for name, delays in failure.items():
        print(f"| {name} | {fmt(delays)} | {statistics.median(delays) / npu_fail:.0f}x |")
    if args.anchors == "one":
        print("\ntorchrun at its default monitor and torchrun 2.x left out (--anchors one)")
    if not torchrun26():
        print("\ntorchrun 2.6 left out: its chroot is not made (run tests/torch2/chroot.sh as root)")
    if not torchrun214():
        print("\ntorchrun 2.14 left out: its chroot is not made (run tests/torch2/chroot.sh sid as root)")
    print(f"\nmachine: {os.cpu_count()} cores, {os.uname().release}; npu_run: {args.npu_run}")


if __name__ == "__main__":
    main()
