#!/usr/bin/env bash
# `npu_run --hosts` against real OpenSSH servers: three hosts in network namespaces on a bridge
# (10.231.91.1-4; sshd on 1, 2 and 4, none on 3), the launcher in the root namespace. Jobs: a 2-host
# DDP run that agrees on the weights; a rank failing on host 2 gives its code to the launcher;
# SIGINT to the launcher (running, and while the hosts start) stops both hosts; a host without
# sshd is named with ssh's error; a lost ssh session stops its host's agent, and so does a
# launcher killed outright; include/exclude and slots pick the devices; variables and env files
# reach the workers; --ship-binary and --ssh-tree; --spares 1 makes host 4 a spare that takes
# the seat of host 2 when its session is lost. After each, nothing of the job is left on any
# host (workers and host-agents carry the test's marker, the agents through ssh's SetEnv).
#
# usage: ssh_launch.sh NPU_RUN_BINARY SOURCE_DIR     (root required; exits 77 = skipped otherwise)
set -euo pipefail

npu_run=$1
source_dir=$2
# shellcheck source=lib.sh
source "$source_dir/tests/e2e/lib.sh"
# shellcheck source=ssh_lib.sh
source "$source_dir/tests/e2e/ssh_lib.sh"
require_root "network namespaces and sshd"
command -v /usr/sbin/sshd >/dev/null || { echo "skipped: no sshd (scripts/install_deps.sh)"; exit 77; }

tag="nps$$"
marker="ssh-launch-$$-$RANDOM"
work=$(mktemp -d)
export PYTHON_EXEC=${PYTHON_EXEC:-/usr/bin/python3}
launcher_pid=

extra_failure_info() {
  echo "---- launcher stdout"; cat "$work/out" 2>/dev/null || true
  echo "---- launcher stderr"; cat "$work/err" 2>/dev/null || true
  for f in "$work"/ssh/sshd*.log; do echo "---- $f"; cat "$f"; done
}
cleanup() {
  [ -z "$launcher_pid" ] || kill -9 "$launcher_pid" 2>/dev/null || true
  kill_job_processes
  remove_ssh_hosts
  rm -rf "$work"
  [ -z "${shipped:-}" ] || rm -f "$shipped"
}
trap cleanup EXIT

SSHD_HOSTS="1 2 4" make_ssh_hosts "$tag" 10.231.91 4 "$work/ssh"
h1=10.231.91.1 h2=10.231.91.2 h3=10.231.91.3 h4=10.231.91.4
cd "$work"

# Starts the launcher in the background; its pid in launcher_pid. The files are emptied first,
# here: the background job opens them only once it runs, and until then a wait for a line of
# this launcher would find the last one's (a SIGINT sent then, before npu_run handles it, is
# lost: a background job starts with SIGINT ignored).
start_launcher() {
  : >"$work/out"
  : >"$work/err"
  NPU_RUN_TEST_MARKER=$marker "$npu_run" "${ssh_options[@]}" --master-port 29591 --rdzv-timeout 60 "$@" >"$work/out" 2>"$work/err" &
  launcher_pid=$!
}
# Runs the launcher to its end within `seconds`; its status in rc.
run_launcher() {  # seconds what args...
  local seconds=$1 what=$2
  shift 2
  start_launcher "$@"
  wait_bounded "$seconds" "$launcher_pid" "the launcher ($what)" "$work/err"
  launcher_pid=
}
workers_up() { [ "$(grep -c ' up$' "$work/out" 2>/dev/null)" -ge "$1" ]; }  # count
no_strays() {  # what
  check_no_strays "$1"
  echo "passed: $1"
}

# 1. Real DDP on two hosts, started from here; every worker line carries its host. The hosts'
# interfaces have different names (eth0, eth1) and their shared host name resolves to 127.0.1.1,
# and no *_SOCKET_IFNAME is given: each agent tells its workers its own interface, and the
# health verdict (on with --health-check-cmd) warns of the host name.
nsenter -t "$(cat "$work/ssh/sshd1.pid")" -m -n getent hosts "$(hostname)" | grep -c '^127\.0\.1\.1 ' >/dev/null ||
  fail "host 1's host name does not resolve to 127.0.1.1 as the test's hosts file says"
run_launcher 180 "DDP" --hosts "$h1:2,$h2:2" --health-check-cmd true \
  "$source_dir/examples/train_ddp.py" --steps 20
