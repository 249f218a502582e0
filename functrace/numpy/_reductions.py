"""Reductions and scans of functrace.numpy: sum, mean, prod, max, min, var, std, argmax, ...

Each function runs numpy eagerly outside a transform; inside one it resolves numpy's result
dtype (asked of numpy on a dummy), casts, reduces with the op, and restores ``keepdims`` with a
reshape. std uses the l2norm op so that the gradient of the std of a constant is 0.
"""

from __future__ import annotations

import builtins

import numpy as np

from .. import ops
from ..tracing import current_trace
from ._core import asarray_any, cast, normalize_axes, normalize_axis, result_dtype_like_numpy

__all__ = ["sum", "mean", "prod", "max", "min", "amax", "amin", "var", "std", "argmax",
           "argmin", "cumsum", "cumprod", "all", "any", "average", "ptp", "count_nonzero",
           "nansum", "nanmean", "nanmax", "nanmin", "median", "logsumexp"]

def _keep(y, x_shape, axes, keepdims):
    if not keepdims:
        return y
    shape = tuple(1 if i in axes else n for i, n in enumerate(x_shape))
    return ops.reshape(y, shape)


def _count(shape, axes):
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """numpy.sum.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.sum(np.arange(6.0).reshape(2, 3), axis=0)
        array([3., 5., 7.])
    """
    if current_trace() is None:
        return np.sum(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                      **_given(initial=initial, where=where))
    _no_out(out)
    x = asarray_any(a)
    if where is not None:
        x = _where_fill(x, where, 0)
    dt = result_dtype_like_numpy(np.sum, x.dtype, dtype=dtype)
    axes = normalize_axes(axis, x.ndim)
    y = _reduce_sum(cast(x, dt), axes)
    if initial not in (0, None):
        y = ops.add(y, np.asarray(initial, dt))
    return _keep(y, x.shape, axes, keepdims)


def _given(**kw):
    """The keyword arguments a caller gave (not None): forwarded to numpy only then, so that
    array libraries dispatched to (cupy's ``sum`` has no ``initial``) see numpy's defaults."""
    return {k: v for k, v in kw.items() if v is not None}


def _reduce_sum(x, axes):
    """``reduce_sum`` with numpy's result when no axis is reduced: numpy adds the values to
    its identity, so a float sum of one ``-0.0`` is ``+0.0``."""
    if not axes and np.dtype(x.dtype).kind in "fc":
        return ops.add(x, np.zeros((), x.dtype))
    return ops.reduce_sum(x, axes)


def _no_out(out):
    if out is not None:
        raise TypeError("out= is not supported on traced arrays (they are immutable)")


def _where_fill(x, where, fill):
    from ._ufuncs import where as fwhere
    return fwhere(where, x, np.asarray(fill, x.dtype))


def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """numpy.mean.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.mean(np.array([1.0, 2.0, 6.0])))
        3.0
    """
    if current_trace() is None:
        kw = {} if where is None else {"where": where}
        return np.mean(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)
    _no_out(out)
    x = asarray_any(a)
    dt = result_dtype_like_numpy(np.mean, x.dtype, dtype=dtype)
    axes = normalize_axes(axis, x.ndim)
    xs = cast(x, dt)
    if where is not None:
        from ._ufuncs import where as fwhere
        w = cast(asarray_any(where), bool)
        s = sum(fwhere(w, xs, np.zeros((), dt)), axis=axes)
        n = sum(cast(w, dt) if w.shape == x.shape else
                ops.broadcast_to_shape(cast(w, dt), x.shape), axis=axes)
        return _keep(ops.div(s, n), x.shape, axes, keepdims)
    y = _reduce_sum(xs, axes)
    if dt.kind not in "fc":   # numpy: integer sum, true division, cast back (truncation)
        y = cast(ops.div(cast(y, np.float64), np.asarray(_count(x.shape, axes), np.float64)),
                 dt)
        return _keep(y, x.shape, axes, keepdims)
    y = ops.div(y, np.asarray(_count(x.shape, axes), dt))
    return _keep(y, x.shape, axes, keepdims)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """numpy.prod (its gradient is exact with zeros in the input).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.prod(np.array([2.0, 3.0])))
        6.0
    """
    if current_trace() is None:
        return np.prod(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                       **_given(initial=initial, where=where))
    _no_out(out)
    x = asarray_any(a)
    if where is not None:
        x = _where_fill(x, where, 1)
    dt = result_dtype_like_numpy(np.prod, x.dtype, dtype=dtype)
    axes = normalize_axes(axis, x.ndim)
    y = ops.reduce_prod(cast(x, dt), axes)
    if initial not in (1, None):
        y = ops.mul(y, np.asarray(initial, dt))
    return _keep(y, x.shape, axes, keepdims)


