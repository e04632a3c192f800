#!/usr/bin/env bash
# The checks to run before committing (CI runs them first, scripts/test.sh check): every tracked
# C++/CUDA file as clang-format (.clang-format) writes it, Python without pyflakes findings, shell
# scripts without shellcheck warnings. Prints what fails; exit 1 if anything does.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
status=0

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

((status == 0)) && echo "check: ${#cxx[@]} C++/CUDA, ${#py[@]} Python and ${#sh[@]} shell files clean"
exit "$status"
