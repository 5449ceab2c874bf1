#!/usr/bin/env bash
# Prints the path of a minimal Debian chroot of SUITE (default bullseye), made with debootstrap
# from this machine's Debian mirror the first time and cached outside the checkout
# ($NPU_RUN_CACHE_DIR, default /var/cache/npu_run). A chroot whose creation was cut short is
# made again. Needs root.
#
# Its host lookups are configured as on a systemd server ("hosts: files myhostname dns", with
# libnss-myhostname installed): a static binary that loaded that module of another glibc would
# abort, which is what npu_run's static build must never do.
#   tests/portable/debian_chroot.sh [SUITE]
set -euo pipefail
suite=${1:-bullseye}
cache=${NPU_RUN_CACHE_DIR:-/var/cache/npu_run}
dir="$cache/chroot-$suite"
if [ -f "$dir/.npu_run-complete" ]; then
  echo "$dir"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "debian_chroot: debootstrap needs root" >&2; exit 77; }
# Two callers at once (ctest -j) wait for one debootstrap instead of writing the same tree.
mkdir -p "$cache"
exec 9>"$cache/.lock-$suite"
flock 9
if [ -f "$dir/.npu_run-complete" ]; then
  echo "$dir"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debian_chroot: no debootstrap (scripts/install_deps.sh installs it)" >&2; exit 77; }
# The mirror apt uses here (deb822 or one-line sources), else Debian's own.
mirror=$(sed -n 's|^URIs: *\(http[^ ]*/debian\)/*$|\1|p' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk 'NR == 1')
[ -n "$mirror" ] || mirror=$(sed -n 's|^deb \(http[^ ]*/debian\)/* .*|\1|p' /etc/apt/sources.list 2>/dev/null | awk 'NR == 1')
mirror=${mirror:-http://deb.debian.org/debian}
# A mount left behind by an interrupted test must not be deleted through: unmount first.
for m in proc dev; do mountpoint -q "$dir/$m" 2>/dev/null && umount -l "$dir/$m"; done
rm -rf --one-file-system "$dir"
mkdir -p "$cache"
echo "debian_chroot: debootstrap $suite from $mirror into $dir" >&2
debootstrap --variant=minbase --include=libnss-myhostname "$suite" "$dir" "$mirror" \
  >"$cache/debootstrap-$suite.log" 2>&1 || {
  tail -20 "$cache/debootstrap-$suite.log" >&2
  exit 1
}
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$dir/etc/hosts"
sed -i 's/^hosts:.*/hosts:          files myhostname dns/' "$dir/etc/nsswitch.conf"
grep -q '^hosts: *files myhostname dns$' "$dir/etc/nsswitch.conf"
touch "$dir/.npu_run-complete"
echo "$dir"
