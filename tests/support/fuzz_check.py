"""The differential checks of the fuzzer: tolerances, comparison, and one batch of programs
run every way (docs/testing.md).

``check_batch(progs)`` jits all programs as one function (so their kernels compile together)
and compares, per program:

* values: ``ft.jit(f, backend=...)`` (kernels compiled at once), the reference interpreter
  on the same graph, and plain numpy running the same program description;
* gradients: ``ft.jit(ft.grad(loss))`` against ``ft.grad(loss)``, ``loss`` a weighted sum of
  the outputs;
* batching: ``ft.vmap(f)`` against a Python loop of the numpy program;
* control flow (``_check_unrolled``): first and second derivatives of the constructs against
  those of the unrolled Python program, and against finite differences.

Tolerances: where numpy's result is exact, bit for bit (NaN == NaN, signed zeros); elsewhere
the per-op bounds of docs/numerics.md propagated through the program: ``tolerances`` runs the
graph with each op's numpy impl, unperturbed and a few times with every inexact op's result
moved by up to its bound (random sign per element), and allows a multiple of the largest
change. Elements whose class (NaN, +-inf, +-0, finite) changes under the perturbations are
ill-conditioned there (an overflowing sum, a comparison on a near-tie) and are not compared.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import warnings

import numpy as np
from fuzz_programs import (
    Prog,
    Step,
    has_control_flow,
    make_args,
    run_program,
    unrolled,
    value_shapes,
)

import functrace as ft
import functrace.numpy as fnp
from functrace.backends import reference as numpy_ref
from functrace.core import Lit
from functrace.ops.control import SUBGRAPH_RUNNER, branch_index, holds_graphs, loop_slices

__all__ = ["INEXACT_ULPS", "tolerances", "compare", "check_batch", "Mismatch"]

# --------------------------------------------------------------------------------------------

#: ulps (of the result) within which a compiled elementwise op may differ from numpy's: the
#: vecmath bound against the correctly rounded result (<= 3 ulp,
#: tests/backends/test_vecmath.py) plus
#: numpy's own error (its SIMD float64 functions are within 4 ulp), rounded up
INEXACT_ULPS = 8
#: absolute error allowed for sin/cos/tan near their zeros (test_vecmath's TRIG_ABS, doubled)
TRIG_ABS = 8e-16
#: elementwise ops whose compiled result must equal numpy's bit for bit (IEEE operations
#: and exact functions); every other elementwise op is bounded by INEXACT_ULPS
EXACT_ELEMENTWISE = {
    "neg", "add", "sub", "mul", "div", "floordiv", "rem", "fmod", "max", "min", "eq", "ne",
    "lt", "le", "gt", "ge", "and", "or", "xor", "not", "select", "clip",
    "convert_element_type", "stop_gradient", "sqrt", "rsqrt", "abs", "sign", "floor", "ceil",
    "trunc", "round", "isnan", "isinf", "isfinite", "signbit", "copysign", "real", "imag",
    "conj"}
#: exact operations whose order a loop's gradient and its unrolled loop's may choose
#: differently (``tolerances(loose=True)``)
LOOSE_INEXACT = {"add", "sub", "mul", "div"}
#: non-elementwise ops that move or select data without arithmetic
EXACT_OTHER = {"broadcast_in_dim", "reshape", "transpose", "slice", "pad", "concatenate",
               "rev", "iota", "gather", "reduce_max", "reduce_min", "reduce_and",
               "reduce_or", "argmax", "argmin", "sort"}
#: accumulating ops: an absolute bound n * eps * (the op applied to |inputs|), n the number
#: of terms (any summation order; numpy's pairwise sums and the kernels' sequential or
#: chunked ones are all within it)
SUMS = {"reduce_sum", "dot_general", "cumsum"}
#: multiplicative accumulations: a relative bound n * eps
PRODUCTS = {"reduce_prod", "cumprod", "l2norm"}


def _terms(e) -> int:
    """Number of terms each result element of an accumulating op combines."""
    x = e.inputs[0].aval
    if e.op.name in ("reduce_sum", "reduce_prod", "l2norm", "logsumexp", "softmax"):
        return max(1, math.prod(x.shape[a] for a in e.params["axes"]))
    if e.op.name in ("cumsum", "cumprod"):
        return max(1, x.shape[e.params["axis"]])
    if e.op.name == "dot_general":
        (xc, _), _ = e.params["dimension_numbers"]
        return max(1, math.prod(x.shape[a] for a in xc))
    if e.op.name == "scatter":
        return max(2, e.inputs[1].aval.size)
    return max(1, x.size)


def _finite_abs(v):
    v = np.abs(np.asarray(v))
    return np.where(np.isfinite(v), v, 0).astype(v.dtype)


def _bound(e, ins, out, loose=False):
    """Per-element bound (float64 array, inf where the result is order-dependent) on how far
    a compiled result may be from the interpreter's, or None for exact ops (``loose``: IEEE
    arithmetic is not exact, see ``tolerances``)."""
    name = e.op.name
    o = np.asarray(out)
    if o.dtype.kind not in "fc":
        return None
    exact = EXACT_ELEMENTWISE - LOOSE_INEXACT if loose else EXACT_ELEMENTWISE
    if (e.op.elementwise and name in exact) or name in EXACT_OTHER:
        return None
    if name == "integer_pow" and e.params["y"] in (0, 1, 2):
        return None
    if name == "scatter" and e.params["mode"] == "set":
        return None
    eps = float(np.finfo(o.dtype).eps)
    with np.errstate(all="ignore"):
        if e.op.elementwise:
            fin = np.isfinite(o) & (o != 0)
            b = INEXACT_ULPS * np.spacing(np.abs(o)).astype(np.float64)
            if name in ("sin", "cos", "tan") and o.dtype == np.float64:
                b = np.maximum(b, TRIG_ABS)
            return np.where(fin, b, 0.0)
        n = _terms(e)
        if name in SUMS or name == "scatter":
            absins = [_finite_abs(v) if np.asarray(v).dtype.kind in "fc" else v for v in ins]
            mag = np.asarray(e.op.impl(*absins, **e.params), dtype=np.float64)
            b = (n + 2) * eps * mag
            if name == "dot_general":       # each product may underflow: half a subnormal
                b = b + np.where(mag > 0, n * float(np.finfo(o.dtype).smallest_subnormal), 0)
                # BLAS may skip a zero factor (reference gemm does), so inf * 0 need not be
                # NaN: a contraction with a non-finite factor is not compared
                x, y = (np.asarray(v) for v in ins)
                nx = (~np.isfinite(x)).astype(np.float64)
                ny = (~np.isfinite(y)).astype(np.float64)
                touched = (np.asarray(e.op.impl(nx, np.ones_like(ny), **e.params)) +
                           np.asarray(e.op.impl(np.ones_like(nx), ny, **e.params))) > 0
                b = np.where(touched, np.inf, b)
            return np.where(np.isfinite(b), b, np.inf)
        if name in PRODUCTS:
            b = np.where(np.isfinite(o), (n + 2) * eps * np.abs(o).astype(np.float64), 0.0)
            if name in ("reduce_prod", "cumprod"):
                b = np.where(_product_may_leave_range(e, ins[0], o), np.inf, b)
            return b
        if name == "logsumexp":
            return np.where(np.isfinite(o), (n + 8) * eps * np.maximum(1.0, np.abs(o)), 0.0)
        if name == "softmax":
            # exp(x - max) within a few ulps each side, a sum of n terms, one scaling; a
            # subnormal result has an absolute error of a subnormal ulp
            tiny = 2 * float(np.finfo(o.dtype).smallest_subnormal)
            return np.where(np.isfinite(o), (n + 16) * eps * np.abs(o) + tiny, 0.0)
        # anything else (linear algebra): a loose relative bound
        return np.where(np.isfinite(o), 64 * eps * np.maximum(1.0, np.abs(o)), np.inf)


#: relative change under the perturbations beyond which an element is not compared
CHAOTIC = 1e-2
#: ops whose zero results have an implementation-defined sign, in numpy itself: np.dot and
#: np.matmul disagree (a product of -1.0 and 0.0 is -0.0 by np.dot, +0.0 by np.matmul), and
#: np.power(-0.0, 0.5) is -0.0 on a scalar (its sqrt shortcut), +0.0 in an array
ZERO_SIGN_VARIES = {"dot_general", "pow"}


def _product_may_leave_range(e, x, o):
    """Where a product's partial products overflow or underflow in some order but maybe not
    in another (numpy multiplies float32 in float32, kernels in float64; orders differ): the
    product of the magnitudes above 1, or of those below 1, leaves the normal range."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    ok = np.isfinite(a) & (a > 0)
    la = np.where(ok, np.log(np.where(ok, a, 1.0)), 0.0)
    if e.op.name == "reduce_prod":
        axes, keep = tuple(e.params["axes"]), False
    else:
        axes, keep = (e.params["axis"],), True
    big = np.add.reduce(np.maximum(la, 0.0), axis=axes, keepdims=keep)
    small = np.add.reduce(np.minimum(la, 0.0), axis=axes, keepdims=keep)
    fi = np.finfo(np.asarray(o).dtype)
    risky = (big > np.log(float(fi.max))) | (small < np.log(float(fi.tiny)))
    return np.broadcast_to(risky, np.shape(o))


