"""functrace.numpy.linalg: numpy.linalg, traceable and differentiable.

(Placeholder: being filled in; norm only.)
"""

from __future__ import annotations

import numpy as np

from .. import ops
from ..tracing import _current
from ._core import asarray_any, cast, normalize_axes

__all__ = ["norm"]


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002
    """numpy.linalg.norm (2-norm / Frobenius with a zero gradient at the zero vector).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.norm(np.array([3.0, 4.0])))
        5.0
    """
    if _current.get() is None:
        return np.linalg.norm(x, ord, axis, keepdims)
    a = asarray_any(x)
    a = cast(a, np.result_type(a.dtype, np.float64) if a.dtype.kind in "biu" else a.dtype)
    if ord not in (None, 2, "fro") or (ord == 2 and (axis is None and a.ndim == 2)):
        raise NotImplementedError(f"norm(ord={ord!r}) is not traceable yet")
    axes = normalize_axes(axis, a.ndim)
    y = ops.l2norm(a, axes)
    if keepdims:
        y = ops.reshape(y, tuple(1 if i in axes else n for i, n in enumerate(a.shape)))
    return y