def _minmax(name, npfn, prim):
    def f(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        if current_trace() is None:
            kw = {}
            if initial is not None:
                kw["initial"] = initial
            if where is not None:
                kw["where"] = where
            return npfn(a, axis=axis, out=out, keepdims=keepdims, **kw)
        _no_out(out)
        x = asarray_any(a)
        axes = normalize_axes(axis, x.ndim)
        if builtins.any(x.shape[i] == 0 for i in axes) and initial is None:
            raise ValueError(f"zero-size array to reduction operation {name} which has no "
                             "identity")
        if where is not None:
            if initial is None:
                raise ValueError(f"reduction operation '{name}' does not have an identity, so "
                                 "to use a where mask one has to specify 'initial'")
            x = _where_fill(x, where, initial)
        if initial is not None and builtins.any(x.shape[i] == 0 for i in axes):
            # an empty reduction gives ``initial``: pad one element of it along a reduced axis
            cfg = [(0, 0, 0)] * x.ndim
            cfg[axes[0]] = (0, 1, 0)
            x = ops.pad(x, np.asarray(initial, x.dtype), tuple(cfg))
        y = prim(x, axes)
        if initial is not None:
            y = (ops.maximum if name == "max" else ops.minimum)(y, np.asarray(initial, x.dtype))
        return _keep(y, x.shape, axes, keepdims)
    f.__name__ = name
    f.__doc__ = (f"numpy.{name}; ties share the gradient evenly (docs/numerics.md).\n\n"
                 f"Example:\n    >>> import functrace.numpy as fnp, numpy as np\n"
                 f"    >>> float(fnp.{name}(np.array([1.0, 3.0, 2.0])))\n"
                 f"    {3.0 if name == 'max' else 1.0}\n")
    return f


max = _minmax("max", np.max, ops.reduce_max)
min = _minmax("min", np.min, ops.reduce_min)
amax, amin = max, min


def _moment(npfn, a, axis, dtype, out, ddof, keepdims, where, mean, correction, finish):
    """Shared body of var and std: numpy eagerly; traced, centre the data and ``finish``
    (``finish(centred, axes, n) -> result`` with ``n`` the divisor)."""
    if current_trace() is None:
        kw = {}
        if where is not None:
            kw["where"] = where
        if mean is not None:
            kw["mean"] = mean
        if correction is not None:
            kw["correction"] = correction
        return npfn(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)
    _no_out(out)
    if where is not None or mean is not None:
        raise NotImplementedError(f"{npfn.__name__}(where=, mean=) on traced arrays")
    ddof = correction if correction is not None else ddof
    x = asarray_any(a)
    dt = result_dtype_like_numpy(npfn, x.dtype, dtype=dtype)
    axes = normalize_axes(axis, x.ndim)
    xs = cast(x, _working_dtype(x.dtype, dt))
    centred = ops.sub(xs, ops.broadcast_in_dim(_mean_of(xs, axes), x.shape,
                                               tuple(i for i in range(x.ndim) if i not in axes)))
    y = finish(centred, axes, _count(x.shape, axes) - ddof)
    return _keep(y, x.shape, axes, keepdims)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """numpy.var (the gradient of the variance of a constant is 0).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.var(np.array([1.0, 3.0])))
        1.0
    """
    def finish(centred, axes, n):
        if centred.dtype.kind == "c":
            sq = ops.real(ops.mul(centred, ops.conj(centred)))
        else:
            sq = ops.mul(centred, centred)
        return ops.div(ops.reduce_sum(sq, axes), np.asarray(n, sq.dtype))
    return _moment(np.var, a, axis, dtype, out, ddof, keepdims, where, mean, correction, finish)


def _working_dtype(x_dtype, out_dtype):
    """var/std of complex data is real (``out_dtype``), but the centring is complex."""
    if x_dtype.kind == "c":
        return np.result_type(x_dtype, out_dtype)
    return out_dtype


def _mean_of(xs, axes):
    return ops.div(ops.reduce_sum(xs, axes), np.asarray(_count(xs.shape, axes), xs.dtype))


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """numpy.std; computed as a 2-norm of the centred data, so the std of a constant has a
    zero gradient (not NaN, docs/numerics.md).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.std(np.array([1.0, 3.0])))
        1.0
    """
    def finish(centred, axes, n):
        nrm = ops.l2norm(centred, axes)
        return ops.div(nrm, np.asarray(np.sqrt(n) if n > 0 else 0.0, nrm.dtype))
    return _moment(np.std, a, axis, dtype, out, ddof, keepdims, where, mean, correction, finish)


def _argfn(name, npfn, prim):
    def f(a, axis=None, out=None, *, keepdims=False):
        if current_trace() is None:
            return npfn(a, axis=axis, out=out, keepdims=keepdims)
        _no_out(out)
        x = asarray_any(a)
        if axis is None:
            y = prim(ops.reshape(x, (x.size,)), 0)
            return ops.reshape(y, (1,) * x.ndim) if keepdims else y
        ax = normalize_axis(axis, x.ndim)
        return _keep(prim(x, ax), x.shape, (ax,), keepdims)
    f.__name__ = name
    f.__doc__ = (f"numpy.{name} (not differentiable: an integer index).\n\n"
                 f"Example:\n    >>> import functrace.numpy as fnp, numpy as np\n"
                 f"    >>> int(fnp.{name}(np.array([1.0, 3.0, 2.0])))\n"
                 f"    {1 if name == 'argmax' else 0}\n")
    return f


argmax = _argfn("argmax", np.argmax, ops.argmax)
argmin = _argfn("argmin", np.argmin, ops.argmin)


def _scan(name, npfn, prim):
    def f(a, axis=None, dtype=None, out=None):
        if current_trace() is None:
            return npfn(a, axis=axis, dtype=dtype, out=out)
        _no_out(out)
        x = asarray_any(a)
        dt = result_dtype_like_numpy(npfn, x.dtype, dtype=dtype)
        x = cast(x, dt)
        if axis is None:
            return prim(ops.reshape(x, (x.size,)), 0)
        return prim(x, normalize_axis(axis, x.ndim))
    f.__name__ = name
    f.__doc__ = (f"numpy.{name}.\n\nExample:\n    >>> import functrace.numpy as fnp, numpy as np"
                 f"\n    >>> fnp.{name}(np.array([1.0, 2.0, 3.0]))\n"
                 f"    array([1., {'3' if name == 'cumsum' else '2'}., "
                 "6.])\n")
    return f


cumsum = _scan("cumsum", np.cumsum, ops.cumsum)
cumprod = _scan("cumprod", np.cumprod, ops.cumprod)


def _logical(name, npfn, prim):
    def f(a, axis=None, out=None, keepdims=False, *, where=None):
        if current_trace() is None:
            kw = {} if where is None else {"where": where}
            return npfn(a, axis=axis, out=out, keepdims=keepdims, **kw)
        _no_out(out)
        x = cast(asarray_any(a), bool)
        if where is not None:
            x = _where_fill(x, where, name == "all")
        axes = normalize_axes(axis, x.ndim)
        return _keep(prim(x, axes), x.shape, axes, keepdims)
    f.__name__ = name
    f.__doc__ = (f"numpy.{name} (boolean result, not differentiable).\n\nExample:\n"
                 f"    >>> import functrace.numpy as fnp, numpy as np\n"
                 f"    >>> bool(fnp.{name}(np.array([True, False])))\n"
                 f"    {name == 'any'}\n")
    return f


all = _logical("all", np.all, ops.reduce_and)
any = _logical("any", np.any, ops.reduce_or)


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """numpy.average.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.average(np.array([1.0, 2.0]), weights=np.array([3.0, 1.0])))
        1.25
    """
    if current_trace() is None:
        return np.average(a, axis=axis, weights=weights, returned=returned, keepdims=keepdims)
    if weights is None:
        avg = mean(a, axis=axis, keepdims=keepdims)
        x = asarray_any(a)
        n = _count(x.shape, normalize_axes(axis, x.ndim))
        # numpy returns the sum of weights broadcast to the average's shape
        n = np.broadcast_to(np.asarray(n, avg.dtype), avg.shape).copy()
        return (avg, n) if returned else avg
    from ._ufuncs import multiply
    x, w = asarray_any(a), asarray_any(weights)
    if w.shape != x.shape:
        if axis is None or w.ndim != 1:
            raise TypeError("1D weights expected when shapes of a and weights differ.")
        ax = normalize_axis(axis, x.ndim)
        shape = [1] * x.ndim
        shape[ax] = w.shape[0]
        w = ops.broadcast_to_shape(ops.reshape(w, tuple(shape)) if not isinstance(w, np.ndarray)
                                   else w.reshape(shape), x.shape)
    sw = sum(w, axis=axis, keepdims=keepdims)
    avg = ops.div(*_same(sum(multiply(x, w), axis=axis, keepdims=keepdims), sw))
    return (avg, sw) if returned else avg


def _same(a, b):
    dt = np.result_type(a.dtype, b.dtype)
    return cast(a, dt), cast(b, dt)


def ptp(a, axis=None, out=None, keepdims=False):
    """numpy.ptp (max - min).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.ptp(np.array([1.0, 4.0, 2.0])))
        3.0
    """
    if current_trace() is None:
        return np.ptp(a, axis=axis, out=out, keepdims=keepdims)
    return ops.sub(max(a, axis=axis, keepdims=keepdims), min(a, axis=axis, keepdims=keepdims))


def count_nonzero(a, axis=None, *, keepdims=False):
    """numpy.count_nonzero.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> int(fnp.count_nonzero(np.array([0.0, 1.0, 2.0])))
        2
    """
    if current_trace() is None:
        return np.count_nonzero(a, axis=axis, keepdims=keepdims)
    x = asarray_any(a)
    nz = ops.ne(x, np.zeros((), x.dtype))
    return sum(cast(nz, np.intp), axis=axis, keepdims=keepdims)


def _nan_version(name, npfn, base, fill):
    def f(a, axis=None, *args, keepdims=False, **kw):
        if current_trace() is None:
            return npfn(a, axis, *args, keepdims=keepdims, **kw)
        # numpy's positional order after axis: nansum/nanmean (dtype, out), nanmax (out)
        names = ("dtype", "out") if name in ("nansum", "nanmean") else ("out",)
        if len(args) > len(names):
            raise TypeError(f"{name}() takes at most {len(names) + 2} positional arguments")
        opts = dict(zip(names, args))
        opts.update(kw)
        _no_out(opts.pop("out", None))
        dtype = opts.pop("dtype", None)
        if opts:
            raise NotImplementedError(f"{name}({', '.join(sorted(opts))}=...) on traced arrays")
        extra = {"dtype": dtype} if dtype is not None else {}
        x = asarray_any(a)
        if x.dtype.kind not in "fc":
            return base(x, axis=axis, keepdims=keepdims, **extra)
        if name == "nanmean":
            ok = ops.logical_not(ops.isnan(x))
            dt = result_dtype_like_numpy(np.mean, x.dtype, dtype=dtype)
            s = sum(ops.select(ok, x, np.zeros((), x.dtype)), axis=axis, keepdims=keepdims,
                    dtype=dt)
            n = sum(cast(ok, dt), axis=axis, keepdims=keepdims)
            return ops.div(s, n)
        nan = ops.isnan(x)
        y = base(ops.select(nan, np.asarray(fill, x.dtype), x), axis=axis, keepdims=keepdims,
                 **extra)
        if name in ("nanmax", "nanmin"):   # an all-NaN slice gives NaN, as in numpy
            y = ops.select(all(nan, axis=axis, keepdims=keepdims),
                           np.asarray(np.nan, x.dtype), y)
        return y
    f.__name__ = name
    f.__doc__ = (f"numpy.{name}.\n\nExample:\n    >>> import functrace.numpy as fnp, numpy as np"
                 f"\n    >>> float(fnp.{name}(np.array([1.0, np.nan, 3.0])))\n"
                 f"    {dict(nansum=4.0, nanmean=2.0, nanmax=3.0, nanmin=1.0)[name]}\n")
    return f


nansum = _nan_version("nansum", np.nansum, sum, 0.0)
nanmean = _nan_version("nanmean", np.nanmean, mean, 0.0)
nanmax = _nan_version("nanmax", np.nanmax, max, -np.inf)
nanmin = _nan_version("nanmin", np.nanmin, min, np.inf)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """numpy.median (by sorting; the gradient flows to the middle element(s)).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.median(np.array([3.0, 1.0, 2.0])))
        2.0
    """
    if current_trace() is None:
        return np.median(a, axis=axis, out=out, overwrite_input=overwrite_input,
                         keepdims=keepdims)
    _no_out(out)
    x = asarray_any(a)
    dt = result_dtype_like_numpy(np.median, x.dtype)
    x = cast(x, dt)
    if axis is None:
        xf = ops.reshape(x, (x.size,))
        ax = 0
    else:
        xf, ax = x, normalize_axis(axis, x.ndim)
    s, _ = ops.sort(xf, ax)
    n = s.shape[ax]
    lo, hi = (n - 1) // 2, n // 2

    def take(i):
        start = [0] * s.ndim
        lim = list(s.shape)
        start[ax], lim[ax] = i, i + 1
        return ops.reshape(ops.slice_op(s, start, lim), s.shape[:ax] + s.shape[ax + 1:])
    m = take(lo) if lo == hi else ops.mul(ops.add(take(lo), take(hi)), np.asarray(0.5, dt))
    if keepdims:
        shape = (1,) * x.ndim if axis is None else tuple(
            1 if i == ax else n_ for i, n_ in enumerate(x.shape))
        m = ops.reshape(m, shape)
    return m


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """scipy.special.logsumexp (also ``functrace.scipy.special.logsumexp``).

    Stable for large values; all -inf gives -inf with a zero gradient (docs/numerics.md).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> round(float(fnp.logsumexp(np.array([0.0, 0.0]))), 6)
        0.693147
    """
    if return_sign:
        raise NotImplementedError("logsumexp(return_sign=True)")
    x = asarray_any(a)
    dt = np.result_type(x.dtype, np.float16)
    x = cast(x, dt)
    if b is not None:
        from ._ufuncs import add, log
        x = add(x, log(b))
        dt = x.dtype
    axes = normalize_axes(axis, x.ndim)
    if current_trace() is None:
        y = ops.reduce.logsumexp_p.impl(np.asarray(x), axes=axes)
    else:
        y = ops.logsumexp(x, axes)
    if keepdims:
        shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
        return np.reshape(y, shape) if current_trace() is None else ops.reshape(y, shape)
    return y
