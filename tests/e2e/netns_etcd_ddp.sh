#!/usr/bin/env bash
# The etcd rendezvous end to end: a real 3-member etcd (Debian's etcd-server) on a bridge's
# address, three "hosts" (network namespaces on that bridge, each its own UTS namespace and host
# name), real PyTorch DDP over gloo, 2 workers per node and no --master-addr anywhere. Three
# ways to lose the leader etcd elected (the agent that serves the rendezvous and the workers'
# store), mid-training:
#   shrink  `--nnodes 2:3`: the leader is SIGKILLed with its workers and its namespace cut off
#           (nftables); within the lease's TTL plus a second another agent is elected, the job
#           re-forms on the 2 nodes left with TORCHELASTIC_RESTART_COUNT 1 (the job's memory,
#           not a fresh job), training runs again and every rank ends with the same weights.
#   spare   `--nnodes 2 --spares 1`, the third agent a spare: the same loss, and the spare takes
#           the lost leader's seat while the other node keeps its own; --max-restarts 0 is
#           enough.
#   split   `--nnodes 2:3`: the leader's namespace is cut from etcd only, the agents still reach
#           it: it steps down (exit 125) and stops its workers, and from the workers' own
#           timestamps (train_ddp.py --stamps) no step of its round comes after the first step
#           of the new leader's round.
# Nothing is left under the job's prefix and no process of the job survives.
#
# usage: netns_etcd_ddp.sh NPU_RUN_BINARY SOURCE_DIR [shrink|spare|split]
#        (root required; exits 77 = skipped)
set -euo pipefail
# A command that stops the script under set -e says which (a failure without a FAIL line was seen).
trap 'echo "FAIL: line $LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR

npu_run=$1
source_dir=$2
variant=${3:-shrink}
case $variant in shrink | spare | split) ;; *) echo "usage: $0 BINARY SOURCE_DIR [shrink|spare|split]"; exit 2 ;; esac
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: network namespaces need root"
  exit 77
fi
for tool in nft etcd etcdctl; do
  command -v "$tool" >/dev/null ||
    { echo "FAIL: $tool missing (scripts/install_deps.sh installs nftables, etcd-server, etcd-client)"; exit 1; }
done

tag="ned$$"
marker="netns-etcd-$$-$RANDOM"
work=$(mktemp -d)
# etcd's data in memory, and its election timeout twice the default (below): on a CI machine
# whose cores and disk the background's builds and chroots keep busy, a member's fsync or its
# turn on a core can stall past the timeout; each change of etcd's own leader renews every
# lease, and a lost agent's lease that does not lapse names no new leader. No etcd member is
# lost here: the test is of the agents' failover, not of etcd's.
etcd_data=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
prefix=10.231.80
ttl=3
pids=()
etcd_pids=()

# shellcheck source=lib.sh
source "$source_dir/tests/e2e/lib.sh"
# Short enough to be read whole where CI's report keeps only the start and the end: each node's
# last lines, what etcd's leader key holds, and how often etcd changed its own leader.
extra_failure_info() {
  for i in 0 1 2; do
    echo "---- node $i stdout (last 3 lines)"
    tail -n 3 "$work/node$i.out" 2>/dev/null || true
    echo "---- node $i stderr (last 12 lines)"
    tail -n 12 "$work/node$i.err" 2>/dev/null | cut -c1-400 || true
  done
  echo "---- etcd's leader key: $(leader_value 2>&1 | head -c 300)"
  for m in 1 2 3; do
    local log="$work/etcd$m.log"
    echo "---- etcd member e$m: $(grep -c "elected leader" "$log" 2>/dev/null) leader elections"
    grep -iE "lease|took too long|elected leader" "$log" 2>/dev/null | tail -n 4 | cut -c1-300 ||
      true
  done
}

cleanup() {
  for pid in "${pids[@]}" "${etcd_pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  kill_job_processes
  remove_namespace_bridge "$tag"
  rm -rf "$work" "$etcd_data"
}
trap cleanup EXIT

make_namespace_bridge "$tag" "$prefix"
ip addr add "$prefix.254/24" dev "${tag}br"

