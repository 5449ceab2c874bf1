#!/usr/bin/env bash
# The gain of ranks placed for the network (docs/guide/several-nodes.md), measured: network
# namespaces as hosts behind two leaf switches (bridges) joined by a spine (a veth pair shaped
# with tc to --spine-mbit), host names that interleave the switches (node1 on leaf a, node2 on
# leaf b, ...), one rank per host, and real torch all_reduce over gloo, once with
# --node-order host and once with the default topology order (each node's leaf from a --topology
# file). A ring all_reduce crosses the spine twice in topology order and at every hop in host
# order; the ratio of bus bandwidths says what that costs. Prints one markdown row per run.
#
#   scripts/bench/topology_gain.sh NPU_RUN [--nodes 4,8] [--spine-mbit 200] [--mb 4] [--iters 3]
# Root; creates and removes everything it uses (namespaces npg<pid>*).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
npu_run=$1
shift
node_counts=4,8 spine=200 mb=4 iters=3
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) node_counts=$2 ;;
    --spine-mbit) spine=$2 ;;
    --mb) mb=$2 ;;
    --iters) iters=$2 ;;
    *) echo "topology_gain: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
[ "$(id -u)" -eq 0 ] || { echo "skipped: network namespaces need root"; exit 77; }

tag="npg$$"
sw="${tag}sw"
marker="topology-gain-$$-$RANDOM"
work=$(mktemp -d)
# shellcheck source=../../tests/e2e/lib.sh
source "$root/tests/e2e/lib.sh"

cleanup() {
  kill_job_processes
  for ns in $(ip netns list | awk '{print $1}' | grep "^$tag" || true); do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# The switches: two bridges in a namespace of their own, and the spine between them.
make_fabric() {  # nodes
  sweep_stale_runs "$tag"
  ip netns add "$sw"
  ip -n "$sw" link add bra type bridge
  ip -n "$sw" link add brb type bridge
  ip -n "$sw" link add spa type veth peer name spb
  ip -n "$sw" link set spa master bra
  ip -n "$sw" link set spb master brb
  for dev in bra brb spa spb lo; do ip -n "$sw" link set "$dev" up; done
  for dev in spa spb; do
    ip netns exec "$sw" tc qdisc add dev "$dev" root tbf rate "${spine}mbit" burst 64kb latency 200ms
  done
  : >"$work/topology"
  for i in $(seq 1 "$1"); do
    local ns="${tag}h$i" leaf=a
    [ $((i % 2)) -eq 0 ] && leaf=b
    ip netns add "$ns"
    ip link add "${tag}e$i" netns "$ns" type veth peer name "p$i" netns "$sw"
    ip -n "$sw" link set "p$i" master "br$leaf"
    ip -n "$sw" link set "p$i" up
    ip -n "$ns" link set "${tag}e$i" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "10.232.0.$i/24" dev "${tag}e$i"
    echo "node$i spine/leaf-$leaf" >>"$work/topology"
  done
}

run_order() {  # nodes order -> prints the busbw line of rank 0
  local n=$1 order=$2 pids=() i
  for i in $(seq 1 "$n"); do
    ip netns exec "${tag}h$i" unshare --uts sh -c 'hostname "$0" && exec "$@"' "node$i" \
      env NPU_RUN_TEST_MARKER="$marker" PYTHON_EXEC="${PYTHON_EXEC:-/usr/bin/python3}" \
      GLOO_SOCKET_IFNAME="${tag}e$i" \
      "$npu_run" --nnodes "$n" --nproc-per-node 1 --master-addr 10.232.0.1 --master-port 29601 \
      --rdzv-timeout 120 --node-order "$order" --topology "$work/topology" \
      "$root/scripts/bench/allreduce_busbw.py" --mb "$mb" --iters "$iters" \
      >"$work/$order.$i.out" 2>"$work/$order.$i.err" &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait_bounded 300 "${pids[$i]}" "node $((i + 1)) ($order order)"
    [ "$rc" -eq 0 ] || fail "node $((i + 1)) exited $rc ($order order)" "$work/$order.$((i + 1)).err"
  done
  require_no_job_processes "the $order-order job"
  cat "$work"/"$order".*.out | grep '^busbw' || fail "no rank printed its bandwidth" "$work/$order.1.err"
}

echo "| nodes | spine | order | bus bandwidth | per all_reduce of ${mb} MB | ranks on |"
echo "|---|---|---|---|---|---|"
IFS=, read -ra counts <<<"$node_counts"
for n in "${counts[@]}"; do
  make_fabric "$n"
  declare -A busbw=()
  for order in host topology; do
    line=$(run_order "$n" "$order")
    busbw[$order]=$(sed -n 's/^busbw \([0-9.]*\) MB\/s.*/\1/p' <<<"$line")
    per=$(sed -n 's/.*, \([0-9.]*\) s per all_reduce.*/\1/p' <<<"$line")
    hosts=$(sed -n 's/.*ranks on \(.*\)$/\1/p' <<<"$line")
    echo "| $n | ${spine} Mbit/s | $order | ${busbw[$order]} MB/s | $per s | $hosts |"
  done
  ratio=$(python3 -c "print(f'{${busbw[topology]} / ${busbw[host]}:.2f}')")
  echo "| $n | | topology / host | **${ratio}x** | | |"
  cleanup_fabric=$(ip netns list | awk '{print $1}' | grep "^$tag" || true)
  for ns in $cleanup_fabric; do ip netns del "$ns"; done
done
