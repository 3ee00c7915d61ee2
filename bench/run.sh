#!/usr/bin/env bash
# Benchmarks, each ending with `ratio: X.XX` (ours over the reference measured in the same run;
# above 1 means pstrain is faster).
#   bench/run.sh refnet   RefNet training steps (batch 128) vs PyPI's PyTorch (the script at
#                         PSTRAIN_TORCH_REFNET, default ../shared/bench/torch_refnet.py)
#   bench/run.sh tf1 [--steps N] [--seeds N] [--ddp]  the README's whole job (1 ps + 2 workers,
#                         2,808 global steps) vs TensorFlow's PS runtime (PSTRAIN_TF1_REFNET,
#                         default ../shared/bench/tf1_ps_refnet.py): wall, accuracy, examples/s,
#                         CPU-seconds, time to 92%; with --seeds N each side N times (mean and
#                         spread), with --ddp PyTorch DDP too (../shared/bench/torch_ddp_refnet.py)
#   bench/run.sh ctr [--train_examples N] [--epochs E]  Wide & Deep (configs/widedeep.yaml) on a
#                         synthetic click log, 1 ps + 2 workers, vs the same model in TensorFlow's PS
#                         runtime (bench/tf1_widedeep.py): examples/s, wall, CPU-seconds, test AUC
#                         and log loss, bytes per step; the ratio is of examples/s (bench/ctr_job.py)
#   bench/run.sh ps       wire transport push+pull of a 64 MiB variable vs a raw TCP socket pair
#   bench/run.sh gpu      RefNet (batch 128) and ResNet-50 (batch 64, 224x224x3 synthetic) training
#                         on the GPU vs the same nets in PyTorch (bench/torch_gpu_ref.py), FP32
#                         (the update on the GPU, then on the host) and TF32; no build
#   bench/run.sh tables   an embedding table of 1M, 10M and 50M rows x 16 floats over 4 real servers:
#                         fill time, memory per server, bytes and server CPU per step of a Zipf
#                         batch's row pulls and pushes against pushing the table densely (the
#                         factor saved; no reference program, the dense path is the reference)
#   bench/run.sh checks   a server with the role's hostile-peer checks (one push per pull, the
#                         outlier guard) vs one without: pull+push rate of a small variable (the
#                         ratio, with over without) and 64 MiB push+pull
#   bench/run.sh curve    the same push+pull (and small pushes) over CurveZMQ vs plaintext; the
#                         ratio is CURVE over plaintext (below 1: what authentication costs)
#   bench/run.sh hub      intra-node sync of CPU workers: an all-reduce of 16 MiB per rank by 2 ranks
#                         through the host hub vs the same bytes over raw loopback socket pairs
#   bench/run.sh versus OLD_BUILD_DIR [-- flags]  the transport bench of this build against another
#                         (an older commit's build with its bench target): large push+pull and small
#                         pushes per second; the ratio is new over old for one small variable per push
#   bench/run.sh scale    ResNet-50's exchange over 1-8 worker and 1-4 server netns hosts with
#                         10/25 Gbit/s tbf links, synthetic compute: a table, no ratio (as root)
#   bench/run.sh scale --simulate  the same exchange simulated with SimGrid (bench/scale_sim):
#                         simulated against measured cells, then 64 and 512 GPUs; no root
#   bench/run.sh scale --ddp  hosts of 2 ranks behind a leader (2 and 4 hosts, 1 and 10 Gbit/s):
#                         pstrain with a server host per worker host (whole, overlapped, bf16
#                         pushes) and PyTorch DDP (gloo) on the same hosts; tables, no ratio
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-}
shift || true
ref_script=${PSTRAIN_TORCH_REFNET:-../shared/bench/torch_refnet.py}
# PSTRAIN_BENCH_BUILD_DIR: binaries already built there (e.g. a snapshot of a commit) instead of
# scripts/build.sh into build/.
bdir=${PSTRAIN_BENCH_BUILD_DIR:-build}

build() {
  [[ -n ${PSTRAIN_BENCH_BUILD_DIR:-} ]] && return
  PSTRAIN_INSTALL_ARGS=--bench bash scripts/build.sh >/dev/null
}

