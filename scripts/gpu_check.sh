#!/usr/bin/env bash
# Issue 5's GPU checks in one command on a GPU machine (../shared/DEVICE.md), with binaries built
# and packed on a build machine (CUDA, cuDNN and NCCL found there), from the repository root:
#   cmake --build build
#   ../shared/device/pack.sh .devpack build/tests/gpu/gpu_*_test \
#     build/tests/collectives/collectives_nccl_test build/pstrain-train \
#     build/bench/pstrain-bench-train
#   mkdir -p .devdata && cp /usr/share/datasets/fashion-mnist/*.gz .devdata/
#   printf '/.devpack/\n/.devdata/\n' >> .git/info/exclude
# and on the GPU machine (carry .devpack and .devdata):
#   source .devpack/env.sh && bash scripts/gpu_check.sh "$OUT"
# Runs the GPU tests, trains RefNet on the GPU to its accuracy target while sampling nvidia-smi
# next to the allocator's peak, checks the memory-fraction cap and an allocation that cannot
# fit, then bench/run.sh gpu. Logs go to OUT_DIR; a table of every check comes last.
set -uo pipefail
out=${1:-/tmp/gpu_check}
mkdir -p "$out"
export PSTRAIN_SOURCE_DIR=$PWD
data=${PSTRAIN_DATA_DIR:-$PWD/.devdata}
rows=()
row() { rows+=("$(printf '%-46s %-5s %s' "$1" "$2" "$3")"); }

nvidia-smi -L | tee "$out/gpus.txt"
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)

# The largest device memory (MiB) nvidia-smi shows for process $1 while it runs.
sample_memory() {
  local pid=$1 file=$2 peak=0 used
  while kill -0 "$pid" 2>/dev/null; do
    used=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
      awk -F', ' -v p="$pid" '$1 == p {print $2}')
    [[ -n $used && $used -gt $peak ]] && peak=$used
    sleep 0.5
  done
  echo "$peak" >"$file"
}

# 1. Tests: every layer's forward and gradients against the CPU, the model, placement flags,
# the allocator over real device memory, NCCL with one rank. A skip counts as a failure here.
for t in gpu_layers_test gpu_model_test gpu_placement_flags_test gpu_device_placement_test \
  gpu_cuda_backing_test gpu_growth_allocator_test gpu_growth_allocator_stress_test \
  collectives_nccl_test; do
  "$t" >"$out/$t.log" 2>&1
  rc=$?
  passed=$(grep -oE '\[  PASSED  \] [0-9]+' "$out/$t.log" | grep -oE '[0-9]+$')
  skipped=$(grep -oE '\[  SKIPPED \] [0-9]+ test' "$out/$t.log" | grep -oE '[0-9]+' | head -1)
  status=PASS
  [[ $rc -ne 0 || -n ${skipped:-} ]] && status=FAIL
  row "test $t" "$status" "rc $rc, ${passed:-0} passed, ${skipped:-0} skipped"
done

# 2. RefNet on the GPU to >= 91%, with growth on: nvidia-smi against the allocator's peak.
pstrain-train --config=configs/refnet.yaml --device=gpu --allow_soft_placement=false \
  --log_device_placement --data_dir="$data" --train_dir="$out/refnet" >"$out/refnet.log" 2>&1 &
pid=$!
sample_memory "$pid" "$out/refnet.smi" &
wait "$pid"
rc=$?
wait
acc=$(grep -oE 'test accuracy [0-9.]+' "$out/refnet.log" | tail -1 | awk '{print $3}')
status=FAIL
[[ $rc -eq 0 ]] && awk -v a="${acc:-0}" 'BEGIN{exit !(a >= 0.91)}' && status=PASS
row "RefNet on the GPU >= 0.91" "$status" "accuracy ${acc:-none}, rc $rc"
peak_line=$(grep -oE 'GPU memory: .*' "$out/refnet.log" | tail -1)
row "growth: nvidia-smi vs allocator" "INFO" "nvidia-smi peak $(cat "$out/refnet.smi") MiB; ${peak_line:-no allocator line}"

# 3. The fraction cap without growth: the process reserves 20% of the card, not more.
pstrain-train --config=configs/refnet.yaml --device=gpu --allow_soft_placement=false \
  --gpu_allow_growth=false --gpu_memory_fraction=0.2 --max_steps=200 --data_dir="$data" \
  --train_dir="$out/capped" >"$out/capped.log" 2>&1 &
pid=$!
sample_memory "$pid" "$out/capped.smi" &
wait "$pid"
rc=$?
wait
used=$(cat "$out/capped.smi")
# The CUDA context and the libraries' handles come on top of the reservation (< 1 GiB).
cap=$((total_mib / 5 + 1024))
status=FAIL
[[ $rc -eq 0 && $used -le $cap ]] && status=PASS
row "fraction 0.2 holds (<= 20% + 1 GiB)" "$status" "nvidia-smi ${used} MiB of ${total_mib}, limit ${cap}"

# 4. A request that cannot be served fails naming the request and the statistics.
# (RefNet's 13 MiB of variables under a limit of 0.00005 x the card: some 4 MiB on 80 GB.)
pstrain-train --config=configs/refnet.yaml --device=gpu --allow_soft_placement=false \
  --gpu_memory_fraction=0.00005 --max_steps=1 --data_dir="$data" --train_dir="$out/oom" \
  >"$out/oom.log" 2>&1
rc=$?
status=FAIL
[[ $rc -ne 0 ]] && grep -q 'out of GPU memory allocating' "$out/oom.log" && status=PASS
row "out of memory names the request" "$status" "$(grep -m1 -oE 'out of GPU memory allocating.{0,120}' "$out/oom.log")"

# 5. Throughput against PyTorch on the same GPU.
PSTRAIN_BENCH_TRAIN=$(command -v pstrain-bench-train) bash bench/run.sh gpu >"$out/bench.log" 2>&1
row "bench/run.sh gpu (goal >= 1.0)" "INFO" "$(grep -E '^(refnet|resnet50): |^ratio:' "$out/bench.log" | paste -sd';')"

echo
printf '%s\n' "${rows[@]}" | tee "$out/table.txt"
