#!/usr/bin/python3
"""False alarms: healthy jobs, run again and again, must name nobody.

The suite runs each healthy case once (a probed job of three healthy nodes; a healthy straggler
watch at windows of one second, the noisiest it allows, for five windows); a false alarm is rare
by design (the probe's threshold, three windows in a row over the straggler watch's), so one run
proves little about it. This runs the same Catch cases of the integration suite --runs times
each, with the torch that judges them (the straggler watch needs 2.14's flight recorder), and
counts the runs that named nobody. Each run is the case itself: its job, its checks, its strays.

    /usr/bin/python3 scripts/bench/false_alarms.py --integration-tests build/tests/integration_tests
        [--runs 10] [--list]   (--list: only check that the cases exist, the smoke run)
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH214 = os.path.join(ROOT, "tests", "torch2", "python2.14")
CASES = [
    ("preflight: healthy nodes are probed, then the round forms with the probe's figures",
     "1.13", "/usr/bin/python3"),
    ("stragglers: a healthy run at one-second windows names no straggler", "2.14", TORCH214),
]


def run_case(binary, case, python):
    env = dict(os.environ, PYTHON_EXEC=python)
    start = time.perf_counter()
    done = subprocess.run([binary, case, "--warn", "NoTests"], env=env, capture_output=True,
                          text=True, check=False)
    return done.returncode == 0, time.perf_counter() - start, done.stdout[-2000:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--integration-tests", default=os.path.join(ROOT, "build", "tests",
                                                                    "integration_tests"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--list", action="store_true", help="only check that the cases exist")
    args = parser.parse_args()
    listed = subprocess.run([args.integration_tests, "--list-test-names-only"], capture_output=True,
                            text=True, check=False).stdout.splitlines()
    missing = [case for case, _, _ in CASES if case not in {line.strip() for line in listed}]
    if missing:
        print(f"false alarms: no such case in {args.integration_tests}: {missing}", file=sys.stderr)
        return 1
    print("## False alarms: healthy jobs run again and again (scripts/bench/false_alarms.py)\n")
    print("| case | torch | runs | named nobody | seconds a run |")
    print("|---|---|---|---|---|")
    if args.list:
        for case, torch, _ in CASES:
            print(f"| {case} | {torch} | 0 | listed | - |")
        return 0
    failed = 0
    for case, torch, python in CASES:
        if python != "/usr/bin/python3" and subprocess.run([python, "-c", "import torch"],
                                                          capture_output=True).returncode != 0:
            print(f"| {case} | {torch} | 0 | skipped: no torch {torch} chroot | - |")
            continue
        results = [run_case(args.integration_tests, case, python) for _ in range(args.runs)]
        clean = sum(ok for ok, _, _ in results)
        failed += args.runs - clean
        for ok, _, tail in results:
            if not ok:
                print(tail, file=sys.stderr)
        seconds = statistics.median(s for _, s, _ in results)
        print(f"| {case} | {torch} | {args.runs} | {clean} of {args.runs} | {seconds:.1f} s |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
