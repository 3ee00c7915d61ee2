#!/usr/bin/env bash
# bench/run.sh scale: the parameter-server exchange over network-namespace hosts with shaped
# links (bench/scale_bench.py; docs/scaling.md reads its table). Needs root, ip, tc and sshd.
# Builds only the pstrain binary (PSTRAIN_BINARY: one already built); flags go to the script,
# e.g. --rates 10gbit --workers 1,2 --servers 1 --seconds 5 for a quick look (~1 minute).
#
# bench/run.sh scale --simulate [flags]: the same exchange simulated with SimGrid where this
# machine cannot reach (bench/scale_sim, docs/scaling.md "Simulated"): the check against the
# measured cells, then 64 and 512 GPUs. Builds only pstrain-scale-sim; flags go to it, e.g.
# --worker_hosts=8 --gbit=100 for the 64-GPU table alone. No root needed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --simulate ]]; then
  shift
  if ! pkg-config --exists 'simgrid >= 3.32'; then
    echo "bench/run.sh scale --simulate needs SimGrid 3.32 or later: apt-get install -y libsimgrid-dev (Debian 12), then run it again" >&2
    exit 2
  fi
  [[ -f build/build.ninja || -f build/Makefile ]] || cmake -S . -B build -DPSTRAIN_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  # A build directory configured before SimGrid was installed has no such target: configure again.
  cmake --build build --target pstrain-scale-sim >/dev/null 2>&1 || {
    cmake build >/dev/null
    cmake --build build --target pstrain-scale-sim >/dev/null
  }
  exec build/bench/scale_sim/pstrain-scale-sim "$@"
fi
bin=${PSTRAIN_BINARY:-}
if [[ -z $bin ]]; then
  [[ -f build/build.ninja || -f build/Makefile ]] || cmake -S . -B build -DPSTRAIN_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build --target pstrain >/dev/null
  bin=build/pstrain
fi
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores, shared by every host)"
exec python3 bench/scale_bench.py --pstrain "$bin" "$@"
