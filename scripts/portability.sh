#!/usr/bin/env bash
# CI's portability stage: builds the release (scripts/release.sh), then proves it where Ascend
# servers are, each part failing on any finding and saying what it cost:
#   torch2     the plain tree's torch 2 runs (label torch2): the torch-facing tests, the store's
#              clients and the DDP end-to-end tests with torch 2.6, and the benchmark smokes that
#              need a torch 2 chroot (the chroots are made the first time, cached outside the
#              checkout). The runs as Linux 3.10 and with torch 2.14 are the ASan tree's
#              (scripts/hardening.sh asan): each axis once (docs/guide/development.md).
#   release    the static x86_64 and aarch64 binaries and their packages (scripts/release.sh)
#   aarch64    the aarch64 unit tests and the binary's smoke test under qemu-aarch64-static
#   bullseye   the static x86_64 binary inside a Debian 11 chroot (glibc 2.31, host lookups as on a
#              systemd server), then its .deb installed there with dpkg
#   packages   every .deb, .rpm and .tar.gz names its architecture and holds a binary of it, the
#              man page (every subcommand in it), the bash and zsh completions; SHA256SUMS verify
# Usage: scripts/portability.sh [torch2] [release] [aarch64] [bullseye] [packages]
#        (default: all, in this order)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dist=${NPU_RUN_DIST_DIR:-$root/dist}
# shellcheck source=scripts/lib/ctest_run.sh
source "$root/scripts/lib/ctest_run.sh"
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(torch2 release aarch64 bullseye packages)
version=$(sed -n 's/^project(npu_run VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")

stage_torch2() {
  bash "$root/scripts/build.sh" >/dev/null  # built by the test stage
  PYTHON_EXEC=${PYTHON_EXEC:-/usr/bin/python3} ctest_run torch2 "${NPU_RUN_BUILD_DIR:-$root/build}" \
    -j "${NPU_RUN_TEST_JOBS:-4}" -L torch2
}

stage_release() { bash "$root/scripts/release.sh"; }

stage_aarch64() {
  local dir="$root/build-dist-aarch64"
  bash "$root/scripts/release.sh" build aarch64 >/dev/null  # built by the release stage
  ctest_run aarch64 "$dir" -j 2
}

stage_bullseye() {
  bash "$root/tests/portable/chroot_test.sh" "$dist/npu_run-$version-linux-x86_64" \
    "$dist/npu-run_${version}_amd64.deb"
}

# The file(1) words for an architecture's ELF binaries.
elf_of() { case $1 in x86_64) echo "x86-64" ;; aarch64) echo "ARM aarch64" ;; esac; }

check_binary() {  # file arch what
  grep -q "$(elf_of "$2"), .*static-pie linked" <<<"$(file "$1")" ||
    { echo "portability: $3 does not hold a static $2 binary: $(file "$1")" >&2; return 1; }
}

check_tree() {  # dir arch what: an unpacked package
  local dir=$1 arch=$2 what=$3 f
  check_binary "$dir/usr/bin/npu_run" "$arch" "$what"
  for f in usr/share/man/man1/npu_run.1.gz usr/share/bash-completion/completions/npu_run \
           usr/share/zsh/vendor-completions/_npu_run usr/share/zsh/site-functions/_npu_run \
           usr/share/doc/npu-run/copyright usr/share/npu_run/python/npu_run_progress.py; do
    [ -s "$dir/$f" ] || { echo "portability: $what lacks /$f" >&2; return 1; }
  done
}

stage_packages() {
  local work arch deb_arch
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  (cd "$dist" && sha256sum --check --quiet SHA256SUMS)
  for arch in x86_64 aarch64; do
    deb_arch=$([ $arch = x86_64 ] && echo amd64 || echo arm64)
    local deb="$dist/npu-run_${version}_${deb_arch}.deb" rpm="$dist/npu-run-$version-1.$arch.rpm"
    local tgz="$dist/npu_run-$version-linux-$arch.tar.gz"
    check_binary "$dist/npu_run-$version-linux-$arch" "$arch" "npu_run-$version-linux-$arch"
    [ "$(dpkg-deb -f "$deb" Architecture)" = "$deb_arch" ] && [ "$(dpkg-deb -f "$deb" Package)" = npu-run ] ||
      { echo "portability: $deb: wrong package name or architecture" >&2; return 1; }
    mkdir -p "$work/deb-$arch" "$work/rpm-$arch" "$work/tgz-$arch"
    dpkg-deb -x "$deb" "$work/deb-$arch"
    check_tree "$work/deb-$arch" "$arch" "$(basename "$deb")"
    [ "$(rpm -qp --queryformat '%{NAME} %{ARCH}' "$rpm" 2>/dev/null)" = "npu-run $arch" ] ||
      { echo "portability: $rpm: wrong package name or architecture" >&2; return 1; }
    (cd "$work/rpm-$arch" && rpm2cpio "$rpm" | cpio -idm --quiet)
    check_tree "$work/rpm-$arch" "$arch" "$(basename "$rpm")"
    tar -xzf "$tgz" -C "$work/tgz-$arch"
    check_binary "$work/tgz-$arch/npu_run-$version-linux-$arch/bin/npu_run" "$arch" "$(basename "$tgz")"
  done
  # The man page documents every subcommand the completion knows.
  local man subs sub
  man=$(zcat "$work/deb-x86_64/usr/share/man/man1/npu_run.1.gz")
  subs=$(sed -n 's/^    \(.*\)) cmd=\${COMP_WORDS\[1\]}; start=2 ;;/\1/p' \
           "$work/deb-x86_64/usr/share/bash-completion/completions/npu_run" | tr '|' ' ')
  [ -n "$subs" ] || { echo "portability: no subcommands found in the completion" >&2; return 1; }
  for sub in $subs; do
    grep -q "npu_run $sub" <<<"$man" || { echo "portability: the man page lacks 'npu_run $sub'" >&2; return 1; }
  done
  echo "packages: $(ls "$dist" | wc -l) files checked; subcommands in the man page: $subs"
}

for stage in "${stages[@]}"; do
  echo "portability: $stage"
  start=$SECONDS
  "stage_$stage"
  echo "portability: $stage passed in $((SECONDS - start)) s"
  python3 "$root/scripts/lib/test_budget.py" stage "portability-$stage" $((SECONDS - start))
done
