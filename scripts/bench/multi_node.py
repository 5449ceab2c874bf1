#!/usr/bin/python3
"""Multi-node launcher benchmark on loopback: N agents, one worker each, side by side.

For N = --sizes (default 2,4,8,16) agents on 127.0.0.1, each with one /bin/true worker:
  - launch-to-exit: from starting all N agents until the last one exits;
  - peak RSS of the largest agent (GNU time's %M around every agent).
And for 4 agents whose node-0 worker fails after 0.3 s while the others sleep --straggle
seconds: the time from the failure until the last agent exits.

Launchers: npu_run (node 0's agent hosts the rendezvous), and Debian's torchrun 1.13 through
../shared/anchors/torchrun_py311.py (and Debian 13's torchrun 2.6 through torchrun26_anchor.py
when its chroot is made) with --rdzv_backend static (node ranks given) and c10d
(torch's TCPStore-based rendezvous), both with --monitor_interval 0.1 (its default 5 s would
only add seconds). torchrun's agents watch their own workers only: after a failure on one
node, the others run until their workers end on their own, which --straggle bounds.

    /usr/bin/python3 scripts/bench/multi_node.py --npu-run build/npu_run [--runs 3] [--sizes 2,4]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import MARKER, free_port, kill_leftovers, torchrun26, torchrun_anchor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_ANCHOR = torchrun_anchor()



def agent_commands(args, name, n, port, worker):
    """The N agents' command lines for launcher `name`."""
    py = "/usr/bin/python3"
    if name == "npu_run":
        return [[args.npu_run, "--nnodes", str(n), "--node-rank", str(i), "--master-addr", "127.0.0.1",
                 "--master-port", str(port), "--nproc-per-node", "1", "--no-python", *worker]
                for i in range(n)]
    common = ["--nproc_per_node", "1", "--monitor_interval", "0.1", "--max_restarts", "0"]
    torchrun = torchrun26() if name.startswith("torchrun 2.6") else [py, args.anchor]
    if name.endswith("static"):
        return [[*torchrun, "--nnodes", str(n), "--node_rank", str(i), "--master_addr", "127.0.0.1",
                 "--master_port", str(port), "--rdzv_backend", "static", *common, "--no_python", *worker]
                for i in range(n)]
    return [[*torchrun, "--nnodes", str(n), "--rdzv_backend", "c10d", "--rdzv_endpoint",
             f"127.0.0.1:{port}", "--rdzv_id", f"bench{port}", *common, "--no_python", *worker]
            for _ in range(n)]



def run_job(commands, env, timeout):
    """Starts every agent under GNU time at once; returns (wall s, peak agent RSS MB, exit codes,
    time.time() when the last one exited)."""
    with tempfile.TemporaryDirectory() as tmp:
        rss_files = [os.path.join(tmp, f"rss{i}") for i in range(len(commands))]
        start = time.perf_counter()
        procs = [subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss, *cmd], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for cmd, rss in zip(commands, rss_files)]
        codes = [p.wait(timeout=timeout) for p in procs]
        wall = time.perf_counter() - start
        ended = time.time()
        peak = max(int(open(rss).read().split()[-1]) for rss in rss_files) / 1024.0
    return wall, peak, codes, ended


def fmt(values, scale=1.0, unit="s", digits=2):
    return (f"{statistics.median(values) * scale:.{digits}f} {unit} "
            f"({min(values) * scale:.{digits}f}-{max(values) * scale:.{digits}f})")


def launchers(args):
    """"torchrun ..." is Debian 12's 1.13; Debian 13's 2.6 joins when its chroot is made."""
    names = ["npu_run", "torchrun static", "torchrun c10d"]
    if args.torch26 == "auto" and torchrun26():
        names += ["torchrun 2.6 static", "torchrun 2.6 c10d"]
    return names


