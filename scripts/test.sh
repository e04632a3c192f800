#!/usr/bin/env bash
# Runs Metronome's test suite on a fresh machine: installs what it needs, builds, tests.
#   scripts/test.sh              everything CI runs: the source checks (scripts/check.sh),
#                                release tests, clang-tidy on what changed since .ci/tidy-base
#                                (scripts/tidy.sh --changed), the same tests under
#                                AddressSanitizer + UndefinedBehaviorSanitizer, the tests of state
#                                that threads share under ThreadSanitizer, short fuzz runs
#   scripts/test.sh check        only the source checks (formatting, Python and shell lint;
#                                clang-tidy too when build/release exists)
#   scripts/test.sh release      only the release build, its tests and clang-tidy
#   scripts/test.sh sanitize     only the sanitizer build and its tests
#   scripts/test.sh tsan         only the ThreadSanitizer build of those tests, and them
#   scripts/test.sh fuzz         only the libFuzzer targets (FUZZ_SECONDS each, default 20)
# Extra arguments after the mode go to ctest (e.g. scripts/test.sh release -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
shift || true

# Each phase's start, and at the end (also on failure) how long each took: CI should stay well
# under 30 minutes on two cores, and its log says where they went.
phases=()
phase_name=""
phase_start=$SECONDS
phase_end() {
  [[ -z $phase_name ]] || phases+=("$(printf '%5d s  %s' $((SECONDS - phase_start)) "$phase_name")")
  phase_name=""
}
phase() {
  phase_end
  phase_name=$1
  phase_start=$SECONDS
  echo "=== $1 ($(date -u +%H:%M:%S), ${SECONDS} s in)"
}
report_phases() {
  phase_end
  echo "=== time by phase (${SECONDS} s in all)"
  printf '%s\n' "${phases[@]}"
}
trap report_phases EXIT

phase "setup: packages"
bash scripts/setup.sh

run_preset() {
  local preset=$1
  shift
  phase "${preset}: configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  phase "${preset}: test"
  ctest --preset "$preset" "$@"
  if [[ $preset == release ]]; then
    phase "release: clang-tidy on what changed since .ci/tidy-base"
    bash scripts/tidy.sh --changed
  fi
}

# The extender's and the Kubernetes client's tests serve requests from several threads at once,
# all in this project's code (ZeroMQ's threads would need an instrumented libzmq).
run_tsan() {
  phase "tsan: configure and build (ThreadSanitizer)"
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan
  phase "tsan: test"
  ctest --preset tsan "$@"
}

run_fuzz() {
  phase "fuzz: configure and build (clang)"
  cmake --preset fuzz -DMETRONOME_FUZZ_SECONDS="${FUZZ_SECONDS:-20}" >/dev/null
  cmake --build --preset fuzz --target fuzz_protocol_decode fuzz_zmtp_reader fuzz_extender_request \
    fuzz_service_config fuzz_http_routes
  phase "fuzz: run"
  # Each fuzzer runs for a fixed time on one core: side by side they take the time of one.
  ctest --test-dir build/fuzz -L fuzz --output-on-failure -j "$(nproc)" "$@"
}

case "$mode" in
  all)
    phase "source checks"
    bash scripts/check.sh --no-tidy # clang-tidy runs after the release build
    run_preset release "$@"
    run_preset sanitize "$@"
    run_tsan
    run_fuzz
    ;;
  check) bash scripts/check.sh ;;
  release | sanitize) run_preset "$mode" "$@" ;;
  tsan) run_tsan "$@" ;;
  fuzz) run_fuzz "$@" ;;
  *)
    echo "usage: scripts/test.sh [all|check|release|sanitize|tsan|fuzz] [ctest args...]" >&2
    exit 2
    ;;
esac
