#!/usr/bin/env bash
# The GPU checks of libmetronome.so, run on a machine with one NVIDIA GPU from the folder that
# tests/gpu/prepare.sh made. Needs only that folder, nvidia-smi, and python3 with torch (CUDA):
# no repository, compiler or -dev package.
#   run.sh [--libs-only] [DIR]        (DIR: the folder; default: where run.sh is)
# 1. Libraries: every ELF file of the folder through ldd, with the library path the C++ checks
#    get (libcudart and libnccl: the torch wheel's, else the CUDA toolkit's). libcuda.so.1 comes
#    with the driver. --libs-only stops here.
# 2. No GPU (nvidia-smi absent or failing): says "no GPU" and exits 77.
# 3. The checks, each under a timeout, all within about 4.5 minutes: the device gate's release
#    error and the shim's timer calibration (device_gate_check), late phases (the same, max wait
#    10 ms), taking turns on the stream (turns_check), the shim's cost per collective
#    (collective_cost: no shim, off, observe, enforce), PyTorch DDP unchanged (ddp_world1.py with
#    and without the shim), and DDP under a forced hold of its NCCL stream (gpu_scheduler +
#    ddp_world1.py --hold-period-ms). One table at the end.
# Exit: 0 every check passed; 1 a check failed or could not run; 2 a library is missing; 77 no GPU.
# Logs: DIR/logs (or METRONOME_GPU_LOGS), the table in logs/table.txt.
set -uo pipefail
libs_only=0
if [ "${1:-}" = --libs-only ]; then
  libs_only=1
  shift
fi
dir=$(cd "${1:-$(dirname "$0")}" && pwd) || exit 2
if [ ! -f "$dir/MANIFEST" ] || [ ! -f "$dir/NEEDED" ] || [ ! -f "$dir/lib/libmetronome.so" ]; then
  echo "run.sh: $dir is not a folder made by prepare.sh"
  exit 2
fi
py=${PYTHON:-python3}
start=$SECONDS
deadline=$((start + 270))
is_elf() { [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

# ---- 1. Libraries ------------------------------------------------------------------------------
# Where libcudart and libnccl may be: the pip wheels torch uses (the nvidia.* packages) first, then
# a toolkit. Only the C++ checks get them on LD_LIBRARY_PATH; torch keeps its own (its RPATH).
candidates=()
if command -v "$py" >/dev/null 2>&1; then
  while IFS= read -r d; do [ -n "$d" ] && candidates+=("$d"); done < <("$py" - 2>/dev/null <<'EOF'
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
dirs = []
for r in roots:
    for f in sorted(glob.glob(os.path.join(r, "**", "lib*.so*"), recursive=True)):
        if os.path.basename(f).startswith(("libnccl.so", "libcudart.so")):
            if os.path.dirname(f) not in dirs:
                dirs.append(os.path.dirname(f))
print("\n".join(dirs))
EOF
  )
fi
for d in ${CUDA_HOME:+"$CUDA_HOME/lib64" "$CUDA_HOME/lib"} /usr/local/cuda/lib64 /usr/local/cuda/lib \
  /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && [[ " ${candidates[*]} " != *" $d "* ]] && candidates+=("$d")
done
llp=""
tolerated=()
while read -r name; do
  [ -n "$name" ] || continue
  found=""
  for d in "${candidates[@]}"; do
    if [ -e "$d/$name" ]; then
      found=$d
      break
    fi
  done
  if [ -n "$found" ]; then
    echo "found $name in $found"
    case ":$llp:" in *":$found:"*) ;; *) llp=${llp:+$llp:}$found ;; esac
  elif ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$name "; then
    echo "found $name through ldconfig"
  else
    # No wheel and no toolkit on this machine: say where we looked; ldd will not find it either.
    echo "absent on this machine: $name (looked in: ${candidates[*]:-no candidate folder}; ldconfig)"
    tolerated+=("$name")
  fi
done <"$dir/NEEDED"
llp=$llp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

