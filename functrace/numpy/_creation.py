"""Array creation for functrace.numpy: zeros, ones, full, eye, arange, linspace, *_like, array.

Creation functions with static arguments return plain numpy arrays even while tracing (they
are constants: a graph stores them as literals, or as one broadcast of a scalar), except the
``*_like`` functions of a traced array and ``array``/``asarray`` of traced data, which record.
"""

from __future__ import annotations

import numpy as np

from .. import ops
from ..tracing import Tracer, current_trace
from ._core import asarray_any, cast, weak_result_type

__all__ = ["zeros", "ones", "full", "empty", "eye", "identity", "arange", "linspace",
           "logspace", "geomspace", "zeros_like", "ones_like", "full_like", "empty_like",
           "array", "asarray", "tri", "meshgrid", "indices", "ascontiguousarray"]


def _filled(shape, value, dtype):
    """A constant of ``shape``: one broadcast of a scalar under tracing (never a big literal)."""
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(int(s) for s in shape)
    dtype = np.dtype(dtype) if dtype is not None else np.asarray(value).dtype
    if current_trace() is None:
        return np.full(shape, value, dtype)
    v = np.asarray(value, dtype)
    return ops.broadcast_in_dim(v, shape, ()) if shape else v


def zeros(shape, dtype=float, order="C", **kwargs):
    """numpy.zeros.

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.zeros(2)
        array([0., 0.])
    """
    if current_trace() is None:
        return np.zeros(shape, dtype, order, **kwargs)
    return _filled(shape, 0, dtype)


def ones(shape, dtype=None, order="C", **kwargs):
    """numpy.ones.

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.ones(2)
        array([1., 1.])
    """
    if current_trace() is None:
        return np.ones(shape, dtype, order, **kwargs)
    return _filled(shape, 1, dtype if dtype is not None else float)


def empty(shape, dtype=float, order="C", **kwargs):
    """numpy.empty (zeros under tracing: graphs are deterministic).

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.empty(2).shape
        (2,)
    """
    if current_trace() is None:
        return np.empty(shape, dtype, order, **kwargs)
    return _filled(shape, 0, dtype)


def full(shape, fill_value, dtype=None, order="C", **kwargs):
    """numpy.full (a traced fill value is broadcast).

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.full(2, 7.0)
        array([7., 7.])
    """
    if current_trace() is None:
        return np.full(shape, fill_value, dtype, order, **kwargs)
    if isinstance(fill_value, Tracer):
        v = cast(fill_value, dtype) if dtype is not None else fill_value
        shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        return ops.broadcast_to_shape(v, shape)
    return _filled(shape, fill_value, dtype)


def _like(name, value):
    def f(a, dtype=None, order="K", subok=True, shape=None, **kwargs):
        if current_trace() is None:
            return getattr(np, name)(a, dtype=dtype, order=order, subok=subok, shape=shape,
                                     **kwargs)
        x = asarray_any(a)
        return _filled(x.shape if shape is None else shape, value,
                       dtype if dtype is not None else x.dtype)
    f.__name__ = name
    f.__doc__ = (f"numpy.{name}.\n\nExample:\n    >>> import functrace.numpy as fnp, numpy as np"
                 f"\n    >>> fnp.{name}(np.ones(2)).shape\n    (2,)\n")
    return f


zeros_like = _like("zeros_like", 0)
ones_like = _like("ones_like", 1)
empty_like = _like("empty_like", 0)


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kwargs):
    """numpy.full_like.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.full_like(np.ones(2), 3.0)
        array([3., 3.])
    """
    if current_trace() is None:
        return np.full_like(a, fill_value, dtype, order, subok, shape, **kwargs)
    x = asarray_any(a)
    dt = dtype if dtype is not None else x.dtype
    shp = x.shape if shape is None else shape
    if isinstance(fill_value, Tracer):
        return full(shp, fill_value, dt)
    return _filled(shp, fill_value, dt)


def eye(N, M=None, k=0, dtype=float, order="C", **kwargs):
    """numpy.eye.

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.eye(2)
        array([[1., 0.],
               [0., 1.]])
    """
    return np.eye(N, M, k, dtype, order, **kwargs)


def identity(n, dtype=None):
    """numpy.identity.

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.identity(2)[0]
        array([1., 0.])
    """
    return np.identity(n, dtype)


def tri(N, M=None, k=0, dtype=float):
    """numpy.tri.

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.tri(2)
        array([[1., 0.],
               [1., 1.]])
    """
    return np.tri(N, M, k, dtype)


