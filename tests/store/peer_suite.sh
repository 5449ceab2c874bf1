#!/usr/bin/env bash
# The workers' store against real torch clients (tests/store/peer_suite.py as the workers), for
# the torch PYTHON_EXEC names (the host's 1.13, or tests/torch2/python's 2.6): a single node
# (the agent's store on its held port, two workers) and two nodes on loopback (one each) (node 0's store on the
# rendezvous port, told apart from the agents by the first bytes), each twice: with a restart, the
# second attempt must start from a fresh key space. No process of either job may outlive it.
# MODE is agent (node 0's store for every rank) or tiered (each node's workers through their
# agent's proxy; a single node has no tier and serves as agent does).
#   tests/store/peer_suite.sh NPU_RUN CHECKOUT [MODE]
set -euo pipefail
npu_run=$1
checkout=$2
mode=${3:-agent}
suite=$checkout/tests/store/peer_suite.py
marker=store-peers-$$-$RANDOM

source "$checkout/tests/e2e/lib.sh"
work=$(mktemp -d)
trap 'kill_job_processes; rm -rf "$work"' EXIT
: "${PYTHON_EXEC:?set PYTHON_EXEC to a python with torch}"
export PYTHON_EXEC

# A worker script that fails once on attempt 0 after its checks, so the job restarts; attempt 1's
# rank 0 repeats the single-client checks, whose num_keys differences and created keys would be
# wrong if the last attempt's keys were still there.
cat >"$work/restarting.py" <<PY
import os, runpy, sys
runpy.run_path("$suite", run_name="__main__")
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and os.environ["RANK"] == "0":
    sys.exit(3)
PY

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

expect_passes() {  # output ranks
  local out=$1 ranks=$2 r
  for r in $(seq 0 $((ranks - 1))); do
    grep -q "peer suite: rank $r passed" "$out" || fail "rank $r did not pass the peer suite" "$out"
  done
}

# One node, two workers, one restart.
out=$work/single.log
NPU_RUN_TEST_MARKER=$marker "$npu_run" --worker-store "$mode" --nproc-per-node 2 --max-restarts 1 "$work/restarting.py" >"$out" 2>&1 &
wait_bounded 120 $! "the single-node job" "$out"
[ "$rc" = 0 ] || fail "the single-node job exited $rc" "$out"
[ "$(grep -c 'peer suite: rank 0 passed' "$out")" = 2 ] || fail "rank 0 did not pass twice" "$out"
expect_in "$out" "workers' store at 127.0.0.1:"
require_no_job_processes "the single-node job"

# Two nodes on loopback, one worker each (the single node had two: ranks of one node meet
# there), one restart; node 0's store shares the rendezvous port.
port=$(free_port)
for node in 0 1; do
  NPU_RUN_TEST_MARKER=$marker "$npu_run" --worker-store "$mode" --nnodes 2 --node-rank $node --nproc-per-node 1 --master-port "$port" --max-restarts 1 \
    "$work/restarting.py" >"$work/node$node.log" 2>&1 &
  pids[$node]=$!
done
wait_bounded 180 "${pids[0]}" "node 0 of the two-node job" "$work/node0.log"
rc0=$rc
wait_bounded 60 "${pids[1]}" "node 1 of the two-node job" "$work/node1.log"
[ "$rc0" = 0 ] || fail "node 0 exited $rc0" "$work/node0.log"
[ "$rc" = 0 ] || fail "node 1 exited $rc" "$work/node1.log"
expect_passes "$work/node0.log" 1
grep -q "peer suite: rank 1 passed" "$work/node1.log" || fail "rank 1 did not pass" "$work/node1.log"
[ "$(grep -c 'peer suite: rank 0 passed' "$work/node0.log")" = 2 ] ||
  fail "rank 0 did not pass in both attempts" "$work/node0.log"
if [ "$mode" = tiered ]; then
  # Node 1's workers use its own proxy, on a port of its own.
  grep -q "workers' store at 127.0.0.1:" "$work/node1.log" || fail "node 1 names no store" "$work/node1.log"
  grep -q "workers' store at 127.0.0.1:$port" "$work/node1.log" && fail "node 1's workers use node 0's store directly" "$work/node1.log"
else
  expect_in "$work/node1.log" "workers' store at 127.0.0.1:$port"
fi
require_no_job_processes "the two-node job"
# The clients' torch, as they printed it (not a new interpreter's import of it).
version=$(sed -n 's/^.*peer suite: rank 0 passed [0-9]* checks (\(torch [^)]*\)).*$/\1/p' "$out" | sed -n 1p)
echo "peer suite: all passed in $mode mode ($version)"
