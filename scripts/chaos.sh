#!/usr/bin/env bash
# Chaos runs against real multi-node jobs on loopback: random kill -9 and SIGSTOP of agents and
# workers, each run checked for hangs, stray processes and the wrong exit code or root cause
# (scripts/chaos/chaos.py). Not part of the quick suite; docs/HARDENING.md has the last figures.
# Usage: scripts/chaos.sh [--runs N] [--seconds S] [--seed N]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
exec /usr/bin/python3 "$root/scripts/chaos/chaos.py" --npu-run "${NPU_RUN_BUILD_DIR:-$root/build}/npu_run" "$@"
