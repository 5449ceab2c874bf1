#!/usr/bin/env bash
# Hot spares end to end: three "hosts" (network namespaces on a bridge, each its own UTS
# namespace and host name), real PyTorch DDP over gloo, 2 nodes of 2 workers and 1 spare
# (--spares 1, the spare named by --node-rank 2). Mid-training node 1's agent and workers are
# SIGKILLed and its link is cut (nftables drops everything in its namespace): the spare takes
# node 1's seat (ranks 2-3, GROUP_RANK 1), node 0 keeps ranks 0-1, training runs again and every
# rank ends with the same weights; --max-restarts 0 was enough; the ledger names the lost host;
# no process of the job survives.
#
# usage: netns_spare_ddp.sh NPU_RUN_BINARY SOURCE_DIR   (root required; exits 77 = skipped)
set -euo pipefail

npu_run=$1
source_dir=$2
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: network namespaces need root"
  exit 77
fi
command -v nft >/dev/null || { echo "FAIL: nft missing (scripts/install_deps.sh installs nftables)"; exit 1; }

tag="nsp$$"
marker="netns-spare-$$-$RANDOM"
work=$(mktemp -d)
prefix=10.231.79
pids=()

# shellcheck source=lib.sh
source "$source_dir/tests/e2e/lib.sh"
extra_failure_info() {
  for i in 0 1 2; do
    echo "---- node $i stdout"
    cat "$work/node$i.out" 2>/dev/null || true
    echo "---- node $i stderr"
    cat "$work/node$i.err" 2>/dev/null || true
  done
}

cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  kill_job_processes
  remove_namespace_bridge "$tag"
  rm -rf "$work"
}
trap cleanup EXIT

make_namespace_bridge "$tag" "$prefix"

run_node() {  # index node_rank
  local i=$1
  ip netns exec "${tag}h$((i + 1))" unshare --uts env NPU_RUN_TEST_MARKER="$marker" \
    PYTHON_EXEC="${PYTHON_EXEC:-/usr/bin/python3}" GLOO_SOCKET_IFNAME=eth0 \
    /bin/sh -c 'hostname "$0" && exec "$@"' "spare-host-$i" \
    "$npu_run" --nnodes 2 --spares 1 --node-rank "$2" --nproc-per-node 2 \
    --master-addr "$prefix.1" --master-port 29591 --rdzv-timeout 60 --max-restarts 0 \
    --heartbeat-interval 0.5 --heartbeat-timeout 3 --ledger "$work/ledger.jsonl" \
    "$source_dir/examples/train_ddp.py" --steps 60 --step-seconds 0.1 \
    >"$work/node$i.out" 2>"$work/node$i.err" &
  pids[$i]=$!
}

run_node 0 0
run_node 1 1
run_node 2 2
wait_for 120 "training to reach step 10" output_has "$work/node0.out" "step  10"
expect_in "$work/node2.err" "standing by as a spare of round 0 (2 nodes run, 1 spare wait)"
# Node 1's machine dies: its agent and workers, and its link.
kill -9 "${pids[1]}"
ip netns exec "${tag}h2" nft -f - <<'NFT'
table inet cut {
  chain in { type filter hook input priority 0; policy drop; }
  chain out { type filter hook output priority 0; policy drop; }
}
NFT
for i in 0 2; do
  wait_bounded 180 "${pids[$i]}" "node $i"
  [ "$rc" -eq 0 ] || fail "node $i exited $rc"
done
expect_in "$work/node0.err" "[infrastructure: node 1 (spare-host-1) was lost]" \
  "not counted against --max-restarts (0 of 0 used)" "ranks 0-1 of 4, node 0 of 2, attempt 1"
expect_in "$work/node2.err" "ranks 2-3 of 4, node 1 of 2, attempt 1"
expect_in "$work/node0.out" "ranks agree: True"
[ "$(grep -c 'weights checksum' "$work/node0.out" "$work/node2.out" | awk -F: '{s += $2} END {print s}')" -ge 4 ] ||
  fail "expected the 4 ranks' checksums after the restart"
expect_in "$work/ledger.jsonl" '"host":"spare-host-1"' '"reason":"lost"'
ip netns exec "${tag}h2" nft delete table inet cut
require_no_job_processes "the DDP job with a spare"
echo "PASS: a spare took the lost node's seat and DDP finished"
