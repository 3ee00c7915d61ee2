#!/usr/bin/env bash
# Installs, builds and runs every test. This is what CI (.ci/run) calls.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh "$@"
bash scripts/test-venv.sh build
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 1200