_ALTERNATIVES = [np.nan, np.inf, -np.nan, 0.0, -np.inf, 1.0]


def _perturb(out, b, rng, k, zero_sign_varies=False):
    o = np.asarray(out)
    if zero_sign_varies and k % 2:      # +0.0 in run 1, -0.0 in run 3 (never a double flip)
        o = np.where(o == 0, np.copysign(np.zeros((), o.dtype), 1 - (k & 2)), o)
    # a random sign and a magnitude of at least half the bound: perturbations of successive
    # ops never cancel exactly in every run
    r = rng.choice([-1.0, 1.0], o.shape) * rng.uniform(0.5, 1.0, o.shape)
    with np.errstate(all="ignore"):
        moved = (o.astype(np.float64) + r * np.where(np.isfinite(b), b, 0.0)).astype(o.dtype)
    moved = np.where(b == 0, o, moved)          # no bound: exact (-0.0 + 0.0 would be +0.0)
    # an infinite bound: the result depends on the order or the precision of the operations
    # (an overflowing sum or product, a BLAS product with inf): the runs take other values
    # (NaN of either sign, +-inf, 0; 1.0 where that is the result's own class), so the
    # element and what follows from it count as ill-conditioned whatever the other result is
    alt = np.asarray(_ALTERNATIVES[(k - 1) % len(_ALTERNATIVES)], dtype=o.dtype)
    same = (value_class(alt) == value_class(o)) & ~np.isnan(alt)    # NaNs: both signs
    alt = np.where(same, np.ones((), o.dtype), alt)
    return np.where(np.isinf(b), alt.astype(o.dtype), moved)


def tolerances(graph, args, runs: int = 6, safety: float = 4.0, seed: int = 0,
               loose: bool = False):
    """Run ``graph`` on the interpreter's impls, unperturbed and ``runs`` times with every
    inexact op's result moved by its bound (inside loop bodies and branches too). Returns
    (outputs, tolerance per output, ill-conditioned mask per output). ``loose``: IEEE
    arithmetic (add, sub, mul, div) is inexact too, for comparing graphs that compute the
    same in another order (a loop's gradient and its unrolled loop's)."""
    model = _Perturbed(np.random.default_rng(seed), loose)
    with np.errstate(all="ignore"):
        results = model.run(graph, [list(args)] * (runs + 1), list(range(runs + 1)))
    outs, tols, bad = [], [], []
    for i in range(len(graph.outputs)):
        ref = np.asarray(results[0][i])
        outs.append(ref)
        if ref.dtype.kind not in "fc":
            tols.append(np.zeros(ref.shape))
            bad.append(np.zeros(ref.shape, bool))
            continue
        dev = np.zeros(ref.shape)
        unstable = np.zeros(ref.shape, bool)
        for res in results[1:]:
            p = np.asarray(res[i])
            unstable |= value_class(p) != value_class(ref)
            with np.errstate(all="ignore"):
                d = np.abs(p.astype(np.float64) - ref.astype(np.float64))
                scale = np.maximum(np.abs(p), np.abs(ref)).astype(np.float64)
                # moved by more than CHAOTIC of its size by ulp-sized perturbations: the
                # element is ill-conditioned (tan of a huge sum, a cancellation); the
                # spread of a few runs would not bound it
                unstable |= d > CHAOTIC * scale
            dev = np.maximum(dev, np.where(np.isfinite(d), d, 0.0))
        tols.append(safety * dev)
        bad.append(unstable)
    return outs, tols, bad


