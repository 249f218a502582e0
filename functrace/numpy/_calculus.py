"""Differences, integration, interpolation, 1-d convolution, polynomials and ``i0`` of
functrace.numpy: diff, ediff1d, gradient, trapezoid, interp, convolve, correlate, polyval,
polyfit, polyder, polyint, vander, i0.

Each function runs numpy eagerly outside a transform. Inside one it follows numpy's own
algorithm written with other ``fnp`` functions (slices, products, sums, selects), so values
agree with numpy to rounding and every rule (vjp, jvp, vmap) comes from the pieces. Static
things (lengths, modes, degrees) must be concrete; data and coefficients may be traced.
"""

from __future__ import annotations

import numpy as np

from .. import ops
from ..tracing import Tracer, current_trace
from ._core import asarray_any, cast, normalize_axis

__all__ = ["diff", "ediff1d", "gradient", "trapezoid", "interp", "convolve", "correlate",
           "polyval", "polyfit", "polyder", "polyint", "vander", "i0"]

_NO = np._NoValue


def _sl(x, axis, start, stop):
    """``x[..., start:stop, ...]`` along ``axis`` (non-negative bounds)."""
    lo = [0] * x.ndim
    hi = list(x.shape)
    lo[axis], hi[axis] = start, stop
    if isinstance(x, Tracer):
        return ops.slice_op(x, lo, hi)
    return x[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))]


def diff(a, n=1, axis=-1, prepend=_NO, append=_NO):
    """numpy.diff (booleans: ``!=``, as numpy).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.diff(np.array([1.0, 4.0, 9.0]))
        array([3., 5.])
    """
    if current_trace() is None:
        return np.diff(a, n=n, axis=axis, prepend=prepend, append=append)
    from ._joining import concatenate
    from ._ufuncs import not_equal, subtract
    if n == 0:
        return a
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}")
    x = asarray_any(a)
    if x.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    ax = normalize_axis(axis, x.ndim)
    parts = []
    for extra, first in ((prepend, True), (append, False)):
        if extra is _NO:
            continue
        e = asarray_any(extra)
        if e.ndim == 0:
            shape = list(x.shape)
            shape[ax] = 1
            e = ops.broadcast_to_shape(e, tuple(shape)) if isinstance(e, Tracer) else \
                np.broadcast_to(e, tuple(shape))
        parts.append((first, e))
    if parts:
        x = concatenate([e for f, e in parts if f] + [x] + [e for f, e in parts if not f], ax)
    op = not_equal if x.dtype == np.bool_ else subtract
    for _ in range(n):
        m = x.shape[ax]
        x = op(_sl(x, ax, 1, max(m, 1)), _sl(x, ax, 0, max(m - 1, 0)))
    return x


def ediff1d(ary, to_end=None, to_begin=None):
    """numpy.ediff1d: differences of the flattened array, with optional ends.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.ediff1d(np.array([1.0, 2.0, 4.0]), to_begin=0.0)
        array([0., 1., 2.])
    """
    if current_trace() is None:
        return np.ediff1d(ary, to_end=to_end, to_begin=to_begin)
    from ._joining import concatenate
    from ._ufuncs import subtract
    x = asarray_any(ary)
    x = ops.reshape(x, (x.size,))
    dt = x.dtype
    d = subtract(_sl(x, 0, 1, max(x.size, 1)), _sl(x, 0, 0, max(x.size - 1, 0)))
    parts = [d]
    for extra, first in ((to_begin, True), (to_end, False)):
        if extra is None:
            continue
        e = asarray_any(extra)
        if not np.can_cast(e.dtype, dt, casting="same_kind"):
            raise TypeError(f"dtype of `{'to_begin' if first else 'to_end'}` must be "
                            f"compatible with input `ary` under the `same_kind` rule.")
        e = cast(e, dt)
        e = ops.reshape(e, (e.size,)) if isinstance(e, Tracer) else np.ravel(e)
        parts.insert(0, e) if first else parts.append(e)
    return concatenate(parts) if len(parts) > 1 else d


