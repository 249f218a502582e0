"""Operands and op tables for the IEEE differential tests (no silent wrong answers),
shared by tests/backends/test_ieee.py (numba CPU kernels) and
tests/support/cuda_sim_cases.py (CUDA kernels
under the simulator).

A compiled kernel must give numpy's result *bit for bit* for the operations IEEE 754 defines
exactly (correctly rounded or exact: + - * / sqrt, comparisons, selects, maximum/minimum with
numpy's NaN and signed-zero rules, abs, negation, copysign, floor/ceil/trunc/rint, fused chains
of these) on every operand, special values included: +-0, +-inf, NaN, subnormals, the largest
finite values. NaNs compare equal to NaNs whatever their sign and payload (numpy itself does
not specify them); everything else compares by its bits, so the sign of a zero counts.
"""

from __future__ import annotations

import numpy as np

import functrace.numpy as fnp

#: special operands per dtype: signed zeros, infinities, NaN, subnormals (smallest and
#: mid-range), the smallest normal, values near overflow, and a few ordinary inexact numbers
SPECIALS = {
    np.dtype(np.float64): [
        0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 3.0, 1 / 3, -0.1, 7.0,
        5e-324, -5e-324, 1e-310, -2.5e-309, 2.2250738585072014e-308, -2.2250738585072014e-308,
        1e-300, 1e300, 1e308, -1e308, 1.7976931348623157e308, -1.7976931348623157e308,
        np.inf, -np.inf, np.nan],
    np.dtype(np.float32): [
        0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 3.0, 1 / 3, -0.1, 7.0,
        1e-45, -1e-45, 1e-40, -2.5e-39, 1.1754944e-38, -1.1754944e-38,
        1e-30, 1e30, 1e38, -1e38, 3.4028235e38, -3.4028235e38,
        np.inf, -np.inf, np.nan],
}


def specials(dt) -> np.ndarray:
    dt = np.dtype(dt)
    with np.errstate(over="ignore"):
        return np.array(SPECIALS[dt], dt)


def wide_random(rng, dt, n) -> np.ndarray:
    """Random values of every magnitude the dtype has (subnormal to near overflow), both
    signs: products and quotients of two of them overflow, underflow and round."""
    fi = np.finfo(dt)
    e = rng.integers(int(np.log2(fi.smallest_subnormal)), fi.maxexp, n)
    m = rng.uniform(1, 2, n) * rng.choice([-1.0, 1.0], n)
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(m, e).astype(dt)


def pairs(dt, n_random=1500, seed=0):
    """(a, b): every ordered pair of special values, then random pairs of every magnitude and
    of ordinary magnitude (where an FMA changes the rounding of most results)."""
    s = specials(dt)
    rng = np.random.default_rng(seed)
    a = np.concatenate([np.repeat(s, s.size), wide_random(rng, dt, n_random),
                        rng.normal(size=n_random).astype(dt)])
    b = np.concatenate([np.tile(s, s.size), wide_random(rng, dt, n_random),
                        rng.normal(size=n_random).astype(dt) * 10])
    return a, b


def triples(dt, n_random=1500, n_special=2000, seed=1):
    """(a, b, c) for three-operand chains: special values in every position (a random sample
    of ``n_special`` special triples) plus random operands, ordinary and wide."""
    s = specials(dt)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, s.size, (3, n_special))
    sp = [s[i] for i in idx]
    wide = [wide_random(rng, dt, n_random) for _ in range(3)]
    ordinary = [(rng.normal(size=n_random) * 10 ** rng.uniform(-3, 3, n_random)).astype(dt)
                for _ in range(3)]
    return tuple(np.concatenate([sp[j], wide[j], ordinary[j]]) for j in range(3))


#: exact binary operations: name -> f(a, b), written with functrace.numpy (which is numpy
#: itself on numpy arrays, so ``f(a, b)`` on arrays is the numpy result)
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": fnp.maximum,
    "minimum": fnp.minimum,
    "copysign": fnp.copysign,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "where": lambda a, b: fnp.where(a < b, a, b),
}

