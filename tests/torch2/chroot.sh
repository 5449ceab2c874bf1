#!/usr/bin/env bash
# Prints the path of a Debian 13 (trixie) chroot with Debian's python3-torch 2.6, the second real
# torch the end-to-end tests and benchmarks run beside the host's 1.13. Made the first time with
# debootstrap (tests/portable/debian_chroot.sh) and apt-get inside it (about 1.6 GB), then cached
# outside the checkout ($NPU_RUN_CACHE_DIR, default /var/cache/npu_run). An installation cut
# short is done again. Needs root; exits 77 (skip) without it.
#   tests/torch2/chroot.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$("$here/../portable/debian_chroot.sh" trixie)
if [ -f "$root/.npu_run-torch-complete" ]; then
  echo "$root"
  exit 0
fi
cache=${NPU_RUN_CACHE_DIR:-/var/cache/npu_run}
exec 9>"$cache/.lock-torch2"
flock 9  # one installation at a time; the others find it done
if [ -f "$root/.npu_run-torch-complete" ]; then
  echo "$root"
  exit 0
fi
log="$cache/torch2-install.log"
echo "torch2 chroot: installing python3-torch into $root (log: $log)" >&2
# apt inside the chroot needs /proc and /dev; a private mount namespace takes them away again
# when the install ends, whatever way it ends.
if ! unshare --mount --propagation private sh -c '
    mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" &&
    chroot "$1" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends python3-torch python3-numpy"' sh "$root" >"$log" 2>&1; then
  tail -20 "$log" >&2
  exit 1
fi
chroot "$root" /usr/bin/python3 -c 'import torch; print(torch.__version__)' >&2
touch "$root/.npu_run-torch-complete"
echo "$root"