# Three etcd members on the bridge's address, each with ports of its own.
cluster=""
endpoints=""
for m in 1 2 3; do
  cluster+="${cluster:+,}e$m=http://$prefix.254:$((23980 + m))"
  endpoints+="${endpoints:+,}$prefix.254:$((23970 + m))"
done
for m in 1 2 3; do
  etcd --name "e$m" --data-dir "$etcd_data/etcd$m" \
    --listen-client-urls "http://$prefix.254:$((23970 + m))" \
    --advertise-client-urls "http://$prefix.254:$((23970 + m))" \
    --listen-peer-urls "http://$prefix.254:$((23980 + m))" \
    --initial-advertise-peer-urls "http://$prefix.254:$((23980 + m))" \
    --initial-cluster "$cluster" --initial-cluster-state new \
    --heartbeat-interval 200 --election-timeout 2000 >"$work/etcd$m.log" 2>&1 &
  etcd_pids+=($!)
done
etcd_ok() { ETCDCTL_API=3 etcdctl --endpoints "$endpoints" --dial-timeout 1s put /probe x >/dev/null 2>&1; }
wait_for 30 "etcd to take a write" etcd_ok
leader_value() { ETCDCTL_API=3 etcdctl --endpoints "$endpoints" get --print-value-only /torchelastic/p2p/e2e/leader; }

shape=(--nnodes 2:3 --max-restarts 1)
[ "$variant" = spare ] && shape=(--nnodes 2 --spares 1 --max-restarts 0)
run_node() {  # index
  local i=$1
  ip netns exec "${tag}h$((i + 1))" unshare --uts env NPU_RUN_TEST_MARKER="$marker" \
    PYTHON_EXEC="${PYTHON_EXEC:-/usr/bin/python3}" GLOO_SOCKET_IFNAME=eth0 \
    /bin/sh -c 'hostname "$0" && exec "$@"' "etcd-host-$i" \
    "$npu_run" "${shape[@]}" --nproc-per-node 2 --rdzv-backend etcd --rdzv-endpoint "$endpoints" \
    --rdzv-id e2e --rdzv-conf "lease_ttl=$ttl,last_call_timeout=2" --rdzv-timeout 60 \
    --heartbeat-timeout 3 \
    "$source_dir/examples/train_ddp.py" --steps 60 --step-seconds 0.1 --stamps "$work/stamps" \
    >"$work/node$i.out" 2>"$work/node$i.err" &
  pids[$i]=$!
}

cut_off() {  # index [nft match]: drops the namespace's traffic (all of it, or what matches)
  ip netns exec "${tag}h$(($1 + 1))" nft -f - <<NFT
table inet cut {
  chain in { type filter hook input priority 0; policy accept; ${2:-} ${2:+saddr $prefix.254} drop; }
  chain out { type filter hook output priority 0; policy accept; ${2:-} ${2:+daddr $prefix.254} drop; }
}
NFT
}
any_at_step() { grep -qsF "step  10" "$work"/node?.out; }
if [ "$variant" = spare ]; then
  # The spare starts once the two nodes run: it cannot be the leader etcd elected first.
  run_node 0
  run_node 1
  wait_for 120 "training to reach step 10" any_at_step
  run_node 2
  wait_for 60 "the third agent to stand by" output_has "$work/node2.err" "standing by as a spare"
else
  for i in 0 1 2; do run_node "$i"; done
  wait_for 120 "training to reach step 10" any_at_step