def bench_launch(args, env):
    results = {}  # (name, n) -> (walls, rss)
    for n in args.sizes:
        for name in launchers(args):
            walls, rss = [], []
            for i in range(args.runs):
                marker = f"mn-{name}-{n}-{i}"
                cmds = agent_commands(args, name, n, free_port(), ["/bin/true"])
                wall, peak, codes, _ = run_job(cmds, dict(env, **{MARKER: marker}), 300)
                kill_leftovers(marker)
                if any(codes):
                    sys.exit(f"{name} with {n} agents: exit codes {codes}")
                walls.append(wall)
                rss.append(peak)
            results[(name, n)] = (walls, rss)
    return results


def bench_failure(args, env):
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        stamp = os.path.join(tmp, "failed_at")
        # Node 0's worker fails; the others' workers would run --straggle seconds more.
        worker = ["/bin/sh", "-c",
                  f"if [ \"$RANK\" = 0 ]; then sleep 0.3; date +%s.%N > {stamp}; exit 1; fi; "
                  f"exec sleep {args.straggle}"]
        for name in launchers(args):
            delays = []
            # torchrun 2.6 c10d waits out its 300 s exit barrier every time: once is enough.
            for i in range(1 if name == "torchrun 2.6 c10d" else args.runs):
                marker = f"mnf-{name}-{i}"
                cmds = agent_commands(args, name, 4, free_port(), worker)
                # torchrun 2.6's survivors wait out its 300 s exit barrier for the failed node.
                _, _, codes, ended = run_job(cmds, dict(env, **{MARKER: marker}), 420)
                kill_leftovers(marker)
                if not any(codes):
                    sys.exit(f"{name}: a failing worker did not fail the job")
                delays.append(ended - float(open(stamp).read()))
            results[name] = delays
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    parser.add_argument("--anchor", default=DEFAULT_ANCHOR)
    parser.add_argument("--sizes", default="2,4,8,16")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--torch26", choices=["auto", "off"], default="auto",
                        help="auto: add torchrun 2.6 when its chroot is made")
    parser.add_argument("--straggle", type=float, default=10.0,
                        help="seconds the surviving workers run in the failure test")
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3")

    launch = bench_launch(args, env)
    failure = bench_failure(args, env)

    print(f"## Multi-node launch on loopback: N agents x 1 worker (/bin/true); median (min-max) of "
          f"{args.runs} runs\n")
    others = launchers(args)[1:]
    c10d = [name for name in others if name.endswith("c10d")]
    print("| agents | npu_run | " + " | ".join(others) + " | " +
          " | ".join(f"{name} / npu_run" for name in c10d) + " | peak agent RSS npu_run / " +
          " / ".join(c10d) + " |")
    print("|---" * (2 + len(others) + len(c10d) + 1) + "|")
    for n in args.sizes:
        ours = statistics.median(launch[("npu_run", n)][0])
        cells = [fmt(launch[(name, n)][0]) for name in others]
        ratios = [f"{statistics.median(launch[(name, n)][0]) / ours:.0f}x" for name in c10d]
        rss = [f"{statistics.median(launch[('npu_run', n)][1]):.1f} MB"] + [
            f"{statistics.median(launch[(name, n)][1]):.0f} MB" for name in c10d]
        print(f"| {n} | {fmt(launch[('npu_run', n)][0], 1000, 'ms', 1)} | " + " | ".join(cells) +
              " | " + " | ".join(ratios) + " | " + " / ".join(rss) + " |")
    print(f"\n## A worker failing on one of 4 nodes, to the last agent's exit (the other workers "
          f"would run {args.straggle:.0f} s more)\n")
    print("| launcher | failure to last exit | vs npu_run |")
    print("|---|---|---|")
    ours = statistics.median(failure["npu_run"])
    for name in launchers(args):
        print(f"| {name} | {fmt(failure[name], 1000, 'ms', 0)} | "
              f"{statistics.median(failure[name]) / ours:.0f}x |")
    if args.torch26 == "auto" and not torchrun26():
        print("\ntorchrun 2.6 left out: its chroot is not made (run tests/torch2/chroot.sh as root)")
    print(f"\nmachine: {os.cpu_count()} cores, {os.uname().release}; npu_run: {args.npu_run}")


if __name__ == "__main__":
    main()
