"""The CUDA backend under numba's CUDA simulator: code generation, launch logic and
the executor's dispatch over the fusion plan, against the reference interpreter.

Run by ``tests/backends/test_cuda_sim.py`` in its own pytest process:
``NUMBA_ENABLE_CUDASIM=1`` must
be set before numba is first imported, and other test files import numba normally. The file
name does not match ``test_*.py``, so a normal ``pytest tests`` run never collects it; run it
alone with ``NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/support/cuda_sim_cases.py``.

What this covers: the generated kernels (grid-stride elementwise loops, the block and thread
reduction templates with one and several segments, the finish kernel), launch configuration,
the buffer pool, donation, tiers, compile-failure fallback, and ``ft.jit(backend="cuda")``
end to end, with numpy arrays standing in for cupy arrays (``HostArrays``). What it cannot
cover: cupy interop, streams, libdevice accuracy and speed (tests/backends/test_gpu.py and
benchmarks/gpu_check.py, on a GPU). Kernels run as Python threads (one per CUDA thread), so
inputs stay at <= 1,000 elements and launches use blocks of 32 threads.

Tolerances: the simulator evaluates ``math.*`` with numpy (IEEE results), so float64 results
agree with the reference to rtol 1e-14 (reductions: 1e-12, another summation order), float32
to 2e-6 (reductions 2e-5); NaN/inf positions and signed zeros exactly; integers exactly.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import sys
import warnings

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from backend_checks import assert_same, kernel_cache_dir

if "numba.cuda" in sys.modules and not sys.modules["numba"].config.ENABLE_CUDASIM:
    pytest.skip("numba.cuda was imported without the simulator in this process",
                allow_module_level=True)

import functrace as ft
import functrace.numpy as fnp
from functrace import ops, tree_util
from functrace.backends import reference as numpy_ref
from functrace.backends.cuda import codegen as cuda_codegen
from functrace.backends.cuda import executor as numba_cuda
from functrace.backends.cuda.executor import Executable, HostArrays, LaunchConfig
from functrace.core import AVal, ScalarCode
from functrace.passes.fusion import Group
from functrace.tracing import trace_to_graph

pytestmark = [pytest.mark.cuda,
              pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.filterwarnings(
                  "ignore:Arrays of 2-dimensional vectors are deprecated:DeprecationWarning")]

SIM = numba_cuda.SIM_CONFIG


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    with kernel_cache_dir(tmp_path_factory.getbasetemp() / "functrace-cuda-kernels") as d:
        yield d


def graph_of(fn, *avals):
    return trace_to_graph(lambda *xs: list(fn(*xs)), list(avals)).graph


def run_both(g, args, config=SIM, **kw):
    ex = Executable(g, eager=True, arrays=HostArrays(), config=config, **kw)
    got = ex(*args)
    want = numpy_ref.run(g, list(args))
    return ex, got, want


def fused_ops(ex) -> set[str]:
    prog = ex.lower()
    return {prog.graph.eqns[i].op.name for ks in prog.kernels.values() for i in ks.group.eqns}


def test_simulator_backs_the_default_adapter():
    import numba
    assert numba.config.ENABLE_CUDASIM
    assert numba_cuda.simulator_enabled()
    assert isinstance(numba_cuda.default_arrays(), HostArrays)
    x = np.linspace(-1, 1, 5)
    assert ft.device_put(x) is not None and isinstance(ft.device_put(x), np.ndarray)
    np.testing.assert_array_equal(ft.device_get(ft.device_put({"a": x}))["a"], x)


# --------------------------------------------------------------------------------------------
# elementwise kernels: every op of the CUDA expression table
# --------------------------------------------------------------------------------------------

SPECIAL = [-np.inf, -1e300, -700.0, -10.0, -3.0, -1.5, -1.0, -0.75, -0.5, -1e-310, -0.0, 0.0,
           1e-310, 0.25, 0.5, 0.9, 1.0, 1.5, 2.0, 3.0, 10.0, 700.0, 1e300, np.inf, np.nan]
UNARY = ["neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
         "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sqrt",
         "rsqrt", "logistic", "abs", "sign", "isnan", "isinf", "isfinite", "signbit",
         "stop_gradient", "floor", "cbrt"]          # floor, cbrt: not fused (cupy runs them)
BINARY = ["add", "sub", "mul", "div", "fmod", "pow", "maximum", "minimum", "atan2", "hypot",
          "logaddexp", "copysign", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
          "logical_or", "logical_xor"]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_elementwise_float_ops_match_reference(dtype):
    dt = np.dtype(dtype)
    with np.errstate(over="ignore"):
        xs = np.array(SPECIAL + list(np.linspace(-4, 4, 15)), dt)
    ys = np.roll(xs, 7)

    def fn(x, y):
        outs = [getattr(ops, n)(x) for n in UNARY]
        outs += [getattr(ops, n)(x, y) for n in BINARY]
        outs += [ops.integer_pow(x, 3), ops.integer_pow(x, 2), ops.integer_pow(x, -1),
                 ops.integer_pow(x, -2), ops.integer_pow(x, 0),
                 ops.clip(x, np.asarray(-1, dt), np.asarray(2, dt)),
                 ops.select(ops.gt(x, y), x, y), ops.convert_element_type(x, bool),
                 ops.convert_element_type(x, np.float64 if dt == np.float32 else np.float32),
                 ops.logical_not(ops.gt(x, y))]
        return outs

    g = graph_of(fn, AVal(xs.shape, dt), AVal(ys.shape, dt))
    ex, got, want = run_both(g, [xs, ys])
    assert not ex.compile_failures
    fused = fused_ops(ex)
    assert {"exp", "tanh", "logaddexp", "pow", "max", "select", "clip"} <= fused
    assert "floor" not in fused and "cbrt" not in fused
    names = UNARY + BINARY + ["ipow3", "ipow2", "ipow-1", "ipow-2", "ipow0", "clip", "select",
                              "tobool", "tofloat", "not"]
    rtol = 1e-14 if dt == np.float64 else 2e-6
    for n, a, b in zip(names, got, want, strict=True):
        # exp2 is pow(2, x) on the GPU (libdevice), numpy's exp2 its own loop
        assert_same(a, b, 1e-6 if n == "exp2" and dt == np.float32 else rtol, n)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
def test_integer_and_bool_ops_match_reference(dtype):
    dt = np.dtype(dtype)
    info = np.iinfo(dt)
    base = [0, 1, 2, 3, 5, 7, info.max, info.min, info.max - 1]
    xs = np.array(base + (list(range(-12, 12)) if info.min < 0 else list(range(24))), dt)
    ys = np.roll(xs, 5)

    def fn(x, y, b):
        outs = [ops.add(x, y), ops.sub(x, y), ops.mul(x, y), ops.maximum(x, y),
                ops.minimum(x, y), ops.eq(x, y), ops.lt(x, y), ops.ge(x, y),
                ops.integer_pow(x, 2), ops.integer_pow(x, 3), ops.select(b, x, y),
                ops.convert_element_type(x, np.float64), ops.logical_and(x, y),
                ops.logical_xor(b, ops.gt(x, y)), ops.logical_not(b)]
        if dt.kind == "i":
            outs += [ops.neg(x), ops.abs(x), ops.sign(x)]
        return outs

    bs = (xs % 3 == 0)
    g = graph_of(fn, AVal(xs.shape, dt), AVal(ys.shape, dt), AVal(bs.shape, bool))
    ex, got, want = run_both(g, [xs, ys, bs])
    assert not ex.compile_failures and ex.lower().kernels
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 0)


def test_broadcasts_and_transposes_fold_into_index_maps():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5))
    row = rng.standard_normal(5)
    col = rng.standard_normal((3, 1, 1))
    xt = rng.standard_normal((5, 4, 3))

    def f(x, row, col, xt):
        y = fnp.sin(x) * row + col * fnp.exp(fnp.transpose(xt))
        return [y, fnp.tanh(y[:, :1, :] * 2.0), y * 3.0]

    g = graph_of(f, *(AVal(a.shape, a.dtype) for a in (x, row, col, xt)))
    ex, got, want = run_both(g, [x, row, col, xt])
    prog = ex.lower()
    assert prog.kernels and not ex.compile_failures
    ks = next(iter(prog.kernels.values()))
    assert any(op.axes != tuple(range(ks.spec.ndim)) for op in ks.spec.operands)
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 1e-14)


def test_elementwise_source_is_a_grid_stride_loop_with_hoisted_invariants():
    g = graph_of(lambda x, s: [fnp.exp(x * fnp.cos(s))],
                 AVal((7, 9), "float32"), AVal((), "float32"))
    src = numba_cuda.lower(g).source
    assert "@cuda.jit(cache=True)" in src
    assert "w0 = cuda.grid(1)" in src and "for w in range(wu, total, gs):" in src
    body = src.split("def kernel")[-1]       # the (7, 9) loop, merged into one axis of 63
    # the scalar cos(s) is read once per thread, before the loop; constants are float32
    assert body.index("= a1[0]") < body.index("while wu")
    assert "np.float32(math.exp(" in body and "i1" not in body


def test_flat_loop_unrolled_iterations_and_remainder():
    # 203 elements, 16 threads: three unrolled iterations of 4 x 16, then 11 elements
    x = np.random.default_rng(12).uniform(-3, 3, 203)
    g = graph_of(lambda x: [ops.exp(ops.sin(x)), ops.mul(x, x)], AVal(x.shape, x.dtype))
    ex, got, want = run_both(g, [x], config=LaunchConfig(threads=8, sm_count=1,
                                                         blocks_per_sm=2))
    ks = next(iter(ex.lower().kernels.values()))
    assert ks.launch.grid * ks.launch.block == 16 and "i0_3 = wu + 3 * gs" in ks.source
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 1e-14)


# grid strides of 4, 16, 32 and 64 over a (3, 5, 7) loop of 105: strides below, between and
# above the extents, so the per-axis carries of the stepped indices all happen, in unrolled
# iterations (4 elements a thread) and in the remainder loop (64: remainder only)
@pytest.mark.parametrize("threads,blocks", [(4, 1), (16, 1), (16, 4), (64, 2)])
def test_multi_axis_loops_step_their_indices_without_dividing(threads, blocks):
    rng = np.random.default_rng(11)
    x, yt = rng.standard_normal((3, 5, 7)), rng.standard_normal((7, 5, 3))

    def f(x, yt):       # the transposed operand keeps the three loop axes apart
        return [ops.mul(ops.sin(x), ops.transpose(yt, (2, 1, 0))), ops.exp(x)]

    g = graph_of(f, AVal(x.shape, x.dtype), AVal(yt.shape, yt.dtype))
    cfg = LaunchConfig(threads=threads, sm_count=1, blocks_per_sm=blocks)
    ex, got, want = run_both(g, [x, yt], config=cfg)
    ks = next(iter(ex.lower().kernels.values()))
    assert ks.spec.ndim == 3 and "while wu + 3 * gs < total:" in ks.source
    loops = ks.source.split("while wu")[1]
    assert "//" not in loops and "%" not in loops      # decomposed once, before the loops
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 1e-14)


# --------------------------------------------------------------------------------------------
# reductions: both templates, one and several segments, every kind
# --------------------------------------------------------------------------------------------

def _red(kind, x, axes):
    if kind == "sum":
        return ops.reduce_sum(x, axes)
    if kind == "prod":
        return ops.reduce_prod(x, axes)
    if kind == "max":
        return ops.reduce_max(x, axes)
    if kind == "min":
        return ops.reduce_min(x, axes)
    if kind == "and":
        return ops.reduce_and(ops.gt(x, np.asarray(-1.0, x.dtype)), axes)
    if kind == "or":
        return ops.reduce_or(ops.gt(x, np.asarray(1.0, x.dtype)), axes)
    return ops.logsumexp(x, axes)


# the simulator runs a Python thread per CUDA thread and a barrier per tree level: the block
# template gets small blocks (8 threads: the tree still has three levels)
CONFIGS = {
    "block1": LaunchConfig(threads=8, sm_count=1, blocks_per_sm=2, strategy="block", nseg=1),
    # segments combined by a block per output (a shared-memory tree) ...
    "block3": LaunchConfig(threads=8, sm_count=1, blocks_per_sm=2, strategy="block", nseg=3,
                           finish_thread_max=0),
    "thread1": LaunchConfig(threads=32, sm_count=2, blocks_per_sm=2, strategy="thread", nseg=1),
    # ... and by a thread per output (finish_thread_max: 16 segments)
    "thread4": LaunchConfig(threads=16, sm_count=1, blocks_per_sm=2, strategy="thread", nseg=4),
}


_KINDS = ["sum", "prod", "max", "min", "and", "or", "logsumexp"]
# segmented runs (partials + finish kernel) for one kind per combine family: arithmetic,
# NaN-propagating max, boolean, logsumexp (the simulator is slow; prod/min/or mirror them)
_SEGMENTED = ["sum", "max", "and", "logsumexp"]


@pytest.mark.parametrize("kind,cfg", [(k, c) for c in CONFIGS for k in _KINDS
                                      if CONFIGS[c].nseg == 1 or k in _SEGMENTED])
def test_fused_reductions_match_reference(kind, cfg):
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, (3, 4, 10))
    x[1, 2, 3] = np.nan if kind in ("max", "min") else x[1, 2, 3]
    if kind == "prod":
        x = rng.uniform(0.9, 1.1, x.shape)
    if CONFIGS[cfg].strategy == "block":    # few outputs, long rows: what the template is for
        axes_list = [(2,), (1, 2), (0, 1, 2)]
    else:
        axes_list = [(0,), (1,), (0, 2)]
    if kind == "logsumexp":
        axes_list = [(2,), (1, 2), (0, 1, 2)]

    def f(x):
        y = ops.mul(ops.sin(x), np.asarray(1.5))
        outs = [_red(kind, y, ax) for ax in axes_list]
        return outs + [ops.exp(y)]           # an elementwise output of the same loop

    g = graph_of(f, AVal(x.shape, x.dtype))
    ex, got, want = run_both(g, [x], config=CONFIGS[cfg])
    prog = ex.lower()
    assert not ex.compile_failures
    strategies = {ks.launch.strategy for ks in prog.kernels.values()
                  if ks.spec.reduction is not None}
    assert strategies == {CONFIGS[cfg].strategy}
    if CONFIGS[cfg].nseg > 1:
        finishes = [ks for ks in prog.kernels.values() if ks.finish_key]
        by_block = CONFIGS[cfg].finish_thread_max < CONFIGS[cfg].nseg
        assert finishes and all(("cuda.shared.array" in ks.finish_source) == by_block
                                and ks.launch.finish == ("block" if by_block else "thread")
                                for ks in finishes)
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 1e-12)


@pytest.mark.parametrize("kind", ["sum", "max", "logsumexp"])
@pytest.mark.parametrize("nseg", [1, 2])
def test_thread_template_unrolled_loop_and_its_remainder(kind, nseg):
    # rows of 11: two unrolled steps of 4 and a remainder of 3 (one segment), or 6 + 5 (two)
    x = np.random.default_rng(8).uniform(-2, 2, (6, 11))
    x[2, 9] = np.nan if kind == "max" else x[2, 9]

    def f(x):
        y = ops.mul(ops.sin(x), np.asarray(1.5))
        return [_red(kind, y, (1,)), ops.exp(y)]

    cfg = LaunchConfig(threads=16, sm_count=1, blocks_per_sm=2, strategy="thread", nseg=nseg)
    ex, got, want = run_both(graph_of(f, AVal(x.shape, x.dtype)), [x], config=cfg)
    (ks,) = [k for k in ex.lower().kernels.values() if k.spec.reduction is not None]
    assert f"while jj + {cuda_codegen.UNROLL} <= j1:" in ks.source
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 1e-12)


@pytest.mark.parametrize("cfg", ["block1", "block3", "thread4"])
def test_logsumexp_special_rows(cfg):
    x = np.random.default_rng(5).uniform(-3, 3, (6, 30)).astype(np.float32)
    x[0] = -np.inf                       # all -inf: -inf
    x[1, 7] = np.inf                     # +inf
    x[2, 11] = np.nan                    # nan
    x[3, :20] = -np.inf                  # half the row
    x[4] += 80.0                         # large shift (float32 exp would overflow unshifted)
    g = graph_of(lambda x: [ops.logsumexp(x, (1,))], AVal(x.shape, x.dtype))
    ex, got, want = run_both(g, [x], config=CONFIGS[cfg])
    assert ex.lower().kernels and not ex.compile_failures
    assert_same(got[0], want[0], 2e-6)


@pytest.mark.parametrize("masked_zero", [False, True])
def test_softmax_runs_as_its_expansion_into_kernels(masked_zero):
    # no softmax kernel on this target: the op's expansion (a logsumexp kernel, an exp
    # kernel) runs, not its impl through cupy's separate max, exp, sum and scaling
    x = np.random.default_rng(6).uniform(-3, 3, (6, 30))
    x[0] = -np.inf
    x[1, 7] = np.inf
    x[2, 11] = np.nan
    g = graph_of(lambda x: [ops.softmax(x, (1,), masked_zero)], AVal(x.shape, x.dtype))
    ex, got, want = run_both(g, [x])
    prog = ex.lower()
    assert "softmax" not in {e.op.name for e in prog.graph.eqns}
    kinds = sorted(k.spec.reduction.kind if k.spec.reduction else "elementwise"
                   for k in prog.kernels.values())
    assert kinds == ["elementwise", "logsumexp"]
    assert_same(got[0], want[0], 1e-13, atol=1e-300)
    assert (got[0][0] == 0).all() if masked_zero else np.isnan(got[0][0]).all()


def test_float32_sum_accumulates_in_float64():
    x = np.full(1000, 0.1, np.float32)
    x[0] = 1e4
    g = graph_of(lambda x: [ops.reduce_sum(ops.exp(x * np.float32(0)) * x, (0,))],
                 AVal(x.shape, x.dtype))
    _ex, got, _ = run_both(g, [x])
    exact = np.sum(x.astype(np.float64))
    assert got[0].dtype == np.float32
    assert abs(float(got[0]) - exact) <= abs(exact) * 6e-8


def test_launch_configuration_adapts_to_the_shape():
    cfg = LaunchConfig(threads=256, sm_count=100)
    g = graph_of(lambda x: [ops.reduce_sum(ops.exp(x), (1,))], AVal((4, 1_000_000), "float32"))
    ks = next(iter(numba_cuda.lower(g, config=cfg).kernels.values()))
    assert ks.launch.strategy == "block" and ks.launch.nseg > 1 and ks.finish_key
    g = graph_of(lambda x: [ops.reduce_sum(ops.exp(x), (0,))], AVal((1000, 4096), "float32"))
    ks = next(iter(numba_cuda.lower(g, config=cfg).kernels.values()))
    assert ks.launch.strategy == "thread" and ks.launch.nseg > 1
    # elementwise: one resident wave (8 blocks an SM) for a large loop, so every thread runs
    # whole unrolled iterations; an SM's worth of blocks for a small one; fewer when tiny
    for n, grid in [(10_000_000, 100 * 8), (50_000, 100), (1000, 4)]:
        g = graph_of(lambda x: [ops.exp(x)], AVal((n,), "float32"))
        ks = next(iter(numba_cuda.lower(g, config=cfg).kernels.values()))
        assert ks.launch.strategy == "elementwise" and ks.launch.grid == grid, (n, ks.launch)


# --------------------------------------------------------------------------------------------
# skinny contractions: dot_general as a generated reduction kernel (contraction_layout)
# --------------------------------------------------------------------------------------------

# (x shape, y shape, dimension numbers, layout the CUDA target picks with skinny=16)
_SKINNY = [
    ((24, 40), (40, 10), (((1,), (0,)), ((), ())), "outer"),     # h @ w2: K long, N small
    ((24, 10), (40, 10), (((1,), (1,)), ((), ())), "outer"),     # d @ w2.T: K short
    ((40, 24), (40, 10), (((0,), (0,)), ((), ())), "outer"),     # h.T @ d
    ((24, 40), (40,), (((1,), (0,)), ((), ())), "inner"),        # matrix-vector along rows
    ((2, 40), (6, 40), (((1,), (1,)), ((), ())), "inner"),       # y rows, contracted
    ((2, 5, 30), (2, 30, 10), (((2,), (1,)), ((0,), (0,))), "outer"),  # batched
    ((2, 5, 30), (2, 30, 3), (((2,), (1,)), ((0,), (0,))), "inner"),   # batched, N = 3
    ((4, 3, 6, 5), (5, 6, 2), (((3, 2), (0, 1)), ((), ())), "inner"),  # two contracting axes
    ((6, 5, 4), (5, 6, 9), (((0, 1), (1, 0)), ((), ())), "outer"),     # ... not innermost
    ((30,), (30,), (((0,), (0,)), ((), ())), "inner"),           # a dot of vectors
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,ys,dn,layout", _SKINNY)
def test_skinny_contractions_run_as_reduction_kernels(xs, ys, dn, layout, dtype):
    rng = np.random.default_rng(11)
    x = rng.standard_normal(xs).astype(dtype)
    y = rng.standard_normal(ys).astype(dtype)
    g = graph_of(lambda a, b: [ops.dot_general(a, b, dn)], AVal(xs, dtype), AVal(ys, dtype))
    assert numba_cuda.contraction_layout(g.eqns[0], SIM) == layout
    ex, got, want = run_both(g, [x, y])
    prog = ex.lower()
    assert not ex.compile_failures and len(prog.plan.steps) == 1
    (ks,) = prog.kernels.values()
    assert fused_ops(ex) == {"mul", "reduce_sum"}
    assert ks.launch.strategy == ("thread" if layout == "outer" else "block")
    tol = 2e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol)
    assert got[0].dtype == want[0].dtype and got[0].shape == want[0].shape


def test_skinny_contraction_of_a_literal_and_with_segments():
    # a closed-over weight is a literal operand of the kernel; a long contraction is cut into
    # segments, combined by the per-thread finish kernel
    w = np.random.default_rng(12).standard_normal((200, 10))
    x = np.random.default_rng(13).standard_normal((40, 200))
    g = graph_of(lambda a: [ops.dot_general(a, w, (((1,), (0,)), ((), ())))],
                 AVal(x.shape, x.dtype))
    ex, got, want = run_both(g, [x])
    (ks,) = ex.lower().kernels.values()
    assert ks.launch.nseg > 1 and ks.launch.finish == "thread"
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)
    # skinny=0: the product is an op step (cupy's matmul on a GPU), as before
    ex0 = Executable(g, eager=True, arrays=HostArrays(),
                     config=dataclasses.replace(SIM, skinny=0))
    np.testing.assert_allclose(ex0(x)[0], want[0], rtol=1e-12, atol=1e-12)
    assert not ex0.lower().kernels


# --------------------------------------------------------------------------------------------
# the executor: dispatch over the plan, pool, donation, tiers, fallback
# --------------------------------------------------------------------------------------------

def _mlp_loss(w1, b1, w2, x, labels):
    h = fnp.tanh(x @ w1 + b1)
    logits = h @ w2
    lse = fnp.logsumexp(logits, axis=1)
    picked = fnp.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
    return fnp.mean(lse - picked)


def _mlp_args(dtype, rng):
    return (rng.standard_normal((12, 16)).astype(dtype) * 0.3,
            rng.standard_normal(16).astype(dtype) * 0.1,
            rng.standard_normal((16, 5)).astype(dtype) * 0.3,
            rng.standard_normal((8, 12)).astype(dtype), rng.integers(0, 5, 8))


def test_a_lone_elementwise_op_is_a_kernel_on_the_gpu():
    # on the CPU a group of one cheap op runs numpy's ufunc; on the GPU our launch is cheaper
    # than cupy's dispatch, so it gets a kernel (0-d and 1-d, with a literal operand)
    g = graph_of(lambda x, s: [ops.mul(x, np.asarray(2.0)), ops.div(s, np.asarray(4.0))],
                 AVal((10,), np.float64), AVal((), np.float64))
    ex, got, want = run_both(g, [np.arange(10.0), np.asarray(3.0)])
    prog = ex.lower()
    assert len(prog.kernels) == 2 and all(isinstance(s, Group) for s in prog.plan.steps)
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 0)


def _record_gemm(monkeypatch) -> list:
    """Products the executor hands to the simulator adapter's ``gemm``: FUNCTRACE_CUDA_GEMM=lt
    (cuBLASLt on a GPU; here its column-major description run by numpy), skinny kernels off.
    Returns the list of ``GemmShape``s, filled as executables compile."""
    monkeypatch.setenv("FUNCTRACE_CUDA_GEMM", "lt")
    monkeypatch.setenv("FUNCTRACE_CUDA_SKINNY", "0")
    shapes: list = []
    real = HostArrays.gemm

    def gemm(self, shape, stream):
        shapes.append(shape)
        return real(self, shape, stream)
    monkeypatch.setattr(HostArrays, "gemm", gemm)
    return shapes


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cublaslt_product_steps_compute_the_mlp_gradient(dtype, monkeypatch):
    # every product that is one matrix product runs through the adapter's gemm
    shapes = _record_gemm(monkeypatch)
    args = _mlp_args(dtype, np.random.default_rng(7))
    gfn = ft.value_and_grad(_mlp_loss, argnums=(0, 1, 2))
    g = ft.jit(gfn).lower(*args).graph
    ex = Executable(g, eager=True, arrays=HostArrays())
    flat = [np.asarray(a) for a in args]
    got = ex(*flat)
    want = numpy_ref.run(g, flat)
    assert len(shapes) == 5 and not ex.compile_failures
    assert {(s.x_t, s.y_t) for s in shapes} >= {(False, False), (True, False),
                                                       (False, True)}
    tol = 2e-5 if dtype == "float32" else 1e-12
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    # a strided operand takes the op's impl (a transposed view passed in)
    w1t = np.asfortranarray(flat[0])
    got2 = ex(w1t, *flat[1:])
    for a, b in zip(got2, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("skinny", ["0", "16"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mlp_gradient_mixes_kernels_matmuls_and_gathers(dtype, skinny, monkeypatch):
    # FUNCTRACE_CUDA_SKINNY=0: every product runs through the matrix library (cupy's role);
    # 16: these small products (all five) run as generated reduction kernels instead
    monkeypatch.setenv("FUNCTRACE_CUDA_SKINNY", skinny)
    rng = np.random.default_rng(7)
    args = _mlp_args(dtype, rng)
    gfn = ft.value_and_grad(_mlp_loss, argnums=(0, 1, 2))
    jf = ft.jit(gfn, backend="cuda", eager=True)
    got = jf(*args)
    want = gfn(*args)
    ex = next(iter(jf._cache.values())).run
    prog = ex.lower()
    names = [prog.graph.eqns[s.eqn].op.name for s in prog.plan.steps if not isinstance(s, Group)]
    products = [ks for ks in prog.kernels.values()
                if "mul" in {prog.graph.eqns[i].op.name for i in ks.group.eqns}
                and ks.spec.reduction is not None and ks.spec.ndim == 3]
    if skinny == "0":
        assert names.count("dot_general") == 5 and not products
    else:
        assert "dot_general" not in names and len(products) == 5
    assert prog.kernels and not ex.compile_failures
    tol = 2e-5 if dtype == "float32" else 1e-12
    for a, b in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(want), strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    # a second call with new data reuses the pool: results must not depend on the first call
    args2 = _mlp_args(dtype, np.random.default_rng(8))
    got2 = jf(*args2)
    for a, b in zip(tree_util.tree_leaves(got2), tree_util.tree_leaves(gfn(*args2)),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elementwise_chain_gradient(dtype):
    def f(x):
        return fnp.sum(fnp.tanh(fnp.sin(x) * x + fnp.exp(-x ** 2)) * 0.5)

    x = np.linspace(-3, 3, 500).astype(dtype)
    jf = ft.jit(ft.grad(f), backend="cuda", eager=True)
    got = jf(x)
    want = ft.grad(f)(x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == "float32" else 1e-13,
                               atol=1e-6 if dtype == "float32" else 1e-14)
    ex = next(iter(jf._cache.values())).run
    assert len(ex.lower().kernels) <= 2


def test_tiers_pool_reuse_and_escaping_outputs():
    def f(x):
        y = fnp.exp(fnp.sin(x))
        z = fnp.tanh(y * 2.0) + y
        return z, fnp.cumsum(z), fnp.sort(z)[::-1]        # cumsum/sort/rev: single-op steps

    g = graph_of(lambda x: list(f(x)), AVal((50,), "float64"))
    ex = Executable(g, arrays=HostArrays(), config=SIM, hot_after=2)
    xs = [np.linspace(-1, 1, 50) * k for k in (1.0, 2.0, 3.0)]
    outs = []
    for i, x in enumerate(xs):
        outs.append(ex(x))
        assert ex.compiled == (i >= 1)       # call 1: interpreter; call 2 on: kernels
    for x, got in zip(xs, outs, strict=True):
        for a, b in zip(got, numpy_ref.run(g, [x]), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-14)
    # outputs of different calls never share memory (pooled buffers never escape)
    assert not np.shares_memory(outs[1][0], outs[2][0])


def test_donated_input_buffer_is_reused():
    g = graph_of(lambda x: [fnp.exp(fnp.sin(x)) * 2.0], AVal((64,), "float64"))
    ex = Executable(g, arrays=HostArrays(), config=SIM, eager=True, donate=(0,))
    x = np.linspace(-1, 1, 64)
    want = np.exp(np.sin(x)) * 2.0
    out = ex(x)[0]
    np.testing.assert_allclose(out, want, rtol=1e-14)
    assert np.shares_memory(out, x)


def test_a_kernel_that_fails_to_compile_runs_as_single_ops(monkeypatch):
    monkeypatch.setitem(ops.sinh_p.code, "cuda", ScalarCode("undefined_function({0})", "f"))
    g = graph_of(lambda x: [fnp.sinh(x) * fnp.exp(x)], AVal((20,), "float64"))
    x = np.linspace(-1, 1, 20)
    ex = Executable(g, arrays=HostArrays(), config=SIM, eager=True)
    got = ex(x)[0]
    assert ex.compile_failures and "undefined_function" in ex.compile_failures[0]
    np.testing.assert_allclose(got, np.sinh(x) * np.exp(x), rtol=1e-14)


def test_a_skinny_product_whose_kernel_fails_runs_as_a_product(monkeypatch):
    # as single ops its multiply would store the whole (K, M, N) loop nest: the executor puts
    # the product back instead, and the rest of the graph still runs as kernels
    monkeypatch.setitem(ops.mul_p.code, "cuda", ScalarCode("undefined_function({0}, {1})", "iuf"))
    rng = np.random.default_rng(14)
    x, w = rng.standard_normal((12, 40)), rng.standard_normal((40, 10))
    g = graph_of(lambda x, w: [fnp.tanh(x @ w)], AVal(x.shape, x.dtype), AVal(w.shape, w.dtype))
    ex = Executable(g, arrays=HostArrays(), config=SIM, eager=True)
    got = ex(x, w)[0]
    assert ex.compile_failures and "undefined_function" in ex.compile_failures[0]
    prog = ex.lower()
    ops_run = [prog.graph.eqns[s.eqn].op.name for s in prog.plan.steps
               if not isinstance(s, Group)]
    assert ops_run == ["dot_general"] and fused_ops(ex) == {"tanh"}
    np.testing.assert_allclose(got, np.tanh(x @ w), rtol=1e-13)


def test_jit_lower_shows_the_cuda_source():
    f = ft.jit(lambda x: fnp.sum(fnp.tanh(x) ** 2, axis=1), backend="cuda")
    src = f.lower(np.ones((4, 30), np.float32)).source
    assert "@cuda.jit" in src and "cuda.shared.array" in src and "# ---- steps ----" in src


# --------------------------------------------------------------------------------------------
# the OpCase table under jit(backend="cuda")
# --------------------------------------------------------------------------------------------

try:
    from op_cases import CASES
except ImportError:
    CASES = []


def _fn(c):
    from op_cases import bound_fn
    return bound_fn(c)


def _rows(grad: bool):
    from op_cases import backend_rows
    return backend_rows(grad)


def _compare(got, want, what, low):
    gl, wl = tree_util.tree_leaves(got), tree_util.tree_leaves(want)
    assert len(gl) == len(wl), what
    for g, w in zip(gl, wl, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, \
            f"{what}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
        if w.dtype.kind in "fc":
            rtol = 1e-5 if (low or w.dtype == np.float32) else 1e-12
            scale = np.nanmax(np.abs(w), initial=1.0)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


def _run_table(items, products_only: bool = False):
    """Every row of ``items`` in one jitted function under the simulator, against the
    reference. ``products_only``: only the rows whose graph has a contraction (the rows the
    gemm mode changes; the others would run the same kernels again)."""
    fns, argss, wants, names, lows = [], [], [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn, args, low, want in items:
            try:
                lowered = ft.jit(fn).lower(*args)
            except ft.ConcretizationError:
                continue                  # value-dependent shapes cannot be jitted
            if products_only and "dot_general(" not in str(lowered.graph):
                continue
            fns.append(fn)
            argss.append(args)
            names.append(name)
            lows.append(low)
            wants.append(want())

    def all_rows(*argss_):
        return [fn(*a) for fn, a in zip(fns, argss_, strict=True)]

    jf = ft.jit(all_rows, backend="cuda", eager=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = jf(*argss)
    ex = next(iter(jf._cache.values())).run
    assert not ex.compile_failures, ex.compile_failures[:3]
    assert len(ex.lower().kernels) > (10 if products_only else 50)
    failures = []
    for name, g, w, low in zip(names, got, wants, lows, strict=True):
        try:
            _compare(g, w, name, low)
        except AssertionError as e:
            failures.append(f"{name}: {str(e)[:300]}")
    assert not failures, "\n".join(failures)


@pytest.fixture(params=["default", "lt"])
def products(request, monkeypatch):
    """The table's contractions as the CUDA target runs them by default (skinny ones as
    kernels, the rest as op steps), or every one that is a matrix product through the
    adapter's gemm (FUNCTRACE_CUDA_GEMM=lt; the simulator's stand-in reads the flat buffers
    through cuBLASLt's column-major layouts). Yields the shapes given to gemm."""
    shapes = _record_gemm(monkeypatch) if request.param == "lt" else []
    yield request.param, shapes
    if request.param == "lt":
        assert len(shapes) >= 10, shapes      # the table's products went through gemm


