"""``functrace.numpy.linalg``'s norms (``norm``, ``vector_norm``, ``matrix_norm``: every order
numpy supports) and the array-API names numpy.linalg re-exports (``matmul``, ``outer``,
``tensordot``, ``vecdot``, ``cross``, ``trace``, ``diagonal``, ``matrix_transpose``).

The 2-norm and the Frobenius norm use the ``l2norm`` op (zero gradient at the zero vector,
docs/numerics.md); the spectral and nuclear norms use the ``svd`` op directly. Imports ``ops``,
``numpy._core`` and ``_linalg_common``; ``_linalg_solvers`` imports it (``cond``), never the
other way round.
"""

from __future__ import annotations

import numpy as np

from .. import ops
from ..ops import linalg as _lops
from ._core import asarray_any, cast, normalize_axis
from ._linalg_common import keepdims_reshape, traced

__all__ = ["norm", "vector_norm", "matrix_norm", "trace", "diagonal", "outer", "matmul",
           "tensordot", "vecdot", "cross", "matrix_transpose"]

# --------------------------------------------------------------------------------------------
# norms
# --------------------------------------------------------------------------------------------


def _is(ord_, value):
    return not isinstance(ord_, str) and ord_ is not None and ord_ == value


def _vector_norm_traced(x, ord, ax, keepdims):
    shape = x.shape
    rdt = np.empty(0, x.dtype).real.dtype
    if _is(ord, np.inf):
        if shape[ax] == 0:
            y = ops.broadcast_in_dim(np.zeros((), rdt), tuple(n for i, n in enumerate(shape)
                                                              if i != ax), ())
        else:
            y = ops.reduce_max(ops.abs(x), (ax,))
    elif _is(ord, -np.inf):
        if shape[ax] == 0:
            raise ValueError("zero-size array to reduction operation minimum which has no "
                             "identity")
        y = ops.reduce_min(ops.abs(x), (ax,))
    elif _is(ord, 0):
        nz = ops.convert_element_type(ops.ne(x, np.zeros((), x.dtype)), rdt)
        y = ops.reduce_sum(nz, (ax,))
    elif _is(ord, 1):
        y = ops.reduce_sum(ops.abs(x), (ax,))
    elif ord is None or _is(ord, 2):
        y = ops.l2norm(x, (ax,))
    elif isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    else:
        p = np.asarray(ord, rdt)
        s = ops.reduce_sum(ops.pow(ops.abs(x), p), (ax,))
        # s ** (1/p), with s == 0 giving 0 and a zero (not NaN) derivative
        zero = ops.eq(s, np.zeros((), rdt))
        safe = ops.select(zero, np.ones((), rdt), s)
        y = ops.select(zero, np.zeros((), rdt),
                       ops.pow(safe, np.reciprocal(p)))
    return keepdims_reshape(y, shape, (ax,)) if keepdims else y


def _svd_values_last2(x, row, col):
    nd = x.ndim
    rest = tuple(i for i in range(nd) if i not in (row, col))
    y = ops.transpose(x, (*rest, row, col))
    return ops.svd(y, False)[0]


def _matrix_norm_traced(x, ord, row, col, keepdims):
    nd = x.ndim
    row = normalize_axis(row, nd)
    col = normalize_axis(col, nd)
    if row == col:
        raise ValueError("Duplicate axes given.")
    shape = x.shape
    if _is(ord, 2) or _is(ord, -2) or ord == "nuc":
        s = _svd_values_last2(x, row, col)
        last = s.ndim - 1
        if ord == "nuc":
            y = ops.reduce_sum(s, (last,))
        elif _is(ord, 2):
            y = ops.reduce_max(s, (last,))
        else:
            y = ops.reduce_min(s, (last,))
    elif _is(ord, 1) or _is(ord, -1):
        c = col - 1 if col > row else col
        red = ops.reduce_max if _is(ord, 1) else ops.reduce_min
        y = red(ops.reduce_sum(ops.abs(x), (row,)), (c,))
    elif _is(ord, np.inf) or _is(ord, -np.inf):
        r = row - 1 if row > col else row
        red = ops.reduce_max if _is(ord, np.inf) else ops.reduce_min
        y = red(ops.reduce_sum(ops.abs(x), (col,)), (r,))
    elif ord is None or ord in ("fro", "f"):
        y = ops.l2norm(x, (row, col))
    else:
        raise ValueError("Invalid norm order for matrices.")
    return keepdims_reshape(y, shape, (row, col)) if keepdims else y


