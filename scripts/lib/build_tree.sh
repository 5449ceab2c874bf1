# shellcheck shell=bash
# Sourced by the scripts that configure and build one of CI's trees (scripts/release.sh,
# scripts/hardening.sh). A tree is configured and built holding its lock, so that a background
# build (scripts/ci_background.sh) and the stage that needs the tree never build in it at
# once: the stage waits for the background's build, and then finds its targets built. Every
# tree is configured with Ninja.
#   build_tree DIR [--target TARGET]... [CMAKE ARGUMENT]...
build_tree() {
  local dir=$1 root
  shift
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  local targets=() args=()
  while [ $# -gt 0 ]; do
    if [ "$1" = --target ]; then
      targets+=(--target "$2")
      shift 2
    else
      args+=("$1")
      shift
    fi
  done
  mkdir -p "$dir"
  (
    flock 9
    cmake -S "$root" -B "$dir" -G Ninja "${args[@]}" >/dev/null
    cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
  ) 9>"$dir/.npu_run-build.lock"
}
