"""functrace.scipy.special: scipy.special's functions, traceable and differentiable.

Owns the user functions over ``functrace.ops.special`` (one primitive per function no other op
computes well: erf, gammaln, digamma, ndtri, ...) and the compositions of existing ops (expit,
xlogy, logsumexp, log_ndtr, ...), written for the far tails (log space, erfcx) and with
docs/numerics.md's conventions at special values. Outside a transform a function is scipy's
own (bit for bit); inside one it binds ops. dtypes follow scipy: float32 stays float32,
everything else computes in float64. Imports ops, tracing and functrace.numpy only.
"""

from __future__ import annotations

import functools
import importlib
import math

import numpy as np

from .. import nn, ops
from .. import numpy as fnp
from ..tracing import Tracer, current_trace

__all__ = ["erf", "erfc", "erfcx", "erfinv", "erfcinv", "ndtr", "ndtri", "log_ndtr",
           "gammaln", "gamma", "loggamma", "digamma", "psi", "polygamma", "multigammaln",
           "beta", "betaln", "betainc", "gammainc", "gammaincc", "zeta", "xlogy", "xlog1py",
           "expit", "logit", "log_expit", "logsumexp", "softmax", "log_softmax", "entr",
           "rel_entr", "kl_div", "i0", "i0e", "i1", "i1e", "sinc"]

_SQRT1_2 = math.sqrt(0.5)


def _scipy():
    try:
        return importlib.import_module("scipy.special")
    except ImportError:
        return None


def _eager_scipy(fn):
    """Outside a transform, call scipy.special's function of the same name (when SciPy is
    installed); inside one, run ``fn``."""
    name = fn.__name__

    @functools.wraps(fn)
    def f(*args, **kwargs):
        if current_trace() is None:
            sp = _scipy()
            if sp is not None:
                return getattr(sp, name)(*args, **kwargs)
        return fn(*args, **kwargs)
    return f


def _dtype(*xs) -> np.dtype:
    """scipy's result dtype: float32 stays float32, anything else computes in float64."""
    dts = [x.dtype if isinstance(x, Tracer | np.ndarray | np.generic) else x for x in xs]
    dt = np.result_type(*dts)
    return np.dtype(np.float32) if dt == np.float32 else np.dtype(np.float64)


def _floats(*xs):
    """The operands cast to their common scipy dtype and broadcast to one shape."""
    dt = _dtype(*xs)
    out = [fnp.asarray(x, dtype=dt) for x in xs]
    if len(out) > 1 and len({tuple(np.shape(x)) for x in out} - {()}) > 1:
        out = list(fnp.broadcast_arrays(*out))
    return out


def _unary_op(op, x):
    (x,) = _floats(x)
    return op(x)


def _c(value, like):
    return fnp.asarray(value, dtype=like.dtype)


# --------------------------------------------------------------------------------------------
# error functions and the normal distribution
# --------------------------------------------------------------------------------------------

@_eager_scipy
def erf(x):
    """The error function 2/sqrt(pi) * integral_0^x exp(-t**2) dt.

    Example:
        >>> import functrace as ft, functrace.scipy.special as fsp
        >>> round(float(ft.grad(fsp.erf)(0.0)), 6)   # 2 / sqrt(pi)
        1.128379
    """
    return _unary_op(ops.erf, x)


@_eager_scipy
def erfc(x):
    """1 - erf(x), accurate where erf(x) rounds to 1 (relative error of a few ulp to x = 27).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.erfc(10.0))
        2.088487583762545e-45
    """
    return _unary_op(ops.erfc, x)


@_eager_scipy
def erfcx(x):
    """The scaled complementary error function exp(x**2) * erfc(x).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.erfcx(0.0)), 6)
        1.0
    """
    return _unary_op(ops.erfcx, x)


@_eager_scipy
def erfinv(y):
    """The inverse of erf on (-1, 1) (+-inf at +-1, NaN outside).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.erfinv(0.5)), 6)
        0.476936
    """
    return _unary_op(ops.erfinv, y)


@_eager_scipy
def erfcinv(y):
    """The inverse of erfc on (0, 2).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.erfcinv(0.5)), 6)
        0.476936
    """
    return _unary_op(ops.erfcinv, y)


@_eager_scipy
def ndtr(x):
    """The standard normal CDF (scipy's formula: erf near 0, erfc in the tails).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.ndtr(0.0))
        0.5
    """
    (x,) = _floats(x)
    z = x * _c(_SQRT1_2, x)
    half = _c(0.5, x)
    mid = half + half * ops.erf(z)
    hi = _c(1.0, x) - half * ops.erfc(z)
    lo = half * ops.erfc(-z)
    return fnp.where(fnp.abs(z) < _SQRT1_2, mid, fnp.where(z > 0, hi, lo))


