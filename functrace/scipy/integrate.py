"""functrace.scipy.integrate: ``odeint``, an adaptive ODE solver with adjoint gradients.

Owns ``odeint`` (the signature and semantics of ``jax.experimental.ode.odeint``): a
Dormand–Prince 5(4) Runge–Kutta integrator with adaptive steps and dense output, built on
``ft.scan`` (over the requested times) and ``ft.while_loop`` (steps until the next time), so
it runs eagerly, under every transform and under ``ft.jit`` alike. Its reverse-mode rule is a
``ft.custom_vjp`` that integrates the adjoint system backwards in time (Pontryagin's adjoint
method, as autograd's and JAX's odeint do; Chen et al. 2018, appendix C), so memory does not
grow with the number of steps, and no gradient is taken through the step-size control.

Layer: scipy (imports api, control, numpy, tracing and tree_util; imported by nothing in
functrace).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import numpy as fnp
from .. import tree_util
from ..api import custom_vjp, vjp
from ..control import scan, while_loop
from ..core import AVal
from ..errors import ConcretizationError, FunctraceTypeError, FunctraceValueError, ShapeError, where
from ..tracing import Tracer, eval_graph, trace_to_graph

__all__ = ["odeint"]


# --------------------------------------------------------------------------------------------
# pytrees as one flat vector
# --------------------------------------------------------------------------------------------

def _float_dtype(dtypes) -> np.dtype:
    """The common floating dtype of ``dtypes`` (integers and bools promote to float64)."""
    dt = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
    return dt if np.issubdtype(dt, np.inexact) else np.dtype(np.float64)


def _leaf(x):
    return x if isinstance(x, Tracer) else np.asarray(x)


class _Flat:
    """How a pytree of arrays maps to one flat vector of a common float dtype and back (the
    solver works on vectors; results keep each leaf's shape and dtype)."""

    def __init__(self, tree, dtype=None):
        leaves, self.treedef = tree_util.tree_flatten(tree)
        leaves = [_leaf(v) for v in leaves]
        self.shapes = [tuple(v.shape) for v in leaves]
        self.dtypes = [np.dtype(v.dtype) for v in leaves]
        self.dtype = np.dtype(dtype) if dtype is not None else _float_dtype(self.dtypes)
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.size = sum(self.sizes)

    def ravel(self, tree, what: str):
        leaves, treedef = tree_util.tree_flatten(tree)
        if treedef != self.treedef:
            raise FunctraceTypeError(f"odeint: {what} has structure {treedef}, but y0 has "
                                     f"{self.treedef}; func must return dy/dt with y0's "
                                     f"structure ({where()})")
        parts = []
        for v, shape in zip(leaves, self.shapes):
            v = _leaf(v)
            if tuple(v.shape) != shape:
                raise ShapeError(f"odeint: {what} has a leaf of shape {tuple(v.shape)} where "
                                 f"y0 has shape {shape} ({where()})")
            parts.append(fnp.reshape(v, (-1,)).astype(self.dtype))
        if not parts:
            return np.zeros(0, self.dtype)
        return parts[0] if len(parts) == 1 else fnp.concatenate(parts)

    def unravel(self, vec, lead: tuple = ()):
        """The pytree of ``vec`` (shape ``lead + (size,)``)."""
        out, start = [], 0
        for shape, size, dt in zip(self.shapes, self.sizes, self.dtypes):
            piece = vec[..., start:start + size]
            start += size
            piece = fnp.reshape(piece, lead + shape)
            out.append(piece.astype(dt) if np.issubdtype(dt, np.inexact) else piece)
        return tree_util.tree_unflatten(self.treedef, out)


# --------------------------------------------------------------------------------------------
# closure conversion: values of enclosing transforms that func reads become explicit operands
# --------------------------------------------------------------------------------------------

def _closure_convert(fn: Callable, example: list):
    """``(fn2, consts)`` with ``fn2(*example_like, *consts) == fn(*example_like)`` and no
    value of an enclosing transform captured by ``fn2`` (a custom_vjp function must not
    close over one; its gradient flows to ``consts`` instead)."""
    avals = [v.aval if isinstance(v, Tracer) else AVal.of(np.asarray(v)) for v in example]
    tr = trace_to_graph(lambda *xs: [fn(*xs)], avals)
    if tr.guards:
        raise ConcretizationError(
            f"odeint: func made a Python decision on a value ({tr.guards[0].describe()}); "
            "func is traced once for every state and time, so decide with ft.cond or "
            "fnp.where inside it")
    if not tr.captured:
        return fn, []
    graph, n = tr.graph, len(example)

    def converted(*xs):
        return eval_graph(graph, list(xs))[0]
    converted.n_explicit = n
    return converted, list(tr.captured)


# --------------------------------------------------------------------------------------------
# Dormand–Prince 5(4): the Butcher tableau, the error estimate and the dense output
# --------------------------------------------------------------------------------------------

_NODES = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_STAGES = (
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),   # = the 5th-order step
)
# 5th-order weights minus the embedded 4th-order ones: the local error estimate
_ERROR = (35 / 384 - 1951 / 21600, 0.0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1 / 60)
# weights of y(t + dt/2) (Shampine's dense output of the method), for the interpolant
_MIDPOINT = (6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2,
             -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
             -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def _combine(weights, ks):
    """sum_j weights[j] * ks[j], skipping zero weights (they are exact zeros)."""
    terms = [w * k for w, k in zip(weights, ks) if w != 0.0]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def _dopri_step(f, y, f0, t, dt):
    """One step from (t, y) with dy/dt(t) = f0: (y1, f(t + dt, y1), error estimate, ks).

    The last stage evaluates f at the new point (first same as last), so a step costs six
    evaluations of ``f``."""
    ks = [f0]
    for node, row in zip(_NODES, _STAGES):
        yi = y + dt * _combine(row, ks)
        ks.append(f(yi, t + node * dt))
    return yi, ks[-1], dt * _combine(_ERROR, ks), ks


def _interpolant(y0, y1, ks, dt):
    """Coefficients (highest power first) of the quartic in s = (t - t0) / dt that matches
    y and dy/dt at both ends of a step and the 5th-order value at its midpoint."""
    y_mid = y0 + dt * _combine(_MIDPOINT, ks)
    d0, d1 = dt * ks[0], dt * ks[-1]
    a = 2.0 * (d1 - d0) - 8.0 * (y0 + y1) + 16.0 * y_mid
    b = 5.0 * d0 - 3.0 * d1 + 18.0 * y0 + 14.0 * y1 - 32.0 * y_mid
    c = -4.0 * d0 + d1 - 11.0 * y0 - 5.0 * y1 + 16.0 * y_mid
    return a, b, c, d0, y0


def _horner(coeffs, s):
    out = coeffs[0]
    for c in coeffs[1:]:
        out = out * s + c
    return out


def _rms(x):
    return fnp.sqrt(fnp.mean(x * x))


def _initial_step(f, t0, y0, f0, rtol, atol):
    """A first step size from the scale of y0 and f (Hairer, Nørsett & Wanner, *Solving
    Ordinary Differential Equations I*, section II.4), for a method of order 4."""
    scale = atol + fnp.abs(y0) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    tiny = np.finfo(d0.dtype).tiny
    h0 = fnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / fnp.maximum(d1, tiny))
    f1 = f(y0 + h0 * f0, t0 + h0)
    d2 = _rms((f1 - f0) / scale) / h0
    big = fnp.maximum(d1, d2)
    h1 = fnp.where(big <= 1e-15, fnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / fnp.maximum(big, tiny)) ** (1.0 / 5.0))
    return fnp.minimum(100.0 * h0, h1)


