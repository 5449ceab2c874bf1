#!/usr/bin/env bash
# Prints the path of a Debian chroot with Debian's python3-torch: SUITE trixie (Debian 13, torch
# 2.6, the default) or sid (Debian unstable, torch 2.14 with gloo's flight recorder), the real
# torches the end-to-end tests and benchmarks run beside the host's 1.13. Made the first time with
# debootstrap (tests/portable/debian_chroot.sh) and apt-get inside it (about 1.6 GB), then cached
# outside the checkout ($NPU_RUN_CACHE_DIR, default /var/cache/npu_run). An installation cut
# short is done again. Needs root; exits 77 (skip) without it.
#   tests/torch2/chroot.sh [trixie|sid]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
suite=${1:-trixie}
case $suite in
  trixie | sid) ;;
  *) echo "torch chroot: '$suite' is no suite with a torch the tests use: trixie or sid" >&2; exit 2 ;;
esac
root=$("$here/../portable/debian_chroot.sh" "$suite")
if [ -f "$root/.npu_run-torch-complete" ]; then
  echo "$root"
  exit 0
fi
cache=${NPU_RUN_CACHE_DIR:-/var/cache/npu_run}
exec 9>"$cache/.lock-torch-$suite"
flock 9  # one installation at a time; the others find it done
if [ -f "$root/.npu_run-torch-complete" ]; then
  echo "$root"
  exit 0
fi
log="$cache/torch-install-$suite.log"
echo "torch chroot: installing python3-torch into $root (log: $log)" >&2
# sid's Release file is valid for a week only: a mirror that serves an older one (a snapshot) is
# still what this machine can reach, so apt is told not to refuse it for its age.
# apt inside the chroot needs /proc and /dev; a private mount namespace takes them away again
# when the install ends, whatever way it ends.
if ! unshare --mount --propagation private sh -c '
    mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" &&
    chroot "$1" sh -c "apt-get -o Acquire::Check-Valid-Until=false update -q &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends python3-torch python3-numpy"' sh "$root" >"$log" 2>&1; then
  tail -20 "$log" >&2
  exit 1
fi
chroot "$root" /usr/bin/python3 -c 'import torch; print(torch.__version__)' >&2
touch "$root/.npu_run-torch-complete"
echo "$root"
