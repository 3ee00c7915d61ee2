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
#
# bench/run.sh scale --ddp: the hosts of 2 ranks behind a leader (docs/scaling.md "A host's
# leader" and "Against PyTorch DDP"): for 2 and 4 worker hosts (SCALE_HOSTS) at 1 and 10 Gbit/s
# (SCALE_RATES), pstrain with as many server hosts (tests/multihost/overlap_bench.py: whole,
# overlapped and bf16 pushes) then PyTorch DDP over gloo (bench/ddp_anchor.py, with the venv's
# Python in PSTRAIN_DDP_PYTHON), back to back on the same namespace hosts. About 20 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
build_pstrain() {
  [[ -f build/build.ninja || -f build/Makefile ]] || cmake -S . -B build -DPSTRAIN_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build --target pstrain >/dev/null
}
if [[ ${1:-} == --ddp ]]; then
  shift
  bin=${PSTRAIN_BINARY:-}
  [[ -n $bin ]] || { build_pstrain; bin=build/pstrain; }
  cmake --build build --target pstrain-bench-model-table >/dev/null  # DDP's layers, as pstrain's
  python=${PSTRAIN_DDP_PYTHON:?PSTRAIN_DDP_PYTHON: a Python with torch (bench/run.sh scale --ddp sets it)}
  for rate in ${SCALE_RATES:-1gbit 10gbit}; do
    for hosts in ${SCALE_HOSTS:-2 4}; do
      echo "== $hosts hosts x 2 ranks, $rate: pstrain with $hosts server hosts"
      python3 tests/multihost/overlap_bench.py --pstrain "$bin" --config configs/resnet50.yaml \
        --rate "$rate" --step_ms 800 --steps 8 --hosts "$hosts" --ranks 2 --servers "$hosts" \
        --variants off,on,bf16 "$@"
      echo "== $hosts hosts x 2 ranks, $rate: PyTorch DDP (gloo)"
      python3 bench/ddp_anchor.py --hosts "$hosts" --ranks 2 --rate "$rate" --step_ms 800 \
        --steps 8 --python "$python"
    done
  done
  exit 0
fi
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
  build_pstrain
  bin=build/pstrain
fi
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores, shared by every host)"
exec python3 bench/scale_bench.py --pstrain "$bin" "$@"
