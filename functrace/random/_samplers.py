"""functrace.random's samplers built on the core (``_keys``): JAX's formulas op for op
(truncated normal, Bernoulli, categorical, exponential, Laplace, logistic, Gumbel, Cauchy,
randint, permutation, choice, multivariate normal) and the rejection samplers' wrappers
(gamma, loggamma, beta, Dirichlet, Student's t, Poisson: ``ops.random_rejection``).

Outside transforms, each sampler's bit-exact part runs compiled (``_eager.call``): the whole
of ``bernoulli``, ``randint`` and ``truncated_normal`` after its bounds' ``erf``; the draws
under the others (their ``log``/``tan``/``exp`` tails stay numpy's, see ``_eager``). The
gamma-family and Poisson rejection samplers are single ops whose numpy implementation is
what every backend runs: they are called as they are.

Imports numpy, ops, tracing, errors, ``functrace.numpy``, ``functrace.nn``, ``api`` (for
``stop_gradient``), ``_eager`` and, for traced truncated-normal bounds,
``functrace.scipy.special``.
"""

from __future__ import annotations

import math

import numpy as np

from .. import nn, ops
from .. import numpy as fnp
from ..api import stop_gradient
from ..errors import FunctraceTypeError, FunctraceValueError
from ..ops.xla_math import erf_inv_xla
from ..tracing import Tracer
from . import _eager
from ._keys import (
    as_dtype,
    broadcast_full,
    check_param_shape,
    float_dtype,
    key_arg,
    normal,
    random_bits,
    shape_arg,
    split,
    uniform_draw,
)

__all__ = ["truncated_normal", "bernoulli", "categorical", "randint", "permutation", "choice",
           "gamma", "loggamma", "beta", "dirichlet", "exponential", "laplace", "logistic",
           "multivariate_normal", "poisson", "gumbel", "t", "cauchy"]


# --------------------------------------------------------------------------------------------
# samplers built from uniform and normal (JAX's formulas)
# --------------------------------------------------------------------------------------------

def _concrete(x) -> bool:
    return not isinstance(x, Tracer)


_math_erf = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    if _concrete(x):
        x = np.asarray(x)
        return np.asarray(_math_erf(x), dtype=np.float64).astype(x.dtype)[()]
    from ..scipy import special  # traced bounds: the erf op (its reference needs SciPy)
    return special.erf(x)


def truncated_normal(key, lower, upper, shape=None, dtype=float):
    """Standard normal samples conditioned on ``lower < x < upper``: the inverse CDF of a
    uniform between ``erf(lower/sqrt 2)`` and ``erf(upper/sqrt 2)``, clipped into the open
    interval, as JAX. Traced bounds are differentiable (their ``erf`` is SciPy's: the
    ``scipy`` extra) and the clip is then to the closed interval.

    Args:
        key: a key.
        lower, upper: bounds, broadcastable to ``shape``.
        shape: the result's shape (default: the bounds' broadcast shape).
        dtype: float32 or float64 (default float64).

    Example:
        >>> import functrace.random as random
        >>> x = random.truncated_normal(random.key(0), -1.0, 2.0, (1000,))
        >>> bool(x.min() > -1.0 and x.max() < 2.0)
        True
    """
    key = key_arg("truncated_normal", key)
    dt = float_dtype("truncated_normal", dtype)
    if shape is None:
        shape = np.broadcast_shapes(np.shape(lower), np.shape(upper))
    shape = shape_arg("truncated_normal", shape)
    lower, upper = as_dtype(lower, dt), as_dtype(upper, dt)
    check_param_shape("truncated_normal", shape, lower, upper)
    sqrt2 = dt.type(math.sqrt(2))
    a, b = as_dtype(_erf(lower / sqrt2), dt), as_dtype(_erf(upper / sqrt2), dt)
    check_param_shape("truncated_normal", shape, a, b)
    if _concrete(lower) and _concrete(upper):
        lo, hi = np.nextafter(lower, dt.type(np.inf)), np.nextafter(upper, dt.type(-np.inf))
    else:
        lo, hi = stop_gradient(lower), stop_gradient(upper)
    return _eager.call(_truncated_normal, (shape, dt), (key, a, b, lo, hi), math.prod(shape))


def _truncated_normal(shape, dt, key, a, b, lo, hi):
    u = uniform_draw(key, shape, dt, a, b)
    return fnp.clip(dt.type(math.sqrt(2)) * erf_inv_xla(u), lo, hi)


