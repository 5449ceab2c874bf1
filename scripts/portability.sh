#!/usr/bin/env bash
# CI's portability stage: builds the release (scripts/release.sh), then proves it where Ascend
# servers are, each part failing on any finding and saying what it cost:
#   linux310   the integration and end-to-end suites of build/ again as on Linux 3.10 (label
#              integration-old-kernel: newer system calls fail with ENOSYS under a seccomp filter)
#   torch2     the PyTorch tests, the store's peer suites and the DDP end-to-end tests of build/
#              again with torch 2.6 and 2.14 (label integration-e2e-torch2; their chroots are
#              made the first time, cached outside the checkout)
#   reruns     linux310 and torch2 in one ctest run (the default): mostly waiting on processes
#              and timers, the two fill each other's gaps, where one after the other each waits
#              out its own slowest tests
#   aarch64    the aarch64 unit tests and the binary's smoke test under qemu-aarch64-static
#   bullseye   the static x86_64 binary inside a Debian 11 chroot (glibc 2.31, host lookups as on a
#              systemd server), then its .deb installed there with dpkg
#   packages   every .deb, .rpm and .tar.gz names its architecture and holds a binary of it, the
#              man page (every subcommand in it), the bash and zsh completions; SHA256SUMS verify
# Usage: scripts/portability.sh [linux310] [torch2] [reruns] [release] [aarch64] [bullseye]
#        [packages]   (default: reruns release aarch64 bullseye packages)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dist=${NPU_RUN_DIST_DIR:-$root/dist}
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(reruns release aarch64 bullseye packages)
version=$(sed -n 's/^project(npu_run VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")

rerun() {  # label regex
  bash "$root/scripts/build.sh" >/dev/null  # built by the test stage
  (cd "${NPU_RUN_BUILD_DIR:-$root/build}" &&
    PYTHON_EXEC=${PYTHON_EXEC:-/usr/bin/python3} ctest --output-on-failure --timeout 600 \
      -j "${NPU_RUN_TEST_JOBS:-3}" -L "$1")
}

stage_linux310() { rerun old-kernel; }
stage_torch2() { rerun torch2; }
stage_reruns() { rerun "old-kernel|torch2"; }

stage_release() { bash "$root/scripts/release.sh"; }

stage_aarch64() {
  local dir="$root/build-dist-aarch64"
  bash "$root/scripts/release.sh" build aarch64 >/dev/null  # built by the release stage
  (cd "$dir" && ctest --output-on-failure --timeout 600 -j 2)
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
done
