#!/usr/bin/env bash
# Packs built binaries with the shared libraries they need, for a GPU machine that has the NVIDIA
# driver and CUDA's libraries but not pstrain's other dependencies (ZeroMQ, Cap'n Proto, gflags,
# glog, protobuf, oneDNN). CUDA's own libraries (cudart, cuBLAS, cuDNN, NCCL) are not packed:
# the GPU machine's are used, found at unpack time.
#   scripts/gpu_pack.sh OUT_DIR BINARY...     e.g. scripts/gpu_pack.sh .devpack build/pstrain-train
# On the GPU machine, from the repository root: source OUT_DIR/env.sh (unpacks into
# /tmp/pstrain-pack and puts the binaries on PATH and their libraries on LD_LIBRARY_PATH).
set -euo pipefail
out=${1:?usage: gpu_pack.sh OUT_DIR BINARY...}
shift
[[ $# -gt 0 ]] || { echo "gpu_pack.sh: name at least one binary" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$out"
# The C runtime and the driver's and CUDA's libraries come from the GPU machine.
not_packed='/lib(c|m|dl|rt|pthread|gcc_s)\.so|ld-linux|linux-vdso|libcuda\.so|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink'
for binary in "$@"; do
  cp -L "$binary" "$stage/bin/"
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | { grep -Ev "$not_packed" || true; } |
    while read -r lib; do cp -Ln "$lib" "$stage/lib/" 2>/dev/null || true; done
done
tar -C "$stage" -cJf "$out/pack.tar.xz" .
cat >"$out/env.sh" <<'ENV'
# Sourced on the GPU machine: unpacks the binaries and finds CUDA's libraries there (the
# toolkit's, or those that come with its Python wheels).
pack_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p /tmp/pstrain-pack && tar -C /tmp/pstrain-pack -xJf "$pack_dir/pack.tar.xz"
cuda_dirs=$(find -H /usr/local/cuda*/lib64 /usr/local/cuda*/targets /opt /usr/lib \
  \( -name 'libcudnn.so.9' -o -name 'libnccl.so.2' -o -name 'libcublas.so.*' -o -name 'libcudart.so.*' \) \
  2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd:)
export LD_LIBRARY_PATH=/tmp/pstrain-pack/lib${cuda_dirs:+:$cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/tmp/pstrain-pack/bin:$PATH
ENV
du -h "$out/pack.tar.xz"
