#!/usr/bin/python3
"""Anchor for the rendezvous benchmark: a barrier of N clients on PyTorch's TCPStore.

torchrun's c10d rendezvous is built on TCPStore; this measures the primitive itself, without
torchrun's rounds on top. One master store; N client stores spread over client processes
(--per-process each, to stay below the open-files limit). Every client adds 1 to "joined"; the
one that brings it to N sets "go"; every client then waits for "go". Time: from releasing the
client processes (torch already imported) until the last client has seen "go" (a lower bound for any rendezvous that
needs every node to hear of every other).

    /usr/bin/python3 scripts/bench/tcpstore_barrier.py [--sizes 256,1024,4096] [--runs 3]
"""

import argparse
import datetime
import math
import os
import resource
import socket
import statistics
import subprocess
import sys
import time


def client_main(port, n, count):
    import torch.distributed as dist
    timeout = datetime.timedelta(seconds=300)
    # Importing torch takes about a second: it happens before the clock starts.
    print("ready", flush=True)
    sys.stdin.readline()
    stores = []
    for _ in range(count):
        store = dist.TCPStore("127.0.0.1", port, None, False, timeout)
        if store.add("joined", 1) == n:
            store.set("go", "1")
        stores.append(store)
    for store in stores:
        store.wait(["go"])
    print(time.time(), flush=True)


def one_run(n, per_process):
    import torch.distributed as dist
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master = dist.TCPStore("127.0.0.1", port, None, True, datetime.timedelta(seconds=300),
                           wait_for_workers=False)
    procs = []
    for i in range(math.ceil(n / per_process)):
        count = min(per_process, n - i * per_process)
        procs.append(subprocess.Popen([sys.executable, __file__, "--client", str(port), str(n), str(count)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for p in procs:
        p.stdout.readline()  # "ready"
    start = time.time()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    ends = [float(p.communicate(timeout=600)[0].split()[-1]) for p in procs]
    if any(p.returncode for p in procs):
        sys.exit(f"a TCPStore client process failed at N={n}")
    del master
    return max(ends) - start


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        client_main(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,1024,4096")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--per-process", type=int, default=2048, help="client stores per process")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the master holds N connections
    print(f"## TCPStore barrier: N clients add, the last sets 'go', all wait for it "
          f"(median, min-max of {args.runs} runs)\n")
    print("| clients | time to the last client released |")
    print("|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        times = [one_run(n, args.per_process) for _ in range(args.runs)]
        print(f"| {n} | {statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f}) |", flush=True)
    print(f"\nmachine: {os.cpu_count()} cores; torch TCPStore from /usr/bin/python3")


if __name__ == "__main__":
    main()
