#!/usr/bin/env bash
# Every GPU check in one command on a GPU machine. The binaries are built where pstrain's
# dependencies are (CUDA, cuDNN and NCCL found there: the GPU code is compiled) and carried to
# the GPU machine with the shared libraries they need, from the repository root:
#   cmake --build build
#   scripts/gpu_pack.sh .devpack build/tests/gpu/gpu_*_test \
#     build/tests/collectives/collectives_nccl_test build/pstrain-train build/pstrain \
#     build/pstrain-keygen build/bench/pstrain-bench-train
#   mkdir -p .devdata && cp /usr/share/datasets/fashion-mnist/*.gz .devdata/
# and on the GPU machine, with .devpack and .devdata beside the checkout:
#   source .devpack/env.sh && bash scripts/gpu_check.sh OUT_DIR
# Runs the GPU tests, trains RefNet on the GPU to its accuracy target while sampling nvidia-smi
# next to the allocator's peak, checks the memory-fraction cap and an allocation that cannot
# fit, trains through the launcher (CPU-only server, GPU worker, CPU evaluator), then
# bench/run.sh gpu and ResNet-50's step breakdown. Every step has a time limit, so that one hang
# cannot spend the machine's time. Logs go to OUT_DIR; the table (OUT_DIR/table.txt, rewritten
# after every row) comes last.
set -uo pipefail
out=${1:-/tmp/gpu_check}
mkdir -p "$out"
export PSTRAIN_SOURCE_DIR=$PWD
data=${PSTRAIN_DATA_DIR:-$PWD/.devdata}
rows=()
row() {
  rows+=("$(printf '%-42s %-5s %s' "$1" "$2" "$3")")
  printf '%s\n' "${rows[@]}" >"$out/table.txt"
  echo "== ${rows[-1]}"
}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvidia-smi | grep -o 'CUDA Version: [0-9.]*'
  ldd "$(command -v pstrain-train)" | grep -E 'cudnn|cublas|cudart|nccl'
  python3 -c 'import torch; print("torch", torch.__version__, "cuDNN", torch.backends.cudnn.version(), "NCCL", torch.cuda.nccl.version())'
} 2>&1 | tee "$out/versions.txt"
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)

# The largest device memory (MiB) nvidia-smi shows for process $1 and its children (the
# program under `timeout`) while it runs.
sample_memory() {
  local pid=$1 file=$2 peak=0 used
  while kill -0 "$pid" 2>/dev/null; do
    used=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
      awk -F', ' -v ps=" $pid $(pgrep -P "$pid" | paste -sd' ') " 'index(ps, " " $1 " ") {s += $2} END {print s + 0}')
    [[ $used -gt $peak ]] && peak=$used
    sleep 0.2
  done
  echo "$peak" >"$file"
}
# MiB from the allocator's last "GPU memory: ... peak X ..." line of log $1 for field $2.
allocator_mib() {
  grep -oE "GPU memory: .*" "$1" | tail -1 | grep -oE "$2 [0-9.]+ [KMG]iB" |
    awk '{v = $2; u = $3; if (u == "GiB") v *= 1024; if (u == "KiB") v /= 1024; printf "%.0f", v}'
}
# Steps named in GPU_CHECK_SKIP (e.g. "launcher torch_modes") are left out.
skip() { [[ " ${GPU_CHECK_SKIP:-} " == *" $1 "* ]]; }

# The placement-flags test runs the trainer and reads Fashion-MNIST where install-deps puts it.
export PSTRAIN_TRAIN_BINARY=$(command -v pstrain-train)
if [[ ! -e /usr/share/datasets/fashion-mnist && -d $data && -w /usr/share ]]; then
  mkdir -p /usr/share/datasets && ln -s "$data" /usr/share/datasets/fashion-mnist
fi

# 1. Tests: every layer's forward and gradients against the CPU, the model, placement flags,
# the allocator over real device memory, NCCL with one rank. A skip counts as a failure here.
check_tests() {
  for t in gpu_layers_test gpu_model_test gpu_update_test gpu_placement_flags_test gpu_device_placement_test \
    gpu_cuda_backing_test gpu_growth_allocator_test gpu_growth_allocator_stress_test \
    collectives_nccl_test; do
    timeout 60 "$t" >"$out/$t.log" 2>&1
    rc=$?
    passed=$(grep -oE '\[  PASSED  \] [0-9]+' "$out/$t.log" | grep -oE '[0-9]+$')
    failed=$(grep -oE '\[  FAILED  \] [0-9]+ test' "$out/$t.log" | grep -oE '[0-9]+' | head -1)
    skipped=$(grep -oE '\[  SKIPPED \] [0-9]+ test' "$out/$t.log" | grep -oE '[0-9]+' | head -1)
    status=PASS
    [[ $rc -ne 0 || -n ${skipped:-} ]] && status=FAIL
    row "test $t" "$status" "rc $rc, ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
  done
  grep -h '^\[ max rel error \]' "$out/gpu_layers_test.log" >"$out/layer_errors.txt"
  worst=$(sort -t: -k2 -g "$out/layer_errors.txt" | tail -1)
  row "largest layer error (GPU vs CPU)" "INFO" "${worst:-none printed}"
  worst=$(grep -h '^\[ max rel error \]' "$out/gpu_update_test.log" | sort -t: -k2 -g | tail -1)
  row "largest update error (GPU vs host)" "INFO" "${worst:-none printed}"
}

