#!/usr/bin/env bash
# Regenerates the evaluation report, docs/evaluation.md, and its plots, docs/img/eval-*.png.
# Every number in the report comes from this command: it builds metronome-sim, runs every
# scenario of examples/scenarios under every policy, sweeps every pair of the 13 models on one
# shared link, measures the simulator's run time against cluster size, and writes the report
# (sim/eval/make_report.py, matplotlib from Debian's python3-matplotlib).
#
#   scripts/evaluate.sh                 # build in build/eval, run everything (a few minutes)
#   METRONOME_SIM=path/to/metronome-sim scripts/evaluate.sh    # use an existing binary
#   METRONOME_TESTBED_RESULTS=out/demo/results.json ...        # testbed figures to compare
#                      (default: out/demo/results.json if present, else out/testbed/results.json)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PY=/usr/bin/python3  # Debian's python3 with python3-matplotlib and python3-yaml
OUT="${METRONOME_EVAL_OUT:-$REPO/out/eval}"
mkdir -p "$OUT"

if [[ -z "${METRONOME_SIM:-}" ]]; then
  cmake -S "$REPO" -B "$REPO/build/eval" -DCMAKE_BUILD_TYPE=Release -DMETRONOME_BUILD_TESTS=OFF \
        -DMETRONOME_BUILD_BENCH=OFF > "$OUT/cmake.log"
  cmake --build "$REPO/build/eval" --target metronome-sim -j"$(nproc)" >> "$OUT/cmake.log"
  METRONOME_SIM="$REPO/build/eval/sim/metronome-sim"
fi
SIM="$METRONOME_SIM"
POLICIES="k8s-default,network-aware,cassini,metronome,metronome-pack,metronome-no-cushion,metronome-no-stretch,metronome-no-controller,metronome-ungated-best-effort"

echo "evaluate: scenarios" >&2
"$PY" examples/scenarios/generate.py
for s in two-jobs-one-link testbed-small newcomer-joins-pair mixed-priority-rack heterogeneous-13 \
         large-cluster; do
  echo "  $s" >&2
  "$SIM" "examples/scenarios/$s.yaml" --compare "$POLICIES" --json --links --no-progress \
    > "$OUT/$s.json"
done

echo "evaluate: heterogeneous-13 over seeds 1-6" >&2
: > "$OUT/paper-seeds.jsonl"
for seed in 1 2 3 4 5 6; do
  "$SIM" examples/scenarios/heterogeneous-13.yaml --compare network-aware,metronome --seed "$seed" \
    --json --no-progress |
    "$PY" -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({'seed': $seed, **{r['policy']: {'weighted_jct_s': r['summary']['weighted_jct_s'], 'high': r['by_priority']['high']['mean_slowdown']} for r in d['runs']}}))" \
    >> "$OUT/paper-seeds.jsonl"
done

echo "evaluate: model pairs (91 pairs of the 13 models, on A100 and on T4 nodes)" >&2
"$PY" examples/scenarios/generate.py --pairs "$OUT/pairs"
: > "$OUT/pairs.jsonl"
for f in "$OUT"/pairs/pair-*.yaml; do
  name="$(basename "$f" .yaml)"
  "$SIM" "$f" --compare k8s-default,cassini,metronome --json --no-progress |
    "$PY" -c "import json,sys; d=json.load(sys.stdin); g,a,b='$name'.split('-')[1:]; print(json.dumps({'gpu': g, 'a': a, 'b': b, **{r['policy']: {'avg_jct_s': r['summary']['avg_jct_s'], 'util': r['summary']['avg_link_utilization'], 'overlap': r['summary']['overlap_fraction']} for r in d['runs']}}))" \
    >> "$OUT/pairs.jsonl"
done

echo "evaluate: simulator run time against cluster size" >&2
"$PY" examples/scenarios/generate.py --scaling "$OUT/scaling"
: > "$OUT/scaling.jsonl"
for f in "$OUT"/scaling/scale-*.yaml; do
  nodes="$(basename "$f" .yaml)"; nodes="${nodes#scale-}"
  jobs="$(grep -c '^  - {name: job' "$f")"
  for p in k8s-default metronome; do
    "$SIM" "$f" --policy "$p" --json --no-progress |
      "$PY" -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({'nodes': $nodes, 'jobs': $jobs, 'policy': '$p', 'wall_s': d['summary']['wall_s'], 'events': d['summary']['events'], 'planner_s': d['scheduler']['planner_seconds']}))" \
      >> "$OUT/scaling.jsonl"
  done
done

echo "evaluate: testbed-small over seeds (initial phase offsets)" >&2
: > "$OUT/testbed-seeds.jsonl"
for seed in 1 2 3 4 5 6 7 8 9 10; do
  "$SIM" examples/scenarios/testbed-small.yaml --compare k8s-default,metronome --seed "$seed" \
    --json --no-progress |
    "$PY" -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({'seed': $seed, 'runs': {r['policy']: {j['name']: j['mean_iteration_ms'] for j in r['jobs']} for r in d['runs']}}))" \
    >> "$OUT/testbed-seeds.jsonl"
done

# The CPU testbed's figures: scripts/demo.sh writes out/demo/results.json; without it, a copy of
# an earlier demo run kept in out/testbed/results.json (the report states which file it read).
TESTBED="${METRONOME_TESTBED_RESULTS:-$REPO/out/demo/results.json}"
if [[ -z "${METRONOME_TESTBED_RESULTS:-}" && ! -f "$TESTBED" ]]; then
  TESTBED="$REPO/out/testbed/results.json"
fi
echo "evaluate: report" >&2
"$PY" sim/eval/make_report.py --runs "$OUT" --testbed "$TESTBED" \
  --sim-version "$("$SIM" --version 2>/dev/null || echo metronome-sim)" \
  --report docs/evaluation.md --img docs/img
echo "evaluate: wrote docs/evaluation.md and docs/img/eval-*.png" >&2
