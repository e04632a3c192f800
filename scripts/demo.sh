#!/usr/bin/env bash
# The main job: Metronome's demo on CPUs. Installs what it needs, builds, and runs a small cluster
# in network namespaces (2 racks, a shared 200 Mbit/s bottleneck, three 2-rank jobs of different
# priorities) twice, without and with Metronome, then prints the side-by-side table and writes
# out/demo/timeline.png and out/demo/results.json. Needs root (namespaces, tc). A few minutes.
#   scripts/demo.sh [demo.py options]    e.g. --scenario FILE, --iterations N, --skip-solo
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target metronome-scheduler metronome_shim metronome-trainer \
  metronome_nccl_gloo
exec /usr/bin/python3 testbed/demo/demo.py "$@"