def _next_step(dt, ratio):
    """The step after one whose mean squared error ratio was ``ratio``: grow at most 10x,
    shrink at most 5x after a rejection, never grow after one, safety factor 0.9."""
    tiny = np.finfo(ratio.dtype).tiny
    factor = 0.9 * fnp.maximum(ratio, tiny) ** (-1.0 / 10.0)
    floor = fnp.where(ratio < 1.0, fnp.ones_like(ratio), 0.2)   # keeps ratio's dtype
    factor = fnp.minimum(10.0, fnp.maximum(factor, floor))
    return fnp.where(ratio == 0.0, 10.0 * dt, dt * factor)


# --------------------------------------------------------------------------------------------
# the solver on flat vectors, and its adjoint
# --------------------------------------------------------------------------------------------

def _solve(f, y0, ts, args, rtol, atol, mxstep, hmax):
    """y at each time of ``ts`` for dy/dt = f(y, t, *args), y(ts[0]) = y0 (flat vectors).

    A scan over the output times; for each, a while loop takes steps until the step
    straddles the time, then the step's interpolant gives the value there."""
    def fun(y, t):
        return f(y, t, *args)

    nan = fnp.full_like(y0, np.nan)

    def to_time(carry, target):
        def more(state):
            i, _, _, t, dt, _, _ = state
            return (t < target) & (i < mxstep) & (dt > 0.0)

        def step(state):
            i, y, fy, t, dt, last_t, coeffs = state
            y1, f1, err, ks = _dopri_step(fun, y, fy, t, dt)
            tol = atol + rtol * fnp.maximum(fnp.abs(y), fnp.abs(y1))
            ratio = fnp.mean((err / tol) ** 2)
            new_dt = fnp.clip(_next_step(dt, ratio), 0.0, hmax)
            ok = ratio <= 1.0
            keep = lambda new, old: fnp.where(ok, new, old)  # noqa: E731
            return (i + 1, keep(y1, y), keep(f1, fy), keep(t + dt, t), new_dt,
                    keep(t, last_t),
                    tuple(keep(a, b) for a, b in zip(_interpolant(y, y1, ks, dt), coeffs)))

        _, *carry = while_loop(more, step, (0, *carry))
        _, _, t, _, last_t, coeffs = carry
        s = (target - last_t) / fnp.where(t > last_t, t - last_t, 1.0)
        y_target = fnp.where(t >= target, _horner(coeffs, s), nan)
        return tuple(carry), y_target

    t0 = ts[0]
    f0 = fun(y0, t0)
    dt = fnp.clip(_initial_step(fun, t0, y0, f0, rtol, atol), 0.0, hmax)
    zero = fnp.zeros_like(y0)
    init = (y0, f0, t0, dt, t0, (zero, zero, zero, zero, y0))
    _, ys = scan(to_time, init, ts[1:])
    return fnp.concatenate([fnp.reshape(y0, (1, -1)), ys])


