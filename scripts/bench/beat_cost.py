#!/usr/bin/python3
"""What progress beats cost the agent: 8 Python workers, each beating 1,000 times a second
through python/npu_run_progress.py for a few seconds, against the same workers running the same
paced loop without beating, side by side in one run. Reported: the agent's own CPU time (from
/proc/<pid>/stat, its children excluded) as a share of one core, and the beats it received.

    /usr/bin/python3 scripts/bench/beat_cost.py [--seconds 5] [--rate 1000] [--workers 8]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import MARKER, ROOT, kill_leftovers  # noqa: E402

WORKER = """
import os, sys, time
sys.path.insert(0, {python_dir!r})
import npu_run_progress
beat = sys.argv[1] == "beat"
rate, seconds = float(sys.argv[2]), float(sys.argv[3])
start = time.perf_counter()
sent = 0
while True:
    now = time.perf_counter() - start
    if now >= seconds:
        break
    due = int(now * rate)
    while sent < due:
        sent += 1
        if beat:
            npu_run_progress.beat(f"step {{sent}}")
    time.sleep(0.001)
print(f"sent {{sent}}", flush=True)
"""


def agent_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(npu_run, script, mode, args, env):
    cmd = [npu_run, "--nproc-per-node", str(args.workers), "--log-level", "debug", script, mode,
           str(args.rate), str(args.seconds)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    cpu = [0.0]

    def sample():
        while p.poll() is None:
            try:
                cpu[0] = agent_cpu_seconds(p.pid)
            except OSError:
                break
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = p.communicate(timeout=args.seconds + 60)
    sampler.join()
    if p.returncode != 0:
        raise SystemExit(f"{mode}: npu_run exited {p.returncode}\n{err}")
    sent = sum(int(m) for m in re.findall(r"sent (\d+)", out))
    received = sum(int(m) for m in re.findall(r"local rank \d+: (\d+) progress beats", err))
    return {"cpu": cpu[0], "sent": sent, "received": received}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--rate", type=float, default=1000, help="beats per second per worker")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    marker = f"beat-cost-{os.getpid()}"
    env = dict(os.environ, **{MARKER: marker})
    env.setdefault("PYTHON_EXEC", "/usr/bin/python3")
    rows = {"silent": [], "beat": []}
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "worker.py")
        with open(script, "w") as f:
            f.write(WORKER.format(python_dir=os.path.join(ROOT, "python")))
        try:
            for _ in range(args.runs):
                for mode in ("silent", "beat"):  # interleaved: the machine's state is shared
                    rows[mode].append(one_run(args.npu_run, script, mode, args, env))
        finally:
            kill_leftovers(marker)
    print(f"{args.workers} workers x {args.rate:.0f} beats/s for {args.seconds:.0f} s, "
          f"{args.runs} runs each (median):\n")
    print("| workers | agent CPU (share of one core) | beats sent | beats received |")
    print("|---|---:|---:|---:|")
    medians = {}
    for mode, runs in rows.items():
        runs.sort(key=lambda r: r["cpu"])
        r = runs[len(runs) // 2]
        medians[mode] = r
        print(f"| {'beating' if mode == 'beat' else 'not beating'} | "
              f"{100 * r['cpu'] / args.seconds:.2f} % | {r['sent']} | {r['received']} |")
    extra = medians["beat"]["cpu"] - medians["silent"]["cpu"]
    per_beat = extra / max(1, medians["beat"]["received"]) * 1e6
    print(f"\nbeats cost the agent {100 * extra / args.seconds:.2f} % of one core "
          f"({per_beat:.2f} us per beat received)")


if __name__ == "__main__":
    main()
