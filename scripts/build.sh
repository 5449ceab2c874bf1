#!/usr/bin/env bash
# Configures and builds npu_run and its tests into build/ (or $NPU_RUN_BUILD_DIR).
# Usage: scripts/build.sh [extra cmake -D options...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${NPU_RUN_BUILD_DIR:-$root/build}
build_type=${NPU_RUN_BUILD_TYPE:-RelWithDebInfo}

cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" -DNPU_RUN_WERROR=ON "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "build: $build_dir/npu_run"