def bernoulli(key, p=0.5, shape=None):
    """Booleans that are True with probability ``p``: ``uniform(key, shape, dtype(p)) < p``.

    Args:
        key: a key.
        p: probabilities (float array or number; float32 ``p`` draws float32 uniforms).
        shape: the result's shape (default: ``p``'s).

    Example:
        >>> import functrace.random as random
        >>> random.bernoulli(random.key(0), 0.5, (4,))
        array([ True,  True, False, False])
    """
    key = key_arg("bernoulli", key)
    p = fnp.asarray(p) if _concrete(p) else p
    if p.dtype.kind != "f":
        p = p.astype(np.float64)
    shape = tuple(np.shape(p)) if shape is None else shape_arg("bernoulli", shape)
    check_param_shape("bernoulli", shape, p)
    return _eager.call(_bernoulli, (shape,), (key, p), math.prod(shape))


def _bernoulli(shape, key, p):
    return uniform_draw(key, shape, p.dtype, 0.0, 1.0) < p


def exponential(key, shape=(), dtype=float):
    """Exponential(1) samples: ``-log1p(-u)`` for ``u`` uniform in [0, 1).

    Example:
        >>> import functrace.random as random
        >>> x = random.exponential(random.key(0), (10000,))
        >>> round(float(x.mean()), 1)
        1.0
    """
    key = key_arg("exponential", key)
    dt = float_dtype("exponential", dtype)
    u = uniform_draw(key, shape_arg("exponential", shape), dt, 0.0, 1.0)
    return -fnp.log1p(-u)


def laplace(key, shape=(), dtype=float):
    """Laplace(0, 1) samples: ``sign(u) * log1p(-|u|)`` for ``u`` uniform in (-1, 1).

    Example:
        >>> import functrace.random as random
        >>> random.laplace(random.key(0), (2, 3)).shape
        (2, 3)
    """
    key = key_arg("laplace", key)
    dt = float_dtype("laplace", dtype)
    u = uniform_draw(key, shape_arg("laplace", shape), dt, -1.0 + np.finfo(dt).epsneg, 1.0)
    return fnp.sign(u) * fnp.log1p(-fnp.abs(u))


def logistic(key, shape=(), dtype=float):
    """Logistic(0, 1) samples: ``log(u) - log1p(-u)`` for ``u`` uniform in (0, 1).

    Example:
        >>> import functrace.random as random
        >>> random.logistic(random.key(0), (3,)).dtype
        dtype('float64')
    """
    key = key_arg("logistic", key)
    dt = float_dtype("logistic", dtype)
    x = uniform_draw(key, shape_arg("logistic", shape), dt, np.finfo(dt).tiny, 1.0)
    return fnp.log(x) - fnp.log1p(-x)


def gumbel(key, shape=(), dtype=float):
    """Gumbel(0, 1) samples: ``-log(-log(u))`` for ``u`` uniform in (0, 1) (JAX's default
    ``mode="low"``).

    Example:
        >>> import functrace.random as random
        >>> x = random.gumbel(random.key(0), (20000,))
        >>> round(float(x.mean()), 1)     # Euler's constant
        0.6
    """
    key = key_arg("gumbel", key)
    dt = float_dtype("gumbel", dtype)
    u = uniform_draw(key, shape_arg("gumbel", shape), dt, np.finfo(dt).tiny, 1.0)
    return -fnp.log(-fnp.log(u))


def cauchy(key, shape=(), dtype=float):
    """Cauchy(0, 1) samples: ``tan(pi * (u - 1/2))`` for ``u`` uniform in (0, 1).

    Example:
        >>> import functrace.random as random
        >>> random.cauchy(random.key(0), (3,)).shape
        (3,)
    """
    key = key_arg("cauchy", key)
    dt = float_dtype("cauchy", dtype)
    u = uniform_draw(key, shape_arg("cauchy", shape), dt, np.finfo(dt).eps, 1.0)
    return fnp.tan(dt.type(np.pi) * (u - dt.type(0.5)))


