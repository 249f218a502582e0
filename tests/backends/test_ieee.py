"""Compiled CPU kernels follow numpy's IEEE semantics bit for bit (no silent wrong
answers): no FMA contraction, no sign-of-zero rewrites, no reciprocal approximation.

Differential tests, numba CPU kernels against numpy itself (not a tolerance: the bits), for the
operations IEEE 754 defines exactly, alone and fused into chains and reductions, on special
values (+-0, +-inf, NaN, subnormals, the largest finite values) and random operands of every
magnitude, in float32 and float64. The tables are in tests/support/ieee_cases.py; the same cases run
on the CUDA kernels under the simulator (tests/support/cuda_sim_cases.py).

Every graph here runs through ``numba_cpu.Executable(eager=True)`` and the test checks that
each fusion group became a compiled kernel (a group that fell back to numpy would pass
trivially).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from backend_checks import kernel_cache_dir
from ieee_cases import (
    BINARY,
    CHAINS,
    UNARY,
    bit_mismatches,
    check_all,
    describe,
    pairs,
    specials,
    triples,
)

import functrace as ft
import functrace.numpy as fnp
from functrace.backends.cpu import executor as numba_cpu
from functrace.backends.cpu import target as cpu_target
from functrace.core import AVal
from functrace.passes.fusion import Group
from functrace.tracing import trace_to_graph

pytest.importorskip("numba")

DTYPES = ["float64", "float32"]


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    with kernel_cache_dir(tmp_path_factory.getbasetemp() / "functrace-ieee-kernels") as d:
        yield d


def compiled(fn, *args, must_fuse=()):
    """The outputs (a list) of ``fn`` run as compiled kernels: every fusion group must compile,
    and the ops named in ``must_fuse`` must be inside a kernel (a lone op, e.g. a reduction of
    an input, runs as a numpy call and would test nothing here)."""
    g = trace_to_graph(lambda *xs: list(fn(*xs)),
                       [AVal(np.shape(a), np.asarray(a).dtype) for a in args]).graph
    ex = numba_cpu.Executable(g, eager=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = ex(*args)
    prog = ex.lower()
    groups = [s for s in prog.plan.steps if isinstance(s, Group)]
    assert groups and len(groups) == len(prog.kernels), "a group fell back to numpy"
    assert not ex.compile_failures, ex.compile_failures
    fused = {prog.graph.eqns[i].op.name for ks in prog.kernels.values() for i in ks.group.eqns}
    assert set(must_fuse) <= fused, f"not in a kernel: {set(must_fuse) - fused}"
    return list(got)


# --------------------------------------------------------------------------------------------
# the reported case
# --------------------------------------------------------------------------------------------

def test_multiply_add_is_not_contracted_to_an_fma():
    """``a * 2.0 + b`` gave ``[-inf, 1e308]`` compiled (an FMA keeps ``2e308`` exact inside
    the fused operation); numpy rounds the product to inf first: ``[nan, inf]``."""
    f = ft.jit(lambda a, b: a * 2.0 + b, eager=True)
    a, b = np.array([1e308, 1e308]), np.array([-np.inf, -1e308])
    with np.errstate(all="ignore"):
        want = a * 2.0 + b
    got = f(a, b)
    assert np.isnan(want[0]) and want[1] == np.inf
    assert np.isnan(got[0]) and got[1] == np.inf, got
    # and on ordinary values, where an FMA changes the last bit of most results
    rng = np.random.default_rng(0)
    x, y, z = (rng.normal(size=4096) for _ in range(3))
    g = ft.jit(lambda x, y, z: x * y + z, eager=True)
    bad = bit_mismatches(g(x, y, z), x * y + z)
    assert not bad.any(), describe("x*y+z", bad, g(x, y, z), x * y + z, (x, y, z))


# --------------------------------------------------------------------------------------------
# single operations on every pair of special values
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_binary_ops_are_numpys_bit_for_bit(dtype):
    a, b = pairs(dtype)
    got = compiled(lambda a, b: [f(a, b) for f in BINARY.values()], a, b)
    fails = check_all(BINARY, got, (a, b))
    assert not fails, "\n".join(fails)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_unary_ops_are_numpys_bit_for_bit(dtype):
    a, _ = pairs(dtype)
    got = compiled(lambda a: [f(a) for f in UNARY.values()], a)
    fails = check_all(UNARY, got, (a,))
    assert not fails, "\n".join(fails)


@pytest.mark.parametrize("dtype", DTYPES)
def test_maximum_minimum_signed_zeros_and_nans(dtype):
    """numpy's maximum/minimum: a NaN in either operand is the result; on a tie (+0 and -0
    compare equal) the result is the *second* operand, in every loop numpy has."""
    dt = np.dtype(dtype)
    z, nz, nan = dt.type(0.0), dt.type(-0.0), dt.type(np.nan)
    a = np.array([nz, z, nz, z, nan, 1, nan, -np.inf], dt)
    b = np.array([z, nz, nz, z, 1, nan, nan, nan], dt)
    got = compiled(lambda a, b: [fnp.maximum(a, b), fnp.minimum(a, b),
                                 fnp.maximum(b, a), fnp.minimum(b, a)], a, b)
    for g, w in zip(got, [np.maximum(a, b), np.minimum(a, b), np.maximum(b, a),
                          np.minimum(b, a)], strict=True):
        bad = bit_mismatches(g, w)
        assert not bad.any(), describe("maximum/minimum", bad, g, w, (a, b))


# --------------------------------------------------------------------------------------------
# fused chains: several operations in one kernel
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CHAINS))
def test_fused_chains_are_numpys_bit_for_bit(name, dtype):
    """Each chain is its own graph (one kernel), so no product is shared between chains (a
    product with one use is what LLVM contracts into an FMA)."""
    a, b, c = triples(dtype)
    fn = CHAINS[name]
    got = compiled(lambda a, b, c: [fn(a, b, c)], a, b, c)
    fails = check_all({name: fn}, got, (a, b, c))
    assert not fails, "\n".join(fails)


@pytest.mark.parametrize("dtype", DTYPES)
def test_division_by_a_loop_invariant_is_a_division(dtype):
    """``x / s`` with ``s`` a runtime scalar, or constant along the inner loop, must not become
    ``x * (1 / s)`` (``arcp``): that differs from numpy in about a third of the results."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(3)
    x = (rng.normal(size=(64, 97)) * 10 ** rng.uniform(-5, 5, (64, 97))).astype(dt)
    col = np.array([3, 10, 0.1, -7, 1e-3, 49, 1e30, 5e-39 if dt == np.float32 else 1e-310]
                   * 8, dt).reshape(64, 1)
    fn = lambda x, s, col: [x / s, x / col, (x + 1) / s]   # noqa: E731
    for s in (3.0, 10.0, 0.1, -7.0, 1e-3, 49.0):
        s = np.asarray(s, dt)
        got = compiled(fn, x, s, col)
        with np.errstate(all="ignore"):
            want = [x / s, x / col, (x + 1) / s]
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            bad = bit_mismatches(g, w)
            assert not bad.any(), describe(f"output {k}, s={s}", bad, g, w,
                                           np.broadcast_arrays(x, s, col))


