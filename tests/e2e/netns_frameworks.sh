#!/usr/bin/env bash
# MindSpore and TensorFlow contracts across two "hosts": two network namespaces joined by a veth
# pair (10.231.78.1 and .2), one npu_run agent in each, 2 workers per node. There is no MindSpore
# or TensorFlow here: tests/tools/fake_mindspore.py keeps MindSpore's dynamic-cluster contract
# (node 0's scheduler listens on MS_SCHED_HOST:MS_SCHED_PORT; every worker, node 1's over the
# veth, registers its MS_NODE_ID with it), and a TF stand-in checks the CM_* variables and has
# node 0's chief listen on CM_CHIEF_IP:CM_CHIEF_PORT where node 1's processes connect. Then a
# MindSpore worker on node 1 fails once: the job restarts (scheduler again) and ends 0. Then
# `npu_run msrun` with msrun's own line on each host. No process of the jobs survives.
#
# usage: netns_frameworks.sh NPU_RUN_BINARY SOURCE_DIR   (root required; exits 77 = skipped otherwise)
set -euo pipefail

npu_run=$1
source_dir=$2
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: network namespaces need root"
  exit 77
fi

tag="npf$$"
marker="netns-frameworks-$$-$RANDOM"
work=$(mktemp -d)
pids=()

# shellcheck source=lib.sh
source "$source_dir/tests/e2e/lib.sh"
extra_failure_info() {
  for i in 0 1; do
    echo "---- node $i stdout"; cat "$work/node$i.out"
    echo "---- node $i stderr"; cat "$work/node$i.err"
  done
}
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  kill_job_processes
  remove_namespace_pair
  rm -rf "$work"
}
trap cleanup EXIT

make_namespace_pair "$tag" 10.231.78

run_node() {  # ns node_rank port args...
  local ns=$1 rank=$2 port=$3
  shift 3
  ip netns exec "$ns" env NPU_RUN_TEST_MARKER="$marker" PYTHON_EXEC="${PYTHON_EXEC:-/usr/bin/python3}" \
    "$npu_run" --nnodes 2 --node-rank "$rank" --nproc-per-node 2 --master-addr 10.231.78.1 \
    --master-port "$port" --rdzv-timeout 60 "$@" >"$work/node$rank.out" 2>"$work/node$rank.err" &
  pids[$rank]=$!
}
run_job() {  # what port args...
  local what=$1 port=$2
  shift 2
  run_node "$ns_a" 0 "$port" "$@"
  run_node "$ns_b" 1 "$port" "$@"
  for i in 0 1; do
    wait_bounded 120 "${pids[$i]}" "node $i ($what)"
    [ "$rc" -eq 0 ] || fail "node $i exited $rc ($what)"
  done
}

# 1. MindSpore's dynamic cluster: the scheduler on node 0 only; node 1's workers reach it.
run_job "MindSpore" 29681 --framework mindspore "$source_dir/tests/tools/fake_mindspore.py"
expect_in "$work/node0.out" "[scheduler] scheduler up on 10.231.78.1:" "scheduler: all 4 workers registered with ids [0, 1, 2, 3]" \
  "scheduler: cluster finished"
expect_in "$work/node1.out" "worker 2 of 4 runs MS_ROLE=MS_WORKER MS_SCHED_HOST=10.231.78.1" "MS_NODE_ID=3 MS_NODE_RANK=1"
! grep -q "scheduler" "$work/node1.out" || fail "node 1 ran a scheduler" "$work/node1.out"
require_no_job_processes "MindSpore across two namespaces"
echo "passed: MindSpore's scheduler on node 0, workers of both nodes registered"

# 2. A worker of node 1 fails in the first attempt: the job restarts, node 0 starts its
# scheduler again, and the second attempt ends 0.
FAKE_MS_FAIL=3 run_job "MindSpore restart" 29682 --framework mindspore --max-restarts 1 \
  "$source_dir/tests/tools/fake_mindspore.py"
expect_in "$work/node0.out" "for 4 workers (attempt 0)" "for 4 workers (attempt 1)" "scheduler: cluster finished"
expect_in "$work/node1.out" "worker 3: failing on purpose"
require_no_job_processes "MindSpore restart across two namespaces"
echo "passed: a failed worker on node 1 restarts the job, the scheduler first"

