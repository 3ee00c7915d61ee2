#!/usr/bin/env bash
# Installs every pstrain dependency from Debian 12 packages (run as root or with sudo).
# CUDA, cuDNN and NCCL are not installed here: CMake picks them up from /usr/local/cuda
# when present (-DPSTRAIN_CUDA=AUTO|ON|OFF).
#   scripts/install-deps.sh            build + test dependencies and the Fashion-MNIST data set
#   scripts/install-deps.sh --bench    the same (bench/ references come from PyPI: scripts/bench-venv.sh)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgflags-dev libgoogle-glog-dev libgtest-dev libgmock-dev
  libzmq3-dev cppzmq-dev capnproto libcapnp-dev libsodium-dev
  protobuf-compiler libprotobuf-dev
  libdnnl-dev libopenblas-dev
  libjemalloc2  # the roles' allocator (CMakeLists.txt, pstrain_allocator)
  libyaml-cpp-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev nlohmann-json3-dev
  dataset-fashion-mnist
  python3 python3-numpy python3-venv python3-yaml
  clang libclang-rt-14-dev libomp-dev  # scripts/fuzz.sh: clang, libFuzzer, OpenMP for clang
  openssh-server openssh-client
  iproute2 nftables  # tests/multihost: network-namespace hosts (ip, tc) and packet loss (nft)
  # bench/scale_sim (pstrain-scale-sim and its test): at most 10 packages, 24 MB to fetch, 7 s to install
  # here, and 11 CPU-s to compile (2026-11-27); without it CMake skips both, saying so
  libsimgrid-dev
  chromium  # tests/summary/tensorboard_in_browser_test.py: TensorBoard in a headless browser
  # tests/launcher/test_slurm_*.py start a private Slurm (their own slurm.conf, ports and munge
  # key); the system's services stay unconfigured (slurmctld/slurmd start only with a
  # /etc/slurm/slurm.conf)
  slurmctld slurmd slurm-client munge
)

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
