#!/usr/bin/env bash
# Installs npu_run's dependencies from Debian 12 packages. Safe to run repeatedly: it only calls
# apt-get when a package is missing.
#   scripts/install_deps.sh             build, test and example dependencies
#   scripts/install_deps.sh --cross     and the aarch64 cross toolchain, the :arm64 -dev
#                                       packages and qemu-user-static (scripts/release.sh)
#   scripts/install_deps.sh --release   and help2man, rpmbuild (packages) and file
set -euo pipefail

packages=(
  build-essential cmake ninja-build          # Ninja: every build (scripts/build.sh)
  libboost1.81-dev libboost-system1.81-dev   # Boost.Asio + Boost.Process v2 (headers)
  libssl-dev                                  # libcrypto: HMAC of the rendezvous token
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev catch2
  python3-torch                               # examples/ and end-to-end tests (gloo on CPU)
  procps iproute2 time                        # time: peak RSS in scripts/bench
  slurmctld slurmd slurm-client munge         # the real Slurm of tests/e2e/slurm_e2e.sh
  openmpi-bin                                 # mpirun for tests/e2e/mpi_e2e.sh
  python3-matplotlib                          # plots of scripts/bench/run_all.sh
  debootstrap                                 # tests/torch2: Debian 13 with torch 2.6
  nftables                                    # tests/e2e/netns_partition.sh: partitions
  openssh-server openssh-client               # tests/e2e/ssh_hosts.sh: hosts reached by ssh
  ccache                                      # every build (cmake/compiler_cache.cmake)
  etcd-server etcd-client                     # the real etcd of the etcd rendezvous' tests
  chromium                                    # the report opened headless (test_timeline_report)
  prometheus curl                             # promtool check metrics on --metrics-port's text
  zsh tcsh                                    # the completion scripts, run by their shells
)
cross=0
for arg in "$@"; do
  case $arg in
    --cross)
      cross=1
      packages+=(crossbuild-essential-arm64 qemu-user-static
                 libboost1.81-dev:arm64 libssl-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64)
      ;;
    --release) packages+=(help2man rpm cpio file) ;;
    *) echo "install_deps: unknown option $arg (known: --cross, --release)" >&2; exit 2 ;;
  esac
done

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install_deps: need root (or sudo) to install packages" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
new_architecture=0
if [ $cross -eq 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  "${sudo_cmd[@]}" dpkg --add-architecture arm64
  new_architecture=1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ] && [ $new_architecture -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -q
# The whole list, not only what is missing: alone, python3-matplotlib makes apt's resolver pick
# libboost1.74-dev, which conflicts with the installed 1.81; naming 1.81 keeps it.
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${packages[@]}"