@_eager_scipy
def ndtri(p):
    """The inverse of ndtr (the standard normal quantile), accurate to p = 5e-324.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.ndtri(0.975)), 6)
        1.959964
    """
    return _unary_op(ops.ndtri, p)


@_eager_scipy
def log_ndtr(x):
    """log(ndtr(x)), accurate in both tails: log(erfcx(-x/sqrt 2)/2) - x**2/2 below -1 (no
    underflow down to x = -1e150), log1p(-ndtr(-x)) above.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.log_ndtr(-40.0)), 4)
        -804.6084
    """
    (x,) = _floats(x)
    left = x < -1.0
    xl = fnp.where(left, x, _c(-1.0, x))      # each branch sees only its own domain
    xr = fnp.where(left, _c(-1.0, x), x)
    z = -xl * _c(_SQRT1_2, x)
    tail = fnp.log(_c(0.5, x) * ops.erfcx(z)) - _c(0.5, x) * xl * xl
    body = fnp.log1p(-_c(0.5, x) * ops.erfc(xr * _c(_SQRT1_2, x)))
    return fnp.where(left, tail, body)


# --------------------------------------------------------------------------------------------
# the gamma family
# --------------------------------------------------------------------------------------------

@_eager_scipy
def gammaln(x):
    """log|gamma(x)| (+inf at the poles 0, -1, -2, ...); the derivative is digamma.

    Example:
        >>> import functrace as ft, functrace.scipy.special as fsp
        >>> round(float(fsp.gammaln(5.0)), 6)   # log(24)
        3.178054
        >>> round(float(ft.grad(fsp.gammaln)(1.0)), 6)   # digamma(1) = -euler
        -0.577216
    """
    return _unary_op(ops.gammaln, x)


def _gamma_sign(x):
    # gamma(x) < 0 for x in (-1, 0), (-3, -2), ...: floor(x) odd and negative
    fl = fnp.floor(x)
    neg = (x < 0) & (fnp.remainder(fl, 2.0) == 1.0)
    return fnp.where(neg, _c(-1.0, x), _c(1.0, x))


@_eager_scipy
def gamma(x):
    """The gamma function, as sign * exp(gammaln(x)) (see docs/scipy.md for its accuracy).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.gamma(5.0)), 9)
        24.0
    """
    (x,) = _floats(x)
    pole = (x <= 0) & (fnp.floor(x) == x)
    val = _gamma_sign(x) * fnp.exp(ops.gammaln(x))
    zero_pole = fnp.where(fnp.signbit(x), _c(-np.inf, x), _c(np.inf, x))
    return fnp.where(pole, fnp.where(x == 0, zero_pole, _c(np.nan, x)), val)


@_eager_scipy
def loggamma(x):
    """The principal branch of log(gamma(x)) for real x: gammaln for x >= 0, NaN below
    (scipy's real loggamma; complex arguments are not supported).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.loggamma(3.0)), 6)
        0.693147
    """
    (x,) = _floats(x)
    return fnp.where(x < 0, _c(np.nan, x), ops.gammaln(x))


@_eager_scipy
def digamma(x):
    """psi(x) = d/dx log gamma(x); its derivative is polygamma(1, x).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.digamma(1.0)), 6)
        -0.577216
    """
    return _unary_op(ops.digamma, x)


psi = digamma


def polygamma(n, x):
    """The n-th derivative of digamma. ``n`` must be a concrete non-negative integer (or an
    array of one such value): the op's order is static.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.polygamma(1, 1.0)), 6)   # pi**2 / 6
        1.644934
    """
    if current_trace() is None and _scipy() is not None:
        return _scipy().polygamma(n, x)
    if isinstance(n, Tracer):
        raise TypeError("polygamma: the order n must be a concrete integer, not a traced value")
    vals = np.unique(np.asarray(n))
    if vals.size != 1 or vals[0] != np.floor(vals[0]) or vals[0] < 0:
        raise ValueError(f"polygamma: n must be one non-negative integer, got {n!r}")
    x = fnp.asarray(x, dtype=np.float64)    # scipy computes polygamma in float64
    y = ops.polygamma(x, n=int(vals[0]))
    shape = np.broadcast_shapes(np.shape(n), np.shape(x))
    return y if shape == np.shape(y) else fnp.broadcast_to(y, shape)