def gradient(f, *varargs, axis=None, edge_order=1):
    """numpy.gradient (central differences inside, one-sided at the edges; spacings given as
    scalars or coordinate arrays, which may be traced).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.gradient(np.array([1.0, 4.0, 9.0, 16.0]))
        array([3., 4., 6., 7.])
    """
    if current_trace() is None:
        return np.gradient(f, *varargs, axis=axis, edge_order=edge_order)
    from ._joining import concatenate
    from ._ufuncs import add, divide, multiply, negative, subtract
    x = asarray_any(f)
    N = x.ndim
    if axis is None:
        axes = tuple(range(N))
    else:
        axes = tuple(normalize_axis(a, N) for a in
                     ((axis,) if isinstance(axis, int | np.integer) else axis))
        if len(set(axes)) != len(axes):
            raise ValueError("repeated axis")
    n = len(varargs)
    if n == 0:
        dx = [1.0] * len(axes)
    elif n == 1 and np.ndim(varargs[0]) == 0:
        dx = list(varargs) * len(axes)
    elif n == len(axes):
        dx = []
        for i, d in enumerate(varargs):
            d = d if isinstance(d, Tracer) else (d if np.ndim(d) == 0 else np.asarray(d))
            if np.ndim(d) == 0:
                dx.append(d)
                continue
            if np.ndim(d) != 1:
                raise ValueError("distances must be either scalars or 1d")
            if np.shape(d)[0] != x.shape[axes[i]]:
                raise ValueError("when 1d, distances must match the length of the "
                                 "corresponding dimension")
            dd = diff(d)
            if dd.dtype.kind in "iub":
                dd = cast(dd, np.float64)
            if not isinstance(dd, Tracer) and (dd == dd[0]).all():
                dd = dd[0]      # numpy: uniform coordinates reduce to the scalar case
            dx.append(dd)
    else:
        raise TypeError("invalid number of arguments")
    if edge_order > 2:
        raise ValueError("'edge_order' greater than 2 not supported")
    otype = x.dtype
    if otype.kind not in "fc":
        otype = np.dtype(np.float64)
        x = cast(x, otype)
    outs = []
    for ax, h in zip(axes, dx, strict=True):
        m = x.shape[ax]
        if m < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical gradient, "
                             "at least (edge_order + 1) elements are required.")
        uniform = np.ndim(h) == 0

        def s(a, b, _ax=ax):
            return _sl(x, _ax, a, b)

        def col(v, _ax=ax):   # a 1-d coefficient along the axis
            shape = [1] * N
            shape[_ax] = -1
            return ops.reshape(v, tuple(v.size if k == -1 else k for k in shape)) \
                if isinstance(v, Tracer) else np.reshape(v, shape)

        if uniform:
            inner = divide(subtract(s(2, m), s(0, m - 2)), multiply(2.0, h))
        else:
            dx1, dx2 = h[: m - 2], h[1:]
            a = divide(negative(dx2), multiply(dx1, add(dx1, dx2)))
            b = divide(subtract(dx2, dx1), multiply(dx1, dx2))
            c = divide(dx1, multiply(dx2, add(dx1, dx2)))
            inner = add(add(multiply(col(a), s(0, m - 2)), multiply(col(b), s(1, m - 1))),
                        multiply(col(c), s(2, m)))

        def at(v, i):
            return v if np.ndim(v) == 0 else v[i]

        if edge_order == 1:
            first = divide(subtract(s(1, 2), s(0, 1)), at(h, 0))
            last = divide(subtract(s(m - 1, m), s(m - 2, m - 1)), at(h, -1))
        else:
            if uniform:
                a, b, c = divide(-1.5, h), divide(2.0, h), divide(-0.5, h)
            else:
                d1, d2 = at(h, 0), at(h, 1)
                a = divide(negative(add(multiply(2.0, d1), d2)), multiply(d1, add(d1, d2)))
                b = divide(add(d1, d2), multiply(d1, d2))
                c = divide(negative(d1), multiply(d2, add(d1, d2)))
            first = add(add(multiply(a, s(0, 1)), multiply(b, s(1, 2))), multiply(c, s(2, 3)))
            if uniform:
                a, b, c = divide(0.5, h), divide(-2.0, h), divide(1.5, h)
            else:
                d1, d2 = at(h, -2), at(h, -1)
                a = divide(d2, multiply(d1, add(d1, d2)))
                b = divide(negative(add(d2, d1)), multiply(d1, d2))
                c = divide(add(multiply(2.0, d2), d1), multiply(d2, add(d1, d2)))
            last = add(add(multiply(a, s(m - 3, m - 2)), multiply(b, s(m - 2, m - 1))),
                       multiply(c, s(m - 1, m)))
        outs.append(concatenate([cast(first, otype), cast(inner, otype), cast(last, otype)],
                                ax))
    return outs[0] if len(axes) == 1 else tuple(outs)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """numpy.trapezoid: the trapezoidal rule along ``axis``.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.trapezoid(np.array([1.0, 2.0, 3.0])))
        4.0
    """
    if current_trace() is None:
        return np.trapezoid(y, x=x, dx=dx, axis=axis)
    from ._reductions import sum as fsum
    from ._ufuncs import add, divide, multiply
    yy = asarray_any(y)
    ax = normalize_axis(axis, yy.ndim)
    if x is None:
        d = dx
    else:
        xx = asarray_any(x)
        if xx.ndim == 1:
            d = diff(xx)
            shape = [1] * yy.ndim
            shape[ax] = d.shape[0]
            d = ops.reshape(d, tuple(shape)) if isinstance(d, Tracer) else d.reshape(shape)
        else:
            d = diff(xx, axis=ax)
    m = yy.shape[ax]
    pair = add(_sl(yy, ax, 1, max(m, 1)), _sl(yy, ax, 0, max(m - 1, 0)))
    return fsum(divide(multiply(d, pair), 2.0), axis=ax)


