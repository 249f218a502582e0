"""Structured control flow on the CUDA target without a GPU.

* ``tests/support/cuda_control_flow_cases.py`` in its **own pytest process** with
  ``NUMBA_ENABLE_CUDASIM=1`` (it must be set before numba is first imported; other test files
  import numba normally): every construct, forward and ``value_and_grad``, under
  ``ft.jit(backend="cuda")`` and on the executor, against the reference interpreter, with
  sub-graphs run as CUDA executables of their own. About 15 s.
* Here, on the stand-in for cupy (``tests/support/fake_cupy.py``): the control-flow impls run
  on device arrays (the reference interpreter given cupy arrays, which is also the CUDA
  executor's interpreter tier on a GPU) without falling back to the host, and the
  un-jitted constructs and their gradients take cupy arrays.
"""

from __future__ import annotations

import os
import subprocess
import sys

import fake_cupy
import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace import tree_util
from functrace.backends import reference as numpy_ref

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.cuda


def test_control_flow_cases_pass_under_the_simulator(tmp_path):
    pytest.importorskip("numba")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
           str(tmp_path / "sim"), os.path.join("tests", "support", "cuda_control_flow_cases.py")]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    tail = (out.stdout + out.stderr)[-6000:]
    assert out.returncode == 0, tail
    assert " passed" in out.stdout and "skipped" not in out.stdout.split("\n")[-2], tail


# --------------------------------------------------------------------------------------------
# the impls on device arrays (fake cupy)
# --------------------------------------------------------------------------------------------

RNG = np.random.default_rng(4)
W = RNG.normal(size=(3, 3)) * 0.5
XS = RNG.normal(size=(4, 3))


def _scan(h0, w, xs):
    h, ys = ft.scan(lambda h, x: (fnp.tanh(w @ h + x), fnp.sum(h * x)), h0, xs, reverse=True)
    return fnp.sum(h) + fnp.sum(ys * ys)


def _fori(h0, w, xs):
    return fnp.sum(ft.fori_loop(0, fnp.argmax(h0), lambda i, h: fnp.sin(w @ h) + i, h0))


def _while(h0, w, xs):
    return fnp.sum(ft.while_loop(lambda h: fnp.sum(h * h) < 4.0, lambda h: h * 1.5 + w[0],
                                 h0))


def _cond(h0, w, xs):
    return ft.switch(fnp.argmax(h0), [lambda h: fnp.sum(h), lambda h: fnp.sum(fnp.sin(h)),
                                      lambda h: ft.cond(h[0] > 0, fnp.sum, fnp.prod, w @ h)],
                     h0)


@pytest.mark.parametrize("f", [_scan, _fori, _while, _cond], ids=lambda f: f.__name__[1:])
def test_control_flow_impls_run_on_device_arrays(f, monkeypatch):
    cp = fake_cupy.install(monkeypatch)

    def no_host(x):
        raise AssertionError("an impl fell back to the host")
    monkeypatch.setattr(numpy_ref, "to_host", no_host)
    vg = ft.value_and_grad(f, argnums=(0, 1, 2))
    jitted = ft.jit(vg, backend="numpy")
    for h0 in (np.array([0.3, -0.2, 0.5]), np.array([-0.1, 0.6, 0.2]), np.array([2.0, 1, 0])):
        dev = (cp.asarray(h0), cp.asarray(W), cp.asarray(XS))
        want = jitted(h0, W, XS)
        # the reference interpreter on device arrays (the CUDA interpreter tier on a GPU),
        # the eager value (concrete predicates, indices and bounds on the device are read on
        # the host) and the un-jitted transform (whose tape returns a host cotangent where
        # no op touched it, as for ft.grad(fnp.sum) alone: not checked for residency)
        for got, w, resident in ((jitted(*dev), want, True), (f(*dev), want[0], True),
                                 (vg(*dev), want, False)):
            for a, b in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(w), strict=True):
                assert isinstance(a, fake_cupy.ndarray) or not resident, type(a)
                a = a.get() if isinstance(a, fake_cupy.ndarray) else a
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
