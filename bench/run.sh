#!/usr/bin/env bash
# Benchmarks, each ending with `ratio: X.XX` (ours over the reference measured in the same run;
# above 1 means pstrain is faster).
#   bench/run.sh refnet   RefNet training steps (batch 128) vs PyTorch (../shared/bench/torch_refnet.py)
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-}
shift || true
ref_script=${PSTRAIN_TORCH_REFNET:-../shared/bench/torch_refnet.py}

build() {
  PSTRAIN_INSTALL_ARGS=--bench bash scripts/build.sh >/dev/null
}

case "$name" in
  refnet)
    build
    steps=${BENCH_STEPS:-50}
    echo "== pstrain: RefNet training steps, batch 128, $(nproc) cores"
    ours=$(build/bench/pstrain-bench-train --config=configs/refnet.yaml --steps="$steps" "$@" |
      tee /dev/stderr | awk '/^PSTRAIN_BENCH_TRAIN/{print $3}')
    echo "== PyTorch reference: $ref_script --bench-steps $steps"
    ref=$(/usr/bin/python3 "$ref_script" --bench-steps "$steps" | tee /dev/stderr |
      awk '/^BENCH_TRAIN/{print $3}')
    echo "pstrain ${ours} img/s, PyTorch ${ref} img/s"
    awk -v a="$ours" -v b="$ref" 'BEGIN{printf "ratio: %.2f\n", a/b}'
    ;;
  *)
    echo "usage: bench/run.sh refnet [flags for the pstrain side]" >&2
    exit 2
    ;;
esac
