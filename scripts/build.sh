#!/usr/bin/env bash
# Installs the Debian dependencies (if missing) and builds pstrain into build/ (Release).
# Extra arguments go to CMake's configure step, e.g. -DPSTRAIN_CUDA=OFF. PSTRAIN_BUILD_TARGETS
# (space-separated) builds only those targets and what they need; unset, everything (the tests
# and fuzz targets too).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh ${PSTRAIN_INSTALL_ARGS:-}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >build.configure.log 2>&1 ||
  { cat build.configure.log; exit 1; }
targets=()
for t in ${PSTRAIN_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}"
