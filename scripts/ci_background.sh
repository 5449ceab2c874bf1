#!/usr/bin/env bash
# What CI (.ci/run) does in the background while its stages run in the foreground, so that a
# machine's two cores are never idle while a stage waits on timers, processes and sockets:
#   chroots  the Debian 13 and Debian unstable chroots with torch 2.6 and 2.14
#            (tests/torch2/chroot.sh) and the Debian 11 one (tests/portable/debian_chroot.sh), at
#            nice 10: mostly downloads, made while the compiler runs instead of before the tests
#            that need them; one that fails leaves the next to be made all the same
#   builds   the trees of the later stages, in the order they are needed: the aarch64 release
#            (portability), ASan, TSan (hardening), at nice 19, so that a foreground compile
#            or test takes a core from them at once
#   tidy     clang-tidy (scripts/hardening.sh tidy-start), at idle priority: only the cycles
#            nothing else wants
# A stage that needs a tree takes its lock (scripts/lib/build_tree.sh): it waits for the
# background's build of it, or builds it itself if the background has not started it yet.
# Nothing here decides whether CI passes: each stage builds and checks what it needs, as it
# does alone; a background failure only shows in its log (build-ci-background/).
#   scripts/ci_background.sh start | stop
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
logs="$root/build-ci-background"

start() {
  mkdir -p "$logs"
  # setsid: each part its own process group, so that stop reaches every process of it (and its
  # own scheduling group, which lib/background_group.sh gives the part's priority).
  setsid bash "$root/scripts/lib/background_group.sh" 10 bash -c "
    bash '$root/tests/torch2/chroot.sh' trixie; bash '$root/tests/torch2/chroot.sh' sid
    bash '$root/tests/portable/debian_chroot.sh' bullseye
  " </dev/null >"$logs/chroots.log" 2>&1 &
  echo $! >"$logs/chroots.pid"
  setsid bash "$root/scripts/lib/background_group.sh" 19 bash -c "
    bash '$root/scripts/release.sh' build aarch64 && bash '$root/scripts/hardening.sh' build-asan &&
      bash '$root/scripts/hardening.sh' build-tsan
  " </dev/null >"$logs/builds.log" 2>&1 &
  echo $! >"$logs/builds.pid"
  bash "$root/scripts/hardening.sh" tidy-start >/dev/null
}

stop() {
  local part pid
  for part in chroots builds; do
    pid=$(cat "$logs/$part.pid" 2>/dev/null) || continue
    kill -TERM -- "-$pid" 2>/dev/null || true
    rm -f "$logs/$part.pid"
  done
  bash "$root/scripts/hardening.sh" tidy-stop >/dev/null
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  *) echo "usage: scripts/ci_background.sh start|stop" >&2; exit 2 ;;
esac