@_eager_scipy
def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension ``d`` (a Python int).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.multigammaln(3.0, 2)), 6)
        1.550195
    """
    d = int(d)
    a = fnp.asarray(a, dtype=np.float64)    # scipy computes multigammaln in float64
    total = _c(d * (d - 1) / 4.0 * math.log(math.pi), a)
    for j in range(d):
        total = total + ops.gammaln(a - _c(j / 2.0, a))
    return total


@_eager_scipy
def betaln(a, b):
    """log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.betaln(1.0, 2.0)), 6)
        -0.693147
    """
    a, b = _floats(a, b)
    return ops.gammaln(a) + ops.gammaln(b) - ops.gammaln(a + b)


@_eager_scipy
def beta(a, b):
    """The beta function B(a, b) = gamma(a) gamma(b) / gamma(a + b).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.beta(2.0, 3.0)), 9)
        0.083333333
    """
    a, b = _floats(a, b)
    s = _gamma_sign(a) * _gamma_sign(b) * _gamma_sign(a + b)
    return s * fnp.exp(betaln(a, b))


@_eager_scipy
def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b); differentiable in every argument,
    in ``a`` and ``b`` to second order (a third derivative in them is a MissingRuleError).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.betainc(2.0, 3.0, 0.5)), 6)
        0.6875
    """
    a, b, x = _floats(a, b, x)
    return ops.betainc(a, b, x)


@_eager_scipy
def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x); differentiable in ``x`` and,
    to second order, in ``a`` (a third derivative in ``a`` is a MissingRuleError).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.gammainc(1.0, 1.0)), 6)   # 1 - exp(-1)
        0.632121
    """
    a, x = _floats(a, x)
    return ops.gammainc(a, x)


@_eager_scipy
def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x); derivatives as
    ``gammainc``'s.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.gammaincc(1.0, 1.0)), 6)
        0.367879
    """
    a, x = _floats(a, x)
    return ops.gammaincc(a, x)


def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (k + q)**-x (Riemann's for ``q=None``), x > 1;
    differentiable in ``q`` (a gradient in ``x`` is a MissingRuleError).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> round(float(fsp.zeta(2.0)), 6)   # pi**2 / 6
        1.644934
    """
    if current_trace() is None and _scipy() is not None:
        return _scipy().zeta(x, q)
    x, q = _floats(x, 1.0 if q is None else q)
    return ops.zeta(x, q)


# --------------------------------------------------------------------------------------------
# logistic and log-space functions
# --------------------------------------------------------------------------------------------

@_eager_scipy
def expit(x):
    """The logistic sigmoid 1 / (1 + exp(-x)), stable for large |x|.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.expit(0.0))
        0.5
    """
    return _unary_op(ops.logistic, x)


@_eager_scipy
def logit(p):
    """log(p / (1 - p)), computed as log(p) - log1p(-p).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.logit(0.5))
        0.0
    """
    (p,) = _floats(p)
    return fnp.log(p) - fnp.log1p(-p)


@_eager_scipy
def log_expit(x):
    """log(expit(x)) = min(x, 0) - log1p(exp(-|x|)), stable in both tails.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.log_expit(-800.0))
        -800.0
    """
    (x,) = _floats(x)
    return fnp.minimum(x, _c(0.0, x)) - fnp.log1p(fnp.exp(-fnp.abs(x)))


def _xlogf(x, y, f, shift):
    x, y = _floats(x, y)
    zero = x == 0
    # the double where keeps log(0) out of the gradient where x == 0 (docs/numerics.md)
    safe = fnp.where(zero & ~fnp.isnan(y), _c(1.0 - shift, y), y)
    return fnp.where(zero & ~fnp.isnan(y), _c(0.0, x), x * f(safe))


@_eager_scipy
def xlogy(x, y):
    """x * log(y), 0 where x == 0 (unless y is NaN), with a finite gradient there.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.xlogy(0.0, 0.0))
        0.0
    """
    return _xlogf(x, y, fnp.log, 0.0)


@_eager_scipy
def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0 (unless y is NaN).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.xlog1py(0.0, -1.0))
        0.0
    """
    return _xlogf(x, y, fnp.log1p, 1.0)


@_eager_scipy
def entr(x):
    """-x log(x) for x > 0, 0 at 0, -inf below.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.entr(1.0))
        -0.0
    """
    (x,) = _floats(x)
    val = -xlogy(x, fnp.where(x > 0, x, _c(1.0, x)))
    return fnp.where(x < 0, _c(-np.inf, x), val)


@_eager_scipy
def rel_entr(x, y):
    """x log(x / y) for x, y > 0; 0 where x == 0 and y >= 0; +inf elsewhere.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.rel_entr(1.0, 1.0))
        0.0
    """
    x, y = _floats(x, y)
    pos = (x > 0) & (y > 0)
    xs = fnp.where(pos, x, _c(1.0, x))
    ys = fnp.where(pos, y, _c(1.0, y))
    val = xs * (fnp.log(xs) - fnp.log(ys))
    zero = (x == 0) & (y >= 0)
    nan = fnp.isnan(x) | fnp.isnan(y)
    other = fnp.where(zero, _c(0.0, x), fnp.where(nan, _c(np.nan, x), _c(np.inf, x)))
    return fnp.where(pos, val, other)


