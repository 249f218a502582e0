"""functrace.scipy.optimize: ``minimize`` with BFGS, as one ``while_loop``.

Owns ``minimize`` (the signature of ``scipy.optimize.minimize`` and of
``jax.scipy.optimize.minimize``, BFGS only) and its line search. The whole optimisation is
one ``ft.while_loop`` over BFGS iterations whose body holds the line search, itself a
``while_loop``, so ``minimize`` runs eagerly, under ``ft.jit`` and under ``ft.vmap`` alike.
Gradients of ``fun`` come from ``ft.value_and_grad``; ``fun`` must be traceable.

The line search finds a step satisfying the strong Wolfe conditions (Nocedal & Wright,
*Numerical Optimization*, algorithms 3.5 and 3.6) as a single state machine: every trip
evaluates ``fun`` and its gradient once, at a trial step that is doubled while the bracket is
open and interpolated (cubic Hermite, safeguarded by bisection) once it is closed. JAX runs
its zoom as a nested loop for each way a bracket can close; one loop per line search is
cheaper to trace and to run.

Layer: scipy (imports api, control, numpy and tree_util; imported by nothing in functrace).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .. import numpy as fnp
from ..api import value_and_grad
from ..control import while_loop
from ..errors import FunctraceTypeError, FunctraceValueError, ShapeError, where
from ..tracing import Tracer

__all__ = ["minimize", "OptimizeResults"]

_MESSAGES = {
    0: "Optimization terminated successfully.",
    1: "Maximum number of iterations has been exceeded.",
    2: "Desired error not necessarily achieved due to precision loss.",
    3: "NaN result encountered.",
}


class OptimizeResults(NamedTuple):
    """The result of :func:`minimize` (scipy's ``OptimizeResult`` fields, JAX's tuple).

    Every field is an array (a pytree leaf, so a jitted function can return the whole
    result); ``message`` is derived from ``status`` and is not a field.

    Attributes:
        x: the solution.
        success: whether the gradient norm fell below ``gtol``.
        status: 0 converged, 1 too many iterations, 2 the line search failed (precision
            loss), 3 a NaN or infinite value appeared. scipy's codes.
        fun: ``fun(x)``.
        jac: the gradient of ``fun`` at ``x``.
        hess_inv: the BFGS approximation of the inverse Hessian at ``x``.
        nfev, njev: evaluations of ``fun`` and of its gradient (always evaluated together).
        nit: BFGS iterations taken.
    """

    x: object
    success: object
    status: object
    fun: object
    jac: object
    hess_inv: object
    nfev: object
    njev: object
    nit: object

    @property
    def message(self) -> str:
        """scipy's message for ``status`` (needs a concrete status, as after ``ft.jit``)."""
        return _MESSAGES.get(int(np.asarray(self.status)), "Unknown status.")


# --------------------------------------------------------------------------------------------
# the strong-Wolfe line search
# --------------------------------------------------------------------------------------------

class _Search(NamedTuple):
    trips: object
    done: object
    trial: object       # the step the next trip evaluates
    a_lo: object        # the best step so far with sufficient decrease (0 at first)
    f_lo: object
    d_lo: object        # the directional derivative there
    g_lo: object
    a_hi: object        # the other end of the bracket: inf while it is still open
    f_hi: object
    d_hi: object


def _safe_div(num, den):
    """num / den, with 1 where den is 0 (the caller discards those lanes): no warnings on
    numpy arrays, no NaN gradients."""
    zero = den == 0.0
    return fnp.where(zero, 1.0, num / fnp.where(zero, 1.0, den))


def _cubic_step(a_lo, f_lo, d_lo, a_hi, f_hi, d_hi):
    """The minimiser of the cubic through both ends' values and slopes (Nocedal & Wright,
    eq. 3.59), safeguarded: bisection unless it lies well inside the bracket."""
    width = a_hi - a_lo
    d1 = d_lo + d_hi - 3.0 * _safe_div(f_lo - f_hi, a_lo - a_hi)
    radicand = d1 * d1 - d_lo * d_hi
    d2 = fnp.sign(width) * fnp.sqrt(fnp.maximum(radicand, 0.0))
    a = a_hi - width * _safe_div(d_hi + d2 - d1, d_hi - d_lo + 2.0 * d2)
    lo, hi = fnp.minimum(a_lo, a_hi), fnp.maximum(a_lo, a_hi)
    margin = 0.1 * fnp.abs(width)
    inside = (radicand >= 0.0) & (a > lo + margin) & (a < hi - margin)
    return fnp.where(inside, a, 0.5 * (a_lo + a_hi))


