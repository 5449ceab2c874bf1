#!/usr/bin/env bash
# Builds everything a release ships into dist/ ($NPU_RUN_DIST_DIR):
#   npu_run-<version>-linux-x86_64, npu_run-<version>-linux-aarch64   static-pie binaries (stripped)
#   npu-run_<version>_amd64.deb, npu-run_<version>_arm64.deb          Debian/Ubuntu packages
#   npu-run-<version>-1.x86_64.rpm, npu-run-<version>-1.aarch64.rpm   CentOS/EulerOS/openEuler/Kylin
#   npu_run-<version>-linux-<arch>.tar.gz                             bin/, man page, completion
#   SHA256SUMS
# aarch64 is cross-built (cmake/toolchains/aarch64-linux-gnu.cmake); its man page and completion
# come from running it under qemu-aarch64-static. Build trees: build-dist-x86_64/ and
# build-dist-aarch64/ (the latter also holds the aarch64 unit tests, for scripts/portability.sh).
# Compiled as the test build is (RelWithDebInfo: -O2 -g, the -g stripped from what ships), so that
# ccache hands the x86_64 release every object scripts/build.sh already compiled.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dist=${NPU_RUN_DIST_DIR:-$root/dist}
"$root/scripts/install_deps.sh" --cross --release
version=$(sed -n 's/^project(npu_run VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")

build_arch() {  # arch [extra cmake options]
  local arch=$1 dir="$root/build-dist-$1" start=$SECONDS
  shift
  echo "release: building $arch in $dir"
  # Installing (and so cpack) must not wait for every test target: only what ships is built.
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPU_RUN_STATIC=ON -DNPU_RUN_WERROR=ON \
    -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON "$@" >/dev/null
  cmake --build "$dir" -j "$(nproc)" --target npu_run npu_run_man_page npu_run_completion
  (cd "$dir" && cpack >/dev/null)
  cp "$dir"/npu-run*.deb "$dir"/npu-run*.rpm "$dir"/npu_run-*.tar.gz "$dist/"
  local stage="$dir/stage"
  rm -rf "$stage"
  cmake --install "$dir" --strip --prefix "$stage" >/dev/null
  install -m 755 "$stage/bin/npu_run" "$dist/npu_run-$version-linux-$arch"
  echo "release: $arch built and packed in $((SECONDS - start)) s"
}

rm -rf "$dist"
mkdir -p "$dist"
build_arch x86_64 -DNPU_RUN_BUILD_TESTS=OFF
build_arch aarch64 -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake"
(cd "$dist" && sha256sum -- * >SHA256SUMS)
echo "release: $dist"
(cd "$dist" && ls -l)
