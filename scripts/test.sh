#!/usr/bin/env bash
# Installs, builds and runs every test. This is what CI (.ci/run) calls.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh "$@"
bash scripts/test-venv.sh build
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 1200
cd ..
# Every fuzz target for a short fixed time (clang, ASan, UBSan); ctest above replays their crashes.
bash scripts/fuzz.sh --seconds 30
