"""functrace.random on the CUDA target, under numba's CUDA simulator: the generated kernels
(the Threefry, erf_inv and fma helpers as CUDA device functions) give the eager results bit
for bit, and so jax's goldens.

Run by ``tests/api/test_random.py`` in its own pytest process (``NUMBA_ENABLE_CUDASIM=1`` must
be set before numba is imported); alone: ``NUMBA_ENABLE_CUDASIM=1 python -m pytest
tests/support/cuda_sim_random_cases.py``. The simulator runs each CUDA thread as a Python
thread, so arrays stay small.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest

if "numba.cuda" in sys.modules and not sys.modules["numba"].config.ENABLE_CUDASIM:
    pytest.skip("numba.cuda was imported without the simulator in this process",
                allow_module_level=True)

import functrace as ft
import functrace.random as random

pytestmark = [pytest.mark.cuda, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

KEY = random.key(42)


def _draws(k):
    return (random.normal(k, (7,), np.float32), random.normal(k, (3, 5), np.float64),
            random.uniform(k, (9,), np.float32, -2.5, 7.25),
            random.uniform(k, (), np.float64, -2.5, 7.25),
            random.bits(k, (6,), np.uint32), random.bits(k, (2, 3), np.uint64),
            random.split(k, 3), random.fold_in(k, 2**31 + 5))


def test_cuda_kernels_equal_eager_bit_for_bit():
    eager = _draws(KEY)
    f = ft.jit(_draws, backend="cuda", eager=True)
    got = [np.asarray(ft.device_get(x)) for x in f(KEY)]
    src = f.lower(KEY).source
    assert "libdevice.fmaf" in src and "@cuda.jit(device=True)" in src
    for e, g in zip(eager, got):
        assert e.dtype == g.dtype and e.shape == g.shape and e.tobytes() == g.tobytes()


def test_cuda_vmap_over_keys_and_gradient():
    keys = random.split(KEY, 4)
    f = ft.jit(ft.vmap(lambda k: random.normal(k, (5,))), backend="cuda", eager=True)
    loop = np.stack([random.normal(k, (5,)) for k in keys])
    assert np.asarray(ft.device_get(f(keys))).tobytes() == loop.tobytes()
    z = random.normal(KEY, (16,))
    g = ft.jit(ft.grad(lambda s: (s * random.normal(KEY, (16,))).mean()), backend="cuda",
               eager=True)(np.float64(2.0))
    np.testing.assert_allclose(np.asarray(ft.device_get(g)), z.mean(), rtol=1e-15)