def categorical(key, logits, axis: int = -1, shape=None, replace: bool = True):
    """Category indices drawn with probabilities ``softmax(logits)`` along ``axis``: the
    argmax of ``logits + gumbel`` (without replacement: the top ``k`` of one perturbation).

    Args:
        key: a key.
        logits: unnormalised log-probabilities.
        axis: the category axis.
        shape: the result's shape: leading sample axes followed by ``logits``' shape without
            ``axis`` (default: that shape alone).
        replace: draw with replacement (default) or without.

    Example:
        >>> import numpy as np, functrace.random as random
        >>> x = random.categorical(random.key(0), np.log(np.array([0.2, 0.8])), shape=(1000,))
        >>> round(float(x.mean()), 1)
        0.8
    """
    key = key_arg("categorical", key)
    logits = fnp.asarray(logits) if _concrete(logits) else logits
    if logits.dtype.kind != "f":
        logits = logits.astype(np.float64)
    axis = axis % logits.ndim
    batch_shape = tuple(d for i, d in enumerate(logits.shape) if i != axis)
    shape = batch_shape if shape is None else shape_arg("categorical", shape)
    if shape[len(shape) - len(batch_shape):] != batch_shape:
        raise FunctraceValueError(f"random.categorical: shape {shape} must end with the logits' "
                                  f"batch shape {batch_shape}")
    prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        g_shape = prefix + tuple(logits.shape)
        g = gumbel(key, g_shape, logits.dtype) + fnp.reshape(logits, (1,) * len(prefix) +
                                                             tuple(logits.shape))
        return fnp.argmax(g, axis=len(prefix) + axis)
    k = math.prod(prefix)
    if k > logits.shape[axis]:
        raise FunctraceValueError(f"random.categorical: {k} samples without replacement from "
                                  f"{logits.shape[axis]} categories")
    g = fnp.moveaxis(logits + gumbel(key, tuple(logits.shape), logits.dtype), axis, -1)
    top = fnp.argsort(-g, axis=-1, stable=True)[..., :k]          # lax.top_k's order
    return fnp.reshape(fnp.moveaxis(top, -1, 0), shape)


def _convert_clip(v, dt):
    """Integer ``v`` in dtype ``dt``, clipped to its range (JAX's _convert_and_clip_integer)."""
    vi, di = np.iinfo(v.dtype), np.iinfo(dt)
    lo, hi = max(vi.min, di.min), min(vi.max, di.max)
    return fnp.clip(v, v.dtype.type(lo), v.dtype.type(hi)).astype(dt)


def randint(key, shape, minval, maxval, dtype=int):
    """Uniform integers in [minval, maxval), JAX's algorithm bit for bit: two draws of the
    dtype's width combined modulo the span (slightly biased when the span is not a power of
    two; 8- and 16-bit dtypes sample in 32 bits).

    Args:
        key: a key.
        shape: the result's shape.
        minval, maxval: integer bounds, broadcastable to ``shape`` (``maxval <= minval`` gives
            ``minval``).
        dtype: an integer dtype (default int64).

    Example:
        >>> import functrace.random as random
        >>> random.randint(random.key(0), (5,), 0, 10)
        array([5, 1, 5, 7, 3])
    """
    key = key_arg("randint", key)
    shape = shape_arg("randint", shape)
    dt = np.dtype(dtype)
    if dt.kind not in "iu":
        raise FunctraceValueError(f"random.randint: dtype must be an integer dtype, got {dt}")
    minval = fnp.asarray(minval) if _concrete(minval) else minval
    maxval = fnp.asarray(maxval) if _concrete(maxval) else maxval
    if dt.itemsize < 4:            # sample in 32 bits to avoid biased results
        info = np.iinfo(dt)
        minval = fnp.clip(minval.astype(np.int32), int(info.min), int(info.max))
        maxval = fnp.clip(maxval.astype(np.int32), int(info.min), int(info.max) + 1)
        work = np.dtype(np.int32)
    else:
        work = dt
    if minval.dtype.kind not in "iu":
        minval = minval.astype(np.int64)
    if maxval.dtype.kind not in "iu":
        maxval = maxval.astype(np.int64)
    check_param_shape("randint", shape, minval, maxval)
    return _eager.call(_randint, (shape, work, dt), (key, minval, maxval), math.prod(shape))


