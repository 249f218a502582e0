#!/usr/bin/env bash
# One device session for the CUDA backend : environment, gpu_check.py, the gpu tests.
# Usage (repo root, on a GPU machine): bash benchmarks/gpu_session.sh [OUTDIR] [gpu_check args]
# Logs go to OUTDIR (default ./gpu_logs). Installs nothing.
out=${1:-gpu_logs}; shift || true
mkdir -p "$out"
export PYTHONUNBUFFERED=1 FUNCTRACE_CACHE_DIR=${FUNCTRACE_CACHE_DIR:-/tmp/functrace-cache}
export FT_PROFILE_DIR=$out
if [ -z "$CUDA_HOME" ] && command -v nvcc >/dev/null; then
    CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")"); export CUDA_HOME
fi
py=${PYTHON:-python3}
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
    echo "CUDA_HOME=$CUDA_HOME"; $py --version
    $py -m pip list 2>/dev/null | grep -iE '^(numba|numba-cuda|cupy|jax|jaxlib|numpy|scipy|opt.einsum|cuda-bindings|llvmlite|pytest|hypothesis) '
    $py - <<'PY'
from numba import cuda
import numpy as np
@cuda.jit
def k(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = i * 2.0
a = cuda.to_device(np.zeros(1000))
k[4, 256](a)
print("numba.cuda smoke kernel:", "ok" if a.copy_to_host()[999] == 1998.0 else "WRONG",
      "| runtime", cuda.runtime.get_version(), "| nvvm", cuda.cudadrv.nvvm.NVVM().get_version())
PY
} 2>&1 | tee "$out/env.log"
timeout "${GPU_CHECK_TIMEOUT:-240}" $py benchmarks/gpu_check.py "$@" 2>&1 | tee "$out/gpu_check.log"
timeout "${GPU_TEST_TIMEOUT:-150}" $py -m pytest tests/backends/test_gpu.py -m gpu -q -p no:cacheprovider \
    --tb=short 2>&1 | tee "$out/test_gpu.log"
