#!/usr/bin/env bash
# Installs every build, test and example dependency of npu_run from Debian 12 packages.
# Safe to run repeatedly: it only calls apt-get when a package is missing.
set -euo pipefail

packages=(
  build-essential cmake
  libboost1.81-dev libboost-system1.81-dev   # Boost.Asio + Boost.Process v2 (headers)
  libssl-dev                                  # libcrypto: HMAC of the rendezvous token
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev catch2
  python3-torch                               # examples/ and end-to-end tests (gloo on CPU)
  procps iproute2 time                        # time: peak RSS in scripts/bench
  slurmctld slurmd slurm-client munge         # the real Slurm of tests/e2e/slurm_e2e.sh
  openmpi-bin                                 # mpirun for tests/e2e/mpi_e2e.sh
  python3-matplotlib                          # plots of scripts/bench/run_all.sh
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install_deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
echo "install_deps: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -q
# The whole list, not only what is missing: alone, python3-matplotlib makes apt's resolver pick
# libboost1.74-dev, which conflicts with the installed 1.81; naming 1.81 keeps it.
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${packages[@]}"
