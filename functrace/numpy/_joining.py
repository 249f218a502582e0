"""functrace.numpy: joining and splitting arrays (concatenate, stack and its h/v/d/column
forms, split and its array/h/v forms, append).

Outside transforms each function is numpy's; under one, the operands are promoted to one dtype
(numpy's rule) and joined with the ``concatenate`` op, or split with slices. Imports
``_core`` and ``_shape`` of this package.
"""

from __future__ import annotations

import builtins

import numpy as np

from .. import ops
from ..tracing import Tracer, current_trace
from ._core import asarray_any, cast, dtype_key, normalize_axis
from ._shape import atleast_1d, atleast_2d, atleast_3d, expand_dims, ravel

__all__ = ["concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "split",
           "array_split", "hsplit", "vsplit", "append"]


def _common(xs, dtype=None):
    dt = np.dtype(dtype) if dtype is not None else np.result_type(*[dtype_key(x) for x in xs])
    return [cast(x, dt) for x in xs]


def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """numpy.concatenate.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.concatenate([np.ones(2), np.zeros(1)])
        array([1., 1., 0.])
    """
    if current_trace() is None:
        return np.concatenate(arrays, axis=axis, out=out, dtype=dtype, casting=casting)
    xs = _common([asarray_any(a) for a in arrays], dtype)
    if axis is None:
        xs = [ops.reshape(x, (x.size,)) for x in xs]
        axis = 0
    nd = xs[0].ndim
    if nd == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    ax = normalize_axis(axis, nd)
    xs = [x if isinstance(x, Tracer) else np.asarray(x) for x in xs]
    return ops.concatenate(xs, ax)


def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """numpy.stack.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.stack([np.ones(2), np.zeros(2)]).shape
        (2, 2)
    """
    if current_trace() is None:
        return np.stack(arrays, axis=axis, out=out, dtype=dtype, casting=casting)
    xs = _common([asarray_any(a) for a in arrays], dtype)
    shapes = {x.shape for x in xs}
    if len(shapes) != 1:
        raise ValueError("all input arrays must have the same shape, got "
                         f"{', '.join(str(x.shape) for x in xs)}")
    ax = normalize_axis(axis, xs[0].ndim + 1)
    return ops.concatenate([expand_dims(x, ax) for x in xs], ax)


def hstack(tup, *, dtype=None, casting="same_kind"):
    """numpy.hstack.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.hstack([np.ones(2), np.zeros(1)]).shape
        (3,)
    """
    if current_trace() is None:
        return np.hstack(tup, dtype=dtype, casting=casting)
    xs = [atleast_1d(a) for a in tup]
    return concatenate(xs, 0 if xs[0].ndim == 1 else 1, dtype=dtype)


def vstack(tup, *, dtype=None, casting="same_kind"):
    """numpy.vstack.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.vstack([np.ones(2), np.zeros(2)]).shape
        (2, 2)
    """
    if current_trace() is None:
        return np.vstack(tup, dtype=dtype, casting=casting)
    return concatenate([atleast_2d(a) for a in tup], 0, dtype=dtype)


def dstack(tup):
    """numpy.dstack.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.dstack([np.ones(2), np.zeros(2)]).shape
        (1, 2, 2)
    """
    if current_trace() is None:
        return np.dstack(tup)
    return concatenate([atleast_3d(a) for a in tup], 2)


def column_stack(tup):
    """numpy.column_stack.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.column_stack([np.ones(2), np.zeros(2)]).shape
        (2, 2)
    """
    if current_trace() is None:
        return np.column_stack(tup)
    xs = [asarray_any(a) for a in tup]
    xs = [ops.reshape(x, (x.size, 1)) if x.ndim < 2 else x for x in xs]
    return concatenate(xs, 1)


def _split_points(n, indices_or_sections, strict):
    if isinstance(indices_or_sections, int | np.integer):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("number sections must be larger than 0.")
        if strict and n % k:
            raise ValueError("array split does not result in an equal division")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        pts = np.cumsum([0] + sizes)
        return list(zip(pts[:-1], pts[1:]))
    idx = [0] + [builtins.min(builtins.max(int(i) if i >= 0 else n + int(i), 0), n)
                 for i in indices_or_sections] + [n]
    return [(a, builtins.max(a, b)) for a, b in zip(idx[:-1], idx[1:])]


def _split(a, indices_or_sections, axis, strict):
    x = asarray_any(a)
    ax = normalize_axis(axis, x.ndim)
    out = []
    for lo, hi in _split_points(x.shape[ax], indices_or_sections, strict):
        start = [0] * x.ndim
        lim = list(x.shape)
        start[ax], lim[ax] = int(lo), int(hi)
        out.append(ops.slice_op(x, start, lim))
    return out


def split(ary, indices_or_sections, axis=0):
    """numpy.split.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> [p.shape for p in fnp.split(np.ones(4), 2)]
        [(2,), (2,)]
    """
    if current_trace() is None:
        return np.split(ary, indices_or_sections, axis)
    return _split(ary, indices_or_sections, axis, True)


def array_split(ary, indices_or_sections, axis=0):
    """numpy.array_split.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> [p.shape for p in fnp.array_split(np.ones(5), 2)]
        [(3,), (2,)]
    """
    if current_trace() is None:
        return np.array_split(ary, indices_or_sections, axis)
    return _split(ary, indices_or_sections, axis, False)


def hsplit(ary, indices_or_sections):
    """numpy.hsplit.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> len(fnp.hsplit(np.ones((2, 4)), 2))
        2
    """
    if current_trace() is None:
        return np.hsplit(ary, indices_or_sections)
    x = asarray_any(ary)
    return _split(x, indices_or_sections, 1 if x.ndim > 1 else 0, True)


def vsplit(ary, indices_or_sections):
    """numpy.vsplit.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> len(fnp.vsplit(np.ones((4, 2)), 2))
        2
    """
    if current_trace() is None:
        return np.vsplit(ary, indices_or_sections)
    return _split(ary, indices_or_sections, 0, True)


def append(arr, values, axis=None):
    """numpy.append.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.append(np.array([1.0]), 2.0)
        array([1., 2.])
    """
    if current_trace() is None:
        return np.append(arr, values, axis)
    x, v = asarray_any(arr), asarray_any(values)
    if axis is None:
        return concatenate([ravel(x), ravel(v)])
    return concatenate([x, v], axis)

