#!/usr/bin/env bash
# A network partition shorter than the heartbeat timeout is ridden out. Two network namespaces
# joined by a veth pair, node 0's agent (and the rendezvous) in one, node 1's in the other;
# nftables drops everything arriving on the veth pair for 2/3 of the heartbeat timeout
# (8 s of 12) while the workers run, then lets it through again. On the old connection a
# segment lost at the start of the cut is next sent 12.6 s later, past the timeout, unless
# TCP_RTO_MAX_MS caps the backoff (Linux 6.15); node 1's agent resumes its session on a new
# connection once the link has been silent for 4 s, which is what carries the job on older
# kernels (run behind the old-kernel wrapper, the cap is refused). Passes when the static and
# the elastic job both end with 0 on both nodes, the session was resumed, nothing was lost,
# restarted or re-formed, and no process of either job survives.
#
# usage: netns_partition.sh NPU_RUN_BINARY SOURCE_DIR      (root required; exits 77 otherwise)
set -euo pipefail

npu_run=$1
source_dir=$2
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: network namespaces need root"
  exit 77
fi
command -v nft >/dev/null || { echo "FAIL: nft missing (scripts/install_deps.sh installs nftables)"; exit 1; }

tag="npp$$"
marker="netns-partition-$$-$RANDOM"
work=$(mktemp -d)
pids=()

# shellcheck source=lib.sh
source "$source_dir/tests/e2e/lib.sh"
extra_failure_info() {
  for f in "$work"/*.out "$work"/*.err; do
    [ -f "$f" ] || continue
    echo "---- $f"
    cat "$f"
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

# Packets are dropped where they arrive, in both namespaces, as a broken switch would: a drop
# in the sender's own output chain is a local error to TCP, which then retries every 0.5 s
# without backing off, and would hide what a real partition does.
start_partition() {
  for ns in "$ns_a" "$ns_b"; do
    ip netns exec "$ns" nft -f - <<NFT
table inet partition {
  chain in { type filter hook input priority 0; policy accept; iifname "${tag}v*" drop; }
}
NFT
  done
}
end_partition() {
  for ns in "$ns_a" "$ns_b"; do ip netns exec "$ns" nft delete table inet partition; done
}

run_node() {  # name ns node_rank nnodes
  ip netns exec "$2" env NPU_RUN_TEST_MARKER="$marker" \
    "$npu_run" --nnodes "$4" --node-rank "$3" --nproc-per-node 1 \
    --master-addr 10.231.78.1 --master-port 29578 --rdzv-timeout 30 \
    --heartbeat-interval 1 --heartbeat-timeout 12 --rdzv-last-call 1 \
    --no-python /bin/sh -c 'echo ready; sleep 14; echo done-$RANK' \
    >"$work/$1.out" 2>"$work/$1.err" &
  pids+=($!)
}

for nnodes in ${NNODES_LIST:-2 1:2}; do
  name="nnodes-${nnodes/:/-}"
  pids=()
  run_node "$name-node0" "$ns_a" 0 "$nnodes"
  run_node "$name-node1" "$ns_b" 1 "$nnodes"
  wait_for 30 "both nodes' workers to start ($name)" \
    bash -c "grep -q ready '$work/$name-node0.out' && grep -q ready '$work/$name-node1.out'"
  sleep 1.5  # a heartbeat or two on the established link first
  start_partition
  sleep 8
  end_partition
  for i in 0 1; do
    wait_bounded 60 "${pids[$i]}" "$name node $i"
    [ "$rc" -eq 0 ] || fail "$name: node $i exited $rc after an 8 s partition (heartbeat timeout 12 s)"
  done
  expect_in "$work/$name-node0.out" "done-0"
  expect_in "$work/$name-node1.out" "done-1"
  for i in 0 1; do
    for word in "lost" "restart" "re-forms"; do
      if grep -q -- "$word" "$work/$name-node$i.err"; then
        fail "$name: node $i logged '$word' for a partition it should have ridden out" \
          "$work/$name-node$i.err"
      fi
    done
  done
  expect_in "$work/$name-node1.err" "resumed on a new connection"
  expect_in "$work/$name-node0.err" "resumed its session on a new connection"
  require_no_job_processes "the $name job"
  echo "ok: --nnodes $nnodes survived an 8 s partition"
done
echo "PASS: partitions shorter than the heartbeat timeout are ridden out"
