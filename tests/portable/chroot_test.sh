#!/usr/bin/env bash
# Runs the static npu_run inside a Debian 11 (bullseye, glibc 2.31) chroot, with no host library
# mounted in (only /proc and /dev): tests/portable/smoke.sh there (workers, a failing worker's
# exit code, a 2-node job on loopback, no strays), once as it is and once behind
# tests/tools/as_old_kernel --linux 3.10 (built static here): CentOS 7's system calls under an
# older glibc. With a .deb, also installs it with dpkg in the chroot and checks the installed
# npu_run, man page and completion, then removes it.
#   tests/portable/chroot_test.sh NPU_RUN_STATIC_BINARY [NPU_RUN_DEB]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
binary=$(realpath "$1")
deb=${2:+$(realpath "$2")}
[ "$(id -u)" -eq 0 ] || { echo "chroot_test: chroot needs root; skipped" >&2; exit 77; }
grep -q "static-pie linked\|statically linked" <<<"$(file "$binary")" ||
  { echo "chroot_test: $binary is not a static binary" >&2; exit 1; }
root=$("$here/debian_chroot.sh" bullseye)
cleanup() {
  for m in dev proc; do mountpoint -q "$root/$m" && umount -l "$root/$m"; done
  rm -f "$root/usr/local/bin/npu_run" "$root/usr/local/bin/as_old_kernel" "$root/tmp/npu-run.deb"
  if [ -n "$deb" ] && chroot "$root" dpkg -s npu-run >/dev/null 2>&1; then
    chroot "$root" dpkg -r npu-run >/dev/null
  fi
}
trap cleanup EXIT
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
# Not "| head -1": under pipefail, ldd dies of SIGPIPE writing its later lines (94 runs in 200).
glibc=$(chroot "$root" /usr/bin/ldd --version)
glibc=${glibc%%$'\n'*}
echo "== in $root: $glibc"
install -m 755 "$binary" "$root/usr/local/bin/npu_run"
bash "$here/smoke.sh" chroot "$root" /usr/local/bin/npu_run
echo "== the same as on Linux 3.10"
g++ -std=c++20 -O2 -static -o "$root/usr/local/bin/as_old_kernel" "$here/../tools/as_old_kernel.cpp"
bash "$here/smoke.sh" chroot "$root" /usr/local/bin/as_old_kernel --linux 3.10 /usr/local/bin/npu_run

if [ -n "$deb" ]; then
  echo "== dpkg -i $(basename "$deb") in the chroot"
  rm -f "$root/usr/local/bin/npu_run"
  cp "$deb" "$root/tmp/npu-run.deb"
  chroot "$root" dpkg -i /tmp/npu-run.deb
  chroot "$root" /usr/bin/npu_run --version
  for f in /usr/bin/npu_run /usr/share/man/man1/npu_run.1.gz /usr/share/bash-completion/completions/npu_run \
           /usr/share/doc/npu-run/copyright /usr/share/npu_run/python/npu_run_progress.py; do
    [ -e "$root$f" ] || { echo "FAIL: the package did not install $f" >&2; exit 1; }
  done
  chroot "$root" dpkg -r npu-run
  [ ! -e "$root/usr/bin/npu_run" ] || { echo "FAIL: dpkg -r left /usr/bin/npu_run" >&2; exit 1; }
fi
echo "chroot test: all passed"