class _Perturbed:
    """The interpreter of ``tolerances``: a graph evaluated in several runs at once, run 0
    exact, the others with every inexact result moved by its bound. Loop bodies, branches
    and while conditions are evaluated the same way, in lockstep over the runs (a trip of
    every run, then the next), so that a comparison inside a body sees the reference run's
    operands and is decided at random where they are chaotic; runs that take another branch
    or leave a while loop earlier go on without a reference run."""

    def __init__(self, rng, loose: bool):
        self.rng, self.loose = rng, loose

    def run(self, graph, args: list, ks: list) -> list:
        """``graph`` on ``args[i]`` in run ``ks[i]`` (run 0 exact); each run's outputs."""
        envs = [dict(zip(graph.inputs, a)) for a in args]

        def val(env, a):
            return a.val if isinstance(a, Lit) else env[a]
        for e in graph.eqns:
            ins = [[val(env, a) for a in e.inputs] for env in envs]
            if holds_graphs(e.params):
                res = self._subgraphs(e, ins, ks)
            else:
                res = self._eqn(e, ins, ks)
            for env, r in zip(envs, res):
                env.update(zip(e.outputs, r))
        return [[val(env, a) for a in graph.outputs] for env in envs]

    def _eqn(self, e, ins_runs, ks):
        out, bound = [], None
        ins0 = ins_runs[0]              # the reference run's operands, if it is here
        for i, (k, ins) in enumerate(zip(ks, ins_runs)):
            res = e.op.impl(*ins, **e.params)
            res = list(res) if e.op.multiple_results else [res]
            if i == 0:
                bound = [_bound(e, ins, r, self.loose) if not e.op.multiple_results else
                         _multi_bound(r) for r in res]
            if k:
                zs = e.op.name in ZERO_SIGN_VARIES
                res = [r if b is None else _perturb(r, b, self.rng, k, zs)
                       for r, b in zip(res, bound)]
                if k % 2 and not e.op.multiple_results:
                    i0 = ins0 if ks[0] == 0 else ins
                    res = [_undetermined(e.op.name, ins, i0, res[0], k, e.params)]
                    if e.op.name in DISCRETE:
                        res = [_decided_by_chaos(e.op.name, ins, i0, res[0], k)]
            out.append(res)
        return out

    def _subgraphs(self, e, ins_runs, ks):
        p, name = e.params, e.op.name
        if name == "loop":
            nc, nh, n = p["n_consts"], p["n_carry"], len(ks)
            consts = [ins[:nc] for ins in ins_runs]
            carry = [ins[nc:nc + nh] for ins in ins_runs]
            arrays = [[np.asarray(a) for a in ins[nc + nh:]] for ins in ins_runs]
            ys = [[np.empty((p["length"],) + v.aval.shape, v.aval.dtype)
                   for v in p["body"].outputs[nh:]] for _ in range(n)]
            for j in range(p["length"]):
                res = self.run(p["body"], [consts[i] + carry[i] + [
                    a[loop_slices(spec, j)] for a, spec in zip(arrays[i], p["xs"])]
                    for i in range(n)], ks)
                for i, r in enumerate(res):
                    carry[i] = r[:nh]
                    for y, v in zip(ys[i], r[nh:]):
                        y[j] = v
            return [list(carry[i]) + ys[i] for i in range(n)]
        if name == "cond":
            out = [None] * len(ks)
            taken = [branch_index(ins[0], len(p["branches"])) for ins in ins_runs]
            for b in sorted(set(taken)):
                idx = [i for i, t in enumerate(taken) if t == b]
                res = self.run(p["branches"][b], [ins_runs[i][1:] for i in idx],
                               [ks[i] for i in idx])
                for i, r in zip(idx, res):
                    out[i] = r
            return out
        if name == "while":
            nc, nb = p["n_cond_consts"], p["n_body_consts"]
            cc = [ins[:nc] for ins in ins_runs]
            bc = [ins[nc:nc + nb] for ins in ins_runs]
            carry = [ins[nc + nb:] for ins in ins_runs]
            trips = [0] * len(ks)
            active = list(range(len(ks)))
            while active:
                go = self.run(p["cond"], [cc[i] + carry[i] for i in active],
                              [ks[i] for i in active])
                active = [i for i, g in zip(active, go) if bool(g[0])]
                if not active:
                    break
                res = self.run(p["body"], [bc[i] + carry[i] for i in active],
                               [ks[i] for i in active])
                for i, r in zip(active, res):
                    carry[i], trips[i] = r, trips[i] + 1
            return [list(c) + [np.int64(t)] for c, t in zip(carry, trips)]
        # any other op holding graphs (a while loop's reverse pass, a checkpoint): its impl,
        # with its sub-graphs evaluated by this model, run by run
        out = []
        for k, ins in zip(ks, ins_runs):
            token = SUBGRAPH_RUNNER.set(lambda g, a, k=k: self.run(g, [list(a)], [k])[0])
            try:
                res = e.op.impl(*ins, **p)
            finally:
                SUBGRAPH_RUNNER.reset(token)
            out.append(list(res) if e.op.multiple_results else [res])
        return out


def _multi_bound(r):
    # multiple-result ops (linear algebra) are not generated; be loose if one appears
    o = np.asarray(r)
    if o.dtype.kind not in "fc":
        return None
    eps = float(np.finfo(o.dtype).eps)
    return np.where(np.isfinite(o), 64 * eps * np.maximum(1.0, np.abs(o)), np.inf)


