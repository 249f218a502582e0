"""functrace.nn: the activation and normalisation functions ML code reaches for.

Each is written with functrace.numpy (so it traces and differentiates) and follows
docs/numerics.md at its kinks: relu has derivative 0 at 0.
"""

from __future__ import annotations

import numpy as np

try:                                   # numpy >= 2.0
    from numpy.lib.array_utils import normalize_axis_tuple
except ImportError:                    # numpy 1.26
    from numpy.core.numeric import normalize_axis_tuple

from . import numpy as fnp
from . import ops
from .tracing import current_trace

__all__ = ["relu", "sigmoid", "softplus", "log_softmax", "softmax", "logsumexp", "gelu",
           "one_hot"]


def relu(x):
    """max(x, 0) with derivative 0 at x = 0 (docs/numerics.md).

    Example:
        >>> import numpy as np, functrace as ft
        >>> ft.nn.relu(np.array([-1.0, 0.0, 2.0]))
        array([0., 0., 2.])
    """
    return fnp.where(fnp.greater(x, 0), x, fnp.zeros_like(x))


def sigmoid(x):
    """The logistic function 1 / (1 + exp(-x)), stable for large |x|.

    Example:
        >>> import functrace as ft
        >>> float(ft.nn.sigmoid(0.0))
        0.5
    """
    from . import ops
    from .numpy._core import asarray_any, cast
    from .tracing import current_trace
    a = asarray_any(x)
    a = cast(a, np.result_type(a.dtype, np.float16))
    if current_trace() is None:
        return ops.elementwise.logistic_p.impl(np.asarray(a))
    return ops.logistic(a)


def softplus(x):
    """log(1 + exp(x)), stable.

    Example:
        >>> import functrace as ft
        >>> round(float(ft.nn.softplus(0.0)), 6)
        0.693147
    """
    return fnp.logaddexp(x, 0.0)


def logsumexp(x, axis=None, keepdims=False):
    """Stable log(sum(exp(x))) (same as functrace.numpy.logsumexp).

    Example:
        >>> import numpy as np, functrace as ft
        >>> round(float(ft.nn.logsumexp(np.zeros(2))), 6)
        0.693147
    """
    return fnp.logsumexp(x, axis=axis, keepdims=keepdims)


def log_softmax(x, axis=-1):
    """x - logsumexp(x) along ``axis``.

    Example:
        >>> import numpy as np, functrace as ft
        >>> np.round(np.exp(ft.nn.log_softmax(np.zeros(2))), 6)
        array([0.5, 0.5])
    """
    return fnp.subtract(x, fnp.logsumexp(x, axis=axis, keepdims=True))


def softmax(x, axis=-1):
    """exp(x - logsumexp(x, axis)): one op (``ops.softmax``), whose kernel computes one exp
    per element. A row of all -inf gives NaN, as scipy and jax do.

    Example:
        >>> import numpy as np, functrace as ft
        >>> ft.nn.softmax(np.zeros(2))
        array([0.5, 0.5])
        >>> float(ft.grad(lambda x: ft.nn.softmax(x)[0])(np.zeros(2))[0])
        0.25
    """
    x = fnp.asarray(x)
    dt = np.result_type(x.dtype, np.float16)
    if x.dtype != dt:
        x = fnp.asarray(x, dtype=dt)
    axes = _axes(axis, x.ndim)
    if current_trace() is None:
        return ops.reduce.softmax_p.impl(np.asarray(x), axes=axes, masked_zero=False)
    return ops.softmax(x, axes)


def _axes(axis, ndim: int) -> tuple:
    """``axis`` (None: all; an int or a sequence, negative counting from the end) as sorted
    non-negative axes, with numpy's errors (AxisError, repeated axis)."""
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(normalize_axis_tuple(axis, ndim)))


def gelu(x, approximate=True):
    """GELU; the tanh approximation by default (as JAX).

    Example:
        >>> import functrace as ft
        >>> float(ft.nn.gelu(0.0))
        0.0
    """
    if not approximate:
        raise NotImplementedError("exact gelu needs erf (coming with the scipy extra)")
    c = np.sqrt(2.0 / np.pi)
    return 0.5 * x * (1.0 + fnp.tanh(c * (x + 0.044715 * x ** 3)))


def one_hot(labels, num_classes, dtype=np.float64):
    """One-hot encoding of integer labels (not differentiable).

    Example:
        >>> import numpy as np, functrace as ft
        >>> ft.nn.one_hot(np.array([1]), 3)
        array([[0., 1., 0.]])
    """
    labels = np.asarray(labels)
    return (labels[..., None] == np.arange(num_classes)).astype(dtype)
