"""Helpers shared by the compiled-backend suites (numba CPU, jit, CUDA simulator): exact
comparison with the reference interpreter, and a private kernel cache directory."""

from __future__ import annotations

import contextlib
import os

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
