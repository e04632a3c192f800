#!/usr/bin/env bash
# Runs Metronome's test suite on a fresh machine: installs what it needs, builds, tests.
#   scripts/test.sh              everything CI runs: the source checks (scripts/check.sh),
#                                release tests, clang-tidy on what changed since .ci/tidy-base
#                                (scripts/tidy.sh --changed), the same tests under
#                                AddressSanitizer + UndefinedBehaviorSanitizer, short fuzz runs
#   scripts/test.sh check        only the source checks (formatting, Python and shell lint;
#                                clang-tidy too when build/release exists)
#   scripts/test.sh release      only the release build, its tests and clang-tidy
#   scripts/test.sh sanitize     only the sanitizer build and its tests
#   scripts/test.sh fuzz         only the libFuzzer targets (FUZZ_SECONDS each, default 20)
# Extra arguments after the mode go to ctest (e.g. scripts/test.sh release -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
shift || true
bash scripts/setup.sh

run_preset() {
  local preset=$1
  shift
  echo "=== ${preset}: configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  echo "=== ${preset}: test"
  ctest --preset "$preset" "$@"
  if [[ $preset == release ]]; then
    echo "=== release: clang-tidy on what changed since .ci/tidy-base"
    bash scripts/tidy.sh --changed
  fi
}

run_fuzz() {
  echo "=== fuzz: configure and build (clang)"
  cmake --preset fuzz -DMETRONOME_FUZZ_SECONDS="${FUZZ_SECONDS:-20}" >/dev/null
  cmake --build --preset fuzz --target fuzz_protocol_decode fuzz_zmtp_reader fuzz_extender_request \
    fuzz_service_config fuzz_http_routes
  echo "=== fuzz: run"
  # Each fuzzer runs for a fixed time on one core: side by side they take the time of one.
  ctest --test-dir build/fuzz -L fuzz --output-on-failure -j "$(nproc)" "$@"
}

case "$mode" in
  all)
    bash scripts/check.sh --no-tidy # clang-tidy runs after the release build
    run_preset release "$@"
    run_preset sanitize "$@"
    run_fuzz
    ;;
  check) bash scripts/check.sh ;;
  release | sanitize) run_preset "$mode" "$@" ;;
  fuzz) run_fuzz "$@" ;;
  *)
    echo "usage: scripts/test.sh [all|check|release|sanitize|fuzz] [ctest args...]" >&2
    exit 2
    ;;
esac