# The references' Python: a venv with PyPI's torch and tensorflow-cpu (scripts/bench-venv.sh).
bench_python() {
  bash scripts/bench-venv.sh "${PSTRAIN_BENCH_VENV:-$bdir/bench-venv}"
}

# Runs a command with the environment pstrain-launch gives roles (idle OpenMP threads sleep;
# large ZeroMQ frames on transparent huge pages), saying so first.
as_launched() {
  echo "== as pstrain-launch runs roles: GLIBC_TUNABLES=glibc.malloc.hugetlb=1 OMP_WAIT_POLICY=PASSIVE"
  GLIBC_TUNABLES=glibc.malloc.hugetlb=1 OMP_WAIT_POLICY=PASSIVE "$@"
}

load_average() {
  echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)"
}

case "$name" in
  refnet)
    build
    steps=${BENCH_STEPS:-50}
    echo "== pstrain: RefNet training steps, batch 128, $(nproc) cores"
    py=$(bench_python)
    load_average
    # As pstrain-launch runs roles and as the PyTorch script runs itself: idle OpenMP threads
    # sleep; spinning ones lose whole time slices to any other load on 2 cores (3x slower here).
    echo "== as pstrain-launch runs roles: OMP_WAIT_POLICY=PASSIVE"
    ours=$(OMP_WAIT_POLICY=PASSIVE "$bdir"/bench/pstrain-bench-train --config=configs/refnet.yaml \
      --steps="$steps" "$@" |
      tee /dev/stderr | awk '/^PSTRAIN_BENCH_TRAIN/{print $3}')
    torch_version=$("$py" -c 'import torch; print(torch.__version__)')
    echo "== PyTorch $torch_version (PyPI, $py): $ref_script --bench-steps $steps"
    ref=$("$py" "$ref_script" --bench-steps "$steps" | tee /dev/stderr |
      awk '/^BENCH_TRAIN/{print $3}')
    load_average
    echo "pstrain ${ours} img/s, PyTorch $torch_version ${ref} img/s"
    awk -v a="$ours" -v b="$ref" 'BEGIN{printf "ratio: %.2f\n", a/b}'
    ;;
  tf1)
    build
    py=$(bench_python)
    python3 bench/tf1_job.py --python "$py" --build_dir "$bdir" "$@"
    ;;
  ctr)
    build
    py=$(bench_python)
    python3 bench/ctr_job.py --python "$py" --build_dir "$bdir" "$@"
    ;;
  ps)
    build
    load_average
    bin=$bdir/bench/pstrain-bench-ps-transport
    # The bench allocates as the roles do (jemalloc where built with it: CMakeLists.txt,
    # pstrain_allocator), so each received frame reuses a freed block instead of fresh pages;
    # it prints which allocator ran. The raw socket reuses one buffer.
    as_launched "$bin" "$@"
    ;;
  hub)
    build
    echo "== as pstrain-launch runs roles: OMP_WAIT_POLICY=PASSIVE"
    OMP_WAIT_POLICY=PASSIVE "$bdir"/bench/pstrain-bench-hub-allreduce "$@"
    ;;
  curve)
    build
    as_launched "$bdir"/bench/pstrain-bench-ps-transport --curve "$@"
    ;;
  tables)
    # Real servers (build/pstrain); sizes from PSTRAIN_TABLE_ROWS, "1000000 10000000 50000000"
    # by default (the largest needs about 9 GB of memory over the 4 servers).
    build
    load_average
    for rows in ${PSTRAIN_TABLE_ROWS:-1000000 10000000 50000000}; do
      echo "== a table of $rows rows"
      "$bdir"/bench/pstrain-bench-tables --pstrain="$bdir"/pstrain --rows="$rows" "$@"
    done
    ;;
  checks)
    build
    load_average
    as_launched "$bdir"/bench/pstrain-bench-ps-transport --checks "$@"
    ;;
  gpu)
    # Runs where the GPU is: no build here (a GPU machine may lack our build dependencies: build
    # and pack on a build machine, then run this there).
    bin=${PSTRAIN_BENCH_TRAIN:-build/bench/pstrain-bench-train}
    py=${PSTRAIN_TORCH_PYTHON:-python3}
    if ! nvidia-smi -L >/dev/null 2>&1; then
      echo "bench/run.sh gpu: no GPU visible (nvidia-smi -L failed); run it on a GPU machine" >&2
      exit 2
    fi
    nvidia-smi -L
    ours_rate() {  # ours_rate CONFIG BATCH FLAGS...: pstrain's median images/s
      local config=$1 batch=$2
      shift 2
      "$bin" --config="$config" --batch="$batch" --device=gpu --allow_soft_placement=false \
        --steps="${BENCH_STEPS:-50}" --warmup=10 "$@" | tee /dev/stderr |
        awk '/^PSTRAIN_BENCH_TRAIN/{print $3}'
    }
    torch_rate() {  # torch_rate MODEL BATCH MATH: PyTorch's median images/s
      "$py" bench/torch_gpu_ref.py --model "$1" --batch "$2" --device cuda --math "$3" \
        --steps="${BENCH_STEPS:-50}" | tee /dev/stderr | awk '/^BENCH_TRAIN/{print $3}'
    }
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (b > 0) printf "%.2f", a/b; else print "n/a"}'; }
    ratios=()
    for spec in "refnet configs/refnet.yaml 128" "resnet50 configs/resnet50.yaml 64"; do
      read -r model config batch <<<"$spec"
      # Plain FP32 on both sides. pstrain twice: the optimizer on the GPU (as pstrain-train on
      # one GPU, and as PyTorch) and on the host (as a cluster's worker: gradients out, values
      # back every step).
      echo "== PyTorch: bench/torch_gpu_ref.py --model $model --batch $batch --math fp32"
      ref=$(torch_rate "$model" "$batch" fp32)
      echo "== pstrain: $model, batch $batch, FP32, update on the device"
      ours=$(ours_rate "$config" "$batch" --update=device "$@")
      echo "== pstrain: $model, batch $batch, FP32, update on the host (as a worker)"
      host=$(ours_rate "$config" "$batch" --update=host "$@")
      r=$(ratio "$ours" "$ref")
      echo "$model: pstrain ${ours} img/s (FP32, update on the GPU), PyTorch ${ref} img/s (FP32), ratio $r"
      echo "$model: pstrain ${host} img/s (FP32, update on the host as a worker), ratio $(ratio "$host" "$ref")"
      ratios+=("$r")
      if [[ ${BENCH_TF32:-1} == 1 ]]; then
        # TF32 on both sides (PyTorch's default for convolutions, TensorFlow's on this GPU).
        echo "== TF32: PyTorch and pstrain --allow_tf32, $model"
        ref32=$(torch_rate "$model" "$batch" tf32)
        ours32=$(ours_rate "$config" "$batch" --update=device --allow_tf32 "$@")
        echo "$model: pstrain ${ours32} img/s (TF32, update on the GPU), PyTorch ${ref32} img/s (TF32), ratio $(ratio "$ours32" "$ref32")"
      fi
    done
    # The weaker of the two models in FP32 is the one that counts.
    printf '%s\n' "${ratios[@]}" | sort -n | head -1 | sed 's/^/ratio: /'
    ;;
  versus)
    build
    old=${1:?usage: bench/run.sh versus OLD_BUILD_DIR [-- flags for both]}
    shift
    [[ ${1:-} == -- ]] && shift
    load_average
    python3 bench/versus.py --old "$old/bench/pstrain-bench-ps-transport" \
      --new "$bdir/bench/pstrain-bench-ps-transport" -- "$@"
    ;;
  scale)
    # Not a ratio: a table of images/s, efficiency, server CPU and link use over namespace hosts
    # (docs/scaling.md); needs root. Builds only the pstrain binary. With --simulate, SimGrid's
    # version of it (bench/scale_sim), built alone. With --ddp, the DDP anchor needs the venv.
    if [[ ${1:-} == --ddp ]]; then
      PSTRAIN_DDP_PYTHON=$(bench_python) exec bash bench/scale.sh "$@"
    fi
    exec bash bench/scale.sh "$@"
    ;;
  *)
    echo "usage: bench/run.sh refnet|tf1|ctr|ps|checks|curve|hub|gpu|versus|scale [flags for the pstrain side]" >&2
    exit 2
    ;;
esac
