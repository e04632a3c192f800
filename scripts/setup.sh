#!/usr/bin/env bash
# Installs every Debian package Metronome builds, tests or demos with, then checks that the
# CUDA Toolkit and NCCL headers are where CMake will look. Idempotent: a second run is a no-op
# apart from apt's own checks. Needs root (apt-get).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
  libgloo-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev libssl-dev nlohmann-json3-dev libyaml-cpp-dev
  libspdlog-dev libfmt-dev libcli11-dev prometheus-cpp-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  iproute2 iputils-ping procps python3 python3-yaml python3-matplotlib
  patchelf binutils ethtool
  chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: these packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${#missing[@]} package(s): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# CUDA Toolkit and NCCL come from NVIDIA, not Debian: check them, say exactly what is missing.
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
problems=()
[[ -f "$CUDA_HOME/include/nccl.h" ]] || problems+=("NCCL header $CUDA_HOME/include/nccl.h")
[[ -f "$CUDA_HOME/include/cuda.h" ]] || problems+=("CUDA driver API header $CUDA_HOME/include/cuda.h")
ls "$CUDA_HOME"/lib*/libnccl.so* >/dev/null 2>&1 || problems+=("NCCL library $CUDA_HOME/lib*/libnccl.so.2")
if ((${#problems[@]})); then
  echo "setup: missing from the CUDA Toolkit at $CUDA_HOME (set CUDA_HOME if it lives elsewhere):" >&2
  printf '  - %s\n' "${problems[@]}" >&2
  exit 1
fi
if [[ -x "$CUDA_HOME/bin/nvcc" ]]; then
  echo "setup: ok (nvcc: $("$CUDA_HOME/bin/nvcc" --version | tail -n 2 | head -n 1))"
else
  echo "setup: ok (no nvcc: the device gate will be left out of the build)"
fi