# --------------------------------------------------------------------------------------------
# reductions
# --------------------------------------------------------------------------------------------

def test_outer_axis_sum_of_products_is_numpys_bit_for_bit():
    """A sum over the outer axis accumulates row after row, in numpy's order: the fused
    ``sum(a * b, axis=0)`` then equals numpy's bit for bit -- unless the multiply is contracted
    into the accumulation (``acc = fma(a, b, acc)``)."""
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(50, 37)), rng.normal(size=(50, 37))
    for fn in (lambda a, b: fnp.sum(a * b, axis=0), lambda a, b: fnp.sum(a * b - a, axis=0)):
        got, = compiled(lambda a, b: [fn(a, b)], a, b, must_fuse={"reduce_sum"})
        want = fn(a, b)
        bad = bit_mismatches(got, want)
        assert not bad.any(), describe("sum(a*b, axis=0)", bad, got, want, (want,))


def _exact_rows(dt, rng, shape):
    """Small dyadic values: every partial sum is exact in ``dt`` in any order (so compiled
    and numpy sums agree whatever the summation order and accumulator width)."""
    return (rng.integers(-64, 65, shape) / 4).astype(dt)


#: reductions fused with the elementwise chain that feeds them (and, for mean, the division by
#: the count fused into the kernel that combines the two means)
REDUCTIONS = {
    "sum(a*b+c)": (lambda a, b, c, ax: fnp.sum(a * b + c, axis=ax), {"reduce_sum"}),
    "sum(a*b-c*a)": (lambda a, b, c, ax: fnp.sum(a * b - c * a, axis=ax), {"reduce_sum"}),
    "max(a*b)": (lambda a, b, c, ax: fnp.max(a * b, axis=ax), {"reduce_max"}),
    "min(a-c)": (lambda a, b, c, ax: fnp.min(a - c, axis=ax), {"reduce_min"}),
    "mean(a*b)-mean(c*a)": (lambda a, b, c, ax: fnp.mean(a * b, axis=ax) -
                            fnp.mean(c * a, axis=ax), {"reduce_sum", "div"}),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_exact_reductions_with_special_rows(name, axis, dtype):
    """Sums of exactly representable values are exact whatever the order: bitwise equal to
    numpy's, with inf, -inf, inf + -inf = NaN and NaN propagating; max/min pass NaN on.
    (Not asserted: the sign of a sum of zeros, which numpy itself gives as -0.0 for 100
    zeros and +0.0 for 2, and max/min of rows mixing +0 and -0, where numpy's choice also
    depends on the length; no such rows here.)"""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(5)
    a, b, c = (_exact_rows(dt, rng, (40, 300)) for _ in range(3))
    a[1, 7], a[2, 9], a[2, 100], a[3, 5], a[4, 0] = np.inf, np.inf, -np.inf, np.nan, -np.inf
    b[5, 3] = np.nan
    if axis == 0:
        a, b, c = a.T.copy(), b.T.copy(), c.T.copy()
    fn, must = REDUCTIONS[name]
    got = compiled(lambda a, b, c: [fn(a, b, c, axis)], a, b, c, must_fuse=must)
    fails = check_all({name: lambda a, b, c: fn(a, b, c, axis)}, got, (a, b, c))
    assert not fails, "\n".join(fails)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [3, 7, 10])
