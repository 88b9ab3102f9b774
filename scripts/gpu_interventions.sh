#!/usr/bin/env bash
# Issue #36 item 4 at full size on one lent GPU machine (one H100 or H200, 16 CPU cores, no
# network; at most 10 minutes a call), from the repo root:
#
#     bash scripts/gpu_interventions.sh   # carry .whl and runs/retrain/ours_seed0 (below);
#                                         # $OUT gets session.log and interventions.tar.gz
#
# 1. installs the packages the machine's image lacks from .whl/ (scripts/gpu_setup.sh),
# 2. the checkpoint: $RUN (default runs/retrain/ours_seed0, carried: our seed 0 of the
#    authors' config trained on the CPU to step 3 000, `python -m empirical train --config
#    configs/authors.toml --run-dir runs/retrain/ours_seed0 --stop-at 3000` with the
#    population member's config, about 17 MB with its evaluation sets and snapshots); where it
#    is absent the seed is trained to 3 000 on the GPU instead (another realisation of the
#    data stream: its first jump is elsewhere, the log says so),
# 3. `python -m empirical intervene`: the 4 conditions (none, layer-2 W_QK frozen, layer 1 and
#    the embeddings frozen, G1 projected out of every W_QK update) x REPLICATES = 20 data
#    orders, STEPS = 2 000 steps each, as one batch of 80 members on the GPU (eager: the
#    constraints are not captured as a CUDA graph), under a wall-clock guard,
# 4. packs interventions.json, summary.md, survival.png, updates.npz and g1_direction.pt into
#    $OUT/interventions.tar.gz.
#
# Rehearsed on a CPU with tiny sizes:
#     QUICK=1 DEVICE=cpu WHEELS=0 OUT=/tmp/o WORK=/tmp/w bash scripts/gpu_interventions.sh
set -uo pipefail
BUDGET=${BUDGET:-570}          # seconds for the whole call, packing included
RESERVE=${RESERVE:-20}
source scripts/gpu_setup.sh   # T0, OUT, W, DEVICE; left, say; the wheels
RUN=${RUN:-runs/retrain/ours_seed0}
STEPS=${STEPS:-2000}; REPLICATES=${REPLICATES:-20}; EVAL_EVERY=${EVAL_EVERY:-50}
START=${START:-3000}
CONFIG=configs/authors.toml; TRAIN=()
if [ "${QUICK:-0}" = 1 ]; then  # the smoke config, tiny sizes
  STEPS=20; REPLICATES=2; EVAL_EVERY=10; START=20; RUN=$W/quick_run
  CONFIG=configs/smoke.toml; TRAIN=(train.steps=40)
fi

if [ ! -f "$RUN/checkpoints/last.pt" ]; then
  RUN=${RUN/#runs/$W}
  say "no checkpoint at $RUN: training seed 0 to step $START on $DEVICE (another realisation)"
  python3 -m empirical train --config "$CONFIG" --run-dir "$RUN" --stop-at "$START" \
    --no-progress "${TRAIN[@]}" "train.device=$DEVICE" > "$W/train.log" 2>&1 || { say "training failed"; tail "$W/train.log"; exit 5; }
fi
say "intervene: $RUN from step $START, 4 conditions x $REPLICATES, $STEPS steps, $DEVICE"
limit=$(( $(left) - RESERVE ))
label=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
[ -z "$label" ] && label=$DEVICE
timeout "$limit" python3 -m empirical intervene "$RUN" --checkpoint "$RUN/checkpoints/last.pt" \
  --steps "$STEPS" --replicates "$REPLICATES" --eval-every "$EVAL_EVERY" --device "$DEVICE" \
  --threads 0 --out "$W/interventions" --label "$label" --quiet
rc=$?
say "intervene: rc $rc"
[ -f "$W/interventions/summary.md" ] && cat "$W/interventions/summary.md"
tar -czf "$OUT/interventions.tar.gz" -C "$W" interventions 2>/dev/null
say "packed $OUT/interventions.tar.gz"
exit $rc
