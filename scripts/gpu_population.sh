#!/usr/bin/env bash
# Issue #35 on one lent GPU machine (one H100 or H200, 16 CPU cores, no network; at most 10
# minutes a call), from the repo root:
#
#     bash scripts/gpu_population.sh      # carry .whl (and .authors_step1, below); $OUT gets
#                                         # session.log, bench_population.{json,md},
#                                         # progress.md and results.tar.gz
#     SKIP_BENCH=1 bash scripts/gpu_population.sh   # the next call on the same (warm) machine
#
# 1. installs the packages the machine's image lacks from .whl/ (scripts/gpu_setup.sh),
# 2. the throughput benchmark: BENCH_N = 64 members of configs/population_authors.toml's
#    `ours` batched, BENCH_STEPS = 2 000 steps with the config's evaluations, snapshots and
#    checkpoints (benchmarks/bench_population.py; goal >= 20 000 member-steps/s on an H200),
#    at most BENCH_LIMIT seconds,
# 3. the paper's step-1 weights for the `paper_init` population: `import-checkpoints` of
#    checkpoint_step_1.pth alone into runs/authors (the variant's train.init_from), from
#    $AUTHORS_STEP1 (a folder holding that file; carry `.authors_step1` made by
#    `mkdir .authors_step1 && cp ../shared/authors/checkpoints/checkpoint_step_1.pth
#    .authors_step1/`), else the authors' folder of empirical.config.paths; without it the
#    population `paper_init` is left out (a line says so),
# 4. both populations, N = 32 seeds each, 40 000 steps: `python -m empirical claims` (trains
#    every unfinished member through the grid's batched runner, then analyses each member,
#    compare-qk across its first spike included, in JOBS processes, and writes claims.json,
#    claims.md and figures per population and the comparison), under a wall-clock guard that
#    keeps RESERVE seconds for packing: a stopped training keeps every member's last
#    checkpoint (every 1 000 steps) and an analysis every member's finished analysis.json, so
#    the same command on the same machine resumes (the machine stays warm 30 s after a call),
# 5. packs the claims (json, md, png), grid.json/md, every member's summary.json and
#    metrics.jsonl, progress.md and timings.json into $OUT/results.tar.gz.
#
# Rehearsed on a CPU with tiny sizes (tests/test_gpu_population_script.py, slow):
#     QUICK=1 DEVICE=cpu WHEELS=0 BUDGET=500 OUT=/tmp/o WORK=/tmp/w bash scripts/gpu_population.sh
set -uo pipefail
BUDGET=${BUDGET:-570}          # seconds for the whole call, packing included
RESERVE=${RESERVE:-25}
source scripts/gpu_setup.sh   # T0, OUT, W, DEVICE, CHUNK; left, say; the wheels
N=${N:-32}; BENCH_N=${BENCH_N:-64}; BENCH_STEPS=${BENCH_STEPS:-2000}; BENCH_LIMIT=${BENCH_LIMIT:-150}
JOBS=${JOBS:-12}
POP=()
if [ "${QUICK:-0}" = 1 ]; then  # the authors' model (paper_init loads its weights), tiny runs
  N=${QUICK_N:-2}; BENCH_N=2; BENCH_STEPS=20; JOBS=2
  POP=(train.steps=40 train.eval_every=20 train.full_eval_every=20 train.snapshot_every=20
       train.checkpoint_every=20 task.eval_size=200 train.eval_subsample=0)
fi
POPDIR=${POPDIR:-$W/population_authors}
CONFIG=configs/population_authors.toml
SEEDS=$(seq -s ' ' 0 $(( N - 1 )))
stamp() { echo "{\"stage\": \"$1\", \"rc\": $2, \"seconds\": $3}," >> "$W/timings.jsonl"; }

# -- 2. the throughput benchmark ---------------------------------------------------------------
if [ "${SKIP_BENCH:-0}" = 1 ]; then
  say "benchmark: skipped (SKIP_BENCH=1)"