@pytest.mark.skipif(not CASES, reason="no OpCase table")
def test_op_table_values_under_cuda(products):
    items = []
    for c, dt in _rows(grad=False):
        fn, args = _fn(c), c.make_args(dt)
        items.append((f"{c.name}[{dt}]", fn, args, False,
                      functools.partial(lambda fn, a: ft.trace(fn)(*a)(*a), fn, args)))
    _run_table(items, products_only=products[0] == "lt")


def _grad_item(c, dt):
    from op_cases import weighted_grad
    g, fargs, low = weighted_grad(c, dt)
    return (f"grad {c.name}[{dt}]", g, fargs, low, functools.partial(g, *fargs))


@pytest.mark.skipif(not CASES, reason="no OpCase table")
def test_op_table_grads_under_cuda(products):
    _run_table([_grad_item(c, dt) for c, dt in _rows(grad=True)],
               products_only=products[0] == "lt")


# --------------------------------------------------------------------------------------------
# gather and scatter-add: one generated kernel each
# --------------------------------------------------------------------------------------------

_INDEXING = {
    # advanced indices adjacent, broadcast against each other (take_along_axis's pattern)
    "pairs": lambda x, i, j: x[i[:, None], j[None, :]],
    # separated by a slice: the advanced dimensions go first (numpy's rule)
    "separated": lambda x, i, j: x[i[:, None], 1:4, j[None, :2]],
    # a new axis, a stepped slice and a repeated index
    "none_step": lambda x, i, j: x[::2, None, i],
}


