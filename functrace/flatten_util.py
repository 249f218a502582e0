"""functrace.flatten_util: a pytree as one flat vector and back (``jax.flatten_util``).

``ravel_pytree`` is what optimizers and samplers that want a single parameter vector use
(scipy.optimize, Hessian-vector products, autograd's ``misc.flatten.flatten``). It is written
with functrace.numpy, so both directions trace and differentiate. It sits above
``functrace.numpy`` and ``tree_util`` and must not be imported by anything below them.
"""

from __future__ import annotations

import numpy as np

from . import numpy as fnp
from .errors import FunctraceTypeError, FunctraceValueError
from .tree_util import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


def _dtype(x) -> np.dtype:
    """x's dtype without converting it (a tracer has one; a Python number gets numpy's)."""
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.result_type(x)


def ravel_pytree(pytree):
    """Ravel a pytree of arrays into one 1-D array, and return the function that undoes it.

    As ``jax.flatten_util.ravel_pytree``: the leaves are raveled in ``tree_flatten`` order
    (dict keys sorted) and concatenated; the flat vector has the leaves' promoted dtype (an
    empty tree gives a float64 vector of length 0), and ``unravel`` restores each leaf's
    shape and dtype. Both directions are functrace.numpy code, so gradients flow through them
    (``unravel`` of a traced vector gives traced leaves). This is also autograd's
    ``autograd.misc.flatten.flatten``, which returns the same pair.

    Args:
        pytree: a pytree (tuple, list, dict, None, namedtuple, registered class) of arrays or
            scalars.

    Returns:
        ``(flat, unravel)``: ``flat`` a 1-D array, ``unravel(v)`` a pytree like ``pytree``.

    Example:
        >>> import numpy as np
        >>> from functrace.flatten_util import ravel_pytree
        >>> flat, unravel = ravel_pytree({"b": np.zeros(2), "w": np.ones((2, 2))})
        >>> flat
        array([0., 0., 1., 1., 1., 1.])
        >>> unravel(flat + 1)["w"]
        array([[2., 2.],
               [2., 2.]])
    """
    leaves, treedef = tree_flatten(pytree)
    shapes = [tuple(np.shape(x)) for x in leaves]
    dtypes = [_dtype(x) for x in leaves]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    flat_dtype = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
    if leaves:
        flat = fnp.concatenate([fnp.ravel(fnp.asarray(x)).astype(flat_dtype) for x in leaves])
    else:
        flat = np.zeros(0, flat_dtype)
    total = sum(sizes)

    def unravel(v):
        if np.ndim(v) != 1 or np.shape(v)[0] != total:
            raise FunctraceValueError(f"ravel_pytree's unravel: expected a vector of length "
                                      f"{total}, got shape {tuple(np.shape(v))}")
        if _dtype(v) != flat_dtype:
            raise FunctraceTypeError(f"ravel_pytree's unravel: expected dtype {flat_dtype}, "
                                     f"got {np.result_type(v)}")
        parts, start = [], 0
        for shape, dtype, size in zip(shapes, dtypes, sizes):
            part = fnp.reshape(v[start:start + size], shape)
            parts.append(part if dtype == flat_dtype else part.astype(dtype))
            start += size
        return tree_unflatten(treedef, parts)

    return flat, unravel
