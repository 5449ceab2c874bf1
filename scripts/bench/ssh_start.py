#!/usr/bin/python3
"""Starting N hosts over ssh: `npu_run --hosts` (flat fan-out, and --ssh-tree) against the ssh
for-loops a user writes, side by side in one run. The hosts are simulated on loopback: one
network namespace with only `lo`, one real OpenSSH server in it, and hosts 127.0.0.1 ..
127.0.0.N (every agent of a host runs one worker, /bin/true). Reported per N: the time from the
command to node 0's "all N nodes joined" (every agent started and met), and to the job's end.

On loopback a login costs only CPU; on a cluster it waits too (network round trips, PAM, LDAP,
a loaded sshd: often 0.1-1 s). --login-delay S stands for that wait: every connection (of every
variant alike) goes through a ProxyCommand that sleeps S seconds, then relays the TCP stream
with bash's /dev/tcp.

Needs root (a namespace, sshd). Traffic stays on the namespace's loopback.

    /usr/bin/python3 scripts/bench/ssh_start.py [--hosts 8,32,64] [--runs 3] [--npu-run PATH]
"""

import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import MARKER, ROOT, kill_leftovers  # noqa: E402

JOINED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) .*round 0: all (\d+) nodes joined", re.M)


def setup(work, ns):
    subprocess.run(["ip", "netns", "add", ns], check=True)
    subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
    os.makedirs("/run/sshd", exist_ok=True)
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{work}/{key}"],
                       check=True, stdin=subprocess.DEVNULL)
    shutil.copy(f"{work}/client_key.pub", f"{work}/authorized_keys")
    with open(f"{work}/sshd.conf", "w") as f:
        f.write(f"""ListenAddress 0.0.0.0
HostKey {work}/host_key
AuthorizedKeysFile {work}/authorized_keys
PidFile {work}/sshd.pid
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
AcceptEnv {MARKER}
MaxStartups 1000:30:2000
MaxSessions 1000
LogLevel ERROR
""")
    subprocess.run(["ip", "netns", "exec", ns, "/usr/sbin/sshd", "-f", f"{work}/sshd.conf",
                    "-E", f"{work}/sshd.log"], check=True)
    for _ in range(100):
        if os.path.exists(f"{work}/sshd.pid"):
            return
        time.sleep(0.05)
    raise RuntimeError("sshd did not start")


def teardown(work, ns):
    try:
        with open(f"{work}/sshd.pid") as f:
            os.kill(int(f.read()), 15)
    except (OSError, ValueError):
        pass
    subprocess.run(["ip", "netns", "del", ns], check=False)


def ssh_options(work, marker, delay):
    options = ["-o", f"IdentityFile={work}/client_key", "-o", "StrictHostKeyChecking=no",
               "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
               "-o", f"SetEnv={MARKER}={marker}"]
    if delay > 0:
        options += ["-o", f"ProxyCommand={work}/slow_login %h %p"]
    return options


SLOW_LOGIN = """#!/bin/bash
# A login that waits as one on a real cluster does, then relays the connection.
sleep {delay}
exec 3<>/dev/tcp/"$1"/"$2"
cat <&3 &
cat >&3
"""


def joined_after(text, started, n):
    """Seconds from `started` (epoch) to node 0's 'all N nodes joined' line."""
    for stamp, count in JOINED.findall(text):
        if int(count) == n:
            t = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp()
            return t - started
    return None


def no_job_left(marker):
    needle = f"{MARKER}={marker}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read():
                    return False
        except OSError:
            pass
    return True


def run(ns, cmd, env, shell=False):
    """Runs `cmd` in the namespace; returns (seconds, combined output)."""
    full = ["ip", "netns", "exec", ns] + (["bash", "-c", cmd] if shell else cmd)
    started = time.time()
    p = subprocess.run(full, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=600)
    return started, time.time() - started, p.returncode, p.stdout