@pytest.mark.parametrize("name", list(_INDEXING))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_gather_and_its_gradient_run_as_one_kernel_each(name, dtype):
    rng = np.random.default_rng(4)
    x = rng.uniform(-2, 2, (5, 6, 7)).astype(dtype)
    i = np.array([4, 0, 2, 2])                  # 2 repeats: its gradient accumulates
    j = np.array([1, 5, 3, 0])
    fn = _INDEXING[name]

    def f(x, i, j):
        y = fn(x, i, j)
        if dtype == "int32":
            return [y]
        return [y, ft.grad(lambda x: fnp.sum(fn(x, i, j) * fnp.cos(fn(x, i, j))))(x)]

    g = graph_of(f, *(AVal(a.shape, a.dtype) for a in (x, i, j)))
    ex, got, want = run_both(g, [x, i, j])
    prog = ex.lower()
    kinds = sorted(ok.kind for ok in prog.op_kernels.values())
    assert "gather" in kinds and (dtype == "int32" or "scatter_add" in kinds), kinds
    assert not ex.compile_failures
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 1e-6 if dtype == "float32" else 1e-13)


def test_scatter_set_keeps_the_last_update_and_multiply_runs_its_impl():
    x = np.arange(12.0).reshape(3, 4)
    i = np.array([0, 2, 0, 2, 1])                  # repeated targets: the last update wins
    v = np.arange(20.0).reshape(5, 4) + 100

    def f(x, i, v):
        return [fnp.at(x)[i].set(v), fnp.at(x)[i].multiply(2.0), fnp.at(x)[i].add(1.0),
                fnp.at(x > 3)[i].set(False), fnp.at(x)[i, 1:3].set(v[:, :2])]

    g = graph_of(f, *(AVal(a.shape, a.dtype) for a in (x, i, v)))
    ex, got, want = run_both(g, [x, i, v])
    kinds = sorted(ok.kind for ok in ex.lower().op_kernels.values())
    assert kinds == ["scatter_add", "scatter_set", "scatter_set", "scatter_set"], kinds
    assert not ex.compile_failures
    for a, b in zip(got, want, strict=True):
        assert_same(a, b, 0)
    np.testing.assert_array_equal(got[0][0], v[2])     # x[0] = v[0], then v[2]: numpy's