#: exact unary operations
UNARY = {
    "neg": lambda a: -a,
    "abs": fnp.abs,
    "sqrt": fnp.sqrt,
    "floor": fnp.floor,
    "ceil": fnp.ceil,
    "trunc": fnp.trunc,
    "rint": fnp.rint,
    "sign": fnp.sign,
    "square": lambda a: a * a,
    "signbit": fnp.signbit,
    "isnan": fnp.isnan,
    "isinf": fnp.isinf,
    "isfinite": fnp.isfinite,
}

#: several exact operations fused into one kernel: where an FMA (``contract``), a sign-of-zero
#: rewrite (``nsz``) or a reciprocal (``arcp``) would change the result
CHAINS = {
    "a*2+b (an FMA would not overflow)": lambda a, b, c: a * 2.0 + b,
    "a*b+c": lambda a, b, c: a * b + c,
    "a*b-c": lambda a, b, c: a * b - c,
    "c-a*b": lambda a, b, c: c - a * b,
    "a*b+b*c": lambda a, b, c: a * b + b * c,
    "a*a-b*b": lambda a, b, c: a * a - b * b,
    "(a+b)*(a-b)": lambda a, b, c: (a + b) * (a - b),
    "-(a-b)": lambda a, b, c: -(a - b),
    "(a-b)*-1": lambda a, b, c: (a - b) * -1.0,
    "-(a*b)+c": lambda a, b, c: -(a * b) + c,
    "a/3-b": lambda a, b, c: a / 3.0 - b,
    "a/10+b": lambda a, b, c: a / 10.0 + b,
    "(a*b)/c": lambda a, b, c: (a * b) / c,
    "floor(a*b+c)": lambda a, b, c: fnp.floor(a * b + c),
    "maximum(a*b,c)-c": lambda a, b, c: fnp.maximum(a * b, c) - c,
    "minimum(a,b)*c": lambda a, b, c: fnp.minimum(a, b) * c,
    "abs(a*b-c)": lambda a, b, c: fnp.abs(a * b - c),
    "where(a*b+c>0,a,c)": lambda a, b, c: fnp.where(a * b + c > 0, a, c),
    "sqrt(a*a+b*b)": lambda a, b, c: fnp.sqrt(a * a + b * b),
    "a*b+c == c": lambda a, b, c: a * b + c == c,
}


def bit_mismatches(got, want) -> np.ndarray:
    """Boolean mask of the elements where ``got`` differs from ``want``: by bits for floats
    (so -0.0 != 0.0), any NaN equal to any NaN; exactly for other dtypes."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if want.dtype.kind != "f":
        return got != want
    u = np.dtype(f"u{want.dtype.itemsize}")
    same = (got.view(u) == want.view(u)) | (np.isnan(got) & np.isnan(want))
    return ~same


def describe(name, bad, got, want, operands, limit=4) -> str:
    """One line: how many elements differ and the first few with their operands."""
    got, want = np.asarray(got), np.asarray(want)
    idx = np.flatnonzero(bad)
    ex = []
    for i in idx[:limit]:
        args = ", ".join(repr(o.reshape(-1)[i].item()) for o in operands)
        ex.append(f"({args}) -> {got.reshape(-1)[i].item()!r}, numpy "
                  f"{want.reshape(-1)[i].item()!r}")
    return f"{name}: {idx.size} of {bad.size} differ, e.g. " + "; ".join(ex)


def numpy_results(fns, args):
    """numpy's results of each f in ``fns`` (a dict) on numpy ``args``, warnings silenced."""
    with np.errstate(all="ignore"):
        return {name: np.asarray(f(*args)) for name, f in fns.items()}


def check_all(fns, got, args) -> list[str]:
    """Compare each compiled result with numpy's; the list of failure descriptions."""
    want = numpy_results(fns, args)
    fails = []
    for (name, w), g in zip(want.items(), got, strict=True):
        g = np.asarray(g)
        if g.dtype != w.dtype or g.shape != w.shape:
            fails.append(f"{name}: {g.dtype}{g.shape} != numpy's {w.dtype}{w.shape}")
            continue
        bad = bit_mismatches(g, w)
        if bad.any():
            fails.append(describe(name, bad, g, w, args))
    return fails
