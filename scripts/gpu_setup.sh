# Sourced by the scripts/gpu_session*.sh scripts (from the repo root, with T0 and BUDGET set):
# the clock helpers, the wheels of .whl/ installed where the lent machine's image lacks them
# (WHEELS=0: none; docs/gpu.md), and a check that our packages import, with what is there.
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
import torch
import empirical.reproduce, empirical.sweep.grid, empirical.sweep.runner, empirical.train.engine  # noqa: F401
print("python ok: torch", torch.__version__, "| TL", importlib.metadata.version("transformer-lens"), "|",
      torch.cuda.get_device_name() if torch.cuda.is_available() else "NO CUDA", "|", torch.get_num_threads(), "threads")
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
