# Sourced first by the scripts/gpu_session*.sh scripts (from the repo root, with BUDGET set):
# the clock (T0, left, say), the output folder $OUT and its session.log, the scratch folder
# $W, the device, the sizes every script shares (the main job's MAIN overrides, Figure 3's
# FIG3, the sampler CHUNK, SKIP_THEORY; tiny with QUICK=1, the CPU rehearsal), the wheels of
# .whl/ installed where the lent machine's image lacks them (WHEELS=0: none; docs/gpu.md), and
# a check that our packages import, with what is there.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
OUT=${OUT:-/tmp/gpu_out}
W=${WORK:-${TMPDIR:-/tmp}/gpu_session_work}   # scratch: the runs before packing
mkdir -p "$OUT" "$W"
exec > >(tee -a "$OUT/session.log") 2>&1
DEVICE=${DEVICE:-cuda}
if [ "${QUICK:-0}" = 1 ]; then  # tiny sizes: the rehearsal of every stage
  MAIN=(train.steps=40 train.eval_every=20 train.full_eval_every=20 train.snapshot_every=20
        train.checkpoint_every=20 task.eval_size=200 train.eval_subsample=0)
  FIG3=(--values 2 -- train.steps=20 train.eval_every=10 train.checkpoint_every=10 task.eval_size=100
        model.d_model=32 model.d_mlp=64 train.batch_size=32)
  CHUNK=10; SKIP_THEORY=(--skip-theory)
else
  MAIN=(); FIG3=(); CHUNK=100; SKIP_THEORY=()
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
python3 - <<'PY' || { say "import check failed"; exit 4; }
import importlib.metadata
import threadpoolctl  # noqa: F401  (reproduce's background processes limit their BLAS with it)
import torch
import empirical.experiments.reproduce, empirical.experiments.sweep.grid, empirical.experiments.sweep.param_sweep, empirical.train.learners  # noqa: F401
print("python ok: torch", torch.__version__, "| TL", importlib.metadata.version("transformer-lens"), "|",
      torch.cuda.get_device_name() if torch.cuda.is_available() else "NO CUDA", "|", torch.get_num_threads(), "threads")
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