# --------------------------------------------------------------------------------------------
# CUDA graphs: capture once, then copy inputs in, replay, copy outputs out
# --------------------------------------------------------------------------------------------

class GraphHostArrays(HostArrays):
    """The simulator's adapter with stream capture emulated the way a GPU does it: while
    capturing nothing runs; each launch (and each cupy-style op, copy) is recorded with the
    very arrays it was given, and a replay runs the records again on those arrays. So a
    replay sees new data only where the executor copied it into the captured buffers, as
    on a GPU, where a graph's pointers are fixed."""

    def __init__(self, fail=False):
        super().__init__()
        self.capturing, self.records, self.fail = False, [], fail
        self.captures = self.replays = 0

    def launcher(self, kernel, grid, block, stream):
        real = super().launcher(kernel, grid, block, stream)

        def launch(*args):
            if self.capturing:
                self.records.append(lambda: real(*args))
            else:
                real(*args)
        return launch

    def _recorded(self, shape_like, compute):
        out = np.empty_like(shape_like)
        self.records.append(lambda: np.copyto(out, compute()))
        return out

    def run_impl(self, op, args, params):
        if not self.capturing:
            return super().run_impl(op, args, params)
        res = op.impl(*args, **params)          # only for the result's shape and dtype
        if op.multiple_results:
            return tuple(self._recorded(np.asarray(r), functools.partial(
                lambda i: op.impl(*args, **params)[i], i)) for i, r in enumerate(res))
        return self._recorded(np.asarray(res), lambda: op.impl(*args, **params))

    def copy(self, x):
        return self._recorded(x, lambda: x) if self.capturing else super().copy(x)

    def full(self, shape, value, dtype):
        out = super().full(shape, value, dtype)
        if self.capturing:
            self.records.append(lambda: out.fill(value))
        return out

    def capture(self, stream, run):
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        self.capturing, self.records = True, []
        try:
            result = run()
        finally:
            self.capturing = False
        self.captures += 1
        return list(self.records), None, result

    def copy_into(self, dst, src, stream):
        np.copyto(dst, src)

    def launch_graph(self, graph, stream):
        self.replays += 1
        for record in graph:
            record()

    def copy_out(self, x, stream):
        return np.array(x, copy=True)