def norm(x, ord=None, axis=None, keepdims=False):
    """numpy.linalg.norm: every vector and matrix order numpy supports.

    Vector orders (one axis): None/2 (Euclidean), inf, -inf, 0 (count of non-zeros, zero
    gradient), 1, -1, other real ``p`` (``sum(|x|**p)**(1/p)``). Matrix orders (two axes, or a
    2-d input with ``axis=None``): None/'fro' (Frobenius), 'nuc' (sum of singular values), 2 /
    -2 (largest / smallest singular value), 1 / -1 (max / min column sum), inf / -inf (max / min
    row sum). The 2-norm and Frobenius norm use the ``l2norm`` op, whose gradient at the zero
    vector is 0 (docs/numerics.md); max/min orders split the gradient evenly between ties.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.norm(np.array([3.0, 4.0])))
        5.0
        >>> float(fnp.linalg.norm(np.array([[1.0, -2.0], [3.0, 4.0]]), ord=1))
        6.0
    """
    if not traced():
        return np.linalg.norm(x, ord, axis, keepdims)
    x = asarray_any(x)
    if x.dtype.kind not in "fc":
        x = cast(x, np.float64)
    nd = x.ndim
    if axis is None:
        if ord is None or (ord in ("f", "fro") and nd == 2) or (_is(ord, 2) and nd == 1):
            y = ops.l2norm(x, tuple(range(nd)))
            return ops.reshape(y, (1,) * nd) if keepdims else y
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        try:
            axis = int(axis)
        except Exception as e:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from e
        axis = (axis,)
    if len(axis) == 1:
        return _vector_norm_traced(x, ord, normalize_axis(axis[0], nd), keepdims)
    if len(axis) == 2:
        return _matrix_norm_traced(x, ord, axis[0], axis[1], keepdims)
    raise ValueError("Improper number of dimensions to norm.")


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """numpy.linalg.vector_norm: a vector norm over one axis, several axes, or all of them.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.vector_norm(np.ones((2, 2))))
        2.0
    """
    if not traced():
        return np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    x = asarray_any(x)
    if x.dtype.kind not in "fc":
        x = cast(x, np.float64)
    shape = x.shape
    nd = x.ndim
    if axis is None:
        y = norm(ops.reshape(x, (x.size,)), ord=ord, axis=0)
        axes = tuple(range(nd))
    elif isinstance(axis, tuple):
        axes = tuple(normalize_axis(a, nd) for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError("repeated axis")
        rest = tuple(i for i in range(nd) if i not in axes)
        xt = ops.transpose(x, axes + rest)
        size = int(np.prod([shape[i] for i in axes], dtype=np.int64))
        y = norm(ops.reshape(xt, (size, *tuple(shape[i] for i in rest))), ord=ord, axis=0)
    else:
        axes = (normalize_axis(axis, nd),)
        y = norm(x, ord=ord, axis=axes[0])
    if keepdims:
        y = keepdims_reshape(y, shape, axes)
    return y


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """numpy.linalg.matrix_norm: a matrix norm over the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.matrix_norm(np.eye(2), ord="nuc"))
        2.0
    """
    if not traced():
        return np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    return norm(x, axis=(-2, -1), keepdims=keepdims, ord=ord)


# --------------------------------------------------------------------------------------------
# the array-API names numpy.linalg re-exports
# --------------------------------------------------------------------------------------------


def trace(x, /, *, offset=0, dtype=None):
    """numpy.linalg.trace: the trace over the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.trace(np.eye(3)))
        3.0
    """
    if not traced():
        return np.linalg.trace(x, offset=offset, dtype=dtype)
    from ._shape import trace as ftrace
    return ftrace(x, offset, -2, -1, dtype)


def diagonal(x, /, *, offset=0):
    """numpy.linalg.diagonal: the diagonals of the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.diagonal(np.eye(2))
        array([1., 1.])
    """
    if not traced():
        return np.linalg.diagonal(x, offset=offset)
    from ._shape import diagonal as fdiagonal
    return fdiagonal(x, offset, -2, -1)


def outer(x1, x2, /):
    """numpy.linalg.outer (1-d operands only).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.outer(np.array([1.0, 2.0]), np.array([1.0, 0.0]))
        array([[1., 0.],
               [2., 0.]])
    """
    if not traced():
        return np.linalg.outer(x1, x2)
    a, b = asarray_any(x1), asarray_any(x2)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError("Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={a.ndim} and x2.ndim={b.ndim}.")
    from ._products import outer as fouter
    return fouter(a, b)


def matmul(x1, x2, /):
    """numpy.linalg.matmul.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.matmul(np.eye(2), np.array([1.0, 2.0]))
        array([1., 2.])
    """
    if not traced():
        return np.linalg.matmul(x1, x2)
    from ._products import matmul as fmatmul
    return fmatmul(x1, x2)


def tensordot(x1, x2, /, *, axes=2):
    """numpy.linalg.tensordot.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.tensordot(np.eye(2), np.eye(2)))
        2.0
    """
    if not traced():
        return np.linalg.tensordot(x1, x2, axes=axes)
    from ._products import tensordot as ftensordot
    return ftensordot(x1, x2, axes)


def vecdot(x1, x2, /, *, axis=-1):
    """numpy.linalg.vecdot.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.vecdot(np.ones((2, 3)), np.ones(3))
        array([3., 3.])
    """
    if not traced():
        return np.linalg.vecdot(x1, x2, axis=axis)
    from ._products import vecdot as fvecdot
    return fvecdot(x1, x2, axis=axis)


def cross(x1, x2, /, *, axis=-1):
    """numpy.linalg.cross (3-vectors).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.cross(np.array([1.0, 0, 0]), np.array([0.0, 1, 0]))
        array([0., 0., 1.])
    """
    if not traced():
        return np.linalg.cross(x1, x2, axis=axis)
    a, b = asarray_any(x1), asarray_any(x2)
    if a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but they "
                         f"are {a.shape[axis]} and {b.shape[axis]} dimensional instead.")
    from ._products import cross as fcross
    return fcross(a, b, axis=axis)


def matrix_transpose(x, /):
    """numpy.linalg.matrix_transpose: swap the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.matrix_transpose(np.zeros((2, 3))).shape
        (3, 2)
    """
    if not traced():
        return np.linalg.matrix_transpose(x)
    x = asarray_any(x)
    if x.ndim < 2:
        raise ValueError("Input array must be at least 2-dimensional")
    return _lops.matrix_transpose(x)
