#!/usr/bin/env bash
# Installs, builds and runs the main job: RefNet on Fashion-MNIST in one process, with
# TensorBoard logs and checkpoints under runs/refnet. Extra flags go to the trainer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/worker/pstrain-train --config=configs/refnet.yaml --train_dir=runs/refnet \
  --logdir=runs/refnet/logs "$@"
