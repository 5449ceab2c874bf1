#!/usr/bin/env python3
"""A stand-in for a MindSpore training script in a dynamic cluster (there is no MindSpore on the
machines that test npu_run): one program that is the scheduler under MS_ROLE=MS_SCHED and a
worker under MS_ROLE=MS_WORKER, as msrun runs the same script for both. It keeps the contract
mindspore.communication.init() relies on (../shared/design/REFERENCE.md section 9):

- the scheduler listens on MS_SCHED_HOST:MS_SCHED_PORT (SO_REUSEADDR, as MindSpore's TCP server),
  waits up to MS_TOPO_TIMEOUT seconds for MS_WORKER_NUM workers with distinct MS_NODE_IDs in
  0..MS_WORKER_NUM-1, tells them to go, and exits 0 once each said it is done; a worker lost
  before that (its connection closed) makes it exit 1, as MindSpore's does after MS_NODE_TIMEOUT;
- a worker connects (retrying until MS_TOPO_TIMEOUT), registers its MS_NODE_ID, waits for "go",
  prints what it was given, and says it is done; one whose scheduler went away exits 1 after
  MS_NODE_TIMEOUT seconds (here default 1), as MindSpore's notice it by missed heartbeats.

Under MS_SIMULATION_LEVEL (msrun --sim_level, MindSpore's dry run) init() builds no cluster: the
process compiles as rank RANK_ID of MS_WORKER_NUM would, alone; the stand-in says so and exits 0,
or 2 if it was also given a cluster role (a dry run must not wait for a scheduler).

Test switches: FAKE_MS_FAIL=<rank> makes that worker exit 7 before it is done, in attempt
FAKE_MS_FAIL_ATTEMPT (default 0) only; FAKE_MS_SCHED_FAIL=1 makes the scheduler exit 3 once every
worker registered; FAKE_MS_TRAIN_SECONDS=S makes each worker "train" S seconds before it is done;
FAKE_MS_SCHED_LINGER=S keeps the scheduler S seconds after the cluster finished.
"""
import os
import socket
import sys
import time

SHOWN = ("MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_WORKER_NUM", "MS_NODE_ID",
         "MS_NODE_RANK", "MS_TOPO_TIMEOUT", "RANK_ID", "RANK_SIZE", "DEVICE_ID", "RANK",
         "TORCH_NPU_USE_PARALLEL_TCPSTORE", "TORCHELASTIC_RESTART_COUNT")


def env(name):
    return os.environ.get(name)


def attempt():
    return int(env("TORCHELASTIC_RESTART_COUNT") or 0)


def say(text):
    print(text, flush=True)


def read_line(conn, buffer):
    while b"\n" not in buffer[0]:
        data = conn.recv(256)
        if not data:
            return None
        buffer[0] += data
        if len(buffer[0]) > 4096:
            return None
    line, _, rest = buffer[0].partition(b"\n")
    buffer[0] = rest
    return line.decode()


def scheduler():
    host, port, count = env("MS_SCHED_HOST"), int(env("MS_SCHED_PORT")), int(env("MS_WORKER_NUM"))
    topo_timeout = float(env("MS_TOPO_TIMEOUT") or 600)
    server = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(count)
    server.settimeout(topo_timeout)
    say(f"scheduler up on {host}:{port} for {count} workers (attempt {attempt()}) "
        + " ".join(f"{n}={env(n)}" for n in SHOWN))
    workers = {}
    while len(workers) < count:
        try:
            conn, _ = server.accept()
        except socket.timeout:
            say(f"scheduler: only {len(workers)} of {count} workers registered")
            sys.exit(1)
        buffer = [b""]
        line = read_line(conn, buffer)
        node_id = int(line.split()[1]) if line and line.startswith("register ") else -1
        if node_id < 0 or node_id >= count or node_id in workers:
            say(f"scheduler: bad registration {line!r}")
            sys.exit(1)
        workers[node_id] = (conn, buffer)
    say(f"scheduler: all {count} workers registered with ids {sorted(workers)}")
    if env("FAKE_MS_SCHED_FAIL") == "1":
        say("scheduler: failing on purpose")
        sys.exit(3)
    for conn, _ in workers.values():
        conn.sendall(b"go\n")
    for node_id, (conn, buffer) in sorted(workers.items()):
        line = read_line(conn, buffer)
        if line != f"done {node_id}":
            time.sleep(float(env("MS_NODE_TIMEOUT") or 1))  # missed heartbeats, as MindSpore
            say(f"scheduler: worker {node_id} was lost")
            sys.exit(1)
    say("scheduler: cluster finished")
    time.sleep(float(env("FAKE_MS_SCHED_LINGER") or 0))


def worker():
    host, port = env("MS_SCHED_HOST"), int(env("MS_SCHED_PORT"))
    node_id = int(env("MS_NODE_ID"))
    deadline = time.monotonic() + float(env("MS_TOPO_TIMEOUT") or 600)
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                say(f"worker {node_id}: no scheduler at {host}:{port}")
                sys.exit(1)
            time.sleep(0.05)
    conn.settimeout(None)
    conn.sendall(f"register {node_id}\n".encode())
    if read_line(conn, [b""]) != "go":
        # MindSpore's workers notice a lost scheduler by missed heartbeats, not at once.
        time.sleep(float(env("MS_NODE_TIMEOUT") or 1))
        say(f"worker {node_id}: the scheduler went away")
        sys.exit(1)
    say(f"worker {node_id} of {env('MS_WORKER_NUM')} runs "
        + " ".join(f"{n}={env(n)}" for n in SHOWN))
    time.sleep(float(env("FAKE_MS_TRAIN_SECONDS") or 0))
    if env("FAKE_MS_FAIL") == str(node_id) and attempt() == int(env("FAKE_MS_FAIL_ATTEMPT") or 0):
        say(f"worker {node_id}: failing on purpose")
        sys.exit(7)
    conn.sendall(f"done {node_id}\n".encode())


def simulation():
    if env("MS_ROLE") or env("MS_SCHED_HOST"):
        say(f"simulation with a cluster role: MS_ROLE={env('MS_ROLE')}")
        sys.exit(2)
    say(f"simulating rank {env('RANK_ID')} of {env('MS_WORKER_NUM')} at level "
        f"{env('MS_SIMULATION_LEVEL')} " + " ".join(f"{n}={env(n)}" for n in SHOWN))


if __name__ == "__main__":
    role = env("MS_ROLE")
    if env("MS_SIMULATION_LEVEL"):
        simulation()
    elif role == "MS_SCHED":
        scheduler()
    elif role == "MS_WORKER":
        worker()
    else:
        say(f"not in a MindSpore dynamic cluster: MS_ROLE={role}")
        sys.exit(2)
