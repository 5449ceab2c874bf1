#!/usr/bin/env bash
# Hot spares end to end: three "hosts" (network namespaces on a bridge, each its own UTS
# namespace and host name), real PyTorch DDP over gloo, 2 nodes of 2 workers and 1 spare
# (--spares 1, the spare named by --node-rank 2), training with snapshots in the agents' memory
# (examples/train_snapshots.py, deterministic). Mid-training node 1's agent and workers are
# SIGKILLed and its link is cut (nftables drops everything in its namespace): the spare takes
# node 1's seat (ranks 2-3, GROUP_RANK 1), node 0 keeps ranks 0-1, the spare fetches ranks 2-3's
# snapshot from the copy node 0's agent kept (the ring of copies), every rank resumes from
# memory, and the weights at the end equal an uninterrupted run's up to float rounding (with four
# ranks the order of gloo's sums differs after a restart, in the last bits: a restart rebuilds
# DDP's buckets, which moves each gradient's place in the ring's chunks; with two ranks, as in
# the integration cases, the sums are exact); --max-restarts 0 was enough; the ledger names the
# lost host; no process of the job survives.
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
    "$source_dir/examples/train_snapshots.py" --steps 40 --step-seconds 0.2 \
    --path "$work/ckpt/rank{rank}_step{step}.pt" --out "$work/spare.json" \
    >"$work/node$i.out" 2>"$work/node$i.err" &
  pids[$i]=$!
}

# The weights of an uninterrupted run of the same four ranks, on one node.
NPU_RUN_TEST_MARKER="$marker" PYTHON_EXEC="${PYTHON_EXEC:-/usr/bin/python3}" "$npu_run" \
  --nproc-per-node 4 --master-port 29592 "$source_dir/examples/train_snapshots.py" --steps 40 \
  --path "$work/clean/rank{rank}_step{step}.pt" --out "$work/clean.json" \
  >"$work/clean.out" 2>"$work/clean.err" || fail "the uninterrupted run failed" "$work/clean.err"

run_node 0 0
run_node 1 1
run_node 2 2
wait_for 120 "rank 3's snapshot of step 10 on storage" test -s "$work/ckpt/rank3_step10.pt"
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
expect_in "$work/node2.err" "ranks 2-3 of 4, node 1 of 2, attempt 1" \
  "local rank 0 fetches step" "from the copy on spare-host-0 ($prefix.1:" \
  "every rank of this node (2) restored step" "after 2 ranks fetched from another node's copy"
expect_in "$work/node0.err" "of them as a copy on another node"
python3 - "$work/spare.json" <<'PY' || fail "rank 0 did not resume from memory" "$work/spare.json"
import json, sys
loaded = json.load(open(sys.argv[1]))["loaded"]
sys.exit(0 if loaded["source"] == "memory" and loaded["step"] >= 10 else 1)
PY
"${PYTHON_EXEC:-/usr/bin/python3}" - "$work" <<'PY' || fail "the weights differ from the uninterrupted run's"
import sys, torch
work = sys.argv[1]
for rank in range(4):
    resumed = torch.load(f"{work}/ckpt/rank{rank}_step40.pt")["model"]
    clean = torch.load(f"{work}/clean/rank{rank}_step40.pt")["model"]
    for name, tensor in clean.items():
        if not torch.allclose(resumed[name], tensor, rtol=1e-5, atol=1e-6):
            sys.exit(f"rank {rank}'s {name} differs by {(resumed[name] - tensor).abs().max()}")
PY
expect_in "$work/ledger.jsonl" '"host":"spare-host-1"' '"reason":"lost"'
ip netns exec "${tag}h2" nft delete table inet cut
require_no_job_processes "the DDP job with a spare"
echo "PASS: a spare took the lost node's seat, restored its ranks from the copy, and DDP finished as if never hit"
