#!/usr/bin/env bash
# A smoke test of an npu_run binary where the full suite cannot run: an aarch64 build under
# qemu-aarch64-static (no binfmt here), or the static x86_64 binary inside another distribution's
# chroot. NPU_RUN... is the command that runs npu_run there, e.g.
#   smoke.sh qemu-aarch64-static build-aarch64/npu_run
#   smoke.sh chroot /var/cache/npu_run/bullseye /usr/bin/npu_run
# Checks: --version, 2 workers with the environment contract, a failing worker's exit code and
# root cause, a 2-node job on loopback (master named localhost), a master name nothing resolves,
# and that no process of any of them is left.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: smoke.sh NPU_RUN_COMMAND..." >&2; exit 2; }
npu_run=("$@")
marker="portable-smoke-$$"
# Only npu_run (and so every process it starts) carries the marker, not this script's own tools.
run() { NPU_RUN_TEST_MARKER="$marker" "${npu_run[@]}" "$@"; }
out=$(mktemp)
trap 'rm -f "$out" "$out".*' EXIT

fail() {
  echo "FAIL: $1" >&2
  for f in "$out" "$out".*; do [ -s "$f" ] && { echo "---- $f" >&2; cat "$f" >&2; }; done
  exit 1
}
expect_in() {  # file text...
  local file=$1
  shift
  for text in "$@"; do grep -qF -- "$text" "$file" || fail "'$text' missing"; done
}
strays() {
  grep -lsa "NPU_RUN_TEST_MARKER=$marker" /proc/[0-9]*/environ 2>/dev/null |
    sed 's|/proc/\([0-9]*\)/environ|\1|' | grep -vx "$$" || true
}

echo "== --version"
run --version >"$out" || fail "--version exited $?"
cat "$out"
expect_in "$out" "npu_run " "commit:" "arch:" "kernel:"

echo "== 2 workers"
rc=0
run --nproc-per-node 2 --no-python /bin/sh -c \
  'echo "rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE device=$DEVICE_ID"' >"$out" 2>"$out.err" || rc=$?
[ $rc -eq 0 ] || fail "2 workers: exit $rc"
expect_in "$out" "rank=0 local=0 world=2 device=0" "rank=1 local=1 world=2 device=1"

echo "== a failing worker"
rc=0
run --nproc-per-node 2 --no-python /bin/sh -c \
  'if [ "$LOCAL_RANK" = 1 ]; then exit 7; fi; exec sleep 60' >"$out" 2>"$out.err" || rc=$?
[ $rc -eq 7 ] || fail "a worker exiting 7: npu_run exited $rc"
expect_in "$out.err" "failed with exit code 7" "root cause first"

echo "== 2 nodes on loopback"
port=$((30000 + RANDOM % 2700))
node() {  # rank
  run --nnodes 2 --node-rank "$1" --master-addr localhost --master-port "$port" \
    --nproc-per-node 2 --no-python /bin/sh -c 'echo "rank=$RANK of $WORLD_SIZE node=$GROUP_RANK"'
}
node 0 >"$out.n0" 2>"$out.n0err" &
n0=$!
node 1 >"$out.n1" 2>"$out.n1err" &
n1=$!
rc0=0 rc1=0
wait $n0 || rc0=$?
wait $n1 || rc1=$?
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || fail "2 nodes: exits $rc0 and $rc1"
cat "$out.n0" "$out.n1" >"$out"
expect_in "$out" "rank=0 of 4 node=0" "rank=1 of 4 node=0" "rank=2 of 4 node=1" "rank=3 of 4 node=1"

echo "== a master name that only the host's own lookup modules could know"
# In a static binary only /etc/hosts and DNS answer (nsswitch modules of another glibc, such as
# libnss_myhostname, would abort it): the name fails cleanly with the rendezvous error.
rc=0
run --nnodes 2 --node-rank 1 --master-addr "npu-run-nowhere-$$.invalid" --master-port "$port" \
  --rdzv-timeout 2 --nproc-per-node 1 --no-python /bin/true >"$out" 2>"$out.err" || rc=$?
[ $rc -eq 125 ] || fail "an unknown master name: exit $rc, expected 125 (134 would be an abort)"
expect_in "$out.err" "npu-run-nowhere-$$.invalid"

left=$(strays)
[ -z "$left" ] || fail "processes left behind: $left"
echo "portable smoke: all passed"