@_eager_scipy
def kl_div(x, y):
    """x log(x / y) - x + y for x, y > 0; y where x == 0 and y >= 0; +inf elsewhere.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.kl_div(0.0, 1.0))
        1.0
    """
    x, y = _floats(x, y)
    pos = (x > 0) & (y > 0)
    zero = (x == 0) & (y >= 0)
    return fnp.where(pos, rel_entr(x, y) - x + y, fnp.where(zero, y, rel_entr(x, y)))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) over ``axis``, stable for large values; with ``return_sign``,
    ``(log|s|, sign(s))`` for a weighted sum ``s`` of either sign. All -inf gives -inf with a
    zero gradient (docs/numerics.md).

    Example:
        >>> import numpy as np, functrace.scipy.special as fsp
        >>> round(float(fsp.logsumexp(np.array([0.0, 0.0]))), 6)
        0.693147
        >>> [float(v) for v in fsp.logsumexp(np.array([0.0, 1.0]), b=np.array([1.0, -1.0]),
        ...                                   return_sign=True)]
        [0.5413248546129181, -1.0]
    """
    if current_trace() is None and _scipy() is not None:
        return _scipy().logsumexp(a, axis=axis, b=b, keepdims=keepdims,
                                  return_sign=return_sign)
    if b is None and not return_sign:
        (a,) = _floats(a)
        return fnp.logsumexp(a, axis=axis, keepdims=keepdims)
    a, b = (_floats(a) + [None]) if b is None else _floats(a, b)
    m = fnp.max(ops.stop_gradient(a), axis=axis, keepdims=True)
    m = fnp.where(fnp.isfinite(m), m, _c(0.0, a))
    e = fnp.exp(a - m)
    s = fnp.sum(e if b is None else b * e, axis=axis, keepdims=True)
    sgn = fnp.sign(s)
    out = fnp.log(fnp.abs(s)) + m
    if not keepdims:
        out = fnp.squeeze(out, axis=axis) if axis is not None else fnp.reshape(out, ())
        sgn = fnp.squeeze(sgn, axis=axis) if axis is not None else fnp.reshape(sgn, ())
    if return_sign:
        return out, ops.stop_gradient(sgn)
    return fnp.where(sgn < 0, _c(np.nan, out), out)


@_eager_scipy
def softmax(x, axis=None):
    """exp(x - logsumexp(x, axis, keepdims=True)) (scipy's default: over all elements), as
    one op (``functrace.nn.softmax``: one exp per element in a kernel).

    Example:
        >>> import numpy as np, functrace.scipy.special as fsp
        >>> fsp.softmax(np.array([0.0, 0.0]))
        array([0.5, 0.5])
    """
    (x,) = _floats(x)
    return nn.softmax(x, axis=axis)


@_eager_scipy
def log_softmax(x, axis=None):
    """x - logsumexp(x, axis, keepdims=True).

    Example:
        >>> import numpy as np, functrace.scipy.special as fsp
        >>> np.round(fsp.log_softmax(np.array([0.0, 0.0])), 6)
        array([-0.693147, -0.693147])
    """
    (x,) = _floats(x)
    return x - fnp.logsumexp(x, axis=axis, keepdims=True)


# --------------------------------------------------------------------------------------------
# Bessel functions and sinc
# --------------------------------------------------------------------------------------------

@_eager_scipy
def i0e(x):
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.i0e(0.0))
        1.0
    """
    return _unary_op(ops.i0e, x)


@_eager_scipy
def i1e(x):
    """exp(-|x|) I1(x), the exponentially scaled modified Bessel function of order 1.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.i1e(0.0))
        0.0
    """
    return _unary_op(ops.i1e, x)


def _unscale(x, scaled):
    h = fnp.exp(fnp.abs(x) * _c(0.5, x))      # two halves: no overflow before I(x) does
    return (h * scaled) * h


@_eager_scipy
def i0(x):
    """The modified Bessel function of order 0, as exp(|x|) i0e(x).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.i0(0.0))
        1.0
    """
    (x,) = _floats(x)
    return _unscale(x, ops.i0e(x))


@_eager_scipy
def i1(x):
    """The modified Bessel function of order 1, as exp(|x|) i1e(x).

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.i1(0.0))
        0.0
    """
    (x,) = _floats(x)
    return _unscale(x, ops.i1e(x))


def sinc(x):
    """sin(pi x) / (pi x) (scipy.special.sinc is numpy's); derivative 0 at 0.

    Example:
        >>> import functrace.scipy.special as fsp
        >>> float(fsp.sinc(0.0))
        1.0
    """
    return fnp.sinc(x)
