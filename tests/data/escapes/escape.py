# A worker that leaves processes outside its process group, as daemons and careless code do,
# then lists the descriptors it inherited and exits with the code given (or waits, with "wait").
#   escape.py PIDS_FILE EXIT_CODE|wait
import os
import subprocess
import sys
import time

pids_file, how = sys.argv[1], sys.argv[2]


def remember(pid):
    with open(pids_file, "a") as f:
        f.write(f"{pid}\n")


def daemon(seconds, env):
    """A daemon: fork, setsid, fork again; the grandchild is reparented away from the worker."""
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(r)
            os.write(w, str(os.getpid()).encode())
            os.close(w)
            os.execve("/bin/sleep", ["sleep", seconds], env)
        os._exit(0)
    os.close(w)
    remember(int(os.read(r, 32)))
    os.close(r)


daemon("600", os.environ)
daemon("601", {})  # with an empty environment: only the subreaper finds it
# subprocess's new session, and a plain new process group.
remember(subprocess.Popen(["sleep", "602"], start_new_session=True).pid)
remember(subprocess.Popen(["sleep", "603"], process_group=0).pid
         if sys.version_info >= (3, 11) else
         subprocess.Popen(["sleep", "603"], preexec_fn=lambda: os.setpgid(0, 0)).pid)

fds = []
for name in os.listdir("/proc/self/fd"):
    try:
        fds.append(f"{name} -> {os.readlink('/proc/self/fd/' + name)}")
    except OSError:
        pass  # the directory listing's own descriptor, closed by now
inherited = [f for f in fds if int(f.split()[0]) > 2]
print(f"rank {os.environ['RANK']} inherited: {inherited}", flush=True)
if how == "wait":
    print("escaped", flush=True)
    time.sleep(600)
sys.exit(int(how))