def interp(x, xp, fp, left=None, right=None, period=None):
    """numpy.interp (float64 or complex128, as numpy). Differentiable in ``x``, ``xp`` and
    ``fp`` away from the knots. Traced, each point is located by comparing it with every knot
    (``searchsorted``'s O(len(x) * len(xp)) method).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.interp(np.array([0.5, 2.5]), np.array([0.0, 1.0, 2.0]), np.array([0.0, 10.0, 0.0]))
        array([5., 0.])
    """
    if current_trace() is None:
        return np.interp(x, xp, fp, left=left, right=right, period=period)
    from ._indexing import take
    from ._joining import concatenate
    from ._searching import searchsorted
    from ._shape import argsort
    from ._ufuncs import remainder
    xx, xpp, fpp = asarray_any(x), asarray_any(xp), asarray_any(fp)
    dt = np.dtype(np.complex128) if fpp.dtype.kind == "c" else np.dtype(np.float64)
    xx, xpp, fpp = cast(xx, np.float64), cast(xpp, np.float64), cast(fpp, dt)
    if xpp.ndim != 1 or fpp.ndim != 1:
        raise ValueError("Data points must be 1-D sequences")
    if xpp.shape[0] != fpp.shape[0]:
        raise ValueError("fp and xp are not of the same length")
    if xpp.shape[0] == 0:
        raise ValueError("array of sample points is empty")
    if period is not None:
        if period == 0:
            raise ValueError("period must be a non-zero value")
        period = abs(period)
        left = right = None
        xx, xpp = remainder(xx, period), remainder(xpp, period)
        order = argsort(xpp)
        xpp, fpp = take(xpp, order), take(fpp, order)
        xpp = concatenate([ops.sub(_sl(xpp, 0, xpp.shape[0] - 1, xpp.shape[0]),
                                   np.asarray(period, np.float64)), xpp,
                           ops.add(_sl(xpp, 0, 0, 1), np.asarray(period, np.float64))])
        fpp = concatenate([_sl(fpp, 0, fpp.shape[0] - 1, fpp.shape[0]), fpp, _sl(fpp, 0, 0, 1)])
    n = xpp.shape[0]
    f_first = ops.reshape(_sl(fpp, 0, 0, 1), ())
    f_last = ops.reshape(_sl(fpp, 0, n - 1, n), ())
    lval = f_first if left is None else cast(asarray_any(left), dt)
    rval = f_last if right is None else cast(asarray_any(right), dt)
    if n == 1:
        res = ops.broadcast_to_shape(f_first, xx.shape)
    else:
        j = ops.sub(searchsorted(xpp, xx, side="right"), np.ones((), np.intp))
        jc = ops.clip(j, np.zeros((), np.intp), np.asarray(n - 2, np.intp))
        j1 = ops.add(jc, np.ones((), np.intp))
        x0, x1 = take(xpp, jc), take(xpp, j1)
        f0, f1 = take(fpp, jc), take(fpp, j1)
        slope = ops.div(ops.sub(f1, f0), cast(ops.sub(x1, x0), dt))
        res = ops.add(ops.mul(slope, cast(ops.sub(xx, x0), dt)), f0)
        res = ops.select(ops.eq(xx, x0), f0, res)
        res = ops.select(ops.ge(j, np.asarray(n - 1, np.intp)), ops.broadcast_to_shape(
            f_last, xx.shape), res)
    xp0 = ops.reshape(_sl(xpp, 0, 0, 1), ())
    xpn = ops.reshape(_sl(xpp, 0, n - 1, n), ())
    shape = xx.shape
    res = ops.select(ops.lt(xx, ops.broadcast_to_shape(xp0, shape)),
                     ops.broadcast_to_shape(lval, shape), res)
    res = ops.select(ops.gt(xx, ops.broadcast_to_shape(xpn, shape)),
                     ops.broadcast_to_shape(rval, shape), res)
    return ops.select(ops.isnan(xx), cast(xx, dt), res)


