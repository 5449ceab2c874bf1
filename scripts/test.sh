#!/usr/bin/env bash
# The one command that runs every test on a fresh machine: installs dependencies, builds, runs ctest.
# The quick suite: its tests under seven minutes on two cores once built (tests/time_budget).
# Usage: scripts/test.sh [ctest arguments, e.g. -L unit or -R env]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${NPU_RUN_BUILD_DIR:-$root/build}

start=$SECONDS
"$root/scripts/install_deps.sh"
echo "test.sh: dependencies in $((SECONDS - start)) s"
start=$SECONDS
"$root/scripts/build.sh"
echo "test.sh: build in $((SECONDS - start)) s"
# Debian's torch lives under /usr/bin/python3; the first python3 on PATH may lack it.
export PYTHON_EXEC=${PYTHON_EXEC:-/usr/bin/python3}
# shellcheck source=scripts/lib/ctest_run.sh
source "$root/scripts/lib/ctest_run.sh"
# Five at a time on two cores: most tests wait on processes, sockets and timers. At four the
# suite took 459 s, and every process it started used 647 CPU-s in all (process accounting,
# acct's dump-acct): the cores were idle a third of the time. The ones that
# share a machine-wide resource (namespaces, the Slurm cluster, mpirun) hold a ctest
# RESOURCE_LOCK; the two benchmark smokes that open hundreds of connections run alone, as do
# the [serial] cases. The longest start first (their COST). NPU_RUN_TEST_JOBS=1: one by one.
# Every test once, on this machine's kernel and Debian 12's torch 1.13 (the plain tree). Its torch
# 2.6 runs (label torch2) are CI's portability stage (scripts/portability.sh torch2) unless the
# arguments ask for them; the runs as Linux 3.10 and with torch 2.14 are the ASan tree's
# (scripts/hardening.sh asan). docs/guide/development.md, "What runs where", has the table.
select=(-LE torch2)
[[ " $* " == *torch2* ]] && select=()
run=quick
[ $# -eq 0 ] || run=quick-selection
start=$SECONDS
rc=0
ctest_run "$run" "$build_dir" -j "${NPU_RUN_TEST_JOBS:-5}" "${select[@]}" "$@" || rc=$?
echo "test.sh: tests in $((SECONDS - start)) s"
exit $rc
