#!/usr/bin/env bash
# CI's third stage, after scripts/test.sh and scripts/portability.sh: the test suite again under
# sanitizers, a short fuzz run, and clang-tidy. Each stage fails on any finding.
#   asan  clang build with ASan+UBSan (and libFuzzer coverage) in build-asan/: the suite once
#         more, as on Linux 3.10 and with torch 2.14 where a test is torch-facing (the ASan
#         tree's runs, tests/ctest/axes.cmake)
#   tsan  clang build with TSan in build-tsan/; the tests of the rendezvous server, client and
#         agent, where Asio handlers, the resolver thread and signals meet, the snapshots'
#         writer thread and their copy port's connections (resolved on Asio's resolver thread),
#         with torch 1.13's workers only
#   fuzz  every libFuzzer target for $NPU_RUN_FUZZ_SECONDS (default 30) s, from fuzz/corpus/
#   tidy  clang-tidy with .clang-tidy on every C++ source of the project (scripts/tidy.py: only
#         batches whose preprocessed text, flags or configuration changed since a clean check),
#         a unity batch of build-asan/ at a time; if `tidy-start` ran before, it waits for that
#         run and reports it instead
# Usage: scripts/hardening.sh [asan] [tsan] [fuzz] [tidy]   (default: all, in this order)
#        scripts/hardening.sh build-asan | build-tsan   only build that tree (CI does it early,
#                                                       in the background: scripts/ci_background.sh)
#        scripts/hardening.sh tidy-start | tidy-stop
#   tidy-start  starts clang-tidy in the background at idle priority (SCHED_IDLE: it runs only on
#               a core nothing else wants) and returns; .ci/run starts it first, so that the
#               stages' waiting time checks the sources, and its tidy stage finds most of it done
#   tidy-stop   stops that run if it is still going (.ci/run on exit, whatever happened)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib/build_tree.sh
source "$root/scripts/lib/build_tree.sh"
# shellcheck source=scripts/lib/ctest_run.sh
source "$root/scripts/lib/ctest_run.sh"
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(asan tsan fuzz tidy)

"$root/scripts/install_deps.sh"
export PYTHON_EXEC=${PYTHON_EXEC:-/usr/bin/python3}
# Findings abort with a stack; leaks count as findings.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# Line tables for the stacks, and -O0 for both trees: their tests wait on torch workers, timers
# and sockets far more than on npu_run's CPU, and what the sanitizers find they find at any
# level. -O0 halves or thirds the compile of -O1, on the path of a cold CI: ASan+UBSan 32 s ->
# 17 s of CPU for the agent's first batch (with libFuzzer's coverage), TSan 27 s -> 13 s for it
# and 44 s -> 16 s for the etcd client's.
clang_options=(-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPU_RUN_WERROR=ON)
asan_options=("${clang_options[@]}" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only"
              -DNPU_RUN_FUZZ=ON -DNPU_RUN_SANITIZE=address,undefined)
tsan_options=("${clang_options[@]}" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only"
              -DNPU_RUN_SANITIZE=thread)

# What the ASan stage and the fuzzing run, not the benchmarks' load generators.
stage_build-asan() {
  build_tree "$root/build-asan" --target npu_run --target unit_tests --target integration_tests \
    --target npu_run_fuzz_targets "${asan_options[@]}"
}

stage_build-tsan() {
  build_tree "$root/build-tsan" --target npu_run --target unit_tests --target integration_tests \
    "${tsan_options[@]}"
}

stage_asan() {
  stage_build-asan
  # The ASan tree registers its own runs (tests/ctest/axes.cmake): every test once, the
  # integration and end-to-end ones as on Linux 3.10, the torch-facing ones with torch 2.14;
  # the benchmark smokes, the build's checks and the etcd fault matrix are the plain tree's.
  # Four at a time: at three its tests took 527 s and used 716 CPU-s (acct), two cores 68 % busy.
  ctest_run asan "$root/build-asan" -j "${NPU_RUN_TEST_JOBS:-4}"
}

stage_tsan() {
  stage_build-tsan
  ctest_run tsan "$root/build-tsan" -j 2 \
    -R 'rdzv|protocol|multi-node|elastic|hostile|auth|supervision|signals|child exits|console|logs|remote|--hosts|snapshots|copy port'
}

stage_fuzz() {
  [ -x "$root/build-asan/fuzz/fuzz_messages" ] || stage_build-asan
  NPU_RUN_FUZZ_BUILD_DIR="$root/build-asan" "$root/scripts/fuzz.sh" "${NPU_RUN_FUZZ_SECONDS:-30}"
}

# clang-tidy reads the ASan tree's compile commands and unity batches: clang understands exactly
# its flags. It needs the generated headers, not the objects.
configure_for_tidy() {
  build_tree "$root/build-asan" --target npu_run_build_info "${asan_options[@]}" >/dev/null
}

# Every tracked source in that tree; a file is re-checked only when what clang-tidy would see
# of it changed (scripts/tidy.py keeps a cache of clean results outside the checkout).
run_tidy() { python3 "$root/scripts/tidy.py" "$root/build-asan"; }

# The background run's files: pgid (to stop it), writer (the shell that writes rc), log, rc.
background="$root/build-asan/tidy-background"

stage_tidy-start() {
  configure_for_tidy
  rm -rf "$background"
  mkdir -p "$background"
  (
    start=$SECONDS
    # setsid: its own process group, so that tidy-stop reaches the clang-tidy processes too; and
    # its own scheduling group, at nice 19 (scripts/lib/background_group.sh says why).
    setsid bash "$root/scripts/lib/background_group.sh" 19 \
      chrt --idle 0 python3 "$root/scripts/tidy.py" "$root/build-asan" &
    echo $! >"$background/pgid"
    rc=0
    wait $! || rc=$?
    echo "hardening: the background clang-tidy ran for $((SECONDS - start)) s"
    echo $rc >"$background/rc.new"
    mv "$background/rc.new" "$background/rc"
  ) </dev/null >"$background/log" 2>&1 &
  echo $! >"$background/writer"
}

stage_tidy-stop() {
  [ -f "$background/writer" ] || return 0
  if [ ! -f "$background/rc" ]; then
    local pgid writer
    pgid=$(cat "$background/pgid" 2>/dev/null) && kill -TERM -- "-$pgid" 2>/dev/null || true
    writer=$(cat "$background/writer")
    while kill -0 "$writer" 2>/dev/null; do sleep 0.2; done
  fi
  rm -rf "$background"  # a stopped run has nothing to report
}

stage_tidy() {
  if [ ! -f "$background/writer" ]; then
    configure_for_tidy
    run_tidy
    return
  fi
  local writer rc
  writer=$(cat "$background/writer")
  # The writer ends only after writing rc: once it is gone, rc is there or the run was lost.
  until [ -f "$background/rc" ]; do
    kill -0 "$writer" 2>/dev/null || [ -f "$background/rc" ] ||
      { echo "hardening: the background clang-tidy (shell $writer) ended without a result" >&2; return 1; }
    sleep 2
  done
  cat "$background/log"
  rc=$(cat "$background/rc")
  rm -rf "$background"  # reported once: a later tidy stage checks afresh
  return "$rc"
}

for stage in "${stages[@]}"; do
  echo "hardening: $stage"
  start=$SECONDS
  "stage_$stage"
  echo "hardening: $stage passed in $((SECONDS - start)) s"
  case $stage in
    build-*|tidy-*) ;;
    *) python3 "$root/scripts/lib/test_budget.py" stage "hardening-$stage" $((SECONDS - start)) ;;
  esac
done