def _adjoint(f, rtol, atol, mxstep, hmax, n_args, diff):
    """The custom_vjp solver for dy/dt = f(y, t, *args) on flat vectors.

    ``diff[k]`` says whether argument ``k`` is a float array (it gets a cotangent)."""

    @custom_vjp
    def solve(y0, ts, *args):
        return _solve(f, y0, ts, args, rtol, atol, mxstep, hmax)

    def solve_fwd(y0, ts, *args):
        ys = solve(y0, ts, *args)
        return ys, (ys, ts, args)

    def solve_bwd(res, g):
        ys, ts, args = res
        wrt = [k for k in range(n_args) if diff[k]]

        def augmented(state, s, *args):
            # the forward system, its adjoint y_bar and the running integrals of the time
            # and parameter cotangents, in reversed time s = -t
            y, y_bar, _, _ = state

            def g_of(y, t, *da):
                full = list(args)
                for k, v in zip(wrt, da):
                    full[k] = v
                return f(y, t, *full)

            y_dot, pullback = vjp(g_of, y, -s, *[args[k] for k in wrt])
            y_bar_dot, t_bar_dot, *args_bar_dot = pullback(y_bar)
            return -y_dot, y_bar_dot, t_bar_dot, tuple(args_bar_dot)

        def back(carry, row):
            y_bar, t0_bar, args_bar = carry
            y_i, t_i, t_prev, g_i, g_prev = row
            # moving the output time t_i moves y(t_i) along f
            t_bar = fnp.dot(f(y_i, t_i, *args), g_i)
            t0_bar = t0_bar - t_bar
            state = (y_i, y_bar, t0_bar, args_bar)
            path = odeint(augmented, state, fnp.stack([-t_i, -t_prev]), *args,
                          rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
            _, y_bar, t0_bar, args_bar = tree_util.tree_map(lambda v: v[1], path)
            return (y_bar + g_prev, t0_bar, args_bar), t_bar

        zero_t = fnp.zeros((), ts.dtype if hasattr(ts, "dtype") else np.float64)
        init = (g[-1], zero_t, tuple(fnp.zeros_like(args[k]) for k in wrt))
        xs = (ys[1:], ts[1:], ts[:-1], g[1:], g[:-1])
        (y_bar, t0_bar, args_bar), t_bars = scan(back, init, xs, reverse=True)
        ts_bar = fnp.concatenate([fnp.reshape(t0_bar, (1,)), t_bars])
        out = [None] * n_args
        for k, v in zip(wrt, args_bar):
            out[k] = v
        return (y_bar, ts_bar, *out)

    solve.defvjp(solve_fwd, solve_bwd)
    return solve


# --------------------------------------------------------------------------------------------
# the public function
# --------------------------------------------------------------------------------------------

def odeint(func: Callable, y0, t, *args, rtol: float = 1.4e-8, atol: float = 1.4e-8,
           mxstep: float = np.inf, hmax: float = np.inf):
    """Solve dy/dt = func(y, t, *args) from y(t[0]) = y0; y at every time in ``t``.

    The signature and semantics of ``jax.experimental.ode.odeint`` (note the order of
    ``func``'s arguments, ``(y, t)``, as scipy.integrate.odeint's default). An adaptive
    Dormand–Prince 5(4) Runge–Kutta method: each step's local error is kept below
    ``atol + rtol * |y|`` (root mean square over the components), and values at the requested
    times come from each step's quartic interpolant, so the requested times do not shorten
    the steps.

    Differentiable in reverse mode with respect to ``y0``, ``t`` and every float leaf of
    ``args`` (and any traced value ``func`` closes over) by the adjoint method: the backward
    pass integrates the adjoint system backwards from ``t[-1]`` to ``t[0]`` with the same
    tolerances, so the gradient is that of the exact solution to within the tolerances, not
    the derivative of the steps taken. Forward mode (``jvp``, ``jacfwd``) is not supported,
    as in JAX. Runs eagerly, under ``ft.jit`` and under ``ft.vmap``.

    Args:
        func: ``func(y, t, *args)`` -> dy/dt, with the structure, shapes of ``y0``. It is
            traced once (abstract ``y`` and ``t``), so Python control flow on their values is
            an error: use ``fnp.where`` or ``ft.cond``.
        y0: the initial state, an array or a pytree of arrays.
        t: 1-D array of non-decreasing times; ``t[0]`` is the time of ``y0``. (A traced
            ``t`` is not checked: decreasing times give wrong rows, as in JAX.)
        *args: extra arguments of ``func`` (arrays or pytrees of arrays).
        rtol, atol: relative and absolute local error tolerances.
        mxstep: the most steps taken to reach each time of ``t``; rows not reached are NaN
            (JAX returns an extrapolation there).
        hmax: the largest step size.

    Returns:
        y at each time of ``t``: ``y0``'s structure, every leaf with a new leading axis of
        length ``len(t)`` (row 0 is ``y0``).

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> from functrace.scipy.integrate import odeint
        >>> t = np.linspace(0.0, 1.0, 3)
        >>> ys = odeint(lambda y, t, k: -k * y, 1.0, t, 2.0)
        >>> bool(np.allclose(ys, np.exp(-2.0 * t)))
        True
        >>> dk = ft.grad(lambda k: odeint(lambda y, t, k: -k * y, 1.0, t, k)[-1])(2.0)
        >>> bool(np.isclose(dk, -np.exp(-2.0)))              # d/dk exp(-k t) at t = 1
        True
    """
    if not callable(func):
        raise FunctraceTypeError(f"odeint: func must be callable func(y, t, *args); got "
                                 f"{type(func).__name__} ({where()})")
    for name, v in (("rtol", rtol), ("atol", atol), ("mxstep", mxstep), ("hmax", hmax)):
        if isinstance(v, Tracer) or not np.ndim(v) == 0 or not float(v) > 0:
            raise FunctraceTypeError(f"odeint: {name} must be a positive Python number; got "
                                     f"{v!r} ({where()})")
    t = _leaf(t)
    if t.ndim != 1 or t.shape[0] < 1:
        raise ShapeError(f"odeint: t must be a 1-D array of at least one time; got shape "
                         f"{tuple(t.shape)} ({where()})")
    if not isinstance(t, Tracer) and np.any(np.diff(t) < 0):
        raise FunctraceValueError(f"odeint: the times t must be non-decreasing; got {t} "
                                  f"({where()})")
    y_flat = _Flat(y0)
    dtype = _float_dtype([*y_flat.dtypes, t.dtype])
    y_flat = _Flat(y0, dtype)
    t = t.astype(dtype) if t.dtype != dtype else t
    arg_leaves, arg_tree = tree_util.tree_flatten(args)
    arg_leaves = [_leaf(v) for v in arg_leaves]

    def flat_func(y, tt, *leaves):
        dy = func(y_flat.unravel(y), tt, *tree_util.tree_unflatten(arg_tree, list(leaves)))
        return y_flat.ravel(dy, "func's result")

    y0_vec = y_flat.ravel(y0, "y0")
    example = [np.zeros(y_flat.size, dtype), np.zeros((), dtype), *arg_leaves]
    flat_func, consts = _closure_convert(flat_func, example)
    operands = [*arg_leaves, *consts]
    diff = [np.issubdtype(np.dtype(v.dtype), np.inexact) for v in operands]
    solve = _adjoint(flat_func, float(rtol), float(atol), float(mxstep), float(hmax),
                     len(operands), diff)
    ys = solve(y0_vec, t, *operands)
    return y_flat.unravel(ys, (t.shape[0],))
