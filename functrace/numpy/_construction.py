"""Index tricks, index arithmetic, functional updates and numpy 2's array-API spellings of
functrace.numpy: r_, c_, row_stack, rollaxis, tril_indices, triu_indices, diag_indices (and
their ``_from`` forms), fill_diagonal, put_along_axis, unravel_index, ravel_multi_index,
concat, permute_dims, matrix_transpose, unstack, astype, cumulative_sum, cumulative_prod,
vecmat.

Each function runs numpy eagerly outside a transform and is a composition of ops and other
``fnp`` functions inside one. Two differ from numpy on purpose: ``fill_diagonal`` and
``put_along_axis`` return an updated copy (numpy writes into its argument and returns None;
traced arrays are immutable), eagerly as well, so code runs the same both ways. Index
functions of sizes (``tril_indices(n)``) return numpy arrays: their shapes are static.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import ops
from ..core import on_device
from ..errors import MissingRuleError
from ..tracing import Tracer, current_trace
from ._core import asarray_any, cast, normalize_axis, weak_result_type
from ._reductions import cumprod, cumsum

__all__ = ["r_", "c_", "row_stack", "rollaxis", "tril_indices", "triu_indices",
           "tril_indices_from", "triu_indices_from", "diag_indices", "diag_indices_from",
           "fill_diagonal", "put_along_axis", "unravel_index", "ravel_multi_index", "concat",
           "permute_dims", "matrix_transpose", "unstack", "astype", "cumulative_sum",
           "cumulative_prod", "vecmat"]


class _Concatenator:
    """``fnp.r_[...]`` / ``fnp.c_[...]``: numpy's index-expression concatenation. Traced items
    (arrays, scalars, and slices, which are concrete ranges) are concatenated with ops; the
    string directives (``'r'``, ``'0,2'``) work eagerly only.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.r_[np.array([1.0, 2.0]), 0.0, 3:5]
        array([1., 2., 0., 3., 4.])
        >>> fnp.c_[np.array([1, 2]), np.array([3, 4])]
        array([[1, 3],
               [2, 4]])
    """

    def __init__(self, np_obj, axis, ndmin, trans1d, name):
        self._np, self._axis, self._ndmin, self._trans1d, self._name = (
            np_obj, axis, ndmin, trans1d, name)

    def __getitem__(self, key):
        if current_trace() is None:
            if any(on_device(k) for k in (key if isinstance(key, tuple) else (key,))):
                from ._device import call_on_device  # GPU arrays: the traced route
                return call_on_device(self.__getitem__, (key,), {})
            return self._np[key]
        key = key if isinstance(key, tuple) else (key,)
        raw, items = [], []
        for item in key:
            if isinstance(item, str):
                raise MissingRuleError(f"fnp.{self._name}[...] with a string directive "
                                       f"({item!r}) is not traceable; use fnp.concatenate")
            if isinstance(item, slice):
                item = self._np[item]
            if type(item) in (int, float, complex, bool):
                raw.append(item)
                items.append(np.asarray(item))
            else:
                a = asarray_any(item)
                raw.append(a)
                items.append(a)
        dt = weak_result_type(*raw)
        parts = [self._ndmin_view(cast(a, dt)) for a in items]
        from ._joining import concatenate
        return concatenate(parts, axis=self._axis)

    def _ndmin_view(self, a):
        nd = a.ndim
        if nd >= self._ndmin:
            return a
        shape = (1,) * (self._ndmin - nd) + a.shape
        a = ops.reshape(a, shape) if isinstance(a, Tracer) else np.reshape(a, shape)
        if self._trans1d != -1:     # numpy: move the original axes to position trans1d
            k2, k1 = self._ndmin - nd, self._trans1d
            if k1 < 0:
                k1 += k2 + 1
            d = list(range(self._ndmin))
            perm = tuple(d[:k1] + d[k2:] + d[k1:k2])
            a = ops.transpose(a, perm) if isinstance(a, Tracer) else np.transpose(a, perm)
        return a

    def __len__(self):
        return 0


r_ = _Concatenator(np.r_, 0, 1, -1, "r_")
c_ = _Concatenator(np.c_, -1, 2, 0, "c_")


def row_stack(tup, *, dtype=None, casting="same_kind"):
    """numpy.row_stack, numpy's deprecated name of ``vstack`` (no warning here).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.row_stack([np.array([1.0, 2.0]), np.array([3.0, 4.0])]).shape
        (2, 2)
    """
    from ._joining import vstack
    if current_trace() is None:
        return np.vstack(tup, dtype=dtype, casting=casting)
    return vstack(tup, dtype=dtype, casting=casting)


def rollaxis(a, axis, start=0):
    """numpy.rollaxis.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.rollaxis(np.ones((2, 3, 4)), 2).shape
        (4, 2, 3)
    """
    if current_trace() is None:
        return np.rollaxis(a, axis, start)
    x = asarray_any(a)
    n = x.ndim
    axis = normalize_axis(axis, n)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise np.exceptions.AxisError(f"'start' arg requires {-n} <= start < {n + 1}, but "
                                      f"{start} was passed in")
    if axis < start:
        start -= 1
    if axis == start:
        return x
    axes = list(range(n))
    axes.remove(axis)
    axes.insert(start, axis)
    return ops.transpose(x, tuple(axes))


def tril_indices(n, k=0, m=None):
    """numpy.tril_indices (numpy arrays: the sizes are static, also when tracing).

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.tril_indices(2)
        (array([0, 1, 1]), array([0, 0, 1]))
    """
    return np.tril_indices(operator.index(n), k, None if m is None else operator.index(m))


def triu_indices(n, k=0, m=None):
    """numpy.triu_indices (numpy arrays: the sizes are static).

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.triu_indices(2)
        (array([0, 0, 1]), array([0, 1, 1]))
    """
    return np.triu_indices(operator.index(n), k, None if m is None else operator.index(m))


def tril_indices_from(arr, k=0):
    """numpy.tril_indices_from (only ``arr``'s shape is read).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.tril_indices_from(np.ones((2, 2)))
        (array([0, 1, 1]), array([0, 0, 1]))
    """
    if np.ndim(arr) != 2:
        raise ValueError("input array must be 2-d")
    return np.tril_indices(np.shape(arr)[-2], k=k, m=np.shape(arr)[-1])


def triu_indices_from(arr, k=0):
    """numpy.triu_indices_from (only ``arr``'s shape is read).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.triu_indices_from(np.ones((2, 2)))
        (array([0, 0, 1]), array([0, 1, 1]))
    """
    if np.ndim(arr) != 2:
        raise ValueError("input array must be 2-d")
    return np.triu_indices(np.shape(arr)[-2], k=k, m=np.shape(arr)[-1])


def diag_indices(n, ndim=2):
    """numpy.diag_indices (numpy arrays: the sizes are static).

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.diag_indices(2)
        (array([0, 1]), array([0, 1]))
    """
    return np.diag_indices(operator.index(n), operator.index(ndim))


def diag_indices_from(arr):
    """numpy.diag_indices_from (only ``arr``'s shape is read).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.diag_indices_from(np.ones((2, 2)))
        (array([0, 1]), array([0, 1]))
    """
    shape = np.shape(arr)
    if len(shape) < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return np.diag_indices(shape[0], len(shape))


def fill_diagonal(a, val, wrap=False):
    """numpy.fill_diagonal, functionally: returns a copy of ``a`` with its diagonal set (numpy
    writes into ``a`` and returns None; this does not modify ``a``, eagerly either).
    Differentiable in ``a`` (off the diagonal) and ``val``.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fill_diagonal(np.zeros((2, 2)), 5.0)
        array([[5., 0.],
               [0., 5.]])
    """
    if current_trace() is None:
        out = np.array(a, copy=True)
        np.fill_diagonal(out, val, wrap)
        return out
    from ._indexing import take
    x = asarray_any(a)
    if x.ndim < 2:
        raise ValueError("array must be at least 2-d")
    end = None
    if x.ndim == 2:
        step = x.shape[1] + 1
        if not wrap:
            end = x.shape[1] * x.shape[1]
    else:
        if len(set(x.shape)) != 1:
            raise ValueError("All dimensions of input must be of equal length")
        step = 1 + int(np.cumprod(x.shape[:-1]).sum())
    idx = np.arange(x.size)[:end:step]
    v = cast(asarray_any(val), x.dtype)
    v = ops.reshape(v, (v.size,)) if isinstance(v, Tracer) else np.ravel(v)
    if v.shape[0] == 0 or idx.size == 0:
        return x
    if v.shape[0] != idx.size:   # numpy's flat assignment repeats the values
        v = take(v, np.arange(idx.size) % v.shape[0])
    flat = ops.reshape(x, (x.size,)) if isinstance(x, Tracer) else np.ravel(x)
    return ops.reshape(ops.scatter(flat, v, [idx], (("arr", 0),), "set"), x.shape)


def put_along_axis(arr, indices, values, axis):
    """numpy.put_along_axis, functionally: returns an updated copy (numpy writes into ``arr``
    and returns None). Differentiable in ``arr`` (where not overwritten) and ``values``.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.put_along_axis(np.zeros((2, 2)), np.array([[1], [0]]), 7.0, axis=1)
        array([[0., 7.],
               [7., 0.]])
    """
    if current_trace() is None:
        out = np.array(arr, copy=True)
        np.put_along_axis(out, indices, values, axis)
        return out
    x = asarray_any(arr)
    idx = asarray_any(indices)
    if idx.dtype.kind not in "iu":
        raise IndexError("`indices` must be an integer array")
    shape = x.shape
    if axis is None:
        if idx.ndim != 1:
            raise ValueError(f"when axis=None, `indices` must have a single dimension, not "
                             f"{idx.ndim}")
        x, ax = ops.reshape(x, (x.size,)) if isinstance(x, Tracer) else np.ravel(x), 0
    else:
        ax = normalize_axis(axis, x.ndim)
        if idx.ndim != x.ndim:
            raise ValueError("`indices` and `arr` must have the same number of dimensions")
    n = np.asarray(x.shape[ax], idx.dtype)
    idx = ops.select(ops.lt(idx, np.zeros((), idx.dtype)), ops.add(idx, n), idx) \
        if isinstance(idx, Tracer) else np.where(idx < 0, idx + n, idx)
    arrays = []
    for d in range(x.ndim):
        if d == ax:
            arrays.append(idx)
        else:
            view = [1] * x.ndim
            view[d] = x.shape[d]
            arrays.append(np.arange(x.shape[d]).reshape(view))
    target = np.broadcast_shapes(*[np.shape(a) for a in arrays])
    v = cast(asarray_any(values), x.dtype)
    if v.shape != target:
        v = ops.broadcast_to_shape(v, target)
    spec = tuple(("arr", k) for k in range(x.ndim))
    out = ops.scatter(x, v, arrays, spec, "set")
    return ops.reshape(out, shape) if out.shape != shape else out


def unravel_index(indices, shape, order="C"):
    """numpy.unravel_index (integer results: no gradient; traced indices must be in range,
    which cannot be checked).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.unravel_index(np.array([5, 1]), (2, 3))
        (array([1, 0]), array([2, 1]))
    """
    if current_trace() is None:
        return np.unravel_index(indices, shape, order=order)
    idx = asarray_any(indices)
    if idx.dtype.kind not in "iub":
        raise TypeError("only int indices permitted")
    shape = (operator.index(shape),) if np.ndim(shape) == 0 else tuple(map(operator.index,
                                                                         shape))
    idx = cast(idx, np.intp)
    dims = list(enumerate(shape))
    if order == "F":
        dims = dims[::-1]
    elif order != "C":
        raise ValueError("only 'C' or 'F' order is permitted")
    out = [None] * len(shape)
    rest = idx
    for d, n in reversed(dims):
        nn = np.asarray(n, np.intp)
        out[d] = ops.rem(rest, nn) if n else rest
        rest = ops.floordiv(rest, nn) if n else rest
    return tuple(out)


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """numpy.ravel_multi_index (integer result, no gradient; ``mode`` "raise" (traced: not
    checked), "wrap" or "clip", one or one per dimension).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.ravel_multi_index((np.array([1, 0]), np.array([2, 1])), (2, 3))
        array([5, 1])
    """
    if current_trace() is None:
        return np.ravel_multi_index(multi_index, dims, mode=mode, order=order)
    dims = tuple(map(operator.index, (dims,) if np.ndim(dims) == 0 else dims))
    idxs = [cast(asarray_any(i), np.intp) for i in multi_index]
    if len(idxs) != len(dims):
        raise ValueError(f"parameter multi_index must be a sequence of length {len(dims)}")
    modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
    strides = [1] * len(dims)
    order_dims = range(len(dims) - 1, -1, -1) if order == "C" else range(len(dims))
    s = 1
    for d in order_dims:
        strides[d] = s
        s *= dims[d]
    from ._ufuncs import add, clip, multiply
    total = None
    for i, n, md, st in zip(idxs, dims, modes, strides, strict=True):
        if md == "wrap":
            i = ops.rem(i, np.asarray(n, np.intp)) if isinstance(i, Tracer) else np.mod(i, n)
        elif md == "clip":
            i = clip(i, 0, n - 1)
        elif md != "raise":
            raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap', got {md!r}")
        term = multiply(i, np.asarray(st, np.intp))
        total = term if total is None else add(total, term)
    return total


def concat(arrays, /, *, axis=0):
    """numpy.concat (numpy 2's name of ``concatenate``).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.concat([np.array([1.0]), np.array([2.0])])
        array([1., 2.])
    """
    if current_trace() is None:
        return np.concat(arrays, axis=axis)
    from ._joining import concatenate
    return concatenate(arrays, axis=axis)


def permute_dims(a, /, axes=None):
    """numpy.permute_dims (numpy 2's name of ``transpose``).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.permute_dims(np.ones((2, 3)), (1, 0)).shape
        (3, 2)
    """
    if current_trace() is None:
        return np.permute_dims(a, axes)
    from ._shape import transpose
    return transpose(a, axes)


def matrix_transpose(x, /):
    """numpy.matrix_transpose: swap the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.matrix_transpose(np.ones((4, 2, 3))).shape
        (4, 3, 2)
    """
    if current_trace() is None:
        return np.matrix_transpose(x)
    from ._shape import swapaxes
    x = asarray_any(x)
    if x.ndim < 2:
        raise ValueError(f"Input array must be at least 2-dimensional, but it is {x.ndim}")
    return swapaxes(x, -1, -2)


def unstack(x, /, *, axis=0):
    """numpy.unstack: the slices along ``axis``, as a tuple.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> [a.shape for a in fnp.unstack(np.ones((2, 3)))]
        [(3,), (3,)]
    """
    if current_trace() is None:
        return np.unstack(x, axis=axis)
    x = asarray_any(x)
    if x.ndim == 0:
        raise ValueError("Input array must be at least 1-d.")
    ax = normalize_axis(axis, x.ndim)
    rest = x.shape[:ax] + x.shape[ax + 1:]
    out = []
    for i in range(x.shape[ax]):
        lo = [0] * x.ndim
        hi = list(x.shape)
        lo[ax], hi[ax] = i, i + 1
        out.append(ops.reshape(ops.slice_op(x, lo, hi), rest))
    return tuple(out)


def astype(x, dtype, /, *, copy=True, device=None):
    """numpy.astype (numpy 2's function form of ``x.astype``).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.astype(np.array([1.5, 2.5]), np.int32)
        array([1, 2], dtype=int32)
    """
    if current_trace() is None:
        return np.astype(x, dtype, copy=copy, **({} if device is None else {"device": device}))
    return cast(asarray_any(x), dtype)


def _cumulative(name, npfn, scan, identity):
    def f(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        if current_trace() is None:
            return npfn(x, axis=axis, dtype=dtype, out=out, include_initial=include_initial)
        if out is not None:
            raise TypeError(f"{name}: out= is not supported on traced arrays")
        x = asarray_any(x)
        if axis is None:
            if x.ndim > 1:
                raise ValueError("For arrays which have more than one dimension ``axis`` "
                                 "argument is required.")
            axis = 0
        if x.ndim == 0:
            x = ops.reshape(x, (1,))
        ax = normalize_axis(axis, x.ndim)
        y = scan(x, axis=ax, dtype=dtype)
        if include_initial:
            cfg = [(0, 0, 0)] * y.ndim
            cfg[ax] = (1, 0, 0)
            y = ops.pad(y, np.asarray(identity, y.dtype), tuple(cfg))
        return y
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"numpy.{name} (numpy 2's ``{scan.__name__}`` with ``include_initial``).\n\n"
                 "Example:\n    >>> import functrace.numpy as fnp, numpy as np\n"
                 f"    >>> fnp.{name}(np.array([1.0, 2.0, 3.0]), include_initial=True)\n"
                 f"    array([{'0., 1., 3.' if identity == 0 else '1., 1., 2.'}, 6.])\n")
    return f


cumulative_sum = _cumulative("cumulative_sum", getattr(np, "cumulative_sum", None), cumsum, 0)
cumulative_prod = _cumulative("cumulative_prod", getattr(np, "cumulative_prod", None), cumprod,
                              1)


def vecmat(x1, x2, /):
    """numpy.vecmat: the vector-matrix product ``conj(x1) @ x2`` over the last axes, batched.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.vecmat(np.array([1.0, 2.0]), np.array([[1.0, 0.0], [0.0, 3.0]]))
        array([1., 6.])
    """
    if current_trace() is None:
        return np.vecmat(x1, x2)
    from ._products import matmul
    from ._ufuncs import conjugate
    a, b = asarray_any(x1), asarray_any(x2)
    if a.ndim < 1 or b.ndim < 2:
        raise ValueError("vecmat: x1 must be at least 1-d and x2 at least 2-d")
    a = conjugate(a)
    a = ops.reshape(a, (*a.shape[:-1], 1, a.shape[-1])) if isinstance(a, Tracer) else \
        a[..., None, :]
    y = matmul(a, b)
    return ops.reshape(y, (*y.shape[:-2], y.shape[-1]))
