"""The numba CPU executor against the reference interpreter, op family by op family, plus the
fusion plan, the buffer plan, the tiers, the disk cache and the generated source.

Tolerances (stated once): float64 results agree with the reference interpreter to rtol 1e-14
for elementwise math (the vector math library is within 3 ulp of numpy; arithmetic is
bit-identical) and 1e-12 for reductions (a different, pairwise, summation order); float32 to
rtol 2e-6 (reductions 2e-5). NaN and inf positions and signed zeros must match exactly.
Integer and boolean results must be identical. Kernels compile into a per-session disk cache
(compile cost ~0.1-0.5 s each), so the number of distinct graphs is kept small.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from backend_checks import assert_same, kernel_cache_dir

import functrace as ft
import functrace.numpy as fnp
from functrace import ops
from functrace.backends import reference as numpy_ref
from functrace.backends.cpu import executor as numba_cpu
from functrace.backends.cpu.threads import Threads
from functrace.core import AVal, ScalarCode, Var
from functrace.passes import fusion
from functrace.passes.fusion import Group, OpStep, plan_fusion
from functrace.passes.memory import plan_buffers
from functrace.passes.simplify import optimize
from functrace.tracing import trace_to_graph

pytest.importorskip("numba")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    with kernel_cache_dir(tmp_path_factory.getbasetemp() / "functrace-kernels") as d:
        yield d


def graph_of(fn, *avals):
    return trace_to_graph(lambda *xs: list(fn(*xs)), list(avals)).graph


def run_both(g, args, **kw):
    ex = numba_cpu.Executable(g, eager=True, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = ex(*args)
        want = numpy_ref.run(g, list(args))
    return ex, got, want


def no_numpy_fallback(ex):
    """Every group of the plan became a compiled kernel."""
    prog = ex.lower()
    groups = [s for s in prog.plan.steps if isinstance(s, Group)]
    assert len(groups) == len(prog.kernels), "a group fell back to numpy"
    assert not prog.no_fuse, "some equations were excluded from fusion after a failure"


# --------------------------------------------------------------------------------------------
# elementwise math: every op with a CPU expression, on special values
# --------------------------------------------------------------------------------------------

SPECIAL = [-np.inf, -1e300, -700.0, -10.0, -3.0, -1.5, -1.0, -0.75, -0.5, -1e-310, -0.0, 0.0,
           1e-310, 0.25, 0.5, 0.9, 1.0, 1.5, 2.0, 3.0, 10.0, 700.0, 1e300, np.inf, np.nan]
UNARY = ["neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
         "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sqrt",
         "cbrt", "rsqrt", "logistic", "sinc", "abs", "sign", "floor", "ceil", "trunc", "round",
         "isnan", "isinf", "isfinite", "signbit", "stop_gradient"]
BINARY = ["add", "sub", "mul", "div", "floordiv", "rem", "fmod", "pow", "maximum", "minimum",
          "atan2", "hypot", "logaddexp", "copysign", "eq", "ne", "lt", "le", "gt", "ge",
          "logical_and", "logical_or", "logical_xor"]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_elementwise_float_ops_match_reference(dtype):
    dt = np.dtype(dtype)
    with np.errstate(over="ignore"):
        xs = np.array(SPECIAL + list(np.linspace(-4, 4, 37)), dt)
    ys = np.roll(xs, 7)

    def fn(x, y):
        outs = [getattr(ops, n)(x) for n in UNARY]
        outs += [getattr(ops, n)(x, y) for n in BINARY]
        outs += [ops.integer_pow(x, 3), ops.integer_pow(x, 2), ops.integer_pow(x, -2),
                 ops.integer_pow(x, 0), ops.clip(x, np.asarray(-1, dt), np.asarray(2, dt)),
                 ops.select(ops.gt(x, y), x, y), ops.convert_element_type(x, bool),
                 ops.convert_element_type(x, np.float64 if dt == np.float32 else np.float32),
                 ops.logical_not(ops.gt(x, y))]
        return outs

    g = graph_of(fn, AVal(xs.shape, dt), AVal(ys.shape, dt))
    ex, got, want = run_both(g, [xs, ys])
    no_numpy_fallback(ex)
    assert len(ex.lower().kernels) <= 3    # siblings reading x share loops
    names = UNARY + BINARY + ["ipow3", "ipow2", "ipow-2", "ipow0", "clip", "select", "tobool",
                              "tofloat", "not"]
    rtol = 1e-14 if dt == np.float64 else 2e-6
    for n, a, b in zip(names, got, want, strict=True):
        # numba's float32 sinc rounds sin(pi*x)/(pi*x) once; numpy rounds pi*x first: both
        # are within float32 noise of 0 at the integers
        assert_same(a, b, rtol, n, atol=1e-6 if (n == "sinc" and dt == np.float32) else 0.0)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int8"])
def test_integer_ops_match_reference(dtype):
    dt = np.dtype(dtype)
    info = np.iinfo(dt)
    base = [0, 1, 2, 3, 5, 7, 100 % (info.max + 1), info.max, info.min, info.max - 1]
    xs = np.array(base + (list(range(-20, 20)) if info.min < 0 else list(range(40))), dt)
    ys = np.roll(xs, 3)     # includes zero divisors: numpy gives 0, so must the kernels
    binary = ["add", "sub", "mul", "floordiv", "rem", "fmod", "maximum", "minimum", "eq", "ne",
              "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]

    def fn(x, y):
        o = [getattr(ops, n)(x, y) for n in binary]
        o += [ops.neg(x), ops.abs(x), ops.sign(x), ops.logical_not(x), ops.integer_pow(x, 3),
              ops.integer_pow(x, 2), ops.convert_element_type(x, np.float32),
              ops.convert_element_type(x, np.int16), ops.select(ops.gt(x, y), x, y)]
        return o

    g = graph_of(fn, AVal(xs.shape, dt), AVal(ys.shape, dt))
    ex, got, want = run_both(g, [xs, ys])
    no_numpy_fallback(ex)
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 0)


def test_bool_ops_match_reference():
    x = np.array([True, False, True, False])
    y = np.array([True, True, False, False])

    def fn(a, b):
        return [ops.logical_and(a, b), ops.logical_or(a, b), ops.logical_xor(a, b),
                ops.logical_not(a), ops.eq(a, b), ops.select(a, b, ops.logical_not(b)),
                ops.maximum(a, b), ops.add(a, b), ops.mul(a, b)]

    g = graph_of(fn, AVal((4,), bool), AVal((4,), bool))
    ex, got, want = run_both(g, [x, y])
    no_numpy_fallback(ex)
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 0)


# --------------------------------------------------------------------------------------------
# reductions: every kind, direct (inner axis kept) and chunked (inner axis reduced)
# --------------------------------------------------------------------------------------------

_AXES = [(0,), (2,), (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("kind, dtype", [
    (k, d) for d in ("float64", "float32", "int32")
    for k in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
              "logsumexp") if not (k == "logsumexp" and d == "int32")])
def test_reductions_match_reference(kind, dtype):
    dt = np.dtype(dtype)
    rng = np.random.default_rng(0)
    shape = (3, 5, 2100)     # inner extent > one chunk of the chunked reduction
    if dt.kind == "f":
        x = (rng.normal(size=shape) * 3).astype(dt)
        y = rng.normal(size=shape).astype(dt)
        x[0, 1, 7] = np.nan
        x[1, 3, 2000] = np.inf
        x[2, 2, :] = -np.inf
    else:
        x = rng.integers(-50, 50, shape).astype(dt)
        y = rng.integers(1, 3, shape).astype(dt)
    axes_list = _AXES if dt == np.float64 else [(2,), (0,)]
    if kind == "logsumexp":
        axes_list = [(2,), (1, 2), (0, 1, 2)]

    for axes in axes_list:
        def fn(a, b):
            if kind in ("reduce_and", "reduce_or"):
                v = ops.gt(a, b)
            elif kind == "reduce_prod":   # keep products finite: factors near 1
                one = np.asarray(1, a.dtype)
                v = ops.add(ops.convert_element_type(ops.gt(a, b), a.dtype), one)
                if a.dtype.kind == "f":
                    v = ops.div(v, np.asarray(1.9995, a.dtype))
            else:
                v = ops.mul(a, b)
            return [getattr(ops, kind)(v, axes), ops.logical_not(v) if v.dtype == bool
                    else ops.neg(v)]

        g = graph_of(fn, AVal(shape, dt), AVal(shape, dt))
        ex, got, want = run_both(g, [x, y])
        no_numpy_fallback(ex)
        assert len(ex.lower().kernels) == 1
        rtol = {np.dtype("float64"): 1e-12, np.dtype("float32"): 2e-5}.get(dt, 0)
        for a, b in zip(got, want, strict=True):
            assert_same(a, b, rtol, f"{kind} {axes}", atol=rtol * 100)


# --------------------------------------------------------------------------------------------
# fusion plan
# --------------------------------------------------------------------------------------------

def _chain(x):
    return fnp.sum(fnp.tanh(fnp.sin(x) * x + fnp.exp(-x ** 2)) * 0.5)


def test_forward_and_backward_of_an_elementwise_chain_are_one_kernel():
    vg = ft.value_and_grad(_chain)
    g = optimize(trace_to_graph(lambda x: list(vg(x)), [AVal((1000,), "float64")]).graph)
    x = np.linspace(-3, 3, 1000)
    ex, got, want = run_both(g, [x])
    plan = ex.lower().plan
    assert [type(s) for s in plan.steps] == [Group]
    assert plan.steps[0].reduction is not None
    for a, b in zip(got, want, strict=True):   # composite: errors relative to the scale
        assert_same(a, b, 1e-14, atol=1e-14 * np.max(np.abs(b)))
    src = ex.lower().source
    assert "vm.vsin" in src and "vm.vtanh" in src and "vm.vexp" in src   # vector math
    assert "fastmath=True" not in src and 'error_model="numpy"' in src


def test_views_are_folded_into_reads():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(6, 7))
    b = rng.normal(size=(7,))
    c = rng.normal(size=(7, 6))
    s = rng.normal(size=())

    def fn(a, b, c, s):
        bb = ops.broadcast_in_dim(b, (6, 7), (1,))
        ct = ops.transpose(c, (1, 0))
        col = ops.broadcast_in_dim(ops.reshape(ops.reduce_sum(a, (1,)), (6, 1)), (6, 7), (0, 1))
        return [ops.tanh(ops.add(ops.mul(a, bb), ops.mul(ct, s))), ops.exp(ops.sub(a, col))]

    g = graph_of(fn, AVal(a.shape, a.dtype), AVal(b.shape, b.dtype), AVal(c.shape, c.dtype),
                 AVal((), a.dtype))
    ex, got, want = run_both(g, [a, b, c, s])
    no_numpy_fallback(ex)
    plan = ex.lower().plan
    names = [g.eqns[st.eqn].op.name for st in plan.steps if isinstance(st, OpStep)]
    # the broadcasts and the transpose run inside the kernel; the unit reshape too
    assert not {"broadcast_in_dim", "transpose", "reshape"} & set(names), plan
    for x, y in zip(got, want, strict=True):
        assert_same(x, y, 1e-14, atol=1e-14 * np.max(np.abs(y)))


def test_cheap_forward_values_are_recomputed_not_stored():
    def fn(x):
        a = ops.mul(x, np.asarray(2.0))
        s = ops.reduce_sum(ops.tanh(ops.mul(a, a)), (0,))
        return [s, ops.tanh(ops.mul(a, s))]    # reads the reduction result: a second kernel

    g = graph_of(fn, AVal((100,), "float64"))
    plan = plan_fusion(g, numba_cpu.fusible, numba_cpu.prefer_kernel)
    groups = [s for s in plan.steps if isinstance(s, Group)]
    assert len(groups) == 2
    first, second = groups
    a_var = g.eqns[0].outputs[0]
    assert second.recomputed == [0]          # x * 2 recomputed in the second kernel
    assert a_var not in first.outputs        # ... so the first kernel does not store it
    x = np.linspace(-1, 1, 100)
    _, got, want = run_both(g, [x])
    for p, q in zip(got, want, strict=True):
        assert_same(p, q, 1e-13, atol=1e-13 * np.max(np.abs(q)))


def test_unrelated_sums_of_one_shape_each_keep_their_product_in_their_kernel():
    # two independent sum(a * b) over one loop shape: the second multiply used to join the
    # first sum's group (a recent group of its shape), then its own sum could not (one
    # reduction per group) and ran alone as a numpy op on the stored product
    def fn(a, b, c, d):
        return [ops.reduce_sum(ops.mul(a, b), (1,)), ops.reduce_sum(ops.mul(c, d), (1,))]

    g = graph_of(fn, *[AVal((30, 40), "float64")] * 4)
    plan = plan_fusion(g, numba_cpu.fusible, numba_cpu.prefer_kernel)
    assert not [s for s in plan.steps if isinstance(s, OpStep)]
    groups = [s for s in plan.steps if isinstance(s, Group)]
    assert sorted(sorted(g.eqns[i].op.name for i in grp.eqns) for grp in groups) == \
        [["mul", "reduce_sum"], ["mul", "reduce_sum"]]
    assert all(not grp.outputs for grp in groups)          # no product is stored
    rng = np.random.default_rng(5)
    _, got, want = run_both(g, [rng.normal(size=(30, 40)) for _ in range(4)])
    for p, q in zip(got, want, strict=True):
        assert_same(p, q, 1e-14, atol=1e-14 * np.max(np.abs(q)))


def test_logsumexp_maximum_pass_computes_only_the_reduced_value():
    # a logsumexp kernel that also writes exp(x) * y: its first pass (the maximum) reads x
    # alone; the other values and the output are computed once, in the second pass
    def fn(x, y):
        return [ops.logsumexp(ops.mul(x, np.asarray(2.0)), (1,)), ops.mul(ops.exp(x), y)]

    g = graph_of(fn, AVal((5, 7), "float64"), AVal((5, 7), "float64"))
    prog = numba_cpu.lower(g)
    (ks,) = [k for k in prog.kernels.values() if k.spec.reduction is not None]
    first_pass = ks.source.split("shift = ")[0]
    assert "vm.vexp" not in first_pass and "o0[" not in first_pass
    assert ks.source.count("vm.vexp(x0)") == 1
    rng = np.random.default_rng(6)
    x = rng.normal(size=(5, 7))
    x[1] = -np.inf                                    # an all -inf row: shift 0
    x[2, 3] = np.nan
    _, got, want = run_both(g, [x, rng.normal(size=(5, 7))])
    for p, q in zip(got, want, strict=True):
        assert_same(p, q, 1e-14, atol=1e-14)


def test_cheap_values_are_recomputed_from_a_stored_costly_one():
    # tanh's derivative 1 - t*t: t is stored anyway (the product reads it), so the backward
    # kernel recomputes 1 - t*t from t rather than the forward kernel storing both
    def fn(x, w):
        t = ops.tanh(ops.mul(x, np.asarray(0.5)))
        u = ops.sub(np.asarray(1.0), ops.mul(t, t))
        d = ops.dot_general(t, w, (((1,), (0,)), ((), ())))       # BLAS: reads t
        return [ops.tanh(ops.mul(d, u))]

    g = graph_of(fn, AVal((64, 64), "float64"), AVal((64, 64), "float64"))
    plan = plan_fusion(g, numba_cpu.fusible, numba_cpu.prefer_kernel)
    first, second = [s for s in plan.steps if isinstance(s, Group)]
    t_var, u_var = g.eqns[1].outputs[0], g.eqns[3].outputs[0]
    assert [g.eqns[i].op.name for i in second.recomputed] == ["mul", "sub"]
    assert first.outputs == [t_var] and u_var not in first.outputs
    rng = np.random.default_rng(3)
    _, got, want = run_both(g, [rng.normal(size=(64, 64)), rng.normal(size=(64, 64))])
    assert_same(got[0], want[0], 1e-13, atol=1e-13 * np.max(np.abs(want[0])))


def test_scalar_math_is_planned_early_and_does_not_split_a_kernel(monkeypatch):
    # norm.logpdf(x, loc, scale).sum(): log(scale) is traced after the chain over x. Planned
    # in graph order it became a second step, and the chain a kernel that wrote an array for
    # a third kernel (subtract, sum) to read back. Scalars now come first: one kernel over x.
    # The graph-order plan is the slow path: elementwise results must be bit for bit the same
    # (the same operations in the same order), sums agree to rounding (a sum may move between
    # a kernel's and numpy's summation), and both match the reference interpreter.
    def logpdf(x, loc, scale):
        z = (x - loc) / scale
        return fnp.sum(-0.5 * z * z - 0.9189385332046727 - fnp.log(scale))

    vg = ft.value_and_grad(logpdf, argnums=(0, 1, 2))
    avals = [AVal((1000,), "float64"), AVal((), "float64"), AVal((), "float64")]
    g_value = optimize(trace_to_graph(lambda *a: [logpdf(*a)], avals).graph)
    g_grad = optimize(trace_to_graph(lambda *a: (lambda v, gs: [v, *gs])(*vg(*a)),
                                     avals).graph)
    # a scalar that depends on a reduction stays after it (softmax with a 0-d normaliser)
    g_softmax = graph_of(lambda x: [fnp.exp(x - fnp.log(fnp.sum(fnp.exp(x))))],
                         AVal((1000,), "float64"))
    x = np.random.default_rng(6).normal(size=1000)
    cases = [(g_value, [x, np.asarray(0.3), np.asarray(1.7)]),
             (g_grad, [x, np.asarray(0.3), np.asarray(1.7)]), (g_softmax, [x])]
    for g, args in cases:
        ex, got, want = run_both(g, args)
        no_numpy_fallback(ex)
        for a, b in zip(got, want, strict=True):
            assert_same(a, b, 1e-12, atol=1e-12 * np.max(np.abs(b)))
        with monkeypatch.context() as m:
            m.setattr(fusion, "_visit_order", lambda eqns: list(range(len(eqns))))
            slow = numba_cpu.Executable(g, eager=True)(*args)
        for a, b in zip(got, slow, strict=True):
            if np.ndim(b):
                np.testing.assert_array_equal(a, b)
            else:
                assert_same(a, b, 1e-14)
    plan = plan_fusion(g_value, numba_cpu.fusible, numba_cpu.prefer_kernel)
    groups = [s for s in plan.steps if isinstance(s, Group)]
    assert [s.shape for s in groups] == [(), (1000,)], plan        # log(scale), then the rest
    assert groups[1].reduction is not None and not groups[1].outputs
    assert [len(numba_cpu.lower(g).kernels) for g, _ in cases[:2]] == [2, 2]


def test_a_value_read_through_a_view_is_not_recomputed():
    # e is cheap, but the later group reads it both as e and as e.T: recomputing e there would
    # make the kernel read a member value through a transpose, which it cannot
    def fn(x, w):
        d = ops.dot_general(x, w, (((1,), (0,)), ((), ())))           # BLAS: a separate step
        e = ops.add(ops.convert_element_type(d, np.float64), np.asarray(1.0))
        f = ops.sin(ops.add(e, ops.mul(ops.transpose(e, (1, 0)), np.asarray(0.5))))
        return [ops.sub(f, e)]

    g = graph_of(fn, AVal((40, 40), "float32"), AVal((40, 40), "float32"))
    rng = np.random.default_rng(5)
    ex, got, want = run_both(g, [rng.normal(size=(40, 40)).astype(np.float32),
                                 rng.normal(size=(40, 40)).astype(np.float32)])
    assert not ex.lower().unsupported, ex.lower().unsupported
    assert_same(got[0], want[0], 1e-12, atol=1e-12 * np.max(np.abs(want[0])))


def test_small_contractions_become_fused_loops():
    from functrace.backends.cpu.dots import SMALL_DOT, small_dots_as_loops
    rng = np.random.default_rng(4)
    w, h, x = rng.normal(size=(16, 16)), rng.normal(size=16), rng.normal(size=16)

    def fn(w, h, x):
        z = ops.dot_general(w, h, (((1,), (0,)), ((), ())))            # matrix-vector
        o = ops.dot_general(h, x, (((), ()), ((), ())))                # outer product
        t = ops.dot_general(w, o, (((0,), (1,)), ((), ())))            # w.T @ o.T
        return [ops.tanh(ops.add(z, x)), ops.add(o, w), t]

    g = graph_of(fn, AVal(w.shape, w.dtype), AVal(h.shape, h.dtype), AVal(x.shape, x.dtype))
    assert 16 ** 3 <= SMALL_DOT
    g2 = small_dots_as_loops(g)
    ft.verify(g2)
    assert "dot_general" not in {e.op.name for e in g2.eqns}
    ex, got, want = run_both(g, [w, h, x])
    no_numpy_fallback(ex)
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 1e-13, atol=1e-13 * np.max(np.abs(b)))
    big = graph_of(fn, AVal((64, 64), "float64"), AVal((64,), "float64"), AVal((64,), "float64"))
    assert "dot_general" in {e.op.name for e in small_dots_as_loops(big).eqns}   # BLAS


def test_group_size_is_bounded():
    def fn(x):
        for _ in range(60):
            x = ops.sin(ops.mul(x, np.asarray(1.01)))
        return [x]

    g = graph_of(fn, AVal((10,), "float64"))
    plan = plan_fusion(g, numba_cpu.fusible, numba_cpu.prefer_kernel, max_eqns=40)
    sizes = [len(s.eqns) for s in plan.steps if isinstance(s, Group)]
    assert max(sizes) <= 40 and sum(sizes) == 120


def test_kernels_are_shared_between_graphs_by_structure():
    def f(x, y):
        return [ops.tanh(ops.add(ops.mul(x, y), np.asarray(1.0)))]

    g1 = graph_of(f, AVal((50,), "float64"), AVal((50,), "float64"))
    g2 = graph_of(f, AVal((7, 3), "float64"), AVal((7, 3), "float64"))   # other shape
    k1 = {k.key for k in numba_cpu.lower(g1).kernels.values()}
    k2 = {k.key for k in numba_cpu.lower(g2).kernels.values()}
    assert k1 == k2


# --------------------------------------------------------------------------------------------
# buffers
# --------------------------------------------------------------------------------------------

def test_plan_buffers_reuses_dead_slots_and_never_pools_outputs():
    vs = [Var(AVal((100,), "float64")) for _ in range(5)]
    reads = [[], [vs[0]], [vs[1]], [vs[2]]]
    writes = [[vs[0]], [vs[1]], [vs[2]], [vs[3]]]
    bp = plan_buffers(reads, writes, [vs[3]], poolable=lambda v: True,
                      nbytes=lambda v: 800)
    assert vs[3] not in bp.slot_of                     # escapes: a fresh array
    assert bp.slot_of[vs[0]] != bp.slot_of[vs[1]]      # v0 is read while v1 is written
    assert bp.slot_of[vs[2]] == bp.slot_of[vs[0]]      # v0 is dead by then: reused
    assert len(bp.sizes) == 2
    # a donated input can hold an output once it is dead
    bp = plan_buffers([[vs[4]], [vs[0]]], [[vs[0]], [vs[1]]], [vs[1]],
                      poolable=lambda v: True, nbytes=lambda v: 800, donated=[(0, vs[4])])
    assert bp.donated_slot == {vs[1]: 0}


def test_plan_buffers_keeps_a_base_alive_while_a_view_of_it_is_read():
    # v0 (pooled) -> v1 = reshape(v0) -> v2 = transpose(v1), read by the last step: v0's
    # slot must not hold the value written by step 3 while v2 (a view of it) is read there
    vs = [Var(AVal((6,), "float64")) for _ in range(5)]
    reads = [[], [vs[0]], [vs[1]], [vs[2]]]
    writes = [[vs[0]], [vs[1]], [vs[2]], [vs[3]]]
    pool = {vs[0], vs[3]}
    alias = {vs[1]: [vs[0]], vs[2]: [vs[1]]}
    bp = plan_buffers(reads, writes, [vs[4]], poolable=pool.__contains__,
                      nbytes=lambda v: 48, aliases=alias)
    assert bp.slot_of[vs[3]] != bp.slot_of[vs[0]]
    # without the aliases the slot was reused (the bug the fuzzer found)
    bp = plan_buffers(reads, writes, [vs[4]], poolable=pool.__contains__, nbytes=lambda v: 48)
    assert bp.slot_of[vs[3]] == bp.slot_of[vs[0]]


def test_compiled_gradient_through_reshape_and_transpose_views():
    # the pooled sin(u) was overwritten by cos(transpose(...)) while its reshaped
    # view was still to be read (4 of 6 gradient entries were wrong)
    f = lambda u: fnp.sum(fnp.sin(fnp.transpose(fnp.reshape(fnp.sin(u), (2, 3)))))  # noqa: E731
    x = np.linspace(-1, 1, 6)
    want = ft.grad(f)(x)
    for _ in range(2):
        np.testing.assert_allclose(ft.jit(ft.grad(f), eager=True)(x), want, rtol=1e-14)


def test_maximum_minimum_clip_keep_numpys_signed_zeros_and_nans():
    # found by the fuzzer: numba's np.maximum/np.minimum return their first operand on ties,
    # numpy's ufuncs the second; numpy.clip keeps x where it equals a (scalar) bound (the
    # kernels carry no fast-math flag, so ``nsz`` cannot pick either zero)
    a = np.array([-0.0, 0.0, -0.0, np.nan, 1.0, 0.0, 2.0, -1.0, 0.0] * 3)
    b = np.array([0.0, -0.0, -0.0, 1.0, np.nan, 0.0, 0.5, -0.0, np.nan] * 3)
    fns = {"maximum": lambda a, b: fnp.maximum(a * 2.0, b * 2.0),
           "minimum": lambda a, b: fnp.minimum(a * 2.0, b * 2.0),
           "clip": lambda a, b: fnp.clip(a * 2.0, 0.0, 1.0),
           "clip -0": lambda a, b: fnp.clip(a * 2.0, -0.0, 1.0),
           # array bounds: numpy returns the bound on +-0 ties there (not x, as it does for
           # scalar bounds); functrace keeps x, so no ties in this row
           "clip nan": lambda a, b: fnp.clip(a * 2.0, np.where(b == 0, 0.25, b), 1.0)}
    for name, f in fns.items():
        want = f(a, b)                                   # numpy itself
        for got in (ft.jit(f, eager=True)(a, b), ft.jit(f, backend="numpy")(a, b)):
            np.testing.assert_array_equal(got, want, err_msg=name)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=name)


def test_sums_of_negative_zeros_are_positive_zero_like_numpys():
    # found by the fuzzer: numpy adds to its identity +0.0, so a sum of -0.0s is +0.0, also
    # over extent-1 axes (a kernel used the value itself) and over no axis at all (traced
    # fnp.sum returned x); gradients of 1-element sums showed it as -0.0 vs 0.0
    x = np.array([[-0.0], [1.0], [-0.0]])
    fns = {"extent-1 axis": lambda x: fnp.sum(x * 2.0, axis=1),
           "no axis": lambda x: fnp.sum(x[0, 0] * 2.0),
           "keepdims": lambda x: fnp.sum(x * 2.0, axis=(1,), keepdims=True),
           "mean": lambda x: fnp.mean(x * 2.0, axis=1)}
    for name, f in fns.items():
        want = f(x)
        for got in (ft.jit(f, eager=True)(x), ft.jit(f, backend="numpy")(x),
                    ft.vmap(f)(x[None])[0]):
            np.testing.assert_array_equal(got, want, err_msg=name)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=name)


def test_pool_is_reused_and_outputs_stay_fresh():
    rng = np.random.default_rng(2)
    w = rng.normal(size=(30, 30))

    def fn(x, w):
        for _ in range(4):
            x = ops.tanh(ops.dot_general(ops.sin(x), w, (((1,), (0,)), ((), ()))))
        return [x]

    g = graph_of(fn, AVal((20, 30), "float64"), AVal((30, 30), "float64"))
    ex = numba_cpu.Executable(g, eager=True)
    x1, x2 = rng.normal(size=(20, 30)), rng.normal(size=(20, 30))
    r1 = ex(x1, w)[0]
    keep = r1.copy()
    r2 = ex(x2, w)[0]
    np.testing.assert_array_equal(r1, keep)            # not overwritten by the next call
    assert not np.shares_memory(r1, r2)
    assert_same(r2, numpy_ref.run(g, [x2, w])[0], 1e-13, atol=1e-13)
    bp = ex.lower().buffers
    n_pooled = len(bp.slot_of)
    assert n_pooled >= 6 and len(bp.sizes) <= 3        # 8 intermediates share 2-3 buffers


def test_donated_input_buffer_holds_the_output():
    g = graph_of(lambda x: [ops.tanh(ops.mul(x, np.asarray(3.0)))], AVal((1000,), "float64"))
    ex = numba_cpu.Executable(g, eager=True, donate=(0,))
    x = np.linspace(-1, 1, 1000)
    want = np.tanh(3 * x)
    out = ex(x.copy())[0]
    np.testing.assert_allclose(out, want, rtol=1e-14)
    x2 = np.linspace(-1, 1, 1000)
    out2 = ex(x2)[0]
    assert np.shares_memory(out2, x2)
    np.testing.assert_allclose(out2, want, rtol=1e-14)
    ro = np.linspace(-1, 1, 1000)
    ro.flags.writeable = False                          # not donatable: a fresh output
    out3 = ex(ro)[0]
    assert not np.shares_memory(out3, ro)


# --------------------------------------------------------------------------------------------
# sin/cos/tan kernels: a libm-free loop unless some argument needs libm (render._trig_check)
# --------------------------------------------------------------------------------------------

def _trig_graph():
    """sin/cos/tan of cheap arguments (reads and arithmetic), an elementwise output and a
    sum, one kernel."""
    def f(x, y):
        xy = ops.mul(x, y)
        e = ops.add(ops.mul(ops.sin(x), ops.cos(xy)), ops.tan(ops.add(x, np.asarray(0.5))))
        return [e, ops.reduce_sum(ops.mul(ops.sin(xy), ops.cos(x)), (0,))]
    return graph_of(f, AVal((3000,), "float64"), AVal((3000,), "float64"))


def _huge(x, at):
    x = x.copy()
    x[at] = [1e7, -1e300, 1e22, np.inf, np.nan, -1e6][:len(at)]
    return x


def test_trig_kernel_branches_give_the_same_bits():
    """The kernel counts the trig arguments that need libm (finite |x| >= 1e6) and runs the
    libm-free loop when there are none, else a scalar loop through libm: elements whose
    arguments are small have the same bits whichever ran, and both match the interpreter."""
    g = _trig_graph()
    rng = np.random.default_rng(12)
    x, y = rng.uniform(-20, 20, 3000), rng.uniform(-3, 3, 3000)
    ex, clean, want = run_both(g, [x, y])
    no_numpy_fallback(ex)
    src = ex.lower().source
    assert "vm.trig_big(" in src and "vm.vsin_fast(" in src and "vc.vsin_scalar(" in src
    assert "vm.vsin(" not in src and "vm.vtan(" not in src
    for a, b in zip(clean, want, strict=True):
        assert_same(a, b, 1e-12, atol=1e-12)
    at = [7, 100, 1500, 2001, 2999, 5]
    for xs, ys in ((_huge(x, at), y), (x, _huge(y, at[:3]))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = ex(xs, ys)
            ref = numpy_ref.run(g, [xs, ys])
        small = np.ones(3000, bool)
        small[at] = False
        np.testing.assert_array_equal(got[0][small], clean[0][small])
        for a, b in zip(got, ref, strict=True):
            assert_same(a, b, 1e-12, atol=1e-12)


def test_trig_kernel_writing_in_place_checks_before_writing():
    """A donated input holding the output: the arguments are counted before the loops write,
    so a huge argument still sees its own input."""
    g = graph_of(lambda x: [ops.mul(ops.sin(x), ops.cos(ops.mul(x, np.asarray(2.0))))],
                 AVal((1000,), "float64"))
    ex = numba_cpu.Executable(g, eager=True, donate=(0,))
    x = _huge(np.linspace(-5, 5, 1000), [3, 500, 999])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = numpy_ref.run(g, [x.copy()])[0]
        x2 = x.copy()
        out = ex(x2)[0]
    assert np.shares_memory(out, x2)
    assert_same(out, want, 1e-14, atol=1e-15)


def test_trig_of_a_costly_argument_is_not_checked_twice():
    """sin(exp(x)): the argument needs a helper call, which the check would repeat; the
    kernel keeps the plain vm.vsin (libm only on the lanes that need it)."""
    g = graph_of(lambda x: [ops.sin(ops.exp(x))], AVal((500,), "float64"))
    x = np.linspace(-2, 12, 500)
    ex, got, want = run_both(g, [x])
    src = ex.lower().source
    assert "vm.vsin(" in src and "trig_big" not in src
    # exp's ulp is amplified by sin's argument (up to 1.6e5): ~4e-11 absolute
    assert_same(got[0], want[0], 1e-9, atol=1e-9)


def test_parallel_trig_kernel_matches_serial_in_both_branches():
    g = graph_of(lambda x: [ops.reduce_sum(ops.sin(x), (1,)), ops.mul(ops.cos(x), x)],
                 AVal((64, 300), "float64"))
    x = np.random.default_rng(13).normal(size=(64, 300))
    ex = numba_cpu.Executable(g, eager=True, parallel=Threads(2, min_work=0))
    serial = numba_cpu.Executable(g, eager=True)
    ex.upgrade()
    src = ex.lower().source
    assert "numba.prange" in src and src.count("trig_big") >= 2 and ex.parallel_kernels >= 1
    big = x.copy()
    big[5, 7], big[63, 0] = 3e9, -np.inf
    for xs in (x, big):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got, want = ex(xs), serial(xs)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------------------------
# tiers, caches, failures, options
# --------------------------------------------------------------------------------------------

def test_first_call_runs_on_the_interpreter_then_compiles():
    g = graph_of(lambda x: [ops.exp(ops.neg(ops.mul(x, x)))], AVal((10,), "float64"))
    ex = numba_cpu.Executable(g, hot_after=2)
    if ex.lower().all_cached():
        pytest.skip("kernels already on disk: the executable compiles at once")
    x = np.linspace(-1, 1, 10)
    a = ex(x)[0]
    assert not ex.compiled
    b = ex(x)[0]
    assert ex.compiled
    np.testing.assert_allclose(a, b, rtol=1e-15)


def test_compile_failure_falls_back_to_numpy(monkeypatch, caplog):
    monkeypatch.setitem(ops.cosh_p.code, "cpu", ScalarCode("no_such_function({0})"))
    g = graph_of(lambda x: [ops.cosh(ops.mul(x, np.asarray(2.0)))], AVal((8,), "float64"))
    ex = numba_cpu.Executable(g, eager=True)
    x = np.linspace(-1, 1, 8)
    with caplog.at_level(logging.WARNING, logger="functrace"):
        out = ex(x)[0]
    assert any("failed to compile" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(out, np.cosh(2 * x), rtol=1e-15)
    assert ex.lower().no_fuse


def test_parallel_kernels_match():
    """Parallel kernels (every kernel that can be split: min_work 0) against the interpreter,
    and bit for bit against the serial kernels; tests/backends/test_threads.py has more."""
    g = graph_of(lambda x: [ops.reduce_sum(ops.tanh(x), (1,)), ops.exp(x)],
                 AVal((64, 300), "float64"))
    x = np.random.default_rng(3).normal(size=(64, 300))
    ex, serial, want = run_both(g, [x], parallel=Threads(2, min_work=0))
    assert "numba.prange" in ex.lower().source
    assert ex.parallel_kernels == 0       # compiled on the second call, or now:
    got = ex.upgrade()(x)
    assert ex.parallel_kernels == len(ex.lower().kernels) >= 1
    for a, b, c in zip(got, want, serial, strict=True):
        assert_same(a, b, 1e-12)
        np.testing.assert_array_equal(a, c)


def test_debug_env_prints_ir_and_kernels(monkeypatch, capsys, caplog):
    monkeypatch.setenv("FUNCTRACE_DEBUG", "2")
    g = graph_of(lambda x: [ops.sin(ops.mul(x, np.asarray(1.5)))], AVal((5,), "float64"))
    with caplog.at_level(logging.INFO, logger="functrace"):
        numba_cpu.Executable(g, eager=True)(np.ones(5))
    err = capsys.readouterr().err
    assert "sin(" in err and "def kernel(" in err
    assert any("compiled" in r.getMessage() for r in caplog.records)


def _run_py(code, cache):
    env = dict(os.environ, FUNCTRACE_CACHE_DIR=cache, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_import_and_lowering_do_not_import_numba(tmp_path):
    out = _run_py("""
        import sys
        import numpy as np, functrace as ft, functrace.numpy as fnp
        f = ft.jit(lambda x: fnp.sum(fnp.tanh(x)))
        src = f.lower(np.ones(3)).source
        assert "def kernel" in src
        print("numba" in sys.modules)
    """, str(tmp_path))
    assert out.strip() == "False"


def test_disk_cache_is_reused_by_a_fresh_process(tmp_path):
    code = """
        import numpy as np, functrace as ft, functrace.numpy as fnp
        from functrace.backends.cpu import executor as numba_cpu
        from functrace.backends.cpu import kernels as cpu_kernels
        f = ft.jit(ft.grad(lambda x: fnp.sum(fnp.sin(x) * fnp.exp(x))), eager=True)
        x = np.linspace(-1, 1, 7)
        ex = f.lower(x)
        print(numba_cpu.lower(ex.graph).all_cached())
        g = f(x)
        assert np.allclose(g, np.cos(x) * np.exp(x) + np.sin(x) * np.exp(x))
        hits = sum(sum(k.stats.cache_hits.values()) for k in cpu_kernels._kernels.values())
        print(hits > 0)
    """
    first = _run_py(code, str(tmp_path)).split()
    second = _run_py(code, str(tmp_path)).split()
    assert first == ["False", "False"]
    assert second == ["True", "True"]
    assert any(p.name.startswith("ftk_") and p.suffix == ".py" for p in tmp_path.iterdir())


def test_compiles_run_with_the_garbage_collector_paused(monkeypatch):
    """numba's compiler allocates enough to trigger many collections, each walking the whole
    heap (a fifth of a compile): kernels compile with ``gc`` paused. Afterwards the
    collector is back as it was: enabled, or disabled if the program had disabled it."""
    import gc

    from functrace.backends import gc_pause
    load = numba_cpu.load_kernel
    during = []

    def watched(*a, **k):
        during.append(gc.isenabled())
        return load(*a, **k)
    monkeypatch.setattr(numba_cpu, "load_kernel", watched)
    x = np.linspace(0.0, 1.0, 7)
    try:
        for k, enabled in enumerate((True, False)):
            (gc.enable if enabled else gc.disable)()
            during.clear()
            f = ft.jit(lambda x, k=k: fnp.tanh(x * (2.0 + k)) + fnp.cos(x), eager=True)
            np.testing.assert_allclose(f(x), np.tanh(x * (2.0 + k)) + np.cos(x), rtol=1e-15)
            assert during and not any(during), during
            assert gc.isenabled() is enabled
        with gc_pause.paused():                  # nests
            with gc_pause.paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled() is False           # the caller's setting (disabled) is kept
    finally:
        gc.enable()


# --------------------------------------------------------------------------------------------
# softmax: one kernel, one exp per element (ops.softmax; logsumexp's gradient is one)
# --------------------------------------------------------------------------------------------

def _softmax_rows(dt):
    """Rows of ordinary values and of every special case: all -inf, one -inf, +inf, NaN,
    +inf with -inf, huge values, one element; the inner extent is over one chunk."""
    rng = np.random.default_rng(7)
    x = (rng.normal(size=(9, 2100)) * 4).astype(dt)
    x[1, :] = -np.inf
    x[2, 5] = -np.inf
    x[3, 2000] = np.inf
    x[4, 7] = np.nan
    x[5, 3], x[5, 9] = np.inf, -np.inf
    x[6] *= 1e300 if dt == np.float64 else 1e36
    x[7, :] = -np.inf
    x[7, 1234] = 2.0
    return x


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("masked_zero", [False, True])
def test_softmax_kernel_matches_reference(dtype, masked_zero):
    x = _softmax_rows(np.dtype(dtype))
    y = np.random.default_rng(8).normal(size=x.shape).astype(dtype)
    # a prologue (x * 2), the softmax, and another value of the kernel written beside it
    g = graph_of(lambda a, b: [ops.softmax(ops.mul(a, np.asarray(2, dtype)), (1,), masked_zero),
                               ops.mul(ops.exp(a), b)],
                 AVal(x.shape, dtype), AVal(x.shape, dtype))
    ex, got, want = run_both(g, [x, y])
    no_numpy_fallback(ex)
    (ks,) = ex.lower().kernels.values()
    assert ks.spec.reduction.kind == "softmax"
    # one exp per element for the softmax (in float64), in its second pass
    assert ks.source.count("vm.vexp(") == (2 if dtype == "float64" else 1)
    assert ks.source.count(" - shift)") == 1
    tol = 1e-13 if dtype == "float64" else 2e-6
    # the float32 impl subtracts the maximum in float32 (relative error |x - max| * eps in
    # each exp), the kernel in float64
    assert_same(got[0], want[0], tol if dtype == "float64" else 1e-5,
                atol=1e-300 if dtype == "float64" else 1e-37)
    assert_same(got[1], want[1], 1e-14 if dtype == "float64" else 1e-6)
    dead = np.isnan(want[0][1]) if not masked_zero else want[0][1] == 0
    assert dead.all()
    # against the formula written out (logsumexp's convention: a non-finite max shifts by 0)
    with np.errstate(all="ignore"):
        v = 2 * x.astype(np.float64)
        m = v.max(axis=1, keepdims=True)
        e = np.exp(v - np.where(np.isfinite(m), m, 0))
        s = e.sum(axis=1, keepdims=True)
        ref = e / s
        if masked_zero:
            ref = np.where(s == 0, 0.0, ref)
    np.testing.assert_allclose(got[0], ref.astype(dtype), rtol=tol, atol=1e-300)


@pytest.mark.parametrize("shape, axes", [((7,), (0,)), ((3, 4, 5), (1, 2)), ((4, 1), (1,)),
                                         ((5, 6), (0,)), ((2, 3, 4), (0, 2))])
def test_softmax_over_other_axes(shape, axes):
    # one axis of a vector, two trailing axes (merged into one loop axis), an axis of extent
    # 1 (no reduction left: an elementwise value), and leading or non-adjacent axes (no
    # softmax kernel reduces there: the op's expansion runs, logsumexp and an exp kernel)
    x = np.random.default_rng(9).normal(size=shape)
    x.reshape(-1)[1] = -np.inf
    g = graph_of(lambda a: [ops.softmax(a, axes), ops.softmax(a, axes, masked_zero=True)],
                 AVal(shape, "float64"))
    ex, got, want = run_both(g, [x])
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 1e-14, atol=1e-300)
    if shape != (4, 1):
        np.testing.assert_allclose(got[1].sum(axis=axes), 1.0, rtol=1e-14)
    trailing = axes == tuple(range(len(shape) - len(axes), len(shape)))
    fused = any(k.spec.reduction is not None and k.spec.reduction.kind == "softmax"
                for k in ex.lower().kernels.values())
    assert fused == (trailing and shape[-1] != 1)
    names = {e.op.name for e in ex.lower().graph.eqns}
    assert ("softmax" in names) == trailing and ("logsumexp" in names) == (not trailing)
    if shape == (4, 1):     # each element its own row: 1, or at -inf NaN / 0
        np.testing.assert_array_equal(got[0].reshape(-1), [1, np.nan, 1, 1])
        np.testing.assert_array_equal(got[1].reshape(-1), [1, 0, 1, 1])


def test_softmax_extent_one_rows_of_special_values():
    x = np.array([[-np.inf], [np.inf], [np.nan], [-0.0], [3.0]])
    for mz, want in ((False, [np.nan, np.nan, np.nan, 1, 1]), (True, [0, np.nan, np.nan, 1, 1])):
        g = graph_of(lambda a, mz=mz: [ops.exp(ops.softmax(a, (1,), mz))], AVal(x.shape, "float64"))
        ex, got, ref = run_both(g, [x])
        no_numpy_fallback(ex)
        np.testing.assert_array_equal(got[0].reshape(-1), np.exp(want))
        np.testing.assert_array_equal(ref[0].reshape(-1), np.exp(want))


def test_logsumexp_gradient_is_one_softmax_kernel():
    # grad(sum(logsumexp(X, 1))) is softmax(X): one kernel, one exp per element, no
    # logsumexp pass (the cotangent seed 1.0, broadcast twice, folds away)
    jitted = ft.jit(ft.grad(lambda X: fnp.sum(fnp.logsumexp(X, axis=1))), eager=True)
    X = np.random.default_rng(10).normal(size=(50, 300))
    X[3] = -np.inf
    got = jitted(X)
    src = jitted.lower(X).source
    assert src.count("# ---- kernel") == 1 and "softmax" in src
    assert src.split("# ---- its parallel")[0].count("vm.vexp(") == 1
    with np.errstate(all="ignore"):
        e = np.exp(X - X.max(axis=1, keepdims=True))
        want = np.nan_to_num(e / e.sum(axis=1, keepdims=True), nan=0.0)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)
    assert (got[3] == 0).all()          # all -inf: logsumexp's zero gradient


def test_softmax_parallel_and_donated_match_serial():
    g = graph_of(lambda a: [ops.softmax(ops.mul(a, np.asarray(0.5)), (1,))],
                 AVal((64, 3000), "float64"))
    x = np.random.default_rng(11).normal(size=(64, 3000))
    x[5] = -np.inf
    ex, serial, want = run_both(g, [x], parallel=Threads(2, min_work=0))
    got = ex.upgrade()(x)
    assert ex.parallel_kernels == 1
    np.testing.assert_array_equal(got[0], serial[0])
    assert_same(got[0], want[0], 1e-14, atol=1e-300)
    # the output in the donated input's buffer: each element is read before it is written
    ex2 = numba_cpu.Executable(g, eager=True, donate=(0,))
    x2 = x.copy()
    out = ex2(x2)[0]
    assert np.shares_memory(out, x2)
    np.testing.assert_array_equal(out, serial[0])


def test_softmax_epilogue_fuses_the_values_that_read_it():
    # a cross-entropy gradient, (softmax(2z) * s - y) / n, with 2z also read after the
    # softmax, sin of the softmax, and the softmax itself returned: one kernel, whose last
    # pass over each row computes and writes them
    def fn(z, y, s):
        z2 = ops.mul(z, np.asarray(2.0))
        p = ops.softmax(z2, (1,), True)
        g = ops.div(ops.sub(ops.mul(p, ops.broadcast_in_dim(s, z.shape, (0,))), y),
                    np.asarray(8.0))
        return [g, ops.sin(ops.mul(p, z2)), p]
    shape = (8, 2100)
    g = graph_of(fn, AVal(shape, "float64"), AVal(shape, "float64"), AVal((8,), "float64"))
    rng = np.random.default_rng(12)
    z = rng.normal(size=shape) * 3
    z[1] = -np.inf
    z[2, 5] = np.nan
    y = rng.normal(size=shape)
    s = rng.uniform(0.5, 2, 8)
    ex, got, want = run_both(g, [z, y, s])
    no_numpy_fallback(ex)
    (ks,) = ex.lower().kernels.values()
    assert ks.spec.reduction.kind == "softmax" and len(ks.spec.epilogue) >= 4
    last_pass = ks.source.split("scale = ")[1]
    assert "o0[" in last_pass and "o1[" in last_pass and "vm.vsin(" in last_pass
    assert "vm.vsin(" not in ks.source.split("scale = ")[0]
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 1e-13, atol=1e-15)
    # serial = parallel, bit for bit; a donated input never holds an output of this kernel
    par = numba_cpu.Executable(g, eager=True, parallel=Threads(2, min_work=0))
    par.upgrade()
    assert par.parallel_kernels == 1
    donated = numba_cpu.Executable(g, eager=True, donate=(0, 1))
    z2, y2 = z.copy(), y.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        outs = [par(z, y, s), donated(z2, y2, s)]
    for out in outs:
        for a, b in zip(out, got, strict=True):
            np.testing.assert_array_equal(a, b)
    assert not any(np.shares_memory(o, v) for o in outs[1] for v in (z2, y2))


def test_cross_entropy_gradient_is_a_row_sum_and_a_softmax_kernel():
    # grad of -sum(y * log_softmax(z)) / n is (softmax(z) * sum(y, 1) - y) / n: a kernel for
    # the row sums of y, and the softmax kernel whose epilogue writes the gradient (no
    # elementwise kernel after it, no softmax stored)
    def loss(z, y):
        return -fnp.sum(y * ft.nn.log_softmax(z, axis=1)) / z.shape[0]
    rng = np.random.default_rng(13)
    z = rng.normal(size=(64, 500))
    y = np.eye(500)[rng.integers(0, 500, 64)]
    jg = ft.jit(ft.grad(loss), eager=True)
    got = jg(z, y)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, (p - y) / 64, rtol=1e-13, atol=1e-17)
    src = jg.lower(z, y).source
    driver = src.split("# ---- driver")[1]
    calls = [ln for ln in driver.splitlines() if ln.strip().startswith("K")]
    assert len(calls) == 2 and "reduce_sum" in calls[0] and "softmax" in calls[1]
    assert "np.matmul" not in driver and " = f" not in driver     # no op steps
    # nobody else reads the softmax: its exps stay in a row buffer, the kernel writes only
    # the gradient (no reduction output)
    (sm,) = [k for k in jg.lower(z, y).source.split("# ---- kernel")[1:3] if "softmax" in k]
    assert "eb = av.scratch(n1, np.float64)" in sm and "def kernel(n0, n1, a0, a1, a2, o0):" in sm
    assert "r[" not in sm


@pytest.mark.parametrize("shape", [(600, 500), (60, 50)])
def test_lone_reduction_of_a_cheap_value_recomputes_it_when_large(shape):
    # u = 2x joins the kernel of sum(exp(x) * u * y); its own row sums cannot (one reduction
    # per kernel). Large: the row sums are a kernel that recomputes u from x (one read for
    # one), so the first kernel stores nothing; small: numpy sums a stored u. (v = x * y
    # would need two reads for one: its row sums stay numpy's, reading a stored v.)
    from functrace.passes.fusion import LONE_REDUCTION_MIN

    def fn(x, y):
        u = ops.mul(x, np.asarray(2.0))
        v = ops.mul(x, y)
        return [ops.reduce_sum(ops.mul(ops.exp(x), ops.mul(u, v)), (0, 1)),
                ops.reduce_sum(u, (1,)), ops.reduce_sum(v, (0,))]
    g = graph_of(fn, AVal(shape, "float64"), AVal(shape, "float64"))
    rng = np.random.default_rng(14)
    x, y = rng.normal(size=shape), rng.normal(size=shape)
    ex, got, want = run_both(g, [x, y])
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 1e-12, atol=1e-12 * np.max(np.abs(b)))
    plan = ex.lower().plan
    groups = [s for s in plan.steps if isinstance(s, Group)]
    ops_steps = [s for s in plan.steps if isinstance(s, OpStep) and not s.view]
    if np.prod(shape) >= LONE_REDUCTION_MIN:
        assert len(groups) == 2 and len(ops_steps) == 1 and len(groups[0].outputs) == 1
        assert 1 in {len(s.recomputed) for s in groups}
    else:
        assert len(groups) == 1 and len(ops_steps) == 2 and len(groups[0].outputs) == 2
