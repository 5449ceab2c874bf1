#!/usr/bin/env bash
# End to end across two "hosts": two network namespaces joined by a veth pair, one npu_run
# agent in each (10.231.77.1 and 10.231.77.2), real PyTorch DDP over gloo with 2 workers per
# node. Passes when both agents exit 0, the ranks agree on the trained weights, and no process of
# the job survives. Creates and removes everything it uses.
#
# usage: netns_ddp.sh NPU_RUN_BINARY SOURCE_DIR      (root required; exits 77 = skipped otherwise)
# The workers run $PYTHON_EXEC (default /usr/bin/python3; tests/torch2/python for torch 2.6).
set -euo pipefail

npu_run=$1
source_dir=$2
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: network namespaces need root"
  exit 77
fi

tag="npr$$"
marker="netns-ddp-$$-$RANDOM"
work=$(mktemp -d)
pids=()

# shellcheck source=lib.sh
source "$source_dir/tests/e2e/lib.sh"
extra_failure_info() {
  for i in 0 1; do
    echo "---- node $i stdout"
    cat "$work/node$i.out"
    echo "---- node $i stderr"
    cat "$work/node$i.err"
  done
}

cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  # Anything of the job still alive is a failure already reported; do not leave it running.
  kill_job_processes
  remove_namespace_pair
  rm -rf "$work"
}
trap cleanup EXIT

make_namespace_pair "$tag" 10.231.77

run_node() {  # ns ifname node_rank
  # Inside a namespace the host name does not resolve to a reachable address: tell gloo which
  # interface to use, as on any multi-NIC host.
  ip netns exec "$1" env NPU_RUN_TEST_MARKER="$marker" PYTHON_EXEC="${PYTHON_EXEC:-/usr/bin/python3}" GLOO_SOCKET_IFNAME="$2" \
    "$npu_run" --nnodes 2 --node-rank "$3" --nproc-per-node 2 --master-addr 10.231.77.1 --master-port 29577 \
    --rdzv-timeout 60 "$source_dir/examples/train_ddp.py" --steps 20 >"$work/node$3.out" 2>"$work/node$3.err" &
  pids+=($!)
}

run_node "$ns_a" "${tag}va" 0
run_node "$ns_b" "${tag}vb" 1
for i in 0 1; do
  wait_bounded 120 "${pids[$i]}" "node $i"
  [ "$rc" -eq 0 ] || fail "node $i exited $rc"
done
expect_in "$work/node0.out" "ranks agree: True"
[ "$(cat "$work"/node*.out | { grep -o 'weights checksum' || true; } | wc -l)" = 4 ] ||
  fail "expected 4 workers' checksums"
expect_in "$work/node1.err" "workers' store at 10.231.77.1:" "ranks 2-3 of 4, node 1 of 2"
require_no_job_processes "the DDP job"
echo "PASS: DDP across two network namespaces"
