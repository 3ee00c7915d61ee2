#!/usr/bin/env bash
# bench/run.sh scale: the parameter-server exchange over network-namespace hosts with shaped
# links (bench/scale_bench.py; docs/scaling.md reads its table). Needs root, ip, tc and sshd.
# Builds only the pstrain binary (PSTRAIN_BINARY: one already built); flags go to the script,
# e.g. --rates 10gbit --workers 1,2 --servers 1 --seconds 5 for a quick look (~1 minute).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PSTRAIN_BINARY:-}
if [[ -z $bin ]]; then
  [[ -f build/build.ninja || -f build/Makefile ]] || cmake -S . -B build -DPSTRAIN_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build --target pstrain >/dev/null
  bin=build/pstrain
fi
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores, shared by every host)"
exec python3 bench/scale_bench.py --pstrain "$bin" "$@"
