#!/usr/bin/env bash
# The GPU work of issues 12 and 15 in one call on a lent GPU machine (one H100 or H200,
# 16 CPU cores, no network; ~10 minutes per call), run from the repository root:
#
#     bash scripts/gpu_session.sh            # $OUT receives the results (at most 8 files)
#
# 1. installs the packages the machine's image lacks from .whl/ (see docs/gpu.md),
# 2. alone on the GPU: the training step of 1, 8 and 32 members (benchmarks/bench_engine.py)
#    and the default run end to end (configs/paper.toml, 20 000 steps, every evaluation and
#    snapshot; goal: under 60 s),
# 3. then, concurrently (the model is small, so one process leaves the GPU mostly idle):
#    both paper-size Figure 3 panels (scripts/gpu_fig3.py, 20 values x 30 000 steps) and the
#    spike-timing grid of the authors' configuration (configs/authors_spike_timing_gpu.toml:
#    fp32 vs bf16 autocast, our init vs theirs, 8 seeds each; needs their step-1 weights at
#    runs/authors/snapshots/step_000001.pt, carried with the call),
# 4. packs every small result file (metrics, summaries, results, logs; no weights) into
#    $OUT/results.tar.gz. Every stage has a wall-clock guard so the call ends in time.
#
# A rehearsal on a CPU, end to end in a few minutes (tests/test_gpu_session_script.py):
#     QUICK=1 DEVICE=cpu WHEELS=0 BUDGET=400 OUT=/tmp/o WORK=/tmp/w bash scripts/gpu_session.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s)
BUDGET=${BUDGET:-570}          # seconds for the whole call, packing included
OUT=${OUT:-/tmp/gpu_out}
W=${WORK:-/tmp/gpu_work}
mkdir -p "$OUT" "$W"
exec > >(tee -a "$OUT/session.log") 2>&1
DEVICE=${DEVICE:-cuda}
if [ "${QUICK:-0}" = 1 ]; then  # tiny sizes: the rehearsal of every stage
  STEPS=(--steps 5 --warmup 2); TRAIN=(train.steps=40 train.eval_every=20 train.snapshot_every=20 train.checkpoint_every=20 task.eval_size=200)
  FIG3=(--values 2 -- train.steps=20 train.eval_every=10 train.checkpoint_every=10 task.eval_size=100 model.d_model=32 model.d_mlp=64 train.batch_size=32)
  GRID=(--seeds 0 train.steps=20 train.eval_every=10 train.checkpoint_every=10 task.eval_size=100 train.batch_size=32)
else
  STEPS=(--steps 300 --warmup 30); TRAIN=(); FIG3=(); GRID=()
fi
left() { echo $(( BUDGET - ( $(date +%s) - T0 ) )); }
say() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }

if [ "${WHEELS:-1}" = 1 ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || { say "wheel install failed"; exit 3; }
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
python3 - <<'EOF' || { say "import check failed"; exit 4; }
import importlib.metadata
import torch
import empirical.train.engine, empirical.sweep.grid, empirical.sweep.runner  # noqa: F401
print("python ok: torch", torch.__version__, "| TL", importlib.metadata.version("transformer-lens"), "|",
      torch.cuda.get_device_name() if torch.cuda.is_available() else "NO CUDA")
EOF
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

# -- 2. alone on the GPU ------------------------------------------------------------------
say "bench_engine: 1, 8, 32 members, compile none"
timeout 90 python3 benchmarks/bench_engine.py --device "$DEVICE" --members 1 8 32 --compile none \
  "${STEPS[@]}" train.sample_chunk=10 | tee "$W/bench_engine.md"
say "default run: configs/paper.toml, 20 000 steps, every evaluation and snapshot"
start=$(date +%s)
timeout 150 python3 -m empirical train --config configs/paper.toml --run-dir "$W/default_run" \
  --no-progress train.sample_chunk=10 "train.device=$DEVICE" "${TRAIN[@]}" > "$W/default_run.log" 2>&1
rc=$?
say "default run: rc $rc, wall $(( $(date +%s) - start )) s"
tail -n 20 "$W/default_run.log"

# -- 3. concurrently ------------------------------------------------------------------------
guard=$(( $(left) - 45 ))
say "concurrent phase: $guard s (fig3 panels + spike-timing grids)"
python3 scripts/gpu_fig3.py --budget "$guard" --reserve 30 --out "$W/fig3" \
  --runs "$W/fig3_runs" "${FIG3[@]}" > "$W/fig3.log" 2>&1 &
pids="$!"
for pair in "fp32 bf16" "their_init their_init_bf16"; do
  name=${pair%% *}
  timeout "$(( guard - 10 ))" python3 -m empirical grid --config configs/authors_spike_timing_gpu.toml \
    --only $pair --out "$W/spike_$name" --no-progress "train.device=$DEVICE" "${GRID[@]}" \
    > "$W/spike_$name.log" 2>&1 &
  pids="$pids $!"
done
wait $pids  # (a bare `wait` would also wait for the tee of the log)
say "concurrent phase done"
tail -n 25 "$W/fig3.log"
for f in "$W"/spike_*.log; do echo "== $f"; tail -n 6 "$f"; done

# -- extra, if time is left: a compiled step ----------------------------------------------
if [ "$(left)" -gt 100 ]; then
  say "bench_engine: compile reduce-overhead, 1 and 32 members"
  timeout $(( $(left) - 40 )) python3 benchmarks/bench_engine.py --device "$DEVICE" --members 1 32 \
    --compile reduce-overhead "${STEPS[@]}" train.sample_chunk=10 \
    | tee "$W/bench_engine_compiled.md"
fi

# -- 4. pack -------------------------------------------------------------------------------
say "packing"
cp "$W/bench_engine.md" "$OUT/" 2>/dev/null
(cd "$W" && find . -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.log' \
   -o -name '*.toml' -o -name '*.png' \) -size -4M | tar czf "$OUT/results.tar.gz" -T -)
ls -la "$OUT"
say "done"
