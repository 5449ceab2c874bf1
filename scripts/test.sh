#!/usr/bin/env bash
# The one command that runs every test on a fresh machine: installs dependencies, builds, runs ctest.
# Usage: scripts/test.sh [ctest arguments, e.g. -L unit or -R env]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${NPU_RUN_BUILD_DIR:-$root/build}

"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
# Debian's torch lives under /usr/bin/python3; the first python3 on PATH may lack it.
export PYTHON_EXEC=${PYTHON_EXEC:-/usr/bin/python3}
cd "$build_dir"
ctest --output-on-failure --timeout 600 "$@"
