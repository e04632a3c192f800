#!/usr/bin/env bash
# Regenerates the evaluation report, docs/evaluation.md, and its plots, docs/img/eval-*.png.
# Every number in the report comes from this command: it builds metronome-sim and the
# benchmarks, runs every scenario of examples/scenarios under every policy, sweeps every pair of
# the 13 models on one shared link, measures the simulator's run time against cluster size, runs
# the Google Benchmark programs, and writes the report (sim/eval/make_report.py, matplotlib from
# Debian's python3-matplotlib), with the CPU testbed's latest demo run (scripts/demo.sh).
#
#   scripts/evaluate.sh                 # build in build/eval, run everything (a few minutes)
#   METRONOME_SIM=path/to/metronome-sim scripts/evaluate.sh    # use an existing binary
#   METRONOME_BENCH_DIR=build/release/bench ...                # use existing benchmark programs
#   METRONOME_TESTBED_RESULTS=out/demo/results.json ...        # testbed figures to compare
#                      (default: out/demo/results.json if present, else out/testbed/results.json)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PY=/usr/bin/python3  # Debian's python3 with python3-matplotlib and python3-yaml
OUT="${METRONOME_EVAL_OUT:-$REPO/out/eval}"
mkdir -p "$OUT"

BENCHES=(common/bench_common planner/bench_planner shim/bench_shim extender/bench_extender
         service/bench_planning_adapter)
if [[ -z "${METRONOME_SIM:-}" || -z "${METRONOME_BENCH_DIR:-}" ]]; then
  cmake -S "$REPO" -B "$REPO/build/eval" -DCMAKE_BUILD_TYPE=Release -DMETRONOME_BUILD_TESTS=OFF \
        -DMETRONOME_BUILD_BENCH=ON > "$OUT/cmake.log"
  targets=(metronome-sim metronome-scheduler service_load_driver planning_parts_driver)
  for b in "${BENCHES[@]}"; do targets+=("$(basename "$b")"); done
  cmake --build "$REPO/build/eval" --target "${targets[@]}" -j"$(nproc)" >> "$OUT/cmake.log"
  METRONOME_SIM="${METRONOME_SIM:-$REPO/build/eval/sim/metronome-sim}"
  METRONOME_BENCH_DIR="${METRONOME_BENCH_DIR:-$REPO/build/eval/bench}"
fi
SIM="$METRONOME_SIM"
POLICIES="k8s-default,network-aware,cassini,metronome,metronome-pack,metronome-no-cushion,metronome-no-stretch,metronome-no-controller,metronome-no-yields"

echo "evaluate: scenarios" >&2
"$PY" examples/scenarios/generate.py
for s in two-jobs-one-link testbed-small newcomer-joins-pair mixed-priority-rack heterogeneous-13 \
         large-cluster; do
  echo "  $s" >&2
  "$SIM" "examples/scenarios/$s.yaml" --compare "$POLICIES" --json --links --no-progress \
    > "$OUT/$s.json"
done

echo "evaluate: heterogeneous-13 over seeds 1-6" >&2
# Per policy: the priority-weighted JCT, the high class's slowdown, and the share of the weighted
# JCT that is run time lost to contention (each job's run time × (1 − 1/slowdown), weighted by
# π = 1 + max(priority, 0)): what time scheduling acts on directly.
SEED_ROW='
import json, sys
d = json.load(sys.stdin)
def lost(r):
    w = lambda j: 1 + max(j["priority"], 0)
    run = sum(w(j) * (j["finish_s"] - j["start_s"]) * (1 - 1 / j["slowdown"]) for j in r["jobs"])
    return run / sum(w(j) * j["jct_s"] for j in r["jobs"])
print(json.dumps({"seed": int(sys.argv[1]), **{r["policy"]: {
    "weighted_jct_s": r["summary"]["weighted_jct_s"],
    "high": r["by_priority"]["high"]["mean_slowdown"],
    "contention_share": lost(r)} for r in d["runs"]}}))'
: > "$OUT/paper-seeds.jsonl"
for seed in 1 2 3 4 5 6; do
  "$SIM" examples/scenarios/heterogeneous-13.yaml --seed "$seed" --json --no-progress \
    --compare network-aware,metronome,network-aware-qos,network-aware-serial,network-aware-alone |
    "$PY" -c "$SEED_ROW" "$seed" >> "$OUT/paper-seeds.jsonl"
done

echo "evaluate: model pairs (91 pairs of the 13 models, on A100 and on T4 nodes)" >&2
"$PY" examples/scenarios/generate.py --pairs "$OUT/pairs"
: > "$OUT/pairs.jsonl"
for f in "$OUT"/pairs/pair-*.yaml; do
  name="$(basename "$f" .yaml)"
  "$SIM" "$f" --compare k8s-default,cassini,metronome,metronome-no-turns --json --no-progress |
    "$PY" -c "import json,sys; d=json.load(sys.stdin); g,a,b='$name'.split('-')[1:]; print(json.dumps({'gpu': g, 'a': a, 'b': b, **{r['policy']: {'avg_jct_s': r['summary']['avg_jct_s'], 'util': r['summary']['avg_link_utilization'], 'overlap': r['summary']['overlap_fraction']} for r in d['runs']}}))" \
    >> "$OUT/pairs.jsonl"