def _graph_workload(x, w, idx):
    h = ops.tanh(ops.dot_general(x, w, (((1,), (0,)), ((), ()))))       # a cupy op step
    s = ops.reduce_sum(ops.exp(h), (1,))                                  # a fused reduction
    return [s, fnp.take_along_axis(h, idx[:, None], axis=1)[:, 0], x]     # gather, an input


@pytest.mark.parametrize("fail", [False, True])
def test_cuda_graph_replays_with_new_inputs_every_call(fail):
    rng = np.random.default_rng(9)
    w, idx = rng.standard_normal((5, 3)), np.array([0, 2, 1, 2])
    g = graph_of(_graph_workload, AVal((4, 5), "float64"), AVal(w.shape, w.dtype),
                 AVal(idx.shape, idx.dtype))
    ar = GraphHostArrays(fail=fail)
    ex = Executable(g, eager=True, arrays=ar, config=SIM, graphs=True)
    outs = []
    for k in range(4):
        x = rng.standard_normal((4, 5))
        got = ex(x, w + k, idx)
        want = numpy_ref.run(g, [x, w + k, idx])
        for a, b in zip(got, want, strict=True):
            assert_same(a, b, 1e-13)
        assert (got[2] is not x) == (k >= 1 and not fail)     # replays copy every output
        outs.append(got)
    # the first call runs the steps, the second captures them: three replays
    assert ar.captures == (0 if fail else 1) and ar.replays == (0 if fail else 3)
    # outputs of earlier calls are copies: later replays do not overwrite them
    assert not np.array_equal(outs[2][0], outs[3][0])


