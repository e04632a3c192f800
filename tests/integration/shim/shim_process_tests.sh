#!/usr/bin/env bash
# Process-level tests of libmetronome.so under LD_PRELOAD. Usage:
#   shim_process_tests.sh <check> <libmetronome.so> <program> [build_dir]
# Checks: equivalence (real NCCL), natural_pace, reentrancy, missing, threads, fork, idle, off,
# static, install, nonblocking, revoke, traffic_class.
# In sanitizer builds METRONOME_TEST_PRELOAD_PREFIX holds the sanitizer runtime, which must come
# first in LD_PRELOAD.
set -euo pipefail
check=$1
shim=$2
prog=$3
build_dir=${4:-}
preload="${METRONOME_TEST_PRELOAD_PREFIX:+$METRONOME_TEST_PRELOAD_PREFIX:}$shim"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export METRONOME_SCHEDULER=${METRONOME_SCHEDULER:-tcp://127.0.0.1:1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export METRONOME_SHARE_DIR=$tmp  # the node segments (node sharing) stay out of /dev/shm
fail() { echo "FAIL: $*" >&2; exit 1; }

case "$check" in
equivalence)
  "$prog" >"$tmp/plain.txt" 2>"$tmp/plain.err" || fail "probe failed without the shim"
  LD_PRELOAD="$preload" "$prog" >"$tmp/shim.txt" 2>"$tmp/shim.err" || fail "probe failed with the shim"
  grep -q '^# ncclAllReduce from .*libmetronome.so' "$tmp/shim.txt" ||
    fail "the shim did not interpose ncclAllReduce: $(head -1 "$tmp/shim.txt")"
  grep -q '^# ncclAllReduce from .*libnccl.so' "$tmp/plain.txt" || fail "probe not linked to NCCL"
  grep -v '^#' "$tmp/plain.txt" >"$tmp/a"
  grep -v '^#' "$tmp/shim.txt" >"$tmp/b"
  diff -u "$tmp/a" "$tmp/b" || fail "results differ with the shim"
  grep -q '^version 22809$' "$tmp/b" || fail "unexpected NCCL version"
  grep -q 'ncclAllReduce(null comm) -> 4' "$tmp/b" || fail "null comm is not ncclInvalidArgument"
  echo "identical results over $(grep -c . "$tmp/a") lines"
  ;;
natural_pace)
  export FAKE_NCCL_NS_PER_BYTE=0.02
  best() { sort -n | head -1; }
  # Alternating runs, best median of each: the machine's load is noise for both alike.
  for _ in 1 2 3; do
    "$prog" iterate 20 50000 | awk '/median_iteration_us/ {print $2}' >>"$tmp/plain"
    LD_PRELOAD="$preload" "$prog" iterate 20 50000 2>>"$tmp/shim.err" |
      awk '/median_iteration_us/ {print $2}' >>"$tmp/shim"
  done
  p=$(best <"$tmp/plain")
  s=$(best <"$tmp/shim")
  echo "median iteration without shim ${p} us, with shim (no scheduler) ${s} us"
  awk -v p="$p" -v s="$s" 'BEGIN { exit !(s <= p * 1.05 && s >= p * 0.95) }' ||
    fail "iteration time with the shim differs by more than 5 %"
  ;;
reentrancy)
  METRONOME_LOG=info LD_PRELOAD="$preload" "$prog" bcast 10 >/dev/null 2>"$tmp/err" || fail "bcast run failed"
  grep -q 'collectives=10 ' "$tmp/err" || { cat "$tmp/err"; fail "ncclBcast counted other than once per call"; }
  echo "10 ncclBcast calls (each calling ncclBroadcast inside NCCL) counted as 10 collectives"
  ;;
nonblocking)
  # As PyTorch with TORCH_NCCL_USE_COMM_NONBLOCKING=1: init returns ncclInProgress and is polled.
  METRONOME_LOG=info LD_PRELOAD="$preload" "$prog" nonblocking >"$tmp/out" 2>"$tmp/err" ||
    { cat "$tmp/out" "$tmp/err"; fail "nonblocking run failed"; }
  grep -q 'nonblocking polls 3 calls_ok 20' "$tmp/out" || { cat "$tmp/out"; fail "the communicator did not become ready"; }
  grep -q 'destroyed: job=.* rank=2 collectives=20 ' "$tmp/err" ||
    { cat "$tmp/err"; fail "the shim did not track the nonblocking communicator as rank 2 with 20 collectives"; }
  echo "a nonblocking communicator: ready after 3 polls, tracked as rank 2 of 4, 20 collectives"
  ;;
