#!/usr/bin/env bash
# The GPU work of issues #23 (item 3) and #21 (items 4 and 5) in one call on a lent GPU machine
# (one H100 or H200, 16 CPU cores, no network; at most 10 minutes a call), from the repo root:
#
#     bash scripts/gpu_session_chain.sh      # $OUT receives session.log and results.tar.gz
#
# 1. installs the packages the machine's image lacks from .whl/ (docs/gpu.md),
# 2. alone on the GPU: the main job, `python -m empirical reproduce` on its default config
#    (configs/authors.toml, 40 000 steps) with train.sample_chunk=100, timed per stage in its
#    report.md. The paper's run is left out (--no-authors): its 124 MB of checkpoints are more
#    than a call carries (64 MiB); that stage runs on the CPU beside the training anyway,
#    and docs/gpu.md gives its CPU time;
# 3. at once, under a wall-clock guard: seeds 1 and 2 of both paper-size Figure 3 panels
#    (scripts/gpu_fig3.py, 2 x 40 members x 30 000 steps); the chain depth grid
#    (configs/chain_depth_gpu.toml, --executor local: one process per depth); the curriculum
#    (configs/chain_curriculum_stage1.toml, then configs/chain_curriculum.toml);
#    a chain process that fails within a minute is started again with train.cuda_graph=false;
# 4. rewrites the grids' tables from what trained (--summarize) and packs every small result
#    file (metrics, summaries, tables, figures, logs; no weights) into $OUT/results.tar.gz.
#
# The grids write runs/ of the working tree (the curriculum's stage 2 starts from
# runs/chain_curriculum_stage1), so rehearse it on a CPU with tiny sizes in a clone
# (tests/test_gpu_session_script.py, slow, does this):
#     git clone -q . /tmp/c && cd /tmp/c && QUICK=1 DEVICE=cpu WHEELS=0 BUDGET=400 OUT=/tmp/o WORK=/tmp/w bash scripts/gpu_session_chain.sh
set -uo pipefail
BUDGET=${BUDGET:-560}          # seconds for the whole call, packing included
CHAIN=()
if [ "${QUICK:-0}" = 1 ]; then  # tiny sizes: the rehearsal of every stage
  CHAIN=(train.steps=40 train.eval_every=20 train.full_eval_every=20 train.checkpoint_every=20
         train.snapshot_every=0 task.eval_size=100 train.eval_subsample=0 model.d_model=32 model.d_mlp=64
         train.batch_size=32)
fi
source scripts/gpu_setup.sh   # T0, OUT, W, DEVICE, MAIN, FIG3, CHUNK; left, say; the wheels

# -- 2. the main job, alone -------------------------------------------------------------------
GRAPH=true
say "main job: python -m empirical reproduce --no-authors (configs/authors.toml), sample_chunk $CHUNK"
start=$(date +%s)
timeout 230 python3 -m empirical reproduce --no-authors --no-progress "${SKIP_THEORY[@]}" \
  --runs-root "$W/reproduce" "train.device=$DEVICE" "train.sample_chunk=$CHUNK" "${MAIN[@]}" \
  > "$W/reproduce.log" 2>&1
rc=$?
say "main job: rc $rc, wall $(( $(date +%s) - start )) s"
tail -n 25 "$W/reproduce.log"
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$DEVICE" != cpu ]; then GRAPH=false; say "graph off from here"; fi
find "$W/reproduce" -name report.md -exec sed -n '/| stage |/,/^$/p' {} \;

# -- 3. Figure 3 seeds 1 and 2, the chain depth grid and the curriculum, at once ---------------
guard=$(( $(left) - 40 ))
say "Figure 3 seeds 1 2 + chain grids: $guard s"
python3 scripts/gpu_fig3.py --budget "$guard" --reserve 25 --seeds 1 2 --out "$W/fig3_seeds12" \
  --runs "$W/fig3_runs" "${FIG3[@]}" "train.cuda_graph=$GRAPH" "train.sample_chunk=$CHUNK" \
  > "$W/fig3.log" 2>&1 &
FIG3_PID=$!

chain_grid() {  # chain_grid LOG CONFIG OUTDIR [grid args...]: once more without the graph if it fails fast
  local log=$1 config=$2 out=$3; shift 3
  local t=$(date +%s) rc g=$(( $(left) - 35 ))
  timeout "$g" python3 -m empirical grid --config "$config" --out "$out" --no-progress "$@" \
    "train.device=$DEVICE" "train.cuda_graph=$GRAPH" "train.sample_chunk=$CHUNK" "${CHAIN[@]}" >> "$W/$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $(( $(date +%s) - t )) -lt 60 ]; then
    echo "== rc $rc within a minute: again with train.cuda_graph=false" >> "$W/$log"
    g=$(( $(left) - 35 ))
    timeout "$g" python3 -m empirical grid --config "$config" --out "$out" --no-progress "$@" \
      "train.device=$DEVICE" train.cuda_graph=false "train.sample_chunk=$CHUNK" "${CHAIN[@]}" >> "$W/$log" 2>&1
    rc=$?
  fi
  echo "== rc $rc" >> "$W/$log"
  return $rc
}
chain_grid depth.log configs/chain_depth_gpu.toml runs/chain_depth_gpu --executor local &
DEPTH_PID=$!
( chain_grid curriculum.log configs/chain_curriculum_stage1.toml runs/chain_curriculum_stage1 \
  && chain_grid curriculum.log configs/chain_curriculum.toml runs/chain_curriculum --executor local ) &
CURRICULUM_PID=$!
wait "$FIG3_PID" "$DEPTH_PID" "$CURRICULUM_PID"  # (a bare `wait` would also wait for the log's tee)
say "Figure 3 and chain grids done"
tail -n 20 "$W/fig3.log"
for f in "$W/depth.log" "$W/curriculum.log"; do echo "-- $f"; tail -n 4 "$f"; done

# -- 4. tables and packing --------------------------------------------------------------------
for g in "configs/chain_depth_gpu.toml runs/chain_depth_gpu" \
         "configs/chain_curriculum_stage1.toml runs/chain_curriculum_stage1" \
         "configs/chain_curriculum.toml runs/chain_curriculum"; do
  set -- $g
  [ -d "$2" ] || continue
  timeout 60 python3 -m empirical grid --config "$1" --out "$2" --summarize \
    "train.sample_chunk=$CHUNK" "${CHAIN[@]}" > "$W/summarize_$(basename "$2").log" 2>&1
  cp -r "$2" "$W/" 2>/dev/null
done
say "packing"
(cd "$W" && find . -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.log' \
   -o -name '*.toml' -o -name '*.png' \) ! -path '*/members/*.png' -size -4M | tar czf "$OUT/results.tar.gz" -T -)
ls -la "$OUT"
say "done"