else
  limit=$(( $(left) - RESERVE < BENCH_LIMIT ? $(left) - RESERVE : BENCH_LIMIT ))
  say "benchmark: N = $BENCH_N, $BENCH_STEPS steps, at most $limit s"
  start=$(date +%s)
  timeout "$limit" python3 benchmarks/bench_population.py --n "$BENCH_N" --steps "$BENCH_STEPS" \
    --device "$DEVICE" --threads 0 --json "$OUT/bench_population.json" \
    "train.sample_chunk=$CHUNK" "${POP[@]}" > "$OUT/bench_population.md" 2> "$W/bench.log"
  rc=$?; stamp benchmark $rc $(( $(date +%s) - start ))
  say "benchmark: rc $rc, wall $(( $(date +%s) - start )) s"; cat "$OUT/bench_population.md"
  [ $rc = 0 ] || tail -n 15 "$W/bench.log"
fi

# -- 3. the paper's step-1 weights (population paper_init) -------------------------------------
VARIANTS=(--only ours paper_init)
if [ ! -f runs/authors/snapshots/step_000001.pt ]; then
  src=${AUTHORS_STEP1:-}
  [ -z "$src" ] && [ -f .authors_step1/checkpoint_step_1.pth ] && src=.authors_step1
  [ -z "$src" ] && src=$(python3 -c 'from empirical.config.paths import authors_dir; print(authors_dir() / "checkpoints")')
  if [ -f "$src/checkpoint_step_1.pth" ]; then
    mkdir -p "$W/authors_step1" && cp "$src/checkpoint_step_1.pth" "$W/authors_step1/"
    python3 -m empirical import-checkpoints "$W/authors_step1" --config configs/authors.toml \
      --out runs/authors --quiet > "$W/import.log" 2>&1
    say "the paper's step-1 weights: import rc $? (runs/authors)"
  fi
fi
if [ ! -f runs/authors/snapshots/step_000001.pt ]; then
  say "no checkpoint_step_1.pth (AUTHORS_STEP1, .authors_step1, shared/authors): population paper_init left out"
  VARIANTS=(--only ours)
fi

# -- 4. the populations and their claims, under the guard ---------------------------------------
guard=$(( $(left) - RESERVE ))
say "populations ${VARIANTS[*]:1}: N = $N, claims in $JOBS processes: $guard s"
start=$(date +%s)
timeout "$guard" python3 -m empirical claims "${POP[@]}" "train.device=$DEVICE" \
  "train.sample_chunk=$CHUNK" --config "$CONFIG" "${VARIANTS[@]}" --seeds $SEEDS \
  --out "$POPDIR" --jobs "$JOBS" --no-progress > "$W/claims.log" 2>&1
rc=$?; stamp claims $rc $(( $(date +%s) - start ))
say "claims: rc $rc, wall $(( $(date +%s) - start )) s$([ $rc = 124 ] && echo ' (stopped by the guard: the same command resumes)')"
tail -n 30 "$W/claims.log"

# -- 5. progress and packing ------------------------------------------------------------------
python3 - "$POPDIR" "$OUT/progress.md" <<'PY'
import json, sys
from pathlib import Path
root, out = Path(sys.argv[1]), Path(sys.argv[2])
rows = ["| member | last step | finished | lowest set |", "| --- | --- | --- | --- |"]
for d in sorted((root / "members").glob("*")) if (root / "members").is_dir() else []:
    lines = (d / "metrics.jsonl").read_text().splitlines() if (d / "metrics.jsonl").exists() else []
    last = json.loads(lines[-1]) if lines else None
    low = f"{100 * min(last['acc'].values()):.1f}%" if last else "-"
    rows.append(f"| {d.name} | {last['step'] if last else '-'} | {(d / 'summary.json').exists()} | {low} |")
out.write_text("\n".join(rows) + "\n")
print(f"{len(rows) - 2} members: {sum('True' in r for r in rows)} finished")
PY
say "packing"
(echo "["; cat "$W/timings.jsonl" 2>/dev/null; echo "{\"stage\": \"total\", \"rc\": 0, \"seconds\": $(( $(date +%s) - T0 ))}]") > "$W/timings.json"
cp "$OUT/progress.md" "$W/progress.md" 2>/dev/null
(cd "$W" && find . -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.log' \
   -o -name '*.png' -o -name '*.toml' \) ! -path '*/snapshots/*' ! -path '*/checkpoints/*' \
   ! -path '*/analysis/*' ! -path '*/compare_qk_spike1/*' ! -name training_curves.png \
   ! -name 'timings.jsonl' -size -4M | tar czf "$OUT/results.tar.gz" -T -)
ls -la "$OUT"
say "done"