def variants(npu_run, work, n, marker, port, delay):
    hosts = [f"127.0.0.{i}" for i in range(1, n + 1)]
    opts = ssh_options(work, marker, delay)
    npu_opts = sum((["--ssh-option", opts[i + 1]] for i in range(0, len(opts), 2)), [])
    job = ["--nproc-per-node", "1", "--master-port", str(port), "--rdzv-timeout", "120",
           "--no-python", "/bin/true"]
    agent = (f"cd {work} && {npu_run} --nnodes {n} --master-addr 127.0.0.1 --master-port {port} "
             f"--rdzv-timeout 120 --nproc-per-node 1")
    q = " ".join(f"'{o}'" for o in opts)
    loop = (f"for i in $(seq 1 {n}); do ssh {q} 127.0.0.$i \"{agent} --node-rank $((i-1)) "
            f"--no-python /bin/true\" & done; wait")
    # One handshake after another, each returning once the host runs its agent (ssh -f).
    sequential = (f"for i in $(seq 1 {n}); do ssh -f {q} 127.0.0.$i \"{agent} --node-rank $((i-1)) "
                  f"--no-python /bin/true\"; done")
    return [
        ("npu_run --hosts (fan-out 32)", [npu_run, "--hosts", ",".join(hosts)] + npu_opts + job, False),
        ("npu_run --hosts --ssh-tree (fan-out 4)",
         [npu_run, "--hosts", ",".join(hosts), "--ssh-tree", "--ssh-fanout", "4"] + npu_opts + job, False),
        ("for-loop: ssh ... & (all at once), wait", loop, True),
        ("for-loop: ssh -f, one after another", sequential, True),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="8,32,64")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--npu-run", default=os.path.join(ROOT, "build", "npu_run"))
    parser.add_argument("--login-delay", type=float, default=0.0)
    args = parser.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/usr/sbin/sshd"):
        print("skipped: needs root (a network namespace) and sshd (scripts/install_deps.sh)")
        return 0
    npu_run = os.path.abspath(args.npu_run)
    work = tempfile.mkdtemp(prefix="npu_run_ssh_bench.")
    os.chmod(work, 0o755)
    ns = f"npb{os.getpid()}"
    marker = f"ssh-bench-{os.getpid()}"
    env = dict(os.environ, **{MARKER: marker})
    setup(work, ns)
    with open(f"{work}/slow_login", "w") as f:
        f.write(SLOW_LOGIN.format(delay=args.login_delay))
    os.chmod(f"{work}/slow_login", 0o755)
    rows = []
    try:
        for n in [int(x) for x in args.hosts.split(",")]:
            results = {}
            port = 29700
            for r in range(args.runs):
                for name, cmd, shell in variants(npu_run, work, n, marker, port,
                                                 args.login_delay):
                    port += 1
                    started, total, rc, out = run(ns, cmd, env, shell)
                    # ssh -f leaves the sessions running after the loop: the job ends with them.
                    deadline = time.time() + 120
                    while not no_job_left(marker) and time.time() < deadline:
                        time.sleep(0.05)
                    total = time.time() - started
                    kill_leftovers(marker)
                    joined = joined_after(out, started, n)
                    if rc != 0 or joined is None:
                        print(f"{name}, {n} hosts, run {r}: exit {rc}, joined {joined}\n{out[-3000:]}",
                              file=sys.stderr)
                    results.setdefault(name, []).append((joined, total))
            for name, values in results.items():
                joined = [j for j, _ in values if j is not None]
                rows.append((n, name, statistics.median(joined) if joined else float("nan"),
                             statistics.median([t for _, t in values]), len(joined), len(values)))
                print(f"{n:4d} hosts  {name:42s} all joined {rows[-1][2]:6.2f} s  "
                      f"done {rows[-1][3]:6.2f} s  ({rows[-1][4]}/{rows[-1][5]} runs met)",
                      file=sys.stderr, flush=True)
    finally:
        kill_leftovers(marker)
        teardown(work, ns)
        shutil.rmtree(work, ignore_errors=True)
    print(f"## Starting N hosts over ssh, login delay {args.login_delay:g} s "
          f"(scripts/bench/ssh_start.py; median of {args.runs})")
    print()
    print("Hosts on one namespace's loopback, one sshd, one /bin/true worker each; the time from the "
          "command to node 0's 'all N nodes joined', and to the job's end.")
    print()
    print("| hosts | how | all agents joined | job done | vs npu_run --hosts |")
    print("|---:|---|---:|---:|---:|")
    base = {n: j for n, name, j, _, _, _ in rows if name.startswith("npu_run --hosts (")}
    for n, name, joined, total, met, runs in rows:
        ratio = joined / base[n] if base.get(n) else float("nan")
        print(f"| {n} | {name} | {joined:.2f} s | {total:.2f} s | {ratio:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
