#!/usr/bin/env bash
# Makes, on a build machine, the one folder a GPU machine needs for the GPU checks (run.sh there
# needs only that folder, python3 with torch, and nvidia-smi: no compiler, no -dev package, no
# network). Usage:
#   tests/gpu/prepare.sh [--build DIR] [--no-build] OUT
#     --build DIR   the CMake build tree (default build/release; configured with the release
#                   preset when it does not exist)
#     --no-build    take the targets as built (CTest's dry run); otherwise they are built (-j1,
#                   or PREPARE_JOBS)
# OUT (emptied first):
#   lib/      the shim's install bundle: libmetronome.so (gate fatbin inside), libzmq.so.5 and
#             every library it needs beyond glibc, RUNPATH $ORIGIN
#   bin/      device_gate_check, collective_cost, turns_check (nvcc), gpu_scheduler: DT_RPATH $ORIGIN/../lib,
#             so that their libzmq (and libstdc++) are the bundle's
#   py/       ddp_world1.py
#   run.sh    the GPU run;  NEEDED: the libraries it must find on the GPU machine (libcudart,
#             libnccl: never bundled, they must match the driver and torch there)
#   MANIFEST  git revision, and every file's size and sha256 (and glibc needed, for ELF files)
# Fails if the folder is 64 MiB or more (what travels to the GPU machine).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$repo/build/release
do_build=1
while [ $# -gt 1 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --no-build) do_build=0; shift ;;
    *) echo "prepare.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: prepare.sh [--build DIR] [--no-build] OUT" >&2; exit 2; }
out=$1
glibc_re='^(ld-linux.*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libmvec)\.so'
# Provided by the GPU machine: the driver, and the CUDA runtime and NCCL that match it.
external_re='^(libcuda|libcudart|libnccl)\.so'

if [ ! -f "$build/CMakeCache.txt" ]; then
  if [ "$build" = "$repo/build/release" ]; then
    (cd "$repo" && cmake --preset release >/dev/null)
  else
    echo "prepare.sh: $build is not a configured build tree" >&2
    exit 1
  fi
fi
if [ $do_build -eq 1 ]; then
  cmake --build "$build" --target metronome_shim metronome_gpu_checks -j"${PREPARE_JOBS:-1}"
fi
progs=(device_gate_check collective_cost turns_check gpu_scheduler)
for f in "$build/shim/libmetronome.so" "${progs[@]/#/$build/tests/gpu/bin/}"; do
  [ -x "$f" ] || { echo "prepare.sh: $f is not built (target metronome_gpu_checks)" >&2; exit 1; }
done

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/py"
out=$(cd "$out" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The shim's own bundle, exactly as installed (cmake --install, component shim).
cmake --install "$build" --component shim --prefix "$stage" >"$stage/install.log" ||
  { cat "$stage/install.log" >&2; exit 1; }
cp -p "$stage"/lib/metronome/* "$out/lib/"

# The programs, and anything they need beyond the bundle, glibc and what the GPU machine brings.
for p in "${progs[@]}"; do
  cp -p "$build/tests/gpu/bin/$p" "$out/bin/"
  rpath=$(readelf -d "$out/bin/$p" | sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p')
  # shellcheck disable=SC2016  # $ORIGIN is for the dynamic loader
  [ "$rpath" = '$ORIGIN/../lib' ] || { echo "prepare.sh: $p has RPATH '$rpath'" >&2; exit 1; }
  while read -r name path; do
    [[ $name =~ $glibc_re || $name =~ $external_re ]] && continue
    [ -e "$out/lib/$name" ] && continue
    [ -f "$path" ] || { echo "prepare.sh: $p needs $name, not found here" >&2; exit 1; }
    cp -L "$path" "$out/lib/$name"
    # shellcheck disable=SC2016
    patchelf --set-rpath '$ORIGIN' "$out/lib/$name"
    echo "bundled for $p: $name"
  done < <(ldd "$out/bin/$p" | awk '$2 == "=>" { print $1, $3 }')
done

# What run.sh must find there: every external library a program or the bundle names.
for f in "$out"/bin/* "$out"/lib/*; do
  readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
done | grep -E "$external_re" | grep -v '^libcuda\.so' | sort -u >"$out/NEEDED"

cp -p "$repo/tests/gpu/ddp_world1.py" "$out/py/"
cp -p "$repo/tests/gpu/run.sh" "$out/run.sh"
chmod +x "$out/run.sh"

# MANIFEST: what was built from what.
{
  rev=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
  if [ -n "$(git -C "$repo" status --porcelain 2>/dev/null)" ]; then rev="$rev (working tree modified)"; fi
  echo "metronome GPU checks, made by tests/gpu/prepare.sh"
  echo "git: $rev"
  echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version | head -1)"
  echo "needs on the GPU machine: $(tr '\n' ' ' <"$out/NEEDED")libcuda.so.1 (driver), python3 with torch, nvidia-smi"
  echo
  printf '%-34s %10s  %-64s  %s\n' file bytes sha256 glibc
  (cd "$out" && find . -type f ! -name MANIFEST | sed 's|^\./||' | sort) | while read -r f; do
    glibc=""
    if [ "$(head -c 4 "$out/$f" | od -An -c | tr -d ' ')" = '177ELF' ]; then
      glibc=$(objdump -T "$out/$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
    fi
    printf '%-34s %10s  %-64s  %s\n' "$f" "$(stat -c %s "$out/$f")" \
      "$(sha256sum "$out/$f" | cut -d' ' -f1)" "$glibc"
  done
} >"$out/MANIFEST"

bytes=$(du -sb "$out" | cut -f1)
echo "prepared $out: $((bytes / 1024)) KiB in $(find "$out" -type f | wc -l) files"
if [ "$bytes" -ge $((64 * 1024 * 1024)) ]; then
  echo "prepare.sh: the folder is 64 MiB or more: it cannot travel to the GPU machine" >&2
  exit 1
fi