def test_mean_is_a_true_division(dtype, n):
    """mean = sum / n with a correctly rounded division (numpy's); ``arcp`` made the compiled
    division by the constant n a multiplication by 1/n."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(6)
    x = _exact_rows(dt, rng, (500, n))
    fn = lambda x: fnp.mean(x * dt.type(1.25), axis=1) + fnp.mean(-x, axis=1)  # noqa: E731
    got = compiled(lambda x: [fn(x)], x, must_fuse={"div", "reduce_sum"})
    fails = check_all({f"mean, n={n}": fn}, got, (x,))
    assert not fails, "\n".join(fails)


@pytest.mark.parametrize("dtype", DTYPES)
def test_products_max_min_of_special_rows(dtype):
    """prod of powers of two is exact (zeros keep their sign: the sign of a product is the
    exclusive or of the signs); max/min propagate NaN and pass +-inf."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(7)
    x = (2.0 ** rng.integers(-3, 4, (12, 20)) * rng.choice([-1, 1], (12, 20))).astype(dt)
    x[0, 3], x[1, 4], x[2, 5], x[3, 0] = -0.0, np.inf, np.nan, -np.inf
    x[4, :] = -0.0
    x[5, 2], x[5, 9] = np.inf, 0.0
    fns = {"prod(-x)": (lambda x: fnp.prod(-x, axis=1), "reduce_prod"),
           "prod(-x, 0)": (lambda x: fnp.prod(-x, axis=0), "reduce_prod"),
           "max(-x)": (lambda x: fnp.max(-x, axis=1), "reduce_max"),
           "min(x*2)": (lambda x: fnp.min(x * 2.0, axis=1), "reduce_min")}
    for name, (fn, op) in fns.items():
        got = compiled(lambda x: [fn(x)], x, must_fuse={op})
        fails = check_all({name: fn}, got, (x,))
        assert not fails, "\n".join(fails)


# --------------------------------------------------------------------------------------------
# the generated source
# --------------------------------------------------------------------------------------------

def test_kernels_carry_no_fastmath_flags():
    """No fast-math flag at all in a kernel module: ``contract`` (FMA), ``nsz`` (sign of
    zero) and ``arcp`` (reciprocal) each changed results above; the others assume no NaN/inf
    or reassociate."""
    f = ft.jit(lambda a, b: fnp.sum(fnp.tanh(a * 2.0 + b) / 3.0, axis=1))
    src = f.lower(np.ones((3, 4)), np.ones((3, 4))).source
    assert "@numba.njit(" in src and "fastmath" not in src, src
    assert "fastmath" not in cpu_target.JIT_FLAGS


# --------------------------------------------------------------------------------------------
# graph rewrites (passes/simplify.py) keep numpy's results: only exact rewrites remain
# --------------------------------------------------------------------------------------------

_SIMPLIFIED = {"x+0": lambda x: x + 0.0, "0+x": lambda x: 0.0 + x, "0-x": lambda x: 0.0 - x,
               "(x*1e10)*1e-10": lambda x: (x * 1e10) * 1e-10,
               "(x*0.1)*3": lambda x: (x * 0.1) * 3.0}


@pytest.mark.parametrize("name", list(_SIMPLIFIED))
def test_simplifier_keeps_numpys_results(name):
    fn = _SIMPLIFIED[name]
    x = np.array([-0.0, 0.0, 1.0, -1.0, 1e300, 0.7, 7.0, 3.3])
    got = ft.jit(fn, eager=True)(x)
    with np.errstate(all="ignore"):
        want = fn(x)
    bad = bit_mismatches(got, want)
    assert not bad.any(), describe(name, bad, got, want, (x,))


def test_specials_cover_what_they_claim():
    for dt in DTYPES:
        s = specials(dt)
        fi = np.finfo(dt)
        assert np.isnan(s).any() and np.isposinf(s).any() and np.isneginf(s).any()
        assert (np.signbit(s) & (s == 0)).any() and (~np.signbit(s) & (s == 0)).any()
        assert ((s != 0) & (np.abs(s) < fi.tiny)).any()          # subnormals
        assert (np.abs(s) == fi.max).any()
