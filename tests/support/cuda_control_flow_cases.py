"""Structured control flow on the CUDA target under numba's CUDA simulator: every construct
(scan forward, reversed and over pytrees, fori_loop with static and traced bounds,
while_loop, cond, switch, map, nesting), its value and its gradient, against the reference
interpreter.

Run by ``tests/backends/test_cuda_control_flow.py`` in its own pytest process
(``NUMBA_ENABLE_CUDASIM=1`` must be set before numba is first imported); alone:
``NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/support/cuda_control_flow_cases.py``.

A control-flow step runs its op's impl, whose sub-graphs run as CUDA executables of their
own (``backends.lowering.subgraphs``): a loop is a host loop over its body's kernels. The
tests check the values, that the sub-graphs did run as kernels (not through the reference
interpreter), and both tiers (interpreter, then compiled). Shapes are tiny and loops short:
the simulator runs every CUDA thread as a Python thread.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from backend_checks import assert_same, kernel_cache_dir

if "numba.cuda" in sys.modules and not sys.modules["numba"].config.ENABLE_CUDASIM:
    pytest.skip("numba.cuda was imported without the simulator in this process",
                allow_module_level=True)

import functrace as ft
import functrace.numpy as fnp
from functrace import tree_util
from functrace.backends import reference as numpy_ref
from functrace.backends.cuda import executor as numba_cuda
from functrace.backends.cuda.executor import Executable, HostArrays

pytestmark = [pytest.mark.cuda, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

SIM = numba_cuda.SIM_CONFIG
RNG = np.random.default_rng(3)
W = RNG.normal(size=(3, 3)) * 0.5
XS = RNG.normal(size=(4, 3))
# both sides of each cond; argmax 2, 0 (and 1 for -2 * H0S[0]): switch branches, fori trips
H0S = [np.array([0.3, -0.2, 0.5]), np.array([-0.1, -0.4, -0.2])]


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    with kernel_cache_dir(tmp_path_factory.getbasetemp() / "functrace-cuda-kernels") as d:
        yield d


def scan_rnn(h0, w, xs):
    def step(h, x):
        h = fnp.tanh(w @ h + x)
        return h, fnp.sum(h * h)
    h, ys = ft.scan(step, h0, xs)
    return fnp.sum(h) + fnp.sum(ys * ys)


def scan_reverse(h0, w, xs):
    h, ys = ft.scan(lambda h, x: (fnp.sin(h * x) + w[0], h * x), h0, xs, reverse=True)
    return fnp.sum(h) + fnp.sum(ys * fnp.exp(xs))


def scan_pytree(h0, w, xs):
    def step(c, x):
        a, b = c["a"], c["b"]
        return {"a": a * fnp.cos(x["u"]), "b": b + a}, (a, fnp.exp(-x["u"] * b))
    c, (ya, yb) = ft.scan(step, {"a": h0, "b": h0 * 0.5}, {"u": xs})
    return fnp.sum(c["a"] * c["b"]) + fnp.sum(ya) + fnp.sum(yb * w[1])


def fori_static(h0, w, xs):
    return fnp.sum(ft.fori_loop(1, 4, lambda i, h: fnp.tanh(w @ h) * i + fnp.take(xs, i, 0),
                                h0))


def fori_traced(h0, w, xs):
    # the trip count is a value (a while loop; its gradient runs a count-specialised loop)
    n = fnp.argmax(h0)
    return fnp.sum(ft.fori_loop(0, n, lambda i, h: fnp.sin(w @ h) + xs[0] * i, h0))


def while_fn(h0, w, xs):
    def body(c):
        s, h = c
        h = fnp.sin(w @ h) + h
        return s + fnp.sum(h * h) * 0.1 + 0.25, h
    s, h = ft.while_loop(lambda c: c[0] < 1.0, body, (fnp.sum(h0 * 0.0), h0))
    return s + fnp.sum(h)


def cond_fn(h0, w, xs):
    return ft.cond(fnp.sum(h0) > 0, lambda a, b: fnp.sum(fnp.sin(a) * b),
                   lambda a, b: fnp.sum(a * a) - b[0, 0], h0, w)


def switch_fn(h0, w, xs):
    return fnp.sum(ft.switch(fnp.argmax(h0), [lambda h: h * 2.0, fnp.sin, lambda h: w @ h],
                             h0))


def map_fn(h0, w, xs):
    return fnp.sum(ft.map(lambda x: fnp.tanh(w @ x + h0), xs) ** 2)


def nested(h0, w, xs):
    def outer(h, x):
        inner = ft.fori_loop(0, 2, lambda i, g: fnp.sin(g) * x + h, h)
        return ft.cond(fnp.sum(inner) > 0, lambda v: v * 0.5, fnp.cos, inner), inner[0]
    h, ys = ft.scan(outer, h0, xs)
    return fnp.sum(h) + fnp.sum(ys)


CASES = {f.__name__: f for f in (scan_rnn, scan_reverse, scan_pytree, fori_static, fori_traced,
                                 while_fn, cond_fn, switch_fn, map_fn, nested)}


def _executables(ex):
    """``ex`` and every sub-graph executable under it."""
    out, stack = [], [ex]
    while stack:
        e = stack.pop()
        out.append(e)
        stack.extend(e._host.subs.values())
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_and_grad_run_as_cuda_kernels(name):
    """The graph of ``value_and_grad`` on the executor, against the reference interpreter;
    every sub-graph ran as a compiled CUDA executable with kernels."""
    f = CASES[name]
    sym = ft.trace(ft.value_and_grad(f, argnums=(0, 1, 2)))(H0S[0], W, XS)
    g = sym.graph
    ex = Executable(g, eager=True, arrays=HostArrays(), config=SIM, graphs=True)
    for h0 in H0S:
        got = ex(h0, W, XS)
        want = numpy_ref.run(g, [h0, W, XS])
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same(a, b, 1e-11, f"{name} output {i}", atol=1e-13)
    exs = _executables(ex)
    assert len(exs) > 1 and not any(e.compile_failures for e in exs)
    assert all(e.compiled for e in exs) and sum(len(e.lower().kernels) for e in exs[1:]) > 0
    assert ex._graph_state == "off"          # no CUDA graph around host-side decisions


@pytest.mark.parametrize("name", sorted(CASES))
def test_jit_cuda_forward_and_value_and_grad_match_numpy(name):
    """``ft.jit(backend="cuda")`` end to end, through both tiers (the first call interprets,
    sub-graphs included; the second compiles), against ``backend="numpy"``."""
    f = CASES[name]
    for fn in (f, ft.value_and_grad(f, argnums=(0, 1, 2))):
        jc, jn = ft.jit(fn, backend="cuda"), ft.jit(fn, backend="numpy")
        for h0 in (*H0S, H0S[0] * -2.0):
            got, want = jc(h0, W, XS), jn(h0, W, XS)
            for a, b in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(want),
                            strict=True):
                assert_same(a, b, 1e-11, name, atol=1e-13)
        run = next(iter(jc._cache.values())).run
        assert run.compiled


def test_loop_body_runs_as_a_host_loop_over_its_kernels():
    """A scan's body is one executable called once per trip; its kernels fuse the step."""
    calls = []
    orig = Executable.__call__

    def counting(self, *args):
        calls.append(self)
        return orig(self, *args)

    g = ft.trace(scan_rnn)(H0S[0], W, XS).graph
    ex = Executable(g, eager=True, arrays=HostArrays(), config=SIM)
    Executable.__call__ = counting
    try:
        got = ex(H0S[0], W, XS)
    finally:
        Executable.__call__ = orig
    assert_same(got[0], numpy_ref.run(g, [H0S[0], W, XS])[0], 1e-12)
    (body,) = ex._host.subs.values()
    assert calls.count(body) == XS.shape[0] and calls.count(ex) == 1
    assert body.lower().kernels


def test_while_loop_trip_count_depends_on_the_value():
    f = ft.jit(ft.value_and_grad(lambda x: ft.while_loop(lambda v: v > 1.0,
                                                         lambda v: v * 0.5, x)),
               backend="cuda", eager=True)
    for x, trips in [(10.0, 4), (3.0, 2), (0.5, 0)]:
        v, g = f(x)
        assert float(v) == pytest.approx(x * 0.5 ** trips)
        assert float(g) == pytest.approx(0.5 ** trips)


def test_switch_clamps_the_index_and_scan_without_xs():
    br = [lambda x: x + 1.0, lambda x: x * 10.0]
    f = ft.jit(lambda i, x: ft.switch(i, br, x), backend="cuda", eager=True)
    assert float(f(np.int32(-5), 1.0)) == 2.0 and float(f(np.int32(7), 1.0)) == 10.0
    s = ft.jit(lambda c0: ft.scan(lambda c, _: (c + 1.0, c * 2.0), c0, None, length=4),
               backend="cuda", eager=True)
    c, ys = s(np.float64(0.0))
    assert float(c) == 4.0
    np.testing.assert_array_equal(ys, [0.0, 2.0, 4.0, 6.0])
