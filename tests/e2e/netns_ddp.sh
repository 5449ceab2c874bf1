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

# One job: both agents, then the checks. Extra npu_run options in npu_extra, the script's in
# script_extra (arrays).
run_node() {  # ns ifname node_rank port store init
  # Inside a namespace the host name does not resolve to a reachable address: tell gloo which
  # interface to use, as on any multi-NIC host.
  ip netns exec "$1" env NPU_RUN_TEST_MARKER="$marker" PYTHON_EXEC="${PYTHON_EXEC:-/usr/bin/python3}" GLOO_SOCKET_IFNAME="$2" \
    "$npu_run" --nnodes 2 --node-rank "$3" --nproc-per-node 2 --master-addr 10.231.77.1 --master-port "$4" \
    --rdzv-timeout 60 --worker-store "$5" "${npu_extra[@]}" "$source_dir/examples/train_ddp.py" --steps 20 \
    --init-method "$6" "${script_extra[@]}" >"$work/node$3.out" 2>"$work/node$3.err" &
  pids[$3]=$!
}
run_job() {  # port store init
  local port=$1 store=$2 init=$3 what="$2 store, $3 init"
  run_node "$ns_a" "${tag}va" 0 "$port" "$store" "$init"
  run_node "$ns_b" "${tag}vb" 1 "$port" "$store" "$init"
  for i in 0 1; do
    wait_bounded 120 "${pids[$i]}" "node $i ($what)"
    [ "$rc" -eq 0 ] || fail "node $i exited $rc ($what)"
  done
  expect_in "$work/node0.out" "ranks agree: True"
  [ "$(cat "$work"/node*.out | { grep -o 'weights checksum' || true; } | wc -l)" -ge 4 ] ||
    fail "expected 4 workers' checksums ($what)"
  if [ "$store" = tiered ]; then  # node 1's workers use its own proxy
    expect_in "$work/node1.err" "workers' store at 10.231.77.2:" "ranks 2-3 of 4, node 1 of 2"
  else
    expect_in "$work/node1.err" "workers' store at 10.231.77.1:$port" "ranks 2-3 of 4, node 1 of 2"
  fi
  require_no_job_processes "the DDP job ($what)"
  echo "passed: $what"
}
# The store's two modes (ours) and torch's two init methods (its side), each value once: agent
# with env://, tiered with tcp:// (the other pairs add nothing either side does not; the launcher
# suite runs both init methods on one node).
npu_extra=()
script_extra=()
run_job 29577 agent env
# Rank 3 fails once at step 5; the second attempt must meet on a clean store.
npu_extra=(--max-restarts 1)
script_extra=(--fail-rank 3 --fail-attempt 0)
run_job 29580 tiered tcp
expect_in "$work/node1.err" "attempt 1"

# Rank 3 stops calling all_reduce at step 5, so every rank stops beating: a hang is found
# (by whichever rank's timer runs out first), both nodes exit 124, all four ranks' Python
# stacks are taken (through torch's worker server from torch 2.5, else by SIGABRT), rank 3's in
# hang_here and the others waiting in gloo, and rank 3 is the root cause on both nodes: named
# from the flight records where gloo has one (torch 2.8 and later), else as the odd stack out.
npu_extra=(--hang-timeout 4)
script_extra=(--hang-rank 3 --hang-step 5)
what="a hung rank"
run_node "$ns_a" "${tag}va" 0 29581 agent env
run_node "$ns_b" "${tag}vb" 1 29581 agent env
for i in 0 1; do
  wait_bounded 120 "${pids[$i]}" "node $i ($what)"
  [ "$rc" -eq 124 ] || fail "node $i exited $rc, not 124 ($what)"
  expect_in "$work/node$i.err" "the job failed; root cause: rank 3 (local 1,"
  if grep -q "no rank had a flight recorder" "$work/node$i.err"; then
    expect_in "$work/node$i.err" "after 'step 4'; stuck in train_ddp.py:"
    expect_in "$work/node$i.err" "(the odd one out: 3 of 4 ranks were in "
  else
    expect_in "$work/node$i.err" "hung: rank 3 never entered all_reduce #"
  fi
  if grep -q "asked 2 ranks' worker servers: 2 gave their stacks" "$work/node$i.err"; then
    [ "$(grep -c "Aborted" "$work/node$i.err")" -eq 0 ] || fail "node $i: answered, yet aborted"
  else
    # Occurrences, not lines: two workers' dumps to one stderr interleave.
    [ "$(grep -o "Aborted" "$work/node$i.err" | wc -l)" -ge 2 ] || fail "node $i: expected 2 stack dumps"
  fi
done
expect_in "$work/node1.err" "in hang_here <- train_ddp.py:"
expect_in "$work/node1.err" "<- the odd one out"
require_no_job_processes "the DDP job ($what)"
echo "passed: $what"
echo "PASS: DDP across two network namespaces"
