#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs every CPU test. GPU tests carry the ctest
# label `gpu`; run them on a GPU machine with: ctest --test-dir build -L gpu
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
ctest --test-dir "${ADAMANT_BUILD_DIR:-build}" -LE gpu --output-on-failure -j 2 --timeout 900