def _correlate_full(a, v, conj):
    """The full 1-d correlation ``z[k] = sum_j a[k + j - (m - 1)] * v'[j]`` (``v'`` conjugated
    when ``conj``), as a gather of sliding windows and a matrix-vector product."""
    from ._indexing import take
    from ._products import dot
    from ._shape import pad
    from ._ufuncs import conjugate
    n, m = a.shape[0], v.shape[0]
    ap = pad(a, (m - 1, m - 1))
    idx = np.arange(n + m - 1)[:, None] + np.arange(m)[None, :]
    return dot(take(ap, idx), conjugate(v) if conj else v)


def _correlate_mode(a, v, mode, conj, name):
    from ._core import weak_result_type
    a, v = asarray_any(a), asarray_any(v)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError("object too deep for desired array")
    n, m = a.shape[0], v.shape[0]
    if n == 0:
        raise ValueError("a cannot be empty")
    if m == 0:
        raise ValueError("v cannot be empty")
    dt = weak_result_type(a, v)
    a, v = cast(a, dt), cast(v, dt)
    full = _correlate_full(a, v, conj)
    if mode == "full":
        return full
    if mode == "valid":
        off, length = min(n, m) - 1, max(n, m) - min(n, m) + 1
    elif mode == "same":
        off, length = ((m - 1) // 2 if n >= m else n // 2), max(n, m)
    else:
        raise ValueError(f"{name}: mode must be one of 'valid', 'same', 'full', got {mode!r}")
    return _sl(full, 0, off, off + length)


def correlate(a, v, mode="valid"):
    """numpy.correlate: ``z[k] = sum_n a[n + k] * conj(v[n])`` (modes valid, same, full).
    Traced, a gather of sliding windows and a product: O(len(a) * len(v)).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.correlate(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0]))
        array([2., 3.])
    """
    if current_trace() is None:
        return np.correlate(a, v, mode)
    return _correlate_mode(a, v, mode, True, "correlate")


def convolve(a, v, mode="full"):
    """numpy.convolve: the 1-d discrete convolution (modes full, same, valid).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
        array([0. , 1. , 2.5, 4. , 1.5])
    """
    if current_trace() is None:
        return np.convolve(a, v, mode)
    from ._shape import flip
    a, v = asarray_any(a), asarray_any(v)
    if a.ndim == 0:
        a = ops.reshape(a, (1,)) if isinstance(a, Tracer) else a.reshape(1)
    if v.ndim == 0:
        v = ops.reshape(v, (1,)) if isinstance(v, Tracer) else v.reshape(1)
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    return _correlate_mode(a, flip(v), mode, False, "convolve")


def polyval(p, x):
    """numpy.polyval: Horner's rule (differentiable in the coefficients and in ``x``).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.polyval(np.array([1.0, 0.0, -2.0]), 3.0))
        7.0
    """
    if current_trace() is None:
        return np.polyval(p, x)
    from ._creation import zeros_like
    from ._ufuncs import add, multiply
    p, x = asarray_any(p), asarray_any(x)
    y = zeros_like(x)
    for i in range(p.shape[0]):
        y = add(multiply(y, x), p[i])
    return y


def polyder(p, m=1):
    """numpy.polyder: the ``m``-th derivative of a polynomial's coefficients.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.polyder(np.array([1.0, 2.0, 3.0]))
        array([2., 2.])
    """
    if current_trace() is None:
        return np.polyder(p, m)
    from ._ufuncs import multiply
    m = int(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    p = asarray_any(p)
    for _ in range(m):
        n = p.shape[0] - 1
        p = multiply(_sl(p, 0, 0, max(n, 0)), np.arange(n, 0, -1))
    return p


def polyint(p, m=1, k=None):
    """numpy.polyint: the ``m``-th antiderivative (integration constants ``k``).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.polyint(np.array([6.0, 2.0]))
        array([3., 2., 0.])
    """
    if current_trace() is None:
        return np.polyint(p, m, k)
    from ._joining import concatenate
    from ._ufuncs import true_divide
    m = int(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    kk = np.zeros(m, float) if k is None else asarray_any(k)
    if not isinstance(kk, Tracer):
        kk = np.atleast_1d(kk)
        if len(kk) == 1 and m > 1:
            kk = kk[0] * np.ones(m, float)
    elif kk.ndim == 0:
        kk = ops.broadcast_to_shape(kk, (m,))
    if kk.shape[0] < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    p = asarray_any(p)
    for i in range(m):
        ki = _sl(kk, 0, i, i + 1)
        p = concatenate([true_divide(p, np.arange(p.shape[0], 0, -1)), ki])
    return p


def vander(x, N=None, increasing=False):
    """numpy.vander: columns of powers of ``x`` (by repeated multiplication, as numpy).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.vander(np.array([2.0, 3.0]), 3)
        array([[4., 2., 1.],
               [9., 3., 1.]])
    """
    if current_trace() is None:
        return np.vander(x, N, increasing)
    from ._reductions import cumprod
    from ._shape import flip
    x = asarray_any(x)
    if x.ndim != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    N = x.shape[0] if N is None else int(N)
    dt = np.promote_types(x.dtype, int)
    x = cast(x, dt)
    rows = x.shape[0]
    if N == 0:
        return ops.broadcast_to_shape(np.zeros((), dt), (rows, 0))
    ones = ops.broadcast_to_shape(np.ones((), dt), (rows, 1))
    if N == 1:
        return ones
    cols = ops.broadcast_in_dim(x, (rows, N - 1), (0,))
    v = ops.concatenate([ones, cumprod(cols, axis=1)], 1)
    return v if increasing else flip(v, 1)


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """numpy.polyfit (least squares on the scaled Vandermonde matrix). Traced, the least-squares
    problem is solved with a QR factorisation (differentiable in ``x``, ``y`` and ``w``; a
    full-rank fit is assumed and ``rcond`` is not used); ``full=True`` and ``cov=True`` work
    eagerly only.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> np.round(fnp.polyfit(np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 5.0]), 1), 6)
        array([2., 1.])
    """
    if current_trace() is None:
        return np.polyfit(x, y, deg, rcond=rcond, full=full, w=w, cov=cov)
    if full or cov:
        raise NotImplementedError("polyfit(full=True) and polyfit(cov=...) are not traceable: "
                                  "call it outside the transform, or use the coefficients only")
    from . import linalg
    from ._products import matmul
    from ._reductions import sum as fsum
    from ._ufuncs import divide, multiply, sqrt
    order = int(deg) + 1
    xx = cast(asarray_any(x), np.result_type(asarray_any(x).dtype, 0.0))
    yy = asarray_any(y)
    yy = cast(yy, np.result_type(yy.dtype, 0.0))     # numpy: asarray(y) + 0.0
    if int(deg) < 0:
        raise ValueError("expected deg >= 0")
    if xx.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if xx.shape[0] == 0:
        raise TypeError("expected non-empty vector for x")
    if yy.ndim < 1 or yy.ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if xx.shape[0] != yy.shape[0]:
        raise TypeError("expected x and y to have same length")
    lhs = vander(xx, order)
    rhs = yy
    if w is not None:
        ww = asarray_any(w)
        if ww.ndim != 1 or ww.shape[0] != yy.shape[0]:
            raise TypeError("expected a 1-d w of the length of y")
        lhs = multiply(lhs, ops.reshape(ww, (ww.shape[0], 1)) if isinstance(ww, Tracer)
                       else ww[:, None])
        rhs = multiply(rhs, ww if rhs.ndim == 1 else (
            ops.reshape(ww, (ww.shape[0], 1)) if isinstance(ww, Tracer) else ww[:, None]))
    scale = sqrt(fsum(multiply(lhs, lhs), axis=0))
    lhs = divide(lhs, scale)
    q, r = linalg.qr(lhs)
    qt = ops.transpose(q, (1, 0))
    c = linalg.solve(r, matmul(qt, rhs))
    if c.ndim == 2:
        return divide(c, ops.reshape(scale, (scale.shape[0], 1)))
    return divide(c, scale)


# numpy's Chebyshev coefficients for i0 (Cephes), |x| <= 8 and |x| > 8
_I0A = np.lib._function_base_impl._i0A
_I0B = np.lib._function_base_impl._i0B


def _chbevl(x, vals):
    from ._ufuncs import add, multiply, subtract
    b0 = vals[0]
    b1 = 0.0
    b2 = 0.0
    for i in range(1, len(vals)):
        b2 = b1
        b1 = b0
        b0 = add(subtract(multiply(x, b1), b2), vals[i])
    return multiply(0.5, subtract(b0, b2))


def i0(x):
    """numpy.i0, the modified Bessel function of the first kind of order 0 (numpy's Chebyshev
    expansions, so differentiable to any order; the derivative at 0 is 0).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> round(float(fnp.i0(1.0)), 6)
        1.266066
    """
    if current_trace() is None:
        return np.i0(x)
    from ._ufuncs import absolute, divide, exp, less_equal, multiply, sqrt, subtract, where
    x = asarray_any(x)
    if x.dtype.kind == "c":
        raise TypeError("i0 not supported for complex values")
    if x.dtype.kind != "f":
        x = cast(x, np.float64)
    ax = absolute(x)
    small = less_equal(ax, 8.0)
    xs = where(small, ax, 0.0)       # each branch sees only its own domain: no inf/NaN
    xl = where(small, 9.0, ax)       # gradients from the branch not taken
    lo = multiply(exp(xs), _chbevl(subtract(divide(xs, 2.0), 2), _I0A))
    hi = divide(multiply(exp(xl), _chbevl(subtract(divide(32.0, xl), 2.0), _I0B)), sqrt(xl))
    return where(small, lo, hi)