def _randint(shape, dt, out_dt, key, minval, maxval):
    top = _convert_clip(np.array(np.iinfo(dt).max, dt), maxval.dtype)
    maxval_out_of_range = maxval > top
    minval, maxval = _convert_clip(minval, dt), _convert_clip(maxval, dt)
    nbits = 8 * dt.itemsize
    udt = np.dtype(f"uint{nbits}")
    k1, k2 = split(key)
    higher, lower = random_bits(k1, nbits, shape), random_bits(k2, nbits, shape)
    span = (maxval - minval).astype(udt)
    one = udt.type(1)
    span = fnp.where(maxval <= minval, one, span)
    span = fnp.where(maxval_out_of_range & (maxval > minval), span + one, span)
    multiplier = fnp.remainder(udt.type(2 ** (nbits // 2)), span)
    multiplier = fnp.remainder(multiplier * multiplier, span)
    offset = fnp.remainder(higher, span) * multiplier + fnp.remainder(lower, span)
    offset = fnp.remainder(offset, span)
    out = minval + offset.astype(dt)
    return out if dt == out_dt else out.astype(out_dt)


def _shuffle(key, x, axis: int):
    """JAX's shuffle: a few stable sorts of ``x`` by fresh 32-bit keys along ``axis``."""
    n = math.prod(np.shape(x))
    rounds = int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        key, sub = split(key)
        order = fnp.argsort(random_bits(sub, 32, tuple(np.shape(x))), axis=axis, stable=True)
        x = fnp.take_along_axis(x, order, axis=axis)
    return x


def permutation(key, x, axis: int = 0, independent: bool = False):
    """A random permutation of ``range(x)`` (an integer) or of ``x`` along ``axis`` (JAX's
    sort-based shuffle, bit for bit: the same keys, bits and stable sorts).

    Args:
        key: a key.
        x: an integer n (permute ``arange(n)``) or an array.
        axis: the axis to permute.
        independent: permute each slice along ``axis`` independently.

    Example:
        >>> import functrace.random as random
        >>> random.permutation(random.key(0), 5)
        array([0, 1, 4, 3, 2])
    """
    key = key_arg("permutation", key)
    if not np.ndim(x):
        if isinstance(x, Tracer) or np.asarray(x).dtype.kind not in "iu":
            raise FunctraceTypeError("random.permutation: x must be a concrete integer or an "
                                     "array of at least one dimension")
        return _shuffle(key, np.arange(int(x)), 0)
    x = fnp.asarray(x) if _concrete(x) else x
    axis = axis % x.ndim
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    ind = _shuffle(key, np.arange(x.shape[axis]), 0)
    return fnp.take(x, ind, axis=axis)


def choice(key, a, shape=(), replace: bool = True, p=None, axis: int = 0):
    """A random sample of ``a`` (an array, along ``axis``) or of ``arange(a)`` (an integer).

    Args:
        key: a key.
        a: an integer n or an array.
        shape: the sample's shape.
        replace: with replacement (default) or without (``prod(shape) <= n``).
        p: probabilities of the n entries (default: uniform).
        axis: the axis of ``a`` to sample along.

    Example:
        >>> import numpy as np, functrace.random as random
        >>> random.choice(random.key(0), 10, (3,), replace=False).shape
        (3,)
    """
    key = key_arg("choice", key)
    shape = shape_arg("choice", shape)
    arr = fnp.asarray(a) if _concrete(a) else a
    if arr.ndim == 0:
        if isinstance(a, Tracer):
            raise FunctraceTypeError("random.choice: an integer a must be concrete")
        n = int(a)
    else:
        axis = axis % arr.ndim
        n = arr.shape[axis]
    draws = math.prod(shape)
    if draws == 0:
        return fnp.zeros(shape, dtype=arr.dtype)
    if n <= 0:
        raise FunctraceValueError("random.choice: a must be greater than 0 unless no samples "
                                  "are taken")
    if not replace and draws > n:
        raise FunctraceValueError(f"random.choice: cannot take a larger sample ({draws}) than "
                                  f"the population ({n}) when replace=False")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n)
            result = ind if arr.ndim == 0 else fnp.take(arr, ind, axis=axis)
        else:
            perm = permutation(key, n if arr.ndim == 0 else arr, axis)
            result = fnp.take(perm, np.arange(draws), axis=0 if arr.ndim == 0 else axis)
    else:
        p = fnp.asarray(p) if _concrete(p) else p
        if p.dtype.kind != "f":
            p = p.astype(np.float64)
        if tuple(p.shape) != (n,):
            raise FunctraceValueError(f"random.choice: p must have shape ({n},), got "
                                      f"{tuple(p.shape)}")
        if replace:
            cdf = fnp.cumsum(p)
            r = cdf[-1] * (1 - uniform_draw(key, shape, p.dtype, 0.0, 1.0))
            ind = fnp.searchsorted(cdf, r).astype(np.int64)
        else:
            g = gumbel(key, (n,), p.dtype) + fnp.log(p)
            ind = fnp.argsort(-g, stable=True)[:draws]
        result = ind if arr.ndim == 0 else fnp.take(arr, ind, axis=axis)
    if arr.ndim == 0:
        return fnp.reshape(result, shape)
    return fnp.reshape(result, tuple(arr.shape[:axis]) + shape + tuple(arr.shape[axis + 1:]))


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method: str = "cholesky"):
    """Multivariate normal samples ``mean + factor @ z``, ``factor @ factor.T = cov``
    (``method``: ``"cholesky"``, ``"eigh"`` or ``"svd"``), ``z`` standard normal.

    Args:
        key: a key.
        mean: mean vectors, shape (..., n).
        cov: covariance matrices, shape (..., n, n).
        shape: the batch shape of the result (default: ``mean`` and ``cov`` batch shapes
            broadcast); the result has shape ``shape + (n,)``.
        dtype: float32 or float64 (default: the parameters' float dtype).
        method: how to factor ``cov``.

    Example:
        >>> import numpy as np, functrace.random as random
        >>> x = random.multivariate_normal(random.key(0), np.zeros(2), np.eye(2), (5,))
        >>> x.shape
        (5, 2)
    """
    key = key_arg("multivariate_normal", key)
    mean = fnp.asarray(mean) if _concrete(mean) else mean
    cov = fnp.asarray(cov) if _concrete(cov) else cov
    if dtype is None:
        dtype = np.result_type(mean.dtype, cov.dtype, np.float16)
        dtype = np.float32 if dtype == np.float32 else np.float64
    dt = float_dtype("multivariate_normal", dtype)
    mean, cov = mean.astype(dt), cov.astype(dt)
    if mean.ndim < 1 or cov.ndim < 2:
        raise FunctraceValueError("random.multivariate_normal: mean needs ndim >= 1 and cov "
                                  "ndim >= 2")
    n = mean.shape[-1]
    if tuple(cov.shape[-2:]) != (n, n):
        raise FunctraceValueError(f"random.multivariate_normal: cov.shape must be (..., {n}, "
                                  f"{n}), got {tuple(cov.shape)}")
    batch = np.broadcast_shapes(tuple(mean.shape[:-1]), tuple(cov.shape[:-2]))
    shape = batch if shape is None else shape_arg("multivariate_normal", shape)
    check_param_shape("multivariate_normal", shape, np.empty(batch))
    if method == "svd":
        u, s, _ = fnp.linalg.svd(cov)
        factor = u * fnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = fnp.linalg.eigh(cov)
        factor = v * fnp.sqrt(w[..., None, :])
    elif method == "cholesky":
        factor = fnp.linalg.cholesky(cov)
    else:
        raise FunctraceValueError(f"random.multivariate_normal: method must be 'cholesky', "
                                  f"'eigh' or 'svd', got {method!r}")
    z = normal(key, shape + (n,), dt)
    return mean + fnp.einsum("...ij,...j->...i", factor, z)


# --------------------------------------------------------------------------------------------
# gamma and its relatives, Poisson (rejection samplers: ops.random_rejection)
# --------------------------------------------------------------------------------------------

def _gamma(name, key, a, shape, dtype, log_space):
    key = key_arg(name, key)
    dt = float_dtype(name, dtype)
    a = as_dtype(a, dt)
    shape = tuple(np.shape(a)) if shape is None else shape_arg(name, shape)
    check_param_shape(name, shape, a)
    return ops.random_gamma(key, broadcast_full(a, shape), log_space=log_space)


def gamma(key, a, shape=None, dtype=float):
    """Gamma(a, 1) samples (Marsaglia and Tsang's rejection method, JAX's algorithm and key
    use; ``ops.random_rejection``). Differentiable in ``a`` (first order) by JAX's implicit
    reparameterisation: the sample moves with ``a`` at a fixed value of its CDF, so
    ``loggamma``, ``beta``, ``dirichlet`` and ``t`` differentiate in their parameters too.

    Args:
        key: a key.
        a: shape parameters (> 0), broadcastable to ``shape``.
        shape: the result's shape (default: ``a``'s).
        dtype: float32 or float64 (default float64).

    Example:
        >>> import functrace.random as random
        >>> x = random.gamma(random.key(0), 3.0, (20000,))
        >>> round(float(x.mean()), 1)
        3.0
    """
    return _gamma("gamma", key, a, shape, dtype, False)


def loggamma(key, a, shape=None, dtype=float):
    """log of Gamma(a, 1) samples, accurate for small ``a`` where the samples underflow.

    Example:
        >>> import functrace.random as random
        >>> bool(random.loggamma(random.key(0), 1e-3, (4,)).min() < -100)
        True
    """
    return _gamma("loggamma", key, a, shape, dtype, True)


def beta(key, a, b, shape=None, dtype=float):
    """Beta(a, b) samples: ``Ga / (Ga + Gb)`` of two gamma draws (computed from their logs,
    as JAX).

    Example:
        >>> import functrace.random as random
        >>> x = random.beta(random.key(0), 2.0, 6.0, (20000,))
        >>> round(float(x.mean()), 2)
        0.25
    """
    key = key_arg("beta", key)
    dt = float_dtype("beta", dtype)
    a, b = as_dtype(a, dt), as_dtype(b, dt)
    if shape is None:
        shape = np.broadcast_shapes(tuple(np.shape(a)), tuple(np.shape(b)))
    shape = shape_arg("beta", shape)
    check_param_shape("beta", shape, a, b)
    key_a, key_b = split(key)
    log_a = loggamma(key_a, broadcast_full(a, shape), shape, dt)
    log_b = loggamma(key_b, broadcast_full(b, shape), shape, dt)
    log_max = fnp.maximum(log_a, log_b)
    ga, gb = fnp.exp(log_a - log_max), fnp.exp(log_b - log_max)
    return ga / (ga + gb)


def dirichlet(key, alpha, shape=None, dtype=float):
    """Dirichlet(alpha) samples along the last axis: ``softmax`` of log-gamma draws.

    Args:
        key: a key.
        alpha: concentrations, shape (..., k).
        shape: the batch shape (default: ``alpha.shape[:-1]``); the result has shape
            ``shape + (k,)``.
        dtype: float32 or float64.

    Example:
        >>> import numpy as np, functrace.random as random
        >>> x = random.dirichlet(random.key(0), np.ones(3), (4,))
        >>> np.allclose(x.sum(-1), 1.0)
        True
    """
    key = key_arg("dirichlet", key)
    dt = float_dtype("dirichlet", dtype)
    alpha = as_dtype(alpha, dt)
    if alpha.ndim < 1:
        raise FunctraceValueError("random.dirichlet: alpha needs ndim >= 1")
    batch = tuple(alpha.shape[:-1])
    shape = batch if shape is None else shape_arg("dirichlet", shape)
    check_param_shape("dirichlet", shape, np.empty(batch))
    full = shape + tuple(alpha.shape[-1:])
    return nn.softmax(loggamma(key, broadcast_full(alpha, full), full, dt), axis=-1)


def t(key, df, shape=None, dtype=float):
    """Student's t samples with ``df`` degrees of freedom: ``n * sqrt(df / 2 / g)``, ``n``
    standard normal, ``g`` Gamma(df / 2).

    Example:
        >>> import functrace.random as random
        >>> random.t(random.key(0), 5.0, (3,)).shape
        (3,)
    """
    key = key_arg("t", key)
    dt = float_dtype("t", dtype)
    df = as_dtype(df, dt)
    shape = tuple(np.shape(df)) if shape is None else shape_arg("t", shape)
    check_param_shape("t", shape, df)
    key_n, key_g = split(key)
    n = normal(key_n, shape, dt)
    half_df = df / dt.type(2)
    g = gamma(key_g, half_df, shape, dt)
    return n * fnp.sqrt(half_df / g)


def poisson(key, lam, shape=None, dtype=int):
    """Poisson(lam) counts (Knuth's method for lam < 10, Hormann's transformed rejection
    above; JAX's algorithm, with ``lam`` in float32 as JAX has it; ``ops.random_rejection``).

    Args:
        key: a key.
        lam: rates (>= 0), broadcastable to ``shape``.
        shape: the result's shape (default: ``lam``'s).
        dtype: an integer dtype (default int64).

    Example:
        >>> import functrace.random as random
        >>> x = random.poisson(random.key(0), 4.0, (20000,))
        >>> round(float(x.mean()), 1)
        4.0
    """
    key = key_arg("poisson", key)
    dt = np.dtype(dtype)
    if dt.kind not in "iu":
        raise FunctraceValueError(f"random.poisson: dtype must be an integer dtype, got {dt}")
    lam = (fnp.asarray(lam) if _concrete(lam) else lam).astype(np.float32)   # as JAX
    shape = tuple(np.shape(lam)) if shape is None else shape_arg("poisson", shape)
    check_param_shape("poisson", shape, lam)
    return ops.random_poisson(key, broadcast_full(lam, shape), dtype=dt)
