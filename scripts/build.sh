#!/usr/bin/env bash
# Configures and builds npu_run and its tests into build/ (or $NPU_RUN_BUILD_DIR), with Ninja.
# Usage: scripts/build.sh [--target TARGET] [extra cmake -D options...]
#   --target npu_run   the binary alone (scripts/run_example.sh): no test is compiled
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${NPU_RUN_BUILD_DIR:-$root/build}
build_type=${NPU_RUN_BUILD_TYPE:-RelWithDebInfo}
targets=()
if [ "${1:-}" = --target ]; then
  targets=(--target "$2")
  shift 2
fi

# A tree configured with another generator (an older checkout's Makefiles) is configured afresh.
if [ -f "$build_dir/CMakeCache.txt" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$build_dir/CMakeCache.txt"; then
  rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
fi
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DNPU_RUN_WERROR=ON "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
echo "build: $build_dir/npu_run"