# 3. TensorFlow's CM_* mode: node 0's first process is the chief; every process of both nodes
# connects to CM_CHIEF_IP:CM_CHIEF_PORT and finds no RANK_* variable.
cat >"$work/tf.py" <<'EOF'
import os, socket, sys, time
for name in ("RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE"):
    assert name not in os.environ, name
chief = (os.environ["CM_CHIEF_IP"], int(os.environ["CM_CHIEF_PORT"]))
size = int(os.environ["CM_WORKER_SIZE"])
if os.environ["RANK"] == "0":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(chief)
    s.listen(size)
    s.settimeout(60)
    seen = set()
    while len(seen) < size - 1:
        conn, _ = s.accept()
        seen.add(conn.recv(64).decode())
    print("chief heard from " + " ".join(sorted(seen)), flush=True)
else:
    deadline = time.monotonic() + 60
    while True:
        try:
            c = socket.create_connection(chief, timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(1)
            time.sleep(0.05)
    c.sendall(os.environ["CM_WORKER_IP"].encode() + b"/" + os.environ["RANK"].encode())
print("rank %s CM_WORKER_IP=%s CM_CHIEF_DEVICE=%s" % (os.environ["RANK"], os.environ["CM_WORKER_IP"], os.environ["CM_CHIEF_DEVICE"]), flush=True)
EOF
run_job "TensorFlow CM_*" 29683 --framework tensorflow --tf-cluster env --no-python \
  "${PYTHON_EXEC:-/usr/bin/python3}" "$work/tf.py"
expect_in "$work/node0.out" "chief heard from 10.231.78.1/1 10.231.78.2/2 10.231.78.2/3"
expect_in "$work/node1.out" "rank 2 CM_WORKER_IP=10.231.78.2 CM_CHIEF_DEVICE=0"
require_no_job_processes "TensorFlow CM_* across two namespaces"
echo "passed: the TF Adapter's chief on node 0's held port, reached from both nodes"
# 4. msrun's own command line on each "host" (--node_rank -1: the rendezvous numbers the
# nodes), each node's files in its own --log_dir, named as msrun names them.
run_msrun() {  # ns index
  local ns=$1 i=$2
  ip netns exec "$ns" env NPU_RUN_TEST_MARKER="$marker" PYTHON_EXEC="${PYTHON_EXEC:-/usr/bin/python3}" \
    "$npu_run" msrun --worker_num=4 --local_worker_num=2 --master_addr=10.231.78.1 --master_port=29684 \
    --log_dir="$work/msrun$i" --join=True --cluster_time_out=60 "$source_dir/tests/tools/fake_mindspore.py" \
    >"$work/node$i.out" 2>"$work/node$i.err" &
  pids[$i]=$!
}
run_msrun "$ns_a" 0
run_msrun "$ns_b" 1
for i in 0 1; do
  wait_bounded 120 "${pids[$i]}" "node $i (npu_run msrun)"
  [ "$rc" -eq 0 ] || fail "node $i exited $rc (npu_run msrun)"
done
files=$(cd "$work" && ls msrun0 msrun1 | grep '\.log$' | sort | tr '\n' ' ')
[ "$files" = "scheduler.log worker_0.log worker_1.log worker_2.log worker_3.log " ] ||
  fail "msrun's files across the two nodes: $files"
cat "$work"/msrun*/scheduler.log >"$work/scheduler.log"
cat "$work"/msrun*/worker_3.log >"$work/worker_3.log"
expect_in "$work/scheduler.log" "all 4 workers registered with ids [0, 1, 2, 3]"
# The scheduler ran beside whichever node the rendezvous numbered 0, and every worker was sent
# there (namespace a is 10.231.78.1, b .2).
if [ -f "$work/msrun0/scheduler.log" ]; then sched_host=10.231.78.1; else sched_host=10.231.78.2; fi
expect_in "$work/worker_3.log" "worker 3 of 4 runs MS_ROLE=MS_WORKER MS_SCHED_HOST=$sched_host "
require_no_job_processes "npu_run msrun across two namespaces"
echo "passed: npu_run msrun on two hosts, msrun's files, the rendezvous numbering the nodes"
echo "PASS: MindSpore and TensorFlow contracts across two network namespaces"