def test_cuda_graphs_are_off_by_default_and_with_donation(monkeypatch):
    g = graph_of(lambda x: [ops.exp(x)], AVal((3,), "float64"))
    monkeypatch.delenv("FUNCTRACE_CUDA_GRAPHS", raising=False)
    assert not Executable(g).graphs
    monkeypatch.setenv("FUNCTRACE_CUDA_GRAPHS", "1")
    assert Executable(g).graphs
    ar = GraphHostArrays()
    ex = Executable(g, eager=True, arrays=ar, config=SIM, graphs=True, donate=(0,))
    for _ in range(3):
        ex(np.ones(3))
    assert ar.captures == 0


# --------------------------------------------------------------------------------------------
# IEEE semantics: the exact operations bit for bit against numpy, special values
# included (tables in tests/support/ieee_cases.py, shared with
# tests/backends/test_ieee.py). The simulator runs
# the kernels' Python source with numpy scalars, so it checks the templates' semantics (signed
# zeros, NaN rules, the libdevice product helpers) but cannot see an FMA: that NVVM contracts
# nothing is what the libdevice.dmul_rn/fmul_rn products are for (the source test below), and
# tests/backends/test_gpu.py checks it on a GPU.
# --------------------------------------------------------------------------------------------

IEEE_DTYPES = ["float64", "float32"]