def _line_search(f_and_g, x, p, f0, g0, first, maxiter, c1=1e-4, c2=0.9):
    """A step ``a`` along ``p`` from ``x`` with f(x + a p) <= f0 + c1 a f'(0) and
    |f'(a)| <= c2 |f'(0)|; returns (a, f, g there, evaluations, failed)."""
    d0 = fnp.dot(g0, p)
    inf = fnp.asarray(np.inf, f0.dtype)

    def go_on(s):
        return (~s.done) & (s.trips < maxiter)

    def trip(s):
        a = s.trial
        fa, ga = f_and_g(x + a * p)
        da = fnp.dot(ga, p)
        # "bad": no sufficient decrease (NaN counts), or no better than lo: a closes the
        # bracket from above
        bad = ~(fa <= f0 + c1 * a * d0) | (fa >= s.f_lo)
        good = (~bad) & (fnp.abs(da) <= -c2 * d0)
        # otherwise a is the new lo; the old lo becomes hi if the slope at a points at it
        flip = (~bad) & (~good) & (da * (s.a_hi - s.a_lo) >= 0.0)
        move = (~bad) & (~good)
        pick = lambda c, new, old: fnp.where(c, new, old)  # noqa: E731
        a_hi = pick(bad, a, pick(flip, s.a_lo, s.a_hi))
        f_hi = pick(bad, fa, pick(flip, s.f_lo, s.f_hi))
        d_hi = pick(bad, da, pick(flip, s.d_lo, s.d_hi))
        a_lo, f_lo = pick(move | good, a, s.a_lo), pick(move | good, fa, s.f_lo)
        d_lo, g_lo = pick(move | good, da, s.d_lo), pick(move | good, ga, s.g_lo)
        open_ = fnp.isinf(a_hi)
        safe_hi = fnp.where(open_, a_lo + 1.0, a_hi)
        interp = _cubic_step(a_lo, f_lo, d_lo, safe_hi, f_hi, d_hi)
        trial = fnp.where(open_, 2.0 * a, interp)
        # a bracket narrower than rounding cannot hold a better step
        stuck = (~open_) & (fnp.abs(a_hi - a_lo) <= 1e-10 * fnp.maximum(1.0, a_lo))
        return _Search(s.trips + 1, good | stuck, trial, a_lo, f_lo, d_lo, g_lo,
                       a_hi, f_hi, d_hi)

    zero = fnp.zeros_like(f0)
    start = _Search(0, ~(d0 < 0.0), first, zero, f0, d0, g0, inf, f0, d0)
    s = while_loop(go_on, trip, start)
    ok = (fnp.abs(s.d_lo) <= -c2 * d0) & (s.a_lo > 0.0)
    return s.a_lo, s.f_lo, s.g_lo, s.trips, ~ok


# --------------------------------------------------------------------------------------------
# BFGS
# --------------------------------------------------------------------------------------------

class _Bfgs(NamedTuple):
    k: object
    x: object
    f: object
    g: object
    H: object
    f_before: object      # f one iteration back: sizes the first trial step of a search
    converged: object
    failed: object
    nfev: object


def _vector_norm(g, order):
    if order == np.inf:
        return fnp.max(fnp.abs(g))
    if order == -np.inf:
        return fnp.min(fnp.abs(g))
    return fnp.sum(fnp.abs(g) ** order) ** (1.0 / order)


def _bfgs(fun, x0, maxiter, gtol, norm, line_search_maxiter):
    f_and_g = value_and_grad(fun)
    f0, g0 = f_and_g(x0)
    n = x0.shape[0]
    eye = np.eye(n, dtype=x0.dtype)

    def go_on(s):
        return (~s.converged) & (~s.failed) & (s.k < maxiter)

    def iteration(s):
        p = -fnp.dot(s.H, s.g)
        d0 = fnp.dot(s.g, p)
        # scipy's first trial: the step that would repeat the last decrease, at most 1
        guess = 2.02 * (s.f - s.f_before) / fnp.where(d0 == 0.0, -1.0, d0)
        first = fnp.where((guess > 0.0) & (guess < 1.0), guess, 1.0)
        a, f1, g1, evals, failed = _line_search(f_and_g, s.x, p, s.f, s.g, first,
                                                line_search_maxiter)
        step = a * p
        y = g1 - s.g
        ys = fnp.dot(y, step)
        rho = 1.0 / fnp.where(ys == 0.0, 1.0, ys)
        Hy = fnp.dot(s.H, y)
        # H+ = (I - rho s y') H (I - rho y s') + rho s s', expanded into rank-one terms
        H1 = (s.H - rho * (fnp.outer(step, Hy) + fnp.outer(Hy, step))
              + (rho * rho * fnp.dot(y, Hy) + rho) * fnp.outer(step, step))
        H1 = fnp.where((ys > 0.0) & fnp.isfinite(rho), H1, s.H)
        x1 = s.x + step
        converged = _vector_norm(g1, norm) <= gtol
        bad = ~(fnp.isfinite(f1) & fnp.all(fnp.isfinite(x1)))
        return _Bfgs(s.k + 1, x1, f1, g1, H1, s.f, converged, failed | bad,
                     s.nfev + evals)

    first_norm = fnp.sqrt(fnp.sum(g0 * g0))
    start = _Bfgs(0, x0, f0, g0, eye, f0 + first_norm / 2.0, _vector_norm(g0, norm) <= gtol,
                  ~fnp.isfinite(f0), 1)
    return while_loop(go_on, iteration, start)


# --------------------------------------------------------------------------------------------
# the public function
# --------------------------------------------------------------------------------------------