# 2. RefNet on the GPU to >= 91%, with growth on: nvidia-smi against the allocator's peak.
check_growth() {
  timeout 180 pstrain-train --config=configs/refnet.yaml --device=gpu --allow_soft_placement=false \
    --log_device_placement --data_dir="$data" --train_dir="$out/refnet" >"$out/refnet.log" 2>&1 &
  pid=$!
  sample_memory "$pid" "$out/refnet.smi" &
  wait "$pid"
  rc=$?
  wait
  acc=$(grep -oE 'test accuracy [0-9.]+' "$out/refnet.log" | tail -1 | awk '{print $3}')
  secs=$(grep -oE '^done: .*' "$out/refnet.log" | grep -oE '[0-9.]+ s' | tail -1)
  status=FAIL
  [[ $rc -eq 0 ]] && awk -v a="${acc:-0}" 'BEGIN{exit !(a >= 0.91)}' && status=PASS
  row "RefNet on the GPU >= 0.91" "$status" "accuracy ${acc:-none}, ${secs:-?}, rc $rc"
  peak_line=$(grep -oE 'GPU memory: .*' "$out/refnet.log" | tail -1)
  row "growth: nvidia-smi vs allocator" "INFO" "nvidia-smi peak $(cat "$out/refnet.smi") MiB; ${peak_line:-no allocator line}"
  # What a process holds beside its allocator (the CUDA context, cuDNN's and cuBLAS's handles and
  # kernels): a one-step run of a tiny model, nvidia-smi less its allocator's reservation.
  timeout 60 pstrain-bench-train --config=tests/worker/testdata/tiny.yaml --batch=2 --steps=20 \
    --warmup=1 --repeats=1 --device=gpu --allow_soft_placement=false --cudnn_autotune=false \
    >"$out/context.log" 2>&1 &
  pid=$!
  sample_memory "$pid" "$out/context.smi" &
  wait "$pid"
  wait
  context=$(( $(cat "$out/context.smi") - $(allocator_mib "$out/context.log" reserved) ))
  smi=$(cat "$out/refnet.smi")
  peak=$(allocator_mib "$out/refnet.log" peak)
  status=FAIL
  [[ $smi -gt 0 && $((smi - context)) -le $((peak + peak / 10)) ]] && status=PASS
  row "growth: nvidia-smi <= peak x 1.1 + context" "$status" "nvidia-smi ${smi} MiB, context ${context} MiB, allocator peak ${peak} MiB, reserved $(allocator_mib "$out/refnet.log" reserved) MiB"
}

# 3. The fraction cap without growth: the process reserves 20% of the card, not more.
check_fraction() {
  timeout 90 pstrain-train --config=configs/refnet.yaml --device=gpu --allow_soft_placement=false \
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
  [[ $rc -eq 0 && $used -le $cap && $used -ge $((total_mib / 5)) ]] && status=PASS
  row "fraction 0.2 holds (20% .. 20% + 1 GiB)" "$status" "nvidia-smi ${used} MiB of ${total_mib}, limit ${cap}, rc $rc"
}

