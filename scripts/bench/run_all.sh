#!/usr/bin/env bash
# Builds npu_run in Release and runs every benchmark side by side with its anchors (torchrun
# 1.13 and, from chroots, Debian 13's torchrun 2.6 and Debian unstable's 2.14; the shell for-loop;
# PyTorch's TCPStore), in one run on this machine, and writes the
# tables to docs/BENCHMARKS.md (or $BENCH_OUT), with PNG figures drawn from those tables next to
# it (bench/*.png).
#
#   scripts/bench/run_all.sh            # full sizes: about 15 minutes on 2 cores
#   scripts/bench/run_all.sh --smoke    # each benchmark once at tiny sizes (the scripts never rot)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bench="$root/scripts/bench"
py=/usr/bin/python3
smoke=${1:-}

bash "$root/scripts/install_deps.sh" >/dev/null
# torch 2.6 and 2.14 for their torchrun anchors (made once, cached outside the checkout; root).
bash "$root/tests/torch2/chroot.sh" >/dev/null ||
  echo "run_all: no torch 2.6 chroot; the benchmarks leave torchrun 2.6 out" >&2
bash "$root/tests/torch2/chroot.sh" sid >/dev/null ||
  echo "run_all: no torch 2.14 chroot; the benchmarks leave torchrun 2.14 out" >&2
# A build's output (the static links warn about glibc's NSS, as expected) goes to its log; only a
# failure shows it.
build_quietly() {  # dir [cmake options]
  local dir=$1
  shift
  mkdir -p "$dir"
  NPU_RUN_BUILD_DIR="$dir" NPU_RUN_BUILD_TYPE=Release bash "$root/scripts/build.sh" "$@" \
    >"$dir/bench-build.log" 2>&1 || { tail -30 "$dir/bench-build.log" >&2; exit 1; }
}
build_quietly "$root/build-release"
bin="$root/build-release"
# The release's static-pie binary and a plain -static one, for the start-up comparison.
for kind in static-pie:ON plain-static:OFF; do
  build_quietly "$root/build-bench-${kind%%:*}" -DNPU_RUN_STATIC=ON -DNPU_RUN_STATIC_PIE="${kind#*:}" \
    -DNPU_RUN_BUILD_TESTS=OFF
done

if [ "$smoke" = --smoke ]; then
  out=${BENCH_OUT:-$(mktemp -d)/BENCHMARKS.md}
  mkdir -p "$(dirname "$out")"
  single=(--nproc 1,8 --runs 1 --idle-seconds 1 --idle-runs 1)
  multi=(--sizes 2 --runs 1 --straggle 2)
  scale=(--sizes 64 --runs 1 --small-backlog 4)
  store=(--sizes 64 --runs 1)
  train=(--runs 1)
  startup=(--runs 3)
  ssh_hosts=(--hosts 4 --runs 1)
  gain=(--nodes 4 --mb 1 --iters 1)
  preflight=(--sizes 2 --runs 1)
  alarms=(--list)
else
  out=${BENCH_OUT:-$root/docs/BENCHMARKS.md}
  single=(--nproc 1,8,32 --runs 5)
  multi=(--sizes 2,4,8,16 --runs 3)
  scale=(--sizes 256,1024,4096,16384 --runs 3)
  store=(--sizes 256,1024,4096 --runs 3)
  train=(--runs 3)
  startup=(--runs 200)
  ssh_hosts=(--hosts 16,64 --runs 3)
  gain=(--nodes 4,8)
  preflight=(--sizes 4,16 --runs 3)
  alarms=(--runs 10)
fi

{
  echo "# npu_run benchmarks"
  echo
  echo "Written by \`scripts/bench/run_all.sh\` on $(date -u +%Y-%m-%d): every launcher ran in the"
  echo "same invocation on the same machine, one after the other, so ratios compare like with like."
  echo "Figures are medians with min-max in parentheses. Machine: $(nproc) cores,"
  echo "$(awk '/MemTotal/ {printf "%.0f GB", $2 / 1048576}' /proc/meminfo), Linux $(uname -r);"
  echo "npu_run $("$bin/npu_run" --version | awk 'NR == 1 {print $2}') Release; torchrun from Debian's python3-torch."
  echo
  "$py" "$bench/startup.py" --static "$root/build-bench-static-pie/npu_run" --dynamic "$bin/npu_run" \
    --plain-static "$root/build-bench-plain-static/npu_run" "${startup[@]}"
  echo
  "$py" "$bench/single_node.py" --npu-run "$bin/npu_run" "${single[@]}"
  echo
  "$py" "$bench/multi_node.py" --npu-run "$bin/npu_run" "${multi[@]}"
  echo
  "$py" "$bench/rendezvous_scale.py" --npu-run "$bin/npu_run" --loadgen "$bin/npu_run_rdzv_loadgen" "${scale[@]}"
  echo
  "$py" "$bench/tcpstore_barrier.py" "${store[@]}"
  echo
  "$py" "$bench/training_start.py" --npu-run "$bin/npu_run" "${train[@]}"
  echo
  "$py" "$bench/spare_takeover.py" --npu-run "$bin/npu_run"
  echo
  "$py" "$bench/etcd_failover.py" --npu-run "$bin/npu_run"
  echo
  echo "## All-reduce bus bandwidth by node order (scripts/bench/topology_gain.sh)"
  echo
  bash "$bench/topology_gain.sh" "$bin/npu_run" "${gain[@]}"
  echo
  echo "## The pre-flight probe's time (scripts/bench/preflight_time.py)"
  echo
  "$py" "$bench/preflight_time.py" --npu-run "$bin/npu_run" "${preflight[@]}"
  echo
  "$py" "$bench/false_alarms.py" --integration-tests "$bin/tests/integration_tests" "${alarms[@]}"
  for delay in 0 0.2; do
    echo
    "$py" "$bench/ssh_start.py" --npu-run "$bin/npu_run" --login-delay "$delay" "${ssh_hosts[@]}"
  done
} >"$out"
{
  echo
  "$py" "$bench/plots.py" "$out" "$(dirname "$out")/bench"
} >>"$out.figures"
cat "$out.figures" >>"$out"
rm -f "$out.figures"
echo "benchmarks written to $out"
