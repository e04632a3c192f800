#!/usr/bin/env bash
# The checks to run before committing (CI runs them first, scripts/test.sh check): every tracked
# C++/CUDA file as clang-format (.clang-format) writes it, Python without pyflakes findings, shell
# scripts without shellcheck warnings, and clang-tidy on what changed (scripts/tidy.sh --changed)
# when build/release has compile commands. Prints what fails; exit 1 if anything does.
#   scripts/check.sh [--no-tidy]   --no-tidy: leave clang-tidy out (scripts/test.sh runs it after
#                                  its release build)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
status=0
tidy=1
[[ ${1:-} == --no-tidy ]] && tidy=0

mapfile -t cxx < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
if ! clang-format --dry-run --Werror "${cxx[@]}"; then
  echo "check: clang-format: run clang-format -i on the files above" >&2
  status=1
fi

mapfile -t py < <(git ls-files '*.py')
if ! pyflakes3 "${py[@]}"; then
  echo "check: pyflakes found the problems above" >&2
  status=1
fi

mapfile -t sh < <(git ls-files '*.sh' '.ci/run')
if ! shellcheck -S warning "${sh[@]}"; then
  echo "check: shellcheck found the problems above" >&2
  status=1
fi

if ((tidy)); then
  if [[ ! -f build/release/compile_commands.json ]]; then
    echo "check: clang-tidy skipped: no build/release/compile_commands.json (cmake --preset release)" >&2
  elif ! bash scripts/tidy.sh --changed; then
    echo "check: clang-tidy found the problems above" >&2
    status=1
  fi
fi

((status == 0)) && echo "check: ${#cxx[@]} C++/CUDA, ${#py[@]} Python and ${#sh[@]} shell files clean"
exit "$status"
