# shellcheck shell=bash
# Sourced by the scripts that run ctest (scripts/test.sh, portability.sh, hardening.sh): one
# ctest run, then what it cost against tests/time_budget (scripts/lib/test_budget.py): its tests,
# test-seconds, wall time and ten slowest, and the tests past their allowance.
#   ctest_run RUN BUILD_DIR [CTEST ARGUMENT]...   returns ctest's exit status
# RUN names the run's line in tests/time_budget (quick, torch2.6, asan, tsan); a run given a
# selection by hand (scripts/test.sh -R ...) is reported as RUN-selection, which has no budget.
ctest_run() {
  local run=$1 dir=$2 root rc=0 start=$SECONDS
  shift 2
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  local junit="$dir/Testing/$run-tests.xml"
  mkdir -p "$dir/Testing"
  rm -f "$junit"
  (cd "$dir" && ctest --output-on-failure --timeout 600 --output-junit "$junit" "$@") || rc=$?
  if [ -f "$junit" ]; then
    python3 "$root/scripts/lib/test_budget.py" tests "$run" "$junit" $((SECONDS - start)) || true
  fi
  return $rc
}