revoke)
  METRONOME_LOG=info LD_PRELOAD="$preload" "$prog" revoke >"$tmp/out" 2>"$tmp/err" ||
    { cat "$tmp/out" "$tmp/err"; fail "revoke run failed"; }
  grep -q 'revoked refused 5' "$tmp/out" || { cat "$tmp/out"; fail "NCCL did not see the revoke"; }
  grep -q 'revoked: no longer tracked or gated' "$tmp/err" || { cat "$tmp/err"; fail "no log line for the revoke"; }
  grep -q 'destroyed: .* collectives=5 ' "$tmp/err" || { cat "$tmp/err"; fail "calls after the revoke were tracked"; }
  echo "ncclCommRevoke: reaches NCCL, the communicator is no longer tracked, freed at destroy"
  ;;
traffic_class)
  # No map: NCCL's default (undefined) stays.
  LD_PRELOAD="$preload" "$prog" traffic_class >"$tmp/none" 2>/dev/null || fail "traffic_class run failed"
  grep -q 'traffic_class undefined -2147483648 set 7 split -2147483648 app_config -2147483648' "$tmp/none" ||
    { cat "$tmp/none"; fail "without METRONOME_TRAFFIC_CLASS the shim changed a config"; }
  for prio in high:46 normal:26 low:10; do
    METRONOME_TRAFFIC_CLASS=high=46,normal=26,low=10 METRONOME_PRIORITY=${prio%%:*} \
      LD_PRELOAD="$preload" "$prog" traffic_class >"$tmp/out" 2>/dev/null || fail "traffic_class run failed"
    # The application's own 7 and the split that inherits its parent's config stay; its config
    # struct is not written.
    grep -q "traffic_class undefined ${prio##*:} set 7 split -2147483648 app_config -2147483648" "$tmp/out" ||
      { cat "$tmp/out"; fail "priority ${prio%%:*}: expected trafficClass ${prio##*:}"; }
  done
  echo "trafficClass from METRONOME_TRAFFIC_CLASS by priority (46/26/10); an application's value and a config-less split kept"
  ;;
missing)
  LD_PRELOAD="$preload" "$prog" missing >"$tmp/out" 2>"$tmp/err" || fail "missing run failed"
  grep -q 'ncclAlltoAll -> 3' "$tmp/out" || { cat "$tmp/out"; fail "missing symbol must give ncclInternalError"; }
  grep -q 'no NCCL in this process provides pncclAlltoAll' "$tmp/err" || fail "no log line for the missing symbol"
  echo "a function absent from the loaded NCCL returns ncclInternalError with one log line"
  ;;
threads)
  LD_PRELOAD="$preload" "$prog" libs >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; fail "libs run failed"; }
  grep -q '^threads 2$' "$tmp/out" || { cat "$tmp/out"; fail "the shim added more than one thread"; }
  if grep -q 'libzmq' "$tmp/out"; then fail "libzmq loaded without CURVE"; fi
  echo "with a communicator the shim adds exactly one thread and loads no library"
  ;;
fork)
  METRONOME_NODE_SHARE=0 LD_PRELOAD="$preload" "$prog" fork >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; fail "fork run failed"; }
  grep -q 'child exit 0' "$tmp/out" || { cat "$tmp/out" "$tmp/err"; fail "the child failed"; }
  grep -q 'child threads 1$' "$tmp/out" || { cat "$tmp/out"; fail "the child inherited threads"; }
  test "$(grep -c 'scheduler client started' "$tmp/err")" -eq 2 || { cat "$tmp/err"; fail "the child did not start its own client"; }
  # Sharing the node (the default), the child's communicator of the same job (METRONOME_JOB)
  # follows the parent, which still leads: the lock did not go with the fork.
  METRONOME_JOB=forkjob LD_PRELOAD="$preload" "$prog" fork >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; fail "shared fork run failed"; }
  grep -q 'child exit 0' "$tmp/out" || { cat "$tmp/out" "$tmp/err"; fail "the child failed (shared)"; }
  test "$(grep -c 'scheduler client started' "$tmp/err")" -eq 1 || { cat "$tmp/err"; fail "the child connected beside its parent"; }
  grep -q 'follows the rank that reports for node' "$tmp/err" || { cat "$tmp/err"; fail "the child did not follow its parent"; }
  echo "fork: the child starts clean (1 thread) and creates its own client; sharing the node, it follows its parent"
  ;;
idle)
  METRONOME_LOG=debug LD_PRELOAD="$preload" "$prog" idle >"$tmp/out" 2>"$tmp/err" || fail "idle run failed"
  grep -q '^threads 1$' "$tmp/out" || { cat "$tmp/out"; fail "the shim started a thread in a process without NCCL"; }
  if grep -q 'scheduler client started' "$tmp/err"; then fail "the shim connected without NCCL"; fi
  grep -q '^libzmq not loaded$' "$tmp/out" || fail "libzmq was loaded in a process without NCCL"
  echo "a process that never calls NCCL keeps 1 thread, no socket, no libzmq"
  ;;