done

echo "evaluate: load sweep (1 high-priority job and 1-5 neighbours of unrelated periods, 3 seeds)" >&2
"$PY" examples/scenarios/generate.py --load-sweep "$OUT/load"
: > "$OUT/load-sweep.jsonl"
for f in "$OUT"/load/load-*.yaml; do
  name="$(basename "$f" .yaml)"
  "$SIM" "$f" --compare network-aware,metronome,network-aware-qos,network-aware-serial --json \
    --no-progress |
    "$PY" -c "import json,sys; d=json.load(sys.stdin); n,s='$name'.split('-')[1:]; print(json.dumps({'neighbours': int(n), 'seed': int(s[1:]), **{r['policy']: {'weighted_jct_s': r['summary']['weighted_jct_s'], 'avg_jct_s': r['summary']['avg_jct_s'], 'high': r['by_priority']['high']['mean_slowdown'], 'yields': sum(j.get('yields', 0) for j in r['jobs'])} for r in d['runs']}}))" \
    >> "$OUT/load-sweep.jsonl"
done

# The same scenarios with 20 noise seeds each (--seed: compute jitter, clock skew, profile error
# and start offsets), Metronome and none: how often a load's figures hold, not just three times.
echo "evaluate: load sweep over 20 seeds" >&2
: > "$OUT/load-sweep-seeds.jsonl"
for f in "$OUT"/load/load-*.yaml; do
  name="$(basename "$f" .yaml)"
  for seed in $(seq 1 20); do
    "$SIM" "$f" --compare network-aware,metronome --seed "$seed" --json --no-progress |
      "$PY" -c "import json,sys; d=json.load(sys.stdin); n,s='$name'.split('-')[1:]; print(json.dumps({'neighbours': int(n), 'scenario': int(s[1:]), 'seed': $seed, **{r['policy']: {'weighted_jct_s': r['summary']['weighted_jct_s'], 'avg_jct_s': r['summary']['avg_jct_s'], 'high': r['by_priority']['high']['mean_slowdown']} for r in d['runs']}}))" \
      >> "$OUT/load-sweep-seeds.jsonl"
  done
done

echo "evaluate: simulator run time against cluster size" >&2
"$PY" examples/scenarios/generate.py --scaling "$OUT/scaling"
: > "$OUT/scaling.jsonl"
for f in "$OUT"/scaling/scale-*.yaml; do
  nodes="$(basename "$f" .yaml)"; nodes="${nodes#scale-}"
  jobs="$(grep -c '^  - {name: job' "$f")"
  for p in k8s-default metronome; do
    "$SIM" "$f" --policy "$p" --json --no-progress |
      "$PY" -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({'nodes': $nodes, 'jobs': $jobs, 'policy': '$p', 'wall_s': d['summary']['wall_s'], 'events': d['summary']['events'], 'planner_s': d['scheduler']['planner_seconds'], 'simulated_s': d['summary']['makespan_s']}))" \
      >> "$OUT/scaling.jsonl"
  done
done
# The full-size cluster, one hour of it, with the peak memory of each run. Not under k8s-default:
# its random spread puts every transfer on a rack uplink that others cross, so every start and end
# re-solves the rates of all of them (hours at this size; docs/simulator.md).
echo "evaluate: the full-size cluster (8,192 nodes, 10,000 jobs, about one hour; minutes)" >&2
"$PY" examples/scenarios/generate.py --full-scale "$OUT/scaling/full-8192.yaml"
for p in network-aware metronome; do
  "$PY" - "$SIM" "$OUT/scaling/full-8192.yaml" "$p" >> "$OUT/scaling.jsonl" <<'PYEOF'
import json, resource, subprocess, sys
sim, scenario, policy = sys.argv[1:]
d = json.loads(subprocess.run([sim, scenario, "--policy", policy, "--json", "--no-progress"],
                              check=True, capture_output=True, text=True).stdout)
rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"nodes": 8192, "jobs": len(d["jobs"]), "policy": policy, "recipe": "full-scale",
                  "wall_s": d["summary"]["wall_s"], "events": d["summary"]["events"],
                  "planner_s": d["scheduler"].get("planner_seconds", 0.0),
                  "simulated_s": d["summary"]["makespan_s"], "peak_rss_mb": rss_mb,
                  "overlap_fraction": d["summary"]["overlap_fraction"]}))
PYEOF
done

