"""A 3-member etcd on loopback for the chaos runs' etcd faults (Debian's etcd-server, installed by
scripts/install_deps.sh): started once for a chaos session, its members killed, started again
with their data, frozen and thawed by pid; which one is etcd's leader asked over its JSON gateway.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

ETCD = "/usr/bin/etcd"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EtcdCluster:
    def __init__(self, scratch, members=3):
        if not os.access(ETCD, os.X_OK):
            raise SystemExit(f"chaos: {ETCD} is missing; run scripts/install_deps.sh")
        self.scratch = scratch
        # The members' data in memory: a disk kept busy by CI's background builds can stall an
        # fsync past etcd's election timeout, and each change of etcd's leader renews every lease.
        self.data = tempfile.mkdtemp(prefix="npu_run_chaos_etcd_",
                                     dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self.names = [f"c{i}" for i in range(members)]
        self.client = [free_port() for _ in self.names]
        self.peer = [free_port() for _ in self.names]
        self.procs = [None] * members
        self.initial = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in zip(self.names, self.peer))
        for i in range(members):
            self.start(i)
        self.wait_ready(30)

    def endpoints(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.client)

    def start(self, i):
        url = f"http://127.0.0.1:{self.client[i]}"
        log = open(os.path.join(self.scratch, f"{self.names[i]}.log"), "a")
        self.procs[i] = subprocess.Popen(
            [ETCD, "--name", self.names[i], "--data-dir",
             os.path.join(self.data, f"{self.names[i]}.data"), "--listen-client-urls", url,
             "--advertise-client-urls", url, "--listen-peer-urls",
             f"http://127.0.0.1:{self.peer[i]}", "--initial-advertise-peer-urls",
             f"http://127.0.0.1:{self.peer[i]}", "--initial-cluster", self.initial,
             "--initial-cluster-state", "new", "--initial-cluster-token", self.scratch],
            stdout=log, stderr=log)

    def kill(self, i):
        if self.procs[i] is not None:
            self.procs[i].kill()
            self.procs[i].wait()
            self.procs[i] = None

    def freeze(self, i):
        if self.procs[i] is not None:
            os.kill(self.procs[i].pid, signal.SIGSTOP)

    def thaw(self, i):
        if self.procs[i] is not None:
            os.kill(self.procs[i].pid, signal.SIGCONT)

    def status(self, i, timeout=2.0):
        request = urllib.request.Request(f"http://127.0.0.1:{self.client[i]}/v3/maintenance/status",
                                         data=b"{}", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return json.loads(answer.read())
        except (OSError, ValueError):
            return None

    def leader(self):
        """The index of the member raft elected, or None."""
        for i, proc in enumerate(self.procs):
            status = self.status(i) if proc is not None else None
            if status and status.get("leader") == status.get("header", {}).get("member_id"):
                return i
        return None

    def wait_ready(self, seconds):
        """Until every member runs and one of them is the leader."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if all(p is not None for p in self.procs) and all(
                    self.status(i, 0.5) for i in range(len(self.procs))) and self.leader() is not None:
                return
            time.sleep(0.2)
        raise SystemExit("chaos: etcd did not come up; its logs are in " + self.scratch)

    def stop(self):
        for i in range(len(self.procs)):
            self.thaw(i)
            self.kill(i)
        shutil.rmtree(self.data, ignore_errors=True)
