#!/usr/bin/env bash
# ResNet-50 training on one GPU under several convolution-tuning settings, each against PyTorch's
# FP32 figure from the same command (bench/torch_gpu_ref.py: cudnn.benchmark, no TF32), to
# choose pstrain's defaults from measurements. Runs where the GPU is, on binaries built and
# carried there (docs/gpu.md):
#   bench/gpu_conv_sweep.sh OUT_DIR "FLAGS A" "FLAGS B" ...
# e.g. bench/gpu_conv_sweep.sh /tmp/sweep "" "--cudnn_graph_margin=0" "--cudnn_graph=false"
# Each setting prints its median images/s, the ratio to PyTorch, how many convolution
# directions took a graph-API engine and how long the tuning took; OUT_DIR keeps the logs.
set -uo pipefail
out=${1:?usage: gpu_conv_sweep.sh OUT_DIR FLAGS...}
shift
mkdir -p "$out"
bin=${PSTRAIN_BENCH_TRAIN:-$(command -v pstrain-bench-train || echo build/bench/pstrain-bench-train)}
steps=${BENCH_STEPS:-30}
batch=${BENCH_BATCH:-64}
py=${PSTRAIN_TORCH_PYTHON:-python3}

timeout 120 "$py" bench/torch_gpu_ref.py --model resnet50 --batch "$batch" --math fp32 \
  --steps "$steps" >"$out/torch.log" 2>&1
ref=$(awk '/^BENCH_TRAIN/{print $3}' "$out/torch.log")
echo "PyTorch ResNet-50 batch $batch FP32: ${ref:-failed} img/s"

i=0
for flags in "$@"; do
  log=$out/setting-$i.log
  start=$(date +%s)
  # shellcheck disable=SC2086  # the flags are words
  timeout 150 "$bin" --config=configs/resnet50.yaml --batch="$batch" --device=gpu \
    --allow_soft_placement=false --update=device --steps="$steps" --warmup=10 --v=1 \
    $flags >"$log" 2>&1
  rc=$?
  rate=$(awk '/^PSTRAIN_BENCH_TRAIN median/{print $3}' "$log")
  graph=$(grep -c 'direction [0-9]: legacy .*: graph$' "$log")
  legacy=$(grep -c 'direction [0-9]: legacy .*: legacy$' "$log")
  ratio=$(awk -v a="${rate:-0}" -v b="${ref:-0}" 'BEGIN{if (a > 0 && b > 0) printf "%.3f", a/b; else print "n/a"}')
  printf 'setting %d [%s]: rc %d, %s img/s, ratio %s, directions on the graph %d of %d, %d s in all\n' \
    "$i" "${flags:-defaults}" "$rc" "${rate:-none}" "$ratio" "$graph" "$((graph + legacy))" \
    "$(($(date +%s) - start))"
  i=$((i + 1))
done
