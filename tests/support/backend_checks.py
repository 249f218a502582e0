"""Helpers shared by the compiled-backend suites (numba CPU, jit, CUDA simulator): exact
comparison with the reference interpreter, and a private kernel cache directory."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import numpy as np


def assert_same(got, want, rtol, name="", atol=0.0):
    """Equal dtype/shape; identical NaN/inf positions and signed zeros; close elsewhere."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{name}: NaNs")
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"{name}: infinities")
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]),
                                  err_msg=f"{name}: signed zeros")
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=rtol, atol=atol, err_msg=name)


@contextlib.contextmanager
def kernel_cache_dir(path):
    """Point ``FUNCTRACE_CACHE_DIR`` at ``path`` for the duration (then restore it)."""
    old = os.environ.get("FUNCTRACE_CACHE_DIR")
    os.environ["FUNCTRACE_CACHE_DIR"] = str(path)
    try:
        yield str(path)
    finally:
        if old is None:
            os.environ.pop("FUNCTRACE_CACHE_DIR", None)
        else:
            os.environ["FUNCTRACE_CACHE_DIR"] = old


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_under_cuda_simulator(script: str, cache_dir) -> None:
    """Run ``script`` (Python source that prints ``SIM OK`` at the end) in a fresh process
    with ``NUMBA_ENABLE_CUDASIM=1`` (the simulator must be chosen before numba is imported),
    its own kernel cache, and this checkout first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(NUMBA_ENABLE_CUDASIM="1", FUNCTRACE_CACHE_DIR=str(cache_dir),
               PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "SIM OK" in out.stdout, (out.stdout + out.stderr)[-6000:]