def arange(*args, **kwargs):
    """numpy.arange (static bounds: the result is a constant).

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.arange(3)
        array([0, 1, 2])
    """
    args = [int(a) if isinstance(a, Tracer) and a.dtype.kind in "iu" else a for a in args]
    return np.arange(*args, **kwargs)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """numpy.linspace (traced start/stop are differentiable).

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.linspace(0.0, 1.0, 3)
        array([0. , 0.5, 1. ])
    """
    if current_trace() is None or not (isinstance(start, Tracer) or isinstance(stop, Tracer)):
        return np.linspace(start, stop, num, endpoint, retstep, dtype, axis)
    from ._ufuncs import add, multiply, subtract
    s = asarray_any(start)
    e = asarray_any(stop)
    if s.ndim or e.ndim or axis != 0:
        raise NotImplementedError("traced linspace supports scalar start/stop and axis=0")
    dt = weak_result_type(s, e, float(num))   # numpy's: float32 bounds give float32
    grid = np.linspace(0.0, 1.0, num, endpoint).astype(dt)
    s, e = cast(s, dt), cast(e, dt)
    step = subtract(e, s)
    y = add(s, multiply(grid, step))
    if endpoint and num > 1:   # numpy sets the last value to stop exactly
        y = ops.concatenate([ops.slice_op(y, (0,), (num - 1,)), ops.reshape(e, (1,))], 0)
    if dtype is not None:
        if np.dtype(dtype).kind in "iu":   # numpy floors before an integer cast
            from ._ufuncs import floor
            y = floor(y)
        y = cast(y, dtype)
    if retstep:
        div = (num - 1) if endpoint else num
        return y, multiply(step, 1.0 / max(div, 1))
    return y


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """numpy.logspace.

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.logspace(0.0, 2.0, 3)
        array([  1.,  10., 100.])
    """
    if current_trace() is None or not (isinstance(start, Tracer) or isinstance(stop, Tracer)):
        return np.logspace(start, stop, num, endpoint, base, dtype, axis)
    from ._ufuncs import power
    y = power(base, linspace(start, stop, num, endpoint, axis=axis))
    return cast(y, dtype) if dtype is not None else y


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """numpy.geomspace (static bounds).

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.geomspace(1.0, 100.0, 3)
        array([  1.,  10., 100.])
    """
    return np.geomspace(start, stop, num, endpoint, dtype, axis)


def array(object, dtype=None, copy=True, order="K", subok=False, ndmin=0, **kwargs):
    """numpy.array; nested sequences containing traced values are stacked.

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.array([1.0, 2.0])
        array([1., 2.])
    """
    if current_trace() is None:
        return np.array(object, dtype=dtype, copy=copy, order=order, subok=subok, ndmin=ndmin,
                        **kwargs)
    x = asarray_any(object)
    if dtype is not None:
        x = cast(x, dtype)
    if ndmin and x.ndim < ndmin:
        x = ops.reshape(x, (1,) * (ndmin - x.ndim) + x.shape) if isinstance(x, Tracer) \
            else x.reshape((1,) * (ndmin - x.ndim) + x.shape)
    return x


def asarray(a, dtype=None, order=None, **kwargs):
    """numpy.asarray (tracers pass through).

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.asarray([1, 2]).dtype
        dtype('int64')
    """
    if current_trace() is None:
        return np.asarray(a, dtype=dtype, order=order, **kwargs)
    x = asarray_any(a)
    return cast(x, dtype) if dtype is not None else x


ascontiguousarray = asarray


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """numpy.meshgrid.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> [g.shape for g in fnp.meshgrid(np.arange(2), np.arange(3))]
        [(3, 2), (3, 2)]
    """
    if current_trace() is None:
        return np.meshgrid(*xi, copy=copy, sparse=sparse, indexing=indexing)
    xs = [ops.reshape(asarray_any(x), (asarray_any(x).size,)) for x in xi]
    n = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        d = i
        if indexing == "xy" and n > 1 and i < 2:
            d = 1 - i
        if sparse:
            s = [1] * n
            s[d] = x.shape[0]
            out.append(ops.reshape(x, tuple(s)))
        else:
            out.append(ops.broadcast_in_dim(x, tuple(shape), (d,)))
    return out


def indices(dimensions, dtype=int, sparse=False):
    """numpy.indices (a constant).

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.indices((2, 2)).shape
        (2, 2, 2)
    """
    return np.indices(dimensions, dtype, sparse)