unresolved=0
while IFS= read -r f; do
  is_elf "$f" || continue
  out=$(LD_LIBRARY_PATH=$llp ldd "$f" 2>&1)
  # Missing libraries and missing symbol versions; libcuda.so.1 is the driver's.
  bad=$(grep 'not found' <<<"$out" | grep -v '^[[:space:]]*libcuda\.so\.1 ')
  for t in "${tolerated[@]}"; do bad=$(grep -v "^[[:space:]]*$t " <<<"$bad"); done
  # Where each library comes from: the folder, glibc, or the GPU machine's CUDA (cudart, nccl,
  # the driver). Anything else was found on this machine only by chance: the folder lacks it.
  from=$(awk -v lib="$dir/lib/" '$2 == "=>" && $3 != "not" {
      p = $3; sub(/\/bin\/\.\.\/lib\//, "/lib/", p)
      if (index(p, lib) == 1) { n = $1; sub(/\.so.*/, "", n); b = b " " n }
      else if ($1 ~ /^lib(cudart|nccl|cuda)\./) e = e (e == "" ? "" : ", ") $1 " -> " p
      else if ($1 !~ /^(ld-linux.*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libmvec)\.so/)
        x = x "\n" $1 " => " p " (not in the folder, not glibc, not CUDA: may be absent on the GPU machine)"
    } END { s = (b == "" ? "" : "bundle:" b); if (e != "") s = s (s == "" ? "" : "; ") e
            printf "%s%s", s, x }' <<<"$out")
  outside=$(sed -n '2,$p' <<<"$from")
  from=$(head -1 <<<"$from")
  bad=$(printf '%s\n%s' "$bad" "$outside" | grep -v '^$')
  if [ -n "$bad" ]; then
    unresolved=$((unresolved + 1))
    echo "ldd ${f#"$dir"/}: UNRESOLVED"
    # shellcheck disable=SC2001  # one indent for every line
    sed 's/^[[:space:]]*/    /' <<<"$bad"
  else
    echo "ldd ${f#"$dir"/}: ok${from:+ ($from)}"
  fi
done < <(find "$dir/bin" "$dir/lib" -type f | sort)
if [ $unresolved -ne 0 ]; then
  echo "libraries: $unresolved files with unresolved libraries"
  exit 2
fi
echo "libraries: all resolved${tolerated[*]:+ but ${tolerated[*]} (absent on this machine)}" \
  "(libcuda.so.1 comes with the driver)"
[ $libs_only -eq 1 ] && exit 0

# ---- 2. A GPU? ---------------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "no GPU (nvidia-smi not found): the checks are skipped"
  exit 77
fi
if ! gpus=$(timeout 30 nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$gpus"; then
  echo "no GPU (nvidia-smi -L: $(head -1 <<<"$gpus")): the checks are skipped"
  exit 77
fi
echo "$gpus"
logs=${METRONOME_GPU_LOGS:-$dir/logs}
{ mkdir -p "$logs" && [ -w "$logs" ]; } 2>/dev/null || logs=$(mktemp -d)

# ---- 3. The checks -----------------------------------------------------------------------------
rows=()
failed=0
declare -A rcs  # each step's exit status
row() {  # row CHECK FIGURE VERDICT; PASS, INFO and WARN do not fail the run
  rows+=("$1"$'\t'"$2"$'\t'"$3")
  case $3 in PASS* | INFO* | WARN*) ;; *) failed=1 ;; esac
}
# step NAME LIMIT_S CMD...: CMD with stdout/stderr in logs/NAME.out/.err, under a timeout cut to
# what is left before the deadline; CMD's status (124: timed out), 125 when no time is left.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - SECONDS))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 15 ]; then
    echo "step $name: skipped (deadline)"
    return 125
  fi
  echo "step $name (at most ${limit} s)"
  timeout -k 5 "$limit" "$@" >"$logs/$name.out" 2>"$logs/$name.err"
  local rc=$?
  rcs[$name]=$rc
  return $rc
}
# why NAME: how step NAME ended, for a FAIL verdict.
why() {
  case ${rcs[$1]:-none} in
    none) echo "$1 not run" ;;
    0) echo "$1 ran" ;;
    124 | 137) echo "$1 timed out" ;;
    125) echo "$1 skipped: deadline" ;;
    *) echo "$1 rc ${rcs[$1]}: $(grep -v '^[[:space:]]*$' "$logs/$1.err" 2>/dev/null | tail -1 | cut -c1-100)" ;;
  esac
}
# kv FILE PREFIX KEY: the value of KEY=... on the last line of FILE that starts with "PREFIX "
# (or has it after a "[rank0]:" that torchrun may put in front) and has KEY=.
kv() {
  grep -E "(^|\]:)$2 .*$3=" "$1" 2>/dev/null | tail -1 | tr ' ' '\n' | sed -n "s/^$3=//p" | head -1
}
# calc EXPR: awk arithmetic (comparisons give 1 or 0); abs() is there.
calc() { awk "function abs(x) { return x < 0 ? -x : x } BEGIN { printf \"%s\", ($1) }"; }
yes_no() { [ "$1" = 1 ] && echo "$2" || echo "$3"; }
port() { echo "tcp://127.0.0.1:$((20000 + RANDOM % 20000))"; }
shim=$dir/lib/libmetronome.so
# The C++ checks under the shim, with the cluster's default gate (auto: device when CUDA is up).
shim_env=(env LD_LIBRARY_PATH="$llp" LD_PRELOAD="$shim" METRONOME_LOG=info METRONOME_GATE=auto)

