#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine for Adamant: system packages, data
# (sha256-checked, cached in .cache/data) and a Release build in build/.
# Re-running it is cheap: installed packages, fetched data and the build are reused.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

packages=(cmake ninja-build g++ clang libomp-dev libyaml-cpp-dev libcli11-dev libfmt-dev libspdlog-dev nlohmann-json3-dev
          libopenmpi-dev openmpi-bin libopenblas-dev libgtest-dev libbenchmark-dev libcairo2-dev pkg-config
          iproute2 python3 python3-torch python3-numpy   # iproute2: the multi-host tests; torch, numpy: the PyTorch parity tests
          slurmctld slurmd slurm-client)                 # the srun test: tests/multinode/slurm_test.sh
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches the data; a machine may have it from Node.js's own packages rather than Debian's.
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

scripts/fetch_data.sh

build=${ADAMANT_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${ADAMANT_CMAKE_ARGS:-}
fi
cmake --build "$build" -j "$(nproc)"
