#!/usr/bin/env bash
# clang-tidy (.clang-tidy: every warning is an error) on the project's C++ sources, with the
# compile commands of a configured and built tree (default build/release: some sources include
# headers the build generates). CI (scripts/test.sh, after the release build) and
# scripts/check.sh run it with --changed.
#   scripts/tidy.sh [--build DIR] [--all]      every .cpp file the build compiles (the default)
#   scripts/tidy.sh [--build DIR] --changed    what changed since .ci/tidy-base (below)
#   scripts/tidy.sh [--build DIR] FILE...      the given files
#   --list: print the files it would check, and check nothing.
# --changed: the .cpp files changed since the commit in .ci/tidy-base (the last commit at which
# a full run was clean: committed, uncommitted and untracked changes), every .cpp that includes
# a changed header (by its file name), every file under a changed .clang-tidy; only files the
# build compiles. Without .ci/tidy-base, or when that commit is not in the history (a shallow
# clone), the whole tree.
# Exit 0 when clean, 1 on any finding, 2 on a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/release
mode=files
list=0
while (($# > 0)); do
  case $1 in
    --build)
      build=$2
      shift 2
      ;;
    --all)
      mode=all
      shift
      ;;
    --changed)
      mode=changed
      shift
      ;;
    --list)
      list=1
      shift
      ;;
    --)
      shift
      break
      ;;
    -*)
      echo "usage: scripts/tidy.sh [--build DIR] [--list] [--all | --changed | FILE...]" >&2
      exit 2
      ;;
    *) break ;;
  esac
done
if [[ $mode != files ]] && (($# > 0)); then
  echo "tidy: --all and --changed take no FILE" >&2
  exit 2
fi
(($# > 0)) || [[ $mode != files ]] || mode=all
db=$build/compile_commands.json
if [[ ! -f $db ]]; then
  echo "tidy: $db not found: configure and build first (cmake --preset release)" >&2
  exit 2
fi

# The project's own translation units (not CUDA: nvcc's flags are not clang's), relative paths.
mapfile -t all < <(python3 -c '
import json, os, sys
repo = os.getcwd()
seen = set()
for e in json.load(open(sys.argv[1])):
    f = os.path.realpath(os.path.join(e["directory"], e["file"]))
    if f.startswith(repo + "/") and f.endswith(".cpp") and "/build/" not in f[len(repo):]:
        seen.add(os.path.relpath(f, repo))
sys.stdout.write("".join(f + "\n" for f in sorted(seen)))' "$db")

if [[ $mode == changed ]]; then
  base=$(cat .ci/tidy-base 2>/dev/null || true)
  if [[ -z $base ]] || ! git cat-file -e "${base}^{commit}" 2>/dev/null; then
    echo "tidy: base commit '${base:-none}' (.ci/tidy-base) not in this history: whole tree" >&2
    mode=all
  else
    mapfile -t files < <(
      {
        git diff --name-only "$base" HEAD
        git diff --name-only HEAD
        git ls-files --others --exclude-standard
      } | sort -u | python3 -c '
import os, re, sys
changed = [p for p in sys.stdin.read().split() if os.path.exists(p)]
units = sys.argv[1:]
pick = {p for p in changed if p in set(units)}
dirs = [os.path.dirname(p) for p in changed if os.path.basename(p) == ".clang-tidy"]
pick |= {u for u in units for d in dirs if d == "" or u.startswith(d + "/")}
headers = {os.path.basename(p) for p in changed if p.endswith((".hpp", ".h", ".cuh"))}
if headers:
    pattern = re.compile(r"^\s*#\s*include\s*[<\"](?:[^\">]*/)?(%s)[\">]"
                         % "|".join(re.escape(h) for h in headers), re.M)
    for u in units:
        if u not in pick and pattern.search(open(u, errors="replace").read()):
            pick.add(u)
sys.stdout.write("".join(f + "\n" for f in sorted(pick)))' "${all[@]}"
    )
    echo "tidy: changes since $(git rev-parse --short "$base") (.ci/tidy-base)" >&2
  fi
fi
if [[ $mode == all ]]; then
  files=("${all[@]}")
elif [[ $mode == files ]]; then
  files=("$@")
fi
if ((list)); then
  ((${#files[@]} == 0)) || printf '%s\n' "${files[@]}"
  exit 0
fi
if ((${#files[@]} == 0)); then
  echo "tidy: no C++ file to check" >&2
  exit 0
fi
# The compile commands carry gcc-only warning flags (-Wno-missing-attributes) clang does not know.
extra=(--extra-arg=-Wno-unknown-warning-option)
echo "tidy: clang-tidy on ${#files[@]} file(s)" >&2
if ! printf '%s\n' "${files[@]}" |
  xargs -P "$(nproc)" -n 4 clang-tidy -p "$build" --quiet "${extra[@]}" 2> >(grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' >&2); then
  echo "tidy: clang-tidy found the problems above" >&2
  exit 1
fi
echo "tidy: ${#files[@]} file(s) clean" >&2
