#!/usr/bin/env bash
# Makes VENV_DIR (default build/bench-venv): a Python with PyPI's torch and tensorflow-cpu, the
# references bench/run.sh measures pstrain against. PyPI's builds, not Debian's python3-torch
# 1.13: the fastest reference installable here is the one to beat.
# Prints the venv's python3 path on stdout (everything else goes to stderr).
set -euo pipefail
venv=${1:-build/bench-venv}
py=$venv/bin/python3
if [[ -x "$py" ]] && "$py" -c 'import torch, tensorflow, numpy' >/dev/null 2>&1; then
  echo "$py"
  exit 0
fi
[[ -x "$py" ]] || python3 -m venv "$venv" >&2
pip=("$venv/bin/pip" install -q --disable-pip-version-check)
"${pip[@]}" numpy >&2
# PyTorch's CPU index keeps torch to its CPU build; where only PyPI is reachable, PyPI's wheel
# (which brings the CUDA runtime packages along, a few GB, unused here) runs the same CPU code.
cpu_index=https://download.pytorch.org/whl/cpu
if "$py" -c "import urllib.request as u; u.urlopen('$cpu_index/torch/', timeout=5)" 2>/dev/null
then
  "${pip[@]}" torch --index-url "$cpu_index" >&2
else
  "${pip[@]}" torch >&2
fi
"${pip[@]}" tensorflow-cpu >&2
echo "$py"