def _undetermined(name, ins, ins0, out, k, e_params=None):
    """``out`` with the elements numpy itself leaves open changed to another class (in the
    odd perturbed runs), so they count as ill-conditioned: the sign of a NaN (IEEE leaves it
    unspecified, and numpy's reciprocal and power give different ones) as read by
    ``copysign`` and ``signbit``; ``power(-inf or +-0, 0.5)``, which numpy computes as
    ``sqrt`` for a scalar exponent (nan, -0.0) and as ``pow`` for an array one (inf, +0.0);
    the max or min of a +0.0 and -0.0 tie (the order of the comparisons decides).
    Answers are set, not flipped, so two such ops in a row cannot undo each other."""
    o = np.asarray(out)
    first = k % 4 == 1                  # run 1 takes one answer, run 3 the other
    if name in ("copysign", "signbit"):      # NaN here or in the reference run
        src = 1 if name == "copysign" else 0
        nan = np.isnan(np.asarray(ins[src])) | np.isnan(np.asarray(ins0[src]))
        if name == "signbit":
            return np.where(nan, not first, o)
        return np.where(nan, np.abs(o) if first else -np.abs(o), o)
    if name in ("reduce_max", "reduce_min") and o.dtype.kind == "f":
        # a tie of +0.0 and -0.0: which one wins depends on the order of the comparisons
        x, axes = np.asarray(ins[0]), tuple(e_params["axes"])
        both = (np.logical_or.reduce((x == 0) & ~np.signbit(x), axis=axes)
                & np.logical_or.reduce((x == 0) & np.signbit(x), axis=axes))
        zero = np.copysign(np.zeros((), o.dtype), 1.0 if first else -1.0)
        return np.where(both & (o == 0), zero, o)
    if name == "pow" and o.dtype.kind == "f":
        x, y = np.broadcast_arrays(np.asarray(ins[0]), np.asarray(ins[1]))
        odd = y == 0.5
        pow_ = np.where(np.isneginf(x), np.inf, np.where(x == 0, 0.0, o))
        sqrt_ = np.where(np.isneginf(x), np.nan, np.where(x == 0, x, o))
        return np.where(odd, pow_ if first else sqrt_, o).astype(o.dtype)
    return out


#: ops with discrete results: a chaotic operand makes them take any of their values
DISCRETE = {"gt", "lt", "ge", "le", "eq", "ne", "floor", "ceil", "round", "trunc", "sign"}


def _decided_by_chaos(name, ins, ins0, out, k):
    """A comparison or rounding whose operand moved by more than ``CHAOTIC`` of its size (or
    changed class) in this run decides at random: run 1 takes one answer, run 3 another, so
    a ``where`` or ``floor`` downstream of an ill-conditioned value is ill-conditioned too
    (without this, a few runs keep the same branch by chance)."""
    o = np.asarray(out)
    chaos = np.zeros(o.shape, bool)
    with np.errstate(all="ignore"):
        for a, a0 in zip(ins, ins0):
            a, a0 = np.asarray(a), np.asarray(a0)
            if a.dtype.kind != "f":
                continue
            d = np.abs(a.astype(np.float64) - a0.astype(np.float64))
            scale = np.maximum(np.abs(a), np.abs(a0)).astype(np.float64)
            ca, c0 = value_class(a), value_class(a0)
            ca[ca == 2], c0[c0 == 2] = 1, 1          # comparisons do not see zero signs
            moved = (d > CHAOTIC * scale) | (ca != c0)
            chaos |= np.broadcast_to(moved, o.shape)
    if not chaos.any():
        return out
    first = k % 4 == 1
    if o.dtype == bool:
        return np.where(chaos, first, o)
    return np.where(chaos, o + (1 if first else -1), o).astype(o.dtype)


def value_class(x):
    """0 finite nonzero, 1 +0, 2 -0, 3 +inf, 4 -inf, 5 NaN (per element)."""
    x = np.asarray(x)
    c = np.zeros(x.shape, np.int8)
    c[x == 0] = 1
    c[(x == 0) & np.signbit(x)] = 2
    c[np.isposinf(x)] = 3
    c[np.isneginf(x)] = 4
    c[np.isnan(x)] = 5
    return c


