#!/usr/bin/env bash
# The main job: Metronome's demo on CPUs. Installs what it needs, builds, runs.
#
# The full demo (scheduler + trainer jobs on a shaped link in network namespaces, run without and
# with Metronome) arrives with the testbed; until then this runs what exists, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target bench_common

echo
echo "Metronome demo: the end-to-end CPU demo is not built yet (testbed issue)."
echo "What exists today is the shared core; its costs, measured now on this machine:"
echo
build/release/bench/common/bench_common --benchmark_min_time=0.1
