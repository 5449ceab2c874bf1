#!/usr/bin/env bash
# Runs every libFuzzer target of fuzz/ for a while, two at a time, starting from the checked-in
# corpus in fuzz/corpus/<target>/. Inputs found on the way go to <build>/fuzz-corpus/ (the
# checked-in corpus is only read), crashes to <build>/fuzz-artifacts/; any crash fails the run.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET (default 30)] [TARGET...]
#   CI runs half a minute per target, from a corpus that already covers each parser (the
#   checked-in one): it guards against a regression, the long run finds new paths. The long run (documented in docs/HARDENING.md) is e.g.
#   scripts/fuzz.sh 3600, then scripts/fuzz.sh --merge to fold new inputs into fuzz/corpus/.
# The fuzz build is <build> = $NPU_RUN_FUZZ_BUILD_DIR (default build-asan), configured by
# scripts/hardening.sh (clang, -DNPU_RUN_FUZZ=ON).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${NPU_RUN_FUZZ_BUILD_DIR:-$root/build-asan}
all_targets=(fuzz_frame_decoder fuzz_messages fuzz_rdzv_state fuzz_hostlist fuzz_rank_table
             fuzz_command_line fuzz_hosts)

# Input sizes that matter per target: frames and messages are small, hostlists short lines.
max_len() {
  case "$1" in
    fuzz_hostlist) echo 128 ;;
    fuzz_command_line) echo 512 ;;
    *) echo 4096 ;;
  esac
}

merge=0
if [ "${1:-}" = "--merge" ]; then merge=1; shift; fi
seconds=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

mkdir -p "$build/fuzz-artifacts"
if [ $merge -eq 1 ]; then
  # Keeps the smallest set of inputs covering what the checked-in corpus and the new finds cover.
  for t in "${targets[@]}"; do
    mkdir -p "$build/fuzz-corpus/$t" "$root/fuzz/corpus/$t"
    "$build/fuzz/$t" -merge=1 -max_len="$(max_len "$t")" "$root/fuzz/corpus/$t" "$build/fuzz-corpus/$t"
  done
  exit 0
fi

run_one() {
  local t=$1
  mkdir -p "$build/fuzz-corpus/$t"
  "$build/fuzz/$t" -max_total_time="$seconds" -max_len="$(max_len "$t")" -rss_limit_mb=2048 \
      -timeout=10 -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" \
      "$build/fuzz-corpus/$t" "$root/fuzz/corpus/$t" > "$build/fuzz-artifacts/$t.log" 2>&1
}

failed=()
pids=()
names=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  names+=("$t")
  if [ ${#pids[@]} -ge 2 ]; then
    if ! wait "${pids[0]}"; then failed+=("${names[0]}"); fi
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then failed+=("${names[$i]}"); fi
done

for t in "${targets[@]}"; do
  echo "fuzz: $t: $(grep -E 'stat::number_of_executed_units' "$build/fuzz-artifacts/$t.log" | awk '{print $2}') runs in ${seconds} s"
done
if [ ${#failed[@]} -gt 0 ]; then
  for t in "${failed[@]}"; do
    echo "fuzz: $t FAILED; last lines of $build/fuzz-artifacts/$t.log:" >&2
    tail -40 "$build/fuzz-artifacts/$t.log" >&2
  done
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${seconds} s each without a finding"
