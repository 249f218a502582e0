"""Order statistics, NaN-ignoring reductions and covariances of functrace.numpy: quantile,
percentile, nanquantile, nanmedian, nanvar, nanstd, nanprod, nancumsum, nanargmax, cov,
corrcoef.

Each function runs numpy eagerly outside a transform. Inside one it is a composition of ops and
other ``fnp`` functions, so its rules come from theirs. Quantiles sort (the ``sort`` op puts
NaN last, as numpy does) and interpolate between neighbours with numpy's ``_lerp`` formula; the
gradient flows to the two neighbours (and to ``q``). The NaN-ignoring versions count the valid
values of each slice at run time, so one traced graph serves every pattern of NaNs.
"""

from __future__ import annotations

import numpy as np

from .. import caches, ops
from ..tracing import Tracer, current_trace
from ._core import asarray_any, cast, normalize_axes, result_dtype_like_numpy

__all__ = ["quantile", "percentile", "nanquantile", "nanpercentile", "nanmedian", "nanvar",
           "nanstd", "nanprod", "nancumsum", "nancumprod", "nanargmax", "nanargmin", "cov",
           "corrcoef"]

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _given(**kw):
    return {k: v for k, v in kw.items() if v is not None}


@caches.lru_cached("numpy.quantile_dtypes", maxsize=256)
def _quantile_dtype(npfn, a_dtype, q_key):
    q = 0.5 if q_key is float else np.full((1,), 0.5, q_key)
    return np.asarray(npfn(np.ones((2,), a_dtype), q)).dtype


def _q_key(q):
    if isinstance(q, float | int) and not isinstance(q, bool | np.generic):
        return float
    return np.dtype(q.dtype) if isinstance(q, Tracer) else np.asarray(q).dtype


def _to_last(x, axis):
    """``x`` with the reduced axes merged into one last axis, and the kept shape."""
    axes = normalize_axes(axis, x.ndim)
    keep = [i for i in range(x.ndim) if i not in axes]
    xt = ops.transpose(x, (*keep, *axes)) if list(axes) != list(range(x.ndim))[-len(axes):] \
        else x
    kept = tuple(x.shape[i] for i in keep)
    n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    return ops.reshape(xt, (*kept, n)), kept, axes


