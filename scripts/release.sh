#!/usr/bin/env bash
# Builds everything a release ships into dist/ ($NPU_RUN_DIST_DIR):
#   npu_run-<version>-linux-x86_64, npu_run-<version>-linux-aarch64   static-pie binaries (stripped)
#   npu-run_<version>_amd64.deb, npu-run_<version>_arm64.deb          Debian/Ubuntu packages
#   npu-run-<version>-1.x86_64.rpm, npu-run-<version>-1.aarch64.rpm   CentOS/EulerOS/openEuler/Kylin
#   npu_run-<version>-linux-<arch>.tar.gz                             bin/, man page, completions
#   SHA256SUMS
# aarch64 is cross-built (cmake/toolchains/aarch64-linux-gnu.cmake); its man page and completion
# come from running it under qemu-aarch64-static. Build trees: build-dist-x86_64/ and
# build-dist-aarch64/ (the latter also holds the aarch64 unit tests, for scripts/portability.sh).
# Compiled as the test build is (RelWithDebInfo: -O2 -g1, stripped from what ships), so that
# ccache hands the x86_64 release every object scripts/build.sh already compiled.
#   scripts/release.sh               everything above
#   scripts/release.sh build ARCH    only build ARCH's tree (CI builds aarch64's in the background)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dist=${NPU_RUN_DIST_DIR:-$root/dist}
# shellcheck source=scripts/lib/build_tree.sh
source "$root/scripts/lib/build_tree.sh"
version=$(sed -n 's/^project(npu_run VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")

# Installing (and so cpack) must not wait for every test target: only what ships is built, and
# for aarch64 its unit tests, which scripts/portability.sh runs under qemu.
build() {  # arch
  local arch=$1 dir="$root/build-dist-$1"
  local options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPU_RUN_STATIC=ON -DNPU_RUN_WERROR=ON
                 -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON)
  local targets=(--target npu_run --target npu_run_man_page --target npu_run_completion)
  case $arch in
    x86_64) options+=(-DNPU_RUN_BUILD_TESTS=OFF) ;;
    aarch64)
      options+=(-DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake")
      targets+=(--target unit_tests)
      ;;
    *) echo "release: unknown architecture '$arch' (x86_64, aarch64)" >&2; return 2 ;;
  esac
  build_tree "$dir" "${targets[@]}" "${options[@]}"
}

pack() {  # arch
  local arch=$1 dir="$root/build-dist-$1" start=$SECONDS
  echo "release: building $arch in $dir"
  build "$arch"
  (cd "$dir" && cpack >/dev/null)
  cp "$dir"/npu-run*.deb "$dir"/npu-run*.rpm "$dir"/npu_run-*.tar.gz "$dist/"
  local stage="$dir/stage"
  rm -rf "$stage"
  cmake --install "$dir" --strip --prefix "$stage" >/dev/null
  install -m 755 "$stage/bin/npu_run" "$dist/npu_run-$version-linux-$arch"
  echo "release: $arch built and packed in $((SECONDS - start)) s"
}

"$root/scripts/install_deps.sh" --cross --release
if [ "${1:-}" = build ]; then
  build "${2:?usage: scripts/release.sh build x86_64|aarch64}"
  exit 0
fi
rm -rf "$dist"
mkdir -p "$dist"
pack x86_64
pack aarch64
(cd "$dist" && sha256sum -- * >SHA256SUMS)
echo "release: $dist"
(cd "$dist" && ls -l)
