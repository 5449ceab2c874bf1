#!/usr/bin/python3
"""Start-up of the npu_run binaries side by side with the shell for-loop of the Ascend docs.

Every command runs in turn, round after round, so the machine's drift spreads over all of them:
  - `npu_run --version`: the binary's own start (CLI11 answers it with a C++ exception, so it
    also shows the cost of the first exception: the reason the release is static-pie);
  - 8 x /bin/true: a launch from start to exit, against the for-loop floor
    `for i in 0..7; do DEVICE_ID=$i RANK_ID=$i /bin/true & done; wait`.
Binaries: --static (the release, static-pie), --dynamic (linked to Debian's shared libraries),
and optionally --plain-static (-static, not PIE). Target: the release within 2x of the loop.

    /usr/bin/python3 scripts/bench/startup.py --static dist/npu_run-0.1.0-linux-x86_64 \
        --dynamic build-release/npu_run --plain-static build-plain-static/npu_run --runs 200
"""

import argparse
import os
import statistics
import subprocess
import time

NPROC = 8
LOOP = ["/bin/sh", "-c", f"for i in $(seq 0 {NPROC - 1}); do DEVICE_ID=$i RANK_ID=$i RANK_SIZE={NPROC} "
                         "/bin/true & done; wait"]


def timed(cmd, env):
    start = time.perf_counter()
    code = subprocess.call(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {code}")
    return wall


def cell(values):
    med = statistics.median(values)
    return f"{med * 1000:.2f} ms ({min(values) * 1000:.2f}-{max(values) * 1000:.2f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--static", help="the release binary (static-pie)")
    parser.add_argument("--dynamic", help="a binary linked to the shared libraries")
    parser.add_argument("--plain-static", help="a binary linked with plain -static")
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    binaries = {name: path for name, path in (("static-pie (release)", args.static),
                                              ("plain -static", args.plain_static),
                                              ("dynamic", args.dynamic)) if path}
    if not binaries:
        parser.error("give at least one of --static, --dynamic, --plain-static")
    env = dict(os.environ, OMP_NUM_THREADS="1")  # npu_run's one log line about it is not measured
    version = {name: [] for name in binaries}
    launch = {name: [] for name in binaries}
    floor = []
    for _ in range(args.runs):
        floor.append(timed(LOOP, env))
        for name, path in binaries.items():
            version[name].append(timed([path, "--version"], env))
            launch[name].append(timed([path, "--nproc-per-node", str(NPROC), "--no-python", "/bin/true"],
                                      env))
    loop_median = statistics.median(floor)
    print("## Start-up of the binaries")
    print()
    print(f"Medians of {args.runs} rounds (min-max); each round runs every command once. "
          f"{NPROC} x /bin/true is a whole launch from start to exit.")
    print()
    print(f"| binary | `--version` | {NPROC} x /bin/true | vs the for-loop |")
    print("|---|---|---|---|")
    print(f"| shell for-loop (floor) | | {cell(floor)} | 1.00x |")
    for name in binaries:
        ratio = statistics.median(launch[name]) / loop_median
        print(f"| npu_run {name} | {cell(version[name])} | {cell(launch[name])} | {ratio:.2f}x |")
    if args.static:
        ratio = statistics.median(launch["static-pie (release)"]) / loop_median
        verdict = "met" if ratio <= 2.0 else "MISSED"
        print()
        print(f"Target: the release binary within 2x of the for-loop for {NPROC} workers: {ratio:.2f}x, {verdict}.")


if __name__ == "__main__":
    main()