# 4. A request that cannot be served fails naming the request and the statistics.
# (RefNet's 13 MiB of variables under a limit of 0.00005 x the card: some 4 MiB on 80 GB.)
check_oom() {
  timeout 60 pstrain-train --config=configs/refnet.yaml --device=gpu --allow_soft_placement=false \
    --gpu_memory_fraction=0.00005 --max_steps=1 --data_dir="$data" --train_dir="$out/oom" \
    >"$out/oom.log" 2>&1
  rc=$?
  status=FAIL
  [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q 'out of GPU memory allocating' "$out/oom.log" && status=PASS
  row "out of memory names the request" "$status" "rc $rc: $(grep -m1 -oE 'out of GPU memory allocating.{0,160}' "$out/oom.log")"
}

# 5. Throughput against PyTorch on the same GPU (FP32 both, pstrain's update on the GPU and on
# the host; then TF32 both), then where each model's step goes.
check_speed() {
  BENCH_STEPS=30 PSTRAIN_BENCH_TRAIN=$(command -v pstrain-bench-train) timeout 420 bash bench/run.sh gpu \
    2>&1 | cat >"$out/bench.log"
  row "bench/run.sh gpu (goal >= 1.0, FP32)" "INFO" "$(grep -aE '^(refnet|resnet50): |^ratio:' "$out/bench.log" | paste -sd';')"
  # Where each model's step goes: stage by stage (each drained), then layer by layer summed by
  # kind. (docs/gpu.md compares --cudnn_autotune=false --cudnn_deterministic=true, the
  # heuristics' choice, with the same command.)
  for spec in "refnet configs/refnet.yaml 128" "resnet50 configs/resnet50.yaml 64"; do
    read -r model config batch <<<"$spec"
    log=$out/breakdown-$model.log
    timeout 120 pstrain-bench-train --config="$config" --batch="$batch" --device=gpu \
      --allow_soft_placement=false --steps=20 --warmup=5 --repeats=1 --breakdown_steps=10 \
      --profile ${GPU_CHECK_BREAKDOWN_FLAGS:---update=device} 2>&1 | cat >"$log"
    row "$model ${GPU_CHECK_BREAKDOWN_FLAGS:---update=device}" "INFO" "$(grep -oE '^PSTRAIN_BENCH_TRAIN median [0-9.]+ img/s' "$log")"
    row "  step breakdown (ms)" "INFO" "$(sed -n '/^step breakdown/,$p' "$log" | grep -E '^  ' | awk '{$NF=$NF; print}' | paste -sd';')"
    row "  layers by kind, fwd/bwd s" "INFO" "$(awk '/^layer +forward s/ {on = 1; next} /^optimizer update/ {on = 0} on && NF == 3 && $2 ~ /^[0-9.]+$/ {
        k = $1; if (k ~ /bn/) k = "bn"; else if (k ~ /conv|proj/) k = "conv"; else if (k ~ /relu/) k = "relu";
        else if (k ~ /add/) k = "add"; else if (k ~ /pool/) k = "pool"; f[k] += $2; b[k] += $3}
        END {for (k in f) printf "%s %.3f/%.3f; ", k, f[k], b[k]}' "$log")"
  done
}

# 6. Through the launcher: a CPU-only server, a GPU worker, a CPU evaluator. nvidia-smi must
# never show the server's process.
check_launcher() {
  mkdir -p build && ln -sf "$(command -v pstrain)" build/pstrain &&
    ln -sf "$(command -v pstrain-keygen)" build/pstrain-keygen
  timeout 200 python3 launcher/pstrain-launch --cluster configs/clusters/one-gpu.yaml \
    --config configs/refnet.yaml --train_dir "$out/launch" --progress_interval 15 -- \
    --data_dir="$data" >"$out/launch.log" 2>&1 &
  pid=$!
  : >"$out/launch.smi"
  while kill -0 "$pid" 2>/dev/null; do
    for p in $(pgrep -f -- '--job_name=ps'); do echo "ps $p"; done >>"$out/launch.smi"
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
      sed 's/^/gpu /' >>"$out/launch.smi"
    sleep 1
  done
  wait "$pid"
  rc=$?
  ps_pids=$(awk '$1 == "ps" {print $2}' "$out/launch.smi" | sort -u | paste -sd' ')
  gpu_pids=$(awk '$1 == "gpu" {sub(",", "", $2); print $2}' "$out/launch.smi" | sort -u | paste -sd' ')
  ps_on_gpu=""
  for p in $ps_pids; do [[ " $gpu_pids " == *" $p "* ]] && ps_on_gpu+="$p "; done
  acc=$(grep -oE 'test accuracy +[0-9.]+' "$out/launch.log" | tail -1 | awk '{print $NF}')
  on_gpu=$(grep -l 'computing on .*cuDNN' "$out/launch/launcher/"worker-0*.log 2>/dev/null | head -1)
  status=FAIL
  [[ $rc -eq 0 && -n $ps_pids && -z $ps_on_gpu && -n $on_gpu ]] &&
    awk -v a="${acc:-0}" 'BEGIN{exit !(a >= 0.91)}' && status=PASS
  row "launcher: CPU ps + GPU worker + evaluator" "$status" "rc $rc, accuracy ${acc:-none}, ps pids [${ps_pids}] GPU pids [${gpu_pids}], worker on GPU: ${on_gpu:+yes}"
}

# 7. PyTorch's own faster math modes, for context (pstrain computes in plain FP32).
check_torch_modes() {
  for math in tf32 amp; do
    r=$(timeout 60 python3 bench/torch_gpu_ref.py --model resnet50 --batch 64 --math $math \
      --steps 30 2>&1 | tee "$out/torch_$math.log" | grep -oE '^BENCH_TRAIN median [0-9.]+' | awk '{print $3}')
    row "PyTorch ResNet-50 batch 64 $math" "INFO" "${r:-failed} img/s"
  done
}

for step in tests growth fraction oom speed launcher torch_modes; do
  skip "$step" && continue
  "check_$step"
done
echo
cat "$out/table.txt"
