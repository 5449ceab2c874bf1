#!/usr/bin/env bash
# The main job: installs dependencies, builds the npu_run binary (not the tests: scripts/test.sh
# builds those), then trains examples/train_ddp.py with 4 workers on CPU (gloo) through npu_run.
# Extra arguments go to npu_run before the script, e.g.
#   scripts/run_example.sh --tee 3 --log-dir /tmp/npu_run_logs
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${NPU_RUN_BUILD_DIR:-$root/build}

"$root/scripts/install_deps.sh"
"$root/scripts/build.sh" --target npu_run
export PYTHON_EXEC=${PYTHON_EXEC:-/usr/bin/python3}
exec "$build_dir/npu_run" --nproc-per-node 4 "$@" "$root/examples/train_ddp.py" --steps 30