# Device gate: the release error, and the shim's calibration against an independent bracket.
ep=$(port)
step gate 60 "${shim_env[@]}" METRONOME_SCHEDULER="$ep" "$dir/bin/device_gate_check" "$ep" 60
rc=$?
g=$logs/gate.out
loaded=$(grep -o 'spin kernel loaded for sm_[0-9]*' "$logs/gate.err" | head -1)
row "device gate kernel" "${loaded:-not loaded: $(grep -m1 'device gate' "$logs/gate.err")}" \
  "$([ -n "$loaded" ] && echo PASS || echo "FAIL ($(why gate))")"
row "gate release after the window opens" \
  "p50 $(kv "$g" device_gate release_us_p50) µs, p99 $(kv "$g" device_gate release_us_p99) µs, min $(kv "$g" device_gate release_us_min), max $(kv "$g" device_gate release_us_max) (limits: p50 in [-5, 20), p99 < 1000); host held p50 $(kv "$g" device_gate host_held_us_p50) µs, max $(kv "$g" device_gate host_held_us_max) µs" \
  "$(yes_no "$([ $rc -eq 0 ] && echo 1)" PASS "FAIL ($(why gate))")"
shim_cal=$(sed -n 's/.*(host - gpu = \(-\{0,1\}[0-9]*\) ns).*/\1/p' "$logs/gate.err" | head -1)
lo=$(kv "$g" calibration start_lo_ns)
hi=$(kv "$g" calibration start_hi_ns)
tick=$(kv "$g" calibration tick_ns)
drift=$(kv "$g" calibration drift_ns)
over=$(kv "$g" calibration over_s)
if [ -n "$shim_cal" ] && [ -n "$lo" ] && [ -n "$hi" ] && [ -n "$tick" ]; then
  # The true offset lies in [lo, hi] (give or take a tick): the shim is off by at most err.
  err=$(calc "(($shim_cal) - ($lo) > ($hi) - ($shim_cal)) ? ($shim_cal) - ($lo) : ($hi) - ($shim_cal)")
  inside=$(calc "($shim_cal) >= ($lo) - ($tick) && ($shim_cal) <= ($hi) + ($tick)")
  row "timer calibration (shim vs bracket)" \
    "shim host-gpu $shim_cal ns; bracket [$lo, $hi] ns (width $(calc "($hi) - ($lo)") ns, globaltimer tick $tick ns): shim off by <= $err ns" \
    "$(yes_no "$inside" PASS "FAIL (outside the bracket)")"
  row "timer drift, GPU vs host" \
    "$drift ns over $over s ($(printf '%.3f' "$(calc "($drift) / ($over) / 1000")") ppm; the shim calibrates once per context)" \
    "$(yes_no "$(calc "abs($drift) <= 2000 + ($tick)")" PASS "WARN (the gate's aim moves by this much)")"
else
  row "timer calibration (shim vs bracket)" "shim '$shim_cal', bracket '$lo'..'$hi'" "FAIL ($(why gate))"
fi

# Late phases: realign at most once in 4 phases, else fail open (the kernel's gate memory).
ep=$(port)
step realign 60 "${shim_env[@]}" METRONOME_SCHEDULER="$ep" "$dir/bin/device_gate_check" "$ep" 60 10
rc=$?
r=$logs/realign.out
row "late phases realign / fail open" \
  "late $(kv "$r" device_gate_realign late), realigned $(kv "$r" device_gate_realign realigned), failed open $(kv "$r" device_gate_realign failed_open), closest realignments $(kv "$r" device_gate_realign min_gap_phases) phases apart (>= 4); shim: $(grep -o 'failed_open=[0-9]* realigned=[0-9]*' "$logs/realign.err" | tail -1)" \
  "$(yes_no "$([ $rc -eq 0 ] && echo 1)" PASS "FAIL ($(why realign))")"

# Taking turns on the stream: the gate kernel holds for a partner's relayed turn and stamps the
# job's own edges (turns_check: every other phase has the partner in its phase).
ep=$(port)
step turns 60 "${shim_env[@]}" METRONOME_SCHEDULER="$ep" "$dir/bin/turns_check" "$ep" 40
rc=$?
t=$logs/turns.out
row "turns: the stream waits for the partner's end" \
  "held $(kv "$t" turns held) of $(kv "$t" turns partner_phases) phases with the partner in its phase; went on $(kv "$t" turns after_end_us_p50) µs (p50), $(kv "$t" turns after_end_us_max) µs (max) after its end went out (limit p50 < 2000); free phases $(kv "$t" turns free_us_p50) µs (p50); host held p50 $(kv "$t" turns host_held_us_p50) µs" \
  "$(yes_no "$([ $rc -eq 0 ] && echo 1)" PASS "FAIL ($(why turns))")"
row "turns: the job's own edges from the stream" \
  "begin vs release stamp $(kv "$t" turns begin_edge_err_us_p50) µs (p50), $(kv "$t" turns begin_edge_err_us_max) µs (max); end vs burst done $(kv "$t" turns end_edge_err_us_p50) µs (p50), $(kv "$t" turns end_edge_err_us_max) µs (max); $(kv "$t" turns edges) edges (limits: p50 < 50 µs)" \
  "$(yes_no "$([ $rc -eq 0 ] && echo 1)" PASS "FAIL ($(why turns))")"

# Cost per collective: no shim, off, observe, and enforce in an always-open window.
step cost_none 60 env LD_LIBRARY_PATH="$llp" "$dir/bin/collective_cost" none
step cost_off 60 "${shim_env[@]}" METRONOME_MODE=off "$dir/bin/collective_cost" off
ep=$(port)
step cost_observe 60 "${shim_env[@]}" METRONOME_MODE=observe METRONOME_SCHEDULER="$ep" \
  "$dir/bin/collective_cost" observe "$ep"
ep=$(port)
step cost_enforce 60 "${shim_env[@]}" METRONOME_MODE=enforce METRONOME_SCHEDULER="$ep" \
  "$dir/bin/collective_cost" enforce "$ep"
enforce_gate=$(grep -o 'created .* gate=[a-z]*' "$logs/cost_enforce.err" | grep -o 'gate=[a-z]*' | head -1)
enforce_tt=$(grep -c 'timetable v' "$logs/cost_enforce.err")
cost() { grep "^cost label=$1 bytes=$2 " "$logs/cost_$1.out" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$3=//p"; }
for bytes in 1024 67108864; do
  size=$([ $bytes = 1024 ] && echo "1 KiB" || echo "64 MiB")
  for regime in burst phase; do
    if [ $regime = burst ]; then
      gk=burst_gpu_us hk=burst_host_ns unit=ns h_lim=1000
    else
      gk=phase_gpu_us hk=phase_host_us unit=µs h_lim=2
    fi
    g0=$(cost none $bytes $gk)
    h0=$(cost none $bytes $hk)
    gfig="GPU µs/collective: none ${g0:-?}"
    hfig="host $unit/call: none ${h0:-?}"
    verdict=PASS
    for m in off observe enforce; do
      gm=$(cost $m $bytes $gk)
      hm=$(cost $m $bytes $hk)
      gfig="$gfig, $m ${gm:-?}"
      hfig="$hfig, $m ${hm:-?}"
      # Within 3 % + 1 µs on the GPU and h_lim on the host; at an enforced phase start the gate
      # kernel (one launch, which reads its slot over PCIe) may add 20 µs and 10 µs.
      gl="($g0) * 1.03 + 1"
      hl="($h0) + $h_lim"
      if [ $m = enforce ] && [ $regime = phase ]; then
        gl="($g0) * 1.03 + 20"
        hl="($h0) + 10"
      fi
      if [ -z "$g0" ] || [ -z "$h0" ]; then
        verdict="FAIL ($(why cost_none))"
      elif [ -z "$gm" ] || [ -z "$hm" ]; then
        verdict="FAIL ($(why cost_$m))"
      elif [ "$(calc "($gm) <= $gl && ($hm) <= $hl")" != 1 ]; then
        verdict="FAIL ($m over the limit)"
      fi
    done
    extra=""
    [ $regime = phase ] && extra=" [enforce: ${enforce_gate:-no gate?}, $enforce_tt timetable lines in its log]"
    row "shim cost, $size all-reduce, $regime" "$gfig; $hfig$extra" "$verdict"
  done
done

# PyTorch DDP, world size 1, with and without the shim (enforce, no scheduler: it tracks and
# never holds), alternating so that a drift of the GPU's clocks falls on both. torch runs as it
# is (its own libraries), the shim preloaded.
torch_info=$(timeout 60 "$py" - 2>&1 <<'EOF' | tail -1
import torch
v = torch.cuda.nccl.version()
v = ".".join(map(str, v)) if isinstance(v, tuple) else v
print(torch.__version__, "cuda", torch.version.cuda, "nccl", v, "gpu", torch.cuda.is_available())
EOF
)
echo "torch: $torch_info"
ddp=("$py" -m torch.distributed.run --standalone --nproc_per_node=1 "$dir/py/ddp_world1.py")
if [[ $torch_info == *"gpu True"* ]]; then
  for i in 1 2; do
    step "ddp_plain$i" 120 "${ddp[@]}"
    step "ddp_shim$i" 120 env LD_PRELOAD="$shim" METRONOME_SCHEDULER=tcp://127.0.0.1:1 \
      METRONOME_LOG=info "${ddp[@]}"
  done
  p1=$(kv "$logs/ddp_plain1.out" ddp median_iter_ms)
  p2=$(kv "$logs/ddp_plain2.out" ddp median_iter_ms)
  s1=$(kv "$logs/ddp_shim1.out" ddp median_iter_ms)
  s2=$(kv "$logs/ddp_shim2.out" ddp median_iter_ms)
  la=$(kv "$logs/ddp_plain1.out" ddp final_loss)
  lb=$(kv "$logs/ddp_shim1.out" ddp final_loss)
  comms=$(grep -c 'communicator .* created' "$logs/ddp_shim1.err")
  gates=$(grep -o 'gate=[a-z]*' "$logs/ddp_shim1.err" | sort -u | tr '\n' ' ')
  if [ -n "$la" ] && [ -n "$lb" ]; then
    same=$(calc "abs(($la) - ($lb)) <= 1e-4 * (abs($la) > 1 ? abs($la) : 1)")
    row "DDP under the shim: loss" \
      "without $la, with $lb; communicators seen by the shim: $comms (${gates% })" \
      "$(yes_no "$([ "$same" = 1 ] && [ "$comms" -ge 1 ] && echo 1)" PASS FAIL)"
  else
    row "DDP under the shim: loss" "no result" "FAIL ($(why ddp_plain1); $(why ddp_shim1))"
  fi
  if [ -n "$p1" ] && [ -n "$p2" ] && [ -n "$s1" ] && [ -n "$s2" ]; then
    delta=$(calc "(($s1) + ($s2)) / (($p1) + ($p2)) * 100 - 100")
    spread=$(calc "abs(($p1) - ($p2)) / (($p1) + ($p2)) * 200")
    row "DDP under the shim: iteration" \
      "without $p1, $p2 ms; with $s1, $s2 ms: $(printf '%+.2f' "$delta") % (limit 1 %; without vs without: $(printf '%.2f' "$spread") %)" \
      "$(yes_no "$(calc "abs($delta) <= 1")" PASS FAIL)"
  else
    row "DDP under the shim: iteration" "no result" "FAIL ($(why ddp_plain2); $(why ddp_shim2))"
  fi

  # Forced hold: windows open at every multiple of P (about 3 iterations), late slack and max
  # wait P/2; the script starts each iteration `lead` ms before a window opens, so the gate holds
  # the NCCL stream from the first bucket until then. Device gate (auto), then the host gate.
  if [ -n "$p1" ]; then
    period=$(calc "int(($p1) * 3 + 10)")
    for gate in auto host; do
      ep=$(port)
      env LD_LIBRARY_PATH="$llp" "$dir/bin/gpu_scheduler" "$ep" $((period * 1000)) 1000 \
        $((period * 500)) $((period * 500)) 150 >"$logs/sched_$gate.out" 2>&1 &
      sched=$!
      step "hold_$gate" 120 env LD_PRELOAD="$shim" METRONOME_SCHEDULER="$ep" METRONOME_LOG=info \
        METRONOME_GATE=$gate "${ddp[@]}" --hold-period-ms "$period" --iters 15
      kill "$sched" 2>/dev/null
      wait "$sched" 2>/dev/null
      h=$logs/hold_$gate.out
      used=$(grep -o 'gate=[a-z]*' "$logs/hold_$gate.err" | sort -u | tr '\n' ' ')
      counters=$(grep -o 'phases=[0-9]* gated=[0-9]*' "$logs/hold_$gate.err" | tail -1)
      base=$(kv "$h" ddp_hold base_iter_ms)
      for lead in h1 h2; do
        it=$(kv "$h" "ddp_hold $lead" iter_ms)
        ov=$(kv "$h" "ddp_hold $lead" predicted_overlap_ms)
        se=$(kv "$h" "ddp_hold $lead" predicted_serial_ms)
        at=$(kv "$h" "ddp_hold $lead" lead_ms)
        check="forced hold, $gate gate, window at $lead"
        if [ -z "$it" ] || [ -z "$ov" ] || [ -z "$se" ]; then
          row "$check" "no result" "FAIL ($(why "hold_$gate"))"
          continue
        fi
        fig="window opens $at ms into the iteration: iteration $it ms; max(backward, window) + rest = $ov ms, compute + hold <= $se ms (no hold: $base ms) [shim: ${used}${counters}]"
        near=$(calc "abs(($it) - ($ov)) <= (($ov) * 0.05 > 2 ? ($ov) * 0.05 : 2)")
        if [ $gate = host ]; then
          verdict="INFO (the host gate holds the thread that enqueues the backward)"
        elif [[ $used != *device* ]]; then
          verdict="FAIL (not the device gate: $used)"
        elif [ $lead = h1 ]; then
          # The backward keeps running: near max(...), and clearly below the serial sum.
          verdict=$(yes_no "$(calc "$near && ($it) < (($ov) + ($se)) / 2")" PASS FAIL)
        else
          # The hold is real: the iteration waits for the window.
          verdict=$(yes_no "$(calc "$near && ($it) >= ($at)")" PASS FAIL)
        fi
        row "$check" "$fig" "$verdict"
      done
    done
  fi
else
  row "PyTorch DDP" "no torch with CUDA: $torch_info" FAIL
fi

# ---- The table ---------------------------------------------------------------------------------
w=6
for r in "${rows[@]}"; do
  IFS=$'\t' read -r _ f _ <<<"$r"
  [ "${#f}" -gt "$w" ] && w=${#f}
done
{
  echo
  echo "GPU: $(head -1 <<<"$gpus"); torch: $torch_info; metronome $(sed -n 's/^git: //p' "$dir/MANIFEST")"
  printf '%-44s | %-*s | %s\n' check "$w" figure verdict
  for r in "${rows[@]}"; do
    IFS=$'\t' read -r c f v <<<"$r"
    printf '%-44s | %-*s | %s\n' "$c" "$w" "$f" "$v"
  done
  echo "elapsed $((SECONDS - start)) s; logs: $logs"
} | tee "$logs/table.txt"
exit $failed