echo "evaluate: testbed-small over seeds (initial phase offsets)" >&2
: > "$OUT/testbed-seeds.jsonl"
for seed in 1 2 3 4 5 6 7 8 9 10; do
  "$SIM" examples/scenarios/testbed-small.yaml --compare k8s-default,metronome --seed "$seed" \
    --json --no-progress |
    "$PY" -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({'seed': $seed, 'runs': {r['policy']: {j['name']: j['mean_iteration_ms'] for j in r['jobs']} for r in d['runs']}}))" \
    >> "$OUT/testbed-seeds.jsonl"
done

# testbed-small with the testbed's transport hiccups: each phase, with probability 0.08, moves
# U(1, 2) times its bytes (docs/simulator.md, noise). A gated job slower with Metronome than
# without there is what the e2e interleave test meets on the testbed in some runs.
echo "evaluate: testbed-small with the testbed's slow phases over 60 seeds" >&2
sed 's/^noise: {\(.*\)}$/noise: {\1, slow_phase_p: 0.08, slow_phase_factor: 2}/' \
  examples/scenarios/testbed-small.yaml > "$OUT/testbed-small-slow-phases.yaml"
grep -q 'slow_phase_p: 0.08' "$OUT/testbed-small-slow-phases.yaml"
: > "$OUT/testbed-slow-seeds.jsonl"
for seed in $(seq 1 60); do
  "$SIM" "$OUT/testbed-small-slow-phases.yaml" --compare k8s-default,metronome \
    --seed "$seed" --json --no-progress |
    "$PY" -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({'seed': $seed, 'runs': {r['policy']: {j['name']: j['mean_iteration_ms'] for j in r['jobs']} for r in d['runs']}}))" \
    >> "$OUT/testbed-slow-seeds.jsonl"
done

echo "evaluate: benchmarks (CPU time, median of 3 repetitions)" >&2
mkdir -p "$OUT/bench"
declare -A FILTER=([planner/bench_planner]='FullPlanJitter|AddJob|WhatIf|Cluster')
for b in "${BENCHES[@]}"; do
  name="$(basename "$b")"
  "$METRONOME_BENCH_DIR/$b" --benchmark_filter="${FILTER[$b]:-.}" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_out_format=json \
    --benchmark_out="$OUT/bench/$name.json" > /dev/null
done

# The service under load: the driver starts its own metronome-scheduler, pinned to one core with
# its clients on the other where the machine has two (taskset), and prints its own table.
echo "evaluate: service load (2,000 clients x 10 reports/s, 20 s, churn 10 jobs/s)" >&2
# Then the cluster's 65,536 ranks reporting once a second as the shims send it (one connection
# per job per node: 8,192), 2,048 jobs of 4 nodes on a 1,024 x 8 tree, while /metrics and the
# status API are read every 2 s, as Prometheus and a dashboard would.
LOAD=(--clients 2000 --rate 10 --duration 20)
CLUSTER=(--clients 65536 --rate 1 --duration 20 --ranks-per-job 32 --ranks-per-node 8
  --racks 1024 --node-share --poll-ms 2000)
PIN=()
if (($(nproc) >= 2)); then PIN=(taskset -c 1); fi
load() {
  local cpu=()
  if ((${#PIN[@]})); then cpu=(--scheduler-cpu 0); fi
  "${PIN[@]}" "$METRONOME_BENCH_DIR/service/service_load_driver" "$@" "${cpu[@]}" || true
}
load "${LOAD[@]}" > "$OUT/bench/service_load_driver.txt"
echo "evaluate: service load (65,536 ranks sharing 8,192 node connections, 1 report/s, 20 s)" >&2
load "${CLUSTER[@]}" > "$OUT/bench/service_load_driver_cluster.txt"
echo "evaluate: a long planning round in one part against the pushes of the rest" >&2
"${PIN[@]}" "$METRONOME_BENCH_DIR/service/planning_parts_driver" --racks 2100 --background 8000 \
  --burst 300 --repeat 2 --parts 1,8 > "$OUT/bench/planning_parts_driver.txt" || true

# The CPU testbed's figures: scripts/demo.sh writes out/demo/results.json; without it, a copy of
# an earlier demo run kept in out/testbed/results.json (the report states which file it read).
TESTBED="${METRONOME_TESTBED_RESULTS:-$REPO/out/demo/results.json}"
if [[ -z "${METRONOME_TESTBED_RESULTS:-}" && ! -f "$TESTBED" ]]; then
  TESTBED="$REPO/out/testbed/results.json"
fi
echo "evaluate: report" >&2
"$PY" sim/eval/make_report.py --runs "$OUT" --testbed "$TESTBED" --bench "$OUT/bench" \
  --sim-version "$("$SIM" --version 2>/dev/null || echo metronome-sim)" \
  --report docs/evaluation.md --img docs/img
echo "evaluate: wrote docs/evaluation.md and docs/img/eval-*.png" >&2
