#!/usr/bin/env bash
# The rest of issue #23 item 3 in one call on a lent GPU machine (one H100 or H200, 16 CPU
# cores, no network; at most 10 minutes a call), from the repo root:
#
#     bash scripts/gpu_session_fig3_main.sh   # carry .whl; $OUT gets session.log and results.tar.gz
#     SKIP_FIG3=1 BUDGET=300 bash scripts/gpu_session_fig3_main.sh   # the main job alone
#
# 1. installs the packages the machine's image lacks from .whl/ (docs/gpu.md),
# 2. alone on the GPU: seeds 1 and 2 of both paper-size Figure 3 panels (scripts/gpu_fig3.py,
#    2 x 40 members x 30 000 steps; about 300 s), under a wall-clock guard that keeps
#    MAIN_RESERVE seconds for step 3,
# 3. alone on the GPU: the main job, `python -m empirical reproduce --no-authors` on its
#    default config with train.sample_chunk=100, timed per stage in its report.md (16 cores:
#    the theory tests, the theory report and our compare-qk each in a process of its own,
#    empirical.experiments.reproduce.background_workers),
# 4. packs every small result file (no weights) into $OUT/results.tar.gz.
#
# Rehearsed on a CPU with tiny sizes (tests/test_gpu_session_script.py, slow):
#     QUICK=1 DEVICE=cpu WHEELS=0 BUDGET=400 OUT=/tmp/o WORK=/tmp/w bash scripts/gpu_session_fig3_main.sh
set -uo pipefail
BUDGET=${BUDGET:-575}          # seconds for the whole call, packing included
MAIN_RESERVE=${MAIN_RESERVE:-215}
[ "${QUICK:-0}" = 1 ] && MAIN_RESERVE=120
source scripts/gpu_setup.sh   # T0, OUT, W, DEVICE, MAIN, FIG3, CHUNK; left, say; the wheels

# -- 2. Figure 3 seeds 1 and 2, alone (SKIP_FIG3=1: not this time) -----------------------------
if [ "${SKIP_FIG3:-0}" = 1 ]; then
  say "Figure 3 seeds 1 2: skipped (SKIP_FIG3=1)"
else
  guard=$(( $(left) - MAIN_RESERVE ))
  say "Figure 3 seeds 1 2, alone: $guard s"
  start=$(date +%s)
  python3 scripts/gpu_fig3.py --budget "$guard" --reserve 20 --seeds 1 2 --out "$W/fig3_seeds12" \
    --runs "$W/fig3_runs" "${FIG3[@]}" "train.sample_chunk=$CHUNK" > "$W/fig3.log" 2>&1
  say "Figure 3 seeds 1 2: rc $?, wall $(( $(date +%s) - start )) s"
  tail -n 25 "$W/fig3.log"
fi

# -- 3. the main job, alone -------------------------------------------------------------------
guard=$(( $(left) - 15 ))
say "main job: python -m empirical reproduce --no-authors, sample_chunk $CHUNK: $guard s"
start=$(date +%s)
timeout "$guard" python3 -m empirical reproduce --no-authors --no-progress "${SKIP_THEORY[@]}" \
  --runs-root "$W/reproduce" "train.device=$DEVICE" "train.sample_chunk=$CHUNK" "${MAIN[@]}" \
  > "$W/reproduce.log" 2>&1
say "main job: rc $?, wall $(( $(date +%s) - start )) s"
tail -n 25 "$W/reproduce.log"
find "$W/reproduce" -name report.md -exec sed -n '/| stage |/,/^$/p' {} \;

# -- 4. packing -------------------------------------------------------------------------------
say "packing"
(cd "$W" && find . -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.log' \
   -o -name '*.toml' -o -name '*.png' \) ! -path '*/members/*.png' -size -4M | tar czf "$OUT/results.tar.gz" -T -)
ls -la "$OUT"
say "done"
