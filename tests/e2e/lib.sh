# Shared by the end-to-end scripts (sourced, not run): find a job's processes by its marker,
# fail with everything needed to diagnose, and wait with a deadline. A script sets `marker` before
# it calls any of these and may define `extra_failure_info` to add its own context (a daemon's log).

# Pids whose environment carries this run's marker. grep fails on vanished or unreadable /proc
# entries and when nothing matches; neither is an error here.
job_processes() {
  { grep -l "NPU_RUN_TEST_MARKER=$marker" /proc/[0-9]*/environ 2>/dev/null || true; } | cut -d/ -f3
}

# One line per live process of the job: where it is blocked (state, kernel wait channel) and what
# it is, so a hang in CI says whether the agent, a worker or the library under it stopped moving.
describe_job_processes() {
  local p stat
  for p in $(job_processes); do
    stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    # Fields after the parenthesised name: state ppid pgrp ...
    set -- ${stat##*) }
    printf 'pid %s ppid %s pgrp %s state %s wchan %s: %s\n' "$p" "$2" "$3" "$1" \
      "$(cat "/proc/$p/wchan" 2>/dev/null || echo '?')" \
      "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-200)"
  done
}

# Exits 77 (ctest's "skipped") unless running as root.
require_root() {  # what needs it
  if [ "$(id -u)" -ne 0 ]; then
    echo "skipped: $1 need root"
    exit 77
  fi
}

kill_job_processes() {
  local p
  for p in $(job_processes); do kill -9 "$p" 2>/dev/null || true; done
}

fail() {  # message [output file]
  echo "FAIL: $1" >&2
  if [ -n "${2:-}" ] && [ -f "$2" ]; then
    echo "---- $2" >&2
    cat "$2" >&2
  fi
  local alive
  alive=$(describe_job_processes)
  [ -z "$alive" ] || printf -- '---- processes of the job still alive\n%s\n' "$alive" >&2
  if declare -F extra_failure_info >/dev/null; then extra_failure_info >&2 || true; fi
  exit 1
}

expect_in() {  # file text...
  local file=$1
  shift
  for text in "$@"; do
    grep -qF -- "$text" "$file" || fail "'$text' missing from the output" "$file"
  done
}

# The deadline is the clock's, not a count of tries: one try may itself take seconds (scontrol
# retrying an unreachable controller).
wait_for() {  # seconds description command...: checks the command every 0.1 s
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  while [ "$SECONDS" -lt "$deadline" ]; do
    "$@" && return 0
    sleep 0.1
  done
  "$@" && return 0
  fail "timed out after ${seconds}s waiting for $what" "${out:-}"
}

output_has() { grep -qF -- "$2" "$1" 2>/dev/null; }  # file text
no_job_processes() { [ -z "$(job_processes)" ]; }

# When the agents themselves were waited for, nothing of the job may be left at all: an agent
# reaps its workers and its guardian before it exits.
require_no_job_processes() {  # what
  no_job_processes || fail "processes of $1 outlived its agents: $(job_processes | tr '\n' ' ')"
}

# No process of the job may outlive it; processes already exiting (a scheduler's cleanup is slower
# than npu_run's) get a bounded moment.
check_no_strays() {  # what
  wait_for 10 "every process of $1 to exit (left: $(job_processes | tr '\n' ' '))" no_job_processes
}

# Waits for the background job `pid` for at most `seconds` and sets `rc` to its exit status. On
# the deadline it fails, naming where each of the job's processes is blocked before killing them
# (timeout(1) would kill first and leave nothing to look at).
wait_bounded() {  # seconds pid description [output file]
  local seconds=$1 pid=$2 what=$3 file=${4:-}
  local deadline=$((SECONDS + seconds))
  while [ "$SECONDS" -lt "$deadline" ]; do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    fail "$what did not end within ${seconds}s" "$file"
  fi
  rc=0
  wait "$pid" || rc=$?
}

# A run killed before its cleanup (SIGKILL, a CI timeout) leaves its namespaces and bridge behind.
# A stale bridge still holding the prefix's address makes the root namespace route the next run's
# traffic into the dead run's hosts: every etcd and ssh e2e case failed on a machine where one had
# been killed. Removes what runs of TAG's kind (its letters) left whose script (the pid in their
# tag) is gone, with any process still inside their namespaces.
sweep_stale_runs() {  # tag
  local kind=${1%%[0-9]*} name pid ns_pid
  for name in $(ip netns list | awk '{print $1}') \
              $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1); do
    [[ $name =~ ^${kind}([0-9]+)[a-z] ]] || continue
    pid=${BASH_REMATCH[1]}
    [ "$pid" != "$$" ] && ! grep -qs '\.sh' "/proc/$pid/cmdline" || continue
    if ip netns list | grep -q "^$name\b"; then
      for ns_pid in $(ip netns pids "$name" 2>/dev/null); do kill -9 "$ns_pid" 2>/dev/null || true; done
      ip netns del "$name" 2>/dev/null || continue
    else
      # A veth whose namespace was just deleted may already be gone: nothing to say then.
      ip link del "$name" 2>/dev/null || continue
    fi
    echo "removed $name, left by an earlier run that was killed (pid $pid)"
  done
}

# Two network namespaces "${tag}a" and "${tag}b" joined by a veth pair "${tag}va"/"${tag}vb",
# addressed PREFIX.1 and PREFIX.2 (/24), loopback up. Sets ns_a and ns_b; remove_namespace_pair
# undoes it (safe to call when creation failed half way).
make_namespace_pair() {  # tag prefix
  local tag=$1 prefix=$2
  sweep_stale_runs "$tag"
  ns_a="${tag}a"
  ns_b="${tag}b"
  ip netns add "$ns_a"
  ip netns add "$ns_b"
  ip link add "${tag}va" type veth peer name "${tag}vb"
  ip link set "${tag}va" netns "$ns_a"
  ip link set "${tag}vb" netns "$ns_b"
  ip -n "$ns_a" addr add "$prefix.1/24" dev "${tag}va"
  ip -n "$ns_b" addr add "$prefix.2/24" dev "${tag}vb"
  for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
  ip -n "$ns_a" link set "${tag}va" up
  ip -n "$ns_b" link set "${tag}vb" up
}

remove_namespace_pair() {
  ip netns del "${ns_a:-}" 2>/dev/null || true
  ip netns del "${ns_b:-}" 2>/dev/null || true
}

# Three "hosts": network namespaces "${tag}h1".."${tag}h3" on a bridge "${tag}br", each with
# eth0 addressed PREFIX.1 .. PREFIX.3 (/24) and loopback up. remove_namespace_bridge undoes it
# (safe to call when creation failed half way).
make_namespace_bridge() {  # tag prefix
  local tag=$1 prefix=$2 i ns
  sweep_stale_runs "$tag"
  ip link add "${tag}br" type bridge
  ip link set "${tag}br" up
  for i in 1 2 3; do
    ns="${tag}h$i"
    ip netns add "$ns"
    ip link add "${tag}v$i" type veth peer name "${tag}p$i"
    ip link set "${tag}p$i" netns "$ns"
    ip -n "$ns" link set "${tag}p$i" name eth0
    ip -n "$ns" addr add "$prefix.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip link set "${tag}v$i" master "${tag}br"
    ip link set "${tag}v$i" up
  done
}

remove_namespace_bridge() {  # tag
  local i
  for i in 1 2 3; do ip netns del "$1h$i" 2>/dev/null || true; done
  ip link del "$1br" 2>/dev/null || true
}