def _ieee_compiled(fn, *args):
    g = graph_of(lambda *xs: list(fn(*xs)), *[AVal(np.shape(a), np.asarray(a).dtype)
                                              for a in args])
    ex = Executable(g, eager=True, arrays=HostArrays(), config=SIM)
    got = ex(*args)
    assert not ex.compile_failures and ex.lower().kernels
    return list(got), ex


@pytest.mark.parametrize("dtype", IEEE_DTYPES)
def test_ieee_exact_ops_and_chains_match_numpy_bit_for_bit(dtype):
    from ieee_cases import BINARY, CHAINS, UNARY, check_all, pairs, triples
    a, b = pairs(dtype, n_random=60)                  # 625 special pairs + 120 random
    got, _ = _ieee_compiled(lambda a, b: [f(a, b) for f in BINARY.values()] +
                            [f(a) for f in UNARY.values()], a, b)
    fails = check_all(BINARY, got[:len(BINARY)], (a, b))
    fails += check_all(UNARY, got[len(BINARY):], (a,))
    x, y, z = triples(dtype, n_random=60, n_special=500)
    got, _ = _ieee_compiled(lambda x, y, z: [f(x, y, z) for f in CHAINS.values()], x, y, z)
    fails += check_all(CHAINS, got, (x, y, z))
    assert not fails, "\n".join(fails)