def _quantile_traced(name, a, q, axis, method, keepdims, nan_aware, scale=None):
    if method not in _METHODS:
        raise NotImplementedError(f"{name}(method={method!r}) is not traceable; traceable "
                                  f"methods: {', '.join(_METHODS)}")
    x = asarray_any(a)
    if x.dtype.kind == "c":
        raise TypeError("a must be an array of real numbers")
    npfn = {"quantile": np.quantile, "percentile": np.percentile,
            "nanquantile": np.nanquantile, "nanpercentile": np.nanpercentile}[name]
    dt = _quantile_dtype(npfn, x.dtype, _q_key(q))
    if scale is not None:   # percentile: numpy divides q by 100 in a's float type
        from ._ufuncs import true_divide
        q = true_divide(q, x.dtype.type(100) if x.dtype.kind == "f" else 100)
    q = cast(asarray_any(q), dt)
    xs, kept, axes = _to_last(cast(x, dt), axis)
    n = xs.shape[-1]
    if n == 0:
        raise IndexError(f"{name} of an empty slice")
    s = ops.sort(xs, xs.ndim - 1)[0]
    qf = ops.reshape(q, (q.size,))
    full = (*kept, q.size)
    qb = ops.broadcast_in_dim(qf, full, (len(kept),))
    if nan_aware:
        ok = ops.logical_not(ops.isnan(xs))
        cnt = ops.reduce_sum(ops.convert_element_type(ok, dt), (xs.ndim - 1,))
        cnt = ops.broadcast_in_dim(cnt, full, tuple(range(len(kept))))
    else:
        cnt = ops.broadcast_to_shape(np.asarray(n, dt), full)
    last = ops.sub(cnt, np.ones((), dt))
    virtual = ops.mul(last, qb)
    if method == "nearest":      # numpy: round half to even
        virtual = ops.round(virtual)
    prev = ops.floor(virtual)
    nxt = ops.add(prev, np.ones((), dt)) if method != "lower" else prev
    if method == "higher":
        prev = nxt = ops.ceil(virtual)
    # numpy's _get_indexes: past the last valid value both neighbours are the last one
    prev = ops.clip(prev, np.zeros((), dt), ops.maximum(last, np.zeros((), dt)))
    nxt = ops.clip(nxt, np.zeros((), dt), ops.maximum(last, np.zeros((), dt)))
    ip, inx = ops.convert_element_type(prev, np.intp), ops.convert_element_type(nxt, np.intp)
    lo = ops.take_along_axis(s, ip, len(kept))
    hi = ops.take_along_axis(s, inx, len(kept))
    if method == "midpoint":
        gamma = ops.select(ops.eq(virtual, ops.floor(virtual)), np.zeros((), dt),
                           np.asarray(0.5, dt))
    else:
        gamma = ops.sub(virtual, ops.stop_gradient(prev)) if method == "linear" else \
            ops.broadcast_to_shape(np.zeros((), dt), full)
    gamma = ops.select(ops.ge(virtual, last), np.zeros((), dt), gamma)
    diff = ops.sub(hi, lo)
    r = ops.select(ops.ge(gamma, np.asarray(0.5, dt)),
                   ops.sub(hi, ops.mul(diff, ops.sub(np.ones((), dt), gamma))),
                   ops.add(lo, ops.mul(diff, gamma)))
    nan = np.asarray(np.nan, dt)
    if nan_aware:
        r = ops.select(ops.eq(cnt, np.zeros((), dt)), nan, r)
    elif dt.kind == "f":          # a NaN anywhere in the slice: NaN, as numpy
        has_nan = ops.isnan(ops.reshape(ops.slice_op(s, (*(0,) * len(kept), n - 1), s.shape),
                                        kept))
        r = ops.select(ops.broadcast_in_dim(has_nan, full, tuple(range(len(kept)))), nan, r)
    # numpy's layout: q's shape first, then the kept axes (ones where reduced, with keepdims)
    r = ops.transpose(r, (len(kept), *range(len(kept))))
    if keepdims:
        kept = tuple(1 if i in axes else m for i, m in enumerate(x.shape))
    return ops.reshape(r, (*np.shape(q), *kept))


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    """numpy.quantile (traceable methods: linear, lower, higher, nearest, midpoint). The
    gradient flows to the two neighbouring order statistics, and to ``q``.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.quantile(np.array([1.0, 2.0, 4.0]), 0.75))
        3.0
    """
    if current_trace() is None:
        return np.quantile(a, q, axis=axis, out=out, overwrite_input=overwrite_input,
                           method=method, keepdims=keepdims, **_given(weights=weights))
    _traced_only_plain("quantile", out, weights)
    return _quantile_traced("quantile", a, q, axis, method, keepdims, False)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    """numpy.percentile (``q`` in percent; see ``quantile``).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.percentile(np.array([1.0, 2.0, 4.0]), 50))
        2.0
    """
    if current_trace() is None:
        return np.percentile(a, q, axis=axis, out=out, overwrite_input=overwrite_input,
                             method=method, keepdims=keepdims, **_given(weights=weights))
    _traced_only_plain("percentile", out, weights)
    return _quantile_traced("percentile", a, q, axis, method, keepdims, False, scale=100)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    """numpy.nanquantile: NaNs ignored (an all-NaN slice gives NaN); see ``quantile``.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.nanquantile(np.array([1.0, np.nan, 3.0]), 0.5))
        2.0
    """
    if current_trace() is None:
        return np.nanquantile(a, q, axis=axis, out=out, overwrite_input=overwrite_input,
                              method=method, keepdims=keepdims, **_given(weights=weights))
    _traced_only_plain("nanquantile", out, weights)
    return _quantile_traced("nanquantile", a, q, axis, method, keepdims, True)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    """numpy.nanpercentile: NaNs ignored; see ``quantile``.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.nanpercentile(np.array([1.0, np.nan, 3.0]), 50))
        2.0
    """
    if current_trace() is None:
        return np.nanpercentile(a, q, axis=axis, out=out, overwrite_input=overwrite_input,
                                method=method, keepdims=keepdims, **_given(weights=weights))
    _traced_only_plain("nanpercentile", out, weights)
    return _quantile_traced("nanpercentile", a, q, axis, method, keepdims, True, scale=100)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """numpy.nanmedian: the median of the non-NaN values (an all-NaN slice gives NaN).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.nanmedian(np.array([3.0, np.nan, 1.0, 2.0])))
        2.0
    """
    if current_trace() is None:
        return np.nanmedian(a, axis=axis, out=out, overwrite_input=overwrite_input,
                            keepdims=keepdims)
    _traced_only_plain("nanmedian", out, None)
    x = asarray_any(a)
    if x.dtype.kind not in "fc":
        from ._reductions import median
        return median(x, axis=axis, keepdims=keepdims)
    return _quantile_traced("nanquantile", x, 0.5, axis, "linear", keepdims, True)


