#!/usr/bin/env bash
# Runs a command at low priority in the session it was started in with setsid:
#   setsid bash scripts/lib/background_group.sh NICE COMMAND...
# `nice` alone is not enough: with the kernel's autogroups (sched_autogroup_enabled, on in
# Debian's kernels) every session is a scheduling group of its own, and groups share the CPU
# equally whatever their processes' nice values, so a nice 19 build in its own session took as
# much of two cores as the foreground build it was meant to yield to. The session's group gets
# the nice value too (/proc/self/autogroup); without autogroups the write fails and is not needed.
set -euo pipefail
level=$1
shift
echo "$level" 2>/dev/null >/proc/self/autogroup || true
exec nice -n "$level" "$@"
