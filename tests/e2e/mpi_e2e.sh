#!/usr/bin/env bash
# End to end under Open MPI's mpirun on loopback: two npu_run agents started by
# `mpirun -n 2` read their node rank and the node count from OMPI_COMM_WORLD_* and form one
# 2-node job (2 workers each, real PyTorch DDP over gloo). Both "nodes" share this host, so
# --agents-per-node 2 lifts the one-agent-per-node guard, which is itself checked: without it
# both agents refuse with the mpirun fix. Also a failing rank (mpirun exits with the root-cause
# code) and SIGTERM to mpirun (forwarded; agents exit 143). No process of any run may survive.
#
# usage: mpi_e2e.sh NPU_RUN_BINARY SOURCE_DIR   (needs mpirun; exits 77 = skipped without it)
set -euo pipefail

npu_run=$(realpath "$1")
source_dir=$(realpath "$2")
if ! command -v mpirun >/dev/null; then
  echo "skipped: mpirun is not installed (apt-get install openmpi-bin)"
  exit 77
fi

work=$(mktemp -d)
marker="mpi-e2e-$$-$RANDOM"
train="$source_dir/examples/train_ddp.py"

# shellcheck source=lib.sh
source "$source_dir/tests/e2e/lib.sh"
mpirun_pid=""
cleanup() {
  [ -n "$mpirun_pid" ] && kill -9 "$mpirun_pid" 2>/dev/null
  kill_job_processes
  rm -rf "$work"
}
trap cleanup EXIT

# The marker goes to the agents (and so the workers) through mpirun's -x, never into this
# script's own environment, where the grep looking for it would find itself.
mpirun=(mpirun --allow-run-as-root --oversubscribe -n 2 -x PYTHON_EXEC=/usr/bin/python3
  -x "NPU_RUN_TEST_MARKER=$marker")
agent=("$npu_run" --master-addr 127.0.0.1 --nproc-per-node 2)

run_mpi() {  # output file, npu_run arguments...: sets rc; a hung job fails naming its processes
  local file=$1
  shift
  "${mpirun[@]}" "${agent[@]}" "$@" >"$file" 2>&1 &
  mpirun_pid=$!
  wait_bounded 120 "$mpirun_pid" "mpirun" "$file"
  mpirun_pid=""
}

echo "== 1. mpirun -n 2 forms one 2-node job"
out="$work/ddp.out"
run_mpi "$out" --agents-per-node 2 "$train" --steps 10
[ "$rc" -eq 0 ] || fail "mpirun exited $rc" "$out"
expect_in "$out" "nnodes = 2 (OMPI_COMM_WORLD_SIZE)" "node rank = 1 (OMPI_COMM_WORLD_RANK)" \
  "ranks 0-1 of 4, node 0 of 2" "ranks 2-3 of 4, node 1 of 2" "ranks agree: True"
check_no_strays "the DDP job"

echo "== 2. two agents on one node are refused without --agents-per-node"
out="$work/refused.out"
run_mpi "$out" --no-python /bin/true
[ "$rc" -eq 2 ] || fail "mpirun exited $rc, expected 2" "$out"
expect_in "$out" "--map-by ppr:1:node"
check_no_strays "the refused job"

echo "== 3. a failing rank: mpirun exits with the worker's code"
out="$work/fail.out"
run_mpi "$out" --agents-per-node 2 "$train" --steps 50 --fail-rank 2 --fail-step 2
[ "$rc" -eq 1 ] || fail "mpirun exited $rc, expected 1" "$out"
expect_in "$out" "root cause: rank 2" "rank 2 fails at step 2"
check_no_strays "the failing job"

echo "== 4. SIGTERM to mpirun stops every agent and worker"
out="$work/term.out"
"${mpirun[@]}" "${agent[@]}" --agents-per-node 2 "$train" --steps 100000 --step-seconds 0.05 \
  >"$out" 2>&1 &
mpirun_pid=$!
wait_for 60 "training to start" output_has "$out" "step  10"
# mpirun forwards SIGTERM to both agents and waits for them.
kill -TERM "$mpirun_pid"
wait_bounded 30 "$mpirun_pid" "mpirun after SIGTERM" "$out"
mpirun_pid=""
[ "$rc" -ne 0 ] || fail "mpirun exited 0 after SIGTERM" "$out"
check_no_strays "the terminated job"
# Both agents get the signal. (mpirun kills what is left of a job as soon as one process exits
# non-zero, so the second agent may not get to log its exit; the stray check covers it.)
for node in 0 1; do
  grep -q "\[npu_run node $node .*received SIGTERM" "$out" || fail "node $node did not get SIGTERM" "$out"
done
grep -q "exit status 143" "$out" || fail "no agent exited 143" "$out"

echo "mpi e2e: all checks passed"