def _traced_only_plain(name, out, weights):
    if out is not None:
        raise TypeError(f"{name}: out= is not supported on traced arrays (they are immutable)")
    if weights is not None:
        raise NotImplementedError(f"{name}(weights=...) is not traceable yet")


def _nan_moment(name, npfn, a, axis, dtype, out, ddof, keepdims, where, mean, correction):
    if current_trace() is None:
        return npfn(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims,
                    **_given(where=where, mean=mean, correction=correction))
    if where is not None or mean is not None or out is not None:
        raise NotImplementedError(f"{name}(where=, mean=, out=) on traced arrays")
    ddof = correction if correction is not None else ddof
    x = asarray_any(a)
    if x.dtype.kind not in "fc":
        from . import _reductions
        return getattr(_reductions, name[3:])(x, axis=axis, dtype=dtype, ddof=ddof,
                                              keepdims=keepdims)
    dt = result_dtype_like_numpy(npfn, x.dtype, dtype=dtype)
    wdt = np.result_type(x.dtype, dt) if x.dtype.kind == "c" else dt
    xs = cast(x, wdt)
    axes = normalize_axes(axis, x.ndim)
    rest = tuple(i for i in range(x.ndim) if i not in axes)
    ok = ops.logical_not(ops.isnan(xs))
    zero = np.zeros((), wdt)
    rdt = np.dtype(dt)
    cnt = ops.reduce_sum(ops.convert_element_type(ok, rdt), axes)
    m = ops.div(ops.reduce_sum(ops.select(ok, xs, zero), axes), cast(cnt, wdt))
    c = ops.select(ok, ops.sub(xs, ops.broadcast_in_dim(m, x.shape, rest)), zero)
    dof = ops.sub(cnt, np.asarray(ddof, rdt))
    bad = ops.le(dof, np.zeros((), rdt))
    if name == "nanvar":
        sq = ops.real(ops.mul(c, ops.conj(c))) if wdt.kind == "c" else ops.mul(c, c)
        y = ops.div(ops.reduce_sum(sq, axes), dof)
    else:    # a 2-norm: the std of a constant has a zero gradient (docs/numerics.md)
        y = ops.div(ops.l2norm(c, axes), ops.sqrt(ops.maximum(dof, np.zeros((), rdt))))
    y = ops.select(bad, np.asarray(np.nan, rdt), y)
    if keepdims:
        y = ops.reshape(y, tuple(1 if i in axes else n for i, n in enumerate(x.shape)))
    return y


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    """numpy.nanvar: the variance of the non-NaN values.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.nanvar(np.array([1.0, np.nan, 3.0])))
        1.0
    """
    return _nan_moment("nanvar", np.nanvar, a, axis, dtype, out, ddof, keepdims, where, mean,
                       correction)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    """numpy.nanstd: the standard deviation of the non-NaN values (a 2-norm, so a constant
    slice has a zero gradient, as ``std``).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.nanstd(np.array([1.0, np.nan, 3.0])))
        1.0
    """
    return _nan_moment("nanstd", np.nanstd, a, axis, dtype, out, ddof, keepdims, where, mean,
                       correction)


def _fill_nan(x, fill):
    return ops.select(ops.isnan(x), np.asarray(fill, x.dtype), x) if x.dtype.kind in "fc" \
        else x


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """numpy.nanprod: NaNs count as one.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.nanprod(np.array([2.0, np.nan, 3.0])))
        6.0
    """
    if current_trace() is None:
        return np.nanprod(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                          **_given(initial=initial, where=where))
    from ._reductions import prod
    return prod(_fill_nan(asarray_any(a), 1), axis=axis, dtype=dtype, out=out,
                keepdims=keepdims, initial=initial, where=where)


def nancumsum(a, axis=None, dtype=None, out=None):
    """numpy.nancumsum: NaNs count as zero.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.nancumsum(np.array([1.0, np.nan, 3.0]))
        array([1., 1., 4.])
    """
    if current_trace() is None:
        return np.nancumsum(a, axis=axis, dtype=dtype, out=out)
    from ._reductions import cumsum
    return cumsum(_fill_nan(asarray_any(a), 0), axis=axis, dtype=dtype, out=out)


