#!/usr/bin/python3
"""What the job's timeline, report and metrics cost, side by side in one run.

1. The agent's CPU with 8 workers beating 1,000 times a second (as beat_cost.py): workers that do
   not beat; beating, recording the timeline (always on); and beating with --metrics-port scraped
   ten times a second (Prometheus scrapes every 15 s by default) and --log-dir --report written
   at the end. With --baseline BINARY, an npu_run built before the timeline existed runs the
   same beating workers too: the cost of recording itself.
2. The report of a synthetic 1,024-node job: 8 ranks per node beating 10,000 times each, as the
   agents' thinned samples bring them to node 0 (a first beat, 32 samples and a last beat per
   rank and round), over two rounds with a restart between: timeline.json's size, and how long
   `npu_run report` takes to write the page, and the page's size.

    /usr/bin/python3 scripts/bench/record_cost.py [--seconds 5] [--runs 3] [--baseline OLD_NPU_RUN]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import MARKER, ROOT, free_port, kill_leftovers  # noqa: E402
from beat_cost import WORKER, agent_cpu_seconds  # noqa: E402


def one_run(cmd, env, seconds, scrape_port=None):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    cpu = [0.0]
    scrapes = [0]

    def sample():
        while p.poll() is None:
            try:
                cpu[0] = agent_cpu_seconds(p.pid)
            except OSError:
                break
            if scrape_port:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{scrape_port}/metrics", timeout=2).read()
                    scrapes[0] += 1
                except OSError:
                    pass
            time.sleep(0.1 if scrape_port else 0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = p.communicate(timeout=seconds + 60)
    sampler.join()
    if p.returncode != 0:
        raise SystemExit(f"{cmd}: npu_run exited {p.returncode}\n{err}")
    return {"cpu": cpu[0], "scrapes": scrapes[0]}


def agent_cost(args, env, script, tmp):
    base = ["--nproc-per-node", str(args.workers), script]
    work = [str(args.rate), str(args.seconds)]
    modes = {
        "not beating": lambda: ([args.npu_run] + base + ["silent"] + work, None),
        "beating, timeline recorded": lambda: ([args.npu_run] + base + ["beat"] + work, None),
    }
    if args.baseline:
        modes["beating, before the timeline"] = lambda: ([args.baseline] + base + ["beat"] + work, None)

    def with_records():
        port = free_port()
        logs = tempfile.mkdtemp(dir=tmp)
        return ([args.npu_run, "--metrics-port", f"127.0.0.1:{port}", "--log-dir", logs,
                 "--report"] + base + ["beat"] + work, port)
    modes["beating, metrics scraped 10/s, report written"] = with_records
    rows = {name: [] for name in modes}
    for _ in range(args.runs):
        for name, make in modes.items():  # interleaved: the machine's state is shared
            cmd, port = make()
            rows[name].append(one_run(cmd, env, args.seconds, port))
    print(f"{args.workers} workers x {args.rate:.0f} beats/s for {args.seconds:.0f} s, "
          f"{args.runs} runs each (median):\n")
    print("| agent | CPU (share of one core) |")
    print("|---|---:|")
    for name, runs in rows.items():
        runs.sort(key=lambda r: r["cpu"])
        r = runs[len(runs) // 2]
        extra = f" ({r['scrapes']} scrapes)" if r["scrapes"] else ""
        print(f"| {name}{extra} | {100 * r['cpu'] / args.seconds:.2f} % |")


def synthetic_timeline(nodes, per_node, samples, beats):
    """What node 0 holds after two rounds of `nodes` x `per_node` ranks beating `beats` times:
    per rank and round a first beat, `samples` samples and a last beat (the agents thin them)."""
    t0 = 1_800_000_000_000
    events = []
    rounds = []
    plan = [(0, 20_000, 520_000, "restart"), (540_000, 560_000, 1_060_000, "finish")]
    for r, (began, first, last, action) in enumerate(plan):
        for n in range(nodes):
            host = f"node-{n:04d}"
            if r == 0:
                events.append({"node": n, "host": host, "rank": -1, "round": r, "phase": "agent_start", "time": t0 + began + n})
            for phase, at in (("join", began + 5_000), ("assigned", began + 15_000), ("spawned", began + 15_100)):
                events.append({"node": n, "host": host, "rank": -1, "round": r, "phase": phase, "time": t0 + at})
            for l in range(per_node):
                rank = n * per_node + l
                events.append({"node": n, "host": host, "rank": rank, "round": r, "phase": "first_beat", "time": t0 + first})
                for s in range(1, samples + 1):
                    at = first + (last - first) * s // (samples + 1)
                    step = beats * s // (samples + 1)
                    events.append({"node": n, "host": host, "rank": rank, "round": r, "phase": "beat", "time": t0 + at, "step": step, "detail": f"step {step} loss 0.31"})
                events.append({"node": n, "host": host, "rank": rank, "round": r, "phase": "last_beat", "time": t0 + last, "step": beats, "detail": f"step {beats} loss 0.30"})
            events.append({"node": n, "host": host, "rank": -1, "round": r, "phase": "exit", "time": t0 + last + 2_000})
        events.append({"node": -1, "host": "", "rank": -1, "round": r, "phase": "finished" if action == "finish" else "restart", "time": t0 + last + 3_000})
        decision = {"round": r, "action": action, "exit_code": 0, "restart_count": 1}
        if action == "restart":
            decision["root_cause"] = {"host": "node-0017", "node_rank": 17, "rank": 139, "description": "exit code 1",
                                      "evidence": {"exception": "RuntimeError", "frame": "train.py:88 in step"}}
        rounds.append({"round": r, "blame": {"round": r, "began": t0 + began, "formed": t0 + began + 15_000, "world_size": nodes * per_node,
                                             "blame": f"round {r} formed in 15.0 s: the last node to join was node 17 (node-0017), 0.4 s after the first"},
                       "decision": decision})
    return {"version": 1, "run_id": "synthetic-1024", "dropped": 0, "rounds": rounds, "events": events}


def report_cost(args, tmp):
    path = os.path.join(tmp, "timeline.json")
    with open(path, "w") as f:
        json.dump(synthetic_timeline(args.nodes, 8, 32, 10_000), f)
    out = os.path.join(tmp, "report.html")
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run([args.npu_run, "report", path, "-o", out], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    times.sort()
    print(f"\nThe report of a synthetic {args.nodes:,}-node job (8 ranks each, 10,000 beats per rank, "
          "two rounds):\n")
    print("| timeline.json | report.html | npu_run report (median) |")
    print("|---:|---:|---:|")
    print(f"| {os.path.getsize(path) / 1e6:.1f} MB | {os.path.getsize(out) / 1e6:.2f} MB | "
          f"{times[len(times) // 2]:.2f} s |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    parser.add_argument("--baseline", help="an npu_run without the timeline, to compare with")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--rate", type=float, default=1000, help="beats per second per worker")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--nodes", type=int, default=1024, help="of the synthetic job")
    args = parser.parse_args()
    marker = f"record-cost-{os.getpid()}"
    env = dict(os.environ, **{MARKER: marker})
    env.setdefault("PYTHON_EXEC", "/usr/bin/python3")
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "worker.py")
        with open(script, "w") as f:
            f.write(WORKER.format(python_dir=os.path.join(ROOT, "python")))
        try:
            if not args.report_only:
                agent_cost(args, env, script, tmp)
            report_cost(args, tmp)
        finally:
            kill_leftovers(marker)


if __name__ == "__main__":
    main()
