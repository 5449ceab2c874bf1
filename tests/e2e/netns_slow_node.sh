#!/usr/bin/env bash
# End to end: one "host" of three (network namespaces on a bridge, 10.231.84.1-3) slowed by a
# cgroup v1 CPU quota of 15 % of a core, its agent and workers with it, as a throttled or shared
# server is. Two ways it must be found:
#   preflight  (default) node 2's host is slowed from the start; a static job of three nodes with
#              --preflight quick ends with 122 on every node before any worker starts, naming
#              node 2 with its figures. The probe is torch's (PYTHON_EXEC).
#   straggler  two nodes train (gloo, 2 ranks each, --straggler-window 2); once rank 0 passed
#              step 100, node 1's agent and workers move into the quota; node 0 names node 1 as a
#              straggler, npu_run status shows it, and the job still ends 0 when asked to stop.
#              Needs torch's flight recorder (2.8 and later: PYTHON_EXEC=tests/torch2/python2.14).
# No process of either job may survive. Creates and removes everything it uses.
#
# usage: netns_slow_node.sh NPU_RUN_BINARY SOURCE_DIR [preflight|straggler]
#        (root and a writable cgroup v1 cpu controller required; exits 77 = skipped otherwise)
set -euo pipefail

npu_run=$1
source_dir=$2
mode=${3:-preflight}
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: network namespaces need root"
  exit 77
fi
group=/sys/fs/cgroup/cpu/npu_run_e2e_slow_$$
if ! mkdir "$group" 2>/dev/null || [ ! -f "$group/cpu.cfs_quota_us" ]; then
  rmdir "$group" 2>/dev/null || true
  echo "skipped: no writable cgroup v1 cpu controller here"
  exit 77
fi
echo 15000 >"$group/cpu.cfs_quota_us"

tag="nsl$$"
prefix=10.231.84
marker="netns-slow-$$-$RANDOM"
work=$(mktemp -d)
chmod 755 "$work"  # read by the workers of a chroot's python too
pids=()

# shellcheck source=lib.sh
source "$source_dir/tests/e2e/lib.sh"
extra_failure_info() {
  local f
  for f in "$work"/node*.err; do
    echo "---- $f"
    cat "$f"
  done
}

cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  kill_job_processes
  # Members go back to the root group first: a group with members cannot be removed.
  while read -r p; do echo "$p" >/sys/fs/cgroup/cpu/cgroup.procs 2>/dev/null || true; done \
    <"$group/cgroup.procs"
  rmdir "$group" 2>/dev/null || true
  remove_namespace_bridge "$tag"
  rm -rf "$work"
}
trap cleanup EXIT

make_namespace_bridge "$tag" "$prefix"

# Starts node RANK of NNODES on host RANK+1, with npu_run's ARGS after the common ones. SLOWED=1:
# inside the quota from the start.
start_node() {  # rank nnodes slowed args...
  local rank=$1 nnodes=$2 slowed=$3
  shift 3
  # Each host a name of its own (a UTS namespace), as the logs name nodes by host.
  local cmd=(ip netns exec "${tag}h$((rank + 1))" unshare --uts
             bash -c 'hostname "$0" && exec "$@"' "slow-$rank"
             env NPU_RUN_TEST_MARKER="$marker" PYTHON_EXEC="${PYTHON_EXEC:-/usr/bin/python3}"
             GLOO_SOCKET_IFNAME=eth0
             "$npu_run" --nnodes "$nnodes" --node-rank "$rank" --master-addr "$prefix.1"
             --master-port 29591 --rdzv-timeout 60 "$@")
  if [ "$slowed" = 1 ]; then
    bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$group" "${cmd[@]}" \
      >"$work/node$rank.out" 2>"$work/node$rank.err" &
  else
    "${cmd[@]}" >"$work/node$rank.out" 2>"$work/node$rank.err" &
  fi
  pids[rank]=$!
}

# PID and its descendants, parents first.
process_tree() {  # pid
  local child
  echo "$1"
  for child in $(pgrep -P "$1"); do process_tree "$child"; done
}

run_preflight() {
  local i worker='echo "worker started"'
  for i in 0 1 2; do
    start_node "$i" 3 "$([ "$i" = 2 ] && echo 1 || echo 0)" --nproc-per-node 1 \
      --preflight quick --no-python /bin/sh -c "$worker"
  done
  for i in 0 1 2; do
    wait_bounded 180 "${pids[$i]}" "node $i" "$work/node$i.err"
    [ "$rc" -eq 122 ] || fail "node $i exited $rc, not 122 (a failed health gate)" "$work/node$i.err"
    ! output_has "$work/node$i.out" "worker started" || fail "a worker started on node $i"
  done
  expect_in "$work/node0.err" "1 of 3 nodes failed the health gate; no worker started" \
    "node 2 (slow-2): preflight: " "x the median"
  require_no_job_processes "the probed job"
  echo "passed: the slowed host named by the pre-flight probe, no worker started"
}

run_straggler() {
  local script="$work/train.py" i node1
  cat >"$script" <<EOF
import os, torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group('gloo')
rank = int(os.environ['RANK'])
w = torch.randn(192, 192)
flag = torch.zeros(1)
step = 0
while True:
    for _ in range(4):
        w = torch.tanh(w @ w)
    flag[0] = 1.0 if rank == 0 and os.path.exists('$work/stop') else 0.0
    dist.all_reduce(flag)
    step += 1
    if step % 100 == 0:
        print(f'rank {rank} step {step}', flush=True)
    if flag[0] > 0:
        break
EOF
  for i in 0 1; do
    start_node "$i" 2 0 --nproc-per-node 2 --straggler-window 2 --heartbeat-timeout 10 "$script"
  done
  wait_for 120 "rank 0 to pass step 100" output_has "$work/node0.out" "rank 0 step 100"
  node1=${pids[1]}
  for i in $(process_tree "$node1"); do echo "$i" >"$group/cgroup.procs" 2>/dev/null || true; done
  wait_for 90 "node 0 to name node 1 as a straggler" \
    output_has "$work/node0.err" "straggler: node 1 (slow-1, ranks 2-3)"
  ip netns exec "${tag}h1" "$npu_run" status --master-addr "$prefix.1" --master-port 29591 \
    >"$work/status.out" 2>&1 || fail "npu_run status failed" "$work/status.out"
  expect_in "$work/status.out" "straggler: node 1 (slow-1, ranks 2-3) entered collectives last"
  touch "$work/stop"
  for i in 0 1; do
    wait_bounded 120 "${pids[$i]}" "node $i" "$work/node$i.err"
    [ "$rc" -eq 0 ] || fail "node $i exited $rc" "$work/node$i.err"
  done
  require_no_job_processes "the slowed job"
  echo "passed: the host slowed mid-run named as a straggler in the log and status"
}

case $mode in
  preflight) run_preflight ;;
  straggler) run_straggler ;;
  *) echo "usage: netns_slow_node.sh NPU_RUN_BINARY SOURCE_DIR [preflight|straggler]" >&2; exit 2 ;;
esac