def compare(got, want, tol, unstable, what: str) -> str | None:
    """None if ``got`` matches ``want``: same dtype and shape; where the element is not
    ill-conditioned, the same class (NaN, +-inf, +-0, finite) and within ``tol`` (bitwise
    where ``tol`` is 0). Otherwise a description of the first mismatches."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{what}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    if want.dtype.kind not in "fc":
        bad = got != want
    else:
        gc, wc = value_class(got), value_class(want)
        with np.errstate(all="ignore"):
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        close = diff <= tol                       # tol 0: bit for bit (classes equal)
        finite = (wc <= 2) & (gc <= 2)
        # with a nonzero tolerance a zero may come out as a tiny value of either sign
        ok = ((gc == wc) & ((wc != 0) | close)) | (finite & (tol > 0) & close)
        bad = ~ok
        bad &= ~np.asarray(unstable, bool)
    if not bad.any():
        return None
    idx = np.argwhere(np.atleast_1d(bad))[:4]
    g, w = np.atleast_1d(got), np.atleast_1d(want)
    t = np.atleast_1d(np.broadcast_to(tol, want.shape)) if want.dtype.kind in "fc" else None
    items = ", ".join(f"{tuple(int(j) for j in i)}: {g[tuple(i)]!r} vs {w[tuple(i)]!r}"
                      + (f" (tol {t[tuple(i)]:.3g})" if t is not None else "") for i in idx)
    return f"{what}: {int(bad.sum())} of {want.size} differ: {items}"


# --------------------------------------------------------------------------------------------
# one batch of programs, every way
# --------------------------------------------------------------------------------------------

class Mismatch:
    """One failed comparison: which program, which check, and what differed."""

    __slots__ = ("index", "prog", "check", "detail")

    def __init__(self, index, prog, check, detail):
        self.index, self.prog, self.check, self.detail = index, prog, check, detail

    def __repr__(self):
        return f"program {self.index} [{self.check}] {self.detail}\n{self.prog!r}"


def _combined(progs):
    """One function computing every program (inputs concatenated, outputs concatenated)."""
    counts = [len(p.inputs) for p in progs]

    def f(*args):
        outs, i = [], 0
        for p, n in zip(progs, counts):
            outs.extend(run_program(p, fnp, args[i:i + n]))
            i += n
        return outs
    return f


def _owners(progs, per_prog):
    """Program index of each flat item (``per_prog(p)`` items per program)."""
    return [k for k, p in enumerate(progs) for _ in range(per_prog(p))]


def _weights(prog, shapes):
    rng = np.random.default_rng([prog.seed, 7])
    return [np.asarray(rng.uniform(0.5, 1.5, s), prog.dtype) for s in shapes]


def _quiet():
    w = warnings.catch_warnings()
    w.__enter__()
    warnings.simplefilter("ignore")
    return w


def _numpy_outputs(progs, args):
    out, i = [], 0
    for p in progs:
        n = len(p.inputs)
        out.extend(np.asarray(o) for o in run_program(p, np, args[i:i + n]))
        i += n
    return out


def check_batch(progs: list[Prog], backend: str = "cpu", vmap: bool = True,
                jit_fn=None, compiled: bool = True) -> list[Mismatch]:
    """Run ``progs`` every way (module docstring); the list of mismatches.

    One compiled function per batch returns every program's outputs and the gradient of
    ``loss`` with respect to every input (forward kernels are shared by both). ``jit_fn(f,
    backend)`` makes that compiled callable (default: ``ft.jit(f, backend=..., eager=True)``:
    kernels compiled at the first call, so the compiled path is what is compared).
    ``compiled=False``: only the checks that need no compiler (interpreter vs numpy, vmap)."""
    if jit_fn is None:
        def jit_fn(f, backend):
            return ft.jit(f, backend=backend, eager=True, threads=_THREADS[0])
    progs = list(progs)
    bad: list[Mismatch] = []
    f = _combined(progs)
    owner_out = _owners(progs, lambda p: len(p.outputs))
    owner_in = _owners(progs, lambda p: len(p.inputs))
    special = [a for p in progs for a in make_args(p, "special")]
    smooth = [a for p in progs for a in make_args(p, "smooth")]
    n_out = len(owner_out)

    def first(owner, k):
        return owner.index(k)

    quiet = _quiet()
    try:
        shapes = [np.shape(o) for o in _numpy_outputs(progs, smooth)]
        weights = []
        for k, p in enumerate(progs):
            weights.extend(_weights(p, [s for s, o in zip(shapes, owner_out) if o == k]))

        def loss(*args):
            return sum(fnp.sum(o * w) for o, w in zip(f(*args), weights))
        g = ft.grad(loss, argnums=tuple(range(len(smooth))))

        def both(*args):
            return list(f(*args)) + list(g(*args))
        jboth = jit_fn(both, backend) if compiled else None
        # on parallel kernels: the serial kernels must give the same bits
        jserial = (ft.jit(both, backend=backend, eager=True, threads=False)
                   if compiled and _THREADS[0] else None)
        graph = ft.jit(both, backend="numpy").lower(*smooth).graph
        for kind, args in (("special", special), ("smooth", smooth)):
            interp = numpy_ref.run(graph, list(args))
            got = [np.asarray(ft.device_get(o)) for o in jboth(*args)] if compiled else interp
            if jserial is not None:
                for j, (a, b) in enumerate(zip(got, jserial(*args), strict=True)):
                    b = np.asarray(b)
                    if not (np.array_equal(a, b, equal_nan=True)
                            and np.array_equal(np.signbit(a), np.signbit(b))):
                        k = owner_out[j] if j < n_out else owner_in[j - n_out]
                        bad.append(Mismatch(k, progs[k], f"jit[{backend}] threads={_THREADS[0]}"
                                            f" vs threads=False, {kind} inputs",
                                            f"value {j}: not the same bits"))
            _, tol, ill = tolerances(graph, args)
            want_np = _numpy_outputs(progs, args)
            want_g = [np.asarray(x) for x in g(*args)] if compiled else got[n_out:]
            for j, k in enumerate(owner_out):
                name = f"output {j - first(owner_out, k)}"
                for what, a, b in (
                        (f"jit[{backend}] vs interpreter, {kind} inputs", got[j], interp[j]),
                        (f"interpreter vs numpy, {kind} inputs", interp[j], want_np[j])):
                    msg = compare(a, b, tol[j], ill[j], name)
                    if msg:
                        bad.append(Mismatch(k, progs[k], what, msg))
            for j, k in enumerate(owner_in):
                jj = n_out + j
                msg = compare(got[jj], want_g[j], tol[jj], ill[jj],
                              f"d/d input {j - first(owner_in, k)}")
                if msg:
                    bad.append(Mismatch(k, progs[k], f"jit[{backend}](grad) vs grad, {kind} "
                                        "inputs", msg))
        if compiled:        # a kernel numba could not compile runs on numpy: not tested
            runs = {id(e.run): e.run for e in getattr(jboth, "_cache", {}).values()}
            for run in runs.values():
                for msg in getattr(run, "compile_failures", ())[:3]:
                    bad.append(Mismatch(None, None, f"compile[{backend}]", msg[:500]))
        if vmap:
            bad.extend(_check_vmap(progs, f, owner_out))
        bad.extend(_check_unrolled(progs, jit=(lambda fn: jit_fn(fn, backend))
                                   if compiled else None, backend=backend))
    finally:
        quiet.__exit__(None, None, None)
    return bad


def _without_zero_signs(x):
    x = np.asarray(x)
    return np.where(x == 0, np.zeros((), x.dtype), x) if x.dtype.kind == "f" else x


def _check_unrolled(progs, second_order: bool = True, jit=None, backend: str = "cpu"):
    """The gradient of every program with control flow against the gradient of its unrolled
    Python version (each loop a Python loop, each branch a Python ``if``, decided as numpy
    decided), both on the interpreter. The two sum the same terms in other orders (a loop's
    reverse pass accumulates its constants' cotangents trip by trip), so the tolerance lets
    every addition and multiplication round (``tolerances(loose=True)``) in both, and signs
    of zeros are not compared. ``second_order``: the same for a Hessian-vector product
    (``grad`` of ``grad(loss) . v``: the reverse rules of the reverse rules), and, on smooth
    float64 inputs, both orders against finite differences (``_check_finite_differences``).
    ``jit(fn)``: a compiler (``check_batch``'s); the Hessian-vector product of the constructs
    is then also compiled and compared with the interpreter's, so the compiled loops,
    branches and driver loops of second-order graphs are fuzzed too."""
    idx = [k for k, p in enumerate(progs) if has_control_flow(p)]
    if not idx:
        return []
    sub = [progs[k] for k in idx]
    f = _combined(sub)
    owner_in = _owners(sub, lambda p: len(p.inputs))
    bad = []
    jhvp = None
    for kind in ("smooth", "special"):
        args = [a for p in sub for a in make_args(p, kind)]
        decisions: list = []
        with unrolled(decisions):
            outs = _numpy_outputs(sub, args)
        owner_out = _owners(sub, lambda p: len(p.outputs))
        weights = []
        for k, p in enumerate(sub):
            weights.extend(_weights(p, [np.shape(o) for o, w in zip(outs, owner_out)
                                        if w == k]))

        def loss(*a):
            return sum(fnp.sum(o * w) for o, w in zip(f(*a), weights))

        def loss_unrolled(*a):
            with unrolled(decisions, off=a[-1]):
                return loss(*a[:-1])
        argnums = tuple(range(len(args)))
        off = [np.zeros((), bool)]
        graphs = [ft.jit(ft.grad(fn, argnums=argnums), backend="numpy").lower(*a).graph
                  for fn, a in ((loss, args), (loss_unrolled, args + off))]
        (got, tol_a, ill_a), (want, tol_b, ill_b) = (
            tolerances(g, a, loose=True) for g, a in zip(graphs, (args, args + off)))
        for j, k in enumerate(owner_in):
            msg = compare(_without_zero_signs(got[j]), _without_zero_signs(want[j]),
                          tol_a[j] + tol_b[j], ill_a[j] | ill_b[j],
                          f"d/d input {j - owner_in.index(k)}")
            if msg:
                bad.append(Mismatch(idx[k], sub[k], f"grad vs grad of the unrolled program, "
                                    f"{kind} inputs", msg))
        if not second_order:
            continue
        # second order: the Hessian of loss along v, of the constructs and of the unrolled
        # program (v: fixed random directions, one per input)
        vs = _directions(sub)

        def hvp(fn):
            g1 = ft.grad(fn, argnums=argnums)

            def gv(*a):
                return sum(fnp.sum(d * v) for d, v in zip(g1(*a), vs))
            return ft.grad(gv, argnums=argnums)
        graphs2 = [ft.jit(hvp(fn), backend="numpy").lower(*a).graph
                   for fn, a in ((loss, args), (loss_unrolled, args + off))]
        (got2, tol_a, ill_a), (want2, tol_b, ill_b) = (
            tolerances(g, a, loose=True) for g, a in zip(graphs2, (args, args + off)))
        for j, k in enumerate(owner_in):
            # a zero cotangent meeting an infinite derivative is NaN; at second order the
            # reverse rules' own reverse rules place zero cotangents where the unrolled
            # program (tied for first order only, ``fuzz_programs._tie``) may have none, so
            # an element finite on one side only is not compared (finite values are, and
            # finite differences check them too)
            one_sided = np.isfinite(got2[j]) != np.isfinite(want2[j])
            msg = compare(_without_zero_signs(got2[j]), _without_zero_signs(want2[j]),
                          tol_a[j] + tol_b[j], ill_a[j] | ill_b[j] | one_sided,
                          f"(d/d input {j - owner_in.index(k)}) (grad . v)")
            if msg:
                bad.append(Mismatch(idx[k], sub[k], f"second order vs the unrolled program's, "
                                    f"{kind} inputs", msg))
        if jit is not None:      # the same second-order graph compiled (one compile per batch)
            if jhvp is None:
                jhvp = jit(hvp(loss))
            gotc = [np.asarray(ft.device_get(o)) for o in jhvp(*args)]
            interp, tol_c, ill_c = tolerances(graphs2[0], args)   # per-op bounds, not loose
            for j, k in enumerate(owner_in):
                msg = compare(gotc[j], interp[j], tol_c[j], ill_c[j],
                              f"(d/d input {j - owner_in.index(k)}) (grad . v)")
                if msg:
                    bad.append(Mismatch(idx[k], sub[k], f"jit[{backend}](second order) vs "
                                        f"interpreter, {kind} inputs", msg))
        if kind == "smooth":
            bad.extend(_check_finite_differences(sub, idx, args, weights, vs, graphs[0],
                                                 graphs2[0], got, got2))
    return bad


def _directions(progs):
    """A fixed random direction per input (for Hessian-vector products and finite
    differences)."""
    out = []
    for p in progs:
        rng = np.random.default_rng([p.seed, 11])
        out.extend(np.asarray(rng.uniform(-1, 1, s), p.dtype) for s in p.inputs)
    return out


#: finite-difference steps: h and 2h (their disagreement measures how far the function is
#: from a quadratic over the interval, so where it is not smooth the check is skipped)
FD_STEP = 1e-4


def _smooth(d1, d2):
    """Where the difference quotients of steps h and 2h are finite and agree to 10%: the
    function is smooth enough at the scale of h for them to estimate its derivative (an
    ill-conditioned element, arctanh near 1 and the like, moves them apart: skipped)."""
    with np.errstate(all="ignore"):
        return (np.isfinite(d1) & np.isfinite(d2)
                & (np.abs(d1 - d2) <= 0.1 * np.maximum(np.abs(d1), np.abs(d2)) + 1e-9))


def _check_finite_differences(progs, idx, args, weights, vs, grad_graph, hvp_graph, grad,
                              hvp):
    """First and second derivatives of the constructs against central differences of the
    numpy program (first order: ``grad . v`` against the change of ``loss`` along ``v``;
    second order: the Hessian-vector product against the change of ``grad`` along ``v``,
    ``grad`` from the constructs' gradient graph on the interpreter), per program, on
    float64 programs at smooth inputs. The control-flow decisions (branches, trip counts)
    must be the ones taken at the point at every shifted point, else the program is skipped.
    Elements where D(h) and D(2h) (the difference quotients) disagree by more than 10% are
    skipped (``_smooth``: a kink, a jump, rounding noise or an ill-conditioned value in the
    interval); elsewhere the tolerance is 4 |D(h) - D(2h)| (the quotient's own error
    estimate) plus 1e-6 of the magnitudes."""
    owner_in = _owners(progs, lambda p: len(p.inputs))
    owner_out = _owners(progs, lambda p: len(p.outputs))
    bad = []
    for k, p in enumerate(progs):
        if p.dtype != "float64":
            continue
        ins = [j for j, o in enumerate(owner_in) if o == k]
        outs = [j for j, o in enumerate(owner_out) if o == k]
        x = [args[j] for j in ins]
        v = [vs[j] for j in ins]
        w = [weights[j] for j in outs]

        def loss_np(t, p=p, x=x, v=v, w=w):
            dec: list = []
            with unrolled(dec):
                outs_ = run_program(p, np, [a + t * d for a, d in zip(x, v)])
            return float(sum(np.sum(o * wi) for o, wi in zip(outs_, w))), dec

        def grad_at(t, x=x, v=v, ins=ins):
            shifted = list(args)
            for j, a, d in zip(ins, x, v):
                shifted[j] = a + t * d
            res = numpy_ref.run(grad_graph, shifted)
            return np.concatenate([np.ravel(np.asarray(res[j], np.float64)) for j in ins])

        with np.errstate(all="ignore"):
            f0, dec0 = loss_np(0.0)
            pts = {t: loss_np(t) for t in (-2 * FD_STEP, -FD_STEP, FD_STEP, 2 * FD_STEP)}
            if any(dec != dec0 for _, dec in pts.values()) or not all(
                    np.isfinite(f) for f, _ in [(f0, 0), *pts.values()]):
                continue
            h = FD_STEP
            d1 = (pts[h][0] - pts[-h][0]) / (2 * h)
            d2 = (pts[2 * h][0] - pts[-2 * h][0]) / (4 * h)
            ad = float(sum(np.sum(np.asarray(grad[j], np.float64) * d) for j, d in zip(ins, v)))
            tol = 4 * abs(d1 - d2) + 1e-6 * (abs(ad) + abs(d1) + 1.0)
            if np.isfinite(ad) and _smooth(d1, d2) and not abs(ad - d1) <= tol:
                bad.append(Mismatch(idx[k], p, "grad vs finite differences, smooth inputs",
                                    f"grad . v = {ad!r}, central difference {d1!r} "
                                    f"(h {h}), {d2!r} (2h)"))
            g = {t: grad_at(t) for t in (-2 * h, -h, h, 2 * h)}
            q1 = (g[h] - g[-h]) / (2 * h)
            q2 = (g[2 * h] - g[-2 * h]) / (4 * h)
            an = np.concatenate([np.ravel(np.asarray(hvp[j], np.float64)) for j in ins])
            tol2 = 4 * np.abs(q1 - q2) + 1e-6 * (np.abs(an) + np.abs(q1) + 1.0)
            off = (np.isfinite(an) & _smooth(q1, q2) & ~(np.abs(an - q1) <= tol2))
            if off.any():
                i = int(np.argmax(off))
                bad.append(Mismatch(idx[k], p, "second order vs finite differences of grad, "
                                    "smooth inputs", f"{int(off.sum())} of {off.size} "
                                    f"differ: element {i}: {an[i]!r} vs {q1[i]!r} (h), "
                                    f"{q2[i]!r} (2h)"))
    return bad


def _check_vmap(progs, f, owner_out, B=3):
    """``ft.vmap`` of every program (some inputs unbatched) against a loop of numpy."""
    batched, in_axes = [], []
    for p in progs:
        rng = np.random.default_rng([p.seed, 3])
        axes = [0 if rng.random() < 0.7 else None for _ in p.inputs]
        if all(a is None for a in axes):
            axes[0] = 0
        for a, x, ax in zip(make_args(p, "special", batch=B), make_args(p, "special"), axes):
            batched.append(a if ax == 0 else x)
            in_axes.append(ax)
    vf = ft.vmap(f, in_axes=tuple(in_axes))
    got = [np.asarray(o) for o in vf(*batched)]
    # the loop is the reference: tolerances of the unbatched graph, example by example
    examples = [[x[b] if ax == 0 else x for x, ax in zip(batched, in_axes)] for b in range(B)]
    graph = ft.jit(f, backend="numpy").lower(*examples[0]).graph
    per = [tolerances(graph, ex)[1:] for ex in examples]
    tol = [np.stack([t[0][j] for t in per]) for j in range(len(owner_out))]
    ill = [np.stack([t[1][j] for t in per]) for j in range(len(owner_out))]
    want = []
    i = 0
    for p in progs:
        n = len(p.inputs)
        rows = [[np.asarray(o) for o in run_program(
            p, np, [x[b] if ax == 0 else x for x, ax in zip(batched[i:i + n],
                                                            in_axes[i:i + n])])]
                for b in range(B)]
        want.extend(np.stack([r[j] for r in rows]) for j in range(len(p.outputs)))
        i += n
    bad = []
    for j, k in enumerate(owner_out):
        msg = compare(got[j], want[j], tol[j], ill[j], f"output {j - owner_out.index(k)}")
        if msg:
            bad.append(Mismatch(k, progs[k], "vmap vs loop", msg))
    return bad


# --------------------------------------------------------------------------------------------
# compiling differently: libm math, no fastmath flags
# --------------------------------------------------------------------------------------------

_LIBM_F64 = frozenset({"log2", "exp2"})


#: the ``threads=`` of the compiled runs (``kernel_variant(threads=...)`` sets it)
_THREADS: list = [False]


@contextlib.contextmanager
def kernel_variant(libm: bool = False, threads: int | bool = False):
    """CPU kernels compiled differently for the duration. ``libm``: the vecmath ops
    (CPU code from ``scalar_code.vecmath``) as numba's libm calls (``np.sin(x)``), ~10x cheaper to
    compile (vecmath's accuracy and special values are tested by tests/backends/test_vecmath.py).
    ``threads`` (a count): the compiled runs use ``ft.jit(threads=threads)`` with every kernel
    that can be split parallel at once (``FUNCTRACE_PARALLEL_MIN_WORK=0``,
    ``FUNCTRACE_PARALLEL_AFTER=0``) and reductions over the outermost axis in blocks of two
    elements or more (``render.BLOCK_MIN``), so the fuzzer's small values run the parallel
    kernels and their blocked reductions.
    Kernel keys are hashes of their source, so variants never share kernels; compiled
    executables are forgotten on entry and exit."""
    from functrace.backends.cpu import executor as numba_cpu
    from functrace.backends.cpu import render
    from functrace.core import ScalarCode, registry
    saved = {op: op.code.get("cpu") for op in registry.values()}
    saved_env = {k: os.environ.get(k) for k in ("FUNCTRACE_PARALLEL_MIN_WORK",
                                                "FUNCTRACE_PARALLEL_AFTER")}
    saved_block, saved_threads = render.BLOCK_MIN, _THREADS[0]
    numba_cpu.clear_memory_caches()
    try:
        if threads:
            os.environ["FUNCTRACE_PARALLEL_MIN_WORK"] = "0"
            os.environ["FUNCTRACE_PARALLEL_AFTER"] = "0"
            render.BLOCK_MIN = 2
            _THREADS[0] = threads
        if libm:
            for op, c in saved.items():
                if c is not None and not isinstance(c, str) and hasattr(c.expr, "vecmath") \
                        and op.name != "logistic":          # no numpy function of that name
                    # numba 0.68 cannot compile np.log2 or np.exp2 of float32 and of float64
                    # in one function (one LLVM declaration, two types): those compute in
                    # float64, as the executor's own vecmath code for them does
                    expr = (f"np.{op.name}(np.float64({{0}}))" if op.name in _LIBM_F64
                            else f"np.{op.name}({{0}})")
                    op.code["cpu"] = ScalarCode(expr, c.kinds, c.alone)
        yield
    finally:
        for op, c in saved.items():
            if c is not None:
                op.code["cpu"] = c
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        render.BLOCK_MIN, _THREADS[0] = saved_block, saved_threads
        numba_cpu.clear_memory_caches()


# --------------------------------------------------------------------------------------------
# triage: alone or only in its batch, and a smaller program
# --------------------------------------------------------------------------------------------

def _fails(progs, check_prefix=None, **kw) -> bool:
    try:
        found = check_batch(progs, **kw)
    except Exception as exc:        # a crash is a failure of its own kind
        return check_prefix in (None, "crash") or bool(repr(exc) and check_prefix is None)
    return any(check_prefix is None or m.check.startswith(check_prefix) for m in found)


def _kind(m: Mismatch) -> str:
    return m.check.split(",")[0]


def triage(batch: list[Prog], found: list[Mismatch], libm: bool, backend="cpu",
           shrink_budget: int = 40, threads: int | bool = False) -> list[str]:
    """Reports for the mismatches of a batch: each mismatched program is re-run alone and,
    if it still fails, shrunk (the report holds the program, a smaller one and the check);
    one that only fails in its batch is reported with the batch. (Compiled kernels carry no
    fast-math flag, so no mismatch is excused as a known one.)"""
    reports = []
    by_prog: dict = {}
    for m in found:
        by_prog.setdefault(m.index, []).append(m)
    for k, ms in by_prog.items():
        if k is None:
            reports.append(f"{ms[0]!r}\nin the batch:\n" + "\n".join(repr(p) for p in batch))
            continue
        prog = batch[k]
        kinds = {_kind(m) for m in ms}
        with kernel_variant(libm=libm, threads=threads):
            alone = [m for m in check_batch([prog], backend) if _kind(m) in kinds]
        if not alone:
            reports.append(f"{ms[0]!r}\nonly fails in its batch of {len(batch)}:\n"
                           + "\n".join(repr(p) for p in batch))
            continue
        kind = _kind(alone[0])
        with kernel_variant(libm=libm, threads=threads):
            small = shrink(prog, lambda p: _fails([p], kind, backend=backend), shrink_budget)
        reports.append(f"{ms[0]!r}\nshrunk ({kind}):\n{small!r}\n{small.source()}")
    return reports


def shrink(prog: Prog, fails, budget: int = 40) -> Prog:
    """A smaller program for which ``fails`` still holds (greedy: fewer outputs, a prefix,
    steps bypassed, no special values)."""
    calls = [0]

    def ok(p):
        if calls[0] >= budget:
            return False
        calls[0] += 1
        try:
            return fails(p)
        except Exception:
            return False

    changed = True
    while changed and calls[0] < budget:
        changed = False
        for cand in _candidates(prog):
            if ok(cand):
                prog, changed = cand, True
                break
    return prog


def _candidates(prog: Prog):
    n_in = len(prog.inputs)
    if len(prog.outputs) > 1:
        for o in prog.outputs:
            yield dataclasses.replace(prog, outputs=(o,))
    last = max(prog.outputs)
    for v in range(n_in, last):             # a prefix of the program
        yield _dce(dataclasses.replace(prog, outputs=(v,)))
    shapes = value_shapes(prog)
    for i, s in enumerate(prog.steps):      # bypass a step whose argument has its shape
        v = n_in + i
        for a in s.args:
            if shapes[a] == shapes[v] and a != v:
                yield _dce(_replace_value(prog, v, a))
                break
    for i in range(len(prog.steps) - 1, -1, -1):     # a step's value as a new input instead
        yield _dce(_as_input(prog, n_in + i, shapes[n_in + i]))
    if prog.special:
        yield dataclasses.replace(prog, special=0.0)


def _as_input(prog: Prog, v: int, shape) -> Prog:
    """``prog`` with value ``v`` read from a new last input instead of computed."""
    n_in = len(prog.inputs)

    def remap(a):
        return n_in if a == v else a + 1 if a >= n_in else a
    steps = [dataclasses.replace(s, args=tuple(remap(a) for a in s.args))
             for s in prog.steps]
    steps[v - n_in] = Step("negative", (n_in,))      # dead once v's readers read the input
    return dataclasses.replace(prog, inputs=prog.inputs + (tuple(shape),), steps=tuple(steps),
                               outputs=tuple(remap(o) for o in prog.outputs))


def _replace_value(prog: Prog, v: int, a: int) -> Prog:
    steps = [dataclasses.replace(s, args=tuple(a if x == v else x for x in s.args))
             for s in prog.steps]
    return dataclasses.replace(prog, steps=tuple(steps),
                               outputs=tuple(a if o == v else o for o in prog.outputs))


def _dce(prog: Prog) -> Prog:
    """Drop the steps no output depends on (renumbering the values)."""
    n_in = len(prog.inputs)
    live = set(prog.outputs)
    for i in range(len(prog.steps) - 1, -1, -1):
        if n_in + i in live:
            live.update(prog.steps[i].args)
    new_index = {i: i for i in range(n_in)}
    steps = []
    for i, s in enumerate(prog.steps):
        if n_in + i in live:
            new_index[n_in + i] = n_in + len(steps)
            steps.append(dataclasses.replace(s, args=tuple(new_index[a] for a in s.args)))
    return dataclasses.replace(prog, steps=tuple(steps),
                               outputs=tuple(dict.fromkeys(new_index[o] for o in prog.outputs)))
