#!/usr/bin/env bash
# clang-tidy (.clang-tidy: every warning is an error) on the project's C++ sources, with the
# compile commands of a configured and built tree (default build/release: some sources include
# headers the build generates). scripts/test.sh runs it on the whole tree after the release
# build; scripts/check.sh on what a change touches.
#   scripts/tidy.sh [--build DIR] [FILE...]   no FILE: every .cpp file the build compiles
# Exit 0 when clean, 1 on any finding, 2 on a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/release
if [[ ${1:-} == --build ]]; then
  build=$2
  shift 2
fi
db=$build/compile_commands.json
if [[ ! -f $db ]]; then
  echo "tidy: $db not found: configure and build first (cmake --preset release)" >&2
  exit 2
fi
if (($# == 0)); then
  # The project's own translation units (not CUDA: nvcc's flags are not clang's).
  mapfile -t files < <(python3 -c '
import json, os, sys
repo = os.getcwd()
seen = set()
for e in json.load(open(sys.argv[1])):
    f = os.path.realpath(os.path.join(e["directory"], e["file"]))
    if f.startswith(repo + "/") and f.endswith(".cpp") and "/build/" not in f[len(repo):]:
        seen.add(os.path.relpath(f, repo))
print("\n".join(sorted(seen)))' "$db")
else
  files=("$@")
fi
((${#files[@]} > 0)) || exit 0
# The compile commands carry gcc-only warning flags (-Wno-missing-attributes) clang does not know.
extra=(--extra-arg=-Wno-unknown-warning-option)
echo "tidy: clang-tidy on ${#files[@]} file(s)" >&2
if ! printf '%s\n' "${files[@]}" |
  xargs -P "$(nproc)" -n 4 clang-tidy -p "$build" --quiet "${extra[@]}" 2> >(grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' >&2); then
  echo "tidy: clang-tidy found the problems above" >&2
  exit 1
fi
echo "tidy: ${#files[@]} file(s) clean" >&2
