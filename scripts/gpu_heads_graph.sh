#!/usr/bin/env bash
# Issues #47 and #46 on one lent GPU machine (one H100 or H200, 16 CPU cores, no network; at
# most 10 minutes a call), from the repo root, carrying .whl (docs/gpu.md):
#
#     bash scripts/gpu_heads_graph.sh     # $OUT gets session.log, progress.md, results.tar.gz
#
# Everything trains at once, one process each, under one wall-clock guard (BUDGET seconds for
# the whole call, RESERVE of them for packing):
#
# 1. #47, the attentions at the paper's size (configs/heads_attention_authors.toml: the
#    authors' config with 4 heads, 10 000 steps): softmax and linear, N = 32 seeds each, as
#    one batched model per variant (`python -m empirical grid`, a CUDA graph of the step);
#    HYLA, HYLA_N = 16 seeds (its value mix trains member by member: N times the step), with the
#    CUDA graph, or without it if the capture fails in its first minute. No snapshots (the
#    comparison reads the evaluations); the claims are counted afterwards, on any machine,
#    from the members' metrics.jsonl and summary.json (`claims --summarize --no-analysis`).
# 2. #46, the graph ladder at GPU size (configs/graph_ladder_gpu.toml: the CPU ladder's task,
#    d_model 128, batch 128, lr 1e-3): each of the six rungs in its own process, seeds 0 1 2
#    one after the other; and the seed's own sizes (configs/graph_seed_sizes_gpu.toml: up to 32
#    nodes in training, 128 at test) for the end-to-end recurrent model and the full rung,
#    seed 0. A run finished in time is scored where it trained (graph_scores.json); the ladder
#    tables are made afterwards with `graph-ladder --no-train` over the returned runs.
# 3. packs every member's config, metrics.jsonl and summary.json, every graph run's files but
#    its checkpoints and snapshots, the logs and timings into $OUT/results.tar.gz; the full
#    rung's seed 0 at GPU size (its last checkpoint and evaluation sets, for the mechanism
#    figures) into $OUT/graph_full_seed0.tar.gz.
#
# A stopped training keeps its last checkpoint (every 1 000 steps; a graph run every 500):
# the same command on the same (warm) machine resumes every process.
#
# Rehearsed on a CPU with tiny sizes (tests/test_gpu_heads_graph_script.py, slow):
#     QUICK=1 DEVICE=cpu WHEELS=0 BUDGET=400 OUT=/tmp/o WORK=/tmp/w bash scripts/gpu_heads_graph.sh
# (QUICK_STEPS, 20 by default: every graph run's steps, twice that for the heads; the guard's
# rehearsal gives far more steps than fit in its budget)
set -uo pipefail
BUDGET=${BUDGET:-540}
RESERVE=${RESERVE:-35}
source scripts/gpu_setup.sh   # T0, OUT, W, DEVICE, CHUNK; left, say; the wheels
source scripts/gpu_jobs.sh    # launch, guard_wait, progress_table, pack
N=${N:-32}; HYLA_N=${HYLA_N:-16}
HEADS=(train.snapshot_every=0 "train.device=$DEVICE" "train.sample_chunk=$CHUNK")
GRAPH=("train.device=$DEVICE")
GRAPH_SEEDS=(0 1 2)
SEED_SIZES=()
RUNGS=(ff2 ff4 rec rec_sup rec_sup_discrete rec_sup_discrete_corrupt)
if [ "${QUICK:-0}" = 1 ]; then
  N=2; HYLA_N=1; QUICK_STEPS=${QUICK_STEPS:-20}
  HEADS+=(train.steps=$(( 2 * QUICK_STEPS )) train.eval_every=20 train.full_eval_every=20 train.checkpoint_every=20
          task.eval_size=200 train.eval_subsample=0 model.d_model=32 model.d_mlp=64)
  GRAPH+=(train.steps=$QUICK_STEPS train.eval_every=10 train.full_eval_every=10 train.checkpoint_every=10
          task.eval_size=20 model.d_model=32 model.d_mlp=64 train.batch_size=8)
  GRAPH_SEEDS=(0)
  SEED_SIZES=(task.graph_max_nodes=6 "task.graph_eval_nodes=[6,12]" task.eval_size=10)
fi
guard=$(( $(left) - RESERVE ))
say "all at once under a guard of $guard s: heads N = $N (HYLA $HYLA_N), graph rungs x seeds ${GRAPH_SEEDS[*]}"
heads() {  # variant, seeds...
  local v=$1; shift
  python3 -m empirical grid --config configs/heads_attention_authors.toml --only "$v" --seeds "$@" \
    --out "$W/heads_attention_authors_$v" --no-progress --no-member-figures "${HEADS[@]}"
}
launch heads_softmax heads softmax $(seq 0 $(( N - 1 )))
launch heads_linear heads linear $(seq 0 $(( N - 1 )))
hyla() {  # the CUDA graph first; without it if the capture fails early
  local start=$(date +%s)
  heads hyla "$@"; local rc=$?
  [ $rc = 0 ] && return 0
  if [ $rc != 143 ] && [ $(( $(date +%s) - start )) -lt 90 ]; then  # 143: the guard stopped it
    echo "== HYLA: the graphed step failed early: again without the CUDA graph"
    HEADS+=(train.cuda_graph=false); heads hyla "$@"
  else return $rc; fi
}
launch heads_hyla hyla $(seq 0 $(( HYLA_N - 1 )))
for rung in "${RUNGS[@]}"; do
  launch "graph_$rung" python3 -m empirical graph-ladder --config configs/graph_ladder_gpu.toml \
    --variants "$rung" --seeds "${GRAPH_SEEDS[@]}" --out "$W/graph_ladder_gpu/$rung" --no-progress \
    --no-figures "${GRAPH[@]}"
done
for rung in rec rec_sup_discrete_corrupt; do
  launch "graph_seed_$rung" python3 -m empirical graph-ladder --config configs/graph_seed_sizes_gpu.toml \
    --variants "$rung" --seeds 0 --out "$W/graph_seed_sizes_gpu/$rung" --no-progress --no-figures \
    "${GRAPH[@]}" "${SEED_SIZES[@]}"
done
guard_wait
# -- progress and packing ---------------------------------------------------------------------
progress_table
pack
full=$W/graph_ladder_gpu/rec_sup_discrete_corrupt/runs/rec_sup_discrete_corrupt/seed0
[ -f "$full/summary.json" ] && (cd "$full" && tar czf "$OUT/graph_full_seed0.tar.gz" checkpoints/last.pt eval_sets.pt)
ls -la "$OUT"
say "done"
