#!/usr/bin/env bash
# Installs, builds and runs the main job: RefNet on Fashion-MNIST on a local cluster of
# 1 parameter server, 2 workers and an evaluator (configs/clusters/local.yaml), with TensorBoard
# logs and checkpoints under runs/refnet. Extra flags after the script go to every role, e.g.
#   bash scripts/train.sh --update_mode=accumulate --max_steps=500
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the job runs (the server/worker binary and the key tool): about half of the build
# (200 of 417 build steps); scripts/test.sh builds the tests.
PSTRAIN_BUILD_TARGETS="pstrain pstrain-keygen" bash scripts/build.sh
extra=()
if [[ $# -gt 0 ]]; then extra=(-- "$@"); fi
exec launcher/pstrain-launch --cluster configs/clusters/local.yaml --config configs/refnet.yaml \
  --train_dir runs/refnet "${extra[@]}"