@pytest.mark.parametrize("dtype", IEEE_DTYPES)
def test_ieee_exact_reductions_match_numpy_bit_for_bit(dtype):
    """Sums of small dyadic values are exact in any order: bitwise equal, inf/NaN rows too."""
    from ieee_cases import check_all
    dt = np.dtype(dtype)
    rng = np.random.default_rng(5)
    a, b, c = ((rng.integers(-64, 65, (8, 40)) / 4).astype(dt) for _ in range(3))
    a[1, 7], a[2, 9], a[2, 30], a[3, 5] = np.inf, np.inf, -np.inf, np.nan
    fns = {"sum(a*b+c)": lambda a, b, c: fnp.sum(a * b + c, axis=1),
           "sum(a*b-c*a), axis 0": lambda a, b, c: fnp.sum(a * b - c * a, axis=0),
           "max(a*b)": lambda a, b, c: fnp.max(a * b, axis=1),
           "min(a-c)": lambda a, b, c: fnp.min(a - c, axis=1)}
    fails = []
    for name, fn in fns.items():
        got, _ = _ieee_compiled(lambda a, b, c: [fn(a, b, c)], a, b, c)
        fails += check_all({name: fn}, got, (a, b, c))
    assert not fails, "\n".join(fails)


def test_ieee_multiply_add_is_not_an_fma_and_the_product_source_says_so():
    f = ft.jit(lambda a, b: a * 2.0 + b, backend="cuda", eager=True)
    a, b = np.array([1e308, 1e308]), np.array([-np.inf, -1e308])
    got = f(a, b)
    assert np.isnan(got[0]) and got[1] == np.inf, got
    # float products are libdevice's round-to-nearest multiply (never contracted into an
    # FMA by NVVM or ptxas); integer products stay plain
    for dt, fn in (("float64", "libdevice.dmul_rn("), ("float32", "libdevice.fmul_rn(")):
        src = ft.jit(lambda a, b: a * b + b * b, backend="cuda").lower(
            np.ones(4, dt), np.ones(4, dt)).source
        assert "from numba.cuda import libdevice" in src
        body = [ln for ln in src.splitlines() if re.match(r"\s+t\d+ = ", ln)]
        assert sum(ln.count(fn) for ln in body) == 2 and not any(" * " in ln for ln in body), \
            "\n".join(body)
    src = ft.jit(lambda a, b: a * b + b, backend="cuda").lower(
        np.ones(4, np.int64), np.ones(4, np.int64)).source
    assert "libdevice.dmul_rn" not in src and "libdevice.fmul_rn" not in src


# --------------------------------------------------------------------------------------------
# the differential fuzzer (tests/backends/test_fuzz.py, docs/testing.md) on the CUDA target
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("index", range(8))
def test_fuzz_programs_under_cuda(index):
    """Batches of 10 random programs: ``jit(backend="cuda")`` values and gradients against
    the interpreter and numpy (the same checks as the CPU fuzzer; vmap needs no backend)."""
    from fuzz_check import check_batch, triage
    from fuzz_programs import fuzz_seed, random_batch
    seed = fuzz_seed()
    progs = random_batch(seed, 100_000 + index, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = check_batch(progs, backend="cuda", vmap=False)
        reports = triage(progs, found, libm=False, backend="cuda") if found else []
    assert not reports, f"FUNCTRACE_FUZZ_SEED={seed}, batch {index}\n\n" + "\n\n".join(reports)


def _regressions():
    try:
        from fuzz_regressions import REGRESSIONS
    except ImportError:
        return {}
    return REGRESSIONS


@pytest.mark.parametrize("name", sorted(_regressions()))
def test_fuzz_regressions_under_cuda(name):
    """Every program the fuzzer failed on (tests/support/fuzz_regressions.py), on the CUDA
    target."""
    from fuzz_check import check_batch
    case = _regressions()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = check_batch(case.programs, backend="cuda", vmap=False)
    assert not found, case.note + "\n" + "\n".join(repr(m) for m in found)


def test_guarded_variants_on_the_cuda_backend():
    """Python control flow under jit(backend="cuda"): the guards' values come back as device
    arrays and are read on the host; both paths, alternating, and a value-dependent loop."""
    def f(x):
        if fnp.sum(x) > 0:
            return fnp.sin(x) * 2.0
        while fnp.max(fnp.abs(x)) > 1.0:
            x = x * 0.5
        return x

    def f_np(x):
        if np.sum(x) > 0:
            return np.sin(x) * 2.0
        while np.max(np.abs(x)) > 1.0:
            x = x * 0.5
        return x

    jf = ft.jit(f, backend="cuda", eager=True)
    base = np.linspace(0.1, 1.0, 40)
    for x in (base, -base, base, -4.0 * base, -base):
        got = ft.device_get(jf(x))
        np.testing.assert_allclose(got, f_np(x), rtol=1e-13)
    assert len(jf.variants(base)) == 3
