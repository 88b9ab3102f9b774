#!/usr/bin/env bash
# The GPU work of issue 15 in one call on a lent GPU machine (one H100 or H200, 16 CPU cores,
# no network; ~10 minutes per call), run from the repository root:
#
#     bash scripts/gpu_session.sh            # $OUT receives the results (at most 8 files)
#
# 1. installs the packages the machine's image lacks from .whl/ (see docs/gpu.md),
# 2. checks the CUDA-graph step on this GPU (tests/test_cuda_graph.py); if it fails, every
#    later stage runs with train.cuda_graph=false,
# 3. alone on the GPU: the training step of 1, 8 and 32 members with the CUDA graph on and
#    off (benchmarks/bench_engine.py) and the default run end to end (configs/paper.toml,
#    20 000 steps, every evaluation and snapshot; goal: under 60 s),
# 4. both paper-size Figure 3 panels (scripts/gpu_fig3.py, 20 values x 30 000 steps, seed 0)
#    as two processes, under the wall-clock guard of what is left; then, if 150 s are left,
#    seeds 1 and 2 beside them (the same sweep directories),
# 5. packs every small result file (metrics, summaries, results, logs; no weights) into
#    $OUT/results.tar.gz. Every stage has a wall-clock guard so the call ends in time.
#
# BENCH=0 skips the step timings; FIG3_SEEDS="1 2" trains those seeds in step 4 (and no more).
# A rehearsal on a CPU, end to end in a few minutes (tests/test_gpu_session_script.py):
#     QUICK=1 DEVICE=cpu WHEELS=0 BUDGET=400 OUT=/tmp/o WORK=/tmp/w bash scripts/gpu_session.sh
set -uo pipefail
BUDGET=${BUDGET:-570}          # seconds for the whole call, packing included
STEPS=(--steps 300 --warmup 30)
[ "${QUICK:-0}" = 1 ] && STEPS=(--steps 5 --warmup 2)
source scripts/gpu_setup.sh   # T0, OUT, W, DEVICE, MAIN, FIG3, CHUNK; left, say; the wheels

# -- 2. the CUDA-graph step on this GPU ---------------------------------------------------
GRAPH=true
say "tests/test_cuda_graph.py"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_graph.py > "$W/test_cuda_graph.log" 2>&1
rc=$?
tail -n 15 "$W/test_cuda_graph.log"
if [ $rc -ne 0 ] && [ "$DEVICE" != cpu ]; then GRAPH=false; say "CUDA-graph tests failed (rc $rc): graph off from here"; fi

# -- 3. alone on the GPU ------------------------------------------------------------------
if [ "${BENCH:-1}" = 1 ]; then
  say "bench_engine: 1, 8, 32 members, CUDA graph on and off, sample_chunk $CHUNK"
  timeout 120 python3 benchmarks/bench_engine.py --device "$DEVICE" --members 1 8 32 \
    --compile none --cuda-graph on off "${STEPS[@]}" "train.sample_chunk=$CHUNK" \
    | tee "$W/bench_engine.md"
fi
say "default run: configs/paper.toml, 20 000 steps, every evaluation and snapshot"
start=$(date +%s)
timeout 150 python3 -m empirical train --config configs/paper.toml --run-dir "$W/default_run" \
  --no-progress "train.sample_chunk=$CHUNK" "train.device=$DEVICE" "train.cuda_graph=$GRAPH" \
  "${MAIN[@]}" > "$W/default_run.log" 2>&1
rc=$?
say "default run: rc $rc, wall $(( $(date +%s) - start )) s"
tail -n 20 "$W/default_run.log"
python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['last_session'])" \
  "$W/default_run/summary.json" 2>/dev/null

# -- 4. both Figure 3 panels ----------------------------------------------------------------
guard=$(( $(left) - 25 ))
read -r -a SEEDS <<< "${FIG3_SEEDS:-0}"
say "Figure 3 panels, seeds ${SEEDS[*]}: $guard s"
python3 scripts/gpu_fig3.py --budget "$guard" --reserve 30 --seeds "${SEEDS[@]}" --out "$W/fig3" \
  --runs "$W/fig3_runs" "${FIG3[@]}" "train.cuda_graph=$GRAPH" "train.sample_chunk=$CHUNK" > "$W/fig3.log" 2>&1
say "Figure 3 panels done (rc $?)"
tail -n 30 "$W/fig3.log"
# seeds 1 and 2 with what is left (finished seed-0 members are skipped; a member the guard
# stops is reported unfinished in fig3_3seeds/progress.md)
if [ -z "${FIG3_SEEDS:-}" ] && [ "$(left)" -gt 150 ]; then
  guard=$(( $(left) - 25 ))
  say "Figure 3 panels, seeds 0 1 2: $guard s"
  python3 scripts/gpu_fig3.py --budget "$guard" --reserve 30 --seeds 0 1 2 --out "$W/fig3_3seeds" \
    --runs "$W/fig3_runs" "${FIG3[@]}" "train.cuda_graph=$GRAPH" "train.sample_chunk=$CHUNK" \
    > "$W/fig3_3seeds.log" 2>&1
  say "Figure 3 panels, seeds 0 1 2 done (rc $?)"
  tail -n 12 "$W/fig3_3seeds.log"
fi

# -- 4. pack -------------------------------------------------------------------------------
say "packing"
cp "$W/bench_engine.md" "$OUT/" 2>/dev/null
(cd "$W" && find . -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.log' \
   -o -name '*.toml' -o -name '*.png' \) -size -4M | tar czf "$OUT/results.tar.gz" -T -)
ls -la "$OUT"
say "done"