def nancumprod(a, axis=None, dtype=None, out=None):
    """numpy.nancumprod: NaNs count as one.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.nancumprod(np.array([2.0, np.nan, 3.0]))
        array([2., 2., 6.])
    """
    if current_trace() is None:
        return np.nancumprod(a, axis=axis, dtype=dtype, out=out)
    from ._reductions import cumprod
    return cumprod(_fill_nan(asarray_any(a), 1), axis=axis, dtype=dtype, out=out)


def _nanarg(name, npfn, fill):
    def f(a, axis=None, out=None, *, keepdims=False):
        if current_trace() is None:
            return npfn(a, axis=axis, out=out, keepdims=keepdims)
        from . import _reductions
        return getattr(_reductions, name[3:])(_fill_nan(asarray_any(a), fill), axis=axis,
                                              out=out, keepdims=keepdims)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"numpy.{name}: NaNs ignored (an integer index, no gradient). numpy raises "
                 "for an all-NaN slice; a traced call cannot, and gives the index of the "
                 "first NaN.\n\nExample:\n    >>> import functrace.numpy as fnp, numpy as np\n"
                 f"    >>> int(fnp.{name}(np.array([1.0, np.nan, 3.0])))\n"
                 f"    {2 if name == 'nanargmax' else 0}\n")
    return f


nanargmax = _nanarg("nanargmax", np.nanargmax, -np.inf)
nanargmin = _nanarg("nanargmin", np.nanargmin, np.inf)


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """numpy.cov (differentiable in the data and the weights; float64 at least, as numpy).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.cov(np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
        array([[ 1., -1.],
               [-1.,  1.]])
    """
    if current_trace() is None:
        return np.cov(m, y, rowvar=rowvar, bias=bias, ddof=ddof, fweights=fweights,
                      aweights=aweights, dtype=dtype)
    from ._products import dot
    from ._reductions import average
    from ._reductions import sum as fsum
    from ._ufuncs import conjugate, divide, multiply, subtract, true_divide
    x = asarray_any(m)
    if x.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    if dtype is None:
        dtype = np.result_type(x.dtype, np.float64) if y is None else \
            np.result_type(x.dtype, asarray_any(y).dtype, np.float64)
    X = _ndmin2(cast(x, dtype))
    if not rowvar and X.shape[0] != 1:
        X = ops.transpose(X, (1, 0))
    if y is not None:
        yy = _ndmin2(cast(asarray_any(y), dtype))
        if not rowvar and yy.shape[0] != 1:
            yy = ops.transpose(yy, (1, 0))
        X = ops.concatenate([X, yy], 0)
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    if fweights is not None:
        w = asarray_any(fweights)
    if aweights is not None:
        aw = asarray_any(aweights)
        w = aw if w is None else multiply(w, aw)
    avg, w_sum = average(X, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        fact = X.shape[1] - ddof
    elif ddof == 0:
        fact = w_sum
    elif aweights is None:
        fact = subtract(w_sum, ddof)
    else:
        fact = subtract(w_sum, divide(multiply(ddof, fsum(multiply(w, aweights))), w_sum))
    if isinstance(fact, int) and fact <= 0:
        fact = 0.0
    X = subtract(X, ops.reshape(avg, (avg.shape[0], 1)))
    X_T = ops.transpose(X, (1, 0)) if w is None else ops.transpose(multiply(X, w), (1, 0))
    c = dot(X, conjugate(X_T))
    c = multiply(c, true_divide(1, fact))
    return ops.reshape(c, tuple(n for n in c.shape if n != 1))


def _ndmin2(x):
    return ops.reshape(x, (1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """numpy.corrcoef (Pearson coefficients, clipped to [-1, 1] as numpy).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.corrcoef(np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 5.0]))
        array([[1., 1.],
               [1., 1.]])
    """
    if current_trace() is None:
        return np.corrcoef(x, y, rowvar=rowvar, dtype=dtype)
    from ._ufuncs import clip, divide, real, sqrt
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return divide(c, c)
    d = ops.reshape(ops.gather(c, [np.arange(c.shape[0])] * 2, (("arr", 0), ("arr", 1))),
                    (c.shape[0],))
    sd = sqrt(real(d))
    c = divide(c, ops.reshape(sd, (sd.shape[0], 1)))
    c = divide(c, ops.reshape(sd, (1, sd.shape[0])))
    if c.dtype.kind == "c":
        re = clip(real(c), -1, 1)
        return ops.add(ops.convert_element_type(re, c.dtype),
                       ops.mul(ops.convert_element_type(ops.imag(c), c.dtype),
                               np.asarray(1j, c.dtype)))
    return clip(c, -1, 1)

