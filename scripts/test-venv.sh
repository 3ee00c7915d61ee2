#!/usr/bin/env bash
# Makes BUILD_DIR/venv: a Python with TensorBoard, safetensors and numpy from PyPI, so tests
# can read our event files and exports with those projects' own readers; onnx and onnxruntime
# check and run the models pstrain-export writes; tensorflow-cpu reads and writes the TensorFlow
# checkpoints (tensor bundles) pstrain converts to and from.
set -euo pipefail
build=${1:?usage: test-venv.sh BUILD_DIR}
if [[ -x "$build/venv/bin/python3" ]] && "$build/venv/bin/python3" -c 'import tensorboard, safetensors, numpy, onnx, onnxruntime, tensorflow' 2>/dev/null; then
  exit 0
fi
python3 -m venv "$build/venv"
"$build/venv/bin/pip" install -q --disable-pip-version-check tensorboard safetensors numpy onnx onnxruntime tensorflow-cpu
