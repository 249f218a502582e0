"""passes.contract: dot_general written as reduce_sum(mul(...)), and the CUDA target's choice of
which contractions get it (numba_cuda.contraction_layout). No GPU, no numba: the rewritten
graph runs on the reference interpreter; the generated kernels run in
tests/support/cuda_sim_cases.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import functrace as ft
from functrace import ops
from functrace.backends import reference as numpy_ref
from functrace.backends.cuda import executor as numba_cuda
from functrace.core import AVal, Lit
from functrace.passes.contract import contraction_sizes, contractions_as_reductions
from functrace.tracing import trace_to_graph

CASES = [
    ((6, 4), (4, 2), (((1,), (0,)), ((), ()))),
    ((4, 6), (4, 2), (((0,), (0,)), ((), ()))),
    ((6, 4), (2, 4), (((1,), (1,)), ((), ()))),
    ((3, 5, 4), (3, 4, 2), (((2,), (1,)), ((0,), (0,)))),
    ((5, 3, 4), (4, 2, 3), (((2,), (0,)), ((1,), (2,)))),
    ((2, 3, 4, 5), (5, 3, 2), (((3, 1), (0, 1)), ((0,), (2,)))),
    ((7,), (7,), (((0,), (0,)), ((), ()))),
    ((6, 7), (7,), (((1,), (0,)), ((), ()))),
    ((6,), (3,), (((), ()), ((), ()))),                       # outer product: nothing summed
]


def _graph(xs, ys, dn, dtype="float64"):
    return trace_to_graph(lambda a, b: [ops.dot_general(a, b, dn)],
                          [AVal(xs, dtype), AVal(ys, dtype)]).graph


@pytest.mark.parametrize("layout", ["outer", "inner"])
@pytest.mark.parametrize("xs,ys,dn", CASES)
def test_rewrite_computes_the_contraction(xs, ys, dn, layout):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(xs), rng.standard_normal(ys)
    g = _graph(xs, ys, dn)
    h = contractions_as_reductions(g, lambda e: layout)
    names = [e.op.name for e in h.eqns]
    nc = len(dn[0][0])
    assert "dot_general" not in names
    assert names[-2:] == ["mul", "reduce_sum"] if nc else names[-1] == "mul"
    # the same inputs and the same output Var: readers and graph outputs are untouched
    assert h.inputs == g.inputs and h.outputs == g.outputs
    want = numpy_ref.run(g, [x, y])[0]
    got = numpy_ref.run(h, [x, y])[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    # the contracting axes lead ("outer") or close ("inner") the multiply's loop nest
    if not nc:
        return
    red = h.eqns[-1]
    nest = red.inputs[0].aval.ndim
    assert red.params["axes"] == (tuple(range(nc)) if layout == "outer"
                                  else tuple(range(nest - nc, nest)))


def test_rewrite_keeps_other_equations_and_literal_operands():
    w = np.arange(12.0).reshape(4, 3)

    def f(a):
        return [ops.sin(ops.dot_general(a, w, (((1,), (0,)), ((), ())))),
                ops.dot_general(a, a, (((1,), (1,)), ((), ())))]

    g = trace_to_graph(f, [AVal((5, 4), np.float64)]).graph
    assert any(isinstance(a, Lit) for e in g.eqns for a in e.inputs)
    # only the product with the literal is rewritten
    h = contractions_as_reductions(
        g, lambda e: "outer" if isinstance(e.inputs[1], Lit) else None)
    assert [e.op.name for e in h.eqns].count("dot_general") == 1
    x = np.random.default_rng(1).standard_normal((5, 4))
    for a, b in zip(numpy_ref.run(h, [x]), numpy_ref.run(g, [x]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13)


def test_nothing_to_rewrite_returns_the_graph_and_bad_layouts_raise():
    g = _graph((6, 4), (4, 2), CASES[0][2])
    assert contractions_as_reductions(g, lambda e: None) is g
    with pytest.raises(ValueError, match="layout"):
        contractions_as_reductions(g, lambda e: "sideways")


def test_gradients_of_a_rewritten_graph_are_unaffected():
    # the rewrite runs after transforms, on the graph a backend executes; the gradient graph
    # of a product rewritten there still matches the product's gradient
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((8, 5)), rng.standard_normal((5, 3))
    gf = ft.grad(lambda a, b: ft.numpy.sum(ft.numpy.tanh(a @ b)), argnums=(0, 1))
    g = ft.jit(gf).lower(a, b).graph
    h = contractions_as_reductions(g, lambda e: "outer")
    assert "dot_general" not in [e.op.name for e in h.eqns]
    for x, y in zip(numpy_ref.run(h, [a, b]), gf(a, b), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12)


# -- the CUDA target's choice ------------------------------------------------------------------

def _layout(xs, ys, dn, dtype="float32", skinny=16):
    e = _graph(xs, ys, dn, dtype).eqns[0]
    return numba_cuda.contraction_layout(e, numba_cuda.LaunchConfig(skinny=skinny))


MM = (((1,), (0,)), ((), ()))


def test_cuda_target_sends_skinny_products_to_kernels_and_gemms_to_cublas():
    # the MLP of benchmarks/gpu_check.py: the three products with 10 columns are skinny
    assert _layout((4096, 2048), (2048, 10), MM) == "outer"                   # h @ w2
    assert _layout((4096, 10), (2048, 10), (((1,), (1,)), ((), ()))) == "outer"  # d @ w2.T
    assert _layout((4096, 2048), (4096, 10), (((0,), (0,)), ((), ()))) == "outer"  # h.T @ d
    # the two large ones stay with cuBLAS
    assert _layout((4096, 784), (784, 2048), MM) is None
    assert _layout((4096, 784), (4096, 2048), (((0,), (0,)), ((), ()))) is None
    # matrix-vector along the rows: a block per output reads a row
    assert _layout((4096, 2048), (2048,), (((1,), (0,)), ((), ()))) == "inner"
    # ... but down the columns, adjacent threads read adjacent elements of a row
    assert _layout((2048, 4096), (2048,), (((0,), (0,)), ((), ()))) == "outer"
    # off: everything to cuBLAS; other dtypes: cuBLAS (or cupy) as before
    assert _layout((4096, 2048), (2048, 10), MM, skinny=0) is None
    assert _layout((64, 32), (32, 4), MM, dtype="float16") is None
    assert _layout((64, 32), (32, 4), MM, dtype="int32") is None
    assert _layout((64, 32), (32, 4), MM, dtype="complex64") is None
    assert _layout((0, 32), (32, 4), MM) is None                              # empty


def test_contraction_sizes():
    e = _graph((2, 3, 4, 5), (5, 3, 2), CASES[5][2]).eqns[0]
    assert contraction_sizes(e) == (2, 4, 1, 15)       # batch, x free, y free, contracting


def test_skinny_default_follows_the_environment(monkeypatch):
    monkeypatch.setenv("FUNCTRACE_CUDA_SKINNY", "0")
    assert numba_cuda.LaunchConfig().skinny == 0
    monkeypatch.setenv("FUNCTRACE_CUDA_SKINNY", "32")
    assert numba_cuda.LaunchConfig().skinny == 32
    monkeypatch.delenv("FUNCTRACE_CUDA_SKINNY")
    assert numba_cuda.LaunchConfig().skinny == numba_cuda.SKINNY_MAX


def test_lowering_the_mlp_plans_its_skinny_products_as_kernels():
    import functrace.numpy as fnp

    def loss(w1, b1, w2, x, labels):
        h = fnp.tanh(x @ w1 + b1)
        logits = h @ w2
        return fnp.mean(fnp.logsumexp(logits, axis=1)
                        - fnp.take_along_axis(logits, labels[:, None], axis=1)[:, 0])

    args = [ft.ShapeDtype((784, 2048), np.float32), ft.ShapeDtype((2048,), np.float32),
            ft.ShapeDtype((2048, 10), np.float32), ft.ShapeDtype((4096, 784), np.float32),
            ft.ShapeDtype((4096,), np.int64)]
    g = ft.jit(ft.value_and_grad(loss, argnums=(0, 1, 2))).lower(*args).graph
    counts = {}
    for skinny in (0, 16):
        prog = numba_cuda.lower(g, config=numba_cuda.LaunchConfig(skinny=skinny))
        counts[skinny] = sum(prog.graph.eqns[s.eqn].op.name == "dot_general"
                             for s in prog.plan.steps if not hasattr(s, "eqns"))
        if skinny:
            # each skinny product is one kernel; the long ones are cut into segments that a
            # thread per output combines
            prods = [ks for ks in prog.kernels.values() if ks.spec.ndim == 3]
            assert len(prods) == 3
            assert all(ks.launch.strategy == "thread" for ks in prods)
            assert {ks.launch.finish for ks in prods if ks.launch.nseg > 1} == {"thread"}
    assert counts == {0: 5, 16: 2}
