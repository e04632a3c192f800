#!/usr/bin/env bash
# CTest gpu_prepare_dry_run: makes the GPU-check folder from a built tree (prepare.sh --no-build)
# and runs run.sh in it. Without a GPU, run.sh must resolve every library of every program and
# stop at "no GPU" (exit 77); on a machine with one, the library check alone must pass (the full
# run is run.sh's job, not CTest's). Usage: dry_run_test.sh BUILD_DIR OUT
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1
out=$2
bash "$here/prepare.sh" --build "$build" --no-build "$out" || { echo "FAIL: prepare.sh"; exit 1; }
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  exec bash "$out/run.sh" --libs-only "$out"
fi
bash "$out/run.sh" "$out" 2>&1 | tee "$out/dry_run.log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 77 ]; then
  echo "FAIL: run.sh exited $rc, not 77 (no GPU after every library resolved)"
  exit 1
fi
grep -q '^libraries: all resolved (libcuda' "$out/dry_run.log" || { echo "FAIL: unresolved libraries"; exit 1; }
grep -q '^no GPU' "$out/dry_run.log" || { echo "FAIL: no 'no GPU' line"; exit 1; }
echo "PASS: the folder is complete; only the GPU is missing"