off)
  METRONOME_MODE=off METRONOME_LOG=debug LD_PRELOAD="$preload" "$prog" libs >"$tmp/out" 2>"$tmp/err" || fail "off run failed"
  grep -q '^threads 1$' "$tmp/out" || { cat "$tmp/out"; fail "off mode started a thread"; }
  if grep -q 'libzmq' "$tmp/out"; then fail "off mode loaded libzmq"; fi
  if grep -q 'communicator' "$tmp/err"; then fail "off mode tracked a communicator"; fi
  echo "off mode: pure forwarding, no thread, no libzmq, nothing tracked"
  ;;
static)
  LD_PRELOAD="$preload" "$prog" >"$tmp/out" 2>"$tmp/err" || fail "static run failed"
  grep -q '^ok$' "$tmp/out" || fail "the program did not run"
  grep -q 'linked statically' "$tmp/err" || { cat "$tmp/err"; fail "no log line about a static NCCL"; }
  if grep -q 'communicator .* created' "$tmp/err"; then fail "a static NCCL's calls were intercepted?"; fi
  echo "statically linked NCCL detected and logged: $(grep 'linked statically' "$tmp/err")"
  ;;
install)
  [ -n "$build_dir" ] || fail "install needs the build folder"
  cmake --install "$build_dir" --component shim --prefix "$tmp/prefix" >"$tmp/install.log" || fail "install failed"
  dir="$tmp/prefix/lib/metronome"
  [ -f "$dir/libmetronome.so" ] || fail "no libmetronome.so in $dir"
  [ -f "$dir/libzmq.so.5" ] || fail "libzmq.so.5 not bundled"
  glibc='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libmvec)[.-]'
  for lib in "$dir"/*.so*; do
    while read -r name arrow path _; do
      [ "$arrow" = "=>" ] || continue
      if [[ "$name" =~ $glibc ]]; then continue; fi
      case "$path" in "$dir"/*) ;; *) fail "$(basename "$lib") resolves $name to $path, outside the bundle";; esac
    done < <(ldd "$lib")
  done
  readelf -d "$dir/libmetronome.so" | grep -Eq 'R(UN)?PATH.*\[\$ORIGIN\]' || fail "libmetronome.so has no RPATH \$ORIGIN"
  readelf -d "$dir/libmetronome.so" | awk '/NEEDED/ {print $5}' | tr -d '[]' | while read -r n; do
    [[ "$n" =~ $glibc ]] || fail "libmetronome.so needs $n (beyond glibc)"
  done
  nm -D --defined-only "$dir/libmetronome.so" | awk '{print $3}' | sort >"$tmp/exported"
  cat >"$tmp/expected" <<'LIST'
ncclAllGather
ncclAllReduce
ncclAlltoAll
ncclBcast
ncclBroadcast
ncclCommAbort
ncclCommDestroy
ncclCommFinalize
ncclCommInitAll
ncclCommInitRank
ncclCommInitRankConfig
ncclCommInitRankScalable
ncclCommRevoke
ncclCommShrink
ncclCommSplit
ncclGather
ncclGroupEnd
ncclGroupStart
ncclRecv
ncclReduce
ncclReduceScatter
ncclScatter
ncclSend
LIST
  diff -u "$tmp/expected" "$tmp/exported" || fail "libmetronome.so exports more or other than the wrapped NCCL names"
  # At run time, libzmq (loaded for CURVE only) and its dependencies come from the bundle.
  METRONOME_CURVE_SERVERKEY='rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7' \
    LD_PRELOAD="$dir/libmetronome.so" "$prog" libs >"$tmp/libs" 2>"$tmp/err" || { cat "$tmp/err"; fail "libs run failed"; }
  grep -q "^lib $dir/libzmq.so.5" "$tmp/libs" || { cat "$tmp/libs" "$tmp/err"; fail "libzmq not loaded from the bundle"; }
  for dep in libsodium libpgm libnorm libgssapi_krb5; do
    if grep -q "^lib .*/$dep" "$tmp/libs"; then
      grep -q "^lib $dir/$dep" "$tmp/libs" || fail "$dep loaded from outside the bundle"
    fi
  done
  echo "bundle: $(ls "$dir" | tr '\n' ' ')"
  echo "exports: $(wc -l <"$tmp/exported") wrapped NCCL names, nothing else; all dependencies inside the bundle or glibc"
  ;;
*)
  fail "unknown check $check"
  ;;
esac
