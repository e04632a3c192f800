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
  libcpp-httplib-dev libssl-dev openssl nlohmann-json3-dev libyaml-cpp-dev
  libspdlog-dev libfmt-dev libcli11-dev prometheus-cpp-dev prometheus
  clang libclang-rt-14-dev clang-format clang-tidy pyflakes3 shellcheck
  iproute2 iputils-ping procps python3 python3-yaml python3-matplotlib python3-msgpack python3-zmq
  patchelf binutils ethtool nftables
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

# Offline checks of the Kubernetes layer: kubectl (for `kubectl kustomize`) and Node.js with the
# JSON-schema validator pinned in tests/unit/k8s/package-lock.json.
if ! command -v kubectl >/dev/null 2>&1; then
  apt-get install -y -qq --no-install-recommends kubectl >/dev/null 2>&1 ||
    apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
k8s_tests="$(dirname "$0")/../tests/unit/k8s"
if [[ ! -f "$k8s_tests/node_modules/.package-lock.json" ||
      "$k8s_tests/package-lock.json" -nt "$k8s_tests/node_modules/.package-lock.json" ]]; then
  npm ci --prefix "$k8s_tests" --no-audit --no-fund --loglevel=error >/dev/null
fi

# CUDA Toolkit and NCCL come from NVIDIA, not Debian: check them, say exactly what is missing.
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
problems=()
# NCCL from the toolkit folder or from NVIDIA's packages (libnccl-dev puts it under /usr).
[[ -f "$CUDA_HOME/include/nccl.h" || -f /usr/include/nccl.h ]] ||
  problems+=("NCCL header nccl.h (in $CUDA_HOME/include or /usr/include)")
[[ -f "$CUDA_HOME/include/cuda.h" ]] || problems+=("CUDA driver API header $CUDA_HOME/include/cuda.h")
compgen -G "$CUDA_HOME/lib*/libnccl.so*" >/dev/null || compgen -G "/usr/lib/*/libnccl.so*" >/dev/null ||
  problems+=("NCCL library libnccl.so.2 (in $CUDA_HOME/lib* or /usr/lib/*)")
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
