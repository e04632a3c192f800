#!/usr/bin/env bash
# Replaced by prepare.sh (here) + run.sh (on the GPU machine); on one machine with both: this.
out=${1:-$(dirname "$0")/../../build/gpu_checks}
bash "$(dirname "$0")/prepare.sh" "$out" && exec bash "$out/run.sh" "$out"