fi
leader=$(leader_value)
host=$(sed -n 's/.*"host":"\(etcd-host-[0-9]\)".*/\1/p' <<<"$leader")
[ -n "$host" ] || fail "etcd's leader key names no agent: '$leader'"
lost=${host#etcd-host-}
survivors=()
for i in 0 1 2; do [ "$i" = "$lost" ] || survivors+=("$i"); done
killed_at=$(date +%s.%N)
if [ "$variant" = split ]; then
  echo "the rendezvous leader is $host; its namespace loses etcd, not the other agents"
  cut_off "$lost" ip
else
  echo "the rendezvous leader is $host; its machine dies"
  kill -9 "${pids[$lost]}"
  cut_off "$lost"
fi
new_leader() { local v; v=$(leader_value); [ -n "$v" ] && ! grep -q "\"$host\"" <<<"$v"; }
wait_for 30 "a new leader in etcd" new_leader
elected_after=$(awk -v a="$killed_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "a new leader after ${elected_after} s (lease TTL $ttl s): $(leader_value)"
awk -v t="$elected_after" -v ttl="$ttl" 'BEGIN { exit !(t < ttl + 1.5) }' ||
  fail "the new leader came ${elected_after} s after the old one lost etcd (TTL $ttl s)"

if [ "$variant" = split ]; then
  wait_bounded 60 "${pids[$lost]}" "the deposed leader"
  [ "$rc" -eq 125 ] || fail "the deposed leader exited $rc, not 125"
  expect_in "$work/node$lost.err" "while other agents can"
fi
for i in "${survivors[@]}"; do
  wait_bounded 180 "${pids[$i]}" "node $i"
  # Its warnings and errors first: CI's report may keep only the start of a long failure.
  [ "$rc" -eq 0 ] || fail "node $i exited $rc; what it warned of, last first:
$(grep -E '] (warning|error):' "$work/node$i.err" | tac | head -n 6 | cut -c1-300)"
  expect_in "$work/node$i.err" "of 4, node" "attempt 1)"
done
cat "$work/node${survivors[0]}.out" "$work/node${survivors[1]}.out" >"$work/survivors.out"
cat "$work/node${survivors[0]}.err" "$work/node${survivors[1]}.err" >"$work/survivors.err"
expect_in "$work/survivors.err" "etcd elected this agent to lead the rendezvous after etcd-host-$lost" \
  "the job continues with round 1 (restart 1)"
expect_in "$work/survivors.out" "ranks agree: True"
[ "$(grep -c 'weights checksum' "$work/survivors.out")" -ge 4 ] ||
  fail "expected the 4 ranks' checksums after the restart" "$work/survivors.out"
if [ "$variant" = spare ]; then
  # The node that kept running keeps its seat; the spare takes the lost leader's.
  kept=""
  for i in "${survivors[@]}"; do [ "$i" = 2 ] || kept=$i; done
  seat=$(sed -n 's/.*of 4, node \([01]\) of 2, attempt 0).*/\1/p' "$work/node$kept.err" | sed -n 1p)
  [ -n "$seat" ] || fail "node $kept's first seat is not in its log" "$work/node$kept.err"
  expect_in "$work/node$kept.err" "node $seat of 2, attempt 1)"
  expect_in "$work/node2.err" "node $((1 - seat)) of 2, attempt 1)"
fi
if [ "$variant" = split ]; then
  # No step of the deposed leader's workers after the first step of the new round.
  last_old=$(awk -v h="$host" '$1 == h { print $5 }' "$work/stamps" | sort -n | tail -1)
  first_new=$(awk '$2 >= 1 { print $5 }' "$work/stamps" | sort -n | sed -n 1p)
  [ -n "$last_old" ] && [ -n "$first_new" ] || fail "no stamps to compare" "$work/stamps"
  awk -v a="$last_old" -v b="$first_new" 'BEGIN { exit !(a < b) }' ||
    fail "the deposed leader's workers stepped at $last_old, after the new round's first step at $first_new" "$work/stamps"
  echo "the deposed leader's last step $last_old, the new round's first $first_new"
fi
ip netns exec "${tag}h$((lost + 1))" nft delete table inet cut
require_no_job_processes "the DDP job over etcd ($variant)"
# The survivors revoked their leases; the lost one's lapsed with its TTL.
left=$(ETCDCTL_API=3 etcdctl --endpoints "$endpoints" get --prefix --keys-only /torchelastic/p2p/e2e/)
[ -z "$left" ] || fail "keys left under the job's prefix: $left"
echo "PASS ($variant): the etcd-elected leader was lost; a new one led within ${elected_after} s and DDP finished"