[ "$rc" -eq 0 ] || fail "the DDP job exited $rc" "$work/err"
expect_in "$work/out" "$h1: " "ranks agree: True"
expect_in "$work/err" "health check: hostname: the host name $(hostname) resolves to 127.0.1.1"
[ "$(grep -c "^$h2: .*weights checksum" "$work/out")" -eq 2 ] || fail "host 2's 2 checksums" "$work/out"
expect_in "$work/err" "all 2 agents started" "[npu_run node 1 " "ranks 2-3 of 4, node 1 of 2"
cat >"$work/ifname.py" <<'EOF'
import os
print(f"rank {os.environ['RANK']} " + " ".join(
    f"{v}={os.environ.get(v)}" for v in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME")), flush=True)
EOF
run_launcher 60 "the interfaces" --hosts "$h1:1,$h2:1" "$work/ifname.py"
[ "$rc" -eq 0 ] || fail "the job printing the interfaces exited $rc" "$work/err"
expect_in "$work/out" "$h1: rank 0 GLOO_SOCKET_IFNAME=eth0 NCCL_SOCKET_IFNAME=eth0 HCCL_SOCKET_IFNAME=eth0" \
  "$h2: rank 1 GLOO_SOCKET_IFNAME=eth1 NCCL_SOCKET_IFNAME=eth1 HCCL_SOCKET_IFNAME=eth1"
no_strays "DDP over ssh on two hosts"

# 2. Rank 3 (on host 2) exits 7: the launcher exits 7 and names it.
cat >"$work/fail.py" <<'EOF'
import os, sys, time
if os.environ["RANK"] == "3":
    time.sleep(1)
    sys.exit(7)
time.sleep(60)
EOF
run_launcher 120 "a failing rank" --hosts "$h1:2,$h2:2" "$work/fail.py"
[ "$rc" -eq 7 ] || fail "a rank's exit 7 gave the launcher $rc" "$work/err"
expect_in "$work/err" "rank 3 (local 1"
no_strays "a rank failing on host 2 gives its code to the launcher"

# 3. SIGINT to the launcher: both hosts stop, within the grace, and the launcher exits 130.
cat >"$work/sleep.py" <<'EOF'
import os, time
print(f"rank {os.environ['RANK']} up", flush=True)
time.sleep(300)
EOF
start_launcher --hosts "$h1:2,$h2:2" --term-timeout 5 "$work/sleep.py"
wait_for 60 "4 workers up" workers_up 4
kill -INT "$launcher_pid"
wait_bounded 30 "$launcher_pid" "the launcher after SIGINT" "$work/err"
launcher_pid=
[ "$rc" -eq 130 ] || fail "SIGINT gave $rc, expected 130" "$work/err"
expect_in "$work/err" "received SIGINT: stopping the job on every host"
no_strays "SIGINT to the launcher stops both hosts"

# Ctrl-C while the hosts are still being started: whoever already runs stops, the rest never
# start.
start_launcher --hosts "$h1:2,$h2:2" --term-timeout 5 "$work/sleep.py"
wait_for 30 "the launcher to start its ssh sessions" output_has "$work/err" "starting 2 agents"
kill -INT "$launcher_pid"
wait_bounded 30 "$launcher_pid" "the launcher after an early SIGINT" "$work/err"
launcher_pid=
[ "$rc" -eq 130 ] || fail "an early SIGINT gave $rc, expected 130" "$work/err"
no_strays "SIGINT while the hosts start"

# 4. A host without sshd is named with ssh's own error, long before any rendezvous timeout; the
# host that did start is stopped.
started=$SECONDS
run_launcher 60 "an unreachable host" --hosts "$h1,$h3" "$work/sleep.py"
[ "$rc" -eq 255 ] || fail "an unreachable host gave $rc, expected 255 (ssh's)" "$work/err"
expect_in "$work/err" "cannot start the agent on $h3: ssh: connect to host $h3 port 22: Connection refused"
[ $((SECONDS - started)) -lt 40 ] || fail "naming the unreachable host took $((SECONDS - started)) s"
no_strays "an unreachable host is named with ssh's error"

# 5. A lost ssh session (its client killed here) stops that host's agent and so the job.
start_launcher --hosts "$h1:1,$h2:1" --term-timeout 5 "$work/sleep.py"
wait_for 60 "2 workers up" workers_up 2
ssh_pid=$(pgrep -P "$launcher_pid" -f "ssh .* $h2 ")
kill -9 "$ssh_pid"
wait_bounded 60 "$launcher_pid" "the launcher after host 2's ssh died" "$work/err"
launcher_pid=
[ "$rc" -ne 0 ] || fail "the job went on after host 2's ssh session died" "$work/err"
# Host 2's own lines cannot come back any more; node 0 and the launcher say what happened.
expect_in "$work/err" "$h2: the ssh session ended (ssh's exit status 137)" \
  "node 1 (" "npu_run was stopped by SIGTERM"
no_strays "a lost ssh session stops its host"

# The launcher killed outright: its ssh clients die with it (PR_SET_PDEATHSIG), each host sees
# its session end and stops its agent and workers.
start_launcher --hosts "$h1:1,$h2:1" --term-timeout 5 "$work/sleep.py"
wait_for 60 "2 workers up" workers_up 2
kill -9 "$launcher_pid"
wait "$launcher_pid" 2>/dev/null || true
launcher_pid=
no_strays "SIGKILL to the launcher leaves nothing on either host"

# 6. Slots and filters pick the devices; variables (--env, an env file) reach every worker.
printf '# passed to every host\nFROM_FILE=file value\n' >"$work/vars.env"
cat >"$work/devices.py" <<'EOF'
import os
print(f"rank {os.environ['RANK']}/{os.environ['WORLD_SIZE']} device {os.environ['DEVICE_ID']} "
      f"{os.environ.get('FROM_FLAG')} {os.environ.get('FROM_FILE')}", flush=True)
EOF
run_launcher 60 "filters" --hosts "$h1:4,$h2:4" --include "$h1:1,3@$h2:0" --env FROM_FLAG=flag \
  --env-file "$work/vars.env" "$work/devices.py"
[ "$rc" -eq 0 ] || fail "the filtered job exited $rc" "$work/err"
expect_in "$work/out" "$h1: rank 0/3 device 1 flag file value" "$h1: rank 1/3 device 3 flag file value" \
  "$h2: rank 2/3 device 0 flag file value"
run_launcher 60 "exclude" --hosts "$h1:2,$h2:2" --exclude "$h1:0@$h2" "$work/devices.py"
[ "$rc" -eq 0 ] || fail "the excluding job exited $rc" "$work/err"
expect_in "$work/out" "$h1: rank 0/1 device 1"
! grep -q "^$h2:" "$work/out" || fail "--exclude $h2 still ran there" "$work/out"
no_strays "slots, include and exclude pick the devices"

# 7. --ship-binary: a copy of npu_run at a path no host has is sent and run from ~/.cache; a
# second run finds it there. --ssh-tree --ssh-fanout 1: the launcher starts host 1, which
# starts host 2.
mkdir -p "$work/private"
cp "$npu_run" "$work/private/npu_run"
# One write per line: under -u print() writes each piece on its own, and a piece of host 1's
# line could reach the launcher's console split by host 2's line.
cat >"$work/exe.py" <<'EOF'
import os
import sys
sys.stdout.write(f"agent runs {os.readlink(f'/proc/{os.getppid()}/exe')}\n")
EOF
"$work/private/npu_run" "${ssh_options[@]}" --master-port 29592 --hosts "$h1,$h2" --ship-binary \
  --ssh-tree --ssh-fanout 1 --dry-run "$work/exe.py" >"$work/plan"
expect_in "$work/plan" "started by the launcher" "started by $h1" "npu_run need"
launch_shipped() {
  NPU_RUN_TEST_MARKER=$marker "$work/private/npu_run" "${ssh_options[@]}" --master-port 29592 \
    --hosts "$h1,$h2" --ship-binary --ssh-tree --ssh-fanout 1 "$work/exe.py" >"$work/out" 2>"$work/err" &
  launcher_pid=$!
  wait_bounded 60 "$launcher_pid" "the shipped, tree-started job" "$work/err"
  launcher_pid=
  [ "$rc" -eq 0 ] || fail "the shipped job exited $rc" "$work/err"
}
# This content's copy, left by an earlier run, would be used without a send.
# (named in the plan: $npu_run may be the old-kernel wrapper of the binary that is shipped).
shipped="$HOME/.cache/npu_run/$(grep -o 'npu_run-[0-9a-f]\{16\}' "$work/plan" | sed -n 1p)"
rm -f "$shipped"
launch_shipped
expect_in "$work/out" "$h1: agent runs $shipped" "$h2: agent runs $shipped"
expect_in "$work/err" "sending npu_run's binary"
launch_shipped
if grep -q "sending npu_run's binary" "$work/err"; then fail "the binary was sent again" "$work/err"; fi
no_strays "--ship-binary and --ssh-tree"

# 8. --spares 1: the last host stands by. Host 2's ssh session is lost mid-job (its client
# killed here): its agent stops, the spare takes node 1's seat (rank 1, GROUP_RANK 1) while rank
# 0 keeps its own, --max-restarts 0 is enough, and the launcher exits with node 0's 0.
cat >"$work/spare.py" <<'EOF'
import os, time
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
print(f"rank {os.environ['RANK']} group {os.environ['GROUP_RANK']} attempt {attempt} up", flush=True)
if attempt == "0":
    time.sleep(300)
EOF
start_launcher --hosts "$h1:1,$h2:1,$h4:1" --spares 1 --max-restarts 0 --term-timeout 5 \
  "$work/spare.py"
wait_for 60 "2 workers up" workers_up 2
wait_for 30 "host 4 to stand by" output_has "$work/err" "standing by as a spare"
ssh_pid=$(pgrep -P "$launcher_pid" -f "ssh .* $h2 ")
kill -9 "$ssh_pid"
wait_bounded 90 "$launcher_pid" "the launcher after host 2 was lost" "$work/err"
launcher_pid=
[ "$rc" -eq 0 ] || fail "the job with a spare exited $rc after host 2 was lost" "$work/err"
expect_in "$work/out" "$h1: rank 0 group 0 attempt 0 up" "$h2: rank 1 group 1 attempt 0 up" \
  "$h1: rank 0 group 0 attempt 1 up" "$h4: rank 1 group 1 attempt 1 up"
! grep -q "^$h2: .*attempt 1" "$work/out" || fail "host 2 ran attempt 1" "$work/out"
no_strays "a spare host takes the seat of a lost one"