_BFGS_OPTIONS = ("maxiter", "gtol", "norm", "line_search_maxiter")


def minimize(fun: Callable, x0, args: tuple = (), method: str = "BFGS",
             tol: float | None = None, options: dict | None = None) -> OptimizeResults:
    """Minimise the scalar function ``fun(x, *args)`` of a 1-D array ``x`` with BFGS.

    scipy.optimize.minimize's signature and BFGS's defaults (``gtol=1e-5``, the infinity
    norm of the gradient, ``maxiter=200 * len(x0)``, Wolfe constants 1e-4 and 0.9, the
    identity as the first inverse Hessian); as ``jax.scipy.optimize.minimize``, the gradient
    comes from automatic differentiation (so ``fun`` must be traceable), the loop is a
    ``ft.while_loop`` and the result is a namedtuple of arrays, so it runs under ``ft.jit``
    and ``ft.vmap``. ``minimize`` itself is not differentiable with respect to ``args`` (no
    implicit-function rule; differentiating through the loop gives the derivative of the
    iterations, not of the optimum).

    Args:
        fun: ``fun(x, *args)`` -> a float scalar; ``x`` has the shape of ``x0``.
        x0: the starting point (a scalar or an array; flattened as scipy does; integers
            become float64).
        args: extra arguments of ``fun`` (a tuple; they may be traced values).
        method: ``"BFGS"`` (case-insensitive); the only method.
        tol: if given, the gradient tolerance ``gtol`` (as scipy's BFGS).
        options: ``maxiter``, ``gtol``, ``norm`` (of the gradient, default ``inf``) and
            ``line_search_maxiter`` (evaluations per line search, default 30).

    Returns:
        :class:`OptimizeResults` (``x``, ``success``, ``status``, ``fun``, ``jac``,
        ``hess_inv``, ``nfev``, ``njev``, ``nit``; ``.message`` from the status).

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> from functrace.scipy.optimize import minimize
        >>> def rosen(x, a):
        ...     return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (a - x[:-1]) ** 2)
        >>> res = minimize(rosen, np.zeros(2), args=(1.0,))
        >>> bool(res.success), np.round(res.x, 4).tolist(), res.message
        (True, [1.0, 1.0], 'Optimization terminated successfully.')
        >>> solve = ft.jit(lambda x0: minimize(rosen, x0, args=(1.0,)).x)
        >>> bool(np.allclose(solve(np.full(2, -1.0)), 1.0, atol=1e-4))
        True
    """
    if not callable(fun):
        raise FunctraceTypeError(f"minimize: fun must be callable fun(x, *args); got "
                                 f"{type(fun).__name__} ({where()})")
    if not isinstance(args, tuple):
        raise FunctraceTypeError(f"minimize: args must be a tuple; got {type(args).__name__}. "
                                 f"Fix: args=(value,) ({where()})")
    if not isinstance(method, str) or method.lower() != "bfgs":
        raise FunctraceValueError(f"minimize: method {method!r} is not supported; the only "
                                  f"method is 'BFGS' ({where()})")
    options = dict(options or {})
    unknown = sorted(set(options) - set(_BFGS_OPTIONS))
    if unknown:
        raise FunctraceTypeError(f"minimize: unknown BFGS options {unknown}; known: "
                                 f"{list(_BFGS_OPTIONS)} ({where()})")
    if tol is not None:
        options.setdefault("gtol", tol)
    x0 = x0 if isinstance(x0, Tracer) else np.asarray(x0)
    shape = tuple(x0.shape)
    dtype = np.dtype(x0.dtype)
    if not np.issubdtype(dtype, np.floating):
        if np.issubdtype(dtype, np.complexfloating):
            raise FunctraceTypeError(f"minimize: x0 must be real; got {dtype} ({where()})")
        dtype = np.dtype(np.float64)
    x0 = fnp.reshape(x0, (-1,)).astype(dtype)
    n = int(np.prod(shape))
    if n == 0:
        raise ShapeError(f"minimize: x0 is empty (shape {shape}) ({where()})")
    maxiter = options.get("maxiter", 200 * n)
    gtol = options.get("gtol", 1e-5)
    norm = options.get("norm", np.inf)
    ls_maxiter = options.get("line_search_maxiter", 30)

    def flat_fun(x):
        out = fun(fnp.reshape(x, shape), *args)
        if tuple(getattr(out, "shape", ())) != ():
            raise ShapeError(f"minimize: fun must return a scalar; it returned shape "
                             f"{tuple(out.shape)} ({where()})")
        return out

    s = _bfgs(flat_fun, x0, maxiter, gtol, norm, ls_maxiter)
    finite = fnp.isfinite(s.f) & fnp.all(fnp.isfinite(s.x))
    status = fnp.where(s.converged & finite, 0,
                       fnp.where(~finite, 3, fnp.where(s.failed, 2, 1)))
    return OptimizeResults(x=fnp.reshape(s.x, shape), success=status == 0, status=status,
                           fun=s.f, jac=fnp.reshape(s.g, shape), hess_inv=s.H,
                           nfev=s.nfev, njev=s.nfev, nit=s.k)
